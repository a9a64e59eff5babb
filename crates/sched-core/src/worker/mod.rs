//! The worker loop: find a runnable process, step it, park when there is
//! nothing to run. One file per part of a round:
//!
//! - `mod.rs`: the worker's state, its loop (`run_loop`, `next_work`: due
//!   timers, then a process) and where the next process comes from, in
//!   the documented order (`find_work`: `next` slot, ready queues by
//!   weight, global queues, balancing, stealing), one pick from the loop's
//!   round to the process;
//! - `step.rs`: one step of a process (its events in order, the user's
//!   `start` and `step` caught, its yields dispatched, what it asked for
//!   next);
//! - `end.rs`: a process's end (its `close`, its outcome, its relations);
//! - `idle.rs`: what a worker with nothing to run does (spin, yield,
//!   linger, park);
//! - `light.rs`: measuring steps, to serve light processes first;
//! - `upgrade.rs`: replacing a process in place;
//! - `driven.rs`: a worker that a simulation drives one turn at a time, on
//!   its own thread.

mod driven;
mod end;
mod idle;
mod light;
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
use crate::engine::stats::{bump, WorkerCounters};
use crate::record::RecordRef;
use crate::runqueue::local::{self, Joined, Local};
use crate::runqueue::order::{
    BALANCE_INTERVAL, GLOBAL_QUEUE_INTERVAL, LEVELS, NEXT_SLOT_RUNS, NURSERY_FLUSH_INTERVAL,
};
use crate::runqueue::shares::Shares;
use crate::sync::{spin_hint, Arc};
use crate::Priority;

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
    /// Steps left in the spell of measuring every step that a heavy
    /// step began (see `light.rs`); 0 outside one.
    measuring: u32,
    /// The mean of the steps measured recently, in nanoseconds (see
    /// `light.rs`).
    mean_ns: u64,
    /// Its passes for the takes from the global queues: the same order
    /// as its own queues', by the same weights, with a nominal step
    /// charged per take.
    global_shares: Shares,
    /// The lane `balance` looks at first next time.
    balance_lane: usize,
    /// Consecutive runs from the `next` slot.
    next_runs: u32,
    /// Its passes per lane: the order its queues are served in (see
    /// `order.rs` and `shares.rs`).
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
            global_shares: Shares::new(shared.groups.len()),
            // xorshift needs a non-zero state.
            rng: seed | 1,
            hidden: vec![None; shared.remotes.len()],
            shared,
            local: std::rc::Rc::new(local),
            tick: 0,
            measuring: 0,
            mean_ns: 0,
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

// Where a worker's next process comes from, in the order
// `runqueue/order.rs` documents and bounds: its `next` slot and nursery,
// its ready queues by weight, the global queues, a busier worker's queues
// (balancing), stealing, and processes waiting in a busy worker's `next`
// slot.

/// The most lanes one `balance` look reads of another worker (three
/// queue lengths each): with many groups, a look costs the same as with
/// few, and the lanes are covered over successive looks.
const BALANCE_LANES: usize = 8;
/// How many processes a worker moves from the global queue to its deque in
/// one go, besides the one it runs.
const GLOBAL_BATCH: usize = 16;

/// Where `find_ready`'s process came from, which decides the lane its
/// steps are charged to.
enum From {
    /// The `next` slot or the nursery, within a pick's chain: the pick's.
    Chain,
    /// A pick of this lane by the passes.
    Pick(usize),
    /// The global queues, another worker's queues or `next` slot: its own
    /// lane, lifted to the floor.
    Elsewhere,
}
impl Worker {
    /// The next process to run, in the order `runqueue/order.rs`
    /// documents (and bounds): the global queues every
    /// `GLOBAL_QUEUE_INTERVAL` ticks, the `next` slot (a few times in a
    /// row, and not past higher-level work), the ready queues by weight,
    /// then the global queues, stealing, and hidden `next` slots.
    #[inline(always)] // See `next_work`.
    pub(super) fn find_work(&mut self) -> Option<RecordRef> {
        let (r, from) = self.find_ready()?;
        match from {
            From::Chain => {}
            // The chain's steps are charged to its lane.
            From::Pick(lane) => self.chain = lane,
            // From the floor: it was not picked by the passes.
            From::Elsewhere => {
                self.chain = self.local.lane(&r);
                self.shares.lift(self.chain);
            }
        }
        Some(r)
    }

    /// `find_work`'s process, and where it came from.
    #[inline(always)] // See `next_work`.
    fn find_ready(&mut self) -> Option<(RecordRef, From)> {
        // Terminated processes first, out of their turn (two relaxed loads
        // when there are none).
        if !cfg!(loom) && !self.shared.kills.is_empty() {
            self.reap_killed();
        }
        self.tick = self.tick.wrapping_add(1);
        if self.tick.is_multiple_of(NURSERY_FLUSH_INTERVAL) {
            self.flush_nursery();
        }
        if self.tick.is_multiple_of(GLOBAL_QUEUE_INTERVAL) {
            if let Some(r) = self.take_global() {
                return Some((r, From::Elsewhere));
            }
        }
        if self.tick.is_multiple_of(BALANCE_INTERVAL) {
            if let Some(r) = self.balance() {
                return Some((r, From::Elsewhere));
            }
        }
        if let Some(r) = self.local.take_next() {
            let level = r.priority();
            if self.next_runs < NEXT_SLOT_RUNS && !self.local.higher_ready(level) {
                self.next_runs += 1;
                return Some((r, From::Chain));
            }
            // Its turn is over (or higher work waits): to its nursery,
            // where it runs once its level's queue is empty (still in
            // cache, most likely) or moves to the queue's back at the next
            // flush, and where it is also stealable.
            if let Some(intercept) = &self.shared.intercept {
                let share = self.shared.groups.stretch(r.priority().index(), r.group());
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
                return Some((r, From::Chain));
            }
        }
        self.next_runs = 0;
        if let Some((r, lane)) = self.local.pop_first(&mut self.shares) {
            return Some((r, From::Pick(lane)));
        }
        if let Some(r) = self.take_global() {
            return Some((r, From::Elsewhere));
        }
        self.steal()
            .or_else(|| self.take_hidden())
            .map(|r| (r, From::Elsewhere))
    }

    /// Queues `r` at the back of its level's queue here, and tells a
    /// simulation where it now waits (see `Intercept::ready`).
    fn push_ready_here(&self, r: RecordRef) {
        let seen = self.shared.intercept.as_ref().map(|i| {
            let share = self.shared.groups.stretch(r.priority().index(), r.group());
            (i, r.pid, r.priority(), self.local.lane(&r), share)
        });
        self.local.push_ready(r);
        if let Some((intercept, pid, level, lane, share)) = seen {
            let ahead = self.local.ahead(lane, true);
            intercept.ready(pid, level, Some(self.local.index), ahead, share, false);
        }
    }

    /// Queues `r`, woken from outside the workers, as `Local::push_woken`
    /// says (its light queue, or the back of its level's queue), and
    /// tells a simulation where it now waits.
    fn push_woken_here(&self, r: RecordRef) {
        let Some(intercept) = &self.shared.intercept else {
            self.local.push_woken(r);
            return;
        };
        let share = self.shared.groups.stretch(r.priority().index(), r.group());
        let (pid, level, lane) = (r.pid, r.priority(), self.local.lane(&r));
        let (ahead, light) = match self.local.push_woken(r) {
            Joined::Light => (self.local.ahead_light(lane), true),
            _ => (self.local.ahead(lane, true), false),
        };
        intercept.ready(pid, level, Some(self.local.index), ahead, share, light);
    }

    /// Moves the nurseries to the back of their levels' queues (see
    /// `Local::nursery`), telling a simulation where each now waits.
    fn flush_nursery(&self) {
        let shared = &*self.shared;
        let local = &*self.local;
        local.flush_nursery(|r, lane| {
            if let Some(intercept) = &shared.intercept {
                let share = shared.groups.stretch(r.priority().index(), r.group());
                let ahead = local.ahead(lane, false);
                intercept.ready(r.pid, r.priority(), Some(local.index), ahead, share, false);
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
    /// which each worker gives by its own passes, holds only on the
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
    pub(super) fn balance(&mut self) -> Option<RecordRef> {
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
    pub(super) fn take_hidden(&mut self) -> Option<RecordRef> {
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
    /// to the back of this worker's queues. Lanes are taken by the same
    /// weights as from the worker's own queues (their own passes); within
    /// a lane, outside wakeups come before new processes submitted from
    /// outside.
    fn take_global(&mut self) -> Option<RecordRef> {
        let first = self.pop_global()?;
        first.prefetch();
        // A quarter of the batch is kept for new processes, so a stream of
        // wakeups from outside cannot hold submissions back for long. The
        // wakeups then from the first one's level, then highest first.
        let mut moved = self.move_global(None, GLOBAL_BATCH / 4);
        let level = first.priority();
        let levels =
            std::iter::once(level).chain(Priority::ALL.into_iter().filter(|&l| l != level));
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
            let stretch = self
                .shared
                .groups
                .stretch(first.priority().index(), first.group());
            intercept.ready(
                first.pid,
                first.priority(),
                Some(self.local.index),
                0,
                stretch,
                false,
            );
        }
        Some(first)
    }

    /// The first process of the global queues of the lane this worker's
    /// global passes pick among those with work there (outside wakeups of
    /// the lane's level and group, then, for `Normal` and `Low`, the
    /// group's new processes), charged a nominal step.
    fn pop_global(&mut self) -> Option<RecordRef> {
        let shared = &*self.shared;
        let groups = shared.groups.len();
        let has_news = |lane: usize| lane >= groups && !shared.injector[lane % groups].is_empty();
        let has_work = |lane: usize| !shared.woken[lane].is_empty() || has_news(lane);
        // Another worker may empty the lane picked: then pick again.
        loop {
            let lane = if groups == 1 {
                let ready =
                    (0..LEVELS).fold(0, |ready, lane| ready | u32::from(has_work(lane)) << lane);
                self.global_shares.pick_among(ready)?
            } else {
                self.global_shares.pick(has_work)?
            };
            let found = shared.woken[lane].pop().or_else(|| {
                (lane >= groups)
                    .then(|| shared.injector[lane % groups].pop())
                    .flatten()
            });
            if let Some(found) = found {
                let weight = shared.groups.lane_weight(lane / groups, lane % groups);
                self.global_shares.charge(lane, weight, None);
                return Some(found);
            }
        }
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
                    match level {
                        Some(_) => self.push_woken_here(r),
                        None => self.push_ready_here(r),
                    }
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
    pub(super) fn steal(&mut self) -> Option<RecordRef> {
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
            // The light queues first (each into its lane's queue here,
            // as anything stolen), then highest level first (lanes are by
            // level, then group), each into the same lane here (empty: a
            // worker steals only when its own queues are), in their
            // order; the queues before the nurseries, whose oldest entries
            // a thief takes (in a tree of spawns, the largest subtrees).
            let lights = remote.light.iter().zip(&self.local.ready);
            let lanes = lights.chain(remote.ready.iter().zip(&self.local.ready));
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
