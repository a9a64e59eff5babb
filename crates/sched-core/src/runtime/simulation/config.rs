//! What a simulation is told ([`Config`]) and what it answers: how a
//! round went ([`Progress`]) and why a run stopped ([`SimError`]).

use std::time::Duration;

use super::{Faults, Script, Source};

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
    pub(super) source: Source,
    pub(super) workers: usize,
    pub(super) faults: Faults,
    pub(super) keep_trace: bool,
    pub(super) max_steps: u64,
    pub(super) step_time: Duration,
    pub(super) network_latency: Duration,
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
    /// [`Simulation::run_for`](super::Simulation::run_for)).
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
    /// [`Simulation::cluster`](super::Simulation::cluster)): each package is delivered after a delay
    /// drawn up to this (default: none; a package still waits for the
    /// simulation to deliver it), never ahead of one its node sent to
    /// the same node before it.
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
    /// Two nodes of a [`Simulation::cluster`](super::Simulation::cluster) have the same number.
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
