//! Loom models of the outcome slot's lock-free paths: the end racing the
//! handle's drop, with and without a registered waker, the end racing a
//! watcher's registration, and the end racing a poll when both allocate
//! the slot's locked part.

use std::sync::atomic::Ordering::SeqCst;
use std::task::{Wake, Waker};

use super::slot::{ResultSlot, Spare, ENDED, POLLED};
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
                assert!(slot.poll_take(&waker, None).is_none());
            }
            let end = {
                let slot = slot.clone();
                thread::spawn(move || slot.set(Ok(Box::new(7u32)), None).is_some())
            };
            let (outcome, displaced) = slot.abandon(None);
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
        assert!(slot.abandon(None).0.is_none());
        let (woken, waker) = counter();
        let end = {
            let slot = slot.clone();
            thread::spawn(move || slot.set(Ok(Box::new(())), None).is_some())
        };
        let mut key = None;
        let (ended, displaced) = slot.watch(&mut key, &waker, None);
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
            thread::spawn(move || slot.set(Ok(Box::new(5u16)), None).is_none())
        };
        let polled = slot.poll_take(&waker, None);
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
                let again = slot
                    .poll_take(&waker, None)
                    .expect("ready after the wakeup");
                assert_eq!(*again.unwrap().downcast::<u16>().unwrap(), 5);
            }
        }
    });
}

/// Room for an outcome, as an ended process leaves in its record; shared
/// by the model's threads through its address.
struct Room(Box<std::mem::MaybeUninit<crate::contract::outcome::Outcome>>);

impl Room {
    fn new() -> Self {
        Room(Box::new(std::mem::MaybeUninit::uninit()))
    }

    fn spare(&mut self) -> Spare {
        Spare(std::ptr::NonNull::from(&mut *self.0).cast())
    }
}

/// A `Spare` crosses into the end's thread (it is a pointer into a room
/// the model keeps alive until every thread is joined).
struct SendSpare(Spare);
// SAFETY: see the type's documentation.
unsafe impl Send for SendSpare {}

/// Counts a payload's drops.
struct Dropped(std::sync::Arc<AtomicUsize>);

impl Drop for Dropped {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
    }
}

/// The process ends on another thread, with a payload that counts its
/// drops and `spare` as its room; joining hands back what the end did not
/// keep.
fn end_on_a_thread(
    slot: &Arc<ResultSlot>,
    drops: &std::sync::Arc<AtomicUsize>,
    spare: Spare,
) -> thread::JoinHandle<Option<crate::contract::outcome::Outcome>> {
    let slot = slot.clone();
    let payload = Dropped(drops.clone());
    let spare = SendSpare(spare);
    thread::spawn(move || {
        let spare = spare;
        slot.set(Ok(Box::new(payload)), Some(spare.0))
    })
}

/// The end keeps the outcome in the room while the handle polls for the
/// first time: the poll gets it (from the room, or from the locked part
/// it installed first), or is woken and gets it then; never lost, never
/// read twice (the payload counts its drops).
#[test]
fn the_end_keeping_the_outcome_in_the_room_races_the_first_poll() {
    loom::model(|| {
        let mut room = Room::new();
        let spare = room.spare();
        let slot = Arc::new(ResultSlot::default());
        let drops = std::sync::Arc::new(AtomicUsize::new(0));
        let (woken, waker) = counter();
        let end = end_on_a_thread(&slot, &drops, spare);
        let polled = slot.poll_take(&waker, Some(spare));
        assert!(end.join().unwrap().is_none(), "the handle is alive: kept");
        let outcome = match polled {
            Some(outcome) => outcome,
            None => {
                assert_eq!(woken.0.load(SeqCst), 1, "registered, so woken");
                slot.poll_take(&waker, Some(spare))
                    .expect("ready after the wakeup")
            }
        };
        assert!(outcome.is_ok());
        drop(outcome);
        assert_eq!(drops.load(SeqCst), 1);
        assert!(matches!(
            slot.poll_take(&waker, Some(spare)),
            Some(Err(crate::contract::outcome::ExitError::AlreadyTaken))
        ));
        // SAFETY: every thread is joined; the room is ours.
        unsafe { slot.drop_kept(Some(spare)) };
        assert_eq!(drops.load(SeqCst), 1, "taken once, dropped once");
    });
}

/// The end keeps the outcome in the room while the handle is dropped:
/// the outcome is dropped exactly once, by whichever ends up with it (the
/// end handing it back, the handle's drop, or the record's free).
#[test]
fn a_kept_outcome_racing_the_handles_drop_is_dropped_once() {
    loom::model(|| {
        let mut room = Room::new();
        let spare = room.spare();
        let slot = Arc::new(ResultSlot::default());
        let drops = std::sync::Arc::new(AtomicUsize::new(0));
        let end = end_on_a_thread(&slot, &drops, spare);
        let (by_handle, displaced) = slot.abandon(Some(spare));
        drop(displaced);
        drop(by_handle);
        drop(end.join().unwrap());
        // SAFETY: every thread is joined; the room is ours.
        unsafe { slot.drop_kept(Some(spare)) };
        drop(slot);
        assert_eq!(drops.load(SeqCst), 1, "dropped exactly once");
    });
}

/// An outcome kept in the room, moved into the locked part by a watcher
/// while the handle takes it: exactly one of the two moves it out of the
/// room (a second read would drop the payload twice), and the handle gets
/// it either way.
#[test]
fn a_watcher_moving_a_kept_outcome_races_the_handles_take() {
    loom::model(|| {
        let mut room = Room::new();
        let spare = room.spare();
        let slot = Arc::new(ResultSlot::default());
        let drops = std::sync::Arc::new(AtomicUsize::new(0));
        assert!(slot
            .set(Ok(Box::new(Dropped(drops.clone()))), Some(spare))
            .is_none());
        let watcher = {
            let slot = slot.clone();
            let spare = SendSpare(spare);
            thread::spawn(move || {
                let spare = spare;
                let (_, waker) = counter();
                let mut key = None;
                let (ended, displaced) = slot.watch(&mut key, &waker, Some(spare.0));
                drop(displaced);
                ended
            })
        };
        let (_, waker) = counter();
        let taken = slot
            .poll_take(&waker, Some(spare))
            .expect("the process has ended");
        assert!(taken.is_ok(), "the handle gets the outcome");
        assert!(watcher.join().unwrap(), "the watcher sees the end");
        drop(taken);
        // SAFETY: every thread is joined; the room is ours.
        unsafe { slot.drop_kept(Some(spare)) };
        drop(slot);
        assert_eq!(drops.load(SeqCst), 1, "moved out of the room once");
    });
}
