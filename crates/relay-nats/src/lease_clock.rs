//! Until when a name is surely this node's, by this node's own clock: what
//! keyed processes check before every step (`keyed/`). Renewals
//! (`leases.rs`) extend it; a lost name voids it.
//!
//! A leaf: it names nothing of the crate, so that the shared state can
//! keep one per name.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How far, in milliseconds, the coarse clock may lag the precise one: a
/// tick of a kernel at 100 Hz, doubled.
const COARSE_SLACK_MS: u64 = 20;

/// Until when a name is surely this node's, by this node's own clock.
///
/// The server drops a lease entry a whole lease after its last write, and
/// a write this node started at `t` landed after `t`: so until `t` plus the
/// lease, no other node can hold the name. The clock keeps a quarter of
/// the lease back for the two clocks' drift and the server's sweep, which
/// is only ever late. A node stopped past the lease (SIGSTOP, a long
/// pause) finds its clock run out when it wakes, before its next renewal
/// tells it anything: what steps only while [`valid`](LeaseClock::valid)
/// never steps beside the name's next holder.
#[derive(Debug)]
pub(crate) struct LeaseClock {
    base: Instant,
    /// `base` by the coarse clock: read at the same moment, up to one of
    /// its ticks behind.
    coarse_base: coarsetime::Instant,
    /// Milliseconds after `base` until which the name is this node's; 0
    /// when it is not (never held, or lost).
    until: AtomicU64,
}

impl LeaseClock {
    pub(crate) fn new() -> LeaseClock {
        LeaseClock {
            base: Instant::now(),
            coarse_base: coarsetime::Instant::now_without_cache_update(),
            until: AtomicU64::new(0),
        }
    }

    /// A write of the lease entry that started at `started` was accepted.
    pub(crate) fn renewed(&self, started: Instant, lease: Duration) {
        let until = started.saturating_duration_since(self.base) + lease - lease / 4;
        let until = u64::try_from(until.as_millis()).unwrap_or(u64::MAX);
        self.until.fetch_max(until, Ordering::AcqRel);
    }

    /// The name is no longer this node's (lost, or released).
    pub(crate) fn void(&self) {
        self.until.store(0, Ordering::Release);
    }

    /// Whether the name is surely not this node's: lost, released, or
    /// never held (where a clock that ran out may only wait for a late
    /// renewal).
    pub(crate) fn is_void(&self) -> bool {
        self.until.load(Ordering::Acquire) == 0
    }

    /// Whether the name is surely still this node's.
    pub(crate) fn valid(&self) -> bool {
        let now = u64::try_from(self.base.elapsed().as_millis()).unwrap_or(u64::MAX);
        now < self.until.load(Ordering::Acquire)
    }

    /// [`valid`](LeaseClock::valid) by the coarse monotonic clock (the
    /// kernel's last tick, a few nanoseconds to read where the precise
    /// clock costs tens): what a keyed send and a keyed process's step
    /// check. The coarse clock and its base may each lag the precise ones
    /// by one tick (at most [`COARSE_SLACK_MS`] on any kernel we know), so
    /// the time it measures is within the slack of the true one, and
    /// adding the slack keeps the answer conservative: it never says
    /// valid when [`valid`](LeaseClock::valid) would not, it only gives
    /// up the slack early.
    #[inline]
    pub(crate) fn valid_coarse(&self) -> bool {
        // Not `now()`: it also stores the reading in the crate's global
        // cache, a write to one cache line from every sender and every
        // keyed step of the node.
        let elapsed =
            coarsetime::Instant::now_without_cache_update().duration_since(self.coarse_base);
        elapsed.as_millis() + COARSE_SLACK_MS < self.until.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The coarse check never says valid once the precise one has said
    /// not (read in that order), and says valid while the lease has more
    /// than the slack left.
    #[test]
    fn the_coarse_check_is_never_later_than_the_precise_one() {
        let long = LeaseClock::new();
        assert!(!long.valid_coarse());
        long.renewed(Instant::now(), Duration::from_secs(60));
        assert!(long.valid_coarse());
        long.void();
        assert!(!long.valid_coarse());
        let clock = LeaseClock::new();
        let lease = Duration::from_millis(200);
        clock.renewed(Instant::now(), lease);
        let deadline = Instant::now() + lease;
        let mut saw_both_invalid = false;
        while Instant::now() < deadline {
            let precise = clock.valid();
            let coarse = clock.valid_coarse();
            assert!(precise || !coarse, "the coarse check outlived the lease");
            saw_both_invalid |= !precise && !coarse;
        }
        assert!(saw_both_invalid);
    }
}
