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
//! # One order: lanes by weight
//!
//! Every queue above belongs to a *lane*: a level and, on an engine with
//! groups, a group (`level * groups + group`). Each lane has a weight,
//! its level's ([`LEVEL_WEIGHTS`]: `High` 12, `Normal` 3, `Low` 1) times
//! its group's (1 without groups), and on each worker a *pass*: every
//! step the worker runs is charged to the lane of the last pick (the
//! pick's chain, `next`-slot runs included, is its lane's), adding the
//! step's cost divided by the lane's weight. Each pick from the queues
//! takes the lane with the least pass among those with work on the
//! worker, ties to the higher level: stride scheduling (Waldspurger and
//! Weihl), one mechanism for priorities and groups alike. A lane that
//! had nothing ready banks no credit: its pass is lifted to the *floor*
//! (the pass of the lane picked last, which never decreases) when it is
//! looked at again, and so is a lane whose process was taken other than
//! by a pick (from the global queues, by balancing or stealing).
//!
//! A step's cost is its measured time (a nominal microsecond when it
//! was not measured, or in a simulation). A pick that finds one lane
//! alone with work (most of the time, on most workloads without groups)
//! takes it without looking at passes, and its chain's steps are not
//! charged: nothing competes with them. While lanes compete, every step
//! is measured (two clock reads; with groups, every step is, one read),
//! so under saturation each lane's share of a worker's time tends to its
//! weight over the sum of the weights of the lanes with work, however
//! unlike their steps are: a `Low` process of 100 µs steps beside `High`
//! ones of 1 µs gets 1/13 of the time, not one step in 13. In a
//! simulation every step is nominal: the shares are of steps,
//! deterministic for a seed.
//!
//! Work from outside the workers (a message posted from another thread, a
//! process spawned there) waits in the engine's global queues, one per
//! lane for wake-ups and one per group for new processes (taken with the
//! group's `Normal` or `Low` lane); each worker takes from them every
//! [`GLOBAL_QUEUE_INTERVAL`] ticks, and also whenever its own queues are
//! empty: one process of the lane its *global* passes pick by the same
//! weights (each take charged a nominal step), and up to 16 more (new
//! processes first, four at most, then wake-ups from that lane's level,
//! then the others highest first) into the tails of its own queues. A
//! thief takes the oldest half of a victim's first non-empty queue, light
//! queues first, then highest level first, queues before nurseries, into
//! the back of its own lane's queue. Every [`BALANCE_INTERVAL`] ticks a
//! busy worker may take the first process of a lane where another worker
//! has at least two more waiting than it has, and run it at once (its
//! wait there only ends sooner).

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
//! When its lane is picked, its light queue is served first, oldest
//! first, but at most [`LIGHT_RUNS`] picks in a row while the lane's
//! queue has work: the queue keeps at least one pick in four. Light
//! steps are cheap, so the lane's pass rises little for them: within its
//! weight's share of the time, a lane serves many light steps for each
//! heavy one. What a
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
//!   step while measuring (against steps of [`LIGHT_STEP`] or more) or
//!   while levels compete (see "One order" above).
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
//! A process that joins its lane's queue on a worker with `ahead`
//! processes already in that queue is stepped before that worker has run
//! more than [`bound(ahead, stretch)`](bound) steps, where the stretch is
//! the lane's weight `w` against the sum `W` of the other lanes' weights
//! (`Groups::stretch`), every step charged alike (a simulation's):
//!
//! - it needs at most `k = ahead + 2` picks of its lane (first in, first
//!   out, and nothing overtakes it in its queue: a thief takes from the
//!   front, which only shortens the wait; one more place for the process
//!   that the step under way requeues ahead of it when it was displaced
//!   from the `next` slot);
//! - each pick's chain is at most `c = 1 + NEXT_SLOT_RUNS` steps, so the
//!   lane's own steps are at most `c * k`, and its pass, from at most one
//!   chain above the floor when it joined, rises by at most `c / w` per
//!   pick;
//! - another lane `h` is picked only while its pass is at most the
//!   lane's, and its pass starts at or above that floor: it is charged at
//!   most `c * k / w + c / w_h` meanwhile, `c * k * w_h / w + c` steps.
//!   Summed: `c * k * W / w + c * (lanes - 1)`;
//! - takes from the global queues (one tick in `GLOBAL_QUEUE_INTERVAL`)
//!   and balancing (one in `BALANCE_INTERVAL`) run chains outside the
//!   passes: at most `c` steps per such tick on top; and the chain under
//!   way when the process joined, whose steps are not charged if its pick
//!   found no other lane with work (a lane alone is neither weighed nor
//!   charged: `Shares::pick_among`).
//!
//! Without groups, a `Low` process behind one other waits at most 151
//! steps of its worker, a `High` one behind none 26 and behind 100, 598
//! (the fixed turns of 16 picks this order replaced gave 133, 68 and
//! 588).
//!
//! A process in the `next` slot is judged by the same bound, with `ahead`
//! the queue it would join; one that moves to the nursery is stepped, or
//! moved to its lane's queue (where the bound above starts), within
//! [`nursery_bound`] steps. A process in a global queue behind `ahead`
//! others of its lane is taken in within [`global_takes`] takes of any
//! worker, by the same argument with one nominal charge per take.
//!
//! In time, the wait is at most that many steps of the worker; with `W`
//! workers all busy, the wait behind `R` ready processes of one level
//! approaches the fair share `R * step / W`, which is what the overload
//! benchmark (`benches/benches/overload.rs`) reports the wait against.
//!
//! The bound is checked by the simulation for every step of every process
//! (`Simulation::fairness`, test `crates/sched/tests/fairness.rs`, over
//! 1 000 seeds), nursery waits included; the mutations that serve the
//! queues newest first, never charge a step (`High` strictly first), let
//! an idle lane bank credit, or never flush the nurseries (`cargo xtask
//! mutants ready-queue-newest-first`, `levels-never-charged`,
//! `lanes-bank-credit-while-idle`, `nursery-never-flushed`) make that
//! check fail naming the process.

/// The levels, by index (`Priority::index`).
pub(crate) const LEVELS: usize = 3;

/// The weight of each level (by `Priority::index`) in the one order a
/// worker serves its lanes in: `High` 12, `Normal` 3, `Low` 1. A lane's
/// weight is its level's times its group's (`Groups::lane_weight`).
pub(crate) const LEVEL_WEIGHTS: [u32; LEVELS] = [12, 3, 1];

/// How a lane's weight stands against the others', for the bound on a
/// wait in it (`Groups::stretch`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stretch {
    /// The lane's weight.
    pub(crate) own: u64,
    /// The sum of every other lane's weight.
    pub(crate) others: u64,
    /// How many lanes there are, its own included.
    pub(crate) lanes: u64,
}

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

/// The most steps a worker runs while a lane it has work in (weight
/// `own`) is picked `picks` times: nominal steps, each charged alike (see
/// the module's documentation for the argument).
fn steps_for(picks: u64, stretch: Stretch) -> u64 {
    let chain = 1 + u64::from(NEXT_SLOT_RUNS);
    let own = picks * chain;
    let others = (chain * picks * stretch.others).div_ceil(stretch.own.max(1))
        + chain * stretch.lanes.saturating_sub(1);
    let base = own + others;
    // Takes from the global queues and balancing picks run outside the
    // passes (their chains are charged, but not bounded by them); and the
    // chain under way, uncharged if its pick had no other lane to choose
    // from when the process joined.
    let global = u64::from(GLOBAL_QUEUE_INTERVAL);
    let balance = u64::from(BALANCE_INTERVAL);
    base + (base * chain).div_ceil(global - chain)
        + (base * chain).div_ceil(balance - chain)
        + chain
}

/// The most steps a worker runs between a process joining its lane's
/// queue behind `ahead` others and that process's step (see the module's
/// documentation for the argument).
pub(crate) fn bound(ahead: usize, stretch: Stretch) -> u64 {
    steps_for(ahead as u64 + 2, stretch)
}

/// [`bound`] for a process that joined its lane's light queue behind
/// `ahead` others: it needs `ahead + 1` picks of that queue, which has at
/// least [`LIGHT_RUNS`] of every `LIGHT_RUNS + 1` picks of its lane
/// while it has work.
pub(crate) fn light_bound(ahead: usize, stretch: Stretch) -> u64 {
    let runs = u64::from(LIGHT_RUNS);
    let picks = (ahead as u64 + 1) * (runs + 1);
    steps_for(picks.div_ceil(runs) + 1, stretch)
}

/// [`bound`] for a process in its lane's queue on a worker whose light
/// queues may hold work: each of the picks the queue needs may follow
/// [`LIGHT_RUNS`] picks of the light queue.
pub(crate) fn bound_beside_light(ahead: usize, stretch: Stretch) -> u64 {
    let places = (ahead as u64 + 1) * (u64::from(LIGHT_RUNS) + 1);
    steps_for(places + 2, stretch)
}

/// The most takes from the global queues a worker makes before one of a
/// lane whose global queue holds `ahead + 1` processes: the takes pick
/// lanes by the same weights (their own passes, each take charged as a
/// nominal step).
pub(crate) fn global_takes(ahead: usize, stretch: Stretch) -> u64 {
    let picks = ahead as u64 + 1;
    picks + (picks * stretch.others).div_ceil(stretch.own.max(1)) + stretch.lanes.saturating_sub(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The stretch of each level's lane without groups.
    fn alone(level: usize) -> Stretch {
        let own = u64::from(LEVEL_WEIGHTS[level]);
        let all: u64 = LEVEL_WEIGHTS.iter().map(|&w| u64::from(w)).sum();
        Stretch {
            own,
            others: all - own,
            lanes: LEVELS as u64,
        }
    }

    #[test]
    fn the_bound_grows_with_the_work_ahead_and_shrinks_with_the_weight() {
        let [high, normal, low] = [alone(0), alone(1), alone(2)];
        assert!(bound(10, normal) < bound(100, normal));
        assert!(bound(100, high) < bound(100, normal));
        assert!(bound(100, normal) < bound(100, low));
        // A `Low` process behind one other: two picks of its lane, each
        // with its chain (4 steps); meanwhile the others' passes rise by
        // at most what those 8 steps add to `Low`'s, 15 times as many at
        // their weights, plus a chain each; then the global queues' and
        // balancing's share, and the step under way.
        let base: u64 = 8 + 8 * 15 + 4 * 2;
        assert_eq!(
            bound(0, low),
            base + (base * 4).div_ceil(57) + (base * 4).div_ceil(1017) + 4
        );
        let heavier = Stretch { others: 100, ..low };
        assert!(bound(0, heavier) > bound(0, low));
    }

    #[test]
    fn a_lane_s_global_queue_is_taken_within_its_weight_s_share_of_takes() {
        // `Low` behind nobody: its take, and at most 15 of the others
        // (12 + 3 for its one) plus one each for where they started.
        assert_eq!(global_takes(0, alone(2)), 1 + 15 + 2);
        // `High` behind 11: 12 takes of its own, and the others' 4 for
        // its 12.
        assert_eq!(global_takes(11, alone(0)), 12 + 4 + 2);
    }
}
