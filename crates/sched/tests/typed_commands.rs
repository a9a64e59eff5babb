//! Typed commands: a `TypedCommand<D, R>` is yielded with a `D` and read
//! back as an `R`; its handler gets the `D` and completes with an `R`. No
//! box and no downcast in user code; mismatches with the untyped forms are
//! errors that say so, never panics.

use std::time::Duration;

use sched::command::{CommandError, CommandId, Completer, Rejected, TypedCommand, Yielded};
use sched::prelude::*;

const WAIT: Duration = Duration::from_secs(10);

/// Parses a number; fails on text that is not one, refuses an empty one.
const PARSE: TypedCommand<String, u64> = TypedCommand::new(CommandId(1));
/// Registered untyped, and completing with a string whatever it is asked.
const LIAR: TypedCommand<(), u64> = TypedCommand::new(CommandId(2));

fn parse(text: String, mut done: Completer<u64>) -> Result<(), Rejected> {
    if text.is_empty() {
        return Err(done.reject("nothing to parse"));
    }
    let _ = done.settle(text.parse::<u64>());
    Ok(())
}

fn scheduler() -> Scheduler {
    let scheduler = Scheduler::builder()
        .workers(2)
        .handler(PARSE, parse)
        .handler(LIAR.id(), |_cmd, done: Completer| {
            let _ = done.complete(Box::new("not a number"));
            Ok(())
        })
        .build();
    scheduler.start();
    scheduler
}

/// Yields one typed command at start and finishes with its result, as a
/// string (to compare outcomes of every kind).
struct Once<D: Send + 'static> {
    command: TypedCommand<D, u64>,
    data: Option<D>,
    yielded: Option<Yielded<u64>>,
}

impl<D: Send + 'static> Process for Once<D> {
    type Done = Payload;
    fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        let data = self.data.take().expect("started once");
        self.yielded = Some(out.yield_command(self.command, Tag(7), data));
        Ok(())
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        let yielded = self.yielded.expect("started");
        for event in events {
            match yielded.result(event) {
                Ok(Ok(n)) => out.finish(format!("ok {n}")),
                Ok(Err(CommandError::Failed(e))) => out.finish(format!("failed: {e}")),
                Ok(Err(CommandError::Rejected(e))) => out.finish(format!("rejected: {e}")),
                Ok(Err(CommandError::UnexpectedType(wrong))) => out.finish(format!(
                    "wrong type, wanted {}, got {:?}",
                    wrong.expected(),
                    wrong.into_value().downcast::<&str>().ok()
                )),
                Ok(Err(other)) => out.finish(format!("other: {other}")),
                Err(event) => return Err(format!("not the yield's event: {event:?}").into()),
            }
        }
        Ok(())
    }
}

fn run<D: Send + 'static>(scheduler: &Scheduler, command: TypedCommand<D, u64>, data: D) -> String {
    scheduler
        .spawn(Once {
            command,
            data: Some(data),
            yielded: None,
        })
        .unwrap()
        .typed::<String>()
        .wait()
        .unwrap()
}

#[test]
fn a_typed_command_carries_its_types_both_ways() {
    let scheduler = scheduler();
    assert_eq!(run(&scheduler, PARSE, "42".to_string()), "ok 42");
    assert_eq!(
        run(&scheduler, PARSE, "forty-two".to_string()),
        "failed: invalid digit found in string"
    );
    assert_eq!(
        run(&scheduler, PARSE, String::new()),
        "rejected: nothing to parse"
    );
    scheduler.shutdown(WAIT);
}

#[test]
fn mismatches_with_the_untyped_forms_are_errors() {
    let scheduler = scheduler();
    // The untyped handler completes with a `&str`: the typed read says so
    // and hands the value back.
    let got = run(&scheduler, LIAR, ());
    assert!(
        got.starts_with("wrong type, wanted u64") && got.ends_with("Some(\"not a number\")"),
        "{got}"
    );
    // An untyped yield with the wrong data, to the typed handler: rejected.
    const PARSE_BY_HAND: TypedCommand<u32, u64> = TypedCommand::new(PARSE.id());
    assert_eq!(
        run(&scheduler, PARSE_BY_HAND, 42u32),
        "rejected: the data of command 1 is not a alloc::string::String"
    );
    scheduler.shutdown(WAIT);
}

#[test]
fn a_yield_reads_only_its_own_completion() {
    let yielded: Yielded<u64> = {
        // A `Yielded` is made by a yield; make one the way a step does.
        struct Capture(Option<Yielded<u64>>);
        impl Process for Capture {
            type Done = Payload;
            fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
                let y = out.yield_command(PARSE, Tag(3), "1".to_string());
                self.0 = Some(y);
                out.reset(); // nothing is dispatched
                out.finish(self.0.take());
                Ok(())
            }
            fn step(&mut self, _: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
                Ok(())
            }
        }
        let scheduler = scheduler();
        let y = scheduler
            .spawn(Capture(None))
            .unwrap()
            .typed::<Option<Yielded<u64>>>()
            .wait()
            .unwrap()
            .unwrap();
        scheduler.shutdown(WAIT);
        y
    };
    assert_eq!(yielded.tag(), Tag(3));
    let other_tag = Event::Completion {
        tag: Tag(4),
        result: Ok(Box::new(1u64)),
    };
    assert!(matches!(
        yielded.result(other_tag),
        Err(Event::Completion { tag: Tag(4), .. })
    ));
    let mine = Event::Completion {
        tag: Tag(3),
        result: Ok(Box::new(9u64)),
    };
    assert_eq!(yielded.result(mine).ok().map(Result::ok), Some(Some(9)));
}

#[test]
fn the_errors_stay_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<ExitError>();
    send_sync::<CommandError>();
    // So `?` turns them into a step's `BoxError`.
    fn step_error(e: CommandError) -> BoxError {
        e.into()
    }
    let _ = step_error(CommandError::Dropped);
}

/// Sleeps for the number of milliseconds it is given, on engine timers.
const NAP: TypedCommand<u64, Duration> = TypedCommand::new(CommandId(3));

/// Yields `NAP` with its delays, all at once, and finishes with the
/// order of the completions (by tag) and the time until the last.
struct Napper {
    delays: Vec<u64>,
    started: Option<std::time::Instant>,
    order: Vec<u64>,
}

impl Process for Napper {
    type Done = Payload;
    fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        self.started = Some(std::time::Instant::now());
        for (i, &ms) in self.delays.iter().enumerate() {
            let _ = out.yield_command(NAP, Tag(i as u64), ms);
        }
        Ok(())
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            if let Event::Completion { tag, result } = event {
                result?;
                self.order.push(tag.0);
            }
        }
        if self.order.len() == self.delays.len() {
            let took = self.started.expect("started").elapsed();
            out.finish((std::mem::take(&mut self.order), took));
        }
        Ok(())
    }
}

#[test]
fn a_completion_after_a_delay_arrives_after_it_in_deadline_order() {
    let scheduler = Scheduler::builder()
        .workers(2)
        .handler(NAP, |ms: u64, done| {
            let _ = done.complete_after(Duration::from_millis(ms), Duration::from_millis(ms));
            Ok(())
        })
        .build();
    scheduler.start();
    let napper = Napper {
        delays: vec![40, 10, 25],
        started: None,
        order: Vec::new(),
    };
    let (order, took) = scheduler
        .spawn(napper)
        .unwrap()
        .typed::<(Vec<u64>, Duration)>()
        .wait()
        .unwrap();
    assert_eq!(order, [1, 2, 0], "by deadline");
    assert!(took >= Duration::from_millis(40), "{took:?}");
    scheduler.shutdown(WAIT);
}

#[test]
fn a_delayed_completion_for_a_process_that_ended_is_a_dead_letter() {
    let dead = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = std::sync::Arc::clone(&dead);
    let (handled, yielded) = std::sync::mpsc::channel();
    let handled = std::sync::Mutex::new(handled);
    let scheduler = Scheduler::builder()
        .workers(1)
        .handler(NAP, move |ms: u64, done| {
            let _ = done.complete_after(Duration::from_millis(ms), Duration::from_millis(ms));
            let _ = handled.lock().unwrap().send(());
            Ok(())
        })
        .on_dead_letter(move |_cx, _pid, event| {
            if let Event::Completion { tag, .. } = event {
                log.lock().unwrap().push(tag.0);
            }
        })
        .build();
    scheduler.start();
    let napper = scheduler
        .spawn(Napper {
            delays: vec![30],
            started: None,
            order: Vec::new(),
        })
        .unwrap();
    // The completion is pending on the timers; end the process before it.
    yielded.recv_timeout(WAIT).unwrap();
    scheduler.terminate(napper.pid()).unwrap();
    assert!(matches!(napper.wait(), Err(ExitError::Terminated)));
    let deadline = std::time::Instant::now() + WAIT;
    while dead.lock().unwrap().is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(*dead.lock().unwrap(), [0]);
    scheduler.shutdown(WAIT);
}
