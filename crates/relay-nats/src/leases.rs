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

use sched::Pid;

use crate::kv::{renew, Bucket, Held, Renewal};
use crate::shared::Inner;
use crate::stats::Counters;

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
            let renewal = renew(&bucket, &name, held).await;
            let mut now = lock_held(&inner);
            // Released or registered again while the renewal was on its
            // way: the newer record stands.
            if now.get(&name) != Some(&held) {
                continue;
            }
            match renewal {
                Renewal::Renewed(revision) => {
                    now.insert(name, Held { revision, ..held });
                }
                Renewal::Lost => {
                    now.remove(&name);
                    drop(now);
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
