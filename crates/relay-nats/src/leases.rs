//! The names this node holds ([`Inner::held`]), and their leases: each
//! name's lease entry is written again every third of the lease, naming
//! the sequence of the entry this node last wrote (`names.rs` and `kv.rs`
//! say why).
//!
//! It stands below both the transport's thread, which runs
//! [`renew_leases`], and the cluster names, which record what they
//! register and release.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use futures_util::stream::{FuturesUnordered, StreamExt};
use sched::Pid;

use crate::kv::{renew, Bucket, Held, Renewal};
pub(crate) use crate::lease_clock::LeaseClock;
use crate::shared::Inner;
use crate::stats::Counters;

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

/// The transport is closing and releases every name of this node: first
/// every lease clock is voided and nothing is held any more, so that what
/// steps only under a name's lease (keyed processes) stops before another
/// node can claim the name.
pub(crate) fn give_up_all(inner: &Inner) {
    for clock in lock_clocks(inner).values() {
        clock.void();
    }
    lock_held(inner).clear();
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
///
/// The names of a round are renewed at once, not one after the other: a
/// node holding many names (a keyed kind's shards) on a slow server would
/// otherwise renew its last name a round's worth of round trips late, and
/// its lease clock could run out between two renewals.
pub(crate) async fn renew_leases(bucket: Bucket, inner: Arc<Inner>) {
    let mut ticks = tokio::time::interval(inner.name_lease / 3);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let names: Vec<(String, Held)> = lock_held(&inner)
            .iter()
            .map(|(name, held)| (name.clone(), *held))
            .collect();
        let mut renewals: FuturesUnordered<_> = names
            .into_iter()
            .map(|(name, held)| {
                let bucket = &bucket;
                async move {
                    let started = Instant::now();
                    let renewal = renew(bucket, &name, held).await;
                    (name, held, started, renewal)
                }
            })
            .collect();
        while let Some((name, held, started, renewal)) = renewals.next().await {
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
