//! The scheduler's figures through the [`metrics`] facade (feature
//! `metrics`), so an application exports them with whichever recorder it
//! installs (Prometheus, StatsD, OpenTelemetry, ...).
//!
//! [`publish`] reads [`stats`](crate::Context::stats) and, when they are
//! on, [`histograms`](crate::Context::histograms) once, and sets:
//!
//! | name | kind | labels | what |
//! |---|---|---|---|
//! | `sched_live_processes` | gauge | | processes started and not ended |
//! | `sched_global_queue_length` | gauge | | processes in the global queues |
//! | `sched_parked_workers` | gauge | | workers asleep |
//! | `sched_pending_timers` | gauge | | timers set and not yet fired |
//! | `sched_dead_letters_total` | counter | | events no process could take |
//! | `sched_long_steps_total` | counter | | steps reported long while they ran |
//! | `sched_steps_total` | counter | `worker` | steps run |
//! | `sched_steals_total` | counter | `worker` | processes taken from other workers |
//! | `sched_parks_total` | counter | `worker` | times the worker slept |
//! | `sched_lingers_total` | counter | `worker` | idle spells in which the worker lingered before parking |
//! | `sched_completed_total` | counter | `worker` | processes the worker ended |
//! | `sched_local_queue_length` | gauge | `worker` | processes in its run queues |
//! | `sched_busy_microseconds_total` | counter | `worker` | time spent in steps, when histograms are on |
//! | `sched_group_weight` | gauge | `group` | the group's weight |
//! | `sched_group_ready` | gauge | `group` | its processes queued to run |
//! | `sched_group_busy_microseconds_total` | counter | `group` | step time of its processes (measured when groups are declared) |
//! | `sched_step_duration_seconds` | gauge | `quantile` (0.5, 0.9, 0.99, 1) | step durations, when histograms are on |
//! | `sched_step_duration_count` | counter | | steps in that histogram |
//! | `sched_timer_lateness_seconds` | gauge | `quantile` (0.5, 0.9, 0.99, 1) | how late timers fell due, when histograms are on |
//! | `sched_timer_lateness_count` | counter | | timers in that histogram |
//! | `sched_schedule_latency_seconds` | gauge | `quantile` (0.5, 0.9, 0.99, 1) | from ready to the start of its step, when histograms are on |
//! | `sched_schedule_latency_count` | counter | | steps in that histogram |
//! | `sched_yield_wait_seconds` | gauge | `quantile` (0.5, 0.9, 0.99, 1) | from a yielding step to the step that sees a completion, when histograms are on |
//! | `sched_yield_wait_count` | counter | | steps in that histogram |
//! | `sched_group_schedule_latency_seconds` | gauge | `group`, `quantile` (0.5, 0.9, 0.99, 1) | the schedule latency of the group's processes, when histograms are on and groups are declared |
//! | `sched_group_schedule_latency_count` | counter | `group` | steps in that group's histogram |
//!
//! Counters are set to the engine's totals (`absolute`), so publishing
//! twice counts nothing twice. Call [`publish`] from a timer, or let a
//! [`Publisher`] thread do it; it costs one `stats()` call (a read of each
//! worker's counters), never anything on the step path.

use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Publishes the scheduler's figures once through the installed `metrics`
/// recorder (see the module's table).
///
/// # Examples
///
/// ```
/// let scheduler = sched::Scheduler::builder().workers(1).build();
/// // With no recorder installed this does nothing, and costs little.
/// sched::metrics::publish(&scheduler);
/// ```
pub fn publish(cx: &impl sched_core::AsContext) {
    let cx = cx.context();
    let stats = cx.stats();
    let histograms = cx.histograms();
    let histograms_on = histograms.is_some();
    metrics::gauge!("sched_live_processes").set(stats.live_processes as f64);
    metrics::gauge!("sched_global_queue_length").set(stats.global_queue_len as f64);
    metrics::gauge!("sched_parked_workers").set(stats.parked_workers as f64);
    metrics::gauge!("sched_pending_timers").set(stats.pending_timers as f64);
    metrics::counter!("sched_dead_letters_total").absolute(stats.dead_letters);
    metrics::counter!("sched_long_steps_total").absolute(stats.long_steps);
    for (index, worker) in stats.workers.iter().enumerate() {
        let label = index.to_string();
        metrics::counter!("sched_steps_total", "worker" => label.clone()).absolute(worker.steps);
        metrics::counter!("sched_steals_total", "worker" => label.clone()).absolute(worker.stolen);
        metrics::counter!("sched_parks_total", "worker" => label.clone()).absolute(worker.parks);
        metrics::counter!("sched_lingers_total", "worker" => label.clone())
            .absolute(worker.lingers);
        metrics::counter!("sched_completed_total", "worker" => label.clone())
            .absolute(worker.completed);
        metrics::gauge!("sched_local_queue_length", "worker" => label.clone())
            .set(worker.local_queue_len as f64);
        if histograms_on {
            let busy = u64::try_from(worker.busy.as_micros()).unwrap_or(u64::MAX);
            metrics::counter!("sched_busy_microseconds_total", "worker" => label).absolute(busy);
        }
    }
    for group in cx.groups() {
        let label = group.name;
        metrics::gauge!("sched_group_weight", "group" => label.clone())
            .set(f64::from(group.weight));
        metrics::gauge!("sched_group_ready", "group" => label.clone()).set(group.ready as f64);
        let busy = u64::try_from(group.busy.as_micros()).unwrap_or(u64::MAX);
        metrics::counter!("sched_group_busy_microseconds_total", "group" => label).absolute(busy);
    }
    if let Some(histograms) = histograms {
        summary("sched_step_duration", &histograms.step);
        summary("sched_timer_lateness", &histograms.timer_lateness);
        summary("sched_schedule_latency", &histograms.schedule_latency);
        summary("sched_yield_wait", &histograms.yield_wait);
        // Empty unless the builder declared groups.
        if !histograms.schedule_latency_by_group.is_empty() {
            for group in cx.groups() {
                if let Some(latency) = histograms.group_schedule_latency(group.group) {
                    group_summary("sched_group_schedule_latency", group.name, latency);
                }
            }
        }
    }
}

/// A histogram as quantile gauges (`<name>_seconds{quantile}`) and a count
/// (`<name>_count`), the shape of a Prometheus summary.
fn summary(name: &'static str, histogram: &crate::stats::Histogram) {
    for (quantile, value) in [
        ("0.5", histogram.p50()),
        ("0.9", histogram.p90()),
        ("0.99", histogram.p99()),
        ("1", histogram.max()),
    ] {
        metrics::gauge!(format!("{name}_seconds"), "quantile" => quantile).set(value.as_secs_f64());
    }
    metrics::counter!(format!("{name}_count")).absolute(histogram.count());
}

/// [`summary`] of one group's histogram, labelled `group` as well.
fn group_summary(name: &'static str, group: String, histogram: &crate::stats::Histogram) {
    for (quantile, value) in [
        ("0.5", histogram.p50()),
        ("0.9", histogram.p90()),
        ("0.99", histogram.p99()),
        ("1", histogram.max()),
    ] {
        metrics::gauge!(format!("{name}_seconds"), "group" => group.clone(), "quantile" => quantile)
            .set(value.as_secs_f64());
    }
    metrics::counter!(format!("{name}_count"), "group" => group).absolute(histogram.count());
}

/// A thread that [`publish`]es a scheduler's figures every `every`, until
/// it is dropped (or the scheduler shuts down).
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// let scheduler = Arc::new(sched::Scheduler::builder().workers(1).build());
/// let publisher = sched::metrics::Publisher::start(Arc::clone(&scheduler), Duration::from_secs(1));
/// drop(publisher); // stops and joins the thread
/// ```
#[derive(Debug)]
pub struct Publisher {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Publisher {
    /// Starts the thread, which publishes at once and then every `every`.
    /// It holds `scheduler` (any [`AsContext`](sched_core::AsContext): a
    /// `Scheduler`, an `Engine`) in an `Arc`, so the engine lives as long
    /// as the thread publishes: a `Context` is only ever borrowed, and a
    /// borrow cannot cross into that thread.
    ///
    /// # Examples
    ///
    /// See [`Publisher`].
    pub fn start<S>(scheduler: Arc<S>, every: Duration) -> Publisher
    where
        S: sched_core::AsContext + Send + Sync + 'static,
    {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("sched-metrics".into())
            .spawn(move || {
                // Short sleeps, so that a drop does not wait a whole period.
                let tick = every.min(Duration::from_millis(50));
                let mut waited = every;
                while !flag.load(SeqCst) {
                    if waited >= every {
                        publish(scheduler.context());
                        waited = Duration::ZERO;
                    }
                    std::thread::sleep(tick);
                    waited += tick;
                }
            })
            .expect("spawn the metrics thread");
        Publisher {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Publisher {
    fn drop(&mut self) {
        self.stop.store(true, SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
