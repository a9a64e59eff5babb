//! A count-down latch the benchmarks wait on: the measuring thread sleeps
//! until every process (task) of a round has counted down.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};

/// Counts down from `n`; the thread in [`wait`](Latch::wait) wakes when it
/// reaches zero.
pub(crate) struct Latch {
    left: AtomicUsize,
    done: Mutex<bool>,
    cv: Condvar,
}

impl Latch {
    pub(crate) fn new(n: usize) -> Arc<Self> {
        Arc::new(Latch {
            left: AtomicUsize::new(n),
            done: Mutex::new(false),
            cv: Condvar::new(),
        })
    }

    pub(crate) fn count_down(&self) {
        if self.left.fetch_sub(1, Ordering::AcqRel) == 1 {
            *self.done.lock().expect("latch") = true;
            self.cv.notify_all();
        }
    }

    pub(crate) fn wait(&self) {
        let mut done = self.done.lock().expect("latch");
        while !*done {
            done = self.cv.wait(done).expect("latch");
        }
    }
}
