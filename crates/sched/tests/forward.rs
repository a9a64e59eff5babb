//! A right to answer made apart from its question (`reply_pair`) and
//! passed on with a new question (`ReplyTo::forward`): the answer reaches
//! the original asker exactly once, typed; a forward that cannot go hands
//! the right back; a right dropped anywhere answers `NoReply`.

use std::sync::mpsc::{channel, Sender};
use std::time::Duration;

use sched::actor::{AskError, Replied, ReplyTo};
use sched::prelude::*;
use sched::ReplyId;

const WAIT: Duration = Duration::from_secs(10);

struct Square(u64);
impl Question for Square {
    type Answer = u64;
}

/// Answers `Square`s, and tells who asked each.
struct Squarer(Sender<Pid>);
impl Process for Squarer {
    type Done = ();
    fn step(&mut self, events: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            if let Event::Request(request) = event {
                let (Square(n), answer) = request.take::<Square>().map_err(|_| "not a Square")?;
                let _ = self.0.send(answer.asker());
                answer.answer(n * n);
            }
        }
        Ok(())
    }
}

/// Passes every request on to `to`, as `Square(n + 1)` for a `u64` n.
struct PlusOne {
    to: Pid,
}
impl Process for PlusOne {
    type Done = ();
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            if let Event::Request(request) = event {
                let (question, answer_to) = request.into_parts();
                let n = question.downcast::<u64>().map_err(|_| "not a u64")?;
                if let Err((_, answer_to)) =
                    answer_to.forward(out.context(), self.to, Square(n + 1))
                {
                    answer_to.reply(0_u64);
                }
            }
        }
        Ok(())
    }
}

fn started() -> Scheduler {
    let scheduler = Scheduler::builder().workers(2).build();
    scheduler.start();
    scheduler
}

#[test]
fn a_forwarded_question_is_answered_to_the_original_asker_once() {
    let scheduler = started();
    let (asked_by, askers) = channel();
    let squarer = scheduler.spawn(Squarer(asked_by)).unwrap().pid();
    let router = scheduler.spawn(PlusOne { to: squarer }).unwrap().pid();

    // From outside, through the router: 4 becomes Square(5).
    let mut reply = scheduler.ask(router, Box::new(4_u64) as Payload).unwrap();
    let answer = reply.wait_timeout(WAIT).unwrap();
    assert_eq!(*answer.downcast::<u64>().unwrap(), 25);
    assert_eq!(askers.recv_timeout(WAIT).unwrap(), Pid::OUTSIDE);
    assert_eq!(
        reply.wait_timeout(Duration::from_millis(50)).map(|_| ()),
        Err(AskError::AlreadyTaken)
    );

    // A pair made first, its right forwarded from here.
    let (mut reply, answer_to) = scheduler.context().reply_pair::<Square>();
    answer_to
        .forward(scheduler.context(), squarer, Square(12))
        .map_err(|(e, _)| e)
        .unwrap();
    assert_eq!(reply.wait_timeout(WAIT).unwrap(), 144);
    scheduler.shutdown(Duration::from_millis(200));
}

#[test]
fn a_forward_that_cannot_go_hands_the_right_back_and_dropping_it_answers_no_reply() {
    let scheduler = started();
    let (asked_by, _askers) = channel();
    let mut gone = scheduler.spawn(Squarer(asked_by)).unwrap();
    let gone_pid = gone.pid();
    scheduler.terminate(gone_pid).unwrap();
    let _ = gone.wait_timeout(WAIT);

    let (mut reply, answer_to) = scheduler.context().reply_pair::<Square>();
    let (error, answer_to): (_, ReplyTo) = answer_to
        .forward(scheduler.context(), gone_pid, Square(3))
        .expect_err("the process has ended");
    // The question comes back in the error's package.
    assert_eq!(error.into_package().downcast::<Square>().unwrap().0, 3);
    // The right is unspent: nothing answered yet.
    assert_eq!(
        reply.wait_timeout(Duration::from_millis(50)),
        Err(AskError::TimedOut)
    );
    drop(answer_to);
    assert_eq!(reply.wait_timeout(WAIT), Err(AskError::NoReply));

    // Through a router whose target has ended: it answers itself.
    let router = scheduler.spawn(PlusOne { to: gone_pid }).unwrap().pid();
    let mut reply = scheduler.ask(router, Box::new(1_u64) as Payload).unwrap();
    assert_eq!(
        *reply.wait_timeout(WAIT).unwrap().downcast::<u64>().unwrap(),
        0
    );
    scheduler.shutdown(Duration::from_millis(200));
}

/// Makes a pair in its first step and forwards it to `to` (or keeps the
/// right, unanswered, when `to` is `None`); finishes with what it gets.
struct PairAsker {
    to: Option<Pid>,
    kept: Option<ReplyTo>,
    asked: Option<ReplyId<u64>>,
    timeout: Duration,
}
impl Process for PairAsker {
    type Done = Result<u64, AskError>;
    fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        let (id, answer_to) = out.reply_pair::<Square>(self.timeout);
        match self.to {
            Some(to) => answer_to
                .forward(out.context(), to, Square(6))
                .map_err(|(e, _)| e)?,
            None => self.kept = Some(answer_to),
        }
        self.asked = Some(id);
        Ok(())
    }
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        let Some(asked) = self.asked else {
            return Ok(());
        };
        for event in events {
            match asked.answer(event) {
                Replied::Answered(n) => out.finish(Ok::<u64, AskError>(n)),
                Replied::Failed(why) => out.finish(Err::<u64, AskError>(why)),
                Replied::Other(_) => {}
            }
        }
        Ok(())
    }
}

/// Makes a pair, withdraws it, and finishes when its own timer fires
/// after the pair's timeout: with every event it saw.
struct Withdrawer(Vec<String>);
impl Process for Withdrawer {
    type Done = Vec<String>;
    fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        let (id, answer_to) = out.reply_pair::<Square>(Duration::from_millis(20));
        out.withdraw_reply(id, answer_to);
        out.set_timer(Duration::from_millis(200), Tag(7));
        Ok(())
    }
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            let timer = matches!(event, Event::Timer { .. });
            self.0.push(format!("{event:?}"));
            if timer {
                out.finish(std::mem::take(&mut self.0));
            }
        }
        Ok(())
    }
}

#[test]
fn a_withdrawn_pair_gets_no_reply_not_even_its_timeout() {
    let scheduler = started();
    let mut withdrawer = scheduler.spawn(Withdrawer(Vec::new())).unwrap();
    let seen = withdrawer.wait_timeout(WAIT).unwrap();
    assert_eq!(seen.len(), 1, "only its own timer: {seen:?}");
    assert!(seen[0].starts_with("Timer"), "{seen:?}");
    scheduler.shutdown(Duration::from_millis(200));
}

#[test]
fn a_steps_pair_is_answered_or_times_out() {
    let scheduler = started();
    let (asked_by, askers) = channel();
    let squarer = scheduler.spawn(Squarer(asked_by)).unwrap().pid();
    let mut asker = scheduler
        .spawn(PairAsker {
            to: Some(squarer),
            kept: None,
            asked: None,
            timeout: WAIT,
        })
        .unwrap();
    let asker_pid = asker.pid();
    assert_eq!(asker.wait_timeout(WAIT).unwrap(), Ok(36));
    assert_eq!(
        askers.recv_timeout(WAIT).unwrap(),
        asker_pid,
        "the asker is the source"
    );

    let mut waiting = scheduler
        .spawn(PairAsker {
            to: None,
            kept: None,
            asked: None,
            timeout: Duration::from_millis(50),
        })
        .unwrap();
    assert_eq!(waiting.wait_timeout(WAIT).unwrap(), Err(AskError::TimedOut));
    scheduler.shutdown(Duration::from_millis(200));
}
