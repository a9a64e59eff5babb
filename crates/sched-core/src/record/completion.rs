//! The handle that waits for a submitted process's outcome.

use std::any::{type_name, Any};
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use relay::{Payload, Pid};

use super::slot::{ResultSlot, SlotState};
use super::RecordRef;
use crate::contract::error::UnexpectedValue;
use crate::contract::outcome::{ExitError, Outcome};

/// A handle to a submitted process: its PID and, once it ends, its outcome.
///
/// The outcome can be taken once: by blocking ([`wait`](Completion::wait),
/// [`wait_timeout`](Completion::wait_timeout)), without blocking
/// ([`try_take`](Completion::try_take)), or by awaiting the handle, which is
/// a [`Future`] resolving to the process's [`Outcome`] on any executor
/// (see the `Future` implementation below). Any take after the first gives
/// `Err(ExitError::AlreadyTaken)`. Dropping the handle does not affect the
/// process.
///
/// # Examples
///
/// See [`Engine`](crate::Engine) for the blocking calls;
/// from async code:
///
/// ```
/// use sched::prelude::*;
///
/// struct Answer;
///
/// impl Process for Answer {
///     type Done = u32;
///     fn init(&mut self, _: &InitContext, _: &str, _: Payload) -> Result<(), InitError> {
///         Ok(())
///     }
///     fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
///         out.finish(42u32);
///         Ok(())
///     }
///     fn close(&mut self) {}
/// }
///
/// let scheduler = Scheduler::builder().workers(1).build();
/// scheduler.start();
/// let completion = scheduler.spawn(Answer).unwrap();
///
/// let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
/// let outcome = runtime.block_on(completion);
/// assert_eq!(outcome.unwrap(), 42);
/// # scheduler.shutdown(std::time::Duration::from_secs(1));
/// ```
pub struct Completion<T = Payload> {
    record: RecordRef,
    // `fn() -> T`: the handle hands a `T` out, it does not hold one, so it
    // is `Send`, `Sync` and `Unpin` whatever `T` is.
    output: PhantomData<fn() -> T>,
}

impl Completion {
    pub(crate) fn new(record: RecordRef) -> Self {
        Completion {
            record,
            output: PhantomData,
        }
    }

    /// This handle, reading the done value as a `T`: `wait`, `try_take`,
    /// `wait_timeout` and awaiting give `Result<T, ExitError>`, with no
    /// downcast in the caller's code. A process that finished with a value
    /// of another type gives [`ExitError::UnexpectedType`], which hands the
    /// value back.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    ///
    /// struct Answer;
    ///
    /// impl Process for Answer {
    ///     type Done = Payload;
    ///     fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
    ///         out.finish(42u32);
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let scheduler = Scheduler::builder().workers(1).build();
    /// scheduler.start();
    /// let answer: Completion<u32> = scheduler.spawn(Answer)?.typed();
    /// assert_eq!(answer.wait()?, 42);
    ///
    /// let wrong = scheduler.spawn(Answer)?.typed::<String>();
    /// match wrong.wait() {
    ///     Err(ExitError::UnexpectedType(mut value)) => assert!(value.is::<u32>()),
    ///     other => panic!("{other:?}"),
    /// }
    /// # scheduler.shutdown(std::time::Duration::from_secs(1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn typed<T: Any + Send>(self) -> Completion<T> {
        self.retype()
    }
}

impl<T> Completion<T> {
    /// This handle, reading the done value as a `U` (the engine's spawn
    /// makes every handle untyped, then gives it its process's `Done`).
    pub(crate) fn retype<U>(self) -> Completion<U> {
        let this = std::mem::ManuallyDrop::new(self);
        // SAFETY: `this` is never dropped, so the record's reference count
        // moves from it into the new handle exactly once.
        let record = unsafe { std::ptr::read(&this.record) };
        Completion {
            record,
            output: PhantomData,
        }
    }
}

/// Reads a done value as a `T`; a `T` of `Payload` is the value itself.
fn cast<T: Any>(payload: Payload) -> Result<T, ExitError> {
    // The untyped handle's `T` is `Payload`: hand the box over as it is
    // (downcasting the box to `Payload` would look inside it).
    let mut whole = Some(payload);
    if let Some(itself) = (&mut whole as &mut dyn Any).downcast_mut::<Option<T>>() {
        return Ok(itself.take().expect("the option was just filled"));
    }
    let payload = whole.expect("the option was not taken");
    payload
        .downcast::<T>()
        .map(|value| *value)
        .map_err(|value| ExitError::UnexpectedType(UnexpectedValue::new(type_name::<T>(), value)))
}

fn cast_outcome<T: Any>(outcome: Outcome) -> Result<T, ExitError> {
    outcome.and_then(cast)
}

impl<T: Any + Send> Completion<T> {
    /// The process's PID.
    ///
    /// # Examples
    ///
    /// See [`Engine`](crate::Engine).
    pub fn pid(&self) -> Pid {
        self.record.pid
    }

    /// The typed address of the process, for a process `P` that
    /// [`Accepts`](crate::Accepts) one message type: a send through it
    /// takes only a `P::Message`. Name the process this completion is of:
    /// the address is made from the PID, not checked against the process.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    ///
    /// struct Counter(u64);
    /// impl Accepts for Counter {
    ///     type Message = u64;
    /// }
    /// impl Process for Counter {
    ///     type Done = u64;
    ///     fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
    ///         for event in events.typed::<Self>() {
    ///             let Event::Message(n) = event else { continue };
    ///             self.0 += n;
    ///             if self.0 >= 42 {
    ///                 out.finish(self.0);
    ///             }
    ///         }
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let scheduler = Scheduler::builder().workers(1).build();
    /// scheduler.start();
    /// let counter = scheduler.spawn(Counter(0))?;
    /// let addr: Addr<u64> = counter.addr::<Counter>();
    /// scheduler.send(addr, 40)?;
    /// scheduler.send(addr, 2)?;
    /// // scheduler.send(addr, "two")?; // does not compile: `addr` takes a `u64`
    /// assert_eq!(counter.wait()?, 42);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn addr<P: crate::Accepts>(&self) -> relay::Addr<P::Message> {
        relay::Addr::from_pid(self.pid())
    }

    /// Whether the process has ended and its outcome not yet been taken.
    ///
    /// # Examples
    ///
    /// See [`Engine`](crate::Engine).
    pub fn is_finished(&self) -> bool {
        self.record.slot.is_ready(RecordRef::spare(&self.record))
    }

    /// Blocks until the process ends and returns its outcome, or
    /// `Err(ExitError::AlreadyTaken)` at once if it was already taken
    /// through this handle.
    ///
    /// # Examples
    ///
    /// See [`Engine`](crate::Engine).
    pub fn wait(self) -> Result<T, ExitError> {
        if let Some(kept) = self.take_kept() {
            return kept;
        }
        let slot = self.record.slot.locked(RecordRef::spare(&self.record));
        let mut inner = slot.inner.lock();
        loop {
            if let Some(outcome) = ResultSlot::take(&mut inner.state) {
                drop(inner);
                return cast_outcome(outcome);
            }
            if matches!(inner.state, SlotState::Taken) {
                return Err(ExitError::AlreadyTaken);
            }
            inner = slot.ready.wait(inner);
        }
    }

    /// Waits up to `timeout` for the outcome: as [`wait`](Completion::wait),
    /// or `Err(ExitError::TimedOut)` if the process is still running then
    /// (the handle can wait again; see [`ExitError::is_timeout`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use std::time::Duration;
    ///
    /// /// Finishes with the first message it gets.
    /// struct First;
    /// impl Accepts for First {
    ///     type Message = u32;
    /// }
    /// impl Process for First {
    ///     type Done = u32;
    ///     fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
    ///         if let Some(Event::Message(n)) = events.typed::<Self>().next() {
    ///             out.finish(n);
    ///         }
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let scheduler = Scheduler::builder().workers(1).build();
    /// scheduler.start();
    /// let mut first = scheduler.spawn(First)?;
    /// assert!(matches!(first.wait_timeout(Duration::from_millis(5)), Err(ExitError::TimedOut)));
    /// scheduler.send(first.addr::<First>(), 7)?;
    /// assert_eq!(first.wait_timeout(Duration::from_secs(5))?, 7);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn wait_timeout(&mut self, timeout: Duration) -> Result<T, ExitError> {
        if let Some(kept) = self.take_kept() {
            return kept;
        }
        let deadline = crate::sync::deadline_after(timeout);
        let slot = self.record.slot.locked(RecordRef::spare(&self.record));
        let mut inner = slot.inner.lock();
        loop {
            if let Some(outcome) = ResultSlot::take(&mut inner.state) {
                drop(inner);
                return cast_outcome(outcome);
            }
            if matches!(inner.state, SlotState::Taken) {
                return Err(ExitError::AlreadyTaken);
            }
            if Instant::now() >= deadline {
                return Err(ExitError::TimedOut);
            }
            let (guard, timed_out) = slot.ready.wait_until(inner, deadline);
            inner = guard;
            if timed_out {
                let outcome = ResultSlot::take(&mut inner.state);
                drop(inner);
                return outcome.map_or(Err(ExitError::TimedOut), cast_outcome);
            }
        }
    }

    /// The outcome if the process has ended, without blocking: `None` while
    /// it runs, `Some(Err(ExitError::AlreadyTaken))` once the outcome was
    /// taken through this handle.
    ///
    /// # Examples
    ///
    /// See [`Engine`](crate::Engine).
    pub fn try_take(&mut self) -> Option<Result<T, ExitError>> {
        if let Some(kept) = self.take_kept() {
            return Some(kept);
        }
        let outcome = {
            let mut inner = self
                .record
                .slot
                .locked(RecordRef::spare(&self.record))
                .inner
                .lock();
            if matches!(inner.state, SlotState::Taken) {
                return Some(Err(ExitError::AlreadyTaken));
            }
            ResultSlot::take(&mut inner.state)
        };
        outcome.map(cast_outcome)
    }

    /// The outcome if the end kept it in the record's room (see
    /// `slot.rs`), taken without the lock; `Err(AlreadyTaken)` if it was
    /// taken from there before; `None` if none was kept there.
    fn take_kept(&self) -> Option<Result<T, ExitError>> {
        let kept = self.record.slot.take_kept(RecordRef::spare(&self.record))?;
        Some(kept.map_or(Err(ExitError::AlreadyTaken), cast_outcome))
    }
}

/// Awaiting a `Completion` takes the outcome, as [`wait`](Completion::wait)
/// does, without blocking a thread: the slot keeps the awaiting task's
/// [`Waker`](std::task::Waker) and wakes it when the process ends. Any
/// executor works (no runtime, thread or timer of the scheduler's is
/// involved).
///
/// The handle is [`Unpin`], so `(&mut completion).await` and
/// `tokio::time::timeout(d, &mut completion)` work and leave the handle
/// usable: a timed-out await can be retried, or followed by a blocking
/// wait. Once the outcome has been taken, by any of the ways, awaiting
/// again resolves at once to `Err(ExitError::AlreadyTaken)`; it never
/// panics. Dropping a pending await is fine: its waker stays registered
/// (harmlessly) until the next poll, the outcome or the handle's drop.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use sched::prelude::*;
///
/// /// Waits for one message, then ends with it.
/// struct Echo;
///
/// impl Process for Echo {
///     type Done = Payload;
///     fn init(&mut self, _: &InitContext, _: &str, _: Payload) -> Result<(), InitError> {
///         Ok(())
///     }
///     fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
///         for event in events {
///             if let sched::Event::Message(package) = event {
///                 out.finish(package.into_payload());
///             }
///         }
///         Ok(())
///     }
///     fn close(&mut self) {}
/// }
///
/// let scheduler = Scheduler::builder().workers(1).build();
/// scheduler.start();
/// let mut echo = scheduler.spawn(Echo).unwrap();
///
/// let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
/// runtime.block_on(async {
///     // Nothing was sent yet: the await times out and the handle stays usable.
///     let early = tokio::time::timeout(Duration::from_millis(10), &mut echo).await;
///     assert!(early.is_err());
///
///     scheduler.send(echo.pid(), "hello").unwrap();
///     let outcome = (&mut echo).await.unwrap();
///     assert_eq!(*outcome.downcast::<&str>().unwrap(), "hello");
///
///     // The outcome is taken: a second await says so.
///     assert!(matches!((&mut echo).await, Err(ExitError::AlreadyTaken)));
/// });
/// # scheduler.shutdown(Duration::from_secs(1));
/// ```
impl<T: Any + Send> Future for Completion<T> {
    type Output = Result<T, ExitError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self
            .record
            .slot
            .poll_take(cx.waker(), RecordRef::spare(&self.record))
        {
            Some(outcome) => Poll::Ready(cast_outcome(outcome)),
            None => Poll::Pending,
        }
    }
}

impl<T> Drop for Completion<T> {
    /// Frees the outcome if it was never taken, and tells the record not to
    /// keep one that arrives later: the record itself may live on a while
    /// (in a worker's route cache), its result should not.
    fn drop(&mut self) {
        // Dropped here, outside the slot's lock, on the handle's thread.
        let (outcome, waker) = self.record.slot.abandon(RecordRef::spare(&self.record));
        drop(waker);
        drop(outcome);
    }
}

impl<T> fmt::Debug for Completion<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Completion")
            .field("pid", &self.record.pid)
            .field(
                "finished",
                &self.record.slot.is_ready(RecordRef::spare(&self.record)),
            )
            .finish()
    }
}
