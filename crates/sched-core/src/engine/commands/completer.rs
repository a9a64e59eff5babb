//! Completing a yield from any thread, at most once.

use std::any::{Any, TypeId};
use std::error::Error;
use std::fmt;
use std::marker::PhantomData;
use std::mem::MaybeUninit;

use relay::{Payload, Pid};

use crate::contract::command::Tag;
use crate::contract::error::BoxError;
use crate::contract::event::{CommandError, Event};
use crate::engine::commands::abandoned::{ended_or_killed, Abandoned};
use crate::engine::shared::Shared;
use crate::record::RecordRef;
use crate::sync::Arc;
use crate::timer::{Action, What};
use std::time::Duration;

/// The right to complete one yield of one process, with an `R`: a plain
/// command's handler gets a `Completer` (`R` is [`Payload`]), a
/// [`TypedCommand<D, R>`](crate::TypedCommand)'s a `Completer<R>`, whose
/// [`complete`](Completer::complete) takes only an `R`.
///
/// A handler receives it with the command and may complete the yield
/// inside the call, or later from any thread (a thread pool, a tokio task,
/// a timer). Completing consumes the completer, so a yield completes at most
/// once. A completer dropped without completing completes its yield with
/// [`CommandError::Dropped`] (or [`CommandError::HandlerPanicked`] if it is
/// dropped by a panic), so a process never waits on a lost completer.
///
/// A completer is bound to one process: once that process has ended,
/// completing is a no-op reported as [`CompleteError::Stale`]. Records are
/// never reused, so a stale completer can never reach another process.
/// A handler doing long work can learn that the process no longer needs
/// it, and stop: [`is_abandoned`](Completer::is_abandoned) asks,
/// [`abandoned`](Completer::abandoned) is a future that resolves when it
/// becomes true.
///
/// # Examples
///
/// ```
/// use sched::command::{Command, Completer, Rejected};
///
/// fn double(cmd: Command, mut completer: Completer) -> Result<(), Rejected> {
///     match cmd.data::<u64>() {
///         Some(&n) => {
///             let _ = completer.complete(Box::new(n * 2));
///             Ok(())
///         }
///         None => Err(completer.reject("expected a u64")),
///     }
/// }
/// ```
pub struct Completer<R = Payload> {
    inner: Option<Inner>,
    /// `reject` was called: the rejection delivers, this completer no
    /// longer does (its drop is silent, completing it is an error).
    rejected: bool,
    /// What it completes with: an `R`, handed on as a `Payload`.
    result: PhantomData<fn(R)>,
    /// The box the `R` goes into, allocated where the command was
    /// dispatched (see [`ResultBox`]); `None` for an untyped completer
    /// and a result that needs no allocation.
    boxed: Option<ResultBox<R>>,
}

/// The memory a typed completer's result is boxed in, allocated on the
/// worker that dispatched the command, where the process will read and
/// free it. A handler that completes on a thread of its own (a service
/// thread, a client's pool) then allocates nothing there for the result,
/// and the worker frees what it allocated itself: with glibc, a box made
/// on a service thread and freed on a worker went through both threads'
/// slow paths (`_int_free` was a tenth of the workers' samples in the
/// workflow benchmark's calls to service threads; with the box made on
/// the worker our CPU there fell by about a twentieth).
struct ResultBox<R>(Box<MaybeUninit<R>>);

// SAFETY: the box holds no `R` while it is a `ResultBox`, only
// uninitialised memory: `fill` consumes it to write one. Sending or
// sharing it moves or shares no `R`, so it is `Send` and `Sync` whatever
// `R` is, as the completer was before it held one (its `R` is otherwise
// only in `PhantomData<fn(R)>`).
unsafe impl<R> Send for ResultBox<R> {}
// SAFETY: as for `Send`: a shared `ResultBox` gives access to no `R`.
unsafe impl<R> Sync for ResultBox<R> {}

impl<R: Any + Send> ResultBox<R> {
    /// A box for an `R`, unless an `R` needs none: a zero-sized `R` boxes
    /// without allocating, and a `Payload` is handed on as it is.
    fn for_result() -> Option<Self> {
        (size_of::<R>() != 0 && TypeId::of::<R>() != TypeId::of::<Payload>())
            .then(|| ResultBox(Box::new_uninit()))
    }

    /// `value`, in this box.
    fn fill(self, value: R) -> Payload {
        let value: Box<R> = Box::write(self.0, value);
        value
    }
}

#[derive(Clone)]
struct Inner {
    record: RecordRef,
    shared: Arc<Shared>,
    tag: Tag,
}

impl Completer {
    pub(crate) fn new(record: RecordRef, shared: Arc<Shared>, tag: Tag) -> Self {
        Completer::untyped(record, shared, tag)
    }
}

impl<R: Any + Send> Completer<R> {
    fn untyped(record: RecordRef, shared: Arc<Shared>, tag: Tag) -> Self {
        Completer {
            inner: Some(Inner {
                record,
                shared,
                tag,
            }),
            rejected: false,
            result: PhantomData,
            boxed: None,
        }
    }

    /// The scheduler's operations (send, spawn, stats, terminate, ...)
    /// for the handler's own use, on whichever thread holds the completer.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::command::{Command, Completer, Rejected};
    ///
    /// // A handler that tells a logger process about every command.
    /// fn logged(cmd: Command, done: Completer) -> Result<(), Rejected> {
    ///     let _ = done.context().send(sched::Pid::local(1), format!("command {:?}", cmd.tag));
    ///     let _ = done.complete(cmd.data);
    ///     Ok(())
    /// }
    /// ```
    pub fn context(&self) -> &crate::engine::Context {
        let inner = self
            .inner
            .as_ref()
            .expect("a completer is only emptied by the calls that consume it");
        crate::engine::Context::of(&inner.shared)
    }

    /// The tag of the yield this completes.
    ///
    /// # Examples
    ///
    /// See [`Completer`].
    pub fn tag(&self) -> Tag {
        self.inner.as_ref().map(|i| i.tag).unwrap_or(Tag(0))
    }

    /// The PID of the process waiting for this completion.
    ///
    /// # Examples
    ///
    /// See [`Completer`].
    pub fn pid(&self) -> Pid {
        self.inner
            .as_ref()
            .map(|i| i.record.pid)
            .unwrap_or(Pid::local(0))
    }

    /// Whether the process this completer works for has ended or is being
    /// ended by force, so that completing can no longer reach it.
    ///
    /// True once the process has ended in any way (finished, failed,
    /// panicked, terminated, force-cancelled at a shutdown's deadline), and
    /// already from the moment [`terminate`](crate::engine::Context::terminate) is
    /// called on it (or a shutdown forces it), before a worker has actually
    /// ended it: a terminated process never reads another completion.
    /// A graceful request to stop (the [`Event::Cancel`] a shutdown
    /// delivers) does not count: the process may still want the result.
    ///
    /// False does not promise that a later `complete` will be delivered:
    /// the process may end in between, and `complete` then reports
    /// [`CompleteError::Stale`]. Once true it stays true. The call reads
    /// the process's state word (one atomic load).
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::command::{Command, Completer, Rejected};
    ///
    /// // Work in slices on a thread of its own, giving up once nobody waits.
    /// fn crunch(_: Command, done: Completer) -> Result<(), Rejected> {
    ///     std::thread::spawn(move || {
    ///         let mut sum = 0u64;
    ///         for slice in 0..1_000u64 {
    ///             if done.is_abandoned() {
    ///                 return;
    ///             }
    ///             sum += slice;
    ///         }
    ///         let _ = done.complete(Box::new(sum));
    ///     });
    ///     Ok(())
    /// }
    /// ```
    pub fn is_abandoned(&self) -> bool {
        self.inner
            .as_ref()
            .is_none_or(|inner| ended_or_killed(&inner.record))
    }

    /// A future that resolves once [`is_abandoned`](Completer::is_abandoned)
    /// holds: async handler code races it against its work (with
    /// `tokio::select!` or any executor's equivalent) to stop working for a
    /// process that is gone.
    ///
    /// It resolves at once if the process has already ended or been
    /// terminated when it is polled, and otherwise is woken when the
    /// process ends (a terminated process that is waiting on its yields
    /// ends as soon as a worker picks it up, which is at once). No thread,
    /// timer or polling loop is involved: the process's record keeps the
    /// waker and wakes it on the way out. The future owns what it needs
    /// (it does not borrow the completer), so it can be created before the
    /// completer is moved, or handed to another task; dropping it
    /// unregisters its waker.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use sched::command::{Command, Completer, Rejected};
    ///
    /// fn fetch(handle: tokio::runtime::Handle) -> impl Fn(Command, Completer) -> Result<(), Rejected> {
    ///     move |_cmd, done| {
    ///         handle.spawn(async move {
    ///             tokio::select! {
    ///                 // Stand-in for slow I/O.
    ///                 () = tokio::time::sleep(Duration::from_secs(60)) => {
    ///                     let _ = done.complete(Box::new("fetched"));
    ///                 }
    ///                 // The process was terminated (or ended) meanwhile:
    ///                 // stop, and let `done` drop.
    ///                 () = done.abandoned() => {}
    ///             }
    ///         });
    ///         Ok(())
    ///     }
    /// }
    /// # let _ = fetch;
    /// ```
    pub fn abandoned(&self) -> Abandoned {
        let inner = self
            .inner
            .as_ref()
            .expect("a completer is only emptied by the calls that consume it");
        Abandoned {
            record: inner.record.clone(),
            key: None,
        }
    }

    /// Completes the yield with `data`.
    ///
    /// # Errors
    ///
    /// [`CompleteError::Stale`] if the process has already ended; the data
    /// is dropped.
    ///
    /// # Examples
    ///
    /// See [`Completer`].
    pub fn complete(mut self, value: R) -> Result<(), CompleteError> {
        let payload = match self.boxed.take() {
            Some(boxed) => boxed.fill(value),
            None => relay::into_payload(value),
        };
        self.finish(Ok(payload))
    }

    /// Completes the yield with an error, delivered to the process as
    /// [`CommandError::Failed`].
    ///
    /// # Errors
    ///
    /// [`CompleteError::Stale`] if the process has already ended.
    ///
    /// # Examples
    ///
    /// ```
    /// # use sched::command::Completer;
    /// fn give_up(c: Completer) {
    ///     let _ = c.fail("disk on fire");
    /// }
    /// ```
    pub fn fail(self, error: impl Into<BoxError>) -> Result<(), CompleteError> {
        self.finish(Err(CommandError::Failed(error.into())))
    }

    /// Completes the yield with the outcome of some work: `Ok(value)` as
    /// [`complete`](Completer::complete), `Err(e)` as
    /// [`fail`](Completer::fail).
    ///
    /// # Errors
    ///
    /// As for [`complete`](Completer::complete).
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::command::{Completer, Rejected};
    ///
    /// /// The handler of a `TypedCommand<String, u64>`.
    /// fn parse(text: String, done: Completer<u64>) -> Result<(), Rejected> {
    ///     // Complete later, from another thread, with whatever the work gave.
    ///     std::thread::spawn(move || done.settle(text.trim().parse::<u64>()));
    ///     Ok(())
    /// }
    /// ```
    pub fn settle<E: Into<BoxError>>(self, result: Result<R, E>) -> Result<(), CompleteError> {
        match result {
            Ok(value) => self.complete(value),
            Err(error) => self.fail(error),
        }
    }

    /// Refuses the command from inside the handler: return the result as
    /// the handler's `Err`, and the yield completes at once with
    /// [`CommandError::Rejected`]. It borrows the completer, so it fits
    /// `map_err` and `ok_or_else` before a `?`; once it is called, the
    /// completer is spent: completing it returns
    /// [`CompleteError::Rejected`] and dropping it delivers nothing more.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::command::{Command, Completer, Rejected};
    ///
    /// fn double(cmd: Command, mut done: Completer) -> Result<(), Rejected> {
    ///     let n = *cmd.data::<u64>().ok_or_else(|| done.reject("expected a u64"))?;
    ///     let n = n.checked_mul(2).ok_or_else(|| done.reject("too large"))?;
    ///     let _ = done.complete(Box::new(n));
    ///     Ok(())
    /// }
    /// ```
    pub fn reject(&mut self, error: impl Into<BoxError>) -> Rejected {
        let inner = if self.rejected {
            None
        } else {
            self.rejected = true;
            self.inner.clone()
        };
        Rejected {
            inner,
            error: error.into(),
        }
    }

    /// Completes the yield with `data` once `delay` has passed, on the
    /// engine's timers: no thread waits, and the handler returns at once.
    /// What a sleep, a simulated service or a rate limiter needs. If the
    /// process has ended by then, the completion is a dead letter.
    ///
    /// # Errors
    ///
    /// [`CompleteError::Rejected`] if the completer was rejected (the data
    /// is dropped).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use sched::command::{Command, CommandId, Completer, Rejected};
    ///
    /// /// Sleeps for the duration the process yields.
    /// fn sleep(cmd: Command, mut done: Completer) -> Result<(), Rejected> {
    ///     let nap = *cmd.data::<Duration>().ok_or_else(|| done.reject("expected a Duration"))?;
    ///     let _ = done.complete_after(nap, Box::new(()));
    ///     Ok(())
    /// }
    ///
    /// let scheduler = sched::Scheduler::builder().handler(CommandId(1), sleep).build();
    /// # drop(scheduler);
    /// ```
    pub fn complete_after(mut self, delay: Duration, value: R) -> Result<(), CompleteError> {
        let data = match self.boxed.take() {
            Some(boxed) => boxed.fill(value),
            None => relay::into_payload(value),
        };
        let inner = self.inner.take().expect("a completer completes once");
        if self.rejected {
            crate::panic_guard::drop_user_value(data, inner.record.pid, "a rejected completion");
            return Err(CompleteError::Rejected {
                pid: inner.record.pid,
                tag: inner.tag,
            });
        }
        let at = inner.shared.clock.after(delay);
        let action = Action {
            record: inner.record,
            what: What::Complete(Box::new((inner.tag, data))),
        };
        inner.shared.timers.set_timer(&inner.shared, at, action);
        Ok(())
    }

    fn finish(mut self, result: Result<Payload, CommandError>) -> Result<(), CompleteError> {
        let inner = self.inner.take().expect("a completer completes once");
        if self.rejected {
            return Err(CompleteError::Rejected {
                pid: inner.record.pid,
                tag: inner.tag,
            });
        }
        inner.deliver(result)
    }
}

impl Inner {
    fn deliver(self, result: Result<Payload, CommandError>) -> Result<(), CompleteError> {
        let Some(result) = self
            .shared
            .intercept_completion(&self.record, self.tag, result)
        else {
            // Held by a simulation.
            return Ok(());
        };
        let event = Event::Completion {
            tag: self.tag,
            result,
        };
        match self.record.deliver(event) {
            Ok(wake) => {
                self.shared.after_wake(&self.record, wake);
                Ok(())
            }
            Err(_) => Err(CompleteError::Stale {
                pid: self.record.pid,
                tag: self.tag,
            }),
        }
    }
}

impl<R> Completer<R> {
    /// The same completer, completing with an `S` (boxed, when it needs a
    /// box, in memory allocated here: see [`ResultBox`]).
    pub(crate) fn retype<S: Any + Send>(mut self) -> Completer<S> {
        Completer {
            inner: self.inner.take(),
            rejected: self.rejected,
            result: PhantomData,
            boxed: ResultBox::for_result(),
        }
    }
}

impl<R> Drop for Completer<R> {
    fn drop(&mut self) {
        if self.rejected {
            return;
        }
        if let Some(inner) = self.inner.take() {
            let error = if std::thread::panicking() {
                CommandError::HandlerPanicked {
                    message: "the completer was dropped while its thread panicked".into(),
                }
            } else {
                CommandError::Dropped
            };
            // A stale completer has nobody to tell.
            let _ = inner.deliver(Err(error));
        }
    }
}

impl<R: Any + Send> fmt::Debug for Completer<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Completer")
            .field("pid", &self.pid())
            .field("tag", &self.tag())
            .field("result", &std::any::type_name::<R>())
            .finish()
    }
}

/// A handler's refusal of a command, made by [`Completer::reject`]. The
/// yield completes at once with [`CommandError::Rejected`].
///
/// # Examples
///
/// See [`Completer`].
pub struct Rejected {
    inner: Option<Inner>,
    error: BoxError,
}

impl Rejected {
    /// The handler's error.
    ///
    /// # Examples
    ///
    /// See [`Completer`].
    pub fn error(&self) -> &(dyn Error + Send + Sync + 'static) {
        &*self.error
    }
}

/// Dropping a rejection delivers it: dispatch drops the handler's `Err`.
impl Drop for Rejected {
    fn drop(&mut self) {
        if let Some(inner) = self.inner.take() {
            let error = std::mem::replace(&mut self.error, Box::from(""));
            let _ = inner.deliver(Err(CommandError::Rejected(error)));
        }
    }
}

impl fmt::Debug for Rejected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rejected")
            .field("error", &self.error.to_string())
            .finish()
    }
}

/// Completing through a [`Completer`] failed.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use sched::command::CompleteError;
/// let e = CompleteError::Stale { pid: sched::Pid::local(4), tag: Tag(2) };
/// assert_eq!(e.to_string(), "process <0.4> has ended; its tag 2 cannot be completed");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CompleteError {
    /// The process the completer belongs to has ended.
    Stale {
        /// The process.
        pid: Pid,
        /// The yield's tag.
        tag: Tag,
    },
    /// The handler rejected the command with this completer
    /// ([`Completer::reject`]): the process got the rejection.
    Rejected {
        /// The process.
        pid: Pid,
        /// The yield's tag.
        tag: Tag,
    },
}

impl fmt::Display for CompleteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CompleteError::Stale { pid, tag } => {
                write!(f, "process {pid} has ended; its {tag} cannot be completed")
            }
            CompleteError::Rejected { pid, tag } => {
                write!(
                    f,
                    "the command of process {pid} with {tag} was rejected; it cannot be completed"
                )
            }
        }
    }
}

impl Error for CompleteError {}
