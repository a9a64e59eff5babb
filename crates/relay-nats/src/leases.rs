//! The names this node holds ([`Inner::held`]), and their leases: each
//! name's lease entry is written again every third of the lease, naming
//! the sequence of the entry this node last wrote (`names.rs` and `kv.rs`
//! say why).
//!
//! It stands below both the transport's thread, which runs
//! [`renew_leases`], and the cluster names, which record what they
//! register and release.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sched::Pid;

use crate::kv::{renew, Bucket, Held, Renewal};
use crate::shared::Inner;
use crate::stats::Counters;

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

/// Keeps `clock` for `key`: every renewal of this node's lease on `key`
/// extends it, and the name's loss voids it.
pub(crate) fn watch_lease(inner: &Inner, key: &str, clock: Arc<LeaseClock>) {
    lock_clocks(inner).insert(key.to_owned(), clock);
}

/// Stops keeping `key`'s clock, and voids it.
pub(crate) fn unwatch_lease(inner: &Inner, key: &str) {
    if let Some(clock) = lock_clocks(inner).remove(key) {
        clock.void();
    }
}

/// Whether this node still holds `key` (it has not lost or released it).
pub(crate) fn holds(inner: &Inner, key: &str) -> bool {
    lock_held(inner).contains_key(key)
}

fn lock_clocks(inner: &Inner) -> std::sync::MutexGuard<'_, HashMap<String, Arc<LeaseClock>>> {
    inner
        .lease_clocks
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Records that this node holds `key` as `held`: renewed from now on.
pub(crate) fn hold(inner: &Inner, key: &str, held: Held) {
    lock_held(inner).insert(key.to_owned(), held);
}

/// Stops renewing `key` if `pid` holds it here.
pub(crate) fn forget_held(inner: &Inner, key: &str, pid: Pid) {
    let mut held = lock_held(inner);
    if held.get(key).is_some_and(|h| h.holder.pid == pid) {
        held.remove(key);
    }
}

fn lock_held(inner: &Inner) -> std::sync::MutexGuard<'_, HashMap<String, Held>> {
    inner
        .held
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Renews every name this node holds, every third of the lease, until the
/// transport's thread ends. A renewal names the lease entry this node
/// last wrote: one that finds it lapsed or withdrawn means the name was
/// lost (another node may have claimed it since), and it is not renewed
/// again.
pub(crate) async fn renew_leases(bucket: Bucket, inner: Arc<Inner>) {
    let mut ticks = tokio::time::interval(inner.name_lease / 3);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let names: Vec<(String, Held)> = lock_held(&inner)
            .iter()
            .map(|(name, held)| (name.clone(), *held))
            .collect();
        for (name, held) in names {
            let started = Instant::now();
            let renewal = renew(&bucket, &name, held).await;
            let mut now = lock_held(&inner);
            // Released or registered again while the renewal was on its
            // way: the newer record stands.
            if now.get(&name) != Some(&held) {
                continue;
            }
            match renewal {
                Renewal::Renewed(revision) => {
                    now.insert(name.clone(), Held { revision, ..held });
                    drop(now);
                    if let Some(clock) = lock_clocks(&inner).get(&name) {
                        clock.renewed(started, inner.name_lease);
                    }
                }
                Renewal::Lost => {
                    now.remove(&name);
                    drop(now);
                    if let Some(clock) = lock_clocks(&inner).get(&name) {
                        clock.void();
                    }
                    Counters::add(&inner.counters.names_lost, 1);
                    tracing::warn!(
                        %name,
                        pid = %held.holder.pid,
                        "lost a cluster name: its lease lapsed while this node could not renew it"
                    );
                }
                Renewal::Unknown => {}
            }
        }
    }
}
