//! Loom models of the outcome slot's lock-free paths: the end racing the
//! handle's drop, with and without a registered waker, the end racing a
//! watcher's registration, and the end racing a poll when both allocate
//! the slot's locked part.

use std::sync::atomic::Ordering::SeqCst;
use std::task::{Wake, Waker};

use super::slot::{ResultSlot, ENDED, POLLED};
use crate::sync::{thread, Arc, AtomicUsize};

/// Counts its wakes.
#[derive(Default)]
struct Counter(AtomicUsize);

impl Wake for Counter {
    fn wake(self: std::sync::Arc<Self>) {
        self.0.fetch_add(1, SeqCst);
    }
}

fn counter() -> (std::sync::Arc<Counter>, Waker) {
    let counter = std::sync::Arc::new(Counter::default());
    let waker = Waker::from(counter.clone());
    (counter, waker)
}

/// The end and the handle's drop race: the outcome is handed back to be
/// dropped exactly once, by one of them, whichever came second.
#[test]
fn the_end_racing_the_handles_drop_hands_the_outcome_back_once() {
    for polled in [false, true] {
        loom::model(move || {
            let slot = Arc::new(ResultSlot::default());
            let (woken, waker) = counter();
            if polled {
                assert!(slot.poll_take(&waker).is_none());
            }
            let end = {
                let slot = slot.clone();
                thread::spawn(move || slot.set(Ok(Box::new(7u32))).is_some())
            };
            let (outcome, displaced) = slot.abandon();
            drop(displaced);
            let by_end = end.join().unwrap();
            assert!(
                by_end ^ outcome.is_some(),
                "the outcome is handed back exactly once (end: {by_end}, drop: {})",
                outcome.is_some()
            );
            // A registered waker was either taken by the drop or woken by
            // the end, never both, never kept.
            drop(slot);
            assert!(woken.0.load(SeqCst) <= 1);
            assert_eq!(
                std::sync::Arc::strong_count(&woken),
                2,
                "only the local waker holds the counter"
            );
        });
    }
}

/// A watcher (a completer's `Abandoned` future) registering while the
/// process ends is either told it ended or woken by the end.
#[test]
fn a_watcher_racing_the_end_is_never_left_waiting() {
    loom::model(|| {
        let slot = Arc::new(ResultSlot::default());
        // The handle is gone, as for most processes: the end's fast path
        // is the one that must not miss the watcher.
        assert!(slot.abandon().0.is_none());
        let (woken, waker) = counter();
        let end = {
            let slot = slot.clone();
            thread::spawn(move || slot.set(Ok(Box::new(()))).is_some())
        };
        let mut key = None;
        let (ended, displaced) = slot.watch(&mut key, &waker);
        drop(displaced);
        assert!(end.join().unwrap(), "nobody can take the outcome");
        assert!(
            ended || woken.0.load(SeqCst) == 1,
            "the watcher neither saw the end nor was woken"
        );
    });
}

/// The handle is alive and polled for the first time while the process
/// ends: both need the slot's locked part, which neither has allocated
/// yet. Whichever installs it second must use the first one's, or the
/// outcome lands in a lock the poll never looks at and the task is never
/// woken.
#[test]
fn a_first_poll_racing_the_end_gets_the_outcome_or_a_wakeup() {
    loom::model(|| {
        let slot = Arc::new(ResultSlot::default());
        let (woken, waker) = counter();
        let end = {
            let slot = slot.clone();
            thread::spawn(move || slot.set(Ok(Box::new(5u16))).is_none())
        };
        let polled = slot.poll_take(&waker);
        assert!(
            end.join().unwrap(),
            "the handle is alive: the outcome is kept"
        );
        // Installing the locked part keeps the flags raised meanwhile (a
        // poll that found the outcome registered nothing, so raised none).
        let raised = if polled.is_some() {
            ENDED
        } else {
            ENDED | POLLED
        };
        assert_eq!(slot.flags() & (ENDED | POLLED), raised);
        match polled {
            Some(outcome) => assert_eq!(*outcome.unwrap().downcast::<u16>().unwrap(), 5),
            None => {
                assert_eq!(woken.0.load(SeqCst), 1, "registered, so woken");
                let again = slot.poll_take(&waker).expect("ready after the wakeup");
                assert_eq!(*again.unwrap().downcast::<u16>().unwrap(), 5);
            }
        }
    });
}
