//! `ask`: send a request and get one answer, from outside the engine (a
//! [`Reply`] handle) or from a step (an [`Event::Reply`], with a timeout
//! from the engine's timers).

use std::any::Any;
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc as StdArc;
use std::task::{Context as TaskContext, Poll, Waker};
use std::time::{Duration, Instant};

use relay::{Package, Payload, Pid, SendError};

use super::shared::Shared;
use super::stepping::Stepping;
use super::Context;
use crate::contract::event::Event;
use crate::contract::output::Output;
use crate::contract::reply::{Answer, AskError, AskId, Question, ReplyTo, Request};
use crate::contract::step_engine::StepAsk;
use crate::contract::timer_id::TimerId;
use crate::record::RecordRef;
use crate::sync::{Arc, Condvar, Mutex};
use crate::timer::{Action, What};

/// Where an outside asker's answer waits.
#[derive(Debug, Default)]
pub(crate) struct ReplySlot {
    state: Mutex<SlotState>,
    ready: Condvar,
}

#[derive(Debug, Default)]
struct SlotState {
    answer: Option<Result<Payload, AskError>>,
    /// The question, handed back with `AskError::Unread`.
    question: Option<Payload>,
    /// The `Reply` handle was dropped: nobody will take an answer.
    abandoned: bool,
    taken: bool,
    waker: Option<Waker>,
}

impl ReplySlot {
    pub(crate) fn set(&self, answer: Result<Payload, AskError>) {
        self.set_with_question(answer, None);
    }

    fn set_with_question(&self, answer: Result<Payload, AskError>, question: Option<Payload>) {
        let waker = {
            let mut state = self.state.lock();
            if state.answer.is_some() || state.taken {
                drop(state);
                // Answered already: these are the user's values, dropped
                // outside the lock and with their panics contained.
                crate::panic_guard::drop_user_value(answer, Pid::OUTSIDE, "a second answer");
                crate::panic_guard::drop_user_value(question, Pid::OUTSIDE, "a question");
                return;
            }
            state.answer = Some(answer);
            state.question = question;
            state.waker.take()
        };
        self.ready.notify_all();
        if let Some(waker) = waker {
            crate::panic_guard::wake_user_waker(waker, "a reply's waker");
        }
    }

    fn take(state: &mut SlotState) -> Option<Result<Payload, AskError>> {
        if state.taken {
            return Some(Err(AskError::AlreadyTaken));
        }
        let answer = state.answer.take()?;
        state.taken = true;
        Some(answer)
    }
}

impl Drop for ReplySlot {
    fn drop(&mut self) {
        // An answer or question nobody took is the user's value: its
        // `Drop` may panic, and this runs on whichever thread let go last
        // (a worker, when the handle was dropped first).
        // Not `get_mut`: the loom stand-in for the mutex has none (the lock
        // is uncontended here).
        let (answer, question) = {
            let mut state = self.state.lock();
            (state.answer.take(), state.question.take())
        };
        if let Some(answer) = answer {
            crate::panic_guard::drop_user_value(answer, Pid::OUTSIDE, "an answer nobody took");
        }
        if let Some(question) = question {
            crate::panic_guard::drop_user_value(
                question,
                Pid::OUTSIDE,
                "a question nobody took back",
            );
        }
    }
}

/// The answer to an `ask` made from outside the engine: wait for it (with
/// a timeout), or `.await` it.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use std::time::Duration;
///
/// struct Squarer;
/// impl Process for Squarer {
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
///
/// let scheduler = Scheduler::builder().workers(1).build();
/// scheduler.start();
/// let squarer = scheduler.spawn(Squarer)?;
/// let mut reply = scheduler.ask(squarer.pid(), 7u64)?;
/// let answer = reply.wait_timeout(Duration::from_secs(5))?;
/// assert_eq!(answer.downcast_ref::<u64>(), Some(&49));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Reply {
    slot: StdArc<ReplySlot>,
}

impl Reply {
    /// Waits for the answer.
    ///
    /// # Errors
    ///
    /// [`AskError::NoReply`] if the request was dropped unanswered (the
    /// process ended, or chose not to answer);
    /// [`AskError::AlreadyTaken`] if the answer was taken before.
    ///
    /// # Examples
    ///
    /// See [`Reply`].
    pub fn wait(&mut self) -> Result<Payload, AskError> {
        let mut state = self.slot.state.lock();
        loop {
            if let Some(answer) = ReplySlot::take(&mut state) {
                return answer;
            }
            state = self.slot.ready.wait(state);
        }
    }

    /// As [`wait`](Reply::wait), giving up after `timeout`.
    ///
    /// # Errors
    ///
    /// [`AskError::Timeout`] if no answer came in time (a later one is
    /// still taken by a later wait); otherwise as for
    /// [`wait`](Reply::wait).
    ///
    /// # Examples
    ///
    /// See [`Reply`].
    pub fn wait_timeout(&mut self, timeout: Duration) -> Result<Payload, AskError> {
        let deadline = Instant::now() + timeout;
        let mut state = self.slot.state.lock();
        loop {
            if let Some(answer) = ReplySlot::take(&mut state) {
                return answer;
            }
            if Instant::now() >= deadline {
                return Err(AskError::Timeout);
            }
            state = self.slot.ready.wait_until(state, deadline).0;
        }
    }

    /// The question, handed back after the answer was
    /// [`AskError::Unread`]: the asked process ended before any step read
    /// it, so nobody acted on it and it can be asked again, of another
    /// process or of the same one restarted. `None` before that answer was
    /// taken, for any other answer, and after the first call.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::actor::AskError;
    ///
    /// /// Ends at its first step, before reading anything.
    /// struct Quitter;
    /// impl Process for Quitter {
    ///     fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
    ///         out.finish(());
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let scheduler = Scheduler::builder().workers(1).build();
    /// let quitter = scheduler.spawn(Quitter)?;
    /// let mut reply = scheduler.ask(quitter.pid(), String::from("are you there?"))?;
    /// scheduler.start();
    /// assert_eq!(reply.wait().unwrap_err(), AskError::Unread);
    /// let question = reply.take_question().expect("handed back");
    /// assert_eq!(*question.downcast::<String>().unwrap(), "are you there?");
    /// # scheduler.shutdown(std::time::Duration::from_secs(1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn take_question(&mut self) -> Option<Payload> {
        let mut state = self.slot.state.lock();
        if !state.taken {
            return None;
        }
        state.question.take()
    }
}

impl Drop for Reply {
    /// Tells the slot nobody will take the answer: a question handed back
    /// unread from now on is a dead letter instead.
    fn drop(&mut self) {
        self.slot.state.lock().abandoned = true;
    }
}

/// Resolves to the answer, as [`Reply::wait`] returns it.
impl Future for Reply {
    type Output = Result<Payload, AskError>;

    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Self::Output> {
        let mut state = self.slot.state.lock();
        if let Some(answer) = ReplySlot::take(&mut state) {
            return Poll::Ready(answer);
        }
        match &state.waker {
            Some(waker) if waker.will_wake(cx.waker()) => {}
            _ => state.waker = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}

impl Shared {
    /// Delivers a request to `to`, answered through `asker`. When it cannot
    /// be delivered the asker is never told (the caller gets the error).
    /// `question` names the payload's type, for
    /// [`AskError::UnexpectedQuestion`].
    pub(crate) fn ask(
        &self,
        from: Pid,
        to: Pid,
        payload: Payload,
        question: &'static str,
        asker: StdArc<dyn Answer>,
    ) -> Result<(), SendError> {
        if self.is_remote(to) {
            return self.ask_remote(from, to, payload, asker);
        }
        let Some(record) = self.processes.get(to) else {
            return Err(self.missing(Package::from_payload(from, to, payload)));
        };
        let mut request = Request::new(
            Package::from_payload(from, to, payload),
            ReplyTo::new(asker, question),
        );
        if let Some(intercept) = &self.intercept {
            match intercept.request(&record, request) {
                Some(now) => request = now,
                // Held or lost: asked, as far as the asker knows.
                None => return Ok(()),
            }
        }
        match record.deliver(Event::Request(request)) {
            Ok(wake) => {
                self.after_wake_owned(record, wake);
                Ok(())
            }
            Err(Event::Request(request)) => {
                let (request, reply) = request.into_parts();
                reply.forget();
                Err(SendError::ended(request))
            }
            Err(_) => unreachable!("a request comes back as a request"),
        }
    }

    /// Delivers a request a simulation's interceptor held. If its process
    /// has ended meanwhile, the question goes back to the asker as
    /// [`AskError::Unread`] (no step read it), or is a dead letter when
    /// the asker is gone too, as a request that arrives too late.
    pub(crate) fn release_request(&self, record: &RecordRef, request: Request) {
        match record.deliver(Event::Request(request)) {
            Ok(wake) => self.after_wake(record, wake),
            Err(Event::Request(request)) => {
                if let Err(request) = request.hand_back(record.pid) {
                    let source = request.package().source();
                    self.dead_letters(source, vec![Event::Request(request)]);
                }
            }
            Err(_) => unreachable!("a request comes back as a request"),
        }
    }
}

impl Context {
    /// Sends `payload` to `to` as a request, from [`Pid::OUTSIDE`]: the
    /// process receives [`Event::Request`](crate::Event::Request) and
    /// answers through its [`ReplyTo`]. Wait for the answer on the returned
    /// [`Reply`], or `.await` it.
    ///
    /// # Errors
    ///
    /// As for [`send`](Context::send): the target is unknown, has ended or
    /// its mailbox is full.
    ///
    /// # Examples
    ///
    /// See [`Reply`].
    pub fn ask(&self, to: Pid, payload: impl std::any::Any + Send) -> Result<Reply, SendError> {
        let slot = StdArc::new(ReplySlot::default());
        let asker: StdArc<dyn Answer> = slot.clone();
        let question = std::any::type_name_of_val(&payload);
        self.shared().ask(
            Pid::OUTSIDE,
            to,
            relay::into_payload(payload),
            question,
            asker,
        )?;
        Ok(Reply { slot })
    }
}

impl Output<'_> {
    /// Sends `payload` to `to` as a request and returns its id: the answer
    /// arrives as [`Event::Reply`](crate::Event::Reply) with that id and
    /// `Ok(answer)`, or with `Err(AskError::Timeout)` if `timeout` passes
    /// first, or `Err(AskError::NoReply)` if the process drops the request.
    /// Exactly one `Reply` event per ask; an answer after the timeout is
    /// dropped. A PID of another node is asked through the remote
    /// transport (the question and the answer must be types its codec
    /// carries); if that node is lost first, the reply is
    /// `Err(AskError::NodeDown)`. The ask belongs to this process: if it ends first, nothing
    /// arrives anywhere.
    ///
    /// # Errors
    ///
    /// As for [`send`](Output::send).
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::actor::AskId;
    /// use std::time::Duration;
    /// fn price_of(out: &mut Output<'_>, pricer: Pid, item: u32) -> Option<AskId> {
    ///     out.ask(pricer, item, Duration::from_millis(100)).ok()
    /// }
    /// ```
    pub fn ask(
        &mut self,
        to: Pid,
        payload: impl std::any::Any + Send,
        timeout: Duration,
    ) -> Result<AskId, SendError> {
        let now = self.engine.now();
        let at = now
            .checked_add(timeout)
            .unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 24 * 3600));
        let question = std::any::type_name_of_val(&payload);
        let (id, timer) = self
            .engine
            .ask(to, relay::into_payload(payload), question, at)?;
        self.with_extras(|extras| {
            extras.timers.push(timer);
            extras.others().asks.push((id, timer));
        });
        Ok(id)
    }
}

/// The typed answer to a [`Question`] asked from outside the engine
/// ([`Context::query`]): [`Reply`] without the downcast.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use sched::actor::Question;
/// use std::time::Duration;
///
/// struct Square(u64);
/// impl Question for Square {
///     type Answer = u64;
/// }
///
/// struct Squarer;
/// impl Process for Squarer {
///     fn step(&mut self, events: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
///         for event in events {
///             if let Event::Request(request) = event {
///                 if let Ok((Square(n), answer)) = request.take::<Square>() {
///                     answer.answer(n * n);
///                 }
///             }
///         }
///         Ok(())
///     }
/// }
///
/// let scheduler = Scheduler::builder().workers(1).build();
/// scheduler.start();
/// let squarer = scheduler.spawn(Squarer)?;
/// let nine: u64 = scheduler.query(squarer.pid(), Square(3))?.wait_timeout(Duration::from_secs(5))?;
/// assert_eq!(nine, 9);
/// # scheduler.shutdown(Duration::from_secs(1));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct TypedReply<A> {
    reply: Reply,
    answer: PhantomData<fn() -> A>,
}

impl<A: Any + Send> TypedReply<A> {
    /// Waits for the answer.
    ///
    /// # Errors
    ///
    /// As for [`Reply::wait`], and [`AskError::UnexpectedType`] if the
    /// process answered with another type (through the untyped
    /// [`ReplyTo::reply`]).
    ///
    /// # Examples
    ///
    /// See [`TypedReply`].
    pub fn wait(&mut self) -> Result<A, AskError> {
        self.reply.wait().and_then(typed)
    }

    /// As [`wait`](TypedReply::wait), giving up after `timeout`.
    ///
    /// # Errors
    ///
    /// As for [`Reply::wait_timeout`] and [`wait`](TypedReply::wait).
    ///
    /// # Examples
    ///
    /// See [`TypedReply`].
    pub fn wait_timeout(&mut self, timeout: Duration) -> Result<A, AskError> {
        self.reply.wait_timeout(timeout).and_then(typed)
    }

    /// The question, handed back after [`AskError::Unread`]; as
    /// [`Reply::take_question`].
    ///
    /// # Examples
    ///
    /// See [`Reply::take_question`].
    pub fn take_question(&mut self) -> Option<Payload> {
        self.reply.take_question()
    }
}

/// Resolves to the answer, as [`TypedReply::wait`] returns it.
impl<A: Any + Send> Future for TypedReply<A> {
    type Output = Result<A, AskError>;

    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        Pin::new(&mut this.reply)
            .poll(cx)
            .map(|answer| answer.and_then(typed))
    }
}

impl<A> fmt::Debug for TypedReply<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TypedReply")
            .field("reply", &self.reply)
            .field("answer", &std::any::type_name::<A>())
            .finish()
    }
}

/// The payload as the answer type the question promised.
fn typed<A: Any>(payload: Payload) -> Result<A, AskError> {
    payload
        .downcast::<A>()
        .map(|answer| *answer)
        .map_err(|_| AskError::UnexpectedType)
}

/// A typed [`Question`] asked from a step ([`Output::query`]): its id,
/// and the answer's type, for reading the
/// [`Event::Reply`](crate::Event::Reply) it gets.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use sched::actor::{QueryId, Question};
/// use std::time::Duration;
///
/// struct Price(&'static str);
/// impl Question for Price {
///     type Answer = u32;
/// }
///
/// /// Asks the shop for the price of tea and finishes with it.
/// struct Buyer { shop: Pid, asked: Option<QueryId<u32>> }
/// impl Process for Buyer {
///     fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
///         self.asked = Some(out.query(self.shop, Price("tea"), Duration::from_millis(100))?);
///         Ok(())
///     }
///     fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
///         let Some(asked) = &self.asked else { return Ok(()) };
///         for event in events {
///             if let Ok(price) = asked.answer(event) {
///                 out.done(Box::new(price?));
///             }
///         }
///         Ok(())
///     }
/// }
/// ```
pub struct QueryId<A> {
    id: AskId,
    answer: PhantomData<fn() -> A>,
}

impl<A: Any + Send> QueryId<A> {
    /// The untyped id, as [`Event::Reply`](crate::Event::Reply) carries it.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::actor::{AskId, QueryId};
    /// fn untyped(query: &QueryId<u32>) -> AskId { query.id() }
    /// ```
    pub fn id(&self) -> AskId {
        self.id
    }

    /// The typed answer if `event` is this query's reply (`Ok`, holding
    /// the answer or why there is none); the event back otherwise.
    ///
    /// # Errors
    ///
    /// `Err(event)` when `event` is not this query's reply. Inside `Ok`:
    /// [`AskError::Timeout`], [`AskError::NoReply`], or
    /// [`AskError::UnexpectedType`] for an answer of another type.
    ///
    /// # Examples
    ///
    /// See [`QueryId`].
    pub fn answer(&self, event: Event) -> Result<Result<A, AskError>, Event> {
        match event {
            Event::Reply { id, result, .. } if id == self.id => Ok(result.and_then(typed)),
            other => Err(other),
        }
    }
}

impl<A> Clone for QueryId<A> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<A> Copy for QueryId<A> {}

impl<A> PartialEq for QueryId<A> {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
    }
}

impl<A> Eq for QueryId<A> {}

impl<A> fmt::Debug for QueryId<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("QueryId")
            .field("id", &self.id)
            .field("answer", &std::any::type_name::<A>())
            .finish()
    }
}

impl Context {
    /// Asks `to` a typed [`Question`] from [`Pid::OUTSIDE`]: as
    /// [`ask`](Context::ask), and the answer comes back as
    /// `Q::Answer`, without a downcast.
    ///
    /// # Errors
    ///
    /// As for [`ask`](Context::ask).
    ///
    /// # Examples
    ///
    /// See [`TypedReply`].
    pub fn query<Q: Question>(
        &self,
        to: Pid,
        question: Q,
    ) -> Result<TypedReply<Q::Answer>, SendError> {
        Ok(TypedReply {
            reply: self.ask(to, question)?,
            answer: PhantomData,
        })
    }
}

impl Output<'_> {
    /// Asks `to` a typed [`Question`] from this step: as
    /// [`ask`](Output::ask), with a [`QueryId`] that reads the answer as
    /// `Q::Answer`.
    ///
    /// # Errors
    ///
    /// As for [`ask`](Output::ask).
    ///
    /// # Examples
    ///
    /// See [`QueryId`].
    pub fn query<Q: Question>(
        &mut self,
        to: Pid,
        question: Q,
        timeout: Duration,
    ) -> Result<QueryId<Q::Answer>, SendError> {
        Ok(QueryId {
            id: self.ask(to, question, timeout)?,
            answer: PhantomData,
        })
    }
}

/// The error of an ask to a name nobody holds: unknown target, the
/// question handed back (its target is [`Pid::OUTSIDE`]).
fn no_such_name(from: Pid, question: Payload) -> SendError {
    SendError::unknown_target(Package::from_payload(from, Pid::OUTSIDE, question))
}

impl Context {
    /// [`ask`](Context::ask) the process registered under `name` now.
    ///
    /// # Errors
    ///
    /// As for [`ask`](Context::ask); no process holds `name`:
    /// [`SendErrorKind::UnknownTarget`](relay::SendErrorKind::UnknownTarget),
    /// the question handed back.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// let scheduler = Scheduler::builder().workers(1).build();
    /// assert!(scheduler.ask_named("nobody", 1u32).is_err());
    /// ```
    pub fn ask_named(&self, name: &str, payload: impl Any + Send) -> Result<Reply, SendError> {
        match self.whereis(name) {
            Some(pid) => self.ask(pid, payload),
            None => Err(no_such_name(Pid::OUTSIDE, relay::into_payload(payload))),
        }
    }

    /// [`query`](Context::query) the process registered under `name` now.
    ///
    /// # Errors
    ///
    /// As for [`ask_named`](Context::ask_named).
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::actor::Question;
    ///
    /// struct Ping;
    /// impl Question for Ping {
    ///     type Answer = ();
    /// }
    /// let scheduler = Scheduler::builder().workers(1).build();
    /// assert!(scheduler.query_named("nobody", Ping).is_err());
    /// ```
    pub fn query_named<Q: Question>(
        &self,
        name: &str,
        question: Q,
    ) -> Result<TypedReply<Q::Answer>, SendError> {
        Ok(TypedReply {
            reply: self.ask_named(name, question)?,
            answer: PhantomData,
        })
    }
}

impl Output<'_> {
    /// [`ask`](Output::ask) the process registered under `name` now.
    ///
    /// # Errors
    ///
    /// As for [`ask`](Output::ask); no process holds `name`:
    /// [`SendErrorKind::UnknownTarget`](relay::SendErrorKind::UnknownTarget),
    /// the question handed back.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::actor::AskId;
    /// use std::time::Duration;
    ///
    /// fn ask_the_registry(out: &mut Output<'_>) -> Option<AskId> {
    ///     out.ask_named("registry", "who is up?", Duration::from_millis(100)).ok()
    /// }
    /// ```
    pub fn ask_named(
        &mut self,
        name: &str,
        payload: impl Any + Send,
        timeout: Duration,
    ) -> Result<AskId, SendError> {
        match self.context().whereis(name) {
            Some(pid) => self.ask(pid, payload, timeout),
            None => Err(no_such_name(self.pid(), relay::into_payload(payload))),
        }
    }

    /// [`query`](Output::query) the process registered under `name` now.
    ///
    /// # Errors
    ///
    /// As for [`ask_named`](Output::ask_named).
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::actor::{QueryId, Question};
    /// use std::time::Duration;
    ///
    /// struct Count;
    /// impl Question for Count {
    ///     type Answer = u64;
    /// }
    /// fn count_them(out: &mut Output<'_>) -> Option<QueryId<u64>> {
    ///     out.query_named("counter", Count, Duration::from_millis(100)).ok()
    /// }
    /// ```
    pub fn query_named<Q: Question>(
        &mut self,
        name: &str,
        question: Q,
        timeout: Duration,
    ) -> Result<QueryId<Q::Answer>, SendError> {
        Ok(QueryId {
            id: self.ask_named(name, question, timeout)?,
            answer: PhantomData,
        })
    }
}

/// An outside asker: the answer waits in the slot its `Reply` handle
/// reads.
impl Answer for ReplySlot {
    fn asker(&self) -> Pid {
        Pid::OUTSIDE
    }

    fn answer(&self, result: Result<Payload, AskError>) {
        self.set(result);
    }

    fn unread(&self, question: Payload) -> Result<(), Payload> {
        if self.state.lock().abandoned {
            return Err(question);
        }
        // A handle dropped from here on leaves the question to the slot's
        // drop (the asker chose not to look).
        self.set_with_question(Err(AskError::Unread), Some(question));
        Ok(())
    }
}

/// A process that asked from a step: told with `Event::Reply`.
struct ProcessAsker {
    shared: Arc<Shared>,
    record: RecordRef,
    id: AskId,
}

impl Answer for ProcessAsker {
    fn asker(&self) -> Pid {
        self.record.pid
    }

    fn answer(&self, result: Result<Payload, AskError>) {
        self.tell(result);
    }

    fn unread(&self, question: Payload) -> Result<(), Payload> {
        let event = Event::Reply {
            id: self.id,
            result: Err(AskError::Unread),
            question: Some(question),
        };
        match self.record.deliver(event) {
            Ok(wake) => {
                self.shared
                    .after_wake_owned(RecordRef::clone(&self.record), wake);
                Ok(())
            }
            Err(Event::Reply {
                question: Some(question),
                ..
            }) => Err(question),
            Err(_) => unreachable!("a reply comes back as it went"),
        }
    }
}

impl ProcessAsker {
    fn tell(&self, result: Result<Payload, AskError>) {
        let event = Event::Reply {
            id: self.id,
            result,
            question: None,
        };
        match self.record.deliver(event) {
            Ok(wake) => self
                .shared
                .after_wake_owned(RecordRef::clone(&self.record), wake),
            // The asker has ended; the answer is the user's value.
            Err(event) => crate::panic_guard::drop_user_value(
                event,
                self.record.pid,
                "an answer to an asker that has ended",
            ),
        }
    }
}

/// A step's asks: the stepped process is the asker, and its timeout is
/// one of its timers.
impl StepAsk for Stepping<'_> {
    fn ask(
        &self,
        to: Pid,
        question: Payload,
        question_type: &'static str,
        timeout_at: Instant,
    ) -> Result<(AskId, TimerId), SendError> {
        let id = AskId(self.shared.ids.next());
        let asker = StdArc::new(ProcessAsker {
            shared: Arc::clone(self.shared),
            record: RecordRef::clone(self.record),
            id,
        });
        self.shared
            .ask(self.record.pid, to, question, question_type, asker)?;
        let timer = self.shared.set_timer_here(
            self.worker,
            timeout_at,
            Action {
                record: RecordRef::clone(self.record),
                what: What::AskTimeout(id),
            },
        );
        Ok((id, timer))
    }
}
