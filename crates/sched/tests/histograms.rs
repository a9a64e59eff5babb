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
