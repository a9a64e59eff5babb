//! The handler a registration makes: a closure taking its command's
//! input (the whole [`Command`] for an untyped id, the data itself for a
//! typed command) and a completer of its result, behind the one untyped
//! [`CommandHandler`] protocol dispatch uses.

use std::any::type_name;

use crate::contract::command::Command;
use crate::contract::typed_command::CommandRef;
use crate::engine::commands::completer::{Completer, Rejected};
use crate::engine::commands::handler::CommandHandler;

/// A registered closure: reads each command as the closure's input, or
/// rejects a yield whose data is not the command's data type (one made
/// through the untyped `yield_command`).
pub(crate) struct Registered<C, F> {
    command: C,
    handle: F,
}

impl<C, F> Registered<C, F> {
    pub(crate) fn new(command: C, handle: F) -> Self {
        Registered { command, handle }
    }
}

impl<C, F> CommandHandler for Registered<C, F>
where
    C: CommandRef,
    F: Fn(C::Input, Completer<C::Result>) -> Result<(), Rejected> + Send + Sync + 'static,
{
    fn handle(&self, command: Command, mut completer: Completer) -> Result<(), Rejected> {
        match self.command.input(command) {
            Ok(input) => (self.handle)(input, completer.retype()),
            Err(command) => Err(completer.reject(format!(
                "the data of {} is not a {}",
                command.id,
                type_name::<C::Data>()
            ))),
        }
    }
}
