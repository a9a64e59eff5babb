//! Weighted groups: how a worker divides its step time between groups of
//! processes (tenants) that all have work ready at one level.
//!
//! # The rule
//!
//! An engine built with groups (`Builder::group`) keeps, on every worker
//! and at every priority level, one first-in-first-out queue per group
//! (a *lane*: `level * groups + group`). The level whose turn it is comes
//! first (`order.rs`); among that level's non-empty lanes the worker
//! takes from the group with the least *pass*, and charges the step's
//! measured time to it: `pass += time * SCALE / weight`. That is stride
//! scheduling (Waldspurger and Weihl) on measured time rather than on a
//! fixed quantum, so a group whose steps are long is charged for them.
//! Between two picks of a group with work ready, another group of weight
//! `w` can be picked at most about `w / weight + 1` times for each step of
//! the first: under saturation each group's share of a worker's step time
//! tends to its share of the weights.
//!
//! A group that had nothing ready does not bank credit: when its lane is
//! looked at again, its pass is lifted to the worker's floor (the pass of
//! the group picked last), so it competes from where the others are, as a
//! newly active flow does in weighted fair queueing.
//!
//! # Where the shares hold
//!
//! Each worker keeps its own passes (no engine-global write per step):
//! the shares hold per worker, and across the pool when every group has
//! work on every worker, which is how work spreads (new processes from
//! outside through per-group global queues that workers take from by the
//! same rule, and idle workers steal). A group confined to one worker gets
//! its share of that worker. The step time is read from the clock once
//! per step, and only on an engine with groups: an engine without them
//! has one lane per level, the queues of before, and reads no clock.
//!
//! In a simulation a step takes no virtual time, so each step is charged
//! the same: the shares are then shares of steps, deterministic for a
//! seed.

use std::time::Instant;

use std::sync::atomic::Ordering::Relaxed;

use super::order::LEVELS;
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
/// step, or the first after an idle spell (whose start the worker did not
/// read the clock for).
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

    /// How much the share of group `index` stretches the bound on a wait
    /// in its lane (`order::bound`), in picks of the level per pick of the
    /// group: 1 without groups. While the group has work ready at a level,
    /// each pick of it (and the `next`-slot runs of the chain it starts)
    /// raises its pass by at most `4 * step / w`; another group `h`'s pass
    /// starts at most one such chain of the lightest group below it and
    /// rises by at least `step / w_h` per pick, so `h` is picked at most
    /// `ceil(4 * w_h / w + 4 * w_h / w_min) + 2` times per pick of it. For
    /// the simulation's check, where every step is charged the same.
    pub(crate) fn factor(&self, index: usize) -> u64 {
        if self.len() == 1 {
            return 1;
        }
        let weight = u64::from(self.weight(index));
        let lightest = (0..self.len())
            .map(|g| u64::from(self.weight(g)))
            .min()
            .unwrap_or(1);
        let others: u64 = (0..self.len())
            .filter(|&g| g != index)
            .map(|g| {
                let w = u64::from(self.weight(g));
                (4 * w).div_ceil(weight) + (4 * w).div_ceil(lightest) + 2
            })
            .sum();
        1 + others
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
    /// Per level: the pass of the group picked last there, where a group
    /// that had nothing ready starts again.
    floor: [u64; LEVELS],
    /// The clock reading that ended the last charged step, while the
    /// worker has been busy since.
    last: Option<Instant>,
}

impl Shares {
    pub(crate) fn new(groups: usize) -> Self {
        Shares {
            groups,
            pass: vec![0; LEVELS * groups].into_boxed_slice(),
            floor: [0; LEVELS],
            last: None,
        }
    }

    /// The group with the least pass at `level` among those `ready` says
    /// have work there (lifted to the level's floor first), if any.
    #[inline]
    pub(crate) fn pick(&mut self, level: usize, ready: impl Fn(usize) -> bool) -> Option<usize> {
        let floor = self.floor[level];
        let passes = &mut self.pass[level * self.groups..(level + 1) * self.groups];
        let mut best: Option<(usize, u64)> = None;
        for (group, pass) in passes.iter_mut().enumerate() {
            if !ready(group) {
                continue;
            }
            if *pass < floor {
                *pass = floor;
            }
            if best.is_none_or(|(_, least)| *pass < least) {
                best = Some((group, *pass));
            }
        }
        let (group, pass) = best?;
        self.floor[level] = pass;
        Some(group)
    }

    /// Charges the step that just ended to `lane` (whose group has weight
    /// `weight`): the time since the last charge, read from the clock
    /// (`measure`), or a nominal step when there is none (a simulation,
    /// or the first step after an idle spell). Returns the time charged.
    #[inline]
    pub(crate) fn charge(&mut self, lane: usize, weight: u32, measure: bool) -> u64 {
        let ns = if measure {
            let now = Instant::now();
            let ns = self.last.map_or(NOMINAL_NS, |last| {
                now.duration_since(last).as_nanos() as u64
            });
            self.last = Some(now);
            ns
        } else {
            NOMINAL_NS
        };
        let pass = &mut self.pass[lane];
        *pass = pass.saturating_add(ns.saturating_mul(SCALE) / u64::from(weight.max(1)));
        if *pass > REBASE {
            self.rebase(lane / self.groups);
        }
        ns
    }

    /// The worker went idle: the next step's start is not the last
    /// charge's end.
    pub(crate) fn idle(&mut self) {
        self.last = None;
    }

    fn rebase(&mut self, level: usize) {
        let floor = self.floor[level];
        for pass in &mut self.pass[level * self.groups..(level + 1) * self.groups] {
            *pass = pass.saturating_sub(floor);
        }
        self.floor[level] = 0;
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// Picks and charges `steps` nominal steps at one level with every
    /// group ready; returns each group's count.
    fn run(weights: &[u32], steps: usize) -> Vec<usize> {
        let mut shares = Shares::new(weights.len());
        let mut count = vec![0; weights.len()];
        for _ in 0..steps {
            let g = shares.pick(1, |_| true).expect("all ready");
            count[g] += 1;
            shares.charge(weights.len() + g, weights[g], false);
        }
        count
    }

    #[test]
    fn steps_follow_the_weights() {
        let close = |count: &[usize], want: &[usize]| {
            count.iter().zip(want).all(|(&c, &w)| c.abs_diff(w) <= 1)
        };
        let count = run(&[1, 3], 4_000);
        assert!(close(&count, &[1_000, 3_000]), "{count:?}");
        let count = run(&[2, 3, 5], 10_000);
        assert!(close(&count, &[2_000, 3_000, 5_000]), "{count:?}");
    }

    #[test]
    fn a_group_back_from_idle_banks_no_credit() {
        let mut shares = Shares::new(2);
        // Group 1 alone for a long while.
        for _ in 0..1_000 {
            let g = shares.pick(0, |g| g == 1).expect("ready");
            shares.charge(g, 1, false);
        }
        // Group 0 comes back: it alternates with 1 at once, rather than
        // running 1 000 steps in a row on its old pass.
        let mut picks = Vec::new();
        for _ in 0..10 {
            let g = shares.pick(0, |_| true).expect("ready");
            picks.push(g);
            shares.charge(g, 1, false);
        }
        assert!(picks.iter().filter(|&&g| g == 0).count() <= 6, "{picks:?}");
        assert!(picks.contains(&1), "{picks:?}");
    }

    #[test]
    fn levels_keep_their_own_passes() {
        // Group 0's steps at level 0 do not count against it at level 1:
        // there it still alternates with group 1.
        let mut shares = Shares::new(2);
        for _ in 0..1_000 {
            let g = shares.pick(0, |g| g == 0).expect("ready");
            shares.charge(g, 1, false);
        }
        let picks: Vec<usize> = (0..4)
            .map(|_| {
                let g = shares.pick(1, |_| true).expect("ready");
                shares.charge(2 + g, 1, false);
                g
            })
            .collect();
        assert_eq!(picks, [0, 1, 0, 1]);
    }

    #[test]
    fn measured_time_is_charged() {
        let mut shares = Shares::new(1);
        assert_eq!(shares.charge(0, 1, true), NOMINAL_NS, "no reading yet");
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert!(shares.charge(0, 1, true) >= 2_000_000);
        shares.idle();
        assert_eq!(shares.charge(0, 1, true), NOMINAL_NS, "after idle");
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
        shares.floor[0] = REBASE - 20;
        shares.charge(1, 1, false);
        assert!(shares.pass.iter().all(|&p| p < REBASE));
        assert_eq!(shares.pick(0, |_| true), Some(0));
    }
}
