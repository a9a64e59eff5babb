//! What a monitor reports when the process it watches ends, and the errors
//! of registered names.

use std::error::Error;
use std::fmt;
use std::sync::Arc;

use relay::Pid;

/// How a process ended, as its monitors see it (the full outcome, with the
/// result or the error, goes to its [`Completion`](crate::Completion)).
///
/// # Examples
///
/// ```
/// use sched::ExitReason;
/// assert!(ExitReason::Normal.is_normal());
/// assert!(!ExitReason::Terminated.is_normal());
/// assert_eq!(ExitReason::NoProcess.to_string(), "no such process");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ExitReason {
    /// It finished with a result (`done`).
    Normal,
    /// Its step returned an error, or an upgrade failed.
    Error,
    /// A step, `close` or an upgrade's `init` panicked.
    Panicked,
    /// `terminate` ended it.
    Terminated,
    /// It was cancelled: forced at a shutdown's deadline.
    Cancelled,
    /// A process linked to it ended abnormally and it did not trap exits.
    Linked,
    /// There was no process with that PID when the monitor was set.
    NoProcess,
    /// The process is on another node, and that node was lost or could
    /// not be reached: it was declared down by the transport's failure
    /// detector, it left or restarted, or messages between the two nodes
    /// were lost. Whether the process itself still runs is unknown (as
    /// Erlang's `noconnection`).
    NodeDown,
}

impl ExitReason {
    /// Whether the process finished by itself with a result.
    ///
    /// # Examples
    ///
    /// See [`ExitReason`].
    pub fn is_normal(self) -> bool {
        self == ExitReason::Normal
    }
}

impl fmt::Display for ExitReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ExitReason::Normal => "finished",
            ExitReason::Error => "failed",
            ExitReason::Panicked => "panicked",
            ExitReason::Terminated => "terminated",
            ExitReason::Cancelled => "cancelled",
            ExitReason::Linked => "ended with a linked process",
            ExitReason::NoProcess => "no such process",
            ExitReason::NodeDown => "its node was lost or unreachable",
        })
    }
}

/// Identifies one monitor, to remove it with `demonitor`. Never reused.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use sched::actor::MonitorId;
/// fn watch(out: &mut Output<'_>, child: Pid) -> MonitorId {
///     out.monitor(child)
/// }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MonitorId {
    pub(crate) target: Pid,
    pub(crate) id: u64,
}

impl MonitorId {
    /// The monitored PID.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::actor::MonitorId;
    /// fn watched(m: MonitorId) -> Pid { m.target() }
    /// ```
    pub fn target(&self) -> Pid {
        self.target
    }
}

/// The notification a monitor delivers, once, when the watched process
/// ends: to a process as [`Event::Down`](crate::Event::Down), to outside
/// code through a [`Monitor`](crate::Monitor) handle.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// fn crashed(event: &Event) -> bool {
///     matches!(event, Event::Down(Down { reason: ExitReason::Panicked, .. }))
/// }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Down {
    /// The monitor that fired.
    pub monitor: MonitorId,
    /// The process that ended (or never existed).
    pub pid: Pid,
    /// How it ended.
    pub reason: ExitReason,
    /// What the end said beyond its reason: the panic message for
    /// [`ExitReason::Panicked`], the error's text for
    /// [`ExitReason::Error`] (a step's error, a failed upgrade). `None`
    /// for the other reasons, and for a monitor set after the process had
    /// already ended (the engine keeps only the reason of an ended
    /// process).
    pub detail: Option<Arc<str>>,
}

/// Why a name could not be registered.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use sched::actor::NameError;
/// let e = NameError::Taken { name: "db".into(), by: Pid::local(4) };
/// assert_eq!(e.to_string(), "the name \"db\" is taken by <0.4>");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum NameError {
    /// A live process already has the name.
    Taken {
        /// The name.
        name: Arc<str>,
        /// The process that has it.
        by: Pid,
    },
    /// No live process has the PID, and the engine knows of none that had
    /// it: never handed out here, of another node, or a PID a caller chose
    /// whose process ended (those leave no trace).
    NoProcess(Pid),
    /// The process that had this PID has ended (the engine handed the PID
    /// out, and never hands it out again).
    Ended(Pid),
}

impl fmt::Display for NameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NameError::Taken { name, by } => write!(f, "the name {name:?} is taken by {by}"),
            NameError::NoProcess(pid) => write!(f, "no live process has PID {pid}"),
            NameError::Ended(pid) => write!(f, "the process {pid} has already ended"),
        }
    }
}

impl Error for NameError {}
