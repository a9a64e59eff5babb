//! Errors of the engine's operations.

use std::error::Error;
use std::fmt;

use relay::Pid;

/// A boxed error that can cross threads.
pub type BoxError = Box<dyn Error + Send + Sync + 'static>;

/// Why a submission failed. Nothing was scheduled or registered.
///
/// # Examples
///
/// ```
/// use sched::process::SubmitError;
/// let e = SubmitError::TooManyProcesses { max: 2 };
/// assert_eq!(e.to_string(), "the scheduler already runs its maximum of 2 live processes");
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum SubmitError {
    /// The scheduler is shutting down or has shut down.
    ShuttingDown,
    /// As many processes as the configured maximum are live.
    TooManyProcesses {
        /// The configured maximum.
        max: usize,
    },
    /// A live process already uses this PID; it keeps its route.
    DuplicatePid(Pid),
    /// The process's `init` failed (or panicked); `close` is not called.
    Init {
        /// The PID it was submitted under.
        pid: Pid,
        /// What `init` reported.
        error: InitError,
    },
    /// The `on_start` hook refused the process (or panicked). The process
    /// had been initialised, so its `close` ran.
    Rejected {
        /// The PID it was submitted under.
        pid: Pid,
        /// What the hook reported.
        error: BoxError,
    },
    /// A spawn found no free PID: the node's ids are exhausted.
    PidsExhausted {
        /// The node whose ids ran out.
        node: u32,
    },
    /// The process's `init` chose a group the scheduler does not have
    /// (see [`InitContext::set_group`](crate::InitContext::set_group)). The
    /// process had been initialised, so its `close` ran.
    UnknownGroup {
        /// The PID it was submitted under.
        pid: Pid,
        /// The group it chose.
        group: crate::Group,
    },
}

impl fmt::Display for SubmitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SubmitError::PidsExhausted { node } => {
                write!(f, "no free PID is left on node {node}")
            }
            SubmitError::ShuttingDown => f.write_str("the scheduler is shutting down"),
            SubmitError::TooManyProcesses { max } => {
                write!(
                    f,
                    "the scheduler already runs its maximum of {max} live processes"
                )
            }
            SubmitError::DuplicatePid(pid) => write!(f, "PID {pid} is already in use"),
            SubmitError::Init { pid, error } => write!(f, "could not start {pid}: {error}"),
            SubmitError::Rejected { pid, error } => {
                write!(f, "the on_start hook rejected {pid}: {error}")
            }
            SubmitError::UnknownGroup { pid, group } => {
                write!(f, "{pid} chose {group}, which the scheduler does not have")
            }
        }
    }
}

impl Error for SubmitError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            SubmitError::Init { error, .. } => Some(error),
            SubmitError::Rejected { error, .. } => Some(&**error),
            _ => None,
        }
    }
}

/// Why `terminate` failed.
///
/// # Examples
///
/// ```
/// use sched::process::TerminateError;
/// let e = TerminateError::NotFound(sched::Pid::local(9));
/// assert_eq!(e.to_string(), "no live process has PID <0.9>");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TerminateError {
    /// No live process has this PID, and the engine knows of none that
    /// had it: never handed out here, of another node when the engine has
    /// no remote transport, or a PID a caller chose whose process ended
    /// (those leave no trace).
    NotFound(Pid),
    /// The process that had this PID has ended (the engine handed the PID
    /// out, and never hands it out again).
    Ended(Pid),
    /// The PID is of another node, and the request could not be sent to
    /// it (the node is lost or unknown to the transport).
    Unreachable(Pid),
}

impl fmt::Display for TerminateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TerminateError::NotFound(pid) => write!(f, "no live process has PID {pid}"),
            TerminateError::Ended(pid) => write!(f, "the process {pid} has already ended"),
            TerminateError::Unreachable(pid) => {
                write!(f, "the node of process {pid} cannot be reached")
            }
        }
    }
}

impl Error for TerminateError {}

/// Why [`Context::upgrade`](crate::Context::upgrade) did not order the
/// upgrade. In every case the running process is untouched and the new one
/// was dropped (its `close` not called: it never took over).
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use sched::process::UpgradeRequestError;
///
/// let e = UpgradeRequestError::Pending(Pid::local(4));
/// assert_eq!(e.to_string(), "an upgrade of <0.4> ordered earlier has not been carried out yet");
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum UpgradeRequestError {
    /// No live process has this PID on this scheduler, and the engine knows
    /// of none that had it: it never existed here, is on another node, or
    /// was a PID a caller chose whose process ended.
    NoProcess(Pid),
    /// The process that had this PID has ended (before the order, or
    /// before the order reached it).
    Ended(Pid),
    /// The new process's `init` failed (or panicked:
    /// [`InitError::Panicked`]).
    Init {
        /// The process that keeps running.
        pid: Pid,
        /// What `init` said.
        error: InitError,
    },
    /// An upgrade of this process ordered earlier (from outside its steps)
    /// has not been carried out yet; try again after it has.
    Pending(Pid),
    /// Shutdown has begun: no new process starts.
    ShuttingDown,
}

impl fmt::Display for UpgradeRequestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UpgradeRequestError::NoProcess(pid) => write!(f, "no live process has PID {pid}"),
            UpgradeRequestError::Ended(pid) => write!(f, "the process {pid} has already ended"),
            UpgradeRequestError::Init { pid, error } => {
                write!(
                    f,
                    "the new process for {pid} did not start ({error}); the old one keeps running"
                )
            }
            UpgradeRequestError::Pending(pid) => write!(
                f,
                "an upgrade of {pid} ordered earlier has not been carried out yet"
            ),
            UpgradeRequestError::ShuttingDown => f.write_str("the scheduler is shutting down"),
        }
    }
}

impl Error for UpgradeRequestError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            UpgradeRequestError::Init { error, .. } => Some(error),
            _ => None,
        }
    }
}

/// Why `init` failed.
///
/// # Examples
///
/// ```
/// use sched::InitError;
/// let e = InitError::unknown_method("fly");
/// assert_eq!(e.to_string(), "unknown entry method `fly`");
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum InitError {
    /// The process type has no entry point with that name.
    UnknownMethod {
        /// The method that was asked for.
        method: String,
    },
    /// The process's own error.
    Failed(BoxError),
    /// `init` panicked.
    Panicked {
        /// The panic message.
        message: String,
    },
}

impl InitError {
    /// An [`InitError::UnknownMethod`] for `method`.
    ///
    /// # Examples
    ///
    /// ```
    /// let e = sched::InitError::unknown_method("x");
    /// assert!(matches!(e, sched::InitError::UnknownMethod { .. }));
    /// ```
    pub fn unknown_method(method: &str) -> Self {
        InitError::UnknownMethod {
            method: method.to_owned(),
        }
    }

    /// An [`InitError::Failed`] wrapping `error`.
    ///
    /// # Examples
    ///
    /// ```
    /// let e = sched::InitError::failed("no config file");
    /// assert_eq!(e.to_string(), "init failed: no config file");
    /// ```
    pub fn failed(error: impl Into<BoxError>) -> Self {
        InitError::Failed(error.into())
    }
}

impl fmt::Display for InitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InitError::UnknownMethod { method } => write!(f, "unknown entry method `{method}`"),
            InitError::Failed(e) => write!(f, "init failed: {e}"),
            InitError::Panicked { message } => write!(f, "init panicked: {message}"),
        }
    }
}

impl Error for InitError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            InitError::Failed(e) => Some(&**e),
            _ => None,
        }
    }
}

/// Why an upgrade ended the process (inside
/// [`ExitError::Upgrade`](crate::ExitError::Upgrade)). The old process had
/// been closed; the new one was never initialised, or its `init` failed, so
/// its `close` is not called.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use sched::process::UpgradeError;
///
/// let e = ExitError::Upgrade(UpgradeError::Init(InitError::unknown_method("v3")));
/// assert_eq!(e.to_string(), "the upgrade failed: the new process did not start: unknown entry method `v3`");
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum UpgradeError {
    /// The new process's `init` returned this error, or panicked
    /// ([`InitError::Panicked`]).
    Init(InitError),
    /// The upgrading step also yielded commands. They were not dispatched:
    /// their completions would have reached a process that never asked for
    /// them.
    Yielded {
        /// How many commands the step yielded.
        count: usize,
    },
}

impl fmt::Display for UpgradeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UpgradeError::Init(e) => write!(f, "the new process did not start: {e}"),
            UpgradeError::Yielded { count } => write!(
                f,
                "the upgrading step also yielded {count} command(s), which an upgrade does not allow"
            ),
        }
    }
}

impl Error for UpgradeError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            UpgradeError::Init(e) => Some(e),
            UpgradeError::Yielded { .. } => None,
        }
    }
}

/// A value of another type than the one a typed handle reads: a done
/// value ([`ExitError::UnexpectedType`](crate::ExitError::UnexpectedType))
/// or a command's result
/// ([`CommandError::UnexpectedType`](crate::CommandError::UnexpectedType)),
/// handed back as it was given.
///
/// # Examples
///
/// ```
/// use sched::process::UnexpectedValue;
///
/// let mut wrong = UnexpectedValue::new("u64", Box::new("forty-two"));
/// assert_eq!(wrong.expected(), "u64");
/// assert!(wrong.is::<&str>());
/// assert_eq!(*wrong.into_value().downcast::<&str>().unwrap(), "forty-two");
/// ```
pub struct UnexpectedValue {
    expected: &'static str,
    /// In a mutex only so that the errors that carry it stay `Sync`
    /// (a `Payload` is `Send` only). It is never locked: it is reached
    /// through `&mut self` or by value, neither of which takes the lock.
    value: std::sync::Mutex<relay::Payload>,
}

impl UnexpectedValue {
    /// `value`, which is not the `expected` type.
    ///
    /// # Examples
    ///
    /// See [`UnexpectedValue`].
    pub fn new(expected: &'static str, value: relay::Payload) -> Self {
        UnexpectedValue {
            expected,
            value: std::sync::Mutex::new(value),
        }
    }

    /// The type the handle reads.
    ///
    /// # Examples
    ///
    /// See [`UnexpectedValue`].
    pub fn expected(&self) -> &'static str {
        self.expected
    }

    /// Whether the value is a `T`.
    ///
    /// # Examples
    ///
    /// See [`UnexpectedValue`].
    pub fn is<T: std::any::Any>(&mut self) -> bool {
        self.value
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .is::<T>()
    }

    /// The value, as it was given.
    ///
    /// # Examples
    ///
    /// See [`UnexpectedValue`].
    pub fn into_value(self) -> relay::Payload {
        self.value
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl fmt::Debug for UnexpectedValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UnexpectedValue")
            .field("expected", &self.expected)
            .finish_non_exhaustive()
    }
}

impl fmt::Display for UnexpectedValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a value that is not a {}", self.expected)
    }
}

impl Error for UnexpectedValue {}

/// A wait that gave up: what a [`Monitor`](crate::Monitor)'s
/// `wait_timeout` gives when the process is still running. The handle can
/// wait again. (A process's outcome says the same with
/// `ExitError::TimedOut`, a reply with `AskError::TimedOut`; each has
/// `is_timeout`.)
///
/// # Examples
///
/// ```
/// use sched::actor::TimedOut;
/// assert!(TimedOut.is_timeout());
/// assert_eq!(TimedOut.to_string(), "the wait gave up before the process ended");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TimedOut;

impl TimedOut {
    /// Always `true`: the same test as the other handles' errors.
    ///
    /// # Examples
    ///
    /// See [`TimedOut`].
    pub fn is_timeout(&self) -> bool {
        true
    }
}

impl fmt::Display for TimedOut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the wait gave up before the process ended")
    }
}

impl std::error::Error for TimedOut {}
