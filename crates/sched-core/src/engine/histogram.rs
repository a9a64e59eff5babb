//! Latency histograms: recorded per worker with no shared write (each
//! worker writes only its own buckets, with a load and a store, no
//! read-modify-write), merged when read.
//!
//! Buckets are log-linear: exact below 16 ns, then eight buckets per power
//! of two, so a value is known to within 12.5% (a quantile is reported as
//! its bucket's upper bound, never below the true value by more than
//! that). 496 buckets cover every `u64` of nanoseconds.

use std::fmt;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use super::stats::bump;
use crate::contract::group::Group;
use crate::sync::AtomicU64;

/// Buckets per histogram: 16 exact ones, then 8 per power of two from 2^4
/// to 2^63.
const BUCKETS: usize = 16 + 60 * 8;

/// The bucket of `nanos`.
fn bucket(nanos: u64) -> usize {
    if nanos < 16 {
        return nanos as usize;
    }
    let exponent = 63 - nanos.leading_zeros() as usize; // 4..=63
    let sub = ((nanos >> (exponent - 3)) & 7) as usize;
    16 + (exponent - 4) * 8 + sub
}

/// The largest value bucket `index` holds.
fn upper_bound(index: usize) -> u64 {
    if index < 16 {
        return index as u64;
    }
    let exponent = (index - 16) / 8 + 4;
    let sub = ((index - 16) % 8) as u64;
    let low = (8 + sub) << (exponent - 3);
    low.saturating_add((1u64 << (exponent - 3)) - 1)
}

/// One worker's histogram of one quantity.
pub(crate) struct Recorder {
    buckets: Box<[AtomicU64]>,
    max: AtomicU64,
    pub(super) sum: AtomicU64,
}

impl Recorder {
    pub(crate) fn new() -> Self {
        Recorder {
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            max: AtomicU64::new(0),
            sum: AtomicU64::new(0),
        }
    }

    /// Records one value. Only the owning worker calls this.
    #[inline]
    pub(crate) fn record(&self, value: Duration) {
        let nanos = u64::try_from(value.as_nanos()).unwrap_or(u64::MAX);
        bump(&self.buckets[bucket(nanos)], 1);
        bump(&self.sum, nanos);
        if nanos > self.max.load(Relaxed) {
            self.max.store(nanos, Relaxed);
        }
    }

    /// Adds this recorder's counts into `into`.
    fn merge_into(&self, into: &mut Histogram) {
        for (total, bucket) in into.counts.iter_mut().zip(self.buckets.iter()) {
            *total += bucket.load(Relaxed);
        }
        into.max = into.max.max(self.max.load(Relaxed));
        into.sum = into.sum.wrapping_add(self.sum.load(Relaxed));
    }
}

impl fmt::Debug for Recorder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Recorder").finish_non_exhaustive()
    }
}

/// One worker's histograms.
#[derive(Debug)]
pub(crate) struct WorkerHistograms {
    pub(crate) step: Recorder,
    pub(crate) timer_lateness: Recorder,
    pub(crate) schedule_latency: Recorder,
    /// The schedule latency again, one recorder per group, by group index:
    /// empty unless the builder declared groups (a recorder is about 4 KB,
    /// and an engine without groups records nothing more per step).
    pub(crate) schedule_latency_by_group: Box<[Recorder]>,
    pub(crate) yield_wait: Recorder,
}

impl WorkerHistograms {
    /// A worker's histograms for an engine of `groups` groups (counting
    /// the default one).
    pub(crate) fn new(groups: usize) -> Self {
        let by_group = if groups > 1 { groups } else { 0 };
        WorkerHistograms {
            step: Recorder::new(),
            timer_lateness: Recorder::new(),
            schedule_latency: Recorder::new(),
            schedule_latency_by_group: (0..by_group).map(|_| Recorder::new()).collect(),
            yield_wait: Recorder::new(),
        }
    }

    /// Records a schedule latency: in the overall histogram, and, when the
    /// engine has groups, in that of the process's group (the index
    /// `group` reads, which is not called without groups).
    #[inline]
    pub(crate) fn record_schedule_latency(&self, waited: Duration, group: impl FnOnce() -> usize) {
        self.schedule_latency.record(waited);
        if !self.schedule_latency_by_group.is_empty() {
            if let Some(recorder) = self.schedule_latency_by_group.get(group()) {
                recorder.record(waited);
            }
        }
    }

    /// The time this worker spent in steps (the step histogram's sum).
    pub(crate) fn busy(&self) -> Duration {
        Duration::from_nanos(self.step.sum.load(Relaxed))
    }
}

/// The engine's latency histograms, merged over its workers
/// ([`Context::histograms`](crate::Context::histograms)); recorded only when
/// the builder's `histograms(true)` turned them on.
///
/// # Examples
///
/// See [`Context::histograms`](crate::Context::histograms).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Histograms {
    /// How long each step ran: from the call of the process's `start` (on
    /// its first turn) or `step` to its return, one value per step.
    pub step: Histogram,
    /// How late each timer fell due: from its deadline (rounded up to the
    /// timer wheel's 100 µs tick) to the moment its worker delivered its
    /// event or message, one value per timer (wake-ups, delayed messages,
    /// ask timeouts, delayed completions). The wait of the woken process
    /// for a worker after that is not included.
    pub timer_lateness: Histogram,
    /// How long a process waited for a worker: from the moment it was made
    /// ready (a message or a timer woke it, it was spawned, or it asked to
    /// continue) to the start of its step, one value per step except the
    /// steps that end a wait on a yield (those are in `yield_wait`).
    /// Resolution about 1 µs; a wait over about 73 minutes is not
    /// recorded correctly.
    pub schedule_latency: Histogram,
    /// The schedule latency of each group's processes (as
    /// [`schedule_latency`](Histograms::schedule_latency), counting the
    /// steps of that group's processes only), in the order of
    /// [`Context::groups`](crate::Context::groups): the default group
    /// first, then the groups in the order the builder declared them. Empty
    /// unless the builder declared groups; then their counts add up to
    /// `schedule_latency`'s.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::process::Group;
    ///
    /// /// Finishes at its first step, in its tenant's group.
    /// struct Job { tenant: Group }
    /// impl Process for Job {
    ///     type Done = ();
    ///     fn init(&mut self, cx: &InitContext, _: &str, _: Payload) -> Result<(), InitError> {
    ///         cx.set_group(self.tenant);
    ///         Ok(())
    ///     }
    ///     fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
    ///         out.finish(());
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let scheduler = Scheduler::builder().workers(1).group("web", 3).histograms(true).build();
    /// scheduler.start();
    /// let web = scheduler.context().group("web").expect("declared");
    /// scheduler.spawn(Job { tenant: web })?.wait()?;
    /// let histograms = scheduler.context().histograms().expect("turned on");
    /// let groups: Vec<(Group, u64)> = histograms
    ///     .schedule_latency_by_group
    ///     .iter()
    ///     .map(|(group, latency)| (*group, latency.count()))
    ///     .collect();
    /// assert_eq!(groups, [(Group::DEFAULT, 0), (web, 1)]);
    /// # scheduler.shutdown(std::time::Duration::from_secs(1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub schedule_latency_by_group: Vec<(Group, Histogram)>,
    /// How long a process waited on its yields: from the end of a step
    /// that yielded commands to the start of the step that sees a
    /// completion (the command's own time plus the wait for a worker), one
    /// value per such step. Resolution about 1 µs; a wait over about 73
    /// minutes is not recorded correctly.
    pub yield_wait: Histogram,
}

impl Histograms {
    pub(crate) fn merge<'a>(workers: impl Iterator<Item = &'a WorkerHistograms>) -> Self {
        let mut step = Histogram::empty();
        let mut timer_lateness = Histogram::empty();
        let mut schedule_latency = Histogram::empty();
        let mut schedule_latency_by_group: Vec<(Group, Histogram)> = Vec::new();
        let mut yield_wait = Histogram::empty();
        for worker in workers {
            worker.step.merge_into(&mut step);
            worker.timer_lateness.merge_into(&mut timer_lateness);
            worker.schedule_latency.merge_into(&mut schedule_latency);
            let by_group = &worker.schedule_latency_by_group;
            if schedule_latency_by_group.len() < by_group.len() {
                schedule_latency_by_group = (0..by_group.len())
                    .map(|index| (Group::from_index(index), Histogram::empty()))
                    .collect();
            }
            for ((_, total), recorder) in schedule_latency_by_group.iter_mut().zip(by_group.iter())
            {
                recorder.merge_into(total);
            }
            worker.yield_wait.merge_into(&mut yield_wait);
        }
        Histograms {
            step,
            timer_lateness,
            schedule_latency,
            schedule_latency_by_group,
            yield_wait,
        }
    }

    /// The schedule latency of `group`'s processes (its entry in
    /// [`schedule_latency_by_group`](Histograms::schedule_latency_by_group)):
    /// `None` for an engine without declared groups, or a group it does
    /// not have.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    ///
    /// /// Finishes at its first step.
    /// struct Once;
    /// impl Process for Once {
    ///     type Done = ();
    ///     fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
    ///         out.finish(());
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let scheduler = Scheduler::builder().workers(1).group("web", 3).histograms(true).build();
    /// scheduler.start();
    /// // Spawned from outside a step, it joins the default group.
    /// scheduler.spawn(Once)?.wait()?;
    /// let web = scheduler.context().group("web").expect("declared");
    /// let histograms = scheduler.context().histograms().expect("turned on");
    /// let default = sched::process::Group::DEFAULT;
    /// assert_eq!(histograms.group_schedule_latency(default).map(|h| h.count()), Some(1));
    /// assert_eq!(histograms.group_schedule_latency(web).map(|h| h.count()), Some(0));
    ///
    /// // Without declared groups, no group has a histogram of its own.
    /// let plain = Scheduler::builder().workers(1).histograms(true).build();
    /// let histograms = plain.context().histograms().expect("turned on");
    /// assert!(histograms.group_schedule_latency(default).is_none());
    /// # scheduler.shutdown(std::time::Duration::from_secs(1));
    /// # plain.shutdown(std::time::Duration::from_secs(1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn group_schedule_latency(&self, group: Group) -> Option<&Histogram> {
        self.schedule_latency_by_group
            .get(group.index())
            .map(|(_, histogram)| histogram)
    }
}

/// A histogram of durations, merged over the workers: the count, the
/// largest value, and quantiles to within 12.5%.
///
/// # Examples
///
/// See [`Context::histograms`](crate::Context::histograms).
#[derive(Clone)]
pub struct Histogram {
    counts: Vec<u64>,
    max: u64,
    sum: u64,
}

impl Histogram {
    fn empty() -> Self {
        Histogram {
            counts: vec![0; BUCKETS],
            max: 0,
            sum: 0,
        }
    }

    /// How many values were recorded.
    ///
    /// # Examples
    ///
    /// See [`Context::histograms`](crate::Context::histograms).
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The largest value recorded (exact).
    ///
    /// # Examples
    ///
    /// See [`Context::histograms`](crate::Context::histograms).
    pub fn max(&self) -> Duration {
        Duration::from_nanos(self.max)
    }

    /// The mean of the values recorded (exact up to rounding).
    ///
    /// # Examples
    ///
    /// See [`Context::histograms`](crate::Context::histograms).
    pub fn mean(&self) -> Duration {
        match self.count() {
            0 => Duration::ZERO,
            n => Duration::from_nanos(self.sum / n),
        }
    }

    /// The value below which a fraction `q` (0.0 to 1.0) of the values
    /// lie: the upper bound of the bucket that holds it, capped at the
    /// largest value. Zero for an empty histogram.
    ///
    /// # Examples
    ///
    /// See [`Context::histograms`](crate::Context::histograms).
    pub fn quantile(&self, q: f64) -> Duration {
        let count = self.count();
        if count == 0 {
            return Duration::ZERO;
        }
        let rank = ((q.clamp(0.0, 1.0) * count as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (index, &n) in self.counts.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return Duration::from_nanos(upper_bound(index).min(self.max));
            }
        }
        Duration::from_nanos(self.max)
    }

    /// The median ([`quantile`](Histogram::quantile) of 0.5).
    ///
    /// # Examples
    ///
    /// See [`Context::histograms`](crate::Context::histograms).
    pub fn p50(&self) -> Duration {
        self.quantile(0.5)
    }

    /// The 90th percentile.
    ///
    /// # Examples
    ///
    /// See [`Context::histograms`](crate::Context::histograms).
    pub fn p90(&self) -> Duration {
        self.quantile(0.9)
    }

    /// The 99th percentile.
    ///
    /// # Examples
    ///
    /// See [`Context::histograms`](crate::Context::histograms).
    pub fn p99(&self) -> Duration {
        self.quantile(0.99)
    }
}

impl fmt::Debug for Histogram {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Histogram")
            .field("count", &self.count())
            .field("p50", &self.p50())
            .field("p99", &self.p99())
            .field("max", &self.max())
            .finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn every_value_falls_in_a_bucket_whose_bounds_hold_it() {
        let mut values: Vec<u64> = (0..2_000).collect();
        values.extend((4..64).flat_map(|e| {
            let p = 1u64 << e;
            [p - 1, p, p + 1, p + p / 3]
        }));
        values.push(u64::MAX);
        for v in values {
            let i = bucket(v);
            assert!(i < BUCKETS, "{v}");
            assert!(v <= upper_bound(i), "{v} above bucket {i}");
            if i > 0 {
                assert!(v > upper_bound(i - 1), "{v} below bucket {i}");
            }
            // Within 12.5% above.
            assert!(upper_bound(i) - v <= v / 8 + 1, "{v}: {}", upper_bound(i));
        }
    }

    #[test]
    fn quantiles_count_and_max_of_a_known_series() {
        let recorder = Recorder::new();
        for micros in 1..=1000u64 {
            recorder.record(Duration::from_micros(micros));
        }
        let mut h = Histogram::empty();
        recorder.merge_into(&mut h);
        assert_eq!(h.count(), 1000);
        assert_eq!(h.max(), Duration::from_micros(1000));
        assert_eq!(h.mean(), Duration::from_nanos(500_500));
        for (q, exact) in [(0.5, 500u64), (0.9, 900), (0.99, 990), (1.0, 1000)] {
            let got = h.quantile(q).as_nanos() as u64;
            let exact = exact * 1000;
            assert!(
                got >= exact && got <= exact + exact / 8,
                "q {q}: {got} vs {exact}"
            );
        }
        assert_eq!(Histogram::empty().p99(), Duration::ZERO);
    }

    #[test]
    fn a_group_s_schedule_latency_is_kept_only_when_there_are_groups() {
        // The default group alone: no recorder per group, none reported.
        let alone = WorkerHistograms::new(1);
        assert!(alone.schedule_latency_by_group.is_empty());
        alone.record_schedule_latency(Duration::from_micros(5), || unreachable!("not read"));
        let merged = Histograms::merge([&alone].into_iter());
        assert_eq!(merged.schedule_latency.count(), 1);
        assert!(merged.schedule_latency_by_group.is_empty());
        assert!(merged.group_schedule_latency(Group::DEFAULT).is_none());

        // Three groups on two workers: each value in its group and in
        // the overall histogram, merged per group.
        let workers = [WorkerHistograms::new(3), WorkerHistograms::new(3)];
        for (worker, group, micros) in [(0, 2, 7), (1, 2, 9), (1, 0, 3), (0, 2, 1)] {
            workers[worker].record_schedule_latency(Duration::from_micros(micros), || group);
        }
        let merged = Histograms::merge(workers.iter());
        let counts: Vec<(usize, u64)> = merged
            .schedule_latency_by_group
            .iter()
            .map(|(group, h)| (group.index(), h.count()))
            .collect();
        assert_eq!(counts, [(0, 1), (1, 0), (2, 3)]);
        assert_eq!(merged.schedule_latency.count(), 4);
        let third = merged.group_schedule_latency(Group::from_index(2)).unwrap();
        assert_eq!(third.max(), Duration::from_micros(9));
        assert!(merged
            .group_schedule_latency(Group::from_index(3))
            .is_none());
    }
}
