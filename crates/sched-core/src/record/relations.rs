//! Who watches a process and which names it holds: registered from any
//! thread, taken exactly once when it ends.
//!
//! One small lock per process. Registration and the end are serialised by
//! it: a monitor set before the end is in the list the end takes (and
//! fires); one set after finds the end's reason and fires at once. So every
//! monitor fires exactly once, and never for a later process under the
//! same PID (it is attached to this record, not to the PID).

use std::sync::Arc as StdArc;

use crate::contract::down::ExitReason;
use crate::record::Record;
use crate::sync::{Arc, Mutex};

/// The relations of one process.
#[derive(Debug, Default)]
pub(crate) struct Relations {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
enum State {
    /// Live, nothing registered (no allocation).
    #[default]
    Fresh,
    Live(Box<Related>),
    /// Ended: how, for monitors set from now on.
    Ended(ExitReason),
}

#[derive(Debug, Default)]
pub(crate) struct Related {
    pub(crate) monitors: Vec<Watch>,
    pub(crate) names: Vec<StdArc<str>>,
    /// Linked processes (each lists this one too).
    pub(crate) links: Vec<Arc<Record>>,
    /// Exit signals from linked processes arrive as events instead of
    /// ending this process.
    pub(crate) trap_exits: bool,
    /// The linked process whose abnormal end is ending this one.
    pub(crate) linked_exit: Option<(relay::Pid, ExitReason)>,
}

/// One monitor: whom to tell, under which id.
#[derive(Debug)]
pub(crate) struct Watch {
    pub(crate) id: u64,
    pub(crate) watcher: Watcher,
}

/// Who is told.
#[derive(Debug)]
pub(crate) enum Watcher {
    /// A process, by its record (never a PID: a later process under the
    /// same PID must not be told).
    Process(Arc<Record>),
    /// Code outside the engine, through a handle's slot.
    Outside(StdArc<crate::engine::monitors::DownSlot>),
}

impl Relations {
    /// Runs `f` on the relations of a live process; `Err` with how it
    /// ended if it has.
    pub(crate) fn with_live<R>(&self, f: impl FnOnce(&mut Related) -> R) -> Result<R, ExitReason> {
        let mut state = self.state.lock();
        match &mut *state {
            State::Ended(reason) => Err(*reason),
            State::Live(related) => Ok(f(related)),
            State::Fresh => {
                let mut related = Box::default();
                let result = f(&mut related);
                *state = State::Live(related);
                Ok(result)
            }
        }
    }

    /// Runs `f` on the relations if there are any (a live process with
    /// something registered).
    pub(crate) fn with_existing<R>(&self, f: impl FnOnce(&mut Related) -> R) -> Option<R> {
        match &mut *self.state.lock() {
            State::Live(related) => Some(f(related)),
            State::Fresh | State::Ended(_) => None,
        }
    }

    /// Marks the process ended with `reason` and takes what was
    /// registered. Called once, by the worker that ends it.
    pub(crate) fn end(&self, reason: ExitReason) -> Option<Box<Related>> {
        match std::mem::replace(&mut *self.state.lock(), State::Ended(reason)) {
            State::Live(related) => Some(related),
            State::Fresh | State::Ended(_) => None,
        }
    }
}

impl Relations {
    /// Why a linked process's end is ending this one, if it is.
    pub(crate) fn linked_exit(&self) -> Option<(relay::Pid, ExitReason)> {
        self.with_existing(|related| related.linked_exit).flatten()
    }
}
