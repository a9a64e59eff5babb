//! The run queues a worker thread owns, and how code running on a worker
//! finds them.

use std::cell::{Cell, RefCell};
use std::ptr;

use relay::Pid;

use super::next_slot::NextSlot;
use super::order::{LEVELS, LIGHT_RUNS};
use super::shares::Shares;
use crate::record::RecordRef;
use crate::sync::{thread_local, Arc};
use crate::table::IdCache;
use crate::Priority;

/// A worker's own run queues (the order it serves them in is `order.rs`).
///
/// - `next`: the process most recently woken or spawned by a step on this
///   worker, run as soon as the step ends. Not stealable: a process that a
///   step hands to another (a spawned link, a message's receiver) runs on
///   the same core, with its data still in cache, instead of waking an idle
///   worker to steal it. Only the owner ever touches it.
/// - `ready`: one first-in-first-out queue per priority level (per level
///   and group, on an engine with groups: see `shares.rs`), which every
///   other source of ready work feeds (a process displaced from `next`, one
///   that asked to continue, one woken by its timer, work taken from the
///   global queues or stolen). Work-stealing deques used from one end:
///   the owner pushes at the back and takes from the front, as thieves do.
/// - `nursery`: per lane too, the processes a step woke or spawned that
///   found the `next` slot taken (or whose runs from the slot were used
///   up), in two generations: served newest first (while their data is
///   still in cache: a tree of spawns is walked depth first), within the
///   runs a pick's chain may take or once their level's `ready` queue is
///   empty. Every [`NURSERY_FLUSH_INTERVAL`](super::order::NURSERY_FLUSH_INTERVAL)
///   ticks the older generation moves to the back of `ready`, oldest
///   first, and the younger one becomes the older (see `order.rs`).
///   Thieves take the oldest entries.
/// - `light`: per lane, the processes
///   woken (by a timer, or from outside the workers) whose last measured
///   step was light, while this worker measures its steps: served before
///   the level's `ready` queue, up to [`LIGHT_RUNS`] picks in a row while
///   that queue has work (see `order.rs`, "Light processes first").
pub(crate) struct Local {
    pub(crate) index: usize,
    /// Shared with thieves (see `NextSlot`).
    pub(crate) next: Arc<NextSlot>,
    /// Records this worker's steps recently sent to, by table slot: see
    /// the engine's send path. Holds at most `ROUTES` records, so a process that
    /// ended keeps its record (not its process object, which ending drops)
    /// alive only until its entry is overwritten or the worker exits.
    routes: RefCell<Box<[Route]>>,
    /// Free process-table ids: this worker's PIDs come from here, and the
    /// slots of processes that end here go back here.
    pub(crate) ids: RefCell<IdCache>,
    /// By lane: `Priority::index * groups + group`.
    pub(crate) ready: Box<[deque::Worker<RecordRef>]>,
    /// By generation, then lane (`generation * lanes + lane`): pushed
    /// and popped at the back by the owner, stolen from the front.
    pub(crate) nursery: Box<[deque::Worker<RecordRef>]>,
    /// By lane: light processes woken here (see the type's
    /// documentation). Stolen like `ready`.
    pub(crate) light: Box<[deque::Worker<RecordRef>]>,
    /// At least how many processes the light queues hold (thieves take
    /// some without telling; a look that finds a level's queue empty
    /// counts again): zero spares every pick the look at them, which is
    /// every pick of a workload of short steps.
    lit: Cell<usize>,
    /// By lane: how many picks in a row took from `light` while `ready`
    /// had work.
    light_runs: Box<[Cell<u32>]>,
    /// Whether this worker measures its steps now (a recent step was
    /// heavy): only then does a woken light process join `light`.
    pub(crate) lighting: Cell<bool>,
    /// Which generation of `nursery` takes new entries (0 or 1).
    young: Cell<usize>,
    /// At least how many processes the nurseries hold (thieves take some
    /// without telling; each flush counts again): zero spares every look
    /// at them, which is most ticks of most workloads.
    nursed: Cell<usize>,
    /// How many groups the engine has (1 without groups).
    pub(crate) groups: usize,
    /// The group of the process being stepped here (with groups only): a
    /// process its step spawns joins it.
    pub(crate) current_group: Cell<usize>,
    /// The level of the process being stepped here (`Normal` between
    /// steps): a process its step spawns starts at it.
    pub(crate) current_level: Cell<Priority>,
    /// Whether a step here, since this worker last found work, started
    /// something whose answer comes from outside the workers (a send to
    /// another node, a command): then the worker may linger when it goes
    /// idle, since the answer is likely to come back soon (see the
    /// worker's loop). Cleared when the worker next finds work.
    pub(crate) expects_answer: Cell<bool>,
}

impl std::fmt::Debug for Local {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Local")
            .field("index", &self.index)
            .field("queued", &self.len())
            .finish_non_exhaustive()
    }
}

impl Local {
    pub(crate) fn new(index: usize, capacity: usize, groups: usize) -> Self {
        Local {
            index,
            next: Arc::new(NextSlot::default()),
            routes: RefCell::new((0..ROUTES).map(|_| Route::default()).collect()),
            ids: RefCell::new(IdCache::new()),
            ready: (0..LEVELS * groups)
                .map(|_| deque::Worker::with_capacity(capacity))
                .collect(),
            // None under loom (see `push_nursery`): each deque's handles
            // are shared atomics a model would branch on at start and exit.
            nursery: (0..if cfg!(loom) { 0 } else { 2 * LEVELS * groups })
                .map(|_| deque::Worker::with_capacity(capacity))
                .collect(),
            // None under loom, as the nurseries: a model's step costs
            // nothing, so no process is ever measured light there.
            light: (0..if cfg!(loom) { 0 } else { LEVELS * groups })
                .map(|_| deque::Worker::with_capacity(capacity))
                .collect(),
            lit: Cell::new(0),
            light_runs: (0..LEVELS * groups).map(|_| Cell::new(0)).collect(),
            lighting: Cell::new(false),
            young: Cell::new(0),
            nursed: Cell::new(0),
            groups,
            current_group: Cell::new(0),
            current_level: Cell::new(Priority::Normal),
            expects_answer: Cell::new(false),
        }
    }

    /// The queue `record` waits in: its level's, and its group's within
    /// the level.
    #[inline]
    pub(crate) fn lane(&self, record: &RecordRef) -> usize {
        record.lane(self.groups)
    }

    /// Queues `record` at the back of its lane.
    #[inline]
    pub(crate) fn push_ready(&self, record: RecordRef) {
        self.ready[self.lane(&record)].push(record);
    }

    /// Whether a light queue may hold a process (the `lit` gate: it may
    /// say so a little longer than it is true, never less).
    #[inline]
    pub(crate) fn has_light(&self) -> bool {
        self.lit.get() > 0
    }

    /// Queues `record`, woken by its timer or from outside the workers:
    /// in its lane's `light` queue when this worker measures its steps
    /// and the process's last measured step was light, else at the back
    /// of its lane's queue.
    /// Returns which it joined.
    #[inline]
    pub(crate) fn push_woken(&self, record: RecordRef) -> Joined {
        if self.lighting.get() && !record.heavy() && !cfg!(loom) {
            self.light[self.lane(&record)].push(record);
            self.lit.set(self.lit.get() + 1);
            Joined::Light
        } else {
            self.push_ready(record);
            Joined::Queue
        }
    }

    /// How many processes of `lane` a process just queued in its light
    /// queue has ahead of it there. For the simulation's check only, as
    /// [`ahead`](Local::ahead).
    pub(crate) fn ahead_light(&self, lane: usize) -> usize {
        self.light[lane].len().saturating_sub(1)
    }

    /// How many processes of `lane` a process has ahead of it here: one
    /// just queued (`queued`), or one in the `next` slot, were it moved to
    /// the queue now. For the simulation's check only (a running engine
    /// never asks): only this worker pushes, so in a simulation, where
    /// nothing runs meanwhile, the count is exact.
    pub(crate) fn ahead(&self, lane: usize, queued: bool) -> usize {
        let len = self.ready[lane].len();
        if queued {
            len.saturating_sub(1)
        } else {
            len
        }
    }

    /// Takes the oldest process of `lane` (from the end thieves take from,
    /// without the epoch pin a stealer pays).
    #[inline]
    pub(crate) fn pop_ready(&self, lane: usize) -> Option<RecordRef> {
        let queue = &self.ready[lane];
        // Two relaxed loads: an empty level (most are, most of the time)
        // costs no claim. Only this worker pushes, so a stale answer can
        // only be "not empty" for a queue a thief just emptied, which the
        // claim then finds empty.
        if queue.is_empty() {
            return None;
        }
        oldest(queue)
    }

    /// Takes the next process of the lane `shares` picks among those
    /// with work here (`order.rs`: the least pass, by the lanes'
    /// weights): the oldest of its light queue (within `pop_light`'s
    /// runs), else the oldest of its `ready` queue, else the newest of its
    /// nursery. Returns it with its lane.
    #[inline]
    pub(crate) fn pop_first(&self, shares: &mut Shares) -> Option<(RecordRef, usize)> {
        // A thief may empty the lane picked: then the next pick.
        loop {
            let lane = if self.groups == 1 {
                let ready = (0..LEVELS).fold(0, |ready, lane| {
                    ready | u32::from(self.has_work(lane)) << lane
                });
                shares.pick_among(ready)?
            } else {
                shares.pick(|lane| self.has_work(lane))?
            };
            // The light queues are looked at only while they may hold a
            // process: a workload of short steps never fills them.
            let light = || (self.lit.get() > 0).then(|| self.pop_light(lane)).flatten();
            if let Some(r) = light()
                .or_else(|| self.pop_ready(lane))
                .or_else(|| self.pop_nursery(lane))
            {
                return Some((r, lane));
            }
        }
    }

    /// The oldest light process of `lane` (an engine without groups has
    /// one lane per level), unless it has had [`LIGHT_RUNS`] picks in a
    /// row while the lane's `ready` queue has work: then that queue's
    /// turn comes first, which the caller takes.
    #[inline]
    fn pop_light(&self, lane: usize) -> Option<RecordRef> {
        let light = &self.light[lane];
        let runs = &self.light_runs[lane];
        if light.is_empty() {
            self.lit.set(self.light.iter().map(|q| q.len()).sum());
            return None;
        }
        if runs.get() >= LIGHT_RUNS && !self.ready[lane].is_empty() {
            runs.set(0);
            return None;
        }
        let popped = oldest(light);
        if popped.is_some() {
            runs.set(runs.get().saturating_add(1));
            self.lit.set(self.lit.get().saturating_sub(1));
        }
        popped
    }

    /// Whether `lane` has a process here, in its queue, its light queue
    /// or its nursery.
    #[inline]
    fn has_work(&self, lane: usize) -> bool {
        let lanes = self.ready.len();
        !self.ready[lane].is_empty()
            || self.lit.get() > 0 && self.light.get(lane).is_some_and(|q| !q.is_empty())
            || self.nursed.get() > 0
                && (!self.nursery[lane].is_empty() || !self.nursery[lanes + lane].is_empty())
    }

    /// The newest process of the highest level's nurseries, unless a
    /// process of a higher level waits in a queue (same-level work does
    /// not stop it: the chain's runs are bounded as the `next` slot's
    /// are): what a pick's chain runs after its `next` slot.
    #[inline]
    ///
    /// With groups, only the nurseries of `group` (the group the chain's
    /// steps are charged to, see `shares.rs`): another group's would run
    /// on this one's share.
    pub(crate) fn pop_nursery_first(&self, group: usize) -> Option<RecordRef> {
        if self.nursed.get() == 0 {
            return None;
        }
        for level in 0..LEVELS {
            let lanes = level * self.groups..(level + 1) * self.groups;
            if let Some(r) = self.pop_nursery(level * self.groups + group) {
                return Some(r);
            }
            let light = self.lit.get() > 0;
            if lanes
                .into_iter()
                .any(|lane| !self.ready[lane].is_empty() || light && !self.light[lane].is_empty())
            {
                return None;
            }
        }
        None
    }

    /// Takes the newest process of `lane`'s nursery: of the younger
    /// generation, then of the older.
    #[inline]
    fn pop_nursery(&self, lane: usize) -> Option<RecordRef> {
        if self.nursed.get() == 0 {
            return None;
        }
        let young = self.young.get();
        let lanes = self.ready.len();
        let popped = [young, young ^ 1].into_iter().find_map(|generation| {
            let nursery = &self.nursery[generation * lanes + lane];
            if nursery.is_empty() {
                None
            } else {
                nursery.pop()
            }
        });
        if popped.is_some() {
            self.nursed.set(self.nursed.get() - 1);
        }
        popped
    }

    /// Queues `record` in its lane's younger nursery (newest first, see
    /// the type's documentation).
    ///
    /// Under loom there are no nurseries: the process joins its queue's
    /// back, as it did before they existed. A whole worker loop is a long
    /// path for a model, and every look at six more empty deques per
    /// worker took the engine models of `tests/loom.rs` past loom's
    /// branch limit; the nurseries are the same stealable deques as the
    /// queues, handed over by the same protocol, which those models cover.
    #[inline]
    pub(crate) fn push_nursery(&self, record: RecordRef) {
        if cfg!(loom) {
            self.push_ready(record);
            return;
        }
        let lane = self.lane(&record);
        self.nursery[self.young.get() * self.ready.len() + lane].push(record);
        self.nursed.set(self.nursed.get() + 1);
    }

    /// Moves the older generation of the nurseries to the back of their
    /// lanes' `ready` queues, oldest first, calling `moved` with each one
    /// and its lane just before it joins the queue; the younger generation
    /// becomes the older. Returns how many moved.
    pub(crate) fn flush_nursery(&self, mut moved: impl FnMut(&RecordRef, usize)) -> usize {
        if self.nursed.get() == 0 {
            return 0;
        }
        let lanes = self.ready.len();
        let old = self.young.get() ^ 1;
        let mut count = 0;
        for lane in 0..lanes {
            let nursery = &self.nursery[old * lanes + lane];
            if nursery.is_empty() {
                continue;
            }
            while let Some(r) = oldest(nursery) {
                moved(&r, lane);
                self.ready[lane].push(r);
                count += 1;
            }
        }
        self.young.set(old);
        // What is left is the generation that was younger (less what
        // thieves took).
        let left = self.nursery[(old ^ 1) * lanes..][..lanes]
            .iter()
            .map(|q| q.len())
            .sum();
        self.nursed.set(left);
        count
    }

    /// How many processes of `lane` wait here, in its queue and its
    /// nurseries (not the `next` slot's).
    pub(crate) fn waiting(&self, lane: usize) -> usize {
        let lanes = self.ready.len();
        let nursed = if self.nursed.get() > 0 {
            self.nursery[lane].len() + self.nursery[lanes + lane].len()
        } else {
            0
        };
        self.ready[lane].len() + nursed
    }

    /// Whether a level above `level` has a process ready here.
    #[inline]
    pub(crate) fn higher_ready(&self, level: Priority) -> bool {
        let above = level.index() * self.groups;
        (0..above).any(|lane| self.has_work(lane))
    }

    /// Makes `record` the process to run next. Returns whether the slot
    /// was taken: its previous occupant then moved to its lane's
    /// (stealable) nursery, where an idle worker could help.
    /// `displaced` sees the previous occupant just before it moves.
    #[inline]
    pub(crate) fn put_next(&self, record: RecordRef, displaced: impl FnOnce(&RecordRef)) -> bool {
        match self.next.put(record) {
            None => false,
            Some(previous) => {
                displaced(&previous);
                self.push_nursery(previous);
                true
            }
        }
    }

    /// Runs `f` on the record cached for `pid`, if any, borrowed from the
    /// cache: no reference-count increment and decrement (two atomic
    /// read-modify-writes on the target's record) per message. `f` must not
    /// change the cache (`remember_route`, `forget_route`); queueing the
    /// record and waking workers do not.
    pub(crate) fn with_cached_route<R>(
        &self,
        pid: Pid,
        f: impl FnOnce(&RecordRef) -> R,
    ) -> Option<R> {
        let routes = self.routes.borrow();
        match &routes[route_index(pid)] {
            Route {
                pid: cached,
                record: Some(record),
            } if *cached == pid => Some(f(record)),
            _ => None,
        }
    }

    /// Caches `record` as the route to its PID. The caller's reference
    /// moves in (a clone and a drop would be two more read-modify-writes
    /// on the record's count, a line its other senders share).
    pub(crate) fn remember_route(&self, record: RecordRef) {
        let mut routes = self.routes.borrow_mut();
        let entry = &mut routes[route_index(record.pid)];
        entry.pid = record.pid;
        let evicted = entry.record.replace(record);
        // Dropped after the borrow ends: if it was the last reference,
        // the record's drop must be free to call back into the engine.
        drop(routes);
        drop(evicted);
    }

    /// Drops the cached route to `pid` (its process ended).
    pub(crate) fn forget_route(&self, pid: Pid) {
        let mut routes = self.routes.borrow_mut();
        let entry = &mut routes[route_index(pid)];
        if entry.pid == pid {
            let forgotten = entry.record.take();
            drop(routes);
            drop(forgotten);
        }
    }

    /// Makes `record` the process to run next if nothing is there yet;
    /// otherwise queues it as a woken process (`push_woken`), leaving the
    /// slot's process where it is. Returns where it went.
    /// Only this worker fills the slot, so a slot seen empty stays empty
    /// until the `put`.
    #[inline]
    pub(crate) fn offer_next(&self, record: RecordRef) -> Joined {
        if self.next.is_empty() {
            let displaced = self.put_next(record, |_| {});
            debug_assert!(!displaced, "only the owner fills the slot");
            Joined::Next
        } else {
            self.push_woken(record)
        }
    }

    /// Takes the process to run next, if any.
    pub(crate) fn take_next(&self) -> Option<RecordRef> {
        self.next.take()
    }

    pub(crate) fn len(&self) -> usize {
        usize::from(!self.next.is_empty())
            + self
                .ready
                .iter()
                .chain(self.light.iter())
                .chain(self.nursery.iter())
                .map(|q| q.len())
                .sum::<usize>()
    }
}

/// Where a woken process joined a worker's queues.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Joined {
    /// The `next` slot (it was empty).
    Next,
    /// The back of its lane's queue.
    Queue,
    /// Its level's light queue.
    Light,
}

/// The index of the lane of `level` and group `group` among `groups`.
#[inline]
pub(crate) fn lane(level: Priority, group: usize, groups: usize) -> usize {
    level.index() * groups + group
}

/// Takes the oldest entry of one of the worker's own deques (from the end
/// stealers take from, without the epoch pin a stealer pays), retrying
/// while a thief races it.
fn oldest(queue: &deque::Worker<RecordRef>) -> Option<RecordRef> {
    loop {
        match queue.steal_own() {
            deque::Steal::Success(r) => return Some(r),
            deque::Steal::Empty => return None,
            deque::Steal::Retry => crate::sync::spin_hint(),
        }
    }
}

/// An entry of a worker's route cache: the PID beside its record, so
/// that a lookup that misses (most, when steps send to more processes
/// than there are entries) compares within the cache's own lines instead
/// of loading the cached record's (a cache miss a send in a ping-pong
/// profile).
struct Route {
    /// The record's PID (meaningless while `record` is `None`).
    pid: Pid,
    record: Option<RecordRef>,
}

impl Default for Route {
    fn default() -> Self {
        Route {
            pid: Pid::OUTSIDE,
            record: None,
        }
    }
}

/// Entries in a worker's route cache (a power of two). Direct-mapped, by
/// table slot (`route_index`): with 64 entries, the 1 000 peers of a
/// worker's steps in the suite's ping-pong were nearly all misses, each a
/// load of the target's table slot from another core's cache (two fifths
/// of `send_local`'s samples); 4 096 entries (96 KiB a worker) keep them
/// and took that benchmark from 1.36-1.38 to 1.25-1.30 of tokio's time.
/// What it costs beside the memory: up to this many ended records per
/// worker stay allocated until overwritten (see `Local::routes`).
const ROUTES: usize = 4096;

/// Where `pid` goes in the route cache: its process-table slot (the id's
/// low 32 bits, see `table/mod.rs`), mixed with its node. The table hands
/// out slots densely and reuses those of ended processes, so a worker's
/// steps sending to processes of one node in any `ROUTES` consecutive
/// slots find each in an entry of its own, and a process that took an ended one's slot
/// takes its entry too (which frees the ended record's cached reference).
/// A hash of the whole id spread the same processes at random: about one
/// in five collided in the suite's ping-pong (2 000 processes, each new
/// round new generations).
fn route_index(pid: Pid) -> usize {
    let slot = pid.id() & u64::from(u32::MAX);
    let node = u64::from(pid.node()).wrapping_mul(0x9E37_79B9);
    (slot ^ node) as usize & (ROUTES - 1)
}

#[cfg(not(loom))]
thread_local! {
    /// The worker running on this thread: its engine and its queues.
    static CURRENT: Cell<(*const (), *const Local)> = const { Cell::new((ptr::null(), ptr::null())) };
}

#[cfg(loom)]
thread_local! {
    /// The worker running on this thread: its engine and its queues.
    static CURRENT: Cell<(*const (), *const Local)> = Cell::new((ptr::null(), ptr::null()));
}

/// Marks this thread as running the worker of `engine` whose queues are
/// `local`, until the guard is dropped. The engine is only an identity
/// here (its address), so the queues need not know the engine's type.
///
/// # Safety
///
/// `local` must stay where it is, alive, until the guard is dropped (the
/// guard does not borrow it, so that its owner can be borrowed mutably
/// meanwhile).
pub(crate) unsafe fn enter_raw<E>(engine: &E, local: &Local) -> EnterGuard<'static> {
    CURRENT.with(|c| c.set((identity(engine), local as *const Local)));
    EnterGuard {
        _marker: std::marker::PhantomData,
    }
}

/// Clears the thread's worker on drop.
#[derive(Debug)]
pub(crate) struct EnterGuard<'a> {
    _marker: std::marker::PhantomData<&'a Local>,
}

impl Drop for EnterGuard<'_> {
    fn drop(&mut self) {
        CURRENT.with(|c| c.set((ptr::null(), ptr::null())));
    }
}

/// Runs `f` with this thread's queues if it is a worker of `engine`.
#[inline]
pub(crate) fn with_local<E, R>(engine: &E, f: impl FnOnce(&Local) -> R) -> Option<R> {
    let (current, local) = CURRENT.with(|c| c.get());
    if ptr::eq(current, identity(engine)) && !local.is_null() {
        // SAFETY: the pointer was set by `enter` on this thread and is
        // cleared by its guard before the `Local` it points to goes away;
        // the worker loop holds both for as long as the guard lives.
        Some(f(unsafe { &*local }))
    } else {
        None
    }
}

/// The address that identifies an engine to `CURRENT`.
fn identity<E>(engine: &E) -> *const () {
    (engine as *const E).cast()
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::contract::output::{Events, Output};

    struct Idle;

    impl crate::Process for Idle {
        type Done = ();
        fn step(
            &mut self,
            _: &mut Events<'_>,
            _: &mut Output<'_>,
        ) -> Result<(), crate::contract::error::BoxError> {
            Ok(())
        }
    }

    /// A record whose process is heavy (two heavy steps measured) or not.
    fn record(id: u64, heavy: bool) -> RecordRef {
        let record = RecordRef::new(Pid::local(id), Idle);
        record.measured(heavy);
        record.measured(heavy);
        assert_eq!(record.heavy(), heavy);
        record
    }

    /// Which of `ids` the next `n` picks take, by PID id.
    fn picks(local: &Local, n: usize) -> Vec<u64> {
        let mut shares = Shares::new(1);
        (0..n)
            .filter_map(|_| local.pop_first(&mut shares).map(|(r, _)| r.pid.id()))
            .collect()
    }

    #[test]
    fn a_light_queue_takes_three_picks_in_four_while_the_level_queue_has_work() {
        let local = Local::new(0, 64, 1);
        local.lighting.set(true);
        // Heavy processes 1-3 continue (the back of the queue); light
        // ones 11-17 are woken.
        for id in 1..=3 {
            local.push_ready(record(id, true));
        }
        for id in 11..=17 {
            local.push_woken(record(id, false));
        }
        assert_eq!(
            picks(&local, 10),
            [11, 12, 13, 1, 14, 15, 16, 2, 17, 3],
            "three light, one heavy, until the light queue is empty"
        );
    }

    #[test]
    fn a_heavy_process_or_a_worker_that_does_not_measure_keeps_the_queue_order() {
        let local = Local::new(0, 64, 1);
        local.lighting.set(true);
        local.push_ready(record(1, true));
        // Woken, but heavy: the back of the queue.
        local.push_woken(record(2, true));
        // Light, but the worker does not measure: the back of the queue.
        local.lighting.set(false);
        local.push_woken(record(3, false));
        local.lighting.set(true);
        local.push_woken(record(4, false));
        assert_eq!(picks(&local, 4), [4, 1, 2, 3]);
    }

    /// A table PID's id: `generation << 32 | (slot + 1)`.
    fn table_pid(node: u32, slot: u64, generation: u64) -> Pid {
        Pid::new(node, generation << 32 | (slot + 1))
    }

    #[test]
    fn a_route_is_found_for_each_of_as_many_live_processes_as_entries() {
        let local = Local::new(0, 64, 1);
        // A later generation of each slot: the table's ids a few rounds
        // of processes in.
        let records: Vec<RecordRef> = (0..ROUTES as u64)
            .map(|slot| RecordRef::new(table_pid(0, slot, 7), Idle))
            .collect();
        for record in &records {
            local.remember_route(record.clone());
        }
        for record in &records {
            let found = local.with_cached_route(record.pid, |r| RecordRef::ptr_eq(r, record));
            assert_eq!(found, Some(true), "{} was evicted", record.pid);
        }
    }

    #[test]
    fn a_process_in_a_reused_slot_takes_the_ended_one_s_route() {
        let local = Local::new(0, 64, 1);
        let ended = RecordRef::new(table_pid(0, 5, 0), Idle);
        local.remember_route(ended.clone());
        assert_eq!(RecordRef::count(&ended), 2);
        let next = RecordRef::new(table_pid(0, 5, 1), Idle);
        local.remember_route(next.clone());
        assert_eq!(
            RecordRef::count(&ended),
            1,
            "the ended record's route was dropped"
        );
        assert!(local.with_cached_route(ended.pid, |_| ()).is_none());
        assert!(local.with_cached_route(next.pid, |_| ()).is_some());
        // The same slot of another node is another route.
        let remote = table_pid(3, 5, 1);
        assert!(local.with_cached_route(remote, |_| ()).is_none());
    }

    #[test]
    fn one_heavy_step_does_not_make_a_process_heavy() {
        let record = RecordRef::new(Pid::local(1), Idle);
        assert!(record.heavy(), "a new process counts as heavy");
        record.measured(true);
        assert!(record.heavy(), "and stays heavy after a heavy step");
        record.measured(false);
        assert!(!record.heavy(), "one light step makes it light");
        record.measured(true);
        assert!(!record.heavy(), "one heavy step is a strike");
        record.measured(false);
        record.measured(true);
        assert!(!record.heavy(), "a light step clears the strike");
        record.measured(true);
        assert!(record.heavy(), "two in a row");
        record.measured(false);
        assert!(!record.heavy(), "one light step makes it light");
    }
}
