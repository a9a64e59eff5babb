//! Running one process: its step, the commands it yielded, what it
//! asked for next, and its end.

use std::cell::{Cell, RefCell};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering::Relaxed;

use crate::contract::command::Command;
use crate::engine::commands::completer::Completer;
use crate::engine::stepping::Stepping;

use crate::contract::event::{CommandError, Event};
use crate::contract::outcome::{ExitError, Outcome};
use crate::contract::output::{Events, Output, Status, Yield};
use crate::contract::pending::{drop_unwanted, StepLists};
use crate::engine::shared::{Runnable, Shared};
use crate::engine::stats::bump;
use crate::panic_guard::{drop_payload, drop_user_value, panic_message};
use crate::record::state::{AfterStep, BLOCKED, FORCE, IDLE, READY};
use crate::record::{Body, Record};
use crate::sync::Arc;

use super::Worker;

use super::ENGINE_REFS_BATCH;

impl Worker<'_> {
    /// Takes the process (`READY -> RUNNING`, or still `RUNNING` when it
    /// was queued to continue), steps it unless it is being killed, and
    /// moves it on.
    pub(super) fn run_process(&mut self, record: Arc<Record>) {
        let kill = record.state.start_step();
        // SAFETY: `start_step` made this worker the process's owner (or the
        // run-queue entry we popped handed us its ownership), and it
        // stays the owner for the whole closure: the closure never hands the
        // process on (`finish_step` runs in `after_step`, after the closure
        // has returned and the borrow of the body has ended, so a worker
        // that takes the process next never overlaps with this borrow), and
        // nothing in it calls `with_body` on this record again.
        let desired = unsafe { record.with_body(|body| self.step_owned(&record, body, kill)) };
        if let Some(desired) = desired {
            self.after_step(&record, desired);
        }
        if let Some(how) = self.requeue.take() {
            self.shared.schedule(record, how);
        }
    }

    /// Steps the owned process. Returns the state the process wants next
    /// (for `after_step`), or `None` if it has ended.
    fn step_owned(&mut self, record: &Arc<Record>, body: &mut Body, kill: u32) -> Option<u32> {
        if kill != 0 {
            self.end_killed(record, body, kill);
            return None;
        }
        debug_assert!(self.events.is_empty(), "a previous step's events leaked");
        // SAFETY: we own the process (`step_owned` runs inside `with_body`).
        unsafe { record.drain_events(&mut self.events) };
        if self.shared.mailbox_capacity != usize::MAX {
            let messages = self
                .events
                .iter()
                .filter(|e| matches!(e, Event::Message(_)))
                .count();
            if messages > 0 {
                record.mailbox.release(messages);
            }
        }
        if body.waiting && self.events.is_empty() {
            // Woken for an event we already consumed: wait again without
            // bothering the process.
            return Some(body.waiting_state());
        }
        body.waiting = false;
        if let Some(extras) = body.extras.as_mut() {
            if !extras.unread.is_empty() {
                // What the last step left unread comes first, in order.
                self.events.splice(0..0, extras.unread.drain(..));
            }
        }

        let process = body
            .process
            .as_mut()
            .expect("a live record has its process");
        // The pending lists are shared by the step's events (which take an
        // entry as its event is handed out) and its output (which adds and
        // cancels): lent through a cell for the length of the step.
        let extras = RefCell::new(body.extras.take());
        let filters = Cell::new(body.filters_events);
        let lists = StepLists {
            extras: &extras,
            filters: &filters,
            timers: &self.shared.timers,
            pid: record.pid,
        };
        let stepping = Stepping {
            shared: &self.shared,
            record,
        };
        let mut output = Output::new(&mut self.yields, &stepping, record.pid, &lists);
        let mut events = Events::new(self.events.drain(..), Some(&lists));
        // Only the user's step counts as "in a step" for shutdown's report:
        // a worker ending a process (its `close`, its outcome) is not stuck.
        let in_step = &self.shared.remotes[self.local.index].counters.in_step;
        in_step.store(true, Relaxed);
        let result = catch_unwind(AssertUnwindSafe(|| process.step(&mut events, &mut output)));
        in_step.store(false, Relaxed);
        let status = std::mem::replace(&mut output.status, Status::Idle);
        drop(output);
        // Whatever the step did not read is kept for the next step (moved,
        // not dropped: no user `Drop` runs here). It has not been handed
        // out, so its timers, monitors and asks are still listed.
        if events.remaining() > 0 {
            crate::contract::pending::extras(&mut extras.borrow_mut())
                .unread
                .extend(events.unchecked_rest());
        }
        drop(events);
        body.extras = extras.into_inner();
        body.filters_events = filters.get();
        self.shrink_buffers();
        record.count_step();
        bump(&self.counters().steps, 1);

        let failed = match result {
            Ok(Ok(())) => None,
            Ok(Err(error)) => Some(ExitError::Step(error)),
            Err(panic) => {
                let message = panic_message(&*panic);
                drop_payload(panic);
                tracing::debug!(pid = %record.pid, %message, "step panicked");
                Some(ExitError::Panicked { message })
            }
        };
        if let Some(error) = failed {
            // A failed step's status is not acted on; it may hold user
            // values (a done value, an upgrade's new process) whose `Drop`
            // must not unwind into the worker.
            drop_user_value(status, record.pid, "the status of a failed step");
            self.discard_yields(record.pid);
            self.end(record, body, Err(error));
            return None;
        }
        match status {
            Status::Done(value) => {
                if !self.yields.is_empty() {
                    bump(&self.counters().discarded_yields, self.yields.len() as u64);
                    self.discard_yields(record.pid);
                }
                self.end(record, body, Ok(value));
                None
            }
            Status::Upgrade(request) => self.upgrade(record, body, *request),
            Status::Continue if self.yields.is_empty() => Some(READY),
            Status::Continue | Status::Idle => {
                let desired = if self.yields.is_empty() {
                    IDLE
                } else {
                    BLOCKED
                };
                self.dispatch(record);
                body.waiting = true;
                body.blocked = desired == BLOCKED;
                Some(desired)
            }
        }
    }

    /// Hands each yielded command to its handler. Completions that arrive
    /// during this (synchronous handlers) set the wakeup flag, since the
    /// process is still running.
    fn dispatch(&mut self, record: &Arc<Record>) {
        for Yield { command, tag, data } in self.yields.drain(..) {
            let Some(handler) = self.shared.handlers.get(command) else {
                let event = Event::Completion {
                    tag,
                    result: Err(CommandError::NoHandler { command }),
                };
                if let Ok(wake) = record.deliver(event) {
                    self.shared.after_wake(record, wake);
                }
                continue;
            };
            let engine = engine_ref(&self.shared, &mut self.engine_refs);
            let completer = Completer::new(record.clone(), engine, tag);
            let command = Command::new(command, tag, data);
            match catch_unwind(AssertUnwindSafe(|| handler.handle(command, completer))) {
                Ok(Ok(())) => {}
                // Dropping the rejection delivers it to the process.
                Ok(Err(rejected)) => drop(rejected),
                Err(panic) => {
                    // The completer was dropped while unwinding and has
                    // already delivered `HandlerPanicked`.
                    tracing::warn!(
                        pid = %record.pid,
                        message = %panic_message(&*panic),
                        "command handler panicked"
                    );
                    drop_payload(panic);
                }
            }
        }
    }

    /// Moves the process on after a step (or a skipped step). Runs outside
    /// `with_body`: once `finish_step` has parked the process, a waker may
    /// queue it and another worker take it and borrow its body at once.
    fn after_step(&mut self, record: &Arc<Record>, desired: u32) {
        match record.state.finish_step(desired) {
            AfterStep::Parked => {}
            AfterStep::Requeue { woken } => {
                let how = if woken {
                    Runnable::Woken
                } else {
                    Runnable::Continued
                };
                debug_assert!(self.requeue.is_none());
                self.requeue = Some(how);
            }
            AfterStep::Kill(flags) => {
                // SAFETY: `finish_step` returned `Kill` without changing the
                // word: the process is still RUNNING, so this worker still
                // owns it and no other thread can borrow the body.
                unsafe {
                    record.with_body(|body| self.end_killed(record, body, flags));
                }
            }
        }
    }

    /// Ends a process that was terminated, or forced at shutdown (which
    /// names it, with its type, in a warning).
    fn end_killed(&mut self, record: &Arc<Record>, body: &mut Body, flags: u32) {
        if flags & FORCE != 0 {
            if let Some(process) = body.process.as_ref() {
                // `type_name` is the user's to override: guarded.
                let type_name = catch_unwind(AssertUnwindSafe(|| process.type_name()))
                    .unwrap_or_else(|panic| {
                        drop_payload(panic);
                        "(its type_name panicked)"
                    });
                self.shared.name_forced(record, type_name);
            }
        }
        self.end(record, body, Err(kill_error(flags)));
    }

    /// Ends the process: closes its queue (what is left are dead letters),
    /// calls `close`, unregisters its PID and reports its outcome.
    pub(super) fn end(&mut self, record: &Arc<Record>, body: &mut Body, mut outcome: Outcome) {
        // A terminate that came from a linked process's end says so.
        if matches!(outcome, Err(ExitError::Terminated)) {
            if let Some((pid, reason)) = record.relations.linked_exit() {
                outcome = Err(ExitError::Linked { pid, reason });
            }
        }
        record.state.complete();
        let mut dead = body
            .extras
            .as_mut()
            .map(|x| std::mem::take(&mut x.unread))
            .unwrap_or_default();
        // SAFETY: `end` runs with the body borrowed, so we own the process.
        let closed = unsafe { record.close_events() };
        dead.extend(closed);
        // What a step would never have seen is no dead letter either: a
        // cancelled timer's event, a removed monitor's down, an answer
        // after its ask's timeout.
        if body.filters_events {
            drop_unwanted(&mut dead, &mut body.extras, &self.shared.timers, record.pid);
        }
        // The process's own timers end with it (their memory too).
        let extras = body.extras.take();
        if let Some(extras) = &extras {
            if !extras.timers.is_empty() {
                let cancelled = extras
                    .timers
                    .iter()
                    .filter_map(|id| self.shared.timers.cancel(*id))
                    .collect();
                self.shared.drop_timers(cancelled);
            }
        }
        self.shared.dead_letters(record.pid, dead);
        if let Some(mut process) = body.process.take() {
            let closed = catch_unwind(AssertUnwindSafe(move || {
                process.close();
                drop(process);
            }));
            if let Err(panic) = closed {
                let message = panic_message(&*panic);
                drop_payload(panic);
                tracing::debug!(pid = %record.pid, %message, "close panicked");
                if outcome.is_ok() {
                    outcome = Err(ExitError::Panicked { message });
                }
            }
        }
        // Its PID leaves the table, then its monitors fire and its names are
        // freed: a watcher that reacts (a supervisor restarting it under
        // the same name) finds the name available.
        self.shared
            .retire(record, crate::contract::down::ExitReason::of(&outcome));
        // The monitors it held on others go, and with them the references
        // to this record they kept.
        for monitor in extras.iter().flat_map(|x| x.monitoring.iter()) {
            self.shared.remove_monitor(*monitor);
        }
        drop(extras);
        // This worker's cache no longer keeps the ended record alive (other
        // workers' caches drop it when they next send to the PID or reuse
        // the entry; either way it holds no process and no result).
        self.local.forget_route(record.pid);
        bump(&self.counters().completed, 1);
        tracing::trace!(pid = %record.pid, ok = outcome.is_ok(), "ended");
        // The slot is free before the hook runs, so a hook may start a
        // replacement even at the process limit. A shutdown that returns
        // has still seen every hook call: it joins the workers, and this
        // worker runs the hook before it looks for work (or exits) again.
        self.shared.release_live();
        self.shared.hooks.completed(
            crate::engine::Context::of(&self.shared),
            record.pid,
            &outcome,
        );
        if let Some(unwanted) = record.slot.set(outcome) {
            drop_user_value(unwanted, record.pid, "a result nobody waits for");
        }
    }
}

impl Worker<'_> {
    /// Drops the yields of a step that will not be dispatched (it failed or
    /// finished). Their payloads are the user's: a panicking `Drop` is
    /// contained.
    pub(super) fn discard_yields(&mut self, pid: relay::Pid) {
        for item in self.yields.drain(..) {
            drop_user_value(item, pid, "a yield that was never dispatched");
        }
    }

    /// Gives back the memory of a burst: the reused buffers shrink to a
    /// small capacity once a step needed far more, so an idle worker does
    /// not keep the largest burst it ever saw.
    fn shrink_buffers(&mut self) {
        if self.events.capacity() > BUFFER_KEEP {
            self.events.shrink_to(BUFFER_KEEP);
        }
        if self.yields.capacity() > BUFFER_KEEP {
            self.yields.shrink_to(BUFFER_KEEP);
        }
    }
}

/// The capacity (in elements) the reused event and yield buffers keep
/// between bursts.
const BUFFER_KEEP: usize = 256;

/// A reference to the engine for a completer, from the worker's batch
/// (`Worker::engine_refs`), refilled when empty.
fn engine_ref(shared: &Arc<Shared>, batch: &mut Vec<Arc<Shared>>) -> Arc<Shared> {
    if let Some(engine) = batch.pop() {
        return engine;
    }
    batch.extend(std::iter::repeat_with(|| shared.clone()).take(ENGINE_REFS_BATCH - 1));
    shared.clone()
}

pub(super) fn kill_error(flags: u32) -> ExitError {
    if flags & FORCE != 0 {
        ExitError::Cancelled
    } else {
        ExitError::Terminated
    }
}
