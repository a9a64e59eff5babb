//! Long steps, reported while they run.
//!
//! A step that takes long holds its worker: nothing else runs there. The
//! watcher is one thread per engine that samples, every half threshold,
//! what each worker is doing: the PID whose step it runs (`in_step`, which
//! the worker writes anyway for shutdown) and its step count. A worker
//! seen in a step of the same PID with the same count on two samples a
//! threshold apart is stuck in one step: the watcher reports it once,
//! while it still runs, with a `tracing` warning (its PID, its registered
//! names, the worker, how long at least) and a count in
//! `Stats::long_steps`. The step path pays nothing for it: no clock read,
//! no write it did not make before.
//!
//! A step is seen late by at most half a threshold, so it is reported
//! after between one and one and a half thresholds. The watcher names the
//! process's type from what the process published at its first step
//! (`record/figures.rs`): the process itself belongs to the worker running
//! it. Each process's reported steps are counted too, for introspection.
//!
//! The watcher also ticks introspection's coarse clock at every sample
//! (`introspect.rs`), so it runs even without a threshold (then it only
//! ticks, every 5 ms).

use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::time::{Duration, Instant};

use relay::Pid;
use rustc_hash::FxHashMap;

use super::shared::Shared;
use crate::sync::{Arc, AtomicU64, Mutex};

/// Past this many processes with reported steps, the ones that ended are
/// forgotten.
const FORGET_FROM: usize = 1024;

/// The watcher's setting and its count.
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
    fn count(&self, shared: &Shared, pid: Pid) {
        let mut by_pid = self.by_pid.lock();
        if by_pid.len() >= FORGET_FROM && !by_pid.contains_key(&pid.id()) {
            let node = shared.processes.node();
            by_pid.retain(|id, _| shared.processes.get(Pid::new(node, *id)).is_some());
        }
        *by_pid.entry(pid.id()).or_insert(0) += 1;
    }
}

/// The coarse clock's period when the threshold does not ask for a
/// shorter one: what `ProcessInfo::since_last_step` is accurate to.
const CLOCK_PERIOD: Duration = Duration::from_millis(5);

/// What the watcher saw of one worker at the sample that first showed
/// its current step.
#[derive(Clone, Copy)]
struct Seen {
    pid: u64,
    steps: u64,
    since: Instant,
    reported: bool,
}

/// The watcher's loop: until the workers exit. Without a threshold it
/// only ticks the coarse clock.
#[cfg_attr(loom, allow(dead_code))]
pub(crate) fn watch(shared: Arc<Shared>, threshold: Option<Duration>) {
    let period = threshold
        .map_or(CLOCK_PERIOD, |t| (t / 2).min(CLOCK_PERIOD))
        .max(Duration::from_millis(1));
    let mut seen: Vec<Option<Seen>> = vec![None; shared.remotes.len()];
    while !shared.exit.load(Acquire) {
        std::thread::sleep(period);
        shared.introspect.tick();
        let Some(threshold) = threshold else {
            continue;
        };
        let now = Instant::now();
        for (worker, remote) in shared.remotes.iter().enumerate() {
            let pid = remote.counters.in_step.load(Relaxed);
            let steps = remote.counters.steps.load(Relaxed);
            if pid == 0 {
                seen[worker] = None;
                continue;
            }
            match &mut seen[worker] {
                Some(s) if s.pid == pid && s.steps == steps => {
                    let running = now.duration_since(s.since);
                    if running >= threshold && !s.reported {
                        s.reported = true;
                        report(&shared, worker, pid, running);
                    }
                }
                slot => {
                    *slot = Some(Seen {
                        pid,
                        steps,
                        since: now,
                        reported: false,
                    })
                }
            }
        }
    }
}

#[cfg_attr(loom, allow(dead_code))]
fn report(shared: &Shared, worker: usize, id: u64, running: Duration) {
    let pid = Pid::new(shared.processes.node(), id);
    let record = shared.processes.get(pid);
    let names = record
        .as_ref()
        .and_then(|record| record.relations.with_existing(|r| r.names.join("|")))
        .unwrap_or_default();
    let type_name = record
        .as_ref()
        .and_then(|record| record.figures.kind())
        .and_then(|kind| shared.introspect.type_name(kind))
        .unwrap_or("");
    drop(record);
    shared.long_steps.count(shared, pid);
    tracing::warn!(
        %pid,
        names = %names,
        type_name,
        worker,
        running_ms = running.as_millis() as u64,
        "a step has been running for at least {running:?} and has not returned: it holds its worker"
    );
    shared
        .hooks
        .long_step(super::Context::of(shared), pid, worker, running);
    // Counted after the hook ran (Release, read with Acquire by `stats`):
    // whoever sees the count sees what the hook did.
    let count = shared.long_steps.reported.load(Relaxed) + 1;
    shared.long_steps.reported.store(count, Release);
}
