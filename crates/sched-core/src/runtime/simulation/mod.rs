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

mod config;
mod explore;
mod fairness;
mod faults;
mod network;
mod observer;
mod shutdown;
mod source;
mod trace;

pub use config::{Config, Progress, SimError};
#[cfg(feature = "proptest")]
pub use explore::sources;
pub use explore::{explore, shrink, Failure, Verdict};
pub use fairness::{Fairness, Wait};
pub use faults::Faults;
pub use source::{ParseScriptError, Script, Source};
pub use trace::{Delivered, Entry, Fault, Trace};

use std::sync::Arc as StdArc;
use std::time::{Duration, Instant};

use self::faults::{Held, Interceptor, State};
use self::observer::Observer;
use self::source::Choices;
use super::builder::Builder;
use crate::engine::clock::Clock;
use crate::engine::shared::Shared;
use crate::engine::shutdown::SimulatedShutdown;
use crate::engine::{Context, ShutdownReport};
use crate::sync::{Arc, Mutex};
use crate::worker::{Driven, Turn};

/// Says that the step under way in a simulation takes `time`: the
/// simulation's virtual clock moves by that much at once (the step's own
/// `out.now()` after the call shows it), on top of
/// [`Config::step_time`], which moves it after the step. Its worker
/// measures the step that long, as a running engine measures a step by
/// the real clock, so a simulated workload can mix heavy steps with light
/// ones and be ordered as a running engine orders them (light processes
/// first: see the scheduling guide). The clock counts nanoseconds in 64
/// bits: it stops at about 584 years, however much more is spent.
///
/// Returns whether a simulated step was under way on this thread (a
/// process's `start` and `step`, not its `init`, which runs at spawn);
/// anywhere else (a running engine's step, a test's own thread, a thread
/// a step started) it does nothing and returns `false`.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use sched::sim::Config;
/// use std::time::Duration;
///
/// /// Computes for 20 µs of virtual time, ten times.
/// struct Heavy(u32);
/// impl Process for Heavy {
///     type Done = ();
///     fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
///         assert!(sched::sim::spend(Duration::from_micros(20)));
///         self.0 += 1;
///         if self.0 < 10 { out.continue_() } else { out.finish(()) }
///         Ok(())
///     }
/// }
///
/// let mut sim = Scheduler::builder().simulation(Config::seed(1));
/// sim.context().spawn(Heavy(0))?;
/// sim.run()?;
/// assert_eq!(sim.elapsed(), Duration::from_micros(200));
/// assert!(!sched::sim::spend(Duration::from_secs(1)), "no step under way");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn spend(time: Duration) -> bool {
    crate::engine::clock::spend(time)
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
///     type Done = &'static str;
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
/// assert_eq!(outcome, "rested");
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
    /// in the order its node sent packages to that node, or loses across a
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
                    Some(Held::Remote(package, _)) => {
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
                let before = self.clock().now();
                if self.nodes[node].workers[worker].turn() == Turn::Stepped {
                    self.steps += 1;
                    if !self.step_time.is_zero() {
                        let at = self.clock().now() + self.step_time;
                        self.clock().advance_to(at);
                    }
                }
                // The step time, or what the step said it took (`spend`).
                if self.clock().now() != before {
                    self.state.lock().now = self.clock().now();
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
            Held::Cancel(record) => {
                let shared = &self.node_of(record.pid.node()).shared;
                shared.release_cancel(record);
            }
            Held::Remote(package, _) => {
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
    ///     type Done = ();
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
    /// Steps that take time (`Config::step_time`, [`spend`]) stop it at
    /// the first decision after they moved the clock past the end: the
    /// last step may end past it.
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
        // Steps move the clock too (`Config::step_time`, `spend`): a
        // system that never goes quiet stops once they have moved it past
        // the limit (what is due at the limit itself still runs).
        self.run_while(Some(limit), |sim| sim.clock().now() <= limit)?;
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
