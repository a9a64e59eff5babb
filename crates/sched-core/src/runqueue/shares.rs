//! Weights and passes: how a worker divides its step time between its
//! lanes (levels and groups) when several have work ready.
//!
//! # The rule
//!
//! An engine built with groups (`Builder::group`) keeps, on every worker
//! and at every priority level, one first-in-first-out queue per group
//! (a *lane*: `level * groups + group`); without groups there is one lane
//! per level. A lane's weight is its level's (`order::LEVEL_WEIGHTS`)
//! times its group's. Each pick takes the lane with the least *pass* among
//! those with work, and every step is charged to the lane of the pick
//! whose chain it belongs to: `pass += cost * SCALE / weight`, the cost
//! being the step's measured time, or a nominal step when it was not
//! measured (`order.rs`, "One order"). That is stride scheduling
//! (Waldspurger and Weihl) on measured time rather than on a fixed
//! quantum, so a lane whose steps are long is charged for them. Between
//! two picks of a lane with work ready, another lane of weight `w` can be
//! picked at most about `w / weight + 1` times for each step of the
//! first: under saturation each lane's share of a worker's step time
//! tends to its share of the weights of the lanes with work.
//!
//! A lane that had nothing ready does not bank credit: when it is looked
//! at again, its pass is lifted to the worker's floor (the pass of the
//! lane picked last), so it competes from where the others are, as a
//! newly active flow does in weighted fair queueing.
//!
//! # Where the shares hold
//!
//! Each worker keeps its own passes (no engine-global write per step):
//! the shares hold per worker, and across the pool when every lane has
//! work on every worker, which is how work spreads (new processes from
//! outside through per-group global queues that workers take from by the
//! same rule, idle workers steal, and busy workers balance a lane that is
//! far out of balance). A group confined to one worker gets its share of
//! that worker. With groups every step is measured (one clock read per
//! step); without them, only while the worker measures its steps for
//! light-first, and steps are otherwise charged alike.
//!
//! In a simulation a step takes no virtual time, so each step is charged
//! the same: the shares are then shares of steps, deterministic for a
//! seed.

use std::time::Instant;

use std::sync::atomic::Ordering::Relaxed;

use super::order::{Stretch, LEVELS, LEVEL_WEIGHTS};
use crate::sync::{AtomicU32, AtomicU64};

/// The most groups an engine can have, the default group included: the
/// record keeps its group in six bits.
pub(crate) const MAX_GROUPS: usize = 64;

/// The largest weight a group can have (the smallest is 1).
pub(crate) const MAX_WEIGHT: u32 = 10_000;

/// Pass units per nanosecond of step time at weight 1: enough resolution
/// that a 100 ns step of a group at the largest weight still moves its
/// pass (`100 * SCALE / MAX_WEIGHT` = 10).
const SCALE: u64 = 1_000;

/// What a step costs when no time was measured for it: a simulation's
/// step, a step of a worker that does not measure, or the first after an
/// idle spell (whose start the worker did not read the clock for).
const NOMINAL_NS: u64 = 1_000;

/// Passes are rebased (all lowered by the floor) past this, so that they
/// never overflow: at `SCALE` units per nanosecond this is about 53 days
/// of one worker's step time at weight 1.
const REBASE: u64 = 1 << 62;

/// The engine's groups: their names and weights (fixed names, weights a
/// handle may change), and each worker's step time per group.
#[derive(Debug)]
pub(crate) struct Groups {
    names: Box<[String]>,
    weights: Box<[AtomicU32]>,
}

impl Groups {
    /// The default group (index 0, weight `default_weight`), then
    /// `declared` in order.
    pub(crate) fn new(default_weight: u32, declared: &[(String, u32)]) -> Groups {
        let names = std::iter::once("default".to_owned())
            .chain(declared.iter().map(|(name, _)| name.clone()))
            .collect();
        let weights = std::iter::once(default_weight)
            .chain(declared.iter().map(|&(_, weight)| weight))
            .map(|w| AtomicU32::new(w.clamp(1, MAX_WEIGHT)))
            .collect();
        Groups { names, weights }
    }

    /// How many groups there are (at least 1, the default group).
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.names.len()
    }

    pub(crate) fn name(&self, index: usize) -> &str {
        &self.names[index]
    }

    /// The index of the group named `name`.
    pub(crate) fn find(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| n == name)
    }

    #[inline]
    pub(crate) fn weight(&self, index: usize) -> u32 {
        self.weights[index].load(Relaxed)
    }

    /// The weight of the lane of `level` (`Priority::index`) and `group`
    /// in the worker's one order: the level's weight times the group's.
    #[inline]
    pub(crate) fn lane_weight(&self, level: usize, group: usize) -> u64 {
        u64::from(LEVEL_WEIGHTS[level]) * u64::from(self.weight(group))
    }

    /// How much the weights stretch the bound on a wait in the lane of
    /// `level` and `group` (`order::bound`): its own weight against the
    /// sum of every other lane's, whether or not they have work. For the
    /// simulation's check, where every step is charged the same.
    pub(crate) fn stretch(&self, level: usize, group: usize) -> Stretch {
        let own = self.lane_weight(level, group);
        let all: u64 = (0..LEVELS)
            .flat_map(|l| (0..self.len()).map(move |g| (l, g)))
            .map(|(l, g)| self.lane_weight(l, g))
            .sum();
        Stretch {
            own,
            others: all - own,
            lanes: (LEVELS * self.len()) as u64,
        }
    }

    /// Sets a group's weight (clamped to `1..=MAX_WEIGHT`): workers charge
    /// its next steps by it.
    pub(crate) fn set_weight(&self, index: usize, weight: u32) {
        self.weights[index].store(weight.clamp(1, MAX_WEIGHT), Relaxed);
    }
}

/// One worker's step time per group, readable by anyone (the live view,
/// the metrics). Only the worker writes, with a load and a store: no
/// read-modify-write, and no line shared with another worker's.
#[derive(Debug)]
pub(crate) struct GroupClocks {
    busy_ns: Box<[AtomicU64]>,
}

impl GroupClocks {
    pub(crate) fn new(groups: usize) -> Self {
        GroupClocks {
            busy_ns: (0..groups).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Nanoseconds of step time charged to `group` on this worker.
    pub(crate) fn busy_ns(&self, group: usize) -> u64 {
        self.busy_ns[group].load(Relaxed)
    }

    pub(crate) fn add(&self, group: usize, ns: u64) {
        let clock = &self.busy_ns[group];
        clock.store(clock.load(Relaxed).wrapping_add(ns), Relaxed);
    }
}

/// A worker's passes, one per lane (see the module's documentation).
/// Owned by the worker; nothing else reads them.
#[derive(Debug)]
pub(crate) struct Shares {
    groups: usize,
    /// By lane (`level * groups + group`).
    pass: Box<[u64]>,
    /// What a nominal step adds to each lane's pass, without groups (the
    /// level weights never change; a group's weight may, so with groups
    /// each charge divides).
    nominal: [u64; LEVELS],
    /// The pass of the lane picked last, where a lane that had nothing
    /// ready starts again. It never decreases (but at a rebase, which
    /// lowers every pass by it).
    floor: u64,
    /// The clock reading that ended the last charged step, while the
    /// worker has been busy since (with groups, where every step is
    /// measured).
    last: Option<Instant>,
    /// Whether the last pick chose among two lanes or more: while one
    /// lane alone has work (most workloads without groups, most of the
    /// time), its steps are not charged, since nothing competes with
    /// them, and the picks take no pass into account.
    contended: bool,
}

impl Shares {
    pub(crate) fn new(groups: usize) -> Self {
        Shares {
            groups,
            pass: vec![0; LEVELS * groups].into_boxed_slice(),
            nominal: LEVEL_WEIGHTS.map(|w| NOMINAL_NS * SCALE / u64::from(w)),
            floor: 0,
            last: None,
            contended: groups > 1,
        }
    }

    /// Whether the last pick chose among two lanes or more (only then are
    /// steps charged).
    #[inline(always)]
    pub(crate) fn contended(&self) -> bool {
        self.contended
    }

    /// [`pick`](Shares::pick) among the lanes whose bits are set in
    /// `ready` (an engine without groups, three lanes): one alone is taken
    /// at once, uncharged (see `contended`).
    #[inline]
    pub(crate) fn pick_among(&mut self, ready: u32) -> Option<usize> {
        if ready & ready.wrapping_sub(1) == 0 {
            self.contended = false;
            return (ready != 0).then_some(ready.trailing_zeros() as usize);
        }
        self.contended = true;
        self.pick(|lane| ready & (1 << lane) != 0)
    }

    /// The lane with the least pass (each lifted to the floor first)
    /// among those `ready` says have work, if any; ties go to the lower
    /// lane, the higher level. The floor becomes its pass.
    #[inline]
    pub(crate) fn pick(&mut self, ready: impl Fn(usize) -> bool) -> Option<usize> {
        self.contended = true;
        let floor = self.floor;
        let mut best: Option<(usize, u64)> = None;
        for (lane, pass) in self.pass.iter_mut().enumerate() {
            let lifted = (*pass).max(floor);
            // The pass first: a look at a lane's queues costs more.
            if best.is_some_and(|(_, least)| lifted >= least) || !ready(lane) {
                continue;
            }
            *pass = lifted;
            best = Some((lane, lifted));
        }
        let (lane, pass) = best?;
        self.floor = pass;
        Some(lane)
    }

    /// Lifts `lane`'s pass to the floor: a process of it was taken other
    /// than by [`pick`](Shares::pick) (from the global queues, another
    /// worker's queues), and the steps it starts are charged to the lane
    /// from where the others are, not from credit banked while idle.
    #[inline]
    pub(crate) fn lift(&mut self, lane: usize) {
        let pass = &mut self.pass[lane];
        *pass = (*pass).max(self.floor);
    }

    /// Charges a step of `ns` nanoseconds (`None`: not measured, a
    /// nominal step) to `lane`, whose weight is `weight` (`lane_weight`),
    /// unless the pick it follows had no other lane to choose from.
    /// Returns the time charged.
    #[inline]
    pub(crate) fn charge(&mut self, lane: usize, weight: u64, ns: Option<u64>) -> u64 {
        if !self.contended {
            return 0;
        }
        let add = match ns {
            None if self.groups == 1 => self.nominal[lane],
            ns => ns
                .unwrap_or(NOMINAL_NS)
                .saturating_mul(SCALE)
                .checked_div(weight)
                .unwrap_or(u64::MAX),
        };
        let pass = &mut self.pass[lane];
        *pass = pass.saturating_add(add);
        if *pass > REBASE {
            self.rebase();
        }
        ns.unwrap_or(NOMINAL_NS)
    }

    /// With groups: the time since the last charge (every step is
    /// measured there, the whole of the worker's busy time charged), or
    /// `None` when there is no reading yet (the first step after an idle
    /// spell).
    #[inline]
    pub(crate) fn since_last(&mut self) -> Option<u64> {
        let now = Instant::now();
        let ns = self
            .last
            .map(|last| now.duration_since(last).as_nanos() as u64);
        self.last = Some(now);
        ns
    }

    /// The worker went idle: the next step's start is not the last
    /// charge's end.
    pub(crate) fn idle(&mut self) {
        self.last = None;
    }

    fn rebase(&mut self) {
        let floor = self.floor;
        for pass in &mut self.pass {
            *pass = pass.saturating_sub(floor);
        }
        self.floor = 0;
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// Picks and charges `steps` nominal steps with every lane of
    /// `groups` groups whose weights are `weights` ready in `levels`;
    /// returns each lane's count.
    fn run(weights: &[u32], levels: &[usize], steps: usize) -> Vec<usize> {
        let groups = Groups::new(
            weights[0],
            &weights[1..]
                .iter()
                .enumerate()
                .map(|(i, &w)| (format!("g{i}"), w))
                .collect::<Vec<_>>(),
        );
        let n = weights.len();
        let mut shares = Shares::new(n);
        let mut count = vec![0; LEVELS * n];
        for _ in 0..steps {
            let lane = shares
                .pick(|lane| levels.contains(&(lane / n)))
                .expect("all ready");
            count[lane] += 1;
            let weight = groups.lane_weight(lane / n, lane % n);
            shares.charge(lane, weight, None);
        }
        count
    }

    fn close(count: &[usize], want: &[usize]) -> bool {
        count.iter().zip(want).all(|(&c, &w)| c.abs_diff(w) <= 1)
    }

    #[test]
    fn steps_follow_the_groups_weights() {
        let count = run(&[1, 3], &[1], 4_000);
        assert!(close(&count[2..4], &[1_000, 3_000]), "{count:?}");
        let count = run(&[2, 3, 5], &[1], 10_000);
        assert!(close(&count[3..6], &[2_000, 3_000, 5_000]), "{count:?}");
    }

    #[test]
    fn steps_follow_the_levels_weights_times_the_groups() {
        // Without groups: 12, 3 and 1 of every 16.
        let count = run(&[1], &[0, 1, 2], 16_000);
        assert!(close(&count, &[12_000, 3_000, 1_000]), "{count:?}");
        // `High` and `Low` only: 12 and 1 of every 13.
        let count = run(&[1], &[0, 2], 13_000);
        assert!(close(&count, &[12_000, 0, 1_000]), "{count:?}");
        // Two groups, 1:3, at `High` and `Low`: each lane by the product.
        let count = run(&[1, 3], &[0, 2], 52_000);
        assert!(
            close(&count, &[12_000, 36_000, 0, 0, 1_000, 3_000]),
            "{count:?}"
        );
    }

    #[test]
    fn a_lane_back_from_idle_banks_no_credit() {
        let mut shares = Shares::new(2);
        // Lane 1 alone for a long while.
        for _ in 0..1_000 {
            let lane = shares.pick(|lane| lane == 1).expect("ready");
            shares.charge(lane, 1, None);
        }
        // Lane 0 comes back: it alternates with 1 at once, rather than
        // running 1 000 steps in a row on its old pass.
        let mut picks = Vec::new();
        for _ in 0..10 {
            let lane = shares.pick(|lane| lane < 2).expect("ready");
            picks.push(lane);
            shares.charge(lane, 1, None);
        }
        assert!(picks.iter().filter(|&&l| l == 0).count() <= 6, "{picks:?}");
        assert!(picks.contains(&1), "{picks:?}");
        // So does a lane whose process was taken other than by a pick.
        shares.lift(4);
        let lane = shares.pick(|lane| lane == 4 || lane == 1).expect("ready");
        assert_eq!(lane, 1, "lifted to the floor, not below it");
    }

    #[test]
    fn measured_time_is_charged() {
        let mut shares = Shares::new(2);
        assert_eq!(shares.since_last(), None, "no reading yet");
        std::thread::sleep(std::time::Duration::from_millis(2));
        let ns = shares.since_last().expect("a reading");
        assert!(ns >= 2_000_000);
        assert_eq!(shares.charge(0, 1, Some(ns)), ns);
        shares.idle();
        assert_eq!(shares.since_last(), None, "after idle");
        assert_eq!(shares.charge(0, 1, None), NOMINAL_NS);
        // A lane charged 2 ms waits while another takes its nominal
        // steps: 2 000 of them at the same weight.
        let picks = (0..1_000)
            .filter(|_| {
                let lane = shares.pick(|lane| lane < 2).expect("ready");
                shares.charge(lane, 1, None);
                lane == 0
            })
            .count();
        assert_eq!(picks, 0);
        let clocks = GroupClocks::new(2);
        clocks.add(1, 5);
        clocks.add(1, 7);
        assert_eq!((clocks.busy_ns(0), clocks.busy_ns(1)), (0, 12));
    }

    #[test]
    fn passes_are_rebased_before_they_overflow() {
        let mut shares = Shares::new(2);
        shares.pass[0] = REBASE - 10;
        shares.pass[1] = REBASE - 20;
        shares.floor = REBASE - 20;
        shares.charge(1, 1, None);
        assert!(shares.pass.iter().all(|&p| p < REBASE));
        assert_eq!(shares.pick(|lane| lane < 2), Some(0));
    }
}
