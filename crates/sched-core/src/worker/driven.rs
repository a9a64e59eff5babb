//! A worker without a thread: a simulation owns one per simulated worker
//! and runs them, one round of the worker loop at a time, on its own
//! thread, in the order its seed decides.
//!
//! A round is the real loop's (`Worker::next_work`, then `run_process`):
//! the same queues, the same order of looking at them, the same fairness
//! counters, the same stealing (from a victim the worker's own random
//! source picks, seeded by the simulation). What a driven worker does not
//! do is spin, yield its thread or park: when it finds nothing, the round
//! ends, and the simulation picks another worker or moves its clock.
//!
//! The observer (`StepObserver`) is how the simulation sees each step (for
//! its trace) and injects faults into it: a crash instead of the step, a
//! failed or panicking handler instead of the real one.

use crate::contract::command::{CommandId, Tag};
use crate::contract::down::ExitReason;
use crate::contract::event::Event;
use crate::engine::commands::handler::Handlers;
use crate::engine::shared::Shared;
use crate::runqueue::local::{self, Local};
use crate::sync::Arc;

use super::{Found, Worker};

/// The panic message of a step a simulation crashed.
pub(crate) const CRASH_MESSAGE: &str = "simulated crash";
/// The error (or panic message) of a handler a simulation failed.
pub(crate) const FAULT_MESSAGE: &str = "simulated handler fault";

/// How a step ended, as a simulation's trace records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StepEnd {
    /// It asked to run again.
    Continue,
    /// It waits for messages.
    Idle,
    /// It yielded this many commands and waits for their completions.
    Yielded(usize),
    /// It finished with a result.
    Done,
    /// It asked to be replaced.
    Upgrade,
    /// It returned an error or panicked (or the simulation crashed it).
    Failed,
}

/// What a simulation does to a yielded command instead of handing it to
/// its handler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CommandFault {
    /// Nothing: the handler runs.
    None,
    /// The command fails ([`CommandError::Failed`](crate::CommandError::Failed)).
    Fail,
    /// The handler panics
    /// ([`CommandError::HandlerPanicked`](crate::CommandError::HandlerPanicked)).
    Panic,
}

/// A simulation's view of the steps a driven worker runs.
pub(crate) trait StepObserver {
    /// A step of `pid` is about to run on `worker` with `events`. `true`
    /// crashes it: it panics instead of running.
    fn before_step(
        &mut self,
        worker: usize,
        pid: relay::Pid,
        events: &mut dyn Iterator<Item = &Event>,
    ) -> bool;
    /// How that step ended.
    fn after_step(&mut self, pid: relay::Pid, end: StepEnd);
    /// A yielded command is about to reach its handler.
    fn command(&mut self, pid: relay::Pid, command: CommandId, tag: Tag) -> CommandFault;
    /// A process ended on this worker.
    fn ended(&mut self, pid: relay::Pid, reason: ExitReason);
}

/// A worker a simulation drives (see the module's documentation).
pub(crate) struct Driven {
    worker: Worker,
}

impl std::fmt::Debug for Driven {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driven")
            .field("index", &self.worker.local.index)
            .finish_non_exhaustive()
    }
}

/// What one turn of a driven worker did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Turn {
    /// It ran a process (one step, or the end of a killed one).
    Stepped,
    /// It fired due timers.
    FiredTimers,
    /// It found nothing to do.
    Idle,
}

impl Driven {
    /// Worker `local.index` of `shared`, with its random source seeded by
    /// `seed` and its steps shown to `observer`.
    pub(crate) fn new(
        shared: Arc<Shared>,
        local: Local,
        handlers: std::sync::Arc<Handlers>,
        seed: u64,
        observer: Box<dyn StepObserver>,
    ) -> Driven {
        Driven {
            worker: Worker::new(shared, local, handlers, seed, Some(observer)),
        }
    }

    /// One round of the worker loop on the calling thread.
    pub(crate) fn turn(&mut self) -> Turn {
        let worker = &mut self.worker;
        // SAFETY: `worker.local` (an allocation of its own) is not dropped
        // while the guard lives: the guard is dropped at the end of this
        // call, and `worker` is borrowed for the whole call.
        let _entered = unsafe { local::enter_raw(&*worker.shared, &worker.local) };
        // A step may say how much virtual time it takes (`sim::spend`).
        let _turn = worker.shared.clock.enter_turn();
        match worker.next_work() {
            Found::Process(record) => {
                worker.run_process(record);
                Turn::Stepped
            }
            Found::Timers => Turn::FiredTimers,
            Found::Nothing => Turn::Idle,
        }
    }

    /// Whether a turn of this worker would find something of its own: a
    /// queued process or a due timer. (Work it could take from the global
    /// queues or steal is the simulation's to see.)
    pub(crate) fn has_own_work(&self) -> bool {
        let w = &self.worker;
        w.local.len() > 0
            || w.due_timers.any()
            || w.shared
                .timers
                .any_due(w.local.index, || w.shared.clock.now())
    }

    /// Whether another worker could steal from this one.
    pub(crate) fn has_stealable(&self) -> bool {
        self.worker.local.len() > 0
    }
}
