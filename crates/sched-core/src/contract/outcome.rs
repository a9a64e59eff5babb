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
    /// another type than a typed handle ([`Completion::typed`](crate::Completion::typed))
    /// reads: the process finished, and this is its done value.
    UnexpectedType(UnexpectedValue),
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
