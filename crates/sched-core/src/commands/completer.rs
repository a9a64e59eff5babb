//! Completing a yield from any thread, at most once.

use std::error::Error;
use std::fmt;

use relay::{Payload, Pid};

use crate::contract::command::Tag;
use crate::contract::event::{BoxError, CommandError, Event};
use crate::engine::shared::Shared;
use crate::record::Record;
use crate::sync::Arc;

/// The right to complete one yield of one process.
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
///
/// # Examples
///
/// ```
/// use sched::{Command, Completer, Rejected};
///
/// fn double(cmd: Command, completer: Completer) -> Result<(), Rejected> {
///     match cmd.data::<u64>() {
///         Some(&n) => {
///             let _ = completer.complete(Box::new(n * 2));
///             Ok(())
///         }
///         None => Err(completer.reject("expected a u64")),
///     }
/// }
/// ```
pub struct Completer {
    inner: Option<Inner>,
}

struct Inner {
    record: Arc<Record>,
    shared: Arc<Shared>,
    tag: Tag,
}

impl Completer {
    pub(crate) fn new(record: Arc<Record>, shared: Arc<Shared>, tag: Tag) -> Self {
        Completer {
            inner: Some(Inner {
                record,
                shared,
                tag,
            }),
        }
    }

    /// The scheduler's operations (send, spawn, stats, terminate, ...)
    /// for the handler's own use, on whichever thread holds the completer.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::{Command, Completer, Rejected};
    ///
    /// // A handler that tells a logger process about every command.
    /// fn logged(cmd: Command, done: Completer) -> Result<(), Rejected> {
    ///     let _ = done.context().post(sched::Pid::local(1), format!("command {:?}", cmd.tag));
    ///     let _ = done.complete(cmd.data);
    ///     Ok(())
    /// }
    /// ```
    pub fn context(&self) -> &crate::Context {
        let inner = self
            .inner
            .as_ref()
            .expect("a completer is only emptied by the calls that consume it");
        crate::Context::of(&inner.shared)
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
    pub fn complete(self, data: Payload) -> Result<(), CompleteError> {
        self.finish(Ok(data))
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
    /// # use sched::Completer;
    /// fn give_up(c: Completer) {
    ///     let _ = c.fail("disk on fire");
    /// }
    /// ```
    pub fn fail(self, error: impl Into<BoxError>) -> Result<(), CompleteError> {
        self.finish(Err(CommandError::Failed(error.into())))
    }

    /// Refuses the command from inside the handler: return the result as
    /// the handler's `Err`, and the yield completes at once with
    /// [`CommandError::Rejected`].
    ///
    /// # Examples
    ///
    /// See [`Completer`].
    pub fn reject(mut self, error: impl Into<BoxError>) -> Rejected {
        Rejected {
            inner: self.inner.take(),
            error: error.into(),
        }
    }

    fn finish(mut self, result: Result<Payload, CommandError>) -> Result<(), CompleteError> {
        let inner = self.inner.take().expect("a completer completes once");
        inner.deliver(result)
    }
}

impl Inner {
    fn deliver(self, result: Result<Payload, CommandError>) -> Result<(), CompleteError> {
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

impl Drop for Completer {
    fn drop(&mut self) {
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

impl fmt::Debug for Completer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Completer")
            .field("pid", &self.pid())
            .field("tag", &self.tag())
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
/// use sched::{CompleteError, Tag};
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
}

impl fmt::Display for CompleteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CompleteError::Stale { pid, tag } => {
                write!(f, "process {pid} has ended; its {tag} cannot be completed")
            }
        }
    }
}

impl Error for CompleteError {}
