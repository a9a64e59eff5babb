//! Restart in place: a child whose step fails or panics is replaced by a
//! fresh process from its factory under the same PID, with the same
//! mailbox, instead of ending.
//!
//! The child runs inside [`InPlace`], which holds the current instance.
//! When the instance's step returns an error or panics:
//!
//! 1. the event it was handling is gone with it (a request among them is
//!    answered `NoReply` when its `ReplyTo` drops); the events of the batch
//!    it had not read stay queued, in order, for the next instance;
//! 2. everything the instance was waiting for is cancelled
//!    (`Output::cancel_pending`: its timers, monitors and asks), so nothing
//!    meant for it reaches the next one;
//! 3. its `close` runs, a new instance comes from the factory, is
//!    initialised with the spec's method and input, and started
//!    (`Process::start`) in the same step, then stepped again at once with
//!    the events waiting;
//! 4. the supervisor is told ([`Restarted`], with how the instance ended
//!    and its error's text or panic message, which the child's report
//!    shows): it counts the restart against its intensity, and terminates
//!    the child (and stops) when the intensity is exceeded.
//!
//! The PID, its name, the monitors and links others hold on it, and its
//! `Completion` stay as they are: nobody sees it end. If the new instance
//! cannot start (its `init` or `start` fails or panics), the child ends
//! with that error, and the supervisor restarts it the usual way (a new
//! PID). A terminate, a kill or a cancel ends it as any process.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use relay::{Package, Payload, Pid};
use sched_core::{AnyProcess, BoxError, Event, Events, InitContext, InitError, Output, Process};

/// What makes a child: the spec's factory, method and input.
pub(super) type Factory = Arc<dyn Fn() -> AnyProcess + Send + Sync>;
pub(super) type Input = Arc<dyn Fn() -> Payload + Send + Sync>;

/// The message a child restarted in place sends its supervisor: how the
/// failed instance ended and what it said (the error's text or the
/// panic's message), for the child's report.
#[derive(Debug)]
pub(super) struct Restarted {
    pub(super) reason: sched_core::ExitReason,
    pub(super) message: String,
}

/// A supervised child that restarts in place (see the module's
/// documentation).
pub(super) struct InPlace {
    factory: Factory,
    method: Arc<str>,
    input: Input,
    supervisor: Pid,
    current: AnyProcess,
}

impl InPlace {
    pub(super) fn new(factory: Factory, method: Arc<str>, input: Input, supervisor: Pid) -> Self {
        let current = factory();
        InPlace {
            factory,
            method,
            input,
            supervisor,
            current,
        }
    }

    /// Replaces the failed instance; `Err` when the new one cannot start
    /// (the child then ends with it).
    fn restart(&mut self, why: Restarted, out: &mut Output<'_>) -> Result<(), BoxError> {
        out.cancel_pending();
        let mut new = (self.factory)();
        let pid = out.pid();
        let init = catch_unwind(AssertUnwindSafe(|| {
            new.init(&InitContext::new(pid), &self.method, (self.input)())
        }));
        match init {
            Ok(Ok(())) => {}
            Ok(Err(error)) => return Err(restart_failed(error)),
            Err(panic) => {
                return Err(restart_failed(InitError::Panicked {
                    message: message_of(&*panic),
                }))
            }
        }
        let old = std::mem::replace(&mut self.current, new);
        // The old instance's `close`, once; a panic in it is its own
        // business now that a new instance has taken over.
        let _ = catch_unwind(AssertUnwindSafe(move || {
            let mut old = old;
            old.close();
        }));
        tracing::debug!(%pid, reason = ?why.reason, message = %why.message, "restarted in place");
        let _ = out.forward(Package::new(pid, self.supervisor, why));
        // Stepped again at once: the events the failed step left unread
        // are waiting, and no new event may come to wake it.
        out.continue_();
        self.current.start(out)
    }
}

fn restart_failed(error: InitError) -> BoxError {
    format!("restart in place failed: {error}").into()
}

fn message_of(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic with a non-string payload".to_owned()
    }
}

impl Process for InPlace {
    type Done = Payload;
    fn init(&mut self, cx: &InitContext, method: &str, input: Payload) -> Result<(), InitError> {
        self.current.init(cx, method, input)
    }

    fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        self.current.start(out)
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        let stepped = catch_unwind(AssertUnwindSafe(|| self.current.step(events, out)));
        let why = match stepped {
            Ok(Ok(())) => return Ok(()),
            Ok(Err(error)) => Restarted {
                reason: sched_core::ExitReason::Error,
                message: error.to_string(),
            },
            Err(panic) => Restarted {
                reason: sched_core::ExitReason::Panicked,
                message: message_of(&*panic),
            },
        };
        // Whatever the failed step asked for (yields, a done, an upgrade)
        // was its own: the new instance starts from a clean output.
        out.reset();
        self.restart(why, out)
    }

    fn close(&mut self) {
        self.current.close();
    }

    fn unread(&mut self, unread: &mut Vec<Event>) {
        self.current.unread(unread);
    }

    fn type_name(&self) -> &'static str {
        self.current.type_name()
    }
}
