//! The worker loop: find a runnable process, step it, park when there is
//! nothing to run. One file per part of a round:
//!
//! - `mod.rs`: the worker's state and its loop (`run_loop`, `next_work`:
//!   due timers, then a process);
//! - `find.rs`: where the next process comes from, in the documented order
//!   (`next` slot, ready queues by turns, global queues, balancing,
//!   stealing);
//! - `step.rs`: one step of a process (its events in order, the user's
//!   `start` and `step` caught, its yields dispatched, what it asked for
//!   next);
//! - `end.rs`: a process's end (its `close`, its outcome, its relations);
//! - `idle.rs`: what a worker with nothing to run does (spin, yield,
//!   linger, park);
//! - `upgrade.rs`: replacing a process in place;
//! - `driven.rs`: a worker that a simulation drives one turn at a time, on
//!   its own thread.

mod driven;
mod end;
mod find;
mod idle;
mod step;
mod upgrade;

pub(crate) use driven::{CommandFault, Driven, StepEnd, StepObserver, Turn};
#[cfg(all(test, loom))]
pub(crate) use idle::leave_the_searchers_to_linger;

use idle::Idle;
use step::ENGINE_REFS_BATCH;

use std::sync::atomic::Ordering::Acquire;

use crate::contract::event::Event;
use crate::contract::output::Yield;
use crate::engine::commands::handler::Handlers;
use crate::engine::shared::{Runnable, Shared};
use crate::engine::stats::WorkerCounters;
use crate::record::RecordRef;
use crate::runqueue::local::{self, Local};
use crate::runqueue::shares::Shares;
use crate::sync::Arc;

/// How often (in ticks, one per search for work) a busy worker looks at its
/// timers; an idle one looks every time it runs out of work.
const TIMER_CHECK_INTERVAL: u32 = 16;
/// How long a process must have waited in another worker's `next` slot
/// before an idle worker takes it. Far above a normal step (the owner then
/// runs it itself, in cache), far below a step that blocks.
const NEXT_SLOT_PATIENCE: std::time::Duration = std::time::Duration::from_micros(200);
/// How often the one parked worker that watches (while others are busy)
/// looks for a process waiting in a busy worker's `next` slot.
const HIDDEN_RECHECK: std::time::Duration = std::time::Duration::from_millis(1);
/// One worker thread's state, its queues included.
struct Worker {
    shared: Arc<Shared>,
    /// Its queues, in an allocation of their own: code running on the
    /// worker reaches them through a thread-local pointer (`local::with_local`)
    /// while the worker is borrowed mutably, which is sound only if that
    /// borrow does not cover them (inline, Miri's Tree Borrows caught the
    /// thread-local's access as a foreign write under the `&mut self` of
    /// `run_process`). Shared, never mutably borrowed: all of `Local`'s
    /// mutation goes through cells and the deques' own `&self` methods.
    local: std::rc::Rc<Local>,
    tick: u32,
    /// Picks from the ready queues so far, which decide whose turn the
    /// next one is (`order::TURNS`).
    turn: u32,
    /// Takes from the global queues so far (their turns, the same way).
    global_turn: u32,
    /// The lane `balance` looks at first next time.
    balance_lane: usize,
    /// Consecutive runs from the `next` slot.
    next_runs: u32,
    /// Its passes per lane (see `shares.rs`); unused without groups.
    shares: Shares,
    /// The lane of the last process picked other than from the `next`
    /// slot: the steps of the chain it starts (it, then what it wakes into
    /// the slot) are charged there, so a group cannot be outpaced at its
    /// own queue's head by steps other groups' picks hand it.
    chain: usize,
    /// Per worker: the occupant last seen in its `next` slot (by address)
    /// and since when (see `take_hidden`).
    hidden: Vec<Option<(usize, std::time::Instant)>>,
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
    /// With histograms on: when the last step ended, which is when a
    /// process it requeues was made ready (no second clock read).
    step_ended: Option<std::time::Instant>,
    /// Due timers, between taking them out of the wheel and firing them.
    due_timers: crate::engine::timers::DueTimers,
    /// Type-name indices this worker has looked up (introspection).
    #[cfg_attr(not(all(feature = "introspection", not(loom))), allow(dead_code))]
    types: crate::engine::figures::TypeCache,
    /// The engine's command handlers (fixed when it was built).
    handlers: std::sync::Arc<Handlers>,
    /// A simulation's view of each step (its trace and the faults it
    /// injects); `None` on a running engine, where it costs one branch per
    /// step.
    observer: Option<Box<dyn StepObserver>>,
}

/// What one round of the worker loop found.
enum Found {
    /// A process to run.
    Process(RecordRef),
    /// No process, but due timers fired (which may have made work).
    Timers,
    /// Nothing to do.
    Nothing,
}

/// Runs worker `local.index` of `shared` until the engine exits.
pub(crate) fn run(shared: Arc<Shared>, local: Local, handlers: std::sync::Arc<Handlers>) {
    let index = local.index;
    let span = tracing::trace_span!("worker", index);
    let _span = span.enter();
    let seed = 0x9E37_79B9_7F4A_7C15 ^ (index as u64 + 1).wrapping_mul(0xA24B_AED4_963E_E407);
    let mut worker = Worker::new(shared, local, handlers, seed, None);
    // SAFETY: the worker holds its `Local` (in its own allocation) until
    // after the guard (declared after it, so dropped before it) has cleared
    // the pointer.
    let _entered = unsafe { local::enter_raw(&*worker.shared, &worker.local) };
    worker.run_loop();
}

impl Worker {
    fn new(
        shared: Arc<Shared>,
        local: Local,
        handlers: std::sync::Arc<Handlers>,
        seed: u64,
        observer: Option<Box<dyn StepObserver>>,
    ) -> Worker {
        let shares = Shares::new(shared.groups.len());
        Worker {
            // xorshift needs a non-zero state.
            rng: seed | 1,
            hidden: vec![None; shared.remotes.len()],
            shared,
            local: std::rc::Rc::new(local),
            tick: 0,
            turn: 0,
            global_turn: 0,
            balance_lane: 0,
            next_runs: 0,
            shares,
            chain: 0,
            events: Vec::with_capacity(16),
            yields: Vec::with_capacity(4),
            engine_refs: Vec::with_capacity(ENGINE_REFS_BATCH),
            requeue: None,
            step_ended: None,
            due_timers: Default::default(),
            types: Default::default(),
            handlers,
            observer,
        }
    }

    fn counters(&self) -> &WorkerCounters {
        &self.shared.remotes[self.local.index].counters
    }

    fn run_loop(&mut self) {
        let mut idle = Idle::new();
        loop {
            match self.next_work() {
                Found::Process(record) => {
                    self.found_work(&mut idle);
                    // What the steps from here on start, the next idle
                    // spells expect (see `Local::expects_answer`).
                    self.local.expects_answer.set(false);
                    self.run_process(record);
                    continue;
                }
                Found::Timers => continue,
                Found::Nothing => self.shares.idle(),
            }
            if self.shared.control.exit.load(Acquire) {
                if idle.searching {
                    self.shared.sleepers.stop_searching();
                }
                break;
            }
            self.idle_round(&mut idle);
        }
        tracing::trace!("exit");
    }

    /// One round of the loop: due timers when it is their turn, then a
    /// process to run; out of work, the due timers. The same round for a
    /// worker thread and for a simulation's turn.
    ///
    /// Always inlined, as is `run_process`: with a second caller (the
    /// simulation's turn) the compiler kept both out of the loop, and the
    /// step path ran 24% more instructions (callgrind, `step_cost yield
    /// 200 1000`: 131.2 M against 105.7 M).
    #[inline(always)]
    fn next_work(&mut self) -> Found {
        let shared = &*self.shared;
        let me = self.local.index;
        // Between steps, every `TIMER_CHECK_INTERVAL` ticks: one load when
        // this worker has no timer, a clock read when it has (a clock read
        // per step was 8% of a timer-heavy workload). Due timers taken out
        // of the wheel but not fired yet are fired a chunk at a time, the
        // next once the last one's processes have run (or at the next
        // check, whichever comes first).
        //
        // A chunk at a time while this worker's queues are empty (each
        // chunk's records still in cache when their steps come); every due
        // one at a check when they are not, so that each woken process
        // takes its place in line when its timer falls due, not after
        // work that became ready later.
        let check = self.tick.is_multiple_of(TIMER_CHECK_INTERVAL);
        let fire = match self.due_timers.any() {
            true => check || self.local.len() == 0,
            false => check && shared.timers.any_due(me, || shared.clock.now()),
        };
        if fire {
            let all = self.local.len() > 0;
            shared
                .timers
                .fire_timers(shared, me, &mut self.due_timers, all);
        }
        if let Some(record) = self.find_work() {
            return Found::Process(record);
        }
        // Out of work: due timers come first (they may make work).
        let shared = &*self.shared;
        if self.due_timers.any() || shared.timers.any_due(me, || shared.clock.now()) {
            shared
                .timers
                .fire_timers(shared, me, &mut self.due_timers, false);
            return Found::Timers;
        }
        Found::Nothing
    }
}
