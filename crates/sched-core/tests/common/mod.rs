//! Processes and handlers shared by the engine's integration tests.
#![allow(dead_code, unreachable_pub)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use relay::{Payload, Pid};
use sched_core::*;

/// Generous bound for "this finishes": tests never sleep this long unless
/// something is wrong.
pub const PATIENCE: Duration = Duration::from_secs(10);

/// Completes every command from a freshly spawned thread, after the
/// duration in its data (a `Duration`) or at once.
pub const ASYNC: CommandId = CommandId(1);
/// Completes inside the handler call.
pub const SYNC: CommandId = CommandId(2);
/// Rejects every command.
pub const REJECT: CommandId = CommandId(3);
/// Panics.
pub const PANIC: CommandId = CommandId(4);
/// Keeps the completer forever (never completes).
pub const NEVER: CommandId = CommandId(5);
/// Drops the completer without completing.
pub const DROP: CommandId = CommandId(6);

pub fn builder(workers: usize) -> Builder {
    let kept: Arc<std::sync::Mutex<Vec<Completer>>> = Arc::default();
    Engine::builder()
        .workers(workers)
        .handler(
            ASYNC,
            |cmd: Command, c: Completer| -> Result<(), Rejected> {
                let delay = cmd.data::<Duration>().copied();
                std::thread::spawn(move || {
                    if let Some(d) = delay {
                        std::thread::sleep(d);
                    }
                    let _ = c.complete(cmd.data);
                });
                Ok(())
            },
        )
        .handler(SYNC, |cmd: Command, c: Completer| -> Result<(), Rejected> {
            let _ = c.complete(cmd.data);
            Ok(())
        })
        .handler(
            REJECT,
            |_: Command, mut c: Completer| -> Result<(), Rejected> {
                Err(c.reject("handler failed"))
            },
        )
        .handler(PANIC, |_: Command, _c: Completer| -> Result<(), Rejected> {
            panic!("handler exploded")
        })
        .handler(
            NEVER,
            move |_: Command, c: Completer| -> Result<(), Rejected> {
                kept.lock().unwrap().push(c);
                Ok(())
            },
        )
        .handler(DROP, |_: Command, c: Completer| -> Result<(), Rejected> {
            drop(c);
            Ok(())
        })
}

pub fn started(workers: usize) -> Engine {
    let e = builder(workers).build();
    e.start();
    e
}

/// Counts `close` calls.
#[derive(Clone, Default)]
pub struct CloseCounter(pub Arc<AtomicUsize>);

impl CloseCounter {
    pub fn get(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

/// Yields `n` commands to `command` one after another (tags 1..=n), then
/// finishes with the number of completions it saw.
pub struct Counter {
    pub n: u64,
    pub command: CommandId,
    pub seen: u64,
    pub closes: CloseCounter,
}

impl Counter {
    pub fn new(n: u64, command: CommandId) -> Box<Self> {
        Box::new(Counter {
            n,
            command,
            seen: 0,
            closes: CloseCounter::default(),
        })
    }
}

impl Process for Counter {
    type Done = Payload;
    fn init(&mut self, _: &InitContext, method: &str, _: Payload) -> Result<(), InitError> {
        match method {
            "run" => Ok(()),
            other => Err(InitError::unknown_method(other)),
        }
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            if let Event::Completion { tag, result } = event {
                result?;
                assert_eq!(tag, Tag(self.seen + 1), "completions correlate by tag");
                self.seen += 1;
            }
        }
        if self.seen == self.n {
            out.finish(self.seen);
        } else {
            out.yield_command(self.command, Tag(self.seen + 1), Box::new(()));
        }
        Ok(())
    }

    fn close(&mut self) {
        self.closes.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Waits for messages; finishes with the number of messages when it gets
/// the message `"stop"`, or with `"cancelled"` on cancel (unless it
/// ignores cancel).
pub struct Inbox {
    pub received: u64,
    pub ignore_cancel: bool,
    pub closes: CloseCounter,
}

impl Inbox {
    pub fn new() -> Box<Self> {
        Box::new(Inbox {
            received: 0,
            ignore_cancel: false,
            closes: CloseCounter::default(),
        })
    }
}

impl Process for Inbox {
    type Done = Payload;
    fn init(&mut self, _: &InitContext, _: &str, _: Payload) -> Result<(), InitError> {
        Ok(())
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            match event {
                Event::Message(p) => {
                    if p.payload::<&str>() == Some(&"stop") {
                        out.finish(self.received);
                        return Ok(());
                    }
                    self.received += 1;
                }
                Event::Cancel if !self.ignore_cancel => {
                    out.finish("cancelled");
                    return Ok(());
                }
                _ => {}
            }
        }
        out.idle();
        Ok(())
    }

    fn close(&mut self) {
        self.closes.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// A process defined by closures, for one-off behaviours.
pub struct FnProcess<S>
where
    S: FnMut(&mut Events<'_>, &mut Output<'_>) -> Result<(), BoxError> + Send + 'static,
{
    pub step: S,
    pub closes: CloseCounter,
}

pub fn process<S>(step: S) -> Box<FnProcess<S>>
where
    S: FnMut(&mut Events<'_>, &mut Output<'_>) -> Result<(), BoxError> + Send + 'static,
{
    Box::new(FnProcess {
        step,
        closes: CloseCounter::default(),
    })
}

impl<S> Process for FnProcess<S>
where
    S: FnMut(&mut Events<'_>, &mut Output<'_>) -> Result<(), BoxError> + Send + 'static,
{
    type Done = Payload;
    fn init(&mut self, _: &InitContext, _: &str, _: Payload) -> Result<(), InitError> {
        Ok(())
    }
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        (self.step)(events, out)
    }
    fn close(&mut self) {
        self.closes.0.fetch_add(1, Ordering::SeqCst);
    }
}

pub fn submit(engine: &Engine, id: u64, p: Box<dyn Process<Done = relay::Payload>>) -> Completion {
    engine
        .context()
        .spawn(Spawn::new(p).method("run").at(Pid::local(id)))
        .expect("submit")
}

pub fn wait(mut c: Completion) -> Outcome {
    match c.wait_timeout(PATIENCE) {
        Err(sched_core::ExitError::TimedOut) => panic!("the process did not finish in time"),
        outcome => outcome,
    }
}

pub fn done_u64(outcome: Outcome) -> u64 {
    *outcome
        .expect("done")
        .downcast::<u64>()
        .expect("a u64 result")
}
