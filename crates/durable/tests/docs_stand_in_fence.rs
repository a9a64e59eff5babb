//! Tries to break the promise of `StandIn` about the store's fence (the
//! CHANGELOG's "A stand-in passes on again what the store's fence
//! refused", `docs/guide/distributed.md`): a message whose append a
//! cluster store's fence refused is passed on again, in order, to the
//! next process the stand-in has, which resumes the journal and takes it
//! back; a stand-in fenced more than 16 times in a row ends with an error.
//!
//! The cluster store is a wrapper over `MemoryStore` that fences as the
//! `Store` trait's docs say a cluster store must: a journal has one writer,
//! the node that created it or last took it over (`running`,
//! `take_over`); another node's append is refused by naming its key in
//! `append`'s `Ok`. It also refuses an append whose number is not the
//! journal's next (as a store with an expected last sequence does), and
//! logs every record it wrote, decoded, so that a test can check every
//! message that was ever journaled under a key, across the journals a
//! key had.

use sched_durable::prelude::*;
use sched_durable::store::{Append, Journal, MemoryStore, Outgoing, Store};
use sched_durable::{Record, RecordedEffect, RecordedInput, Spawned, StandIn, Status};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------
// The durable process: it keeps every message, and finishes with them at 0.
// ---------------------------------------------------------------------

#[derive(Default)]
struct Tally {
    seen: Vec<u64>,
}

impl Durable for Tally {
    const KIND: &'static str = "tally";
    type Args = ();
    type Message = u64;
    type Done = Vec<u64>;

    fn create(_: ()) -> Self {
        Tally::default()
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events.typed::<Self>() {
            match event {
                Event::Message(0) => out.finish(self.seen.clone()),
                Event::Message(n) => self.seen.push(n),
                _ => {}
            }
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------
// A fencing cluster store over MemoryStore.
// ---------------------------------------------------------------------

/// What the store did, in the order it did it (one lock for all nodes).
/// Some fields are read only through `Debug`, in the failure dumps.
#[allow(dead_code)]
#[derive(Debug, Clone)]
enum Logged {
    Written {
        node: u32,
        key: String,
        seq: u64,
        created: bool,
        ended: bool,
        messages: Vec<u64>,
        done: Option<Vec<u64>>,
    },
    Refused {
        node: u32,
        key: String,
        seq: u64,
        messages: Vec<u64>,
    },
    TookOver {
        node: u32,
        key: String,
        stolen_back: bool,
    },
    Forgot {
        node: u32,
        key: String,
    },
}

/// Another node takes `key` back right after each `take_over` of any other
/// node, `steals_left` times: two nodes taking the journal from each other.
#[derive(Debug)]
struct Contest {
    key: String,
    thief: u32,
    steals_left: u32,
}

#[derive(Debug, Default)]
struct Shared {
    /// The node allowed to write each journal.
    owners: HashMap<String, u32>,
    /// Nodes whose journals `running` hands to the others (a lapsed lease).
    gone: HashSet<u32>,
    contest: Option<Contest>,
    log: Vec<Logged>,
}

#[derive(Clone)]
struct FencingStore {
    inner: MemoryStore,
    node: u32,
    shared: Arc<Mutex<Shared>>,
}

fn decode_record(bytes: &[u8]) -> (Vec<u64>, Option<Vec<u64>>) {
    let record = Record::decode(bytes).expect("a record the journal wrote decodes");
    let messages = record
        .inputs
        .iter()
        .filter_map(|input| match input {
            RecordedInput::Message { from: None, body } => {
                Some(postcard::from_bytes::<u64>(body).expect("a u64"))
            }
            _ => None,
        })
        .collect();
    let done = record.effects.iter().find_map(|effect| match effect {
        RecordedEffect::Done(bytes) => {
            Some(postcard::from_bytes::<Vec<u64>>(bytes).expect("a Vec<u64>"))
        }
        _ => None,
    });
    (messages, done)
}

impl FencingStore {
    fn lock(&self) -> MutexGuard<'_, Shared> {
        self.shared
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Store for FencingStore {
    fn append(&self, batch: &[Append]) -> Result<Vec<String>, DurableError> {
        let mut shared = self.lock();
        // The state of each journal the batch touches: (next number, ended),
        // None when the store holds no journal under the key.
        let mut state: HashMap<String, Option<(u64, bool)>> = HashMap::new();
        let mut refused: Vec<String> = Vec::new();
        let mut allowed: Vec<Append> = Vec::new();
        let mut logged = Vec::new();
        for append in batch {
            let current = match state.get(&append.key) {
                Some(current) => *current,
                None => self
                    .inner
                    .journal(&append.key)?
                    .map(|journal| (journal.first + journal.records.len() as u64, journal.ended)),
            };
            let ok = !refused.contains(&append.key)
                && if append.created.is_some() {
                    current.is_none() && append.seq == 0
                } else {
                    matches!(current, Some((next, false)) if next == append.seq)
                        && shared.owners.get(&append.key) == Some(&self.node)
                };
            let (messages, done) = decode_record(&append.record);
            if ok {
                if append.created.is_some() {
                    shared.owners.insert(append.key.clone(), self.node);
                }
                state.insert(append.key.clone(), Some((append.seq + 1, append.ended)));
                allowed.push(append.clone());
                logged.push(Logged::Written {
                    node: self.node,
                    key: append.key.clone(),
                    seq: append.seq,
                    created: append.created.is_some(),
                    ended: append.ended,
                    messages,
                    done,
                });
            } else {
                if !refused.contains(&append.key) {
                    refused.push(append.key.clone());
                }
                logged.push(Logged::Refused {
                    node: self.node,
                    key: append.key.clone(),
                    seq: append.seq,
                    messages,
                });
            }
        }
        if !allowed.is_empty() {
            let inner_refused = self.inner.append(&allowed)?;
            assert!(inner_refused.is_empty(), "MemoryStore never fences");
        }
        shared.log.extend(logged);
        Ok(refused)
    }

    fn running(&self) -> Result<Vec<Journal>, DurableError> {
        let mut shared = self.lock();
        let mut mine = Vec::new();
        for journal in self.inner.running()? {
            let owner = shared.owners.get(&journal.key).copied();
            let take = match owner {
                None => true,
                Some(owner) => owner == self.node || shared.gone.contains(&owner),
            };
            if take {
                if owner != Some(self.node) {
                    shared.log.push(Logged::TookOver {
                        node: self.node,
                        key: journal.key.clone(),
                        stolen_back: false,
                    });
                }
                shared.owners.insert(journal.key.clone(), self.node);
                mine.push(journal);
            }
        }
        Ok(mine)
    }

    fn journal(&self, key: &str) -> Result<Option<Journal>, DurableError> {
        self.inner.journal(key)
    }

    fn keys(&self) -> Result<Vec<(String, bool)>, DurableError> {
        self.inner.keys()
    }

    fn contains(&self, key: &str) -> Result<bool, DurableError> {
        self.inner.contains(key)
    }

    fn forget(&self, key: &str) -> Result<bool, DurableError> {
        let mut shared = self.lock();
        let forgot = self.inner.forget(key)?;
        if forgot {
            shared.owners.remove(key);
            shared.log.push(Logged::Forgot {
                node: self.node,
                key: key.to_owned(),
            });
        }
        Ok(forgot)
    }

    fn outbox(&self) -> Result<Vec<Outgoing>, DurableError> {
        self.inner.outbox()
    }

    fn discard(&self, entries: &[(String, String, u64)]) -> Result<(), DurableError> {
        self.inner.discard(entries)
    }

    fn size(&self) -> Result<u64, DurableError> {
        self.inner.size()
    }

    fn take_over(&self, key: &str) -> Result<Option<Journal>, DurableError> {
        let mut shared = self.lock();
        let Some(journal) = self.inner.journal(key)? else {
            return Ok(None);
        };
        if journal.ended {
            return Ok(None);
        }
        shared.owners.insert(key.to_owned(), self.node);
        let mut stolen_back = false;
        if let Some(contest) = shared.contest.as_mut() {
            if contest.key == key && contest.thief != self.node && contest.steals_left > 0 {
                contest.steals_left -= 1;
                let thief = contest.thief;
                shared.owners.insert(key.to_owned(), thief);
                stolen_back = true;
            }
        }
        shared.log.push(Logged::TookOver {
            node: self.node,
            key: key.to_owned(),
            stolen_back,
        });
        Ok(Some(journal))
    }

    fn atomic_batches(&self) -> bool {
        // A batch may be cut by the fence: not all or nothing.
        false
    }
}

/// The cluster: the journals and the fence every node shares.
struct Cluster {
    memory: MemoryStore,
    shared: Arc<Mutex<Shared>>,
}

impl Cluster {
    fn new() -> Cluster {
        Cluster {
            memory: MemoryStore::new(),
            shared: Arc::default(),
        }
    }

    fn store(&self, node: u32) -> FencingStore {
        FencingStore {
            inner: self.memory.clone(),
            node,
            shared: Arc::clone(&self.shared),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Shared> {
        self.shared
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Every message ever journaled under `key`, in the order written,
    /// across all the journals the key had.
    fn written(&self, key: &str) -> Vec<u64> {
        self.lock()
            .log
            .iter()
            .filter_map(|entry| match entry {
                Logged::Written {
                    key: k, messages, ..
                } if k == key => Some(messages.clone()),
                _ => None,
            })
            .flatten()
            .collect()
    }

    /// The outcomes of the journals of `key` that finished, in order.
    fn outcomes(&self, key: &str) -> Vec<Vec<u64>> {
        self.lock()
            .log
            .iter()
            .filter_map(|entry| match entry {
                Logged::Written {
                    key: k,
                    done: Some(done),
                    ..
                } if k == key => Some(done.clone()),
                _ => None,
            })
            .collect()
    }

    /// How many journals were created under `key`.
    fn created(&self, key: &str) -> usize {
        self.lock()
            .log
            .iter()
            .filter(
                |entry| matches!(entry, Logged::Written { key: k, created: true, .. } if k == key),
            )
            .count()
    }

    /// How many appends of `node` to `key` the fence refused.
    fn refused(&self, node: u32, key: &str) -> usize {
        self.lock()
            .log
            .iter()
            .filter(|entry| matches!(entry, Logged::Refused { node: n, key: k, .. } if *n == node && k == key))
            .count()
    }

    /// The messages of refused appends of `key`.
    fn refused_messages(&self, key: &str) -> Vec<u64> {
        self.lock()
            .log
            .iter()
            .filter_map(|entry| match entry {
                Logged::Refused {
                    key: k, messages, ..
                } if k == key => Some(messages.clone()),
                _ => None,
            })
            .flatten()
            .collect()
    }

    fn owner(&self, key: &str) -> Option<u32> {
        self.lock().owners.get(key).copied()
    }

    fn dump(&self, key: &str) -> String {
        let shared = self.lock();
        let mut text = String::new();
        for entry in shared.log.iter().filter(|entry| match entry {
            Logged::Written { key: k, .. }
            | Logged::Refused { key: k, .. }
            | Logged::TookOver { key: k, .. }
            | Logged::Forgot { key: k, .. } => k == key,
        }) {
            text.push_str(&format!("  {entry:?}\n"));
        }
        text
    }

    /// Checks the log's own consistency for `key`: records numbered without
    /// a gap from each creation, nothing written to an ended journal.
    fn check_numbering(&self, key: &str) {
        let shared = self.lock();
        let mut next: Option<u64> = None;
        for entry in &shared.log {
            match entry {
                Logged::Written {
                    key: k,
                    seq,
                    created,
                    ended,
                    ..
                } if k == key => {
                    if *created {
                        assert_eq!(*seq, 0, "a journal starts at 0");
                    } else {
                        assert_eq!(Some(*seq), next, "records of {key} numbered without a gap");
                    }
                    next = if *ended { None } else { Some(seq + 1) };
                }
                Logged::Forgot { key: k, .. } if k == key => {
                    assert_eq!(next, None, "only an ended journal is forgotten");
                }
                _ => {}
            }
        }
    }
}

// ---------------------------------------------------------------------
// Nodes.
// ---------------------------------------------------------------------

struct Node {
    durability: Arc<Durability>,
    scheduler: Scheduler,
}

impl Node {
    fn start(cluster: &Cluster, id: u32) -> Node {
        let durability = Arc::new(Durability::open(cluster.store(id)));
        durability.register::<Tally>();
        let scheduler = durability.install(Scheduler::builder().workers(2)).build();
        scheduler.start();
        durability.recover(&scheduler).expect("the first recovery");
        Node {
            durability,
            scheduler,
        }
    }

    fn stand_in(&self, key: &str) -> Completion<()> {
        self.scheduler
            .spawn(StandIn::<Tally>::new(&self.durability, key, ()))
            .expect("the stand-in starts")
    }

    fn tell(&self, stand_in: &Completion<()>, n: u64) {
        self.scheduler
            .send(stand_in.pid(), n)
            .expect("the stand-in takes the message");
    }

    /// Resumes `key` here, as a node taking the journal over does.
    fn take_over(&self, key: &str) -> Spawned {
        self.durability
            .resume(&self.scheduler, key)
            .expect("resume")
            .expect("a running journal to take over")
    }

    /// Cancels this node's incarnation of `key` (it suspends) and waits until
    /// it no longer runs here.
    fn suspend(&self, key: &str, cluster: &Cluster) {
        if let Some(pid) = self.durability.pid(key) {
            let _ = self.scheduler.context().cancel(pid);
        }
        eventually(
            &format!("{key} no longer runs on this node"),
            cluster,
            key,
            || self.durability.pid(key).is_none(),
        );
    }

    fn stop(self) {
        self.scheduler.shutdown(Duration::from_secs(10));
    }
}

const PATIENCE: Duration = Duration::from_secs(60);

/// Waits (a deadlock guard only) until `done` holds.
fn eventually(what: &str, cluster: &Cluster, key: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !done() {
        if Instant::now() > deadline {
            panic!(
                "gave up waiting: {what}\nwritten under {key}: {:?}\nlog of {key}:\n{}",
                cluster.written(key),
                cluster.dump(key)
            );
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The messages of the journal `key` holds now, and whether it ended.
fn journal(durability: &Durability, key: &str) -> (Vec<u64>, bool) {
    let inspection = durability
        .inspect(key)
        .expect("inspect")
        .expect("a journal");
    let messages = inspection
        .records
        .iter()
        .flat_map(|record| record.inputs.iter())
        .filter_map(|input| match input {
            RecordedInput::Message { from: None, body } => {
                Some(postcard::from_bytes::<u64>(body).expect("a u64"))
            }
            _ => None,
        })
        .collect();
    (messages, inspection.ended)
}

fn outcome(durability: &Durability, key: &str) -> Option<Vec<u64>> {
    match durability.status(key).expect("status") {
        Some(status @ Status::Done(_)) => Some(
            status
                .outcome::<Vec<u64>>()
                .expect("done")
                .expect("decodes"),
        ),
        _ => None,
    }
}

/// Waits until exactly `expected` was written under `key` (no more: a
/// message written twice fails at once).
fn wait_written(cluster: &Cluster, key: &str, expected: &[u64]) {
    eventually(
        &format!("{key} journaled {expected:?}"),
        cluster,
        key,
        || {
            let written = cluster.written(key);
            assert!(
                expected.starts_with(&written),
                "written under {key}: {written:?}, which is not a beginning of {expected:?}\n{}",
                cluster.dump(key)
            );
            written.len() == expected.len()
        },
    );
}

fn range(from: u64, to: u64) -> Vec<u64> {
    (from..=to).collect()
}

/// How a test compares what was journaled with what was sent: in the order
/// sent, or each once in any order (the same test, run both ways: see
/// `refused_messages_go_again_in_the_order_they_were_sent`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Order {
    Sent,
    Any,
}

impl Order {
    /// `messages` as this order compares them: as they are, or sorted.
    fn view(self, mut messages: Vec<u64>) -> Vec<u64> {
        if self == Order::Any {
            messages.sort_unstable();
        }
        messages
    }
}

/// As `wait_written`, in `order`: with `Order::Any`, waits until each of
/// `expected` was written once, in any order (a message written twice, or
/// one not expected, fails at once).
fn wait_written_in(order: Order, cluster: &Cluster, key: &str, expected: &[u64]) {
    if order == Order::Sent {
        return wait_written(cluster, key, expected);
    }
    let want = order.view(expected.to_vec());
    eventually(
        &format!("{key} journaled each of {expected:?} once"),
        cluster,
        key,
        || {
            let written = order.view(cluster.written(key));
            let mut left: HashMap<u64, usize> = HashMap::new();
            for n in &want {
                *left.entry(*n).or_default() += 1;
            }
            for n in &written {
                let count = left.entry(*n).or_default();
                assert!(
                    *count > 0,
                    "{n} written under {key} once more than sent\n{}",
                    cluster.dump(key)
                );
                *count -= 1;
            }
            written.len() == want.len()
        },
    );
}

// ---------------------------------------------------------------------
// The tests.
// ---------------------------------------------------------------------

#[test]
fn a_message_the_fence_refused_goes_to_the_next_process_which_takes_the_journal_back() {
    let cluster = Cluster::new();
    let a = Node::start(&cluster, 1);
    let b = Node::start(&cluster, 2);
    let key = "acct";

    let stand_in = a.stand_in(key);
    for n in [1, 2, 3] {
        a.tell(&stand_in, n);
    }
    wait_written(&cluster, key, &[1, 2, 3]);
    assert_eq!(cluster.owner(key), Some(1));

    // Node 2 takes the journal over (as a keyed process's new holder would).
    let mut on_b = b.take_over(key).of::<Tally>().expect("a tally");
    assert_eq!(cluster.owner(key), Some(2));

    for n in [4, 5, 6] {
        a.tell(&stand_in, n);
    }
    wait_written(&cluster, key, &range(1, 6));
    assert!(
        cluster.refused(1, key) >= 1,
        "node 1's process was fenced:\n{}",
        cluster.dump(key)
    );
    assert_eq!(
        cluster.owner(key),
        Some(1),
        "the stand-in's next process took the journal back"
    );
    assert!(!stand_in.is_finished(), "the stand-in goes on");

    // Node 2's incarnation is stale now: what it is told is refused, never
    // journaled, and it ends.
    match b.durability.send::<Tally>(&b.scheduler, key, &77) {
        Ok(receipt) => {
            let settled = receipt.wait_timeout(PATIENCE);
            assert!(
                matches!(settled, Err(ref error) if !error.is_timeout()),
                "a stale incarnation's input is not kept: {settled:?}"
            );
        }
        Err(error) => assert!(matches!(error, DurableError::NoSuchKey(_)), "{error}"),
    }
    let ended = on_b.wait_timeout(PATIENCE);
    assert!(
        matches!(ended, Err(ref error) if !error.is_timeout()),
        "the stale incarnation ends: {ended:?}"
    );
    assert!(!cluster.written(key).contains(&77));

    // It closes with all six, once each, in order.
    a.tell(&stand_in, 0);
    eventually("the tally closed", &cluster, key, || {
        outcome(&a.durability, key).is_some()
    });
    assert_eq!(outcome(&a.durability, key), Some(range(1, 6)));
    assert_eq!(
        journal(&a.durability, key),
        (vec![1, 2, 3, 4, 5, 6, 0], true)
    );
    assert_eq!(cluster.written(key), vec![1, 2, 3, 4, 5, 6, 0]);
    cluster.check_numbering(key);
    a.stop();
    b.stop();
}

#[test]
fn messages_in_flight_during_a_takeover_are_each_journaled_once() {
    in_flight(Order::Any);
}

#[test]
fn messages_in_flight_during_a_takeover_are_journaled_in_order() {
    in_flight(Order::Sent);
}

fn in_flight(order: Order) {
    let cluster = Cluster::new();
    let a = Node::start(&cluster, 1);
    let b = Node::start(&cluster, 2);
    for round in 0..4_u64 {
        let key = format!("flight-{round}");
        let key = key.as_str();
        let stand_in = a.stand_in(key);
        // A stream from another thread; the takeover comes while it flows,
        // after a number of messages that changes with the round.
        let threshold = 1 + round as usize * 40;
        std::thread::scope(|scope| {
            let sender = scope.spawn(|| {
                for n in 1..=300 {
                    a.tell(&stand_in, n);
                    if n % 16 == 0 {
                        std::thread::yield_now();
                    }
                }
            });
            eventually("the first messages were journaled", &cluster, key, || {
                cluster.written(key).len() >= threshold
            });
            b.take_over(key);
            sender.join().expect("the sender");
        });
        // More behind the takeover: at least these meet the fence.
        for n in 301..=320 {
            a.tell(&stand_in, n);
        }
        wait_written_in(order, &cluster, key, &range(1, 320));
        assert!(
            cluster.refused(1, key) >= 1,
            "round {round}: the fence refused node 1\n{}",
            cluster.dump(key)
        );
        assert_eq!(cluster.owner(key), Some(1), "round {round}");
        a.tell(&stand_in, 0);
        eventually("the tally closed", &cluster, key, || {
            outcome(&a.durability, key).is_some()
        });
        assert_eq!(
            outcome(&a.durability, key).map(|o| order.view(o)),
            Some(order.view(range(1, 320))),
            "round {round}"
        );
        let mut expected = range(1, 320);
        expected.push(0);
        assert_eq!(
            journal(&a.durability, key),
            (journal(&a.durability, key).0, true),
            "round {round}: ended"
        );
        assert_eq!(
            order.view(journal(&a.durability, key).0),
            order.view(expected.clone()),
            "round {round}"
        );
        assert_eq!(
            order.view(cluster.written(key)),
            order.view(expected),
            "round {round}"
        );
        cluster.check_numbering(key);
        assert!(
            !stand_in.is_finished(),
            "round {round}: the stand-in goes on"
        );
    }
    a.stop();
    b.stop();
}

#[test]
fn repeated_takeovers_with_messages_in_flight_lose_nothing_and_never_reach_the_limit() {
    repeated_takeovers(Order::Any);
}

#[test]
fn repeated_takeovers_with_messages_in_flight_keep_the_order_sent() {
    repeated_takeovers(Order::Sent);
}

fn repeated_takeovers(order: Order) {
    // 24 takeovers by node 2, each followed by messages (some sent before
    // the takeover, still in flight, some after): each fences node 1's
    // process once, and a message gets through in between, so no run of
    // fences comes near 17.
    let cluster = Cluster::new();
    let a = Node::start(&cluster, 1);
    let b = Node::start(&cluster, 2);
    let key = "ping-pong";
    let stand_in = a.stand_in(key);
    eventually("the journal was created", &cluster, key, || {
        cluster.created(key) == 1
    });
    let mut expected = Vec::new();
    let mut next = 1;
    for round in 0..24 {
        for _ in 0..3 {
            a.tell(&stand_in, next);
            expected.push(next);
            next += 1;
        }
        let _on_b = b.take_over(key);
        for _ in 0..3 {
            a.tell(&stand_in, next);
            expected.push(next);
            next += 1;
        }
        wait_written_in(order, &cluster, key, &expected);
        assert_eq!(cluster.owner(key), Some(1), "round {round}: taken back");
        assert!(
            cluster.refused(1, key) > round,
            "round {round}: node 1 was fenced again\n{}",
            cluster.dump(key)
        );
        b.suspend(key, &cluster);
        assert!(
            !stand_in.is_finished(),
            "round {round}: the stand-in goes on"
        );
    }
    assert!(!cluster.written(key).contains(&0));
    a.tell(&stand_in, 0);
    eventually("the tally closed", &cluster, key, || {
        outcome(&a.durability, key).is_some()
    });
    assert_eq!(
        outcome(&a.durability, key).map(|o| order.view(o)),
        Some(order.view(expected.clone()))
    );
    expected.push(0);
    assert_eq!(order.view(cluster.written(key)), order.view(expected));
    cluster.check_numbering(key);
    a.stop();
    b.stop();
}

/// Starts a stand-in on node 1, journals 1 and 2, then has node 2 hold the
/// journal and take it back after each of node 1's next `steals` takeovers;
/// then tells the stand-in 3.
fn contested(steals: u32) -> (Cluster, Node, Node, Completion<()>) {
    let cluster = Cluster::new();
    let a = Node::start(&cluster, 1);
    let b = Node::start(&cluster, 2);
    let key = "contested";
    let stand_in = a.stand_in(key);
    a.tell(&stand_in, 1);
    a.tell(&stand_in, 2);
    wait_written(&cluster, key, &[1, 2]);
    {
        let mut shared = cluster.lock();
        shared.owners.insert(key.to_owned(), 2);
        shared.contest = Some(Contest {
            key: key.to_owned(),
            thief: 2,
            steals_left: steals,
        });
    }
    a.tell(&stand_in, 3);
    (cluster, a, b, stand_in)
}

#[test]
fn a_stand_in_fenced_sixteen_times_in_a_row_still_delivers() {
    // Fenced once by node 2's hold, then 15 more times, each right after
    // it took the journal back: 16 in a row, not more than 16.
    let (cluster, a, b, mut stand_in) = contested(15);
    let key = "contested";
    wait_written(&cluster, key, &[1, 2, 3]);
    assert_eq!(
        cluster.refused(1, key),
        16,
        "fenced 16 times in a row:\n{}",
        cluster.dump(key)
    );
    assert_eq!(cluster.owner(key), Some(1));
    assert!(
        matches!(
            stand_in.wait_timeout(Duration::from_millis(50)),
            Err(ExitError::TimedOut)
        ),
        "the stand-in goes on"
    );
    a.tell(&stand_in, 0);
    eventually("the tally closed", &cluster, key, || {
        outcome(&a.durability, key).is_some()
    });
    assert_eq!(outcome(&a.durability, key), Some(vec![1, 2, 3]));
    assert_eq!(cluster.written(key), vec![1, 2, 3, 0]);
    cluster.check_numbering(key);
    a.stop();
    b.stop();
}

#[test]
fn a_stand_in_fenced_seventeen_times_in_a_row_ends_with_an_error() {
    let (cluster, a, b, mut stand_in) = contested(16);
    let key = "contested";
    let ended = stand_in.wait_timeout(PATIENCE);
    assert!(
        matches!(ended, Err(ref error) if !error.is_timeout()),
        "a stand-in fenced 17 times in a row ends with an error: {ended:?}\n{}",
        cluster.dump(key)
    );
    eprintln!("the stand-in ended with: {ended:?}");
    assert_eq!(
        cluster.refused(1, key),
        17,
        "fenced 17 times:\n{}",
        cluster.dump(key)
    );
    assert_eq!(
        cluster.written(key),
        vec![1, 2],
        "nothing of the refused message was written"
    );
    assert!(cluster.refused_messages(key).iter().all(|n| *n == 3));
    // Nothing else happens after the end: no more takeovers by node 1.
    let took_over = |cluster: &Cluster| {
        cluster
            .lock()
            .log
            .iter()
            .filter(|entry| matches!(entry, Logged::TookOver { node: 1, .. }))
            .count()
    };
    let before = took_over(&cluster);
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(took_over(&cluster), before);

    // The journal is intact: a later stand-in (the contest over) resumes it
    // and goes on from 1, 2.
    cluster.lock().contest = None;
    let again = a.stand_in(key);
    a.tell(&again, 4);
    a.tell(&again, 0);
    eventually("the tally closed", &cluster, key, || {
        outcome(&a.durability, key).is_some()
    });
    assert_eq!(outcome(&a.durability, key), Some(vec![1, 2, 4]));
    cluster.check_numbering(key);
    a.stop();
    b.stop();
}

#[test]
fn messages_right_behind_a_closing_one_while_the_journal_was_taken_over() {
    let cluster = Cluster::new();
    let a = Node::start(&cluster, 1);
    let b = Node::start(&cluster, 2);
    let key = "closing";
    let stand_in = a.stand_in(key);
    a.tell(&stand_in, 1);
    a.tell(&stand_in, 2);
    wait_written(&cluster, key, &[1, 2]);
    let _on_b = b.take_over(key);
    // All at once: the first two meet the fence, 0 closes the resumed
    // journal with 3 behind it, and so on.
    let burst = [3, 0, 4, 5, 0, 6, 0, 7, 8];
    for n in burst {
        a.tell(&stand_in, n);
    }
    let mut everything = vec![1, 2];
    everything.extend(burst);
    wait_written(&cluster, key, &everything);
    assert!(
        cluster.refused(1, key) >= 1,
        "the fence refused node 1:\n{}",
        cluster.dump(key)
    );
    assert_eq!(
        cluster.outcomes(key),
        vec![vec![1, 2, 3], vec![4, 5], vec![6]]
    );
    assert_eq!(cluster.created(key), 4, "a fresh journal behind each 0");
    assert_eq!(journal(&a.durability, key), (vec![7, 8], false));
    cluster.check_numbering(key);
    assert!(!stand_in.is_finished());
    a.stop();
    b.stop();
}

#[test]
fn journals_a_recovery_on_the_other_node_took_over_come_back_with_every_message() {
    recovered(Order::Any);
}

#[test]
fn journals_a_recovery_on_the_other_node_took_over_come_back_in_the_order_sent() {
    recovered(Order::Sent);
}

fn recovered(order: Order) {
    let cluster = Cluster::new();
    let a = Node::start(&cluster, 1);
    let b = Node::start(&cluster, 2);
    let keys: Vec<String> = (0..6).map(|i| format!("recovered-{i}")).collect();
    let stand_ins: Vec<Completion<()>> = keys.iter().map(|key| a.stand_in(key)).collect();
    let mut expected: Vec<Vec<u64>> = vec![Vec::new(); keys.len()];
    for (i, stand_in) in stand_ins.iter().enumerate() {
        for n in 1..=5 {
            a.tell(stand_in, n);
            expected[i].push(n);
        }
    }
    for (i, key) in keys.iter().enumerate() {
        wait_written_in(order, &cluster, key, &expected[i]);
    }

    // Node 1's lease "lapses" while it still runs: node 2's recovery takes
    // every journal over; messages keep flowing to node 1's stand-ins.
    std::thread::scope(|scope| {
        let sender = scope.spawn(|| {
            let mut sent: Vec<Vec<u64>> = vec![Vec::new(); keys.len()];
            for n in 6..=60 {
                for (i, stand_in) in stand_ins.iter().enumerate() {
                    a.tell(stand_in, n);
                    sent[i].push(n);
                }
                if n % 8 == 0 {
                    std::thread::yield_now();
                }
            }
            sent
        });
        cluster.lock().gone.insert(1);
        let recovery = b
            .durability
            .recover(&b.scheduler)
            .expect("node 2's recovery");
        cluster.lock().gone.remove(&1);
        assert_eq!(
            recovery.resumed.len(),
            keys.len(),
            "node 2 took every journal over"
        );
        for (i, sent) in sender.join().expect("the sender").into_iter().enumerate() {
            expected[i].extend(sent);
        }
    });
    // Behind the recovery: these meet the fence, whatever was journaled before.
    for (i, stand_in) in stand_ins.iter().enumerate() {
        for n in 61..=64 {
            a.tell(stand_in, n);
            expected[i].push(n);
        }
    }
    for (i, key) in keys.iter().enumerate() {
        wait_written_in(order, &cluster, key, &expected[i]);
        assert!(
            cluster.refused(1, key) >= 1,
            "{key}: the fence refused node 1:\n{}",
            cluster.dump(key)
        );
        assert_eq!(cluster.owner(key), Some(1), "{key}: taken back");
    }
    for (i, stand_in) in stand_ins.iter().enumerate() {
        a.tell(stand_in, 0);
        let key = &keys[i];
        eventually("the tally closed", &cluster, key, || {
            outcome(&a.durability, key).is_some()
        });
        assert_eq!(
            outcome(&a.durability, key).map(|o| order.view(o)),
            Some(order.view(expected[i].clone())),
            "{key}"
        );
        let mut all = expected[i].clone();
        all.push(0);
        assert_eq!(order.view(cluster.written(key)), order.view(all), "{key}");
        cluster.check_numbering(key);
    }
    a.stop();
    b.stop();
}

#[test]
fn a_cancelled_stand_in_still_delivers_what_the_fence_refused() {
    let cluster = Cluster::new();
    let a = Node::start(&cluster, 1);
    let b = Node::start(&cluster, 2);
    let key = "cancelled";
    let mut stand_in = a.stand_in(key);
    a.tell(&stand_in, 1);
    wait_written(&cluster, key, &[1]);
    let _on_b = b.take_over(key);
    for n in [2, 3, 4] {
        a.tell(&stand_in, n);
    }
    a.scheduler
        .context()
        .cancel(stand_in.pid())
        .expect("cancel");
    let ended = stand_in.wait_timeout(PATIENCE);
    assert!(
        ended.is_ok(),
        "a cancelled stand-in finishes: {ended:?}\n{}",
        cluster.dump(key)
    );
    assert_eq!(
        cluster.written(key),
        vec![1, 2, 3, 4],
        "delivered before it finished:\n{}",
        cluster.dump(key)
    );
    assert!(
        cluster.refused(1, key) >= 1,
        "the fence refused node 1:\n{}",
        cluster.dump(key)
    );
    assert_eq!(
        journal(&a.durability, key),
        (vec![1, 2, 3, 4], false),
        "suspended, not ended"
    );
    assert_eq!(
        a.durability.pid(key),
        None,
        "the durable process was suspended"
    );
    a.stop();
    b.stop();
}

#[test]
fn a_stand_in_that_finds_a_stale_incarnation_on_its_node_takes_the_journal_back() {
    // Node 2 resumed the journal, node 1 took it back: node 2's incarnation
    // still runs, stale. A stand-in started on node 2 finds it ("the one
    // running here under its key"), is fenced, and resumes the journal.
    let cluster = Cluster::new();
    let a = Node::start(&cluster, 1);
    let b = Node::start(&cluster, 2);
    let key = "stale";
    let on_a = a.stand_in(key);
    a.tell(&on_a, 1);
    wait_written(&cluster, key, &[1]);
    let stale = b.take_over(key);
    a.tell(&on_a, 2);
    wait_written(&cluster, key, &[1, 2]);
    assert_eq!(cluster.owner(key), Some(1));
    assert_eq!(
        b.durability.pid(key),
        Some(stale.pid()),
        "node 2's incarnation still runs"
    );

    let on_b = b.stand_in(key);
    for n in [3, 4, 5] {
        b.tell(&on_b, n);
    }
    wait_written(&cluster, key, &[1, 2, 3, 4, 5]);
    assert!(
        cluster.refused(2, key) >= 1,
        "the stale incarnation was fenced:\n{}",
        cluster.dump(key)
    );
    assert_eq!(cluster.owner(key), Some(2));
    assert_ne!(
        b.durability.pid(key),
        Some(stale.pid()),
        "a new incarnation runs on node 2"
    );

    // And back again to node 1, whose incarnation is the stale one now.
    for n in [6, 7] {
        a.tell(&on_a, n);
    }
    wait_written(&cluster, key, &range(1, 7));
    assert_eq!(cluster.owner(key), Some(1));
    b.tell(&on_b, 0);
    wait_written(&cluster, key, &[1, 2, 3, 4, 5, 6, 7, 0]);
    assert_eq!(cluster.outcomes(key), vec![range(1, 7)]);
    cluster.check_numbering(key);
    assert!(!on_a.is_finished() && !on_b.is_finished());
    a.stop();
    b.stop();
}

#[test]
fn two_stand_ins_on_two_nodes_trade_the_journal_back_and_forth() {
    let cluster = Cluster::new();
    let a = Node::start(&cluster, 1);
    let b = Node::start(&cluster, 2);
    let key = "traded";
    let on_a = a.stand_in(key);
    eventually("the journal was created", &cluster, key, || {
        cluster.created(key) == 1
    });
    // Node 2's stand-in resumes the journal when it starts: wait for it.
    let on_b = b.stand_in(key);
    eventually("node 2's stand-in took the journal", &cluster, key, || {
        cluster.owner(key) == Some(2)
    });
    let mut expected = Vec::new();
    for round in 0..20_u64 {
        let (node, stand_in) = if round % 2 == 0 {
            (&a, &on_a)
        } else {
            (&b, &on_b)
        };
        for i in 1..=5 {
            let n = round * 10 + i;
            node.tell(stand_in, n);
            expected.push(n);
        }
        wait_written(&cluster, key, &expected);
        let holder = if round % 2 == 0 { 1 } else { 2 };
        assert_eq!(cluster.owner(key), Some(holder), "round {round}");
    }
    assert!(
        cluster.refused(1, key) >= 9 && cluster.refused(2, key) >= 9,
        "{}",
        cluster.dump(key)
    );
    assert!(!on_a.is_finished(), "the stand-in on node 1 goes on");
    assert!(!on_b.is_finished(), "the stand-in on node 2 goes on");
    a.tell(&on_a, 0);
    expected.push(0);
    wait_written(&cluster, key, &expected);
    expected.pop();
    assert_eq!(cluster.outcomes(key), vec![expected]);
    cluster.check_numbering(key);
    a.stop();
    b.stop();
}

#[test]
fn runs_of_fences_separated_by_a_delivery_do_not_add_up_to_the_limit() {
    // Three runs of 12 fences in a row (36 in all), each ended by a message
    // that gets through: "more than 16 in a row" is never reached.
    let (cluster, a, b, stand_in) = contested(11);
    let key = "contested";
    wait_written(&cluster, key, &[1, 2, 3]);
    assert_eq!(cluster.refused(1, key), 12, "{}", cluster.dump(key));
    let mut expected = vec![1, 2, 3];
    for run in 1..=2_u64 {
        {
            let mut shared = cluster.lock();
            shared.owners.insert(key.to_owned(), 2);
            shared.contest = Some(Contest {
                key: key.to_owned(),
                thief: 2,
                steals_left: 11,
            });
        }
        let n = 3 + run;
        a.tell(&stand_in, n);
        expected.push(n);
        wait_written(&cluster, key, &expected);
        assert_eq!(
            cluster.refused(1, key),
            12 * (run as usize + 1),
            "{}",
            cluster.dump(key)
        );
        assert!(!stand_in.is_finished(), "run {run}: the stand-in goes on");
    }
    a.tell(&stand_in, 0);
    eventually("the tally closed", &cluster, key, || {
        outcome(&a.durability, key).is_some()
    });
    assert_eq!(outcome(&a.durability, key), Some(expected));
    cluster.check_numbering(key);
    a.stop();
    b.stop();
}

#[test]
fn two_senders_through_takeovers_have_each_message_journaled_once() {
    two_senders(Order::Any);
}

#[test]
fn two_senders_keep_their_own_order_through_takeovers() {
    two_senders(Order::Sent);
}

fn two_senders(order: Order) {
    // Two threads tell one stand-in their own streams while node 2 takes the
    // journal over again and again: each stream is journaled once, in the
    // order it was sent.
    let cluster = Cluster::new();
    let a = Node::start(&cluster, 1);
    let b = Node::start(&cluster, 2);
    let key = "two-senders";
    let stand_in = a.stand_in(key);
    eventually("the journal was created", &cluster, key, || {
        cluster.created(key) == 1
    });
    const EACH: u64 = 400;
    const CHUNK: u64 = 20;
    // A sender sends its chunk c once node 2 has taken the journal over c
    // times, so that every takeover has messages in flight behind it.
    let takeovers = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for first in [1_000_u64, 2_000] {
            let (a, stand_in, takeovers) = (&a, &stand_in, &takeovers);
            scope.spawn(move || {
                for n in first + 1..=first + EACH {
                    let chunk = ((n - first - 1) / CHUNK) as usize;
                    let deadline = Instant::now() + PATIENCE;
                    while takeovers.load(Ordering::SeqCst) < chunk {
                        assert!(Instant::now() < deadline, "no takeover came");
                        std::thread::sleep(Duration::from_micros(200));
                    }
                    a.tell(stand_in, n);
                    if n % 4 == 0 {
                        std::thread::yield_now();
                    }
                }
            });
        }
        // Take the journal over each time node 1 has written more, until
        // everything is written.
        loop {
            let written = cluster.written(key).len();
            if written == 2 * EACH as usize {
                break;
            }
            let _stale = b.take_over(key);
            takeovers.fetch_add(1, Ordering::SeqCst);
            eventually("node 1 wrote again", &cluster, key, || {
                cluster.written(key).len() > written
                    || cluster.written(key).len() == 2 * EACH as usize
            });
            b.suspend(key, &cluster);
        }
    });
    let takeovers = takeovers.into_inner();
    let written = cluster.written(key);
    assert_eq!(written.len(), 2 * EACH as usize, "{}", cluster.dump(key));
    for first in [1_000_u64, 2_000] {
        let stream: Vec<u64> = written
            .iter()
            .copied()
            .filter(|n| *n > first && *n <= first + EACH)
            .collect();
        assert_eq!(
            order.view(stream),
            range(first + 1, first + EACH),
            "the stream from {first}"
        );
    }
    assert!(
        takeovers >= (EACH / CHUNK) as usize - 1,
        "{takeovers} takeovers"
    );
    // Each takeover after which node 1 wrote again fenced it first.
    assert!(
        cluster.refused(1, key) + 1 >= takeovers,
        "{takeovers} takeovers, {} fences",
        cluster.refused(1, key)
    );
    assert!(!stand_in.is_finished());
    cluster.check_numbering(key);
    eprintln!("{takeovers} takeovers, {} fences", cluster.refused(1, key));
    a.stop();
    b.stop();
}

/// The order, pressed: for key after key (up to 60), one thread streams
/// 1 500 messages to a stand-in while node 2 takes the journal over again
/// and again; the first key whose journal is out of order stops it. Found
/// a bug (6 runs of 6): a stand-in whose pass to a new process stopped
/// halfway (the process ended between two sends, on another thread) put
/// the fenced messages behind those the pass had not reached. The
/// simulation cannot reach that interleaving (nothing ends between two
/// sends of one step there); this test is its check.
#[test]
fn refused_messages_go_again_in_the_order_they_were_sent() {
    const EACH: u64 = 1_500;
    let cluster = Cluster::new();
    let a = Node::start(&cluster, 1);
    let b = Node::start(&cluster, 2);
    let mut takeovers = 0;
    for round in 0..60 {
        let key = format!("order-{round}");
        let key = key.as_str();
        let stand_in = a.stand_in(key);
        eventually("the journal was created", &cluster, key, || {
            cluster.created(key) == 1
        });
        let done = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|scope| {
            scope.spawn(|| {
                for n in 1..=EACH {
                    a.tell(&stand_in, n);
                    if n % 4 == 0 {
                        std::thread::sleep(Duration::from_micros(100));
                    }
                }
                done.store(true, Ordering::SeqCst);
            });
            while !done.load(Ordering::SeqCst) {
                let written = cluster.written(key).len();
                let _stale = b.take_over(key);
                takeovers += 1;
                eventually("node 1 wrote again", &cluster, key, || {
                    cluster.written(key).len() > written || done.load(Ordering::SeqCst)
                });
                b.suspend(key, &cluster);
            }
        });
        wait_written_in(Order::Any, &cluster, key, &range(1, EACH));
        let written = cluster.written(key);
        let Some(wrong) = written.iter().zip(1..).position(|(n, i)| *n != i) else {
            continue;
        };
        // The refused append, and the record that wrote its messages again.
        let shared = cluster.lock();
        let mut count = 0;
        let mut last_refused = None;
        let mut culprit = None;
        for entry in &shared.log {
            match entry {
                Logged::Refused { key: k, .. } if k == key => last_refused = Some(entry.clone()),
                Logged::Written {
                    key: k, messages, ..
                } if k == key => {
                    count += messages.len();
                    if count > wrong {
                        culprit = Some(entry.clone());
                        break;
                    }
                }
                _ => {}
            }
        }
        panic!(
            "{key}, after {takeovers} takeovers in all: the journal is out of order from place \
             {wrong}: {:?}\nthe last refused append before: {last_refused:?}\nthe record: {culprit:?}",
            &written[wrong.saturating_sub(3)..(wrong + 30).min(written.len())],
        );
    }
    eprintln!("{takeovers} takeovers, all in order");
    a.stop();
    b.stop();
}
