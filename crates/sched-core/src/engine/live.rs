//! The live-process count and the "stopping" flag.
//!
//! Admitting a process and starting shutdown must be one atomic decision
//! each: otherwise a submission could check "not stopping", then a shutdown
//! could see no live process and let the workers exit, and only then the
//! submission count itself live and queue a process nobody would ever run.
//! A submission either sees the flag (and fails with `ShuttingDown`) or is
//! counted before the flag is set, so the shutdown that sets it waits for,
//! cancels and reports that process.
//!
//! - **With a maximum** (`Builder::max_processes`), the count and the flag
//!   share one word: admission is a CAS that checks both, so the limit is
//!   exact.
//! - **Without one** (the default), no word is written by every admission:
//!   each worker counts in a shard of its own (outside threads share one
//!   more shard), and the count is the sum of the shards, read only by
//!   shutdown and statistics. A process may be counted up in one shard and
//!   down in another, so a shard alone means nothing; the sum does. The
//!   decision against shutdown is a store-load pair on each side (Dekker):
//!   admission increments its shard then loads the flag, shutdown sets the
//!   flag then sums the shards, with a `SeqCst` fence between the store
//!   and the load on each side. In the single total order,
//!   either the admission's load comes after the flag (refused, and the
//!   increment undone) or its increment comes before the shutdown's sum
//!   (counted). A refused admission's transient increment can only make a
//!   sum too high, never too low, so the sum never reaches zero early.

use std::sync::atomic::Ordering::{Relaxed, SeqCst};

use crossbeam_utils::CachePadded;

use crate::sync::{fence, AtomicUsize};

/// The top bit of the word: shutdown has begun.
const STOPPING: usize = 1 << (usize::BITS - 1);

/// Why a process was not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// Shutdown has begun.
    Stopping,
    /// As many processes as the maximum are live.
    Full,
}

/// The admission state; see the module docs.
#[derive(Debug)]
pub(crate) struct Live {
    /// `STOPPING` on top; below it, with a maximum, the live count.
    word: CachePadded<AtomicUsize>,
    /// Without a maximum: per-shard counts, wrapping (a shard may go
    /// "negative" when processes end on another worker than the one that
    /// admitted them). Empty with a maximum.
    shards: Box<[CachePadded<AtomicUsize>]>,
    max: usize,
}

impl Live {
    /// `max` live processes at most (`usize::MAX`: no limit); `shards`
    /// counters when there is no limit (one per worker and one for outside
    /// threads).
    pub(crate) fn new(max: usize, shards: usize) -> Self {
        let max = max.min(STOPPING - 1);
        let shards = if max == STOPPING - 1 {
            shards.max(1)
        } else {
            0
        };
        Live {
            word: CachePadded::new(AtomicUsize::new(0)),
            shards: (0..shards)
                .map(|_| CachePadded::new(AtomicUsize::new(0)))
                .collect(),
            max,
        }
    }

    fn sharded(&self) -> bool {
        !self.shards.is_empty()
    }

    /// Counts one more live process, counted in `shard` (the caller's
    /// worker, or the outside shard), unless shutdown has begun or the
    /// maximum is reached.
    pub(crate) fn admit(&self, shard: usize) -> Result<(), Refused> {
        if self.sharded() {
            let counter = &self.shards[shard % self.shards.len()];
            counter.fetch_add(1, SeqCst);
            // Pairs with the fence in `stop` (the Dekker argument of the
            // module docs rests on these two fences, which loom models).
            fence(SeqCst);
            if self.word.load(SeqCst) & STOPPING != 0 {
                // Undone; the caller wakes shutdown if that made the count
                // zero (see `Live::admit_live`, in `admission.rs`).
                counter.fetch_sub(1, SeqCst);
                return Err(Refused::Stopping);
            }
            return Ok(());
        }
        let mut word = self.word.load(Relaxed);
        loop {
            if word & STOPPING != 0 {
                return Err(Refused::Stopping);
            }
            if word >= self.max {
                return Err(Refused::Full);
            }
            match self
                .word
                .compare_exchange_weak(word, word + 1, SeqCst, Relaxed)
            {
                Ok(_) => return Ok(()),
                Err(current) => word = current,
            }
        }
    }

    /// One live process fewer, counted down in `shard`. Returns whether the
    /// count is zero while stopping (the caller then wakes shutdown). With
    /// shards, several releases may each see zero: waking is idempotent.
    pub(crate) fn release(&self, shard: usize) -> bool {
        if self.sharded() {
            self.shards[shard % self.shards.len()].fetch_sub(1, SeqCst);
            // Pairs with the fence in `stop`: a release either sees the
            // flag, or comes before the shutdown's own count.
            fence(SeqCst);
            return self.is_stopping() && self.count() == 0;
        }
        let before = self.word.fetch_sub(1, SeqCst);
        debug_assert!(before & !STOPPING > 0, "released more than admitted");
        before == STOPPING | 1
    }

    /// Sets the stopping flag. Returns whether this call set it (the first
    /// shutdown) rather than finding it set.
    pub(crate) fn stop(&self) -> bool {
        let first = self.word.fetch_or(STOPPING, SeqCst) & STOPPING == 0;
        fence(SeqCst);
        first
    }

    /// The configured maximum (`usize::MAX`-like when unlimited).
    pub(crate) fn max(&self) -> usize {
        self.max
    }

    pub(crate) fn is_stopping(&self) -> bool {
        self.word.load(SeqCst) & STOPPING != 0
    }

    /// Processes counted live now (with shards, the sum of a moment: exact
    /// once nothing is admitted any more, as during shutdown).
    pub(crate) fn count(&self) -> usize {
        if self.sharded() {
            let sum = self
                .shards
                .iter()
                .fold(0usize, |sum, shard| sum.wrapping_add(shard.load(SeqCst)));
            // Read shard by shard, a sum can catch a process's end without
            // its admission: never below zero.
            return if (sum as isize) < 0 { 0 } else { sum };
        }
        self.word.load(SeqCst) & !STOPPING
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use crate::sync::{thread, Arc};

    /// A submission racing the first shutdown: either it is refused, or the
    /// shutdown that set the flag counts it (and so waits for it). Both
    /// the limited (CAS) and the unlimited (sharded) paths.
    #[test]
    fn admission_and_stop_are_one_decision() {
        for max in [usize::MAX, 4] {
            loom::model(move || {
                let live = Arc::new(Live::new(max, 2));
                let submitter = {
                    let live = live.clone();
                    thread::spawn(move || live.admit(1))
                };
                assert!(live.stop());
                let seen_by_shutdown = live.count();
                let admitted = submitter.join().unwrap();
                match admitted {
                    Ok(()) => assert_eq!(seen_by_shutdown, 1, "admitted but not counted"),
                    Err(refused) => {
                        assert_eq!(refused, Refused::Stopping);
                        assert_eq!(live.count(), 0, "a refused admission stays counted");
                    }
                }
            });
        }
    }

    /// Releases racing the stop, in shards other than the admissions': the
    /// last one to end (at least one release) sees the count reach zero,
    /// and no release sees zero while a process is still live.
    #[test]
    fn the_last_release_while_stopping_is_reported() {
        for max in [usize::MAX, 4] {
            loom::model(move || {
                let live = Arc::new(Live::new(max, 2));
                live.admit(0).unwrap();
                live.admit(0).unwrap();
                let other = {
                    let live = live.clone();
                    thread::spawn(move || live.release(1))
                };
                live.stop();
                let mine = live.release(1);
                let theirs = other.join().unwrap();
                assert!(mine || theirs, "the last release is reported");
                if max != usize::MAX {
                    assert!(mine ^ theirs, "exactly one release is the last");
                }
                assert_eq!(live.count(), 0);
            });
        }
    }

    /// No release reports zero while a process is still live.
    #[test]
    fn no_release_reports_zero_early() {
        loom::model(|| {
            let live = Arc::new(Live::new(usize::MAX, 2));
            live.admit(0).unwrap();
            live.admit(1).unwrap();
            live.stop();
            let other = {
                let live = live.clone();
                thread::spawn(move || live.release(0))
            };
            let mine = live.release(0);
            let theirs = other.join().unwrap();
            assert!(mine || theirs);
            // A third process admitted before the stop keeps it above zero.
            let live = Arc::new(Live::new(usize::MAX, 2));
            live.admit(0).unwrap();
            live.admit(1).unwrap();
            live.admit(1).unwrap();
            live.stop();
            let other = {
                let live = live.clone();
                thread::spawn(move || live.release(0))
            };
            let mine = live.release(1);
            let theirs = other.join().unwrap();
            assert!(!mine && !theirs, "zero reported with a process live");
        });
    }
}
