//! Typed commands: a command id that carries the types of its data and of
//! its result, and the typed yield in flight that reads its completion.
//! The handler side (a `Completer<R>`) is in `engine/commands/typed.rs`.

use std::any::{type_name, Any};
use std::fmt;
use std::marker::PhantomData;

use relay::Payload;

use crate::contract::command::{Command, CommandId, Tag};
use crate::contract::error::UnexpectedValue;
use crate::contract::event::{CommandError, Event};

/// A [`CommandId`] with the types of its data and of its result: the step
/// yields a `D` with [`Output::yield_command`](crate::Output::yield_command)
/// and reads an `R` back through the returned [`Yielded`]; the handler,
/// registered with the builder's `handler`, receives the `D` itself
/// and completes with an `R` (a [`Completer<R>`](crate::Completer)).
/// No box and no downcast in user code on either side; a plain
/// [`CommandId`] (its handler gets the whole [`Command`], data and result
/// `Payload`s) stays for routers and interpreters.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use sched::command::{CommandId, TypedCommand, Yielded};
///
/// /// The length of a string, computed by a handler.
/// const LEN: TypedCommand<String, usize> = TypedCommand::new(CommandId(1));
///
/// struct Measure(Option<Yielded<usize>>);
///
/// impl Process for Measure {
///     type Done = usize;
///     fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
///         self.0 = Some(out.yield_command(LEN, Tag(1), String::from("hello")));
///         Ok(())
///     }
///     fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
///         let yielded = self.0.as_ref().expect("started");
///         for event in events {
///             if let Ok(result) = yielded.result(event) {
///                 out.finish(result?);
///             }
///         }
///         Ok(())
///     }
/// }
///
/// let scheduler = Scheduler::builder()
///     .workers(1)
///     .handler(LEN, |text: String, done| {
///         let _ = done.complete(text.len());
///         Ok(())
///     })
///     .build();
/// scheduler.start();
/// assert_eq!(scheduler.spawn(Measure(None))?.wait()?, 5);
/// # scheduler.shutdown(std::time::Duration::from_secs(1));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct TypedCommand<D, R> {
    id: CommandId,
    types: PhantomData<fn(D) -> R>,
}

impl<D, R> TypedCommand<D, R> {
    /// The command `id`, typed: its data is a `D`, its result an `R`.
    ///
    /// # Examples
    ///
    /// See [`TypedCommand`].
    pub const fn new(id: CommandId) -> Self {
        TypedCommand {
            id,
            types: PhantomData,
        }
    }

    /// The untyped id, which handlers are registered under.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::command::{CommandId, TypedCommand};
    /// const PING: TypedCommand<(), ()> = TypedCommand::new(CommandId(3));
    /// assert_eq!(PING.id(), CommandId(3));
    /// ```
    pub const fn id(&self) -> CommandId {
        self.id
    }
}

impl<D, R> Clone for TypedCommand<D, R> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<D, R> Copy for TypedCommand<D, R> {}

impl<D, R> fmt::Debug for TypedCommand<D, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TypedCommand")
            .field("id", &self.id)
            .field("data", &type_name::<D>())
            .field("result", &type_name::<R>())
            .finish()
    }
}

/// What a step yields to ([`Output::yield_command`](crate::Output::yield_command)):
/// an untyped [`CommandId`], whose data and result are [`Payload`]s, or a
/// [`TypedCommand<D, R>`], whose data is a `D` and result an `R`.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use sched::command::{CommandRef, TypedCommand};
///
/// const SLEEP: CommandId = CommandId(1);
/// const FETCH: TypedCommand<String, Vec<u8>> = TypedCommand::new(CommandId(2));
///
/// fn both(out: &mut Output<'_>) {
///     out.yield_command(SLEEP, Tag(1), Box::new(5u64) as Payload);
///     let fetching = out.yield_command(FETCH, Tag(2), "https://example.com".to_owned());
///     # let _ = fetching;
/// }
/// # fn is_ref<C: CommandRef>(_: C) {}
/// # is_ref(SLEEP);
/// ```
pub trait CommandRef: Copy + Send + Sync + 'static {
    /// What the step hands the handler.
    type Data: Any + Send;
    /// What the completion carries.
    type Result: Any + Send;
    /// What the handler registered for it receives: the whole
    /// [`Command`] (id, tag and untyped data) for a [`CommandId`], the
    /// data itself for a [`TypedCommand`].
    type Input: Send + 'static;

    /// The command's id.
    fn command_id(self) -> CommandId;

    /// Reads a dispatched command as its handler's input; `Err` gives the
    /// command back when its data is not a [`Data`](CommandRef::Data)
    /// (then the engine rejects the yield).
    ///
    /// # Errors
    ///
    /// The command, when its data is of another type.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::command::{CommandRef, TypedCommand};
    ///
    /// const LEN: TypedCommand<String, usize> = TypedCommand::new(CommandId(1));
    ///
    /// let command = Command::new(CommandId(1), Tag(1), Box::new(String::from("hi")));
    /// assert_eq!(LEN.input(command).ok(), Some(String::from("hi")));
    /// let wrong = Command::new(CommandId(1), Tag(1), Box::new(7u8));
    /// assert!(LEN.input(wrong).is_err());
    /// ```
    fn input(self, command: Command) -> Result<Self::Input, Command>;
}

impl CommandRef for CommandId {
    type Data = Payload;
    type Result = Payload;
    type Input = Command;

    fn command_id(self) -> CommandId {
        self
    }

    fn input(self, command: Command) -> Result<Command, Command> {
        Ok(command)
    }
}

impl<D: Any + Send, R: Any + Send> CommandRef for TypedCommand<D, R> {
    type Data = D;
    type Result = R;
    type Input = D;

    fn command_id(self) -> CommandId {
        self.id()
    }

    fn input(self, command: Command) -> Result<D, Command> {
        let Command { id, tag, data } = command;
        data.downcast::<D>()
            .map(|data| *data)
            .map_err(|data| Command { id, tag, data })
    }
}

/// A yield in flight: its tag, and the type of its result, for
/// reading the [`Event::Completion`] it gets.
///
/// # Examples
///
/// See [`TypedCommand`].
pub struct Yielded<R> {
    tag: Tag,
    result: PhantomData<fn() -> R>,
}

impl<R: Any> Yielded<R> {
    pub(crate) fn new(tag: Tag) -> Self {
        Yielded {
            tag,
            result: PhantomData,
        }
    }

    /// The tag the yield was made with.
    ///
    /// # Examples
    ///
    /// See [`TypedCommand`].
    pub fn tag(&self) -> Tag {
        self.tag
    }

    /// Reads `event` as this yield's completion: `Err(event)` when it is
    /// not (another event, or another tag), so the caller can go on
    /// matching it. Inside `Ok`: the result as an `R`, or the command's
    /// error ([`CommandError::UnexpectedType`] for a result of another
    /// type).
    ///
    /// # Examples
    ///
    /// See [`TypedCommand`].
    pub fn result(&self, event: Event) -> Result<Result<R, CommandError>, Event> {
        match event {
            Event::Completion { tag, result } if tag == self.tag => Ok(result.and_then(|value| {
                crate::contract::downcast::<R>(value).map_err(|value| {
                    CommandError::UnexpectedType(UnexpectedValue::new(type_name::<R>(), value))
                })
            })),
            other => Err(other),
        }
    }
}

impl<R> Clone for Yielded<R> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<R> Copy for Yielded<R> {}

impl<R> fmt::Debug for Yielded<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Yielded")
            .field("tag", &self.tag)
            .field("result", &type_name::<R>())
            .finish()
    }
}
