//! Introspection: counters, the list of live processes and what each
//! publishes of itself.
//!
//! A process's own figures (its last step, its pending timers, its type)
//! are written by its owner on the step path and read here from any
//! thread (`record/figures.rs`), against the engine-wide clock and type
//! names of `figures.rs`.

use std::sync::atomic::Ordering::{Acquire, Relaxed};
use std::time::Duration;

use relay::Pid;

use super::Context;
use crate::contract::output::Output;
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
    /// Messages sent to it that no step has drained from its mailbox yet
    /// (messages a step was handed and left unread are not counted).
    /// `None` unless the builder's `count_mailboxes(true)` or a mailbox
    /// bound has the engine count them.
    pub mailbox_depth: Option<u32>,
    /// Timers it had pending as of its last step (`u16::MAX` means at
    /// least that many); `0` without the `introspection` feature.
    pub pending_timers: u32,
    /// How long ago its last step started (for a running process: how long
    /// its current step has run), to within a few milliseconds; `None` if
    /// it has not stepped yet, or without the `introspection` feature.
    pub since_last_step: Option<Duration>,
    /// Its type, as [`Process::type_name`](crate::Process::type_name)
    /// names it, from its first step on; `None` before, or without the
    /// `introspection` feature.
    pub type_name: Option<&'static str>,
    /// How many of its steps the long-step watcher reported (see
    /// `Builder::long_step_threshold`).
    pub long_steps: u32,
    /// The figures it published of itself with
    /// [`Output::publish`](crate::Output::publish), by key.
    pub published: Vec<(&'static str, i64)>,
    /// Its priority: the ready queue it waits in on its worker.
    pub priority: crate::Priority,
    /// Its group: whose share of step time it runs in.
    pub group: crate::Group,
}

/// Milliseconds from stamp `at` to `now`, both in the engine's wrapping
/// millisecond clock. A step may be stamped after the reader took `now`
/// (the walk reads the clock once, then each record): such a stamp is
/// "just now", not `2^32` ms ago. Differences are read as signed, so a
/// stamp up to 24 days old reads right across the clock's wrap.
fn ms_since(now: u32, at: u32) -> u32 {
    u32::try_from(now.wrapping_sub(at) as i32).unwrap_or(0)
}

/// What a process's figures are read against: the clock, and how to find
/// a type's name and a PID's long steps (from copies taken once for a
/// whole walk of the table, or looked up for one process).
struct Readings<T, L> {
    now_ms: u32,
    /// Whether mailboxes are counted.
    counts: bool,
    type_name: T,
    long_steps: L,
}

impl ProcessInfo {
    /// What `record`'s own atomics say (no lock: `processes()` calls this
    /// under the process table's slot lock).
    fn figures<T, L>(record: &Record, readings: &Readings<T, L>) -> Self
    where
        T: Fn(u16) -> Option<&'static str>,
        L: Fn(u64) -> u32,
    {
        let figures = &record.figures;
        ProcessInfo {
            pid: record.pid,
            state: ProcessState::from_word(record.state.load()),
            steps: record.steps.load(Relaxed),
            names: Vec::new(),
            monitored_by: 0,
            links: 0,
            traps_exits: false,
            mailbox_depth: readings.counts.then(|| record.mailbox.depth()),
            pending_timers: u32::from(figures.timers()),
            since_last_step: figures
                .last_step_ms()
                .map(|at| Duration::from_millis(u64::from(ms_since(readings.now_ms, at)))),
            type_name: figures.kind().and_then(&readings.type_name),
            long_steps: (readings.long_steps)(record.pid.id()),
            published: Vec::new(),
            priority: record.priority(),
            group: crate::Group::from_index(record.group()),
        }
    }

    /// Adds what `record`'s relations hold: one lock of the process's own
    /// relations, for all of them.
    fn add_relations(&mut self, record: &Record) {
        let _ = record.relations.with_existing(|related| {
            self.names.clone_from(&related.names);
            self.monitored_by = u32::try_from(related.monitors.len()).unwrap_or(u32::MAX);
            self.links = u32::try_from(related.links.len()).unwrap_or(u32::MAX);
            self.traps_exits = related.trap_exits;
            self.published.clone_from(&related.published);
        });
    }

    fn of<T, L>(record: &Record, readings: &Readings<T, L>) -> Self
    where
        T: Fn(u16) -> Option<&'static str>,
        L: Fn(u64) -> u32,
    {
        let mut info = Self::figures(record, readings);
        if record.figures.may_be_related() {
            info.add_relations(record);
        }
        info
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
                    None => r
                        .ready
                        .iter()
                        .chain(r.nursery.iter())
                        .map(|q| q.len())
                        .sum(),
                };
                let mut stats = r.counters.snapshot(queued);
                if let Some(histograms) = &r.histograms {
                    stats.busy = histograms.busy();
                }
                stats
            })
            .collect();
        Stats {
            workers,
            global_queue_len: self
                .shared()
                .injector
                .iter()
                .map(|q| q.len())
                .sum::<usize>()
                + self.shared().woken.iter().map(|q| q.len()).sum::<usize>(),
            live_processes: self.shared().live.count(),
            parked_workers: self.shared().sleepers.sleeping(),
            dead_letters: self.shared().dead_letters.load(Relaxed),
            pending_timers: self.shared().timers.pending(),
            long_steps: self.shared().long_steps.reported.load(Acquire),
        }
    }

    /// The live processes with their state and step count, sorted by PID.
    ///
    /// Workers keep running while the table is walked, so the list is not
    /// a snapshot of one instant; what it does promise:
    /// - each process is listed at most once;
    /// - every process listed was live at one same instant, when the walk
    ///   ended: the list never holds more processes than the builder's
    ///   process limit;
    /// - a process live for the whole call is listed; one that started or
    ///   ended during the call may or may not be.
    ///
    /// (Checked under churn at the limit by the `introspection` tests.)
    ///
    /// # Examples
    ///
    /// ```
    /// let engine = sched::engine::Engine::builder().workers(1).build();
    /// assert!(engine.context().processes().is_empty());
    /// ```
    pub fn processes(&self) -> Vec<ProcessInfo> {
        let shared = self.shared();
        // Copied once for the whole walk: each lock is taken once.
        let types = shared.introspect.type_names();
        let long_steps = shared.long_steps.by_pid();
        let readings = Readings {
            // The real clock: the coarse one stands still while the
            // engine idles (its watcher dozes), and a reading is rare.
            now_ms: shared.introspect.read_now_ms(),
            counts: shared.counts_messages,
            type_name: |i: u16| types.get(usize::from(i)).copied(),
            // Most engines have no long step at all: no lookup then.
            long_steps: |id: u64| {
                if long_steps.is_empty() {
                    0
                } else {
                    long_steps.get(&id).copied().unwrap_or(0)
                }
            },
        };
        // One walk of the table, reading each record's atomics under its
        // slot's lock (no reference taken: two atomic read-modify-writes
        // fewer per process, and one cache line of it read, not two).
        let mut list = Vec::with_capacity(shared.live.count());
        let mut related = Vec::new();
        shared.processes.visit(|record| {
            related.push(record.figures.may_be_related());
            list.push(ProcessInfo::figures(record, &readings));
        });
        // The walk is no snapshot: a process that ended in a slot already
        // read and one that started in a slot read later would both be
        // listed, more than were ever live at once. So each is checked
        // again after the walk and kept only if it is still live. A PID is
        // registered once, over one interval of time; a kept process was
        // registered when the walk read it and again after the walk ended,
        // so it was registered at the walk's end: every process kept was
        // live at that one instant, and the list never holds more than the
        // process limit (the table holds a process only while it is
        // counted live). Those that may have relations are looked up (to
        // take their relations' lock outside the slot's); the others only
        // have their slot read.
        let mut related = related.into_iter();
        list.retain_mut(|info| {
            if related.next() == Some(true) {
                match shared.processes.get(info.pid) {
                    Some(record) => {
                        info.add_relations(&record);
                        true
                    }
                    None => false,
                }
            } else {
                shared.processes.holds(info.pid)
            }
        });
        list.sort_unstable_by_key(|p| p.pid);
        // A PID users chose may end and be submitted again during the walk,
        // and be read in both places it lived: listed once.
        list.dedup_by_key(|p| p.pid);
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
    ///     type Done = ();
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
    /// let steps = scheduler.context().histograms().expect("turned on").step;
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
    ///     type Done = ();
    ///     fn step(&mut self, _: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let scheduler = Scheduler::builder().workers(1).build();
    /// let pid = scheduler.spawn(Idle)?.pid();
    /// scheduler.context().register_name("idle", pid)?;
    /// let info = scheduler.context().process_info(pid).expect("live");
    /// assert_eq!(info.names, vec![std::sync::Arc::from("idle")]);
    /// assert!(scheduler.context().process_info(Pid::local(999_999)).is_none());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn process_info(&self, pid: Pid) -> Option<ProcessInfo> {
        let shared = self.shared();
        let record = shared.processes.get(pid)?;
        let readings = Readings {
            // The real clock: the coarse one stands still while the
            // engine idles (its watcher dozes), and a reading is rare.
            now_ms: shared.introspect.read_now_ms(),
            counts: shared.counts_messages,
            type_name: |i| shared.introspect.type_name(i),
            long_steps: |id| shared.long_steps.of(id),
        };
        Some(ProcessInfo::of(&record, &readings))
    }

    /// Whether a process has `pid` now, had it and ended, or is unknown to
    /// this scheduler, in constant time. What tells an error about a PID
    /// apart: a send to an ended process is
    /// [`Ended`](relay::SendErrorKind::Ended), one to an unknown PID
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
    ///     type Done = ();
    ///     fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
    ///         out.finish(());
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let scheduler = Scheduler::builder().workers(1).build();
    /// let quick = scheduler.spawn(Quick)?;
    /// let pid = quick.pid();
    /// assert_eq!(scheduler.context().pid_status(pid), PidStatus::Live);
    /// scheduler.start();
    /// quick.wait()?;
    /// assert_eq!(scheduler.context().pid_status(pid), PidStatus::Ended);
    /// assert_eq!(scheduler.context().pid_status(Pid::local(999_999)), PidStatus::Unknown);
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

impl Output<'_> {
    /// Publishes a figure of this process under `key` (replacing the one
    /// published before under that key), for whoever inspects it:
    /// [`ProcessInfo::published`] lists them, and the live view and the
    /// metrics show them. A queue's length, a connection count, the
    /// version of the state it holds: whatever helps someone watching it.
    ///
    /// It costs a lock of the process's own relations (uncontended unless
    /// someone inspects it at that moment), so publish when a figure
    /// changes, not on every step of a hot loop.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    ///
    /// /// Counts the messages it received and publishes the count.
    /// struct Counter(i64);
    /// impl Process for Counter {
    ///     type Done = ();
    ///     fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
    ///         for _ in events.by_ref() {
    ///             self.0 += 1;
    ///         }
    ///         out.publish("received", self.0);
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let scheduler = Scheduler::builder().workers(1).build();
    /// scheduler.start();
    /// let pid = scheduler.spawn(Counter(0))?.pid();
    /// for i in 0..3 {
    ///     scheduler.send(pid, i)?;
    /// }
    /// let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    /// while scheduler.context().process_info(pid).unwrap().published != [("received", 3)] {
    ///     assert!(std::time::Instant::now() < deadline, "never published");
    ///     std::thread::sleep(std::time::Duration::from_millis(1));
    /// }
    /// # scheduler.shutdown(std::time::Duration::from_secs(1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn publish(&mut self, key: &'static str, value: i64) {
        self.engine.publish(key, value);
    }
}

#[cfg(test)]
mod tests {
    use super::ms_since;

    #[test]
    fn a_stamp_after_the_reading_is_just_now_and_the_wrap_reads_right() {
        assert_eq!(ms_since(100, 40), 60);
        // Stamped after the reader read its clock: not 49.7 days ago.
        assert_eq!(ms_since(100, 101), 0);
        assert_eq!(ms_since(100, 100 + (1 << 30)), 0);
        // Across the clock's wrap.
        assert_eq!(ms_since(5, u32::MAX - 4), 10);
    }
}
