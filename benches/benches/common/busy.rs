//! Fixed CPU work of a calibrated length, the same on every side of a
//! bench, and sorted samples for percentiles.

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// Iterations of the fixed work that take about a microsecond on this
/// machine (measured once, by `calibrate`).
static PER_MICRO: AtomicU64 = AtomicU64::new(1);

/// `iterations` rounds of a multiply-rotate the compiler cannot remove.
pub(crate) fn spin(iterations: u64) -> u64 {
    let mut x = black_box(0x9e37_79b9_7f4a_7c15u64);
    for _ in 0..black_box(iterations) {
        x = x.rotate_left(5) ^ x.wrapping_mul(0x0100_0000_01b3);
    }
    black_box(x)
}

/// Measures how many iterations take a microsecond (the best of five).
pub(crate) fn calibrate() {
    let probe = 100_000;
    let mut best = Duration::MAX;
    for _ in 0..5 {
        let start = Instant::now();
        spin(probe);
        best = best.min(start.elapsed());
    }
    let per_micro = probe as f64 / (best.as_secs_f64() * 1e6);
    PER_MICRO.store(per_micro.max(1.0) as u64, Relaxed);
}

/// About `duration` of work (after `calibrate`).
pub(crate) fn work(duration: Duration) -> u64 {
    spin(duration.as_micros() as u64 * PER_MICRO.load(Relaxed))
}

/// A sorted list of samples.
#[derive(Clone, Default)]
pub(crate) struct Sorted(pub(crate) Vec<Duration>);

impl Sorted {
    pub(crate) fn of(mut samples: Vec<Duration>) -> Sorted {
        samples.sort_unstable();
        Sorted(samples)
    }

    /// The `q`th percentile (0 for an empty list).
    pub(crate) fn at(&self, q: usize) -> Duration {
        if self.0.is_empty() {
            return Duration::ZERO;
        }
        self.0[(self.0.len() - 1) * q / 100]
    }

    pub(crate) fn max(&self) -> Duration {
        self.at(100)
    }
}
