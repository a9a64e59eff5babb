//! Keyed processes tested from their documentation only (the guide's
//! "Keyed processes" section and the rustdoc of `Sharding`, `Sharded`,
//! `ShardingConfig`, `ShardingStats`, `Refused`), trying to break what
//! they promise in ways `keyed.rs` does not: first sends of one key from
//! many threads and nodes at once while the nodes are still placing their
//! shards; the buffer bound, both while a shard has no holder and while a
//! key's process is stopping; order through a buffer and from a step;
//! messages sent right at the passivation moment; a node that leaves.

mod support;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use relay_nats::{Keyed, NatsTransport, Refused, RefusedReason, Sharded, Sharding, ShardingConfig};
use sched::prelude::*;
use serde::{Deserialize, Serialize};
use support::*;

const WAIT: Duration = Duration::from_secs(60);
/// The first kind, registered on every node when it starts.
const ACCT: &str = "acct";
/// A second kind, registered later (see the order test).
const LATE: &str = "late";

/// One numbered message from sender `from`.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Msg {
    from: u64,
    n: u64,
}

/// The second kind's message: a `Msg` under another type (one codec tag
/// per `Keyed<M>`).
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
struct Late(Msg);

/// One reading of a message by one incarnation of a key's process.
#[derive(Debug, Clone)]
struct Read {
    kind: &'static str,
    key: String,
    node: u32,
    incarnation: u64,
    msg: Msg,
}

/// What every node's keyed processes write to: one book for the cluster.
#[derive(Default)]
struct Book {
    reads: Mutex<Vec<Read>>,
    incarnations: AtomicU64,
    /// Processes per (kind, key) made and not yet dropped.
    live: Mutex<HashMap<(&'static str, String), u32>>,
    /// Processes per (kind, key) inside a step now.
    stepping: Mutex<HashMap<(&'static str, String), u32>>,
    /// Every moment a key had two live (or two stepping) processes.
    violations: Mutex<Vec<String>>,
    /// `Event::Cancel`s seen by keyed processes.
    cancels: AtomicU64,
    /// A key whose process blocks in the step that reads its first
    /// message, until told.
    gate: Mutex<Option<(String, std::sync::mpsc::Receiver<()>)>>,
    /// Sends refused from inside a step (none expected).
    step_refusals: AtomicU64,
}

impl Book {
    fn reads(&self) -> Vec<Read> {
        self.reads.lock().unwrap().clone()
    }

    fn read_count(&self) -> usize {
        self.reads.lock().unwrap().len()
    }

    fn violations(&self) -> Vec<String> {
        self.violations.lock().unwrap().clone()
    }

    fn all_ended(&self) -> bool {
        self.live.lock().unwrap().values().all(|n| *n == 0)
    }
}

/// The process of one key: books what it reads, finishes on cancel.
struct Keeper {
    kind: &'static str,
    key: String,
    node: u32,
    incarnation: u64,
    book: Arc<Book>,
}

impl Keeper {
    fn new(kind: &'static str, key: &str, node: u32, book: &Arc<Book>) -> Keeper {
        let incarnation = book.incarnations.fetch_add(1, Ordering::SeqCst);
        let mut live = book.live.lock().unwrap();
        let n = live.entry((kind, key.to_owned())).or_default();
        *n += 1;
        if *n > 1 {
            book.violations.lock().unwrap().push(format!(
                "{kind}/{key}: {n} live processes (incarnation {incarnation} made on node {node})"
            ));
        }
        Keeper {
            kind,
            key: key.to_owned(),
            node,
            incarnation,
            book: Arc::clone(book),
        }
    }
}

impl Drop for Keeper {
    fn drop(&mut self) {
        let mut live = self.book.live.lock().unwrap();
        if let Some(n) = live.get_mut(&(self.kind, self.key.clone())) {
            *n -= 1;
        }
    }
}

impl Process for Keeper {
    type Done = ();
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        let id = (self.kind, self.key.clone());
        {
            let mut stepping = self.book.stepping.lock().unwrap();
            let n = stepping.entry(id.clone()).or_default();
            *n += 1;
            if *n > 1 {
                self.book.violations.lock().unwrap().push(format!(
                    "{}/{}: {n} processes stepping at once (node {})",
                    self.kind, self.key, self.node
                ));
            }
        }
        for event in events {
            match event {
                Event::Message(m) => {
                    let msg = if let Some(msg) = m.payload::<Msg>() {
                        *msg
                    } else if let Some(Late(msg)) = m.payload::<Late>() {
                        *msg
                    } else {
                        panic!("{}/{}: a message of another type", self.kind, self.key);
                    };
                    self.book.reads.lock().unwrap().push(Read {
                        kind: self.kind,
                        key: self.key.clone(),
                        node: self.node,
                        incarnation: self.incarnation,
                        msg,
                    });
                    let gate = {
                        let mut gate = self.book.gate.lock().unwrap();
                        match &*gate {
                            Some((key, _)) if *key == self.key => gate.take(),
                            _ => None,
                        }
                    };
                    if let Some((_, gate)) = gate {
                        let _ = gate.recv();
                    }
                }
                Event::Cancel => {
                    self.book.cancels.fetch_add(1, Ordering::SeqCst);
                    out.finish(());
                }
                _ => {}
            }
        }
        if let Some(n) = self.book.stepping.lock().unwrap().get_mut(&id) {
            *n -= 1;
        }
        Ok(())
    }
}

struct KeyedNode {
    node: u32,
    scheduler: Scheduler,
    transport: Arc<NatsTransport>,
    sharding: Sharding,
    acct: Sharded<Msg>,
}

fn keyed_node(url: &str, node: u32, config: ShardingConfig, book: &Arc<Book>) -> KeyedNode {
    keyed_node_beating(url, node, config, book, HEARTBEAT)
}

/// [`keyed_node`] with heartbeats every `beat`: its host waits two of
/// them before it places and claims anything.
fn keyed_node_beating(
    url: &str,
    node: u32,
    config: ShardingConfig,
    book: &Arc<Book>,
    beat: Duration,
) -> KeyedNode {
    let (scheduler, transport) = node_configured(url, node, |c| {
        c.codec(
            codec()
                .register::<Keyed<Msg>>(ACCT)
                .register::<Keyed<Late>>(LATE),
        )
        .failure_detector(beat, DOWN_AFTER)
    });
    let sharding = Sharding::new(&scheduler, Arc::clone(&transport), config).unwrap();
    let book = Arc::clone(book);
    let acct = sharding
        .register(&scheduler, ACCT, move |key: &str| {
            Keeper::new(ACCT, key, node, &book)
        })
        .unwrap();
    KeyedNode {
        node,
        scheduler,
        transport,
        sharding,
        acct,
    }
}

fn register_late(node: &KeyedNode, book: &Arc<Book>) -> Sharded<Late> {
    let book = Arc::clone(book);
    let n = node.node;
    node.sharding
        .register(&node.scheduler, LATE, move |key: &str| {
            Keeper::new(LATE, key, n, &book)
        })
        .unwrap()
}

/// Waits until the nodes hold `shards` shards between them (in all
/// kinds), agree on placement, and buffer nothing.
fn settled(nodes: &[&KeyedNode], shards: u64) {
    wait_until("the shards to settle", WAIT, || {
        let held: u64 = nodes.iter().map(|n| n.sharding.stats().shards_held).sum();
        let agree = (0..200).all(|k| {
            let key = format!("probe-{k}");
            let first = nodes[0].acct.placed_on(&key);
            nodes.iter().all(|n| n.acct.placed_on(&key) == first)
        });
        // Each holds what it places on itself: see `holds_its_own`.
        let own = nodes
            .iter()
            .all(|n| holds_its_own(n.node, ACCT, &n.acct, &n.sharding));
        held == shards && agree && own && nodes.iter().all(|n| n.sharding.stats().buffered == 0)
    });
}

/// Sends `message` to `key`, retrying while the buffer is full; any other
/// refusal fails the test. Returns how many times it was refused.
fn send_retrying<M: Send + 'static + std::fmt::Debug + PartialEq + Copy>(
    scheduler: &Scheduler,
    sharded: &Sharded<M>,
    key: &str,
    message: M,
) -> u64 {
    let mut refusals = 0;
    let mut message = message;
    loop {
        match sharded.send(scheduler, key, message) {
            Ok(()) => return refusals,
            Err(Refused {
                message: back,
                reason,
            }) => {
                assert_eq!(reason, RefusedReason::BufferFull, "{key}: {back:?}");
                assert_eq!(back, message, "the refused message is handed back as sent");
                message = back;
                refusals += 1;
                std::thread::sleep(Duration::from_millis(2));
            }
        }
    }
}

/// Every (kind, key, sender, number) read exactly once, and exactly the
/// ones in `sent`.
fn exactly_once(reads: &[Read], sent: &HashSet<(&'static str, String, Msg)>) {
    let mut once = HashSet::new();
    for r in reads {
        let id = (r.kind, r.key.clone(), r.msg);
        assert!(sent.contains(&id), "read but never accepted: {r:?}");
        assert!(once.insert(id), "read twice: {r:?}");
    }
    let missing: Vec<_> = sent.iter().filter(|id| !once.contains(*id)).collect();
    assert!(
        missing.is_empty(),
        "{} of {} accepted messages never read, e.g. {:?}",
        missing.len(),
        sent.len(),
        missing.iter().take(5).collect::<Vec<_>>()
    );
}

/// Per (kind, key, sender), the numbers in the order read.
fn per_sender_and_key(reads: &[Read]) -> BTreeMap<(&'static str, String, u64), Vec<u64>> {
    let mut out: BTreeMap<_, Vec<u64>> = BTreeMap::new();
    for r in reads {
        out.entry((r.kind, r.key.clone(), r.msg.from))
            .or_default()
            .push(r.msg.n);
    }
    out
}

fn keys(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

/// Polls `stats().buffered` of `sharding` until `stop`, returning the
/// largest value seen.
fn watch_buffered(sharding: &Sharding, stop: &AtomicBool) -> u64 {
    let mut max = 0;
    while !stop.load(Ordering::SeqCst) {
        max = max.max(sharding.stats().buffered);
        std::thread::yield_now();
    }
    max.max(sharding.stats().buffered)
}

/// Three nodes start together and, before their shards have settled,
/// nine threads (three per node) send to the same 60 keys at once; then,
/// settled, to 60 fresh keys at once from a barrier. No key ever has two
/// live processes or two stepping at once, every message is read exactly
/// once, and (settled) each key has one process, reads each thread's
/// messages in order, and was started exactly once. Then order through a
/// buffer and from a step, with a second kind (phase 3 below).
#[test]
fn first_sends_from_many_threads_and_nodes_make_one_process_per_key_in_order() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let book = Arc::new(Book::default());
    let config = ShardingConfig::new().shards(16);
    let nodes: Vec<KeyedNode> = (1..=3)
        .map(|n| keyed_node(&server.url(), n, config.clone(), &book))
        .collect();

    // Phase 1: the shards are still being claimed and handed between the
    // nodes as they hear of each other.
    let racing = keys("race", 60);
    let sent = Mutex::new(HashSet::new());
    let start = Barrier::new(9);
    std::thread::scope(|s| {
        for (i, node) in nodes.iter().enumerate() {
            for t in 0..3u64 {
                let (racing, sent, start) = (&racing, &sent, &start);
                let from = (i as u64) * 10 + t;
                s.spawn(move || {
                    start.wait();
                    for n in 1..=5u64 {
                        for key in racing {
                            let msg = Msg { from, n };
                            send_retrying(&node.scheduler, &node.acct, key, msg);
                            sent.lock().unwrap().insert((ACCT, key.clone(), msg));
                        }
                    }
                });
            }
        }
    });
    let sent = sent.into_inner().unwrap();
    assert_eq!(sent.len(), 9 * 5 * 60);
    wait_until("every racing message to be read", WAIT, || {
        book.read_count() >= sent.len()
    });
    settled(&nodes.iter().collect::<Vec<_>>(), 16);
    std::thread::sleep(Duration::from_millis(300));
    exactly_once(&book.reads(), &sent);
    assert_eq!(book.violations(), Vec::<String>::new());

    // Phase 2: settled; 60 fresh keys, every thread's first send at once.
    let started_before: u64 = nodes.iter().map(|n| n.sharding.stats().started).sum();
    let fresh = keys("fresh", 60);
    let fresh_sent = Mutex::new(HashSet::new());
    let start = Barrier::new(9);
    std::thread::scope(|s| {
        for (i, node) in nodes.iter().enumerate() {
            for t in 0..3u64 {
                let (fresh, fresh_sent, start) = (&fresh, &fresh_sent, &start);
                let from = 100 + (i as u64) * 10 + t;
                s.spawn(move || {
                    // Each thread walks the keys from another place, so
                    // first sends of one key come from several threads.
                    let offset = (i * 3 + t as usize) * 7;
                    start.wait();
                    for n in 1..=5u64 {
                        for k in 0..fresh.len() {
                            let key = &fresh[(k + offset) % fresh.len()];
                            let msg = Msg { from, n };
                            send_retrying(&node.scheduler, &node.acct, key, msg);
                            fresh_sent.lock().unwrap().insert((ACCT, key.clone(), msg));
                        }
                    }
                });
            }
        }
    });
    let fresh_sent = fresh_sent.into_inner().unwrap();
    let total = sent.len() + fresh_sent.len();
    wait_until("every fresh message to be read", WAIT, || {
        book.read_count() >= total
    });
    std::thread::sleep(Duration::from_millis(300));
    let reads = book.reads();
    let fresh_reads: Vec<Read> = reads
        .iter()
        .filter(|r| r.key.starts_with("fresh-"))
        .cloned()
        .collect();
    exactly_once(&fresh_reads, &fresh_sent);
    assert_eq!(book.violations(), Vec::<String>::new());
    let mut incarnations: HashMap<&str, HashSet<u64>> = HashMap::new();
    for r in &fresh_reads {
        incarnations
            .entry(&r.key)
            .or_default()
            .insert(r.incarnation);
        let placed = nodes[0].acct.placed_on(&r.key);
        assert_eq!(Some(r.node), placed, "{} ran off its shard's node", r.key);
    }
    for (key, inc) in &incarnations {
        assert_eq!(inc.len(), 1, "{key}: more than one process: {inc:?}");
    }
    for ((_, key, from), numbers) in per_sender_and_key(&fresh_reads) {
        assert_eq!(
            numbers,
            (1..=5).collect::<Vec<_>>(),
            "{key} from {from}: out of order"
        );
    }
    let started_after: u64 = nodes.iter().map(|n| n.sharding.stats().started).sum();
    assert_eq!(
        started_after - started_before,
        60,
        "one start per fresh key"
    );

    // Phase 3: order through a buffer and from a step. A second kind is
    // registered on each node in turn, each node's sender starting as soon
    // as its node has it (and a process on node 1 sending from its step),
    // so the first messages wait, for shards no node has claimed yet, and
    // later ones go straight on. The members do not change, so the shards
    // stay where they are first claimed: every sender's messages to every
    // key arrive in the order sent, none missing, each key one process.
    let ordered = keys("ord", 150);
    const PER_KEY: u64 = 12;
    let before = book.read_count();
    let hand_offs_before: u64 = nodes.iter().map(|n| n.sharding.stats().hand_offs).sum();
    let stop = AtomicBool::new(false);
    let max_buffered = std::thread::scope(|s| {
        let watcher = s.spawn(|| watch_buffered(&nodes[0].sharding, &stop));
        let mut senders = Vec::new();
        for (i, node) in nodes.iter().enumerate() {
            let late = register_late(node, &book);
            if i == 0 {
                node.scheduler
                    .spawn(StepSender {
                        late: late.clone(),
                        keys: ordered.clone(),
                        per_key: PER_KEY,
                        from: 1_000,
                        book: Arc::clone(&book),
                    })
                    .unwrap();
            }
            let ordered = &ordered;
            senders.push(s.spawn(move || {
                for n in 1..=PER_KEY {
                    for key in ordered {
                        let msg = Late(Msg {
                            from: 1_001 + i as u64,
                            n,
                        });
                        send_retrying(&node.scheduler, &late, key, msg);
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            }));
        }
        for sender in senders {
            sender.join().unwrap();
        }
        let total = before + 4 * PER_KEY as usize * ordered.len();
        wait_until("every message of the second kind to be read", WAIT, || {
            book.read_count() >= total
        });
        stop.store(true, Ordering::SeqCst);
        watcher.join().unwrap()
    });
    eprintln!("node 1 buffered up to {max_buffered} messages of the second kind");
    assert_eq!(book.step_refusals.load(Ordering::SeqCst), 0);
    std::thread::sleep(Duration::from_millis(300));
    let late_reads: Vec<Read> = book
        .reads()
        .into_iter()
        .filter(|r| r.kind == LATE)
        .collect();
    assert_eq!(late_reads.len(), 4 * PER_KEY as usize * ordered.len());
    let expected: Vec<u64> = (1..=PER_KEY).collect();
    let streams = per_sender_and_key(&late_reads);
    assert_eq!(streams.len(), 4 * ordered.len());
    for ((_, key, from), numbers) in streams {
        assert_eq!(numbers, expected, "{key} from sender {from}");
    }
    let mut processes: HashMap<&str, HashSet<(u32, u64)>> = HashMap::new();
    for r in &late_reads {
        processes
            .entry(&r.key)
            .or_default()
            .insert((r.node, r.incarnation));
    }
    for (key, p) in &processes {
        assert_eq!(p.len(), 1, "{key}: its shard moved or it restarted: {p:?}");
    }
    assert_eq!(book.violations(), Vec::<String>::new());
    assert!(
        max_buffered > 0,
        "nothing went through node 1's buffer: the phase did not test it"
    );
    let stats: Vec<_> = nodes.iter().map(|n| n.sharding.stats()).collect();
    let hand_offs: u64 = stats.iter().map(|s| s.hand_offs).sum();
    assert_eq!(hand_offs, hand_offs_before, "{stats:?}");
    assert_eq!(stats.iter().map(|s| s.refused).sum::<u64>(), 0, "{stats:?}");
    for node in &nodes {
        node.scheduler.shutdown(Duration::from_millis(500));
    }
}

/// With `max_buffered(5)`: sends while no holder is known yet (the node
/// has just started) beyond five are refused with `BufferFull`, the
/// message handed back; `buffered` never exceeds five; the accepted ones
/// are read exactly once and the refused never. Then the same while a
/// key's process is stopping (passivated while its step blocks): the
/// messages that wait for its next process count against the bound too,
/// and are read by the next process, in order.
#[test]
fn the_buffer_bound_refuses_with_the_message_back_and_is_never_exceeded() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    const BOUND: u64 = 5;
    let book = Arc::new(Book::default());
    let config = ShardingConfig::new()
        .shards(8)
        .max_buffered(BOUND)
        .passivate_after(Duration::from_millis(300));
    let stop = AtomicBool::new(false);
    // Slow heartbeats: the host claims nothing for two of them (2 s), so
    // the sends below come before any claim even on a machine that stalls
    // this thread for a while.
    let one = keyed_node_beating(&server.url(), 1, config, &book, SLOW_BEAT);
    let (max_buffered, accepted, refused) = std::thread::scope(|s| {
        let watcher = s.spawn(|| watch_buffered(&one.sharding, &stop));
        // At once, before any shard can have been claimed.
        let mut accepted = HashSet::new();
        let mut refused = Vec::new();
        for n in 1..=2u64 {
            for key in keys("k", 40) {
                let msg = Msg { from: 1, n };
                match one.acct.send(&one.scheduler, &key, msg) {
                    Ok(()) => {
                        accepted.insert((ACCT, key, msg));
                    }
                    Err(r) => {
                        assert_eq!(r.reason, RefusedReason::BufferFull, "{key}");
                        assert_eq!(r.message, msg, "handed back as sent");
                        refused.push((ACCT, key, msg));
                    }
                }
            }
        }
        settled(&[&one], 8);
        stop.store(true, Ordering::SeqCst);
        (watcher.join().unwrap(), accepted, refused)
    });
    eprintln!(
        "startup: {} accepted, {} refused, at most {max_buffered} buffered",
        accepted.len(),
        refused.len()
    );
    assert!(
        max_buffered <= BOUND,
        "buffered reached {max_buffered} > {BOUND}"
    );
    assert!(
        !refused.is_empty(),
        "80 sends before any shard was claimed, none refused"
    );
    assert!(accepted.len() as u64 >= 1);
    wait_until("the accepted messages to be read", WAIT, || {
        book.read_count() >= accepted.len()
    });
    std::thread::sleep(Duration::from_millis(200));
    exactly_once(&book.reads(), &accepted);
    assert_eq!(one.sharding.stats().refused, refused.len() as u64);

    // Phase 2: a key's process blocks in a step; it is passivated
    // meanwhile (its cancel waits behind the step); the key's messages
    // now wait for its next process, and count against the bound.
    wait_until("the startup keys to passivate", WAIT, || {
        one.sharding.stats().keys_live == 0
    });
    let passivated = one.sharding.stats().passivated;
    let (open, gate) = std::sync::mpsc::channel::<()>();
    *book.gate.lock().unwrap() = Some(("slow".to_owned(), gate));
    let first = Msg { from: 2, n: 0 };
    one.acct.send(&one.scheduler, "slow", first).unwrap();
    wait_until("the slow key's first message to be read", WAIT, || {
        book.reads().iter().any(|r| r.msg == first)
    });
    let blocked = book
        .reads()
        .iter()
        .find(|r| r.msg == first)
        .unwrap()
        .incarnation;
    // The key's process holds one of the node's two workers meanwhile: the
    // host's passivation check must still run (a blocked worker's timers
    // are fired for it, live-view.md, "A blocked worker").
    wait_until("the blocked process to be passivated", WAIT, || {
        one.sharding.stats().passivated > passivated
    });
    let stop = AtomicBool::new(false);
    let (max_buffered, waiting, refused_now) = std::thread::scope(|s| {
        let watcher = s.spawn(|| watch_buffered(&one.sharding, &stop));
        let mut waiting = HashSet::new();
        let mut refused = 0u64;
        for n in 1..=(3 * BOUND) {
            let msg = Msg { from: 2, n };
            match one.acct.send(&one.scheduler, "slow", msg) {
                Ok(()) => {
                    waiting.insert((ACCT, "slow".to_owned(), msg));
                }
                Err(r) => {
                    assert_eq!(r.reason, RefusedReason::BufferFull);
                    assert_eq!(r.message, msg);
                    refused += 1;
                }
            }
        }
        std::thread::sleep(Duration::from_millis(200));
        let buffered_while_blocked = one.sharding.stats().buffered;
        open.send(()).unwrap();
        wait_until("the waiting messages to be read", WAIT, || {
            book.reads()
                .iter()
                .filter(|r| r.msg.from == 2 && r.msg.n > 0)
                .count()
                >= waiting.len()
        });
        stop.store(true, Ordering::SeqCst);
        eprintln!(
            "stopping process: {} accepted, {refused} refused, {buffered_while_blocked} buffered while blocked",
            waiting.len()
        );
        (watcher.join().unwrap(), waiting, refused)
    });
    assert!(
        max_buffered <= BOUND,
        "buffered reached {max_buffered} > {BOUND} while a process was stopping"
    );
    assert!(
        refused_now > 0,
        "{} sends to a stopping key with a bound of {BOUND}: none refused",
        3 * BOUND
    );
    std::thread::sleep(Duration::from_millis(200));
    let reads: Vec<Read> = book
        .reads()
        .into_iter()
        .filter(|r| r.msg.from == 2 && r.msg.n > 0)
        .collect();
    exactly_once(&reads, &waiting);
    assert!(
        reads.iter().all(|r| r.incarnation != blocked),
        "the stopping process read a message sent after its cancel: {reads:?}"
    );
    let numbers: Vec<u64> = reads.iter().map(|r| r.msg.n).collect();
    assert!(numbers.windows(2).all(|w| w[0] < w[1]), "{numbers:?}");
    assert_eq!(book.violations(), Vec::<String>::new());
    one.scheduler.shutdown(Duration::from_millis(500));
}

/// A process that sends `per_key` numbered messages to each key of a
/// kind from its first step, as sender `from`.
struct StepSender {
    late: Sharded<Late>,
    keys: Vec<String>,
    per_key: u64,
    from: u64,
    book: Arc<Book>,
}

impl Process for StepSender {
    type Done = ();
    fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for n in 1..=self.per_key {
            for key in &self.keys {
                let msg = Late(Msg { from: self.from, n });
                if self.late.send(out.context(), key, msg).is_err() {
                    self.book.step_refusals.fetch_add(1, Ordering::SeqCst);
                }
            }
        }
        out.finish(());
        Ok(())
    }
}

/// Six keys each get messages at gaps swept across the passivation
/// moment (`passivate_after` 300 ms, checked every 100 ms, so a process
/// ends 300-400 ms after its last message); a seventh gets one every
/// 20 ms. Every message is read exactly once and in order (the shard
/// stays put); every passivated process saw `Event::Cancel`; the busy key
/// keeps one process; at the end every key's process ends.
#[test]
fn a_message_sent_at_the_passivation_moment_is_neither_lost_nor_doubled() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let book = Arc::new(Book::default());
    let config = ShardingConfig::new()
        .shards(4)
        .passivate_after(Duration::from_millis(300));
    let one = keyed_node(&server.url(), 1, config, &book);
    settled(&[&one], 4);

    const SWEEP: [u64; 16] = [
        260, 280, 295, 300, 305, 310, 320, 330, 340, 350, 360, 370, 380, 390, 400, 420,
    ];
    let sent = Mutex::new(HashSet::new());
    let busy_done = AtomicBool::new(false);
    std::thread::scope(|s| {
        let mut sweepers = Vec::new();
        for k in 0..6u64 {
            let (one, sent) = (&one, &sent);
            sweepers.push(s.spawn(move || {
                let key = format!("idle-{k}");
                let mut n = 0;
                for round in 0..2 {
                    for i in 0..SWEEP.len() {
                        // Each key walks the sweep from its own place, in
                        // bursts of one or two (a burst's second message
                        // right behind the first).
                        let gap = SWEEP[(i + k as usize * 3 + round) % SWEEP.len()];
                        for _ in 0..(1 + (i + round) % 2) {
                            n += 1;
                            let msg = Msg { from: k, n };
                            send_retrying(&one.scheduler, &one.acct, &key, msg);
                            sent.lock().unwrap().insert((ACCT, key.clone(), msg));
                        }
                        std::thread::sleep(Duration::from_millis(gap));
                    }
                }
            }));
        }
        {
            let (one, sent, busy_done) = (&one, &sent, &busy_done);
            s.spawn(move || {
                let mut n = 0;
                while !busy_done.load(Ordering::SeqCst) {
                    n += 1;
                    let msg = Msg { from: 99, n };
                    send_retrying(&one.scheduler, &one.acct, "busy", msg);
                    sent.lock().unwrap().insert((ACCT, "busy".to_owned(), msg));
                    std::thread::sleep(Duration::from_millis(20));
                }
            });
        }
        for sweeper in sweepers {
            sweeper.join().unwrap();
        }
        busy_done.store(true, Ordering::SeqCst);
    });
    let sent = sent.into_inner().unwrap();
    wait_until("every message to be read", WAIT, || {
        book.read_count() >= sent.len()
    });
    wait_until("every key's process to passivate", WAIT, || {
        one.sharding.stats().keys_live == 0 && book.all_ended()
    });
    let reads = book.reads();
    exactly_once(&reads, &sent);
    for ((_, key, from), numbers) in per_sender_and_key(&reads) {
        assert!(
            numbers.windows(2).all(|w| w[0] + 1 == w[1]) && numbers[0] == 1,
            "{key} from {from}: {numbers:?}"
        );
    }
    let busy: HashSet<u64> = reads
        .iter()
        .filter(|r| r.key == "busy")
        .map(|r| r.incarnation)
        .collect();
    assert_eq!(busy.len(), 1, "the busy key was passivated while busy");
    let stats = one.sharding.stats();
    let incarnations: HashSet<u64> = reads.iter().map(|r| r.incarnation).collect();
    eprintln!(
        "{stats:?}; {} processes read, {} messages",
        incarnations.len(),
        reads.len()
    );
    assert!(
        stats.passivated > 12,
        "gaps past the passivation time passivated only {}",
        stats.passivated
    );
    assert_eq!(stats.started, stats.passivated, "{stats:?}");
    assert_eq!(
        book.cancels.load(Ordering::SeqCst),
        stats.passivated,
        "each passivated process saw one Event::Cancel"
    );
    assert_eq!(stats.refused, 0);
    assert_eq!(book.violations(), Vec::<String>::new());
    one.scheduler.shutdown(Duration::from_millis(500));
}

/// Node 2 leaves (its scheduler shuts down, its transport closes) while
/// node 1 keeps sending to 120 keys; node 1 takes every shard; what node
/// 1 sends afterwards is read exactly once, in order, on node 1; nothing
/// sent during the leave is read twice, what was not read is accounted
/// for (dead letters on node 2, abandoned or unconfirmed on node 1), and
/// no key ever had two live processes.
#[test]
fn a_node_that_leaves_gives_its_shards_to_the_one_that_stays() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let book = Arc::new(Book::default());
    let config = ShardingConfig::new().shards(16);
    let one = keyed_node(&server.url(), 1, config.clone(), &book);
    let two = keyed_node(&server.url(), 2, config, &book);
    settled(&[&one, &two], 16);

    let keys = keys("stay", 120);
    let on_two = keys
        .iter()
        .filter(|k| one.acct.placed_on(k) == Some(2))
        .count();
    assert!(on_two > 0, "no key placed on node 2");
    let mut before = HashSet::new();
    for key in &keys {
        for (node, from) in [(&one, 1), (&two, 2)] {
            let msg = Msg { from, n: 1 };
            send_retrying(&node.scheduler, &node.acct, key, msg);
            before.insert((ACCT, key.clone(), msg));
        }
    }
    wait_until("the first messages to be read", WAIT, || {
        book.read_count() >= before.len()
    });
    assert!(two.sharding.stats().keys_live > 0);

    // Node 1 sends on while node 2 leaves.
    let sending = AtomicBool::new(true);
    let during = Mutex::new(HashSet::new());
    let left = Instant::now();
    let two_at_close = std::thread::scope(|s| {
        let (one, keys, sending, during) = (&one, &keys, &sending, &during);
        s.spawn(move || {
            let mut n = 1;
            while sending.load(Ordering::SeqCst) {
                n += 1;
                for key in keys {
                    let msg = Msg { from: 1, n };
                    send_retrying(&one.scheduler, &one.acct, key, msg);
                    during.lock().unwrap().insert((ACCT, key.clone(), msg));
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        std::thread::sleep(Duration::from_millis(200));
        let KeyedNode {
            scheduler,
            transport,
            sharding,
            acct,
            ..
        } = two;
        scheduler.shutdown(Duration::from_secs(2));
        transport.close();
        let at_close = (transport.stats(), sharding.stats());
        drop((acct, sharding, scheduler, transport));
        wait_until("node 1 to hold every shard", WAIT, || {
            one.sharding.stats().shards_held == 16 && one.sharding.stats().buffered == 0
        });
        eprintln!(
            "node 1 held every shard {:?} after node 2 left",
            left.elapsed()
        );
        std::thread::sleep(Duration::from_millis(200));
        sending.store(false, Ordering::SeqCst);
        at_close
    });
    let during = during.into_inner().unwrap();

    // After: node 1 alone.
    let mut after = HashSet::new();
    for n in 1_000..1_005u64 {
        for key in &keys {
            let msg = Msg { from: 1, n };
            send_retrying(&one.scheduler, &one.acct, key, msg);
            after.insert((ACCT, key.clone(), msg));
        }
    }
    let after_reads = || -> Vec<Read> {
        book.reads()
            .into_iter()
            .filter(|r| r.msg.n >= 1_000)
            .collect()
    };
    wait_until("the messages sent after the leave to be read", WAIT, || {
        after_reads().len() >= after.len()
    });
    std::thread::sleep(Duration::from_millis(300));
    let later = after_reads();
    exactly_once(&later, &after);
    assert!(later.iter().all(|r| r.node == 1), "read off node 1");
    for ((_, key, _), numbers) in per_sender_and_key(&later) {
        assert_eq!(numbers, (1_000..1_005).collect::<Vec<_>>(), "{key}");
    }

    // During the leave: nothing read twice (whatever node 2 was holding
    // when it left may be gone with it).
    let reads = book.reads();
    let mut once = HashSet::new();
    for r in &reads {
        assert!(once.insert((r.key.clone(), r.msg)), "read twice: {r:?}");
    }
    let lost: Vec<_> = during
        .iter()
        .filter(|(_, key, msg)| !once.contains(&(key.clone(), *msg)))
        .collect();
    eprintln!(
        "during the leave: {} sent, {} not read",
        during.len(),
        lost.len()
    );
    let (two_transport, two_sharding) = two_at_close;
    let one_transport = one.transport.stats();
    eprintln!("node 2 at close: {two_transport:?} {two_sharding:?}");
    eprintln!("node 1: {one_transport:?}");
    // What was not read is accounted for (the guide's delivery section):
    // a dead letter on node 2, or abandoned or unconfirmed on node 1.
    let accounted =
        two_transport.dead_letters + one_transport.abandoned + one_transport.unconfirmed;
    assert!(
        lost.len() as u64 <= accounted,
        "{} messages accepted during the leave were never read, only {accounted} accounted for",
        lost.len()
    );
    assert_eq!(book.violations(), Vec::<String>::new());
    let stats = one.sharding.stats();
    assert_eq!(stats.shards_held, 16);
    assert_eq!(stats.refused, 0, "{stats:?}");
    one.scheduler.shutdown(Duration::from_millis(500));
}

/// Node 2 leaves the documented other way: its transport closes
/// (`NatsTransport::close`: "announces that the node leaves") while its
/// scheduler, and so its keyed processes, still run, as in an application
/// that closes its transport first and shuts its scheduler down after.
/// Node 1 takes node 2's shards; the guide promises at most one live
/// process per key ("a node hands a shard off by cancelling its keys'
/// processes, waiting until every one has ended, and only then releasing
/// the name") and that a key's old process "never steps beside the key's
/// next process".
#[test]
fn a_node_whose_transport_closes_keeps_no_key_beside_the_next_holder() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let book = Arc::new(Book::default());
    let config = ShardingConfig::new().shards(16);
    let one = keyed_node(&server.url(), 1, config.clone(), &book);
    let two = keyed_node(&server.url(), 2, config, &book);
    settled(&[&one, &two], 16);

    let keys = keys("close", 60);
    let on_two: Vec<&String> = keys
        .iter()
        .filter(|k| one.acct.placed_on(k) == Some(2))
        .collect();
    assert!(!on_two.is_empty(), "no key placed on node 2");
    for key in &keys {
        send_retrying(&one.scheduler, &one.acct, key, Msg { from: 1, n: 1 });
    }
    wait_until("the first messages to be read", WAIT, || {
        book.read_count() >= keys.len()
    });
    assert_eq!(two.sharding.stats().keys_live, on_two.len() as u64);

    // Node 2 leaves; its scheduler runs on.
    let closed = Instant::now();
    two.transport.close();
    wait_until("node 1 to hold every shard", WAIT, || {
        one.sharding.stats().shards_held == 16
    });
    eprintln!(
        "node 1 held every shard {:?} after node 2's transport closed; node 2: {:?}",
        closed.elapsed(),
        two.sharding.stats()
    );
    // The keys' next processes, on node 1.
    for key in &keys {
        send_retrying(&one.scheduler, &one.acct, key, Msg { from: 1, n: 2 });
    }
    wait_until("node 1's processes to read", WAIT, || {
        book.reads().iter().filter(|r| r.msg.n == 2).count() >= keys.len()
    });
    // Node 2's application sends on (to its own keys, as it believes).
    for key in &on_two {
        let _ = two.acct.send(&two.scheduler, key, Msg { from: 2, n: 3 });
    }
    std::thread::sleep(Duration::from_secs(1));

    let reads = book.reads();
    let next: HashMap<&str, u64> = reads
        .iter()
        .filter(|r| r.msg.n == 2)
        .map(|r| (r.key.as_str(), r.incarnation))
        .collect();
    let beside: Vec<&Read> = reads
        .iter()
        .filter(|r| r.msg.n == 3 && next.get(r.key.as_str()).is_some_and(|&n| r.incarnation < n))
        .collect();
    eprintln!(
        "node 2 after: {:?}; {} keys had two live processes; {} reads by an old process after \
         the key's next one had read",
        two.sharding.stats(),
        book.violations().len(),
        beside.len()
    );
    assert!(
        beside.is_empty(),
        "old processes on node 2 stepped after the key's next process on node 1 had: {:?}",
        &beside[..beside.len().min(5)]
    );
    assert_eq!(book.violations(), Vec::<String>::new());
    two.scheduler.shutdown(Duration::from_millis(500));
    one.scheduler.shutdown(Duration::from_millis(500));
}
