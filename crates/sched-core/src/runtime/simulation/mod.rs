//! Deterministic simulation: the real engine, its workers driven one
//! round at a time on the calling thread in an order a seed decides, on a
//! virtual clock, with faults injected where the seed says.
//!
//! What is the engine's own code here: the workers' loop rounds (their
//! queues, `next` slots, fairness counters, stealing, timer firing), the
//! process state machine, timers, monitors, links, asks, names, the
//! process table, the mailboxes. What the simulation adds: which worker
//! takes the next round (a draw), the clock (virtual, moved to the next
//! deadline once nothing can run), the faults (`faults.rs`), and the
//! record of what ran (`trace.rs`). `docs/guide/simulation.md` lists where a
//! simulation differs from a running engine.

mod explore;
mod fairness;
mod faults;
mod network;
mod source;
mod trace;

#[cfg(feature = "proptest")]
pub use explore::sources;
pub use explore::{explore, shrink, Failure, Verdict};
pub use fairness::{Fairness, Wait};
pub use faults::Faults;
pub use source::{ParseScriptError, Script, Source};
pub use trace::{Delivered, Entry, Fault, Trace};

use std::sync::Arc as StdArc;
use std::time::{Duration, Instant};

use relay::Pid;

use self::faults::{Held, Interceptor, State};
use self::source::Choices;
use self::trace::end_name;
use super::builder::Builder;
use crate::contract::command::{CommandId, Tag};
use crate::contract::down::ExitReason;
use crate::contract::event::Event;
use crate::engine::clock::Clock;
use crate::engine::shared::Shared;
use crate::engine::shutdown::SimulatedShutdown;
use crate::engine::{Context, ShutdownReport};
use crate::sync::{Arc, Mutex};
use crate::worker::{CommandFault, Driven, StepEnd, StepObserver, Turn};

/// How a simulation runs: where its decisions come from, how many workers
/// it simulates, the faults it injects.
///
/// # Examples
///
/// ```
/// use sched::sim::{Config, Faults};
/// use std::time::Duration;
///
/// let config = Config::seed(7)
///     .workers(3)
///     .faults(Faults::none().delay_messages(0.2, Duration::from_millis(10)))
///     .max_steps(100_000);
/// assert_eq!(config.worker_count(), 3);
/// ```
#[derive(Debug, Clone)]
pub struct Config {
    source: Source,
    workers: usize,
    faults: Faults,
    keep_trace: bool,
    max_steps: u64,
    step_time: Duration,
    network_latency: Duration,
}

impl Config {
    /// A simulation whose decisions come from `source`, with 4 workers, no
    /// faults, its whole trace kept, at most 10 000 000 steps.
    ///
    /// # Examples
    ///
    /// ```
    /// let config = sched::sim::Config::new(sched::sim::Source::Seed(1));
    /// assert_eq!(config.worker_count(), 4);
    /// ```
    pub fn new(source: impl Into<Source>) -> Config {
        Config {
            source: source.into(),
            workers: 4,
            faults: Faults::none(),
            keep_trace: true,
            max_steps: 10_000_000,
            step_time: Duration::ZERO,
            network_latency: Duration::ZERO,
        }
    }

    /// [`Config::new`] with decisions drawn from `seed`.
    ///
    /// # Examples
    ///
    /// See [`Config`].
    pub fn seed(seed: u64) -> Config {
        Config::new(Source::Seed(seed))
    }

    /// [`Config::new`] replaying `script`.
    ///
    /// # Examples
    ///
    /// ```
    /// let config = sched::sim::Config::script("0 1 0".parse().unwrap());
    /// # drop(config);
    /// ```
    pub fn script(script: Script) -> Config {
        Config::new(Source::Script(script))
    }

    /// How many workers to simulate (at least 1). The simulation's count,
    /// not the builder's (whose default is the machine's core count), so
    /// that a run replays the same on any machine.
    ///
    /// # Examples
    ///
    /// See [`Config`].
    pub fn workers(mut self, workers: usize) -> Config {
        self.workers = workers.max(1);
        self
    }

    /// The faults to inject.
    ///
    /// # Examples
    ///
    /// See [`Config`].
    pub fn faults(mut self, faults: Faults) -> Config {
        self.faults = faults;
        self
    }

    /// Whether to keep every trace entry (default) or only the trace's
    /// hash and counts, for long runs.
    ///
    /// # Examples
    ///
    /// ```
    /// let config = sched::sim::Config::seed(1).keep_trace(false);
    /// # drop(config);
    /// ```
    pub fn keep_trace(mut self, keep: bool) -> Config {
        self.keep_trace = keep;
        self
    }

    /// Most steps the simulation runs in all; past them a run returns
    /// [`SimError::StepLimit`] (a system that never goes quiet, such as
    /// one with a periodic timer, should use
    /// [`Simulation::run_for`]).
    ///
    /// # Examples
    ///
    /// See [`Config`].
    pub fn max_steps(mut self, steps: u64) -> Config {
        self.max_steps = steps;
        self
    }

    /// Virtual time each step takes (default: none, and time moves only
    /// when nothing can run). With some, timeouts fire in a system that
    /// never goes idle.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// let config = sched::sim::Config::seed(1).step_time(Duration::from_micros(10));
    /// # drop(config);
    /// ```
    pub fn step_time(mut self, time: Duration) -> Config {
        self.step_time = time;
        self
    }

    /// Most latency of the simulated network between nodes (see
    /// [`Simulation::cluster`]): each package is delivered after a delay
    /// drawn up to this (default: none; a package still waits for the
    /// simulation to deliver it, in an order it draws).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// let config = sched::sim::Config::seed(1).network_latency(Duration::from_millis(2));
    /// # drop(config);
    /// ```
    pub fn network_latency(mut self, latency: Duration) -> Config {
        self.network_latency = latency;
        self
    }

    /// The number of workers it simulates.
    ///
    /// # Examples
    ///
    /// See [`Config`].
    pub fn worker_count(&self) -> usize {
        self.workers
    }
}

/// Why a simulated run stopped short.
///
/// # Examples
///
/// ```
/// use sched::sim::SimError;
/// assert!(SimError::StepLimit { steps: 10 }.to_string().contains("10"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SimError {
    /// The simulation reached its [`max_steps`](Config::max_steps).
    StepLimit {
        /// The steps it ran.
        steps: u64,
    },
    /// This many decisions in a row ran no step, delivered nothing and
    /// did not move the clock: the simulation is stuck (a bug of the
    /// simulation, not of the system under test).
    NoProgress {
        /// The decisions it made without progress.
        decisions: u64,
    },
    /// Two nodes of a [`Simulation::cluster`] have the same number.
    DuplicateNode {
        /// The number.
        node: u32,
    },
}

impl std::fmt::Display for SimError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SimError::StepLimit { steps } => write!(
                f,
                "the simulation ran its {steps} steps without going quiet \
                 (a system that never does should run for a virtual duration instead)"
            ),
            SimError::NoProgress { decisions } => write!(
                f,
                "the simulation made {decisions} decisions in a row without running a step, \
                 delivering anything or moving its clock"
            ),
            SimError::DuplicateNode { node } => {
                write!(f, "two nodes of the simulation are numbered {node}")
            }
        }
    }
}

impl std::error::Error for SimError {}

/// What one decision of the simulation did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Progress {
    /// A worker took a round (it ran a process, fired timers, or found
    /// nothing, having lost a race for work to another).
    Worker(usize),
    /// A held message or completion was delivered.
    Released,
    /// Nothing could run: the clock moved to the next deadline.
    ClockMoved,
    /// Nothing can run and nothing is pending: the system is quiet.
    Quiet,
}

/// The whole engine, run deterministically on the calling thread.
///
/// Build one with [`Builder::simulation`](crate::Builder::simulation) (or
/// the facade's `SchedulerBuilder::simulation`): the same processes,
/// handlers, hooks and supervisors as a running engine. Its
/// [`context`](Simulation::context) is the engine's [`Context`], so
/// processes are spawned, messages sent and processes terminated as on a
/// running engine; they run when the
/// simulation runs ([`run`](Simulation::run), [`run_for`](Simulation::run_for),
/// [`step`](Simulation::step)).
///
/// Nothing may block waiting for the simulation on its own thread: a
/// `Completion`'s `wait` would wait forever (the simulation runs only when
/// called). Read results with `try_take` after a run.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use sched::sim::{Config, Entry};
/// use std::time::Duration;
///
/// /// Sleeps an hour, then finishes.
/// struct Sleeper;
/// impl Process for Sleeper {
///     fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
///         if events.next().is_some() {
///             out.finish("rested");
///         } else {
///             out.set_timer(Duration::from_secs(3600), Tag(1));
///         }
///         Ok(())
///     }
/// }
///
/// let mut sim = sched::engine::Engine::builder().simulation(Config::seed(1));
/// let mut sleeper = sim.context().spawn(Sleeper)?;
/// let wall = std::time::Instant::now();
/// sim.run()?;
/// assert!(wall.elapsed() < Duration::from_secs(1));
/// assert_eq!(sim.elapsed(), Duration::from_secs(3600));
/// let outcome = sleeper.try_take().expect("ended")?;
/// assert_eq!(outcome.downcast_ref::<&str>(), Some(&"rested"));
/// assert_eq!(sim.trace().steps(), 2);
/// assert!(matches!(sim.trace().entries()[0], Entry::Step { .. }));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Simulation {
    /// The simulated nodes; the first is the one
    /// [`context`](Simulation::context) reaches.
    nodes: Vec<Node>,
    state: StdArc<Mutex<State>>,
    max_steps: u64,
    step_time: Duration,
    /// Steps run so far (the trace counts them too; this is read per
    /// decision without the lock).
    steps: u64,
    started: Instant,
}

/// One simulated node: an engine and its driven workers.
struct Node {
    shared: Arc<Shared>,
    workers: Vec<Driven>,
    /// A shutdown under way: its stages, and its virtual deadline until
    /// it has forced the processes still live.
    stopping: Option<(SimulatedShutdown, Option<Instant>)>,
    report: Option<ShutdownReport>,
}

impl std::fmt::Debug for Simulation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Simulation")
            .field("nodes", &self.nodes.len())
            .field("steps", &self.steps)
            .field("elapsed", &self.elapsed())
            .finish_non_exhaustive()
    }
}

impl Simulation {
    /// The first node's handle: spawn, send, ask, names, monitors,
    /// introspection (see [`node`](Simulation::node) for the others).
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::sim::Config;
    /// let sim = sched::engine::Engine::builder().simulation(Config::seed(7).workers(2));
    /// assert_eq!(sim.context().stats().live_processes, 0);
    /// ```
    pub fn context(&self) -> &Context {
        Context::of(&self.nodes[0].shared)
    }
}

impl crate::engine::AsContext for Simulation {
    fn context(&self) -> &Context {
        Simulation::context(self)
    }
}

/// A worker's view for the simulation: its steps go to the trace, and
/// faults are drawn for them.
struct Observer {
    state: StdArc<Mutex<State>>,
    /// The step in progress: what `after_step` completes.
    current: Option<(usize, Pid, u64, Vec<trace::Delivered>)>,
}

impl StepObserver for Observer {
    fn before_step(
        &mut self,
        worker: usize,
        pid: Pid,
        events: &mut dyn Iterator<Item = &Event>,
    ) -> bool {
        let mut state = self.state.lock();
        let state = &mut *state;
        // Counted for the simulation, not per worker: a process moves
        // between workers.
        let step = state.steps_of.entry(pid).or_insert(0);
        *step += 1;
        let step = *step;
        if let Some(wait) = state.fairness.step(pid, worker) {
            state.trace.push(Entry::Unfair(wait));
        }
        let delivered = events.map(trace::Delivered::of).collect();
        self.current = Some((worker, pid, step, delivered));
        let crash = state.faults.crashes(&mut state.choices, pid, step);
        if crash {
            state.trace.push(Entry::Fault(Fault::Crash { pid }));
        }
        crash
    }

    fn after_step(&mut self, pid: Pid, end: StepEnd) {
        if let Some((worker, current, step, events)) = self.current.take() {
            debug_assert_eq!(current, pid);
            self.state.lock().trace.push(Entry::Step {
                worker,
                pid,
                step,
                events,
                end: end_name(end),
            });
        }
    }

    fn command(&mut self, pid: Pid, _command: CommandId, tag: Tag) -> CommandFault {
        let mut state = self.state.lock();
        let state = &mut *state;
        let fault = state.faults.command(&mut state.choices);
        if fault != CommandFault::None {
            state.handler_fault = Some((pid, tag));
        }
        match fault {
            CommandFault::None => {}
            CommandFault::Fail => state.trace.push(Entry::Fault(Fault::HandlerFailed { pid })),
            CommandFault::Panic => state
                .trace
                .push(Entry::Fault(Fault::HandlerPanicked { pid })),
        }
        fault
    }

    fn ended(&mut self, pid: Pid, reason: ExitReason) {
        let mut state = self.state.lock();
        state.steps_of.remove(&pid);
        state.fairness.ended(pid);
        state.trace.push(Entry::Ended { pid, reason });
    }
}

impl<T> Builder<T> {
    /// Builds the engine as a [`Simulation`]: no worker thread starts; the
    /// simulation runs `config`'s workers on the thread that calls it, on
    /// a virtual clock. A remote transport set on the builder is replaced
    /// by the simulation's network (see [`Simulation::cluster`]).
    ///
    /// # Examples
    ///
    /// See [`Simulation`].
    pub fn simulation(self, config: Config) -> Simulation {
        Simulation::cluster(config, [self]).expect("one node has a number of its own")
    }
}

impl Simulation {
    /// A simulation of several nodes, one per builder (each with its own
    /// [`node`](Builder::node) number), joined by a simulated network:
    /// a send to a PID of another node travels as a package the
    /// simulation delivers, after [`Config::network_latency`] at most,
    /// keeping per-sender order, or loses across a
    /// [`partition`](Simulation::partition). All nodes share the virtual
    /// clock and the source of decisions; each has `config`'s number of
    /// workers. [`context`](Simulation::context) is the first node's
    /// [`Context`]; [`node`](Simulation::node) reaches the others.
    ///
    /// # Errors
    ///
    /// [`SimError::DuplicateNode`] if two builders have the same node
    /// number.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::sim::{Config, Simulation};
    ///
    /// let sim = Simulation::cluster(
    ///     Config::seed(1),
    ///     [Scheduler::builder().node(1), Scheduler::builder().node(2)],
    /// )?;
    /// assert_eq!(sim.node(2).expect("node 2").allocate_pid()?.node(), 2);
    /// assert!(sim.node(3).is_none());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn cluster<T>(
        config: Config,
        builders: impl IntoIterator<Item = Builder<T>>,
    ) -> Result<Simulation, SimError> {
        let clock = Clock::virtual_from_now();
        let now = clock.now();
        let builders: Vec<Builder> = builders.into_iter().map(Builder::product).collect();
        let mut seen = std::collections::BTreeSet::new();
        for builder in &builders {
            if !seen.insert(builder.node_number()) {
                return Err(SimError::DuplicateNode {
                    node: builder.node_number(),
                });
            }
        }
        let mut choices = Choices::new(config.source);
        let mut state = State::new(
            // Replaced below, once the workers' seeds are drawn.
            Choices::new(Source::Seed(0)),
            Trace::new(config.keep_trace),
            config.faults,
            now,
        );
        state.latency = config.network_latency;
        state.fairness = fairness::Check::new(config.workers);
        // Each worker's own random source (its steal victims), from the
        // simulation's.
        let seeds: Vec<Vec<u64>> = builders
            .iter()
            .map(|_| {
                (0..config.workers)
                    .map(|_| u64::from(choices.draw(u32::MAX)) << 32 | 0x2545_F491)
                    .collect()
            })
            .collect();
        state.choices = choices;
        let state = StdArc::new(Mutex::new(state));
        let nodes = builders
            .into_iter()
            .zip(seeds)
            .map(|(builder, seeds)| {
                let network = StdArc::new(network::Network {
                    node: builder.node_number(),
                    state: StdArc::clone(&state),
                });
                let interceptor = StdArc::new(Interceptor(StdArc::clone(&state)));
                let (shared, handlers) = builder
                    .workers(config.workers)
                    .with_remote(network)
                    .assemble(clock.share(), Some(interceptor));
                let workers = shared
                    .control
                    .take_locals()
                    .into_iter()
                    .zip(seeds)
                    .map(|(local, seed)| {
                        let observer = Observer {
                            state: StdArc::clone(&state),
                            current: None,
                        };
                        Driven::new(
                            shared.clone(),
                            local,
                            StdArc::clone(&handlers),
                            seed,
                            Box::new(observer),
                        )
                    })
                    .collect();
                Node {
                    shared,
                    workers,
                    stopping: None,
                    report: None,
                }
            })
            .collect();
        Ok(Simulation {
            nodes,
            state,
            max_steps: config.max_steps,
            step_time: config.step_time,
            steps: 0,
            started: now,
        })
    }

    /// The engine of node `node`, if the simulation has it.
    ///
    /// # Examples
    ///
    /// See [`Simulation::cluster`].
    pub fn node(&self, node: u32) -> Option<&Context> {
        self.nodes
            .iter()
            .find(|n| n.shared.processes.node() == node)
            .map(|n| Context::of(&n.shared))
    }

    /// Cuts the network between every node of `a` and every node of `b`
    /// (both ways) until [`heal`](Simulation::heal): packages between
    /// them are lost (their sends succeed, as over a network), and the
    /// trace records each one. Each side's engine is told it has lost the
    /// other, as a failure detector would tell it: monitors, links and
    /// asks across the cut end with the node-down reason
    /// ([`ExitReason::NodeDown`](crate::ExitReason::NodeDown)), at once
    /// in virtual time. A package lost to the cut tells its sender's
    /// engine again (as a real transport refuses a send to a node it has
    /// declared down), so a relation set up across the cut while it lasts
    /// ends the same way.
    ///
    /// # Examples
    ///
    /// See [`Simulation::cluster`] for a cluster; on one:
    ///
    /// ```
    /// use sched::sim::{Config, Simulation};
    /// use sched::engine::Engine;
    /// let mut sim = Simulation::cluster(
    ///     Config::seed(1),
    ///     [Engine::builder().node(1), Engine::builder().node(2)],
    /// )?;
    /// sim.partition(&[1], &[2]);
    /// sim.heal();
    /// assert_eq!(sim.trace().entries().len(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn partition(&mut self, a: &[u32], b: &[u32]) {
        let between = cut_pairs(a, b);
        let mut state = self.state.lock();
        for &(x, y) in &between {
            state.cut.insert((x, y));
            state.cut.insert((y, x));
            state.notify(x, y);
            state.notify(y, x);
        }
        state.trace.push(Entry::Partition { between });
    }

    /// [`partition`](Simulation::partition) for `duration` of virtual
    /// time: the cuts heal by themselves then, between two decisions of
    /// the simulation (a held event like any other).
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::sim::{Config, Entry, Simulation};
    /// use sched::engine::Engine;
    /// use std::time::Duration;
    /// let mut sim = Simulation::cluster(
    ///     Config::seed(1),
    ///     [Engine::builder().node(1), Engine::builder().node(2)],
    /// )?;
    /// sim.partition_for(&[1], &[2], Duration::from_secs(5));
    /// sim.run()?;
    /// assert_eq!(sim.elapsed(), Duration::from_secs(5));
    /// assert!(matches!(sim.trace().entries().last(), Some(Entry::Heal { .. })));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn partition_for(&mut self, a: &[u32], b: &[u32], duration: Duration) {
        self.partition(a, b);
        let between = cut_pairs(a, b);
        let mut state = self.state.lock();
        let due = state.now + duration;
        state.hold(due, Held::Heal(between));
    }

    /// Heals every partition.
    ///
    /// # Examples
    ///
    /// See [`Simulation::partition`].
    pub fn heal(&mut self) {
        let mut state = self.state.lock();
        let between: Vec<(u32, u32)> = state.cut.iter().copied().filter(|(a, b)| a < b).collect();
        state.cut.clear();
        state.trace.push(Entry::Heal { between });
    }

    /// Virtual time since the simulation began.
    ///
    /// # Examples
    ///
    /// See [`Simulation`].
    pub fn elapsed(&self) -> Duration {
        self.clock().elapsed()
    }

    /// Now, by the simulation's virtual clock (the instant timers and
    /// timeouts are measured against).
    ///
    /// # Examples
    ///
    /// ```
    /// let sim = sched::engine::Engine::builder().simulation(sched::sim::Config::seed(1));
    /// assert_eq!(sim.now(), sim.now());
    /// ```
    pub fn now(&self) -> Instant {
        self.clock().now()
    }

    fn clock(&self) -> &Clock {
        &self.nodes[0].shared.clock
    }

    /// What the check of the scheduling bound found so far: every wait
    /// of every process, from becoming ready to its step, in steps of the
    /// worker it waited on, against the bound the scheduler promises for
    /// its priority and the work ahead of it (see [`Fairness`]). A wait
    /// over its bound is also in the trace, as [`Entry::Unfair`].
    ///
    /// # Examples
    ///
    /// See [`Fairness`].
    pub fn fairness(&self) -> Fairness {
        self.state.lock().fairness.report.clone()
    }

    /// The trace so far.
    ///
    /// # Examples
    ///
    /// See [`Simulation`].
    pub fn trace(&self) -> Trace {
        self.state.lock().trace.clone()
    }

    /// The decisions made so far: replaying this script (with the same
    /// inputs) repeats the run.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::sim::Config;
    /// let sim = sched::engine::Engine::builder().simulation(Config::seed(9).workers(2));
    /// // Each worker's random source was drawn already.
    /// assert_eq!(sim.script().len(), 2);
    /// ```
    pub fn script(&self) -> Script {
        self.state.lock().choices.script()
    }

    /// Steps run so far.
    ///
    /// # Examples
    ///
    /// See [`Simulation::run`].
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// Moves the virtual clock to `at` and tells the trace.
    fn move_clock(&self, state: &mut State, at: Instant) {
        self.clock().advance_to(at);
        state.now = self.clock().now();
        let at = state.now - self.started;
        state.trace.push(Entry::Clock { at });
    }

    /// Makes one decision: a worker's round, a held delivery, or a move
    /// of the clock (never past `limit`).
    fn decide(&mut self, limit: Option<Instant>) -> Progress {
        for node in 0..self.nodes.len() {
            self.serve_requested_shutdown(node);
        }
        // (node, worker), or `None` for a held delivery.
        let mut candidates: Vec<Option<(usize, usize)>> = Vec::new();
        for (n, node) in self.nodes.iter().enumerate() {
            let shared = &node.shared;
            let global = shared.woken.iter().any(|q| !q.is_empty())
                || shared.injector.iter().any(|q| !q.is_empty());
            let stealable =
                node.workers.len() > 1 && node.workers.iter().any(Driven::has_stealable);
            for (w, worker) in node.workers.iter().enumerate() {
                if global || stealable || worker.has_own_work() {
                    candidates.push(Some((n, w)));
                }
            }
        }
        let mut state = self.state.lock();
        if state.any_due() {
            candidates.push(None);
        }
        if candidates.is_empty() {
            let next_timer = self
                .nodes
                .iter()
                .flat_map(|node| {
                    (0..node.workers.len()).filter_map(|i| node.shared.timers.due_at(i))
                })
                .min();
            // A shutdown's deadline is a deadline too.
            let deadline = self
                .nodes
                .iter()
                .filter_map(|node| node.stopping.as_ref().and_then(|(_, deadline)| *deadline))
                .min();
            let next = [next_timer, state.next_due(), deadline]
                .into_iter()
                .flatten()
                .min();
            let Some(mut next) = next else {
                return Progress::Quiet;
            };
            if let Some(limit) = limit {
                next = next.min(limit);
            }
            if next <= state.now {
                // Everything due is handled, and the limit is now.
                return Progress::Quiet;
            }
            self.move_clock(&mut state, next);
            return Progress::ClockMoved;
        }
        let pick = state.choices.draw(candidates.len() as u32) as usize;
        match candidates[pick] {
            None => {
                let held = state.take_due();
                if let Some(held) = &held {
                    state.notified(held);
                }
                let inbox = match &held {
                    Some(Held::Remote(package)) => {
                        state.inboxes.get(&package.target().node()).cloned()
                    }
                    _ => None,
                };
                if let Some(Held::Heal(between)) = &held {
                    for &(a, b) in between {
                        state.cut.remove(&(a, b));
                        state.cut.remove(&(b, a));
                    }
                    state.trace.push(Entry::Heal {
                        between: between.clone(),
                    });
                }
                drop(state);
                self.release(held, inbox);
                Progress::Released
            }
            Some((node, worker)) => {
                drop(state);
                if self.nodes[node].workers[worker].turn() == Turn::Stepped {
                    self.steps += 1;
                    if !self.step_time.is_zero() {
                        let at = self.clock().now() + self.step_time;
                        self.clock().advance_to(at);
                        self.state.lock().now = self.clock().now();
                    }
                }
                Progress::Worker(worker)
            }
        }
    }

    /// Delivers what a fault or the network held (outside the state's
    /// lock: delivery may run hooks, which may send).
    fn release(
        &self,
        held: Option<Held>,
        inbox: Option<StdArc<dyn relay::Receiver + Send + Sync>>,
    ) {
        let Some(held) = held else { return };
        match held {
            Held::Message(record, package) => {
                let shared = &self.node_of(record.pid.node()).shared;
                shared.release_message(&record, package);
            }
            Held::Request(record, request) => {
                let shared = &self.node_of(record.pid.node()).shared;
                shared.asks.release_request(shared, &record, request);
            }
            Held::Completion(record, tag, result) => {
                let shared = &self.node_of(record.pid.node()).shared;
                shared.release_completion(&record, tag, result);
            }
            Held::Remote(package) => {
                let target = package.target();
                let refused = match inbox {
                    Some(inbox) => inbox.send(package).err().map(|e| e.into_package()),
                    None => Some(package),
                };
                // Arrived for no process there: lost, as a network
                // transport loses it.
                if let Some(package) = refused {
                    crate::panic_guard::drop_user_value(package, target, "a package nobody took");
                }
            }
            Held::Heal(_) => {}
        }
    }

    fn node_of(&self, node: u32) -> &Node {
        self.nodes
            .iter()
            .find(|n| n.shared.processes.node() == node)
            .unwrap_or(&self.nodes[0])
    }

    /// A shutdown a step asked for (`Context::request_shutdown`) starts
    /// here, on the simulation's thread.
    fn serve_requested_shutdown(&mut self, node: usize) {
        let requested = self.nodes[node]
            .shared
            .control
            .requested_deadline
            .lock()
            .take();
        if let Some(deadline) = requested {
            self.begin_shutdown(node, deadline);
        }
    }

    fn begin_shutdown(&mut self, node: usize, deadline: Duration) {
        let at = self.clock().after(deadline);
        let node = &mut self.nodes[node];
        if node.stopping.is_none() && node.report.is_none() {
            if let Some(stages) = SimulatedShutdown::begin(&node.shared) {
                node.stopping = Some((stages, Some(at)));
            }
        }
    }

    /// The shutdowns under way move on: forced at their deadline, finished
    /// once every process of the node has ended. Returns whether one
    /// forced its processes (which makes work).
    fn advance_shutdowns(&mut self) -> bool {
        let mut forced = false;
        let now = self.clock().now();
        let elapsed = self.elapsed();
        for node in &mut self.nodes {
            let Some((stages, deadline)) = &mut node.stopping else {
                continue;
            };
            if SimulatedShutdown::all_ended(&node.shared) {
                let (stages, _) = node.stopping.take().expect("under way");
                node.report = Some(stages.finish(&node.shared, elapsed));
            } else if deadline.is_some_and(|at| now >= at) {
                stages.force(&node.shared);
                *deadline = None;
                forced = true;
            }
        }
        forced
    }

    /// Makes one decision (see [`Progress`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::sim::{Config, Progress};
    /// let mut sim = sched::engine::Engine::builder().simulation(Config::seed(1));
    /// assert_eq!(sim.step(), Progress::Quiet);
    /// ```
    pub fn step(&mut self) -> Progress {
        let progress = self.decide(None);
        if self.advance_shutdowns() && progress == Progress::Quiet {
            // Forced processes have work: not quiet.
            return Progress::ClockMoved;
        }
        progress
    }

    /// Runs until the system is quiet: nothing can run, nothing is held,
    /// no timer is pending (virtual time jumps to each deadline).
    ///
    /// # Errors
    ///
    /// [`SimError::StepLimit`] past the configured
    /// [`max_steps`](Config::max_steps).
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// struct Once;
    /// impl Process for Once {
    ///     fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
    ///         out.finish(());
    ///         Ok(())
    ///     }
    /// }
    /// let mut sim = sched::engine::Engine::builder().simulation(sched::sim::Config::seed(3));
    /// sim.context().spawn(Once)?;
    /// sim.run()?;
    /// assert_eq!(sim.steps(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn run(&mut self) -> Result<(), SimError> {
        self.run_while(None, |_| true)
    }

    /// Runs until `duration` of virtual time has passed (or the system is
    /// quiet before: the clock then still moves to the end of `duration`).
    ///
    /// # Errors
    ///
    /// [`SimError::StepLimit`] past the configured
    /// [`max_steps`](Config::max_steps).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// let mut sim = sched::engine::Engine::builder().simulation(sched::sim::Config::seed(3));
    /// sim.run_for(Duration::from_secs(60))?;
    /// assert_eq!(sim.elapsed(), Duration::from_secs(60));
    /// # Ok::<(), sched::sim::SimError>(())
    /// ```
    pub fn run_for(&mut self, duration: Duration) -> Result<(), SimError> {
        let limit = self.clock().after(duration);
        self.run_while(Some(limit), |_| true)?;
        if self.clock().now() < limit {
            let mut state = self.state.lock();
            self.move_clock(&mut state, limit);
        }
        Ok(())
    }

    /// Runs until `done` says so (asked after every decision) or the
    /// system is quiet.
    ///
    /// # Errors
    ///
    /// [`SimError::StepLimit`] past the configured
    /// [`max_steps`](Config::max_steps).
    ///
    /// # Examples
    ///
    /// ```
    /// let mut sim = sched::engine::Engine::builder().simulation(sched::sim::Config::seed(3));
    /// sim.run_until(|sim| sim.steps() >= 10)?; // quiet at once: nothing to run
    /// # Ok::<(), sched::sim::SimError>(())
    /// ```
    pub fn run_until(&mut self, mut done: impl FnMut(&Simulation) -> bool) -> Result<(), SimError> {
        self.run_while(None, |sim| !done(sim))
    }

    fn run_while(
        &mut self,
        limit: Option<Instant>,
        mut go_on: impl FnMut(&Simulation) -> bool,
    ) -> Result<(), SimError> {
        /// Decisions in a row without progress before the simulation
        /// calls itself stuck: far more than workers losing races for
        /// work ever make.
        const STUCK: u64 = 1_000_000;
        let mut idle = 0u64;
        loop {
            if self.steps >= self.max_steps {
                return Err(SimError::StepLimit { steps: self.steps });
            }
            let steps = self.steps;
            let progress = self.decide(limit);
            let forced = self.advance_shutdowns();
            let moved = self.steps != steps
                || matches!(progress, Progress::Released | Progress::ClockMoved);
            idle = if moved || forced { 0 } else { idle + 1 };
            if idle >= STUCK {
                return Err(SimError::NoProgress { decisions: idle });
            }
            // A shutdown that just forced its processes has work again.
            if (progress == Progress::Quiet && !forced) || !go_on(self) {
                return Ok(());
            }
        }
    }

    /// Shuts every simulated node down as [`Engine::shutdown`](crate::Engine::shutdown)
    /// does, in virtual time: every process gets
    /// [`Event::Cancel`](crate::Event::Cancel), the simulation runs until
    /// they have all ended or `deadline` has passed, then forces the rest.
    /// The report adds up the nodes' reports. Later calls return the same.
    ///
    /// # Examples
    ///
    /// ```
    /// let mut sim = sched::engine::Engine::builder().simulation(sched::sim::Config::seed(3));
    /// let report = sim.shutdown(std::time::Duration::from_secs(1));
    /// assert_eq!(report.forced, 0);
    /// ```
    pub fn shutdown(&mut self, deadline: Duration) -> ShutdownReport {
        for node in 0..self.nodes.len() {
            self.serve_requested_shutdown(node);
            self.begin_shutdown(node, deadline);
        }
        // Bounded: every process ends by its deadline's force at the
        // latest, unless a step never returns (which would hang a running
        // engine's worker too).
        let mut left = self.max_steps.saturating_sub(self.steps).max(1_000_000);
        while self.nodes.iter().any(|n| n.report.is_none()) && left > 0 {
            left -= 1;
            let progress = self.decide(None);
            self.advance_shutdowns();
            if progress == Progress::Quiet {
                // Nothing left to run and processes still live: they wait
                // for nothing that will come; force them now.
                for node in &mut self.nodes {
                    if let Some((stages, _)) = &mut node.stopping {
                        stages.force(&node.shared);
                    }
                }
            }
        }
        let elapsed = self.elapsed();
        let mut total = ShutdownReport::default();
        for node in &mut self.nodes {
            if node.report.is_none() {
                if let Some((stages, _)) = node.stopping.take() {
                    node.report = Some(stages.finish(&node.shared, elapsed));
                }
            }
            let report = node.report.clone().unwrap_or_default();
            total.ended_gracefully += report.ended_gracefully;
            total.forced += report.forced;
            total.still_running += report.still_running;
            total.still_queued += report.still_queued;
            total.workers_detached += report.workers_detached;
            total.timers_cancelled += report.timers_cancelled;
            total.elapsed = total.elapsed.max(report.elapsed);
        }
        // What is still held will never be delivered.
        let held = self.state.lock().take_all();
        for item in held {
            match item {
                Held::Message(record, package) => {
                    crate::panic_guard::drop_user_value(package, record.pid, "a held message")
                }
                Held::Request(record, request) => {
                    crate::panic_guard::drop_user_value(request, record.pid, "a held request")
                }
                Held::Completion(record, _, result) => {
                    crate::panic_guard::drop_user_value(result, record.pid, "a held completion")
                }
                Held::Remote(package) => {
                    let target = package.target();
                    crate::panic_guard::drop_user_value(package, target, "a held package")
                }
                Held::Heal(_) => {}
            }
        }
        total
    }
}

/// Every pair of a node of `a` and a node of `b`, smaller first.
fn cut_pairs(a: &[u32], b: &[u32]) -> Vec<(u32, u32)> {
    let mut pairs: Vec<(u32, u32)> = a
        .iter()
        .flat_map(|&x| b.iter().map(move |&y| (x.min(y), x.max(y))))
        .filter(|(x, y)| x != y)
        .collect();
    pairs.sort_unstable();
    pairs.dedup();
    pairs
}

impl Drop for Simulation {
    /// A simulation dropped without `shutdown` shuts down with a zero
    /// deadline (in virtual time).
    fn drop(&mut self) {
        if self.nodes.iter().any(|n| n.report.is_none()) {
            self.shutdown(Duration::ZERO);
        }
    }
}

#[cfg(test)]
mod tests;
