//! Until when a name is surely this node's, by this node's own clock: what
//! keyed processes check before every step (`keyed/`). Renewals
//! (`leases.rs`) extend it; a lost name voids it.
//!
//! A leaf: it names nothing of the crate, so that the shared state can
//! keep one per name.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

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
    /// Milliseconds after `base` until which the name is this node's; 0
    /// when it is not (never held, or lost).
    until: AtomicU64,
}

impl LeaseClock {
    pub(crate) fn new() -> LeaseClock {
        LeaseClock {
            base: Instant::now(),
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

    /// Whether the name is surely still this node's.
    pub(crate) fn valid(&self) -> bool {
        let now = u64::try_from(self.base.elapsed().as_millis()).unwrap_or(u64::MAX);
        now < self.until.load(Ordering::Acquire)
    }
}
