//! A live view of a running scheduler over a local TCP endpoint (feature
//! `live`), for `sched-top` and other tools.
//!
//! [`serve`] starts a thread that listens on the address it is given and
//! answers each request with a [`Snapshot`]: the engine's counters per
//! worker, its queues, its groups (their weights, step time and ready
//! processes), its histograms (when the builder turned them on) and the
//! top processes by recent steps, by mailbox depth and by long steps.
//! Nothing runs on the step path: a snapshot costs one
//! [`stats`](crate::Context::stats), one
//! [`groups`](crate::Context::groups), one
//! [`histograms`](crate::Context::histograms) and one
//! [`processes`](crate::Context::processes) call (about 5 ms for 100 000
//! processes), made on the endpoint's threads when a client asks.
//!
//! **Bind it to loopback** (`127.0.0.1:<port>`, [`DEFAULT_ADDR`]): the
//! endpoint has no authentication and no encryption, and a snapshot shows
//! process names. To watch a remote machine, reach its loopback through
//! an SSH tunnel (`ssh -L 7207:127.0.0.1:7207 host`).
//!
//! # Protocol
//!
//! Newline-delimited JSON over one TCP connection. The client writes a
//! [`Request`] line (`{"top":10}`; an empty line or `{}` asks for the
//! defaults) and the server answers with one [`Snapshot`] line, as often as
//! the client asks on the same connection (at most one snapshot every
//! [`MIN_SPACING`] per connection). A request it cannot read, or a
//! connection beyond [`MAX_CONNECTIONS`], gets one [`ErrorReply`] line
//! (`{"error":"..."}`) and is closed. [`Client`] speaks it.
//!
//! # Figures of other libraries
//!
//! A library built on `sched` (a journal, a transport) has figures of its
//! own that belong beside the engine's: [`serve_with`] takes a callback
//! that returns them as [`Figure`]s (a source, a name, a value, a
//! [`Unit`] and whether it is a [`Kind::Counter`] or a [`Kind::Gauge`]),
//! called for each snapshot, and every snapshot carries them in
//! [`Snapshot::figures`]. `sched` knows nothing of the libraries: the
//! application wires their figures in. A callback that panics costs its
//! figures, not the endpoint: the snapshot is served without them and the
//! panic is logged through `tracing`.
//!
//! Rates (steps per second, busy percentages, groups' shares of step
//! time) are not in a snapshot: a
//! client computes them from two successive snapshots, dividing the
//! counters' differences by the difference of their
//! [`elapsed_ns`](Snapshot::elapsed_ns).
//!
//! A client that stops reading cannot hold up the engine or the other
//! clients: each connection has a thread of its own, a write that cannot
//! proceed for [`WRITE_TIMEOUT`] closes it, and so does a connection that
//! sends no request for [`IDLE_TIMEOUT`] or a request line longer than
//! [`MAX_REQUEST_LEN`] bytes.
//!
//! # Examples
//!
//! ```
//! use sched::prelude::*;
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! let scheduler = Arc::new(Scheduler::builder().workers(1).histograms(true).build());
//! scheduler.start();
//! let endpoint = sched::live::serve(Arc::clone(&scheduler), "127.0.0.1:0")?;
//!
//! let mut client = sched::live::Client::connect(endpoint.local_addr(), Duration::from_secs(5))?;
//! let snapshot = client.snapshot(10)?;
//! assert_eq!(snapshot.version, sched::live::VERSION);
//! assert_eq!(snapshot.workers.len(), 1);
//! assert!(snapshot.histograms.is_some());
//!
//! endpoint.stop(); // or drop it
//! scheduler.shutdown(Duration::from_secs(1));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::HashMap;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use relay::Pid;
use sched_core::{AsContext, Context, Histogram, ProcessInfo};
use serde::{Deserialize, Deserializer, Serialize};

/// The version of the [`Snapshot`] format this crate writes and reads.
/// It changes when a field changes meaning or is removed; new fields are
/// added without a change (readers ignore fields they do not know and give
/// missing ones their default: a snapshot from an endpoint that predates
/// [`Snapshot::groups`] reads with no groups).
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
///
/// assert_eq!(sched::live::VERSION, 1);
/// ```
pub const VERSION: u32 = 1;

/// The address `sched-top` attaches to when given none, and the one to
/// serve on unless the application has a reason to choose another: port
/// 7207 on loopback.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
///
/// let addr: std::net::SocketAddr = sched::live::DEFAULT_ADDR.parse()?;
/// assert!(addr.ip().is_loopback());
/// # Ok::<(), std::net::AddrParseError>(())
/// ```
pub const DEFAULT_ADDR: &str = "127.0.0.1:7207";

/// How many processes each top list holds when the request does not say.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
///
/// assert_eq!(sched::live::Request::default().top(), sched::live::DEFAULT_TOP);
/// ```
pub const DEFAULT_TOP: usize = 10;

/// The most processes a top list holds, whatever the request asks.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
///
/// let greedy = sched::live::Request { top: Some(1_000_000) };
/// assert_eq!(greedy.top(), sched::live::MAX_TOP);
/// ```
pub const MAX_TOP: usize = 1000;

/// The most connections an endpoint serves at once; one more is answered
/// with an [`ErrorReply`] and closed.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
///
/// assert_eq!(sched::live::MAX_CONNECTIONS, 8);
/// ```
pub const MAX_CONNECTIONS: usize = 8;

/// The longest request line the endpoint reads, in bytes (newline
/// included); a longer one closes the connection.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
///
/// assert!(br#"{"top":10}"#.len() < sched::live::MAX_REQUEST_LEN);
/// ```
pub const MAX_REQUEST_LEN: usize = 4096;

/// How long the endpoint waits for a client to take a snapshot it writes
/// before closing the connection.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
///
/// assert_eq!(sched::live::WRITE_TIMEOUT.as_secs(), 2);
/// ```
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(2);

/// How long a connection may go without a request before the endpoint
/// closes it (so that silent clients do not hold the
/// [`MAX_CONNECTIONS`] slots).
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
///
/// assert_eq!(sched::live::IDLE_TIMEOUT.as_secs(), 120);
/// ```
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(120);

/// The least time between two snapshots on one connection: a client
/// asking faster waits (a snapshot walks the process table).
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
///
/// assert_eq!(sched::live::MIN_SPACING.as_millis(), 50);
/// ```
pub const MIN_SPACING: Duration = Duration::from_millis(50);

/// The most [`Figure`]s a snapshot carries: a callback that returns more
/// has the rest dropped (and a `tracing` debug line says so).
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
///
/// assert_eq!(sched::live::MAX_FIGURES, 256);
/// ```
pub const MAX_FIGURES: usize = 256;

/// How often the endpoint's threads look at their stop flag.
const POLL: Duration = Duration::from_millis(50);

/// What a client asks for: one JSON line (`{"top":10}`). Every field is
/// optional; an empty line asks for the defaults.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use sched::live::Request;
///
/// let request = Request { top: Some(3) };
/// assert_eq!(request.top(), 3);
/// assert_eq!(Request::default().top(), sched::live::DEFAULT_TOP);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Request {
    /// How many processes each top list holds ([`DEFAULT_TOP`] when
    /// absent, at most [`MAX_TOP`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top: Option<usize>,
}

impl Request {
    /// The length of the top lists this request gets.
    ///
    /// # Examples
    ///
    /// See [`Request`].
    pub fn top(&self) -> usize {
        self.top.unwrap_or(DEFAULT_TOP).min(MAX_TOP)
    }
}

/// The line the endpoint writes instead of a snapshot when it refuses a
/// request or a connection, before closing it.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
///
/// let refused = sched::live::ErrorReply { error: "too many connections".into() };
/// assert!(refused.error.contains("too many"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorReply {
    /// What went wrong.
    pub error: String,
}

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
    /// The format's version ([`VERSION`]).
    pub version: u32,
    /// Nanoseconds from the start of the endpoint (or sampler) to this
    /// snapshot, on a monotonic clock: the time base for rates.
    pub elapsed_ns: u64,
    /// Per worker, in worker order.
    pub workers: Vec<WorkerSnapshot>,
    /// Per group (tenant), the default group first, then in the order the
    /// builder declared them ([`Context::groups`]): one, `"default"`, on
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
    /// [`serve_with`] (or [`Sampler::with_figures`]) returned them for
    /// this snapshot, in its order (at most [`MAX_FIGURES`]). Empty when
    /// there is no callback, when it panicked, and from an endpoint that
    /// predates figures.
    pub figures: Vec<Figure>,
}

/// A figure of another library, served beside the engine's in
/// [`Snapshot::figures`]: which library it comes from (its `source`,
/// `"journal"`), its name within it, its value, its [`Unit`] and its
/// [`Kind`] (a counter's rate is meaningful, a gauge's is not).
///
/// A value that is not finite (NaN, an infinity) is written as `null` and
/// reads back as NaN: "no value", which `sched-top` shows as `-`.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use sched::live::{Figure, Kind, Unit};
///
/// let records = Figure::counter("journal", "records", 1_204.0, Unit::Count);
/// assert_eq!(records.kind, Kind::Counter);
/// let sync_p99 = Figure::gauge("journal", "sync p99", 0.004, Unit::Seconds);
/// assert_eq!((sync_p99.source.as_str(), sync_p99.name.as_str()), ("journal", "sync p99"));
/// assert_eq!((sync_p99.value, sync_p99.unit, sync_p99.kind), (0.004, Unit::Seconds, Kind::Gauge));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct Figure {
    /// The library (or part of the application) it comes from:
    /// `sched-top` groups figures by it.
    pub source: String,
    /// What it measures, within its source (`"records"`, `"sync p99"`).
    pub name: String,
    /// Its value, in [`unit`](Figure::unit)s.
    #[serde(deserialize_with = "number_or_nan")]
    pub value: f64,
    /// What its value counts.
    pub unit: Unit,
    /// Whether it is a total that only grows (a counter) or a level that
    /// goes up and down (a gauge).
    pub kind: Kind,
}

impl Figure {
    /// A counter: a total since the start that only grows (records
    /// written, bytes, syncs). A client may show its rate, from two
    /// snapshots.
    ///
    /// # Examples
    ///
    /// See [`Figure`].
    pub fn counter(
        source: impl Into<String>,
        name: impl Into<String>,
        value: f64,
        unit: Unit,
    ) -> Figure {
        Figure {
            source: source.into(),
            name: name.into(),
            value,
            unit,
            kind: Kind::Counter,
        }
    }

    /// A gauge: a level now (processes running, a store's size, a
    /// latency percentile), shown as it is.
    ///
    /// # Examples
    ///
    /// See [`Figure`].
    pub fn gauge(
        source: impl Into<String>,
        name: impl Into<String>,
        value: f64,
        unit: Unit,
    ) -> Figure {
        Figure {
            source: source.into(),
            name: name.into(),
            value,
            unit,
            kind: Kind::Gauge,
        }
    }
}

/// What a [`Figure`]'s value counts: on the wire `"count"`, `"bytes"` or
/// `"seconds"`. A unit this version does not know (from a newer endpoint)
/// reads as [`Count`](Unit::Count), a plain number.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use sched::live::{Figure, Unit};
///
/// let size = Figure::gauge("journal", "store size", 1_572_864.0, Unit::Bytes);
/// assert_eq!(size.unit, Unit::Bytes);
/// assert_eq!(Unit::default(), Unit::Count);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Unit {
    /// Bytes.
    Bytes,
    /// Seconds (a latency, a time spent); fractions of a second are
    /// fractions (`0.004` is 4 ms).
    Seconds,
    /// A plain number (records, processes, syncs). Last, as what any
    /// other name reads as.
    #[default]
    #[serde(other)]
    Count,
}

/// Whether a [`Figure`] is a running total or a level: on the wire
/// `"counter"` or `"gauge"`. A kind this version does not know reads as
/// [`Gauge`](Kind::Gauge) (shown as it is, no rate).
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use sched::live::{Figure, Kind, Unit};
///
/// assert_eq!(Figure::counter("journal", "syncs", 80.0, Unit::Count).kind, Kind::Counter);
/// assert_eq!(Kind::default(), Kind::Gauge);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Kind {
    /// A total since the start, that only grows.
    Counter,
    /// A level now, up or down. Last, as what any other name reads as.
    #[default]
    #[serde(other)]
    Gauge,
}

/// Reads a number, or `null` (what JSON makes of a value that is not
/// finite) as NaN.
fn number_or_nan<'de, D: Deserializer<'de>>(deserializer: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(deserializer)?.unwrap_or(f64::NAN))
}

/// The callback that gives a snapshot its [`Figure`]s.
type FigureFn = dyn Fn() -> Vec<Figure> + Send + Sync;

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

/// One group (tenant) in a [`Snapshot`]: what [`Context::groups`]
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

impl ProcessEntry {
    fn of(info: &ProcessInfo, recent_steps: u64) -> Self {
        ProcessEntry {
            pid: info.pid.to_string(),
            names: info.names.iter().map(|n| n.to_string()).collect(),
            state: info.state.to_string(),
            steps: info.steps,
            recent_steps,
            monitored_by: info.monitored_by,
            links: info.links,
            traps_exits: info.traps_exits,
            mailbox_depth: info.mailbox_depth,
            pending_timers: INTROSPECTION.then_some(info.pending_timers),
            since_last_step_ns: info.since_last_step.map(nanos),
            type_name: info.type_name.map(String::from),
            long_steps: Some(info.long_steps),
            published: info
                .published
                .iter()
                .map(|&(key, value)| (key.to_string(), value))
                .collect(),
        }
    }
}

/// Whether the engine publishes each process's pending timers (the
/// `introspection` feature, on by default); without it `ProcessInfo`
/// reports zeros, which a snapshot must not pass off as figures.
const INTROSPECTION: bool = cfg!(feature = "introspection");

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

    /// Reads a snapshot from one line of JSON (what [`Client`] does with
    /// each answer). A line holding an [`ErrorReply`] is an error naming it.
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

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

fn summary(name: &str, histogram: &Histogram) -> HistogramSummary {
    HistogramSummary {
        name: name.to_string(),
        count: histogram.count(),
        p50_ns: nanos(histogram.p50()),
        p90_ns: nanos(histogram.p90()),
        p99_ns: nanos(histogram.p99()),
        max_ns: nanos(histogram.max()),
        mean_ns: nanos(histogram.mean()),
    }
}

/// Takes [`Snapshot`]s of an engine, remembering each process's step count
/// from the previous one so that [`top_by_steps`](Snapshot::top_by_steps)
/// ranks by recent steps. The endpoint keeps one per connection; use one
/// directly to log snapshots or serve them another way.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use sched::live::Sampler;
///
/// let scheduler = Scheduler::builder().workers(1).build();
/// let mut sampler = Sampler::new();
/// let first = sampler.sample(&scheduler, 10);
/// let second = sampler.sample(&scheduler, 10);
/// assert!(second.elapsed_ns >= first.elapsed_ns);
/// ```
pub struct Sampler {
    origin: Instant,
    previous: HashMap<Pid, u64>,
    figures: Option<Arc<FigureFn>>,
    /// Whether a panic of the figures callback was logged as a warning
    /// already (the next ones are logged at debug level).
    warned: bool,
}

impl std::fmt::Debug for Sampler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sampler")
            .field("origin", &self.origin)
            .field("processes", &self.previous.len())
            .field("figures", &self.figures.is_some())
            .finish()
    }
}

impl Default for Sampler {
    fn default() -> Self {
        Sampler::new()
    }
}

impl Sampler {
    /// A sampler whose [`elapsed_ns`](Snapshot::elapsed_ns) counts from now.
    ///
    /// # Examples
    ///
    /// See [`Sampler`].
    pub fn new() -> Self {
        Sampler::since(Instant::now())
    }

    fn since(origin: Instant) -> Self {
        Sampler {
            origin,
            previous: HashMap::new(),
            figures: None,
            warned: false,
        }
    }

    /// The same sampler, whose snapshots carry the [`Figure`]s `figures`
    /// returns, called once per snapshot (what [`serve_with`] does for
    /// each connection). If it panics, the snapshot goes without figures
    /// and the panic is logged through `tracing` (a warning the first
    /// time, at debug level after).
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::live::{Figure, Sampler, Unit};
    ///
    /// let scheduler = Scheduler::builder().workers(1).build();
    /// let mut sampler = Sampler::new()
    ///     .with_figures(|| vec![Figure::gauge("cache", "entries", 42.0, Unit::Count)]);
    /// let snapshot = sampler.sample(&scheduler, 10);
    /// assert_eq!(snapshot.figures[0].name, "entries");
    /// assert_eq!(snapshot.figures[0].value, 42.0);
    /// ```
    pub fn with_figures(
        self,
        figures: impl Fn() -> Vec<Figure> + Send + Sync + 'static,
    ) -> Sampler {
        self.with_shared_figures(Some(Arc::new(figures)))
    }

    fn with_shared_figures(mut self, figures: Option<Arc<FigureFn>>) -> Sampler {
        self.figures = figures;
        self
    }

    /// What the figures callback returns now (at most [`MAX_FIGURES`]),
    /// or nothing when there is none or it panics.
    fn figures(&mut self) -> Vec<Figure> {
        let Some(callback) = &self.figures else {
            return Vec::new();
        };
        match catch_unwind(AssertUnwindSafe(|| callback())) {
            Ok(mut figures) => {
                if figures.len() > MAX_FIGURES {
                    tracing::debug!(
                        returned = figures.len(),
                        max = MAX_FIGURES,
                        "live endpoint: too many figures, the rest dropped"
                    );
                    figures.truncate(MAX_FIGURES);
                }
                figures
            }
            Err(payload) => {
                let message = payload
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a panic without a message".to_string());
                // Dropping the payload runs code of the callback's too.
                let _ = catch_unwind(AssertUnwindSafe(move || drop(payload)));
                if self.warned {
                    tracing::debug!(panic = %message, "live endpoint: the figures callback panicked again; snapshot served without figures");
                } else {
                    self.warned = true;
                    tracing::warn!(panic = %message, "live endpoint: the figures callback panicked; snapshot served without figures");
                }
                Vec::new()
            }
        }
    }

    /// A snapshot of `cx`'s engine with top lists of at most `top`
    /// processes (and at most [`MAX_TOP`]). It reads the counters, the
    /// groups, the histograms and the process list once each, while the
    /// workers run, then calls the figures callback, if it was given one
    /// ([`with_figures`](Sampler::with_figures)).
    ///
    /// # Examples
    ///
    /// See [`Sampler`].
    pub fn sample(&mut self, cx: &impl AsContext, top: usize) -> Snapshot {
        let cx = cx.context();
        let top = top.min(MAX_TOP);
        let stats = cx.stats();
        let groups = cx.groups();
        let histograms = cx.histograms();
        let processes = cx.processes();
        let elapsed_ns = nanos(self.origin.elapsed());

        let workers = stats
            .workers
            .iter()
            .map(|w| WorkerSnapshot {
                steps: w.steps,
                parks: w.parks,
                stolen: w.stolen,
                steal_attempts: w.steal_attempts,
                global_pops: w.global_pops,
                completed: w.completed,
                local_queue_len: w.local_queue_len as u64,
                // Measured only with histograms on (zero otherwise).
                busy_ns: histograms.is_some().then(|| nanos(w.busy)),
            })
            .collect();
        // Measured only with groups declared (zero otherwise).
        let measured = groups.len() > 1;
        let groups = groups
            .into_iter()
            .map(|g| GroupSnapshot {
                schedule_latency: histograms
                    .as_ref()
                    .and_then(|h| h.group_schedule_latency(g.group))
                    .map(|latency| summary("schedule_latency", latency)),
                name: g.name,
                weight: g.weight,
                ready: g.ready as u64,
                busy_ns: measured.then(|| nanos(g.busy)),
            })
            .collect();
        let histograms = histograms.map(|h| {
            vec![
                summary("step", &h.step),
                summary("timer_lateness", &h.timer_lateness),
                summary("schedule_latency", &h.schedule_latency),
                summary("yield_wait", &h.yield_wait),
            ]
        });

        let recent: Vec<u64> = processes
            .iter()
            .map(|p| {
                let before = self.previous.get(&p.pid).copied().unwrap_or(0);
                // A PID reused by a new process counts from zero.
                if p.steps >= before {
                    p.steps - before
                } else {
                    p.steps
                }
            })
            .collect();
        self.previous = processes.iter().map(|p| (p.pid, p.steps)).collect();

        let entry = |i: usize| ProcessEntry::of(&processes[i], recent[i]);
        let all: Vec<usize> = (0..processes.len()).collect();
        let top_by_steps = top_n(&all, top, |&i| recent[i])
            .into_iter()
            .map(entry)
            .collect();
        let reports_mailbox_depth = processes.iter().any(|p| p.mailbox_depth.is_some());
        // The processes whose `figure` is above zero, most first.
        let ranked_by = |figure: &dyn Fn(&ProcessInfo) -> u32| -> Vec<ProcessEntry> {
            let with: Vec<usize> = all
                .iter()
                .copied()
                .filter(|&i| figure(&processes[i]) > 0)
                .collect();
            top_n(&with, top, |&i| u64::from(figure(&processes[i])))
                .into_iter()
                .map(entry)
                .collect()
        };
        let top_by_mailbox = ranked_by(&|p| p.mailbox_depth.unwrap_or(0));
        let reports_long_steps = true;
        let top_by_long_steps = ranked_by(&|p| p.long_steps);
        let figures = self.figures();

        Snapshot {
            version: VERSION,
            elapsed_ns,
            workers,
            groups,
            global_queue_len: stats.global_queue_len as u64,
            live_processes: stats.live_processes as u64,
            parked_workers: stats.parked_workers as u64,
            dead_letters: stats.dead_letters,
            pending_timers: stats.pending_timers as u64,
            long_steps: stats.long_steps,
            histograms,
            top_by_steps,
            top_by_mailbox,
            top_by_long_steps,
            reports_mailbox_depth,
            reports_long_steps,
            figures,
        }
    }
}

/// The `n` of `candidates` with the largest `key`, largest first (ties in
/// candidate order, which is PID order).
fn top_n(candidates: &[usize], n: usize, key: impl Fn(&usize) -> u64) -> Vec<usize> {
    let mut ranked = candidates.to_vec();
    let by_key_desc = |a: &usize, b: &usize| key(b).cmp(&key(a)).then(a.cmp(b));
    if ranked.len() > n && n > 0 {
        ranked.select_nth_unstable_by(n - 1, by_key_desc);
    }
    ranked.truncate(n);
    ranked.sort_unstable_by(by_key_desc);
    ranked
}

/// A running endpoint ([`serve`], [`serve_with`]): its listener and
/// connection threads stop (joined, sockets closed) on
/// [`stop`](LiveEndpoint::stop) or drop. It holds the scheduler's `Arc`
/// (and the figures callback) until then.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use std::sync::Arc;
///
/// let scheduler = Arc::new(Scheduler::builder().workers(1).build());
/// let endpoint = sched::live::serve(Arc::clone(&scheduler), "127.0.0.1:0")?;
/// let addr = endpoint.local_addr();
/// drop(endpoint); // stops and joins its threads
/// assert!(std::net::TcpStream::connect(addr).is_err());
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct LiveEndpoint {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl LiveEndpoint {
    /// The address it listens on (with the port the system chose when
    /// asked for port 0).
    ///
    /// # Examples
    ///
    /// See [`LiveEndpoint`].
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops listening, closes every connection and joins the threads.
    ///
    /// # Examples
    ///
    /// See the [module](self)'s example.
    pub fn stop(mut self) {
        self.shut();
    }

    fn shut(&mut self) {
        self.stop.store(true, SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for LiveEndpoint {
    fn drop(&mut self) {
        self.shut();
    }
}

/// Serves [`Snapshot`]s of `scheduler` on `addr` (see the
/// [module](self)'s protocol) from a thread of its own, until the returned
/// [`LiveEndpoint`] is stopped or dropped. Bind it to loopback: it has no
/// authentication.
///
/// `scheduler` is an `Arc` of anything that hands out its [`Context`]
/// ([`AsContext`]): a [`Scheduler`](crate::Scheduler), an
/// [`Engine`](crate::engine::Engine) or a simulation. An `Arc`, because
/// the endpoint's thread outlives the call: it holds the engine, so the
/// engine cannot be dropped while the thread reads it (a `Context` is
/// only ever borrowed, and a borrow cannot cross into that thread).
///
/// # Errors
///
/// What binding `addr` returns (the address in use, a bad address).
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use std::sync::Arc;
///
/// let scheduler = Arc::new(Scheduler::builder().workers(2).histograms(true).build());
/// scheduler.start();
/// // An application would serve on sched::live::DEFAULT_ADDR; a test, on any free port.
/// let endpoint = sched::live::serve(Arc::clone(&scheduler), "127.0.0.1:0")?;
/// println!("attach with: sched-top {}", endpoint.local_addr());
/// # drop(endpoint);
/// # scheduler.shutdown(std::time::Duration::from_secs(1));
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn serve<S>(scheduler: Arc<S>, addr: impl ToSocketAddrs) -> io::Result<LiveEndpoint>
where
    S: AsContext + Send + Sync + 'static,
{
    start(scheduler, addr, None)
}

/// Serves [`Snapshot`]s of `scheduler` on `addr` as [`serve`] does, each
/// with the [`Figure`]s that `figures` returns for it: how an application
/// shows the figures of the libraries it uses (a journal's records and
/// sync latency, a transport's queues) beside the engine's, in
/// [`Snapshot::figures`] and in `sched-top`'s panels.
///
/// `figures` is called on the endpoint's connection threads, once per
/// snapshot (so at most once per [`MIN_SPACING`] per connection), and
/// from several at once when several clients are attached: make it read
/// counters, not compute. If it panics, the endpoint goes on serving: that
/// snapshot is served without figures, and the panic is logged through
/// `tracing` (a warning the first time on each connection, at debug
/// level after). Of a longer list, the first [`MAX_FIGURES`] are served.
///
/// # Errors
///
/// What binding `addr` returns (the address in use, a bad address).
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use sched::live::{Figure, Unit};
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// // Figures a library keeps; here, a counter of its own.
/// let records = Arc::new(AtomicU64::new(0));
/// let scheduler = Arc::new(Scheduler::builder().workers(1).build());
/// let counted = Arc::clone(&records);
/// let endpoint = sched::live::serve_with(Arc::clone(&scheduler), "127.0.0.1:0", move || {
///     vec![
///         Figure::counter("journal", "records", counted.load(Ordering::Relaxed) as f64, Unit::Count),
///         Figure::gauge("journal", "store size", 4096.0, Unit::Bytes),
///     ]
/// })?;
/// records.store(12, Ordering::Relaxed);
///
/// let mut client = sched::live::Client::connect(endpoint.local_addr(), Duration::from_secs(5))?;
/// let snapshot = client.snapshot(10)?;
/// assert_eq!(snapshot.figures.len(), 2);
/// assert_eq!(snapshot.figures[0].source, "journal");
/// assert_eq!(snapshot.figures[0].value, 12.0);
/// assert_eq!(snapshot.figures[1].unit, Unit::Bytes);
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn serve_with<S, F>(
    scheduler: Arc<S>,
    addr: impl ToSocketAddrs,
    figures: F,
) -> io::Result<LiveEndpoint>
where
    S: AsContext + Send + Sync + 'static,
    F: Fn() -> Vec<Figure> + Send + Sync + 'static,
{
    start(scheduler, addr, Some(Arc::new(figures)))
}

fn start<S>(
    scheduler: Arc<S>,
    addr: impl ToSocketAddrs,
    figures: Option<Arc<FigureFn>>,
) -> io::Result<LiveEndpoint>
where
    S: AsContext + Send + Sync + 'static,
{
    let listener = TcpListener::bind(addr)?;
    listener.set_nonblocking(true)?;
    let addr = listener.local_addr()?;
    if !addr.ip().is_loopback() {
        tracing::warn!(%addr, "the live endpoint listens beyond loopback; it has no authentication");
    }
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    let thread = std::thread::Builder::new()
        .name("sched-live".into())
        .spawn(move || accept_loop(listener, scheduler, figures, flag))?;
    tracing::info!(%addr, "live endpoint listening");
    Ok(LiveEndpoint {
        addr,
        stop,
        thread: Some(thread),
    })
}

/// A connection being served: its thread, and a handle on its socket to
/// close it from the accepting thread when the endpoint stops.
struct Connection {
    thread: JoinHandle<()>,
    socket: Arc<Mutex<Option<TcpStream>>>,
}

fn accept_loop<S>(
    listener: TcpListener,
    scheduler: Arc<S>,
    figures: Option<Arc<FigureFn>>,
    stop: Arc<AtomicBool>,
) where
    S: AsContext + Send + Sync + 'static,
{
    let origin = Instant::now();
    let mut connections: Vec<Connection> = Vec::new();
    while !stop.load(SeqCst) {
        match listener.accept() {
            Ok((stream, peer)) => {
                connections.retain(|c| !c.thread.is_finished());
                if connections.len() >= MAX_CONNECTIONS {
                    tracing::warn!(%peer, max = MAX_CONNECTIONS, "live endpoint: connection refused, too many");
                    refuse(stream, "too many connections");
                    continue;
                }
                match open(
                    stream,
                    peer,
                    Arc::clone(&scheduler),
                    figures.clone(),
                    Arc::clone(&stop),
                    origin,
                ) {
                    Ok(connection) => connections.push(connection),
                    Err(e) => {
                        tracing::debug!(%peer, error = %e, "live endpoint: connection dropped")
                    }
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::sleep(POLL),
            Err(e) => {
                tracing::debug!(error = %e, "live endpoint: accept failed");
                std::thread::sleep(POLL);
            }
        }
    }
    drop(listener);
    for connection in &connections {
        if let Some(socket) = connection
            .socket
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
        {
            let _ = socket.shutdown(Shutdown::Both);
        }
    }
    for connection in connections {
        let _ = connection.thread.join();
    }
    tracing::info!("live endpoint stopped");
}

/// Tells a client why it is closed, without waiting on it.
fn refuse(mut stream: TcpStream, why: &str) {
    let _ = stream.set_nonblocking(true);
    let reply = ErrorReply { error: why.into() };
    let mut line = serde_json::to_string(&reply).expect("an error reply serializes");
    line.push('\n');
    let _ = stream.write_all(line.as_bytes());
    let _ = stream.shutdown(Shutdown::Both);
}

fn open<S>(
    stream: TcpStream,
    peer: SocketAddr,
    scheduler: Arc<S>,
    figures: Option<Arc<FigureFn>>,
    stop: Arc<AtomicBool>,
    origin: Instant,
) -> io::Result<Connection>
where
    S: AsContext + Send + Sync + 'static,
{
    // Accepted sockets may inherit the listener's non-blocking mode.
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(POLL))?;
    stream.set_write_timeout(Some(WRITE_TIMEOUT))?;
    let _ = stream.set_nodelay(true);
    let socket = Arc::new(Mutex::new(Some(stream.try_clone()?)));
    let held = Arc::clone(&socket);
    let thread = std::thread::Builder::new()
        .name("sched-live-conn".into())
        .spawn(move || {
            tracing::debug!(%peer, "live endpoint: client connected");
            let sampler = Sampler::since(origin).with_shared_figures(figures);
            let why = converse(stream, scheduler.context(), sampler, &stop);
            tracing::debug!(%peer, why, "live endpoint: client disconnected");
            held.lock().unwrap_or_else(|e| e.into_inner()).take();
        })?;
    Ok(Connection { thread, socket })
}

/// Answers one client's requests until it leaves, misbehaves or the
/// endpoint stops; returns why it ended.
fn converse(
    stream: TcpStream,
    cx: &Context,
    mut sampler: Sampler,
    stop: &AtomicBool,
) -> &'static str {
    let mut writer = match stream.try_clone() {
        Ok(writer) => writer,
        Err(_) => return "could not clone the socket",
    };
    let mut reader = BufReader::new(stream);
    let mut line = Vec::new();
    let mut last_request = Instant::now();
    let mut last_sample: Option<Instant> = None;
    loop {
        if stop.load(SeqCst) {
            return "endpoint stopped";
        }
        let room = (MAX_REQUEST_LEN - line.len()) as u64;
        match (&mut reader).take(room).read_until(b'\n', &mut line) {
            Ok(0) if line.is_empty() => return "closed by the client",
            Ok(_) if line.last() == Some(&b'\n') => {}
            Ok(_) if line.len() >= MAX_REQUEST_LEN => {
                refuse_on(&mut writer, "request line too long");
                return "request line too long";
            }
            Ok(_) => return "closed by the client mid-request",
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                if last_request.elapsed() >= IDLE_TIMEOUT {
                    return "idle";
                }
                continue;
            }
            Err(_) => return "read failed",
        }
        last_request = Instant::now();
        let request = match parse_request(&line) {
            Ok(request) => request,
            Err(why) => {
                refuse_on(&mut writer, &why);
                return "bad request";
            }
        };
        line.clear();
        if let Some(last) = last_sample {
            std::thread::sleep(MIN_SPACING.saturating_sub(last.elapsed()));
        }
        last_sample = Some(Instant::now());
        let snapshot = sampler.sample(cx, request.top());
        if writer
            .write_all(snapshot.to_json_line().as_bytes())
            .and_then(|()| writer.flush())
            .is_err()
        {
            return "write failed or timed out";
        }
    }
}

fn refuse_on(writer: &mut TcpStream, why: &str) {
    let reply = ErrorReply { error: why.into() };
    let mut line = serde_json::to_string(&reply).expect("an error reply serializes");
    line.push('\n');
    let _ = writer.write_all(line.as_bytes());
}

fn parse_request(line: &[u8]) -> Result<Request, String> {
    let text = std::str::from_utf8(line).map_err(|_| "request is not UTF-8".to_string())?;
    let text = text.trim();
    if text.is_empty() {
        return Ok(Request::default());
    }
    serde_json::from_str(text).map_err(|e| format!("bad request: {e}"))
}

/// A connection to an endpoint, asking for one [`Snapshot`] at a time: what
/// `sched-top` uses.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// let scheduler = Arc::new(Scheduler::builder().workers(1).build());
/// let endpoint = sched::live::serve(Arc::clone(&scheduler), "127.0.0.1:0")?;
/// let mut client = sched::live::Client::connect(endpoint.local_addr(), Duration::from_secs(5))?;
/// let first = client.snapshot(3)?;
/// let second = client.snapshot(3)?;
/// assert!(second.elapsed_ns > first.elapsed_ns);
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct Client {
    writer: TcpStream,
    reader: BufReader<TcpStream>,
}

impl Client {
    /// Connects to `addr`, waiting at most `timeout` for the connection
    /// and then for each answer.
    ///
    /// # Errors
    ///
    /// What connecting returns (refused, timed out).
    ///
    /// # Examples
    ///
    /// See [`Client`].
    pub fn connect(addr: SocketAddr, timeout: Duration) -> io::Result<Client> {
        let stream = TcpStream::connect_timeout(&addr, timeout)?;
        stream.set_read_timeout(Some(timeout))?;
        stream.set_write_timeout(Some(timeout))?;
        let _ = stream.set_nodelay(true);
        Ok(Client {
            writer: stream.try_clone()?,
            reader: BufReader::new(stream),
        })
    }

    /// Asks for a snapshot with top lists of `top` processes and reads it.
    ///
    /// # Errors
    ///
    /// A write or read that failed or timed out, a closed connection, an
    /// [`ErrorReply`] or an answer that is not a snapshot.
    ///
    /// # Examples
    ///
    /// See [`Client`].
    pub fn snapshot(&mut self, top: usize) -> io::Result<Snapshot> {
        let request = Request { top: Some(top) };
        let mut line = serde_json::to_string(&request).expect("a request serializes");
        line.push('\n');
        self.writer.write_all(line.as_bytes())?;
        let mut answer = String::new();
        if self.reader.read_line(&mut answer)? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the endpoint closed the connection",
            ));
        }
        Snapshot::from_json_line(&answer)
    }
}
