//! How a process ended.

use std::error::Error;
use std::fmt;

use relay::Payload;

use crate::contract::down::ExitReason;
use crate::contract::error::{BoxError, UnexpectedValue, UpgradeError};

/// How a process ended: its done value, or why it did not finish.
pub type Outcome = Result<Payload, ExitError>;

/// Why a process ended without a done value.
///
/// # Examples
///
/// ```
/// use sched::ExitError;
/// assert_eq!(ExitError::Terminated.to_string(), "the process was terminated");
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum ExitError {
    /// `step` returned this error.
    Step(BoxError),
    /// The process was terminated by `terminate(pid)`.
    Terminated,
    /// The scheduler shut down and the process had not finished by the
    /// deadline.
    Cancelled,
    /// `step` (or `close`) panicked.
    Panicked {
        /// The panic message.
        message: String,
    },
    /// A process linked to this one ended abnormally, and this one did not
    /// trap exits (see [`Output::link`](crate::Output::link)).
    Linked {
        /// The linked process that ended.
        pid: relay::Pid,
        /// How it ended.
        reason: ExitReason,
    },
    /// A step asked for an upgrade ([`Output::upgrade`](crate::Output::upgrade))
    /// that could not be carried out: the old process was closed and the
    /// new one did not take over.
    Upgrade(UpgradeError),
    /// Not how the process ended, but that this handle no longer has it:
    /// the outcome was already taken through it (`wait_timeout` or
    /// `try_take` returned it before).
    AlreadyTaken,
    /// Not how the process ended, but that it finished with a value of
    /// another type than its handle reads (it called `finish` with another
    /// type than its [`Done`](crate::Process::Done), or an upgrade
    /// replaced it with a process of another `Done`): the process
    /// finished, and this is its done value.
    UnexpectedType(UnexpectedValue),
    /// Not how the process ended, but that it had not ended when
    /// [`wait_timeout`](crate::Completion::wait_timeout) gave up: the
    /// process runs on, and the handle can wait again.
    TimedOut,
}

impl ExitError {
    /// Whether this is [`ExitError::TimedOut`]: the wait gave up, the
    /// process runs on. Every handle's error has this test
    /// (`AskError::is_timeout` for a reply, `TimedOut` for a monitor), so
    /// a wait reads the same way whatever it waits for.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use std::time::Duration;
    ///
    /// struct Forever;
    /// impl Process for Forever {
    ///     type Done = ();
    ///     fn step(&mut self, _: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let scheduler = Scheduler::builder().workers(1).build();
    /// scheduler.start();
    /// let mut forever = scheduler.spawn(Forever)?;
    /// match forever.wait_timeout(Duration::from_millis(5)) {
    ///     Ok(()) => unreachable!("it never finishes"),
    ///     Err(e) if e.is_timeout() => {} // still running: wait again later
    ///     Err(e) => return Err(e.into()),
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn is_timeout(&self) -> bool {
        matches!(self, ExitError::TimedOut)
    }
}

impl fmt::Display for ExitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExitError::Step(e) => write!(f, "the step failed: {e}"),
            ExitError::Terminated => f.write_str("the process was terminated"),
            ExitError::Cancelled => f.write_str("the process was cancelled by shutdown"),
            ExitError::Panicked { message } => write!(f, "the process panicked: {message}"),
            ExitError::Upgrade(e) => write!(f, "the upgrade failed: {e}"),
            ExitError::Linked { pid, reason } => {
                write!(f, "the linked process {pid} ended ({reason})")
            }
            ExitError::AlreadyTaken => {
                f.write_str("the outcome was already taken through this handle")
            }
            ExitError::UnexpectedType(value) => {
                write!(f, "the process finished with {value}")
            }
            ExitError::TimedOut => f.write_str("the process had not ended when the wait gave up"),
        }
    }
}

impl Error for ExitError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            ExitError::Step(e) => Some(&**e),
            ExitError::Upgrade(e) => Some(e),
            _ => None,
        }
    }
}

impl ExitReason {
    /// How `outcome` is told to monitors and linked processes.
    pub(crate) fn of(outcome: &Outcome) -> ExitReason {
        match outcome {
            Ok(_) => ExitReason::Normal,
            Err(ExitError::Terminated) => ExitReason::Terminated,
            Err(ExitError::Cancelled) => ExitReason::Cancelled,
            Err(ExitError::Panicked { .. }) => ExitReason::Panicked,
            Err(ExitError::Linked { .. }) => ExitReason::Linked,
            Err(_) => ExitReason::Error,
        }
    }
}

/// What an end says beyond its [`ExitReason`], for monitors and linked
/// processes: the panic message, or the error's text. `None` for the
/// other ends (nothing to format, nothing allocated).
pub(crate) fn detail_of(outcome: &Outcome) -> Option<std::sync::Arc<str>> {
    match outcome {
        Err(ExitError::Panicked { message }) => Some(message.as_str().into()),
        Err(ExitError::Step(error)) => Some(error.to_string().into()),
        Err(ExitError::Upgrade(error)) => Some(error.to_string().into()),
        _ => None,
    }
}
