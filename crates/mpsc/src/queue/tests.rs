//! Unit tests of the queue.
use super::*;
use std::sync::atomic::AtomicUsize as StdCounter;
use std::sync::Arc as StdArc;

/// Crossing from the small first block into full ones.
mod first_block;

/// Counts its drops, to prove every item is dropped exactly once.
struct Tracked(StdArc<StdCounter>);

impl Drop for Tracked {
    fn drop(&mut self) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

fn pool_len<T>(rx: &Consumer<T>) -> usize {
    rx.queue.shared.pool.len.load(Ordering::SeqCst)
}

fn head<T>(rx: &Consumer<T>) -> u64 {
    rx.cursor(|c, _| c.head)
}

fn block<T>(rx: &Consumer<T>) -> *mut Block<T> {
    rx.cursor(|c, _| c.block)
}

#[test]
fn fifo_across_many_blocks() {
    let (tx, mut rx) = queue();
    let n = if cfg!(miri) {
        3 * BLOCK_CAP + 5
    } else {
        40 * BLOCK_CAP + 7
    };
    for i in 0..n {
        tx.push(i).unwrap();
    }
    let mut out = Vec::new();
    assert_eq!(rx.drain_into(&mut out), n);
    assert_eq!(out, (0..n).collect::<Vec<_>>());
    assert!(rx.is_empty());
    assert!(pool_len(&rx) <= POOL_MAX);
}

#[test]
fn head_waits_at_the_install_position_until_the_next_block_is_needed() {
    let (tx, mut rx) = queue();
    let mut out = Vec::new();
    assert_eq!(head(&rx), START);
    for i in 0..FIRST_CAP {
        tx.push(i).unwrap();
    }
    rx.drain_into(&mut out);
    let first = rx.queue.shared.first.load(Ordering::SeqCst);
    assert_eq!(
        head(&rx),
        LAP + INSTALL as u64,
        "past the first block's items"
    );
    assert_eq!(block(&rx), first, "the finished block is kept");
    assert!(rx.is_empty());
    // The first push of the next block's lap installs it; the consumer
    // follows the link and frees the first block.
    for i in 0..BLOCK_CAP {
        tx.push(i).unwrap();
    }
    assert!(!rx.is_empty(), "is_empty looks through the link");
    rx.drain_into(&mut out);
    assert_eq!(head(&rx), 2 * LAP + INSTALL as u64);
    assert_ne!(block(&rx), first);
    assert!(rx.is_empty());
    tx.push(99).unwrap();
    assert!(!rx.is_empty());
    out.clear();
    rx.drain_into(&mut out);
    assert_eq!(out, [99]);
    assert_eq!(
        head(&rx),
        3 * LAP + 1,
        "over the sentinel, onto the next block"
    );
}

/// A block is allocated for an item that needs it, not when the block
/// before fills up: a process that received as many events as its block
/// holds keeps only that block.
#[test]
fn a_full_block_does_not_allocate_the_next_one() {
    let (tx, mut rx) = queue();
    for i in 0..FIRST_CAP {
        tx.push(i).unwrap();
    }
    let first = rx.queue.shared.first.load(Ordering::SeqCst);
    // SAFETY: the consumer has not finished it, so it is live.
    assert!(unsafe { (*first).next.load(Ordering::SeqCst) }.is_null());
    assert_eq!(rx.queue.shared.tail.block.load(Ordering::SeqCst), first);
    tx.push(FIRST_CAP).unwrap();
    // SAFETY: as above: its last item is still pending.
    let second = unsafe { (*first).next.load(Ordering::SeqCst) };
    assert!(!second.is_null(), "the next item installed a block");
    let mut out = Vec::new();
    rx.drain_into(&mut out);
    assert_eq!(out, (0..=FIRST_CAP).collect::<Vec<_>>());
    for i in 1..BLOCK_CAP {
        tx.push(i).unwrap();
    }
    // SAFETY: the consumer's block; it holds pending items.
    assert!(unsafe { (*second).next.load(Ordering::SeqCst) }.is_null());
}

#[test]
fn a_queue_has_no_block_until_the_first_push() {
    let (tx, mut rx) = queue();
    assert!(block(&rx).is_null());
    assert!(rx.queue.shared.first.load(Ordering::SeqCst).is_null());
    assert!(rx.is_empty());
    assert_eq!(rx.drain_into(&mut Vec::new()), 0);
    tx.push(1).unwrap();
    assert!(!rx.is_empty(), "the consumer finds the first block");
    let mut out = Vec::new();
    assert_eq!(rx.drain_into(&mut out), 1);
    assert_eq!(out, [1]);
    assert!(!block(&rx).is_null());
}

#[test]
fn the_first_block_is_found_after_producers_moved_past_it() {
    let (tx, mut rx) = queue();
    let n = 3 * BLOCK_CAP + 1;
    for i in 0..n {
        tx.push(i).unwrap();
    }
    let mut out = Vec::new();
    assert_eq!(rx.drain_into(&mut out), n);
    assert_eq!(out, (0..n).collect::<Vec<_>>());
}

#[test]
fn an_unused_queue_closes_and_resets_without_a_block() {
    let (old, mut rx) = queue::<u8>();
    assert!(rx.close().is_empty());
    assert!(old.push(1).unwrap_err().is_closed());
    assert!(rx.reset().is_empty());
    assert!(block(&rx).is_null(), "reset allocated nothing");
    assert!(old.push(2).unwrap_err().is_stale());
    let tx = rx.producer();
    tx.push(3).unwrap();
    let mut out = Vec::new();
    rx.drain_into(&mut out);
    assert_eq!(out, [3]);
    assert!(rx.reset().is_empty());
    tx.push(4).unwrap_err();
    rx.producer().push(5).unwrap();
    assert_eq!(rx.close(), [5]);
}

#[test]
fn drained_blocks_are_recycled_not_reallocated() {
    let (tx, mut rx) = queue();
    let mut out = Vec::new();
    // The first block, then one item into the first full block: the
    // consumer follows it there and frees the (small) first block.
    for i in 0..=FIRST_CAP {
        tx.push(i).unwrap();
    }
    rx.drain_into(&mut out);
    assert_eq!(pool_len(&rx), 0, "the small first block was freed");
    // Fill it, and one more into a second full block.
    for i in 0..BLOCK_CAP {
        tx.push(i).unwrap();
    }
    rx.drain_into(&mut out);
    assert_eq!(pool_len(&rx), 1, "the finished block went to the pool");
    for i in 0..BLOCK_CAP {
        tx.push(i).unwrap();
    }
    assert_eq!(pool_len(&rx), 0, "the installer took it back");
    out.clear();
    assert_eq!(rx.drain_into(&mut out), BLOCK_CAP);
    assert_eq!(pool_len(&rx), 1);
}

#[test]
fn close_on_a_block_boundary_returns_everything() {
    let (tx, mut rx) = queue();
    let n = FIRST_CAP + BLOCK_CAP;
    for i in 0..n {
        tx.push(i).unwrap();
    }
    // The word now sits on the install position: no block after it yet.
    assert_eq!(rx.close(), (0..n).collect::<Vec<_>>());
    assert!(tx.push(7).unwrap_err().is_closed());
    assert!(rx.is_empty());
    assert!(rx.close().is_empty());
}

#[test]
fn reset_reuses_the_block_and_skips_to_a_fresh_lap() {
    let (tx, mut rx) = queue();
    tx.push(1).unwrap();
    let first = rx.queue.shared.first.load(Ordering::SeqCst);
    assert_eq!(rx.reset(), [1]);
    assert_eq!(block(&rx), first, "no new block for a reused queue");
    assert_eq!(
        head(&rx),
        2 * LAP + FIRST_OFFSET,
        "the first lap is virtual, the next is fresh and short like the block"
    );
    assert!(tx.push(2).unwrap_err().is_stale());
    let tx = rx.producer();
    tx.push(3).unwrap();
    let mut out = Vec::new();
    rx.drain_into(&mut out);
    assert_eq!(out, [3]);
}

#[test]
fn reset_trims_the_pool() {
    let (tx, mut rx) = queue();
    let mut out = Vec::new();
    for i in 0..(POOL_MAX + 2) * BLOCK_CAP {
        tx.push(i).unwrap();
    }
    rx.drain_into(&mut out);
    assert_eq!(pool_len(&rx), POOL_MAX);
    rx.reset();
    assert!(pool_len(&rx) <= 1);
}

#[test]
fn stale_producer_of_a_closed_queue_is_stale_after_reset() {
    let (old, mut rx) = queue::<u8>();
    rx.close();
    assert!(old.push(1).unwrap_err().is_closed());
    assert!(old.is_closed());
    rx.reset();
    assert!(old.is_closed(), "stale producers report closed");
    let err = old.push(2).unwrap_err();
    assert!(err.is_stale());
    assert_eq!(err.into_inner(), 2);
    assert!(!rx.producer().is_closed());
}

#[test]
fn many_resets_never_revive_old_producers() {
    let mut rx = Consumer::new();
    let mut olds = Vec::new();
    let rounds = if cfg!(miri) { 5 } else { 100 };
    for round in 0..rounds {
        let tx = rx.producer();
        tx.push(round).unwrap();
        for old in &olds {
            let old: &Producer<i32> = old;
            assert!(old.push(-1).unwrap_err().is_stale());
        }
        olds.push(tx);
        assert_eq!(rx.reset(), [round]);
    }
    assert_eq!(rx.generation(), rounds as u64);
}

#[test]
fn every_item_is_dropped_exactly_once() {
    let drops = StdArc::new(StdCounter::new(0));
    let n = 2 * BLOCK_CAP + 3;
    {
        let (tx, mut rx) = queue();
        for _ in 0..n {
            tx.push(Tracked(drops.clone())).unwrap();
        }
        let mut out = Vec::new();
        rx.drain_into(&mut out);
        drop(out);
        assert_eq!(drops.load(std::sync::atomic::Ordering::SeqCst), n);
        for _ in 0..n {
            tx.push(Tracked(drops.clone())).unwrap();
        }
        // Dropping the consumer drops the pending items; the producer
        // outlives it and sees a closed queue.
        drop(rx);
        assert_eq!(drops.load(std::sync::atomic::Ordering::SeqCst), 2 * n);
        let err = tx.push(Tracked(drops.clone())).unwrap_err();
        assert!(err.is_closed());
        drop(err);
    }
    assert_eq!(drops.load(std::sync::atomic::Ordering::SeqCst), 2 * n + 1);
}

#[test]
fn zero_sized_items() {
    let (tx, mut rx) = queue();
    for _ in 0..BLOCK_CAP + 2 {
        tx.push(()).unwrap();
    }
    let mut out = Vec::new();
    assert_eq!(rx.drain_into(&mut out), BLOCK_CAP + 2);
}

#[test]
fn error_messages_name_the_cause() {
    let closed = PushError::Closed(1).to_string();
    let stale = PushError::Stale(1).to_string();
    assert!(closed.contains("closed"), "{closed}");
    assert!(stale.contains("stale"), "{stale}");
    assert_eq!(format!("{:?}", PushError::Stale(1)), "Stale(..)");
    let boxed: Box<dyn std::error::Error> = Box::new(PushError::Closed(()));
    assert!(boxed.to_string().contains("closed"));
}

#[test]
fn debug_output() {
    let (tx, rx) = queue::<u8>();
    assert!(format!("{tx:?}").contains("generation: 0"));
    assert!(format!("{rx:?}").contains("empty: true"));
}

#[test]
fn handles_are_send_and_sync() {
    fn assert_send_sync<X: Send + Sync>() {}
    assert_send_sync::<Producer<String>>();
    assert_send_sync::<Consumer<String>>();
    assert_send_sync::<PushError<String>>();
}

/// Closing an embedded `Queue` frees its blocks (it can never be reopened),
/// and every later call sees a closed, empty queue without touching them.
#[test]
fn a_closed_queue_keeps_no_block() {
    for n in [
        0,
        1,
        FIRST_CAP,
        FIRST_CAP + 1,
        FIRST_CAP + 2 * BLOCK_CAP + 1,
    ] {
        let q = Queue::new();
        for i in 0..n {
            q.push(i).unwrap();
        }
        let mut out = Vec::new();
        // SAFETY: this thread is the only consumer.
        unsafe { q.drain_into(&mut out) };
        for i in n..2 * n {
            q.push(i).unwrap();
        }
        // SAFETY: as above.
        let pending = unsafe { q.close() };
        out.extend(pending);
        assert_eq!(out, (0..2 * n).collect::<Vec<_>>());
        assert!(q.shared.first.load(Ordering::SeqCst).is_null());
        assert_eq!(q.shared.pool.len.load(Ordering::SeqCst), 0);
        assert!(q.shared.pool.head.load(Ordering::SeqCst).is_null());
        // SAFETY: as above.
        assert!(unsafe { q.cursor.with(|c| (*c).block.is_null()) });
        assert!(q.push(7).unwrap_err().is_closed());
        // SAFETY: as above (miri checks that none of these reads a freed
        // block).
        unsafe {
            assert!(q.is_empty());
            assert_eq!(q.drain_into(&mut out), 0);
            assert!(q.close().is_empty());
        }
    }
}
