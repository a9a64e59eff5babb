//! Dispatching yielded commands: the handlers registered per command id,
//! and the completers that hand a command's result back to its process
//! from any thread.

pub(crate) mod abandoned;
pub(crate) mod completer;
pub(crate) mod handler;
pub(crate) mod typed;
