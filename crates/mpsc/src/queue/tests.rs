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

fn head<T>(rx: &Consumer<T>) -> u64 {
    rx.cursor(|c, _| c.head)
}

fn block<T>(rx: &Consumer<T>) -> *mut Block<T> {
    rx.cursor(|c, _| c.block)
}

/// How many slots `block` has.
fn cap_of<T>(block: *mut Block<T>) -> usize {
    // SAFETY: the tests only ask about blocks the consumer holds or that
    // hold pending items, which are live.
    unsafe { Block::cap(block) }
}

/// The sizes of successive blocks, from the first to the first full one.
fn block_caps() -> Vec<usize> {
    vec![FIRST_CAP, BLOCK_CAP]
}

/// Takes one item into `out`; whether there was one.
fn take_one<T>(rx: &mut Consumer<T>, out: &mut Vec<T>) -> bool {
    rx.cursor_mut(|c, shared| c.try_take(shared))
        .map(|item| out.push(item))
        .is_some()
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
}

/// A consumer that takes its block's last item before the next push
/// reopens the block for the next lap, and that push claims a slot in it
/// instead of installing a new block: a queue drained as it fills keeps its
/// small first block.
#[test]
fn a_drained_block_serves_the_next_lap() {
    let (tx, mut rx) = queue();
    let mut out = Vec::new();
    assert_eq!(head(&rx), START);
    for i in 0..FIRST_CAP {
        tx.push(i).unwrap();
    }
    rx.drain_into(&mut out);
    let first = rx.queue.shared.first.load(Ordering::SeqCst);
    let link = |block: *mut Block<usize>| {
        // SAFETY: the tests below only look at the consumer's live block.
        unsafe { (*block).next.load(Ordering::SeqCst) }
    };
    let word = || rx.queue.shared.tail.word.load(Ordering::SeqCst) >> 1;
    assert_eq!(
        head(&rx),
        2 * LAP + FIRST_OFFSET,
        "reopened: head on the block's first slot of the next lap"
    );
    assert_eq!(word(), head(&rx), "and the producers' word with it");
    assert_eq!(block(&rx), first, "the consumer keeps its block");
    assert!(rx.is_empty());
    // The next push claims a slot of the same block: no new one.
    tx.push(100).unwrap();
    assert!(link(first).is_null(), "nothing installed after it");
    assert_eq!(rx.queue.shared.tail.block.load(Ordering::SeqCst), first);
    assert!(!rx.is_empty());
    out.clear();
    rx.drain_into(&mut out);
    assert_eq!(out, [100]);
    // One at a time, drained each time: still the first block.
    for round in 0..50 {
        out.clear();
        tx.push(round).unwrap();
        rx.drain_into(&mut out);
        assert_eq!(out, [round]);
        assert_eq!(block(&rx), first, "round {round}");
    }
    // A consumer that falls behind: the item after the block's last links
    // a full block, which the consumer follows.
    out.clear();
    let behind: Vec<usize> = (0..=FIRST_CAP).collect();
    for &item in &behind {
        tx.push(item).unwrap();
    }
    rx.drain_into(&mut out);
    assert_eq!(out, behind);
    assert_ne!(block(&rx), first);
    assert_eq!(cap_of(block(&rx)), BLOCK_CAP);
    assert!(rx.is_empty());
    assert_eq!(rx.close(), Vec::<usize>::new());
}

/// A consumer whose block's install position was claimed before it took the
/// last item does not reopen the block: it follows the link.
#[test]
fn head_follows_a_link_made_before_the_block_was_drained() {
    let (tx, mut rx) = queue();
    let mut out = Vec::new();
    for i in 0..=FIRST_CAP {
        tx.push(i).unwrap();
    }
    let first = rx.queue.shared.first.load(Ordering::SeqCst);
    rx.drain_into(&mut out);
    assert_eq!(out, (0..=FIRST_CAP).collect::<Vec<_>>());
    assert_ne!(block(&rx), first, "moved on to the linked block");
    assert_eq!(head(&rx), 2 * LAP + 1, "past its first item");
    assert!(rx.is_empty());
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
    for i in 1..cap_of(second) {
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

/// A block the consumer finished is kept by its thread (`spare.rs`), and
/// the next block installed on that thread is the same memory: a queue that
/// keeps crossing blocks, producer and consumer on one thread, allocates
/// none after the first of each size.
#[test]
#[cfg(not(miri))] // compares addresses of freed and allocated blocks
fn finished_blocks_are_reused_by_the_next_install_on_the_thread() {
    // On a thread of its own, whose spares start empty.
    std::thread::spawn(|| {
        let (tx, mut rx) = queue();
        let mut out = Vec::new();
        // Pushes the rest of the consumer's block and one more, into the
        // block after it, then drains them all: the consumer follows the
        // link and gives up the block it finished.
        let mut cross = |rx: &mut Consumer<usize>| {
            let left = rx.cursor(|c, _| (INSTALL as u64 - c.head % LAP) as usize);
            for i in 0..=left {
                tx.push(i).unwrap();
            }
            out.clear();
            assert_eq!(rx.drain_into(&mut out), left + 1);
        };
        tx.push(0).unwrap();
        assert_eq!(rx.drain_into(&mut Vec::new()), 1);
        for &cap in &block_caps()[1..] {
            cross(&mut rx);
            assert_eq!(cap_of(block(&rx)), cap);
        }
        // The full block now held goes to the spares when it is finished,
        // and the install after it takes that memory back.
        let finished = block(&rx);
        cross(&mut rx);
        let next = block(&rx);
        assert_ne!(next, finished);
        cross(&mut rx);
        assert_eq!(block(&rx), finished, "the spare block came back");
        cross(&mut rx);
        assert_eq!(block(&rx), next, "and the one finished after it");
    })
    .join()
    .unwrap();
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

/// `shrink_to_fit` frees every block of an empty queue (the one it holds,
/// reopened or not), refuses while an item is pending, and leaves a queue
/// that works as a new one.
#[test]
fn shrink_to_fit_frees_the_blocks_of_an_empty_queue() {
    let (tx, mut rx) = queue();
    let mut out = Vec::new();
    assert!(!rx.shrink_to_fit(), "a new queue has no block");
    // Mid-block, with an item pending, then drained.
    for i in 0..2 {
        tx.push(i).unwrap();
    }
    assert!(!rx.shrink_to_fit(), "items are pending");
    rx.drain_into(&mut out);
    assert!(rx.shrink_to_fit());
    assert!(block(&rx).is_null());
    assert!(rx.queue.shared.first.load(Ordering::SeqCst).is_null());
    assert!(rx.queue.shared.tail.block.load(Ordering::SeqCst).is_null());
    assert!(rx.is_empty());
    assert_eq!(head(&rx) % LAP, FIRST_OFFSET, "a new queue's shape");
    // A reopened block: every item of a first block taken.
    for i in 0..FIRST_CAP {
        tx.push(i).unwrap();
    }
    rx.drain_into(&mut out);
    assert_eq!(head(&rx) % LAP, FIRST_OFFSET, "reopened");
    assert!(rx.shrink_to_fit());
    assert!(block(&rx).is_null());
    // After crossing full blocks too.
    let many = 4 * BLOCK_CAP;
    for i in 0..many {
        tx.push(i).unwrap();
    }
    out.clear();
    assert_eq!(rx.drain_into(&mut out), many);
    assert!(rx.shrink_to_fit());
    assert!(block(&rx).is_null());
    // Still a working queue, in order, across blocks again.
    out.clear();
    for i in 0..many {
        tx.push(i).unwrap();
    }
    assert_eq!(rx.drain_into(&mut out), many);
    assert_eq!(out, (0..many).collect::<Vec<_>>());
    assert!(rx.shrink_to_fit());
    // Close, reset and drop after a shrink.
    tx.push(7).unwrap();
    assert_eq!(rx.reset(), [7]);
    assert!(tx.push(8).unwrap_err().is_stale());
    let tx = rx.producer();
    tx.push(9).unwrap();
    out.clear();
    rx.drain_into(&mut out);
    assert_eq!(out, [9]);
    assert!(rx.shrink_to_fit());
    assert!(rx.close().is_empty());
    assert!(!rx.shrink_to_fit(), "a closed queue is not shrunk");
    drop(rx);
    assert!(tx.push(10).unwrap_err().is_closed());
}

/// The embedded queue shrinks the same way, and items pending in it are
/// dropped once when it goes.
#[test]
fn an_embedded_queue_shrinks_and_drops_cleanly() {
    let drops = StdArc::new(StdCounter::new(0));
    let q = Queue::new();
    let mut out = Vec::new();
    q.push(Tracked(drops.clone())).unwrap();
    // SAFETY: this thread is the only consumer.
    unsafe {
        assert!(!q.shrink_to_fit());
        q.drain_into(&mut out);
        assert!(q.shrink_to_fit());
    }
    drop(out);
    q.push(Tracked(drops.clone())).unwrap();
    drop(q);
    assert_eq!(drops.load(std::sync::atomic::Ordering::SeqCst), 2);
}
