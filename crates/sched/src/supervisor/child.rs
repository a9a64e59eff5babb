//! One declared child: its spec, its current incarnation, its history.

use std::time::Duration;

use relay::Pid;
use sched_core::{
    BoxError, Completion, Down, ExitError, ExitReason, MonitorId, NameError, Output, Spawn,
    SubmitError,
};

use super::feed::RestartNotice;
use super::in_place::InPlace;
use super::report::ChildReport;
use super::spec::{ChildSpec, Restart};

/// The longest wait for the outcome of a child that ended before it was
/// monitored.
const OUTCOME_GAP: Duration = Duration::from_millis(100);

/// The incarnation of a child that is running (as far as the supervisor
/// knows: its down may be on its way).
#[derive(Debug)]
struct Incarnation {
    pid: Pid,
    monitor: MonitorId,
    /// Kept to learn how it ended if it ended before it was monitored.
    completion: Completion,
}

/// Why a start did not happen.
#[derive(Debug)]
pub(super) enum StartError {
    /// The scheduler is shutting down: no attempt was made, and none
    /// should be counted.
    ShuttingDown,
    /// The attempt failed.
    Failed(BoxError),
}

#[derive(Debug)]
pub(super) struct Child {
    pub(super) spec: ChildSpec,
    current: Option<Incarnation>,
    /// Waiting to be started (first start, or a restart).
    pub(super) pending: bool,
    /// A temporary child that ended (or was stopped by a one-for-all
    /// restart): never started again.
    pub(super) removed: bool,
    started_once: bool,
    /// The PID of the last incarnation that ended.
    last_pid: Option<Pid>,
    restarts: u32,
    last_exit: Option<ExitReason>,
    /// What its last failure said (an error's text, a panic's message).
    last_error: Option<String>,
    /// The completion of an incarnation that failed, until its outcome
    /// (stored just after its down) gives `last_error`.
    last_failure: Option<Completion>,
}

impl Child {
    pub(super) fn new(spec: ChildSpec) -> Self {
        Child {
            spec,
            current: None,
            pending: false,
            removed: false,
            started_once: false,
            last_pid: None,
            restarts: 0,
            last_exit: None,
            last_error: None,
            last_failure: None,
        }
    }

    pub(super) fn pid(&self) -> Option<Pid> {
        self.current.as_ref().map(|c| c.pid)
    }

    pub(super) fn is_running(&self) -> bool {
        self.current.is_some()
    }

    pub(super) fn watched_by(&self, monitor: MonitorId) -> bool {
        self.current.as_ref().is_some_and(|c| c.monitor == monitor)
    }

    /// Starts a new incarnation: a fresh process from the factory, spawned
    /// from the supervisor's step, registered under its name if asked,
    /// then monitored. A restart (any start after the first) gives its
    /// notice.
    pub(super) fn start(
        &mut self,
        out: &mut Output<'_>,
    ) -> Result<Option<RestartNotice>, StartError> {
        let process = if self.spec.in_place == Some(true) {
            sched_core::AnyProcess::new(InPlace::new(
                self.spec.factory.clone(),
                self.spec.method.clone(),
                self.spec.input.clone(),
                out.pid(),
            ))
        } else {
            (self.spec.factory)()
        };
        let input = (self.spec.input)();
        let completion = match out.spawn(Spawn::new(process).method(&self.spec.method).input(input))
        {
            Ok(completion) => completion,
            Err(SubmitError::ShuttingDown) => return Err(StartError::ShuttingDown),
            Err(e) => return Err(StartError::Failed(Box::new(e))),
        };
        let pid = completion.pid();
        if let Some(name) = &self.spec.register_as {
            match out.context().register_name(name, pid) {
                // Ended already: the monitor reports it at once.
                Ok(()) | Err(NameError::NoProcess(_) | NameError::Ended(_)) => {}
                Err(e) => {
                    let _ = out.context().terminate(pid);
                    return Err(StartError::Failed(Box::new(e)));
                }
            }
        }
        // Linked, so that children do not outlive a supervisor that is
        // terminated or panics; the supervisor traps exits, so their ends
        // reach it as events (the monitor's down drives restarts).
        out.link(pid);
        let monitor = out.monitor(pid);
        self.current = Some(Incarnation {
            pid,
            monitor,
            completion,
        });
        self.pending = false;
        let mut notice = None;
        if self.started_once {
            self.restarts += 1;
            tracing::debug!(child = %pid, restarts = self.restarts, "restarted");
            notice = Some(RestartNotice {
                child: self.spec.name.to_string(),
                previous: self.last_pid.unwrap_or(pid),
                pid,
                reason: self.last_exit.unwrap_or(ExitReason::Error),
                message: self.last_error.clone(),
            });
        }
        self.started_once = true;
        Ok(notice)
    }

    /// Counts a restart in place of the current incarnation, which ended
    /// with `reason` (an error or a panic) saying `message`.
    pub(super) fn restarted_in_place(&mut self, reason: ExitReason, message: String) {
        self.restarts += 1;
        self.last_exit = Some(reason);
        self.last_error = Some(message);
        self.last_failure = None;
    }

    /// Takes the down of the current incarnation and returns how it ended.
    pub(super) fn ended(&mut self, down: &Down) -> ExitReason {
        let mut reason = down.reason;
        self.last_error = None;
        self.last_failure = None;
        if let Some(mut current) = self.current.take() {
            self.last_pid = Some(current.pid);
            if reason == ExitReason::NoProcess {
                // It ended before the monitor was set: its outcome says how.
                // The engine fires monitors just before it stores the
                // outcome, so the wait is at most that short gap.
                let outcome = current.completion.wait_timeout(OUTCOME_GAP);
                reason = reason_of(&outcome);
                self.last_error = failure_text(outcome);
            } else if matches!(reason, ExitReason::Error | ExitReason::Panicked) {
                // What it said is in its outcome, stored just after this
                // down: read when the report is next made (`refresh`),
                // rather than waited for here.
                self.last_failure = Some(current.completion);
                self.refresh();
            }
        }
        self.last_exit = Some(reason);
        reason
    }

    /// Reads what the last failed incarnation said, once its outcome is
    /// stored.
    pub(super) fn refresh(&mut self) {
        if let Some(completion) = &mut self.last_failure {
            if let Some(outcome) = completion.try_take() {
                self.last_error = failure_text(outcome);
                self.last_failure = None;
            }
        }
    }

    /// Asks the current incarnation to end its own way.
    pub(super) fn cancel(&self, out: &Output<'_>) {
        if let Some(current) = &self.current {
            let _ = out.context().cancel(current.pid);
        }
    }

    /// Stops the current incarnation at once.
    pub(super) fn terminate(&self, out: &Output<'_>) {
        if let Some(current) = &self.current {
            // Not found: it is ending by itself; its down is on its way.
            let _ = out.context().terminate(current.pid);
        }
    }

    pub(super) fn is_temporary(&self) -> bool {
        self.spec.restart == Restart::Temporary
    }

    pub(super) fn report(&self) -> ChildReport {
        ChildReport {
            name: self.spec.name.clone(),
            pid: self.pid(),
            restarts: self.restarts,
            last_exit: self.last_exit,
            last_error: self.last_error.clone(),
        }
    }
}

/// What a failed incarnation said: its step error's text, its panic's
/// message, or how else it ended (none for a wait that gave up), as a
/// restart in place reports it.
fn failure_text(outcome: sched_core::Outcome) -> Option<String> {
    match outcome {
        Err(ExitError::TimedOut) | Ok(_) => None,
        Err(ExitError::Step(error)) => Some(error.to_string()),
        Err(ExitError::Panicked { message }) => Some(message),
        Err(error) => Some(error.to_string()),
    }
}

fn reason_of(outcome: &sched_core::Outcome) -> ExitReason {
    match outcome {
        Ok(_) => ExitReason::Normal,
        // Its outcome was not stored within the gap: how it ended is unknown.
        Err(ExitError::TimedOut) => ExitReason::Error,
        Err(ExitError::Terminated) => ExitReason::Terminated,
        Err(ExitError::Cancelled) => ExitReason::Cancelled,
        Err(ExitError::Panicked { .. }) => ExitReason::Panicked,
        Err(_) => ExitReason::Error,
    }
}
