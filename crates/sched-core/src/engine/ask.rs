//! `ask`: send a request and get one answer, from outside the engine (a
//! [`Reply`] handle) or from a step (an [`Event::Reply`], with a timeout
//! from the engine's timers).
//!
//! An ask lives in records and in its request: the asker (a slot an
//! outside [`Reply`] waits on, or the asking process) travels with the
//! request, and a step's pending asks and their timeouts are in its own
//! record. Its id comes from the engine's id source, which monitors share:
//! the feature has no engine-wide state of its own. Its operations are
//! methods of [`Asks`] (`in_records.rs`, the shared state's `asks`), the
//! home of its operations on records; they take the engine (`&Shared`)
//! for the process table, a remote target, a simulation's interceptor,
//! waking the process asked and dead letters.

use std::any::Any;
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc as StdArc;
use std::task::{Context as TaskContext, Poll, Waker};
use std::time::{Duration, Instant};

use relay::{Addr, Package, Payload, Pid, SendError};

use super::in_records::Asks;
use super::shared::Shared;
use super::Context;
use crate::contract::event::Event;
use crate::contract::output::Output;
use crate::contract::reply::{Answer, AskError, AskId, Question, ReplyTo, Request};
use crate::record::RecordRef;
use crate::sync::{Arc, Condvar, Mutex};

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

/// The answer to an [`ask`](Context::ask) made from outside the engine,
/// of the question's answer type `A`: wait for it (with a timeout), or
/// `.await` it. An untyped question (a [`Payload`]) gets a
/// `Reply<Payload>`, the default.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use sched::Reply;
/// use std::time::Duration;
///
/// struct Square(u64);
/// impl Question for Square {
///     type Answer = u64;
/// }
///
/// struct Squarer;
/// impl Process for Squarer {
///     type Done = ();
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
/// let mut reply: Reply<u64> = scheduler.ask(squarer.pid(), Square(7))?;
/// assert_eq!(reply.wait_timeout(Duration::from_secs(5))?, 49);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Reply<A = Payload> {
    pub(super) slot: StdArc<ReplySlot>,
    pub(super) answer: PhantomData<fn() -> A>,
}

impl<A> fmt::Debug for Reply<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reply")
            .field("slot", &self.slot)
            .field("answer", &std::any::type_name::<A>())
            .finish()
    }
}

/// How long a thread waiting for an answer looks for it, yielding its
/// thread between looks, before it sleeps until the answer wakes it: an
/// answer that comes within it (a question to another node, a round trip
/// of 150-250 µs) is taken without the wake-up of a sleeping thread, which
/// costs tens of microseconds on a busy machine, as idle workers linger
/// for the answers their steps await.
const WAIT_LINGER: Duration = Duration::from_micros(300);

impl<A: Any + Send> Reply<A> {
    /// Looks for the answer until `until`, yielding the thread between
    /// looks; `None` if it has not come. Not under loom, whose models
    /// must not spin.
    fn linger(&mut self, until: Instant) -> Option<Result<A, AskError>> {
        if cfg!(loom) {
            return None;
        }
        loop {
            if let Some(answer) = ReplySlot::take(&mut self.slot.state.lock()) {
                return Some(answer.and_then(answer_as));
            }
            if Instant::now() >= until {
                return None;
            }
            std::thread::yield_now();
        }
    }

    /// Waits for the answer. The thread first looks for it for up to
    /// 300 µs, yielding between looks (an answer from another node often
    /// comes within that, and a sleeping thread's wake-up costs tens of
    /// microseconds), then sleeps until the answer wakes it.
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
    pub fn wait(&mut self) -> Result<A, AskError> {
        if let Some(answer) = self.linger(Instant::now() + WAIT_LINGER) {
            return answer;
        }
        let mut state = self.slot.state.lock();
        loop {
            if let Some(answer) = ReplySlot::take(&mut state) {
                return answer.and_then(answer_as);
            }
            state = self.slot.ready.wait(state);
        }
    }

    /// As [`wait`](Reply::wait) (looking for the answer for up to 300 µs,
    /// or `timeout` if shorter, before sleeping), giving up after
    /// `timeout`.
    ///
    /// # Errors
    ///
    /// [`AskError::TimedOut`] if no answer came in time (a later one is
    /// still taken by a later wait); otherwise as for
    /// [`wait`](Reply::wait).
    ///
    /// # Examples
    ///
    /// See [`Reply`].
    pub fn wait_timeout(&mut self, timeout: Duration) -> Result<A, AskError> {
        let deadline = crate::sync::deadline_after(timeout);
        let lingered = Instant::now()
            .checked_add(WAIT_LINGER)
            .map_or(deadline, |end| end.min(deadline));
        if let Some(answer) = self.linger(lingered) {
            return answer;
        }
        let mut state = self.slot.state.lock();
        loop {
            if let Some(answer) = ReplySlot::take(&mut state) {
                return answer.and_then(answer_as);
            }
            if Instant::now() >= deadline {
                return Err(AskError::TimedOut);
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
    ///     type Done = ();
    ///     fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
    ///         out.finish(());
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let scheduler = Scheduler::builder().workers(1).build();
    /// let quitter = scheduler.spawn(Quitter)?;
    /// let mut reply = scheduler.ask(quitter.pid(), Box::new(String::from("are you there?")) as Payload)?;
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

impl<A> Drop for Reply<A> {
    /// Tells the slot nobody will take the answer: a question handed back
    /// unread from now on is a dead letter instead.
    fn drop(&mut self) {
        self.slot.state.lock().abandoned = true;
    }
}

/// Resolves to the answer, as [`Reply::wait`] returns it.
impl<A: Any + Send> Future for Reply<A> {
    type Output = Result<A, AskError>;

    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Self::Output> {
        let mut state = self.slot.state.lock();
        if let Some(answer) = ReplySlot::take(&mut state) {
            return Poll::Ready(answer.and_then(answer_as));
        }
        match &state.waker {
            Some(waker) if waker.will_wake(cx.waker()) => {}
            _ => state.waker = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}

impl Asks {
    /// Delivers a request to `to`, answered through `asker`. When it cannot
    /// be delivered the asker is never told (the caller gets the error).
    /// `question` names the payload's type, for
    /// [`AskError::UnexpectedQuestion`].
    pub(crate) fn ask(
        &self,
        engine: &Shared,
        from: Pid,
        to: Pid,
        payload: Payload,
        question: &'static str,
        asker: StdArc<dyn Answer>,
    ) -> Result<(), SendError> {
        if engine.is_remote(to) {
            return engine.across().ask_remote(engine, from, to, payload, asker);
        }
        let Some(record) = engine.processes.get(to) else {
            return Err(engine.missing(Package::from_payload(from, to, payload)));
        };
        let mut request = Request::new(
            Package::from_payload(from, to, payload),
            ReplyTo::new(asker, question),
        );
        if let Some(intercept) = &engine.intercept {
            match intercept.request(&record, request) {
                Some(now) => request = now,
                // Held or lost: asked, as far as the asker knows.
                None => return Ok(()),
            }
        }
        match record.deliver(Event::Request(request)) {
            Ok(wake) => {
                engine.after_wake(&record, wake);
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
    pub(crate) fn release_request(&self, engine: &Shared, record: &RecordRef, request: Request) {
        match record.deliver(Event::Request(request)) {
            Ok(wake) => engine.after_wake(record, wake),
            Err(Event::Request(request)) => {
                if let Err(request) = request.hand_back(record.pid) {
                    let source = request.package().source();
                    engine.dead_letters(source, vec![Event::Request(request)]);
                }
            }
            Err(_) => unreachable!("a request comes back as a request"),
        }
    }
}

/// What an [`ask`](Context::ask) names: a process by [`Pid`], a typed
/// [`Addr`] (any question: an address types the messages it takes, not
/// the questions), or a name (`&str`, its holder now).
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use sched::Context;
/// use sched::actor::AskTarget;
///
/// fn are_you_there<T: AskTarget>(cx: &Context, to: T) -> bool {
///     cx.ask(to, Box::new("ping") as Payload).is_ok()
/// }
/// let scheduler = Scheduler::builder().workers(1).build();
/// assert!(!are_you_there(scheduler.context(), "nobody"));
/// ```
pub trait AskTarget: crate::engine::routing::sealed::Sealed {
    /// The PID the target names now, if any.
    #[doc(hidden)]
    fn resolve(&self, cx: &Context) -> Option<Pid>;
}

impl AskTarget for Pid {
    fn resolve(&self, _: &Context) -> Option<Pid> {
        Some(*self)
    }
}

impl<M> AskTarget for Addr<M> {
    fn resolve(&self, _: &Context) -> Option<Pid> {
        Some(self.pid())
    }
}

impl AskTarget for &str {
    fn resolve(&self, cx: &Context) -> Option<Pid> {
        cx.whereis(self)
    }
}

impl AskTarget for &String {
    fn resolve(&self, cx: &Context) -> Option<Pid> {
        cx.whereis(self)
    }
}

fn no_such_name(from: Pid, question: Payload) -> SendError {
    SendError::unknown_target(Package::from_payload(from, Pid::OUTSIDE, question))
}

/// The name an [`AskError::UnexpectedQuestion`] gives the question: its
/// type's, or, for the untyped question (a boxed value, whose type a
/// `dyn Any` does not name), that it was untyped.
pub(super) fn question_name<Q: Question>() -> &'static str {
    if std::any::TypeId::of::<Q>() == std::any::TypeId::of::<Payload>() {
        UNTYPED_QUESTION
    } else {
        std::any::type_name::<Q>()
    }
}

/// What [`AskError::UnexpectedQuestion`] names an untyped question (a
/// [`Payload`]) as.
pub(crate) const UNTYPED_QUESTION: &str = "an untyped question (a Payload)";

/// Reads an answer as `A` (the untyped case, `A = Payload`, as it came).
fn answer_as<A: Any>(payload: Payload) -> Result<A, AskError> {
    crate::contract::downcast::<A>(payload).map_err(|_| AskError::UnexpectedType)
}

/// Asks: one verb, from outside or from a step.
impl Context {
    /// Asks `to` a [`Question`], from [`Pid::OUTSIDE`]: the process
    /// receives [`Event::Request`](crate::Event::Request) and answers
    /// through [`Request::take`](crate::Request::take) (typed) or its
    /// [`ReplyTo`]. Wait for the answer on the returned [`Reply`], or
    /// `.await` it. A [`Payload`] is the untyped question, answered with a
    /// `Payload`.
    ///
    /// A question of a type the process does not take is answered
    /// [`AskError::UnexpectedQuestion`], naming both types; an answer of
    /// another type than `Q::Answer`, [`AskError::UnexpectedType`].
    ///
    /// # Errors
    ///
    /// As for [`send`](Context::send): the target is unknown (no such PID,
    /// or nobody holds the name) or has ended. A question is not held to
    /// the mailbox's capacity
    /// ([`mailbox_capacity`](crate::Builder::mailbox_capacity)):
    /// each has an asker waiting for it, so the askers bound them, and an
    /// ask never fails `Full`.
    ///
    /// # Examples
    ///
    /// See [`Reply`].
    pub fn ask<Q: Question>(
        &self,
        to: impl AskTarget,
        question: Q,
    ) -> Result<Reply<Q::Answer>, SendError> {
        let Some(to) = to.resolve(self) else {
            return Err(no_such_name(Pid::OUTSIDE, relay::into_payload(question)));
        };
        let slot = StdArc::new(ReplySlot::default());
        let asker: StdArc<dyn Answer> = slot.clone();
        let shared = self.shared();
        shared.asks.ask(
            shared,
            Pid::OUTSIDE,
            to,
            relay::into_payload(question),
            question_name::<Q>(),
            asker,
        )?;
        Ok(Reply {
            slot,
            answer: PhantomData,
        })
    }
}

impl Output<'_> {
    /// Asks `to` a [`Question`] from this step and returns its
    /// [`ReplyId`]: the answer arrives as
    /// [`Event::Reply`](crate::Event::Reply) with that id, read with
    /// [`ReplyId::answer`]: `Ok(answer)`, or `Err(AskError::TimedOut)` if
    /// `timeout` passes first, or `Err(AskError::NoReply)` if the process
    /// drops the request. Exactly one `Reply` event per ask; an answer
    /// after the timeout is dropped. A PID of another node is asked
    /// through the remote transport (the question and the answer must be
    /// types its codec carries); if that node is lost first, the reply is
    /// `Err(AskError::NodeDown)`. The ask belongs to this process: if it
    /// ends first, nothing arrives anywhere.
    ///
    /// # Errors
    ///
    /// As for [`send`](Output::send), except that a question is not held
    /// to the mailbox's capacity (see [`Context::ask`]): never `Full`.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::actor::Replied;
    /// use sched::ReplyId;
    /// use std::time::Duration;
    ///
    /// struct Price(&'static str);
    /// impl Question for Price {
    ///     type Answer = u32;
    /// }
    ///
    /// /// Asks the shop for the price of tea and finishes with it.
    /// struct Buyer { asked: Option<ReplyId<u32>> }
    /// impl Process for Buyer {
    ///     type Done = u32;
    ///     fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
    ///         self.asked = Some(out.ask("shop", Price("tea"), Duration::from_millis(100))?);
    ///         Ok(())
    ///     }
    ///     fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
    ///         let Some(asked) = &self.asked else { return Ok(()) };
    ///         for event in events {
    ///             match asked.answer(event) {
    ///                 Replied::Answered(price) => out.finish(price),
    ///                 Replied::Failed(why) => return Err(why.into()),
    ///                 Replied::Other(_) => {}
    ///             }
    ///         }
    ///         Ok(())
    ///     }
    /// }
    /// ```
    pub fn ask<Q: Question>(
        &mut self,
        to: impl AskTarget,
        question: Q,
        timeout: Duration,
    ) -> Result<ReplyId<Q::Answer>, SendError> {
        let Some(to) = to.resolve(self.context()) else {
            return Err(no_such_name(self.pid(), relay::into_payload(question)));
        };
        let now = self.engine.now();
        let at = now
            .checked_add(timeout)
            .unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 24 * 3600));
        let (id, timer) =
            self.engine
                .ask(to, relay::into_payload(question), question_name::<Q>(), at)?;
        self.with_extras(|extras| {
            extras.timers.push(timer);
            extras.others().asks.push((id, timer));
        });
        Ok(ReplyId {
            id,
            answer: PhantomData,
        })
    }
}

/// A question asked from a step ([`Output::ask`]): its id, and the
/// answer's type `A`, for reading the [`Event::Reply`](crate::Event::Reply)
/// it gets. `ReplyId<Payload>`, the default, is an untyped question's.
///
/// # Examples
///
/// See [`Output::ask`].
pub struct ReplyId<A = Payload> {
    pub(super) id: AskId,
    pub(super) answer: PhantomData<fn() -> A>,
}

impl<A: Any + Send> ReplyId<A> {
    /// The id the [`Event::Reply`](crate::Event::Reply) carries.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::ReplyId;
    /// fn is_mine(asked: ReplyId<u32>, event: &Event) -> bool {
    ///     matches!(event, Event::Reply { id, .. } if *id == asked.id())
    /// }
    /// ```
    pub fn id(&self) -> AskId {
        self.id
    }

    /// What `event` is to this question, in one flat [`Replied`]: its
    /// answer, why there is none (the ask's [`AskError`], or
    /// [`AskError::UnexpectedType`] for an answer of another type), or
    /// another event, handed back.
    ///
    /// # Examples
    ///
    /// See [`Output::ask`].
    pub fn answer(&self, event: Event) -> Replied<A> {
        match event {
            Event::Reply { id, result, .. } if id == self.id => match result.and_then(answer_as) {
                Ok(answer) => Replied::Answered(answer),
                Err(why) => Replied::Failed(why),
            },
            other => Replied::Other(other),
        }
    }
}

/// What an event is to a question a step asked ([`ReplyId::answer`]):
/// one flat enum, so that a step matches the answer, its absence and the
/// other events in one `match`.
///
/// # Examples
///
/// ```
/// use sched::actor::{AskError, Replied};
///
/// let answered: Replied<u32> = Replied::Answered(3);
/// assert_eq!(answered.answered().map(|r| r.ok()), Some(Some(3)));
/// let lost: Replied<u32> = Replied::Failed(AskError::NoReply);
/// assert!(matches!(lost.answered(), Some(Err(AskError::NoReply))));
/// ```
#[derive(Debug)]
#[must_use = "an event that is not the answer comes back in `Replied::Other`"]
pub enum Replied<A> {
    /// The question's answer.
    Answered(A),
    /// The question's reply, without an answer: why.
    Failed(AskError),
    /// Not this question's reply: handle it yourself.
    Other(Event),
}

impl<A> Replied<A> {
    /// The answer or why there is none, if the event was this question's
    /// reply; `None` for [`Other`](Replied::Other) (whose event is
    /// dropped).
    ///
    /// # Examples
    ///
    /// See [`Replied`].
    pub fn answered(self) -> Option<Result<A, AskError>> {
        match self {
            Replied::Answered(answer) => Some(Ok(answer)),
            Replied::Failed(why) => Some(Err(why)),
            Replied::Other(_) => None,
        }
    }
}

impl<A> Clone for ReplyId<A> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<A> Copy for ReplyId<A> {}

impl<A> PartialEq for ReplyId<A> {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
    }
}

impl<A> Eq for ReplyId<A> {}

impl<A> fmt::Debug for ReplyId<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReplyId")
            .field("id", &self.id)
            .field("answer", &std::any::type_name::<A>())
            .finish()
    }
}

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
pub(super) struct ProcessAsker {
    pub(super) shared: Arc<Shared>,
    pub(super) record: RecordRef,
    pub(super) id: AskId,
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
                self.shared.after_wake(&self.record, wake);
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
            Ok(wake) => self.shared.after_wake(&self.record, wake),
            // The asker has ended; the answer is the user's value.
            Err(event) => crate::panic_guard::drop_user_value(
                event,
                self.record.pid,
                "an answer to an asker that has ended",
            ),
        }
    }
}
