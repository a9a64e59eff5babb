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
fn head_never_rests_on_a_sentinel() {
    let (tx, mut rx) = queue();
    let mut out = Vec::new();
    assert_eq!(head(&rx), START);
    // The first block's short lap, then a full one.
    for (fill, lap) in [(FIRST_CAP, 2), (BLOCK_CAP, 3)] {
        for i in 0..fill {
            tx.push(i).unwrap();
        }
        rx.drain_into(&mut out);
        assert_eq!(
            head(&rx),
            lap * LAP,
            "head skipped the sentinel into the next lap"
        );
        assert!(rx.is_empty());
    }
    tx.push(99).unwrap();
    assert!(!rx.is_empty());
    out.clear();
    rx.drain_into(&mut out);
    assert_eq!(out, [99]);
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
    for i in 0..FIRST_CAP {
        tx.push(i).unwrap();
    }
    rx.drain_into(&mut out);
    assert_eq!(pool_len(&rx), 0, "the small first block was freed");
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
    for i in 0..BLOCK_CAP {
        tx.push(i).unwrap();
    }
    // The word now sits at the start of the next lap, past the sentinel.
    assert_eq!(rx.close(), (0..BLOCK_CAP).collect::<Vec<_>>());
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
