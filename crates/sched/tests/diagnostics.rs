//! What the engine says when something fails: the panic message and the
//! error's text reach monitors and linked processes, errors say where they
//! failed, and the outside sender has a readable name.

use std::time::Duration;

use sched::prelude::*;
use sched::process::SubmitError;

const WAIT: Duration = Duration::from_secs(10);

/// Waits for one message, then ends the way it says.
struct Fails;

impl Process for Fails {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            if let Event::Message(m) = event {
                match *m.payload::<&str>().unwrap_or(&"") {
                    "panic" => panic!("the disk is on fire (code 42)"),
                    "error" => return Err("bad input at line 7".into()),
                    _ => out.finish(()),
                }
            }
        }
        Ok(())
    }
}

/// Traps exits, links to `peer`, and finishes with the first exit signal's
/// detail.
struct TrapsExits {
    peer: Pid,
    linked: bool,
}

impl Process for TrapsExits {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        if !self.linked {
            self.linked = true;
            out.trap_exits(true);
            out.link(self.peer);
            // Tell the test the link is in place.
            out.send(self.peer, "error")?;
        }
        for event in events {
            if let Event::Exit { reason, detail, .. } = event {
                out.finish((reason, detail));
            }
        }
        Ok(())
    }
}

/// Monitors `target` from a step and finishes with the `Down` it gets.
struct Watches {
    target: Pid,
    started: bool,
}

impl Process for Watches {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        if !self.started {
            self.started = true;
            out.monitor(self.target);
            out.send(self.target, "panic")?;
        }
        for event in events {
            if let Event::Down(down) = event {
                out.finish(down);
            }
        }
        Ok(())
    }
}

fn scheduler() -> Scheduler {
    let scheduler = Scheduler::builder().workers(2).build();
    scheduler.start();
    scheduler
}

#[test]
fn an_outside_monitor_gets_the_panic_message() {
    let scheduler = scheduler();
    let child = scheduler.spawn(Fails).unwrap();
    let monitor = scheduler.context().monitor(child.pid());
    scheduler.send(child.pid(), "panic").unwrap();
    let down = monitor.wait_timeout(WAIT).expect("the child ended");
    assert_eq!(down.reason, ExitReason::Panicked);
    let detail = down.detail.expect("a panic has a message");
    assert!(detail.contains("the disk is on fire (code 42)"), "{detail}");
    scheduler.shutdown(WAIT);
}

#[test]
fn a_monitoring_step_gets_the_panic_message() {
    let scheduler = scheduler();
    let child = scheduler.spawn(Fails).unwrap();
    let watcher = Watches {
        target: child.pid(),
        started: false,
    };
    let down = scheduler.spawn(watcher).unwrap().wait().unwrap();
    let down = down.downcast::<Down>().unwrap();
    assert_eq!(down.reason, ExitReason::Panicked);
    assert!(down
        .detail
        .as_deref()
        .is_some_and(|d| d.contains("the disk is on fire")));
    scheduler.shutdown(WAIT);
}

#[test]
fn a_linked_process_that_traps_exits_gets_the_error_text() {
    let scheduler = scheduler();
    let child = scheduler.spawn(Fails).unwrap();
    let trapper = TrapsExits {
        peer: child.pid(),
        linked: false,
    };
    let seen = scheduler.spawn(trapper).unwrap().wait().unwrap();
    let (reason, detail) = *seen
        .downcast::<(ExitReason, Option<std::sync::Arc<str>>)>()
        .unwrap();
    assert_eq!(reason, ExitReason::Error);
    // The step's own error, as it wrote it (the reason says it was a step).
    assert_eq!(detail.as_deref(), Some("bad input at line 7"));
    scheduler.shutdown(WAIT);
}

#[test]
fn a_normal_end_and_a_late_monitor_carry_no_detail() {
    let scheduler = scheduler();
    let child = scheduler.spawn(Fails).unwrap();
    let monitor = scheduler.context().monitor(child.pid());
    let pid = child.pid();
    scheduler.send(pid, "finish").unwrap();
    let down = monitor.wait_timeout(WAIT).expect("the child ended");
    assert_eq!((down.reason, down.detail), (ExitReason::Normal, None));
    // Set after the end: only the reason is known.
    let late = scheduler
        .context()
        .monitor(pid)
        .wait_timeout(WAIT)
        .expect("fires at once");
    assert_eq!(late.detail, None);
    scheduler.shutdown(WAIT);
}

#[test]
fn errors_say_what_failed() {
    let scheduler = scheduler();
    let child = scheduler.spawn(Fails).unwrap();
    scheduler.send(child.pid(), "error").unwrap();
    let error = child.wait().unwrap_err();
    assert_eq!(error.to_string(), "the step failed: bad input at line 7");

    struct Picky;
    impl Process for Picky {
        type Done = Payload;
        fn init(&mut self, _: &InitContext, _: &str, _: Payload) -> Result<(), InitError> {
            Err(InitError::failed("needs a config file"))
        }
        fn step(&mut self, _: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
            Ok(())
        }
    }
    match scheduler.spawn(Picky) {
        Err(error @ SubmitError::Init { .. }) => {
            let text = error.to_string();
            assert!(text.starts_with("could not start <"), "{text}");
            assert!(
                text.ends_with(": init failed: needs a config file"),
                "{text}"
            );
        }
        other => panic!("expected an init error, got {other:?}"),
    }
    scheduler.shutdown(WAIT);
}

#[test]
fn the_outside_sender_prints_as_outside() {
    assert_eq!(Pid::OUTSIDE.to_string(), "<outside>");
    assert_eq!(format!("{:?}", Pid::OUTSIDE), "<outside>");
}
