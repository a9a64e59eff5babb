//! `Call`: a command with a timeout per attempt and retries, driven from a
//! step.

use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sched::command::{Call, CallError, CallEvent, Command, CommandId, Completer, Rejected};
use sched::prelude::*;

const WAIT: Duration = Duration::from_secs(10);
const SERVICE: CommandId = CommandId(7);

/// How the service treats the n-th attempt (1-based) it receives.
#[derive(Clone, Copy)]
enum Attempt {
    /// Never completes it now: the completer is kept, to be completed late.
    Hold,
    /// Fails it.
    Fail,
    /// Answers with the attempt number.
    Answer,
}

/// Calls the service with `retries`, records its result and every event
/// the call did not take, and finishes 50 ms after the result (so that late
/// completions have time to arrive).
struct Caller {
    call: Call,
    result: Option<Result<u32, String>>,
    foreign: Vec<String>,
    /// Set once the call has ended: the test then answers held attempts.
    ended: Arc<AtomicBool>,
}

impl Process for Caller {
    type Done = Payload;
    fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        self.call.issue_with(out, |_| Box::new("job") as Payload);
        Ok(())
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            match self.call.on_event(event, out) {
                CallEvent::Taken => {}
                CallEvent::Other(Event::Timer { tag: Tag(99), .. }) => {
                    let report = (
                        self.result.take(),
                        self.call.attempts(),
                        std::mem::take(&mut self.foreign),
                    );
                    out.finish(report);
                }
                CallEvent::Other(other) => self.foreign.push(format!("{other:?}")),
                ended => {
                    let result = ended.ended().expect("answered or failed");
                    self.result = Some(
                        result
                            .map(|v| *v.downcast::<u32>().unwrap())
                            .map_err(|e| e.to_string()),
                    );
                    self.ended.store(true, SeqCst);
                    out.set_timer(Duration::from_millis(100), Tag(99));
                }
            }
        }
        Ok(())
    }
}

type Report = (Option<Result<u32, String>>, u32, Vec<String>);

/// Runs a caller against a service that treats its attempts as `plan`
/// says; completes the held completers late (after the caller's result).
fn run(plan: &'static [Attempt], retries: u32) -> Report {
    let held: Arc<Mutex<Vec<Completer>>> = Arc::default();
    let seen = Arc::new(Mutex::new(0usize));
    let (keep, count) = (Arc::clone(&held), Arc::clone(&seen));
    let scheduler = Scheduler::builder()
        .workers(2)
        .handler(
            SERVICE,
            move |_: Command, done: Completer| -> Result<(), Rejected> {
                let n = {
                    let mut n = count.lock().unwrap();
                    *n += 1;
                    *n
                };
                match plan.get(n - 1).copied().unwrap_or(Attempt::Answer) {
                    Attempt::Hold => keep.lock().unwrap().push(done),
                    Attempt::Fail => {
                        let _ = done.fail(format!("attempt {n} failed"));
                    }
                    Attempt::Answer => {
                        let _ = done.complete(Box::new(n as u32));
                    }
                }
                Ok(())
            },
        )
        .build();
    scheduler.start();
    let ended = Arc::new(AtomicBool::new(false));
    let caller = Caller {
        call: Call::new(SERVICE, Tag(1), Duration::from_millis(20)).retries(retries),
        result: None,
        foreign: Vec::new(),
        ended: Arc::clone(&ended),
    };
    let mut done = scheduler.spawn(caller).unwrap();
    // Once the caller has its result, the held attempts answer late.
    let deadline = std::time::Instant::now() + WAIT;
    let outcome = loop {
        if let Some(outcome) = done.try_take() {
            break outcome;
        }
        if ended.load(SeqCst) {
            for completer in held.lock().unwrap().drain(..) {
                let _ = completer.complete(Box::new(1000u32));
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the caller never finished"
        );
        std::thread::sleep(Duration::from_millis(5));
    };
    scheduler.shutdown(WAIT);
    *outcome.unwrap().downcast::<Report>().unwrap()
}

#[test]
fn a_timed_out_attempt_is_retried_and_the_first_answer_wins() {
    // The first attempt is held past its timeout; the second answers; the
    // late answer to the first is swallowed: never seen by the step.
    let (result, attempts, foreign) = run(&[Attempt::Hold, Attempt::Answer], 1);
    assert_eq!(result, Some(Ok(2)));
    assert_eq!(attempts, 2);
    assert!(foreign.is_empty(), "{foreign:?}");
}

#[test]
fn a_failed_attempt_is_retried() {
    let (result, attempts, foreign) = run(&[Attempt::Fail, Attempt::Answer], 2);
    assert_eq!(result, Some(Ok(2)));
    assert_eq!(attempts, 2);
    assert!(foreign.is_empty(), "{foreign:?}");
}

#[test]
fn spent_retries_end_with_the_last_error() {
    let (result, attempts, _) = run(&[Attempt::Fail, Attempt::Fail], 1);
    assert_eq!(
        result,
        Some(Err(
            "the command failed after 2 attempt(s): the command failed: attempt 2 failed".into()
        ))
    );
    assert_eq!(attempts, 2);
}

#[test]
fn every_attempt_timing_out_is_a_timeout() {
    let (result, attempts, foreign) = run(&[Attempt::Hold, Attempt::Hold, Attempt::Hold], 2);
    assert_eq!(result, Some(Err("no answer after 3 attempt(s)".into())));
    assert_eq!(attempts, 3);
    // The late answers to the held attempts are swallowed.
    assert!(foreign.is_empty(), "{foreign:?}");
}

#[test]
fn the_error_type_says_what_happened() {
    let error = CallError::TimedOut { attempts: 1 };
    assert_eq!(error.to_string(), "no answer after 1 attempt(s)");
}
