//! Configuring an engine: worker count, limits, handlers, hooks.

use std::sync::Arc as StdArc;
use std::time::Duration;

use crossbeam_utils::CachePadded;
use relay::{Pid, RemoteTransport};

use super::Engine;
use crate::contract::event::Event;
use crate::contract::typed_command::CommandRef;
use crate::engine::commands::completer::{Completer, Rejected};
use crate::engine::commands::handler::Handlers;
use crate::engine::control::Control;
use crate::engine::histogram::WorkerHistograms;
use crate::engine::hooks::Hooks;
use crate::engine::live::Live;
use crate::engine::shared::{Remote, Shared};
use crate::engine::stats::WorkerCounters;
use crate::engine::Context;
use crate::runqueue::local::Local;
use crate::sync::{Arc, AtomicU64, Fifo};
use crate::timer::registry::Timers;

/// Initial capacity of each worker deque (it grows when needed).
const LOCAL_QUEUE_CAPACITY: usize = if cfg!(loom) { 2 } else { 256 };

/// The default of [`Builder::idle_linger`].
const DEFAULT_IDLE_LINGER: Duration = Duration::from_micros(300);

/// Configures and builds an [`Engine`].
///
/// # Examples
///
/// ```
/// use sched::command::{Command, CommandId, Completer, Rejected};
/// use sched::engine::Engine;
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
/// assert_eq!(engine.context().workers(), 2);
/// ```
pub struct Builder<T = Engine> {
    workers: usize,
    max_processes: usize,
    thread_name: String,
    node: u32,
    handlers: Handlers,
    hooks: Hooks,
    mailbox_capacity: usize,
    remote: Option<StdArc<dyn RemoteTransport>>,
    long_step_threshold: Option<Duration>,
    histograms: bool,
    count_mailboxes: bool,
    idle_linger: Duration,
    /// Declared groups, by name, with their weights; `"default"` sets the
    /// default group's weight.
    groups: Vec<(String, u32)>,
    /// What [`build`](Builder::build) makes: the [`Engine`], or a handle
    /// that wraps one (the facade's `Scheduler`).
    product: std::marker::PhantomData<fn() -> T>,
}

impl<T> std::fmt::Debug for Builder<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Builder")
            .field("workers", &self.workers)
            .field("max_processes", &self.max_processes)
            .field("thread_name", &self.thread_name)
            .field("node", &self.node)
            .field("handlers", &self.handlers)
            .field("hooks", &self.hooks)
            .field("mailbox_capacity", &self.mailbox_capacity)
            .field("remote", &self.remote)
            .field("long_step_threshold", &self.long_step_threshold)
            .field("histograms", &self.histograms)
            .field("count_mailboxes", &self.count_mailboxes)
            .field("idle_linger", &self.idle_linger)
            .field("groups", &self.groups)
            .finish()
    }
}

impl<T> Default for Builder<T> {
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
            remote: None,
            long_step_threshold: Some(Duration::from_millis(10)),
            histograms: false,
            count_mailboxes: false,
            idle_linger: DEFAULT_IDLE_LINGER,
            groups: Vec::new(),
            product: std::marker::PhantomData,
        }
    }
}

impl<T> Builder<T> {
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
    /// [`SubmitError::TooManyProcesses`](crate::SubmitError::TooManyProcesses). Default: unlimited.
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
    /// let engine = sched::engine::Engine::builder().workers(1).node(3).build();
    /// assert_eq!(engine.context().allocate_pid().unwrap().node(), 3);
    /// ```
    pub fn node(mut self, node: u32) -> Self {
        self.node = node;
        self
    }

    /// Connects the engine to other nodes: a send to a PID whose node is
    /// not this engine's [`node`](Builder::node) goes to `transport`, and
    /// packages arriving from other nodes are delivered to local processes
    /// as local sends are. The engine calls
    /// [`RemoteTransport::attach`] once, when built. Without a transport,
    /// a send to another node's PID fails with
    /// [`UnknownTarget`](relay::SendErrorKind::UnknownTarget).
    ///
    /// # Examples
    ///
    /// See [`RemoteTransport`] (the `relay-nats` crate provides one over
    /// NATS).
    pub fn remote(mut self, transport: StdArc<dyn RemoteTransport>) -> Self {
        self.remote = Some(transport);
        self
    }

    /// Registers `handler` for `command` (a later registration of the
    /// same id replaces the earlier one). For a
    /// [`TypedCommand<D, R>`](crate::TypedCommand) the
    /// handler receives the yield's data as a `D` and completes with an
    /// `R`; a yield to the same id whose data is not a `D` (made through
    /// the untyped `yield_command`) is rejected with
    /// [`CommandError::Rejected`](crate::CommandError::Rejected). For a
    /// plain [`CommandId`](crate::CommandId) it receives the whole
    /// [`Command`](crate::Command) (id, tag and
    /// untyped data) and completes with a [`Payload`](relay::Payload). The
    /// closure's parameter types are inferred from the command.
    ///
    /// A handler of a type of your own is registered through a closure
    /// that calls it: `.handler(ID, move |cmd, done| mine.handle(cmd, done))`.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::command::{CommandId, TypedCommand};
    /// use sched::engine::Engine;
    ///
    /// const NEXT: TypedCommand<u32, u32> = TypedCommand::new(CommandId(6));
    ///
    /// let engine = Engine::builder()
    ///     // Typed: the data is a `u32`, the result a `u32`.
    ///     .handler(NEXT, |n, done| {
    ///         let _ = done.complete(n + 1);
    ///         Ok(())
    ///     })
    ///     // Untyped: the whole command, any data, any result.
    ///     .handler(CommandId(7), |cmd, mut done| {
    ///         match cmd.data::<u32>() {
    ///             Some(n) => {
    ///                 let _ = done.complete(Box::new(n + 1));
    ///                 Ok(())
    ///             }
    ///             None => Err(done.reject("expected a u32")),
    ///         }
    ///     })
    ///     .build();
    /// # drop(engine);
    /// ```
    pub fn handler<C, F>(mut self, command: C, handler: F) -> Self
    where
        C: CommandRef,
        F: Fn(C::Input, Completer<C::Result>) -> Result<(), Rejected> + Send + Sync + 'static,
    {
        let registered = crate::engine::commands::typed::Registered::new(command, handler);
        self.handlers
            .insert(command.command_id(), StdArc::new(registered));
        self
    }

    /// Records the latency histograms (per worker, with no shared write;
    /// merged by [`Context::histograms`](crate::Context::histograms)): step
    /// durations, timer lateness, schedule latency and yield waits. Off by
    /// default: it reads the clock about three times per step, which costs
    /// a measurable share of a very short step (see the observability
    /// guide for the figures).
    ///
    /// # Examples
    ///
    /// See [`Context::histograms`](crate::Context::histograms).
    pub fn histograms(mut self, on: bool) -> Self {
        self.histograms = on;
        self
    }

    /// Counts the messages queued in each process's mailbox, so that
    /// [`ProcessInfo::mailbox_depth`](crate::ProcessInfo::mailbox_depth)
    /// reports it. Off by default: it costs an atomic add per message sent
    /// and an atomic subtraction per step that takes messages (on the
    /// word each send already writes to wake the process); a bounded
    /// mailbox (`mailbox_capacity`) counts anyway.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    ///
    /// struct Reader;
    /// impl Process for Reader {
    ///     type Done = ();
    ///     fn step(&mut self, events: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
    ///         events.for_each(drop);
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let scheduler = Scheduler::builder().workers(1).count_mailboxes(true).build();
    /// // Not started: the messages wait in its mailbox.
    /// let pid = scheduler.spawn(Reader)?.pid();
    /// scheduler.send(pid, 1u32)?;
    /// scheduler.send(pid, 2u32)?;
    /// assert_eq!(scheduler.context().process_info(pid).unwrap().mailbox_depth, Some(2));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn count_mailboxes(mut self, on: bool) -> Self {
        self.count_mailboxes = on;
        self
    }

    /// Declares a group of processes (a tenant) with a weight: when the
    /// workers are saturated, the groups with work ready at one priority
    /// level share the step time by their weights (a group of weight 3
    /// gets three times the step time of one of weight 1). A process joins
    /// a group at spawn ([`InitContext::set_group`](crate::InitContext::set_group));
    /// one spawned by a step joins its spawner's group unless its `init`
    /// chooses, and every other process is in the `"default"` group
    /// (weight 1; declaring `"default"` sets that weight). Find a group's
    /// handle with [`Context::group`](crate::Context::group). Declaring a
    /// name again changes its weight.
    ///
    /// A group's weight multiplies its processes' level's weight
    /// ([`Priority`](crate::Priority): `High` 12, `Normal` 3, `Low` 1): the
    /// worker serves each (level, group) lane by that product, so a
    /// group's `High` work still comes far ahead of its `Low` work. An
    /// engine without groups has one queue per level and reads the clock
    /// only while it measures steps for light-first or while levels
    /// compete; with groups, each step's time is read once, to charge it.
    ///
    /// # Panics
    ///
    /// If `weight` is not in `1..=10 000`, or if this would make more than
    /// 64 groups (the default one included).
    ///
    /// # Examples
    ///
    /// ```
    /// let engine = sched::engine::Engine::builder()
    ///     .workers(2)
    ///     .group("batch", 1)
    ///     .group("interactive", 3)
    ///     .build();
    /// let batch = engine.context().group("batch").expect("declared");
    /// assert_eq!(engine.context().groups().into_iter().find(|g| g.group == batch).map(|g| g.weight), Some(1));
    /// ```
    pub fn group(mut self, name: impl Into<String>, weight: u32) -> Self {
        use crate::runqueue::shares::{MAX_GROUPS, MAX_WEIGHT};
        assert!(
            (1..=MAX_WEIGHT).contains(&weight),
            "a group's weight is from 1 to {MAX_WEIGHT}, not {weight}"
        );
        let name = name.into();
        match self.groups.iter_mut().find(|(n, _)| *n == name) {
            Some(declared) => declared.1 = weight,
            None => {
                let default_declared = self.groups.iter().any(|(n, _)| n == "default");
                let count = 1 + self.groups.len() + usize::from(name != "default")
                    - usize::from(default_declared);
                assert!(
                    count <= MAX_GROUPS,
                    "an engine has at most {MAX_GROUPS} groups"
                );
                self.groups.push((name, weight));
            }
        }
        self
    }

    /// The longest an idle worker lingers, looking for work and yielding
    /// its thread between looks, before it parks. Waking a parked worker
    /// costs a system call on the waker's side and, on the worker's, the
    /// time the kernel (or a hypervisor) takes to bring its CPU back: a
    /// large part of the wait when work comes back within a few hundred
    /// microseconds, as answers over a network do. A worker whose recent
    /// idle spells were short lingers a little longer than the last one,
    /// up to this; one whose spell outlasted it parks at once again, so an
    /// idle engine does not poll. A lingering worker does not keep others
    /// from being woken.
    ///
    /// A worker lingers up to this only when work is likely to come back:
    /// when a step on it started something answered from outside the
    /// workers (a send or an ask to another node, a command), or when
    /// another worker is running a step and may hand it work. For work
    /// nothing awaits (messages or spawns from other threads) it lingers at
    /// most 25 µs, about what a park and its wake-up cost: a producer
    /// faster than that finds it awake, and a trickle slower than that
    /// parks it at once in every gap, where lingering would buy latency
    /// with CPU on every gap. [`WorkerStats::lingers`] counts the idle
    /// spells that lingered.
    ///
    /// Default: 300 µs; `Duration::ZERO` parks as soon as a short spin
    /// finds nothing (the least CPU when answers come in sporadic bursts,
    /// at the price of a wake-up per burst).
    ///
    /// [`WorkerStats::lingers`]: crate::WorkerStats::lingers
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// let engine = sched::engine::Engine::builder()
    ///     .workers(1)
    ///     .idle_linger(Duration::ZERO)
    ///     .build();
    /// # drop(engine);
    /// ```
    pub fn idle_linger(mut self, linger: Duration) -> Self {
        self.idle_linger = linger;
        self
    }

    /// Reports a step that has run for `threshold` while it still runs (a
    /// step that blocks or loops holds its worker): a `tracing` warning
    /// with its PID, its registered names, its type and the worker, and a
    /// count in [`Stats::long_steps`](crate::Stats::long_steps) and in the
    /// process's [`ProcessInfo::long_steps`](crate::ProcessInfo::long_steps).
    /// A watcher thread samples the workers every half threshold, so a
    /// step is reported after one to one and a half thresholds, once; the
    /// step path pays nothing for it. Default: 10 ms. `None` reports
    /// nothing (the watcher then only ticks introspection's clock, every
    /// 5 ms; without the `introspection` feature it is not started).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// let engine = sched::engine::Engine::builder()
    ///     .workers(1)
    ///     .long_step_threshold(Some(Duration::from_millis(50)))
    ///     .build();
    /// # drop(engine);
    /// ```
    pub fn long_step_threshold(mut self, threshold: Option<Duration>) -> Self {
        self.long_step_threshold = threshold.map(|t| t.max(Duration::from_millis(1)));
        self
    }

    /// Bounds each process's mailbox: a `send` that finds `capacity`
    /// messages already queued (not yet drained by a step) fails with
    /// [`SendErrorKind::Full`](relay::SendErrorKind::Full), handing the
    /// message back. An [`Urgent`](crate::Urgent) message has a reserve: it
    /// fails only at `capacity + max(1, capacity / 8)` queued. Questions
    /// (asks) are not counted and never refused for it: each has an asker
    /// waiting, so the askers bound them. Default: unbounded (as is any
    /// capacity of 2^27 or more).
    ///
    /// # Examples
    ///
    /// ```
    /// let engine = sched::engine::Engine::builder().workers(1).mailbox_capacity(64).build();
    /// # drop(engine);
    /// ```
    pub fn mailbox_capacity(mut self, capacity: usize) -> Self {
        // A mailbox counts in 32 bits (see `record/mailbox.rs`).
        self.mailbox_capacity = if capacity >= crate::record::mailbox::MAX_CAPACITY {
            usize::MAX
        } else {
            capacity
        };
        self
    }

    /// Called on the submitting thread after a process's `init` succeeded,
    /// with the engine's [`Context`] and the new PID,
    /// before it is queued. An `Err` (or a panic) rejects the submission with
    /// [`SubmitError::Rejected`](crate::SubmitError::Rejected); the process's `close` runs.
    ///
    /// # Examples
    ///
    /// ```
    /// let engine = sched::engine::Engine::builder()
    ///     .workers(1)
    ///     .on_start(|_cx, pid| if pid.id() == 13 { Err("unlucky".into()) } else { Ok(()) })
    ///     .build();
    /// # drop(engine);
    /// ```
    pub fn on_start(
        mut self,
        hook: impl Fn(&Context, Pid) -> Result<(), crate::contract::error::BoxError>
            + Send
            + Sync
            + 'static,
    ) -> Self {
        self.hooks.on_start = Some(StdArc::new(hook));
        self
    }

    /// Called once for every process that ends, with its outcome, on the
    /// worker that ended it, just before the outcome is handed to its
    /// [`Completion`](crate::Completion). The process no longer counts against
    /// [`max_processes`](Builder::max_processes) by then, so the hook may
    /// submit a replacement even at the limit. A panic in the hook is
    /// caught and logged.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    /// let ended = Arc::new(AtomicUsize::new(0));
    /// let counter = ended.clone();
    /// let engine = sched::engine::Engine::builder()
    ///     .workers(1)
    ///     .on_complete(move |_cx, _pid, _outcome| { counter.fetch_add(1, Ordering::Relaxed); })
    ///     .build();
    /// # drop(engine);
    /// ```
    pub fn on_complete(
        mut self,
        hook: impl Fn(&Context, Pid, &crate::contract::outcome::Outcome) + Send + Sync + 'static,
    ) -> Self {
        self.hooks.on_complete = Some(StdArc::new(hook));
        self
    }

    /// Called on the long-step watcher's thread for each step reported as
    /// long (see [`long_step_threshold`](Builder::long_step_threshold)),
    /// while it still runs: the process's PID, the worker running it and
    /// how long it has run at least. A hook that blocks delays the
    /// watcher's later reports; a panicking one is caught and logged.
    ///
    /// # Examples
    ///
    /// ```
    /// let engine = sched::engine::Engine::builder()
    ///     .workers(1)
    ///     .on_long_step(|_cx, pid, worker, running| {
    ///         eprintln!("{pid} has held worker {worker} for {running:?}")
    ///     })
    ///     .build();
    /// # drop(engine);
    /// ```
    pub fn on_long_step(
        mut self,
        hook: impl Fn(&Context, Pid, usize, Duration) + Send + Sync + 'static,
    ) -> Self {
        self.hooks.on_long_step = Some(StdArc::new(hook));
        self
    }

    /// Called with each message or completion still queued when its
    /// process ended (it was never delivered to a step). Dead letters are
    /// also counted in [`Stats::dead_letters`](crate::Stats::dead_letters).
    ///
    /// # Examples
    ///
    /// ```
    /// let engine = sched::engine::Engine::builder()
    ///     .workers(1)
    ///     .on_dead_letter(|_cx, pid, event| eprintln!("{pid} never saw {event:?}"))
    ///     .build();
    /// # drop(engine);
    /// ```
    pub fn on_dead_letter(
        mut self,
        hook: impl Fn(&Context, Pid, Event) + Send + Sync + 'static,
    ) -> Self {
        self.hooks.on_dead_letter = Some(StdArc::new(hook));
        self
    }

    /// The same settings, building a `U` (the engine's own builder, from
    /// the facade's, for [`Simulation::cluster`](crate::sim::Simulation::cluster)).
    ///
    /// # Examples
    ///
    /// ```
    /// let engine = sched::Scheduler::builder().workers(2).product::<sched::engine::Engine>().build();
    /// assert_eq!(engine.context().workers(), 2);
    /// ```
    pub fn product<U>(self) -> Builder<U> {
        Builder {
            workers: self.workers,
            max_processes: self.max_processes,
            thread_name: self.thread_name,
            node: self.node,
            handlers: self.handlers,
            hooks: self.hooks,
            mailbox_capacity: self.mailbox_capacity,
            remote: self.remote,
            long_step_threshold: self.long_step_threshold,
            histograms: self.histograms,
            count_mailboxes: self.count_mailboxes,
            idle_linger: self.idle_linger,
            groups: self.groups,
            product: std::marker::PhantomData,
        }
    }

    /// The engine's shared state on `clock`, with `intercept` in its
    /// delivery path, and the command handlers its workers run (a
    /// simulation drives its workers itself, with these handlers).
    /// The node number the engine will have.
    pub(crate) fn node_number(&self) -> u32 {
        self.node
    }

    /// Replaces the remote transport (a simulation's network).
    pub(crate) fn with_remote(mut self, transport: StdArc<dyn RemoteTransport>) -> Self {
        self.remote = Some(transport);
        self
    }

    pub(crate) fn assemble(
        self,
        clock: crate::engine::clock::Clock,
        intercept: Option<StdArc<dyn crate::engine::intercept::Intercept>>,
    ) -> (
        Arc<Shared>,
        StdArc<crate::engine::commands::handler::Handlers>,
    ) {
        let default_weight = self
            .groups
            .iter()
            .find(|(name, _)| name == "default")
            .map_or(1, |&(_, weight)| weight);
        let declared: Vec<(String, u32)> = self
            .groups
            .iter()
            .filter(|(name, _)| name != "default")
            .cloned()
            .collect();
        let groups = crate::runqueue::shares::Groups::new(default_weight, &declared);
        let group_count = groups.len();
        let locals: Vec<Local> = (0..self.workers)
            .map(|i| Local::new(i, LOCAL_QUEUE_CAPACITY, group_count))
            .collect();
        let remotes = locals
            .iter()
            .map(|l| {
                CachePadded::new(Remote {
                    ready: l.ready.iter().map(|q| q.stealer()).collect(),
                    nursery: l.nursery.iter().map(|q| q.stealer()).collect(),
                    light: l.light.iter().map(|q| q.stealer()).collect(),
                    group_clocks: crate::runqueue::shares::GroupClocks::new(group_count),
                    next: l.next.clone(),
                    counters: WorkerCounters::default(),
                    histograms: self
                        .histograms
                        .then(|| Box::new(WorkerHistograms::new(group_count))),
                })
            })
            .collect();
        // The handlers are read by the workers only: the worker loop owns
        // them, and the shared state does not hold them.
        let handlers = StdArc::new(self.handlers);
        let worker_handlers = StdArc::clone(&handlers);
        let run_worker: crate::engine::control::WorkerLoop<Shared> =
            StdArc::new(move |shared, local| {
                crate::worker::run(shared, local, StdArc::clone(&worker_handlers))
            });
        // The watcher runs for long steps, or for the coarse clock that
        // introspection's `since_last_step` reads.
        let watcher: Option<fn(Arc<Shared>)> = (self.long_step_threshold.is_some()
            || cfg!(feature = "introspection"))
        .then_some(crate::engine::long_steps::watch);
        let control = Control::new(self.thread_name, locals, run_worker, watcher);
        let shared = Shared {
            injector: (0..group_count).map(|_| Fifo::new()).collect(),
            kills: Fifo::new(),
            woken: (0..crate::runqueue::order::LEVELS * group_count)
                .map(|_| Fifo::new())
                .collect(),
            groups,
            remotes,
            sleepers: crate::runqueue::sleep::Sleepers::new(self.workers),
            processes: crate::table::registry::Registry::new(self.node),
            hooks: self.hooks,
            mailbox_capacity: self.mailbox_capacity,
            // Under loom a worker parks at its first idle round (see
            // `worker/mod.rs`).
            linger: if cfg!(loom) {
                Duration::ZERO
            } else {
                self.idle_linger
            },
            counts_messages: self.mailbox_capacity != usize::MAX || self.count_mailboxes,
            histograms: self.histograms,
            introspect: crate::engine::figures::Introspect::new(),
            live: Live::new(self.max_processes, self.workers + 1),
            dead_letters: CachePadded::new(AtomicU64::new(0)),
            control,
            timers: Timers::new(self.workers, clock.now()),
            names: Default::default(),
            monitors: Default::default(),
            links: Default::default(),
            asks: Default::default(),
            long_steps: crate::engine::stats::LongSteps::new(self.long_step_threshold),
            across: self.remote.clone().map(|remote| {
                StdArc::new(crate::engine::remote::table::Across::new(self.node, remote))
            }),
            remote: self.remote,
            ids: crate::engine::ids::Ids::new(clock.is_virtual()),
            clock,
            intercept,
            engine_id: crate::engine::resolved::next_engine_id(),
        };
        let shared = shared.into_arc();
        crate::engine::remote::attach(&shared);
        (shared, handlers)
    }
}

impl<T: From<Engine>> Builder<T> {
    /// Builds the engine (as a `T`: the [`Engine`] itself, or the facade's
    /// `Scheduler` around it). Workers start with [`Engine::start`] (or at
    /// the first `shutdown`); work submitted before that waits in the
    /// global queue.
    ///
    /// # Examples
    ///
    /// See [`Builder`].
    pub fn build(self) -> T {
        let (shared, _) = self.assemble(crate::engine::clock::Clock::real(), None);
        T::from(Engine { shared })
    }
}
