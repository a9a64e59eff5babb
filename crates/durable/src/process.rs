//! The durable process contract: what a durable process is handed
//! ([`Events`](crate::Events)) and what it may do ([`Output`]), in the
//! words of a plain process (`sched::Process`, `sched::Events`,
//! `sched::Output`): a body moves from one to the other unchanged.
//!
//! A durable process is a deterministic state machine: given the same
//! inputs in the same order, its steps ask for the same effects. That is
//! what lets the journal keep only the inputs (and, for checking, the
//! effects) and rebuild the state by replaying them. Everything a step may
//! read that is not its state and its events comes through [`Output`]:
//! [`Output::now`] is the batch's recorded time, the same on replay.

use std::any::Any;
use std::collections::HashMap;
use std::marker::PhantomData;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sched::command::TypedCommand;
use sched::{BoxError, Payload, Tag};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::{codec, panic_text, DurableError};
use crate::event::{Events, TimerId, Typed};
use crate::record::{RecordedEffect, RecordedInput};

/// The tag of the journal's own command; no command of a durable process
/// may use it.
pub(crate) const JOURNAL_TAG: Tag = Tag(u64::MAX);

/// A process whose steps are journaled, so that it survives the end of
/// its node: after a restart, [`Durability::recover`](crate::Durability::recover)
/// rebuilds it by replaying its inputs, and it goes on where it was.
///
/// Rules a step must keep (each broken one is reported as
/// [`DurableError::NonDeterminism`] when a replay notices it):
/// - decide only from the state, the events, and [`Output::now`]: never
///   from the wall clock, a random number, a global, or a file;
/// - act only through [`Output`]: a message sent, a file written or a
///   request made directly would be repeated by every replay.
///
/// Its body is written as a plain process's (`sched::Process`): `start`
/// and `step` take the same parameters, read events with
/// `events.typed::<Self>()` and `Event::Message`/`Event::Timer`, and act
/// with `out.send`, `out.set_timer`, `out.cancel_timer` and
/// `out.finish`. Moving a process from plain to durable changes its
/// declaration (`KIND`, `Args`, `Message`, `create`, the serde derives of
/// its messages and outcome), not its body.
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
///     fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
///         for event in events.typed::<Self>() {
///             match event {
///                 Event::Message(0) => out.finish(self.total),
///                 Event::Message(n) => self.total += n,
///                 _ => {}
///             }
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
    /// What it finishes with ([`Output::finish`]): its handle is a
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
    ///     fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
    ///         out.finish(self.0);
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

    /// Starts the work, with the first step's output: called once in the
    /// process's life, when it is spawned (and again, with the same
    /// output compared, by each replay of its journal). Send the first
    /// messages, set the first timers and yield the first commands here.
    /// By default it does nothing.
    ///
    /// # Errors
    ///
    /// An error (or a panic) ends the process, as one from `step` does.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched_durable::prelude::*;
    /// use std::time::Duration;
    ///
    /// /// Finishes an hour after it started.
    /// struct Hour;
    /// impl Durable for Hour {
    ///     const KIND: &'static str = "hour";
    ///     type Args = ();
    ///     type Message = ();
    ///     type Done = ();
    ///     fn create(_: ()) -> Self { Hour }
    ///     fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
    ///         out.set_timer(Duration::from_secs(3600), Tag(1));
    ///         Ok(())
    ///     }
    ///     fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
    ///         for event in events.typed::<Self>() {
    ///             if let Event::Timer { .. } = event {
    ///                 out.finish(());
    ///             }
    ///         }
    ///         Ok(())
    ///     }
    /// }
    /// ```
    fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        let _ = out;
        Ok(())
    }

    /// Advances the state machine by the events it is handed (one input
    /// of its journal), asking for effects through `out`. They are
    /// released once the input is durable.
    ///
    /// # Errors
    ///
    /// An error (or a panic) ends the process, once the input that caused
    /// it is durable: a replay ends it the same way.
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError>;
}

impl<'a> Events<'a> {
    /// These events with each message read as a `P::Message` (decoded
    /// from the journal's bytes), as a plain process reads its
    /// `sched::Events` with `typed::<Self>()`. A message that does not
    /// decode is skipped with a warning naming the process.
    ///
    /// # Examples
    ///
    /// See [`Events`].
    pub fn typed<P: Durable>(&mut self) -> Typed<'_, 'a, P::Message> {
        Typed {
            events: self,
            message: PhantomData,
        }
    }
}

/// The address of the durable process with a key, typed by its kind, so
/// that [`Output::send`] only takes its message type (as a plain
/// process's `Addr<M>` does).
///
/// # Examples
///
/// ```
/// use sched_durable::prelude::*;
///
/// struct Counter;
/// impl Durable for Counter {
///     const KIND: &'static str = "counter";
///     type Args = ();
///     type Message = u64;
///     type Done = ();
///     fn create(_: ()) -> Self { Counter }
///     fn step(&mut self, _: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> { Ok(()) }
/// }
///
/// let counter = Key::<Counter>::new("counter-1");
/// assert_eq!(counter.as_str(), "counter-1");
/// ```
pub struct Key<R> {
    key: String,
    kind: PhantomData<fn() -> R>,
}

impl<R> Key<R> {
    /// The process with `key`.
    ///
    /// # Examples
    ///
    /// See [`Key`].
    pub fn new(key: impl Into<String>) -> Self {
        Key {
            key: key.into(),
            kind: PhantomData,
        }
    }

    /// Its key.
    ///
    /// # Examples
    ///
    /// See [`Key`].
    pub fn as_str(&self) -> &str {
        &self.key
    }
}

impl<R> Clone for Key<R> {
    fn clone(&self) -> Self {
        Key::new(self.key.clone())
    }
}

impl<R> std::fmt::Debug for Key<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Key").field(&self.key).finish()
    }
}

impl<R> PartialEq for Key<R> {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}

impl<R> Eq for Key<R> {}

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

/// What a durable step may do: the same methods, by the same names, as a
/// plain process's `sched::Output` (of those a durable process has).
/// Every effect is held until the input that caused it is durable, then
/// released: nothing a step did is visible before that.
///
/// # Examples
///
/// See [`Durable`].
pub struct Output<'a> {
    key: &'a str,
    at_ms: u64,
    held: &'a mut Vec<Held>,
    /// The number of the last send to each receiver.
    sends: &'a mut HashMap<String, u64>,
}

impl std::fmt::Debug for Output<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Output")
            .field("key", &self.key)
            .field("held", &self.held.len())
            .finish()
    }
}

pub(crate) fn unix_ms(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl<'a> Output<'a> {
    pub(crate) fn new(
        key: &'a str,
        at_ms: u64,
        held: &'a mut Vec<Held>,
        sends: &'a mut HashMap<String, u64>,
    ) -> Self {
        Output {
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
    /// use std::time::{Duration, SystemTime};
    ///
    /// /// Remembers when it started, and finishes after an hour.
    /// struct Hour { started: Option<SystemTime> }
    /// impl Durable for Hour {
    ///     const KIND: &'static str = "hour";
    ///     type Args = ();
    ///     type Message = ();
    ///     type Done = ();
    ///     fn create(_: ()) -> Self { Hour { started: None } }
    ///     fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
    ///         self.started = Some(out.now());
    ///         out.set_timer(Duration::from_secs(3600), Tag(1));
    ///         Ok(())
    ///     }
    ///     fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
    ///         if events.typed::<Self>().any(|e| matches!(e, Event::Timer { .. })) {
    ///             out.finish(());
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
    /// # use sched_durable::Output;
    /// fn who(out: &Output<'_>) -> String { out.key().to_owned() }
    /// ```
    pub fn key(&self) -> &str {
        self.key
    }

    /// Sends `message` to the durable process `to`. Once this step's
    /// record is durable, `to` takes it exactly once, after every earlier
    /// send of this process to `to`: live if `to` runs on this node (or
    /// on a node that [listens](crate::Durability::listen)), else when a
    /// process of that key is spawned or recovered (the store's outbox
    /// keeps it until then). A send to a key whose journal has ended is
    /// dropped.
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
    ///     fn step(&mut self, _: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> { Ok(()) }
    /// }
    ///
    /// fn greet(out: &mut Output<'_>) -> Result<(), DurableError> {
    ///     out.send(Key::<Sink>::new("sink-1"), "hello".to_owned())
    /// }
    /// ```
    ///
    /// A message of another type than the receiver's does not compile:
    ///
    /// ```compile_fail,E0308
    /// # use sched_durable::prelude::*;
    /// # struct Sink;
    /// # impl Durable for Sink {
    /// #     const KIND: &'static str = "sink";
    /// #     type Args = ();
    /// #     type Message = String;
    /// #     type Done = ();
    /// #     fn create(_: ()) -> Self { Sink }
    /// #     fn step(&mut self, _: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> { Ok(()) }
    /// # }
    /// fn greet(out: &mut Output<'_>) -> Result<(), DurableError> {
    ///     out.send(Key::<Sink>::new("sink-1"), 42_u64) // a `Sink` takes a `String`
    /// }
    /// ```
    pub fn send<R: Durable>(
        &mut self,
        to: Key<R>,
        message: R::Message,
    ) -> Result<(), DurableError> {
        let body = postcard::to_stdvec(&message).map_err(codec)?;
        let to = to.key;
        let last = self.sends.entry(to.clone()).or_insert(0);
        *last += 1;
        let seq = *last;
        self.push(RecordedEffect::Send { to, seq, body });
        Ok(())
    }

    /// Sets a timer that falls due `after` from [`now`](Output::now),
    /// tagged `tag`: [`Event::Timer`](crate::Event::Timer) comes then,
    /// after a restart too (at the same absolute time, or at once if that
    /// has passed). A durable timer is known by its tag: one set again
    /// with a tag that is pending replaces it, and the returned id is the
    /// same.
    ///
    /// # Examples
    ///
    /// See [`now`](Output::now).
    pub fn set_timer(&mut self, after: Duration, tag: Tag) -> TimerId {
        let after = u64::try_from(after.as_millis()).unwrap_or(u64::MAX);
        self.push(RecordedEffect::Timer {
            tag: tag.0,
            deadline_ms: self.at_ms.saturating_add(after),
        });
        TimerId::of(tag)
    }

    /// Cancels the pending timer `id`, if any: its
    /// [`Event::Timer`](crate::Event::Timer) never comes.
    ///
    /// # Examples
    ///
    /// ```
    /// # use sched_durable::prelude::*;
    /// fn calm(out: &mut Output<'_>, timeout: TimerId) { out.cancel_timer(timeout); }
    /// ```
    pub fn cancel_timer(&mut self, id: TimerId) {
        self.push(RecordedEffect::CancelTimer(id.tag().0));
    }

    /// Yields `command` with `data`, tagged `tag`, to its handler (a
    /// typed handler registered on the scheduler's builder). Its answer
    /// comes as [`Event::Completion`](crate::Event::Completion); decode it
    /// as an `R`. If the node stops while it is in flight, the completion
    /// after the restart is [`Failure::Interrupted`](crate::Failure::Interrupted).
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
    /// fn charge(out: &mut Output<'_>, cents: u64) -> Result<(), DurableError> {
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
    /// Inputs after it are not stepped. An outcome that does not
    /// serialize fails the process instead, with the codec's error.
    ///
    /// # Examples
    ///
    /// See [`Durable`].
    pub fn finish<T: Serialize>(&mut self, outcome: T) {
        match postcard::to_stdvec(&outcome) {
            Ok(bytes) => self.push(RecordedEffect::Done(bytes)),
            Err(e) => self.fail(format!("its outcome does not serialize: {e}")),
        }
    }

    pub(crate) fn fail(&mut self, why: String) {
        self.push(RecordedEffect::Failed(why));
    }
}

/// A durable process with its message type erased: what the runner and
/// the replay drive.
pub(crate) trait Erased: Send {
    /// Steps one recorded input: `start` for the process's first, `step`
    /// with it as its events for any other.
    fn step(&mut self, input: &RecordedInput, out: &mut Output<'_>);

    /// The process's state, serialized for a snapshot (`None` when its
    /// type was registered without snapshots).
    fn save(&self) -> Option<Result<Vec<u8>, String>>;
}

/// Encodes a process's state for a snapshot.
pub(crate) type Save<D> = fn(&D) -> Result<Vec<u8>, String>;

/// A process's state as a snapshot keeps it (postcard bytes of its serde
/// form).
pub(crate) fn save_serde<D: Serialize>(process: &D) -> Result<Vec<u8>, String> {
    postcard::to_stdvec(process).map_err(|e| e.to_string())
}

/// A `D` as the runner holds it.
pub(crate) struct Instance<D> {
    pub(crate) process: D,
    pub(crate) save: Option<Save<D>>,
}

impl<D: Durable> Erased for Instance<D> {
    fn save(&self) -> Option<Result<Vec<u8>, String>> {
        let save = self.save?;
        let process = &self.process;
        // A user's `Serialize` may panic: a snapshot is then skipped.
        Some(
            catch_unwind(AssertUnwindSafe(|| save(process)))
                .unwrap_or_else(|_| Err("the state's serialization panicked".into())),
        )
    }

    fn step(&mut self, input: &RecordedInput, out: &mut Output<'_>) {
        let process = &mut self.process;
        let key = out.key;
        let stepped = catch_unwind(AssertUnwindSafe(|| match input {
            RecordedInput::Start => process.start(out),
            _ => process.step(&mut Events::new(input, key), out),
        }));
        match stepped {
            Ok(Ok(())) => {}
            Ok(Err(e)) => out.fail(e.to_string()),
            Err(panic) => {
                out.fail(format!("the step panicked: {}", panic_text(panic)));
            }
        }
    }
}

/// Builds an erased process from bytes (its arguments, or a snapshot's
/// state).
pub(crate) type Factory = fn(&[u8]) -> Result<Box<dyn Erased>, DurableError>;

/// Builds a `D` from its arguments' bytes (no snapshots).
pub(crate) fn factory<D: Durable>(args: &[u8]) -> Result<Box<dyn Erased>, DurableError> {
    let args: D::Args = postcard::from_bytes(args).map_err(codec)?;
    Ok(Box::new(Instance {
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
    Ok(Box::new(Instance {
        process: D::create(args),
        save: Some(save_serde::<D> as Save<D>),
    }))
}

/// Rebuilds a `D` from a snapshot's bytes of its state.
pub(crate) fn restore<D>(state: &[u8]) -> Result<Box<dyn Erased>, DurableError>
where
    D: Durable + Serialize + DeserializeOwned,
{
    Ok(Box::new(Instance {
        process: postcard::from_bytes::<D>(state).map_err(codec)?,
        save: Some(save_serde::<D> as Save<D>),
    }))
}
