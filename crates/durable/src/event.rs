//! What a durable step is handed: its [`Events`], each an [`Event`], in
//! the same words as a plain process's (`sched::Events`, `sched::Event`),
//! so that a body moves between the two unchanged.
//!
//! A durable step is handed one input at a time, as the journal recorded
//! it: a message's bytes are decoded when the step reads it through
//! [`Events::typed`], as a plain process's message is downcast there.

use std::marker::PhantomData;

use serde::de::DeserializeOwned;
use serde::Serialize;

use sched::Tag;

use crate::error::{codec, DurableError};
use crate::record::{RecordedFailure, RecordedInput};

/// One event handed to a durable process's step: the same variants, by
/// the same names, as a plain process's `sched::Event` (of those a
/// durable process can receive).
///
/// Non-exhaustive, as a plain process's is: a `match` needs a catch-all
/// arm.
///
/// # Examples
///
/// ```
/// use sched_durable::prelude::*;
///
/// let timer: Event<u64> = Event::Timer { id: TimerId::of(Tag(3)), tag: Tag(3) };
/// assert!(matches!(timer, Event::Timer { tag: Tag(3), .. }));
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum Event<M = Body> {
    /// A message: from another durable process ([`Events::sender`] names
    /// it) or from outside ([`Durability::send`](crate::Durability::send)).
    /// Each message is handed over once, even across restarts.
    Message(M),
    /// A timer set with [`Output::set_timer`](crate::Output::set_timer)
    /// fell due. One cancelled before it fell due never arrives.
    Timer {
        /// The timer, as `set_timer` returned it.
        id: TimerId,
        /// The tag the process gave it.
        tag: Tag,
    },
    /// A command yielded with [`Output::command`](crate::Output::command)
    /// completed.
    Completion {
        /// The tag given to the command.
        tag: Tag,
        /// Its answer, or why there is none.
        result: Result<Answer, Failure>,
    },
}

/// A message as the journal keeps it, not decoded yet: what an untyped
/// [`Events`] hands out (read it with [`decode`](Body::decode)), as a
/// plain process's untyped events hand out a `Package`.
///
/// # Examples
///
/// ```
/// use sched_durable::Body;
///
/// let body = Body::encode(&7_u32)?;
/// assert_eq!(body.decode::<u32>()?, 7);
/// # Ok::<(), sched_durable::DurableError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Body(Vec<u8>);

impl Body {
    /// A body holding `message`.
    ///
    /// # Errors
    ///
    /// [`DurableError::Codec`] if it does not serialize.
    ///
    /// # Examples
    ///
    /// See [`Body`].
    pub fn encode<M: Serialize>(message: &M) -> Result<Body, DurableError> {
        postcard::to_stdvec(message).map(Body).map_err(codec)
    }

    /// The message as an `M`.
    ///
    /// # Errors
    ///
    /// [`DurableError::Codec`] if the bytes are not an `M`.
    ///
    /// # Examples
    ///
    /// See [`Body`].
    pub fn decode<M: DeserializeOwned>(&self) -> Result<M, DurableError> {
        postcard::from_bytes(&self.0).map_err(codec)
    }
}

/// A durable timer, as [`Output::set_timer`](crate::Output::set_timer)
/// returns it and [`Event::Timer`] carries it. A durable timer is known by
/// its tag (the journal keeps the tag), so a replay hands out the same
/// ids: timers of one process should have tags of their own.
///
/// # Examples
///
/// ```
/// use sched_durable::prelude::*;
///
/// assert_eq!(TimerId::of(Tag(4)).tag(), Tag(4));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TimerId(Tag);

impl TimerId {
    /// The id of the timer with `tag`.
    ///
    /// # Examples
    ///
    /// See [`TimerId`].
    pub fn of(tag: Tag) -> TimerId {
        TimerId(tag)
    }

    /// Its tag.
    ///
    /// # Examples
    ///
    /// See [`TimerId`].
    pub fn tag(self) -> Tag {
        self.0
    }
}

/// What a durable step is handed: one input, as the journal recorded it.
/// Iterate it for untyped events (a message as a [`Body`]), or read it
/// through [`typed`](Events::typed), as a plain process reads its
/// `sched::Events`. An event not read in this step is gone: a durable
/// step is handed each input once.
///
/// # Examples
///
/// ```
/// use sched_durable::prelude::*;
///
/// struct Adder(u64);
/// impl Durable for Adder {
///     const KIND: &'static str = "adder";
///     type Args = ();
///     type Message = u64;
///     type Done = u64;
///     fn create(_: ()) -> Self { Adder(0) }
///     fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
///         for event in events.typed::<Self>() {
///             if let Event::Message(n) = event {
///                 self.0 += n;
///             }
///         }
///         if self.0 >= 10 {
///             out.finish(self.0);
///         }
///         Ok(())
///     }
/// }
/// ```
#[derive(Debug)]
pub struct Events<'a> {
    input: Option<&'a RecordedInput>,
    key: &'a str,
}

impl<'a> Events<'a> {
    pub(crate) fn new(input: &'a RecordedInput, key: &'a str) -> Self {
        Events {
            input: Some(input),
            key,
        }
    }

    /// The durable process that sent the message this step is handed
    /// (its key), or `None` for a message from outside or another event.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched_durable::prelude::*;
    ///
    /// /// Answers each number with its double, to whoever sent it.
    /// struct Doubler;
    /// impl Durable for Doubler {
    ///     const KIND: &'static str = "doubler";
    ///     type Args = ();
    ///     type Message = u64;
    ///     type Done = ();
    ///     fn create(_: ()) -> Self { Doubler }
    ///     fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
    ///         let from = events.sender().map(|key| Key::<Doubler>::new(key));
    ///         for event in events.typed::<Self>() {
    ///             if let (Event::Message(n), Some(from)) = (event, from.clone()) {
    ///                 out.send(from, 2 * n)?;
    ///             }
    ///         }
    ///         Ok(())
    ///     }
    /// }
    /// ```
    pub fn sender(&self) -> Option<&'a str> {
        match self.input? {
            RecordedInput::Message {
                from: Some((key, _)),
                ..
            } => Some(key),
            _ => None,
        }
    }
}

impl Iterator for Events<'_> {
    type Item = Event;

    fn next(&mut self) -> Option<Event> {
        Some(match self.input.take()? {
            // Not an event: `Durable::start` is called for it.
            RecordedInput::Start => return None,
            RecordedInput::Message { body, .. } => Event::Message(Body(body.clone())),
            RecordedInput::Timer(tag) => Event::Timer {
                id: TimerId(Tag(*tag)),
                tag: Tag(*tag),
            },
            RecordedInput::Completion { tag, result } => Event::Completion {
                tag: Tag(*tag),
                result: match result {
                    Ok(bytes) => Ok(Answer(bytes.clone())),
                    Err(RecordedFailure::Failed(e)) => Err(Failure::Failed(e.clone())),
                    Err(RecordedFailure::Interrupted) => Err(Failure::Interrupted),
                },
            },
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = usize::from(self.input.is_some());
        (0, Some(left))
    }
}

/// A step's [`Events`] with each message read as an `M`: see
/// [`Events::typed`].
///
/// # Examples
///
/// See [`Events`].
#[derive(Debug)]
pub struct Typed<'e, 'a, M> {
    pub(crate) events: &'e mut Events<'a>,
    // `fn() -> M`: the iterator hands `M`s out, it does not hold one.
    pub(crate) message: PhantomData<fn() -> M>,
}

impl<M: DeserializeOwned> Iterator for Typed<'_, '_, M> {
    type Item = Event<M>;

    fn next(&mut self) -> Option<Event<M>> {
        loop {
            let key = self.events.key;
            return Some(match self.events.next()? {
                Event::Message(body) => match body.decode::<M>() {
                    Ok(message) => Event::Message(message),
                    Err(e) => {
                        tracing::warn!(
                            key,
                            "a message that is not a {} was skipped: {e}",
                            std::any::type_name::<M>()
                        );
                        continue;
                    }
                },
                Event::Timer { id, tag } => Event::Timer { id, tag },
                Event::Completion { tag, result } => Event::Completion { tag, result },
            });
        }
    }
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
