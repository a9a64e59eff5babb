//! Stopping the engine: cancel, wait, force, join, report.

use std::sync::atomic::Ordering::SeqCst;
use std::time::{Duration, Instant};

use super::shared::Shared;
use super::Engine;
use crate::contract::event::Event;
use crate::record::state::FORCE;
use crate::sync::thread;

/// How long, after forcing the stragglers at the shutdown deadline, the
/// engine waits for workers to end them and to exit.
const FORCE_GRACE: Duration = Duration::from_millis(200);

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

impl Shared {
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

impl Engine {
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

impl Drop for Engine {
    /// An engine dropped without `shutdown` shuts down with a zero deadline:
    /// live processes are cancelled at once.
    fn drop(&mut self) {
        if !self.shared.stopping.load(SeqCst) {
            self.shutdown(Duration::ZERO);
        }
    }
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
