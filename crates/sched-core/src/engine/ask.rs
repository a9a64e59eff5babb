//! `ask`: send a request and get one answer, from outside the engine (a
//! [`Reply`] handle) or from a step (an [`Event::Reply`], with a timeout
//! from the engine's timers).

use std::future::Future;
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
use crate::contract::reply::{Answer, AskError, AskId, ReplyTo, Request};
use crate::contract::step_engine::StepAsk;
use crate::contract::timer_id::TimerId;
use crate::record::Record;
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
    taken: bool,
    waker: Option<Waker>,
}

impl ReplySlot {
    pub(crate) fn set(&self, answer: Result<Payload, AskError>) {
        let waker = {
            let mut state = self.state.lock();
            if state.answer.is_some() || state.taken {
                return;
            }
            state.answer = Some(answer);
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
/// let squarer = scheduler.spawn(Squarer, "run", ())?;
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
    fn ask(
        &self,
        from: Pid,
        to: Pid,
        payload: Payload,
        asker: StdArc<dyn Answer>,
    ) -> Result<(), SendError> {
        let Some(record) = self.processes.get(to) else {
            return Err(SendError::unknown_target(Package::from_payload(
                from, to, payload,
            )));
        };
        let event = Event::Request(Request::new(
            Package::from_payload(from, to, payload),
            ReplyTo::new(asker),
        ));
        match record.deliver(event) {
            Ok(wake) => {
                self.after_wake_owned(record, wake);
                Ok(())
            }
            Err(Event::Request(request)) => {
                let (request, reply) = request.into_parts();
                reply.forget();
                Err(SendError::closed(request))
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
        self.shared()
            .ask(Pid::OUTSIDE, to, relay::into_payload(payload), asker)?;
        Ok(Reply { slot })
    }
}

impl Output<'_> {
    /// Sends `payload` to `to` as a request and returns its id: the answer
    /// arrives as [`Event::Reply`](crate::Event::Reply) with that id and
    /// `Ok(answer)`, or with `Err(AskError::Timeout)` if `timeout` passes
    /// first, or `Err(AskError::NoReply)` if the process drops the request.
    /// Exactly one `Reply` event per ask; an answer after the timeout is
    /// dropped. The ask belongs to this process: if it ends first, nothing
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
        let at = Instant::now()
            .checked_add(timeout)
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(100 * 365 * 24 * 3600));
        let (id, timer) = self.engine.ask(to, relay::into_payload(payload), at)?;
        self.with_extras(|extras| {
            extras.timers.push(timer);
            extras.asks.push((id, timer));
        });
        Ok(id)
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
}

/// A process that asked from a step: told with `Event::Reply`.
struct ProcessAsker {
    shared: Arc<Shared>,
    record: Arc<Record>,
    id: AskId,
}

impl Answer for ProcessAsker {
    fn asker(&self) -> Pid {
        self.record.pid
    }

    fn answer(&self, result: Result<Payload, AskError>) {
        let event = Event::Reply {
            id: self.id,
            result,
        };
        match self.record.deliver(event) {
            Ok(wake) => self.shared.after_wake_owned(Arc::clone(&self.record), wake),
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
        timeout_at: Instant,
    ) -> Result<(AskId, TimerId), SendError> {
        let id = AskId(super::monitors::next_id());
        let asker = StdArc::new(ProcessAsker {
            shared: Arc::clone(self.shared),
            record: Arc::clone(self.record),
            id,
        });
        self.shared.ask(self.record.pid, to, question, asker)?;
        let timer = self.shared.set_timer(
            timeout_at,
            Action {
                record: Arc::clone(self.record),
                what: What::AskTimeout(id),
            },
        );
        Ok((id, timer))
    }
}
