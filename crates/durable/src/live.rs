//! The journal's figures in the live view (feature `live`): hand
//! [`figures`] to `sched::live::serve_with`, and `sched-top` shows a
//! "journal" panel beside the engine's.

use std::sync::Arc;

use sched::live::{Figure, Unit};

use crate::Durability;

/// The journal's figures, for `sched::live::serve_with`: records, bytes
/// and syncs written (counters, so `sched-top` shows their rates), the
/// sync and step-to-durable latencies (p99 and max), running durable
/// processes, copies dropped, sends no process took, and the store's
/// size. Their source is `"journal"`.
///
/// # Examples
///
/// ```
/// use sched_durable::prelude::*;
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// let dir = tempfile::tempdir()?;
/// let durability = Arc::new(Durability::open(RedbStore::create(dir.path().join("j.redb"))?));
/// let scheduler = Arc::new(durability.install(Scheduler::builder().workers(1)).build());
/// scheduler.start();
/// let endpoint = sched::live::serve_with(
///     Arc::clone(&scheduler),
///     "127.0.0.1:0",
///     sched_durable::live::figures(&durability),
/// )?;
/// let mut client = sched::live::Client::connect(endpoint.local_addr(), Duration::from_secs(5))?;
/// let snapshot = client.snapshot(10)?;
/// assert!(snapshot.figures.iter().any(|f| f.source == "journal" && f.name == "records"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn figures(durability: &Arc<Durability>) -> impl Fn() -> Vec<Figure> + Send + Sync + 'static {
    let durability = Arc::downgrade(durability);
    move || {
        // The endpoint may outlive the journal: then it has no figures.
        let Some(durability) = durability.upgrade() else {
            return Vec::new();
        };
        let s = durability.stats();
        #[allow(clippy::cast_precision_loss)]
        let n = |v: u64| v as f64;
        let j = "journal";
        vec![
            Figure::counter(j, "records", n(s.records), Unit::Count),
            Figure::counter(j, "bytes", n(s.bytes), Unit::Bytes),
            Figure::counter(j, "syncs", n(s.syncs), Unit::Count),
            Figure::counter(j, "failed syncs", n(s.failed_syncs), Unit::Count),
            Figure::gauge(j, "sync p99", s.sync_p99.as_secs_f64(), Unit::Seconds),
            Figure::gauge(j, "sync max", s.sync_max.as_secs_f64(), Unit::Seconds),
            Figure::gauge(
                j,
                "step to durable p99",
                s.durable_p99.as_secs_f64(),
                Unit::Seconds,
            ),
            Figure::gauge(
                j,
                "step to durable max",
                s.durable_max.as_secs_f64(),
                Unit::Seconds,
            ),
            Figure::gauge(j, "running", n(s.running), Unit::Count),
            Figure::counter(j, "copies dropped", n(s.duplicates), Unit::Count),
            Figure::counter(j, "undelivered", n(s.undelivered), Unit::Count),
            Figure::counter(j, "stand-in drops", n(s.stand_in_dropped), Unit::Count),
            Figure::gauge(j, "held", n(s.held), Unit::Count),
            Figure::gauge(j, "store size", n(s.store_bytes), Unit::Bytes),
        ]
    }
}
