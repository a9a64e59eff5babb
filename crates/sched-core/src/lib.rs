//! The scheduler engine: worker threads running step-driven processes.
//!
//! A [`Process`] is a state machine. The engine calls its
//! [`step`](Process::step) with the [`Event`]s that arrived since the last
//! step (completions of yielded commands, messages, cancel), and the process
//! writes into the reused [`Output`] buffer what it wants next: continue,
//! yield commands to their handlers, wait for messages, or finish.
//!
//! Inside, each worker thread owns a `next` slot (the process its last step
//! woke or spawned, run right after that step on the same core), one
//! first-in-first-out work-stealing queue per [`Priority`] level, and
//! beside each a nursery for what its steps woke that did not fit the
//! slot (newest first; moved to the queue within 255 steps). It looks for
//! work in this order: its `next` slot, then its nursery (together at
//! most 3 steps after each pick, and not past higher-level work), its
//! queues by weight (`High` 12, `Normal` 3, `Low` 1, times a group's
//! weight: each pick takes the lane with the least step time charged for
//! its weight; a lane whose queue is empty is served from its nursery),
//! the global queues (outside wakeups before new
//! processes; one plus a batch of up to 16), then half (at most 32) of
//! another worker's highest non-empty level (trying each worker once,
//! from a random one), and last a process that has waited 200 µs in
//! another worker's `next` slot. Every 61 ticks it looks at the global
//! queues first. A ready process is stepped within a documented bound of
//! the work ahead of it (`runqueue/order.rs`), which the simulation checks
//! at every step; between steps the worker fires its due timers. Idle workers
//! spin, then yield, then park; new work wakes one parked worker. Each process's state and wakeup flag live in one atomic
//! word; `src/record/PROTOCOL.md` states the invariants and why no event
//! and no wakeup is lost.
//!
//! This crate is the engine without API sugar; the `sched` crate is the
//! facade users depend on.
//!
//! # Examples
//!
//! A process that yields a command and finishes with its result:
//!
//! ```
//! use sched::command::Rejected;
//! use sched::engine::Engine;
//! use sched::prelude::*;
//! use std::time::Duration;
//!
//! const DOUBLE: CommandId = CommandId(1);
//!
//! struct Doubler { asked: bool }
//!
//! impl Process for Doubler {
//!     type Done = u64;
//!     fn init(&mut self, _: &InitContext, method: &str, _: Payload) -> Result<(), InitError> {
//!         if method == "run" { Ok(()) } else { Err(InitError::unknown_method(method)) }
//!     }
//!     fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
//!         if !self.asked {
//!             self.asked = true;
//!             out.yield_command(DOUBLE, Tag(1), Box::new(21u64));
//!             return Ok(());
//!         }
//!         for event in events {
//!             if let Event::Completion { tag: Tag(1), result } = event {
//!                 out.finish(result?); // the handler's `u64`, not boxed again
//!             }
//!         }
//!         Ok(())
//!     }
//!     fn close(&mut self) {}
//! }
//!
//! let engine = Engine::builder()
//!     .workers(2)
//!     .handler(DOUBLE, |cmd: Command, c: Completer| -> Result<(), Rejected> {
//!         let n = *cmd.data::<u64>().unwrap();
//!         // Complete later, from another thread.
//!         std::thread::spawn(move || { let _ = c.complete(Box::new(n * 2)); });
//!         Ok(())
//!     })
//!     .build();
//! engine.start();
//! let done = engine
//!     .context()
//!     .spawn(Spawn::new(Doubler { asked: false }).method("run"))
//!     .unwrap();
//! let value: u64 = done.wait().unwrap();
//! assert_eq!(value, 42);
//! engine.shutdown(Duration::from_secs(1));
//! ```

mod contract;
mod engine;
#[cfg(all(test, loom))]
mod loom_models;
mod panic_guard;
mod record;
mod runqueue;
mod runtime;
mod sync;
mod table;
mod timer;
mod worker;

pub use contract::accepts::Accepts;
pub use contract::command::{Command, CommandId, Tag};
pub use contract::down::{Down, ExitReason, MonitorId, NameError};
pub use contract::error::{
    BoxError, InitError, SubmitError, TerminateError, TimedOut, UnexpectedValue, UpgradeError,
    UpgradeRequestError,
};
pub use contract::event::{CommandError, Event};
pub use contract::group::{Group, GroupInfo};
pub use contract::outcome::{ExitError, Outcome};
pub use contract::output::{Events, Output, Typed};
pub use contract::priority::Priority;
pub use contract::process::{AnyProcess, InitContext, Process, DEFAULT_METHOD};
pub use contract::reply::{AskError, AskId, Question, ReplyTo, Request, Responder};
pub use contract::timer_id::TimerId;
pub use contract::typed_command::{CommandRef, TypedCommand, Yielded};
pub use contract::urgent::Urgent;
pub use engine::commands::abandoned::Abandoned;
pub use engine::commands::completer::{CompleteError, Completer, Rejected};
pub use engine::resolved::Resolved;
pub use engine::stats::{Stats, WorkerStats};
pub use engine::{
    After, AsContext, AskTarget, Context, Deadline, Histogram, Histograms, IntoSpawn, Monitor,
    PidStatus, ProcessInfo, Replied, Reply, ReplyId, ShutdownReport, Spawn, Target, Within,
};
pub use record::alloc::{use_global_allocator, AllocatorChosen};
pub use record::completion::Completion;
pub use record::state::ProcessState;
/// Deterministic simulation: the engine run on one thread, its workers'
/// order, its clock and its faults decided by a seed, every step
/// recorded; a failing seed replays exactly and shrinks.
pub use runtime::simulation as sim;
pub use runtime::{Builder, Engine};
