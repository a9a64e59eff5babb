//! Unit tests of the outcome slot (the loom models are in `slot_loom.rs`).

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::task::{Wake, Waker};

use super::slot::{ResultSlot, ABANDONED, ENDED};
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
    assert!(slot.poll_take(&wa).is_none());
    assert!(slot.poll_take(&wa).is_none());
    assert_eq!(Arc::strong_count(&a), 3, "one registration per task");
    assert!(slot.poll_take(&wb).is_none());
    assert_eq!(Arc::strong_count(&a), 2, "replaced");
    assert!(slot.set(Ok(Box::new(7u8))).is_none());
    assert_eq!((a.0.load(SeqCst), b.0.load(SeqCst)), (0, 1));
    assert_eq!(Arc::strong_count(&b), 2, "released by the wake");
    let outcome = slot.poll_take(&wb).expect("ready");
    assert_eq!(*outcome.unwrap().downcast::<u8>().unwrap(), 7);
    assert!(matches!(
        slot.poll_take(&wb),
        Some(Err(ExitError::AlreadyTaken))
    ));
}

#[test]
fn a_dropped_handle_and_an_end_take_no_lock_and_allocate_nothing() {
    for end_first in [false, true] {
        let slot = ResultSlot::default();
        if end_first {
            assert!(slot.set(Ok(Box::new(1u8))).is_none(), "kept for the handle");
            assert!(slot.has_locked_part(), "a kept outcome needs the lock");
            let (outcome, waker) = slot.abandon();
            assert!(outcome.is_some() && waker.is_none());
        } else {
            assert_eq!(slot.abandon().0.map(|_| ()), None);
            assert!(slot.set(Ok(Box::new(1u8))).is_some(), "handed back");
            assert!(!slot.has_locked_part());
        }
        assert_eq!(slot.flags(), ENDED | ABANDONED);
    }
}

#[test]
fn abandoning_the_handle_releases_its_waker_and_the_late_outcome() {
    let slot = ResultSlot::default();
    let (a, wa) = counter();
    assert!(slot.poll_take(&wa).is_none());
    let (outcome, waker) = slot.abandon();
    assert!(outcome.is_none());
    drop(waker);
    assert_eq!(Arc::strong_count(&a), 2);
    assert!(slot.set(Ok(Box::new(()))).is_some(), "handed back to drop");
    assert_eq!(a.0.load(SeqCst), 0);
}

#[test]
fn watchers_come_and_go_by_key_and_all_wake_at_the_end() {
    let slot = ResultSlot::default();
    let (a, wa) = counter();
    let (b, wb) = counter();
    let (mut ka, mut kb) = (None, None);
    assert!(!slot.watch(&mut ka, &wa).0);
    assert!(!slot.watch(&mut ka, &wa).0);
    assert_eq!(slot.watchers(), 1, "a re-poll refreshes its own entry");
    let (_, displaced) = slot.watch(&mut ka, &wb);
    assert!(displaced.is_some(), "another task's waker replaces it");
    drop(displaced);
    assert!(!slot.watch(&mut kb, &wb).0);
    assert_eq!(slot.watchers(), 2);
    assert!(slot.unwatch(kb.unwrap()).is_some());
    assert_eq!(slot.watchers(), 1);
    let mut kc = None;
    assert!(!slot.watch(&mut kc, &wa).0);

    // Nobody holds the handle: the end still wakes the watchers.
    drop(slot.abandon());
    assert!(slot.set(Ok(Box::new(()))).is_some());
    assert_eq!((a.0.load(SeqCst), b.0.load(SeqCst)), (1, 1));
    assert_eq!(slot.watchers(), 0);
    assert!(
        slot.unwatch(ka.unwrap()).is_none(),
        "already woken and gone"
    );
    let (ended, displaced) = slot.watch(&mut kc, &wa);
    assert!(ended && displaced.is_none());
    assert_eq!((Arc::strong_count(&a), Arc::strong_count(&b)), (2, 2));
}
