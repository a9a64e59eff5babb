//! A boxed process is a process: the engine stores a `Box<dyn Process<Done = relay::Payload>>`
//! where it stores any process, and every method reaches the boxed one.

mod common;

use std::sync::{Arc, Mutex};

use common::*;
use relay::{Payload, Pid};
use sched_core::*;

/// Records every call it gets, and names its type itself.
struct Recorder {
    calls: Arc<Mutex<Vec<String>>>,
}

impl Recorder {
    fn note(&self, call: impl Into<String>) {
        self.calls.lock().unwrap().push(call.into());
    }
}

impl Process for Recorder {
    type Done = Payload;
    fn init(&mut self, _: &InitContext, method: &str, _: Payload) -> Result<(), InitError> {
        self.note(format!("init {method}"));
        Ok(())
    }

    fn start(&mut self, _: &mut Output<'_>) -> Result<(), BoxError> {
        self.note("start");
        Ok(())
    }

    /// Reads one event and finishes: the rest is left unread.
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        events.next();
        self.note("step");
        out.finish(());
        Ok(())
    }

    fn close(&mut self) {
        self.note("close");
    }

    fn unread(&mut self, unread: &mut Vec<Event>) {
        self.note(format!("unread {}", unread.len()));
        unread.clear();
    }

    fn type_name(&self) -> &'static str {
        "the recorder"
    }
}

#[test]
fn a_boxed_process_forwards_every_method() {
    // Not started yet: the two messages are there for its first step,
    // which reads one and leaves the other.
    let engine = builder(1).build();
    let calls = Arc::new(Mutex::new(Vec::new()));
    let boxed: Box<dyn Process<Done = relay::Payload>> = Box::new(Recorder {
        calls: calls.clone(),
    });
    assert_eq!(boxed.type_name(), "the recorder", "type_name forwards");
    let pid = Pid::local(7);
    let mut done = engine
        .context()
        .spawn(Spawn::new(boxed).method("custom").at(pid))
        .unwrap();
    engine.context().send(pid, 1u32).unwrap();
    engine.context().send(pid, 2u32).unwrap();
    engine.start();
    done.wait_timeout(PATIENCE).expect("done");
    let calls = calls.lock().unwrap().clone();
    assert_eq!(calls, ["init custom", "start", "step", "unread 1", "close"]);
    assert_eq!(
        engine.context().stats().dead_letters,
        0,
        "what unread took is no dead letter"
    );
    engine.shutdown(PATIENCE);
}

/// Waits for messages forever, under a name of its own.
struct Lingerer;

impl Process for Lingerer {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
        events.for_each(drop);
        Ok(())
    }

    fn type_name(&self) -> &'static str {
        "the lingerer"
    }
}

#[cfg(feature = "introspection")]
#[test]
fn a_boxed_process_is_listed_under_its_own_type_name() {
    let engine = started(1);
    let pid = Pid::local(8);
    let boxed: Box<dyn Process<Done = relay::Payload>> = Box::new(Lingerer);
    let _done = engine
        .context()
        .spawn(Spawn::new(boxed).method("run").at(pid))
        .unwrap();
    // Its type is recorded when its first step starts.
    let named = (0..1000).find_map(|_| {
        let info = engine.context().process_info(pid)?;
        info.type_name.or_else(|| {
            std::thread::sleep(std::time::Duration::from_millis(5));
            None
        })
    });
    assert_eq!(named, Some("the lingerer"));
    // It ignores its cancel: shutdown forces it after a short grace.
    engine.shutdown(std::time::Duration::from_millis(20));
}
