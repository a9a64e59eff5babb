//! Parking idle workers and waking them one at a time.
//!
//! The protocol and the argument that no wakeup is lost are in
//! `src/PROTOCOL.md` (section "Parking").

use std::collections::VecDeque;
use std::sync::atomic::Ordering::SeqCst;

use crossbeam_utils::CachePadded;

use crate::sync::{fence, AtomicUsize, Condvar, Mutex};

/// One worker's bed: a sticky "notified" flag and a condition variable.
#[derive(Debug, Default)]
struct Parker {
    notified: Mutex<bool>,
    wakeup: Condvar,
}

impl Parker {
    /// Sleeps until notified, then consumes the notification. A
    /// notification that came first makes this return at once.
    fn park(&self) {
        let mut notified = self.notified.lock();
        while !*notified {
            notified = self.wakeup.wait(notified);
        }
        *notified = false;
    }

    fn unpark(&self) {
        *self.notified.lock() = true;
        self.wakeup.notify_one();
    }
}

/// The idle workers, in the order they went to sleep.
#[derive(Debug)]
pub(crate) struct Sleepers {
    /// Workers that are parked or about to park. Waking pops the front, so
    /// the worker that has slept longest wakes first: wakeups spread over
    /// the idle workers instead of hitting the same one.
    idle: Mutex<VecDeque<usize>>,
    /// `idle.len()`, readable without the lock: the common "nobody sleeps"
    /// case of `notify_one` costs one fence and one load.
    count: CachePadded<AtomicUsize>,
    /// Workers looking for work (spinning or yielding) and not parked. While
    /// one searches, producers need not wake anyone: the searcher will find
    /// the work, or, if it finds other work first and was the last searcher,
    /// wake a parked worker to keep searching (`stop_searching`).
    searching: CachePadded<AtomicUsize>,
    parkers: Box<[CachePadded<Parker>]>,
}

impl Sleepers {
    pub(crate) fn new(workers: usize) -> Self {
        Sleepers {
            idle: Mutex::new(VecDeque::with_capacity(workers)),
            count: CachePadded::new(AtomicUsize::new(0)),
            searching: CachePadded::new(AtomicUsize::new(0)),
            parkers: (0..workers)
                .map(|_| CachePadded::new(Parker::default()))
                .collect(),
        }
    }

    /// Parks worker `me` unless `has_work` (checked after announcing the
    /// intent to sleep) finds something to do. Returns whether it slept.
    pub(crate) fn park(&self, me: usize, has_work: impl FnOnce() -> bool) -> bool {
        {
            let mut idle = self.idle.lock();
            idle.push_back(me);
            self.count.fetch_add(1, SeqCst);
        }
        // Pairs with the fence in `notify_one`: either the notifier sees our
        // count, or we see its work.
        fence(SeqCst);
        if has_work() {
            let mut idle = self.idle.lock();
            if let Some(at) = idle.iter().position(|&w| w == me) {
                idle.remove(at);
                self.count.fetch_sub(1, SeqCst);
                return false;
            }
            // A notifier already took us off the list and is about to unpark
            // us (or has): consume that notification below so it does not
            // linger and make a later park return at once for nothing.
        }
        self.parkers[me].park();
        true
    }

    /// A worker starts looking for work (its first failed search).
    pub(crate) fn start_searching(&self) {
        self.searching.fetch_add(1, SeqCst);
    }

    /// A worker stops looking for work, because it found some or is about to
    /// park. Returns whether it was the last searcher: one that found work
    /// then calls `notify_one`, so that work queued while it searched (and
    /// whose producer skipped the wakeup because it searched) still gets a
    /// worker of its own.
    pub(crate) fn stop_searching(&self) -> bool {
        self.searching.fetch_sub(1, SeqCst) == 1
    }

    /// Wakes one parked worker, if any and if no worker is searching. Call
    /// after making work visible.
    pub(crate) fn notify_one(&self) {
        fence(SeqCst);
        if self.searching.load(SeqCst) > 0 || self.count.load(SeqCst) == 0 {
            return;
        }
        let woken = {
            let mut idle = self.idle.lock();
            let woken = idle.pop_front();
            if woken.is_some() {
                self.count.fetch_sub(1, SeqCst);
            }
            woken
        };
        if let Some(worker) = woken {
            self.parkers[worker].unpark();
        }
    }

    /// Wakes every parked worker (shutdown).
    pub(crate) fn notify_all(&self) {
        let woken: Vec<usize> = {
            let mut idle = self.idle.lock();
            self.count.store(0, SeqCst);
            idle.drain(..).collect()
        };
        for worker in woken {
            self.parkers[worker].unpark();
        }
    }

    /// How many workers are parked or about to park.
    pub(crate) fn sleeping(&self) -> usize {
        self.count.load(SeqCst)
    }
}
