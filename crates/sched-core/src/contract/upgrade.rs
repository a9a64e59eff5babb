//! Upgrade: a step replaces its process with a new one under the same PID.
//!
//! The request is written into the step's [`Output`]; the worker carries it
//! out after the step (see `worker/upgrade.rs`): it closes the old process,
//! initialises the new one, and hands it the record (PID, routing entry and
//! pending events). Why that order and what each failure means is stated on
//! [`Output::upgrade`] and in `docs/reference/process-contract.md`.

use std::any::Any;
use std::fmt;

use relay::Payload;

use crate::contract::output::{Output, Status};
use crate::contract::process::{Process, Run};

/// A step's request to be replaced: the new process, its entry method and
/// input. Boxed inside the status so the common statuses stay small.
pub(crate) struct Upgrade {
    pub(crate) process: Box<dyn Run>,
    pub(crate) method: String,
    pub(crate) input: Payload,
}

impl fmt::Debug for Upgrade {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The process and its input are the user's and need not be `Debug`.
        f.debug_struct("Upgrade")
            .field("method", &self.method)
            .finish_non_exhaustive()
    }
}

impl Output<'_> {
    /// Replaces the running process with `process`, started at `method`
    /// with `input`, under the same PID.
    ///
    /// After the step returns, the scheduler calls the old process's
    /// `close` (exactly once), then the new one's `init(method, input)`. If
    /// `init` succeeds, the new process takes over the old one's record:
    /// the same PID and routing entry, and every event still pending
    /// (messages sent to the PID before, during and after the upgrade,
    /// completions of commands yielded by earlier steps, events this step
    /// left unread). It is stepped next, with whatever is pending (possibly
    /// nothing). Senders and completers never notice.
    ///
    /// The process ends instead, and the new process is dropped without
    /// `init` or `close`, when:
    ///
    /// - this step also yielded commands: they are not dispatched (counted
    ///   in `WorkerStats::discarded_yields`) and the outcome is
    ///   [`ExitError::Upgrade`](crate::ExitError::Upgrade) with
    ///   [`UpgradeError::Yielded`](crate::UpgradeError::Yielded);
    /// - the process was asked to terminate, or the scheduler is shutting
    ///   down: [`ExitError::Terminated`](crate::ExitError::Terminated) or
    ///   [`ExitError::Cancelled`](crate::ExitError::Cancelled), as for a
    ///   spawn that shutdown refuses;
    /// - the old `close` panicked:
    ///   [`ExitError::Panicked`](crate::ExitError::Panicked).
    ///
    /// If the new `init` fails or panics, the process ends with
    /// [`UpgradeError::Init`](crate::UpgradeError::Init) (the old process was closed; the new one is
    /// not). Like [`continue_`](Output::continue_), [`idle`](Output::idle)
    /// and [`finish`](Output::finish), the last of these calls in a step wins:
    /// an upgrade followed by `done` finishes the process, and the unused
    /// new process is dropped in the step.
    ///
    /// # Examples
    ///
    /// A process that hands over to its next version when told to:
    ///
    /// ```
    /// use sched::prelude::*;
    ///
    /// struct V2 { count: u64 }
    /// impl Process for V2 {
    ///     type Done = ();
    ///     fn step(&mut self, events: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
    ///         self.count += events.count() as u64;
    ///         Ok(())
    ///     }
    /// }
    ///
    /// struct V1 { count: u64 }
    /// impl Process for V1 {
    ///     type Done = ();
    ///     fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
    ///         for event in events {
    ///             if let Event::Message(m) = event {
    ///                 if m.payload::<&str>() == Some(&"upgrade") {
    ///                     out.upgrade(V2 { count: self.count }, "run", ());
    ///                     return Ok(()); // the rest stays pending, for V2
    ///                 }
    ///                 self.count += 1;
    ///             }
    ///         }
    ///         Ok(())
    ///     }
    /// }
    /// ```
    pub fn upgrade<P: Process>(&mut self, process: P, method: &str, input: impl Any + Send) {
        self.status = Status::Upgrade(Box::new(Upgrade {
            process: crate::contract::process::boxed(process),
            method: method.to_owned(),
            input: relay::into_payload(input),
        }));
    }
}
