//! A request no step read goes back to its asker with `AskError::Unread`:
//! to an outside asker through its handle, to a step asker in its
//! `Event::Reply`. When nobody is there to take it back (the handle was
//! dropped, the asking process ended), it is a dead letter instead:
//! a request is never lost silently.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sched::actor::{AskError, AskId};
use sched::prelude::*;

const WAIT: Duration = Duration::from_secs(10);

/// Never steps usefully: it is terminated before any step reads its mail.
struct Asleep;

impl Process for Asleep {
    type Done = Payload;
    fn step(&mut self, _: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
        Ok(())
    }
}

/// Asks `target` once at start and finishes with what came back: the
/// error and the question, if it was handed back.
struct Asker {
    target: Pid,
    asked: Option<AskId>,
    /// Told once the request is in the target's mailbox.
    sent: std::sync::mpsc::Sender<()>,
}

impl Process for Asker {
    type Done = Payload;
    fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        self.asked = Some(
            out.ask(self.target, Box::new(String::from("ping")) as Payload, WAIT)?
                .id(),
        );
        self.sent.send(())?;
        Ok(())
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            if let Event::Reply {
                id,
                result,
                question,
            } = event
            {
                assert_eq!(Some(id), self.asked);
                let question = question.map(|q| *q.downcast::<String>().expect("a String"));
                out.finish((result.err(), question));
            }
        }
        Ok(())
    }
}

type Returned = (Option<AskError>, Option<String>);

#[test]
fn an_outside_asker_gets_its_question_back() {
    let scheduler = Scheduler::builder().workers(1).build();
    let asleep = scheduler.spawn(Asleep).unwrap();
    let mut first = scheduler
        .ask(asleep.pid(), Box::new(7u64) as Payload)
        .unwrap();
    let mut second = scheduler.ask(asleep.pid(), Square(9)).unwrap();
    scheduler.terminate(asleep.pid()).unwrap();
    scheduler.start();

    assert_eq!(first.wait_timeout(WAIT).unwrap_err(), AskError::Unread);
    let back = first.take_question().expect("handed back");
    assert_eq!(back.downcast_ref::<u64>(), Some(&7));
    assert!(first.take_question().is_none(), "handed back once");

    assert_eq!(second.wait_timeout(WAIT).unwrap_err(), AskError::Unread);
    let back = second.take_question().expect("handed back");
    assert_eq!(back.downcast_ref::<Square>().map(|s| s.0), Some(9));
    scheduler.shutdown(WAIT);
}

struct Square(u64);

impl sched::actor::Question for Square {
    type Answer = u64;
}

#[test]
fn a_step_asker_gets_its_question_back_in_its_reply() {
    let scheduler = Scheduler::builder().workers(1).build();
    let asleep = scheduler.spawn(Asleep).unwrap();
    let (sent, asked) = std::sync::mpsc::channel();
    let asker = scheduler
        .spawn(Asker {
            target: asleep.pid(),
            asked: None,
            sent,
        })
        .unwrap()
        .typed::<Returned>();
    scheduler.start();
    // The request is queued (`Asleep` never reads its events); end the
    // target with it unread.
    asked.recv_timeout(WAIT).unwrap();
    scheduler.terminate(asleep.pid()).unwrap();
    let (error, question) = asker.wait().unwrap();
    assert_eq!(error, Some(AskError::Unread));
    assert_eq!(question.as_deref(), Some("ping"));
    scheduler.shutdown(WAIT);
}

#[test]
fn a_question_nobody_can_take_back_is_a_dead_letter() {
    let dead = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&dead);
    let scheduler = Scheduler::builder()
        .workers(1)
        .on_dead_letter(move |_cx, _pid, event| {
            if let Event::Request(request) = event {
                seen.lock()
                    .unwrap()
                    .push(*request.payload::<u64>().expect("a u64"));
            }
        })
        .build();
    let asleep = scheduler.spawn(Asleep).unwrap();
    let kept = scheduler
        .ask(asleep.pid(), Box::new(1u64) as Payload)
        .unwrap();
    let dropped = scheduler
        .ask(asleep.pid(), Box::new(2u64) as Payload)
        .unwrap();
    drop(dropped);
    scheduler.terminate(asleep.pid()).unwrap();
    scheduler.start();
    let mut kept = kept;
    assert_eq!(kept.wait_timeout(WAIT).unwrap_err(), AskError::Unread);
    assert_eq!(
        kept.take_question().unwrap().downcast_ref::<u64>(),
        Some(&1)
    );
    scheduler.shutdown(WAIT);
    // The dropped handle's question went to the hook; the kept one's did
    // not (it went back to its asker).
    assert_eq!(*dead.lock().unwrap(), [2]);
}

#[test]
fn a_returned_question_with_a_panicking_drop_harms_no_worker() {
    static DROPS: AtomicUsize = AtomicUsize::new(0);
    struct Bomb;
    impl Drop for Bomb {
        fn drop(&mut self) {
            DROPS.fetch_add(1, SeqCst);
            panic!("a question that explodes");
        }
    }
    let scheduler = Scheduler::builder().workers(1).build();
    let asleep = scheduler.spawn(Asleep).unwrap();
    // Handed back to a handle dropped after the answer arrived: the slot
    // drops it on whichever thread lets go last.
    let mut reply = scheduler
        .ask(asleep.pid(), Box::new(Bomb) as Payload)
        .unwrap();
    scheduler.terminate(asleep.pid()).unwrap();
    scheduler.start();
    assert_eq!(reply.wait_timeout(WAIT).unwrap_err(), AskError::Unread);
    let back = reply.take_question().expect("handed back");
    std::mem::forget(back);
    // Dropped with the handle already gone: a dead letter, dropped safely.
    let second = scheduler.spawn(Asleep).unwrap();
    drop(
        scheduler
            .ask(second.pid(), Box::new(Bomb) as Payload)
            .unwrap(),
    );
    scheduler.terminate(second.pid()).unwrap();
    // Its dead letters are dropped before its outcome is set.
    assert!(matches!(second.wait(), Err(ExitError::Terminated)));
    // The worker still runs processes.
    let alive = scheduler.spawn(Asleep).unwrap();
    scheduler.terminate(alive.pid()).unwrap();
    assert!(matches!(alive.wait(), Err(ExitError::Terminated)));
    assert_eq!(DROPS.load(SeqCst), 1);
    scheduler.shutdown(WAIT);
}

/// Asks with a short timeout, reports the timeout, then waits to be told
/// to finish: the question handed back after the timeout is unwanted.
struct Patient {
    target: Pid,
    timed_out: std::sync::mpsc::Sender<()>,
}

impl Process for Patient {
    type Done = Payload;
    fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        out.ask(
            self.target,
            Box::new(77u64) as Payload,
            Duration::from_millis(5),
        )?;
        Ok(())
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            match event {
                Event::Reply { result, .. } => {
                    assert_eq!(result.unwrap_err(), AskError::TimedOut, "one reply per ask");
                    self.timed_out.send(())?;
                }
                Event::Message(_) => out.finish(()),
                _ => {}
            }
        }
        Ok(())
    }
}

#[test]
fn a_question_handed_back_after_its_ask_timed_out_is_a_dead_letter() {
    let dead = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&dead);
    let scheduler = Scheduler::builder()
        .workers(1)
        .on_dead_letter(move |_cx, _pid, event| {
            if let Event::Reply {
                result: Err(AskError::Unread),
                question: Some(question),
                ..
            } = event
            {
                seen.lock()
                    .unwrap()
                    .push(*question.downcast::<u64>().unwrap());
            }
        })
        .build();
    let asleep = scheduler.spawn(Asleep).unwrap();
    let (timed_out, timeout_seen) = std::sync::mpsc::channel();
    let patient = scheduler
        .spawn(Patient {
            target: asleep.pid(),
            timed_out,
        })
        .unwrap();
    scheduler.start();
    timeout_seen.recv_timeout(WAIT).unwrap();
    // The ask is over; now the target ends with the request unread.
    scheduler.terminate(asleep.pid()).unwrap();
    let _ = asleep.wait();
    let deadline = std::time::Instant::now() + WAIT;
    while dead.lock().unwrap().is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(*dead.lock().unwrap(), [77], "neither lost nor seen twice");
    scheduler.send(patient.pid(), ()).unwrap();
    assert!(patient.wait().is_ok());
    scheduler.shutdown(WAIT);
}
