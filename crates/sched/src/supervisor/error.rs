//! Why a supervisor ended with an error.

use std::error::Error;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use sched_core::BoxError;

/// Why a [`Supervisor`](crate::Supervisor) gave up. It ends with
/// [`ExitError::Step`](crate::ExitError::Step) carrying this error (boxed),
/// after all its children have ended.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use sched::process::Outcome;
/// use sched::supervisor::SupervisorError;
///
/// fn gave_up(outcome: &Outcome) -> bool {
///     matches!(outcome, Err(ExitError::Step(e))
///         if matches!(e.downcast_ref::<SupervisorError>(), Some(SupervisorError::IntensityExceeded { .. })))
/// }
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum SupervisorError {
    /// More restarts than the intensity allows happened within its period.
    IntensityExceeded {
        /// The restarts counted within the period, the last one included
        /// (one more than the limit).
        restarts: u32,
        /// The period.
        within: Duration,
        /// The child whose end (or failed restart) went over the limit.
        child: Arc<str>,
    },
    /// A child could not be started at the supervisor's first step (its
    /// `init` failed, the start hook refused it, its registered name was
    /// taken, ...).
    StartFailed {
        /// The child.
        child: Arc<str>,
        /// Why it could not start.
        error: BoxError,
    },
}

impl fmt::Display for SupervisorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SupervisorError::IntensityExceeded {
                restarts,
                within,
                child,
            } => write!(
                f,
                "restart intensity exceeded: {restarts} restarts within {within:?} \
                 (the last for child {child:?})"
            ),
            SupervisorError::StartFailed { child, error } => {
                write!(f, "child {child:?} failed to start: {error}")
            }
        }
    }
}

impl Error for SupervisorError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            SupervisorError::StartFailed { error, .. } => Some(&**error),
            SupervisorError::IntensityExceeded { .. } => None,
        }
    }
}
