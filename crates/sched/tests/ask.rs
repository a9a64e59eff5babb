//! Request-reply: `ask` from outside (a `Reply` handle) and from a step
//! (`Event::Reply`, with a timeout from the engine's timers).

use sched::actor::{AskError, AskId, ReplyTo};
use sched::prelude::*;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(10);

/// Squares numbers; keeps (never answers) requests for 0; drops requests
/// for 1 unanswered; answers 2 only after a second request arrives.
struct Squarer {
    kept: Vec<ReplyTo>,
}

impl Process for Squarer {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            match event {
                Event::Request(request) => {
                    let (request, reply) = request.into_parts();
                    let n = request.downcast::<u64>().map_err(|_| "a u64")?;
                    match n {
                        0 => self.kept.push(reply),
                        1 => drop(reply),
                        n => {
                            // A late answer to every kept request.
                            for kept in self.kept.drain(..) {
                                kept.reply(u64::MAX);
                            }
                            reply.reply(n * n);
                        }
                    }
                }
                Event::Cancel => return Err("cancelled".into()),
                _ => {}
            }
        }
        Ok(())
    }
}

fn squarer(scheduler: &Scheduler) -> Pid {
    scheduler.spawn(Squarer { kept: Vec::new() }).unwrap().pid()
}

#[test]
fn outside_asks_get_the_answer_or_a_typed_reason() {
    let scheduler = Scheduler::builder().workers(2).build();
    scheduler.start();
    let pid = squarer(&scheduler);
    let mut reply = scheduler.ask(pid, Box::new(9u64) as Payload).unwrap();
    assert_eq!(
        reply.wait_timeout(WAIT).unwrap().downcast_ref::<u64>(),
        Some(&81)
    );
    assert_eq!(reply.wait().unwrap_err(), AskError::AlreadyTaken);

    let mut dropped = scheduler.ask(pid, Box::new(1u64) as Payload).unwrap();
    assert_eq!(dropped.wait_timeout(WAIT).unwrap_err(), AskError::NoReply);

    let mut kept = scheduler.ask(pid, Box::new(0u64) as Payload).unwrap();
    assert_eq!(
        kept.wait_timeout(Duration::from_millis(50)).unwrap_err(),
        AskError::TimedOut
    );
    // The answer that comes later is still there for a later wait.
    scheduler
        .ask(pid, Box::new(3u64) as Payload)
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(kept.wait().unwrap().downcast_ref::<u64>(), Some(&u64::MAX));

    let err = scheduler
        .ask(Pid::local(888_888), Box::new(2u64) as Payload)
        .unwrap_err();
    assert_eq!(err.into_package().downcast::<u64>().ok(), Some(2));
}

#[test]
fn a_request_left_unread_by_an_ending_process_answers_unread() {
    let scheduler = Scheduler::builder().workers(1).build();
    let pid = squarer(&scheduler);
    let mut reply = scheduler.ask(pid, Box::new(5u64) as Payload).unwrap();
    scheduler.terminate(pid).unwrap();
    scheduler.start();
    // Not `NoReply`: no step had it, so asking again is safe.
    assert_eq!(reply.wait_timeout(WAIT).unwrap_err(), AskError::Unread);
}

/// Asks the squarer for each number in turn and collects exactly what
/// each ask produced.
struct Asker {
    squarer: Pid,
    questions: Vec<u64>,
    pending: Option<AskId>,
    answers: Vec<Result<u64, AskError>>,
}

impl Process for Asker {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            if let Event::Reply { id, result, .. } = event {
                assert_eq!(Some(id), self.pending.take(), "one reply per ask, in order");
                self.answers
                    .push(result.map(|p| *p.downcast_ref::<u64>().expect("a u64")));
            }
        }
        if self.pending.is_none() {
            match self.questions.pop() {
                Some(n) => {
                    let id = out
                        .ask(
                            self.squarer,
                            Box::new(n) as Payload,
                            Duration::from_millis(50),
                        )?
                        .id();
                    self.pending = Some(id);
                }
                None => out.finish(std::mem::take(&mut self.answers)),
            }
        }
        Ok(())
    }
}

#[test]
fn a_step_gets_exactly_one_reply_per_ask() {
    let scheduler = Scheduler::builder().workers(2).build();
    scheduler.start();
    let pid = squarer(&scheduler);
    // In order: 4, then 0 (kept: times out), then 1 (dropped), then 5
    // (which also answers the kept 0 late: that answer must not show up).
    let asker = Asker {
        squarer: pid,
        questions: vec![5, 1, 0, 4],
        pending: None,
        answers: Vec::new(),
    };
    let answers = scheduler.spawn(asker).unwrap().wait().unwrap();
    let answers = answers
        .downcast_ref::<Vec<Result<u64, AskError>>>()
        .unwrap();
    assert_eq!(
        *answers,
        [
            Ok(16),
            Err(AskError::TimedOut),
            Err(AskError::NoReply),
            Ok(25)
        ]
    );
    assert_eq!(scheduler.stats().pending_timers, 0, "timeouts cancelled");
}

/// Asks itself with a 1 ms timeout, holds the request, answers it after
/// the timeout, and ends at once: the late answer is neither seen nor a
/// dead letter.
struct SelfAsk {
    asked: bool,
    held: Option<ReplyTo>,
    replies: usize,
}

impl Process for SelfAsk {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        if !self.asked {
            self.asked = true;
            out.ask(
                out.pid(),
                Box::new(7u64) as Payload,
                Duration::from_millis(1),
            )?;
            return Ok(());
        }
        for event in events {
            match event {
                Event::Request(request) => self.held = Some(request.into_parts().1),
                Event::Reply { result, .. } => {
                    self.replies += 1;
                    assert_eq!(result.unwrap_err(), AskError::TimedOut);
                    self.held.take().expect("held").reply(7u64);
                    out.finish(self.replies);
                }
                _ => {}
            }
        }
        Ok(())
    }
}

#[test]
fn an_answer_after_the_timeout_is_not_a_dead_letter_either() {
    let dead = Arc::new(AtomicUsize::new(0));
    let counter = dead.clone();
    let scheduler = Scheduler::builder()
        .workers(1)
        .on_dead_letter(move |_cx, _pid, _event| {
            counter.fetch_add(1, SeqCst);
        })
        .build();
    scheduler.start();
    let process = SelfAsk {
        asked: false,
        held: None,
        replies: 0,
    };
    let replies = scheduler.spawn(process).unwrap().wait().unwrap();
    assert_eq!(replies.downcast_ref::<usize>(), Some(&1));
    assert_eq!(dead.load(SeqCst), 0);
    assert_eq!(scheduler.stats().dead_letters, 0);
}

/// Answers each question after a timer of `after`, so the answer comes
/// long after a waiting thread stopped looking for it and went to sleep.
struct Slow {
    after: Duration,
    waiting: Vec<(ReplyTo, u64)>,
}

impl Process for Slow {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            match event {
                Event::Request(request) => {
                    let (request, reply) = request.into_parts();
                    let n = request.downcast::<u64>().map_err(|_| "a u64")?;
                    self.waiting.push((reply, n));
                    out.set_timer(self.after, Tag(1));
                }
                Event::Timer { .. } => {
                    for (reply, n) in self.waiting.drain(..) {
                        reply.reply(n + 1);
                    }
                }
                Event::Cancel => return Err("cancelled".into()),
                _ => {}
            }
        }
        Ok(())
    }
}

/// A waiting thread looks for its answer for a while (yielding) before it
/// sleeps: an answer that comes after that still wakes it, through `wait`
/// and `wait_timeout` alike, and one that comes within the look is taken
/// there. A timeout shorter than the look still ends the wait with
/// `TimedOut`, and leaves the answer for a later wait.
#[test]
fn a_waiting_thread_gets_its_answer_whether_it_comes_soon_or_late() {
    let scheduler = Scheduler::builder().workers(1).build();
    scheduler.start();
    let late = scheduler
        .spawn(Slow {
            after: Duration::from_millis(30),
            waiting: Vec::new(),
        })
        .expect("spawned")
        .pid();
    let soon = squarer(&scheduler);
    let mut reply = scheduler
        .ask(late, Box::new(1u64) as Payload)
        .expect("asked");
    let answer = reply.wait().expect("answered");
    assert_eq!(answer.downcast_ref::<u64>().copied(), Some(2));
    let mut reply = scheduler
        .ask(late, Box::new(2u64) as Payload)
        .expect("asked");
    let answer = reply.wait_timeout(WAIT).expect("answered");
    assert_eq!(answer.downcast_ref::<u64>().copied(), Some(3));
    for n in 3..200u64 {
        let mut reply = scheduler.ask(soon, Box::new(n) as Payload).expect("asked");
        let answer = reply.wait_timeout(WAIT).expect("answered");
        assert_eq!(answer.downcast_ref::<u64>().copied(), Some(n * n));
    }
    let mut reply = scheduler
        .ask(late, Box::new(7u64) as Payload)
        .expect("asked");
    assert_eq!(
        reply.wait_timeout(Duration::from_micros(50)).unwrap_err(),
        AskError::TimedOut
    );
    let answer = reply.wait_timeout(WAIT).expect("the answer, later");
    assert_eq!(answer.downcast_ref::<u64>().copied(), Some(8));
    scheduler.shutdown(Duration::from_secs(1));
}
