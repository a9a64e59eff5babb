//! Keyed processes whose holder's lease runs out, tested against what
//! `docs/guide/distributed.md` promises (section "Keyed processes",
//! bullets "What reached a holder after its lease ran out", "Order" and
//! "At most one live process per key"), written from the guide alone.
//!
//! Node 2 sits behind a `FaultyProxy`: stalled, its bytes to the server are
//! held (its renewals and heartbeats do not go out) while what the server
//! sends it still arrives, so other nodes' messages for its shards keep
//! reaching it after its lease ran out.

mod support;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use relay_nats::{Keyed, NatsTransport, Sharded, Sharding, ShardingConfig};
use sched::actor::AskError;
use sched::prelude::*;
use serde::{Deserialize, Serialize};
use support::*;

const KIND: &str = "lapse";
/// The name lease of every node here (the guide's tests use 1.5 s too).
const LEASE: Duration = Duration::from_millis(1500);
const SHARDS: u64 = 16;
/// The bound of every wait.
const WAIT: Duration = Duration::from_secs(30);
/// Between two rounds of a sender (one message to each key a round).
const PACE: Duration = Duration::from_millis(20);

/// A numbered message from sender (node) `from`.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Add {
    from: u32,
    n: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum What {
    Add(Add),
    /// A question `Ping(n)`, answered.
    Ask(u64),
}

/// One reading, by one process (an incarnation) of a key, on a node.
#[derive(Debug, Clone)]
struct Read {
    key: String,
    node: u32,
    incarnation: u64,
    what: What,
    /// Since the log was made.
    at: Duration,
}

/// What every node's key processes write to: one log for the cluster.
struct Log {
    start: Instant,
    reads: Mutex<Vec<Read>>,
    incarnations: AtomicU64,
    /// Processes of a key in a step right now: more than one is the fault.
    stepping: Mutex<HashMap<String, u32>>,
    beside: Mutex<Vec<String>>,
}

impl Log {
    fn new() -> Arc<Log> {
        Arc::new(Log {
            start: Instant::now(),
            reads: Mutex::new(Vec::new()),
            incarnations: AtomicU64::new(0),
            stepping: Mutex::new(HashMap::new()),
            beside: Mutex::new(Vec::new()),
        })
    }

    fn now(&self) -> Duration {
        self.start.elapsed()
    }

    fn reads(&self) -> Vec<Read> {
        self.reads.lock().unwrap().clone()
    }
}

/// The process of one key: logs every message and question it reads,
/// answers `Ping(n)` with `Pong(n)`, finishes on cancel.
struct KeyProcess {
    key: String,
    node: u32,
    incarnation: u64,
    log: Arc<Log>,
}

/// Leaves the key's count of stepping processes however the step ends.
struct Stepping<'a>(&'a KeyProcess);

impl Drop for Stepping<'_> {
    fn drop(&mut self) {
        if let Some(n) = self.0.log.stepping.lock().unwrap().get_mut(&self.0.key) {
            *n -= 1;
        }
    }
}

impl Process for KeyProcess {
    type Done = ();
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        {
            let mut stepping = self.log.stepping.lock().unwrap();
            let n = stepping.entry(self.key.clone()).or_default();
            *n += 1;
            if *n > 1 {
                self.log.beside.lock().unwrap().push(format!(
                    "{}: incarnation {} on node {} stepped beside another at {:?}",
                    self.key,
                    self.incarnation,
                    self.node,
                    self.log.now()
                ));
            }
        }
        let _stepping = Stepping(self);
        for event in events {
            let what = match event {
                Event::Message(m) => What::Add(m.downcast::<Add>().expect("an Add")),
                Event::Request(request) => match request.payload::<Ping>().copied() {
                    Some(Ping(n)) => {
                        request.reply(Pong(n));
                        What::Ask(n)
                    }
                    None => continue,
                },
                Event::Cancel => {
                    out.finish(());
                    continue;
                }
                _ => continue,
            };
            self.log.reads.lock().unwrap().push(Read {
                key: self.key.clone(),
                node: self.node,
                incarnation: self.incarnation,
                what,
                at: self.log.now(),
            });
        }
        Ok(())
    }
}

struct KeyedNode {
    id: u32,
    scheduler: Scheduler,
    transport: Arc<NatsTransport>,
    sharding: Sharding,
    keyed: Sharded<Add>,
}

fn keyed_node(url: &str, id: u32, log: &Arc<Log>) -> KeyedNode {
    let (scheduler, transport) = node_configured(url, id, |c| {
        c.codec(codec().register::<Keyed<Add>>(KIND))
            .name_lease(LEASE)
    });
    let sharding = Sharding::new(
        &scheduler,
        Arc::clone(&transport),
        ShardingConfig::new().shards(SHARDS as u32),
    )
    .unwrap();
    let log = Arc::clone(log);
    let keyed = sharding
        .register(&scheduler, KIND, move |key: &str| KeyProcess {
            key: key.to_owned(),
            node: id,
            incarnation: log.incarnations.fetch_add(1, Ordering::Relaxed),
            log: Arc::clone(&log),
        })
        .unwrap();
    KeyedNode {
        id,
        scheduler,
        transport,
        sharding,
        keyed,
    }
}

/// Polls `done` every 10 ms until it holds or `timeout` passes.
fn within(timeout: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if done() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn stats_of(nodes: &[&KeyedNode]) -> String {
    nodes
        .iter()
        .map(|n| {
            format!(
                "\n  node {}: {:?}\n    transport: {:?}\n    engine dead letters: {}",
                n.id,
                n.sharding.stats(),
                n.transport.stats(),
                n.scheduler.stats().dead_letters
            )
        })
        .collect()
}

/// Waits until the nodes hold every shard between them, agree on where
/// every key is placed, and nothing waits in a buffer, for a whole second
/// (a moment's agreement can fall in the middle of a hand-off).
fn settled(nodes: &[&KeyedNode]) {
    let now_settled = || {
        let held: u64 = nodes.iter().map(|n| n.sharding.stats().shards_held).sum();
        let agree = (0..200).all(|k| {
            let key = format!("probe-{k}");
            let first = nodes[0].keyed.placed_on(&key);
            nodes.iter().all(|n| n.keyed.placed_on(&key) == first)
        });
        // Each holds what it places on itself: see `holds_its_own`.
        let own = nodes
            .iter()
            .all(|n| holds_its_own(n.id, KIND, &n.keyed, &n.sharding));
        held == SHARDS && agree && own && nodes.iter().all(|n| n.sharding.stats().buffered == 0)
    };
    let mut since: Option<Instant> = None;
    let ok = within(WAIT, || {
        if !now_settled() {
            since = None;
            return false;
        }
        since.get_or_insert_with(Instant::now).elapsed() >= Duration::from_secs(1)
    });
    assert!(
        ok,
        "the shards did not settle in {WAIT:?}:{}",
        stats_of(nodes)
    );
}

/// `count` keys placed on node `on`, each in a shard of its own.
fn keys_on(node: &KeyedNode, on: u32, count: usize) -> Vec<String> {
    let mut shards = HashSet::new();
    (0..10_000)
        .map(|i| format!("key-{i}"))
        .filter(|k| node.keyed.placed_on(k) == Some(on) && shards.insert(node.keyed.shard_of(k)))
        .take(count)
        .collect()
}

/// What one sender sent: accepted, and refused at the send (handed back),
/// each with when (since the test's log was made).
#[derive(Default)]
struct Sent {
    accepted: Vec<(String, Add)>,
    accepted_at: Vec<Duration>,
    refused: Vec<(String, Add, String, Duration)>,
    next: u64,
    /// The log's start, for the times.
    start: Option<Instant>,
}

impl Sent {
    fn new(log: &Log) -> Sent {
        Sent {
            start: Some(log.start),
            ..Sent::default()
        }
    }

    fn send(&mut self, node: &KeyedNode, key: &str) {
        let add = Add {
            from: node.id,
            n: self.next,
        };
        self.next += 1;
        let at = self.start.get_or_insert_with(Instant::now).elapsed();
        match node.keyed.send(&node.scheduler, key, add) {
            Ok(()) => {
                self.accepted.push((key.to_owned(), add));
                self.accepted_at.push(at);
            }
            Err(refused) => {
                assert_eq!(refused.message, add, "the refused message handed back");
                self.refused
                    .push((key.to_owned(), add, format!("{:?}", refused.reason), at))
            }
        }
    }
}

/// Sends a round (one message to each key) every `PACE` while `sending`.
fn send_while(node: &KeyedNode, keys: &[String], sending: &AtomicBool, sent: &mut Sent) {
    while sending.load(Ordering::Relaxed) {
        for key in keys {
            sent.send(node, key);
        }
        std::thread::sleep(PACE);
    }
}

/// Checks the log against what was sent: no message read twice, none read
/// that was not accepted, each sender's numbers read in increasing order
/// per key, the processes of a key reading in runs that never interleave
/// (a second live process would read inside another's run), and never two
/// steps of one key at once. Returns the number of messages read.
fn check_reads(log: &Log, sent: &[&Sent]) -> usize {
    let reads = log.reads();
    let dump = || {
        reads
            .iter()
            .map(|r| format!("{r:?}"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let accepted: HashSet<(&str, Add)> = sent
        .iter()
        .flat_map(|s| s.accepted.iter().map(|(k, a)| (k.as_str(), *a)))
        .collect();
    let mut unique = HashSet::new();
    for r in &reads {
        if let What::Add(add) = r.what {
            assert!(
                accepted.contains(&(r.key.as_str(), add)),
                "read a message never accepted: {r:?}"
            );
            assert!(unique.insert((r.key.clone(), add)), "read twice: {r:?}");
        }
    }
    let mut per_key: HashMap<&str, Vec<&Read>> = HashMap::new();
    for r in &reads {
        per_key.entry(&r.key).or_default().push(r);
    }
    for (key, reads_of_key) in &per_key {
        let mut last: HashMap<u32, u64> = HashMap::new();
        for r in reads_of_key {
            if let What::Add(add) = r.what {
                if let Some(&prev) = last.get(&add.from) {
                    assert!(
                        add.n > prev,
                        "{key}: sender {} read {} after {prev} (out of order): {r:?}\nall reads:\n{}",
                        add.from,
                        add.n,
                        dump()
                    );
                }
                last.insert(add.from, add.n);
            }
        }
        let mut runs: Vec<u64> = Vec::new();
        for r in reads_of_key {
            if runs.last() != Some(&r.incarnation) {
                assert!(
                    !runs.contains(&r.incarnation),
                    "{key}: incarnation {} read again after another process of the key read \
                     (two live processes): {r:?}\nall reads:\n{}",
                    r.incarnation,
                    dump()
                );
                runs.push(r.incarnation);
            }
        }
    }
    let beside = log.beside.lock().unwrap().clone();
    assert!(beside.is_empty(), "{beside:?}");
    unique.len()
}

/// No read by node `node` of `keys` in `[from, until)`: its lease cannot be
/// sure there (its last renewal reached the server before `from - LEASE`).
fn none_read_while_lapsed(log: &Log, node: u32, keys: &[String], from: Duration, until: Duration) {
    let late: Vec<Read> = log
        .reads()
        .into_iter()
        .filter(|r| r.node == node && keys.contains(&r.key) && r.at >= from && r.at < until)
        .collect();
    assert!(
        late.is_empty(),
        "node {node} read while cut off past its lease (from {from:?} to {until:?}): {late:?}"
    );
}

/// The accounting the guide promises: every accepted message is read once
/// or counted in some node's `ShardingStats::fenced` (or `refused`, for one
/// that waited and was refused later), never both. The guide names other
/// places a message may end, each counted, and what is missing must be at
/// most their sum:
/// - a fenced process's unread messages are counted `fenced`, "the rest of
///   its mailbox in the engine's dead letters" (`Stats::dead_letters`);
/// - a send that reached the transport as its node was declared down is
///   counted on the sender (`TransportStats::abandoned`, `publish_failed`);
/// - a frame a node sent one that had lost it, before that node's reset,
///   is dropped and counted there (`TransportStats::fenced`).
///
/// `ShardingStats::refused` counts the refusals at the send too (seen: one
/// refused send showed there), so only its excess over them is "refused
/// later". Waits (bounded) until the books balance or stop moving.
fn books_balance(what: &str, log: &Log, nodes: &[&KeyedNode], sent: &[&Sent]) {
    let accepted: u64 = sent.iter().map(|s| s.accepted.len() as u64).sum();
    let refused_at_send: Vec<_> = sent.iter().flat_map(|s| s.refused.iter()).collect();
    let counted = || {
        let read = log
            .reads()
            .iter()
            .filter(|r| matches!(r.what, What::Add(_)))
            .count() as u64;
        let stats: Vec<_> = nodes.iter().map(|n| n.sharding.stats()).collect();
        let fenced: u64 = stats.iter().map(|s| s.fenced).sum();
        let refused: u64 = stats.iter().map(|s| s.refused).sum::<u64>();
        (
            read,
            fenced,
            refused.saturating_sub(refused_at_send.len() as u64),
        )
    };
    let mut last = (counted(), Instant::now());
    within(WAIT, || {
        let now = counted();
        if now.0 + now.1 + now.2 >= accepted {
            return true;
        }
        if now != last.0 {
            last = (now, Instant::now());
        }
        last.1.elapsed() > Duration::from_secs(3)
    });
    // Anything late (counted twice, read after being counted) shows here.
    std::thread::sleep(Duration::from_millis(500));
    let (read, fenced, refused) = counted();
    let dead_letters: u64 = nodes.iter().map(|n| n.scheduler.stats().dead_letters).sum();
    let transport: u64 = nodes
        .iter()
        .map(|n| {
            let t = n.transport.stats();
            t.abandoned + t.publish_failed + t.fenced
        })
        .sum();
    let books = format!(
        "{what}: accepted {accepted}, refused at the send {}, read {read}, fenced {fenced}, \
         refused later {refused}; engine dead letters {dead_letters}, transport abandoned + \
         publish_failed + fenced {transport}{}\nrefused at the send: {refused_at_send:?}\n\
         accepted, not read (each sender's runs: key, numbers, sent at):\n{}",
        refused_at_send.len(),
        stats_of(nodes),
        unread(log, sent)
    );
    eprintln!("{books}");
    assert!(
        read + fenced + refused <= accepted,
        "more read and counted than sent (a message read and counted, or counted twice)\n{books}"
    );
    assert!(
        accepted - (read + fenced + refused) <= dead_letters + transport,
        "messages neither read nor counted\n{books}"
    );
}

/// The accepted messages no process read, as runs per sender and key.
fn unread(log: &Log, sent: &[&Sent]) -> String {
    let read: HashSet<(String, Add)> = log
        .reads()
        .into_iter()
        .filter_map(|r| match r.what {
            What::Add(a) => Some((r.key, a)),
            What::Ask(_) => None,
        })
        .collect();
    let mut out = String::new();
    for s in sent {
        let mut runs: HashMap<&str, Vec<(u64, Duration)>> = HashMap::new();
        for ((key, add), at) in s.accepted.iter().zip(&s.accepted_at) {
            if !read.contains(&(key.clone(), *add)) {
                runs.entry(key).or_default().push((add.n, *at));
            }
        }
        let mut keys: Vec<_> = runs.keys().copied().collect();
        keys.sort();
        for key in keys {
            let missing = &runs[key];
            let from = s.accepted.first().map_or(0, |(_, a)| a.from);
            let (first, last) = (missing[0], missing[missing.len() - 1]);
            out += &format!(
                "  from {from} to {key}: {} unread, n {}..={} sent {:?}..={:?}",
                missing.len(),
                first.0,
                last.0,
                first.1,
                last.1
            );
            // Unread messages outside one run of sends stand out.
            if missing.len() <= 20 {
                out += &format!(" {missing:?}");
            }
            out += "\n";
        }
    }
    out
}

fn shutdown(nodes: &[&KeyedNode]) {
    for n in nodes {
        n.scheduler.shutdown(Duration::from_millis(500));
    }
}

/// Node 2 holds four keys and is cut off (stalled) for good; nodes 1, 2
/// and 3 keep sending numbered messages to those keys (node 2's own wait
/// on node 2 too). Past node 2's lease they keep reaching node 2 (until
/// nodes 1 and 3 see it down), where they must wait; nodes 1 and 3 then
/// take the shards and read what follows.
/// When node 2 comes back and learns it lost the shards, what waited must
/// be counted fenced, never read: passed on, it would be read after later
/// numbers of its sender.
#[test]
fn what_reached_a_lapsed_holder_is_fenced_and_never_read_out_of_order_by_the_next() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let log = Log::new();
    let proxy = FaultyProxy::start(server.port);
    let one = keyed_node(&server.url(), 1, &log);
    let two = keyed_node(&proxy.url(), 2, &log);
    let three = keyed_node(&server.url(), 3, &log);
    let nodes = [&one, &two, &three];
    settled(&nodes);
    let keys = keys_on(&two, 2, 4);
    assert_eq!(keys.len(), 4);

    let sending = AtomicBool::new(true);
    let (mut sent1, mut sent2, mut sent3) = (Sent::new(&log), Sent::new(&log), Sent::new(&log));
    let (cut, took_over) = std::thread::scope(|s| {
        s.spawn(|| send_while(&one, &keys, &sending, &mut sent1));
        s.spawn(|| send_while(&two, &keys, &sending, &mut sent2));
        s.spawn(|| send_while(&three, &keys, &sending, &mut sent3));
        std::thread::sleep(Duration::from_millis(600));
        let cut = log.now();
        proxy.stall(Duration::from_secs(3600));
        let took_over = within(WAIT, || {
            one.sharding.stats().shards_held + three.sharding.stats().shards_held == SHARDS
        });
        eprintln!(
            "nodes 1 and 3 held every shard {:?} after the cut",
            log.now() - cut
        );
        // The next holders read a while.
        std::thread::sleep(Duration::from_millis(700));
        sending.store(false, Ordering::Relaxed);
        (cut, took_over)
    });
    assert!(
        took_over,
        "nodes 1 and 3 never took node 2's shards:{}",
        stats_of(&nodes)
    );
    let waiting = two.sharding.stats().buffered;
    eprintln!("waiting on node 2 while cut off: {waiting}");
    let back = log.now();
    proxy.stall(Duration::ZERO);
    eprintln!("node 2 cut off from {cut:?} to {back:?}");

    let learnt = within(WAIT, || two.sharding.stats().shards_lost > 0);
    assert!(
        learnt,
        "node 2 never learnt it lost its shards:{}",
        stats_of(&nodes)
    );
    // Node 2 takes its shards back (placement puts them there again).
    let back_on_two = within(WAIT, || {
        two.sharding.stats().shards_held >= keys.len() as u64
    });
    assert!(
        back_on_two,
        "node 2 never held its shards again:{}",
        stats_of(&nodes)
    );
    settled(&nodes);
    books_balance("a lapsed holder", &log, &nodes, &[&sent1, &sent2, &sent3]);
    assert!(
        two.sharding.stats().fenced > 0,
        "nothing reached node 2 past its lease and was fenced there:{}",
        stats_of(&nodes)
    );
    none_read_while_lapsed(
        &log,
        2,
        &keys,
        cut + LEASE + Duration::from_millis(250),
        back,
    );

    // No key is left stuck: one more message from every node is read.
    for key in &keys {
        sent1.send(&one, key);
        sent2.send(&two, key);
        sent3.send(&three, key);
    }
    let last: Vec<(String, Add)> = [&sent1, &sent2, &sent3]
        .iter()
        .flat_map(|s| s.accepted.iter().rev().take(keys.len()).cloned())
        .collect();
    let all_read = within(WAIT, || {
        let reads = log.reads();
        last.iter()
            .all(|(k, a)| reads.iter().any(|r| r.key == *k && r.what == What::Add(*a)))
    });
    assert!(
        all_read,
        "the last messages were not all read: {last:?}{}",
        stats_of(&nodes)
    );
    let read = check_reads(&log, &[&sent1, &sent2, &sent3]);
    eprintln!("{read} messages read in order, none twice");
    shutdown(&nodes);
}

/// Stalls of node 2 that outlast its lease by its own clock (and, the
/// longest, the server's) but not the failure detector's 4 s: nobody else
/// takes its shards, so a lease only late is renewed and what waited is
/// delivered in order, and a lease lost on the server is claimed again with
/// what waited fenced. Nodes 1, 2 and 3 all send. Nothing may be read
/// twice or out of order; since no node is declared down, no transport
/// loses a frame, and every accepted message is read or counted (`fenced`,
/// or for a fenced process's mailbox the engine's dead letters). A send
/// may be refused with its message back (node 2's own sends to a live
/// process of its own were refused `MailboxFull` while it was unsure).
#[test]
fn stalls_shorter_than_the_detector_lose_nothing_uncounted_and_keep_order() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let log = Log::new();
    let proxy = FaultyProxy::start(server.port);
    let one = keyed_node(&server.url(), 1, &log);
    let two = keyed_node(&proxy.url(), 2, &log);
    let three = keyed_node(&server.url(), 3, &log);
    let nodes = [&one, &two, &three];
    settled(&nodes);
    let mut keys = keys_on(&two, 2, 3);
    keys.extend(keys_on(&one, 1, 1));
    assert_eq!(keys.len(), 4);
    let on_two = &keys[..3];

    let sending = AtomicBool::new(true);
    let mut sent = [Sent::new(&log), Sent::new(&log), Sent::new(&log)];
    let mut windows = Vec::new();
    let mut max_waiting = Vec::new();
    std::thread::scope(|s| {
        for (node, sent) in nodes.iter().zip(sent.iter_mut()) {
            let (keys, sending) = (&keys, &sending);
            s.spawn(move || send_while(node, keys, sending, sent));
        }
        for stall in [1300, 1500, 1800, 2600].map(Duration::from_millis) {
            std::thread::sleep(Duration::from_millis(800));
            let before = two.sharding.stats();
            let start = log.now();
            proxy.stall(stall);
            let mut waiting = 0;
            while log.now() < start + stall {
                waiting = waiting.max(two.sharding.stats().buffered);
                std::thread::sleep(Duration::from_millis(5));
            }
            let end = log.now();
            max_waiting.push(waiting);
            let ok = within(WAIT, || {
                let held: u64 = nodes.iter().map(|n| n.sharding.stats().shards_held).sum();
                held == SHARDS && two.sharding.stats().buffered == 0
            });
            let after = two.sharding.stats();
            windows.push((start, end, after.shards_lost - before.shards_lost));
            eprintln!(
                "stall of {stall:?} ({start:?} to {end:?}): at most {waiting} waited on node 2; on node 2 since the \
                 stall: shards lost {}, processes fenced {}, messages fenced {}; settled again \
                 {:?} after",
                after.shards_lost - before.shards_lost,
                after.fenced_processes - before.fenced_processes,
                after.fenced - before.fenced,
                log.now() - end
            );
            if !ok {
                sending.store(false, Ordering::Relaxed);
                panic!(
                    "node 2's shards not held again after a {stall:?} stall:{}",
                    stats_of(&nodes)
                );
            }
        }
        std::thread::sleep(Duration::from_millis(500));
        sending.store(false, Ordering::Relaxed);
    });
    settled(&nodes);
    let [sent1, sent2, sent3] = &sent;
    let downs: u64 = nodes.iter().map(|n| n.transport.stats().nodes_down).sum();
    // The premise: stalls shorter than the detector's 4 s are no death.
    // Then no transport abandons or fences a frame, and the books balance
    // exactly (`books_balance` allows only `abandoned`, `publish_failed`
    // and the transports' `fenced`, all 0 then: checked below).
    assert_eq!(
        downs,
        0,
        "a stall shorter than the detector's bound was taken for a death:{}",
        stats_of(&nodes)
    );
    let transport_losses: u64 = nodes
        .iter()
        .map(|n| {
            let t = n.transport.stats();
            t.abandoned + t.publish_failed + t.fenced + t.lost
        })
        .sum();
    assert_eq!(transport_losses, 0, "{}", stats_of(&nodes));
    books_balance("short stalls", &log, &nodes, &[sent1, sent2, sent3]);
    let read = check_reads(&log, &[sent1, sent2, sent3]);
    eprintln!("{read} messages read in order, none twice");
    // Past its lease by its own clock, node 2 must not read: what other
    // nodes sent it then waited (or was fenced).
    for &(start, end, _) in &windows[1..] {
        none_read_while_lapsed(
            &log,
            2,
            on_two,
            start + LEASE + Duration::from_millis(250),
            end,
        );
    }
    // A lease only late, renewed: what other nodes sent node 2 while it
    // could not be sure waited in its buffer and is delivered. Node 2 is
    // surely unsure 1.125 s into a stall (its last renewal went out at most
    // a third of the lease before; a quarter of the lease kept back); a
    // message sent from 1.25 s on reached it unsure (a message that reached
    // a process's mailbox before may be fenced with the process, as the
    // guide says, so earlier ones are not checked).
    let reads: HashSet<(String, Add)> = log
        .reads()
        .into_iter()
        .filter_map(|r| match r.what {
            What::Add(a) => Some((r.key, a)),
            What::Ask(_) => None,
        })
        .collect();
    for &(start, end, lost) in &windows {
        let mut unread_by: HashMap<u32, Vec<(String, u64, Duration)>> = HashMap::new();
        for s in [sent1, sent2, sent3] {
            for ((key, add), &at) in s.accepted.iter().zip(&s.accepted_at) {
                if at >= start && at < end && !reads.contains(&(key.clone(), *add)) {
                    unread_by
                        .entry(add.from)
                        .or_default()
                        .push((key.clone(), add.n, at));
                }
            }
        }
        let counts: Vec<(u32, usize)> = (1..=3)
            .map(|f| (f, unread_by.get(&f).map_or(0, Vec::len)))
            .collect();
        eprintln!(
            "stall {start:?} to {end:?}: shards lost {lost}, unread sent meanwhile by sender {counts:?}"
        );
        if lost == 0 {
            let late: Vec<_> = [1, 3]
                .iter()
                .flat_map(|f| unread_by.get(f).into_iter().flatten())
                .filter(|(key, _, at)| {
                    on_two.contains(key) && *at >= start + Duration::from_millis(1250)
                })
                .collect();
            assert!(
                late.is_empty(),
                "node 2's lease was only late (no shard lost in the stall {start:?} to {end:?}), \
                 yet messages other nodes sent it while it was unsure were not delivered: \
                 {late:?}{}",
                stats_of(&nodes)
            );
        }
    }
    assert!(
        max_waiting[1..].iter().any(|&w| w > 0) || two.sharding.stats().fenced > 0,
        "nothing waited on node 2 past its lease, nothing fenced: waiting {max_waiting:?}{}",
        stats_of(&nodes)
    );
    shutdown(&nodes);
}

/// Asks `key` `Ping(n)` from `node`: the reply to wait on (a refusal at
/// the ask fails the test: no buffer is full here, and a question is
/// never `MailboxFull`).
fn ask(node: &KeyedNode, key: &str, n: u64) -> sched::actor::Reply<Pong> {
    node.keyed
        .ask(&node.scheduler, key, Ping(n))
        .unwrap_or_else(|refused| panic!("ask {n} from node {} refused: {refused:?}", node.id))
}

/// Questions that reach a holder past its lease end within a bound: with
/// `NodeDown` when the asker's node loses the holder, or fenced (`Unread`
/// or `NoReply`) when the holder learns it lost the shard; never answered
/// by the lapsed holder, nor by the next one, never left waiting. (A
/// question the asker's node kept, having seen the name's lease gone, goes
/// to the next claim and is answered.)
#[test]
fn an_ask_that_reaches_a_lapsed_holder_ends_within_a_bound() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let log = Log::new();
    let proxy = FaultyProxy::start(server.port);
    let one = keyed_node(&server.url(), 1, &log);
    let two = keyed_node(&proxy.url(), 2, &log);
    let nodes = [&one, &two];
    settled(&nodes);
    let keys = keys_on(&two, 2, 1);
    let key = &keys[0];
    let bound = Duration::from_secs(15);
    let answered = |node: &KeyedNode, n: u64| {
        let outcome = ask(node, key, n).wait_timeout(Duration::from_secs(10));
        assert_eq!(
            outcome.as_ref().ok(),
            Some(&Pong(n)),
            "ask {n} from node {}: {outcome:?}{}",
            node.id,
            stats_of(&nodes)
        );
    };
    answered(&one, 0);

    // Cut off for good: past its lease, node 1 asks (the question reaches
    // node 2 and waits there), and so does node 2 itself.
    let cut = log.now();
    proxy.stall(Duration::from_secs(3600));
    std::thread::sleep(LEASE + Duration::from_millis(300));
    let asked = Instant::now();
    let mut from_one = ask(&one, key, 1);
    let mut from_two = ask(&two, key, 2);
    let outcome_one = from_one.wait_timeout(bound + Duration::from_secs(5));
    let took_one = asked.elapsed();
    eprintln!("ask from node 1 to the lapsed holder: {outcome_one:?} after {took_one:?}");
    assert!(
        outcome_one.is_err() && took_one < bound,
        "an ask that reached the lapsed holder (node 2) from node 1 ended {outcome_one:?} after \
         {took_one:?} (bound {bound:?}; node 1 declares node 2 down 4 s after the cut){}",
        stats_of(&nodes)
    );
    let took_over = within(WAIT, || one.sharding.stats().shards_held == SHARDS);
    assert!(
        took_over,
        "node 1 never took node 2's shards:{}",
        stats_of(&nodes)
    );
    answered(&one, 3);
    let back = log.now();
    let unstalled = Instant::now();
    proxy.stall(Duration::ZERO);
    let outcome_two = from_two.wait_timeout(bound + Duration::from_secs(5));
    let took_two = unstalled.elapsed();
    eprintln!(
        "node 2's own ask to its lapsed shard: {outcome_two:?}, {took_two:?} after it came back"
    );
    assert!(
        outcome_two.is_err() && took_two < bound,
        "node 2's own ask, waiting on node 2 past its lease, ended {outcome_two:?} {took_two:?} \
         after node 2 came back (bound {bound:?}; node 1 holds the shard, so node 2 lost it){}",
        stats_of(&nodes)
    );
    none_read_while_lapsed(
        &log,
        2,
        &keys,
        cut + LEASE + Duration::from_millis(250),
        back,
    );
    settled(&nodes);
    answered(&two, 4);

    // Cut off past the server's lease (1.5 s, rounded up to 2 s) but not
    // the detector's 4 s: nobody takes the shard, node 2 finds its lease
    // gone when it comes back (unless its renewal, late, still finds it:
    // the server drops an entry a moment after its time to live). A
    // question that reached it meanwhile ends; if node 2 lost every shard
    // it held, the key's among them, the question was fenced and is never
    // answered.
    let before = two.sharding.stats();
    let cut = log.now();
    let stall = Duration::from_millis(2600);
    proxy.stall(stall);
    std::thread::sleep(LEASE + Duration::from_millis(200));
    let published = one.transport.stats().published;
    let asked = Instant::now();
    let asked_at = log.now();
    let from_one = ask(&one, key, 5);
    let from_two = ask(&two, key, 6);
    // Where the questions wait until node 2 comes back: node 1 keeps one
    // it has no holder for, node 2 the ones that reached it.
    let (mut waiting_one, mut waiting_two) = (0, 0);
    while log.now() < cut + stall {
        waiting_one = waiting_one.max(one.sharding.stats().buffered);
        waiting_two = waiting_two.max(two.sharding.stats().buffered);
        std::thread::sleep(Duration::from_millis(5));
    }
    let sent_on = one.transport.stats().published - published;
    eprintln!(
        "short stall from {cut:?} to {:?}, asked at {asked_at:?}: waiting on node 1 at most \
         {waiting_one}, on node 2 {waiting_two}; node 1 published {sent_on} frames meanwhile",
        cut + stall
    );
    let mut outcomes = Vec::new();
    for (who, mut reply) in [(1, from_one), (2, from_two)] {
        let outcome = reply.wait_timeout(bound + Duration::from_secs(5));
        let took = asked.elapsed();
        eprintln!(
            "ask from node {who} past node 2's lease (short stall): {outcome:?} after {took:?}"
        );
        assert!(
            took < bound && !matches!(outcome, Err(AskError::TimedOut)),
            "an ask from node {who} that waited on a lapsed holder ended {outcome:?} after \
             {took:?} (bound {bound:?}){}",
            stats_of(&nodes)
        );
        outcomes.push((who, outcome));
    }
    let after = two.sharding.stats();
    let lost = after.shards_lost - before.shards_lost;
    let answered_by: Vec<Read> = log
        .reads()
        .into_iter()
        .filter(|r| matches!(r.what, What::Ask(5 | 6)))
        .collect();
    eprintln!(
        "short stall: node 2 held {} shards, lost {lost}; questions 5 and 6 read: {answered_by:?}",
        before.shards_held
    );
    // Node 2 lost every shard it held, the key's among them: a question
    // that waited there must be fenced, never answered. Node 2's own did;
    // node 1's did if node 1 published it during the stall (a node 1 that
    // saw the name's lease gone keeps the question itself, and sends it to
    // the next claim: answered, rightly).
    if lost >= before.shards_held {
        for (who, outcome) in &outcomes {
            let n = if *who == 1 { 5 } else { 6 };
            let reached_two = *who == 2 || sent_on > 0;
            assert!(
                !reached_two || (outcome.is_err() && answered_by.iter().all(|r| r.what != What::Ask(n))),
                "node 2 lost every shard it held (the key's too), yet question {n} from node {who}, \
                 which waited there (node 1 published {sent_on} frames during the stall; at most \
                 {waiting_two} waited on node 2), was answered, not fenced: {outcome:?}, \
                 read {answered_by:?}{}",
                stats_of(&nodes)
            );
        }
    }
    none_read_while_lapsed(
        &log,
        2,
        &keys,
        cut + LEASE + Duration::from_millis(250),
        cut + stall,
    );
    settled(&nodes);
    answered(&one, 7);
    answered(&two, 8);
    check_reads(&log, &[]);
    // Every question read was answered once: none read twice.
    let mut asks = HashSet::new();
    for r in log.reads() {
        if let What::Ask(n) = r.what {
            assert!(asks.insert(n), "question {n} read twice: {:?}", log.reads());
        }
    }
    shutdown(&nodes);
}
