//! Serves the scheduler's figures for Prometheus at
//! `http://127.0.0.1:9464/metrics` while a small load runs
//! (`cargo run -p sched --features metrics --example prometheus`): the
//! exporter is `metrics-exporter-prometheus`, the figures come through the
//! `metrics` facade (`sched::metrics`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use metrics_exporter_prometheus::PrometheusBuilder;
use sched::metrics::Publisher;
use sched::prelude::*;

/// Takes a thousand steps, then finishes.
struct Busy(u32);

impl Process for Busy {
    type Done = ();
    fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        self.0 += 1;
        if self.0 == 1_000 {
            out.finish(());
        } else {
            out.continue_();
        }
        Ok(())
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let address: SocketAddr = ([127, 0, 0, 1], 9464).into();
    PrometheusBuilder::new()
        .with_http_listener(address)
        .install()?;
    let scheduler = Arc::new(Scheduler::builder().workers(2).histograms(true).build());
    scheduler.start();
    let _publisher = Publisher::start(Arc::clone(&scheduler), Duration::from_millis(200));
    for _ in 0..20 {
        let load: Vec<Completion<()>> = (0..100)
            .map(|_| scheduler.spawn(Busy(0)))
            .collect::<Result<_, _>>()?;
        for done in load {
            done.wait()?;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    tracing::info!("scrape http://{address}/metrics");
    scheduler.shutdown(Duration::from_secs(5));
    Ok(())
}
