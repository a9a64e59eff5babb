//! Stopping the engine: cancel, wait, force, join, report.
//!
//! The feature owns its state: the engine's threads and lifecycle
//! ([`Control`](super::control::Control), the shared state's `control`:
//! thread handles, the exit flag, the wait for the last live process, the
//! forced processes named so far, the published report). Its operations
//! are methods of `Control`; they take the engine (`&Shared`) for what the
//! sweeps reach (the process table, waking and killing processes, what
//! timers and names leave over), or only the piece they read (the live
//! count, the sleepers). [`shutdown`] and [`SimulatedShutdown`] run the
//! stages in order.

use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::time::{Duration, Instant};

use super::context::Context;
use super::control::spawn_named;
use super::control::{Control, ShutdownReport};
use super::live::Live;
use super::shared::{Remote, Shared};
use crate::record::state::FORCE;
use crate::record::Record;
use crate::runqueue::sleep::Sleepers;
use crate::sync::{fence, thread, Arc};
use crossbeam_utils::CachePadded;

/// How long past its deadline `shutdown` waits for the stragglers to be
/// forced and the workers joined. The documented bound is 100 ms; the rest
/// is for waking up and building the report on a machine whose cores are
/// all busy ending processes.
const SHUTDOWN_GRACE: Duration = Duration::from_millis(80);
/// How many processes the cancel sweep handles between looks at the clock.
const SWEEP_CHUNK: usize = 256;

/// How many stragglers shutdown's warnings name (by PID and names in the
/// deadline's warning, then with their type as the workers force them).
const NAMED_FORCED: usize = 16;

impl Control<Shared> {
    /// Waits for a shutdown (started here or elsewhere) to finish, and
    /// returns its report.
    pub(crate) fn wait_for_shutdown(&self) -> ShutdownReport {
        self.finished.wait()
    }

    /// Wakes a shutdown waiting for the last live process (admission's
    /// release of the last one).
    pub(crate) fn wake_all_ended(&self) {
        let _guard = self.all_ended.lock();
        self.all_ended_cv.notify_all();
    }

    /// Waits until no process is live, or until `deadline`.
    fn wait_all_ended(&self, live: &Live, deadline: Instant) -> bool {
        let mut guard = self.all_ended.lock();
        loop {
            if live.count() == 0 {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            let (g, _) = self.all_ended_cv.wait_until(guard, deadline);
            guard = g;
        }
    }

    /// Sends [`Event::Cancel`](crate::Event::Cancel) to every registered process that has not
    /// had it yet, until `deadline`: past it, the rest are forced anyway.
    fn cancel_all(&self, engine: &Shared, deadline: Instant) {
        for chunk in engine.processes.pids().chunks(SWEEP_CHUNK) {
            if Instant::now() >= deadline {
                return;
            }
            for &pid in chunk {
                let Some(record) = engine.processes.get(pid) else {
                    continue;
                };
                if let Some(wake) = record.deliver_cancel() {
                    engine.after_wake(&record, wake);
                }
            }
        }
    }

    /// Marks every registered process to be ended as cancelled, and wakes
    /// it so a worker does.
    fn force_all(&self, engine: &Shared) {
        for pid in engine.processes.pids() {
            engine.kill(pid, FORCE);
        }
    }

    /// The deadline passed with processes live: names some of them (they
    /// did not end after their cancel), so a user whose processes ignore
    /// `Event::Cancel` learns why shutdown took its whole deadline.
    fn warn_stragglers(&self, engine: &Shared) {
        let live = engine.live.count();
        let pids = engine.processes.pids();
        let named: Vec<String> = pids
            .iter()
            .take(NAMED_FORCED)
            .map(|&pid| {
                // Its registered names, if any, say which process it is.
                let names = engine
                    .processes
                    .get(pid)
                    .and_then(|r| r.relations.with_existing(|r| r.names.join("|")))
                    .filter(|names| !names.is_empty());
                match names {
                    Some(names) => format!("{pid} ({names})"),
                    None => pid.to_string(),
                }
            })
            .collect();
        tracing::warn!(
            live,
            named = %named.join(", "),
            "shutdown deadline passed: forcing processes that did not end after Event::Cancel \
             (a process should finish, or start finishing, when it reads Event::Cancel)"
        );
    }

    /// A worker is forcing `record` (it ignored its cancel past the
    /// deadline): the first [`NAMED_FORCED`] of them are named in a warning
    /// with their registered names and type, so the user learns which
    /// process kept shutdown waiting. Called by the worker that owns the
    /// process (only it can ask the process its type).
    pub(crate) fn name_forced(&self, record: &Record, type_name: &str) {
        let nth = self.forced_named.fetch_add(1, Relaxed);
        if nth >= NAMED_FORCED {
            return;
        }
        let names = record
            .relations
            .with_existing(|r| r.names.join("|"))
            .unwrap_or_default();
        tracing::warn!(
            pid = %record.pid,
            names = %names,
            process = type_name,
            more = nth + 1 == NAMED_FORCED,
            "forced at shutdown: the process did not end after Event::Cancel"
        );
    }

    /// What is left once every process has ended or been forced, and with
    /// it its own timers: timers set from outside (delayed sends), which
    /// are cancelled (their number is returned), and sends that waited for
    /// a name nobody took, which are dead letters, as any message that
    /// could not be delivered.
    fn clear_leftovers(&self, engine: &Shared) -> usize {
        let cancelled = engine.timers.clear();
        let timers_cancelled = cancelled.len();
        engine.timers.drop_timers(cancelled);
        let parked = engine.names.take_all_parked();
        if !parked.is_empty() {
            let letters = parked
                .into_iter()
                .map(crate::contract::event::Event::Message);
            engine.dead_letters(relay::Pid::OUTSIDE, letters.collect());
        }
        timers_cancelled
    }

    /// Lets the workers leave once their queues are empty.
    fn begin_exit(&self, sleepers: &Sleepers) {
        self.exit.store(true, SeqCst);
        sleepers.notify_all();
        // A dozing long-step watcher reads `exit` after setting its flag
        // (see `Sleepers::doze`).
        sleepers.ring_dozer();
    }
}

/// Processes ended so far: the sum of the workers' own counters (no
/// engine-wide counter is written per process).
fn completed(workers: &[CachePadded<Remote>]) -> u64 {
    workers
        .iter()
        .map(|r| r.counters.completed.load(SeqCst))
        .sum()
}

/// Processes inside a step now (one per worker at most).
fn in_steps(workers: &[CachePadded<Remote>]) -> usize {
    workers
        .iter()
        .filter(|r| r.counters.in_step.load(SeqCst) != 0)
        .count()
}

impl Context {
    /// Starts a shutdown, as [`Engine::shutdown`](crate::Engine::shutdown) does, on a thread of its
    /// own, and returns at once: a step cannot wait for its own end. Every
    /// process receives [`Event::Cancel`](crate::Event::Cancel), including
    /// the caller. The engine's owner learns the outcome from
    /// [`Engine::wait_for_shutdown`](crate::Engine::wait_for_shutdown) or from its own `shutdown` call, which
    /// waits for this one and returns the same report.
    ///
    /// Returns `false`, doing nothing, when a shutdown had already begun.
    ///
    /// # Panics
    ///
    /// If the OS refuses to spawn the thread.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use std::time::Duration;
    ///
    /// /// Stops the whole scheduler when it receives "stop".
    /// struct Controller;
    /// impl Process for Controller {
    ///     type Done = ();
    ///     fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
    ///         for event in events {
    ///             match event {
    ///                 Event::Message(m) if m.payload::<&str>() == Some(&"stop") => {
    ///                     out.context().request_shutdown(Duration::from_secs(1));
    ///                 }
    ///                 Event::Cancel => out.finish(()),
    ///                 _ => {}
    ///             }
    ///         }
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let scheduler = Scheduler::builder().workers(1).build();
    /// scheduler.start();
    /// let controller = scheduler.spawn(Controller)?;
    /// scheduler.send(controller.pid(), "stop")?;
    /// let report = scheduler.engine().wait_for_shutdown();
    /// assert_eq!(report.ended_gracefully, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[cfg(not(loom))]
    pub fn request_shutdown(&self, deadline: Duration) -> bool {
        let control = &self.shared().control;
        if self.shared().live.is_stopping() || control.shutdown_requested.swap(true, SeqCst) {
            return false;
        }
        if self.shared().clock.is_virtual() {
            // A simulation runs it on its own thread, after this step.
            *control.requested_deadline.lock() = Some(deadline);
            return true;
        }
        let Some(shared) = control.me.upgrade() else {
            return false;
        };
        let name = format!("{}-shutdown", shared.control.thread_name);
        // Detached: the report reaches the owner through `Finished`.
        drop(spawn_named(name, move || {
            shutdown(&shared, deadline);
        }));
        true
    }
}

/// Stops the engine (see [`Engine::shutdown`]).
pub(crate) fn shutdown(shared: &Arc<Shared>, deadline: Duration) -> ShutdownReport {
    let started = Instant::now();
    let deadline_at = started + deadline;
    if !shared.live.stop() {
        return shared.control.finished.wait();
    }
    let control = &shared.control;
    control.start(shared);
    // Outside threads waiting for a name give up now.
    shared.names.wake_all();
    let completed_before = completed(&shared.remotes);
    // Pairs with the fence in `submit`: a registration this sweep
    // misses sees the stopping flag and delivers the cancel itself.
    fence(SeqCst);
    control.cancel_all(shared, deadline_at);
    let bound = deadline_at + SHUTDOWN_GRACE;
    let mut forced_at = None;
    if control.wait_all_ended(&shared.live, deadline_at) {
        control.begin_exit(&shared.sleepers);
    } else {
        forced_at = Some(completed(&shared.remotes));
        control.warn_stragglers(shared);
        // The force sweep costs time in proportion to the stragglers,
        // so it runs on a thread of its own and this call still returns
        // by `bound`. The workers may leave only once every straggler
        // carries the force flag (an idle one that missed it would
        // never be queued again), so the sweeper lets them go.
        let sweeper = shared.clone();
        let name = format!("{}-shutdown-sweep", shared.control.thread_name);
        drop(spawn_named(name, move || {
            sweeper.control.force_all(&sweeper);
            sweeper.control.begin_exit(&sweeper.sleepers);
        }));
        control.wait_all_ended(&shared.live, bound);
    }

    let timers_cancelled = control.clear_leftovers(shared);

    let handles = std::mem::take(&mut shared.control.threads.lock().handles);
    let mut detached = 0;
    for handle in handles {
        if !join_until(handle, bound) {
            detached += 1;
        }
    }
    // Read after the join, like the stragglers below: a forced process
    // that ends while the workers wind down is then counted as forced,
    // not lost between the two figures.
    let completed_after = completed(&shared.remotes);
    let graceful_end = forced_at.unwrap_or(completed_after);
    let live = shared.live.count();
    let still_running = in_steps(&shared.remotes).min(live);
    let still_queued = live - still_running;
    let report = ShutdownReport {
        ended_gracefully: graceful_end - completed_before,
        forced: completed_after - graceful_end,
        still_running,
        still_queued,
        workers_detached: detached,
        timers_cancelled,
        elapsed: started.elapsed(),
    };
    tracing::debug!(?report, "shutdown");
    shared.control.finished.publish(&report);
    report
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

/// A simulation's shutdown: the stages of [`shutdown`], each run when the
/// simulation calls it, with the simulation stepping the workers in
/// between on the same thread (nothing waits, nothing is joined), and its
/// deadline in virtual time.
#[derive(Debug)]
pub(crate) struct SimulatedShutdown {
    completed_before: u64,
    forced_at: Option<u64>,
}

impl SimulatedShutdown {
    /// Refuses new processes and cancels every live one. `None` when a
    /// shutdown had already begun.
    pub(crate) fn begin(shared: &Shared) -> Option<SimulatedShutdown> {
        if !shared.live.stop() {
            return None;
        }
        shared.names.wake_all();
        let completed_before = completed(&shared.remotes);
        fence(SeqCst);
        shared.control.cancel_all(shared, far_future());
        Some(SimulatedShutdown {
            completed_before,
            forced_at: None,
        })
    }

    /// Whether every process has ended.
    pub(crate) fn all_ended(shared: &Shared) -> bool {
        shared.live.count() == 0
    }

    /// The deadline passed: every process still live is forced.
    pub(crate) fn force(&mut self, shared: &Shared) {
        if self.forced_at.is_none() {
            self.forced_at = Some(completed(&shared.remotes));
            shared.control.warn_stragglers(shared);
        }
        shared.control.force_all(shared);
    }

    /// Clears what is left and publishes the report.
    pub(crate) fn finish(self, shared: &Shared, elapsed: Duration) -> ShutdownReport {
        shared.control.begin_exit(&shared.sleepers);
        let timers_cancelled = shared.control.clear_leftovers(shared);
        let completed_after = completed(&shared.remotes);
        let graceful_end = self.forced_at.unwrap_or(completed_after);
        let report = ShutdownReport {
            ended_gracefully: graceful_end - self.completed_before,
            forced: completed_after - graceful_end,
            still_running: 0,
            still_queued: shared.live.count(),
            workers_detached: 0,
            timers_cancelled,
            elapsed,
        };
        shared.control.finished.publish(&report);
        report
    }
}

/// A deadline no sweep reaches.
fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(100 * 365 * 24 * 3600)
}
