//! Loom models of the deque: every interleaving (within the preemption
//! bound) of the owner, stealers and growth. Each model checks conservation:
//! every pushed item comes out exactly once. Under loom the deque starts with
//! 2 slots, so three pushes grow it.
//!
//! Items are `1..=n`, never 0, and under loom a new ring's slots are filled
//! with a poison pattern: a read of a slot that growth failed to copy then
//! returns a value no model pushed, instead of a 0 (or a stale item) that
//! could pass for a real item.
//!
//! Run with `cargo xtask loom sched-deque`.
#![cfg(loom)]

use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;

use deque::{Steal, Worker};

/// Steals until success or empty (a `Retry` means a race was lost).
fn steal_one(s: &deque::Stealer<usize>) -> Option<usize> {
    loop {
        match s.steal() {
            Steal::Success(x) => return Some(x),
            Steal::Empty => return None,
            Steal::Retry => thread::yield_now(),
        }
    }
}

/// The owner takes its oldest item until success or empty.
fn take_oldest(w: &Worker<usize>) -> Option<usize> {
    loop {
        match w.steal_own() {
            Steal::Success(x) => return Some(x),
            Steal::Empty => return None,
            Steal::Retry => thread::yield_now(),
        }
    }
}

/// A deque holding 1 and 2 (its whole 2-slot ring) and a thief stealing
/// one item from it.
fn full_ring_and_a_thief() -> (Worker<usize>, thread::JoinHandle<Option<usize>>) {
    let w = Worker::new();
    w.push(1);
    w.push(2);
    let s = w.stealer();
    (w, thread::spawn(move || steal_one(&s)))
}

/// Checks that the items taken are exactly `1..=pushed`.
fn assert_conserved(mut taken: Vec<usize>, pushed: usize) {
    taken.sort_unstable();
    assert_eq!(
        taken,
        (1..=pushed).collect::<Vec<_>>(),
        "lost or duplicated items"
    );
}

#[test]
fn pop_of_the_last_item_races_a_steal() {
    loom::model(|| {
        let w = Worker::new();
        w.push(1);
        let s = w.stealer();
        let thief = thread::spawn(move || steal_one(&s));
        let popped = w.pop();
        let stolen = thief.join().unwrap();
        assert_conserved(popped.into_iter().chain(stolen).collect(), 1);
    });
}

#[test]
fn two_thieves_race_each_other_and_the_owner() {
    loom::model(|| {
        let w = Worker::new();
        w.push(1);
        w.push(2);
        let thieves: Vec<_> = (0..2)
            .map(|_| {
                let s = w.stealer();
                thread::spawn(move || steal_one(&s))
            })
            .collect();
        let mut taken: Vec<usize> = w.pop().into_iter().collect();
        for t in thieves {
            taken.extend(t.join().unwrap());
        }
        taken.extend(std::iter::from_fn(|| w.pop()));
        assert_conserved(taken, 2);
    });
}

#[test]
fn steal_half_races_pops() {
    loom::model(|| {
        let w = Worker::new();
        for i in 1..=3 {
            w.push(i);
        }
        let s = w.stealer();
        let thief = thread::spawn(move || {
            let mine = Worker::new();
            let mut got: Vec<usize> = Vec::new();
            loop {
                match s.steal_half_into(&mine) {
                    Steal::Success(x) => {
                        got.push(x);
                        break;
                    }
                    Steal::Empty => break,
                    Steal::Retry => thread::yield_now(),
                }
            }
            got.extend(std::iter::from_fn(|| mine.pop()));
            got
        });
        let mut taken: Vec<usize> = Vec::new();
        taken.extend(w.pop());
        taken.extend(w.pop());
        let stolen = thief.join().unwrap();
        taken.extend(stolen);
        taken.extend(std::iter::from_fn(|| w.pop()));
        assert_conserved(taken, 3);
    });
}

/// The owner takes its oldest items (no epoch pin) while a thief steals
/// from the same end and the owner's pushes grow the ring.
#[test]
fn owner_takes_its_oldest_while_a_thief_steals() {
    loom::model(|| {
        let (w, thief) = full_ring_and_a_thief();
        let mut taken: Vec<usize> = take_oldest(&w).into_iter().collect();
        // A third push grows the 2-slot ring while the thief may be reading.
        w.push(3);
        taken.extend(thief.join().unwrap());
        taken.extend(std::iter::from_fn(|| w.pop()));
        assert_conserved(taken, 3);
    });
}

#[test]
fn growth_while_a_thief_is_mid_steal() {
    loom::model(|| {
        let (w, thief) = full_ring_and_a_thief();
        // The buffer holds 2: these pushes grow it while the thief may be
        // between its claim and its read of the old buffer.
        w.push(3);
        w.push(4);
        let mut taken: Vec<usize> = std::iter::from_fn(|| w.pop()).collect();
        taken.extend(thief.join().unwrap());
        assert_conserved(taken, 4);
    });
}

/// Forces the order the model above only may reach: the thief claims the
/// oldest item first, and only then does the owner's push find the ring
/// full and grow it, so the thief's read may come after the growth, from
/// the new ring. Growth must copy the positions claimed but not yet read
/// (it copies from `head`, not from the claimed head), or the thief reads
/// a slot never written.
#[test]
fn growth_between_a_thiefs_claim_and_its_read() {
    loom::model(|| {
        let (w, thief) = full_ring_and_a_thief();
        // Wait for the claim: the items no stealer claimed drop to one.
        while w.len() == 2 {
            thread::yield_now();
        }
        // The thief has not published `head` unless it already read: then
        // the ring is full and this push grows it.
        w.push(3);
        let mut taken: Vec<usize> = std::iter::from_fn(|| w.pop()).collect();
        taken.extend(thief.join().unwrap());
        assert_conserved(taken, 3);
    });
}

#[test]
fn steal_half_while_the_owner_grows() {
    loom::model(|| {
        let w = Worker::new();
        w.push(1);
        w.push(2);
        let s = w.stealer();
        let thief = thread::spawn(move || {
            let mine = Worker::new();
            let mut got: Vec<usize> = s.steal_half_into(&mine).success().into_iter().collect();
            got.extend(std::iter::from_fn(|| mine.pop()));
            got
        });
        w.push(3);
        let mut taken: Vec<usize> = std::iter::from_fn(|| w.pop()).collect();
        taken.extend(thief.join().unwrap());
        assert_conserved(taken, 3);
    });
}

/// Counts drops so the model can check every item is dropped exactly once.
struct Counted(Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

#[test]
fn items_left_in_the_deque_are_dropped_exactly_once() {
    loom::model(|| {
        let drops = Arc::new(AtomicUsize::new(0));
        let w = Worker::new();
        for _ in 0..3 {
            w.push(Counted(drops.clone()));
        }
        let s = w.stealer();
        let thief = thread::spawn(move || {
            // Take one (or lose the race), then drop the stealer: the last
            // handle to go drops what is left.
            let _ = s.steal();
        });
        drop(w.pop());
        drop(w);
        thief.join().unwrap();
        assert_eq!(drops.load(Ordering::Relaxed), 3);
    });
}
