//! The engine at one moment, as the endpoint writes it: the snapshot and
//! the parts it holds.

use std::io;

use serde::{Deserialize, Serialize};

use super::figure::Figure;

/// The engine at one moment, as the endpoint writes it (one JSON line).
///
/// Counters are totals since the engine started; a client computes rates
/// from two snapshots and their [`elapsed_ns`](Snapshot::elapsed_ns).
/// Fields that the engine does not report are `null` (an `Option`) and
/// lists it cannot rank are empty, so a reader tells "not reported" from
/// zero.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use sched::live::Sampler;
///
/// let scheduler = Scheduler::builder().workers(2).build();
/// let snapshot = Sampler::new().sample(&scheduler, 5);
/// assert_eq!(snapshot.workers.len(), 2);
/// assert_eq!(snapshot.groups[0].name, "default"); // the only group
/// assert!(snapshot.histograms.is_none()); // the builder did not turn them on
/// let line = snapshot.to_json_line();
/// assert!(line.ends_with('\n'));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct Snapshot {
    /// The format's version ([`VERSION`](super::VERSION)).
    pub version: u32,
    /// Nanoseconds from the start of the endpoint (or sampler) to this
    /// snapshot, on a monotonic clock: the time base for rates.
    pub elapsed_ns: u64,
    /// Per worker, in worker order.
    pub workers: Vec<WorkerSnapshot>,
    /// Per group (tenant), the default group first, then in the order the
    /// builder declared them ([`Context::groups`](crate::Context::groups)): one, `"default"`, on
    /// an engine without declared groups. Empty from an endpoint that
    /// predates groups.
    pub groups: Vec<GroupSnapshot>,
    /// Processes in the global queues.
    pub global_queue_len: u64,
    /// Processes started and not ended.
    pub live_processes: u64,
    /// Workers asleep (or about to sleep).
    pub parked_workers: u64,
    /// Events no process could take, so far.
    pub dead_letters: u64,
    /// Timers set and not yet fired nor cancelled.
    pub pending_timers: u64,
    /// Steps reported as long while they ran, so far.
    pub long_steps: u64,
    /// The engine's histograms, `None` when the builder did not turn them
    /// on (`histograms(true)`).
    pub histograms: Option<Vec<HistogramSummary>>,
    /// The processes that took the most steps since this connection's
    /// previous snapshot (since they started, in a connection's first),
    /// most first.
    pub top_by_steps: Vec<ProcessEntry>,
    /// The processes with the most events waiting in their mailbox, most
    /// first; only those with a non-empty mailbox. Empty when the engine
    /// does not report mailbox depths.
    pub top_by_mailbox: Vec<ProcessEntry>,
    /// The processes with the most steps reported long, most first; only
    /// those with at least one. Empty when the engine does not count long
    /// steps per process.
    pub top_by_long_steps: Vec<ProcessEntry>,
    /// Whether the engine reports each process's mailbox depth (so an
    /// empty [`top_by_mailbox`](Snapshot::top_by_mailbox) means that no
    /// mailbox holds anything): when the builder's `count_mailboxes(true)`
    /// (or a mailbox bound) has it count them.
    pub reports_mailbox_depth: bool,
    /// Whether the engine counts long steps per process.
    pub reports_long_steps: bool,
    /// The figures of other libraries, as the callback given to
    /// [`serve_with`](super::serve_with) (or [`Sampler::with_figures`](super::Sampler::with_figures)) returned them for
    /// this snapshot, in its order (at most [`MAX_FIGURES`](super::MAX_FIGURES)). Empty when
    /// there is no callback, when it panicked, and from an endpoint that
    /// predates figures.
    pub figures: Vec<Figure>,
}

/// One worker's counters in a [`Snapshot`].
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
///
/// let scheduler = Scheduler::builder().workers(1).build();
/// let worker = &sched::live::Sampler::new().sample(&scheduler, 0).workers[0];
/// assert_eq!(worker.steps, 0);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct WorkerSnapshot {
    /// Steps run.
    pub steps: u64,
    /// Times it parked (slept).
    pub parks: u64,
    /// Processes it took from other workers.
    pub stolen: u64,
    /// Steal attempts, successful or not.
    pub steal_attempts: u64,
    /// Processes it took from the global queues.
    pub global_pops: u64,
    /// Processes it ended.
    pub completed: u64,
    /// Processes in its run queues.
    pub local_queue_len: u64,
    /// Nanoseconds spent in steps, so far; `None` when the engine does not
    /// measure it (it does only with histograms on).
    pub busy_ns: Option<u64>,
}

/// One group (tenant) in a [`Snapshot`]: what [`Context::groups`](crate::Context::groups)
/// reports of it. A client computes each group's share of the step time
/// from two snapshots' [`busy_ns`](GroupSnapshot::busy_ns).
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use sched::live::Sampler;
///
/// let scheduler = Scheduler::builder().workers(1).group("web", 3).build();
/// let snapshot = Sampler::new().sample(&scheduler, 0);
/// let names: Vec<&str> = snapshot.groups.iter().map(|g| g.name.as_str()).collect();
/// assert_eq!(names, ["default", "web"]);
/// let web = &snapshot.groups[1];
/// assert_eq!((web.weight, web.ready), (3, 0));
/// assert_eq!(web.busy_ns, Some(0)); // measured, and nothing ran yet
///
/// // Without declared groups, the default one alone, its time unmeasured.
/// let plain = Scheduler::builder().workers(1).build();
/// let alone = Sampler::new().sample(&plain, 0).groups;
/// assert_eq!(alone.len(), 1);
/// assert_eq!(alone[0].busy_ns, None);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct GroupSnapshot {
    /// The name it was declared with (`"default"` for the default group).
    pub name: String,
    /// Its weight now.
    pub weight: u32,
    /// Its processes queued to run now, on every worker and in the global
    /// queues.
    pub ready: u64,
    /// Nanoseconds its processes spent in steps, over all workers, so far;
    /// `None` when the engine does not measure it (it does only when the
    /// builder declared groups: not with the default group alone).
    pub busy_ns: Option<u64>,
    /// The schedule latency of its processes (from ready to the start of
    /// their step; named `schedule_latency`, as in
    /// [`Snapshot::histograms`]): `None` unless the builder turned the
    /// histograms on and declared groups, and from an endpoint that
    /// predates it.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::live::Sampler;
    ///
    /// let scheduler = Scheduler::builder().workers(1).group("web", 3).histograms(true).build();
    /// let snapshot = Sampler::new().sample(&scheduler, 0);
    /// let web = snapshot.groups[1].schedule_latency.as_ref().expect("histograms and groups");
    /// assert_eq!(web.count, 0); // nothing ran yet
    ///
    /// // Without declared groups, or without histograms, none.
    /// let plain = Scheduler::builder().workers(1).histograms(true).build();
    /// assert_eq!(Sampler::new().sample(&plain, 0).groups[0].schedule_latency, None);
    /// ```
    pub schedule_latency: Option<HistogramSummary>,
}

/// One histogram in a [`Snapshot`], in nanoseconds. Quantiles are within
/// 12.5% above the true value; the maximum and mean are exact.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
///
/// let scheduler = Scheduler::builder().workers(1).histograms(true).build();
/// let snapshot = sched::live::Sampler::new().sample(&scheduler, 0);
/// let step = &snapshot.histograms.unwrap()[0];
/// assert_eq!(step.name, "step");
/// assert_eq!(step.count, 0);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct HistogramSummary {
    /// Which histogram: `step` (step durations), `timer_lateness` (from a
    /// timer's deadline to its delivery), `schedule_latency` (from ready to
    /// the start of the step), `yield_wait` (from a step that yielded to
    /// the step that sees a completion), and any the engine adds.
    pub name: String,
    /// Values recorded.
    pub count: u64,
    /// The median.
    pub p50_ns: u64,
    /// The 90th percentile.
    pub p90_ns: u64,
    /// The 99th percentile.
    pub p99_ns: u64,
    /// The largest value.
    pub max_ns: u64,
    /// The mean.
    pub mean_ns: u64,
}

/// One process in a [`Snapshot`]'s top lists.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
///
/// /// Waits for messages until cancelled.
/// struct Waiter;
/// impl Process for Waiter {
///     type Done = ();
///     fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
///         for event in events {
///             if let Event::Cancel = event { out.finish(()) }
///         }
///         Ok(())
///     }
/// }
///
/// let scheduler = Scheduler::builder().workers(1).build();
/// scheduler.start();
/// let waiter = scheduler.spawn(Waiter)?;
/// scheduler.context().register_name("waiter", waiter.pid())?;
/// let snapshot = sched::live::Sampler::new().sample(&scheduler, 10);
/// let entry = &snapshot.top_by_steps[0];
/// assert_eq!(entry.pid, waiter.pid().to_string());
/// assert_eq!(entry.names, ["waiter"]);
/// # scheduler.shutdown(std::time::Duration::from_secs(1));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct ProcessEntry {
    /// Its PID, as `<node.id>`.
    pub pid: String,
    /// The names it is registered under.
    pub names: Vec<String>,
    /// `ready`, `running`, `blocked` or `idle`.
    pub state: String,
    /// Steps taken since it started.
    pub steps: u64,
    /// Steps taken since this connection's previous snapshot (all of them
    /// in a connection's first).
    pub recent_steps: u64,
    /// How many monitors others hold on it.
    pub monitored_by: u32,
    /// How many processes are linked to it.
    pub links: u32,
    /// Whether it traps exits.
    pub traps_exits: bool,
    /// Events waiting in its mailbox; `None` when the engine does not
    /// report it.
    pub mailbox_depth: Option<u32>,
    /// Its timers set and not yet fired; `None` when not reported.
    pub pending_timers: Option<u32>,
    /// Nanoseconds since its last step started (for a running process:
    /// how long its current step has run), to within a few milliseconds;
    /// `None` before its first step or when not reported.
    pub since_last_step_ns: Option<u64>,
    /// The Rust type of the process; `None` before its first step or when
    /// not reported.
    pub type_name: Option<String>,
    /// Its steps reported long; `None` when not reported.
    pub long_steps: Option<u32>,
    /// The figures it published of itself (`Output::publish`), by key.
    pub published: Vec<(String, i64)>,
}

impl Snapshot {
    /// The snapshot as one line of JSON, newline included: what the
    /// endpoint writes.
    ///
    /// # Examples
    ///
    /// See [`Snapshot`].
    pub fn to_json_line(&self) -> String {
        let mut line = serde_json::to_string(self).expect("a snapshot serializes");
        line.push('\n');
        line
    }

    /// Reads a snapshot from one line of JSON (what [`Client`](super::Client) does with
    /// each answer). A line holding an [`ErrorReply`](super::ErrorReply) is an error naming it.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::live::{Sampler, Snapshot};
    ///
    /// let scheduler = Scheduler::builder().workers(1).build();
    /// let written = Sampler::new().sample(&scheduler, 10);
    /// let read = Snapshot::from_json_line(&written.to_json_line())?;
    /// assert_eq!(read, written);
    /// assert!(Snapshot::from_json_line(r#"{"error":"too many connections"}"#).is_err());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn from_json_line(line: &str) -> io::Result<Snapshot> {
        let value: serde_json::Value = serde_json::from_str(line.trim_end())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        if let Some(error) = value.get("error").and_then(|e| e.as_str()) {
            return Err(io::Error::other(format!("the endpoint refused: {error}")));
        }
        serde_json::from_value(value).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
    }
}
