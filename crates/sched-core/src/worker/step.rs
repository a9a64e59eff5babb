//! Running one process: its step (the events it is given, in order, the
//! user's `start` and `step`, caught), the commands it yielded, and what it
//! asked for next. Its end is `end.rs`.

use std::cell::{Cell, RefCell};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering::Relaxed;

use crate::contract::backlog::Ranks;
use crate::contract::command::Command;
use crate::contract::event::{CommandError, Event};
use crate::contract::outcome::ExitError;
use crate::contract::output::{Events, Output, Status, Yield};
use crate::contract::pending::StepLists;
use crate::engine::commands::completer::Completer;
use crate::engine::figures::Introspect;
use crate::engine::histogram::WorkerHistograms;
use crate::engine::shared::{Runnable, Shared};
use crate::engine::stats::bump;
use crate::engine::stepping::Stepping;
use crate::engine::upgrade::UpgradeOrder;
use crate::panic_guard::{drop_payload, drop_user_value, panic_message};
use crate::record::state::{AfterStep, BLOCKED, IDLE, READY};
use crate::record::{Body, RecordRef};
use crate::runqueue::order::LEVEL_WEIGHTS;
use crate::sync::Arc;

use super::{driven, CommandFault, StepEnd, Worker};

/// How many processes must be queued ahead of a process that continues,
/// in its lane on its worker, for it to wait as `READY` (see
/// `Worker::publish_continue`): below, a terminate waits at most these
/// steps for its turn; from there on it ends at the next pick.
pub(crate) const KILL_TICKET_BACKLOG: usize = 256;

/// What `take_events` found for a step.
enum Taken {
    /// The process ended (an upgrade ordered from outside failed).
    Ended,
    /// Nothing new: the process waits again without a step.
    Nothing,
    /// Events for a step.
    Some,
}

/// How the user's step went (`call_step`).
struct Stepped {
    /// The error `start` or `step` returned, or its panic, as the error
    /// it ends the process with: judged where the step returned, and
    /// boxed (a failing step allocates anyway). Moving the raw result, or
    /// an `Option<ExitError>`, out of `call_step` was a copy of several
    /// words written one by one, with 16-byte loads the processor could
    /// not forward: a tenth of the worker loop's samples in ping-pong and
    /// in a loop of continuing steps.
    failed: Option<Box<ExitError>>,
    /// What the step asked for next.
    status: Status,
    /// With histograms on: when it ended.
    ended: Option<std::time::Instant>,
}

/// With histograms on: records how long the process waited (to be
/// stepped, or on its yield) and returns when its step starts. One branch
/// per step when they are off.
#[inline(always)] // On the step path: see `Worker::step_owned`.
fn histograms_before(
    shared: &Shared,
    histograms: Option<&WorkerHistograms>,
    record: &RecordRef,
    ready_at: u32,
    was_blocked: bool,
) -> Option<std::time::Instant> {
    let histograms = histograms?;
    let now = std::time::Instant::now();
    let waited = Introspect::between(ready_at, shared.introspect.stamp(now));
    if was_blocked {
        histograms.yield_wait.record(waited);
    } else {
        histograms.record_schedule_latency(waited, || record.group());
    }
    Some(now)
}

/// With histograms on: records the step's time, and returns when it ended.
#[inline(always)] // On the step path: see `Worker::step_owned`.
fn histograms_after(
    histograms: Option<&WorkerHistograms>,
    started: Option<std::time::Instant>,
) -> Option<std::time::Instant> {
    let (histograms, started) = (histograms?, started?);
    let ended = std::time::Instant::now();
    histograms.step.record(ended.duration_since(started));
    Some(ended)
}

/// The error a step's result ends its process with, if any (a panic is
/// logged and its payload dropped, guarded).
#[inline(always)] // On the step path: see `Worker::step_owned`.
fn step_failure(
    record: &RecordRef,
    result: std::thread::Result<Result<(), crate::contract::error::BoxError>>,
) -> Option<ExitError> {
    match result {
        Ok(Ok(())) => None,
        Ok(Err(error)) => Some(ExitError::Step(error)),
        Err(panic) => {
            let message = panic_message(&*panic);
            drop_payload(panic);
            tracing::debug!(pid = %record.pid, %message, "step panicked");
            Some(ExitError::Panicked { message })
        }
    }
}

/// How many references to the engine a worker takes at once for the
/// completers it creates (see `Worker::engine_refs`); one at a time under
/// loom, where every clone would be another step for the model to explore.
pub(super) const ENGINE_REFS_BATCH: usize = if cfg!(loom) { 1 } else { 64 };

impl Worker {
    /// Takes the process (`READY -> RUNNING`, or still `RUNNING` when it
    /// was queued to continue), steps it unless it is being killed, and
    /// moves it on.
    #[inline(always)]
    pub(super) fn run_process(&mut self, record: RecordRef) {
        let Some(kill) = record.state.start_step() else {
            // A kill ticket ended the process while this entry waited
            // (`reap_killed`): the entry is dropped.
            return;
        };
        // With groups: the group its step's time is counted to, and which
        // a process the step spawns joins.
        let group = (self.local.groups > 1).then(|| {
            let group = record.group();
            self.local.current_group.set(group);
            group
        });
        // A process its step spawns starts at its level. (Not under
        // loom: the engine models of `tests/loom.rs` are at loom's branch
        // limit, and this load would be one more branch per step for a
        // rule they do not check.)
        if !cfg!(loom) {
            self.local.current_level.set(record.priority());
        }
        let started = self.measure_start();
        // SAFETY: `start_step` made this worker the process's owner (or the
        // run-queue entry we popped handed us its ownership), and it
        // stays the owner for the whole closure: the closure never hands the
        // process on (`finish_step` runs in `after_step`, after the closure
        // has returned and the borrow of the body has ended, so a worker
        // that takes the process next never overlaps with this borrow), and
        // nothing in it calls `with_body` on this record again.
        let desired = unsafe { record.with_body(|body| self.step_owned(&record, body, kill)) };
        let measured = started.map(|started| self.measured(&record, started));
        self.local.current_level.set(crate::Priority::Normal);
        let parked = match desired {
            Some(desired) => self.after_step(&record, desired),
            None => false,
        };
        match group {
            // Without groups, and only while lanes compete: the step's
            // measured time when it was measured (not in a simulation,
            // whose clock a step moves only by what it says), else a
            // nominal step.
            None if self.shares.contended() => {
                let ns = measured.filter(|_| self.observer.is_none());
                let weight = u64::from(LEVEL_WEIGHTS[self.chain % LEVEL_WEIGHTS.len()]);
                self.shares.charge(self.chain, weight, ns);
            }
            None => {}
            Some(group) => self.charge(group),
        }
        // Taken whatever follows: a requeue's stamp, or no one's (a parked
        // process's must not stamp the next process this worker requeues).
        let step_ended = self.step_ended.take();
        if parked {
            // The state word holds the reference now, for the wake that
            // queues the process next; the record is not touched again
            // here (another worker may already be running it).
            RecordRef::park(record);
            return;
        }
        if let Some(how) = self.requeue.take() {
            match step_ended {
                Some(ended) => {
                    let now = self.shared.introspect.stamp(ended);
                    // SAFETY: this worker owns the process (still RUNNING
                    // after `finish_step` asked for a requeue) and queues it.
                    unsafe { record.stamp_ready(now) };
                    self.shared.queue_here(&self.local, record, how);
                }
                None => {
                    if self.shared.histograms {
                        let now = self.shared.introspect.stamp(std::time::Instant::now());
                        // SAFETY: as above.
                        unsafe { record.stamp_ready(now) };
                    }
                    self.shared.queue_here(&self.local, record, how);
                }
            }
        }
    }

    /// With groups: charges the step that just ended to the chain's lane
    /// and counts it to `group` (see `shares.rs`): its measured time, or,
    /// in a simulation, a nominal step.
    #[inline(never)]
    fn charge(&mut self, group: usize) {
        self.local.current_group.set(0);
        let groups = self.local.groups;
        let weight = self
            .shared
            .groups
            .lane_weight(self.chain / groups, self.chain % groups);
        let measure = self.observer.is_none() && !cfg!(loom);
        let ns = measure.then(|| self.shares.since_last()).flatten();
        let ns = self.shares.charge(self.chain, weight, ns);
        self.shared.remotes[self.local.index]
            .group_clocks
            .add(group, ns);
    }

    /// Steps the owned process. Returns the state the process wants next
    /// (for `after_step`), or `None` if it has ended.
    ///
    /// Always inlined (as is `Record::with_body`, its one caller's
    /// wrapper): the introspection feature's few lines pushed both past the
    /// compiler's inlining budget, and out of line the step path ran about
    /// 60 more instructions per step (callgrind, `benches/examples/
    /// step_cost.rs`: 110.4 M instead of 97.0 M for 200 000 continuing
    /// steps; inlined, 100.0 M).
    #[inline(always)]
    fn step_owned(&mut self, record: &RecordRef, body: &mut Body, kill: u32) -> Option<u32> {
        if kill != 0 {
            self.end_killed(record, body, kill);
            return None;
        }
        match self.take_events(record, body) {
            Taken::Ended => return None,
            Taken::Nothing => return Some(body.waiting_state()),
            Taken::Some => {}
        }
        // It waited on a yield: its stamp is when that wait began.
        let was_blocked = body.waiting && body.blocked;
        body.waiting = false;
        let (mut backlog, ranks) = self.order_events(record, body);
        // A simulation sees what the step is given, and may crash it.
        let crash = match &mut self.observer {
            None => false,
            Some(observer) => {
                let mut given: Box<dyn Iterator<Item = &Event>> = match &backlog {
                    Some(backlog) => Box::new(backlog.iter()),
                    None => Box::new(self.events.iter()),
                };
                observer.before_step(self.local.index, record.pid, &mut given)
            }
        };
        let Stepped {
            failed,
            status,
            ended,
        } = self.call_step(record, body, &mut backlog, ranks, crash, was_blocked);
        self.shrink_buffers();
        record.count_step();
        bump(&self.counters().steps, 1);
        self.observe_step_end(record, failed.is_some(), &status);
        if let Some(error) = failed {
            // A failed step's status is not acted on; it may hold user
            // values (a done value, an upgrade's new process) whose `Drop`
            // must not unwind into the worker.
            drop_user_value(status, record.pid, "the status of a failed step");
            self.discard_yields(record.pid);
            self.end(record, body, Err(*error));
            return None;
        }
        // What the step asked for: an end, a replacement, another step, a
        // wait.
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
            Status::Continue if self.yields.is_empty() => {
                // No payload to drop: the drop glue of `Status` (a call
                // per step) is skipped.
                std::mem::forget(status);
                Some(READY)
            }
            Status::Continue | Status::Idle => Some(self.wait(record, body, ended)),
        }
    }

    /// Drains the events that woke the process into `self.events`, and
    /// takes an upgrade ordered from outside first. Whether the process
    /// ended in the upgrade, has nothing to read (woken for an event an
    /// earlier step consumed), or has events for a step.
    #[inline(always)] // On the step path: see `step_owned`.
    fn take_events(&mut self, record: &RecordRef, body: &mut Body) -> Taken {
        debug_assert!(self.events.is_empty(), "a previous step's events leaked");
        // SAFETY: we own the process (`step_owned` runs inside `with_body`).
        unsafe { record.drain_events(&mut self.events) };
        // An upgrade ordered from outside is among what was just drained,
        // or still on its way, while its flag is set (`engine/upgrade.rs`).
        if record.mailbox.upgrade_ordered() {
            if let Some(order) = UpgradeOrder::take_from(&mut self.events) {
                record.mailbox.release_upgrade();
                if !self.take_over(record, body, order) {
                    return Taken::Ended;
                }
            }
        }
        if self.shared.counts_messages {
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
            return Taken::Nothing;
        }
        Taken::Some
    }

    /// Puts the step's events in the order it reads them: the system
    /// lane, then urgent messages, then the rest, each in arrival order.
    /// What the last step left unread comes first in its lane and is read
    /// in place (the returned backlog), what just came joins the lanes'
    /// backs: a step pays for what it reads and what arrived, not for the
    /// backlog (`contract/backlog.rs`).
    #[inline(always)] // On the step path: see `step_owned`.
    fn order_events(
        &mut self,
        record: &RecordRef,
        body: &mut Body,
    ) -> (Option<crate::contract::backlog::Backlog>, Ranks) {
        let urgent = record.mailbox.urgent_seen();
        let mut backlog = body
            .extras
            .as_mut()
            .and_then(|x| x.existing_others())
            .filter(|others| !others.unread.is_empty())
            .map(|others| std::mem::take(&mut others.unread));
        let ranks = match &mut backlog {
            Some(backlog) => {
                backlog.arrived(self.events.drain(..), urgent);
                Ranks::default()
            }
            // Nothing to reorder (no urgent message, at most one event):
            // most steps, and a call less.
            None if !urgent && self.events.len() < 2 => Ranks::default(),
            None => crate::contract::urgent::order_events(&mut self.events, urgent),
        };
        (backlog, ranks)
    }

    /// Runs the user's `start` (for a fresh instance) and `step`, caught,
    /// with the step's lists lent to its events and output, and puts back
    /// what it left: unread events, the pending lists, returned messages
    /// (as dead letters).
    #[inline(always)] // On the step path: see `step_owned`.
    fn call_step(
        &mut self,
        record: &RecordRef,
        body: &mut Body,
        backlog: &mut Option<crate::contract::backlog::Backlog>,
        ranks: Ranks,
        crash: bool,
        was_blocked: bool,
    ) -> Stepped {
        let fresh = std::mem::take(&mut body.fresh);
        let process = body
            .process
            .get_mut()
            .expect("a live record has its process");
        #[cfg(all(feature = "introspection", not(loom)))]
        self.step_starts(record, &*process, fresh);
        // The pending lists are shared by the step's events (which take an
        // entry as its event is handed out) and its output (which adds and
        // cancels): lent through a cell for the length of the step.
        let extras = RefCell::new(body.extras.take());
        let filters = Cell::new(body.filters_events);
        let returned = RefCell::new(Vec::new());
        let lists = StepLists {
            extras: &extras,
            filters: &filters,
            timers: &self.shared.timers,
            pid: record.pid,
            returned: &returned,
        };
        let stepping = Stepping {
            shared: &self.shared,
            record,
            worker: self.local.index,
        };
        let mut output = Output::new(&mut self.yields, &stepping, record.pid, &lists);
        let batch = self.events.len();
        let mut events = match backlog {
            Some(backlog) => Events::from_backlog(backlog, self.events.drain(..), Some(&lists)),
            None => Events::new(self.events.drain(..), Some(&lists)),
        };
        // Only the user's step counts as "in a step" for shutdown's report:
        // a worker ending a process (its `close`, its outcome) is not stuck.
        let remote = &self.shared.remotes[self.local.index];
        let in_step = &remote.counters.in_step;
        in_step.store(record.pid.id(), Relaxed);
        // Free when nothing listens at trace level (one static check).
        let span = tracing::trace_span!("step", pid = %record.pid);
        let entered = span.enter();
        let histograms = remote.histograms.as_deref();
        let started =
            histograms_before(&self.shared, histograms, record, body.ready_at, was_blocked);
        let result = catch_unwind(AssertUnwindSafe(|| {
            if crash {
                // Through the real path of a panicking step (without the
                // panic hook's message: `resume_unwind` skips it).
                std::panic::resume_unwind(Box::new(driven::CRASH_MESSAGE));
            }
            if fresh {
                process.start(&mut output)?;
                if matches!(output.status, Status::Done(_) | Status::Upgrade(_)) {
                    return Ok(());
                }
            }
            process.step(&mut events, &mut output)
        }));
        let ended = histograms_after(histograms, started);
        drop(entered);
        in_step.store(0, Relaxed);
        let status = std::mem::replace(&mut output.status, Status::Idle);
        drop(output);
        if ended.is_some() {
            // For a requeue's stamp.
            self.step_ended = ended;
        }
        keep_unread(&mut events, &extras, batch, ranks);
        drop(events);
        if let Some(backlog) = backlog.take().filter(|b| !b.is_empty()) {
            crate::contract::pending::extras(&mut extras.borrow_mut())
                .others()
                .unread = backlog;
        }
        let previous = std::mem::replace(&mut body.extras, extras.into_inner());
        // Taken into the cell above, and only the cell was lent to the
        // step: nothing to drop, so no call to the drop glue per step.
        debug_assert!(previous.is_none(), "the body's extras were lent out");
        std::mem::forget(previous);
        body.filters_events = filters.get();
        self.after_lists(record, body, returned.into_inner());
        Stepped {
            failed: step_failure(record, result).map(Box::new),
            status,
            ended,
        }
    }

    /// After the step: its figures (introspection), and the messages it
    /// had returned, as dead letters.
    #[inline(always)] // On the step path: see `step_owned`.
    fn after_lists(&self, record: &RecordRef, body: &Body, returned: Vec<Event>) {
        #[cfg(all(feature = "introspection", not(loom)))]
        if let Some(extras) = &body.extras {
            record.figures.set_timers(extras.timers.len());
        }
        #[cfg(not(all(feature = "introspection", not(loom))))]
        let _ = body;
        if !returned.is_empty() {
            self.shared.dead_letters(record.pid, returned);
        }
    }

    /// Tells a simulation how the step ended.
    #[inline(always)] // On the step path: see `step_owned`.
    fn observe_step_end(&mut self, record: &RecordRef, failed: bool, status: &Status) {
        if let Some(observer) = &mut self.observer {
            let end = match (failed, status) {
                (true, _) => StepEnd::Failed,
                (false, Status::Done(_)) => StepEnd::Done,
                (false, Status::Upgrade(_)) => StepEnd::Upgrade,
                (false, Status::Continue) if self.yields.is_empty() => StepEnd::Continue,
                (false, Status::Continue | Status::Idle) if self.yields.is_empty() => StepEnd::Idle,
                (false, Status::Continue | Status::Idle) => StepEnd::Yielded(self.yields.len()),
            };
            observer.after_step(record.pid, end);
        }
    }

    /// The process waits: for messages (`IDLE`), or, having yielded
    /// commands, for their completions (`BLOCKED`), which are dispatched
    /// to their handlers here. Returns the state.
    #[inline(always)] // On the step path: see `step_owned`.
    pub(super) fn wait(
        &mut self,
        record: &RecordRef,
        body: &mut Body,
        ended: Option<std::time::Instant>,
    ) -> u32 {
        let desired = if self.yields.is_empty() {
            IDLE
        } else {
            BLOCKED
        };
        self.dispatch(record);
        body.waiting = true;
        body.blocked = desired == BLOCKED;
        if let (true, Some(ended)) = (body.blocked, ended) {
            // Its wait on the yield starts now (`stamp_ready`
            // leaves this stamp when it is woken).
            body.ready_at = self.shared.introspect.stamp(ended);
        }
        // A process that waits with a timer pending waits for time
        // (a timeout, a back-off, a delay), long next to a step: it
        // gives its event block back (unless an event arrived in it
        // meanwhile), so it holds none while it waits. One that
        // waits only for messages or completions usually gets the
        // next within microseconds, and freeing its block would cost
        // it an allocation per event (ping-pong, freeing at every
        // wait: 12.0 and 14.1 ms; with this rule: 10.6 and 10.4 ms;
        // yield fan-out, freeing while blocked on commands, was a
        // tenth slower).
        if body.extras.as_ref().is_some_and(|x| !x.timers.is_empty()) {
            // SAFETY: inside `with_body`: this worker owns the
            // process.
            unsafe { record.shrink_events() };
        }
        desired
    }

    /// Introspection: a step of `record` starts (and, for a fresh
    /// instance, its type is published).
    #[cfg(all(feature = "introspection", not(loom)))]
    #[inline(always)] // On the step path: see `step_owned`.
    fn step_starts(
        &mut self,
        record: &RecordRef,
        process: &dyn crate::contract::process::Run,
        fresh: bool,
    ) {
        if fresh {
            self.name_type(record, process);
        }
        record.figures.step_started(self.shared.introspect.now_ms());
    }

    /// Publishes the type of a process's new instance (introspection).
    /// Out of line and cold: it runs once per instance, and its
    /// `catch_unwind` would only grow the step path's code.
    #[cfg(all(feature = "introspection", not(loom)))]
    #[cold]
    #[inline(never)]
    fn name_type(&mut self, record: &RecordRef, process: &dyn crate::contract::process::Run) {
        // `type_name` is the user's and may panic: then the process goes
        // unnamed, and its worker lives on.
        match catch_unwind(AssertUnwindSafe(|| process.type_name())) {
            Ok(name) => {
                if let Some(index) = self.types.index(&self.shared.introspect, name) {
                    record.figures.set_kind(index);
                }
            }
            Err(panic) => drop_payload(panic),
        }
    }

    /// Hands each yielded command to its handler. Completions that arrive
    /// during this (synchronous handlers) set the wakeup flag, since the
    /// process is still running.
    #[inline(always)] // See `next_work`.
    fn dispatch(&mut self, record: &RecordRef) {
        if !self.yields.is_empty() {
            // A command's completion usually comes from another thread:
            // see `Local::expects_answer`.
            self.local.expects_answer.set(true);
        }
        for Yield { command, tag, data } in self.yields.drain(..) {
            let Some(handler) = self.handlers.get(command) else {
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
            let fault = match &mut self.observer {
                None => CommandFault::None,
                Some(observer) => observer.command(record.pid, command, tag),
            };
            let command = Command::new(command, tag, data);
            match catch_unwind(AssertUnwindSafe(|| match fault {
                CommandFault::None => handler.handle(command, completer),
                CommandFault::Fail => {
                    drop(command);
                    let _ = completer.fail(driven::FAULT_MESSAGE);
                    Ok(())
                }
                // The completer is dropped while unwinding, as a handler
                // that panics with it drops it.
                CommandFault::Panic => {
                    let _held = (command, completer);
                    std::panic::resume_unwind(Box::new(driven::FAULT_MESSAGE))
                }
            })) {
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

    /// Whether a process that continues is made `READY` in its queue (two
    /// read-modify-writes on its state word, see `finish_step`) rather
    /// than left `RUNNING`: when its lane here holds at least
    /// [`KILL_TICKET_BACKLOG`] processes, where a terminate would
    /// otherwise wait that many steps for its turn. Never with
    /// histograms on or under loom (see `Shared::end_soon`).
    #[inline(always)] // On the step path: see `step_owned`.
    fn publish_continue(&self, record: &RecordRef) -> bool {
        !cfg!(loom)
            && !self.shared.histograms
            && self.local.ahead(self.local.lane(record), false) >= KILL_TICKET_BACKLOG
    }

    /// Moves the process on after a step (or a skipped step). Runs outside
    /// `with_body`: once `finish_step` has parked the process, a waker may
    /// queue it and another worker take it and borrow its body at once.
    /// Returns whether it parked the process: then the caller leaves its
    /// reference to the state word (`RecordRef::park`).
    #[must_use]
    pub(super) fn after_step(&mut self, record: &RecordRef, desired: u32) -> bool {
        let publish = desired == READY && self.publish_continue(record);
        match record.state.finish_step(desired, publish) {
            AfterStep::Parked => return true,
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
        false
    }
}

impl Worker {
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

/// Keeps whatever the step did not read of the events it was given for
/// the next step, in its lane (moved, not dropped: no user `Drop` runs
/// here). It has not been handed out, so its timers, monitors and asks are
/// still listed. (A backlog was read in place and goes back as it is.)
/// `batch` is how many events the step was given besides the backlog.
/// Borrowed: moved in, the events (a drain and its lists, several words
/// written one by one) were copied with 16-byte loads the processor could
/// not forward, about 5% of a loop of continuing steps (`yield-many`).
#[inline(always)] // On the step path: see `Worker::step_owned`.
fn keep_unread(
    events: &mut Events<'_>,
    extras: &RefCell<Option<Box<crate::contract::pending::Extras>>>,
    batch: usize,
    ranks: Ranks,
) {
    if let Some(rest) = events.unread_batch() {
        let taken = batch - rest.len();
        crate::contract::pending::extras(&mut extras.borrow_mut())
            .others()
            .unread
            .keep(rest, taken, ranks);
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
