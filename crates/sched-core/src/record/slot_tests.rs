//! Unit tests of the outcome slot (the loom models are in `slot_loom.rs`).

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::task::{Wake, Waker};

use super::slot::{ResultSlot, Spare, ABANDONED, ENDED};
use crate::contract::outcome::ExitError;

#[derive(Default)]
struct Counter(AtomicUsize);

impl Wake for Counter {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, SeqCst);
    }
}

fn counter() -> (Arc<Counter>, Waker) {
    let c = Arc::new(Counter::default());
    let w = Waker::from(c.clone());
    (c, w)
}

#[test]
fn the_handle_waker_is_replaced_kept_and_woken_once() {
    let slot = ResultSlot::default();
    let (a, wa) = counter();
    let (b, wb) = counter();
    assert!(slot.poll_take(&wa, None).is_none());
    assert!(slot.poll_take(&wa, None).is_none());
    assert_eq!(Arc::strong_count(&a), 3, "one registration per task");
    assert!(slot.poll_take(&wb, None).is_none());
    assert_eq!(Arc::strong_count(&a), 2, "replaced");
    assert!(slot.set(Ok(Box::new(7u8)), None).is_none());
    assert_eq!((a.0.load(SeqCst), b.0.load(SeqCst)), (0, 1));
    assert_eq!(Arc::strong_count(&b), 2, "released by the wake");
    let outcome = slot.poll_take(&wb, None).expect("ready");
    assert_eq!(*outcome.unwrap().downcast::<u8>().unwrap(), 7);
    assert!(matches!(
        slot.poll_take(&wb, None),
        Some(Err(ExitError::AlreadyTaken))
    ));
}

#[test]
fn a_dropped_handle_and_an_end_take_no_lock_and_allocate_nothing() {
    for end_first in [false, true] {
        let slot = ResultSlot::default();
        if end_first {
            assert!(
                slot.set(Ok(Box::new(1u8)), None).is_none(),
                "kept for the handle"
            );
            assert!(slot.has_locked_part(), "a kept outcome needs the lock");
            let (outcome, waker) = slot.abandon(None);
            assert!(outcome.is_some() && waker.is_none());
        } else {
            assert_eq!(slot.abandon(None).0.map(|_| ()), None);
            assert!(slot.set(Ok(Box::new(1u8)), None).is_some(), "handed back");
            assert!(!slot.has_locked_part());
        }
        assert_eq!(slot.flags(), ENDED | ABANDONED);
    }
}

#[test]
fn abandoning_the_handle_releases_its_waker_and_the_late_outcome() {
    let slot = ResultSlot::default();
    let (a, wa) = counter();
    assert!(slot.poll_take(&wa, None).is_none());
    let (outcome, waker) = slot.abandon(None);
    assert!(outcome.is_none());
    drop(waker);
    assert_eq!(Arc::strong_count(&a), 2);
    assert!(
        slot.set(Ok(Box::new(())), None).is_some(),
        "handed back to drop"
    );
    assert_eq!(a.0.load(SeqCst), 0);
}

#[test]
fn watchers_come_and_go_by_key_and_all_wake_at_the_end() {
    let slot = ResultSlot::default();
    let (a, wa) = counter();
    let (b, wb) = counter();
    let (mut ka, mut kb) = (None, None);
    assert!(!slot.watch(&mut ka, &wa, None).0);
    assert!(!slot.watch(&mut ka, &wa, None).0);
    assert_eq!(slot.watchers(), 1, "a re-poll refreshes its own entry");
    let (_, displaced) = slot.watch(&mut ka, &wb, None);
    assert!(displaced.is_some(), "another task's waker replaces it");
    drop(displaced);
    assert!(!slot.watch(&mut kb, &wb, None).0);
    assert_eq!(slot.watchers(), 2);
    assert!(slot.unwatch(kb.unwrap(), None).is_some());
    assert_eq!(slot.watchers(), 1);
    let mut kc = None;
    assert!(!slot.watch(&mut kc, &wa, None).0);

    // Nobody holds the handle: the end still wakes the watchers.
    drop(slot.abandon(None));
    assert!(slot.set(Ok(Box::new(())), None).is_some());
    assert_eq!((a.0.load(SeqCst), b.0.load(SeqCst)), (1, 1));
    assert_eq!(slot.watchers(), 0);
    assert!(
        slot.unwatch(ka.unwrap(), None).is_none(),
        "already woken and gone"
    );
    let (ended, displaced) = slot.watch(&mut kc, &wa, None);
    assert!(ended && displaced.is_none());
    assert_eq!((Arc::strong_count(&a), Arc::strong_count(&b)), (2, 2));
}

/// Room for an outcome, as an ended process leaves in its record.
struct Room(Box<std::mem::MaybeUninit<crate::contract::outcome::Outcome>>);

impl Room {
    fn new() -> Self {
        Room(Box::new(std::mem::MaybeUninit::uninit()))
    }

    fn spare(&mut self) -> Option<Spare> {
        Some(Spare(std::ptr::NonNull::from(&mut *self.0).cast()))
    }
}

/// Counts the drops of a payload.
struct Dropped(Arc<AtomicUsize>);

impl Drop for Dropped {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
    }
}

#[test]
fn an_outcome_nobody_waits_for_yet_is_kept_in_the_room_without_the_lock() {
    let mut room = Room::new();
    let spare = room.spare();
    let slot = ResultSlot::default();
    assert!(slot.set(Ok(Box::new(7u8)), spare).is_none());
    assert!(!slot.has_locked_part(), "kept in the room");
    assert_eq!(slot.flags(), ENDED);
    assert!(slot.is_ready(spare));
    let taken = slot.take_kept(spare).expect("kept").expect("not taken yet");
    assert_eq!(*taken.unwrap().downcast::<u8>().unwrap(), 7);
    assert!(!slot.is_ready(spare), "taken");
    assert!(matches!(slot.take_kept(spare), Some(None)), "taken once");
    let (_, waker) = counter();
    assert!(matches!(
        slot.poll_take(&waker, spare),
        Some(Err(ExitError::AlreadyTaken))
    ));
    assert!(!slot.has_locked_part());
    // The handle's drop after the take finds nothing to drop.
    assert!(slot.abandon(spare).0.is_none());
}

#[test]
fn a_kept_outcome_moves_into_the_locked_part_when_a_watcher_needs_it() {
    let mut room = Room::new();
    let spare = room.spare();
    let slot = ResultSlot::default();
    assert!(slot.set(Ok(Box::new(9u8)), spare).is_none());
    let (_, waker) = counter();
    let mut key = None;
    let (ended, displaced) = slot.watch(&mut key, &waker, spare);
    assert!(ended && displaced.is_none());
    assert!(slot.has_locked_part(), "installed by the watcher");
    assert!(slot.take_kept(spare).is_none(), "no longer in the room");
    let outcome = slot.poll_take(&waker, spare).expect("moved, not lost");
    assert_eq!(*outcome.unwrap().downcast::<u8>().unwrap(), 9);
    assert!(matches!(
        slot.poll_take(&waker, spare),
        Some(Err(ExitError::AlreadyTaken))
    ));
}

#[test]
fn a_kept_outcome_is_dropped_once_by_the_handle_or_with_the_record() {
    for handle_drops_it in [true, false] {
        let drops = Arc::new(AtomicUsize::new(0));
        let mut room = Room::new();
        let spare = room.spare();
        let slot = ResultSlot::default();
        let payload = Dropped(drops.clone());
        assert!(slot.set(Ok(Box::new(payload)), spare).is_none());
        if handle_drops_it {
            let (outcome, waker) = slot.abandon(spare);
            assert!(waker.is_none());
            drop(outcome.expect("handed back by the handle's drop"));
        }
        // SAFETY: the room is this test's, and nothing else uses the slot.
        unsafe { slot.drop_kept(spare) };
        assert_eq!(drops.load(SeqCst), 1);
        drop(slot);
        assert_eq!(drops.load(SeqCst), 1);
    }
}

#[test]
fn an_end_after_a_poll_or_a_drop_does_not_use_the_room() {
    let mut room = Room::new();
    let spare = room.spare();
    let polled = ResultSlot::default();
    let (woken, waker) = counter();
    assert!(polled.poll_take(&waker, spare).is_none());
    assert!(polled.set(Ok(Box::new(1u8)), spare).is_none());
    assert!(polled.take_kept(spare).is_none(), "in the locked part");
    assert_eq!(woken.0.load(SeqCst), 1);
    assert!(polled.poll_take(&waker, spare).is_some());

    let dropped = ResultSlot::default();
    assert!(dropped.abandon(spare).0.is_none());
    assert!(
        dropped.set(Ok(Box::new(1u8)), spare).is_some(),
        "handed back"
    );
    assert!(dropped.take_kept(spare).is_none());
}

/// A `Spare` crosses into the ending thread (it points into a room the
/// test keeps alive until the thread is joined).
struct SendSpare(Option<Spare>);
// SAFETY: see the type's documentation.
unsafe impl Send for SendSpare {}

/// The outcome written into the room on one thread is read on another:
/// the room is plain memory, so what orders the write before the read is
/// the release and acquire of the word's compare-and-swaps. Miri's data
/// race detector checks that ordering when it runs this test
/// (`cargo xtask miri sched-core`); loom does not track the room.
#[test]
fn a_kept_outcome_crosses_threads_through_the_words_release_and_acquire() {
    let mut room = Room::new();
    let spare = room.spare();
    let slot = Arc::new(ResultSlot::default());
    let end = {
        let slot = slot.clone();
        let spare = SendSpare(spare);
        std::thread::spawn(move || {
            let spare = spare;
            assert!(slot.set(Ok(Box::new(11u32)), spare.0).is_none());
        })
    };
    let outcome = loop {
        if let Some(kept) = slot.take_kept(spare) {
            break kept.expect("not taken before");
        }
        if slot.has_locked_part() {
            // The end found the word changed (it cannot here: nothing else
            // touches it) and used the locked part.
            unreachable!("nothing but the end writes the word");
        }
        std::thread::yield_now();
    };
    end.join().unwrap();
    assert_eq!(*outcome.unwrap().downcast::<u32>().unwrap(), 11);
}
