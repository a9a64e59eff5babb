//! Durable processes for `sched`: a step-driven process whose inputs are
//! journaled before its effects are released, so that it survives the end
//! of its node and resumes where it was.
//!
//! A durable process is a [`Durable`] state machine, written as a plain
//! `sched::Process` is: [`start`](Durable::start) begins its work, and
//! each [`step`](Durable::step) is handed its [`Events`] (one input at a
//! time: a message, a timer, a command's answer) and asks for effects
//! through its [`Output`] (send to another durable process, set or cancel
//! a timer, yield a command, finish). Each
//! batch of inputs is written to the journal with the effects it caused,
//! and the effects are released only once that record is durable
//! (write-ahead): nothing a step did is visible unless the inputs that
//! produced it survive a crash. Records from every worker are written in
//! batches, one sync per batch (group commit).
//!
//! After a restart, [`Durability::recover`] rebuilds every process that
//! had not ended by replaying its journal through `step`, with the effects
//! suppressed, then resumes it: sends the receiver had not journaled are
//! handed over again from the store's outbox (each (sender, receiver) pair
//! is a reliable ordered channel: the receiver takes each send exactly
//! once, in its sender's order), timers fall due at their absolute
//! deadlines, and commands that
//! were in flight come back as [`Failure::Interrupted`]. A replay whose
//! effects differ from the journal's is reported as
//! [`DurableError::NonDeterminism`].
//!
//! Non-durable processes of the same scheduler pay nothing: the journal is
//! a command handler and a thread of its own.
//!
//! # Examples
//!
//! ```
//! use sched_durable::prelude::*;
//! use std::time::Duration;
//!
//! /// Waits for a payment, or gives up after a day.
//! struct Order { paid: bool }
//!
//! impl Durable for Order {
//!     const KIND: &'static str = "order";
//!     type Args = ();
//!     type Message = u64; // cents paid
//!     type Done = bool;
//!
//!     fn create(_: ()) -> Self { Order { paid: false } }
//!
//!     fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
//!         out.set_timer(Duration::from_secs(86_400), Tag(1));
//!         Ok(())
//!     }
//!
//!     fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
//!         for event in events.typed::<Self>() {
//!             match event {
//!                 Event::Message(cents) => {
//!                     self.paid = cents > 0;
//!                     out.cancel_timer(TimerId::of(Tag(1)));
//!                     out.finish(self.paid);
//!                 }
//!                 Event::Timer { .. } => out.finish(false),
//!                 _ => {}
//!             }
//!         }
//!         Ok(())
//!     }
//! }
//!
//! let dir = tempfile::tempdir()?;
//! let durability = Durability::open(RedbStore::create(dir.path().join("orders.redb"))?);
//! durability.register::<Order>();
//! let scheduler = durability.install(Scheduler::builder().workers(2)).build();
//! scheduler.start();
//! durability.recover(&scheduler)?; // nothing to resume the first time
//!
//! let order = durability.spawn::<Order>(&scheduler, "order-1", ())?;
//! durability.send::<Order>(&scheduler, "order-1", &1_999)?;
//! assert!(order.wait()?);
//! scheduler.shutdown(Duration::from_secs(1));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod channel;
mod clock;
mod commit;
mod durability;
mod error;
mod event;
mod inspect;
#[cfg(feature = "live")]
pub mod live;
#[cfg(feature = "metrics")]
pub mod metrics;
mod process;
mod receipt;
mod record;
mod recovery;
mod runner;
mod stand_in;
mod state;
mod status;
pub mod store;

pub use commit::{MAX_BATCH_BYTES, MAX_BATCH_RECORDS};
pub use durability::{AnyKind, Durability, DurableStats, Recovery, Spawned, JOURNAL_COMMAND};
pub use error::DurableError;
pub use event::{Answer, Body, Event, Events, Failure, TimerId, Typed};
pub use inspect::{Inspection, Replay};
pub use process::{Durable, Key, Output};
pub use receipt::Receipt;
pub use record::{Record, RecordedEffect, RecordedFailure, RecordedInput};
pub use stand_in::StandIn;
pub use status::Status;

/// What a program with durable processes needs, with `sched`'s prelude.
///
/// # Examples
///
/// ```
/// use sched_durable::prelude::*;
///
/// fn open(path: &std::path::Path) -> Result<Durability, DurableError> {
///     Ok(Durability::open(RedbStore::create(path)?))
/// }
/// ```
pub mod prelude {
    pub use crate::store::RedbStore;
    pub use crate::{
        Answer, Durability, Durable, DurableError, Event, Events, Failure, Key, Output, Receipt,
        TimerId,
    };
    pub use sched::prelude::*;
}

#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

#[cfg(doctest)]
#[doc = include_str!("../../../docs/guide/durable.md")]
struct GuideDoctests;
