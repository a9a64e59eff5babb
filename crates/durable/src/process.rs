//! The durable process contract: what a durable process is given
//! ([`Input`]) and what it may do ([`Effects`]).
//!
//! A durable process is a deterministic state machine: given the same
//! inputs in the same order, its steps ask for the same effects. That is
//! what lets the journal keep only the inputs (and, for checking, the
//! effects) and rebuild the state by replaying them. Everything a step may
//! read that is not its state and its input comes through [`Effects`]:
//! [`Effects::now`] is the batch's recorded time, the same on replay.

use std::any::Any;
use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sched::command::TypedCommand;
use sched::{BoxError, Payload, Tag};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::{codec, panic_text, DurableError};
use crate::record::{RecordedEffect, RecordedFailure, RecordedInput};

/// The tag of the journal's own command; no command of a durable process
/// may use it.
pub(crate) const JOURNAL_TAG: Tag = Tag(u64::MAX);

/// A process whose steps are journaled, so that it survives the end of
/// its node: after a restart, [`Durability::recover`](crate::Durability::recover)
/// rebuilds it by replaying its inputs, and it goes on where it was.
///
/// Rules a step must keep (each broken one is reported as
/// [`DurableError::NonDeterminism`] when a replay notices it):
/// - decide only from the state, the input, and [`Effects::now`]: never
///   from the wall clock, a random number, a global, or a file;
/// - act only through [`Effects`]: a message sent, a file written or a
///   request made directly would be repeated by every replay.
///
/// # Examples
///
/// A counter that finishes with its total when told `0`:
///
/// ```
/// use sched_durable::prelude::*;
///
/// #[derive(Default)]
/// struct Tally { total: u64 }
///
/// impl Durable for Tally {
///     const KIND: &'static str = "tally";
///     type Args = ();
///     type Message = u64;
///     type Done = u64;
///
///     fn create(_: ()) -> Self { Tally::default() }
///
///     fn step(&mut self, input: Input<u64>, out: &mut Effects<'_>) -> Result<(), BoxError> {
///         if let Input::Message { message, .. } = input {
///             if message == 0 { out.finish(&self.total)?; } else { self.total += message; }
///         }
///         Ok(())
///     }
/// }
/// ```
pub trait Durable: Send + 'static {
    /// The type's stable name, as journals record it: it must not change
    /// while journals of this type exist.
    const KIND: &'static str;
    /// What the process is created from (kept in the journal).
    type Args: Serialize + DeserializeOwned;
    /// The messages it receives (journaled as postcard bytes).
    type Message: Serialize + DeserializeOwned + Send + 'static;
    /// What it finishes with ([`Effects::finish`]): its handle is a
    /// [`Spawned<Self::Done>`](crate::Spawned), whose `wait` gives a
    /// `Done`, so waiting for another type does not compile. `()` for a
    /// process that finishes with nothing or never. (`finish` takes any
    /// serializable value: one that does not decode as a `Done` reaches
    /// the waiter as [`DurableError::Codec`].)
    ///
    /// Waiting for another type does not compile:
    ///
    /// ```compile_fail,E0308
    /// use sched_durable::prelude::*;
    ///
    /// struct Tally(u64);
    /// impl Durable for Tally {
    ///     const KIND: &'static str = "tally";
    ///     type Args = ();
    ///     type Message = u64;
    ///     type Done = u64;
    ///     fn create(_: ()) -> Self { Tally(0) }
    ///     fn step(&mut self, _: Input<u64>, out: &mut Effects<'_>) -> Result<(), BoxError> {
    ///         out.finish(&self.0)?;
    ///         Ok(())
    ///     }
    /// }
    ///
    /// fn total(durability: &Durability, scheduler: &Scheduler) -> Result<String, DurableError> {
    ///     durability.spawn::<Tally>(scheduler, "t", ())?.wait() // a `Tally` finishes with a `u64`
    /// }
    /// ```
    type Done: Serialize + DeserializeOwned + Send + 'static;

    /// Builds the process from its arguments: on spawn, and again before
    /// its journal is replayed.
    fn create(args: Self::Args) -> Self;

    /// Advances the state machine by one input, asking for effects
    /// through `out`. They are released once the input is durable.
    ///
    /// # Errors
    ///
    /// An error (or a panic) ends the process, once the input that caused
    /// it is durable: a replay ends it the same way.
    fn step(&mut self, input: Input<Self::Message>, out: &mut Effects<'_>) -> Result<(), BoxError>;
}

/// What a durable step is given.
///
/// # Examples
///
/// ```
/// use sched_durable::Input;
///
/// let input: Input<u32> = Input::Message { from: None, message: 7 };
/// assert!(matches!(input, Input::Message { message: 7, .. }));
/// ```
#[derive(Debug)]
pub enum Input<M> {
    /// The first step of the process's life (not repeated on recovery).
    Start,
    /// A message: from the durable process with this key, or from outside
    /// (`None`). Each message is handed over once, even across restarts.
    Message {
        /// The sending durable process's key, if it was one.
        from: Option<String>,
        /// The message.
        message: M,
    },
    /// A timer set with [`Effects::set_timer`] fell due (its tag).
    Timer(Tag),
    /// A command yielded with [`Effects::command`] completed.
    Completion {
        /// The tag given to the command.
        tag: Tag,
        /// Its answer, or why there is none.
        result: Result<Answer, Failure>,
    },
}

/// A command's answer, as journaled: decode it with the command's answer
/// type.
///
/// # Examples
///
/// ```
/// use sched_durable::Answer;
///
/// let answer = Answer::encode(&42u32)?;
/// assert_eq!(answer.decode::<u32>()?, 42);
/// # Ok::<(), sched_durable::DurableError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer(Vec<u8>);

impl Answer {
    /// An answer holding `value`.
    ///
    /// # Errors
    ///
    /// [`DurableError::Codec`] if the value does not serialize.
    ///
    /// # Examples
    ///
    /// See [`Answer`].
    pub fn encode<R: Serialize>(value: &R) -> Result<Answer, DurableError> {
        postcard::to_stdvec(value).map(Answer).map_err(codec)
    }

    /// The answer as an `R`.
    ///
    /// # Errors
    ///
    /// [`DurableError::Codec`] if the bytes are not an `R`.
    ///
    /// # Examples
    ///
    /// See [`Answer`].
    pub fn decode<R: DeserializeOwned>(&self) -> Result<R, DurableError> {
        postcard::from_bytes(&self.0).map_err(codec)
    }
}

/// Why a command brought no answer.
///
/// # Examples
///
/// ```
/// use sched_durable::Failure;
///
/// let failure = Failure::Interrupted;
/// assert_eq!(failure.to_string(), "the command was in flight when its node stopped");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// The handler failed the command (its error's text).
    Failed(String),
    /// The command was in flight when the node stopped: it may or may not
    /// have taken effect. The process decides whether to issue it again.
    Interrupted,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Failed(e) => write!(f, "the command failed: {e}"),
            Failure::Interrupted => write!(f, "the command was in flight when its node stopped"),
        }
    }
}

impl std::error::Error for Failure {}

/// Turns a command's answer payload into journal bytes.
pub(crate) type AnswerEncoder = fn(&Payload) -> Result<Vec<u8>, String>;

fn encode_answer<R: Serialize + Any>(payload: &Payload) -> Result<Vec<u8>, String> {
    match payload.downcast_ref::<R>() {
        Some(answer) => postcard::to_stdvec(answer).map_err(|e| e.to_string()),
        None => Err(format!(
            "the handler answered with another type than {}",
            std::any::type_name::<R>()
        )),
    }
}

/// An effect a step asked for, held until the record holding its input
/// is durable.
pub(crate) struct Held {
    pub(crate) effect: RecordedEffect,
    /// A command's data, as the handler takes it (absent on replay: the
    /// command is not yielded again).
    pub(crate) data: Option<Payload>,
    /// How a command's answer is journaled.
    pub(crate) answer: Option<AnswerEncoder>,
}

/// What a durable step may do. Every effect is held until the input that
/// caused it is durable, then released: nothing a step did is visible
/// before that.
///
/// # Examples
///
/// See [`Durable`].
pub struct Effects<'a> {
    key: &'a str,
    at_ms: u64,
    held: &'a mut Vec<Held>,
    /// The number of the last send to each receiver.
    sends: &'a mut HashMap<String, u64>,
}

impl std::fmt::Debug for Effects<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Effects")
            .field("key", &self.key)
            .field("held", &self.held.len())
            .finish()
    }
}

pub(crate) fn unix_ms(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl<'a> Effects<'a> {
    pub(crate) fn new(
        key: &'a str,
        at_ms: u64,
        held: &'a mut Vec<Held>,
        sends: &'a mut HashMap<String, u64>,
    ) -> Self {
        Effects {
            key,
            at_ms,
            held,
            sends,
        }
    }

    fn push(&mut self, effect: RecordedEffect) {
        self.held.push(Held {
            effect,
            data: None,
            answer: None,
        });
    }

    /// The time this batch of inputs was stepped at (millisecond
    /// precision): the journal keeps it, so a replay sees the same. Read
    /// it instead of the wall clock.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched_durable::prelude::*;
    /// use std::time::Duration;
    ///
    /// /// Remembers when it started, and finishes after an hour.
    /// struct Hour { started: Option<std::time::SystemTime> }
    /// impl Durable for Hour {
    ///     const KIND: &'static str = "hour";
    ///     type Args = ();
    ///     type Message = ();
    ///     type Done = ();
    ///     fn create(_: ()) -> Self { Hour { started: None } }
    ///     fn step(&mut self, input: Input<()>, out: &mut Effects<'_>) -> Result<(), BoxError> {
    ///         match input {
    ///             Input::Start => {
    ///                 self.started = Some(out.now());
    ///                 out.set_timer(Duration::from_secs(3600), Tag(1));
    ///             }
    ///             Input::Timer(_) => out.finish(&())?,
    ///             _ => {}
    ///         }
    ///         Ok(())
    ///     }
    /// }
    /// ```
    pub fn now(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(self.at_ms)
    }

    /// The process's key.
    ///
    /// # Examples
    ///
    /// ```
    /// # use sched_durable::Effects;
    /// fn who(out: &Effects<'_>) -> String { out.key().to_owned() }
    /// ```
    pub fn key(&self) -> &str {
        self.key
    }

    /// Sends `message` to the durable process `to`, of type `R`. Once
    /// this step's record is durable, `to` takes it exactly once, after
    /// every earlier send of this process to `to`: live if `to` runs on
    /// this node, else when a process of that key is spawned or
    /// recovered (the store's outbox keeps it until then). A send to a
    /// key whose journal has ended is dropped.
    ///
    /// # Errors
    ///
    /// [`DurableError::Codec`] if the message does not serialize.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched_durable::prelude::*;
    ///
    /// struct Sink;
    /// impl Durable for Sink {
    ///     const KIND: &'static str = "sink";
    ///     type Args = ();
    ///     type Message = String;
    ///     type Done = ();
    ///     fn create(_: ()) -> Self { Sink }
    ///     fn step(&mut self, _: Input<String>, _: &mut Effects<'_>) -> Result<(), BoxError> { Ok(()) }
    /// }
    ///
    /// fn greet(out: &mut Effects<'_>) -> Result<(), DurableError> {
    ///     out.send::<Sink>("sink-1", &"hello".to_owned())
    /// }
    /// ```
    pub fn send<R: Durable>(&mut self, to: &str, message: &R::Message) -> Result<(), DurableError> {
        let body = postcard::to_stdvec(message).map_err(codec)?;
        let last = match self.sends.get_mut(to) {
            Some(last) => last,
            None => self.sends.entry(to.to_owned()).or_insert(0),
        };
        *last += 1;
        let seq = *last;
        self.push(RecordedEffect::Send {
            to: to.to_owned(),
            seq,
            body,
        });
        Ok(())
    }

    /// Sets a timer that falls due `after` from [`now`](Effects::now),
    /// tagged `tag`: [`Input::Timer`] comes then, after a restart too (at
    /// the same absolute time, or at once if that has passed). A timer
    /// set again with a tag that is pending replaces it.
    ///
    /// # Examples
    ///
    /// See [`now`](Effects::now).
    pub fn set_timer(&mut self, after: Duration, tag: Tag) {
        let after = u64::try_from(after.as_millis()).unwrap_or(u64::MAX);
        self.push(RecordedEffect::Timer {
            tag: tag.0,
            deadline_ms: self.at_ms.saturating_add(after),
        });
    }

    /// Cancels the pending timer tagged `tag`, if any: its
    /// [`Input::Timer`] never comes.
    ///
    /// # Examples
    ///
    /// ```
    /// # use sched_durable::Effects;
    /// # use sched::Tag;
    /// fn calm(out: &mut Effects<'_>) { out.cancel_timer(Tag(1)) }
    /// ```
    pub fn cancel_timer(&mut self, tag: Tag) {
        self.push(RecordedEffect::CancelTimer(tag.0));
    }

    /// Yields `command` with `data`, tagged `tag`, to its handler (a
    /// typed handler registered on the scheduler's builder). Its answer
    /// comes as [`Input::Completion`]; decode it as an `R`. If the node
    /// stops while it is in flight, the completion after the restart is
    /// [`Failure::Interrupted`].
    ///
    /// # Errors
    ///
    /// [`DurableError::Codec`] if the data does not serialize,
    /// [`DurableError::ReservedTag`] for `Tag(u64::MAX)`.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched_durable::prelude::*;
    /// use sched::command::{CommandId, TypedCommand};
    ///
    /// const CHARGE: TypedCommand<u64, String> = TypedCommand::new(CommandId(7));
    ///
    /// fn charge(out: &mut Effects<'_>, cents: u64) -> Result<(), DurableError> {
    ///     out.command(CHARGE, Tag(1), cents)
    /// }
    /// ```
    pub fn command<D, R>(
        &mut self,
        command: TypedCommand<D, R>,
        tag: Tag,
        data: D,
    ) -> Result<(), DurableError>
    where
        D: Serialize + Any + Send,
        R: Serialize + Any + Send,
    {
        if tag == JOURNAL_TAG {
            return Err(DurableError::ReservedTag);
        }
        let bytes = postcard::to_stdvec(&data).map_err(codec)?;
        self.held.push(Held {
            effect: RecordedEffect::Command {
                id: command.id().0,
                tag: tag.0,
                data: bytes,
            },
            data: Some(Box::new(data)),
            answer: Some(encode_answer::<R>),
        });
        Ok(())
    }

    /// Finishes the process with `outcome`, once this input is durable.
    /// Inputs after it are not stepped.
    ///
    /// # Errors
    ///
    /// [`DurableError::Codec`] if the outcome does not serialize.
    ///
    /// # Examples
    ///
    /// See [`Durable`].
    pub fn finish<T: Serialize>(&mut self, outcome: &T) -> Result<(), DurableError> {
        let bytes = postcard::to_stdvec(outcome).map_err(codec)?;
        self.push(RecordedEffect::Done(bytes));
        Ok(())
    }

    pub(crate) fn fail(&mut self, why: String) {
        self.push(RecordedEffect::Failed(why));
    }
}

/// A durable process with its message type erased: what the runner and
/// the replay drive.
pub(crate) trait Erased: Send {
    /// Steps one recorded input. Returns `false` when the input could not
    /// be read as this process's (a message of another type): it is then
    /// skipped, on replay as live.
    fn step(&mut self, input: &RecordedInput, out: &mut Effects<'_>) -> bool;

    /// The process's state for a snapshot, if its type was registered
    /// with snapshots.
    fn save(&self) -> Option<Result<Vec<u8>, String>>;
}

/// Encodes a process's state for a snapshot.
pub(crate) type Save<D> = fn(&D) -> Result<Vec<u8>, String>;

/// A process's state as a snapshot keeps it (postcard bytes of its serde
/// form).
pub(crate) fn save_serde<D: Serialize>(process: &D) -> Result<Vec<u8>, String> {
    postcard::to_stdvec(process).map_err(|e| e.to_string())
}

pub(crate) struct Typed<D> {
    pub(crate) process: D,
    pub(crate) save: Option<Save<D>>,
}

impl<D: Durable> Erased for Typed<D> {
    fn save(&self) -> Option<Result<Vec<u8>, String>> {
        let save = self.save?;
        let process = &self.process;
        // A user's `Serialize` may panic: a snapshot is then skipped.
        Some(
            catch_unwind(AssertUnwindSafe(|| save(process)))
                .unwrap_or_else(|_| Err("the state's serialization panicked".into())),
        )
    }

    fn step(&mut self, input: &RecordedInput, out: &mut Effects<'_>) -> bool {
        let input = match input {
            RecordedInput::Start => Input::Start,
            RecordedInput::Message { from, body } => {
                match postcard::from_bytes::<D::Message>(body) {
                    Ok(message) => Input::Message {
                        from: from.as_ref().map(|(key, _)| key.clone()),
                        message,
                    },
                    Err(e) => {
                        tracing::warn!(
                            key = out.key(),
                            kind = D::KIND,
                            "a message that is not a {} was skipped: {e}",
                            std::any::type_name::<D::Message>()
                        );
                        return false;
                    }
                }
            }
            RecordedInput::Timer(tag) => Input::Timer(Tag(*tag)),
            RecordedInput::Completion { tag, result } => Input::Completion {
                tag: Tag(*tag),
                result: match result {
                    Ok(bytes) => Ok(Answer(bytes.clone())),
                    Err(RecordedFailure::Failed(e)) => Err(Failure::Failed(e.clone())),
                    Err(RecordedFailure::Interrupted) => Err(Failure::Interrupted),
                },
            },
        };
        let process = &mut self.process;
        match catch_unwind(AssertUnwindSafe(|| process.step(input, out))) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => out.fail(e.to_string()),
            Err(panic) => {
                out.fail(format!("the step panicked: {}", panic_text(panic)));
            }
        }
        true
    }
}

/// Builds an erased process from bytes (its arguments, or a snapshot's
/// state).
pub(crate) type Factory = fn(&[u8]) -> Result<Box<dyn Erased>, DurableError>;

/// Builds a `D` from its arguments' bytes (no snapshots).
pub(crate) fn factory<D: Durable>(args: &[u8]) -> Result<Box<dyn Erased>, DurableError> {
    let args: D::Args = postcard::from_bytes(args).map_err(codec)?;
    Ok(Box::new(Typed {
        process: D::create(args),
        save: None,
    }))
}

/// Builds a `D` from its arguments' bytes, saving snapshots.
pub(crate) fn factory_saving<D>(args: &[u8]) -> Result<Box<dyn Erased>, DurableError>
where
    D: Durable + Serialize + DeserializeOwned,
{
    let args: D::Args = postcard::from_bytes(args).map_err(codec)?;
    Ok(Box::new(Typed {
        process: D::create(args),
        save: Some(save_serde::<D> as Save<D>),
    }))
}

/// Rebuilds a `D` from a snapshot's bytes of its state.
pub(crate) fn restore<D>(state: &[u8]) -> Result<Box<dyn Erased>, DurableError>
where
    D: Durable + Serialize + DeserializeOwned,
{
    Ok(Box::new(Typed {
        process: postcard::from_bytes::<D>(state).map_err(codec)?,
        save: Some(save_serde::<D> as Save<D>),
    }))
}
