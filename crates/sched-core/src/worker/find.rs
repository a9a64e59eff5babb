//! Where a worker's next process comes from, in the order
//! `runqueue/order.rs` documents and bounds: its `next` slot and nursery,
//! its ready queues by turns, the global queues, a busier worker's queues
//! (balancing), stealing, and processes waiting in a busy worker's `next`
//! slot.

use crate::engine::stats::bump;
use crate::record::RecordRef;
use crate::runqueue::order::{
    self, BALANCE_INTERVAL, GLOBAL_QUEUE_INTERVAL, NEXT_SLOT_RUNS, NURSERY_FLUSH_INTERVAL,
};
use crate::sync::spin_hint;

use super::{Worker, NEXT_SLOT_PATIENCE};

/// The most lanes one `balance` look reads of another worker (three
/// queue lengths each): with many groups, a look costs the same as with
/// few, and the lanes are covered over successive looks.
const BALANCE_LANES: usize = 8;
/// How many processes a worker moves from the global queue to its deque in
/// one go, besides the one it runs.
const GLOBAL_BATCH: usize = 16;
impl Worker {
    /// The next process to run, in the order `runqueue/order.rs`
    /// documents (and bounds): the global queues every
    /// `GLOBAL_QUEUE_INTERVAL` ticks, the `next` slot (a few times in a
    /// row, and not past higher-level work), the ready queues by turns,
    /// then the global queues, stealing, and hidden `next` slots.
    #[inline(always)] // See `next_work`.
    pub(super) fn find_work(&mut self) -> Option<RecordRef> {
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
