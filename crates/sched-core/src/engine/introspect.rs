//! Introspection: counters and the list of live processes.

use std::sync::atomic::Ordering::{Acquire, Relaxed};

use relay::Pid;

use super::Context;
use crate::record::state::ProcessState;
use crate::record::Record;

use super::stats::Stats;

/// One live process, as introspection reports it.
///
/// # Examples
///
/// See [`Context::processes`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProcessInfo {
    /// Its PID.
    pub pid: Pid,
    /// Its state at the time of the call.
    pub state: ProcessState,
    /// Steps it has taken.
    pub steps: u64,
    /// The names it is registered under.
    pub names: Vec<std::sync::Arc<str>>,
    /// How many monitors other processes (or outside code) hold on it.
    pub monitored_by: u32,
    /// How many processes are linked to it.
    pub links: u32,
    /// Whether it traps exits (a linked process's end reaches it as an
    /// event instead of ending it).
    pub traps_exits: bool,
}

impl ProcessInfo {
    fn of(record: &Record) -> Self {
        // One lock of the process's own relations, for all of them.
        let related = record.relations.with_existing(|related| {
            (
                related.names.clone(),
                u32::try_from(related.monitors.len()).unwrap_or(u32::MAX),
                u32::try_from(related.links.len()).unwrap_or(u32::MAX),
                related.trap_exits,
            )
        });
        let (names, monitored_by, links, traps_exits) = related.unwrap_or_default();
        ProcessInfo {
            pid: record.pid,
            state: ProcessState::from_word(record.state.load()),
            steps: record.steps.load(Relaxed),
            names,
            monitored_by,
            links,
            traps_exits,
        }
    }
}

impl Context {
    /// A snapshot of the counters, safe to take while workers run.
    ///
    /// # Examples
    ///
    /// See [`Stats`].
    pub fn stats(&self) -> Stats {
        let threads = self.shared().control.threads.lock();
        let workers = self
            .shared()
            .remotes
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let queued = match &threads.locals {
                    Some(locals) => locals[i].len(),
                    None => r.lifo.len() + r.fifo.len() + r.timed.len(),
                };
                r.counters.snapshot(queued)
            })
            .collect();
        Stats {
            workers,
            global_queue_len: self.shared().injector.len() + self.shared().woken.len(),
            live_processes: self.shared().live.count(),
            parked_workers: self.shared().sleepers.sleeping(),
            dead_letters: self.shared().dead_letters.load(Relaxed),
            pending_timers: self.shared().timers.pending(),
            long_steps: self.shared().long_steps.reported.load(Acquire),
        }
    }

    /// The live processes with their state and step count.
    ///
    /// # Examples
    ///
    /// ```
    /// let engine = sched::Engine::builder().workers(1).build();
    /// assert!(engine.processes().is_empty());
    /// ```
    pub fn processes(&self) -> Vec<ProcessInfo> {
        let records = self.shared().processes.records();
        let mut list: Vec<ProcessInfo> = records.iter().map(|r| ProcessInfo::of(r)).collect();
        // Dropped after the list is made: a count is the last only for a
        // process that ended meanwhile (its record's drop is cheap).
        drop(records);
        list.sort_unstable_by_key(|p| p.pid);
        list
    }
}

impl Context {
    /// The latency histograms, merged over the workers; `None` unless the
    /// builder turned them on with `histograms(true)`. Reading walks every
    /// worker's buckets (a few microseconds); recording costs the workers
    /// two clock reads per step and no shared write.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    ///
    /// /// Takes three steps, then finishes.
    /// struct Three(u32);
    /// impl Process for Three {
    ///     fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
    ///         self.0 += 1;
    ///         if self.0 == 3 { out.finish(()) } else { out.continue_() }
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let scheduler = Scheduler::builder().workers(1).histograms(true).build();
    /// scheduler.start();
    /// scheduler.spawn(Three(0))?.wait()?;
    /// let steps = scheduler.histograms().expect("turned on").step;
    /// assert_eq!(steps.count(), 3);
    /// assert!(steps.p50() <= steps.p99() && steps.p99() <= steps.max());
    /// # scheduler.shutdown(std::time::Duration::from_secs(1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn histograms(&self) -> Option<super::histogram::Histograms> {
        let remotes = &self.shared().remotes;
        remotes.first()?.histograms.as_ref()?;
        Some(super::histogram::Histograms::merge(
            remotes.iter().filter_map(|r| r.histograms.as_deref()),
        ))
    }

    /// What [`processes`](Context::processes) reports of one process, in
    /// constant time (one lookup in the process table): `None` if no live
    /// process has `pid`.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    ///
    /// struct Idle;
    /// impl Process for Idle {
    ///     fn step(&mut self, _: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let scheduler = Scheduler::builder().workers(1).build();
    /// let pid = scheduler.spawn(Idle)?.pid();
    /// scheduler.register_name("idle", pid)?;
    /// let info = scheduler.process_info(pid).expect("live");
    /// assert_eq!(info.names, vec![std::sync::Arc::from("idle")]);
    /// assert!(scheduler.process_info(Pid::local(999_999)).is_none());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn process_info(&self, pid: Pid) -> Option<ProcessInfo> {
        let record = self.shared().processes.get(pid)?;
        Some(ProcessInfo::of(&record))
    }

    /// Whether a process has `pid` now, had it and ended, or is unknown to
    /// this scheduler, in constant time. What tells an error about a PID
    /// apart: a send to an ended process is
    /// [`Closed`](relay::SendErrorKind::Closed), one to an unknown PID
    /// [`UnknownTarget`](relay::SendErrorKind::UnknownTarget); a monitor's
    /// [`ExitReason::NoProcess`](crate::ExitReason::NoProcess) is either.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::actor::PidStatus;
    ///
    /// struct Quick;
    /// impl Process for Quick {
    ///     fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
    ///         out.finish(());
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let scheduler = Scheduler::builder().workers(1).build();
    /// let quick = scheduler.spawn(Quick)?;
    /// let pid = quick.pid();
    /// assert_eq!(scheduler.pid_status(pid), PidStatus::Live);
    /// scheduler.start();
    /// quick.wait()?;
    /// assert_eq!(scheduler.pid_status(pid), PidStatus::Ended);
    /// assert_eq!(scheduler.pid_status(Pid::local(999_999)), PidStatus::Unknown);
    /// # scheduler.shutdown(std::time::Duration::from_secs(1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn pid_status(&self, pid: Pid) -> PidStatus {
        let processes = &self.shared().processes;
        if processes.get(pid).is_some() {
            PidStatus::Live
        } else if processes.ended(pid) {
            PidStatus::Ended
        } else {
            PidStatus::Unknown
        }
    }
}

/// What a scheduler knows of a PID ([`Context::pid_status`]).
///
/// # Examples
///
/// See [`Context::pid_status`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PidStatus {
    /// A process has this PID now (possibly finishing: its end may not be
    /// complete).
    Live,
    /// The scheduler handed this PID out and its process has ended (or its
    /// start was refused). The PID is never handed out again.
    Ended,
    /// No process has this PID, and the scheduler knows of none that had
    /// it: never handed out here, reserved by `allocate_pid` and not yet
    /// submitted, of another node, or a PID a caller chose for `submit`
    /// whose process ended (a chosen PID leaves no trace).
    Unknown,
}
