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

mod admission;
pub(crate) mod ask;
pub(crate) mod clock;
pub(crate) mod commands;
pub(crate) mod context;
pub(crate) mod control;
pub(crate) mod figures;
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
pub(crate) mod routing;
pub(crate) mod shared;
pub(crate) mod shutdown;
pub(crate) mod spawn;
pub(crate) mod stats;
pub(crate) mod stepping;
pub(crate) mod timers;
pub(crate) mod upgrade;

pub use ask::{AskTarget, Reply, ReplyId};
pub use context::{AsContext, Context};
pub use control::ShutdownReport;
pub use histogram::{Histogram, Histograms};
pub use introspect::{PidStatus, ProcessInfo};
pub use monitors::Monitor;
pub use names::Within;
pub use routing::Target;
pub use spawn::{IntoSpawn, Spawn};
pub use timers::{After, Deadline};
