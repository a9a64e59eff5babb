//! A model of a wheel's earliest deadline (`Timers::insert`'s `next`)
//! under two inserters.

use std::time::{Duration, Instant};

use loom::thread;
use relay::Pid;

use super::harness::Inert;
use crate::contract::command::Tag;
use crate::record::RecordRef;
use crate::sync::Arc;
use crate::timer::registry::Timers;
use crate::timer::{Action, What};

/// A wake-up for a fresh inert process.
fn wake_up(pid: u64) -> Action {
    Action {
        record: RecordRef::new(Pid::local(pid), Inert),
        what: What::Wake {
            tag: Tag(pid),
            list_lo: 0,
            list_hi: 0,
        },
    }
}

/// Two threads set a timer each in the same wheel, the later deadline on
/// one, the earlier on the other (as a delayed message and a step's
/// wake-up can). Once both returned, the wheel's `next`, which its worker
/// reads without the lock (`due_at` before parking, `any_due` between
/// steps), is the earlier deadline: a later value would let the worker
/// sleep past that timer. It holds because every writer of `next` holds
/// the wheel's lock, so each insert's load and store of `next` happen
/// together; with the store outside the lock, the insert that computed
/// the later deadline can store it over the earlier one.
#[test]
fn two_inserters_leave_the_earliest_deadline_in_next() {
    loom::model(|| {
        let epoch = Instant::now();
        // Whole ticks (1 ms), so a deadline reads back exactly.
        let (early, late) = (
            epoch + Duration::from_millis(5),
            epoch + Duration::from_millis(10),
        );
        let timers = Arc::new(Timers::new(1, epoch));
        let other = {
            let timers = timers.clone();
            thread::spawn(move || timers.insert(0, late, wake_up(2)).1)
        };
        let (_, earliest) = timers.insert(0, early, wake_up(1));
        other.join().unwrap();
        assert!(earliest, "the earliest timer lowered `next`");
        assert_eq!(
            timers.due_at(0),
            Some(early),
            "`next` is not the wheel's earliest deadline"
        );
        assert!(
            timers.any_due(0, || early),
            "the earliest timer is not seen due"
        );
        assert_eq!(timers.clear().len(), 2);
    });
}

/// The turn a worker and the long-step watcher take at the worker's wheel
/// (`Timers::worker_take_turn`, `worker_end_turn`, `begin_rescue`,
/// `end_rescue`: the real code). The worker leaves its step (clears
/// `in_step`) and takes its turn to fire; the watcher, which saw it in
/// that step, takes the turn if the worker is still in it. Never may both
/// fire at once: the one that fires second would fire timers out of
/// deadline order beside the other. And a rescue the worker's held timers
/// forbid is seen by the watcher whatever the interleaving.
#[test]
fn a_worker_and_the_watcher_never_fire_one_wheel_together() {
    loom::model(|| {
        let timers = Arc::new(Timers::new(1, Instant::now()));
        let in_step = Arc::new(crate::sync::AtomicU64::new(7));
        let firing = Arc::new(crate::sync::AtomicU64::new(0));
        let watcher = {
            let (timers, in_step, firing) = (timers.clone(), in_step.clone(), firing.clone());
            thread::spawn(move || {
                let relaxed = std::sync::atomic::Ordering::Relaxed;
                if timers.begin_rescue(0, || in_step.load(relaxed) == 7) {
                    assert_eq!(firing.fetch_add(1, relaxed), 0, "both fire the wheel");
                    firing.fetch_sub(1, relaxed);
                    timers.end_rescue(0);
                }
            })
        };
        let relaxed = std::sync::atomic::Ordering::Relaxed;
        in_step.store(0, relaxed);
        if timers.worker_take_turn(0) {
            assert_eq!(firing.fetch_add(1, relaxed), 0, "both fire the wheel");
            firing.fetch_sub(1, relaxed);
            // It keeps due timers back this time.
            timers.worker_end_turn(0, true);
        }
        watcher.join().unwrap();
        // Whatever happened, the turn is free again, and a rescue now
        // sees the held timers (if the worker kept some) and declines.
        let held = !timers.begin_rescue(0, || true);
        if !held {
            timers.end_rescue(0);
        }
        assert!(timers.worker_take_turn(0), "the turn was left taken");
        timers.worker_end_turn(0, false);
    });
}

/// The watcher leaves a wheel alone while its worker holds due timers
/// taken out and not fired: firing later ones first would break deadline
/// order.
#[test]
fn the_watcher_leaves_a_wheel_whose_worker_holds_due_timers() {
    loom::model(|| {
        let timers = Timers::new(1, Instant::now());
        assert!(timers.worker_take_turn(0));
        timers.worker_end_turn(0, true);
        assert!(!timers.begin_rescue(0, || true));
        assert!(timers.worker_take_turn(0), "a refused rescue kept the turn");
        timers.worker_end_turn(0, false);
        assert!(timers.begin_rescue(0, || true));
        assert!(
            !timers.worker_take_turn(0),
            "the worker fired beside the watcher"
        );
        timers.end_rescue(0);
        assert!(timers.worker_take_turn(0));
        timers.worker_end_turn(0, false);
    });
}
