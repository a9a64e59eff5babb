//! What a supervisor reports about its children.

use std::sync::Arc;

use relay::Pid;
use sched_core::ExitReason;

/// The question a [`Supervisor`](crate::Supervisor) answers with a
/// [`SupervisorReport`] of its children: a typed question, so `query`
/// (from outside or from a step) reads the answer without a downcast. The
/// first answer comes after the children's first start, so waiting for it
/// waits for the children to be started and named (checked by
/// `the_first_report_comes_once_the_children_are_started_and_named` in
/// `crates/sched/tests/restart_in_place.rs`).
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use sched::supervisor::{SupervisorReport, WhichChildren};
/// use std::time::Duration;
///
/// fn children(scheduler: &Scheduler, supervisor: Pid) -> Option<SupervisorReport> {
///     let mut reply = scheduler.ask(supervisor, WhichChildren).ok()?;
///     reply.wait_timeout(Duration::from_secs(1)).ok()
/// }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WhichChildren;

impl sched_core::Question for WhichChildren {
    type Answer = SupervisorReport;
}

/// A snapshot of a supervisor's children, in start order: the answer to
/// [`WhichChildren`], and the done value of a supervisor that was
/// cancelled (then no child is running).
///
/// # Examples
///
/// ```
/// use sched::supervisor::SupervisorReport;
/// let report = SupervisorReport::default();
/// assert_eq!(report.total_restarts(), 0);
/// assert!(report.child("db").is_none());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct SupervisorReport {
    /// One entry per declared child, in start order (a
    /// [`Temporary`](crate::Restart::Temporary) child that ended stays
    /// listed, not running).
    pub children: Vec<ChildReport>,
}

impl SupervisorReport {
    /// The entry of the child named `name`.
    ///
    /// # Examples
    ///
    /// See [`SupervisorReport`].
    pub fn child(&self, name: &str) -> Option<&ChildReport> {
        self.children.iter().find(|c| &*c.name == name)
    }

    /// The restarts of all children, summed.
    ///
    /// # Examples
    ///
    /// See [`SupervisorReport`].
    pub fn total_restarts(&self) -> u32 {
        self.children.iter().map(|c| c.restarts).sum()
    }
}

/// One child in a [`SupervisorReport`].
///
/// # Examples
///
/// ```
/// use sched::supervisor::{ChildReport, SupervisorReport};
/// fn running(report: &SupervisorReport) -> Vec<&ChildReport> {
///     report.children.iter().filter(|c| c.pid.is_some()).collect()
/// }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ChildReport {
    /// The name of its [`ChildSpec`](crate::ChildSpec).
    pub name: Arc<str>,
    /// The PID of the current incarnation, if one is running.
    pub pid: Option<Pid>,
    /// How many times it was started again after its first start.
    pub restarts: u32,
    /// How its last incarnation ended, if one has ended (for a child
    /// restarted in place, how the replaced instance failed:
    /// [`Panicked`](ExitReason::Panicked) for a panic,
    /// [`Error`](ExitReason::Error) for an error).
    pub last_exit: Option<ExitReason>,
    /// What its last failure said, when its last incarnation (or replaced
    /// instance) failed: the error's text, or the panic's message. For an
    /// incarnation that ended (rather than one replaced in place), it is
    /// read from the incarnation's outcome, which the engine stores just
    /// after the down: a report made in that gap has `None` here, and the
    /// next one has the text.
    pub last_error: Option<String>,
}
