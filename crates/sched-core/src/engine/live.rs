//! The live-process count and the "stopping" flag in one atomic word.
//!
//! Admitting a process and starting shutdown must be one atomic decision
//! each: with the flag and the count in separate words, a submission could
//! check "not stopping", then a shutdown could see no live process and let
//! the workers exit, and only then the submission count itself live and
//! queue a process nobody would ever run. In one word, a submission either
//! sees the flag (and fails with `ShuttingDown`) or is counted before the
//! flag is set, so the shutdown that sets it waits for, cancels and
//! reports that process.

use std::sync::atomic::Ordering::{Relaxed, SeqCst};

use crossbeam_utils::CachePadded;

use crate::sync::AtomicUsize;

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

/// The admission word: live count in the low bits, `STOPPING` on top.
#[derive(Debug)]
pub(crate) struct Live {
    word: CachePadded<AtomicUsize>,
    /// `usize::MAX` when unlimited (then admission is one `fetch_add`).
    max: usize,
}

impl Live {
    pub(crate) fn new(max: usize) -> Self {
        Live {
            word: CachePadded::new(AtomicUsize::new(0)),
            max: max.min(STOPPING - 1),
        }
    }

    /// Counts one more live process, unless shutdown has begun or the
    /// maximum is reached.
    pub(crate) fn admit(&self) -> Result<(), Refused> {
        if self.max == STOPPING - 1 {
            // Unlimited: one read-modify-write; a late arrival undoes itself.
            let before = self.word.fetch_add(1, SeqCst);
            if before & STOPPING != 0 {
                self.release();
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

    /// One live process fewer. Returns whether that was the last one while
    /// stopping (the caller then wakes shutdown).
    pub(crate) fn release(&self) -> bool {
        let before = self.word.fetch_sub(1, SeqCst);
        debug_assert!(before & !STOPPING > 0, "released more than admitted");
        before == STOPPING | 1
    }

    /// Sets the stopping flag. Returns whether this call set it (the first
    /// shutdown) rather than finding it set.
    pub(crate) fn stop(&self) -> bool {
        self.word.fetch_or(STOPPING, SeqCst) & STOPPING == 0
    }

    /// The configured maximum (`usize::MAX`-like when unlimited).
    pub(crate) fn max(&self) -> usize {
        self.max
    }

    pub(crate) fn is_stopping(&self) -> bool {
        self.word.load(SeqCst) & STOPPING != 0
    }

    /// Processes counted live now.
    pub(crate) fn count(&self) -> usize {
        self.word.load(SeqCst) & !STOPPING
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use crate::sync::{thread, Arc};

    /// A submission racing the first shutdown: either it is refused, or the
    /// shutdown that set the flag counts it (and so waits for it). Both
    /// the limited (CAS) and the unlimited (fetch-add and undo) paths.
    #[test]
    fn admission_and_stop_are_one_decision() {
        for max in [usize::MAX, 4] {
            loom::model(move || {
                let live = Arc::new(Live::new(max));
                let submitter = {
                    let live = live.clone();
                    thread::spawn(move || live.admit())
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

    /// The last release while stopping reports it exactly once.
    #[test]
    fn the_last_release_while_stopping_is_reported_once() {
        loom::model(|| {
            let live = Arc::new(Live::new(usize::MAX));
            live.admit().unwrap();
            live.admit().unwrap();
            let other = {
                let live = live.clone();
                thread::spawn(move || live.release())
            };
            live.stop();
            let mine = live.release();
            let theirs = other.join().unwrap();
            assert!(mine ^ theirs, "exactly one release is the last");
            assert_eq!(live.count(), 0);
        });
    }
}
