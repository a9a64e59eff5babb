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
//!
//! While every worker is parked, no step runs and no step stamps the
//! clock (introspection reads `since_last_step` against the real clock):
//! the watcher then dozes (`Sleepers::doze`) instead of waking every
//! period, and the first worker to leave its park wakes it and ticks the
//! clock itself, before its next step, so that the step is stamped with
//! the time. An idle engine's threads all sleep.

use std::sync::atomic::Ordering::{Acquire, Relaxed, Release, SeqCst};
use std::time::{Duration, Instant};

use relay::Pid;

use super::shared::Shared;
use crate::sync::Arc;

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
pub(crate) fn watch(shared: Arc<Shared>) {
    let threshold = shared.long_steps.threshold;
    let period = threshold
        .map_or(CLOCK_PERIOD, |t| (t / 2).min(CLOCK_PERIOD))
        .max(Duration::from_millis(1));
    let mut seen: Vec<Option<Seen>> = vec![None; shared.remotes.len()];
    while !shared.control.exit.load(Acquire) {
        if shared.sleepers.doze(|| shared.control.exit.load(SeqCst)) {
            // A worker left its park (or shutdown began): look again.
            shared.introspect.tick();
            continue;
        }
        std::thread::sleep(period);
        shared.introspect.tick();
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
                    // Held in one step since the last sample: its due
                    // timers are fired for it (`Timers::rescue`).
                    if shared.timers.any_due(worker, || shared.clock.now()) {
                        let fired = shared.timers.rescue(&shared, worker, pid, steps);
                        if fired > 0 {
                            tracing::debug!(
                                worker,
                                fired,
                                "fired the due timers of a worker held in one step"
                            );
                        }
                    }
                    let running = now.duration_since(s.since);
                    if threshold.is_some_and(|t| running >= t) && !s.reported {
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
    shared
        .long_steps
        .count(pid, |pid| shared.processes.get(pid).is_some());
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
