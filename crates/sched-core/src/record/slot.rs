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
    /// The `Completion` was dropped before the outcome arrived: nobody can
    /// take it, so it is not kept.
    Abandoned,
}

impl ResultSlot {
    /// Stores the outcome and wakes waiters. Called once per process.
    /// Hands the outcome back when its handle is gone: nobody will take it,
    /// and the caller drops it (a record can outlive its process in caches,
    /// and must not keep a result nobody can read).
    pub(crate) fn set(&self, outcome: Outcome) -> Option<Outcome> {
        let mut state = self.state.lock();
        debug_assert!(
            matches!(*state, SlotState::Pending | SlotState::Abandoned),
            "outcome reported twice"
        );
        if matches!(*state, SlotState::Abandoned) {
            return Some(outcome);
        }
        *state = SlotState::Ready(outcome);
        drop(state);
        self.ready.notify_all();
        None
    }

    /// The handle is being dropped: an outcome already there is handed
    /// back to be dropped, one still to come will not be kept.
    pub(super) fn abandon(&self) -> Option<Outcome> {
        let mut state = self.state.lock();
        match std::mem::replace(&mut *state, SlotState::Abandoned) {
            SlotState::Ready(outcome) => Some(outcome),
            SlotState::Pending | SlotState::Abandoned => None,
            SlotState::Taken => {
                *state = SlotState::Taken;
                None
            }
        }
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
