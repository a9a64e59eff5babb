//! Completing and rejecting commands with `?`: `reject` borrows the
//! completer, `settle` completes with a `Result`.

use std::sync::mpsc;
use std::time::Duration;

use sched::command::{Command, CommandError, CommandId, CompleteError, Completer, Rejected};
use sched::prelude::*;

const WAIT: Duration = Duration::from_secs(10);
const PARSE: CommandId = CommandId(1);
const WORK: CommandId = CommandId(2);

/// Yields `input` to `command` and finishes with every completion it gets
/// within 100 ms of the first (a second one would be a bug).
struct Asks {
    command: CommandId,
    input: Option<Payload>,
    seen: Vec<Result<Payload, CommandError>>,
}

impl Asks {
    fn new(command: CommandId, input: impl std::any::Any + Send) -> Self {
        Asks {
            command,
            input: Some(Box::new(input)),
            seen: Vec::new(),
        }
    }
}

impl Process for Asks {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        if let Some(input) = self.input.take() {
            out.yield_command(self.command, Tag(1), input);
            return Ok(());
        }
        for event in events {
            match event {
                Event::Completion { result, .. } => {
                    self.seen.push(result);
                    out.set_timer(Duration::from_millis(100), Tag(2));
                }
                Event::Timer { .. } => {
                    let seen = std::mem::take(&mut self.seen);
                    let texts: Vec<Result<String, String>> = seen
                        .into_iter()
                        .map(|r| match r {
                            Ok(v) => Ok(v
                                .downcast_ref::<u64>()
                                .map_or("?".into(), |n| n.to_string())),
                            Err(e) => Err(e.to_string()),
                        })
                        .collect();
                    out.finish(texts);
                }
                _ => {}
            }
        }
        Ok(())
    }
}

fn run(scheduler: &Scheduler, process: Asks) -> Vec<Result<String, String>> {
    let done = scheduler.spawn(process).unwrap().wait().unwrap();
    *done.downcast::<Vec<Result<String, String>>>().unwrap()
}

#[test]
fn a_handler_rejects_with_question_mark_and_completes_otherwise() {
    let (spent_tx, spent_rx) = mpsc::channel();
    let scheduler = Scheduler::builder()
        .workers(2)
        .handler(
            PARSE,
            move |cmd: Command, mut done: Completer| -> Result<(), Rejected> {
                let text = cmd.data::<&str>().ok_or_else(|| done.reject("not text"))?;
                let n: u64 = text.parse().map_err(|e| done.reject(e))?;
                let _ = done.complete(Box::new(n + 1));
                Ok(())
            },
        )
        .handler(
            WORK,
            move |_: Command, mut done: Completer| -> Result<(), Rejected> {
                let rejected = done.reject("no capacity");
                // Spent by the rejection: completing it is refused, and
                // dropping it delivers nothing more.
                spent_tx.send(done.complete(Box::new(0u64))).unwrap();
                Err(rejected)
            },
        )
        .build();
    scheduler.start();

    assert_eq!(
        run(&scheduler, Asks::new(PARSE, "41")),
        vec![Ok("42".into())]
    );
    assert_eq!(
        run(&scheduler, Asks::new(PARSE, 7u8)),
        vec![Err("the handler rejected the command: not text".into())]
    );
    let bad = run(&scheduler, Asks::new(PARSE, "x"));
    assert_eq!(bad.len(), 1, "{bad:?}");
    assert!(bad[0]
        .as_ref()
        .is_err_and(|e| e.starts_with("the handler rejected the command: invalid digit")));

    assert_eq!(
        run(&scheduler, Asks::new(WORK, ())),
        vec![Err("the handler rejected the command: no capacity".into())]
    );
    assert!(matches!(
        spent_rx.recv_timeout(WAIT).unwrap(),
        Err(CompleteError::Rejected { tag: Tag(1), .. })
    ));
    scheduler.shutdown(WAIT);
}

#[test]
fn settle_completes_with_a_result_from_another_thread() {
    let scheduler = Scheduler::builder()
        .workers(2)
        .handler(
            PARSE,
            |cmd: Command, done: Completer| -> Result<(), Rejected> {
                let text = cmd.data::<&str>().copied().unwrap_or_default();
                // A plain completer settles with a `Payload`.
                let parsed = text.parse::<u64>().map(|n| Box::new(n) as Payload);
                std::thread::spawn(move || done.settle(parsed));
                Ok(())
            },
        )
        .build();
    scheduler.start();
    assert_eq!(run(&scheduler, Asks::new(PARSE, "5")), vec![Ok("5".into())]);
    let failed = run(&scheduler, Asks::new(PARSE, "five"));
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert!(failed[0]
        .as_ref()
        .is_err_and(|e| e.starts_with("the command failed: invalid digit")));
    scheduler.shutdown(WAIT);
}
