//! The engine: building it, submitting, sending, terminating, stopping.

pub(crate) mod hooks;
pub(crate) mod stats;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, SeqCst};
use std::sync::Arc as StdArc;
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;
use relay::{Package, Payload, Pid, PidAllocator, Router, SendError, SendErrorKind};

use crate::commands::handler::{CommandHandler, Handlers};
use crate::contract::command::CommandId;
use crate::contract::error::{SubmitError, TerminateError};
use crate::contract::event::Event;
use crate::contract::process::{InitContext, InitError, Process};
use crate::panic_message::panic_message;
use crate::record::completion::Completion;
use crate::record::state::{ProcessState, Wake, FORCE, TERMINATE};
use crate::record::Record;
use crate::sync::{thread, Arc, AtomicBool, AtomicU64, AtomicUsize, Condvar, Fifo, Mutex};
use crate::worker;
use crate::worker::local::{self, Local};
use hooks::Hooks;
use stats::{Stats, WorkerCounters};

/// Initial capacity of each worker deque (it grows when needed).
const LOCAL_QUEUE_CAPACITY: usize = if cfg!(loom) { 2 } else { 256 };
/// How long, after forcing the stragglers at the shutdown deadline, the
/// engine waits for workers to end them and to exit.
const FORCE_GRACE: Duration = Duration::from_millis(200);

/// Configures and builds an [`Engine`].
///
/// # Examples
///
/// ```
/// use sched_core::{Command, CommandId, Completer, Engine, Rejected};
///
/// let engine = Engine::builder()
///     .workers(2)
///     .max_processes(10_000)
///     .thread_name("sim-worker")
///     .handler(CommandId(1), |cmd: Command, c: Completer| -> Result<(), Rejected> {
///         let _ = c.complete(cmd.data);
///         Ok(())
///     })
///     .build();
/// assert_eq!(engine.workers(), 2);
/// ```
pub struct Builder {
    workers: usize,
    max_processes: usize,
    thread_name: String,
    node: u32,
    handlers: Handlers,
    hooks: Hooks,
    mailbox_capacity: usize,
}

impl std::fmt::Debug for Builder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Builder")
            .field("workers", &self.workers)
            .field("max_processes", &self.max_processes)
            .field("thread_name", &self.thread_name)
            .field("node", &self.node)
            .field("handlers", &self.handlers)
            .field("hooks", &self.hooks)
            .field("mailbox_capacity", &self.mailbox_capacity)
            .finish()
    }
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            workers: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            max_processes: usize::MAX,
            thread_name: "sched-worker".into(),
            node: Pid::LOCAL_NODE,
            handlers: Handlers::default(),
            hooks: Hooks::default(),
            mailbox_capacity: usize::MAX,
        }
    }
}

impl Builder {
    /// Number of worker threads (default: available parallelism; at least 1).
    ///
    /// # Examples
    ///
    /// See [`Builder`].
    pub fn workers(mut self, workers: usize) -> Self {
        self.workers = workers.max(1);
        self
    }

    /// Most processes live at once; submissions beyond fail with
    /// [`SubmitError::TooManyProcesses`]. Default: unlimited.
    ///
    /// # Examples
    ///
    /// See [`Builder`].
    pub fn max_processes(mut self, max: usize) -> Self {
        self.max_processes = max;
        self
    }

    /// Prefix of worker thread names (`PREFIX-0`, `PREFIX-1`, ...).
    ///
    /// # Examples
    ///
    /// See [`Builder`].
    pub fn thread_name(mut self, prefix: impl Into<String>) -> Self {
        self.thread_name = prefix.into();
        self
    }

    /// The node number of PIDs the engine allocates (default
    /// [`Pid::LOCAL_NODE`]).
    ///
    /// # Examples
    ///
    /// ```
    /// let engine = sched_core::Engine::builder().workers(1).node(3).build();
    /// assert_eq!(engine.allocate_pid().unwrap().node(), 3);
    /// ```
    pub fn node(mut self, node: u32) -> Self {
        self.node = node;
        self
    }

    /// Registers the handler of `id` (a later registration of the same id
    /// replaces the earlier one).
    ///
    /// # Examples
    ///
    /// See [`Builder`].
    pub fn handler(mut self, id: CommandId, handler: impl CommandHandler) -> Self {
        self.handlers.insert(id, StdArc::new(handler));
        self
    }

    /// Bounds each process's mailbox: a `send` that finds `capacity`
    /// messages already queued (not yet drained by a step) fails with
    /// [`SendErrorKind::Full`](relay::SendErrorKind::Full), handing the
    /// message back. Default: unbounded.
    ///
    /// # Examples
    ///
    /// ```
    /// let engine = sched_core::Engine::builder().workers(1).mailbox_capacity(64).build();
    /// # drop(engine);
    /// ```
    pub fn mailbox_capacity(mut self, capacity: usize) -> Self {
        self.mailbox_capacity = capacity;
        self
    }

    /// Called on the submitting thread after a process's `init` succeeded,
    /// before it is queued. An `Err` (or a panic) rejects the submission with
    /// [`SubmitError::Rejected`]; the process's `close` runs.
    ///
    /// # Examples
    ///
    /// ```
    /// let engine = sched_core::Engine::builder()
    ///     .workers(1)
    ///     .on_start(|pid| if pid.id() == 13 { Err("unlucky".into()) } else { Ok(()) })
    ///     .build();
    /// # drop(engine);
    /// ```
    pub fn on_start(
        mut self,
        hook: impl Fn(Pid) -> Result<(), crate::contract::event::BoxError> + Send + Sync + 'static,
    ) -> Self {
        self.hooks.on_start = Some(StdArc::new(hook));
        self
    }

    /// Called once for every process that ends, with its outcome, on the
    /// worker that ended it, just before the outcome is handed to its
    /// [`Completion`]. A panic in the hook is caught and logged.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    /// let ended = Arc::new(AtomicUsize::new(0));
    /// let counter = ended.clone();
    /// let engine = sched_core::Engine::builder()
    ///     .workers(1)
    ///     .on_complete(move |_pid, _outcome| { counter.fetch_add(1, Ordering::Relaxed); })
    ///     .build();
    /// # drop(engine);
    /// ```
    pub fn on_complete(
        mut self,
        hook: impl Fn(Pid, &crate::contract::outcome::Outcome) + Send + Sync + 'static,
    ) -> Self {
        self.hooks.on_complete = Some(StdArc::new(hook));
        self
    }

    /// Called with each message or completion still queued when its
    /// process ended (it was never delivered to a step). Dead letters are
    /// also counted in [`Stats::dead_letters`].
    ///
    /// # Examples
    ///
    /// ```
    /// let engine = sched_core::Engine::builder()
    ///     .workers(1)
    ///     .on_dead_letter(|pid, event| eprintln!("{pid} never saw {event:?}"))
    ///     .build();
    /// # drop(engine);
    /// ```
    pub fn on_dead_letter(mut self, hook: impl Fn(Pid, Event) + Send + Sync + 'static) -> Self {
        self.hooks.on_dead_letter = Some(StdArc::new(hook));
        self
    }

    /// Builds the engine. Workers start with [`Engine::start`] (or at the
    /// first `shutdown`); work submitted before that waits in the global
    /// queue.
    ///
    /// # Examples
    ///
    /// See [`Builder`].
    pub fn build(self) -> Engine {
        let locals: Vec<Local> = (0..self.workers)
            .map(|i| Local::new(i, LOCAL_QUEUE_CAPACITY))
            .collect();
        let remotes = locals
            .iter()
            .map(|l| {
                CachePadded::new(Remote {
                    lifo: l.lifo.stealer(),
                    fifo: l.fifo.stealer(),
                    counters: WorkerCounters::default(),
                })
            })
            .collect();
        let shared = Arc::new(Shared {
            injector: Fifo::new(),
            remotes,
            sleepers: crate::worker::sleep::Sleepers::new(self.workers),
            router: Router::new(),
            handlers: self.handlers,
            hooks: self.hooks,
            mailbox_capacity: self.mailbox_capacity,
            pids: PidAllocator::new(self.node),
            live: CachePadded::new(AtomicUsize::new(0)),
            max_live: self.max_processes,
            stopping: AtomicBool::new(false),
            exit: AtomicBool::new(false),
            dead_letters: AtomicU64::new(0),
            completed: AtomicU64::new(0),
            all_ended: Mutex::new(()),
            all_ended_cv: Condvar::new(),
        });
        Engine {
            shared,
            thread_name: self.thread_name,
            threads: Mutex::new(Threads {
                locals: Some(locals),
                handles: Vec::new(),
            }),
        }
    }
}

/// What other threads may touch of a worker: stealers of its deques and
/// its counters.
#[derive(Debug)]
pub(crate) struct Remote {
    pub(crate) lifo: deque::Stealer<Arc<Record>>,
    pub(crate) fifo: deque::Stealer<Arc<Record>>,
    pub(crate) counters: WorkerCounters,
}

/// The state every worker, completer and handle shares.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) injector: Fifo<Arc<Record>>,
    pub(crate) remotes: Box<[CachePadded<Remote>]>,
    pub(crate) sleepers: crate::worker::sleep::Sleepers,
    pub(crate) router: Router<Arc<Record>>,
    pub(crate) handlers: Handlers,
    pub(crate) hooks: Hooks,
    /// `usize::MAX` when mailboxes are unbounded (no counting at all).
    pub(crate) mailbox_capacity: usize,
    pub(crate) pids: PidAllocator,
    live: CachePadded<AtomicUsize>,
    max_live: usize,
    stopping: AtomicBool,
    pub(crate) exit: AtomicBool,
    pub(crate) dead_letters: AtomicU64,
    completed: AtomicU64,
    all_ended: Mutex<()>,
    all_ended_cv: Condvar,
}

/// Where a process that became runnable goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Runnable {
    /// Woken by an event, or new: the LIFO end of this worker's deque.
    Woken,
    /// Asked to continue: the FIFO queue of this worker.
    Continued,
}

impl Shared {
    /// Queues a runnable process and wakes a parked worker if there is one.
    /// On a worker thread of this engine the process goes to that worker's
    /// own queues (idle workers steal from them); elsewhere to the global
    /// queue.
    ///
    /// A process woken or spawned by a step goes to the worker's `next`
    /// slot, which only that worker runs, right after the step. No other
    /// worker is woken for it: the current one is busy for one step at most
    /// and then runs it. Only when the slot was taken, and its occupant
    /// moved to the stealable deque, is a parked worker woken to help.
    pub(crate) fn schedule(&self, record: Arc<Record>, how: Runnable) {
        // The record moves into whichever queue takes it: no reference-count
        // increment and decrement (two atomic read-modify-writes) per
        // schedule.
        let mut record = Some(record);
        let notify = local::with_local(self, |local| {
            let record = record.take().expect("taken once");
            match how {
                Runnable::Woken => local.put_next(record),
                Runnable::Continued => {
                    local.fifo.push(record);
                    true
                }
            }
        });
        if let Some(record) = record {
            self.injector.push(record);
        }
        if notify != Some(false) {
            self.sleepers.notify_one();
        }
    }

    /// Acts on the result of waking a process.
    pub(crate) fn after_wake(&self, record: &Arc<Record>, wake: Wake) {
        if wake == Wake::Schedule {
            self.schedule(record.clone(), Runnable::Woken);
        }
    }

    /// Whether any queue holds a runnable process (for the last check
    /// before parking: this scans every worker, but only when going idle).
    pub(crate) fn has_work(&self) -> bool {
        !self.injector.is_empty()
            || self
                .remotes
                .iter()
                .any(|r| !r.lifo.is_empty() || !r.fifo.is_empty())
    }

    pub(crate) fn submit(
        &self,
        pid: Pid,
        process: Box<dyn Process>,
        method: &str,
        input: Payload,
    ) -> Result<Completion, SubmitError> {
        if self.stopping.load(Acquire) {
            return Err(SubmitError::ShuttingDown);
        }
        self.reserve_live()?;
        let record = Arc::new(Record::new(pid, process));
        if self.router.register(pid, record.clone()).is_err() {
            self.release_live();
            return Err(SubmitError::DuplicatePid(pid));
        }
        // SAFETY: the record is not queued anywhere yet, so no worker can
        // own it; we are its only owner until `schedule` below.
        let init = unsafe {
            record.with_body(|body| {
                let process = body.process.as_mut().expect("a new record has its process");
                catch_unwind(AssertUnwindSafe(|| {
                    process.init(&InitContext::new(pid), method, input)
                }))
            })
        };
        let error = match init {
            Ok(Ok(())) => None,
            Ok(Err(error)) => Some(error),
            Err(panic) => Some(InitError::Panicked {
                message: panic_message(&*panic),
            }),
        };
        if let Some(error) = error {
            self.router.unregister(pid);
            record.state.complete();
            // SAFETY: still the only owner (never queued).
            let dead = unsafe {
                record.with_body(|body| {
                    body.process = None;
                    record.close_events()
                })
            };
            self.dead_letters(pid, dead);
            self.release_live();
            return Err(SubmitError::Init { pid, error });
        }
        if let Err(error) = self.hooks.started(pid) {
            self.router.unregister(pid);
            record.state.complete();
            // SAFETY: still the only owner (never queued).
            let (dead, closed) = unsafe {
                record.with_body(|body| {
                    let dead = record.close_events();
                    let process = body.process.take();
                    (dead, process)
                })
            };
            if let Some(mut process) = closed {
                if let Err(panic) = catch_unwind(AssertUnwindSafe(move || process.close())) {
                    tracing::debug!(%pid, message = %panic_message(&*panic), "close panicked");
                }
            }
            self.dead_letters(pid, dead);
            self.release_live();
            return Err(SubmitError::Rejected { pid, error });
        }
        tracing::trace!(%pid, method, "submitted");
        self.schedule(record.clone(), Runnable::Woken);
        Ok(Completion::new(record))
    }

    fn reserve_live(&self) -> Result<(), SubmitError> {
        let mut live = self.live.load(Relaxed);
        loop {
            if live >= self.max_live {
                return Err(SubmitError::TooManyProcesses { max: self.max_live });
            }
            match self
                .live
                .compare_exchange_weak(live, live + 1, AcqRel, Relaxed)
            {
                Ok(_) => return Ok(()),
                Err(current) => live = current,
            }
        }
    }

    /// One live process fewer; wakes `shutdown` when the last one ends.
    pub(crate) fn release_live(&self) {
        // SeqCst on both sides (here, and shutdown's swap of `stopping`
        // then load of `live`): either we see `stopping` and notify, or
        // shutdown sees our decrement before it waits.
        if self.live.fetch_sub(1, SeqCst) == 1 && self.stopping.load(SeqCst) {
            let _guard = self.all_ended.lock();
            self.all_ended_cv.notify_all();
        }
    }

    pub(crate) fn count_completed(&self) {
        self.completed.fetch_add(1, Relaxed);
    }

    /// Counts the events a process never saw (cancel requests are not
    /// letters) and passes them to the dead-letter hook.
    pub(crate) fn dead_letters(&self, pid: Pid, events: Vec<Event>) {
        let mut n = 0u64;
        for event in events {
            if matches!(event, Event::Cancel) {
                continue;
            }
            n += 1;
            if self.hooks.has_dead_letter_hook() {
                self.hooks.dead_letter(pid, event);
            }
        }
        if n > 0 {
            self.dead_letters.fetch_add(n, Relaxed);
            tracing::debug!(%pid, count = n, "dead letters");
        }
    }

    pub(crate) fn send(&self, package: Package) -> Result<(), SendError> {
        let target = package.target();
        // A step on a worker first tries the record this worker resolved for
        // the PID last time, skipping the routing table: its read lock is a
        // read-modify-write on a line every worker touches (about a fifth of
        // ping-pong). A cached record that refuses the message has ended;
        // the table then says whether the PID is gone or taken anew.
        let cached = local::with_local(self, |local| local.cached_route(target)).flatten();
        let package = match cached {
            Some(record) => match self.deliver_message(&record, package) {
                Err(error) if error.kind() == SendErrorKind::Closed => {
                    local::with_local(self, |local| local.forget_route(target));
                    error.into_package()
                }
                result => return result,
            },
            None => package,
        };
        let mut package = Some(package);
        let delivered = self.router.with(target, |record| {
            let result = self.deliver_message(record, package.take().expect("taken once"));
            if result.is_ok() {
                local::with_local(self, |local| local.remember_route(record));
            }
            result
        });
        match delivered {
            Some(result) => result,
            None => Err(SendError::unknown_target(
                package.take().expect("not taken when there is no route"),
            )),
        }
    }

    /// Delivers a message to `record`, counting it against the mailbox bound
    /// if there is one, and wakes the process.
    fn deliver_message(&self, record: &Arc<Record>, package: Package) -> Result<(), SendError> {
        let bounded = self.mailbox_capacity != usize::MAX;
        if bounded && record.mailbox.fetch_add(1, AcqRel) >= self.mailbox_capacity {
            record.mailbox.fetch_sub(1, AcqRel);
            return Err(SendError::full(package));
        }
        match record.deliver(Event::Message(package)) {
            Ok(wake) => {
                self.after_wake(record, wake);
                Ok(())
            }
            Err(event) => {
                if bounded {
                    record.mailbox.fetch_sub(1, AcqRel);
                }
                match event {
                    Event::Message(p) => Err(SendError::closed(p)),
                    _ => unreachable!("a message comes back as a message"),
                }
            }
        }
    }

    fn kill(&self, pid: Pid, flag: u32) -> bool {
        self.router
            .with(pid, |record| {
                let wake = record.state.kill(flag);
                self.after_wake(record, wake);
            })
            .is_some()
    }

    /// Waits until no process is live, or until `deadline`.
    fn wait_all_ended(&self, deadline: Instant) -> bool {
        let mut guard = self.all_ended.lock();
        loop {
            if self.live.load(SeqCst) == 0 {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            let (g, _) = self.all_ended_cv.wait_until(guard, deadline);
            guard = g;
        }
    }
}

/// The worker threads, and their queues until they start.
#[derive(Debug)]
struct Threads {
    locals: Option<Vec<Local>>,
    handles: Vec<thread::JoinHandle<()>>,
}

/// The scheduler engine: worker threads running step-driven processes.
///
/// This is the engine without API sugar; the `sched` crate is the facade
/// users normally depend on.
///
/// # Examples
///
/// ```
/// use relay::{Payload, Pid};
/// use sched_core::{BoxError, Engine, Events, InitContext, InitError, Output, Process};
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
/// assert!(handle.try_take().is_none());
/// engine.shutdown(std::time::Duration::from_secs(1));
/// ```
#[derive(Debug)]
pub struct Engine {
    shared: Arc<Shared>,
    thread_name: String,
    threads: Mutex<Threads>,
}

/// What `shutdown` did.
///
/// # Examples
///
/// ```
/// let engine = sched_core::Engine::builder().workers(1).build();
/// let report = engine.shutdown(std::time::Duration::from_millis(10));
/// assert_eq!(report.forced, 0);
/// assert_eq!(report.still_running, 0);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShutdownReport {
    /// Processes that ended by themselves after shutdown began.
    pub ended_gracefully: u64,
    /// Processes force-completed with a cancelled result at the deadline.
    pub forced: u64,
    /// Processes still inside a `step` that never returned; they have no
    /// outcome, and their workers were left running (detached).
    pub still_running: usize,
    /// Worker threads that had not exited and were detached.
    pub workers_detached: usize,
    /// Time shutdown took.
    pub elapsed: Duration,
}

/// One live process, as introspection reports it.
///
/// # Examples
///
/// See [`Engine::processes`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProcessInfo {
    /// Its PID.
    pub pid: Pid,
    /// Its state at the time of the call.
    pub state: ProcessState,
    /// Steps it has taken.
    pub steps: u64,
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

    /// The number of worker threads.
    ///
    /// # Examples
    ///
    /// See [`Builder`].
    pub fn workers(&self) -> usize {
        self.shared.remotes.len()
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
        let mut threads = self.threads.lock();
        let Some(locals) = threads.locals.take() else {
            return;
        };
        for local in locals {
            let shared = self.shared.clone();
            let name = format!("{}-{}", self.thread_name, local.index);
            let handle = spawn_named(name, move || worker::run(shared, local));
            threads.handles.push(handle);
        }
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

    /// A fresh PID on this engine's node.
    ///
    /// # Errors
    ///
    /// The node's ids are exhausted.
    ///
    /// # Examples
    ///
    /// ```
    /// let engine = sched_core::Engine::builder().workers(1).build();
    /// assert_ne!(engine.allocate_pid().unwrap(), engine.allocate_pid().unwrap());
    /// ```
    pub fn allocate_pid(&self) -> Result<Pid, relay::PidsExhausted> {
        self.shared.pids.allocate()
    }

    /// Ends the process `pid` with [`ExitError::Terminated`](crate::ExitError::Terminated)
    /// the next time a worker holds it (at once if it is waiting; after its
    /// current step if it is running). Its `close` runs as usual.
    ///
    /// # Errors
    ///
    /// [`TerminateError::NotFound`] if no live process has that PID.
    ///
    /// # Examples
    ///
    /// ```
    /// let engine = sched_core::Engine::builder().workers(1).build();
    /// assert!(engine.terminate(relay::Pid::local(404)).is_err());
    /// ```
    pub fn terminate(&self, pid: Pid) -> Result<(), TerminateError> {
        if self.shared.kill(pid, TERMINATE) {
            Ok(())
        } else {
            Err(TerminateError::NotFound(pid))
        }
    }

    /// A snapshot of the counters, safe to take while workers run.
    ///
    /// # Examples
    ///
    /// See [`Stats`].
    pub fn stats(&self) -> Stats {
        let threads = self.threads.lock();
        let workers = self
            .shared
            .remotes
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let queued = match &threads.locals {
                    Some(locals) => locals[i].len(),
                    None => r.lifo.len() + r.fifo.len(),
                };
                r.counters.snapshot(queued)
            })
            .collect();
        Stats {
            workers,
            global_queue_len: self.shared.injector.len(),
            live_processes: self.shared.live.load(Relaxed),
            parked_workers: self.shared.sleepers.sleeping(),
            dead_letters: self.shared.dead_letters.load(Relaxed),
        }
    }

    /// The live processes with their state and step count.
    ///
    /// # Examples
    ///
    /// ```
    /// let engine = sched_core::Engine::builder().workers(1).build();
    /// assert!(engine.processes().is_empty());
    /// ```
    pub fn processes(&self) -> Vec<ProcessInfo> {
        let mut list: Vec<ProcessInfo> = self
            .shared
            .router
            .pids()
            .into_iter()
            .filter_map(|pid| {
                self.shared.router.with(pid, |r| ProcessInfo {
                    pid,
                    state: ProcessState::from_word(r.state.load()),
                    steps: r.steps.load(Relaxed),
                })
            })
            .collect();
        list.sort_by_key(|p| p.pid);
        list
    }

    /// Stops the engine: refuses new submissions, sends [`Event::Cancel`] to
    /// every live process, and waits until they have all ended or
    /// `deadline` has passed. Then it force-completes the rest with
    /// [`ExitError::Cancelled`](crate::ExitError::Cancelled) (their `close`
    /// runs), and joins the workers.
    ///
    /// It returns as soon as every process has ended, not at the deadline;
    /// past the deadline it waits at most a short grace period for the
    /// workers to end the forced processes. A process stuck inside a `step`
    /// that never returns cannot be ended: it is reported in
    /// `still_running` and its worker is detached rather than joined.
    /// Calling it again does nothing more and returns an empty report.
    ///
    /// # Examples
    ///
    /// See [`ShutdownReport`].
    pub fn shutdown(&self, deadline: Duration) -> ShutdownReport {
        let started = Instant::now();
        let deadline_at = started + deadline;
        let shared = &self.shared;
        if shared.stopping.swap(true, SeqCst) {
            return ShutdownReport::default();
        }
        self.start();
        let completed_before = shared.completed.load(SeqCst);
        for pid in shared.router.pids() {
            shared.router.with(pid, |record| {
                if let Ok(wake) = record.deliver(Event::Cancel) {
                    shared.after_wake(record, wake);
                }
            });
        }
        let mut forced_at = None;
        if !shared.wait_all_ended(deadline_at) {
            forced_at = Some(shared.completed.load(SeqCst));
            for pid in shared.router.pids() {
                shared.kill(pid, FORCE);
            }
            shared.wait_all_ended(Instant::now() + FORCE_GRACE);
        }
        shared.exit.store(true, SeqCst);
        shared.sleepers.notify_all();

        let handles = std::mem::take(&mut self.threads.lock().handles);
        let join_deadline = Instant::now().max(deadline_at) + FORCE_GRACE;
        let mut detached = 0;
        for handle in handles {
            if !join_until(handle, join_deadline) {
                detached += 1;
            }
        }
        // Read after the join, like `still_running` below: a forced process
        // that ends while the workers wind down is then counted as forced,
        // not lost between the two figures.
        let completed_after = shared.completed.load(SeqCst);
        let graceful_end = forced_at.unwrap_or(completed_after);
        let report = ShutdownReport {
            ended_gracefully: graceful_end - completed_before,
            forced: completed_after - graceful_end,
            still_running: shared.live.load(SeqCst),
            workers_detached: detached,
            elapsed: started.elapsed(),
        };
        tracing::debug!(?report, "shutdown");
        report
    }
}

impl relay::Receiver for Engine {
    /// Delivers a message to its target process.
    fn send(&self, package: Package) -> Result<(), SendError> {
        self.shared.send(package)
    }
}

impl Drop for Engine {
    /// An engine dropped without `shutdown` shuts down with a zero deadline:
    /// live processes are cancelled at once.
    fn drop(&mut self) {
        if !self.shared.stopping.load(SeqCst) {
            self.shutdown(Duration::ZERO);
        }
    }
}

#[cfg(not(loom))]
fn spawn_named(name: String, f: impl FnOnce() + Send + 'static) -> thread::JoinHandle<()> {
    thread::Builder::new()
        .name(name)
        .spawn(f)
        .expect("failed to spawn a worker thread")
}

#[cfg(loom)]
fn spawn_named(_name: String, f: impl FnOnce() + Send + 'static) -> thread::JoinHandle<()> {
    thread::spawn(f)
}

/// Joins `handle` if its thread ends before `deadline`; returns whether it
/// did (a thread stuck in a step is left running).
#[cfg(not(loom))]
fn join_until(handle: thread::JoinHandle<()>, deadline: Instant) -> bool {
    while !handle.is_finished() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    if handle.is_finished() {
        let _ = handle.join();
        true
    } else {
        false
    }
}

/// loom has no clock: join.
#[cfg(loom)]
fn join_until(handle: thread::JoinHandle<()>, _deadline: Instant) -> bool {
    let _ = handle.join();
    true
}
