//! Request-reply: the asked process answers through a [`ReplyTo`] that only
//! it holds, so the correlation is the library's, not a field any sender
//! could forge.

use std::any::Any;
use std::error::Error;
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc as StdArc;

use relay::{Package, Payload, Pid};

/// Identifies one `ask` made from a step; its answer arrives as
/// [`Event::Reply`](crate::Event::Reply) with this id.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use sched::actor::AskId;
/// fn answers(event: &Event, question: AskId) -> bool {
///     matches!(event, Event::Reply { id, .. } if *id == question)
/// }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AskId(pub(crate) u64);

/// Why an `ask` got no answer.
///
/// # Examples
///
/// ```
/// use sched::actor::AskError;
/// assert_eq!(AskError::TimedOut.to_string(), "no reply before the timeout");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum AskError {
    /// The timeout passed first (the asked process may still answer:
    /// [`Reply::wait_timeout`](crate::Reply::wait_timeout) can be called
    /// again).
    TimedOut,
    /// The asked process had the request and dropped it without replying
    /// (it chose not to answer, or ended while holding it).
    NoReply,
    /// The reply was already taken from this handle.
    AlreadyTaken,
    /// The answer was not of the type the [`Question`] says (it was given
    /// through the untyped [`ReplyTo::reply`]).
    UnexpectedType,
    /// The asked process ended before any step read the request: nobody
    /// acted on it, so asking again (another process, a restarted one) is
    /// safe, and the question comes back to ask it with:
    /// [`Reply::take_question`](crate::Reply::take_question) outside, the
    /// `question` of [`Event::Reply`](crate::Event::Reply) in a step.
    /// [`NoReply`](AskError::NoReply) says a step had it.
    Unread,
    /// The asked process is on another node, and that node was lost or
    /// could not be reached before it answered: whether the request was
    /// acted on is unknown.
    NodeDown,
    /// The asked process does not take this question: it tried to read
    /// the request as another type ([`Request::take`] failed) and then
    /// dropped it unanswered. Names both types (`std::any::type_name`): the
    /// question's type as the asker sent it, and the last type the asked
    /// process tried to read it as. Across nodes the asked node's names do
    /// not travel: both read `"(on another node)"`.
    UnexpectedQuestion {
        /// The type of the question that was asked.
        asked: &'static str,
        /// The type the asked process tried to read it as.
        expected: &'static str,
    },
    /// The asked process on another node answered with a value the
    /// transport cannot carry back (its type is not registered with the
    /// transport's codec, or it is too large).
    Unencodable,
}

/// What [`AskError::UnexpectedQuestion`] names in place of a type that
/// lives on another node (type names do not travel between nodes).
pub(crate) const ON_ANOTHER_NODE: &str = "(on another node)";

impl AskError {
    /// Whether this is [`AskError::TimedOut`]: the wait gave up before an
    /// answer (as `ExitError::is_timeout` for a process's outcome).
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::actor::AskError;
    /// assert!(AskError::TimedOut.is_timeout());
    /// assert!(!AskError::NoReply.is_timeout());
    /// ```
    pub fn is_timeout(&self) -> bool {
        matches!(self, AskError::TimedOut)
    }
}

impl fmt::Display for AskError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AskError::TimedOut => "no reply before the timeout",
            AskError::NoReply => "the request was dropped without a reply",
            AskError::AlreadyTaken => "the reply was already taken",
            AskError::UnexpectedType => "the answer was not of the type the question expects",
            AskError::Unread => "the asked process ended before reading the request",
            AskError::NodeDown => "the asked process's node was lost or unreachable",
            AskError::Unencodable => "the answer could not be carried back across nodes",
            AskError::UnexpectedQuestion { asked, expected } => {
                return write!(
                    f,
                    "the asked process does not take this question: asked a `{asked}`, \
                     it reads `{expected}`"
                );
            }
        })
    }
}

impl Error for AskError {}

/// A question another process, or code outside, asked this process,
/// received as [`Event::Request`](crate::Event::Request): the question's
/// package (its source is the asker) and the right to answer it once.
/// Boxed, so that every event slot stays the size of a message.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
///
/// /// Answers every request with the square of the number asked.
/// struct Squarer;
/// impl Process for Squarer {
///     type Done = ();
///     fn step(&mut self, events: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
///         for event in events {
///             if let Event::Request(request) = event {
///                 let n = *request.payload::<u64>().ok_or("not a u64")?;
///                 request.reply(n * n);
///             }
///         }
///         Ok(())
///     }
/// }
/// ```
#[derive(Debug)]
pub struct Request {
    inner: Box<(Package, ReplyTo)>,
}

impl Request {
    pub(crate) fn new(package: Package, reply: ReplyTo) -> Self {
        Request {
            inner: Box::new((package, reply)),
        }
    }

    /// The question: its payload, and the asker as its source.
    ///
    /// # Examples
    ///
    /// ```
    /// fn who(request: &sched::actor::Request) -> sched::Pid { request.package().source() }
    /// ```
    pub fn package(&self) -> &Package {
        &self.inner.0
    }

    /// The question's payload, if it is a `T`.
    ///
    /// # Examples
    ///
    /// See [`Request`].
    pub fn payload<T: std::any::Any>(&self) -> Option<&T> {
        self.inner.0.payload()
    }

    /// Answers, dropping the question.
    ///
    /// # Examples
    ///
    /// See [`Request`].
    pub fn reply(self, answer: impl std::any::Any + Send) {
        self.inner.1.reply(answer);
    }

    /// The question and the right to answer, apart (to answer later, or
    /// from another thread).
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::actor::{ReplyTo, Request};
    /// fn keep_for_later(request: Request, pending: &mut Vec<ReplyTo>) {
    ///     let (_question, reply) = request.into_parts();
    ///     pending.push(reply);
    /// }
    /// ```
    pub fn into_parts(self) -> (Package, ReplyTo) {
        *self.inner
    }

    /// The question as a `Q`, with a responder that answers only with
    /// `Q::Answer`; the request back if it is not a `Q`. A request that
    /// was not a `Q` and is then dropped unanswered tells its asker
    /// [`AskError::UnexpectedQuestion`], naming the question's type and
    /// `Q` (the last type tried), not [`AskError::NoReply`].
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::actor::Question;
    ///
    /// struct Price(&'static str);
    /// impl Question for Price {
    ///     type Answer = u32;
    /// }
    ///
    /// struct Shop;
    /// impl Process for Shop {
    ///     type Done = ();
    ///     fn step(&mut self, events: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
    ///         for event in events {
    ///             if let Event::Request(request) = event {
    ///                 if let Ok((Price(item), answer)) = request.take::<Price>() {
    ///                     answer.answer(if item == "tea" { 3 } else { 5 });
    ///                 }
    ///             }
    ///         }
    ///         Ok(())
    ///     }
    /// }
    /// ```
    pub fn take<Q: Question>(self) -> Result<(Q, Responder<Q::Answer>), Request> {
        let (package, mut reply) = *self.inner;
        match package.downcast::<Q>() {
            Ok(question) => {
                // Taken: a drop from here on is this question left
                // unanswered, not a mismatch of an earlier try.
                reply.refused = None;
                Ok((
                    question,
                    Responder {
                        reply,
                        answer: PhantomData,
                    },
                ))
            }
            Err(package) => {
                // Remembered, so that dropping the request unanswered tells
                // the asker which types disagreed.
                reply.refused = Some(std::any::type_name::<Q>());
                Err(Request::new(package, reply))
            }
        }
    }
}

/// A question type that says what it is answered with, so that asking it
/// ([`Context::ask`](crate::Context::ask),
/// [`Output::ask`](crate::Output::ask)) gets a `Self::Answer` back
/// without a downcast, and the process that answers it
/// ([`Request::take`]) can only answer with that type.
///
/// # Examples
///
/// ```
/// use sched::actor::Question;
///
/// /// How many items are in stock.
/// struct Stock { item: String }
///
/// impl Question for Stock {
///     type Answer = u64;
/// }
/// ```
pub trait Question: Any + Send {
    /// What the question is answered with.
    type Answer: Any + Send;
}

/// The untyped question: any value, boxed, answered with any value. The
/// asked process reads it with [`Request::payload`] and answers with
/// [`Request::reply`]; the asker gets a `Reply<Payload>` to downcast.
impl Question for relay::Payload {
    type Answer = relay::Payload;
}

/// The right to answer one typed question (see [`Request::take`]):
/// answers only with the question's answer type. Dropping it unanswered
/// tells the asker [`AskError::NoReply`], as for [`ReplyTo`].
///
/// # Examples
///
/// See [`Request::take`].
pub struct Responder<A> {
    reply: ReplyTo,
    answer: PhantomData<fn(A)>,
}

impl<A: Any + Send> Responder<A> {
    /// Answers the question. An asker that gave up never sees it.
    ///
    /// # Examples
    ///
    /// See [`Request::take`].
    pub fn answer(self, answer: A) {
        self.reply.reply(answer);
    }

    /// The asking process ([`Pid::OUTSIDE`] for code outside the engine).
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::actor::Responder;
    /// fn from_a_process(r: &Responder<u32>) -> bool { r.asker() != sched::Pid::OUTSIDE }
    /// ```
    pub fn asker(&self) -> Pid {
        self.reply.asker()
    }

    /// The untyped right to answer, to keep with others.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::actor::{ReplyTo, Responder};
    /// fn untyped(r: Responder<u32>) -> ReplyTo { r.into_reply_to() }
    /// ```
    pub fn into_reply_to(self) -> ReplyTo {
        self.reply
    }
}

impl<A> fmt::Debug for Responder<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Responder")
            .field("reply", &self.reply)
            .field("answer", &std::any::type_name::<A>())
            .finish()
    }
}

/// The right to answer one request (see [`Request`]). Answer with
/// [`reply`](ReplyTo::reply); dropping it unanswered tells the asker
/// [`AskError::NoReply`] at once. It may be moved to another thread (a
/// handler doing the work) and answered from there.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
///
/// /// Answers every request with the square of the number asked.
/// struct Squarer;
/// impl Process for Squarer {
///     type Done = ();
///     fn step(&mut self, events: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
///         for event in events {
///             if let Event::Request(request) = event {
///                 let (question, reply) = request.into_parts();
///                 let n = question.downcast::<u64>().map_err(|_| "not a u64")?;
///                 reply.reply(n * n);
///             }
///         }
///         Ok(())
///     }
/// }
/// ```
pub struct ReplyTo {
    asker: Option<StdArc<dyn Answer>>,
    /// The question's type as the asker sent it, for
    /// [`AskError::UnexpectedQuestion`].
    question: &'static str,
    /// The last type a failed [`Request::take`] tried to read the question
    /// as: dropped unanswered after that, the asker learns the mismatch,
    /// not a bare [`AskError::NoReply`].
    refused: Option<&'static str>,
}

/// Where a request's answer goes: a handle outside the engine waiting on
/// a slot, or a process told with `Event::Reply`. The engine implements
/// both (`engine/ask.rs`); a `ReplyTo` answers exactly once, dropped
/// unanswered it answers `AskError::NoReply`.
pub(crate) trait Answer: Send + Sync {
    /// The asking process ([`Pid::OUTSIDE`] for code outside the engine).
    fn asker(&self) -> Pid;

    /// Hands the answer over; called at most once.
    fn answer(&self, result: Result<Payload, AskError>);

    /// Answers [`AskError::Unread`] and hands the question back; called
    /// at most once, instead of `answer`. `Err(question)` when nobody is
    /// there to take it (the asking process ended, the outside handle was
    /// dropped): the caller then treats the request as a dead letter.
    fn unread(&self, question: Payload) -> Result<(), Payload>;
}

impl ReplyTo {
    /// `question` is the question's type name, as the asker sent it.
    pub(crate) fn new(asker: StdArc<dyn Answer>, question: &'static str) -> Self {
        ReplyTo {
            asker: Some(asker),
            question,
            refused: None,
        }
    }

    /// The PID of the asking process ([`Pid::OUTSIDE`] for code outside
    /// the engine).
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::actor::ReplyTo;
    /// fn from_outside(reply: &ReplyTo) -> bool { reply.asker() == Pid::OUTSIDE }
    /// ```
    pub fn asker(&self) -> Pid {
        self.asker
            .as_ref()
            .map_or(Pid::OUTSIDE, |asker| asker.asker())
    }

    /// Answers the request. An asker that gave up (its timeout passed, it
    /// ended) never sees the answer.
    ///
    /// # Examples
    ///
    /// See [`ReplyTo`].
    pub fn reply(mut self, answer: impl std::any::Any + Send) {
        if let Some(asker) = self.asker.take() {
            asker.answer(Ok(relay::into_payload(answer)));
        }
    }
}

impl ReplyTo {
    /// Gives the right up without telling the asker (a request that was
    /// never delivered: the asker learns it from the send error).
    pub(crate) fn forget(mut self) {
        self.asker = None;
    }

    /// Takes the asker out (the request then answers nothing when
    /// dropped), with the question's type name as the asker sent it.
    pub(crate) fn take_asker(mut self) -> (Option<StdArc<dyn Answer>>, &'static str) {
        (self.asker.take(), self.question)
    }
}

impl Request {
    /// Hands the question back to its asker with [`AskError::Unread`]: no
    /// step read it, so it is the asker's again (to ask another process,
    /// or the same one restarted). `Err(self)` when the request has no
    /// asker to hand it to any more.
    pub(crate) fn hand_back(self, pid: Pid) -> Result<(), Request> {
        let (package, mut reply) = *self.inner;
        let Some(asker) = reply.asker.take() else {
            return Err(Request::new(package, reply));
        };
        let (source, target) = (package.source(), package.target());
        let result = asker.unread(package.into_payload());
        // The last count of an outside asker's slot may go here, with an
        // answer nobody took: the user's value, whose `Drop` may panic.
        crate::panic_guard::drop_user_value(asker, pid, "the asker of an unread request");
        // Nobody took it back: a dead letter, whose reply reaches nobody.
        result.map_err(|question| {
            Request::new(Package::from_payload(source, target, question), reply)
        })
    }
}

impl Drop for ReplyTo {
    fn drop(&mut self) {
        if let Some(asker) = self.asker.take() {
            asker.answer(Err(match self.refused {
                Some(expected) => AskError::UnexpectedQuestion {
                    asked: self.question,
                    expected,
                },
                None => AskError::NoReply,
            }));
        }
    }
}

impl fmt::Debug for ReplyTo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReplyTo")
            .field("asker", &self.asker())
            .field("answered", &self.asker.is_none())
            .finish()
    }
}
