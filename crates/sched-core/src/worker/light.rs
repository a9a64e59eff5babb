//! Measuring steps, for light processes first (`runqueue/order.rs`): a
//! worker measures one step in `MEASURE_EVERY`; after a heavy one it
//! measures every step for `MEASURE_SPELL` steps, marking each process
//! light or heavy by its steps, and lets woken light processes join the
//! light queues meanwhile (`Local::lighting`).

use std::time::Instant;

use crate::record::RecordRef;
use crate::runqueue::order::{LIGHT_STEP, MEASURE_EVERY, MEASURE_SPELL};

use super::Worker;

impl Worker {
    /// When the step about to run starts, if this one is measured: every
    /// step while a spell lasts or, without groups, while levels compete
    /// (its time is charged to its lane then: `runqueue/shares.rs`; with
    /// groups the charge reads the clock itself), one in
    /// `MEASURE_EVERY` otherwise, never under loom. By the engine's clock:
    /// in a simulation, virtual time, which a step moves only by what it
    /// says it takes (`sim::spend`).
    #[inline(always)]
    pub(super) fn measure_start(&self) -> Option<Instant> {
        if self.measuring == 0
            && !self.tick.is_multiple_of(MEASURE_EVERY)
            && !(self.local.groups == 1 && self.shares.contended())
        {
            return None;
        }
        if cfg!(loom) {
            return None;
        }
        Some(self.shared.clock.now())
    }

    /// Tells the process just stepped whether its step (since `started`)
    /// was heavy: at least [`LIGHT_STEP`] and at least half this worker's
    /// mean measured step (`Record::measured`: two in a row mark it
    /// heavy, and a new process's first step is not judged). A step of [`LIGHT_STEP`] or more starts (or renews) a
    /// spell of measuring every step. Returns the step's time in
    /// nanoseconds (what it is charged, `shares.rs`).
    #[inline(never)]
    pub(super) fn measured(&mut self, record: &RecordRef, started: Instant) -> u64 {
        let took = self.shared.clock.now().saturating_duration_since(started);
        let ns = took.as_nanos().min(u128::from(u64::MAX)) as u64;
        let floor = LIGHT_STEP.as_nanos() as u64;
        // A running mean over about the last eight measured steps, each
        // counted at most four times the mean: a step preempted for
        // milliseconds would otherwise lift it for dozens of steps, and
        // heavy steps below half of it would pass for light.
        let sample = ns.min(self.mean_ns.max(floor).saturating_mul(4));
        self.mean_ns = self.mean_ns - self.mean_ns / 8 + sample / 8;
        // A process's first step runs its `start`, which says nothing of
        // its steps to come: not judged (see `Record::measured`).
        let steps = record.steps.load(std::sync::atomic::Ordering::Relaxed);
        let heavy = ns >= floor && ns >= self.mean_ns / 2;
        let stays_heavy = steps > 1 && record.measured(heavy);
        // A new process counts heavy from its start: its first judged step
        // says nothing yet of a backlog (skynet's new processes, a slow
        // step now and then, kept spells going).
        let confirmed = stays_heavy && steps > 2;
        self.measuring = next_spell(
            self.measuring,
            ns >= floor,
            confirmed,
            self.local.has_light(),
        );
        self.local.lighting.set(self.measuring > 0);
        ns
    }
}

/// The steps left to measure after a step: a step of [`LIGHT_STEP`] or
/// more starts a spell of [`MEASURE_SPELL`] steps when none is under way;
/// during one, it starts the count again only if it was a heavy step of a
/// process that already counted heavy (`confirmed`: a heavy process is
/// here and stays heavy), or if light processes wait in the light queues
/// (`light`: light-first is at work). A slow step of a light process (the
/// thread preempted, a page fault, a wait in the allocator) with no light
/// process waiting renews nothing: renewing at every step of 5 µs kept a
/// workload of 1 µs steps (skynet) measuring every step most of the time,
/// about 2.4% of its time in clock reads, for a backlog that was not
/// there.
fn next_spell(measuring: u32, slow: bool, confirmed: bool, light: bool) -> u32 {
    if slow && (measuring == 0 || confirmed || light) {
        MEASURE_SPELL
    } else {
        measuring.saturating_sub(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `steps` steps through the rule from `measuring`, `slow(i)`
    /// saying which took 5 µs or more and `confirmed(i)` which of those
    /// were steps of processes that counted heavy, with light processes
    /// waiting or not; returns the steps left to measure after them.
    fn run(
        mut measuring: u32,
        steps: u32,
        slow: impl Fn(u32) -> bool,
        confirmed: impl Fn(u32) -> bool,
        light: bool,
    ) -> u32 {
        for i in 0..steps {
            measuring = next_spell(measuring, slow(i), confirmed(i), light);
        }
        measuring
    }

    #[test]
    fn a_slow_step_starts_a_spell_and_a_short_one_does_not() {
        assert_eq!(run(0, 1, |_| true, |_| false, false), MEASURE_SPELL);
        assert_eq!(run(0, 1, |_| false, |_| false, false), 0);
    }

    #[test]
    fn heavy_processes_staying_heavy_or_light_ones_waiting_keep_it_going() {
        // One heavy step of a heavy process in 300 steps.
        let few = |i: u32| i % 300 == 299;
        let long = 10 * MEASURE_SPELL;
        assert_eq!(
            run(MEASURE_SPELL, long, few, few, false),
            MEASURE_SPELL - 1 - (long - 1) % 300
        );
        // One slow step of a light process in 300, light processes waiting.
        assert_eq!(
            run(MEASURE_SPELL, long, few, |_| false, true),
            MEASURE_SPELL - 1 - (long - 1) % 300
        );
    }

    #[test]
    fn slow_steps_of_light_processes_with_none_waiting_let_it_end() {
        // One slow step in 50, none of a process that counted heavy, no
        // light process waiting: it ends after its steps.
        let slow = |i: u32| i.is_multiple_of(50);
        assert_eq!(run(0, 1 + MEASURE_SPELL, slow, |_| false, false), 0);
        // Until then it counts down, whatever the slow steps.
        assert_eq!(
            run(0, 1 + MEASURE_SPELL / 2, slow, |_| false, false),
            MEASURE_SPELL / 2
        );
    }
}
