//! Loom models of the engine's protocol: the state word with its wakeup
//! flag, the per-process event queue, and parking.
//!
//! Run with `cargo xtask loom sched-core`. The models drive the real
//! [`Record`] (its [`StateWord`] and its `mpsc` event queue) and the real
//! [`Sleepers`]; the worker side is a [`Harness`] that does what
//! `worker/mod.rs` does around a step (`start_step`, drain, `finish_step`,
//! requeue or end) against a loom `Mutex<VecDeque>` run queue instead of
//! the work-stealing deques, which keeps every model small enough to
//! explore exhaustively with two preemptions.
//!
//! Every model ends by running whatever is still queued on the main thread
//! (after joining the others) and then checks:
//! - every event pushed was seen by exactly one step, or came back as a
//!   dead letter when the process ended, or was refused by a closed queue;
//! - nothing is left pending in the queue of a process that is parked
//!   (no stranded event);
//! - the process was never in the run queue twice, never stepped by two
//!   threads at once, and ended at most (or exactly) once.
//!
//! `harness.rs` holds the harness; `events.rs` the models of the state word
//! and the event queue; `parking.rs` those of parking, timers and monitors;
//! `timers.rs` that of a wheel's earliest deadline under two inserters;
//! `links.rs` those of the link protocol; `upgrade.rs` that of the flag
//! an upgrade ordered from outside travels with; `mailbox.rs` that of the
//! message count beside those flags; `urgent.rs` that of the sticky bit
//! urgent messages set.

mod events;
mod harness;
mod links;
mod mailbox;
pub(crate) use harness::Inert;
mod parking;
mod timers;
mod upgrade;
mod urgent;
