//! Where a process's outcome is delivered, exactly once, and taken once.

use crate::contract::outcome::Outcome;
use crate::sync::{Condvar, Mutex};

/// Where a process's outcome is delivered, exactly once.
#[derive(Debug, Default)]
pub(crate) struct ResultSlot {
    pub(super) state: Mutex<SlotState>,
    pub(super) ready: Condvar,
}

#[derive(Debug, Default)]
pub(super) enum SlotState {
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

    pub(super) fn take(state: &mut SlotState) -> Option<Outcome> {
        match std::mem::replace(state, SlotState::Taken) {
            SlotState::Ready(outcome) => Some(outcome),
            other => {
                *state = other;
                None
            }
        }
    }

    pub(super) fn is_ready(&self) -> bool {
        matches!(*self.state.lock(), SlotState::Ready(_))
    }
}
