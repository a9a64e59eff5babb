//! Items whose `Drop` panics: the queue drops what is left when it goes,
//! and a panic there must leave the queue consistent. Every item is dropped
//! exactly once, the panic reaches the caller, and producers that outlive
//! the consumer see a closed queue. These also run under miri, which
//! reports any double drop, use after free or leak.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use mpsc::{queue, Queue};

/// Items per block (the queue's block size).
const BLOCK: usize = 15;

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

/// `n` items, the one at `panicking` panicking when dropped.
fn items(drops: &Arc<AtomicUsize>, n: usize, panicking: usize) -> impl Iterator<Item = Item> + '_ {
    (0..n).map(move |i| Item {
        drops: drops.clone(),
        panics: i == panicking,
    })
}

/// Runs `f`, which must panic (in an item's `Drop`), and checks that the
/// panic reached us. A drop that never returns (a second close of the
/// queue, spinning for items already taken) fails the test after a few
/// seconds instead of hanging it (not under miri, which has no real time
/// to wait by).
fn expect_panic(f: impl FnOnce() + Send + 'static) {
    let run = move || catch_unwind(AssertUnwindSafe(f)).is_err();
    let panicked = if cfg!(miri) {
        run()
    } else {
        let (done, outcome) = std::sync::mpsc::channel();
        std::thread::spawn(move || done.send(run()));
        outcome
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("dropping the queue never returned")
    };
    assert!(panicked, "the item's panic reaches the caller");
}

#[test]
fn consumer_drop_with_panicking_item_drops_each_item_once() {
    let drops = Arc::new(AtomicUsize::new(0));
    let n = 5;
    let (tx, rx) = queue();
    items(&drops, n, 0).for_each(|item| assert!(tx.push(item).is_ok()));
    drop(tx);
    // The consumer is the last handle: its drop also drops the queue.
    expect_panic(|| drop(rx));
    assert_eq!(drops.load(Ordering::SeqCst), n);
}

#[test]
fn consumer_drop_with_panicking_item_leaves_producers_a_closed_queue() {
    let drops = Arc::new(AtomicUsize::new(0));
    let n = 5;
    let (tx, rx) = queue();
    items(&drops, n, 2).for_each(|item| assert!(tx.push(item).is_ok()));
    expect_panic(|| drop(rx));
    assert_eq!(drops.load(Ordering::SeqCst), n);
    // The producer outlives the consumer: the queue is closed, and dropping
    // the last producer (which drops the queue) drops nothing again.
    let refused = tx.push(Item {
        drops: drops.clone(),
        panics: false,
    });
    assert!(refused.as_ref().is_err_and(|e| e.is_closed()));
    drop(refused);
    assert_eq!(drops.load(Ordering::SeqCst), n + 1);
    drop(tx);
    assert_eq!(drops.load(Ordering::SeqCst), n + 1);
}

#[test]
fn consumer_drop_with_panicking_item_across_blocks_drops_each_item_once() {
    // Several blocks pending: taking them recycles (and frees) the finished
    // blocks, which a second pass over the queue would read after the free.
    let drops = Arc::new(AtomicUsize::new(0));
    let n = 4 * BLOCK + 3;
    let (tx, rx) = queue();
    items(&drops, n, BLOCK + 1).for_each(|item| assert!(tx.push(item).is_ok()));
    drop(tx);
    expect_panic(|| drop(rx));
    assert_eq!(drops.load(Ordering::SeqCst), n);
}

#[test]
fn consumer_drop_after_a_partial_drain_with_panicking_item_drops_each_item_once() {
    let drops = Arc::new(AtomicUsize::new(0));
    let first = 2 * BLOCK + 4;
    let rest = 3 * BLOCK + 2;
    let (tx, mut rx) = queue();
    items(&drops, first, usize::MAX).for_each(|item| assert!(tx.push(item).is_ok()));
    let mut out = Vec::new();
    assert_eq!(rx.drain_into(&mut out), first);
    drop(out);
    assert_eq!(drops.load(Ordering::SeqCst), first);
    // Several blocks pending when the consumer goes, one item panicking in
    // the middle.
    items(&drops, rest, BLOCK + 3).for_each(|item| assert!(tx.push(item).is_ok()));
    drop(tx);
    expect_panic(|| drop(rx));
    assert_eq!(drops.load(Ordering::SeqCst), first + rest);
}

#[test]
fn embedded_queue_drop_with_panicking_item_drops_each_item_once() {
    let drops = Arc::new(AtomicUsize::new(0));
    let n = 2 * BLOCK + 1;
    let q = Queue::new();
    items(&drops, n, 1).for_each(|item| assert!(q.push(item).is_ok()));
    expect_panic(|| drop(q));
    assert_eq!(drops.load(Ordering::SeqCst), n);
}
