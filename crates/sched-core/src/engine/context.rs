//! The handle through which running code reaches its scheduler.

use std::any::Any;

use relay::{Addr, Pid, PidsExhausted};

use super::shared::Shared;
use crate::contract::accepts::Accepts;
use crate::contract::error::SubmitError;
use crate::contract::output::Output;
use crate::contract::process::Process;
use crate::record::completion::Completion;
use crate::record::RecordRef;

/// The scheduler's operations, reachable from inside a step
/// ([`Output::context`](crate::Output::context)), a command handler
/// ([`Completer::context`](crate::Completer::context)) and a lifecycle
/// hook (its first argument), without globals or `Arc` plumbing.
///
/// A `Context` is only ever borrowed (`&Context`): it costs nothing to
/// hand out, and it cannot be stored where it would keep the engine alive.
/// The [`Engine`](crate::Engine) and the
/// [`Scheduler`](../sched/struct.Scheduler.html) dereference to it, so the
/// same methods work from outside.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
///
/// /// Starts a helper, tells it its job, and reports how busy the scheduler is.
/// struct Boss;
/// impl Process for Boss {
///     fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
///         let cx = out.context();
///         let live = cx.stats().live_processes;
///         let helper = cx.spawn(Helper)?;
///         cx.post(helper.pid(), 21u64)?;
///         out.done(Box::new(live));
///         Ok(())
///     }
/// }
///
/// struct Helper;
/// impl Process for Helper {
///     fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
///         for event in events {
///             if let sched::Event::Message(m) = event {
///                 out.done(Box::new(m.payload::<u64>().copied().unwrap_or(0) * 2));
///             }
///         }
///         Ok(())
///     }
/// }
///
/// let scheduler = Scheduler::builder().workers(1).build();
/// scheduler.start();
/// let live = scheduler.spawn(Boss)?.wait()?;
/// assert_eq!(live.downcast_ref::<usize>(), Some(&1)); // the boss itself
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[repr(transparent)]
pub struct Context {
    shared: Shared,
}

impl Context {
    /// The context of an engine's shared state.
    pub(crate) fn of(shared: &Shared) -> &Context {
        // SAFETY: `Context` is `repr(transparent)` over `Shared`, so the two
        // have the same layout and a `&Shared` is a valid `&Context` for the
        // same lifetime.
        unsafe { &*(shared as *const Shared).cast::<Context>() }
    }

    pub(crate) fn shared(&self) -> &Shared {
        &self.shared
    }

    /// The number of worker threads.
    ///
    /// # Examples
    ///
    /// ```
    /// let engine = sched::engine::Engine::builder().workers(3).build();
    /// assert_eq!(engine.workers(), 3);
    /// ```
    pub fn workers(&self) -> usize {
        self.shared.remotes.len()
    }

    /// Starts `process` under a fresh PID through its one entry point:
    /// `init` runs on this thread with [`DEFAULT_METHOD`](crate::DEFAULT_METHOD)
    /// and no input (`()`), then the process is queued. A process with
    /// several entry points, or one that takes an input, starts with
    /// [`spawn_with`](Context::spawn_with).
    ///
    /// # Errors
    ///
    /// [`SubmitError`]: shutting down, too many live processes, `init`
    /// failed or the start hook refused, or no PID left.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    ///
    /// struct Hello;
    ///
    /// impl Process for Hello {
    ///     fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
    ///         out.finish("hello");
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let scheduler = Scheduler::builder().workers(1).build();
    /// scheduler.start();
    /// let hello = scheduler.spawn(Hello)?.typed::<&str>();
    /// assert_eq!(hello.wait()?, "hello");
    /// # scheduler.shutdown(std::time::Duration::from_secs(1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn spawn<P: Process>(&self, process: P) -> Result<Completion, SubmitError> {
        self.spawn_with(process, crate::contract::process::DEFAULT_METHOD, ())
    }

    /// Starts `process` under a fresh PID: `init` runs on this thread with
    /// `method` and `input`, then the process is queued.
    ///
    /// # Errors
    ///
    /// As for [`spawn`](Context::spawn).
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    ///
    /// /// Counts down from its input.
    /// struct Countdown(u32);
    ///
    /// impl Process for Countdown {
    ///     fn init(&mut self, _: &InitContext, method: &str, input: Payload) -> Result<(), InitError> {
    ///         match (method, input.downcast::<u32>()) {
    ///             ("from", Ok(n)) => Ok(self.0 = *n),
    ///             ("from", Err(_)) => Err(InitError::failed("`from` takes a u32")),
    ///             (other, _) => Err(InitError::unknown_method(other)),
    ///         }
    ///     }
    ///     fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
    ///         self.0 -= 1;
    ///         if self.0 == 0 { out.finish("liftoff") } else { out.continue_() }
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let scheduler = Scheduler::builder().workers(1).build();
    /// scheduler.start();
    /// let launch = scheduler.spawn_with(Countdown(0), "from", 3u32)?;
    /// assert_eq!(launch.typed::<&str>().wait()?, "liftoff");
    /// assert!(scheduler.spawn_with(Countdown(0), "to", 3u32).is_err());
    /// # scheduler.shutdown(std::time::Duration::from_secs(1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn spawn_with<P: Process>(
        &self,
        process: P,
        method: &str,
        input: impl Any + Send,
    ) -> Result<Completion, SubmitError> {
        // Stored in its record's allocation: one allocation per process.
        let record = RecordRef::new(Pid::OUTSIDE, process);
        self.shared
            .spawn(record, method, relay::into_payload(input))
    }

    /// [`spawn`](Context::spawn) for a process that declares its message
    /// type: also returns its typed address.
    ///
    /// # Errors
    ///
    /// As for [`spawn`](Context::spawn).
    ///
    /// # Examples
    ///
    /// See [`Accepts`].
    pub fn spawn_typed<P: Accepts>(
        &self,
        process: P,
    ) -> Result<(Addr<P::Message>, Completion), SubmitError> {
        self.spawn_typed_with(process, crate::contract::process::DEFAULT_METHOD, ())
    }

    /// [`spawn_with`](Context::spawn_with) for a process that declares its
    /// message type: also returns its typed address.
    ///
    /// # Errors
    ///
    /// As for [`spawn`](Context::spawn).
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::message::Addr;
    /// use sched::process::Accepts;
    /// fn start<P: Accepts>(cx: &Context, child: P, limit: u64) -> Option<Addr<P::Message>> {
    ///     cx.spawn_typed_with(child, "limited", limit).ok().map(|(addr, _done)| addr)
    /// }
    /// ```
    pub fn spawn_typed_with<P: Accepts>(
        &self,
        process: P,
        method: &str,
        input: impl Any + Send,
    ) -> Result<(Addr<P::Message>, Completion), SubmitError> {
        let completion = self.spawn_with(process, method, input)?;
        Ok((Addr::from_pid(completion.pid()), completion))
    }

    /// A fresh PID on this scheduler's node, reserved in the engine's
    /// process table for a later [`submit`](crate::Engine::submit): no PID is
    /// handed out twice, and a stale one never reaches a later process.
    /// (A PID that is never submitted keeps its table slot, a few bytes,
    /// for the engine's life.)
    ///
    /// # Errors
    ///
    /// The node's ids are exhausted.
    ///
    /// # Examples
    ///
    /// ```
    /// let engine = sched::engine::Engine::builder().workers(1).build();
    /// assert_ne!(engine.allocate_pid().unwrap(), engine.allocate_pid().unwrap());
    /// ```
    pub fn allocate_pid(&self) -> Result<Pid, PidsExhausted> {
        self.shared.allocate_pid()
    }
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("workers", &self.workers())
            .finish_non_exhaustive()
    }
}

/// The spawn family and the inside handle from a step: the same
/// operations, with the same signatures, as on [`Context`].
impl Output<'_> {
    /// The scheduler's operations (stats, terminate, shutdown, spawn,
    /// send, ...) from inside this step.
    ///
    /// # Examples
    ///
    /// ```
    /// # use sched::Output;
    /// fn busy(out: &Output<'_>) -> bool {
    ///     out.context().stats().live_processes > 1_000
    /// }
    /// ```
    pub fn context(&self) -> &Context {
        self.engine
            .context()
            .downcast_ref::<Context>()
            .expect("a step's engine is a `Context`")
    }

    /// Starts a new process under a fresh PID through its one entry point,
    /// as [`Context::spawn`] does from outside: `init` runs on this worker
    /// with [`DEFAULT_METHOD`](crate::DEFAULT_METHOD) and no input, and the
    /// process is queued on this worker, where idle workers can steal it.
    ///
    /// # Errors
    ///
    /// [`SubmitError`]: shutting down, too many live processes, `init`
    /// failed or the start hook refused, or no PID left.
    ///
    /// # Examples
    ///
    /// ```
    /// # use sched::{Output, Process};
    /// fn start_worker(out: &mut Output<'_>, child: impl Process) -> sched::Pid {
    ///     out.spawn(child).expect("spawned").pid()
    /// }
    /// ```
    pub fn spawn<P: Process>(&mut self, process: P) -> Result<Completion, SubmitError> {
        self.context().spawn(process)
    }

    /// [`spawn`](Output::spawn) through the entry point `method` with
    /// `input`, as [`Context::spawn_with`] does from outside. A PID some
    /// process already uses is skipped.
    ///
    /// # Errors
    ///
    /// As for [`spawn`](Output::spawn).
    ///
    /// # Examples
    ///
    /// ```
    /// # use sched::{Output, Process};
    /// fn start_worker(out: &mut Output<'_>, child: impl Process) -> sched::Pid {
    ///     out.spawn_with(child, "run", 42u64).expect("spawned").pid()
    /// }
    /// ```
    pub fn spawn_with<P: Process>(
        &mut self,
        process: P,
        method: &str,
        input: impl Any + Send,
    ) -> Result<Completion, SubmitError> {
        self.context().spawn_with(process, method, input)
    }

    /// Submits a new process under a PID the caller chose (see
    /// [`spawn`](Output::spawn) to have one allocated).
    ///
    /// # Errors
    ///
    /// As for [`Engine::submit`](crate::Engine::submit), including
    /// [`SubmitError::DuplicatePid`] when `pid` is taken.
    ///
    /// # Examples
    ///
    /// ```
    /// # use sched::{Output, Process};
    /// fn start_at(out: &mut Output<'_>, pid: sched::Pid, child: Box<dyn Process>) {
    ///     let _ = out.submit(pid, child, "run", ());
    /// }
    /// ```
    pub fn submit<P: Process>(
        &mut self,
        pid: Pid,
        process: P,
        method: &str,
        input: impl Any + Send,
    ) -> Result<Completion, SubmitError> {
        self.context().shared.submit(
            RecordRef::new(pid, process),
            method,
            relay::into_payload(input),
        )
    }

    /// [`spawn`](Output::spawn) for a process that declares its message
    /// type: also returns its typed address.
    ///
    /// # Errors
    ///
    /// As for [`spawn`](Output::spawn).
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::message::Addr;
    /// use sched::process::Accepts;
    /// fn start<P: Accepts>(out: &mut Output<'_>, child: P) -> Option<Addr<P::Message>> {
    ///     out.spawn_typed(child).ok().map(|(addr, _done)| addr)
    /// }
    /// ```
    pub fn spawn_typed<P: Accepts>(
        &mut self,
        process: P,
    ) -> Result<(Addr<P::Message>, Completion), SubmitError> {
        self.context().spawn_typed(process)
    }

    /// [`spawn_with`](Output::spawn_with) for a process that declares its
    /// message type: also returns its typed address.
    ///
    /// # Errors
    ///
    /// As for [`spawn`](Output::spawn).
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::message::Addr;
    /// use sched::process::Accepts;
    /// fn start<P: Accepts>(out: &mut Output<'_>, child: P) -> Option<Addr<P::Message>> {
    ///     out.spawn_typed_with(child, "run", ()).ok().map(|(addr, _done)| addr)
    /// }
    /// ```
    pub fn spawn_typed_with<P: Accepts>(
        &mut self,
        process: P,
        method: &str,
        input: impl Any + Send,
    ) -> Result<(Addr<P::Message>, Completion), SubmitError> {
        self.context().spawn_typed_with(process, method, input)
    }
}
