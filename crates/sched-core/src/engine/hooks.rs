//! Lifecycle hooks: observers of submission, completion and dead letters.

use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc as StdArc;
use std::time::Duration;

use relay::Pid;

use crate::contract::error::BoxError;
use crate::contract::event::Event;
use crate::contract::outcome::Outcome;
use crate::engine::Context;
use crate::panic_guard::{drop_payload, panic_message};

type OnStart = dyn Fn(&Context, Pid) -> Result<(), BoxError> + Send + Sync;
type OnComplete = dyn Fn(&Context, Pid, &Outcome) + Send + Sync;
type OnDeadLetter = dyn Fn(&Context, Pid, Event) + Send + Sync;
type OnLongStep = dyn Fn(&Context, Pid, usize, Duration) + Send + Sync;

/// The hooks an engine was built with. Every call is guarded: a panicking
/// hook is reported (and, for `on_start`, fails the submission) but never
/// unwinds into the engine.
#[derive(Default, Clone)]
pub(crate) struct Hooks {
    pub(crate) on_start: Option<StdArc<OnStart>>,
    pub(crate) on_complete: Option<StdArc<OnComplete>>,
    pub(crate) on_dead_letter: Option<StdArc<OnDeadLetter>>,
    pub(crate) on_long_step: Option<StdArc<OnLongStep>>,
}

impl Hooks {
    /// Runs `on_start`; an error or a panic rejects the submission.
    pub(crate) fn started(&self, cx: &Context, pid: Pid) -> Result<(), BoxError> {
        let Some(hook) = &self.on_start else {
            return Ok(());
        };
        match catch_unwind(AssertUnwindSafe(|| hook(cx, pid))) {
            Ok(result) => result,
            Err(panic) => {
                let message = panic_message(&*panic);
                drop_payload(panic);
                Err(format!("the on_start hook panicked: {message}").into())
            }
        }
    }

    pub(crate) fn completed(&self, cx: &Context, pid: Pid, outcome: &Outcome) {
        if let Some(hook) = &self.on_complete {
            if let Err(panic) = catch_unwind(AssertUnwindSafe(|| hook(cx, pid, outcome))) {
                tracing::error!(%pid, message = %panic_message(&*panic), "on_complete hook panicked");
                drop_payload(panic);
            }
        }
    }

    pub(crate) fn long_step(&self, cx: &Context, pid: Pid, worker: usize, running: Duration) {
        if let Some(hook) = &self.on_long_step {
            if let Err(panic) = catch_unwind(AssertUnwindSafe(|| hook(cx, pid, worker, running))) {
                tracing::error!(%pid, message = %panic_message(&*panic), "on_long_step hook panicked");
                drop_payload(panic);
            }
        }
    }

    pub(crate) fn has_dead_letter_hook(&self) -> bool {
        self.on_dead_letter.is_some()
    }

    pub(crate) fn dead_letter(&self, cx: &Context, pid: Pid, event: Event) {
        if let Some(hook) = &self.on_dead_letter {
            if let Err(panic) = catch_unwind(AssertUnwindSafe(|| hook(cx, pid, event))) {
                tracing::error!(%pid, message = %panic_message(&*panic), "on_dead_letter hook panicked");
                drop_payload(panic);
            }
        }
    }
}

impl fmt::Debug for Hooks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Hooks")
            .field("on_start", &self.on_start.is_some())
            .field("on_complete", &self.on_complete.is_some())
            .field("on_dead_letter", &self.on_dead_letter.is_some())
            .field("on_long_step", &self.on_long_step.is_some())
            .finish()
    }
}
