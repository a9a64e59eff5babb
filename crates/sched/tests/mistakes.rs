//! Three mistakes a first program makes, and what it is told: each is a
//! compile error or an error that names the types or the state involved.
//!
//! 1. **A message of the wrong type** to a typed address does not compile:
//!    the `compile_fail,E0277` example of `Context::send` is that test
//!    (rustdoc fails if it ever compiles: the trait `Target<X>` is not
//!    implemented for `Addr<M>`). The tests below check the
//!    run-time half: the address a typed spawn hands out carries the type,
//!    and a message of that type arrives.
//! 2. **A question the asked process does not take** comes back as
//!    `AskError::UnexpectedQuestion` naming both types, asked from outside
//!    and from a step, never as a bare `NoReply`.
//! 3. **A send to a process that has ended** fails with
//!    `SendErrorKind::Ended`, and the error says "has ended" with the PID.

use sched::actor::AskError;
use sched::message::SendErrorKind;
use sched::prelude::*;
use sched::ReplyId;
use std::any::type_name;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(10);

/// What a counter is told.
#[derive(Debug)]
struct Add(u64);

/// The question a counter answers.
struct Total;
impl Question for Total {
    type Answer = u64;
}

/// A question nobody here takes.
struct Colour;
impl Question for Colour {
    type Answer = String;
}

/// Adds what it is told; answers `Total`; ends on cancel. A request of
/// any other type is dropped, as the guide's examples do.
struct Counter(u64);

impl Accepts for Counter {
    type Message = Add;
}

impl Process for Counter {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            match event {
                Event::Message(package) => {
                    self.0 += package.downcast::<Add>().map_err(|_| "not an Add")?.0
                }
                Event::Request(request) => {
                    if let Ok((Total, answer)) = request.take::<Total>() {
                        answer.answer(self.0);
                    }
                }
                Event::Cancel => out.finish(self.0),
                _ => {}
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
fn a_typed_address_takes_its_type_and_it_arrives() {
    let scheduler = started();
    let mut done = scheduler.spawn(Counter(0)).unwrap();
    let counter = done.addr::<Counter>();
    scheduler.send(counter, Add(2)).unwrap();
    scheduler.send(counter, Add(3)).unwrap();
    let total = scheduler
        .ask(counter.pid(), Total)
        .unwrap()
        .wait_timeout(WAIT);
    assert_eq!(total, Ok(5));
    scheduler.context().cancel(counter.pid()).unwrap();
    let end = done.wait_timeout(WAIT).expect("the counter ended");
    assert_eq!(end.downcast_ref::<u64>(), Some(&5));
    scheduler.shutdown(Duration::from_secs(1));
}

#[test]
fn a_question_of_the_wrong_type_names_both_types_from_outside() {
    let scheduler = started();
    let mut counter = scheduler.spawn(Counter(0)).unwrap();
    let error = scheduler
        .ask(counter.pid(), Colour)
        .unwrap()
        .wait_timeout(WAIT)
        .unwrap_err();
    assert_eq!(
        error,
        AskError::UnexpectedQuestion {
            asked: type_name::<Colour>(),
            expected: type_name::<Total>(),
        }
    );
    let text = error.to_string();
    assert!(text.contains(type_name::<Colour>()), "{text}");
    assert!(text.contains(type_name::<Total>()), "{text}");
    // An untyped ask (a boxed value, whose type the box does not name) is
    // told it was untyped, and what the process expected.
    let untyped = scheduler
        .ask(counter.pid(), Box::new(7u32) as Payload)
        .unwrap()
        .wait_timeout(WAIT);
    match untyped.unwrap_err() {
        AskError::UnexpectedQuestion { asked, expected } => {
            assert!(asked.contains("untyped"), "{asked}");
            assert_eq!(expected, type_name::<Total>());
        }
        other => panic!("{other}"),
    }
    // The right question still works: the wrong one did not upset it.
    let total = scheduler
        .ask(counter.pid(), Total)
        .unwrap()
        .wait_timeout(WAIT);
    assert_eq!(total, Ok(0));
    scheduler.context().cancel(counter.pid()).unwrap();
    counter.wait_timeout(WAIT).expect("the counter ended");
    scheduler.shutdown(Duration::from_secs(1));
}

/// Asks `target` a `Colour` from its first step and ends with the error
/// the reply carries.
struct WrongAsker {
    target: Pid,
    asked: Option<ReplyId<String>>,
}

impl Process for WrongAsker {
    type Done = Payload;
    fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        self.asked = Some(out.ask(self.target, Colour, WAIT)?);
        Ok(())
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        let asked = self.asked.expect("asked at start");
        for event in events {
            if let Some(answer) = asked.answer(event).answered() {
                out.finish(answer);
            }
        }
        Ok(())
    }
}

#[test]
fn a_question_of_the_wrong_type_names_both_types_from_a_step() {
    let scheduler = started();
    let counter = scheduler.spawn(Counter(0)).unwrap();
    let mut asker = scheduler
        .spawn(WrongAsker {
            target: counter.pid(),
            asked: None,
        })
        .unwrap()
        .typed::<Result<String, AskError>>();
    let answer = asker.wait_timeout(WAIT).expect("the asker ended");
    assert_eq!(
        answer,
        Err(AskError::UnexpectedQuestion {
            asked: type_name::<Colour>(),
            expected: type_name::<Total>(),
        })
    );
    scheduler.shutdown(Duration::from_secs(1));
}

#[test]
fn a_request_dropped_without_a_take_is_still_no_reply() {
    // A process that never tried to read the question as another type
    // chose not to answer: that stays `NoReply`.
    struct Silent;
    impl Process for Silent {
        type Done = Payload;
        fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
            for event in events {
                if let Event::Cancel = event {
                    out.finish(());
                }
            }
            Ok(())
        }
    }
    let scheduler = started();
    let silent = scheduler.spawn(Silent).unwrap();
    let error = scheduler
        .ask(silent.pid(), Total)
        .unwrap()
        .wait_timeout(WAIT)
        .unwrap_err();
    assert_eq!(error, AskError::NoReply);
    scheduler.shutdown(Duration::from_secs(1));
}

#[test]
fn a_send_to_an_ended_process_says_it_has_ended() {
    let scheduler = started();
    let mut done = scheduler.spawn(Counter(0)).unwrap();
    let counter = done.addr::<Counter>();
    scheduler.context().cancel(counter.pid()).unwrap();
    done.wait_timeout(WAIT).expect("the counter ended");

    let error = scheduler.send(counter, Add(1)).unwrap_err();
    assert_eq!(error.kind(), SendErrorKind::Ended);
    assert_eq!(error.target(), counter.pid());
    assert_eq!(
        error.to_string(),
        format!("process {} has ended", counter.pid())
    );
    // The message comes back, as it was sent.
    assert_eq!(error.into_package().downcast::<Add>().unwrap().0, 1);

    let untyped = scheduler.send(counter.pid(), 1u8).unwrap_err();
    assert_eq!(untyped.kind(), SendErrorKind::Ended);
    let asked = scheduler.ask(counter.pid(), Total).unwrap_err();
    assert_eq!(asked.kind(), SendErrorKind::Ended);
    assert_eq!(
        scheduler.context().pid_status(counter.pid()),
        sched::actor::PidStatus::Ended
    );
    scheduler.shutdown(Duration::from_secs(1));
}
