//! The system lane: a down, a linked exit, the shutdown's cancel and the
//! answer to an ask reach a step ahead of a backlog of messages the
//! process has not read yet.

use std::time::Duration;

use sched::prelude::*;
use sched::sim::Config;

/// Waits for one message, then finishes.
struct Target;

impl Process for Target {
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        if events.any(|e| matches!(e, Event::Message(_))) {
            out.finish(());
        }
        Ok(())
    }
}

/// Monitors `target` at its first step, then reads one event per step
/// (leaving the rest for its next steps), noting what each was, until it
/// has seen the down and `backlog` messages.
struct Slow {
    target: Pid,
    backlog: usize,
    seen: Vec<&'static str>,
}

impl Process for Slow {
    fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        out.monitor(self.target);
        Ok(())
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        match events.next() {
            Some(Event::Down(_)) => self.seen.push("down"),
            Some(Event::Message(_)) => self.seen.push("message"),
            Some(Event::Cancel) => self.seen.push("cancel"),
            _ => {}
        }
        let messages = self.seen.iter().filter(|s| **s == "message").count();
        if self.seen.contains(&"down") && messages == self.backlog {
            out.finish(std::mem::take(&mut self.seen));
        } else if !events.is_empty() {
            out.continue_();
        }
        Ok(())
    }
}

#[test]
fn a_down_is_read_before_the_backlog_that_came_first() {
    let mut sim = Scheduler::builder().simulation(Config::seed(1).workers(1));
    let target = sim.spawn(Target).expect("spawned").pid();
    let mut slow = sim
        .spawn(Slow {
            target,
            backlog: 40,
            seen: Vec::new(),
        })
        .expect("spawned");
    // The monitor is in place before the backlog arrives.
    sim.run().expect("quiet");
    for i in 0..40u32 {
        sim.post(slow.pid(), i).expect("alive");
    }
    sim.post(target, "end").expect("alive");
    sim.run().expect("quiet");
    let seen = slow.try_take().expect("ended").expect("finished");
    let seen = seen.downcast_ref::<Vec<&str>>().expect("its list");
    let down_at = seen.iter().position(|s| *s == "down").expect("the down");
    // The backlog was queued first; the down is read at the first step
    // after it arrived (the step that took the backlog may have read one
    // message already).
    assert!(down_at <= 1, "the down came {down_at}th: {seen:?}");
    assert_eq!(seen.len(), 41);
}

/// Reads one message per step and never finishes on its own; notes when
/// the cancel came.
struct Backlogged {
    read: u32,
}

impl Process for Backlogged {
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        match events.next() {
            Some(Event::Cancel) => out.finish(self.read),
            Some(_) => {
                self.read += 1;
                if !events.is_empty() {
                    out.continue_();
                }
            }
            None => {}
        }
        Ok(())
    }
}

#[test]
fn the_shutdown_cancel_is_read_before_a_backlog() {
    let mut sim = Scheduler::builder().simulation(Config::seed(2).workers(1));
    let mut slow = sim.spawn(Backlogged { read: 0 }).expect("spawned");
    for i in 0..10_000u32 {
        sim.post(slow.pid(), i).expect("alive");
    }
    // Nothing has run yet: the whole backlog waits in the mailbox when
    // the cancel arrives.
    let report = sim.shutdown(Duration::from_secs(10));
    assert_eq!(report.forced, 0);
    let read = slow
        .try_take()
        .expect("ended")
        .expect("finished")
        .downcast::<u32>()
        .expect("its count");
    // The step that took the backlog and the cancel read the cancel first.
    assert_eq!(
        *read, 0,
        "it read {read} messages of its backlog before the cancel"
    );
}
