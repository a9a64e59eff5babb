//! The simulation's hand in each worker's steps: every step goes to the
//! trace (with the fairness check of its wait), and crashes and handler
//! faults are drawn for it.

use std::sync::Arc as StdArc;

use relay::Pid;

use super::faults::State;
use super::trace::{self, end_name, Entry, Fault};
use crate::contract::command::{CommandId, Tag};
use crate::contract::down::ExitReason;
use crate::contract::event::Event;
use crate::sync::Mutex;
use crate::worker::{CommandFault, StepEnd, StepObserver};

/// A worker's view for the simulation: its steps go to the trace, and
/// faults are drawn for them.
pub(super) struct Observer {
    pub(super) state: StdArc<Mutex<State>>,
    /// The step in progress: what `after_step` completes.
    pub(super) current: Option<(usize, Pid, u64, Vec<trace::Delivered>)>,
}

impl StepObserver for Observer {
    fn before_step(
        &mut self,
        worker: usize,
        pid: Pid,
        events: &mut dyn Iterator<Item = &Event>,
    ) -> bool {
        let mut state = self.state.lock();
        let state = &mut *state;
        // Counted for the simulation, not per worker: a process moves
        // between workers.
        let step = state.steps_of.entry(pid).or_insert(0);
        *step += 1;
        let step = *step;
        if let Some(wait) = state.fairness.step(pid, worker) {
            state.trace.push(Entry::Unfair(wait));
        }
        let delivered = events.map(trace::Delivered::of).collect();
        self.current = Some((worker, pid, step, delivered));
        let crash = state.faults.crashes(&mut state.choices, pid, step);
        if crash {
            state.trace.push(Entry::Fault(Fault::Crash { pid }));
        }
        crash
    }

    fn after_step(&mut self, pid: Pid, end: StepEnd) {
        if let Some((worker, current, step, events)) = self.current.take() {
            debug_assert_eq!(current, pid);
            self.state.lock().trace.push(Entry::Step {
                worker,
                pid,
                step,
                events,
                end: end_name(end),
            });
        }
    }

    fn command(&mut self, pid: Pid, _command: CommandId, tag: Tag) -> CommandFault {
        let mut state = self.state.lock();
        let state = &mut *state;
        let fault = state.faults.command(&mut state.choices);
        if fault != CommandFault::None {
            state.handler_fault = Some((pid, tag));
        }
        match fault {
            CommandFault::None => {}
            CommandFault::Fail => state.trace.push(Entry::Fault(Fault::HandlerFailed { pid })),
            CommandFault::Panic => state
                .trace
                .push(Entry::Fault(Fault::HandlerPanicked { pid })),
        }
        fault
    }

    fn ended(&mut self, pid: Pid, reason: ExitReason) {
        let mut state = self.state.lock();
        state.steps_of.remove(&pid);
        state.fairness.ended(pid);
        state.trace.push(Entry::Ended { pid, reason });
    }
}
