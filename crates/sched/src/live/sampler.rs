//! Taking a snapshot of an engine: its counters, groups, histograms and
//! top processes, and the figures of other libraries.

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::{Duration, Instant};

use relay::Pid;
use sched_core::{AsContext, GroupInfo, Histogram, Histograms, ProcessInfo, WorkerStats};

use super::figure::{Figure, FigureFn};
use super::protocol::{MAX_FIGURES, MAX_TOP, VERSION};
use super::snapshot::{GroupSnapshot, HistogramSummary, ProcessEntry, Snapshot, WorkerSnapshot};

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

    /// A sampler whose [`elapsed_ns`](Snapshot::elapsed_ns) counts from
    /// `origin`: the endpoint's start, for each of its connections.
    pub(super) fn since(origin: Instant) -> Self {
        Sampler {
            origin,
            previous: HashMap::new(),
            figures: None,
            warned: false,
        }
    }

    /// The same sampler, whose snapshots carry the [`Figure`]s `figures`
    /// returns, called once per snapshot (what [`serve_with`](super::serve_with) does for
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

    /// The same sampler, with the endpoint's figures callback (shared by
    /// its connections), if it has one.
    pub(super) fn with_shared_figures(mut self, figures: Option<Arc<FigureFn>>) -> Sampler {
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

        let workers = workers(&stats.workers, histograms.is_some());
        let groups = groups_of(groups, histograms.as_ref());
        let histograms = histograms.as_ref().map(summaries);
        let recent = self.recent_steps(&processes);
        let tops = TopLists::rank(&processes, &recent, top);
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
            top_by_steps: tops.by_steps,
            top_by_mailbox: tops.by_mailbox,
            top_by_long_steps: tops.by_long_steps,
            reports_mailbox_depth: tops.reports_mailbox_depth,
            reports_long_steps: true,
            figures,
        }
    }

    /// Each process's steps since the previous snapshot (since it started,
    /// in the first), in `processes`' order; remembers the counts for the
    /// next.
    fn recent_steps(&mut self, processes: &[ProcessInfo]) -> Vec<u64> {
        let recent = processes
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
        recent
    }
}

/// Each worker's counters; its busy time only when `busy_measured` (the
/// engine measures it with histograms on, and reports zero otherwise).
fn workers(stats: &[WorkerStats], busy_measured: bool) -> Vec<WorkerSnapshot> {
    stats
        .iter()
        .map(|w| WorkerSnapshot {
            steps: w.steps,
            parks: w.parks,
            stolen: w.stolen,
            steal_attempts: w.steal_attempts,
            global_pops: w.global_pops,
            completed: w.completed,
            local_queue_len: w.local_queue_len as u64,
            busy_ns: busy_measured.then(|| nanos(w.busy)),
        })
        .collect()
}

/// Each group, with its schedule latency when the engine has histograms.
fn groups_of(groups: Vec<GroupInfo>, histograms: Option<&Histograms>) -> Vec<GroupSnapshot> {
    // Measured only with groups declared (zero otherwise).
    let measured = groups.len() > 1;
    groups
        .into_iter()
        .map(|g| GroupSnapshot {
            schedule_latency: histograms
                .and_then(|h| h.group_schedule_latency(g.group))
                .map(|latency| summary("schedule_latency", latency)),
            name: g.name,
            weight: g.weight,
            ready: g.ready as u64,
            busy_ns: measured.then(|| nanos(g.busy)),
        })
        .collect()
}

/// The engine-wide histograms, by name.
fn summaries(h: &Histograms) -> Vec<HistogramSummary> {
    vec![
        summary("step", &h.step),
        summary("timer_lateness", &h.timer_lateness),
        summary("schedule_latency", &h.schedule_latency),
        summary("yield_wait", &h.yield_wait),
    ]
}

/// A snapshot's three top lists.
struct TopLists {
    by_steps: Vec<ProcessEntry>,
    by_mailbox: Vec<ProcessEntry>,
    by_long_steps: Vec<ProcessEntry>,
    /// Whether any process reports its mailbox depth.
    reports_mailbox_depth: bool,
}

impl TopLists {
    /// The at most `top` processes with the most recent steps (`recent`,
    /// in `processes`' order), the most events waiting and the most long
    /// steps, most first.
    fn rank(processes: &[ProcessInfo], recent: &[u64], top: usize) -> TopLists {
        let entry = |i: usize| ProcessEntry::of(&processes[i], recent[i]);
        let all: Vec<usize> = (0..processes.len()).collect();
        let by_steps = top_n(&all, top, |&i| recent[i])
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
        TopLists {
            by_steps,
            by_mailbox: ranked_by(&|p| p.mailbox_depth.unwrap_or(0)),
            by_long_steps: ranked_by(&|p| p.long_steps),
            reports_mailbox_depth,
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
