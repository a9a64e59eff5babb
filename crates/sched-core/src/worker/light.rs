//! Measuring steps, for light processes first (`runqueue/order.rs`): a
//! worker measures one step in `MEASURE_EVERY`; after a heavy one it
//! measures every step for `MEASURE_SPELL` steps, marking each process
//! light or heavy by its steps, and lets woken light processes join the
//! light queues meanwhile (`Local::lighting`).

use std::time::Instant;

use crate::record::RecordRef;
use crate::runqueue::order::{LIGHT_STEP, MEASURE_EVERY, MEASURE_SPELL, SPELL_RENEWALS};

use super::Worker;

impl Worker {
    /// When the step about to run starts, if this one is measured: every
    /// step while a spell lasts, one in `MEASURE_EVERY` otherwise, never
    /// in a simulation (its steps take no time) or under loom.
    #[inline(always)]
    pub(super) fn measure_start(&self) -> Option<Instant> {
        if self.measuring == 0 && !self.tick.is_multiple_of(MEASURE_EVERY) {
            return None;
        }
        if cfg!(loom) || self.observer.is_some() {
            return None;
        }
        Some(Instant::now())
    }

    /// Tells the process just stepped whether its step (since `started`)
    /// was heavy: at least [`LIGHT_STEP`] and at least half this worker's
    /// mean measured step (`Record::measured`: two in a row mark it
    /// heavy, and a new process's first step is not judged). A step of [`LIGHT_STEP`] or more starts (or renews) a
    /// spell of measuring every step.
    #[inline(never)]
    pub(super) fn measured(&mut self, record: &RecordRef, started: Instant) {
        let ns = started.elapsed().as_nanos().min(u128::from(u64::MAX)) as u64;
        let floor = LIGHT_STEP.as_nanos() as u64;
        // A running mean over about the last eight measured steps, each
        // counted at most four times the mean: a step preempted for
        // milliseconds would otherwise lift it for dozens of steps, and
        // heavy steps below half of it would pass for light.
        let sample = ns.min(self.mean_ns.max(floor).saturating_mul(4));
        self.mean_ns = self.mean_ns - self.mean_ns / 8 + sample / 8;
        // A process's first step runs its `start`, which says nothing of
        // its steps to come: not judged (see `Record::measured`).
        let confirmed = record.steps.load(std::sync::atomic::Ordering::Relaxed) > 1
            && record.measured(ns >= floor && ns >= self.mean_ns / 2);
        self.measuring = next_spell(
            self.measuring,
            &mut self.spell_heavy,
            ns >= floor,
            confirmed,
        );
        self.local.lighting.set(self.measuring > 0);
    }
}

/// The steps left to measure after a step: a step of [`LIGHT_STEP`] or
/// more outside a spell starts one of [`MEASURE_SPELL`] steps; at a
/// spell's end, a new one starts only if at least [`SPELL_RENEWALS`] of
/// its steps were heavy steps of processes that already counted heavy
/// (`confirmed`): a heavy process is here and stays heavy. A few slow
/// steps of light processes (the thread preempted, a page fault, a wait
/// in the allocator) renew nothing: renewing at every step of 5 µs kept
/// a workload of 1 µs steps (skynet) measuring every step most of the
/// time, about 3% of its time in clock reads, for a backlog that was not
/// there.
fn next_spell(measuring: u32, spell_heavy: &mut u32, heavy: bool, confirmed: bool) -> u32 {
    if measuring == 0 {
        *spell_heavy = 0;
        return if heavy { MEASURE_SPELL } else { 0 };
    }
    *spell_heavy += u32::from(confirmed);
    if measuring > 1 {
        return measuring - 1;
    }
    let renewed = *spell_heavy >= SPELL_RENEWALS;
    *spell_heavy = 0;
    if renewed {
        MEASURE_SPELL
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `steps` measured steps through the rule from `measuring`,
    /// `heavy(i)` saying which are slow and `confirmed(i)` which are slow
    /// steps of processes that counted heavy; returns the steps left to
    /// measure after them.
    fn run(
        mut measuring: u32,
        steps: u32,
        heavy: impl Fn(u32) -> bool,
        confirmed: impl Fn(u32) -> bool,
    ) -> u32 {
        let mut spell_heavy = 0;
        for i in 0..steps {
            measuring = next_spell(measuring, &mut spell_heavy, heavy(i), confirmed(i));
        }
        measuring
    }

    #[test]
    fn a_slow_step_starts_a_spell_and_a_short_one_does_not() {
        assert_eq!(run(0, 1, |_| true, |_| false), MEASURE_SPELL);
        assert_eq!(run(0, 1, |_| false, |_| false), 0);
    }

    #[test]
    fn a_spell_with_heavy_processes_staying_heavy_is_renewed() {
        // Every step a heavy process's: the overload benchmark's backlog.
        assert_eq!(run(0, 1 + MEASURE_SPELL, |_| true, |_| true), MEASURE_SPELL);
        // Four heavy processes behind a thousand light ones, before the
        // light ones have moved to the light queue: a few of their steps.
        let few = |i: u32| i % 300 == 299;
        assert_eq!(run(MEASURE_SPELL, MEASURE_SPELL, few, few), MEASURE_SPELL);
    }

    #[test]
    fn a_spell_with_only_slow_steps_of_light_processes_ends() {
        // One slow step in 50, none of a process that counted heavy.
        let slow = |i: u32| i.is_multiple_of(50);
        assert_eq!(run(0, 1 + MEASURE_SPELL, slow, |_| false), 0);
        // One of them confirmed: still not enough.
        assert_eq!(run(0, 1 + MEASURE_SPELL, slow, |i| i == 500), 0);
        // Until it ends, it counts down, whatever the slow steps.
        assert_eq!(
            run(0, 1 + MEASURE_SPELL / 2, slow, |_| false),
            MEASURE_SPELL / 2
        );
    }
}
