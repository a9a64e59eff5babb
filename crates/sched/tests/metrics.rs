//! The figures published through the `metrics` facade, served by a real
//! Prometheus exporter on loopback, scraped over HTTP with a real client
//! and parsed with a Prometheus text parser: the names are there, and the
//! step counters add up to the steps the scheduler took.

use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::time::{Duration, Instant};

use metrics_exporter_prometheus::PrometheusBuilder;
use sched::metrics::Publisher;
use sched::prelude::*;
use sched::process::Group;

/// Takes `0` steps, then finishes; in group `1`.
struct Steps(u32, Group);

impl Process for Steps {
    type Done = Payload;
    fn init(&mut self, cx: &InitContext, _: &str, _: Payload) -> Result<(), InitError> {
        cx.set_group(self.1);
        Ok(())
    }

    fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        self.0 -= 1;
        if self.0 == 0 {
            out.finish(());
        } else {
            out.continue_();
        }
        Ok(())
    }
}

fn free_port() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap()
}

fn scrape(address: SocketAddr) -> prometheus_parse::Scrape {
    let body = ureq::get(&format!("http://{address}/metrics"))
        .call()
        .expect("the exporter answers")
        .into_body()
        .read_to_string()
        .expect("a text body");
    let lines = body.lines().map(|line| Ok(line.to_owned()));
    prometheus_parse::Scrape::parse(lines).expect("valid exposition text")
}

fn value(scrape: &prometheus_parse::Scrape, name: &str) -> Vec<f64> {
    scrape
        .samples
        .iter()
        .filter(|s| s.metric == name)
        .map(number)
        .collect()
}

/// A sample's value as a number (`NAN` for a histogram or a summary).
fn number(sample: &prometheus_parse::Sample) -> f64 {
    match sample.value {
        prometheus_parse::Value::Counter(v)
        | prometheus_parse::Value::Gauge(v)
        | prometheus_parse::Value::Untyped(v) => v,
        _ => f64::NAN,
    }
}

#[test]
fn the_scraped_figures_parse_and_count_the_steps() {
    let address = free_port();
    PrometheusBuilder::new()
        .with_http_listener(address)
        .install()
        .expect("the exporter starts");
    let scheduler = Arc::new(
        Scheduler::builder()
            .workers(2)
            .histograms(true)
            .group("batch", 2)
            .build(),
    );
    scheduler.start();
    let batch = scheduler.context().group("batch").expect("declared");
    // Half in the default group, half in `batch`.
    let runs: Vec<Completion> = (0..100)
        .map(|i| {
            let group = if i % 2 == 0 { Group::DEFAULT } else { batch };
            scheduler.spawn(Steps(50, group)).unwrap()
        })
        .collect();
    for done in runs {
        done.wait().unwrap();
    }
    let publisher = Publisher::start(Arc::clone(&scheduler), Duration::from_millis(20));

    // The exporter's listener starts on its own thread: retry a while.
    let deadline = Instant::now() + Duration::from_secs(10);
    let scrape = loop {
        let scrape = std::panic::catch_unwind(|| scrape(address));
        if let Ok(scrape) = scrape {
            // A scrape may catch the first publish halfway, and not in the
            // order it set its figures (the exporter reads its registry in
            // shards): it is whole once it has every figure checked below.
            // The work has ended, so every publish sets the same values.
            // (Each label set is a figure of its own: every worker's, every
            // quantile's.)
            let whole = [
                ("sched_steps_total", 2),
                ("sched_live_processes", 1),
                ("sched_step_duration_count", 1),
                ("sched_step_duration_seconds", 4),
                ("sched_timer_lateness_seconds", 4),
                ("sched_timer_lateness_count", 1),
                ("sched_schedule_latency_count", 1),
                ("sched_schedule_latency_seconds", 4),
                ("sched_yield_wait_count", 1),
                ("sched_busy_microseconds_total", 2),
                ("sched_dead_letters_total", 1),
                ("sched_parked_workers", 1),
                ("sched_pending_timers", 1),
                ("sched_group_weight", 2),
                ("sched_group_ready", 2),
                ("sched_group_busy_microseconds_total", 2),
                ("sched_group_schedule_latency_seconds", 8),
                ("sched_group_schedule_latency_count", 2),
            ]
            .iter()
            .all(|(name, figures)| value(&scrape, name).len() == *figures);
            if whole && value(&scrape, "sched_steps_total").iter().sum::<f64>() >= 5_000.0 {
                break scrape;
            }
        }
        assert!(Instant::now() < deadline, "no figures scraped");
        std::thread::sleep(Duration::from_millis(20));
    };
    drop(publisher);

    let steps: f64 = value(&scrape, "sched_steps_total").iter().sum();
    assert_eq!(steps, 5_000.0, "one per step, summed over the workers");
    assert_eq!(
        value(&scrape, "sched_steps_total").len(),
        2,
        "one per worker"
    );
    assert_eq!(value(&scrape, "sched_live_processes"), [0.0]);
    assert_eq!(value(&scrape, "sched_step_duration_count"), [5_000.0]);
    let quantiles = value(&scrape, "sched_step_duration_seconds");
    assert_eq!(quantiles.len(), 4);
    assert_eq!(value(&scrape, "sched_timer_lateness_seconds").len(), 4);
    assert_eq!(
        value(&scrape, "sched_timer_lateness_count"),
        [0.0],
        "no timers set"
    );
    assert!(
        quantiles.iter().all(|q| *q > 0.0 && *q < 1.0),
        "{quantiles:?}"
    );
    // Steps that continue are made ready again: each is a schedule
    // latency; none waited on a yield.
    assert_eq!(value(&scrape, "sched_schedule_latency_count"), [5_000.0]);
    assert_eq!(value(&scrape, "sched_schedule_latency_seconds").len(), 4);
    assert_eq!(value(&scrape, "sched_yield_wait_count"), [0.0]);
    let busy = value(&scrape, "sched_busy_microseconds_total");
    assert_eq!(busy.len(), 2, "one per worker");
    assert!(busy.iter().sum::<f64>() > 0.0, "{busy:?}");
    // One figure per group: its weight, nothing ready (all ended), and
    // step time in each (the groups are declared, so it is measured).
    let weights = value(&scrape, "sched_group_weight");
    assert_eq!(weights.iter().sum::<f64>(), 3.0, "{weights:?}");
    assert_eq!(value(&scrape, "sched_group_ready"), [0.0, 0.0]);
    let group_busy = value(&scrape, "sched_group_busy_microseconds_total");
    assert!(group_busy.iter().all(|&b| b > 0.0), "{group_busy:?}");
    // Each group's schedule latency, labelled with its name: every
    // quantile of both groups, and the steps of each group's processes
    // (50 processes of 50 steps each).
    let by_group = |name: &str, group: &str| -> Vec<f64> {
        scrape
            .samples
            .iter()
            .filter(|s| s.metric == name && s.labels.get("group") == Some(group))
            .map(number)
            .collect()
    };
    for group in ["default", "batch"] {
        assert_eq!(
            by_group("sched_group_schedule_latency_count", group),
            [2_500.0],
            "{group}"
        );
        let quantiles = by_group("sched_group_schedule_latency_seconds", group);
        assert_eq!(quantiles.len(), 4, "{group}: {quantiles:?}");
        assert!(
            quantiles.iter().all(|q| *q >= 0.0 && *q < 10.0),
            "{group}: {quantiles:?}"
        );
    }
    for name in [
        "sched_dead_letters_total",
        "sched_parked_workers",
        "sched_pending_timers",
    ] {
        assert_eq!(value(&scrape, name).len(), 1, "{name}");
    }
    scheduler.shutdown(Duration::from_secs(5));
}
