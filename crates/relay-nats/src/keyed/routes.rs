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
//! compares the key. An entry holds its process resolved
//! ([`Resolved`]): the send skips the process table, which a send by PID
//! locks and counts the process in each time, so a send by key costs
//! about what a send by PID does. A thread keeps at most [`MAX_ROUTES`] routes, a few
//! words and the key's bytes each (a thread that sends to more keys
//! starts afresh when its cache is full). An entry keeps its process's
//! `Link` and record (not the process's state, dropped when it ends)
//! alive until it is overwritten or forgotten, or the thread exits.

use std::cell::RefCell;
use std::hash::Hasher;
use std::sync::atomic::{AtomicU64, Ordering::Acquire, Ordering::Relaxed};
use std::sync::Arc;

use sched::message::Resolved;
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
    resolved: Resolved,
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

/// Sends `message` with `send` on this thread's cached route to `key`'s
/// process of kind `kind` (whose hash is `hash`), if it has one and every
/// condition of a send on it holds now: the shard open (`is_open`), the
/// process not stopping, its lease sure. `send` runs on the entry
/// borrowed, so the resolved process's reference count is not touched;
/// it hands the message back if the process refused it (ended, or its
/// mailbox full). The message comes back (`Err`) when it was not sent:
/// no usable route, or a refusal; a route that no longer holds, or whose
/// process refused, is forgotten.
///
/// Small values in and out (a refusal's error is turned back into the
/// message inside `send`): the large `Result`s of a send, moved through
/// the cache's closure, cost this path about a tenth of its time.
#[inline]
pub(crate) fn send_cached<M>(
    kind: u64,
    key: &str,
    hash: u64,
    is_open: impl FnOnce(u32) -> bool,
    message: M,
    send: impl FnOnce(&Resolved, M) -> Result<(), M>,
) -> Result<(), M> {
    ROUTES.with(|routes| {
        let slot = slot(kind, hash);
        let message = {
            let Ok(routes) = routes.try_borrow() else {
                return Err(message);
            };
            let Some(entry) = routes.entries.get(&slot) else {
                return Err(message);
            };
            if entry.kind != kind || entry.key != key {
                return Err(message);
            }
            // Acquire (both): as an `Entity`'s check (`entity.rs`).
            let holds = is_open(entry.shard)
                && !entry.link.stopping.load(Acquire)
                && entry.link.clock.valid_coarse();
            if !holds {
                message
            } else {
                // Borrowed shared: delivering runs no code of ours, and
                // if it did, `remember` and `forget` would find the cache
                // busy and skip.
                match send(&entry.resolved, message) {
                    Ok(()) => return Ok(()),
                    Err(refused) => refused,
                }
            }
        };
        if let Ok(mut routes) = routes.try_borrow_mut() {
            routes.entries.remove(&slot);
        }
        Err(message)
    })
}

/// Keeps `route`, the route of `key` of shard `shard` of kind `kind`, for
/// this thread's next sends to it.
pub(crate) fn remember(kind: u64, key: &str, hash: u64, shard: u32, route: CachedRoute) {
    ROUTES.with(|routes| {
        let Ok(mut routes) = routes.try_borrow_mut() else {
            return;
        };
        let slot = slot(kind, hash);
        let (resolved, link) = route;
        if let Some(entry) = routes.entries.get_mut(&slot) {
            if entry.key != key {
                entry.key = CompactString::from(key);
            }
            (entry.kind, entry.shard, entry.link) = (kind, shard, link);
            // Dropped after the borrow: it may be the last reference to
            // an ended process's record, whose freeing runs no code of
            // ours, but nothing should find the cache borrowed if it did.
            let replaced = std::mem::replace(&mut entry.resolved, resolved);
            drop(routes);
            drop(replaced);
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
                resolved,
                link,
            },
        );
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lease_clock::LeaseClock;
    use sched::prelude::*;

    /// The PID the cached route would send to, if it holds.
    fn usable(kind: u64, key: &str, hash: u64, is_open: impl FnOnce(u32) -> bool) -> Option<Pid> {
        let mut pid = None;
        let sent = send_cached(kind, key, hash, is_open, (), |resolved, ()| {
            pid = Some(resolved.pid());
            Ok(())
        });
        sent.ok().and(pid)
    }

    /// Waits for events, forever.
    struct Idle;
    impl Process for Idle {
        type Done = ();
        fn step(&mut self, _: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
            Ok(())
        }
    }

    /// `count` processes of a fresh engine, resolved (the engine is kept
    /// by the caller).
    fn processes(count: usize) -> (Scheduler, Vec<Resolved>) {
        let node = Scheduler::builder().workers(1).build();
        let resolved = (0..count)
            .map(|_| {
                let pid = node.spawn(Idle).expect("spawned").pid();
                node.resolve(pid).expect("resolved")
            })
            .collect();
        (node, resolved)
    }

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
        let (_node, resolved) = processes(1);
        let (pid, l) = (resolved[0].pid(), link());
        let route = || (resolved[0].clone(), Arc::clone(&l));
        assert_eq!(usable(kind, "a", hash("a"), |_| true), None);
        remember(kind, "a", hash("a"), 3, route());
        assert_eq!(usable(kind, "a", hash("a"), |s| s == 3), Some(pid));
        assert_eq!(usable(kind, "b", hash("b"), |_| true), None);
        assert_eq!(usable(next_kind_id(), "a", hash("a"), |_| true), None);
        // A shard not open: not used, and forgotten.
        assert_eq!(usable(kind, "a", hash("a"), |_| false), None);
        assert_eq!(usable(kind, "a", hash("a"), |_| true), None);
        remember(kind, "a", hash("a"), 3, route());
        l.stopping.store(true, std::sync::atomic::Ordering::Release);
        assert_eq!(usable(kind, "a", hash("a"), |_| true), None);
        remember(kind, "a", hash("a"), 3, (resolved[0].clone(), link()));
        // A refusal hands the message back and forgets the route.
        let refused = send_cached(kind, "a", hash("a"), |_| true, 5u8, |_, m| Err(m));
        assert_eq!(refused, Err(5));
        assert_eq!(usable(kind, "a", hash("a"), |_| true), None);
    }

    #[test]
    fn a_thread_keeps_at_most_max_routes_and_starts_afresh_past_them() {
        let kind = next_kind_id();
        let l = link();
        let (_node, resolved) = processes(2);
        let keys: Vec<String> = (0..MAX_ROUTES).map(|k| format!("key-{k}")).collect();
        for key in &keys {
            remember(
                kind,
                key,
                hash(key),
                0,
                (resolved[0].clone(), Arc::clone(&l)),
            );
        }
        let held = |key: &String| usable(kind, key, hash(key), |_| true).is_some();
        assert!(keys.iter().all(held), "every key of a full cache is kept");
        remember(
            kind,
            "one more",
            hash("one more"),
            0,
            (resolved[1].clone(), l),
        );
        assert_eq!(
            usable(kind, "one more", hash("one more"), |_| true),
            Some(resolved[1].pid())
        );
        assert!(!keys.iter().any(held), "the full cache started afresh");
    }
}
