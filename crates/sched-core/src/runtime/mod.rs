//! The engine's handle: what a user builds ([`Builder`]), starts, submits
//! to and shuts down ([`Engine`]). It stands on top of everything else: it
//! builds the shared state (`engine/`) and hands it the worker loop
//! (`worker/`) to start its threads with.

mod builder;
pub mod simulation;

pub use builder::Builder;

use std::time::Duration;

use crate::engine::shared::Shared;
use crate::engine::{Context, ShutdownReport};
use crate::sync::Arc;

/// The scheduler engine: worker threads running step-driven processes.
///
/// This is the engine without API sugar; the `sched` crate is the facade
/// users normally depend on.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use sched::engine::Engine;
///
/// struct Hello;
/// impl Process for Hello {
///     type Done = &'static str;
///     fn init(&mut self, _: &InitContext, _: &str, _: Payload) -> Result<(), InitError> { Ok(()) }
///     fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
///         out.finish("hello");
///         Ok(())
///     }
///     fn close(&mut self) {}
/// }
///
/// let engine = Engine::builder().workers(2).build();
/// engine.start();
/// let pid = engine.context().allocate_pid()?;
/// let mut handle = engine.context().spawn(Spawn::new(Hello).method("run").at(pid))?;
/// assert_eq!(handle.pid(), pid);
/// let result = handle.wait_timeout(std::time::Duration::from_secs(5));
/// assert_eq!(result?, "hello");
/// assert!(!handle.is_finished()); // the outcome was taken
/// assert!(matches!(handle.try_take(), Some(Err(sched::ExitError::AlreadyTaken))));
/// engine.shutdown(std::time::Duration::from_secs(1));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// Every operation a step or a handler can reach (spawn, send, ask,
/// stats, terminate, ...) is a method of its [`Context`]
/// ([`context`](Engine::context)); the engine itself starts and stops.
#[derive(Debug)]
pub struct Engine {
    shared: Arc<Shared>,
}

impl Engine {
    /// The handle every operation goes through: spawn, send, ask, names,
    /// monitors, introspection.
    ///
    /// # Examples
    ///
    /// ```
    /// let engine = sched::engine::Engine::builder().workers(2).build();
    /// assert_eq!(engine.context().workers(), 2);
    /// ```
    pub fn context(&self) -> &Context {
        Context::of(&self.shared)
    }

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
        self.shared.control.start(&self.shared);
    }
}

impl crate::engine::AsContext for Engine {
    fn context(&self) -> &Context {
        Engine::context(self)
    }
}

impl Engine {
    /// Stops the engine: refuses new submissions, sends [`Event::Cancel`](crate::Event::Cancel) to
    /// every live process, and waits until they have all ended or
    /// `deadline` has passed. Then it force-completes the rest with
    /// [`ExitError::Cancelled`](crate::ExitError::Cancelled) (their `close`
    /// runs), and joins the workers.
    ///
    /// Every process that was admitted (its submission returned `Ok`, or is
    /// about to) receives the cancel, and shutdown waits for it; a
    /// submission that loses the race fails with
    /// [`SubmitError::ShuttingDown`](crate::SubmitError::ShuttingDown).
    ///
    /// It returns as soon as every process has ended, not at the deadline,
    /// and never later than 100 ms past the deadline: workers still ending
    /// forced processes then are detached and finish them on their own
    /// (they are counted in `still_queued` and still get their outcome).
    /// A process stuck inside a `step`
    /// that never returns cannot be ended: it is reported in
    /// `still_running` (and processes queued behind it in `still_queued`),
    /// and its worker is detached rather than joined. A call made while
    /// another is in progress waits for that one and returns the same
    /// report; so does any later call.
    ///
    /// # Examples
    ///
    /// See [`ShutdownReport`].
    pub fn shutdown(&self, deadline: Duration) -> ShutdownReport {
        crate::engine::shutdown::shutdown(&self.shared, deadline)
    }

    /// Waits for a shutdown started elsewhere (by
    /// [`Context::request_shutdown`] from a step, or by another thread) to
    /// finish, and returns its report. It starts nothing: with no shutdown
    /// under way it waits until one is.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// let engine = sched::engine::Engine::builder().workers(1).build();
    /// engine.context().request_shutdown(Duration::from_millis(50));
    /// let report = engine.wait_for_shutdown();
    /// assert_eq!(report.forced, 0);
    /// ```
    pub fn wait_for_shutdown(&self) -> ShutdownReport {
        self.shared.control.wait_for_shutdown()
    }
}

impl Drop for Engine {
    /// An engine dropped without `shutdown` shuts down with a zero deadline:
    /// live processes are cancelled at once.
    fn drop(&mut self) {
        if !self.shared.is_stopping() {
            self.shutdown(Duration::ZERO);
        }
    }
}
