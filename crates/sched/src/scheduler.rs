//! The scheduler users hold: submission, messaging, termination, shutdown, introspection.

use std::fmt;
use std::time::Duration;

use relay::{Pid, SendError};

use crate::builder::SchedulerBuilder;
use sched_core::{
    AskTarget, Completion, Context, Engine, IntoSpawn, ProcessInfo, Question, Reply,
    ShutdownReport, Stats, SubmitError, Target, TerminateError,
};

/// A work-stealing scheduler running step-driven [`Process`](sched_core::Process)es on a pool
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
///     type Done = u64;
///     fn init(&mut self, _: &InitContext, method: &str, _: Payload) -> Result<(), InitError> {
///         if method == "sum" { Ok(()) } else { Err(InitError::unknown_method(method)) }
///     }
///     fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
///         for event in events {
///             if let Event::Message(msg) = event {
///                 match msg.downcast::<u64>() {
///                     Ok(0) => { out.finish(self.sum); return Ok(()); }
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
/// let adder = scheduler.spawn(Spawn::new(Adder { sum: 0 }).method("sum")).unwrap();
/// for n in [1u64, 2, 3, 0] {
///     scheduler.send(adder.pid(), n).unwrap();
/// }
/// let sum: u64 = adder.wait().unwrap();
/// assert_eq!(sum, 6);
/// let report = scheduler.shutdown(Duration::from_secs(1));
/// assert_eq!(report.forced, 0);
/// ```
pub struct Scheduler {
    engine: Engine,
}

/// A built engine as a scheduler (what [`SchedulerBuilder::build`]
/// makes).
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// let engine = sched::engine::Engine::builder().workers(1).build();
/// let scheduler = Scheduler::from(engine);
/// assert_eq!(scheduler.workers(), 1);
/// ```
impl From<Engine> for Scheduler {
    fn from(engine: Engine) -> Self {
        Scheduler { engine }
    }
}

impl fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scheduler")
            .field("workers", &self.engine.context().workers())
            .field(
                "live_processes",
                &self.engine.context().stats().live_processes,
            )
            .finish()
    }
}

impl sched_core::AsContext for Scheduler {
    fn context(&self) -> &Context {
        self.engine.context()
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
        SchedulerBuilder::default()
    }

    /// The engine underneath, for what the facade does not wrap.
    ///
    /// # Examples
    ///
    /// ```
    /// let s = sched::Scheduler::builder().workers(3).build();
    /// assert_eq!(s.engine().context().workers(), 3);
    /// ```
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The handle for everything else a running program does: names,
    /// monitors, timers, terminate, introspection. The same handle a step
    /// reaches with [`Output::context`](sched_core::Output::context).
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::Context;
    /// let scheduler = Scheduler::builder().workers(1).build();
    /// let cx: &Context = scheduler.context();
    /// assert_eq!(cx.whereis("nobody"), None);
    /// ```
    pub fn context(&self) -> &Context {
        self.engine.context()
    }

    /// Starts a process (see [`Context::spawn`]): a process, or a
    /// [`Spawn`](sched_core::Spawn) with its method, input or PID.
    ///
    /// # Errors
    ///
    /// As for [`Context::spawn`].
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    ///
    /// struct Hello;
    /// impl Process for Hello {
    ///     type Done = &'static str;
    ///     fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
    ///         out.finish("hello");
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let scheduler = Scheduler::builder().workers(1).build();
    /// scheduler.start();
    /// assert_eq!(scheduler.spawn(Hello)?.wait()?, "hello");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn spawn<'a, S: IntoSpawn<'a>>(
        &self,
        spawn: S,
    ) -> Result<Completion<S::Done>, SubmitError> {
        self.context().spawn(spawn)
    }

    /// Sends `message` from outside to `to` (see [`Context::send`]): a
    /// PID, a typed address, a name, a [`Within`](sched_core::Within) or an
    /// [`After`](sched_core::After).
    ///
    /// # Errors
    ///
    /// As for [`Context::send`].
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// let scheduler = Scheduler::builder().workers(1).build();
    /// assert!(scheduler.send(Pid::local(9), "hello").is_err()); // nobody there
    /// ```
    pub fn send<M, T: Target<M>>(&self, to: T, message: M) -> Result<T::Receipt, SendError> {
        self.context().send(to, message)
    }

    /// The process that has `pid` now, resolved for sends that skip the
    /// process table (see [`Context::resolve`] and
    /// [`Resolved`](sched_core::Resolved)).
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    ///
    /// struct Sink;
    /// impl Process for Sink {
    ///     type Done = ();
    ///     fn step(&mut self, _: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let scheduler = Scheduler::builder().workers(1).build();
    /// let sink = scheduler.spawn(Sink)?;
    /// let resolved = scheduler.resolve(sink.pid()).expect("spawned");
    /// scheduler.send(&resolved, "hello")?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn resolve(&self, pid: Pid) -> Option<sched_core::Resolved> {
        self.context().resolve(pid)
    }

    /// Asks `to` a question from outside (see [`Context::ask`]).
    ///
    /// # Errors
    ///
    /// As for [`Context::ask`].
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    ///
    /// struct Ping;
    /// impl Question for Ping {
    ///     type Answer = &'static str;
    /// }
    /// let scheduler = Scheduler::builder().workers(1).build();
    /// assert!(scheduler.ask("nobody", Ping).is_err());
    /// ```
    pub fn ask<Q: Question>(
        &self,
        to: impl AskTarget,
        question: Q,
    ) -> Result<Reply<Q::Answer>, SendError> {
        self.context().ask(to, question)
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
        self.engine.context().workers()
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
        self.engine.context().terminate(pid)
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
        self.engine.context().stats()
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
        self.engine.context().processes()
    }
}
