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
