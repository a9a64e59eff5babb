//! The worker loop: find a runnable process, step it, decide what next.

pub(crate) mod local;
pub(crate) mod sleep;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering::Acquire;

use crate::commands::completer::Completer;
use crate::contract::command::Command;
use crate::contract::event::{CommandError, Event};
use crate::contract::outcome::{ExitError, Outcome};
use crate::contract::output::{Events, Output, Status, Yield};
use crate::engine::stats::{bump, WorkerCounters};
use crate::engine::{Runnable, Shared};
use crate::panic_message::panic_message;
use crate::record::state::{AfterStep, BLOCKED, FORCE, IDLE, READY};
use crate::record::{Body, Record};
use crate::sync::{spin_hint, thread, Arc};
use local::Local;

/// Every this many ticks the worker looks at the global queue before its
/// own deques, so work submitted from outside never starves behind a
/// worker whose local queues never empty. (Prime, as in Go's scheduler, so
/// it does not fall into step with other periodic patterns.)
const GLOBAL_QUEUE_INTERVAL: u32 = 61;
/// Every this many ticks the worker takes from its FIFO (continued
/// processes) before its LIFO deque, so a stream of wakeups cannot starve
/// processes that asked to continue.
const FIFO_INTERVAL: u32 = 13;
/// How many times in a row a worker runs the process in its `next` slot
/// before moving it to its stealable deque instead. Two processes that wake
/// each other would otherwise keep the slot to themselves, out of reach of
/// idle workers.
const NEXT_SLOT_RUNS: u32 = 3;
/// How many processes a worker moves from the global queue to its deque in
/// one go, besides the one it runs.
const GLOBAL_BATCH: usize = 16;
/// Idle rounds spent spinning, then yielding, before parking. Under loom a
/// worker parks at its first idle round: spinning adds nothing a model can
/// check (every spin is a yield there) but multiplies the paths to explore.
const SPIN_ROUNDS: u32 = if cfg!(loom) { 0 } else { 4 };
const YIELD_ROUNDS: u32 = if cfg!(loom) { 1 } else { 16 };

/// How many references to the engine a worker takes at once for the
/// completers it creates (see `Worker::engine_refs`); one at a time under
/// loom, where every clone would be another step for the model to explore.
const ENGINE_REFS_BATCH: usize = if cfg!(loom) { 1 } else { 64 };

/// One worker thread's state besides its queues.
struct Worker<'a> {
    shared: Arc<Shared>,
    local: &'a Local,
    tick: u32,
    /// Consecutive runs from the `next` slot.
    next_runs: u32,
    rng: u64,
    /// Reused for every step: the events drained before it and the yields
    /// it writes. The steady state of a step allocates nothing here.
    events: Vec<Event>,
    yields: Vec<Yield>,
    /// References to the engine taken in a batch, one handed to each
    /// completer. Cloning the engine's `Arc` per yield would bounce its
    /// count's cache line between this worker (the increment) and whatever
    /// thread completes the yield (the decrement) on every yield; taking 64
    /// increments in a row keeps that line here for the batch.
    engine_refs: Vec<Arc<Shared>>,
    /// Set by `after_step` when the process it just stepped must go back to
    /// a run queue; `run_process` then moves its own reference there,
    /// after the body is released, instead of cloning the `Arc`.
    requeue: Option<Runnable>,
}

/// Runs worker `local.index` of `shared` until the engine exits.
pub(crate) fn run(shared: Arc<Shared>, local: Local) {
    let index = local.index;
    let span = tracing::trace_span!("worker", index);
    let _span = span.enter();
    let _entered = local::enter(&shared, &local);
    let mut worker = Worker {
        rng: 0x9E37_79B9_7F4A_7C15 ^ (index as u64 + 1).wrapping_mul(0xA24B_AED4_963E_E407),
        shared: shared.clone(),
        local: &local,
        tick: 0,
        next_runs: 0,
        events: Vec::with_capacity(16),
        yields: Vec::with_capacity(4),
        engine_refs: Vec::with_capacity(ENGINE_REFS_BATCH),
        requeue: None,
    };
    worker.run_loop();
}

impl Worker<'_> {
    fn counters(&self) -> &WorkerCounters {
        &self.shared.remotes[self.local.index].counters
    }

    fn run_loop(&mut self) {
        let shared = self.shared.clone();
        let mut idle_rounds = 0u32;
        let mut searching = false;
        loop {
            if let Some(record) = self.find_work() {
                if searching {
                    searching = false;
                    if shared.sleepers.stop_searching() {
                        shared.sleepers.notify_one();
                    }
                }
                idle_rounds = 0;
                self.run_process(record);
                continue;
            }
            if shared.exit.load(Acquire) {
                if searching {
                    shared.sleepers.stop_searching();
                }
                break;
            }
            if !searching {
                searching = true;
                shared.sleepers.start_searching();
            }
            idle_rounds += 1;
            if idle_rounds < SPIN_ROUNDS {
                for _ in 0..(1 << idle_rounds) {
                    spin_hint();
                }
            } else if idle_rounds < YIELD_ROUNDS {
                thread::yield_now();
            } else {
                // Not searching any more: from here on producers must wake
                // us (`park` re-checks for work after announcing itself).
                searching = false;
                shared.sleepers.stop_searching();
                bump(&self.counters().parks, 1);
                tracing::trace!("park");
                let me = self.local.index;
                shared
                    .sleepers
                    .park(me, || shared.has_work() || shared.exit.load(Acquire));
                idle_rounds = 0;
            }
        }
        tracing::trace!("exit");
    }

    fn find_work(&mut self) -> Option<Arc<Record>> {
        self.tick = self.tick.wrapping_add(1);
        if self.tick.is_multiple_of(GLOBAL_QUEUE_INTERVAL) {
            if let Some(r) = self.take_global() {
                return Some(r);
            }
        }
        if self.tick.is_multiple_of(FIFO_INTERVAL) {
            if let Some(r) = self.local.pop_fifo() {
                return Some(r);
            }
        }
        if let Some(r) = self.local.take_next() {
            if self.next_runs < NEXT_SLOT_RUNS {
                self.next_runs += 1;
                return Some(r);
            }
            // It is the next to run here anyway (LIFO), but now stealable.
            self.local.lifo.push(r);
        }
        self.next_runs = 0;
        if let Some(r) = self.local.lifo.pop() {
            return Some(r);
        }
        if let Some(r) = self.local.pop_fifo() {
            return Some(r);
        }
        if let Some(r) = self.take_global() {
            return Some(r);
        }
        self.steal()
    }

    /// One process from the global queue, plus up to a batch more moved
    /// into this worker's deque.
    fn take_global(&mut self) -> Option<Arc<Record>> {
        let first = self.shared.injector.pop()?;
        let mut moved = 0;
        while moved < GLOBAL_BATCH {
            match self.shared.injector.pop() {
                Some(r) => {
                    self.local.lifo.push(r);
                    moved += 1;
                }
                None => break,
            }
        }
        bump(&self.counters().global_pops, 1 + moved as u64);
        if moved > 0 {
            // More work than this worker can start at once: let a parked
            // worker come and steal some.
            self.shared.sleepers.notify_one();
        }
        Some(first)
    }

    fn next_random(&mut self) -> u64 {
        // xorshift64*: cheap, and only used to pick a first victim.
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Steals half of a victim's deque (at most 32), starting from a random
    /// victim and trying each other worker once.
    fn steal(&mut self) -> Option<Arc<Record>> {
        let n = self.shared.remotes.len();
        if n < 2 {
            return None;
        }
        let me = self.local.index;
        let start = (self.next_random() % n as u64) as usize;
        let mut attempts = 0;
        for i in 0..n {
            let victim = (start + i) % n;
            if victim == me {
                continue;
            }
            attempts += 1;
            let remote = &self.shared.remotes[victim];
            for stealer in [&remote.lifo, &remote.fifo] {
                for _ in 0..4 {
                    let before = self.local.lifo.len();
                    match stealer.steal_half_into(&self.local.lifo) {
                        deque::Steal::Success(r) => {
                            let moved = self.local.lifo.len().saturating_sub(before);
                            bump(&self.counters().steal_attempts, attempts);
                            bump(&self.counters().stolen, 1 + moved as u64);
                            if moved > 0 {
                                self.shared.sleepers.notify_one();
                            }
                            return Some(r);
                        }
                        deque::Steal::Empty => break,
                        deque::Steal::Retry => spin_hint(),
                    }
                }
            }
        }
        bump(&self.counters().steal_attempts, attempts);
        None
    }

    /// Takes the process (`READY -> RUNNING`), steps it unless it is being
    /// killed, and moves it on.
    fn run_process(&mut self, record: Arc<Record>) {
        let kill = record.state.start_step();
        // SAFETY: `start_step` made this worker the process's owner, and it
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
            self.end(record, body, Err(kill_error(kill)));
            return None;
        }
        self.events.clear();
        // SAFETY: we own the process (`step_owned` runs inside `with_body`).
        unsafe { record.drain_events(&mut self.events) };
        if self.shared.mailbox_capacity != usize::MAX {
            let messages = self
                .events
                .iter()
                .filter(|e| matches!(e, Event::Message(_)))
                .count();
            if messages > 0 {
                record
                    .mailbox
                    .fetch_sub(messages, std::sync::atomic::Ordering::AcqRel);
            }
        }
        if body.waiting && self.events.is_empty() {
            // Woken for an event we already consumed: wait again without
            // bothering the process.
            return Some(body.waiting_state());
        }
        body.waiting = false;

        let process = body
            .process
            .as_mut()
            .expect("a live record has its process");
        let mut output = Output::new(&mut self.yields, &self.shared, record.pid);
        let mut events = Events::new(self.events.drain(..));
        let result = catch_unwind(AssertUnwindSafe(|| process.step(&mut events, &mut output)));
        drop(events);
        let status = std::mem::replace(&mut output.status, Status::Idle);
        drop(output);
        record.count_step();
        bump(&self.counters().steps, 1);

        match result {
            Err(panic) => {
                self.yields.clear();
                let message = panic_message(&*panic);
                tracing::debug!(pid = %record.pid, %message, "step panicked");
                self.end(record, body, Err(ExitError::Panicked { message }));
                None
            }
            Ok(Err(error)) => {
                self.yields.clear();
                self.end(record, body, Err(ExitError::Step(error)));
                None
            }
            Ok(Ok(())) => match status {
                Status::Done(value) => {
                    if !self.yields.is_empty() {
                        bump(&self.counters().discarded_yields, self.yields.len() as u64);
                        self.yields.clear();
                    }
                    self.end(record, body, Ok(value));
                    None
                }
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
            },
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
                    record.with_body(|body| self.end(record, body, Err(kill_error(flags))));
                }
            }
        }
    }

    /// Ends the process: closes its queue (what is left are dead letters),
    /// calls `close`, unregisters its PID and reports its outcome.
    fn end(&mut self, record: &Arc<Record>, body: &mut Body, mut outcome: Outcome) {
        record.state.complete();
        // SAFETY: `end` runs with the body borrowed, so we own the process.
        let dead = unsafe { record.close_events() };
        self.shared.dead_letters(record.pid, dead);
        if let Some(mut process) = body.process.take() {
            let closed = catch_unwind(AssertUnwindSafe(move || {
                process.close();
                drop(process);
            }));
            if let Err(panic) = closed {
                let message = panic_message(&*panic);
                tracing::debug!(pid = %record.pid, %message, "close panicked");
                if outcome.is_ok() {
                    outcome = Err(ExitError::Panicked { message });
                }
            }
        }
        self.shared.router.unregister(record.pid);
        self.shared.count_completed();
        bump(&self.counters().completed, 1);
        tracing::trace!(pid = %record.pid, ok = outcome.is_ok(), "ended");
        // The hook runs before the live count drops, so a shutdown that
        // returns has seen every hook call.
        self.shared.hooks.completed(record.pid, &outcome);
        self.shared.release_live();
        record.slot.set(outcome);
    }
}

/// A reference to the engine for a completer, from the worker's batch
/// (`Worker::engine_refs`), refilled when empty.
fn engine_ref(shared: &Arc<Shared>, batch: &mut Vec<Arc<Shared>>) -> Arc<Shared> {
    if let Some(engine) = batch.pop() {
        return engine;
    }
    batch.extend(std::iter::repeat_with(|| shared.clone()).take(ENGINE_REFS_BATCH - 1));
    shared.clone()
}

fn kill_error(flags: u32) -> ExitError {
    if flags & FORCE != 0 {
        ExitError::Cancelled
    } else {
        ExitError::Terminated
    }
}
