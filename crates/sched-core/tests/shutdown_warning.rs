//! When shutdown's deadline passes with processes that ignored their
//! cancel, `tracing` warnings name them (with their registered names and
//! their type), so a user learns why shutdown took its whole deadline.
//!
//! The workers log on their own threads, so the subscriber is the global
//! default of this test binary, and the tests take turns.

mod common;

use std::fmt::Write as _;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use common::*;
use relay::Pid;
use sched_core::*;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event as TracingEvent, Level, Metadata, Subscriber};

/// Keeps the text of every warning.
#[derive(Clone, Default)]
struct Warnings(Arc<Mutex<Vec<String>>>);

struct Text<'a>(&'a mut String);

impl Visit for Text<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let _ = write!(self.0, "{}={:?} ", field.name(), value);
    }
}

impl Subscriber for Warnings {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        *metadata.level() <= Level::WARN
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &TracingEvent<'_>) {
        let mut text = String::new();
        event.record(&mut Text(&mut text));
        self.0.lock().unwrap().push(text);
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

/// The binary's subscriber, emptied, and the turn to use it.
fn warnings() -> (MutexGuard<'static, ()>, Warnings) {
    static TURN: Mutex<()> = Mutex::new(());
    static WARNINGS: OnceLock<Warnings> = OnceLock::new();
    let turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let warnings = WARNINGS.get_or_init(|| {
        let warnings = Warnings::default();
        tracing::subscriber::set_global_default(warnings.clone()).expect("the only subscriber");
        warnings
    });
    warnings.0.lock().unwrap().clear();
    (turn, warnings.clone())
}

/// Ignores everything, its cancel included.
struct Deaf;

impl Process for Deaf {
    type Done = relay::Payload;
    fn step(&mut self, events: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
        events.for_each(drop);
        Ok(())
    }
}

/// Ignores everything, and its `type_name` panics.
struct Hostile;

impl Process for Hostile {
    type Done = relay::Payload;
    fn step(&mut self, events: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
        events.for_each(drop);
        Ok(())
    }
    fn type_name(&self) -> &'static str {
        panic!("no name for you")
    }
}

#[test]
fn processes_that_ignore_their_cancel_are_named_when_the_deadline_passes() {
    let (_turn, warnings) = warnings();
    let engine = started(1);
    let deaf = Pid::local(71);
    engine
        .context()
        .spawn(Spawn::new(Box::new(Deaf)).method("run").at(deaf))
        .unwrap();
    engine
        .context()
        .register_name("the-deaf-one", deaf)
        .unwrap();
    let polite = Pid::local(72);
    engine
        .context()
        .spawn(
            Spawn::new(process(|events, out| {
                if events.any(|e| matches!(e, Event::Cancel)) {
                    out.finish(());
                }
                Ok(())
            }))
            .method("run")
            .at(polite),
        )
        .unwrap();
    let report = engine.shutdown(Duration::from_millis(100));
    assert_eq!(report.forced, 1, "{report:?}");
    let warnings = warnings.0.lock().unwrap();
    let deadline: Vec<&String> = warnings
        .iter()
        .filter(|w| w.contains("shutdown deadline passed"))
        .collect();
    assert_eq!(deadline.len(), 1, "{warnings:?}");
    assert!(deadline[0].contains(&deaf.to_string()), "{}", deadline[0]);
    assert!(deadline[0].contains("the-deaf-one"), "{}", deadline[0]);
    assert!(
        !deadline[0].contains(&polite.to_string()),
        "{}",
        deadline[0]
    );
    // The worker that forced it named it with its type.
    let forced: Vec<&String> = warnings
        .iter()
        .filter(|w| w.contains("forced at shutdown"))
        .collect();
    assert_eq!(forced.len(), 1, "{warnings:?}");
    assert!(forced[0].contains(&deaf.to_string()), "{}", forced[0]);
    assert!(forced[0].contains("the-deaf-one"), "{}", forced[0]);
    assert!(
        forced[0].contains("shutdown_warning::Deaf"),
        "{}",
        forced[0]
    );
}

#[test]
fn the_forced_are_named_up_to_a_bound() {
    let (_turn, warnings) = warnings();
    let engine = started(2);
    for n in 0..100 {
        engine
            .context()
            .spawn(
                Spawn::new(Box::new(Deaf))
                    .method("run")
                    .at(Pid::local(100 + n)),
            )
            .unwrap();
    }
    let report = engine.shutdown(Duration::from_millis(50));
    assert_eq!(report.forced, 100, "{report:?}");
    let warnings = warnings.0.lock().unwrap();
    let forced: Vec<&String> = warnings
        .iter()
        .filter(|w| w.contains("forced at shutdown"))
        .collect();
    // Two workers force them in no set order: exactly 16 are named, the
    // last of them saying there are more.
    assert_eq!(forced.len(), 16, "{warnings:?}");
    assert_eq!(
        forced.iter().filter(|w| w.contains("more=true")).count(),
        1,
        "{forced:?}"
    );
}

#[test]
fn a_panicking_type_name_is_contained_and_said() {
    let (_turn, warnings) = warnings();
    let engine = started(1);
    let hostile = Pid::local(80);
    engine
        .context()
        .spawn(Spawn::new(Box::new(Hostile)).method("run").at(hostile))
        .unwrap();
    // A quiet panic hook: the default one (with a backtrace) can outlast
    // shutdown's grace period, and the report would count the worker as
    // detached.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let report = engine.shutdown(Duration::from_millis(50));
    std::panic::set_hook(hook);
    assert_eq!(report.forced, 1, "{report:?}");
    assert_eq!(report.workers_detached, 0, "{report:?}");
    let warnings = warnings.0.lock().unwrap();
    let forced: Vec<&String> = warnings
        .iter()
        .filter(|w| w.contains("forced at shutdown"))
        .collect();
    assert_eq!(forced.len(), 1, "{warnings:?}");
    assert!(forced[0].contains(&hostile.to_string()), "{}", forced[0]);
    assert!(forced[0].contains("type_name panicked"), "{}", forced[0]);
}

#[test]
fn a_shutdown_within_its_deadline_warns_of_nothing() {
    let (_turn, warnings) = warnings();
    let engine = started(1);
    engine.shutdown(Duration::from_millis(100));
    assert!(warnings.0.lock().unwrap().is_empty());
}
