//! What the durable keyed tests share (`keyed_durable.rs` with nodes as
//! threads, `keyed_durable_os.rs` with nodes as OS processes): an account
//! per key, journaled in a `JetStreamStore` every node shares, and a node
//! that runs them as a keyed kind of `StandIn`s.

use std::sync::Arc;
use std::time::{Duration, Instant};

use relay_nats::{Keyed, NatsConfig, NatsTransport, Sharded, Sharding, ShardingConfig};
use sched_durable::prelude::*;
use sched_durable::{StandIn, Status};
use sched_durable_jetstream::JetStreamStore;

use crate::support::{codec, wait_until};

pub(crate) const WAIT: Duration = Duration::from_secs(60);
pub(crate) const KIND: &str = "account";
pub(crate) const SHARDS: u32 = 16;

/// A bank account per key: what it was paid, and how many times. A
/// deposit of 0 closes it, with both.
pub(crate) struct Account {
    total: u64,
    deposits: u64,
}

impl Durable for Account {
    const KIND: &'static str = "account";
    type Args = ();
    type Message = u64;
    type Done = (u64, u64);

    fn create(_: ()) -> Self {
        Account {
            total: 0,
            deposits: 0,
        }
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events.typed::<Self>() {
            match event {
                Event::Message(0) => out.finish((self.total, self.deposits)),
                Event::Message(n) => {
                    self.total += n;
                    self.deposits += 1;
                }
                _ => {}
            }
        }
        Ok(())
    }
}

pub(crate) struct Node {
    pub(crate) id: u32,
    pub(crate) scheduler: Scheduler,
    pub(crate) sharding: Sharding,
    pub(crate) accounts: Sharded<u64>,
    pub(crate) durability: Arc<Durability>,
}

/// Node `n`: its journals in the shared stream, its accounts keyed.
pub(crate) fn node(url: &str, n: u32, configure: impl FnOnce(NatsConfig) -> NatsConfig) -> Node {
    let store = JetStreamStore::builder(url, n)
        .prefix("keyed-durable")
        .open()
        .expect("the journal store opens");
    let durability = Arc::new(Durability::open(store));
    durability.register::<Account>();
    let config = configure(
        NatsConfig::new(url)
            .codec(codec().register::<Keyed<u64>>(KIND))
            .cluster_names(crate::support::NAMES),
    );
    let transport = Arc::new(NatsTransport::connect(config).expect("connected"));
    let scheduler = durability
        .install(
            Scheduler::builder()
                .workers(2)
                .node(n)
                .remote(transport.clone()),
        )
        .build();
    scheduler.start();
    let sharding = Sharding::new(&scheduler, transport, ShardingConfig::new().shards(SHARDS))
        .expect("sharding starts");
    let journals = Arc::clone(&durability);
    let accounts = sharding
        .register(&scheduler, KIND, move |key: &str| {
            StandIn::<Account>::new(&journals, key, ())
        })
        .expect("the kind registers");
    Node {
        id: n,
        scheduler,
        sharding,
        accounts,
        durability,
    }
}

/// Waits until the nodes hold every shard between them, with nothing
/// waiting.
pub(crate) fn settled(nodes: &[&Node]) {
    wait_until("the shards to settle", WAIT, || {
        let held: u64 = nodes.iter().map(|n| n.sharding.stats().shards_held).sum();
        let agree = (0..64).all(|k| {
            let key = format!("probe-{k}");
            let first = nodes[0].accounts.placed_on(&key);
            nodes.iter().all(|n| n.accounts.placed_on(&key) == first)
        });
        // Each holds what it places on itself: see `holds_its_own`.
        let own = nodes
            .iter()
            .all(|n| crate::support::holds_its_own(n.id, KIND, &n.accounts, &n.sharding));
        held == u64::from(SHARDS)
            && agree
            && own
            && nodes.iter().all(|n| n.sharding.stats().buffered == 0)
    });
}

/// Sends `amount` to every key from `node`, retrying a refused send.
pub(crate) fn deposit(node: &Node, keys: &[String], amount: u64) {
    for key in keys {
        let deadline = Instant::now() + WAIT;
        while node.accounts.send(&node.scheduler, key, amount).is_err() {
            assert!(Instant::now() < deadline, "{key} refuses deposits");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// Every key's account closed with `total` from `deposits` deposits, read
/// from the shared journals by `reader`.
pub(crate) fn closed_with(reader: &Node, keys: &[String], total: u64, deposits: u64) {
    wait_until("every account to close", WAIT, || {
        keys.iter()
            .all(|key| matches!(reader.durability.status(key), Ok(Some(Status::Done(_)))))
    });
    for key in keys {
        let status = reader.durability.status(key).unwrap().unwrap();
        let outcome: (u64, u64) = status.outcome().expect("done").expect("readable");
        assert_eq!(
            outcome,
            (total, deposits),
            "{key} closed with (total, deposits) {outcome:?}"
        );
    }
}

/// How many messages the journal of `key` holds, read by `reader`.
pub(crate) fn journaled(reader: &Node, key: &str) -> usize {
    reader
        .durability
        .inspect(key)
        .ok()
        .flatten()
        .map_or(0, |journal| {
            journal
                .records
                .iter()
                .flat_map(|r| r.inputs.iter())
                .filter(|i| matches!(i, sched_durable::RecordedInput::Message { .. }))
                .count()
        })
}
