//! Keyed processes over a real `nats-server` with JetStream, nodes in
//! this process: every message reaches the one process of its key, on the
//! node that holds the key's shard; idle keys passivate; a joining node
//! takes its shards with nothing lost or doubled; a node cut off past its
//! lease never steps a key beside the key's new holder.

mod support;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use relay_nats::{Keyed, Sharded, Sharding, ShardingConfig};
use sched::prelude::*;
use serde::{Deserialize, Serialize};
use support::*;

const WAIT: Duration = Duration::from_secs(60);
const KIND: &str = "tally";

/// One numbered message from a sender.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
struct Add {
    from: u32,
    n: u64,
}

/// One step's reading of a message, by one incarnation of a key's process.
#[derive(Debug, Clone)]
struct Seen {
    key: String,
    node: u32,
    incarnation: u64,
    add: Add,
}

/// What every test node's processes write to: one log for the cluster.
#[derive(Default)]
struct Log {
    seen: Mutex<Vec<Seen>>,
    incarnations: AtomicU64,
    /// Live processes per key: more than one at any moment is the fault.
    live: Mutex<HashMap<String, u32>>,
    doubled: AtomicBool,
    /// A key whose process blocks in its first step until told.
    gate: Mutex<Option<(String, std::sync::mpsc::Receiver<()>)>>,
}

/// The process of one key: logs what it reads; finishes on cancel.
struct Tally {
    key: String,
    node: u32,
    incarnation: u64,
    log: Arc<Log>,
}

impl Tally {
    fn new(key: &str, node: u32, log: &Arc<Log>) -> Tally {
        let incarnation = log.incarnations.fetch_add(1, Ordering::Relaxed);
        let mut live = log.live.lock().unwrap();
        let n = live.entry(key.to_owned()).or_default();
        *n += 1;
        if *n > 1 {
            log.doubled.store(true, Ordering::Relaxed);
        }
        Tally {
            key: key.to_owned(),
            node,
            incarnation,
            log: Arc::clone(log),
        }
    }
}

impl Drop for Tally {
    fn drop(&mut self) {
        if let Some(n) = self.log.live.lock().unwrap().get_mut(&self.key) {
            *n -= 1;
        }
    }
}

impl Process for Tally {
    type Done = ();
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            match event {
                Event::Message(m) => {
                    let add = m.downcast::<Add>().expect("an Add");
                    self.log.seen.lock().unwrap().push(Seen {
                        key: self.key.clone(),
                        node: self.node,
                        incarnation: self.incarnation,
                        add,
                    });
                    let gate = {
                        let mut gate = self.log.gate.lock().unwrap();
                        match &*gate {
                            Some((key, _)) if *key == self.key => gate.take(),
                            _ => None,
                        }
                    };
                    if let Some((_, gate)) = gate {
                        let _ = gate.recv();
                    }
                }
                Event::Cancel => out.finish(()),
                _ => {}
            }
        }
        Ok(())
    }
}

struct KeyedNode {
    node: u32,
    scheduler: Scheduler,
    sharding: Sharding,
    tally: Sharded<Add>,
    transport: Arc<relay_nats::NatsTransport>,
}

fn keyed_node(url: &str, node: u32, config: ShardingConfig, log: &Arc<Log>) -> KeyedNode {
    keyed_node_leased(url, node, config, log, relay_nats::DEFAULT_NAME_LEASE)
}

fn keyed_node_leased(
    url: &str,
    node: u32,
    config: ShardingConfig,
    log: &Arc<Log>,
    lease: Duration,
) -> KeyedNode {
    let (scheduler, transport) = node_configured(url, node, |c| {
        c.codec(codec().register::<Keyed<Add>>(KIND))
            .name_lease(lease)
    });
    let sharding = Sharding::new(&scheduler, Arc::clone(&transport), config).unwrap();
    let keep = Arc::clone(&transport);
    let log = Arc::clone(log);
    let tally = sharding
        .register(&scheduler, KIND, move |key: &str| {
            Tally::new(key, node, &log)
        })
        .unwrap();
    KeyedNode {
        node,
        scheduler,
        sharding,
        tally,
        transport: keep,
    }
}

/// Waits until the nodes hold every shard between them, each where its
/// placement puts it.
fn settled(nodes: &[&KeyedNode], shards: u64) {
    wait_until("the shards to settle", WAIT, || {
        let held: u64 = nodes.iter().map(|n| n.sharding.stats().shards_held).sum();
        let agree = (0..200).all(|k| {
            let key = format!("probe-{k}");
            let first = nodes[0].tally.placed_on(&key);
            nodes.iter().all(|n| n.tally.placed_on(&key) == first)
        });
        // Each holds what it places on itself: see `holds_its_own`.
        let own = nodes
            .iter()
            .all(|n| holds_its_own(n.node, KIND, &n.tally, &n.sharding));
        held == shards && agree && own && nodes.iter().all(|n| n.sharding.stats().buffered == 0)
    });
}

/// Sends `per_key` numbered messages to each of `keys` from `node`,
/// retrying a refused one (the bound is a test's, not the system's).
fn send_all(node: &KeyedNode, from: u32, keys: &[String], per_key: u64, next: &AtomicU64) {
    for _ in 0..per_key {
        for key in keys {
            let n = next.fetch_add(1, Ordering::Relaxed);
            let mut add = Add { from, n };
            loop {
                match node.tally.send(&node.scheduler, key, add) {
                    Ok(()) => break,
                    Err(refused) => {
                        add = refused.message;
                        std::thread::sleep(Duration::from_millis(5));
                    }
                }
            }
        }
    }
}

/// Every (sender, number) seen exactly once, and the count.
fn exactly_once(log: &Log, sent: u64) {
    let seen = log.seen.lock().unwrap();
    let mut unique = HashSet::new();
    for s in seen.iter() {
        assert!(unique.insert((s.add.from, s.add.n)), "seen twice: {s:?}");
    }
    assert_eq!(unique.len() as u64, sent, "every message seen once");
}

fn keys(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("user-{i}")).collect()
}

#[test]
fn every_message_reaches_the_one_process_of_its_key_on_the_node_holding_its_shard() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let log = Arc::new(Log::default());
    let config = ShardingConfig::new().shards(16);
    let one = keyed_node(&server.url(), 1, config.clone(), &log);
    let two = keyed_node(&server.url(), 2, config, &log);
    settled(&[&one, &two], 16);

    let keys = keys(200);
    let numbers = AtomicU64::new(0);
    std::thread::scope(|s| {
        s.spawn(|| send_all(&one, 1, &keys, 10, &numbers));
        s.spawn(|| send_all(&two, 2, &keys, 10, &numbers));
    });
    let sent = numbers.load(Ordering::Relaxed);
    assert_eq!(sent, 2 * 200 * 10);
    wait_until("every message to be read", WAIT, || {
        log.seen.lock().unwrap().len() as u64 >= sent
    });
    exactly_once(&log, sent);

    let seen = log.seen.lock().unwrap().clone();
    // Each key: one process, on the node its shard is placed on, and each
    // sender's messages in the order sent.
    let mut per_key: HashMap<&str, Vec<&Seen>> = HashMap::new();
    for s in &seen {
        per_key.entry(&s.key).or_default().push(s);
    }
    assert_eq!(per_key.len(), 200);
    for (key, reads) in &per_key {
        let placed = one.tally.placed_on(key).unwrap();
        assert!(
            reads.iter().all(|s| s.node == placed),
            "{key} ran off {placed}"
        );
        let incarnation = reads[0].incarnation;
        assert!(
            reads.iter().all(|s| s.incarnation == incarnation),
            "{key}: one process"
        );
        for from in [1, 2] {
            let numbers: Vec<u64> = reads
                .iter()
                .filter(|s| s.add.from == from)
                .map(|s| s.add.n)
                .collect();
            assert!(
                numbers.windows(2).all(|w| w[0] < w[1]),
                "{key} from {from}: {numbers:?}"
            );
        }
    }
    let (s1, s2) = (one.sharding.stats(), two.sharding.stats());
    assert_eq!(s1.keys_live + s2.keys_live, 200);
    assert!(s1.keys_live > 0 && s2.keys_live > 0, "{s1:?} {s2:?}");
    assert_eq!(s1.started + s2.started, 200);
    assert!(s1.forwarded > 0 && s2.forwarded > 0);
    assert_eq!(s1.refused + s2.refused, 0);
    assert!(!log.doubled.load(Ordering::Relaxed));
    one.scheduler.shutdown(Duration::from_millis(500));
    two.scheduler.shutdown(Duration::from_millis(500));
}

#[test]
fn an_idle_key_is_passivated_and_its_next_message_starts_a_new_process() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let log = Arc::new(Log::default());
    let config = ShardingConfig::new()
        .shards(4)
        .passivate_after(Duration::from_millis(300));
    let one = keyed_node(&server.url(), 1, config, &log);
    settled(&[&one], 4);
    one.tally
        .send(&one.scheduler, "idle", Add { from: 1, n: 0 })
        .unwrap();
    wait_until("the key to passivate", WAIT, || {
        let stats = one.sharding.stats();
        stats.passivated == 1 && stats.keys_live == 0
    });
    assert_eq!(
        log.live.lock().unwrap().get("idle"),
        Some(&0),
        "its process ended"
    );
    one.tally
        .send(&one.scheduler, "idle", Add { from: 1, n: 1 })
        .unwrap();
    wait_until("the second message to be read", WAIT, || {
        log.seen.lock().unwrap().len() == 2
    });
    let seen = log.seen.lock().unwrap().clone();
    assert_ne!(seen[0].incarnation, seen[1].incarnation, "a new process");
    assert_eq!(one.sharding.stats().started, 2);
    one.scheduler.shutdown(Duration::from_millis(500));
}

#[test]
fn a_joining_node_takes_its_shards_with_nothing_lost_or_doubled() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let log = Arc::new(Log::default());
    let config = ShardingConfig::new().shards(32);
    let one = keyed_node(&server.url(), 1, config.clone(), &log);
    let two = keyed_node(&server.url(), 2, config.clone(), &log);
    settled(&[&one, &two], 32);

    let keys = keys(300);
    let numbers = AtomicU64::new(0);
    let sending = AtomicBool::new(true);
    let three = std::thread::scope(|s| {
        for (node, from) in [(&one, 1), (&two, 2)] {
            let (keys, numbers, sending) = (&keys, &numbers, &sending);
            s.spawn(move || {
                while sending.load(Ordering::Relaxed) {
                    send_all(node, from, keys, 1, numbers);
                    std::thread::sleep(Duration::from_millis(5));
                }
            });
        }
        std::thread::sleep(Duration::from_millis(500));
        let joined = Instant::now();
        let three = keyed_node(&server.url(), 3, config, &log);
        settled(&[&one, &two, &three], 32);
        eprintln!(
            "a joining node's shards settled {:?} after it started",
            joined.elapsed()
        );
        std::thread::sleep(Duration::from_millis(300));
        sending.store(false, Ordering::Relaxed);
        three
    });
    let sent = numbers.load(Ordering::Relaxed);
    let deadline = Instant::now() + WAIT;
    while (log.seen.lock().unwrap().len() as u64) < sent {
        assert!(
            Instant::now() < deadline,
            "{} of {sent} messages read in {WAIT:?}; sharding {:?}; dead letters {:?}",
            log.seen.lock().unwrap().len(),
            [&one, &two, &three].map(|n| n.sharding.stats()),
            [&one, &two, &three].map(|n| n.scheduler.stats().dead_letters),
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    exactly_once(&log, sent);
    assert!(
        !log.doubled.load(Ordering::Relaxed),
        "a key had two live processes"
    );
    let stats = [&one, &two, &three].map(|n| n.sharding.stats());
    let hand_offs: u64 = stats.iter().map(|s| s.hand_offs).sum();
    assert!(hand_offs > 0, "{stats:?}");
    assert!(stats[2].shards_held > 0, "{stats:?}");
    assert_eq!(stats.iter().map(|s| s.refused).sum::<u64>(), 0, "{stats:?}");
    // The new node's keys run there now.
    let moved = keys
        .iter()
        .filter(|k| three.tally.placed_on(k) == Some(3))
        .count();
    assert!(moved > 0);
    for n in [&one, &two, &three] {
        n.scheduler.shutdown(Duration::from_millis(500));
    }
}

#[test]
fn a_shard_stays_until_its_processes_have_ended_and_they_read_what_was_sent_before() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let log = Arc::new(Log::default());
    let config = ShardingConfig::new().shards(8);
    let one = keyed_node(&server.url(), 1, config.clone(), &log);
    settled(&[&one], 8);

    // A key that moves to node 2 when it joins; its process on node 1
    // blocks in its first step, one more message queued behind.
    let key = keys(400)
        .into_iter()
        .find(|k| one.tally.placed_among(k, &[1, 2]) == Some(2))
        .unwrap();
    let moving: HashSet<u32> = keys(4_000)
        .iter()
        .filter(|k| one.tally.placed_among(k, &[1, 2]) == Some(2))
        .map(|k| one.tally.shard_of(k))
        .collect();
    let (open, gate) = std::sync::mpsc::channel::<()>();
    *log.gate.lock().unwrap() = Some((key.clone(), gate));
    let send = |node: &KeyedNode, n| {
        node.tally
            .send(&node.scheduler, &key, Add { from: 1, n })
            .unwrap()
    };
    send(&one, 0);
    wait_until("the first message to be read", WAIT, || {
        log.seen.lock().unwrap().len() == 1
    });
    send(&one, 1);

    // Node 2 joins: it gets every shard placed on it but the key's, whose
    // process still runs on node 1.
    let two = keyed_node(&server.url(), 2, config, &log);
    let others = moving.len() as u64 - 1;
    wait_until("node 2 to take the other shards", WAIT, || {
        two.sharding.stats().shards_held == others
    });
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(
        two.sharding.stats().shards_held,
        others,
        "taken while its process ran"
    );
    assert_eq!(log.seen.lock().unwrap().len(), 1);

    // The process returns, reads what was sent to it before its cancel,
    // and ends; then the shard moves, and the key's next message starts
    // its process on node 2.
    open.send(()).unwrap();
    wait_until("node 2 to take the key's shard", WAIT, || {
        two.sharding.stats().shards_held == others + 1
    });
    send(&one, 2);
    wait_until("the last message to be read", WAIT, || {
        log.seen.lock().unwrap().len() == 3
    });
    let seen = log.seen.lock().unwrap().clone();
    let read: Vec<(u64, u32)> = seen.iter().map(|s| (s.add.n, s.node)).collect();
    assert_eq!(read, [(0, 1), (1, 1), (2, 2)], "{seen:?}");
    assert!(seen[1].incarnation < seen[2].incarnation);
    assert!(!log.doubled.load(Ordering::Relaxed));
    one.scheduler.shutdown(Duration::from_millis(500));
    two.scheduler.shutdown(Duration::from_millis(500));
}

#[test]
fn a_node_cut_off_past_its_lease_never_steps_a_key_beside_its_new_holder() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let lease = Duration::from_millis(1500);
    let log = Arc::new(Log::default());
    let config = ShardingConfig::new().shards(16);
    let proxy = FaultyProxy::start(server.port);
    let one = keyed_node_leased(&server.url(), 1, config.clone(), &log, lease);
    let two = keyed_node_leased(&proxy.url(), 2, config, &log, lease);
    settled(&[&one, &two], 16);

    // A key of node 2 whose process blocks in its first step (user code
    // may), with two more messages queued behind it while node 2's lease
    // is good.
    let key = keys(400)
        .into_iter()
        .find(|k| two.tally.placed_on(k) == Some(2))
        .unwrap();
    let (open, gate) = std::sync::mpsc::channel::<()>();
    *log.gate.lock().unwrap() = Some((key.clone(), gate));
    let send = |node: &KeyedNode, from, n| {
        node.tally
            .send(&node.scheduler, &key, Add { from, n })
            .unwrap()
    };
    send(&two, 2, 0);
    wait_until("the first message to be read", WAIT, || {
        log.seen.lock().unwrap().len() == 1
    });
    send(&two, 2, 1);
    send(&two, 2, 2);

    // Node 2 is cut off; node 1 sees it down, waits out its lease, takes
    // its shards, and starts the key's process anew.
    proxy.stall(Duration::from_secs(3600));
    let cut = Instant::now();
    wait_until("node 1 to hold every shard", WAIT, || {
        one.sharding.stats().shards_held == 16
    });
    eprintln!(
        "node 1 held node 2's shards {:?} after the cut",
        cut.elapsed()
    );
    send(&one, 1, 3);
    wait_until("node 1's process to read", WAIT, || {
        log.seen.lock().unwrap().len() == 2
    });

    // Node 2's old process wakes up with two messages in its mailbox and
    // its lease run out: it must not read them. It waits, unread, while
    // node 2 cannot tell whether the lease was lost or only late.
    open.send(()).unwrap();
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(log.seen.lock().unwrap().len(), 2, "node 2 read, cut off");

    // Node 2 comes back and learns it lost its shards: the old process is
    // fenced with its two messages, and node 2's later sends reach the
    // key's one process, wherever the shard is by then.
    proxy.stall(Duration::ZERO);
    wait_until(
        "node 2's old process to be fenced, or to read",
        WAIT,
        || two.sharding.stats().fenced_processes >= 1 || log.seen.lock().unwrap().len() > 2,
    );
    assert_eq!(two.sharding.stats().fenced, 2, "{:?}", two.sharding.stats());
    wait_until("node 2 to learn it lost its shards", WAIT, || {
        two.sharding.stats().shards_lost > 0
    });
    send(&two, 2, 4);
    wait_until("the last message to be read", WAIT, || {
        log.seen.lock().unwrap().len() == 3
    });
    std::thread::sleep(Duration::from_millis(300));

    let seen = log.seen.lock().unwrap().clone();
    let read: Vec<u64> = seen.iter().map(|s| s.add.n).collect();
    assert_eq!(
        read,
        [0, 3, 4],
        "the fenced messages 1 and 2 never read: {seen:?}"
    );
    assert_eq!(seen[0].node, 2);
    assert_eq!(seen[1].node, 1);
    // Once a later process of the key read, no earlier one did.
    assert!(
        seen.windows(2)
            .all(|w| w[0].incarnation <= w[1].incarnation),
        "{seen:?}"
    );
    one.scheduler.shutdown(Duration::from_millis(500));
    two.scheduler.shutdown(Duration::from_millis(500));
}

/// A message that reaches a shard's holder after its lease ran out, and
/// waits there while the holder cannot know whether it still holds the
/// shard, is counted fenced once the holder learns it lost the shard: it
/// is not passed on to the next holder, where it would be read after a
/// later message of the same sender that the next holder read first.
#[test]
fn a_message_that_reached_a_lapsed_holder_is_fenced_not_read_after_a_later_one() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let lease = Duration::from_millis(1500);
    let log = Arc::new(Log::default());
    let config = ShardingConfig::new().shards(16);
    let proxy = FaultyProxy::start(server.port);
    let one = keyed_node_leased(&server.url(), 1, config.clone(), &log, lease);
    let two = keyed_node_leased(&proxy.url(), 2, config, &log, lease);
    settled(&[&one, &two], 16);

    let key = keys(400)
        .into_iter()
        .find(|k| two.tally.placed_on(k) == Some(2))
        .unwrap();
    let send = |n| {
        one.tally
            .send(&one.scheduler, &key, Add { from: 1, n })
            .unwrap()
    };
    send(0);
    wait_until("node 2's process to read the first message", WAIT, || {
        log.seen.lock().unwrap().len() == 1
    });

    // Node 2 is cut off: it still hears the server, so node 1's next
    // message reaches it, but its renewals do not go out. Past its lease
    // (1.5 s, a quarter kept back) and before node 1 sees it down (4 s),
    // node 1 sends again through it: node 2 keeps the message, not sure
    // whether the shard is still its own.
    proxy.stall(Duration::from_secs(3600));
    std::thread::sleep(lease);
    send(1);
    wait_until("node 2 to keep the message it is not sure of", WAIT, || {
        two.sharding.stats().buffered == 1
    });
    assert_eq!(log.seen.lock().unwrap().len(), 1, "read past the lease");

    // Node 1 sees node 2 down, takes its shards, and reads a later message.
    wait_until("node 1 to hold every shard", WAIT, || {
        one.sharding.stats().shards_held == 16
    });
    send(2);
    wait_until("node 1's process to read", WAIT, || {
        log.seen.lock().unwrap().len() == 2
    });

    // Node 2 comes back and learns it lost the shard: what it kept is
    // counted fenced, not read after message 2.
    proxy.stall(Duration::ZERO);
    wait_until("node 2 to learn it lost its shards", WAIT, || {
        two.sharding.stats().shards_lost > 0
    });
    wait_until("node 2 to count what it kept fenced", WAIT, || {
        two.sharding.stats().buffered == 0
    });
    send(3);
    wait_until("the last message to be read", WAIT, || {
        log.seen.lock().unwrap().iter().any(|s| s.add.n == 3)
    });
    std::thread::sleep(Duration::from_millis(500));
    let read: Vec<u64> = log.seen.lock().unwrap().iter().map(|s| s.add.n).collect();
    assert_eq!(read, [0, 2, 3], "message 1 was read after message 2");
    assert_eq!(two.sharding.stats().fenced, 1, "{:?}", two.sharding.stats());
    one.scheduler.shutdown(Duration::from_millis(500));
    two.scheduler.shutdown(Duration::from_millis(500));
}

/// Messages for a key whose holder dies with them unread are counted by
/// their sender: the shard's host passes each on to the key's process
/// with the transport's receipt, so the holder confirms a message only
/// once the process has taken it. Here the key's process blocks in its
/// first step (user code may) while 40 more messages reach its mailbox,
/// and then node 2 is cut off for good: node 1 counts the 40 as
/// `unconfirmed`. Confirmed when the host read them, they were counted
/// nowhere (0).
#[test]
fn keyed_messages_unread_on_a_holder_that_dies_are_counted_by_their_sender() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let log = Arc::new(Log::default());
    let config = ShardingConfig::new().shards(16);
    let proxy = FaultyProxy::start(server.port);
    let one = keyed_node(&server.url(), 1, config.clone(), &log);
    let two = keyed_node(&proxy.url(), 2, config, &log);
    settled(&[&one, &two], 16);
    let key = keys(400)
        .into_iter()
        .find(|k| one.tally.placed_on(k) == Some(2))
        .unwrap();
    let (open, gate) = std::sync::mpsc::channel::<()>();
    *log.gate.lock().unwrap() = Some((key.clone(), gate));
    let send = |n| {
        one.tally
            .send(&one.scheduler, &key, Add { from: 1, n })
            .unwrap()
    };
    send(0);
    wait_until("the first message to be read", WAIT, || {
        log.seen.lock().unwrap().len() == 1
    });
    const UNREAD: u64 = 40;
    for n in 1..=UNREAD {
        send(n);
    }
    // Every frame reached node 2, and a few heartbeats confirm what its
    // processes took (the first message) before the cut.
    wait_until("node 2 to have every message", WAIT, || {
        two.transport.stats().delivered > UNREAD
    });
    std::thread::sleep(HEARTBEAT * 4);
    proxy.kill();
    wait_until("node 1 to declare node 2 down", WAIT, || {
        one.transport.stats().nodes_down >= 1
    });
    let s1 = one.transport.stats();
    assert_eq!(log.seen.lock().unwrap().len(), 1, "the rest stayed unread");
    assert!(
        s1.unconfirmed >= UNREAD,
        "{} messages unread on the dead holder were counted nowhere: {s1:?}",
        UNREAD.saturating_sub(s1.unconfirmed)
    );
    eprintln!(
        "a holder died with {UNREAD} keyed messages unread: node 1 counted {} unconfirmed",
        s1.unconfirmed
    );
    drop(open);
    one.scheduler.shutdown(Duration::from_millis(500));
    two.scheduler.shutdown(Duration::from_millis(500));
}
