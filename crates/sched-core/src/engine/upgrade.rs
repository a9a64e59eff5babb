//! Upgrading a process from outside its steps: `Context::upgrade`.
//!
//! A step upgrades itself through `Output::upgrade` (`contract/upgrade.rs`,
//! carried out by `worker/upgrade.rs`). From outside, the protocol is:
//!
//! 1. The caller claims the process's upgrade flag (`record/mailbox.rs`):
//!    one order at a time, so a second caller is told `Pending`.
//! 2. The new process's `init` runs on the caller's thread, as for a
//!    submission. If it fails, the flag is released and the running
//!    process never notices.
//! 3. The initialised process travels to the record as an [`UpgradeOrder`]
//!    in an ordinary message event, so it keeps its place among the
//!    process's events without a field in every record.
//! 4. The worker that next owns the process sees the flag after draining,
//!    takes the order out of the drained events (it is never handed to a
//!    step), releases the flag, closes the old process and installs the
//!    new one, which is stepped at once with every other pending event.
//! 5. If the process ends first, the order is among its leftover events:
//!    it is no dead letter; dropping it closes the new process (its `init`
//!    ran, so its `close` is due).

use std::any::Any;

use relay::{Package, Payload, Pid};

use super::Context;
use crate::contract::error::UpgradeRequestError;
use crate::contract::event::Event;
use crate::contract::process::{close_guarded, init_guarded, Process, Run};
use crate::panic_guard::drop_user_value;

/// An initialised process on its way to replace the one under `pid`.
pub(crate) struct UpgradeOrder {
    pid: Pid,
    /// `None` once taken over.
    process: Option<Box<dyn Run>>,
    method: String,
}

impl UpgradeOrder {
    /// The new process and the method it started at.
    pub(crate) fn into_parts(mut self) -> (Box<dyn Run>, String) {
        let process = self.process.take().expect("an order is taken once");
        (process, std::mem::take(&mut self.method))
    }

    /// Takes the order out of `events` if one is there (it is never
    /// handed to a step).
    pub(crate) fn take_from(events: &mut Vec<Event>) -> Option<UpgradeOrder> {
        let at = events.iter().position(|event| {
            matches!(event, Event::Message(package) if package.payload::<UpgradeOrder>().is_some())
        })?;
        match events.remove(at) {
            Event::Message(package) => package.downcast::<UpgradeOrder>().ok(),
            _ => unreachable!("found as a message"),
        }
    }

    /// Whether `event` is an order (not a letter: it never reaches a
    /// step or the dead-letter hook).
    pub(crate) fn is_order(event: &Event) -> bool {
        matches!(event, Event::Message(package) if package.payload::<UpgradeOrder>().is_some())
    }
}

/// An order that never took over (its process ended first, or the engine
/// went away) closes the process it carries: its `init` ran.
impl Drop for UpgradeOrder {
    fn drop(&mut self) {
        if let Some(process) = self.process.take() {
            let pid = self.pid;
            if let Err(message) = close_guarded(process) {
                tracing::debug!(%pid, %message, "close of an upgrade that did not take over panicked");
            }
            tracing::debug!(%pid, method = %self.method, "an ordered upgrade did not take over: the process had ended");
        }
    }
}

impl Context {
    /// Replaces the process running under `pid` with `process`, started at
    /// `method` with `input`, from outside its steps (an operator, a
    /// supervisor, a hot fix). The new process's `init` runs now, on the
    /// calling thread; if it succeeds, the new process takes over at the
    /// old one's next step boundary: the scheduler calls the old
    /// process's `close` (exactly once), and the new one gets the record
    /// (the same PID, routing entry, names, monitors and links, timers
    /// still set) and every event not yet handed to a step, in order. It
    /// is stepped at once. A step in progress finishes first; the old
    /// process never sees the order.
    ///
    /// If the old process ends before its next step (it finishes in the
    /// step running now, or is terminated), the new one never takes over:
    /// its `close` is called and nothing else happens. If the old
    /// process's `close` panics, the process ends with
    /// [`ExitError::Panicked`](crate::ExitError::Panicked) and the new
    /// one is closed. A step can upgrade its own process with
    /// [`Output::upgrade`](crate::Output::upgrade).
    ///
    /// # Errors
    ///
    /// [`UpgradeRequestError`]: no live process under `pid`, the new
    /// `init` failed (the old process keeps running), an earlier upgrade
    /// of it is still pending, or shutdown has begun. The new process is
    /// then dropped without `close`.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use std::time::Duration;
    ///
    /// /// Which version are you?
    /// struct Version;
    /// impl Question for Version {
    ///     type Answer = u32;
    /// }
    ///
    /// /// Answers with its version number.
    /// struct Versioned(u32);
    /// impl Process for Versioned {
    ///     type Done = ();
    ///     fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
    ///         for event in events {
    ///             if let Event::Request(request) = event {
    ///                 if let Ok((Version, answer)) = request.take::<Version>() {
    ///                     answer.answer(self.0);
    ///                 }
    ///             }
    ///         }
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let scheduler = Scheduler::builder().workers(1).build();
    /// scheduler.start();
    /// let pid = scheduler.spawn(Versioned(1))?.pid();
    /// scheduler.context().upgrade(pid, Versioned(2), "run", ())?;
    /// let answer = scheduler.ask(pid, Version)?.wait_timeout(Duration::from_secs(5))?;
    /// assert_eq!(answer, 2);
    /// # scheduler.shutdown(Duration::from_secs(1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn upgrade<P: Process>(
        &self,
        pid: Pid,
        process: P,
        method: &str,
        input: impl Any + Send,
    ) -> Result<(), UpgradeRequestError> {
        let mut process = crate::contract::process::boxed(process);
        let input = relay::into_payload(input);
        let shared = self.shared();
        let refuse = |process: Box<dyn Run>, input: Payload, error| {
            drop_user_value(process, pid, "a process an upgrade did not start");
            drop_user_value(input, pid, "the input of an upgrade that did not start");
            Err(error)
        };
        if shared.is_stopping() {
            return refuse(process, input, UpgradeRequestError::ShuttingDown);
        }
        let Some(record) = shared.processes.get(pid) else {
            let error = if shared.processes.ended(pid) {
                UpgradeRequestError::Ended(pid)
            } else {
                UpgradeRequestError::NoProcess(pid)
            };
            return refuse(process, input, error);
        };
        if !record.mailbox.claim_upgrade() {
            return refuse(process, input, UpgradeRequestError::Pending(pid));
        }
        if let Err(error) = init_guarded(&mut *process, pid, method, input) {
            record.mailbox.release_upgrade();
            drop_user_value(process, pid, "a process whose upgrade init failed");
            return Err(UpgradeRequestError::Init { pid, error });
        }
        let order = UpgradeOrder {
            pid,
            process: Some(process),
            method: method.to_owned(),
        };
        match record.deliver(Event::Message(Package::new(Pid::OUTSIDE, pid, order))) {
            Ok(wake) => {
                tracing::debug!(%pid, method, "upgrade ordered");
                shared.after_wake(&record, wake);
                Ok(())
            }
            Err(event) => {
                // It ended meanwhile: dropping the order closes the new
                // process.
                record.mailbox.release_upgrade();
                drop(event);
                Err(UpgradeRequestError::Ended(pid))
            }
        }
    }
}
