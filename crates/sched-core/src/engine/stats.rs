//! Counters the workers keep and the snapshot that reads them.

use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use relay::Pid;
use rustc_hash::FxHashMap;

use crate::sync::{AtomicU64, Mutex};

/// One worker's counters. Only that worker writes them (load + store, no
/// read-modify-write); anyone may read them at any time.
#[derive(Debug, Default)]
pub(crate) struct WorkerCounters {
    pub(crate) steps: AtomicU64,
    pub(crate) stolen: AtomicU64,
    pub(crate) steal_attempts: AtomicU64,
    pub(crate) parks: AtomicU64,
    pub(crate) lingers: AtomicU64,
    pub(crate) global_pops: AtomicU64,
    pub(crate) discarded_yields: AtomicU64,
    pub(crate) completed: AtomicU64,
    pub(crate) upgrades: AtomicU64,
    /// The id of the PID whose step the worker is running (0: none, as no
    /// process has PID 0): what shutdown reports as still running, and
    /// what the long-step watcher samples (`long_steps.rs`).
    pub(crate) in_step: AtomicU64,
}

/// Past this many processes with reported steps, the ones that ended are
/// forgotten.
const FORGET_FROM: usize = 1024;

/// The long-step watcher's setting and its counts (`long_steps.rs`).
#[derive(Debug)]
pub(crate) struct LongSteps {
    /// How long a step may run before it is reported; `None`: no watcher.
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) threshold: Option<Duration>,
    /// Steps reported so far (written by the watcher only).
    pub(crate) reported: AtomicU64,
    /// Reported steps by PID (the watcher writes it, only when it reports;
    /// introspection reads it).
    by_pid: Mutex<FxHashMap<u64, u32>>,
}

impl LongSteps {
    pub(crate) fn new(threshold: Option<Duration>) -> Self {
        LongSteps {
            threshold,
            reported: AtomicU64::new(0),
            by_pid: Mutex::new(FxHashMap::default()),
        }
    }

    /// Reported steps of the process with PID id `id`.
    pub(crate) fn of(&self, id: u64) -> u32 {
        self.by_pid.lock().get(&id).copied().unwrap_or(0)
    }

    /// A copy of the reported steps by PID id.
    pub(crate) fn by_pid(&self) -> FxHashMap<u64, u32> {
        self.by_pid.lock().clone()
    }

    /// Counts a reported step of `pid`; forgets ended processes once many
    /// are listed, so the map holds at most about `FORGET_FROM` dead ones.
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) fn count(&self, pid: Pid, live: impl Fn(Pid) -> bool) {
        let mut by_pid = self.by_pid.lock();
        if by_pid.len() >= FORGET_FROM && !by_pid.contains_key(&pid.id()) {
            by_pid.retain(|id, _| live(Pid::new(pid.node(), *id)));
        }
        *by_pid.entry(pid.id()).or_insert(0) += 1;
    }
}

/// Adds `n` to a counter only the calling thread writes.
#[inline]
pub(crate) fn bump(counter: &AtomicU64, n: u64) {
    counter.store(counter.load(Relaxed).wrapping_add(n), Relaxed);
}

impl WorkerCounters {
    pub(crate) fn snapshot(&self, local_queue_len: usize) -> WorkerStats {
        WorkerStats {
            steps: self.steps.load(Relaxed),
            stolen: self.stolen.load(Relaxed),
            steal_attempts: self.steal_attempts.load(Relaxed),
            parks: self.parks.load(Relaxed),
            lingers: self.lingers.load(Relaxed),
            global_pops: self.global_pops.load(Relaxed),
            discarded_yields: self.discarded_yields.load(Relaxed),
            completed: self.completed.load(Relaxed),
            upgrades: self.upgrades.load(Relaxed),
            local_queue_len,
            busy: std::time::Duration::ZERO,
        }
    }
}

/// What one worker has done so far.
///
/// # Examples
///
/// ```
/// let w = sched::stats::WorkerStats::default();
/// assert_eq!(w.steps, 0);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkerStats {
    /// Steps executed.
    pub steps: u64,
    /// Processes taken from other workers' deques.
    pub stolen: u64,
    /// Steal attempts on other workers (successful or not).
    pub steal_attempts: u64,
    /// Times the worker parked (slept on its condition variable).
    pub parks: u64,
    /// Idle spells in which the worker lingered (kept looking, yielding
    /// its thread, instead of parking at once: see
    /// [`Builder::idle_linger`](crate::Builder::idle_linger)).
    pub lingers: u64,
    /// Processes taken from the global queue (including batches).
    pub global_pops: u64,
    /// Yields written by a step that also said done or asked for an
    /// upgrade (not dispatched).
    pub discarded_yields: u64,
    /// Processes this worker ended.
    pub completed: u64,
    /// Upgrades this worker carried out: a new process took over a PID
    /// (see `Output::upgrade`). Failed upgrades are not counted.
    pub upgrades: u64,
    /// Processes in the worker's run queues at the time of the snapshot.
    pub local_queue_len: usize,
    /// Time spent in steps (the sum of its step histogram): zero unless the
    /// builder turned histograms on. Two snapshots give its busy share.
    pub busy: std::time::Duration,
}

/// A snapshot of the engine's counters, taken without stopping anything.
///
/// # Examples
///
/// ```
/// use sched::engine::Engine;
/// let engine = Engine::builder().workers(2).build();
/// let stats = engine.context().stats();
/// assert_eq!(stats.workers.len(), 2);
/// assert_eq!(stats.totals().steps, 0);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Per worker, in worker order.
    pub workers: Vec<WorkerStats>,
    /// Processes waiting in the global queue.
    pub global_queue_len: usize,
    /// Processes submitted and not yet ended. Without a
    /// `max_processes` limit this sums per-worker counts one after the
    /// other, so under concurrent submissions and ends it is a close
    /// snapshot rather than an exact instant (exact once nothing changes).
    pub live_processes: usize,
    /// Workers parked (or about to park) at the time of the snapshot.
    pub parked_workers: usize,
    /// Messages and completions that were still queued when their process
    /// ended (never delivered to a step).
    pub dead_letters: u64,
    /// Timers set and not yet fired nor cancelled.
    pub pending_timers: usize,
    /// Steps reported as long while they ran (see
    /// [`Builder::long_step_threshold`](crate::Builder::long_step_threshold)).
    pub long_steps: u64,
}

impl Stats {
    /// The per-worker counters summed.
    ///
    /// # Examples
    ///
    /// See [`Stats`].
    pub fn totals(&self) -> WorkerStats {
        self.workers
            .iter()
            .fold(WorkerStats::default(), |acc, w| WorkerStats {
                steps: acc.steps + w.steps,
                stolen: acc.stolen + w.stolen,
                steal_attempts: acc.steal_attempts + w.steal_attempts,
                parks: acc.parks + w.parks,
                lingers: acc.lingers + w.lingers,
                global_pops: acc.global_pops + w.global_pops,
                discarded_yields: acc.discarded_yields + w.discarded_yields,
                completed: acc.completed + w.completed,
                upgrades: acc.upgrades + w.upgrades,
                local_queue_len: acc.local_queue_len + w.local_queue_len,
                busy: acc.busy + w.busy,
            })
    }
}
