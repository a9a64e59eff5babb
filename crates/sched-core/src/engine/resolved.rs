//! A process resolved once ([`Resolved`]): a send through it goes to the
//! process's record, without the lookup in the process table that a send
//! by PID makes each time.
//!
//! # Why
//!
//! A send by PID from outside the workers finds its record in the table:
//! it locks the PID's slot for a reference-count increment, and drops that
//! reference after delivering, three read-modify-writes on lines the
//! target's other senders share (about a third of a send's time on one
//! thread sending to a thousand processes). A caller that sends to the
//! same process many times (a route cache, a long-lived handle) can pay
//! that once.
//!
//! # What it names
//!
//! The process that had the PID when it was resolved: its incarnation,
//! not the PID. Once that process has ended, a send through the handle is
//! refused as ended, as a send by PID to an ended process is; nothing
//! that later takes the same PID (a process spawned under a chosen PID)
//! is reached through it.
//!
//! # Which engine
//!
//! A handle holds the record, not the engine (as a [`Completion`] does):
//! it keeps the ended process's record allocated (its fields and the
//! process's room, whose `Drop` has run) until it is dropped, and never
//! keeps an engine alive. Each engine has an id from a program-wide
//! counter; a send through a handle compares it with the sending
//! context's engine, and a handle of another engine is sent to by PID,
//! as a [`Pid`] would be.
//!
//! [`Completion`]: crate::Completion

use std::any::Any;
use std::sync::atomic::{AtomicU64 as StdAtomicU64, Ordering::Relaxed};

use relay::{Package, Pid, SendError};

use super::context::Context;
use super::routing::{sealed, Sender, Target};
use crate::record::RecordRef;

/// Where engines' ids come from: unique in the program, never reused, so
/// a handle of a dropped engine is never taken for a later engine's.
static NEXT_ENGINE: StdAtomicU64 = StdAtomicU64::new(1);

/// A new engine's id (see the module's doc).
pub(crate) fn next_engine_id() -> u64 {
    NEXT_ENGINE.fetch_add(1, Relaxed)
}

/// A process of this engine, resolved once: sends through it
/// (`send(&resolved, message)`, from outside or from a step) go straight
/// to the process, skipping the process table's lookup that every send by
/// [`Pid`] makes (a lock and a reference count on the process, shared
/// with its other senders). Worth it for a sender that sends to one
/// process many times: a router, a route cache, a long-lived client.
///
/// It names the process that had the PID when it was resolved, not the
/// PID: once that process has ended, a send through it is refused as
/// ended ([`SendErrorKind::Ended`](relay::SendErrorKind::Ended), the
/// message handed back), as a send by PID would be (except to a PID the
/// caller chose, which leaves no trace: by PID, `UnknownTarget`), even
/// after a new process has taken the PID. Everything else is
/// as a send by PID: the same mailbox bound, urgency, wake-up and order
/// (a sender's messages to one process arrive in the order sent, whether
/// by PID or through the handle). A handle holds the ended process's
/// record allocated until it is dropped (its fields and the room the
/// process's state took, whose `Drop` has run, as a
/// [`Completion`](crate::Completion) does), and never keeps the engine
/// alive. Sent to through another engine, it is a send by PID
/// there.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use sched::message::SendErrorKind;
///
/// struct Total(u64);
/// impl Process for Total {
///     type Done = u64;
///     fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
///         for event in events {
///             if let Event::Message(package) = event {
///                 self.0 += package.payload::<u64>().copied().unwrap_or(0);
///             }
///             if self.0 >= 6 {
///                 out.finish(self.0);
///             }
///         }
///         Ok(())
///     }
/// }
///
/// let scheduler = Scheduler::builder().workers(1).build();
/// scheduler.start();
/// let total = scheduler.spawn(Total(0))?;
/// let resolved = scheduler.resolve(total.pid()).expect("running");
/// for n in 1..=3u64 {
///     scheduler.send(&resolved, n)?;
/// }
/// assert_eq!(total.wait()?, 6);
/// // The process has ended: so has the handle.
/// let refused = scheduler.send(&resolved, 4u64).unwrap_err();
/// assert_eq!(refused.kind(), SendErrorKind::Ended);
/// # scheduler.shutdown(std::time::Duration::from_secs(1));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Resolved {
    record: RecordRef,
    engine: u64,
}

impl Resolved {
    /// The PID of the process it names.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    ///
    /// struct Wait;
    /// impl Process for Wait {
    ///     type Done = ();
    ///     fn step(&mut self, _: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let scheduler = Scheduler::builder().workers(1).build();
    /// let waiting = scheduler.spawn(Wait)?;
    /// let resolved = scheduler.resolve(waiting.pid()).expect("spawned");
    /// assert_eq!(resolved.pid(), waiting.pid());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn pid(&self) -> Pid {
        self.record.pid
    }
}

impl std::fmt::Debug for Resolved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resolved")
            .field("pid", &self.record.pid)
            .finish()
    }
}

impl Context {
    /// The process that has `pid` now, resolved for sends that skip the
    /// process table (see [`Resolved`]); `None` when no process of this
    /// engine has it (never had, has ended, or the PID is another node's).
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    ///
    /// let scheduler = Scheduler::builder().workers(1).build();
    /// assert!(scheduler.resolve(Pid::local(404)).is_none());
    /// ```
    pub fn resolve(&self, pid: Pid) -> Option<Resolved> {
        let shared = self.shared();
        if shared.is_remote(pid) {
            return None;
        }
        let record = shared.processes.get(pid)?;
        Some(Resolved {
            record,
            engine: shared.engine_id,
        })
    }
}

impl sealed::Sealed for &Resolved {}

/// Any message, to the process the handle names (see [`Resolved`]).
impl<M: Any + Send> Target<M> for &Resolved {
    type Receipt = ();

    #[inline]
    fn send_from(self, sender: Sender<'_>, message: M) -> Result<(), SendError> {
        let package = Package::new(sender.from(), self.record.pid, message);
        let shared = sender.cx().shared();
        if shared.engine_id != self.engine {
            return sender.deliver(package);
        }
        shared.deliver_message(&self.record, package)
    }
}
