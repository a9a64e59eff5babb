//! The engine's own threads: starting the workers (and the long-step
//! watcher), what shutdown needs to join them, and the report it publishes
//! when it is done, kept in the shared state so that a step can ask for a
//! shutdown through its [`Context`](super::Context).
//!
//! With them, the rest of the engine's lifecycle that shutdown owns: the
//! flag that lets the workers leave, and where shutdown waits for the last
//! live process to end. Its operations are methods of [`Control`], written
//! in `shutdown.rs` (the live count it waits on is admission's `Live`).
//!
//! Generic over the shared state `S` the threads run on: this state is
//! part of `S`, and names neither it nor the worker loop (which stands
//! above it, in `worker/`); whoever builds the engine hands both in.

use std::fmt;
use std::sync::Arc as StdArc;
use std::time::Duration;

use crate::runqueue::local::Local;
use crate::sync::{thread, Arc, AtomicBool, AtomicUsize, Condvar, Mutex};

/// The worker threads, and their queues until they start.
#[derive(Debug)]
pub(super) struct Threads {
    pub(super) locals: Option<Vec<Local>>,
    pub(super) handles: Vec<thread::JoinHandle<()>>,
}

/// What each worker thread runs, on the shared state `S` with its own
/// queues: the worker loop, with what of the engine's configuration only
/// it reads (the command handlers).
pub(crate) type WorkerLoop<S> = StdArc<dyn Fn(Arc<S>, Local) + Send + Sync>;

/// Thread handles, names, the exit flag, the wait for the last process
/// and the shutdown report.
pub(crate) struct Control<S> {
    pub(super) thread_name: String,
    run_worker: WorkerLoop<S>,
    /// The long-step watcher's loop, if one runs (see `long_steps.rs`).
    #[cfg_attr(loom, allow(dead_code))]
    watcher: Option<fn(Arc<S>)>,
    pub(super) threads: Mutex<Threads>,
    pub(super) finished: Finished,
    /// Whether a step already asked for a shutdown (so that it starts one
    /// thread, once). Steps cannot ask under loom (see `me`).
    #[cfg_attr(loom, allow(dead_code))]
    pub(super) shutdown_requested: AtomicBool,
    /// The deadline of a shutdown a step asked for in a simulation, which
    /// runs it on its own thread rather than on a new one.
    pub(crate) requested_deadline: Mutex<Option<Duration>>,
    /// How many forced processes have been named in a warning so far (see
    /// `Control::name_forced`); only written when shutdown forces one.
    pub(super) forced_named: AtomicUsize,
    /// Set when the workers may leave (once their queues are empty).
    pub(crate) exit: AtomicBool,
    /// Where shutdown waits for the live count to reach zero, and the
    /// release of the last live process wakes it.
    pub(super) all_ended: Mutex<()>,
    pub(super) all_ended_cv: Condvar,
    /// The shared state itself, for a shutdown started from inside (which
    /// runs on a thread of its own and needs to own a reference). Weak, so
    /// the state does not keep itself alive. loom's `Arc` has no weak
    /// references; the models never start a shutdown from a step.
    #[cfg(not(loom))]
    pub(super) me: std::sync::Weak<S>,
}

impl<S: Send + Sync + 'static> Control<S> {
    pub(crate) fn new(
        thread_name: String,
        locals: Vec<Local>,
        run_worker: WorkerLoop<S>,
        watcher: Option<fn(Arc<S>)>,
    ) -> Self {
        Control {
            thread_name,
            run_worker,
            watcher,
            threads: Mutex::new(Threads {
                locals: Some(locals),
                handles: Vec::new(),
            }),
            finished: Finished::default(),
            shutdown_requested: AtomicBool::new(false),
            requested_deadline: Mutex::new(None),
            forced_named: AtomicUsize::new(0),
            exit: AtomicBool::new(false),
            all_ended: Mutex::new(()),
            all_ended_cv: Condvar::new(),
            #[cfg(not(loom))]
            me: std::sync::Weak::new(),
        }
    }

    /// Takes the workers' queues for a simulation, which drives them on its
    /// own thread: no worker thread (and no watcher) starts after this.
    pub(crate) fn take_locals(&self) -> Vec<Local> {
        self.threads.lock().locals.take().unwrap_or_default()
    }

    /// Starts the worker threads, and the watcher if there is one, on
    /// `shared` (the state this control is part of). Once; later calls do
    /// nothing.
    pub(crate) fn start(&self, shared: &Arc<S>) {
        let mut threads = self.threads.lock();
        let Some(locals) = threads.locals.take() else {
            return;
        };
        for local in locals {
            let worker_shared = shared.clone();
            let name = format!("{}-{}", self.thread_name, local.index);
            let run = StdArc::clone(&self.run_worker);
            let handle = spawn_named(name, move || run(worker_shared, local));
            threads.handles.push(handle);
        }
        // The watcher is not modelled: it only reads counters (and ticks a
        // clock no model reads).
        #[cfg(not(loom))]
        if let Some(watch) = self.watcher {
            let watched = shared.clone();
            let name = format!("{}-watcher", self.thread_name);
            let handle = spawn_named(name, move || watch(watched));
            threads.handles.push(handle);
        }
    }
}

impl<S> fmt::Debug for Control<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Control")
            .field("thread_name", &self.thread_name)
            .finish_non_exhaustive()
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

/// What `shutdown` did.
///
/// # Examples
///
/// ```
/// let engine = sched::engine::Engine::builder().workers(1).build();
/// let report = engine.shutdown(std::time::Duration::from_millis(10));
/// assert_eq!(report.forced, 0);
/// assert_eq!(report.still_running, 0);
/// assert_eq!(report.still_queued, 0);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShutdownReport {
    /// Processes that ended by themselves after shutdown began.
    pub ended_gracefully: u64,
    /// Processes force-completed with a cancelled result at the deadline.
    pub forced: u64,
    /// Processes inside a `step` that had not returned when the report
    /// was made (a worker ending a process, running its `close`, is not
    /// counted here); their workers were left running (detached). Such a
    /// process gets its outcome only if its step ever returns.
    pub still_running: usize,
    /// Processes still live but not in a step when the report was made:
    /// being force-ended by a worker shutdown did not wait for (they get
    /// their cancelled outcome shortly after), or queued behind a worker
    /// stuck in a step (they get it only if that step returns).
    /// `ended_gracefully + forced + still_running + still_queued` is the
    /// number of processes that were live or admitted during the shutdown.
    pub still_queued: usize,
    /// Worker threads that had not exited and were detached.
    pub workers_detached: usize,
    /// Timers still pending once shutdown had ended every process it
    /// could (those of processes it gave up on: stuck in a step, or queued
    /// behind one), cancelled without firing. A delayed message whose
    /// target ended is not counted here: it was cancelled at that end, as
    /// a dead letter.
    pub timers_cancelled: usize,
    /// Time shutdown took.
    pub elapsed: Duration,
}

/// The report of the shutdown that ran, for every later or concurrent call.
#[derive(Debug, Default)]
pub(crate) struct Finished {
    report: Mutex<Option<ShutdownReport>>,
    done: Condvar,
}

impl Finished {
    pub(crate) fn publish(&self, report: &ShutdownReport) {
        *self.report.lock() = Some(report.clone());
        self.done.notify_all();
    }

    pub(crate) fn wait(&self) -> ShutdownReport {
        let mut report = self.report.lock();
        loop {
            if let Some(report) = &*report {
                return report.clone();
            }
            report = self.done.wait(report);
        }
    }
}
