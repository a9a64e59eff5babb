//! Command handlers, registered per command id.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc as StdArc;

use crate::commands::completer::{Completer, Rejected};
use crate::contract::command::{Command, CommandId};

/// Handles the commands yielded to one [`CommandId`].
///
/// `handle` receives the command and a [`Completer`]. It may complete the
/// yield before returning, hand the completer to another thread that
/// completes it later, or refuse with `Err(completer.reject(error))`. A
/// panic inside `handle` is caught: the yield completes with
/// [`CommandError::HandlerPanicked`](crate::CommandError::HandlerPanicked)
/// and the worker goes on.
///
/// Closures `Fn(Command, Completer) -> Result<(), Rejected>` are handlers.
///
/// # Examples
///
/// ```
/// use sched::{Command, CommandHandler, Completer, Rejected};
///
/// struct Echo;
///
/// impl CommandHandler for Echo {
///     fn handle(&self, cmd: Command, completer: Completer) -> Result<(), Rejected> {
///         let _ = completer.complete(cmd.data);
///         Ok(())
///     }
/// }
///
/// let by_closure = |cmd: Command, c: Completer| -> Result<(), Rejected> {
///     let _ = c.complete(cmd.data);
///     Ok(())
/// };
/// fn is_handler(_: &impl CommandHandler) {}
/// is_handler(&Echo);
/// is_handler(&by_closure);
///
/// // A type is registered with `handler_impl`, a closure with `handler`.
/// let engine = sched::Engine::builder()
///     .handler_impl(sched::CommandId(1), Echo)
///     .handler(sched::CommandId(2), by_closure)
///     .build();
/// # drop(engine);
/// ```
pub trait CommandHandler: Send + Sync + 'static {
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
/// them without any lock.
#[derive(Default, Clone)]
pub(crate) struct Handlers {
    by_id: HashMap<CommandId, StdArc<dyn CommandHandler>>,
}

impl Handlers {
    pub(crate) fn insert(&mut self, id: CommandId, handler: StdArc<dyn CommandHandler>) {
        self.by_id.insert(id, handler);
    }

    pub(crate) fn get(&self, id: CommandId) -> Option<&dyn CommandHandler> {
        self.by_id.get(&id).map(|h| &**h)
    }
}

impl fmt::Debug for Handlers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut ids: Vec<_> = self.by_id.keys().map(|id| id.0).collect();
        ids.sort_unstable();
        f.debug_struct("Handlers").field("ids", &ids).finish()
    }
}
