//! Finding a failing run among seeds, and shrinking it: the search a
//! property test does, over the simulation's decisions.
//!
//! A *scenario* is the user's closure that builds a system on a
//! simulation made from a [`Source`], runs it, checks what it promised,
//! and returns the run's [`Verdict`]. [`explore`] runs it for seed after
//! seed until one fails; [`shrink`] then replays smaller scripts of that
//! run (decisions removed, decisions made plainer) and keeps the smallest
//! that still fails: fewer steps first, then fewer faults.

use std::fmt;

use super::source::{Script, Source};
use super::Simulation;

/// What one simulated run concluded: whether it failed, and what replays
/// it.
///
/// # Examples
///
/// ```
/// use sched::sim::Config;
/// let sim = sched::engine::Engine::builder().simulation(Config::seed(1));
/// let verdict = sim.verdict(Err::<(), _>("the balance went negative"));
/// assert_eq!(verdict.failure.as_deref(), Some("the balance went negative"));
/// assert!(sim.verdict(Ok::<(), String>(())).failure.is_none());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Verdict {
    /// Why the run failed (`None`: it passed).
    pub failure: Option<String>,
    /// The run's decisions: [`Source::Script`] with it replays the run.
    pub script: Script,
    /// Steps it ran.
    pub steps: u64,
    /// Faults it injected.
    pub faults: u64,
    /// Its trace's hash.
    pub hash: u64,
}

impl Verdict {
    /// Smaller is simpler: fewer steps, then fewer faults, then a shorter
    /// script, then smaller decisions.
    fn size(&self) -> (u64, u64, usize, &Script) {
        (self.steps, self.faults, self.script.len(), &self.script)
    }
}

impl Simulation {
    /// The verdict of this run: `result` is what the scenario's checks
    /// found (an error fails the run, with its text).
    ///
    /// # Examples
    ///
    /// See [`Verdict`].
    pub fn verdict<E: fmt::Display>(&self, result: Result<(), E>) -> Verdict {
        let state = self.state.lock();
        Verdict {
            failure: result.err().map(|e| e.to_string()),
            script: state.choices.script(),
            steps: state.trace.steps(),
            faults: state.trace.faults(),
            hash: state.trace.hash(),
        }
    }
}

/// A failing run: where it came from and its verdict.
///
/// # Examples
///
/// See [`explore`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Failure {
    /// The source it was run from (a seed, or the script shrinking
    /// arrived at).
    pub source: Source,
    /// Its verdict; `verdict.script` replays it.
    pub verdict: Verdict,
    /// How many runs it took to find it (or, after shrinking, how many
    /// runs shrinking made).
    pub runs: usize,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({} steps, {} faults; replay with the script \"{}\")",
            self.verdict.failure.as_deref().unwrap_or("passed"),
            self.verdict.steps,
            self.verdict.faults,
            self.verdict.script
        )
    }
}

/// Runs `scenario` with each seed in turn; returns the first failing run,
/// or `None` if every seed passed.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use sched::sim::{explore, Config, Source};
///
/// // A scenario that fails when worker 1 takes the first turn.
/// let scenario = |source: Source| {
///     let mut sim = sched::engine::Engine::builder().simulation(Config::new(source).workers(2));
///     struct Note;
///     impl Process for Note {
///         type Done = ();
///         fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
///             out.finish(());
///             Ok(())
///         }
///     }
///     sim.context().spawn(Note).unwrap();
///     sim.run().unwrap();
///     let first = sim.trace().entries().iter().find_map(|e| match e {
///         sched::sim::Entry::Step { worker, .. } => Some(*worker),
///         _ => None,
///     });
///     let result = if first == Some(1) { Err("worker 1 went first") } else { Ok(()) };
///     sim.verdict(result)
/// };
/// let failure = explore(0..100, scenario).expect("some seed lets worker 1 go first");
/// assert_eq!(failure.verdict.failure.as_deref(), Some("worker 1 went first"));
/// // Its script replays it.
/// let again = scenario(Source::Script(failure.verdict.script.clone()));
/// assert_eq!(again.hash, failure.verdict.hash);
/// ```
pub fn explore(
    seeds: impl IntoIterator<Item = u64>,
    mut scenario: impl FnMut(Source) -> Verdict,
) -> Option<Failure> {
    for (i, seed) in seeds.into_iter().enumerate() {
        let verdict = scenario(Source::Seed(seed));
        if verdict.failure.is_some() {
            return Some(Failure {
                source: Source::Seed(seed),
                verdict,
                runs: i + 1,
            });
        }
    }
    None
}

/// How many runs [`shrink`] makes at most.
const SHRINK_RUNS: usize = 2_000;

/// Shrinks a failing run: replays smaller scripts (chunks of decisions
/// removed, decisions set to zero or made smaller) and keeps each that
/// still fails and is simpler (fewer steps, then fewer faults, then a
/// shorter script), until no change helps or 2 000 runs are spent.
/// Returns the simplest failing run found (`failure` itself if none is
/// simpler); its `verdict.script` replays it.
///
/// A smaller script is a plainer run because a draw of zero is always the
/// plainest option (the first candidate worker, no fault), and a draw
/// past a script's end is zero.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use sched::sim::{explore, shrink, Config, Faults, Source};
/// use std::time::Duration;
///
/// struct Sink;
/// impl Process for Sink {
///     type Done = ();
///     fn step(&mut self, events: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
///         for _ in events {}
///         Ok(())
///     }
/// }
///
/// // Fails whenever any message was held back.
/// let scenario = |source: Source| {
///     let faults = Faults::none().delay_messages(0.3, Duration::from_millis(5));
///     let mut sim = sched::engine::Engine::builder().simulation(Config::new(source).faults(faults));
///     let pid = sim.context().spawn(Sink).unwrap().pid();
///     for i in 0..20u32 {
///         sim.context().send(pid, i).unwrap();
///     }
///     sim.run().unwrap();
///     let delayed = sim.trace().faults();
///     sim.verdict(if delayed > 0 { Err(format!("{delayed} delayed")) } else { Ok(()) })
/// };
/// let failure = explore(0..50, scenario).expect("some seed delays a message");
/// let shrunk = shrink(&failure, scenario);
/// assert!(shrunk.verdict.faults <= failure.verdict.faults);
/// assert_eq!(shrunk.verdict.faults, 1);
/// ```
pub fn shrink(failure: &Failure, mut scenario: impl FnMut(Source) -> Verdict) -> Failure {
    let mut best = failure.verdict.clone();
    let mut runs = 0;
    let mut attempt = |candidate: Vec<u32>, best: &mut Verdict, runs: &mut usize| -> bool {
        if *runs >= SHRINK_RUNS {
            return false;
        }
        *runs += 1;
        let verdict = scenario(Source::Script(Script(candidate)));
        if verdict.failure.is_some() && verdict.size() < best.size() {
            *best = verdict;
            true
        } else {
            false
        }
    };
    loop {
        let before = best.clone();
        // Remove chunks, largest first.
        for chunk in [64, 16, 4, 2, 1] {
            let mut at = 0;
            while at < best.script.len() && runs < SHRINK_RUNS {
                let mut candidate = best.script.0.clone();
                let end = (at + chunk).min(candidate.len());
                candidate.drain(at..end);
                if !attempt(candidate, &mut best, &mut runs) {
                    at += chunk;
                }
            }
        }
        // Make each decision plainer: zero, then half.
        let mut at = 0;
        while at < best.script.len() && runs < SHRINK_RUNS {
            let value = best.script.0[at];
            if value != 0 {
                let mut candidate = best.script.0.clone();
                candidate[at] = 0;
                if !attempt(candidate, &mut best, &mut runs) && value > 1 {
                    let mut candidate = best.script.0.clone();
                    if at < candidate.len() {
                        candidate[at] = value / 2;
                        attempt(candidate, &mut best, &mut runs);
                    }
                }
            }
            at += 1;
        }
        if best == before || runs >= SHRINK_RUNS {
            break;
        }
    }
    Failure {
        source: Source::Script(best.script.clone()),
        verdict: best,
        runs,
    }
}

/// A proptest strategy of simulation sources: scripts of random
/// decisions, which proptest shrinks itself (shorter scripts, smaller
/// decisions: plainer runs) when a property fails.
///
/// # Examples
///
/// ```
/// use proptest::prelude::*;
/// use sched::sim::{sources, Config};
///
/// proptest!(ProptestConfig::with_cases(8), |(source in sources())| {
///     let mut sim = sched::engine::Engine::builder().simulation(Config::new(source));
///     sim.run().unwrap();
///     prop_assert_eq!(sim.steps(), 0);
/// });
/// ```
#[cfg(feature = "proptest")]
pub fn sources() -> impl proptest::strategy::Strategy<Value = Source> {
    use proptest::prelude::*;
    proptest::collection::vec(any::<u32>(), 0..4096).prop_map(|draws| Source::Script(Script(draws)))
}
