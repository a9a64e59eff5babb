//! Restart notices: a child restarted in place keeps its PID, so nobody's
//! monitor fires; a process that wants to know asks the supervisor to
//! tell it ([`WatchRestarts`]), and gets a [`RestartedInPlace`] message
//! for each such restart, with how the replaced instance failed.
//!
//! The supervisor tells its watchers in the step that counts the restart
//! (the one that reads the child's own notice), in the order the restarts
//! happened, each watcher once per restart. A watcher that has ended is
//! dropped from the list at the first notice it cannot take.

use relay::{Pid, SendErrorKind};
use sched_core::{ExitReason, Output};

/// Asks a supervisor to tell `to` of each restart in place of its
/// children, from now on, with a [`RestartedInPlace`] message. A restart
/// with a new PID needs no notice: a monitor on the old PID fires (its
/// down says how it ended), and the report gives the new one. Asking
/// twice for the same process is asking once.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use sched::supervisor::{RestartedInPlace, WatchRestarts};
///
/// /// Prints each restart in place it is told of.
/// struct Watcher;
/// impl Process for Watcher {
///     type Done = ();
///     fn step(&mut self, events: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
///         for event in events {
///             if let Event::Message(m) = event {
///                 if let Some(notice) = m.payload::<RestartedInPlace>() {
///                     eprintln!("{} restarted: {:?}", notice.child, notice.message);
///                 }
///             }
///         }
///         Ok(())
///     }
/// }
///
/// let scheduler = Scheduler::builder().workers(1).build();
/// scheduler.start();
/// let supervisor = scheduler.spawn(Supervisor::builder().build())?;
/// let watcher = scheduler.spawn(Watcher)?;
/// scheduler.send(supervisor.pid(), WatchRestarts::to(watcher.pid()))?;
/// # scheduler.shutdown(std::time::Duration::from_secs(1));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatchRestarts {
    to: Pid,
}

impl WatchRestarts {
    /// A request that the supervisor tell `watcher` of its children's
    /// restarts in place.
    ///
    /// # Examples
    ///
    /// See [`WatchRestarts`].
    pub fn to(watcher: Pid) -> Self {
        WatchRestarts { to: watcher }
    }

    /// The process to be told.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::supervisor::WatchRestarts;
    ///
    /// let pid = Pid::local(7);
    /// assert_eq!(WatchRestarts::to(pid).watcher(), pid);
    /// ```
    pub fn watcher(&self) -> Pid {
        self.to
    }
}

/// A child of a supervisor was restarted in place: the message a watcher
/// ([`WatchRestarts`]) gets, once per restart.
///
/// # Examples
///
/// See [`WatchRestarts`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RestartedInPlace {
    /// The child's name in its spec.
    pub child: String,
    /// Its PID, the same before and after the restart.
    pub pid: Pid,
    /// How the replaced instance ended: [`ExitReason::Error`] for a step
    /// that returned an error, [`ExitReason::Panicked`] for a panic.
    pub reason: ExitReason,
    /// What it said: the error's text or the panic's message.
    pub message: String,
}

/// The processes a supervisor tells of restarts in place.
#[derive(Debug, Default)]
pub(super) struct Watchers {
    pids: Vec<Pid>,
}

impl Watchers {
    /// Adds `request`'s watcher (once).
    pub(super) fn add(&mut self, request: &WatchRestarts) {
        if !self.pids.contains(&request.to) {
            self.pids.push(request.to);
        }
    }

    /// Tells every watcher of `notice`, dropping those that have ended.
    pub(super) fn tell(&mut self, notice: &RestartedInPlace, out: &mut Output<'_>) {
        self.pids
            .retain(|&watcher| match out.send(watcher, notice.clone()) {
                Ok(_) => true,
                // A full mailbox misses this notice and keeps the watch.
                Err(error) if error.kind() == SendErrorKind::Full => true,
                Err(error) => {
                    tracing::debug!(%watcher, %error, "a restart watcher is gone");
                    false
                }
            });
    }
}
