//! Durable keyed processes with nodes as OS processes over a real
//! `nats-server` with JetStream: node 1 runs in this process; nodes 2 and
//! 3 run in child processes (this binary again, see `processes/peer.rs`).
//! Every key is an account journaled in one `JetStreamStore` the nodes
//! share. Five deposits go to every account; node 2 is killed (SIGKILL);
//! five more; node 3 is stopped (SIGSTOP) past its lease and continued;
//! five more, then every account closes. Each deposit is journaled before
//! the next fault, so the check is exact: every account closes with the
//! sum of its fifteen deposits, however many times it moved, and the
//! accounts of the lost nodes were resumed from their journals by the
//! nodes that took their shards.

mod support;

#[path = "keyed_durable/child.rs"]
mod child;
#[allow(dead_code)]
#[path = "keyed_durable/common.rs"]
mod common;
#[allow(dead_code)]
#[path = "processes/peer.rs"]
mod peer;
#[allow(dead_code)]
#[path = "processes/tally.rs"]
mod tally;

use std::time::{Duration, Instant};

use common::{closed_with, deposit, journaled, node, Node, SHARDS, WAIT};
use peer::Peer;
use relay_nats::NatsConfig;
use support::{wait_until, NatsServer};

/// Short, so that a node stopped for a few seconds is past it.
const LEASE: Duration = Duration::from_millis(1_500);
const BEAT: Duration = Duration::from_millis(250);
const DOWN_AFTER: Duration = Duration::from_secs(2);
const KEYS: usize = 300;

/// Every node's transport: short leases and a quick failure detector.
pub(crate) fn configure(config: NatsConfig) -> NatsConfig {
    config.name_lease(LEASE).failure_detector(BEAT, DOWN_AFTER)
}

/// Not a test of its own: a node other than 1 when the binary runs as a
/// child (see `processes/peer.rs`); passes at once otherwise.
#[test]
fn node_2_in_a_child_process() {
    if let Ok(role) = std::env::var(peer::ROLE) {
        child::run(&role);
    }
}

fn child(url: &str, n: u32) -> Peer {
    let peer = Peer::spawn_node("durable", url, 0, n);
    peer.expect("ready", WAIT);
    peer
}

/// A child's counters: shards held, journals resumed, processes fenced,
/// keys live.
fn stats(peer: &mut Peer) -> Vec<u64> {
    peer.tell("stats");
    peer.expect("stats", WAIT)
}

/// Waits until node 1 and `peers` (nodes `live`, node 1 first) each hold
/// exactly the shards placement gives them among `live`.
fn all_held(one: &Node, peers: &mut [&mut Peer], live: &[u32]) {
    let mut owner = std::collections::BTreeMap::new();
    for i in 0.. {
        let key = format!("probe-{i}");
        owner
            .entry(one.accounts.shard_of(&key))
            .or_insert_with(|| one.accounts.placed_among(&key, live));
        if owner.len() == SHARDS as usize {
            break;
        }
    }
    let expected: Vec<u64> = live
        .iter()
        .map(|n| owner.values().filter(|o| **o == Some(*n)).count() as u64)
        .collect();
    let deadline = Instant::now() + WAIT;
    loop {
        let mut held = vec![one.sharding.stats().shards_held];
        held.extend(peers.iter_mut().map(|p| stats(p)[0]));
        if held == expected && one.sharding.stats().buffered == 0 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the shards never settled: held {held:?}, placed {expected:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Deposits `amounts` to every key, then waits until node 1 reads all
/// `total` of each key's deposits in its journal; a failure also shows
/// the counters of the child nodes `peers` that still run.
fn deposits(
    one: &Node,
    peers: &mut [&mut Peer],
    keys: &[String],
    amounts: std::ops::RangeInclusive<u64>,
    total: usize,
) {
    for amount in amounts {
        deposit(one, keys, amount);
    }
    let deadline = Instant::now() + WAIT;
    loop {
        let short: Vec<(&String, usize)> = keys
            .iter()
            .map(|key| (key, journaled(one, key)))
            .filter(|(_, n)| *n != total)
            .collect();
        if short.is_empty() {
            return;
        }
        if Instant::now() >= deadline {
            let children: Vec<Vec<u64>> = peers.iter_mut().map(|p| stats(p)).collect();
            for peer in peers.iter_mut() {
                peer.tell("dump");
                peer.expect("dumped", WAIT);
            }
            panic!(
                "{} keys short of {total} journaled deposits, such as {:?}; node 1: {:?}; the first's \
                 journal, a record per line: {:?}; {:?}; {:?}; \
                 other nodes (held, resumed, fenced processes, keys live, fenced messages, \
                 failed syncs, buffered): {children:?}",
                short.len(),
                &short[..short.len().min(10)],
                one.sharding.stats(),
                deposits_of(one, short[0].0),
                one.durability.stats(),
                one.scheduler.stats()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The deposits in `key`'s journal (one `Vec` per record; an amount is
/// one byte of postcard), or why it could not be read.
fn deposits_of(one: &Node, key: &str) -> Result<Vec<Vec<u8>>, String> {
    let journal = one.durability.inspect(key).map_err(|e| e.to_string())?;
    let journal = journal.ok_or("no journal")?;
    Ok(journal
        .records
        .iter()
        .map(|record| {
            record
                .inputs
                .iter()
                .filter_map(|input| match input {
                    sched_durable::RecordedInput::Message { body, .. } => body.first().copied(),
                    _ => None,
                })
                .collect()
        })
        .collect())
}

#[test]
fn durable_keyed_processes_keep_their_state_through_a_kill_and_a_stop() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let url = server.url();
    let started = Instant::now();
    let at = |what: &str| eprintln!("{:>6.1} s: {what}", started.elapsed().as_secs_f64());
    let one = node(&url, 1, configure);
    let mut two = child(&url, 2);
    let mut three = child(&url, 3);
    all_held(&one, &mut [&mut two, &mut three], &[1, 2, 3]);
    let keys: Vec<String> = (0..KEYS).map(|i| format!("acct-{i}")).collect();
    let placed = |n: u32| {
        keys.iter()
            .filter(|k| one.accounts.placed_on(k) == Some(n))
            .count()
    };
    let (on_two, on_three) = (placed(2), placed(3));
    assert!(
        on_two > 0 && on_three > 0,
        "{on_two} keys on node 2, {on_three} on node 3"
    );
    at("settled");

    deposits(&one, &mut [&mut two, &mut three], &keys, 1..=5, 5);
    at("five deposits journaled; node 2 killed");
    two.kill();
    all_held(&one, &mut [&mut three], &[1, 3]);
    at("node 2's shards taken");
    deposits(&one, &mut [&mut three], &keys, 6..=10, 10);

    at("ten deposits journaled; node 3 stopped");
    three.signal("STOP");
    // Down, its leases lapsed, its shards taken by node 1.
    wait_until("node 1 to hold every shard", WAIT, || {
        one.sharding.stats().shards_held == u64::from(SHARDS)
    });
    at("node 1 holds every shard; node 3 continued");
    three.signal("CONT");
    all_held(&one, &mut [&mut three], &[1, 3]);
    at("settled again");
    deposits(&one, &mut [&mut three], &keys, 11..=15, 15);
    deposit(&one, &keys, 0);
    closed_with(&one, &keys, (1..=15).sum(), 15);
    at("every account closed");

    let resumed = one.durability.stats().recovered + stats(&mut three)[1];
    assert!(
        resumed >= (on_two + on_three) as u64,
        "{on_two} keys on node 2 and {on_three} on node 3, {resumed} journals resumed"
    );
    eprintln!(
        "{KEYS} accounts: {on_two} on node 2 when it was killed, {on_three} on node 3 \
         when it was stopped; {resumed} journals resumed; node 1: {:?}; node 3 \
         (held, resumed, fenced processes, keys live, fenced messages, failed syncs, buffered): {:?}",
        one.sharding.stats(),
        stats(&mut three)
    );
    three.tell("quit");
    three.expect("end", WAIT);
    one.scheduler.shutdown(Duration::from_millis(500));
}
