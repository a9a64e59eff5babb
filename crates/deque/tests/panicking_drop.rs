//! Items whose `Drop` panics, left in a deque when its last handle goes:
//! every item is still dropped exactly once, the ring is freed, and the
//! panic reaches the caller. Also run under miri.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use deque::{Steal, Worker};

/// An item that counts its drops and, if `panics`, panics in its `Drop`.
struct Item {
    drops: Arc<AtomicUsize>,
    panics: bool,
}

impl Drop for Item {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::SeqCst);
        if self.panics {
            panic!("an item's Drop panicked");
        }
    }
}

/// A deque of `n` items, the one at `panicking` panicking when dropped.
fn filled(drops: &Arc<AtomicUsize>, n: usize, panicking: usize) -> Worker<Item> {
    let w = Worker::with_capacity(4);
    for i in 0..n {
        w.push(Item {
            drops: drops.clone(),
            panics: i == panicking,
        });
    }
    w
}

#[test]
fn worker_drop_with_panicking_item_drops_each_item_once() {
    let drops = Arc::new(AtomicUsize::new(0));
    let n = 9; // grows the 4-slot ring twice
    let w = filled(&drops, n, 2);
    let outcome = catch_unwind(AssertUnwindSafe(|| drop(w)));
    assert!(outcome.is_err(), "the item's panic reaches the caller");
    assert_eq!(drops.load(Ordering::SeqCst), n);
}

#[test]
fn last_stealer_drop_with_panicking_item_drops_each_item_once() {
    let drops = Arc::new(AtomicUsize::new(0));
    let n = 6;
    let w = filled(&drops, n, 3);
    let s = w.stealer();
    // Take the oldest, so the items left start past position 0.
    match s.steal() {
        Steal::Success(item) => drop(item),
        _ => panic!("nothing to steal"),
    }
    drop(w);
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    let outcome = catch_unwind(AssertUnwindSafe(|| drop(s)));
    assert!(outcome.is_err(), "the item's panic reaches the caller");
    assert_eq!(drops.load(Ordering::SeqCst), n);
}
