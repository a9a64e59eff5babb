//! When shutdown's deadline passes with processes that ignored their
//! cancel, a `tracing` warning names them (with their registered names),
//! so a user learns why shutdown took its whole deadline.

mod common;

use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
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

#[test]
fn processes_that_ignore_their_cancel_are_named_when_the_deadline_passes() {
    let engine = started(1);
    let deaf = Pid::local(71);
    engine
        .submit(deaf, process(|_, _| Ok(())), "run", Box::new(()))
        .unwrap();
    engine.register_name("the-deaf-one", deaf).unwrap();
    let polite = Pid::local(72);
    engine
        .submit(
            polite,
            process(|events, out| {
                if events.any(|e| matches!(e, Event::Cancel)) {
                    out.done(Box::new(()));
                }
                Ok(())
            }),
            "run",
            Box::new(()),
        )
        .unwrap();
    let warnings = Warnings::default();
    let report = tracing::subscriber::with_default(warnings.clone(), || {
        engine.shutdown(Duration::from_millis(100))
    });
    assert_eq!(report.forced, 1, "{report:?}");
    let warnings = warnings.0.lock().unwrap();
    let named: Vec<&String> = warnings
        .iter()
        .filter(|w| w.contains("Event::Cancel"))
        .collect();
    assert_eq!(named.len(), 1, "{warnings:?}");
    assert!(named[0].contains(&deaf.to_string()), "{}", named[0]);
    assert!(named[0].contains("the-deaf-one"), "{}", named[0]);
    assert!(!named[0].contains(&polite.to_string()), "{}", named[0]);
}

#[test]
fn a_shutdown_within_its_deadline_warns_of_nothing() {
    let engine = started(1);
    let warnings = Warnings::default();
    tracing::subscriber::with_default(warnings.clone(), || {
        engine.shutdown(Duration::from_millis(100))
    });
    assert!(warnings.0.lock().unwrap().is_empty());
}
