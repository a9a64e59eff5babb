//! Configuring a [`Scheduler`]: workers, limits, handlers, hooks.

use crate::scheduler::Scheduler;

/// Configures a [`Scheduler`]: the engine's [`Builder`](sched_core::Builder),
/// building a `Scheduler` (each setting is documented there, once).
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use sched::command::CommandId;
///
/// let scheduler = Scheduler::builder()
///     .workers(2)
///     .max_processes(100_000)
///     .mailbox_capacity(1_024)
///     .thread_name("app-worker")
///     .handler(CommandId(1), |cmd: sched::command::Command, done: sched::command::Completer| -> Result<(), sched::command::Rejected> {
///         let _ = done.complete(cmd.data);
///         Ok(())
///     })
///     .on_complete(|_cx, pid, outcome| {
///         if let Err(e) = outcome {
///             eprintln!("{pid} failed: {e}");
///         }
///     })
///     .build();
/// assert_eq!(scheduler.workers(), 2);
/// ```
pub type SchedulerBuilder = sched_core::Builder<Scheduler>;
