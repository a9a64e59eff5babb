//! The engine's own threads: starting the workers, and what shutdown needs
//! to join them and publish its report, kept in the shared state so that a
//! step can ask for a shutdown through its [`Context`](super::Context).

use std::fmt;

use super::shared::Shared;
use super::shutdown::Finished;
use crate::runqueue::local::Local;
use crate::sync::{thread, Arc, AtomicBool, AtomicUsize, Mutex};

/// The worker threads, and their queues until they start.
#[derive(Debug)]
pub(super) struct Threads {
    pub(super) locals: Option<Vec<Local>>,
    pub(super) handles: Vec<thread::JoinHandle<()>>,
}

/// The worker loop, run on each worker thread with its own queues.
pub(crate) type WorkerLoop = fn(Arc<Shared>, Local);

/// Thread handles, names and the shutdown report.
pub(crate) struct Control {
    pub(super) thread_name: String,
    /// What each worker thread runs: the worker loop, handed in by whoever
    /// builds the engine (the loop stands above the shared state it runs
    /// on, so this state does not name it).
    run_worker: WorkerLoop,
    pub(super) threads: Mutex<Threads>,
    pub(super) finished: Finished,
    /// Whether a step already asked for a shutdown (so that it starts one
    /// thread, once). Steps cannot ask under loom (see `me`).
    #[cfg_attr(loom, allow(dead_code))]
    pub(super) shutdown_requested: AtomicBool,
    /// How many forced processes have been named in a warning so far (see
    /// `Shared::name_forced`); only written when shutdown forces one.
    pub(super) forced_named: AtomicUsize,
    /// The shared state itself, for a shutdown started from inside (which
    /// runs on a thread of its own and needs to own a reference). Weak, so
    /// the state does not keep itself alive. loom's `Arc` has no weak
    /// references; the models never start a shutdown from a step.
    #[cfg(not(loom))]
    pub(super) me: std::sync::Weak<Shared>,
}

impl Control {
    pub(crate) fn new(thread_name: String, locals: Vec<Local>, run_worker: WorkerLoop) -> Self {
        Control {
            thread_name,
            run_worker,
            threads: Mutex::new(Threads {
                locals: Some(locals),
                handles: Vec::new(),
            }),
            finished: Finished::default(),
            shutdown_requested: AtomicBool::new(false),
            forced_named: AtomicUsize::new(0),
            #[cfg(not(loom))]
            me: std::sync::Weak::new(),
        }
    }
}

impl fmt::Debug for Control {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Control")
            .field("thread_name", &self.thread_name)
            .finish_non_exhaustive()
    }
}

/// Starts the worker threads (once; later calls do nothing).
pub(crate) fn start(shared: &Arc<Shared>) {
    let mut threads = shared.control.threads.lock();
    let Some(locals) = threads.locals.take() else {
        return;
    };
    for local in locals {
        let worker_shared = shared.clone();
        let name = format!("{}-{}", shared.control.thread_name, local.index);
        let run = shared.control.run_worker;
        let handle = spawn_named(name, move || run(worker_shared, local));
        threads.handles.push(handle);
    }
    // The watcher is not modelled: it only reads counters (and ticks a
    // clock no model reads). It runs for long steps, or for the coarse
    // clock that introspection's `since_last_step` reads.
    #[cfg(not(loom))]
    if shared.long_steps.threshold.is_some() || cfg!(feature = "introspection") {
        let threshold = shared.long_steps.threshold;
        let watched = shared.clone();
        let name = format!("{}-watcher", shared.control.thread_name);
        let handle = spawn_named(name, move || super::long_steps::watch(watched, threshold));
        threads.handles.push(handle);
    }
}

#[cfg(not(loom))]
pub(super) fn spawn_named(
    name: String,
    f: impl FnOnce() + Send + 'static,
) -> thread::JoinHandle<()> {
    thread::Builder::new()
        .name(name)
        .spawn(f)
        .expect("failed to spawn a worker thread")
}

#[cfg(loom)]
pub(super) fn spawn_named(
    _name: String,
    f: impl FnOnce() + Send + 'static,
) -> thread::JoinHandle<()> {
    thread::spawn(f)
}
