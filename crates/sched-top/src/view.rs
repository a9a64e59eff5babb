//! From snapshots to what the screen shows: a pure function of the
//! previous snapshot (for rates) and the current one.

use std::time::Duration;

use sched::live::{GroupSnapshot, Kind, ProcessEntry, Snapshot, Unit};

/// Everything the screen shows about the engine, computed from two
/// successive snapshots by [`view`].
///
/// # Examples
///
/// ```
/// use sched::live::Snapshot;
///
/// let first = sched_top::view::view(None, &Snapshot::default());
/// assert!(first.header.steps_per_sec.is_none()); // no rates from one snapshot
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct View {
    /// The engine's totals.
    pub header: Header,
    /// One row per worker, in worker order.
    pub workers: Vec<WorkerRow>,
    /// One row per group (tenant), the default group first, in the
    /// snapshot's order.
    pub groups: Vec<GroupRow>,
    /// One row per histogram; `None` when the engine records none.
    pub histograms: Option<Vec<HistogramRow>>,
    /// The processes that took the most steps lately.
    pub by_steps: ProcessList,
    /// The processes with the deepest mailboxes.
    pub by_mailbox: ProcessList,
    /// The processes with the most long steps.
    pub by_long_steps: ProcessList,
    /// The figures of other libraries ([`Snapshot::figures`]), grouped by
    /// source in the order each source first appears; empty when the
    /// endpoint serves none.
    pub figures: Vec<FigureGroup>,
}

/// The figures of one source (a library built on `sched`, such as
/// `"journal"`), for its panel.
///
/// # Examples
///
/// ```
/// use sched::live::{Figure, Snapshot, Unit};
///
/// let mut snapshot = Snapshot::default();
/// snapshot.figures = vec![
///     Figure::counter("journal", "records", 10.0, Unit::Count),
///     Figure::gauge("relay", "queued", 2.0, Unit::Count),
///     Figure::gauge("journal", "store size", 4096.0, Unit::Bytes),
/// ];
/// let view = sched_top::view::view(None, &snapshot);
/// let sources: Vec<&str> = view.figures.iter().map(|g| g.source.as_str()).collect();
/// assert_eq!(sources, ["journal", "relay"]);
/// assert_eq!(view.figures[0].rows[1].name, "store size");
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct FigureGroup {
    /// The source, as the figures name it.
    pub source: String,
    /// Its figures, in the snapshot's order.
    pub rows: Vec<FigureRow>,
}

/// One figure's row.
///
/// # Examples
///
/// ```
/// use sched::live::{Figure, Snapshot, Unit};
///
/// let mut before = Snapshot::default();
/// before.figures = vec![Figure::counter("journal", "bytes", 1_000.0, Unit::Bytes)];
/// let mut after = before.clone();
/// after.elapsed_ns = 2_000_000_000; // two seconds later
/// after.figures[0].value = 9_000.0;
/// let row = &sched_top::view::view(Some(&before), &after).figures[0].rows[0];
/// assert_eq!(row.per_sec, Some(4_000.0));
/// assert_eq!(sched_top::view::quantity(row.value, row.unit), "8.79KiB");
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct FigureRow {
    /// Its name.
    pub name: String,
    /// Its value now (NaN: none).
    pub value: f64,
    /// What it counts.
    pub unit: Unit,
    /// A counter or a gauge.
    pub kind: Kind,
    /// For a counter, its growth per second since the previous snapshot;
    /// `None` for a gauge, without a previous snapshot, when the previous
    /// one lacks it (or had it as another unit or kind), or when it went
    /// backwards (another engine behind the address).
    pub per_sec: Option<f64>,
}

/// The engine's totals, for the header.
///
/// # Examples
///
/// ```
/// let view = sched_top::view::view(None, &sched::live::Snapshot::default());
/// assert_eq!(view.header.live_processes, 0);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Header {
    /// Time since the endpoint started.
    pub uptime: Duration,
    /// Processes started and not ended.
    pub live_processes: u64,
    /// Worker threads.
    pub workers: usize,
    /// Workers asleep.
    pub parked_workers: u64,
    /// Processes in the global queues.
    pub global_queue_len: u64,
    /// Timers pending.
    pub pending_timers: u64,
    /// Dead letters so far.
    pub dead_letters: u64,
    /// Long steps so far.
    pub long_steps: u64,
    /// Steps per second over all workers, since the previous snapshot.
    pub steps_per_sec: Option<f64>,
}

/// One worker's row.
///
/// # Examples
///
/// ```
/// let mut snapshot = sched::live::Snapshot::default();
/// snapshot.workers.push(Default::default());
/// let view = sched_top::view::view(None, &snapshot);
/// assert_eq!(view.workers[0].index, 0);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerRow {
    /// Its index.
    pub index: usize,
    /// Share of the time spent in steps since the previous snapshot, in
    /// percent; `None` without a previous snapshot or when the engine does
    /// not measure it.
    pub busy_pct: Option<f64>,
    /// Steps per second since the previous snapshot.
    pub steps_per_sec: Option<f64>,
    /// Processes in its run queues now.
    pub local_queue_len: u64,
    /// Parks per second since the previous snapshot.
    pub parks_per_sec: Option<f64>,
    /// Processes it stole, in all.
    pub stolen: u64,
    /// Steps it ran, in all.
    pub steps: u64,
}

/// One group's row.
///
/// # Examples
///
/// ```
/// use sched::live::{GroupSnapshot, Snapshot};
///
/// let mut group = GroupSnapshot::default();
/// group.name = "web".into();
/// group.weight = 3;
/// group.busy_ns = Some(0);
/// let mut before = Snapshot::default();
/// before.groups.push(group);
/// let mut after = before.clone();
/// after.elapsed_ns = 1_000_000_000;
/// after.groups[0].busy_ns = Some(250_000_000);
/// let view = sched_top::view::view(Some(&before), &after);
/// assert_eq!(view.groups[0].name, "web");
/// assert_eq!(view.groups[0].weight, 3);
/// assert_eq!(view.groups[0].busy_pct, Some(100.0)); // the only group that ran
/// assert_eq!(view.groups[0].schedule_p99, None); // histograms off
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct GroupRow {
    /// Its name.
    pub name: String,
    /// Its weight now.
    pub weight: u32,
    /// Its processes ready to run now.
    pub ready: u64,
    /// Its share of all groups' step time since the previous snapshot, in
    /// percent; `None` without a previous snapshot, when the engine does
    /// not measure it (no declared groups), when the previous snapshot
    /// has no group of this name, when no step time passed, or when the
    /// counters went backwards (another engine behind the address).
    pub busy_pct: Option<f64>,
    /// The 99th percentile of its processes' schedule latency (from ready
    /// to the start of their step) since the engine started; `None` unless
    /// the engine records histograms and has declared groups.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use sched::live::{GroupSnapshot, HistogramSummary, Snapshot};
    ///
    /// let mut latency = HistogramSummary::default();
    /// latency.p99_ns = 2_000_000;
    /// let mut group = GroupSnapshot::default();
    /// group.name = "web".into();
    /// group.schedule_latency = Some(latency);
    /// let mut snapshot = Snapshot::default();
    /// snapshot.groups.push(group);
    /// let view = sched_top::view::view(None, &snapshot);
    /// assert_eq!(view.groups[0].schedule_p99, Some(Duration::from_millis(2)));
    /// ```
    pub schedule_p99: Option<Duration>,
}

/// One histogram's row.
///
/// # Examples
///
/// ```
/// let mut snapshot = sched::live::Snapshot::default();
/// snapshot.histograms = Some(vec![Default::default()]);
/// let view = sched_top::view::view(None, &snapshot);
/// assert_eq!(view.histograms.unwrap()[0].count, 0);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct HistogramRow {
    /// Which histogram (`step`, `timer_lateness`, ...).
    pub name: String,
    /// Values recorded.
    pub count: u64,
    /// Median.
    pub p50: Duration,
    /// 90th percentile.
    pub p90: Duration,
    /// 99th percentile.
    pub p99: Duration,
    /// Maximum.
    pub max: Duration,
}

/// A top list, or the reason there is none.
///
/// # Examples
///
/// ```
/// use sched_top::view::ProcessList;
///
/// let view = sched_top::view::view(None, &sched::live::Snapshot::default());
/// assert_eq!(view.by_mailbox, ProcessList::NotReported);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub enum ProcessList {
    /// The processes, first first.
    Rows(Vec<ProcessRow>),
    /// The engine does not report the figure this list ranks by.
    NotReported,
}

/// One process's row in a top list.
///
/// # Examples
///
/// ```
/// use sched_top::view::{ProcessList, view};
///
/// let mut snapshot = sched::live::Snapshot::default();
/// let mut entry = sched::live::ProcessEntry::default();
/// entry.names = vec!["backlog".into()];
/// snapshot.top_by_steps.push(entry);
/// let ProcessList::Rows(rows) = view(None, &snapshot).by_steps else { unreachable!() };
/// assert_eq!(rows[0].name, "backlog");
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessRow {
    /// Its PID.
    pub pid: String,
    /// Its registered names, else its type's short name, else `-`.
    pub name: String,
    /// Its state.
    pub state: String,
    /// Steps since it started.
    pub steps: u64,
    /// Steps per second since the previous snapshot.
    pub steps_per_sec: Option<f64>,
    /// Events in its mailbox, when reported.
    pub mailbox_depth: Option<u32>,
    /// Its long steps, when reported.
    pub long_steps: Option<u32>,
    /// Time since its last step, when reported.
    pub since_last_step: Option<Duration>,
}

/// What the screen shows for `current`, with rates over the time since
/// `previous` (which must come from the same connection: top-by-steps
/// counts are per connection). Without `previous`, or when the counters
/// went backwards (another engine behind the address), rates are `None`.
///
/// # Examples
///
/// ```
/// use sched::live::{Snapshot, WorkerSnapshot};
///
/// let mut before = Snapshot::default();
/// before.workers.push(WorkerSnapshot::default());
/// let mut after = before.clone();
/// after.elapsed_ns = 2_000_000_000; // two seconds later
/// after.workers[0].steps = 1000;
/// let view = sched_top::view::view(Some(&before), &after);
/// assert_eq!(view.workers[0].steps_per_sec, Some(500.0));
/// ```
pub fn view(previous: Option<&Snapshot>, current: &Snapshot) -> View {
    let seconds = previous
        .filter(|p| p.elapsed_ns < current.elapsed_ns)
        .map(|p| (p, (current.elapsed_ns - p.elapsed_ns) as f64 / 1e9));
    let rate = |now: u64, before: u64| -> Option<f64> {
        let (_, seconds) = seconds?;
        now.checked_sub(before).map(|d| d as f64 / seconds)
    };

    let workers: Vec<WorkerRow> = current
        .workers
        .iter()
        .enumerate()
        .map(|(index, w)| {
            let before = seconds.and_then(|(p, _)| p.workers.get(index));
            let busy_pct = match (before, w.busy_ns, before.and_then(|b| b.busy_ns)) {
                (Some(_), Some(now), Some(then)) => {
                    let (_, seconds) = seconds.expect("a previous snapshot");
                    now.checked_sub(then)
                        .map(|d| (d as f64 / 1e9 / seconds * 100.0).clamp(0.0, 100.0))
                }
                _ => None,
            };
            WorkerRow {
                index,
                busy_pct,
                steps_per_sec: before.and_then(|b| rate(w.steps, b.steps)),
                local_queue_len: w.local_queue_len,
                parks_per_sec: before.and_then(|b| rate(w.parks, b.parks)),
                stolen: w.stolen,
                steps: w.steps,
            }
        })
        .collect();

    let total = |s: &Snapshot| s.workers.iter().map(|w| w.steps).sum::<u64>();
    let steps_per_sec = seconds
        .filter(|(p, _)| p.workers.len() == current.workers.len())
        .and_then(|(p, _)| rate(total(current), total(p)));

    let header = Header {
        uptime: Duration::from_nanos(current.elapsed_ns),
        live_processes: current.live_processes,
        workers: current.workers.len(),
        parked_workers: current.parked_workers,
        global_queue_len: current.global_queue_len,
        pending_timers: current.pending_timers,
        dead_letters: current.dead_letters,
        long_steps: current.long_steps,
        steps_per_sec,
    };

    let groups = group_rows(seconds.map(|(p, _)| p), current);
    let figures = figure_groups(seconds, current);

    let histograms = current.histograms.as_ref().map(|all| {
        all.iter()
            .map(|h| HistogramRow {
                name: h.name.clone(),
                count: h.count,
                p50: Duration::from_nanos(h.p50_ns),
                p90: Duration::from_nanos(h.p90_ns),
                p99: Duration::from_nanos(h.p99_ns),
                max: Duration::from_nanos(h.max_ns),
            })
            .collect()
    });

    let row = |e: &ProcessEntry| ProcessRow {
        pid: e.pid.clone(),
        name: display_name(e),
        state: e.state.clone(),
        steps: e.steps,
        steps_per_sec: seconds.map(|(_, s)| e.recent_steps as f64 / s),
        mailbox_depth: e.mailbox_depth,
        long_steps: e.long_steps,
        since_last_step: e.since_last_step_ns.map(Duration::from_nanos),
    };
    let list = |reported: bool, entries: &[ProcessEntry]| {
        if reported {
            ProcessList::Rows(entries.iter().map(row).collect())
        } else {
            ProcessList::NotReported
        }
    };

    View {
        header,
        workers,
        groups,
        histograms,
        by_steps: list(true, &current.top_by_steps),
        by_mailbox: list(current.reports_mailbox_depth, &current.top_by_mailbox),
        by_long_steps: list(current.reports_long_steps, &current.top_by_long_steps),
        figures,
    }
}

/// The figures grouped by source, each counter with its rate over the
/// `seconds` since `previous` (matched by source and name).
fn figure_groups(previous: Option<(&Snapshot, f64)>, current: &Snapshot) -> Vec<FigureGroup> {
    let mut groups: Vec<FigureGroup> = Vec::new();
    for figure in &current.figures {
        let per_sec = match (figure.kind, previous) {
            (Kind::Counter, Some((previous, seconds))) => previous
                .figures
                .iter()
                .find(|b| {
                    b.source == figure.source
                        && b.name == figure.name
                        && b.kind == figure.kind
                        && b.unit == figure.unit
                })
                .map(|before| figure.value - before.value)
                .filter(|grew| grew.is_finite() && *grew >= 0.0)
                .map(|grew| grew / seconds),
            _ => None,
        };
        let row = FigureRow {
            name: figure.name.clone(),
            value: figure.value,
            unit: figure.unit,
            kind: figure.kind,
            per_sec,
        };
        match groups.iter_mut().find(|g| g.source == figure.source) {
            Some(group) => group.rows.push(row),
            None => groups.push(FigureGroup {
                source: figure.source.clone(),
                rows: vec![row],
            }),
        }
    }
    groups
}

/// The groups' rows, with each one's share of the step time all groups
/// had between `previous` (matched by name) and `current`.
fn group_rows(previous: Option<&Snapshot>, current: &Snapshot) -> Vec<GroupRow> {
    // Each group's step time since the previous snapshot, when both
    // measured it; `None` for a group absent from the previous one.
    let spent = |g: &GroupSnapshot| -> Option<Result<u64, ()>> {
        let before = previous?.groups.iter().find(|b| b.name == g.name)?;
        let (now, then) = (g.busy_ns?, before.busy_ns?);
        Some(now.checked_sub(then).ok_or(()))
    };
    let spent: Vec<Option<Result<u64, ()>>> = current.groups.iter().map(spent).collect();
    // A counter that went backwards is another engine: no shares at all.
    let restarted = spent.iter().any(|d| matches!(d, Some(Err(()))));
    let total: u64 = spent.iter().flatten().flatten().sum();
    current
        .groups
        .iter()
        .zip(&spent)
        .map(|(g, spent)| GroupRow {
            name: g.name.clone(),
            weight: g.weight,
            ready: g.ready,
            busy_pct: match spent {
                Some(Ok(d)) if !restarted && total > 0 => Some(*d as f64 / total as f64 * 100.0),
                _ => None,
            },
            schedule_p99: g
                .schedule_latency
                .as_ref()
                .map(|h| Duration::from_nanos(h.p99_ns)),
        })
        .collect()
}

/// A process's registered names, else the last segment of its type's
/// name (generics dropped), else `-`.
fn display_name(entry: &ProcessEntry) -> String {
    if !entry.names.is_empty() {
        return entry.names.join(",");
    }
    match &entry.type_name {
        Some(full) => {
            let base = full.split('<').next().unwrap_or(full);
            base.rsplit("::").next().unwrap_or(base).to_string()
        }
        None => "-".to_string(),
    }
}

/// A duration in the unit that keeps three significant digits or so:
/// `850ns`, `12.3µs`, `4.10ms`, `1.20s`.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use sched_top::view::duration;
///
/// assert_eq!(duration(Duration::from_nanos(850)), "850ns");
/// assert_eq!(duration(Duration::from_micros(12_345)), "12.3ms");
/// assert_eq!(duration(Duration::from_millis(1_200)), "1.20s");
/// ```
pub fn duration(d: Duration) -> String {
    let ns = d.as_nanos() as f64;
    let (value, unit) = if ns < 1e3 {
        return format!("{}ns", d.as_nanos());
    } else if ns < 1e6 {
        (ns / 1e3, "µs")
    } else if ns < 1e9 {
        (ns / 1e6, "ms")
    } else {
        (ns / 1e9, "s")
    };
    if value < 10.0 {
        format!("{value:.2}{unit}")
    } else if value < 100.0 {
        format!("{value:.1}{unit}")
    } else {
        format!("{value:.0}{unit}")
    }
}

/// `value` with about three significant digits and `unit` after it.
fn significant(value: f64, unit: &str) -> String {
    if value.abs() < 10.0 {
        format!("{value:.2}{unit}")
    } else if value.abs() < 100.0 {
        format!("{value:.1}{unit}")
    } else {
        format!("{value:.0}{unit}")
    }
}

/// A number of bytes in binary units, three significant digits or so:
/// `512B`, `1.50KiB`, `12.3MiB`; `-` for a value that is not finite.
///
/// # Examples
///
/// ```
/// use sched_top::view::bytes;
///
/// assert_eq!(bytes(512.0), "512B");
/// assert_eq!(bytes(1_536.0), "1.50KiB");
/// assert_eq!(bytes(3.0 * 1024.0 * 1024.0 * 1024.0), "3.00GiB");
/// ```
pub fn bytes(value: f64) -> String {
    if !value.is_finite() {
        return "-".to_string();
    }
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut scaled = value;
    let mut unit = 0;
    while scaled.abs() >= 1024.0 && unit < UNITS.len() - 1 {
        scaled /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{scaled:.0}B")
    } else {
        significant(scaled, UNITS[unit])
    }
}

/// A figure's value (or rate) as its [`Unit`] reads: a plain number
/// (whole numbers as they are, `k`/`M` past ten thousand, fractions to
/// three digits), bytes as [`bytes`], seconds as a [`duration`]; `-` for
/// a value that is not finite.
///
/// # Examples
///
/// ```
/// use sched::live::Unit;
/// use sched_top::view::quantity;
///
/// assert_eq!(quantity(1_204.0, Unit::Count), "1204");
/// assert_eq!(quantity(0.5, Unit::Count), "0.50");
/// assert_eq!(quantity(1_572_864.0, Unit::Bytes), "1.50MiB");
/// assert_eq!(quantity(0.0042, Unit::Seconds), "4.20ms");
/// assert_eq!(quantity(f64::NAN, Unit::Seconds), "-");
/// ```
pub fn quantity(value: f64, unit: Unit) -> String {
    if !value.is_finite() {
        return "-".to_string();
    }
    match unit {
        Unit::Bytes => bytes(value),
        Unit::Seconds => Duration::try_from_secs_f64(value)
            .map(duration)
            .unwrap_or_else(|_| significant(value, "s")),
        _ if value.abs() >= 10_000.0 && value > 0.0 => count(Some(value)),
        _ if value.fract() == 0.0 => format!("{value:.0}"),
        _ => significant(value, ""),
    }
}

/// A rate or count with a `k`/`M` suffix past ten thousand: `950`,
/// `12.5k`, `3.20M`; `-` for none.
///
/// # Examples
///
/// ```
/// use sched_top::view::count;
///
/// assert_eq!(count(Some(950.4)), "950");
/// assert_eq!(count(Some(12_500.0)), "12.5k");
/// assert_eq!(count(None), "-");
/// ```
pub fn count(value: Option<f64>) -> String {
    match value {
        None => "-".to_string(),
        Some(v) if v < 10_000.0 => format!("{v:.0}"),
        Some(v) if v < 1e6 => format!("{:.1}k", v / 1e3),
        Some(v) => format!("{:.2}M", v / 1e6),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sched::live::{Figure, GroupSnapshot, HistogramSummary, WorkerSnapshot};

    fn worker(steps: u64, parks: u64, busy_ns: Option<u64>) -> WorkerSnapshot {
        let mut w = WorkerSnapshot::default();
        w.steps = steps;
        w.parks = parks;
        w.busy_ns = busy_ns;
        w.local_queue_len = 3;
        w.stolen = 7;
        w
    }

    fn entry(pid: &str, name: &str, steps: u64, recent: u64) -> ProcessEntry {
        let mut e = ProcessEntry::default();
        e.pid = pid.into();
        if !name.is_empty() {
            e.names = vec![name.into()];
        }
        e.state = "idle".into();
        e.steps = steps;
        e.recent_steps = recent;
        e
    }

    fn group(name: &str, weight: u32, ready: u64, busy_ms: Option<u64>) -> GroupSnapshot {
        let mut g = GroupSnapshot::default();
        g.name = name.into();
        g.weight = weight;
        g.ready = ready;
        g.busy_ns = busy_ms.map(|ms| ms * 1_000_000);
        g
    }

    fn snapshot(elapsed_ms: u64, workers: Vec<WorkerSnapshot>) -> Snapshot {
        let mut s = Snapshot::default();
        s.version = sched::live::VERSION;
        s.elapsed_ns = elapsed_ms * 1_000_000;
        s.workers = workers;
        s
    }

    #[test]
    fn rates_come_from_the_difference_of_two_snapshots() {
        let before = snapshot(1_000, vec![worker(100, 10, Some(0)), worker(0, 0, Some(0))]);
        let mut after = snapshot(
            1_500,
            vec![
                worker(600, 12, Some(250_000_000)),
                worker(50, 0, Some(500_000_000)),
            ],
        );
        after.live_processes = 9;
        let view = view(Some(&before), &after);
        assert_eq!(view.workers[0].steps_per_sec, Some(1000.0));
        assert_eq!(view.workers[0].parks_per_sec, Some(4.0));
        assert_eq!(view.workers[0].busy_pct, Some(50.0));
        assert_eq!(view.workers[1].busy_pct, Some(100.0));
        assert_eq!(view.workers[1].steps_per_sec, Some(100.0));
        assert_eq!(view.workers[0].local_queue_len, 3);
        assert_eq!(view.workers[0].stolen, 7);
        assert_eq!(view.header.steps_per_sec, Some(1100.0));
        assert_eq!(view.header.live_processes, 9);
        assert_eq!(view.header.workers, 2);
        assert_eq!(view.header.uptime, Duration::from_millis(1_500));
    }

    #[test]
    fn the_first_snapshot_has_no_rates() {
        let only = snapshot(1_000, vec![worker(100, 10, Some(5))]);
        let view = view(None, &only);
        assert_eq!(view.workers[0].steps_per_sec, None);
        assert_eq!(view.workers[0].busy_pct, None);
        assert_eq!(view.header.steps_per_sec, None);
        assert_eq!(view.workers[0].steps, 100);
    }

    #[test]
    fn busy_is_none_when_the_engine_does_not_measure_it() {
        let before = snapshot(1_000, vec![worker(0, 0, None)]);
        let after = snapshot(2_000, vec![worker(10, 0, None)]);
        let view = view(Some(&before), &after);
        assert_eq!(view.workers[0].busy_pct, None);
        assert_eq!(view.workers[0].steps_per_sec, Some(10.0));
    }

    #[test]
    fn counters_going_backwards_or_time_standing_still_give_no_rate() {
        let before = snapshot(1_000, vec![worker(500, 5, Some(10))]);
        let restarted = snapshot(1_500, vec![worker(20, 1, Some(0))]);
        let view_after_restart = view(Some(&before), &restarted);
        assert_eq!(view_after_restart.workers[0].steps_per_sec, None);
        assert_eq!(view_after_restart.workers[0].busy_pct, None);
        assert_eq!(view_after_restart.header.steps_per_sec, None);
        let same_time = view(Some(&before), &before);
        assert_eq!(same_time.workers[0].steps_per_sec, None);
    }

    #[test]
    fn top_lists_keep_their_order_and_say_when_unreported() {
        let before = snapshot(0, vec![]);
        let mut after = snapshot(2_000, vec![]);
        after.top_by_steps = vec![entry("<0.3>", "hot", 900, 800), entry("<0.4>", "", 50, 40)];
        let view = view(Some(&before), &after);
        let ProcessList::Rows(rows) = &view.by_steps else {
            panic!("by steps is always reported")
        };
        assert_eq!(rows[0].name, "hot");
        assert_eq!(rows[0].steps_per_sec, Some(400.0));
        assert_eq!(rows[0].steps, 900);
        assert_eq!(rows[1].name, "-");
        assert_eq!(view.by_mailbox, ProcessList::NotReported);
        assert_eq!(view.by_long_steps, ProcessList::NotReported);

        let mut reported = after.clone();
        reported.reports_mailbox_depth = true;
        reported.reports_long_steps = true;
        let mut deep = entry("<0.9>", "backlog", 10, 0);
        deep.mailbox_depth = Some(4_000);
        deep.since_last_step_ns = Some(3_000_000);
        reported.top_by_mailbox = vec![deep];
        let view = super::view(None, &reported);
        let ProcessList::Rows(rows) = &view.by_mailbox else {
            panic!("reported")
        };
        assert_eq!(rows[0].mailbox_depth, Some(4_000));
        assert_eq!(rows[0].since_last_step, Some(Duration::from_millis(3)));
        assert_eq!(view.by_long_steps, ProcessList::Rows(vec![]));
    }

    #[test]
    fn a_nameless_process_shows_its_type() {
        let mut e = entry("<0.1>", "", 0, 0);
        e.type_name = Some("my_app::workers::Fetcher<my_app::Http>".into());
        assert_eq!(display_name(&e), "Fetcher");
        e.names = vec!["a".into(), "b".into()];
        assert_eq!(display_name(&e), "a,b");
    }

    #[test]
    fn group_shares_come_from_the_difference_of_two_snapshots() {
        let mut before = snapshot(1_000, vec![]);
        before.groups = vec![
            group("default", 1, 0, Some(50)),
            group("web", 3, 0, Some(100)),
            group("batch", 1, 0, Some(0)),
        ];
        let mut after = snapshot(2_000, vec![]);
        // Listed in another order: matched by name.
        after.groups = vec![
            group("default", 1, 2, Some(150)),
            group("batch", 1, 40, Some(300)),
            group("web", 5, 7, Some(700)),
        ];
        let view = view(Some(&before), &after);
        let rows: Vec<(&str, u32, u64, Option<f64>)> = view
            .groups
            .iter()
            .map(|g| (g.name.as_str(), g.weight, g.ready, g.busy_pct))
            .collect();
        // 100 + 300 + 600 ms of steps in all.
        assert_eq!(
            rows,
            [
                ("default", 1, 2, Some(10.0)),
                ("batch", 1, 40, Some(30.0)),
                ("web", 5, 7, Some(60.0)),
            ]
        );
    }

    #[test]
    fn group_shares_are_none_when_they_cannot_be_computed() {
        let shares = |view: &View| view.groups.iter().map(|g| g.busy_pct).collect::<Vec<_>>();
        let mut before = snapshot(1_000, vec![]);
        before.groups = vec![group("default", 1, 0, Some(0)), group("web", 2, 0, Some(0))];
        let mut after = snapshot(2_000, vec![]);
        after.groups = vec![
            group("default", 1, 0, Some(100)),
            group("web", 2, 0, Some(300)),
            group("late", 1, 0, Some(500)),
        ];

        // No previous snapshot; the rows are there all the same.
        let first = view(None, &after);
        assert_eq!(shares(&first), [None, None, None]);
        assert_eq!(first.groups[1].weight, 2);

        // A group the previous snapshot lacks has no share, nor counts in
        // the others'.
        assert_eq!(
            shares(&view(Some(&before), &after)),
            [Some(25.0), Some(75.0), None]
        );

        // No step time passed.
        assert_eq!(shares(&view(Some(&after), &after)), [None, None, None]);
        let mut idle = after.clone();
        idle.elapsed_ns += 1_000_000_000;
        assert_eq!(shares(&view(Some(&after), &idle)), [None, None, None]);

        // Unmeasured: the default group alone.
        let mut plain_before = snapshot(1_000, vec![]);
        plain_before.groups = vec![group("default", 1, 0, None)];
        let mut plain_after = snapshot(2_000, vec![]);
        plain_after.groups = vec![group("default", 1, 5, None)];
        let plain = view(Some(&plain_before), &plain_after);
        assert_eq!(shares(&plain), [None]);
        assert_eq!(plain.groups[0].ready, 5);

        // Counters going backwards: another engine.
        let mut restarted = snapshot(3_000, vec![]);
        restarted.groups = vec![
            group("default", 1, 0, Some(10)),
            group("web", 2, 0, Some(500)),
        ];
        assert_eq!(shares(&view(Some(&after), &restarted)), [None, None]);

        // A snapshot from an endpoint without groups.
        assert!(view(Some(&before), &snapshot(2_000, vec![]))
            .groups
            .is_empty());
    }

    #[test]
    fn histograms_are_kept_in_order_or_absent() {
        let mut s = snapshot(1, vec![]);
        assert_eq!(view(None, &s).histograms, None);
        let mut step = HistogramSummary::default();
        step.name = "step".into();
        step.count = 5;
        step.p50_ns = 1_000;
        step.max_ns = 40_000_000;
        s.histograms = Some(vec![step, HistogramSummary::default()]);
        let rows = view(None, &s).histograms.unwrap();
        assert_eq!(rows[0].name, "step");
        assert_eq!(rows[0].p50, Duration::from_micros(1));
        assert_eq!(rows[0].max, Duration::from_millis(40));
        assert_eq!(rows.len(), 2);
    }

    fn figure(source: &str, name: &str, value: f64, unit: Unit, counter: bool) -> Figure {
        if counter {
            Figure::counter(source, name, value, unit)
        } else {
            Figure::gauge(source, name, value, unit)
        }
    }

    #[test]
    fn figures_are_grouped_by_source_and_counters_get_a_rate() {
        let mut before = snapshot(1_000, vec![]);
        before.figures = vec![
            figure("journal", "records", 100.0, Unit::Count, true),
            figure("journal", "bytes", 1_000.0, Unit::Bytes, true),
            figure("journal", "running", 4.0, Unit::Count, false),
            figure("relay", "sent", 50.0, Unit::Count, true),
        ];
        let mut after = snapshot(1_500, vec![]);
        after.figures = vec![
            figure("journal", "records", 600.0, Unit::Count, true),
            figure("relay", "sent", 40.0, Unit::Count, true), // went backwards
            figure("journal", "bytes", 2_024.0, Unit::Bytes, true),
            figure("journal", "running", 9.0, Unit::Count, false),
            figure("journal", "syncs", 3.0, Unit::Count, true), // new
            figure("journal", "sync p99", f64::NAN, Unit::Seconds, false),
        ];
        let view = view(Some(&before), &after);
        type Rates<'a> = Vec<(&'a str, Option<f64>)>;
        let groups: Vec<(&str, Rates)> = view
            .figures
            .iter()
            .map(|g| {
                let rows = g.rows.iter().map(|r| (r.name.as_str(), r.per_sec));
                (g.source.as_str(), rows.collect())
            })
            .collect();
        assert_eq!(
            groups,
            [
                (
                    "journal",
                    vec![
                        ("records", Some(1_000.0)),
                        ("bytes", Some(2_048.0)),
                        ("running", None), // a gauge
                        ("syncs", None),
                        ("sync p99", None),
                    ]
                ),
                ("relay", vec![("sent", None)]),
            ]
        );
        assert!(view.figures[0].rows[4].value.is_nan());
        assert_eq!(view.figures[0].rows[2].kind, Kind::Gauge);

        // No rates from one snapshot; none at all from an endpoint
        // without figures.
        let first = super::view(None, &after);
        assert!(first.figures[0].rows.iter().all(|r| r.per_sec.is_none()));
        assert!(super::view(Some(&before), &snapshot(2_000, vec![]))
            .figures
            .is_empty());
    }

    #[test]
    fn quantities_read_as_their_unit() {
        assert_eq!(quantity(0.0, Unit::Count), "0");
        assert_eq!(quantity(-3.0, Unit::Count), "-3");
        assert_eq!(quantity(12.345, Unit::Count), "12.3");
        assert_eq!(quantity(2_500_000.0, Unit::Count), "2.50M");
        assert_eq!(quantity(1_023.0, Unit::Bytes), "1023B");
        assert_eq!(quantity(10.0 * 1024.0 * 1024.0, Unit::Bytes), "10.0MiB");
        assert_eq!(quantity(1.2, Unit::Seconds), "1.20s");
        assert_eq!(quantity(0.000_05, Unit::Seconds), "50.0µs");
        assert_eq!(quantity(-0.5, Unit::Seconds), "-0.50s");
        assert_eq!(quantity(f64::INFINITY, Unit::Bytes), "-");
        assert_eq!(bytes(f64::NAN), "-");
    }

    #[test]
    fn durations_and_counts_read_well() {
        assert_eq!(duration(Duration::ZERO), "0ns");
        assert_eq!(duration(Duration::from_nanos(999)), "999ns");
        assert_eq!(duration(Duration::from_nanos(1_500)), "1.50µs");
        assert_eq!(duration(Duration::from_nanos(163_839)), "164µs");
        assert_eq!(duration(Duration::from_millis(40)), "40.0ms");
        assert_eq!(duration(Duration::from_secs(120)), "120s");
        assert_eq!(count(Some(0.0)), "0");
        assert_eq!(count(Some(9_999.0)), "9999");
        assert_eq!(count(Some(2_500_000.0)), "2.50M");
    }
}
