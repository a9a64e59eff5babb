//! Command handlers, registered per command id.

use std::fmt;
use std::sync::Arc as StdArc;

use crate::contract::command::{Command, CommandId};
use crate::engine::commands::completer::{Completer, Rejected};

/// Handles the commands yielded to one [`CommandId`]: what dispatch calls.
/// A registration (the builder's `handler`) makes one from a closure (see
/// `typed.rs`).
///
/// `handle` receives the command and a [`Completer`]. It may complete the
/// yield before returning, hand the completer to another thread that
/// completes it later, or refuse with `Err(completer.reject(error))`. A
/// panic inside `handle` is caught: the yield completes with
/// [`CommandError::HandlerPanicked`](crate::CommandError::HandlerPanicked)
/// and the worker goes on.
pub(crate) trait CommandHandler: Send + Sync + 'static {
    /// Handles one command.
    fn handle(&self, command: Command, completer: Completer) -> Result<(), Rejected>;
}

impl<F> CommandHandler for F
where
    F: Fn(Command, Completer) -> Result<(), Rejected> + Send + Sync + 'static,
{
    fn handle(&self, command: Command, completer: Completer) -> Result<(), Rejected> {
        self(command, completer)
    }
}

/// The handlers of one engine, fixed when it is built so dispatch reads
/// them without any lock. Kept sorted by id in a vector: an engine has a
/// handful of handlers, and a binary search over a few ids costs a few
/// comparisons where a `HashMap` lookup hashed the id with SipHash on every
/// dispatched yield (5% of a worker's time in the yield fan-out benchmark).
#[derive(Default, Clone)]
pub(crate) struct Handlers {
    by_id: Vec<(CommandId, StdArc<dyn CommandHandler>)>,
}

impl Handlers {
    /// Adds or replaces the handler of `id`.
    pub(crate) fn insert(&mut self, id: CommandId, handler: StdArc<dyn CommandHandler>) {
        match self.by_id.binary_search_by_key(&id.0, |(known, _)| known.0) {
            Ok(at) => self.by_id[at].1 = handler,
            Err(at) => self.by_id.insert(at, (id, handler)),
        }
    }

    pub(crate) fn get(&self, id: CommandId) -> Option<&dyn CommandHandler> {
        self.by_id
            .binary_search_by_key(&id.0, |(known, _)| known.0)
            .ok()
            .map(|at| &*self.by_id[at].1)
    }
}

impl fmt::Debug for Handlers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ids: Vec<_> = self.by_id.iter().map(|(id, _)| id.0).collect();
        f.debug_struct("Handlers").field("ids", &ids).finish()
    }
}
