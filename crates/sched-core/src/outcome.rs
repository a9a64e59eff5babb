//! How a process ended, and the handle that waits for it.

use std::error::Error;
use std::fmt;
use std::time::{Duration, Instant};

use relay::{Payload, Pid};

use crate::event::BoxError;
use crate::record::Record;
use crate::sync::{Arc, Condvar, Mutex};

/// How a process ended: its done value, or why it did not finish.
pub type Outcome = Result<Payload, ExitError>;

/// Why a process ended without a done value.
///
/// # Examples
///
/// ```
/// use sched_core::ExitError;
/// assert_eq!(ExitError::Terminated.to_string(), "the process was terminated");
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum ExitError {
    /// `step` returned this error.
    Step(BoxError),
    /// The process was terminated by `terminate(pid)`.
    Terminated,
    /// The scheduler shut down and the process had not finished by the
    /// deadline.
    Cancelled,
    /// `step` (or `close`) panicked.
    Panicked {
        /// The panic message.
        message: String,
    },
}

impl fmt::Display for ExitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExitError::Step(e) => write!(f, "{e}"),
            ExitError::Terminated => f.write_str("the process was terminated"),
            ExitError::Cancelled => f.write_str("the process was cancelled by shutdown"),
            ExitError::Panicked { message } => write!(f, "the process panicked: {message}"),
        }
    }
}

impl Error for ExitError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            ExitError::Step(e) => Some(&**e),
            _ => None,
        }
    }
}

/// Where a process's outcome is delivered, exactly once.
#[derive(Debug, Default)]
pub(crate) struct ResultSlot {
    state: Mutex<SlotState>,
    ready: Condvar,
}

#[derive(Debug, Default)]
enum SlotState {
    #[default]
    Pending,
    Ready(Outcome),
    Taken,
}

impl ResultSlot {
    /// Stores the outcome and wakes waiters. Called once per process.
    pub(crate) fn set(&self, outcome: Outcome) {
        let mut state = self.state.lock();
        debug_assert!(
            matches!(*state, SlotState::Pending),
            "outcome reported twice"
        );
        *state = SlotState::Ready(outcome);
        drop(state);
        self.ready.notify_all();
    }

    fn take(state: &mut SlotState) -> Option<Outcome> {
        match std::mem::replace(state, SlotState::Taken) {
            SlotState::Ready(outcome) => Some(outcome),
            other => {
                *state = other;
                None
            }
        }
    }

    fn is_ready(&self) -> bool {
        matches!(*self.state.lock(), SlotState::Ready(_))
    }
}

/// A handle to a submitted process: its PID and, once it ends, its outcome.
///
/// The outcome can be taken once (`wait`, `wait_timeout` or `try_take`);
/// dropping the handle does not affect the process.
///
/// # Examples
///
/// See [`Engine::submit`](crate::Engine::submit).
pub struct Completion {
    record: Arc<Record>,
}

impl Completion {
    pub(crate) fn new(record: Arc<Record>) -> Self {
        Completion { record }
    }

    /// The process's PID.
    ///
    /// # Examples
    ///
    /// See [`Engine::submit`](crate::Engine::submit).
    pub fn pid(&self) -> Pid {
        self.record.pid
    }

    /// Whether the process has ended and its outcome not yet been taken.
    ///
    /// # Examples
    ///
    /// See [`Engine::submit`](crate::Engine::submit).
    pub fn is_finished(&self) -> bool {
        self.record.slot.is_ready()
    }

    /// Blocks until the process ends and returns its outcome.
    ///
    /// # Panics
    ///
    /// If the outcome was already taken through this handle.
    ///
    /// # Examples
    ///
    /// See [`Engine::submit`](crate::Engine::submit).
    pub fn wait(self) -> Outcome {
        let slot = &self.record.slot;
        let mut state = slot.state.lock();
        loop {
            if let Some(outcome) = ResultSlot::take(&mut state) {
                return outcome;
            }
            assert!(
                !matches!(*state, SlotState::Taken),
                "the outcome of {} was already taken",
                self.record.pid
            );
            state = slot.ready.wait(state);
        }
    }

    /// Waits up to `timeout` for the outcome; `None` if the process is still
    /// running then (the handle can wait again).
    ///
    /// # Examples
    ///
    /// See [`Engine::submit`](crate::Engine::submit).
    pub fn wait_timeout(&mut self, timeout: Duration) -> Option<Outcome> {
        let deadline = Instant::now() + timeout;
        let slot = &self.record.slot;
        let mut state = slot.state.lock();
        loop {
            if let Some(outcome) = ResultSlot::take(&mut state) {
                return Some(outcome);
            }
            if matches!(*state, SlotState::Taken) || Instant::now() >= deadline {
                return None;
            }
            let (guard, timed_out) = slot.ready.wait_until(state, deadline);
            state = guard;
            if timed_out {
                return ResultSlot::take(&mut state);
            }
        }
    }

    /// The outcome if the process has ended, without blocking.
    ///
    /// # Examples
    ///
    /// See [`Engine::submit`](crate::Engine::submit).
    pub fn try_take(&mut self) -> Option<Outcome> {
        ResultSlot::take(&mut self.record.slot.state.lock())
    }
}

impl fmt::Debug for Completion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Completion")
            .field("pid", &self.record.pid)
            .field("finished", &self.is_finished())
            .finish()
    }
}
