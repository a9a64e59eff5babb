//! The keyed processes' and the transport's figures, as a real
//! Prometheus recorder renders them and as the live view serves them, on
//! two nodes over a real `nats-server`.

mod support;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use metrics_exporter_prometheus::PrometheusBuilder;
use relay_nats::{Keyed, Sharded, Sharding, ShardingConfig};
use sched::prelude::*;
use support::*;

const WAIT: Duration = Duration::from_secs(60);
const KIND: &str = "meter";
const SHARDS: u32 = 8;

/// Counts what it reads into the cluster-wide total; ends on cancel.
struct Meter(Arc<AtomicU64>);

impl Process for Meter {
    type Done = ();
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            match event {
                Event::Message(_) => {
                    self.0.fetch_add(1, Ordering::Relaxed);
                }
                Event::Cancel => out.finish(()),
                _ => {}
            }
        }
        Ok(())
    }
}

struct MeterNode {
    scheduler: Arc<Scheduler>,
    transport: Arc<relay_nats::NatsTransport>,
    sharding: Arc<Sharding>,
    meter: Sharded<u64>,
}

fn meter_node(url: &str, node: u32, read: &Arc<AtomicU64>) -> MeterNode {
    let (scheduler, transport) =
        node_configured(url, node, |c| c.codec(codec().register::<Keyed<u64>>(KIND)));
    let config = ShardingConfig::new().shards(SHARDS);
    let sharding = Arc::new(Sharding::new(&scheduler, Arc::clone(&transport), config).unwrap());
    let read = Arc::clone(read);
    let meter = sharding
        .register(&scheduler, KIND, move |_: &str| Meter(Arc::clone(&read)))
        .unwrap();
    MeterNode {
        scheduler: Arc::new(scheduler),
        transport,
        sharding,
        meter,
    }
}

/// Two nodes sharing the shards, 40 keys sent to from node 1, all read.
fn two_busy_nodes(url: &str, read: &Arc<AtomicU64>) -> (MeterNode, MeterNode) {
    let one = meter_node(url, 1, read);
    let two = meter_node(url, 2, read);
    // Both nodes must see each other and hold what they place on
    // themselves (see `holds_its_own`): the shards held adding up is not
    // enough, as node 1 may hold every shard for a moment after it has
    // seen node 2, and all 40 keys would then start on node 1 (and be
    // handed off beside the figures read below).
    wait_until("the shards to settle", WAIT, || {
        let held = one.sharding.stats().shards_held + two.sharding.stats().shards_held;
        let agree = (0..100).all(|k| {
            let key = format!("probe-{k}");
            one.meter.placed_on(&key) == two.meter.placed_among(&key, &[1, 2])
                && two.meter.placed_on(&key) == two.meter.placed_among(&key, &[1, 2])
        });
        let own = [(1, &one), (2, &two)]
            .iter()
            .all(|(n, node)| holds_its_own(*n, KIND, &node.meter, &node.sharding));
        held == u64::from(SHARDS) && one.sharding.stats().shards_held > 0 && agree && own
    });
    for k in 0..40 {
        one.meter
            .send(&*one.scheduler, &format!("k{k}"), k)
            .unwrap();
    }
    wait_until("every message to be read", WAIT, || {
        read.load(Ordering::Relaxed) == 40
    });
    (one, two)
}

#[test]
fn the_keyed_figures_reach_the_installed_recorder_shard_by_shard() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let read = Arc::new(AtomicU64::new(0));
    let (one, two) = two_busy_nodes(&server.url(), &read);

    let recorder = PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    metrics::with_local_recorder(&recorder, || {
        relay_nats::metrics::publish_sharding(&one.sharding);
        relay_nats::metrics::publish(&one.transport);
    });
    let text = handle.render();
    let value = |name: &str| -> f64 {
        text.lines()
            .find(|l| l.starts_with(name) && !l.starts_with('#'))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{name} missing from:\n{text}"))
    };
    let stats = one.sharding.stats();
    let shards = one.sharding.shard_stats();
    assert_eq!(shards.len(), SHARDS as usize, "every shard of the kind");
    assert_eq!(
        value("relay_nats_keyed_shards_held{kind=\"meter\"}"),
        stats.shards_held as f64
    );
    assert_eq!(
        value("relay_nats_keyed_keys_live{kind=\"meter\"}"),
        stats.keys_live as f64
    );
    assert_eq!(
        value("relay_nats_keyed_started_total"),
        stats.started as f64
    );
    assert_eq!(
        value("relay_nats_keyed_forwarded_total"),
        stats.forwarded as f64
    );
    assert_eq!(value("relay_nats_keyed_buffered"), 0.0);
    // Shard by shard: keys where held, none where not, adding up.
    let mut keys = 0.0;
    for shard in &shards {
        let labels = format!("{{kind=\"meter\",shard=\"{}\"}}", shard.shard);
        let here = value(&format!("relay_nats_keyed_shard_keys{labels}"));
        let held = value(&format!("relay_nats_keyed_shard_held{labels}"));
        assert_eq!(held, f64::from(u8::from(shard.held)), "{labels}");
        assert!(
            shard.held || here == 0.0,
            "keys on a shard held elsewhere: {labels}"
        );
        keys += here;
    }
    assert_eq!(keys, stats.keys_live as f64);
    // Node 1 started the keys of its shards and forwarded the rest: 40 in all.
    let other = two.sharding.stats();
    assert_eq!(stats.started + other.started, 40);
    assert_eq!(stats.keys_live + other.keys_live, 40);
    assert_eq!(
        stats.forwarded, other.started,
        "one send for each key of node 2"
    );
    assert!(
        stats.forwarded > 0 && other.started > 0,
        "both nodes hold keys"
    );
    assert_eq!(
        value("relay_nats_published_total"),
        one.transport.stats().published as f64
    );
    assert!(value("relay_nats_published_total") >= stats.forwarded as f64);

    one.scheduler.shutdown(Duration::from_secs(5));
    two.scheduler.shutdown(Duration::from_secs(5));
}

#[test]
fn the_live_view_serves_a_keyed_panel_and_a_nats_panel() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let read = Arc::new(AtomicU64::new(0));
    let (one, two) = two_busy_nodes(&server.url(), &read);
    let nats = relay_nats::live::figures(&one.transport);
    let keyed = relay_nats::live::sharding_figures(&one.sharding);
    let endpoint = sched::live::serve_with(Arc::clone(&one.scheduler), "127.0.0.1:0", move || {
        let mut all = nats();
        all.extend(keyed());
        all
    })
    .unwrap();
    let mut client = sched::live::Client::connect(endpoint.local_addr(), WAIT).unwrap();
    let snapshot = client.snapshot(5).unwrap();
    let figure = |source: &str, name: &str| {
        snapshot
            .figures
            .iter()
            .find(|f| f.source == source && f.name == name)
            .unwrap_or_else(|| panic!("no {source}/{name} in {:?}", snapshot.figures))
            .value
    };
    let stats = one.sharding.stats();
    assert_eq!(figure("keyed", "keys live"), stats.keys_live as f64);
    assert_eq!(figure("keyed", "shards held"), stats.shards_held as f64);
    assert_eq!(figure("keyed", "started"), stats.started as f64);
    assert_eq!(figure("keyed", "hand offs"), 0.0);
    let largest = one.sharding.shard_stats().iter().map(|s| s.keys_live).max();
    assert_eq!(figure("keyed", "largest shard"), largest.unwrap() as f64);
    assert!(figure("nats", "published") >= stats.forwarded as f64);
    assert_eq!(figure("nats", "abandoned"), 0.0);

    // Once the sharding is gone, its panel is empty; the endpoint serves on.
    let MeterNode {
        scheduler,
        sharding,
        ..
    } = one;
    drop(sharding);
    let snapshot = client.snapshot(5).unwrap();
    assert!(snapshot.figures.iter().all(|f| f.source != "keyed"));
    assert!(snapshot.figures.iter().any(|f| f.source == "nats"));
    endpoint.stop();
    scheduler.shutdown(Duration::from_secs(5));
    two.scheduler.shutdown(Duration::from_secs(5));
}
