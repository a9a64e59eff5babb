//! The step histogram counts exactly the steps taken, sees a long step in
//! its maximum, and is absent unless turned on.

use std::time::Duration;

use sched::prelude::*;

const WAIT: Duration = Duration::from_secs(10);

/// Takes `turns` steps (continuing itself), then finishes; `nap` makes its
/// last step sleep that long.
struct Script {
    turns: u32,
    nap: Duration,
}

impl Process for Script {
    fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        self.turns -= 1;
        if self.turns == 0 {
            std::thread::sleep(self.nap);
            out.finish(());
        } else {
            out.continue_();
        }
        Ok(())
    }
}

#[test]
fn the_step_histogram_counts_exactly_the_steps_taken() {
    let scheduler = Scheduler::builder().workers(1).histograms(true).build();
    scheduler.start();
    let mut expected = 0u64;
    let mut running = Vec::new();
    for i in 0..200u32 {
        let turns = i % 7 + 1;
        expected += u64::from(turns);
        let script = Script {
            turns,
            nap: Duration::ZERO,
        };
        running.push(scheduler.spawn(script).unwrap());
    }
    let slow = Script {
        turns: 2,
        nap: Duration::from_millis(30),
    };
    running.push(scheduler.spawn(slow).unwrap());
    expected += 2;
    for done in running {
        done.wait().unwrap();
    }
    let steps = scheduler.histograms().expect("turned on").step;
    assert_eq!(steps.count(), expected);
    assert_eq!(steps.count(), scheduler.stats().workers[0].steps);
    assert!(steps.max() >= Duration::from_millis(30), "{steps:?}");
    assert!(steps.p50() < Duration::from_millis(30), "{steps:?}");
    assert!(steps.p99() <= steps.max());
    scheduler.shutdown(WAIT);
}

#[test]
fn without_the_option_there_is_no_histogram() {
    let scheduler = Scheduler::builder().workers(1).build();
    assert!(scheduler.histograms().is_none());
}

/// Sets two timers, cancels one, and finishes when the other fires.
struct Sleeper {
    started: bool,
}

impl Process for Sleeper {
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        if !self.started {
            self.started = true;
            out.set_timer(Duration::from_millis(3), Tag(1));
            let never = out.set_timer(Duration::from_millis(2), Tag(2));
            out.cancel_timer(never);
            out.idle();
            return Ok(());
        }
        for event in events {
            if let Event::Timer { tag: Tag(1), .. } = event {
                out.finish(());
            }
        }
        Ok(())
    }
}

#[test]
fn timer_lateness_counts_each_timer_that_fired() {
    let scheduler = Scheduler::builder().workers(1).histograms(true).build();
    scheduler.start();
    let sleepers: Vec<Completion> = (0..50)
        .map(|_| scheduler.spawn(Sleeper { started: false }).unwrap())
        .collect();
    for done in sleepers {
        done.wait().unwrap();
    }
    let lateness = scheduler.histograms().expect("turned on").timer_lateness;
    assert_eq!(lateness.count(), 50, "the cancelled ones never fired");
    assert!(lateness.p50() <= lateness.max());
    scheduler.shutdown(WAIT);
}
