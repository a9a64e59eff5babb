//! The engine: the [`Engine`] handle and the shared state behind it.
//!
//! One file per concern: `builder` (configuration), `shared` (the state
//! every worker and handle shares, and scheduling), `admission` (submit and
//! the live-process count), `routing` (send, kill, dead letters), `remote` (packages from other
//! nodes),
//! `shutdown`, `introspect` (stats and the process list), `hooks` and
//! `stats` (the counters behind introspection).

mod admission;
pub(crate) mod ask;
mod builder;
mod context;
mod control;
pub(crate) mod hooks;
mod introspect;
mod links;
mod live;
pub(crate) mod monitors;
pub(crate) mod names;
mod registration;
mod remote;
mod routing;
pub(crate) mod shared;
mod shutdown;
pub(crate) mod stats;
mod timers;

pub use ask::Reply;
pub use builder::Builder;
pub use context::Context;
pub use introspect::ProcessInfo;
pub use monitors::Monitor;
use shared::Shared;
pub use shutdown::ShutdownReport;

use relay::{Package, Payload, Pid, SendError};

use crate::contract::error::SubmitError;
use crate::contract::process::Process;
use crate::record::completion::Completion;
use crate::sync::Arc;

/// The scheduler engine: worker threads running step-driven processes.
///
/// This is the engine without API sugar; the `sched` crate is the facade
/// users normally depend on.
///
/// # Examples
///
/// ```
/// use sched::{Payload, Pid};
/// use sched::{BoxError, Engine, Events, InitContext, InitError, Output, Process};
///
/// struct Hello;
/// impl Process for Hello {
///     fn init(&mut self, _: &InitContext, _: &str, _: Payload) -> Result<(), InitError> { Ok(()) }
///     fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
///         out.done(Box::new("hello"));
///         Ok(())
///     }
///     fn close(&mut self) {}
/// }
///
/// let engine = Engine::builder().workers(2).build();
/// engine.start();
/// let mut handle = engine.submit(Pid::local(1), Box::new(Hello), "run", Box::new(())).unwrap();
/// assert_eq!(handle.pid(), Pid::local(1));
/// let result = handle.wait_timeout(std::time::Duration::from_secs(5)).expect("finished");
/// assert_eq!(result.unwrap().downcast_ref::<&str>(), Some(&"hello"));
/// assert!(!handle.is_finished()); // the outcome was taken
/// assert!(matches!(handle.try_take(), Some(Err(sched::ExitError::AlreadyTaken))));
/// engine.shutdown(std::time::Duration::from_secs(1));
/// ```
///
/// An `Engine` dereferences to its [`Context`], so every operation a step
/// or a handler can reach (send, spawn, stats, terminate, ...) is also a
/// method of the engine.
#[derive(Debug)]
pub struct Engine {
    shared: Arc<Shared>,
}

impl std::ops::Deref for Engine {
    type Target = Context;

    fn deref(&self) -> &Context {
        Context::of(&self.shared)
    }
}

impl Engine {
    /// A builder with the defaults.
    ///
    /// # Examples
    ///
    /// See [`Builder`].
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// Starts the worker threads (once; later calls do nothing).
    ///
    /// # Panics
    ///
    /// If the OS refuses to spawn a thread.
    ///
    /// # Examples
    ///
    /// See [`Engine`].
    pub fn start(&self) {
        control::start(&self.shared);
    }

    /// Submits a process under `pid`: runs `init(method, input)` on this
    /// thread, then queues the process. Before [`start`](Engine::start) the
    /// process waits in the global queue.
    ///
    /// # Errors
    ///
    /// [`SubmitError`]: shutting down, too many live processes, a PID in
    /// use, or `init` failed. Nothing is scheduled or registered then.
    ///
    /// # Examples
    ///
    /// See [`Engine`].
    pub fn submit(
        &self,
        pid: Pid,
        process: Box<dyn Process>,
        method: &str,
        input: Payload,
    ) -> Result<Completion, SubmitError> {
        self.shared.submit(pid, process, method, input)
    }

    /// Submits a process under a fresh PID from this engine's allocator,
    /// skipping any PID a process already uses (one a user chose for
    /// [`submit`](Engine::submit), say).
    ///
    /// # Errors
    ///
    /// As for [`submit`](Engine::submit), except that the PID is never a
    /// duplicate; [`SubmitError::PidsExhausted`] when no id is left.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::{BoxError, Engine, Events, Output, Process};
    /// use sched::Pid;
    ///
    /// struct Quick;
    /// impl Process for Quick {
    ///     fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
    ///         out.done(Box::new(()));
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let engine = Engine::builder().workers(1).build();
    /// engine.start();
    /// // A user took <0.1>, the allocator's first id: spawn skips it.
    /// let mine = engine.submit(Pid::local(1), Box::new(Quick), "run", Box::new(())).unwrap();
    /// let spawned = engine.spawn(Box::new(Quick), "run", Box::new(())).unwrap();
    /// assert_ne!(spawned.pid(), Pid::local(1));
    /// # drop((mine, spawned));
    /// ```
    pub fn spawn(
        &self,
        process: Box<dyn Process>,
        method: &str,
        input: Payload,
    ) -> Result<Completion, SubmitError> {
        self.shared.spawn(process, method, input)
    }
}

impl relay::Receiver for Engine {
    /// Delivers a message to its target process.
    fn send(&self, package: Package) -> Result<(), SendError> {
        self.shared.send(package)
    }
}
