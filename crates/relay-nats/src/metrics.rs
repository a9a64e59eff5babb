//! The transport's and the keyed processes' figures through the
//! [`metrics`] facade (feature `metrics`), beside the scheduler's own
//! (`sched::metrics`).
//!
//! [`publish`] reads [`NatsTransport::stats`] once and sets, for each of
//! its counters, `relay_nats_<counter>_total` (`relay_nats_published_total`,
//! `relay_nats_unconfirmed_total`, ...: the field names of
//! [`TransportStats`](crate::TransportStats)).
//!
//! [`publish_sharding`] reads [`Sharding::stats`] and
//! [`Sharding::shard_stats`] once and sets:
//!
//! | name | kind | labels | what |
//! |---|---|---|---|
//! | `relay_nats_keyed_<counter>_total` | counter | | each counter of [`ShardingStats`](crate::ShardingStats): `started`, `passivated`, `claims`, `hand_offs`, `shards_lost`, `forwarded`, `refused`, `fenced`, `fenced_processes`, `handed_back` |
//! | `relay_nats_keyed_buffered` | gauge | | messages waiting for their shard's holder or their key's stopping process |
//! | `relay_nats_keyed_shards_held` | gauge | `kind` | shards of the kind this node holds |
//! | `relay_nats_keyed_keys_live` | gauge | `kind` | keys of the kind with a process here |
//! | `relay_nats_keyed_shard_keys` | gauge | `kind`, `shard` | keys of each shard with a process here (0 for a shard held elsewhere) |
//! | `relay_nats_keyed_shard_held` | gauge | `kind`, `shard` | 1 if this node holds the shard, else 0 |
//!
//! Counters are set to the totals (`absolute`), so publishing twice counts
//! nothing twice. Call them as often as the exporter scrapes: each costs a
//! read of the counters, and `publish_sharding` a lock of each shard in
//! turn.

use crate::keyed::Sharding;
use crate::transport::NatsTransport;

/// Publishes `transport`'s counters through the installed `metrics`
/// recorder (see the [module](self) for the names).
///
/// # Examples
///
/// ```no_run
/// # fn go(transport: &relay_nats::NatsTransport) {
/// relay_nats::metrics::publish(transport); // to whatever recorder is installed
/// # }
/// ```
pub fn publish(transport: &NatsTransport) {
    for (name, value) in transport.stats().named() {
        metrics::counter!(format!("relay_nats_{name}_total")).absolute(value);
    }
}

/// Publishes this node's keyed processes through the installed `metrics`
/// recorder (see the [module](self) for the names).
///
/// # Examples
///
/// ```no_run
/// # fn go(sharding: &relay_nats::Sharding) {
/// relay_nats::metrics::publish_sharding(sharding);
/// # }
/// ```
pub fn publish_sharding(sharding: &Sharding) {
    let stats = sharding.stats();
    for (name, value) in stats.counters() {
        metrics::counter!(format!("relay_nats_keyed_{name}_total")).absolute(value);
    }
    #[allow(clippy::cast_precision_loss)]
    let n = |v: u64| v as f64;
    metrics::gauge!("relay_nats_keyed_buffered").set(n(stats.buffered));
    let shards = sharding.shard_stats();
    let mut kinds: Vec<&str> = shards.iter().map(|s| s.kind.as_str()).collect();
    kinds.dedup();
    for kind in kinds {
        let of_kind = || shards.iter().filter(move |s| s.kind == kind);
        let held = of_kind().filter(|s| s.held).count() as u64;
        let live = of_kind().map(|s| s.keys_live).sum();
        metrics::gauge!("relay_nats_keyed_shards_held", "kind" => kind.to_owned()).set(n(held));
        metrics::gauge!("relay_nats_keyed_keys_live", "kind" => kind.to_owned()).set(n(live));
    }
    for shard in &shards {
        let labels = [
            ("kind", shard.kind.clone()),
            ("shard", shard.shard.to_string()),
        ];
        metrics::gauge!("relay_nats_keyed_shard_keys", &labels).set(n(shard.keys_live));
        metrics::gauge!("relay_nats_keyed_shard_held", &labels).set(n(u64::from(shard.held)));
    }
}
