//! The worker loop: find a runnable process, step it (its step, the
//! commands it yielded, what it asked for next, its end), park when there
//! is nothing to run. Replacing a process in place is `upgrade.rs`; a
//! worker that a simulation drives one turn at a time, on its own thread,
//! is `driven.rs`.

mod driven;
mod upgrade;

pub(crate) use driven::{CommandFault, Driven, StepEnd, StepObserver, Turn};

use std::cell::{Cell, RefCell};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering::{Acquire, Relaxed, SeqCst};

use crate::contract::backlog::Ranks;
use crate::contract::command::Command;
use crate::contract::event::{CommandError, Event};
use crate::contract::outcome::{ExitError, Outcome};
use crate::contract::output::{Events, Output, Status, Yield};
use crate::contract::pending::{drop_unwanted, StepLists};
use crate::contract::process::close_guarded;
use crate::engine::commands::completer::Completer;
use crate::engine::commands::handler::Handlers;
use crate::engine::figures::Introspect;
use crate::engine::shared::{Runnable, Shared};
use crate::engine::stats::{bump, WorkerCounters};
use crate::engine::stepping::Stepping;
use crate::engine::upgrade::UpgradeOrder;
use crate::panic_guard::{drop_payload, drop_user_value, panic_message};
use crate::record::state::{AfterStep, BLOCKED, FORCE, IDLE, READY};
use crate::record::{Body, RecordRef};
use crate::runqueue::local::{self, Local};
use crate::runqueue::order::{
    self, BALANCE_INTERVAL, GLOBAL_QUEUE_INTERVAL, NEXT_SLOT_RUNS, NURSERY_FLUSH_INTERVAL,
};
use crate::runqueue::shares::Shares;
use crate::runqueue::sleep::Sleepers;
use crate::sync::{fence, spin_hint, thread, Arc};

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
/// The most lanes one `balance` look reads of another worker (three
/// queue lengths each): with many groups, a look costs the same as with
/// few, and the lanes are covered over successive looks.
const BALANCE_LANES: usize = 8;
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
        let shared = self.shared.clone();
        let mut idle_rounds = 0u32;
        let mut searching = false;
        let me = self.local.index;
        let linger_max = shared.linger;
        // How long this worker keeps looking before it parks, learnt from
        // its recent idle spells (see `linger_after`).
        let mut linger = std::time::Duration::ZERO;
        let mut idle_since: Option<std::time::Instant> = None;
        // The most this idle spell may linger, decided as it begins (see
        // `linger_cap`), and whether it has.
        let mut cap = std::time::Duration::ZERO;
        let mut lingered = false;
        loop {
            match self.next_work() {
                Found::Process(record) => {
                    if searching {
                        searching = false;
                        if shared.sleepers.stop_searching() {
                            shared.sleepers.notify_one();
                        }
                    }
                    idle_rounds = 0;
                    // What the steps from here on start, the next idle
                    // spells expect (see `Local::expects_answer`).
                    self.local.expects_answer.set(false);
                    self.run_process(record);
                    continue;
                }
                Found::Timers => continue,
                Found::Nothing => self.shares.idle(),
            }
            if shared.control.exit.load(Acquire) {
                if searching {
                    shared.sleepers.stop_searching();
                }
                break;
            }
            if idle_rounds == 0 {
                // A new idle spell.
                // Read, not cleared: a spell that a spurious wake-up ends
                // still awaits the same answer.
                let expects_answer = self.local.expects_answer.get();
                lingered = false;
                cap = std::time::Duration::ZERO;
                if !linger_max.is_zero() {
                    idle_since = Some(std::time::Instant::now());
                    cap = linger_cap(expects_answer, shared.others_busy(me), linger_max);
                }
            }
            if !searching && idle_rounds < YIELD_ROUNDS {
                if shared.sleepers.try_start_searching() {
                    searching = true;
                } else {
                    // Enough workers search already: park at once.
                    idle_rounds = YIELD_ROUNDS;
                    cap = std::time::Duration::ZERO;
                }
            }
            idle_rounds += 1;
            if idle_rounds < SPIN_ROUNDS {
                for _ in 0..(1 << idle_rounds) {
                    spin_hint();
                }
            } else if idle_rounds < YIELD_ROUNDS {
                thread::yield_now();
            } else if !linger.is_zero()
                && idle_since.is_some_and(|since| since.elapsed() < linger.min(cap))
            {
                if !lingered {
                    lingered = true;
                    bump(&self.counters().lingers, 1);
                }
                // Lingering, but no longer searching: producers wake a
                // parked worker as if this one slept. A lingering thread
                // that the OS has put behind a busy one (it yields) must
                // not hold work back: with the search token kept, a burst
                // left messages waiting a time slice (26 ms at p99). What
                // producers queued while it searched without waking anyone,
                // it finds itself at its next look.
                if searching {
                    searching = false;
                    leave_the_searchers_to_linger(&shared.sleepers);
                }
                thread::yield_now();
            } else {
                // Not searching any more: from here on producers must wake
                // us (`park` re-checks for work after announcing itself).
                if searching {
                    searching = false;
                    shared.sleepers.stop_searching();
                }
                tracing::trace!("park");
                // Work waiting in another worker's `next` slot wakes nobody
                // (its owner runs it after its step). If we saw some, and we
                // are the one parked worker that watches, look again once it
                // has waited long enough to be taken.
                let recheck = if self.hidden.iter().any(Option::is_some) {
                    NEXT_SLOT_PATIENCE
                } else {
                    HIDDEN_RECHECK
                };
                let slept = shared.sleepers.park(
                    me,
                    || shared.has_work() || shared.control.exit.load(Acquire),
                    || shared.timers.due_at(me),
                    recheck,
                );
                // Counted when the thread slept: a worker that the OS held
                // off its CPU past its linger finds the work at the park's
                // own look and never sleeps.
                if slept {
                    bump(&self.counters().parks, 1);
                }
                // The long-step watcher dozes while every worker is
                // parked: wake it, with the coarse clock brought up to
                // date for the steps this worker is about to stamp.
                if shared.sleepers.ring_dozer() {
                    shared.introspect.tick();
                }
                if let Some(since) = idle_since.take() {
                    // Learnt against this spell's cap: a spell longer
                    // than the cap ends lingering (for unbidden work, a
                    // trickle slower than a park costs no linger at all).
                    linger = linger_after(since.elapsed(), cap);
                }
                idle_rounds = 0;
            }
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

    /// The next process to run, in the order `runqueue/order.rs`
    /// documents (and bounds): the global queues every
    /// `GLOBAL_QUEUE_INTERVAL` ticks, the `next` slot (a few times in a
    /// row, and not past higher-level work), the ready queues by turns,
    /// then the global queues, stealing, and hidden `next` slots.
    #[inline(always)] // See `next_work`.
    fn find_work(&mut self) -> Option<RecordRef> {
        let (r, picked) = self.find_ready()?;
        if picked && self.local.groups > 1 {
            self.chain = self.local.lane(&r);
        }
        Some(r)
    }

    /// `find_work`'s process, and whether it was picked (rather than run
    /// from the `next` slot).
    #[inline(always)] // See `next_work`.
    fn find_ready(&mut self) -> Option<(RecordRef, bool)> {
        self.tick = self.tick.wrapping_add(1);
        if self.tick.is_multiple_of(NURSERY_FLUSH_INTERVAL) {
            self.flush_nursery();
        }
        if self.tick.is_multiple_of(GLOBAL_QUEUE_INTERVAL) {
            if let Some(r) = self.take_global() {
                return Some((r, true));
            }
        }
        if self.tick.is_multiple_of(BALANCE_INTERVAL) {
            if let Some(r) = self.balance() {
                return Some((r, true));
            }
        }
        if let Some(r) = self.local.take_next() {
            let level = r.priority();
            if self.next_runs < NEXT_SLOT_RUNS && !self.local.higher_ready(level) {
                self.next_runs += 1;
                return Some((r, false));
            }
            // Its turn is over (or higher work waits): to its nursery,
            // where it runs once its level's queue is empty (still in
            // cache, most likely) or moves to the queue's back at the next
            // flush, and where it is also stealable.
            if let Some(intercept) = &self.shared.intercept {
                let share = self.shared.groups.factor(r.group());
                intercept.nursery(r.pid, r.priority(), self.local.index, share);
            }
            self.local.push_nursery(r);
        } else if self.next_runs < NEXT_SLOT_RUNS {
            // The chain goes on from the nursery, newest first (in cache):
            // the same runs the `next` slot has, so the bound is the same.
            let group = if self.local.groups > 1 {
                self.chain % self.local.groups
            } else {
                0
            };
            if let Some(r) = self.local.pop_nursery_first(group) {
                self.next_runs += 1;
                return Some((r, false));
            }
        }
        self.next_runs = 0;
        if let Some(r) = self
            .local
            .pop_first(order::order(self.turn), &mut self.shares)
        {
            self.turn = self.turn.wrapping_add(1);
            return Some((r, true));
        }
        if let Some(r) = self.take_global() {
            return Some((r, true));
        }
        self.steal()
            .or_else(|| self.take_hidden())
            .map(|r| (r, true))
    }

    /// Queues `r` at the back of its level's queue here, and tells a
    /// simulation where it now waits (see `Intercept::ready`).
    fn push_ready_here(&self, r: RecordRef) {
        let seen = self.shared.intercept.as_ref().map(|i| {
            let share = self.shared.groups.factor(r.group());
            (i, r.pid, r.priority(), self.local.lane(&r), share)
        });
        self.local.push_ready(r);
        if let Some((intercept, pid, level, lane, share)) = seen {
            let ahead = self.local.ahead(lane, true);
            intercept.ready(pid, level, Some(self.local.index), ahead, share);
        }
    }

    /// Moves the nurseries to the back of their levels' queues (see
    /// `Local::nursery`), telling a simulation where each now waits.
    fn flush_nursery(&self) {
        let shared = &*self.shared;
        let local = &*self.local;
        local.flush_nursery(|r, lane| {
            if let Some(intercept) = &shared.intercept {
                let share = shared.groups.factor(r.group());
                let ahead = local.ahead(lane, false);
                intercept.ready(r.pid, r.priority(), Some(local.index), ahead, share);
            }
        });
    }

    /// Evens out one lane with one other worker (`BALANCE_INTERVAL`):
    /// the other workers in turn, and on each up to `BALANCE_LANES`
    /// lanes, from where the last look stopped. The first lane where the
    /// other holds at least twice as many processes waiting as this
    /// worker, and two more, gives one (the first of its queue, else one
    /// of its nurseries), which this worker runs at once: it was next or
    /// nearly next there,
    /// so its wait only ends sooner (the steal costs this worker's own
    /// queues one step, which `order::bound` counts). Reads a few queue
    /// lengths of one other worker; writes only when it takes a process.
    ///
    /// Why: a worker that is never idle never steals, so processes stay
    /// on the worker they landed on, and a group's or a level's share,
    /// which each worker gives by its own turns, holds only on the
    /// workers that have some of them: four processes of a group on one
    /// of two workers got a quarter of the pool, not the half their
    /// weight asked. Only a lane that is far out of balance moves: a
    /// lane evenly spread (as every lane of 200 processes continuing on
    /// two workers is, give or take a few) moves nothing, where "two
    /// more", looked for every 131 ticks, cost that workload 40 % of its
    /// speed (the looks alone, at that rate, about 15 %: see
    /// `BALANCE_INTERVAL`). Four on one worker and none on the other move one,
    /// then a second look finds three against one and stops: each worker
    /// has some of the lane, which is all its share needs.
    fn balance(&mut self) -> Option<RecordRef> {
        let others = self.shared.remotes.len();
        if others < 2 || cfg!(loom) {
            return None;
        }
        let me = self.local.index;
        let turn = (self.tick / BALANCE_INTERVAL) as usize % (others - 1);
        let remote = &self.shared.remotes[(me + 1 + turn) % others];
        let lanes = self.local.ready.len();
        for _ in 0..lanes.min(BALANCE_LANES) {
            let lane = self.balance_lane % lanes;
            self.balance_lane = self.balance_lane.wrapping_add(1);
            let theirs = remote.ready[lane].len()
                + remote.nursery[lane].len()
                + remote.nursery[lanes + lane].len();
            if theirs < 2 * self.local.waiting(lane) + 2 {
                continue;
            }
            let queues = [
                &remote.ready[lane],
                &remote.nursery[lane],
                &remote.nursery[lanes + lane],
            ];
            for stealer in queues {
                if let deque::Steal::Success(r) = stealer.steal() {
                    bump(&self.counters().stolen, 1);
                    return Some(r);
                }
            }
        }
        None
    }

    /// An idle worker's last resort: a process that has waited at least
    /// `NEXT_SLOT_PATIENCE` in another worker's `next` slot, whose owner is
    /// then inside a long step. A shorter wait is left alone: the owner
    /// runs it right after its step, in cache.
    fn take_hidden(&mut self) -> Option<RecordRef> {
        let me = self.local.index;
        let mut now = None;
        for victim in 0..self.shared.remotes.len() {
            if victim == me {
                continue;
            }
            let slot = &self.shared.remotes[victim].next;
            let occupant = slot.peek();
            if occupant.is_null() {
                self.hidden[victim] = None;
                continue;
            }
            let now = *now.get_or_insert_with(std::time::Instant::now);
            match self.hidden[victim] {
                Some((seen, since)) if seen == occupant as usize => {
                    // A simulation has no long steps (a step takes no
                    // time there): the second look takes it, as under loom.
                    if cfg!(loom)
                        || self.observer.is_some()
                        || now.duration_since(since) >= NEXT_SLOT_PATIENCE
                    {
                        self.hidden[victim] = None;
                        if let Some(record) = slot.steal(occupant) {
                            bump(&self.counters().stolen, 1);
                            return Some(record);
                        }
                    }
                }
                _ => self.hidden[victim] = Some((occupant as usize, now)),
            }
        }
        None
    }

    /// One process from the global queues, plus up to a batch more moved
    /// to the back of this worker's queues. Levels are taken by turns, as
    /// from the worker's own queues; within a level, outside wakeups come
    /// before new processes submitted from outside.
    fn take_global(&mut self) -> Option<RecordRef> {
        let levels = order::order(self.global_turn);
        let first = self.pop_global(levels)?;
        self.global_turn = self.global_turn.wrapping_add(1);
        first.prefetch();
        // A quarter of the batch is kept for new processes, so a stream of
        // wakeups from outside cannot hold submissions back for long.
        let mut moved = self.move_global(None, GLOBAL_BATCH / 4);
        for level in levels {
            moved += self.move_global(Some(level), GLOBAL_BATCH - moved);
        }
        moved += self.move_global(None, GLOBAL_BATCH - moved);
        bump(&self.counters().global_pops, 1 + moved as u64);
        if moved > 0 {
            // More work than this worker can start at once: let a parked
            // worker come and steal some.
            self.shared.sleepers.notify_one();
        }
        if let Some(intercept) = &self.shared.intercept {
            let share = self.shared.groups.factor(first.group());
            intercept.ready(
                first.pid,
                first.priority(),
                Some(self.local.index),
                0,
                share,
            );
        }
        Some(first)
    }

    /// The first process of the global queues in `levels` order (outside
    /// wakeups of a level, then, for `Normal` and `Low`, new processes);
    /// with groups, of the group this worker's shares pick among those
    /// with work at the level.
    fn pop_global(&mut self, levels: [crate::Priority; order::LEVELS]) -> Option<RecordRef> {
        let shared = &*self.shared;
        let groups = shared.groups.len();
        let shares = &mut self.shares;
        levels.into_iter().find_map(|level| {
            let first = level.index() * groups;
            let news = level != crate::Priority::High;
            loop {
                let group = if groups == 1 {
                    0
                } else {
                    shares.pick(level.index(), |g| {
                        !shared.woken[first + g].is_empty()
                            || news && !shared.injector[g].is_empty()
                    })?
                };
                let found = match shared.woken[first + group].pop() {
                    Some(woken) => Some(woken),
                    None if news => shared.injector[group].pop(),
                    None => None,
                };
                // Without groups, one look; with them, another worker may
                // have emptied the group picked: pick again.
                if found.is_some() || groups == 1 {
                    return found;
                }
            }
        })
    }

    /// Moves up to `max` processes from the global queues (outside
    /// wakeups of `level`, or, for `None`, new processes; group by group,
    /// one at a time) to the back of this worker's queues; returns how
    /// many.
    fn move_global(&self, level: Option<crate::Priority>, max: usize) -> usize {
        let groups = self.shared.groups.len();
        let shared = &*self.shared;
        let queues = match level {
            Some(level) => &shared.woken[level.index() * groups..(level.index() + 1) * groups],
            None => &shared.injector[..],
        };
        let mut moved = 0;
        while moved < max {
            let before = moved;
            for queue in queues {
                if moved == max {
                    break;
                }
                if let Some(r) = queue.pop() {
                    // Each was last touched on the thread that queued it:
                    // load it while the batch moves, before its step needs it.
                    r.prefetch();
                    self.push_ready_here(r);
                    moved += 1;
                }
            }
            if moved == before {
                break;
            }
        }
        moved
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
    fn steal(&mut self) -> Option<RecordRef> {
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
            // Highest level first (lanes are by level, then group), each
            // into the same lane here (empty: a worker steals only when its
            // own queues are), in their order; the queues before the
            // nurseries, whose oldest entries a thief takes (in a tree of
            // spawns, the largest subtrees).
            let lanes = remote.ready.iter().zip(&self.local.ready);
            // (Under loom nothing is ever nursed: `Local::push_nursery`.)
            let nursed = if cfg!(loom) { 0 } else { remote.nursery.len() };
            let nurseries = remote.nursery[..nursed]
                .iter()
                .zip(self.local.ready.iter().cycle());
            for (stealer, into) in lanes.chain(nurseries) {
                for _ in 0..4 {
                    let before = into.len();
                    match stealer.steal_half_into(into) {
                        deque::Steal::Success(r) => {
                            let moved = into.len().saturating_sub(before);
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
}

// Running one process: its step, the commands it yielded, what it asked
// for next, and its end.

impl Worker {
    /// Takes the process (`READY -> RUNNING`, or still `RUNNING` when it
    /// was queued to continue), steps it unless it is being killed, and
    /// moves it on.
    #[inline(always)]
    pub(super) fn run_process(&mut self, record: RecordRef) {
        // With groups: the group its step's time is counted to, and which
        // a process the step spawns joins.
        let group = (self.local.groups > 1).then(|| {
            let group = record.group();
            self.local.current_group.set(group);
            group
        });
        let kill = record.state.start_step();
        // A process its step spawns starts at its level. (Not under
        // loom: the engine models of `tests/loom.rs` are at loom's branch
        // limit, and this load would be one more branch per step for a
        // rule they do not check.)
        if !cfg!(loom) {
            self.local.current_level.set(record.priority());
        }
        // SAFETY: `start_step` made this worker the process's owner (or the
        // run-queue entry we popped handed us its ownership), and it
        // stays the owner for the whole closure: the closure never hands the
        // process on (`finish_step` runs in `after_step`, after the closure
        // has returned and the borrow of the body has ended, so a worker
        // that takes the process next never overlaps with this borrow), and
        // nothing in it calls `with_body` on this record again.
        let desired = unsafe { record.with_body(|body| self.step_owned(&record, body, kill)) };
        self.local.current_level.set(crate::Priority::Normal);
        if let Some(desired) = desired {
            self.after_step(&record, desired);
        }
        if let Some(group) = group {
            self.charge(group);
        }
        let step_ended = self.step_ended.take();
        if let Some(how) = self.requeue.take() {
            match step_ended {
                Some(ended) => {
                    let now = self.shared.introspect.stamp(ended);
                    // SAFETY: this worker owns the process (still RUNNING
                    // after `finish_step` asked for a requeue) and queues it.
                    unsafe { record.stamp_ready(now) };
                    self.shared.queue(record, how);
                }
                None => self.shared.schedule(record, how),
            }
        }
    }

    /// Charges the step that just ended to `group` (see `shares.rs`): its
    /// measured time, or, in a simulation, a nominal step.
    #[inline(never)]
    fn charge(&mut self, group: usize) {
        self.local.current_group.set(0);
        let groups = self.local.groups;
        let weight = self.shared.groups.weight(self.chain % groups);
        let measure = self.observer.is_none() && !cfg!(loom);
        let ns = self.shares.charge(self.chain, weight, measure);
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
        debug_assert!(self.events.is_empty(), "a previous step's events leaked");
        // SAFETY: we own the process (`step_owned` runs inside `with_body`).
        unsafe { record.drain_events(&mut self.events) };
        // An upgrade ordered from outside is among what was just drained,
        // or still on its way, while its flag is set (`engine/upgrade.rs`).
        if record.mailbox.upgrade_ordered() {
            if let Some(order) = UpgradeOrder::take_from(&mut self.events) {
                record.mailbox.release_upgrade();
                if !self.take_over(record, body, order) {
                    return None;
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
            return Some(body.waiting_state());
        }
        // It waited on a yield: its stamp is when that wait began.
        let was_blocked = body.waiting && body.blocked;
        body.waiting = false;
        // The system lane, then urgent messages, then the rest, each in
        // arrival order. What the last step left unread comes first in
        // its lane and is read in place, what just came joins the lanes'
        // backs: a step pays for what it reads and what arrived, not for
        // the backlog (`contract/backlog.rs`).
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
            None => crate::contract::urgent::order_events(&mut self.events, urgent),
        };

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
        let fresh = std::mem::take(&mut body.fresh);
        let process = body
            .process
            .get_mut()
            .expect("a live record has its process");
        #[cfg(all(feature = "introspection", not(loom)))]
        {
            if fresh {
                self.name_type(record, &*process);
            }
            record.figures.step_started(self.shared.introspect.now_ms());
        }
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
        let mut events = match &mut backlog {
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
        // One branch per step when histograms are off.
        let started = remote.histograms.as_ref().map(|histograms| {
            let now = std::time::Instant::now();
            let waited = Introspect::between(body.ready_at, self.shared.introspect.stamp(now));
            if was_blocked {
                histograms.yield_wait.record(waited);
            } else {
                histograms.record_schedule_latency(waited, || record.group());
            }
            now
        });
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
        let ended = match (&remote.histograms, started) {
            (Some(histograms), Some(started)) => {
                let ended = std::time::Instant::now();
                histograms.step.record(ended.duration_since(started));
                self.step_ended = Some(ended);
                Some(ended)
            }
            _ => None,
        };
        drop(entered);
        in_step.store(0, Relaxed);
        let status = std::mem::replace(&mut output.status, Status::Idle);
        drop(output);
        // Whatever the step did not read is kept for the next step, in
        // its lane (moved, not dropped: no user `Drop` runs here). It has
        // not been handed out, so its timers, monitors and asks are still
        // listed. A backlog was read in place and goes back as it is.
        if let Some(rest) = events.unread_batch() {
            let taken = batch - rest.len();
            crate::contract::pending::extras(&mut extras.borrow_mut())
                .others()
                .unread
                .keep(rest, taken, ranks);
        }
        drop(events);
        if let Some(backlog) = backlog.filter(|b| !b.is_empty()) {
            crate::contract::pending::extras(&mut extras.borrow_mut())
                .others()
                .unread = backlog;
        }
        body.extras = extras.into_inner();
        body.filters_events = filters.get();
        #[cfg(all(feature = "introspection", not(loom)))]
        if let Some(extras) = &body.extras {
            record.figures.set_timers(extras.timers.len());
        }
        let returned = returned.into_inner();
        if !returned.is_empty() {
            self.shared.dead_letters(record.pid, returned);
        }
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
        if let Some(observer) = &mut self.observer {
            let end = match (&failed, &status) {
                (Some(_), _) => StepEnd::Failed,
                (None, Status::Done(_)) => StepEnd::Done,
                (None, Status::Upgrade(_)) => StepEnd::Upgrade,
                (None, Status::Continue) if self.yields.is_empty() => StepEnd::Continue,
                (None, Status::Continue | Status::Idle) if self.yields.is_empty() => StepEnd::Idle,
                (None, Status::Continue | Status::Idle) => StepEnd::Yielded(self.yields.len()),
            };
            observer.after_step(record.pid, end);
        }
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
                Some(desired)
            }
        }
    }

    /// Publishes the type of a process's new instance (introspection).
    /// Out of line and cold: it runs once per instance, and its
    /// `catch_unwind` would only grow the step path's code.
    #[cfg(all(feature = "introspection", not(loom)))]
    #[cold]
    #[inline(never)]
    fn name_type(&mut self, record: &RecordRef, process: &dyn crate::contract::process::Process) {
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

    /// Moves the process on after a step (or a skipped step). Runs outside
    /// `with_body`: once `finish_step` has parked the process, a waker may
    /// queue it and another worker take it and borrow its body at once.
    fn after_step(&mut self, record: &RecordRef, desired: u32) {
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
    fn end_killed(&mut self, record: &RecordRef, body: &mut Body, flags: u32) {
        if flags & FORCE != 0 {
            if let Some(process) = body.process.get() {
                // `type_name` is the user's to override: guarded.
                let type_name = catch_unwind(AssertUnwindSafe(|| process.type_name()))
                    .unwrap_or_else(|panic| {
                        drop_payload(panic);
                        "(its type_name panicked)"
                    });
                self.shared.control.name_forced(record, type_name);
            }
        }
        self.end(record, body, Err(kill_error(flags)));
    }

    /// Ends the process: closes its queue (what is left are dead letters),
    /// calls `close`, unregisters its PID and reports its outcome.
    pub(super) fn end(&mut self, record: &RecordRef, body: &mut Body, mut outcome: Outcome) {
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
            .and_then(|x| x.existing_others())
            .map(|others| others.unread.take_all())
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
                    .filter_map(|id| self.shared.timers.cancel(id))
                    .collect();
                self.shared.timers.drop_timers(cancelled);
            }
        }
        self.shared.dead_letters(record.pid, dead);
        if let Some(process) = record.take_process(body) {
            if let Err(message) = close_guarded(process) {
                tracing::debug!(pid = %record.pid, %message, "close panicked");
                if outcome.is_ok() {
                    outcome = Err(ExitError::Panicked { message });
                }
            }
        }
        // Its PID leaves the table, then its monitors fire and its names are
        // freed: a watcher that reacts (a supervisor restarting it under
        // the same name) finds the name available.
        let reason = crate::contract::down::ExitReason::of(&outcome);
        self.shared.retire(
            record,
            reason,
            crate::contract::outcome::detail_of(&outcome),
        );
        // The monitors it held on others go, and with them the references
        // to this record they kept.
        let others = extras.as_ref().and_then(|x| x.others_ref());
        for monitor in others.iter().flat_map(|others| others.monitoring.iter()) {
            self.shared.monitors.remove(&self.shared, *monitor);
        }
        drop(extras);
        // This worker's cache no longer keeps the ended record alive (other
        // workers' caches drop it when they next send to the PID or reuse
        // the entry; either way it holds no process and no result).
        self.local.forget_route(record.pid);
        bump(&self.counters().completed, 1);
        tracing::debug!(pid = %record.pid, %reason, "ended");
        if let Some(observer) = &mut self.observer {
            observer.ended(record.pid, reason);
        }
        // The slot is free before the hook runs, so a hook may start a
        // replacement even at the process limit. A shutdown that returns
        // has still seen every hook call: it joins the workers, and this
        // worker runs the hook before it looks for work (or exits) again.
        self.shared.live.release_live(&self.shared);
        self.shared.hooks.completed(
            crate::engine::Context::of(&self.shared),
            record.pid,
            &outcome,
        );
        if let Some(unwanted) = record.slot.set(outcome, RecordRef::spare(record)) {
            drop_user_value(unwanted, record.pid, "a result nobody waits for");
        }
    }
}

/// A searching worker starts to linger: it leaves `searching`, then
/// fences, and only then looks again (its next round of `run_loop`). The
/// fence pairs with a producer's fence before it reads `searching` (see
/// `runqueue/PROTOCOL.md`, lingering): either the producer sees this worker
/// gone and wakes a parked one, or this worker's next look sees the work.
/// Without it the look could miss work whose producer skipped its wakeup
/// because it still counted this worker, which then found the work only
/// at its park, up to a whole linger later. Apart from the loop so that the
/// loom model `a_lingering_look_sees_work_whose_producer_counted_it` runs
/// this very code; inlined, so the loop is what it was.
#[inline(always)]
pub(crate) fn leave_the_searchers_to_linger(sleepers: &Sleepers) {
    sleepers.stop_searching();
    fence(SeqCst);
}

/// The most an idle spell that begins now may linger before the worker
/// parks (for as long as `linger_after` allows within it). Lingering costs
/// CPU for as long as it lasts; parking costs a system call on the waker's
/// side and a wake-up on this one. So a worker lingers up to `max` (the
/// builder's `idle_linger`) only when work is likely to come back soon:
/// when a step here started something whose answer comes from outside the
/// workers (`expects_answer`: a send or an ask to another node, a command),
/// or when another worker is running a step and may hand work over (a
/// message, a steal). Otherwise work can only come unbidden from outside
/// (messages or spawns from other threads), and the worker lingers at most
/// [`UNBIDDEN_LINGER`], about what a park and its wake-up cost: a producer
/// faster than that finds it awake, a trickle slower than that parks it at
/// once in every gap. Lingering up to `max` for such a trickle spent 4 to
/// 7 times tokio's CPU per message (`trickle` bench, gaps of 100 to 250
/// µs). (Counting merely awake workers as a reason was not enough: two
/// idle workers, each lingering because the other was awake, still spent
/// 1.6 to 2.2 times tokio's.)
fn linger_cap(
    expects_answer: bool,
    others_busy: bool,
    max: std::time::Duration,
) -> std::time::Duration {
    if expects_answer || others_busy {
        max
    } else {
        max.min(UNBIDDEN_LINGER)
    }
}

/// The most an idle worker lingers for work that nothing on it awaits
/// (see `linger_cap`): about the CPU a park and its wake-up cost on the
/// machines measured (a trickle that parks the worker in every gap spends
/// 30 to 45 µs of CPU per message, the step and the poster included).
const UNBIDDEN_LINGER: std::time::Duration = std::time::Duration::from_micros(25);

/// How long a worker lingers (keeps looking, yielding its thread between
/// looks) before it parks next, after an idle spell of `waited` that ended
/// in a park. Waking a parked thread costs a system call on the waker's
/// side and, on the sleeper's, the time for the kernel (or a hypervisor) to
/// bring its CPU back; when work comes back within a few hundred
/// microseconds, as answers over a network do, that cost is a large part
/// of the wait. So a worker whose spells are short lingers a little longer
/// than the last one (and is then found by the work, unparked); one whose
/// spell outlasted `max` goes back to parking at once, so that an idle
/// engine does not poll.
fn linger_after(waited: std::time::Duration, max: std::time::Duration) -> std::time::Duration {
    if waited > max {
        std::time::Duration::ZERO
    } else {
        (waited + waited / 2).min(max)
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

#[cfg(all(test, not(loom)))]
mod tests {
    use super::{linger_after, linger_cap, UNBIDDEN_LINGER};
    use std::time::Duration;

    const MAX: Duration = Duration::from_micros(300);

    #[test]
    fn only_awaited_work_or_a_busy_neighbour_earns_the_full_linger() {
        assert_eq!(linger_cap(true, false, MAX), MAX);
        assert_eq!(linger_cap(false, true, MAX), MAX);
        assert_eq!(linger_cap(false, false, MAX), UNBIDDEN_LINGER);
        // Never above the builder's limit, and none when it is zero.
        let low = UNBIDDEN_LINGER / 2;
        assert_eq!(linger_cap(false, false, low), low);
        assert_eq!(linger_cap(true, true, Duration::ZERO), Duration::ZERO);
        // A trickle slower than the unbidden cap stops lingering at the
        // first park; a producer faster than it keeps the worker awake.
        let slow = UNBIDDEN_LINGER * 4;
        assert_eq!(
            linger_after(slow, linger_cap(false, false, MAX)),
            Duration::ZERO
        );
        let fast = UNBIDDEN_LINGER / 4;
        assert!(linger_after(fast, linger_cap(false, false, MAX)) > fast);
    }

    #[test]
    fn a_short_spell_lingers_half_again_as_long_up_to_the_limit() {
        assert_eq!(
            linger_after(Duration::from_micros(100), MAX),
            Duration::from_micros(150)
        );
        assert_eq!(linger_after(Duration::from_micros(250), MAX), MAX);
        assert_eq!(linger_after(MAX, MAX), MAX);
    }

    #[test]
    fn a_spell_past_the_limit_parks_at_once_next_time() {
        assert_eq!(
            linger_after(MAX + Duration::from_nanos(1), MAX),
            Duration::ZERO
        );
        assert_eq!(linger_after(Duration::from_secs(5), MAX), Duration::ZERO);
        assert_eq!(
            linger_after(Duration::from_micros(1), Duration::ZERO),
            Duration::ZERO
        );
    }
}
