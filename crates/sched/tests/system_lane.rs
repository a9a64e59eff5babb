//! The system lane: a down, a linked exit, the shutdown's cancel and the
//! answer to an ask reach a step ahead of a backlog of messages the
//! process has not read yet; urgent messages come next, unwrapped, and a
//! bounded mailbox keeps a reserve for them.

use std::time::Duration;

use sched::prelude::*;
use sched::sim::Config;
use sched::Urgent;

/// Waits for one message, then finishes.
struct Target;

impl Process for Target {
    type Done = Payload;
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
    type Done = Payload;
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
    let target = sim.context().spawn(Target).expect("spawned").pid();
    let mut slow = sim
        .context()
        .spawn(Slow {
            target,
            backlog: 40,
            seen: Vec::new(),
        })
        .expect("spawned");
    // The monitor is in place before the backlog arrives.
    sim.run().expect("quiet");
    for i in 0..40u32 {
        sim.context().send(slow.pid(), i).expect("alive");
    }
    sim.context().send(target, "end").expect("alive");
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
    type Done = Payload;
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
    let mut slow = sim
        .context()
        .spawn(Backlogged { read: 0 })
        .expect("spawned");
    for i in 0..10_000u32 {
        sim.context().send(slow.pid(), i).expect("alive");
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

/// Reads one message per step, noting its text, until it reads "stop".
struct Reader {
    read: Vec<String>,
}

impl Process for Reader {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        if let Some(Event::Message(m)) = events.next() {
            let text = *m.payload::<&str>().ok_or("text")?;
            self.read.push(text.to_owned());
            if text == "stop" {
                out.finish(std::mem::take(&mut self.read));
                return Ok(());
            }
        }
        if !events.is_empty() {
            out.continue_();
        }
        Ok(())
    }
}

#[test]
fn an_urgent_message_is_read_before_the_backlog() {
    let mut sim = Scheduler::builder().simulation(Config::seed(3).workers(1));
    let mut reader = sim
        .context()
        .spawn(Reader { read: Vec::new() })
        .expect("spawned");
    for _ in 0..100 {
        sim.context().send(reader.pid(), "work").expect("alive");
    }
    sim.context()
        .send(reader.pid(), Urgent::new("first"))
        .expect("alive");
    sim.context()
        .send(reader.pid(), Urgent::new("stop"))
        .expect("alive");
    sim.run().expect("quiet");
    let read = reader.try_take().expect("ended").expect("finished");
    let read = read.downcast_ref::<Vec<String>>().expect("its list");
    // Both urgent ones, in the order sent, unwrapped, before any of the
    // 100 ordinary messages queued ahead of them.
    assert_eq!(read, &["first", "stop"]);
}

#[test]
fn a_bounded_mailbox_keeps_a_reserve_for_urgent_messages() {
    use sched::message::SendErrorKind;
    // Capacity 16: 16 ordinary messages fill it; the reserve is 2 urgent
    // ones more; then even urgent ones are refused, handed back.
    let scheduler = Scheduler::builder().workers(1).mailbox_capacity(16).build();
    let reader = scheduler
        .spawn(Reader { read: Vec::new() })
        .expect("spawned");
    for _ in 0..16 {
        scheduler.send(reader.pid(), "work").expect("room");
    }
    let full = scheduler.send(reader.pid(), "work").expect_err("full");
    assert_eq!(full.kind(), SendErrorKind::Full);
    scheduler
        .send(reader.pid(), Urgent::new("first"))
        .expect("reserve");
    scheduler
        .send(reader.pid(), Urgent::new("stop"))
        .expect("reserve");
    let refused = scheduler
        .send(reader.pid(), Urgent::new("late"))
        .expect_err("past the reserve");
    assert_eq!(refused.kind(), SendErrorKind::Full);
    let back = refused.into_package();
    let back = back.payload::<Urgent>().expect("handed back as sent");
    assert!(format!("{back:?}").contains("Urgent"));
    scheduler.start();
    let read = reader.typed::<Vec<String>>().wait().expect("finished");
    assert_eq!(read, ["first", "stop"]);
    scheduler.shutdown(Duration::from_secs(5));
}

/// Reads one message per step and waits for the next arrival (it never
/// continues on its own), noting its text, until it reads "stop".
struct OnePerArrival {
    read: Vec<String>,
}

impl Process for OnePerArrival {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        if let Some(Event::Message(m)) = events.next() {
            let text = *m.payload::<&str>().ok_or("text")?;
            self.read.push(text.to_owned());
            if text == "stop" {
                out.finish(std::mem::take(&mut self.read));
            }
        }
        Ok(())
    }
}

#[test]
fn an_urgent_message_left_unread_stays_ahead_of_later_ones_and_the_backlog() {
    let mut sim = Scheduler::builder().simulation(Config::seed(3).workers(1));
    let mut reader = sim
        .context()
        .spawn(OnePerArrival { read: Vec::new() })
        .expect("spawned");
    let pid = reader.pid();
    sim.context().send(pid, "work").expect("alive");
    sim.context().send(pid, Urgent::new("1")).expect("alive");
    sim.context().send(pid, Urgent::new("2")).expect("alive");
    // One step: it reads "1" and leaves "2" (urgent) and "work".
    sim.run().expect("quiet");
    sim.context().send(pid, Urgent::new("3")).expect("alive");
    sim.run().expect("quiet");
    for poke in ["poke", "poke"] {
        sim.context().send(pid, poke).expect("alive");
        sim.run().expect("quiet");
    }
    sim.context().send(pid, Urgent::new("stop")).expect("alive");
    sim.run().expect("quiet");
    let read = reader.try_take().expect("ended").expect("finished");
    let read = read.downcast_ref::<Vec<String>>().expect("its list");
    // "2" kept its urgency: read before "3", which came later, and both
    // before "work", which came first; the urgent "stop" overtakes the
    // pokes.
    assert_eq!(read, &["1", "2", "3", "work", "stop"]);
}
