//! Durable keyed processes over a real `nats-server` with JetStream, nodes
//! in this process: a keyed kind whose process is a `StandIn` for a
//! durable process, journaled in a `JetStreamStore` every node shares.
//! When a shard moves, the old holder suspends the key's durable process
//! once what it was sent is journaled, and the new holder resumes it from
//! its journal: its state goes with the key, and no deposit is lost or
//! counted twice.

mod support;

#[path = "keyed_durable/common.rs"]
mod common;

use std::time::{Duration, Instant};

use common::{closed_with, deposit, journaled, settled, Node, WAIT};
use relay_nats::NatsConfig;
use support::{wait_until, NatsServer, DOWN_AFTER, HEARTBEAT};

/// A node of these tests: the tests' failure detector.
fn node(url: &str, n: u32) -> Node {
    common::node(url, n, |c: NatsConfig| {
        c.failure_detector(HEARTBEAT, DOWN_AFTER)
    })
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
