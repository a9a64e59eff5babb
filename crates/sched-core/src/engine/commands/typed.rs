//! Typed handlers: a [`TypedCommand`]'s handler receives its data as a `D`
//! and completes with an `R`, through an adapter over the untyped
//! [`CommandHandler`] protocol (so dispatch is unchanged).

use std::any::{type_name, Any};
use std::fmt;
use std::marker::PhantomData;

use relay::Pid;

use crate::contract::command::{Command, Tag};
use crate::contract::error::BoxError;
use crate::contract::typed_command::TypedCommand;
use crate::engine::commands::abandoned::Abandoned;
use crate::engine::commands::completer::{CompleteError, Completer, Rejected};
use crate::engine::commands::handler::CommandHandler;

/// The [`Completer`] of a [`TypedCommand`]'s yield: completes it with an
/// `R`, at most once, from any thread.
///
/// # Examples
///
/// ```
/// use sched::command::{CommandId, TypedCommand, TypedCompleter};
///
/// const DOUBLE: TypedCommand<u64, u64> = TypedCommand::new(CommandId(4));
///
/// fn double(n: u64, mut done: TypedCompleter<u64>) -> Result<(), sched::command::Rejected> {
///     let twice = n.checked_mul(2).ok_or_else(|| done.reject("too large"))?;
///     let _ = done.complete(twice);
///     Ok(())
/// }
///
/// let scheduler = sched::Scheduler::builder().typed_handler(DOUBLE, double).build();
/// # drop(scheduler);
/// ```
pub struct TypedCompleter<R> {
    inner: Completer,
    result: PhantomData<fn(R)>,
}

impl<R: Any + Send> TypedCompleter<R> {
    /// Completes the yield with `value`.
    ///
    /// # Errors
    ///
    /// As for [`Completer::complete`].
    ///
    /// # Examples
    ///
    /// See [`TypedCompleter`].
    pub fn complete(self, value: R) -> Result<(), CompleteError> {
        self.inner.complete(relay::into_payload(value))
    }

    /// Completes the yield with `value` once `delay` has passed, as
    /// [`Completer::complete_after`].
    ///
    /// # Errors
    ///
    /// As for [`Completer::complete_after`].
    ///
    /// # Examples
    ///
    /// ```
    /// # use sched::command::TypedCompleter;
    /// fn answer_later(done: TypedCompleter<u64>) {
    ///     let _ = done.complete_after(std::time::Duration::from_millis(5), 42);
    /// }
    /// ```
    pub fn complete_after(self, delay: std::time::Duration, value: R) -> Result<(), CompleteError> {
        self.inner.complete_after(delay, relay::into_payload(value))
    }

    /// Completes the yield with an error, as [`Completer::fail`].
    ///
    /// # Errors
    ///
    /// As for [`Completer::fail`].
    ///
    /// # Examples
    ///
    /// ```
    /// # use sched::command::TypedCompleter;
    /// fn give_up(done: TypedCompleter<u64>) {
    ///     let _ = done.fail("the disk is full");
    /// }
    /// ```
    pub fn fail(self, error: impl Into<BoxError>) -> Result<(), CompleteError> {
        self.inner.fail(error)
    }

    /// Completes the yield with `Ok(value)` or fails it with `Err(e)`.
    ///
    /// # Errors
    ///
    /// As for [`Completer::settle`].
    ///
    /// # Examples
    ///
    /// ```
    /// # use sched::command::TypedCompleter;
    /// fn parse(text: String, done: TypedCompleter<u64>) {
    ///     let _ = done.settle(text.trim().parse::<u64>());
    /// }
    /// ```
    pub fn settle<E: Into<BoxError>>(self, result: Result<R, E>) -> Result<(), CompleteError> {
        self.inner.settle(result)
    }

    /// Refuses the command from inside the handler, as
    /// [`Completer::reject`].
    ///
    /// # Examples
    ///
    /// See [`TypedCompleter`].
    pub fn reject(&mut self, error: impl Into<BoxError>) -> Rejected {
        self.inner.reject(error)
    }

    /// The yield's tag.
    ///
    /// # Examples
    ///
    /// ```
    /// # use sched::command::TypedCompleter;
    /// fn tag_of(done: &TypedCompleter<u64>) -> u64 { done.tag().0 }
    /// ```
    pub fn tag(&self) -> Tag {
        self.inner.tag()
    }

    /// The yielding process.
    ///
    /// # Examples
    ///
    /// ```
    /// # use sched::command::TypedCompleter;
    /// fn from(done: &TypedCompleter<u64>) -> sched::Pid { done.pid() }
    /// ```
    pub fn pid(&self) -> Pid {
        self.inner.pid()
    }

    /// Whether nobody will read the result any more, as
    /// [`Completer::is_abandoned`].
    ///
    /// # Examples
    ///
    /// ```
    /// # use sched::command::TypedCompleter;
    /// fn worth_it(done: &TypedCompleter<u64>) -> bool { !done.is_abandoned() }
    /// ```
    pub fn is_abandoned(&self) -> bool {
        self.inner.is_abandoned()
    }

    /// A handle that says when nobody will read the result, as
    /// [`Completer::abandoned`].
    ///
    /// # Examples
    ///
    /// ```
    /// # use sched::command::TypedCompleter;
    /// fn watch(done: &TypedCompleter<u64>) -> sched::command::Abandoned { done.abandoned() }
    /// ```
    pub fn abandoned(&self) -> Abandoned {
        self.inner.abandoned()
    }

    /// The untyped completer underneath.
    ///
    /// # Examples
    ///
    /// ```
    /// # use sched::command::{Completer, TypedCompleter};
    /// fn untyped(done: TypedCompleter<u64>) -> Completer { done.into_untyped() }
    /// ```
    pub fn into_untyped(self) -> Completer {
        self.inner
    }
}

impl<R> fmt::Debug for TypedCompleter<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TypedCompleter")
            .field("inner", &self.inner)
            .field("result", &type_name::<R>())
            .finish()
    }
}

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
    F: Fn(D, TypedCompleter<R>) -> Result<(), Rejected> + Send + Sync + 'static,
{
    fn handle(&self, command: Command, mut completer: Completer) -> Result<(), Rejected> {
        match command.data.downcast::<D>() {
            Ok(data) => (self.handle)(
                *data,
                TypedCompleter {
                    inner: completer,
                    result: PhantomData,
                },
            ),
            Err(_) => Err(completer.reject(format!(
                "the data of {} is not a {}",
                self.command.id(),
                type_name::<D>()
            ))),
        }
    }
}
