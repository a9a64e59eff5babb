//! Typed handlers: a [`TypedCommand`]'s handler receives its data as a `D`
//! and completes with an `R`, through an adapter over the untyped
//! [`CommandHandler`] protocol (so dispatch is unchanged).

use std::any::{type_name, Any};

use crate::contract::command::Command;
use crate::contract::typed_command::TypedCommand;
use crate::engine::commands::completer::{Completer, Rejected};
use crate::engine::commands::handler::CommandHandler;

/// The untyped handler a typed one is registered as: unboxes the data, or
/// rejects a yield whose data is not a `D` (one made through the untyped
/// `yield_command`).
pub(crate) struct TypedHandler<D, R, F> {
    command: TypedCommand<D, R>,
    handle: F,
}

impl<D, R, F> TypedHandler<D, R, F> {
    pub(crate) fn new(command: TypedCommand<D, R>, handle: F) -> Self {
        TypedHandler { command, handle }
    }
}

impl<D, R, F> CommandHandler for TypedHandler<D, R, F>
where
    D: Any + Send,
    R: Any + Send,
    F: Fn(D, Completer<R>) -> Result<(), Rejected> + Send + Sync + 'static,
{
    fn handle(&self, command: Command, mut completer: Completer) -> Result<(), Rejected> {
        match command.data.downcast::<D>() {
            Ok(data) => (self.handle)(*data, completer.retype()),
            Err(_) => Err(completer.reject(format!(
                "the data of {} is not a {}",
                self.command.id(),
                type_name::<D>()
            ))),
        }
    }
}
