//! The journal's figures through the [`metrics`] facade (feature
//! `metrics`), beside the scheduler's own (`sched::metrics`).
//!
//! [`publish`] reads [`Durability::stats`] once and sets:
//!
//! | name | kind | labels | what |
//! |---|---|---|---|
//! | `sched_durable_records_total` | counter | | records written |
//! | `sched_durable_bytes_total` | counter | | record bytes written |
//! | `sched_durable_syncs_total` | counter | | batches written, one sync each |
//! | `sched_durable_failed_syncs_total` | counter | | batches the store refused |
//! | `sched_durable_duplicates_total` | counter | | copies of sends dropped by their receivers |
//! | `sched_durable_undelivered_total` | counter | | sends released while their receiver did not run here (the outbox keeps them) |
//! | `sched_durable_stand_in_dropped_total` | counter | | messages stand-ins took and dropped (wrong type, not encodable, or refused by the store for good) |
//! | `sched_durable_held` | gauge | | sends receivers hold for an earlier send of the same sender |
//! | `sched_durable_running` | gauge | | durable processes running |
//! | `sched_durable_store_bytes` | gauge | | the store's size |
//! | `sched_durable_sync_seconds` | gauge | `quantile` (0.5, 0.99, 1) | time of one batch's write and sync |
//! | `sched_durable_step_to_durable_seconds` | gauge | `quantile` (0.5, 0.99, 1) | from a step to its record's durability |
//!
//! Call it as often as the exporter scrapes (every few seconds).

use crate::Durability;

/// Publishes `durability`'s figures through the installed `metrics`
/// recorder (see the [module](self) for the names).
///
/// # Examples
///
/// ```
/// use sched_durable::prelude::*;
///
/// let dir = tempfile::tempdir()?;
/// let durability = Durability::open(RedbStore::create(dir.path().join("j.redb"))?);
/// sched_durable::metrics::publish(&durability); // to whatever recorder is installed
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn publish(durability: &Durability) {
    let stats = durability.stats();
    metrics::counter!("sched_durable_records_total").absolute(stats.records);
    metrics::counter!("sched_durable_bytes_total").absolute(stats.bytes);
    metrics::counter!("sched_durable_syncs_total").absolute(stats.syncs);
    metrics::counter!("sched_durable_failed_syncs_total").absolute(stats.failed_syncs);
    metrics::counter!("sched_durable_duplicates_total").absolute(stats.duplicates);
    metrics::counter!("sched_durable_undelivered_total").absolute(stats.undelivered);
    metrics::counter!("sched_durable_stand_in_dropped_total").absolute(stats.stand_in_dropped);
    #[allow(clippy::cast_precision_loss)]
    {
        metrics::gauge!("sched_durable_held").set(stats.held as f64);
        metrics::gauge!("sched_durable_running").set(stats.running as f64);
        metrics::gauge!("sched_durable_store_bytes").set(stats.store_bytes as f64);
    }
    for (quantile, sync, durable) in [
        ("0.5", stats.sync_p50, stats.durable_p50),
        ("0.99", stats.sync_p99, stats.durable_p99),
        ("1", stats.sync_max, stats.durable_max),
    ] {
        metrics::gauge!("sched_durable_sync_seconds", "quantile" => quantile)
            .set(sync.as_secs_f64());
        metrics::gauge!("sched_durable_step_to_durable_seconds", "quantile" => quantile)
            .set(durable.as_secs_f64());
    }
}
