//! Scripted processes for the property and stress tests: a process follows
//! a list of steps (continue, yield to one of four handlers, wait for
//! messages, done, step error, panic) and records what it sees, so the test
//! can check every process against what its script implies.
#![allow(dead_code, unreachable_pub)]

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::Duration;

use relay::{Package, Payload, Pid};
use sched_core::*;

/// Completes inside the handler call.
pub const SYNC: CommandId = CommandId(1);
/// Completes later from a completer thread.
pub const ASYNC: CommandId = CommandId(2);
/// Refuses the command (`Err(completer.reject(..))`).
pub const REJECT: CommandId = CommandId(3);
/// Drops the completer without completing.
pub const DROP: CommandId = CommandId(4);

/// How long a test waits for one process before declaring it lost.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// Which handler a yield goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handler {
    Sync,
    Async,
    Reject,
    Drop,
}

impl Handler {
    pub fn id(self) -> CommandId {
        match self {
            Handler::Sync => SYNC,
            Handler::Async => ASYNC,
            Handler::Reject => REJECT,
            Handler::Drop => DROP,
        }
    }
}

/// One step of a script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Ask to run again.
    Continue,
    /// Yield one command and wait for its completion.
    Yield(Handler),
    /// Wait until this many messages (sent from outside) have arrived.
    Idle(u8),
    /// Finish with the process's id as the value.
    Done,
    /// Return an error from `step`.
    Fail,
    /// Panic inside `step`.
    Panic,
}

/// What a script implies: its outcome and the events it will see.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expected {
    pub outcome: Op,
    pub completions: u64,
    pub messages: u64,
}

/// The steps a script actually runs (up to its first ending, with `Done`
/// appended if it has none) and what they imply.
pub fn expected(script: &[Op]) -> (Vec<Op>, Expected) {
    let mut run = Vec::new();
    let mut completions = 0;
    let mut messages = 0;
    for &op in script {
        run.push(op);
        match op {
            Op::Yield(_) => completions += 1,
            Op::Idle(n) => messages += u64::from(n),
            Op::Done | Op::Fail | Op::Panic => {
                return (
                    run,
                    Expected {
                        outcome: op,
                        completions,
                        messages,
                    },
                );
            }
            Op::Continue => {}
        }
    }
    run.push(Op::Done);
    (
        run,
        Expected {
            outcome: Op::Done,
            completions,
            messages,
        },
    )
}

/// What the test observes of one process, shared with it.
#[derive(Debug, Default)]
pub struct Observed {
    /// Set while a worker is inside this process's `step`.
    pub in_step: AtomicBool,
    /// Times `step` was entered while another call was still inside.
    pub overlaps: AtomicUsize,
    pub completions: AtomicU64,
    pub messages: AtomicU64,
    /// Completions with a wrong tag or result, or nothing awaited.
    pub unexpected: AtomicU64,
    pub closes: AtomicUsize,
}

/// Clears `in_step` when the step returns or unwinds.
struct InStep<'a>(&'a AtomicBool);

impl Drop for InStep<'_> {
    fn drop(&mut self) {
        self.0.store(false, SeqCst);
    }
}

enum Awaiting {
    Nothing,
    Completion { tag: u64, handler: Handler },
    Messages(u64),
}

/// A process that runs its script.
pub struct Scripted {
    id: u64,
    ops: Vec<Op>,
    next: usize,
    next_tag: u64,
    awaiting: Awaiting,
    observed: Arc<Observed>,
    /// Where it asks for messages: (its pid, how many).
    ask: mpsc::Sender<(Pid, u8)>,
}

impl Scripted {
    pub fn new(
        id: u64,
        script: &[Op],
        observed: Arc<Observed>,
        ask: mpsc::Sender<(Pid, u8)>,
    ) -> Box<Self> {
        Box::new(Scripted {
            id,
            ops: expected(script).0,
            next: 0,
            next_tag: 1,
            awaiting: Awaiting::Nothing,
            observed,
            ask,
        })
    }

    fn see(&mut self, event: Event) {
        let o = &self.observed;
        match event {
            Event::Completion { tag, result } => {
                o.completions.fetch_add(1, SeqCst);
                let ok = match (&self.awaiting, &result) {
                    (Awaiting::Completion { tag: want, handler }, result) if tag.0 == *want => {
                        match (handler, result) {
                            (Handler::Sync | Handler::Async, Ok(data)) => {
                                data.downcast_ref::<u64>() == Some(&tag.0)
                            }
                            (Handler::Reject, Err(CommandError::Rejected(_))) => true,
                            (Handler::Drop, Err(CommandError::Dropped)) => true,
                            _ => false,
                        }
                    }
                    _ => false,
                };
                if ok {
                    self.awaiting = Awaiting::Nothing;
                } else {
                    o.unexpected.fetch_add(1, SeqCst);
                }
            }
            Event::Message(p) => {
                o.messages.fetch_add(1, SeqCst);
                match &mut self.awaiting {
                    Awaiting::Messages(left) if p.payload::<u64>() == Some(&self.id) => {
                        *left -= 1;
                        if *left == 0 {
                            self.awaiting = Awaiting::Nothing;
                        }
                    }
                    _ => {
                        o.unexpected.fetch_add(1, SeqCst);
                    }
                }
            }
            // Cancel, and timers (never set by a script).
            _ => {
                o.unexpected.fetch_add(1, SeqCst);
            }
        }
    }
}

impl Process for Scripted {
    type Done = Payload;
    fn init(&mut self, _: &InitContext, _: &str, _: Payload) -> Result<(), InitError> {
        Ok(())
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        let observed = self.observed.clone();
        if observed.in_step.swap(true, SeqCst) {
            observed.overlaps.fetch_add(1, SeqCst);
        }
        let _in_step = InStep(&observed.in_step);
        for event in events {
            self.see(event);
        }
        if !matches!(self.awaiting, Awaiting::Nothing) {
            // Still waiting: for messages, or for a completion (a yield's
            // completion can wake an idle process too).
            out.idle();
            return Ok(());
        }
        let op = self.ops[self.next];
        self.next += 1;
        match op {
            Op::Continue => out.continue_(),
            Op::Yield(handler) => {
                let tag = self.next_tag;
                self.next_tag += 1;
                self.awaiting = Awaiting::Completion { tag, handler };
                out.yield_command(handler.id(), Tag(tag), Box::new(tag));
            }
            Op::Idle(n) => {
                if n > 0 {
                    self.awaiting = Awaiting::Messages(u64::from(n));
                    self.ask.send((out.pid(), n)).expect("the sender runs");
                    out.idle();
                } else {
                    out.continue_();
                }
            }
            Op::Done => out.finish(self.id),
            Op::Fail => return Err(format!("script {} failed", self.id).into()),
            Op::Panic => panic!("script {} panicked", self.id),
        }
        Ok(())
    }

    fn close(&mut self) {
        self.observed.closes.fetch_add(1, SeqCst);
    }
}

/// A builder with the four handlers; async completions go through
/// `completers` threads fed by a channel.
pub fn builder(workers: usize, completers: usize) -> (Builder, CompleterPool) {
    let (tx, rx) = mpsc::channel::<(u64, Completer)>();
    let rx = Arc::new(Mutex::new(rx));
    let threads = (0..completers)
        .map(|_| {
            let rx = rx.clone();
            thread::spawn(move || loop {
                let next = rx.lock().unwrap().recv();
                match next {
                    Ok((tag, c)) => {
                        let _ = c.complete(Box::new(tag));
                    }
                    Err(_) => return,
                }
            })
        })
        .collect();
    let tx = Mutex::new(tx);
    let builder = Engine::builder()
        .workers(workers)
        .handler(SYNC, |cmd: Command, c: Completer| -> Result<(), Rejected> {
            let _ = c.complete(cmd.data);
            Ok(())
        })
        .handler(
            ASYNC,
            move |cmd: Command, c: Completer| -> Result<(), Rejected> {
                let tag = *cmd.data::<u64>().expect("a u64 tag");
                tx.lock().unwrap().send((tag, c)).expect("completers run");
                Ok(())
            },
        )
        .handler(
            REJECT,
            |_: Command, mut c: Completer| -> Result<(), Rejected> {
                Err(c.reject("refused by the script's handler"))
            },
        )
        .handler(DROP, |_: Command, c: Completer| -> Result<(), Rejected> {
            drop(c);
            Ok(())
        });
    (builder, CompleterPool { threads })
}

/// The completer threads; they exit once the engine (and with it the async
/// handler's channel) is dropped.
#[derive(Debug)]
pub struct CompleterPool {
    threads: Vec<thread::JoinHandle<()>>,
}

impl CompleterPool {
    pub fn join(self) {
        for t in self.threads {
            t.join().unwrap();
        }
    }
}

/// Sends the messages processes ask for until every asker is gone.
/// Returns how many sends succeeded and how many were refused (the target
/// had ended, e.g. terminated).
/// Shuts the engine down after a run whose checks gave `result`, joins the
/// completer pool, and fails if shutdown had to force or abandon anything.
pub fn shut_down(
    engine: Engine,
    pool: CompleterPool,
    result: Result<(), String>,
) -> Result<(), String> {
    let report = engine.shutdown(std::time::Duration::from_secs(1));
    drop(engine);
    pool.join();
    result?;
    if report.forced != 0 || report.still_running != 0 {
        return Err(format!("shutdown found work left: {report:?}"));
    }
    Ok(())
}

pub fn serve_messages(engine: &Engine, asks: mpsc::Receiver<(Pid, u8)>) -> (u64, u64) {
    let (mut sent, mut refused) = (0, 0);
    for (pid, n) in asks {
        for _ in 0..n {
            match engine
                .context()
                .forward(Package::new(Pid::local(0), pid, pid.id()))
            {
                Ok(()) => sent += 1,
                Err(_) => refused += 1,
            }
        }
    }
    (sent, refused)
}

/// Checks one finished process against its script. `terminated` allows an
/// outcome of `Terminated` (the test terminated it at some point).
pub fn check(
    id: u64,
    script: &[Op],
    outcome: Outcome,
    observed: &Observed,
    terminated: bool,
) -> Result<(), String> {
    let (_, want) = expected(script);
    let fail = |what: String| Err(format!("process {id} {script:?}: {what}"));
    if observed.overlaps.load(SeqCst) != 0 {
        return fail("stepped on two workers at once".into());
    }
    if observed.closes.load(SeqCst) != 1 {
        return fail(format!("close ran {} times", observed.closes.load(SeqCst)));
    }
    if observed.unexpected.load(SeqCst) != 0 {
        return fail(format!(
            "{} unexpected events",
            observed.unexpected.load(SeqCst)
        ));
    }
    if terminated && matches!(outcome, Err(ExitError::Terminated)) {
        // Ended early: it saw at most what its script implies.
        if observed.completions.load(SeqCst) > want.completions
            || observed.messages.load(SeqCst) > want.messages
        {
            return fail("saw more events than its script implies".into());
        }
        return Ok(());
    }
    let outcome_ok = match (want.outcome, &outcome) {
        (Op::Done, Ok(v)) => v.downcast_ref::<u64>() == Some(&id),
        (Op::Fail, Err(ExitError::Step(e))) => e.to_string() == format!("script {id} failed"),
        (Op::Panic, Err(ExitError::Panicked { message })) => {
            *message == format!("script {id} panicked")
        }
        _ => false,
    };
    if !outcome_ok {
        return fail(format!("ended with {outcome:?}, wanted {:?}", want.outcome));
    }
    let seen = (
        observed.completions.load(SeqCst),
        observed.messages.load(SeqCst),
    );
    if seen != (want.completions, want.messages) {
        return fail(format!(
            "saw (completions, messages) {seen:?}, wanted {:?}",
            (want.completions, want.messages)
        ));
    }
    Ok(())
}

/// Quiets the default panic hook for the scripts' own panics (they are
/// expected and caught by the engine), keeping it for everything else.
pub fn quiet_script_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let message = info
                .payload()
                .downcast_ref::<String>()
                .map(String::as_str)
                .unwrap_or("");
            if !(message.starts_with("script ") && message.ends_with(" panicked")) {
                default(info);
            }
        }));
    });
}
