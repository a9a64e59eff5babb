//! Loom models of the queue. Run with
//! `RUSTFLAGS="--cfg loom --cfg crossbeam_loom" LOOM_MAX_PREEMPTIONS=2 \
//!  cargo test -p sched-mpsc --release --lib --test loom`.
//!
//! Under loom the first block holds 2 items (a short lap of 3 positions with
//! the sentinel), every later block 3 (4 positions), so a few items exercise
//! the first install, the crossing from the small block into a full one,
//! block linking, the sentinel wait and freeing finished blocks (loom builds
//! keep no spare blocks per thread: every block is a fresh allocation the
//! model tracks). Every model checks conservation (each item
//! comes out exactly once: drained, returned by `close`/`reset`, or handed
//! back by a failed push) and per-producer order.
#![cfg(loom)]

use loom::thread;
use mpsc::{queue, PushError};

/// An item: (producer, sequence number).
type Item = (u8, u8);

/// Pushes `count` items tagged `producer`, stopping at the first failure.
/// Returns the items handed back by failed pushes (all the rest).
fn push_all(tx: &mpsc::Producer<Item>, producer: u8, count: u8) -> (Vec<Item>, Option<bool>) {
    let mut refused = Vec::new();
    let mut stale = None;
    for seq in 0..count {
        if let Err(e) = tx.push((producer, seq)) {
            stale.get_or_insert(e.is_stale());
            refused.push(e.into_inner());
        }
    }
    (refused, stale)
}

/// Asserts that `seen` (in consumption order) plus `refused` is exactly the
/// `counts[p]` items of every producer `p`, and that each producer's
/// delivered items come in push order and precede its refused ones.
fn check(seen: &[Item], refused: &[Item], counts: &[u8]) {
    for (p, &count) in counts.iter().enumerate() {
        let p = p as u8;
        let delivered: Vec<u8> = seen.iter().filter(|i| i.0 == p).map(|i| i.1).collect();
        let back: Vec<u8> = refused.iter().filter(|i| i.0 == p).map(|i| i.1).collect();
        let mut all = delivered.clone();
        all.extend(&back);
        assert_eq!(
            all,
            (0..count).collect::<Vec<_>>(),
            "producer {p}: delivered {delivered:?}, refused {back:?}"
        );
    }
    assert_eq!(
        seen.len() + refused.len(),
        counts.iter().map(|&c| c as usize).sum::<usize>()
    );
}

#[test]
fn two_producers_and_the_consumer() {
    loom::model(|| {
        let (tx, mut rx) = queue::<Item>();
        let tx2 = tx.clone();
        // Six items: the first block's two, a full block's three, and one
        // in a third block; both producers may meet at either sentinel.
        let a = thread::spawn(move || push_all(&tx, 0, 3));
        let b = thread::spawn(move || push_all(&tx2, 1, 3));
        let mut seen = Vec::new();
        rx.drain_into(&mut seen);
        rx.drain_into(&mut seen);
        assert_eq!(a.join().unwrap(), (vec![], None));
        assert_eq!(b.join().unwrap(), (vec![], None));
        rx.drain_into(&mut seen);
        assert!(rx.is_empty());
        check(&seen, &[], &[3, 3]);
    });
}

#[test]
fn push_races_close() {
    loom::model(|| {
        let (tx, mut rx) = queue::<Item>();
        // Three items: the first installs the first block, the second claims
        // its last slot and links a full block while close may be running,
        // the third goes into that one.
        let p = thread::spawn(move || {
            let refused = push_all(&tx, 0, 3);
            // Once the queue is closed, it stays closed.
            if refused.1.is_some() {
                assert!(tx.is_closed());
                assert!(matches!(tx.push((0, 9)), Err(PushError::Closed(_))));
            }
            refused
        });
        let mut seen = Vec::new();
        rx.drain_into(&mut seen);
        seen.extend(rx.close());
        let (refused, stale) = p.join().unwrap();
        assert_ne!(stale, Some(true), "nothing was reset");
        // Closed: nothing arrives after close returned.
        assert!(rx.is_empty());
        assert_eq!(rx.drain_into(&mut seen), 0);
        check(&seen, &refused, &[3]);
    });
}

#[test]
fn drain_races_push() {
    loom::model(|| {
        let (tx, mut rx) = queue::<Item>();
        // Eight items: the first block's two, then two full blocks of three,
        // whose last claim links a third, which may happen after the
        // consumer freed the blocks before it.
        let p = thread::spawn(move || push_all(&tx, 0, 8));
        let mut seen = Vec::new();
        rx.drain_into(&mut seen);
        rx.drain_into(&mut seen);
        assert_eq!(p.join().unwrap(), (vec![], None));
        rx.drain_into(&mut seen);
        check(&seen, &[], &[8]);
    });
}

#[test]
fn reset_races_a_stale_producer() {
    loom::model(|| {
        let (old, mut rx) = queue::<Item>();
        // Three items: the stale producer may be linking the second block
        // when the reset closes the queue, so the reset reopens in the small
        // first block or in a full one.
        let p = thread::spawn(move || push_all(&old, 0, 3));
        let mut seen = Vec::new();
        rx.drain_into(&mut seen);
        seen.extend(rx.reset());
        assert_eq!(rx.generation(), 1);
        // The new use: its producer is tagged 1.
        let new = rx.producer();
        new.push((1, 0)).unwrap();
        let (refused, _) = p.join().unwrap();
        let mut fresh = Vec::new();
        rx.drain_into(&mut fresh);
        // Nothing from the earlier use may reach the new one.
        assert_eq!(fresh, [(1, 0)]);
        seen.extend(fresh);
        check(&seen, &refused, &[3, 1]);
    });
}

#[test]
fn producers_cross_a_block_boundary_while_the_consumer_closes() {
    loom::model(|| {
        let (tx, mut rx) = queue::<Item>();
        let tx2 = tx.clone();
        let a = thread::spawn(move || push_all(&tx, 0, 2));
        let b = thread::spawn(move || push_all(&tx2, 1, 2));
        let mut seen = rx.close();
        let (mut refused, _) = a.join().unwrap();
        refused.extend(b.join().unwrap().0);
        assert_eq!(rx.drain_into(&mut seen), 0);
        check(&seen, &refused, &[2, 2]);
    });
}

#[test]
fn two_producers_race_across_the_first_blocks_end() {
    loom::model(|| {
        let (tx, mut rx) = queue::<Item>();
        let tx2 = tx.clone();
        // Four items: either producer may install the first block, claim
        // its last slot and link the full block after it, while the other
        // waits at the sentinel or pushes into the full block; the consumer
        // may cross into the full block mid-race.
        let a = thread::spawn(move || push_all(&tx, 0, 2));
        let b = thread::spawn(move || push_all(&tx2, 1, 2));
        let mut seen = Vec::new();
        rx.drain_into(&mut seen);
        rx.drain_into(&mut seen);
        assert_eq!(a.join().unwrap(), (vec![], None));
        assert_eq!(b.join().unwrap(), (vec![], None));
        rx.drain_into(&mut seen);
        assert!(rx.is_empty());
        check(&seen, &[], &[2, 2]);
    });
}

/// Fills the first block from this thread and drains it, so the consumer
/// has reopened the block before anything else runs. Returns the drained
/// items.
fn fill_and_drain_first_block(
    tx: &mpsc::Producer<Item>,
    rx: &mut mpsc::Consumer<Item>,
) -> Vec<Item> {
    push_all(tx, 0, 2);
    let mut seen = Vec::new();
    rx.drain_into(&mut seen);
    assert_eq!(seen, [(0, 0), (0, 1)]);
    seen
}

#[test]
fn reopening_a_drained_block_races_its_install() {
    loom::model(|| {
        let (tx, mut rx) = queue::<Item>();
        let tx2 = tx.clone();
        // The first block's two items are in before the race; the consumer
        // takes them (and may reopen the block for the next lap) while the
        // other producer's first push claims the install position (and
        // links a new block) or, reopened, a slot of the same block, then
        // fills the lap after it.
        push_all(&tx, 0, 2);
        let b = thread::spawn(move || push_all(&tx2, 1, 3));
        let mut seen = Vec::new();
        rx.drain_into(&mut seen);
        rx.drain_into(&mut seen);
        assert_eq!(b.join().unwrap(), (vec![], None));
        rx.drain_into(&mut seen);
        assert!(rx.is_empty());
        check(&seen, &[], &[2, 3]);
    });
}

#[test]
fn a_reopened_block_fills_while_the_consumer_closes() {
    loom::model(|| {
        let (tx, mut rx) = queue::<Item>();
        let tx2 = tx.clone();
        let mut seen = fill_and_drain_first_block(&tx, &mut rx);
        // The close may find the word on the reopened lap's first slot, on
        // one of its later slots, or past the lap's install position (on
        // the sentinel while the producer installs a next block, or past).
        let b = thread::spawn(move || push_all(&tx2, 1, 2));
        seen.extend(rx.close());
        let (refused, _) = b.join().unwrap();
        assert_eq!(rx.drain_into(&mut seen), 0);
        check(&seen, &refused, &[2, 2]);
    });
}

#[test]
fn a_reopened_block_is_reused_by_a_reset() {
    loom::model(|| {
        let (old, mut rx) = queue::<Item>();
        let old2 = old.clone();
        let mut seen = fill_and_drain_first_block(&old, &mut rx);
        // The stale producer may fill the reopened block before the reset
        // closes the queue, or find it closed; the reset reopens the block
        // for the new use either way.
        let p = thread::spawn(move || push_all(&old2, 1, 2));
        seen.extend(rx.reset());
        let new = rx.producer();
        for seq in 0..3 {
            new.push((2, seq)).unwrap();
        }
        let (refused, _) = p.join().unwrap();
        let mut fresh = Vec::new();
        rx.drain_into(&mut fresh);
        // Nothing from the earlier use reaches the new one, and the new
        // use crosses its block's end.
        assert_eq!(fresh, [(2, 0), (2, 1), (2, 2)]);
        seen.extend(fresh);
        check(&seen, &refused, &[2, 2, 3]);
    });
}

#[test]
fn shrinking_races_pushes() {
    loom::model(|| {
        let (tx, mut rx) = queue::<Item>();
        let tx2 = tx.clone();
        // One item in and out first, so there is a block to free.
        tx.push((0, 0)).unwrap();
        let mut seen = Vec::new();
        rx.drain_into(&mut seen);
        // The producer's pushes land before the shrink (which then frees
        // nothing), during it (waiting on the parked word, or failing their
        // claim and retrying), or after it, into a new first block.
        let b = thread::spawn(move || push_all(&tx2, 1, 2));
        rx.shrink_to_fit();
        rx.drain_into(&mut seen);
        assert_eq!(b.join().unwrap(), (vec![], None));
        rx.drain_into(&mut seen);
        assert!(rx.is_empty());
        check(&seen, &[], &[1, 2]);
    });
}

#[test]
fn shrinking_a_reopened_block_races_a_push() {
    loom::model(|| {
        let (tx, mut rx) = queue::<Item>();
        let tx2 = tx.clone();
        let mut seen = fill_and_drain_first_block(&tx, &mut rx);
        // The block is reopened: the push may land in it before the shrink
        // frees it, or come after, into a new first block.
        let b = thread::spawn(move || push_all(&tx2, 1, 1));
        let shrunk = rx.shrink_to_fit();
        rx.drain_into(&mut seen);
        assert_eq!(b.join().unwrap(), (vec![], None));
        rx.drain_into(&mut seen);
        if shrunk {
            // The freed block's lap was never claimed.
            assert!(rx.shrink_to_fit(), "drained again: a block to free");
        }
        check(&seen, &[], &[2, 1]);
    });
}

#[test]
fn the_consumer_waits_at_the_install_position_until_the_next_block_is_linked() {
    loom::model(|| {
        let (tx, rx) = queue::<Item>();
        let tx2 = tx.clone();
        // The first block is full and the word rests on its install
        // position. The producer's one push claims it (unless the consumer
        // reopened the block first) and installs the next block: it links
        // it, then moves the word past the sentinel, then writes its item.
        // The consumer takes the first block's two items and looks again,
        // possibly while the word is on the sentinel and nothing is linked
        // yet: it must wait there, not move on to a block that is not
        // there and recycle the one the installer is about to link from.
        //
        // The consumer is kept out of the unwinding of a failed execution:
        // its `Drop` would close a queue whose cursor is broken and panic
        // again, which aborts the test instead of reporting the first panic.
        let mut rx = std::mem::ManuallyDrop::new(rx);
        push_all(&tx, 0, 2);
        let p = thread::spawn(move || push_all(&tx2, 1, 1));
        let mut seen = Vec::new();
        rx.drain_into(&mut seen);
        rx.drain_into(&mut seen);
        assert_eq!(p.join().unwrap(), (vec![], None));
        rx.drain_into(&mut seen);
        assert!(rx.is_empty());
        check(&seen, &[], &[2, 1]);
        drop(std::mem::ManuallyDrop::into_inner(rx));
    });
}
