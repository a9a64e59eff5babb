//! The handle that waits for a submitted process's outcome.

use std::fmt;
use std::time::{Duration, Instant};

use relay::Pid;

use super::slot::{ResultSlot, SlotState};
use super::Record;
use crate::contract::outcome::{ExitError, Outcome};
use crate::sync::Arc;

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

    /// Blocks until the process ends and returns its outcome, or
    /// `Err(ExitError::AlreadyTaken)` at once if it was already taken
    /// through this handle.
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
            if matches!(*state, SlotState::Taken) {
                return Err(ExitError::AlreadyTaken);
            }
            state = slot.ready.wait(state);
        }
    }

    /// Waits up to `timeout` for the outcome; `None` if the process is still
    /// running then (the handle can wait again), and
    /// `Some(Err(ExitError::AlreadyTaken))` if the outcome was already taken
    /// through this handle.
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
            if matches!(*state, SlotState::Taken) {
                return Some(Err(ExitError::AlreadyTaken));
            }
            if Instant::now() >= deadline {
                return None;
            }
            let (guard, timed_out) = slot.ready.wait_until(state, deadline);
            state = guard;
            if timed_out {
                return ResultSlot::take(&mut state);
            }
        }
    }

    /// The outcome if the process has ended, without blocking: `None` while
    /// it runs, `Some(Err(ExitError::AlreadyTaken))` once the outcome was
    /// taken through this handle.
    ///
    /// # Examples
    ///
    /// See [`Engine::submit`](crate::Engine::submit).
    pub fn try_take(&mut self) -> Option<Outcome> {
        let mut state = self.record.slot.state.lock();
        if matches!(*state, SlotState::Taken) {
            return Some(Err(ExitError::AlreadyTaken));
        }
        ResultSlot::take(&mut state)
    }
}

impl Drop for Completion {
    /// Frees the outcome if it was never taken, and tells the record not to
    /// keep one that arrives later: the record itself may live on a while
    /// (in a worker's route cache), its result should not.
    fn drop(&mut self) {
        // Dropped here, outside the slot's lock, on the handle's thread.
        drop(self.record.slot.abandon());
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
