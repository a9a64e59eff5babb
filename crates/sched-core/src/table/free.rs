//! Free ids, handed out in blocks so that a PID costs no shared write in
//! the common case.
//!
//! A free id is the whole id of the next PID its slot will be known by
//! (index and generation, see the table's docs), so the slot itself keeps
//! no generation while it is free. Each worker thread keeps an [`IdCache`]:
//! ids of slots its own processes freed, and a range of never-used indices.
//! It only touches shared state to refill (a block of recycled ids from the
//! [`Pool`], or a fresh range of `BLOCK` indices with one `fetch_add`) and
//! to spill (a block back to the pool when it holds too many). Threads that
//! are not workers share the pool's own cache behind its mutex.

use std::ops::Range;
use std::sync::atomic::Ordering::Relaxed;

use super::{encode, INDICES};
use crate::sync::{AtomicU64, Mutex};

/// Ids moved between a cache and the pool at once, and the length of a
/// fresh range.
#[cfg(not(loom))]
pub(super) const BLOCK: usize = 64;
#[cfg(loom)]
pub(super) const BLOCK: usize = 2;

/// One thread's free ids.
#[derive(Debug, Default)]
pub(crate) struct IdCache {
    /// Ids of freed slots, their next generation; reused newest first
    /// (the slot is likely still in cache).
    recycled: Vec<u64>,
    /// Indices nobody has used yet.
    fresh: Range<u64>,
}

impl IdCache {
    pub(crate) fn new() -> Self {
        IdCache::default()
    }

    fn pop(&mut self) -> Option<u64> {
        self.recycled
            .pop()
            .or_else(|| self.fresh.next().map(|index| encode(index, 0)))
    }
}

/// The ids no worker holds, and the source of fresh indices.
#[derive(Debug)]
pub(super) struct Pool {
    /// The first index no cache has been given yet.
    next_fresh: AtomicU64,
    /// Spilled blocks, and the cache of threads that are not workers.
    shared: Mutex<IdCache>,
}

impl Pool {
    pub(super) fn new() -> Self {
        Pool {
            next_fresh: AtomicU64::new(0),
            shared: Mutex::new(IdCache::new()),
        }
    }

    /// A free id for a thread with `cache` (a worker) or without one.
    pub(super) fn take(&self, cache: Option<&mut IdCache>) -> Option<u64> {
        match cache {
            Some(cache) => cache.pop().or_else(|| {
                self.refill(cache);
                cache.pop()
            }),
            None => {
                let mut shared = self.shared.lock();
                shared.pop().or_else(|| {
                    shared.fresh = self.fresh_range();
                    shared.pop()
                })
            }
        }
    }

    /// Returns a free id to `cache`, or to the pool.
    pub(super) fn give(&self, id: u64, cache: Option<&mut IdCache>) {
        match cache {
            Some(cache) => {
                cache.recycled.push(id);
                // Bounded, so that ids freed on one worker (processes that
                // ended there) reach the workers and threads that spawn.
                if cache.recycled.len() >= 2 * BLOCK {
                    let spilled = cache.recycled.drain(..BLOCK);
                    self.shared.lock().recycled.extend(spilled);
                }
            }
            None => self.shared.lock().recycled.push(id),
        }
    }

    /// Gives `cache` a block of ids: spilled ones if there are, else a
    /// fresh range.
    fn refill(&self, cache: &mut IdCache) {
        {
            let mut shared = self.shared.lock();
            let from = shared.recycled.len().saturating_sub(BLOCK);
            if from < shared.recycled.len() {
                cache.recycled.extend(shared.recycled.drain(from..));
                return;
            }
        }
        cache.fresh = self.fresh_range();
    }

    /// `BLOCK` indices nobody has had (fewer, or none, near the end).
    fn fresh_range(&self) -> Range<u64> {
        // Relaxed: the counter only has to hand each index out once; the
        // slots are published through the segment directory.
        let start = self.next_fresh.fetch_add(BLOCK as u64, Relaxed);
        start.min(INDICES)..(start + BLOCK as u64).min(INDICES)
    }
}
