//! The journal's figures, rendered by a real Prometheus recorder.

mod support;

use std::sync::Arc;
use std::time::Duration;

use metrics_exporter_prometheus::PrometheusBuilder;
use sched_durable::prelude::*;
use support::*;

#[test]
fn the_journals_figures_reach_the_installed_recorder() {
    let dir = tempfile::tempdir().unwrap();
    let durability = Durability::open(RedbStore::create(dir.path().join("j.redb")).unwrap());
    durability.register::<Tally>();
    let scheduler = scheduler(&durability, Arc::default());
    let tally = durability.spawn::<Tally>(&scheduler, "t", ()).unwrap();
    durability
        .send::<Tally>(&scheduler, "t", &5)
        .unwrap()
        .wait_timeout(WAIT)
        .unwrap();
    durability.send::<Tally>(&scheduler, "t", &0).unwrap();
    assert_eq!(tally.wait().unwrap(), 5);
    let stats = durability.stats();

    let recorder = PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    metrics::with_local_recorder(&recorder, || sched_durable::metrics::publish(&durability));
    let text = handle.render();
    let value = |name: &str| -> f64 {
        text.lines()
            .find(|l| l.starts_with(name) && !l.starts_with('#'))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{name} missing from:\n{text}"))
    };
    assert_eq!(value("sched_durable_records_total"), stats.records as f64);
    assert!(value("sched_durable_records_total") >= 3.0);
    assert_eq!(value("sched_durable_syncs_total"), stats.syncs as f64);
    assert_eq!(value("sched_durable_bytes_total"), stats.bytes as f64);
    assert!(value("sched_durable_store_bytes") > 0.0);
    assert_eq!(value("sched_durable_running"), 0.0, "the tally ended");
    assert_eq!(value("sched_durable_held"), 0.0, "nothing waits for a gap");
    assert!(
        text.contains("sched_durable_sync_seconds{quantile=\"0.99\"}"),
        "{text}"
    );
    assert!(value("sched_durable_step_to_durable_seconds{quantile=\"1\"}") > 0.0);
    scheduler.shutdown(Duration::from_secs(5));
}
