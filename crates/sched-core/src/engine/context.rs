//! The handle through which running code reaches its scheduler.

use relay::{Pid, PidsExhausted};

use super::shared::Shared;
use crate::contract::output::Output;
use crate::contract::step_engine::StepEngine;

/// The scheduler's operations, reachable from inside a step
/// ([`Output::context`](crate::Output::context)), a command handler
/// ([`Completer::context`](crate::Completer::context)) and a lifecycle
/// hook (its first argument), without globals or `Arc` plumbing.
///
/// A `Context` is only ever borrowed (`&Context`): it costs nothing to
/// hand out, and it cannot be stored where it would keep the engine alive.
/// From outside, [`Engine::context`](crate::Engine::context) and
/// `Scheduler::context` hand it out.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
///
/// /// Starts a helper, tells it its job, and reports how busy the scheduler is.
/// struct Boss;
/// impl Process for Boss {
///     type Done = usize;
///     fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
///         let cx = out.context();
///         let live = cx.stats().live_processes;
///         let helper = cx.spawn(Helper)?;
///         cx.send(helper.pid(), 21u64)?;
///         out.finish(live);
///         Ok(())
///     }
/// }
///
/// struct Helper;
/// impl Process for Helper {
///     type Done = u64;
///     fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
///         for event in events {
///             if let sched::Event::Message(m) = event {
///                 out.finish(m.payload::<u64>().copied().unwrap_or(0) * 2);
///             }
///         }
///         Ok(())
///     }
/// }
///
/// let scheduler = Scheduler::builder().workers(1).build();
/// scheduler.start();
/// let live = scheduler.spawn(Boss)?.wait()?;
/// assert_eq!(live, 1); // the boss itself
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
    /// assert_eq!(engine.context().workers(), 3);
    /// ```
    pub fn workers(&self) -> usize {
        self.shared.remotes.len()
    }

    /// A fresh PID on this scheduler's node, reserved in the engine's
    /// process table for a later [`Spawn::at`](crate::Spawn::at): no PID is
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
    /// assert_ne!(engine.context().allocate_pid().unwrap(), engine.context().allocate_pid().unwrap());
    /// ```
    pub fn allocate_pid(&self) -> Result<Pid, PidsExhausted> {
        self.shared.processes.allocate_pid(&self.shared)
    }
}

/// What holds an engine and hands out its [`Context`]: the
/// [`Engine`](crate::Engine), a [`Simulation`](crate::sim::Simulation),
/// the `Scheduler` of the `sched` crate, or a `Context` itself. Code that
/// keeps an engine on its own thread (a metrics publisher, a live view)
/// takes one of these in an `Arc`, which keeps the engine alive as long
/// as the thread runs.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use sched::engine::AsContext;
///
/// fn live_processes(engine: &impl AsContext) -> usize {
///     engine.context().stats().live_processes
/// }
/// let scheduler = Scheduler::builder().workers(1).build();
/// assert_eq!(live_processes(&scheduler), 0);
/// ```
pub trait AsContext {
    /// The engine's handle.
    fn context(&self) -> &Context;
}

impl AsContext for Context {
    fn context(&self) -> &Context {
        self
    }
}

/// The engine an `Arc` holds (a scheduler shared with other threads).
impl<S: AsContext + ?Sized> AsContext for std::sync::Arc<S> {
    fn context(&self) -> &Context {
        (**self).context()
    }
}

impl<S: AsContext + ?Sized> AsContext for &S {
    fn context(&self) -> &Context {
        (**self).context()
    }
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("workers", &self.workers())
            .finish_non_exhaustive()
    }
}

/// The scheduler's handle, from a step.
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
        Context::of_step(self.engine)
    }
}

impl Context {
    /// The handle of the engine running a step.
    pub(crate) fn of_step(engine: &dyn StepEngine) -> &Context {
        engine
            .context()
            .downcast_ref::<Context>()
            .expect("a step's engine is a `Context`")
    }
}
