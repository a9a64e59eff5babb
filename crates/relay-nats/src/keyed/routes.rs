//! Each thread's cache of keys' routes: what lets [`Sharded::send`]
//! (`super::Sharded::send`) to a key whose process runs here be a send by
//! PID, without the shard's lock or a lookup in the shard's map, as an
//! [`Entity`](super::Entity)'s send is.
//!
//! # Why it is safe
//!
//! An entry is an `Entity`'s cached route kept by the thread rather than
//! by a handle, and it is used under the same three checks (the shard
//! open, the process not stopping, its lease clock valid; see
//! `entity.rs`). Everything `entity.rs` argues for one handle holds for
//! one thread: a message that reaches the key's process after a stop is
//! handed back, in order, to the key's next process. A thread's sends to
//! one key take either this route or the shard's lock, in the order the
//! thread makes them, exactly as one `Entity` mixed with
//! `Sharded::send` does. Entries of different threads are independent
//! senders, whose messages have no order between them anyway.
//!
//! # Cost
//!
//! A lookup hashes the key once (FxHash), probes one hash map and
//! compares the key. A thread keeps at most [`MAX_ROUTES`] routes, a few
//! words and the key's bytes each (a thread that sends to more keys
//! starts afresh when its cache is full). An entry keeps its process's
//! `Link` (not the process) alive until it is overwritten or forgotten,
//! or the thread exits.

use std::cell::RefCell;
use std::hash::Hasher;
use std::sync::atomic::{AtomicU64, Ordering::Acquire, Ordering::Relaxed};
use std::sync::Arc;

use relay::Pid;
use std::collections::HashMap;

use compact_str::CompactString;
use rustc_hash::{FxBuildHasher, FxHashMap, FxHasher};

use super::shard::{CachedRoute, Link};

/// At most this many routes per thread: a thread that sends to more keys
/// starts its cache afresh when it is full (a few microseconds, then
/// each key's next send learns its route again).
const MAX_ROUTES: usize = 4096;

/// A kind's identity in the caches: unique for the process's life, so an
/// entry of a kind that was dropped is never taken for another's.
pub(crate) fn next_kind_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Relaxed)
}

/// The hash a key is looked up by.
#[inline]
pub(crate) fn hash(key: &str) -> u64 {
    let mut hasher = FxHasher::default();
    hasher.write(key.as_bytes());
    hasher.finish()
}

struct Entry {
    kind: u64,
    /// Inline up to 24 bytes: compared without a second cache miss.
    key: CompactString,
    shard: u32,
    pid: Pid,
    link: Arc<Link>,
}

/// One thread's routes, by the key's hash mixed with its kind (an entry
/// is used only if its kind and key are the ones asked for: two keys
/// whose 64-bit hashes meet share one entry, and take turns in it).
struct Routes {
    entries: FxHashMap<u64, Entry>,
}

thread_local! {
    // Const: no lazy-initialisation check on each send.
    static ROUTES: RefCell<Routes> = const {
        RefCell::new(Routes {
            entries: HashMap::with_hasher(FxBuildHasher),
        })
    };
}

/// Where `key` of kind `kind`, whose hash is `hash`, is kept.
#[inline]
fn slot(kind: u64, hash: u64) -> u64 {
    hash ^ kind.wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// The PID of `key`'s process of kind `kind`, if this thread cached its
/// route and every condition of a send by PID holds now: the shard open
/// (`is_open`), the process not stopping, its lease sure. A route that
/// no longer holds is forgotten.
#[inline]
pub(crate) fn usable(
    kind: u64,
    key: &str,
    hash: u64,
    is_open: impl FnOnce(u32) -> bool,
) -> Option<Pid> {
    ROUTES.with(|routes| {
        let slot = slot(kind, hash);
        let holds = {
            let routes = routes.try_borrow().ok()?;
            let entry = routes.entries.get(&slot)?;
            if entry.kind != kind || entry.key != key {
                return None;
            }
            // Acquire (both): as an `Entity`'s check (`entity.rs`).
            let holds = is_open(entry.shard)
                && !entry.link.stopping.load(Acquire)
                && entry.link.clock.valid_coarse();
            holds.then_some(entry.pid)
        };
        if holds.is_none() {
            if let Ok(mut routes) = routes.try_borrow_mut() {
                routes.entries.remove(&slot);
            }
        }
        holds
    })
}

/// Forgets this thread's route to `key`'s process of kind `kind` (a send
/// on it failed: the process ended, or its mailbox is full).
pub(crate) fn forget(kind: u64, key: &str, hash: u64) {
    ROUTES.with(|routes| {
        let Ok(mut routes) = routes.try_borrow_mut() else {
            return;
        };
        let slot = slot(kind, hash);
        if routes
            .entries
            .get(&slot)
            .is_some_and(|e| e.kind == kind && e.key == key)
        {
            routes.entries.remove(&slot);
        }
    });
}

/// Keeps `route`, the route of `key` of shard `shard` of kind `kind`, for
/// this thread's next sends to it.
pub(crate) fn remember(kind: u64, key: &str, hash: u64, shard: u32, route: CachedRoute) {
    ROUTES.with(|routes| {
        let Ok(mut routes) = routes.try_borrow_mut() else {
            return;
        };
        let slot = slot(kind, hash);
        let (pid, link) = route;
        if let Some(entry) = routes.entries.get_mut(&slot) {
            if entry.key != key {
                entry.key = CompactString::from(key);
            }
            (entry.kind, entry.shard, entry.pid, entry.link) = (kind, shard, pid, link);
            return;
        }
        if routes.entries.len() >= MAX_ROUTES {
            routes.entries.clear();
        }
        let key = CompactString::from(key);
        routes.entries.insert(
            slot,
            Entry {
                kind,
                key,
                shard,
                pid,
                link,
            },
        );
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lease_clock::LeaseClock;

    fn link() -> Arc<Link> {
        let clock = Arc::new(LeaseClock::new());
        clock.renewed(
            std::time::Instant::now(),
            std::time::Duration::from_secs(60),
        );
        Arc::new(Link::new(clock))
    }

    #[test]
    fn a_route_is_used_while_it_holds_and_forgotten_when_it_does_not() {
        let kind = next_kind_id();
        let (pid, l) = (Pid::local(7), link());
        assert_eq!(usable(kind, "a", hash("a"), |_| true), None);
        remember(kind, "a", hash("a"), 3, (pid, Arc::clone(&l)));
        assert_eq!(usable(kind, "a", hash("a"), |s| s == 3), Some(pid));
        assert_eq!(usable(kind, "b", hash("b"), |_| true), None);
        assert_eq!(usable(next_kind_id(), "a", hash("a"), |_| true), None);
        // A shard not open: not used, and forgotten.
        assert_eq!(usable(kind, "a", hash("a"), |_| false), None);
        assert_eq!(usable(kind, "a", hash("a"), |_| true), None);
        remember(kind, "a", hash("a"), 3, (pid, Arc::clone(&l)));
        l.stopping.store(true, std::sync::atomic::Ordering::Release);
        assert_eq!(usable(kind, "a", hash("a"), |_| true), None);
        remember(kind, "a", hash("a"), 3, (pid, link()));
        forget(kind, "a", hash("a"));
        assert_eq!(usable(kind, "a", hash("a"), |_| true), None);
    }

    #[test]
    fn a_thread_keeps_at_most_max_routes_and_starts_afresh_past_them() {
        let kind = next_kind_id();
        let l = link();
        let keys: Vec<String> = (0..MAX_ROUTES).map(|k| format!("key-{k}")).collect();
        for key in &keys {
            remember(kind, key, hash(key), 0, (Pid::local(1), Arc::clone(&l)));
        }
        let held = |key: &String| usable(kind, key, hash(key), |_| true).is_some();
        assert!(keys.iter().all(held), "every key of a full cache is kept");
        remember(kind, "one more", hash("one more"), 0, (Pid::local(2), l));
        assert_eq!(
            usable(kind, "one more", hash("one more"), |_| true),
            Some(Pid::local(2))
        );
        assert!(!keys.iter().any(held), "the full cache started afresh");
    }
}
