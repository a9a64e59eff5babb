//! The engine's shared state: what every worker, handle and completer
//! shares, and its operations. The [`Engine`](crate::Engine) handle that
//! builds and starts it is in `runtime/`.
//!
//! One file per concern: `shared` (the state
//! every worker and handle shares, and scheduling), `admission` (submit and
//! the live-process count), `routing` (send, kill, dead letters), `remote` (packages from other
//! nodes),
//! `shutdown`, `introspect` (stats and the process list), `figures` (its
//! engine-wide clock and type names), `hooks` and
//! `stats` (the counters behind introspection).
//!
//! Each feature owns its state, and its operations are methods of that
//! state's type, written in the feature's file; `Shared` only composes
//! them (a field per feature). A feature's method reads its own fields
//! through `self` and takes the engine (`&Shared`), or the one piece it
//! needs, only for what other features do. The owners: timers, the
//! wheels ([`Timers`](crate::timer::registry::Timers), `timers.rs`);
//! names, the name table (`names::table::Names`, `names/mod.rs`); remote,
//! the table of relations with other nodes (`remote::table::Across`,
//! `remote/`); admission, the live count (`live::Live`, `admission.rs`);
//! shutdown, the threads and the lifecycle (`control::Control`,
//! `shutdown.rs`); registration, the process table (`Registry<Record>`,
//! `registration.rs`). Monitors, links and asks keep their lists in the
//! records: their types (`in_records.rs`) hold no state and are the homes
//! of their operations on records. Only `shared.rs` (scheduling, waking,
//! and the entry points that dispatch to the features, such as `retire`)
//! and `routing.rs` (delivery, which every feature calls) write methods of
//! `Shared`.

mod admission;
pub(crate) mod ask;
pub(crate) mod clock;
pub(crate) mod commands;
pub(crate) mod context;
pub(crate) mod control;
pub(crate) mod figures;
mod forward;
mod groups;
pub(crate) mod histogram;
pub(crate) mod hooks;
pub(crate) mod ids;
pub(crate) mod in_records;
pub(crate) mod intercept;
pub(crate) mod introspect;
mod links;
pub(crate) mod live;
pub(crate) mod long_steps;
pub(crate) mod monitors;
pub(crate) mod names;
mod registration;
pub(crate) mod remote;
pub(crate) mod resolved;
pub(crate) mod routing;
pub(crate) mod shared;
pub(crate) mod shutdown;
pub(crate) mod spawn;
pub(crate) mod stats;
pub(crate) mod stepping;
pub(crate) mod timers;
pub(crate) mod upgrade;

pub use ask::{AskTarget, Replied, Reply, ReplyId};
pub use context::{AsContext, Context};
pub use control::ShutdownReport;
pub use histogram::{Histogram, Histograms};
pub use introspect::{PidStatus, ProcessInfo};
pub use monitors::Monitor;
pub use names::Within;
pub use routing::Target;
pub use spawn::{IntoSpawn, Spawn};
pub use timers::{After, Deadline};
