//! The transport's and the keyed processes' figures in the live view
//! (feature `live`): hand [`figures`] (source `"nats"`) and
//! [`sharding_figures`] (source `"keyed"`) to `sched::live::serve_with`,
//! and `sched-top` shows a panel for each beside the engine's, counters
//! with their rates.

use std::sync::Arc;

use sched::live::{Figure, Unit};

use crate::keyed::Sharding;
use crate::transport::NatsTransport;

#[allow(clippy::cast_precision_loss)]
fn n(value: u64) -> f64 {
    value as f64
}

/// The transport's counters (those of
/// [`TransportStats`](crate::TransportStats), named with spaces:
/// `"published"`, `"unconfirmed"`, ...), source `"nats"`. Nothing once
/// the transport is dropped.
///
/// # Examples
///
/// Serve both sources from one endpoint:
///
/// ```no_run
/// use std::sync::Arc;
/// # fn go(node: Arc<sched::Scheduler>, transport: Arc<relay_nats::NatsTransport>, sharding: Arc<relay_nats::Sharding>) -> std::io::Result<()> {
/// let nats = relay_nats::live::figures(&transport);
/// let keyed = relay_nats::live::sharding_figures(&sharding);
/// let endpoint = sched::live::serve_with(node, "127.0.0.1:7207", move || {
///     let mut all = nats();
///     all.extend(keyed());
///     all
/// })?;
/// # drop(endpoint);
/// # Ok(())
/// # }
/// ```
pub fn figures(transport: &Arc<NatsTransport>) -> impl Fn() -> Vec<Figure> + Send + Sync + 'static {
    let transport = Arc::downgrade(transport);
    move || {
        let Some(transport) = transport.upgrade() else {
            return Vec::new();
        };
        let stats = transport.stats();
        stats
            .named()
            .iter()
            .map(|&(name, value)| {
                Figure::counter("nats", name.replace('_', " "), n(value), Unit::Count)
            })
            .collect()
    }
}

/// This node's keyed processes, source `"keyed"`: the gauges `shards
/// held`, `keys live`, `buffered` and `largest shard` (the most keys one
/// shard runs here), and the counters of
/// [`ShardingStats`](crate::ShardingStats) (`started`, `hand offs`,
/// `fenced`, ...). Nothing once the sharding is dropped.
///
/// # Examples
///
/// See [`figures`].
pub fn sharding_figures(
    sharding: &Arc<Sharding>,
) -> impl Fn() -> Vec<Figure> + Send + Sync + 'static {
    let sharding = Arc::downgrade(sharding);
    move || {
        let Some(sharding) = sharding.upgrade() else {
            return Vec::new();
        };
        let stats = sharding.stats();
        let largest = sharding
            .shard_stats()
            .iter()
            .map(|s| s.keys_live)
            .max()
            .unwrap_or(0);
        let k = "keyed";
        let mut figures = vec![
            Figure::gauge(k, "shards held", n(stats.shards_held), Unit::Count),
            Figure::gauge(k, "keys live", n(stats.keys_live), Unit::Count),
            Figure::gauge(k, "buffered", n(stats.buffered), Unit::Count),
            Figure::gauge(k, "largest shard", n(largest), Unit::Count),
        ];
        figures.extend(stats.counters().iter().map(|&(name, value)| {
            Figure::counter(k, name.replace('_', " "), n(value), Unit::Count)
        }));
        figures
    }
}
