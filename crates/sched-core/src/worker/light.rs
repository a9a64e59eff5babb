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
        if record.steps.load(std::sync::atomic::Ordering::Relaxed) > 1 {
            record.measured(ns >= floor && ns >= self.mean_ns / 2);
        }
        self.measuring = if ns >= floor {
            MEASURE_SPELL
        } else {
            self.measuring.saturating_sub(1)
        };
        self.local.lighting.set(self.measuring > 0);
    }
}
