//! The order in which a worker serves its ready processes, and the bound
//! it gives: the scheduling contract.
//!
//! # The ready order
//!
//! Every source of ready work on a worker feeds one first-in-first-out
//! queue per [`Priority`] (per level and group, with groups), with two
//! bounded exceptions for what a step on the worker woke or spawned, and
//! one for light processes woken while the worker measures its steps
//! ("Light processes first" below):
//!
//! | what made it ready | where it waits |
//! |---|---|
//! | asked to continue | the back of its level's queue |
//! | woken or spawned by a step here | the `next` slot |
//! | the `next` slot's occupant when another takes the slot, or when its runs are used up | the nursery of its level |
//! | its timer, when the `next` slot is empty | the `next` slot |
//! | its timer, otherwise | the back of its level's queue, or its light queue (below) |
//! | a message or completion from outside the workers | the global queues, then the back of its level's queue here, or its light queue (below) |
//! | a spawn from outside the workers | the global queues, then the back of its level's queue here |
//! | stolen by this worker | the back of its level's queue here |
//! | in a nursery at a flush | the back of its level's queue |
//!
//! - The `next` slot runs right after the step under way, in cache, at
//!   most [`NEXT_SLOT_RUNS`] times after a pick, and never while a higher
//!   level has work ready on the worker
//!   (`the_next_slot_does_not_jump_ahead_of_higher_level_work` in
//!   `crates/sched/tests/fairness.rs`).
//! - The nursery (two generations per level, `local.rs`) is served newest
//!   first: a pick's chain continues from it (the same runs as the slot,
//!   shared with it, and not past higher-level work), and a level whose
//!   queue is empty is served from it. Every [`NURSERY_FLUSH_INTERVAL`]
//!   ticks its older generation moves to the back of its level's queue,
//!   oldest first, and the younger becomes the older, so nothing waits
//!   there longer than [`nursery_bound`]. Newest first keeps what a step
//!   just touched in cache: pairs that wake each other keep running hot,
//!   and a tree of spawns is walked depth first, so it does not hold its
//!   whole breadth in memory at once; the flush keeps the order's bound.
//!
//! Each pick from the queues serves a level by turns ([`TURNS`]): out of
//! every 16 picks, `High` 12, `Normal` 3, `Low` 1. A level with nothing
//! ready gives its turn to the others, highest first. Work from outside
//! the workers (a message posted from another thread, a process spawned
//! there) waits in the engine's global queues, one per level for wake-ups
//! and one for new processes; each worker takes from them every
//! [`GLOBAL_QUEUE_INTERVAL`] ticks by the same turns, up to 16 at a time,
//! into the tails of its own queues, and also whenever its own queues are
//! empty. A thief takes the oldest half of a victim's first non-empty
//! queue, light queues first, then highest level first, queues before
//! nurseries, into the back of its own level's queue. Every
//! [`BALANCE_INTERVAL`] ticks a busy worker may take the first process of
//! a lane where another worker has at least two more waiting than it has,
//! and run it at once (its wait there only ends sooner).
//!
//! # Light processes first
//!
//! A process's steps are not all alike: one that steps for 1 µs every 15 ms
//! should not wait behind a backlog of 20 µs steps as long as they do. In
//! the spirit of Linux's EEVDF (a task that ran little since it woke gets
//! an earlier deadline), a worker that sees a step of [`LIGHT_STEP`] or
//! more (it measures one step in [`MEASURE_EVERY`]) measures every step
//! for the next [`MEASURE_SPELL`] steps. During a spell, a step of
//! [`LIGHT_STEP`] or more starts the count again only if it was a heavy
//! step of a process that already counted heavy, or if light processes
//! wait in the light queues: a slow step of a light process (preempted,
//! or waiting in the allocator) with none waiting does not keep the worker
//! measuring. A measured step is heavy when it
//! took at least [`LIGHT_STEP`] and at least half the worker's running
//! mean of measured steps; two heavy steps in a row make a process heavy,
//! one light step makes it light again (so one slow step, the thread
//! preempted or its cache cold after a long sleep, does not move a light
//! process behind the heavy ones). A new process counts as heavy until a
//! light step after its first one (which runs `start`, and is not judged)
//! shows otherwise, as a new task gets no head start in EEVDF. While the worker measures, a process
//! woken by its timer or from outside the workers that is not heavy joins
//! its level's *light queue* (its group's, on an engine with groups)
//! instead of the back of its level's queue.
//! When a level's turn comes, its light queue is served first, oldest
//! first, but at most [`LIGHT_RUNS`] picks in a row while the level's
//! queue has work: the queue keeps at least one pick in four. What a
//! process asks for after its step does not change: one that continues
//! always joins the back of its level's queue (it wants more time, as a
//! task that keeps running uses its slice), and one woken by a step on
//! the worker takes the `next` slot as before.
//!
//! - When every step is light (most workloads), no worker measures
//!   continuously and no light queue is used: the order below, first in
//!   first out per level, is the whole story.
//! - When every step costs about the same, none is below half the mean:
//!   every process is heavy, and the order is first in first out.
//! - A heavy process waits in a light queue for at most two wakes: its
//!   next two measured steps mark it heavy.
//! - With groups, each lane (level and group) has its own light queue,
//!   served first within its lane: the groups' shares still decide which
//!   group a pick of the level goes to, and a light process's short steps
//!   charge its group little.
//! - The cost: one clock read per 32 steps of a light workload, two per
//!   step while measuring (against steps of [`LIGHT_STEP`] or more).
//!
//! The bound below, in picks of a level, stretches with the light
//! queues: a process in a light queue behind `ahead` others needs at most
//! `ceil(4 * (ahead + 1) / 3)` picks of its level (the light queue has at
//! least three of every four while it has work), and one in a level's
//! queue at most `LIGHT_RUNS + 1` picks per place, so
//! `bound(level, (ahead + 1) * (LIGHT_RUNS + 1), 1)` steps. In time, each
//! of the extra picks is one step of a process that is not heavy (its
//! last step was light, or its first heavy one) and the chain of
//! `next`-slot runs it starts: behind steps much longer than those, a
//! heavy process's wait in time grows by the light work's own time, which
//! is what light-first means. The simulation checks both bounds
//! ([`light_bound`], [`bound_beside_light`]) for every wait on a worker
//! that has queued a light process, with steps that say how long they
//! take (`sim::spend`): `crates/sched/tests/light_first_sim.rs`, over
//! many seeds; `crates/sched/tests/light_first.rs` checks the same order
//! on a running engine, in real time.
//!
//! # The bound
//!
//! A process that joins its level's queue on a worker with `ahead`
//! processes already in that queue is stepped before that worker has run
//! more than [`bound(level, ahead)`](bound) steps:
//!
//! - it needs at most `ahead + 1` picks of its level (first in, first
//!   out, and nothing overtakes it in its queue: a thief takes from the
//!   front, which only shortens the wait);
//! - its level has at least `turns` of every 16 picks, so those come
//!   within `16 * ceil((ahead + 1) / turns)` picks;
//! - each pick is followed by at most `NEXT_SLOT_RUNS` steps of its chain
//!   (the `next` slot and the nursery), one tick in
//!   `GLOBAL_QUEUE_INTERVAL` takes from the global queues instead, and one
//!   in `BALANCE_INTERVAL` may run a process taken from another worker;
//! - one more step for the step under way, and one more place for the
//!   process that step requeues itself ahead of it when it was displaced
//!   from the `next` slot.
//!
//! A process in the `next` slot is judged by the same bound, with `ahead`
//! the queue it would join; one that moves to the nursery is stepped, or
//! moved to its level's queue (where the bound above starts), within
//! [`nursery_bound`] steps.
//!
//! With groups (`shares.rs`), each level's queue is one queue per group,
//! and a level's pick goes to one of its groups by their shares: the
//! process then needs `ahead + 2` picks *of its group*, each of which
//! comes within `share` picks of its level (`Groups::factor`), so the bound
//! is the same with `(ahead + 2) * share` picks of the level; the global
//! queues are stretched by the same factor.
//!
//! In time, the wait is at most that many steps of the worker; with `W`
//! workers all busy, the wait behind `R` ready processes of one level
//! approaches the fair share `R * step / W`, which is what the overload
//! benchmark (`benches/benches/overload.rs`) reports the wait against.
//!
//! The bound is checked by the simulation for every step of every process
//! (`Simulation::fairness`, test `crates/sched/tests/fairness.rs`, over
//! 1 000 seeds), nursery waits included; the mutations that serve the
//! queues newest first, `High` strictly first, or never flush the
//! nurseries (`cargo xtask mutants ready-queue-newest-first`,
//! `turns-high-only`, `nursery-never-flushed`) make that check fail
//! naming the process.

use crate::Priority;

/// The levels, by index (`Priority::index`).
pub(crate) const LEVELS: usize = 3;

/// Which level each of 16 consecutive picks serves first: `High` 12,
/// `Normal` 3, `Low` 1, spread so that no level waits long for its turn
/// (`Normal` every 5 or 6 picks).
pub(crate) const TURNS: [Priority; 16] = {
    use Priority::{High as H, Low as L, Normal as N};
    [H, H, N, H, H, H, N, H, H, H, N, H, H, H, L, H]
};

/// How many times in a row a worker runs the process in its `next` slot
/// before moving it to its level's queue instead. Two processes that wake
/// each other would otherwise keep the slot to themselves, out of reach of
/// idle workers and ahead of every queued process.
pub(crate) const NEXT_SLOT_RUNS: u32 = 3;

/// Every this many ticks the worker takes from the global queues before
/// its own, so work from outside never starves behind a worker whose own
/// queues never empty (the simulation's bound check judges every wait in
/// a global queue too: `runtime/simulation/fairness.rs`). (Prime, as in Go's scheduler, so it does not fall
/// into step with other periodic patterns.)
pub(crate) const GLOBAL_QUEUE_INTERVAL: u32 = 61;

/// Every this many ticks the worker moves the older generation of its
/// nurseries (the processes its steps woke or spawned that did not fit
/// the `next` slot) to the back of their levels' queues, oldest first,
/// and the younger generation becomes the older: what waits in a nursery
/// waits there at most twice this long. (Prime, as
/// `GLOBAL_QUEUE_INTERVAL`.)
pub(crate) const NURSERY_FLUSH_INTERVAL: u32 = 127;

/// Every this many ticks a busy worker evens out one lane (level and
/// group) with one other worker, taken in turn: when the other holds at
/// least twice as many of the lane's processes waiting as this one does,
/// and two more, it takes the first one and runs it at once (see the
/// worker's `balance`). Idle workers steal; this is for workers that never
/// are, so that a level's or a group's share holds across the pool and not
/// only on the worker its processes happened to land on. Rare, because a
/// look reads lines the other worker writes at every step: every 131
/// ticks, the looks alone cost a 200-process `yield-many` a tenth of its
/// speed; every 1 021, nothing measurable. (Prime, as
/// `GLOBAL_QUEUE_INTERVAL`.)
pub(crate) const BALANCE_INTERVAL: u32 = 1021;

/// A step shorter than this is light, whatever the others take; a step
/// this long or longer starts a spell of measuring (see "Light processes
/// first" above). Twenty times a plain step's cost on the machines
/// measured, and a quarter of the 20 µs steps of the overload benchmark's
/// bulk.
pub(crate) const LIGHT_STEP: std::time::Duration = std::time::Duration::from_micros(5);

/// How many picks of a level in a row its light queue may take while
/// the level's `ready` queue has work: the light queue takes at most
/// three of every four.
pub(crate) const LIGHT_RUNS: u32 = 3;

/// A worker that is not measuring measures one step in this many ticks
/// (two clock reads): a light workload pays about one clock read per
/// 32 steps for being ready to notice a heavy step (one in 16 was 10 of
/// the 62 instructions per step light-first first cost a continuing
/// process, `step_cost yield 200 1000`).
pub(crate) const MEASURE_EVERY: u32 = 64;

/// After a heavy step, a worker measures every step (two clock reads
/// each) for this many steps, and lets woken light processes join the
/// light queues meanwhile.
pub(crate) const MEASURE_SPELL: u32 = 1024;

/// The most steps a worker runs between a process joining one of its
/// nurseries and that process's step or its move to its level's queue
/// (where `bound` takes over): two flushes, and the step under way.
pub(crate) fn nursery_bound() -> u64 {
    2 * u64::from(NURSERY_FLUSH_INTERVAL) + 1
}

/// The levels to try for pick number `turn`, in order: the level whose
/// turn it is, then the others, highest first.
///
/// Read from a table made once from [`TURNS`]: the match it replaces, and
/// the level's index taken from each entry, were about 20 instructions of
/// every pick.
#[inline(always)]
pub(crate) fn order(turn: u32) -> [Priority; LEVELS] {
    ORDERS[(turn % TURNS.len() as u32) as usize]
}

/// [`order`] for each of the 16 turns.
const ORDERS: [[Priority; LEVELS]; 16] = {
    let mut orders = [[Priority::High; LEVELS]; 16];
    let mut turn = 0;
    while turn < TURNS.len() {
        orders[turn] = match TURNS[turn] {
            Priority::High => [Priority::High, Priority::Normal, Priority::Low],
            Priority::Normal => [Priority::Normal, Priority::High, Priority::Low],
            Priority::Low => [Priority::Low, Priority::High, Priority::Normal],
        };
        turn += 1;
    }
    orders
};

/// How many of every 16 picks serve `level` first.
pub(crate) fn turns(level: Priority) -> u64 {
    TURNS.iter().filter(|&&l| l == level).count() as u64
}

/// The most steps a worker runs between a process of `level` joining its
/// queue behind `ahead` others and that process's step (see the module's
/// documentation for the argument). `share` is its group's factor
/// (`Groups::factor`, 1 without groups): the picks of its level needed
/// per pick of its group.
pub(crate) fn bound(level: Priority, ahead: usize, share: u64) -> u64 {
    let needed = (ahead as u64 + 2) * share;
    let turns = turns(level);
    let picks = TURNS.len() as u64 * needed.div_ceil(turns);
    let ticks = picks * (1 + u64::from(NEXT_SLOT_RUNS));
    ticks
        + ticks.div_ceil(u64::from(GLOBAL_QUEUE_INTERVAL) - 1)
        + ticks.div_ceil(u64::from(BALANCE_INTERVAL) - 1)
        + 1
}

/// [`bound`] for a process that joined its lane's light queue behind
/// `ahead` others: it needs `ahead + 1` picks of that queue, which has at
/// least [`LIGHT_RUNS`] of every `LIGHT_RUNS + 1` picks of its lane
/// while it has work (and, with groups, a pick of its lane comes within
/// `share` picks of its level, as for its queue).
pub(crate) fn light_bound(level: Priority, ahead: usize, share: u64) -> u64 {
    let runs = u64::from(LIGHT_RUNS);
    let picks = (ahead as u64 + 1) * (runs + 1);
    bound(
        level,
        usize::try_from(picks.div_ceil(runs) - 1).unwrap_or(usize::MAX),
        share,
    )
}

/// [`bound`] for a process in its level's queue on a worker whose light
/// queues may hold work: each of its level's picks the queue needs may
/// follow [`LIGHT_RUNS`] picks of the light queue.
pub(crate) fn bound_beside_light(level: Priority, ahead: usize, share: u64) -> u64 {
    let places = (ahead as u64 + 1) * (u64::from(LIGHT_RUNS) + 1);
    bound(level, usize::try_from(places).unwrap_or(usize::MAX), share)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_turns_give_each_level_its_share_and_no_long_gaps() {
        assert_eq!(turns(Priority::High), 12);
        assert_eq!(turns(Priority::Normal), 3);
        assert_eq!(turns(Priority::Low), 1);
        // Within any 16 consecutive picks (the pattern repeats), each
        // level has its turns.
        for start in 0..16u32 {
            for level in Priority::ALL {
                let seen = (start..start + 16)
                    .filter(|&t| order(t)[0] == level)
                    .count();
                assert_eq!(seen as u64, turns(level), "{level} from pick {start}");
            }
        }
    }

    #[test]
    fn every_order_tries_every_level_once() {
        for turn in 0..16 {
            let mut levels = order(turn).map(Priority::index);
            levels.sort_unstable();
            assert_eq!(levels, [0, 1, 2]);
        }
    }

    #[test]
    fn the_bound_grows_with_the_work_ahead_and_shrinks_with_the_share() {
        assert!(bound(Priority::Normal, 10, 1) < bound(Priority::Normal, 100, 1));
        assert!(bound(Priority::High, 100, 1) < bound(Priority::Normal, 100, 1));
        assert!(bound(Priority::Normal, 100, 1) < bound(Priority::Low, 100, 1));
        // A `Low` process behind one other: two of its turns, each of
        // which may be 16 picks away, each pick followed by 3 `next` runs.
        // 128 ticks, 3 taken by the global queues, 1 by a balance, and
        // the step under way.
        assert_eq!(bound(Priority::Low, 0, 1), 16 * 2 * 4 + 3 + 1 + 1);
        assert!(bound(Priority::Low, 0, 3) > bound(Priority::Low, 0, 1));
    }
}
