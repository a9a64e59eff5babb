//! The histograms count exactly what they say: the step histogram each
//! step, the schedule latency each step that did not end a wait on a
//! yield, the yield wait each one that did; a long step shows in the
//! maximum and in the worker's busy time; none exists unless turned on.

use std::time::Duration;

use sched::command::CommandId;
use sched::prelude::*;

const WAIT: Duration = Duration::from_secs(10);

/// Takes `turns` steps (continuing itself), then finishes; `nap` makes its
/// last step sleep that long.
struct Script {
    turns: u32,
    nap: Duration,
}

impl Process for Script {
    type Done = Payload;
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
    let steps = scheduler.context().histograms().expect("turned on").step;
    assert_eq!(steps.count(), expected);
    assert_eq!(steps.count(), scheduler.stats().workers[0].steps);
    assert!(steps.max() >= Duration::from_millis(30), "{steps:?}");
    assert!(steps.p50() < Duration::from_millis(30), "{steps:?}");
    assert!(steps.p99() <= steps.max());
    let histograms = scheduler.context().histograms().unwrap();
    assert_eq!(
        histograms.schedule_latency.count(),
        expected,
        "no step ended a wait on a yield"
    );
    assert_eq!(histograms.yield_wait.count(), 0);
    let busy = scheduler.stats().workers[0].busy;
    assert!(busy >= Duration::from_millis(30), "{busy:?}");
    scheduler.shutdown(WAIT);
}

const NAP: CommandId = CommandId(7);

/// Yields `left` naps of 20 ms one after the other, then finishes.
struct Napper {
    left: u32,
}

impl Process for Napper {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            if let Event::Completion { result, .. } = event {
                result?;
            }
        }
        if self.left == 0 {
            out.finish(());
        } else {
            self.left -= 1;
            out.yield_command(NAP, Tag(1), Box::new(20u64));
        }
        Ok(())
    }
}

#[test]
fn a_step_after_a_yield_is_a_yield_wait_and_every_other_a_schedule_latency() {
    let scheduler = Scheduler::builder()
        .workers(1)
        .histograms(true)
        .handler(NAP, |command, done| {
            let ms = *command.data::<u64>().expect("a u64");
            let _ = done.complete_after(Duration::from_millis(ms), Box::new(()));
            Ok(())
        })
        .build();
    scheduler.start();
    let nappers: Vec<Completion> = (0..10)
        .map(|_| scheduler.spawn(Napper { left: 3 }).unwrap())
        .collect();
    for done in nappers {
        done.wait().unwrap();
    }
    let histograms = scheduler.context().histograms().unwrap();
    // Each napper: a first step (made ready by its spawn), then one step
    // per completion.
    assert_eq!(histograms.step.count(), 40);
    assert_eq!(histograms.schedule_latency.count(), 10);
    assert_eq!(histograms.yield_wait.count(), 30);
    // A quantile is its bucket's upper bound, never below the true value,
    // and every wait lasted the 20 ms nap at least.
    assert!(
        histograms.yield_wait.quantile(0.0) >= Duration::from_millis(20),
        "{:?}",
        histograms.yield_wait
    );
    assert!(histograms.yield_wait.max() < WAIT);
    assert!(histograms.schedule_latency.max() < Duration::from_secs(1));
    scheduler.shutdown(WAIT);
}

#[test]
fn without_the_option_there_is_no_histogram() {
    let scheduler = Scheduler::builder().workers(1).build();
    assert!(scheduler.context().histograms().is_none());
}

/// Sets two timers, cancels one, and finishes when the other fires.
struct Sleeper {
    started: bool,
}

impl Process for Sleeper {
    type Done = Payload;
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
    let lateness = scheduler
        .context()
        .histograms()
        .expect("turned on")
        .timer_lateness;
    assert_eq!(lateness.count(), 50, "the cancelled ones never fired");
    assert!(lateness.p50() <= lateness.max());
    scheduler.shutdown(WAIT);
}
