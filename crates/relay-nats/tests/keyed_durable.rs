//! Durable keyed processes over a real `nats-server` with JetStream, nodes
//! in this process: a keyed kind whose process is a `StandIn` for a
//! durable process, journaled in a `JetStreamStore` every node shares.
//! When a shard moves, the old holder suspends the key's durable process
//! once what it was sent is journaled, and the new holder resumes it from
//! its journal: its state goes with the key, and no deposit is lost or
//! counted twice.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use relay_nats::{Keyed, NatsConfig, NatsTransport, Sharded, Sharding, ShardingConfig};
use sched_durable::prelude::*;
use sched_durable::{StandIn, Status};
use sched_durable_jetstream::JetStreamStore;
use support::{codec, wait_until, NatsServer, DOWN_AFTER, HEARTBEAT, NAMES};

const WAIT: Duration = Duration::from_secs(60);
const KIND: &str = "account";
const SHARDS: u32 = 16;

/// A bank account per key: what it was paid, and how many times. A
/// deposit of 0 closes it, with both.
struct Account {
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

struct Node {
    scheduler: Scheduler,
    sharding: Sharding,
    accounts: Sharded<u64>,
    durability: Arc<Durability>,
}

/// Node `n`: its journals in the shared stream, its accounts keyed.
fn node(url: &str, n: u32) -> Node {
    let store = JetStreamStore::builder(url, n)
        .prefix("keyed-durable")
        .open()
        .expect("the journal store opens");
    let durability = Arc::new(Durability::open(store));
    durability.register::<Account>();
    let config = NatsConfig::new(url)
        .codec(codec().register::<Keyed<u64>>(KIND))
        .failure_detector(HEARTBEAT, DOWN_AFTER)
        .cluster_names(NAMES);
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
        scheduler,
        sharding,
        accounts,
        durability,
    }
}

/// Waits until the nodes hold every shard between them, with nothing
/// waiting.
fn settled(nodes: &[&Node]) {
    wait_until("the shards to settle", WAIT, || {
        let held: u64 = nodes.iter().map(|n| n.sharding.stats().shards_held).sum();
        let agree = (0..64).all(|k| {
            let key = format!("probe-{k}");
            let first = nodes[0].accounts.placed_on(&key);
            nodes.iter().all(|n| n.accounts.placed_on(&key) == first)
        });
        held == u64::from(SHARDS) && agree && nodes.iter().all(|n| n.sharding.stats().buffered == 0)
    });
}

/// Sends `amount` to every key from `node`, retrying a refused send.
fn deposit(node: &Node, keys: &[String], amount: u64) {
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
fn closed_with(reader: &Node, keys: &[String], total: u64, deposits: u64) {
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

#[test]
fn a_durable_keyed_process_keeps_its_state_when_its_shard_moves_to_a_joining_node() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let url = server.url();
    let one = node(&url, 1);
    let two = node(&url, 2);
    settled(&[&one, &two]);
    let keys: Vec<String> = (0..60).map(|i| format!("acct-{i}")).collect();
    // Five deposits each before the join, from node 1.
    for amount in 1..=5 {
        deposit(&one, &keys, amount);
    }
    let three = node(&url, 3);
    settled(&[&one, &two, &three]);
    let moved: Vec<&String> = keys
        .iter()
        .filter(|k| three.accounts.placed_on(k) == Some(3))
        .collect();
    assert!(!moved.is_empty(), "node 3 took no key");
    // Five more after it, from node 2, then close every account.
    for amount in 6..=10 {
        deposit(&two, &keys, amount);
    }
    deposit(&two, &keys, 0);
    closed_with(&one, &keys, 55, 10);
    // The moved keys resumed on node 3 from their journals.
    let resumed = three.durability.stats().recovered;
    assert!(
        resumed >= moved.len() as u64,
        "{} keys moved to node 3, {resumed} resumed there",
        moved.len()
    );
    let hand_offs: u64 = [&one, &two]
        .iter()
        .map(|n| n.sharding.stats().hand_offs)
        .sum();
    assert!(hand_offs > 0);
    for n in [&one, &two, &three] {
        n.scheduler.shutdown(Duration::from_millis(500));
    }
}

/// Deposits keep coming while node 3 joins: every one counted once, in
/// the account's one journal, whichever node ran it.
#[test]
fn deposits_sent_while_a_node_joins_are_each_counted_once() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let url = server.url();
    let one = node(&url, 1);
    let two = node(&url, 2);
    settled(&[&one, &two]);
    let keys: Vec<String> = (0..40).map(|i| format!("acct-{i}")).collect();
    let rounds = std::thread::scope(|s| {
        let sender = s.spawn(|| {
            let mut rounds = 0;
            let started = Instant::now();
            while started.elapsed() < Duration::from_secs(6) {
                deposit(&one, &keys, 1);
                rounds += 1;
                std::thread::sleep(Duration::from_millis(20));
            }
            rounds
        });
        std::thread::sleep(Duration::from_millis(500));
        let three = node(&url, 3);
        settled(&[&one, &two, &three]);
        let rounds = sender.join().unwrap();
        (rounds, three)
    });
    let (rounds, three) = rounds;
    deposit(&one, &keys, 0);
    closed_with(&two, &keys, rounds, rounds);
    assert!(
        three.durability.stats().recovered > 0,
        "nothing moved to node 3"
    );
    for n in [&one, &two, &three] {
        n.scheduler.shutdown(Duration::from_millis(500));
    }
}

/// How many messages the journal of `key` holds, read by `reader`.
fn journaled(reader: &Node, key: &str) -> usize {
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

/// A node that leaves (its scheduler shut down, its transport closed):
/// its keys' durable processes were suspended with it, and the nodes that
/// take its shards resume each from its journal.
#[test]
fn a_durable_keyed_process_resumes_on_another_node_when_its_node_leaves() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let url = server.url();
    let one = node(&url, 1);
    let two = node(&url, 2);
    settled(&[&one, &two]);
    let keys: Vec<String> = (0..60).map(|i| format!("acct-{i}")).collect();
    let on_two = keys
        .iter()
        .filter(|k| one.accounts.placed_on(k) == Some(2))
        .count();
    assert!(on_two > 0, "node 2 holds no key");
    for amount in 1..=5 {
        deposit(&one, &keys, amount);
    }
    wait_until("every deposit to be journaled", WAIT, || {
        keys.iter().all(|key| journaled(&one, key) == 5)
    });
    two.scheduler.shutdown(Duration::from_millis(500));
    drop(two);
    settled(&[&one]);
    for amount in 6..=10 {
        deposit(&one, &keys, amount);
    }
    deposit(&one, &keys, 0);
    closed_with(&one, &keys, 55, 10);
    assert!(
        one.durability.stats().recovered >= on_two as u64,
        "node 2's {on_two} keys were not resumed on node 1"
    );
    one.scheduler.shutdown(Duration::from_millis(500));
}
