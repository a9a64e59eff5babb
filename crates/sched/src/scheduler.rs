//! The scheduler users hold: submission, messaging, termination, shutdown, introspection.

use std::any::Any;
use std::fmt;
use std::time::Duration;

use relay::{into_payload, Package, Pid, Receiver, SendError};

use crate::builder::SchedulerBuilder;
use sched_core::{
    Completion, Context, Engine, Process, ProcessInfo, ShutdownReport, Stats, SubmitError,
    TerminateError,
};

/// A work-stealing scheduler running step-driven [`Process`]es on a pool
/// of worker threads.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use std::time::Duration;
///
/// /// Adds up the numbers it is sent until it gets 0.
/// struct Adder { sum: u64 }
///
/// impl Process for Adder {
///     fn init(&mut self, _: &InitContext, method: &str, _: Payload) -> Result<(), InitError> {
///         if method == "sum" { Ok(()) } else { Err(InitError::unknown_method(method)) }
///     }
///     fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
///         for event in events {
///             if let Event::Message(msg) = event {
///                 match msg.downcast::<u64>() {
///                     Ok(0) => { out.done(Box::new(self.sum)); return Ok(()); }
///                     Ok(n) => self.sum += n,
///                     Err(_) => return Err("expected a u64".into()),
///                 }
///             }
///         }
///         out.idle();
///         Ok(())
///     }
///     fn close(&mut self) {}
/// }
///
/// let scheduler = Scheduler::builder().workers(2).build();
/// scheduler.start();
/// let adder = scheduler.submit(Pid::local(1), Adder { sum: 0 }, "sum", ()).unwrap();
/// for n in [1u64, 2, 3, 0] {
///     scheduler.send_to(Pid::local(99), Pid::local(1), n).unwrap();
/// }
/// let sum = adder.wait().unwrap();
/// assert_eq!(sum.downcast_ref::<u64>(), Some(&6));
/// let report = scheduler.shutdown(Duration::from_secs(1));
/// assert_eq!(report.forced, 0);
/// ```
pub struct Scheduler {
    engine: Engine,
}

impl Scheduler {
    /// Wraps a built engine (for [`SchedulerBuilder::build`]).
    pub(crate) fn from_engine(engine: Engine) -> Self {
        Scheduler { engine }
    }
}

impl fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scheduler")
            .field("workers", &self.engine.workers())
            .field("live_processes", &self.engine.stats().live_processes)
            .finish()
    }
}

/// Every operation running code reaches through its [`Context`] (send,
/// `tell`, spawn, stats, terminate, `request_shutdown`) is also a method of
/// the scheduler.
impl std::ops::Deref for Scheduler {
    type Target = Context;

    fn deref(&self) -> &Context {
        &self.engine
    }
}

impl Default for Scheduler {
    fn default() -> Self {
        Scheduler::builder().build()
    }
}

impl Scheduler {
    /// A builder with the defaults (one worker per available core, no
    /// limits, no hooks).
    ///
    /// # Examples
    ///
    /// ```
    /// let s = sched::Scheduler::builder().workers(1).build();
    /// assert_eq!(s.workers(), 1);
    /// ```
    pub fn builder() -> SchedulerBuilder {
        SchedulerBuilder::new()
    }

    /// The engine underneath, for what the facade does not wrap.
    ///
    /// # Examples
    ///
    /// ```
    /// let s = sched::Scheduler::builder().workers(3).build();
    /// assert_eq!(s.engine().workers(), 3);
    /// ```
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The number of worker threads.
    ///
    /// # Examples
    ///
    /// ```
    /// let s = sched::Scheduler::builder().workers(2).build();
    /// assert_eq!(s.workers(), 2);
    /// ```
    pub fn workers(&self) -> usize {
        self.engine.workers()
    }

    /// Starts the worker threads (idempotent).
    ///
    /// # Examples
    ///
    /// ```
    /// let s = sched::Scheduler::builder().workers(1).build();
    /// s.start();
    /// s.start(); // a second call does nothing
    /// assert_eq!(s.stats().workers.len(), 1);
    /// ```
    pub fn start(&self) {
        self.engine.start();
    }

    /// Submits `process` under `pid`: `init(method, input)` runs on this
    /// thread; an error from it is returned unchanged (inside
    /// [`SubmitError::Init`]) and nothing is scheduled or registered.
    ///
    /// # Errors
    ///
    /// [`SubmitError`]: shutting down, too many processes, `pid` already
    /// live, `init` failed, or the `on_start` hook refused.
    ///
    /// # Examples
    ///
    /// ```
    /// # use sched::prelude::*;
    /// # struct Done;
    /// # impl Process for Done {
    /// #     fn init(&mut self, _: &InitContext, _: &str, _: Payload) -> Result<(), InitError> { Ok(()) }
    /// #     fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> { out.done(Box::new(1u8)); Ok(()) }
    /// #     fn close(&mut self) {}
    /// # }
    /// let s = Scheduler::builder().workers(1).build();
    /// s.start();
    /// let done = s.submit(Pid::local(1), Done, "run", ()).unwrap();
    /// assert_eq!(done.pid(), Pid::local(1));
    /// assert_eq!(done.wait().unwrap().downcast_ref::<u8>(), Some(&1));
    /// ```
    pub fn submit<P: Process>(
        &self,
        pid: Pid,
        process: P,
        method: &str,
        input: impl Any + Send,
    ) -> Result<Completion, SubmitError> {
        self.engine
            .submit(pid, process, method, into_payload(input))
    }

    /// A fresh PID on this scheduler's node, reserved for a later `submit`
    /// (see [`Context::allocate_pid`](crate::Context::allocate_pid)).
    ///
    /// # Errors
    ///
    /// The node's ids are exhausted.
    ///
    /// # Examples
    ///
    /// ```
    /// let s = sched::Scheduler::builder().workers(1).build();
    /// assert_ne!(s.allocate_pid().unwrap(), s.allocate_pid().unwrap());
    /// ```
    pub fn allocate_pid(&self) -> Result<Pid, relay::PidsExhausted> {
        self.engine.allocate_pid()
    }

    /// Sends `payload` to the process `to` from outside any process: the
    /// message's source is [`Pid::OUTSIDE`], so no PID has to be invented.
    /// (`send`, from [`Receiver`], takes a whole [`Package`].)
    ///
    /// # Errors
    ///
    /// As for [`send_to`](Scheduler::send_to).
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::message::SendErrorKind;
    /// let s = Scheduler::builder().workers(1).build();
    /// let err = s.post(Pid::local(2), "hi").unwrap_err();
    /// assert_eq!(err.kind(), SendErrorKind::UnknownTarget);
    /// assert_eq!(err.source(), Pid::OUTSIDE);
    /// ```
    pub fn post(&self, to: Pid, payload: impl Any + Send) -> Result<(), SendError> {
        self.send_to(Pid::OUTSIDE, to, payload)
    }

    /// Sends `payload` from `from` to the process `to`.
    ///
    /// # Errors
    ///
    /// [`SendError`] naming the PID: unknown (no process is known to have
    /// had it), closed (ending, or ended: a PID the scheduler handed out is
    /// never reused), or mailbox full. It hands the package back.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::message::SendErrorKind;
    /// let s = Scheduler::builder().workers(1).build();
    /// let err = s.send_to(Pid::local(1), Pid::local(2), "hi").unwrap_err();
    /// assert_eq!(err.kind(), SendErrorKind::UnknownTarget);
    /// assert_eq!(err.into_package().downcast::<&str>().ok(), Some("hi"));
    /// ```
    pub fn send_to(&self, from: Pid, to: Pid, payload: impl Any + Send) -> Result<(), SendError> {
        self.engine
            .send(Package::from_payload(from, to, into_payload(payload)))
    }

    /// Ends process `pid` with [`ExitError::Terminated`](crate::ExitError::Terminated):
    /// at once if it is waiting, after its current step if it is running.
    /// A PID of another node is sent the request (see
    /// [`Context::terminate`](sched_core::Context::terminate)).
    ///
    /// # Errors
    ///
    /// [`TerminateError::NotFound`] for an unknown PID,
    /// [`TerminateError::Ended`] for a finished one,
    /// [`TerminateError::Unreachable`] for one of a node the request cannot
    /// reach.
    ///
    /// # Examples
    ///
    /// ```
    /// let s = sched::Scheduler::builder().workers(1).build();
    /// assert!(s.terminate(sched::Pid::local(5)).is_err());
    /// ```
    pub fn terminate(&self, pid: Pid) -> Result<(), TerminateError> {
        self.engine.terminate(pid)
    }

    /// Stops the scheduler; see [`Engine::shutdown`] for the exact
    /// semantics. In short: no new submissions, a cancel event to every live
    /// process, a wait until they have all ended (returning as soon as they
    /// have) or until `deadline`, then the stragglers end with
    /// [`ExitError::Cancelled`](crate::ExitError::Cancelled) and the workers
    /// are joined. Every submitted process reports exactly one outcome. A
    /// call made while another shutdown runs waits for it and returns the
    /// same report.
    ///
    /// # Examples
    ///
    /// ```
    /// let s = sched::Scheduler::builder().workers(1).build();
    /// s.start();
    /// let report = s.shutdown(std::time::Duration::from_secs(1));
    /// assert_eq!((report.forced, report.still_running), (0, 0));
    /// ```
    ///
    /// # From async code
    ///
    /// `shutdown` blocks the calling thread until the processes have ended
    /// (at most `deadline`) and the workers are joined, so async code runs
    /// it where blocking is allowed: tokio's `spawn_blocking` (share the
    /// scheduler through an `Arc`), or a plain thread. A step that wants
    /// the scheduler stopped calls
    /// [`request_shutdown`](sched_core::Context::request_shutdown), which
    /// returns at once.
    ///
    /// ```
    /// use sched::prelude::*;
    /// use std::sync::Arc;
    /// use std::time::Duration;
    ///
    /// let scheduler = Arc::new(Scheduler::builder().workers(1).build());
    /// scheduler.start();
    /// let runtime = tokio::runtime::Runtime::new()?;
    /// let report = runtime.block_on(async {
    ///     let scheduler = Arc::clone(&scheduler);
    ///     tokio::task::spawn_blocking(move || scheduler.shutdown(Duration::from_secs(1))).await
    /// })?;
    /// assert_eq!(report.forced, 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn shutdown(&self, deadline: Duration) -> ShutdownReport {
        self.engine.shutdown(deadline)
    }

    /// Counters per worker and in total, read while the workers run.
    ///
    /// # Examples
    ///
    /// ```
    /// let s = sched::Scheduler::builder().workers(2).build();
    /// assert_eq!(s.stats().workers.len(), 2);
    /// ```
    pub fn stats(&self) -> Stats {
        self.engine.stats()
    }

    /// The live processes with their state and step count.
    ///
    /// # Examples
    ///
    /// ```
    /// let s = sched::Scheduler::builder().workers(1).build();
    /// assert!(s.processes().is_empty());
    /// ```
    pub fn processes(&self) -> Vec<ProcessInfo> {
        self.engine.processes()
    }
}

impl Receiver for Scheduler {
    fn send(&self, package: Package) -> Result<(), SendError> {
        self.engine.send(package)
    }
}
