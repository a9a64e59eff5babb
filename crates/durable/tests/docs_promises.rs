//! Tests written from the documentation only (docs/guide/durable.md, the
//! crate's README and its rustdoc): each tries to break one documented
//! promise of durable processes.

use sched::sim::Config;
use sched_durable::prelude::*;
use sched_durable::store::{MemoryStore, Store};
use sched_durable::{Recovery, Status};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

const LONG: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------- processes

/// Sends `burst` numbers (1, 2, 3, ...) to every target per step, one step
/// per 1 ms timer, for `rounds` steps; finishes with how many it sent to
/// each target.
struct Pump {
    targets: Vec<String>,
    rounds: u64,
    burst: u64,
    round: u64,
    sent: u64,
}

impl Durable for Pump {
    const KIND: &'static str = "pump";
    type Args = (Vec<String>, u64, u64);
    type Message = ();
    type Done = u64;

    fn create((targets, rounds, burst): Self::Args) -> Self {
        Pump {
            targets,
            rounds,
            burst,
            round: 0,
            sent: 0,
        }
    }

    fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        self.next_round(out)
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events.typed::<Self>() {
            if let Event::Timer { .. } = event {
                self.next_round(out)?;
            }
        }
        Ok(())
    }
}

impl Pump {
    /// One round: a burst to every target, then the next timer or the end.
    fn next_round(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        self.round += 1;
        for _ in 0..self.burst {
            self.sent += 1;
            for target in &self.targets {
                out.send(Key::<Collect>::new(target.as_str()), self.sent)?;
            }
        }
        if self.round >= self.rounds {
            out.finish(self.sent);
        } else {
            out.set_timer(Duration::from_millis(1), Tag(1));
        }
        Ok(())
    }
}

/// Sends what it is told: a message `(to, n)` makes it send `n` to the
/// `Collect` process `to`. Never finishes.
struct Relay;

impl Durable for Relay {
    const KIND: &'static str = "relay";
    type Args = ();
    type Message = (String, u64);
    type Done = ();

    fn create(_: ()) -> Self {
        Relay
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events.typed::<Self>() {
            if let Event::Message((to, n)) = event {
                out.send(Key::<Collect>::new(to), n)?;
            }
        }
        Ok(())
    }
}

/// The stop word of a `Collect`: told from outside, it finishes at once.
const STOP: u64 = u64::MAX;

/// Collects every message as (sender, number) in the order it took them;
/// finishes with them once it has `expected`, or when told `STOP` from
/// outside.
struct Collect {
    expected: u64,
    got: Vec<(String, u64)>,
}

impl Durable for Collect {
    const KIND: &'static str = "collect";
    type Args = u64;
    type Message = u64;
    type Done = Vec<(String, u64)>;

    fn create(expected: u64) -> Self {
        Collect {
            expected,
            got: Vec::new(),
        }
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        let from = events.sender().map(str::to_owned);
        for event in events.typed::<Self>() {
            if let Event::Message(message) = event {
                if from.is_none() && message == STOP {
                    out.finish(&self.got);
                    return Ok(());
                }
                self.got.push((
                    from.clone().unwrap_or_else(|| "outside".to_owned()),
                    message,
                ));
                if self.got.len() as u64 == self.expected {
                    out.finish(&self.got);
                }
            }
        }
        Ok(())
    }
}

/// Finishes on its first step with its argument, or fails with it if it
/// starts with "fail".
struct Once;

impl Durable for Once {
    const KIND: &'static str = "once";
    type Args = String;
    type Message = ();
    type Done = ();

    fn create(_: String) -> Self {
        Once
    }

    fn step(&mut self, _: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
        Ok(())
    }
}

/// Finishes with its argument on start, or fails with it if it starts with
/// "fail" (a separate type so that `Once` can stay pending).
struct Quick {
    word: String,
}

impl Durable for Quick {
    const KIND: &'static str = "quick";
    type Args = String;
    type Message = ();
    type Done = String;

    fn create(word: String) -> Self {
        Quick { word }
    }

    fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        if self.word.starts_with("fail") {
            return Err(self.word.clone().into());
        }
        out.finish(&self.word);
        Ok(())
    }

    fn step(&mut self, _: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
        Ok(())
    }
}

// ---------------------------------------------------------------- helpers

fn register(durability: &Durability) {
    durability.register::<Pump>();
    durability.register::<Relay>();
    durability.register::<Collect>();
    durability.register::<Once>();
    durability.register::<Quick>();
}

struct Node {
    durability: Durability,
    scheduler: Scheduler,
    recovery: Recovery,
}

/// Opens a node on the store at `path` (created if `create`), registers
/// every type, starts the scheduler, recovers.
fn start(path: &Path, create: bool) -> Node {
    let store = if create {
        RedbStore::create(path)
    } else {
        RedbStore::open(path)
    }
    .unwrap_or_else(|e| panic!("opening {}: {e}", path.display()));
    start_on(store)
}

fn start_on(store: impl Store) -> Node {
    let durability = Durability::open(store);
    register(&durability);
    let scheduler = durability.install(Scheduler::builder().workers(2)).build();
    scheduler.start();
    let recovery = durability.recover(&scheduler).expect("recover");
    assert!(
        recovery.failed.is_empty(),
        "recovery failed: {:?}",
        recovery.failed
    );
    Node {
        durability,
        scheduler,
        recovery,
    }
}

/// A node stop: shut the scheduler down, then drop it and its Durability.
fn stop(node: Node) {
    let Node {
        durability,
        scheduler,
        recovery,
    } = node;
    scheduler.shutdown(Duration::from_secs(5));
    drop(recovery);
    drop(scheduler);
    drop(durability);
}

/// Polls `status(key)` until the process is done (30 s at most).
fn outcome<T: serde::de::DeserializeOwned>(durability: &Durability, key: &str) -> T {
    let deadline = Instant::now() + LONG;
    loop {
        match durability.status(key).expect("status") {
            Some(status @ Status::Done(_)) => {
                return status.outcome::<T>().expect("done").expect("decodes");
            }
            Some(Status::Failed(error)) => panic!("{key} failed: {error}"),
            other => assert!(
                Instant::now() < deadline,
                "{key} did not finish within 30 s (status {other:?}, stats {:?})",
                durability.stats()
            ),
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Polls `cond` until it holds (30 s at most).
fn until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + LONG;
    while !cond() {
        assert!(Instant::now() < deadline, "not within 30 s: {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Checks that `got` holds, from each sender, exactly 1..=count in order.
fn assert_channels(receiver: &str, got: &[(String, u64)], senders: &BTreeMap<String, u64>) {
    let mut per: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    for (from, n) in got {
        per.entry(from.as_str()).or_default().push(*n);
    }
    for (sender, numbers) in &per {
        assert!(
            senders.contains_key(*sender),
            "{receiver} took from unknown sender {sender}"
        );
        let want: Vec<u64> = (1..=senders[*sender]).collect();
        assert_eq!(
            numbers, &want,
            "{receiver}: the channel from {sender} is not 1..=n once, in order"
        );
    }
    for (sender, count) in senders {
        if *count > 0 {
            assert!(
                per.contains_key(sender.as_str()),
                "{receiver} took nothing from {sender}"
            );
        }
    }
}

// ---------------------------------------------------------------- 1. sends

/// Promise: "if it does not run yet, the outbox keeps it and it is handed
/// over when a process of that key is spawned": every send is taken exactly
/// once, in its sender's order, even when all of them were made before the
/// receiver was spawned (and one receiver running from the start takes the
/// same sends live).
#[test]
fn sends_made_before_the_receiver_is_spawned_are_taken_once_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let node = start(&dir.path().join("s.redb"), true);
    let d = &node.durability;
    let pumps = 8;
    let (rounds, burst) = (10, 3);
    let expected = pumps * rounds * burst;
    let mut early = d
        .spawn::<Collect>(&node.scheduler, "early", expected)
        .unwrap();
    let mut handles = Vec::new();
    for p in 0..pumps {
        let targets = vec!["early".to_owned(), "late".to_owned()];
        handles.push(
            d.spawn::<Pump>(
                &node.scheduler,
                &format!("pump-{p}"),
                (targets, rounds, burst),
            )
            .unwrap(),
        );
    }
    for mut h in handles {
        assert_eq!(h.wait_timeout(LONG).unwrap(), rounds * burst);
    }
    let mut late = d
        .spawn::<Collect>(&node.scheduler, "late", expected)
        .unwrap();
    let senders: BTreeMap<String, u64> = (0..pumps)
        .map(|p| (format!("pump-{p}"), rounds * burst))
        .collect();
    let got: Vec<(String, u64)> = late.wait_timeout(LONG).unwrap();
    assert_channels("late", &got, &senders);
    let got: Vec<(String, u64)> = early.wait_timeout(LONG).unwrap();
    assert_channels("early", &got, &senders);
    stop(node);
}

/// Promise: exactly once, in order, per (sender, receiver) pair, when the
/// receiver's spawn races forty senders that are sending to it.
#[test]
fn forty_senders_racing_their_receivers_spawn_are_taken_once_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let node = start(&dir.path().join("race.redb"), true);
    let d = &node.durability;
    let (pumps, rounds, burst) = (40u64, 5u64, 2u64);
    let senders: BTreeMap<String, u64> = (0..pumps)
        .map(|p| (format!("p{p}"), rounds * burst))
        .collect();
    let receivers = ["r0", "r1", "r2"];
    let mut collected = Vec::new();
    std::thread::scope(|s| {
        let spawner = s.spawn(|| {
            let mut hs = Vec::new();
            for p in 0..pumps {
                let targets = receivers.iter().map(|r| r.to_string()).collect();
                hs.push(
                    d.spawn::<Pump>(&node.scheduler, &format!("p{p}"), (targets, rounds, burst))
                        .unwrap(),
                );
            }
            hs
        });
        // r0 before any sender, r1 in the middle of them, r2 once they all run.
        collected.push(
            d.spawn::<Collect>(&node.scheduler, "r0", pumps * rounds * burst)
                .unwrap(),
        );
        until("some senders spawned", || {
            d.pid("p20").is_some() || d.contains("p20").unwrap_or(false)
        });
        collected.push(
            d.spawn::<Collect>(&node.scheduler, "r1", pumps * rounds * burst)
                .unwrap(),
        );
        let hs = spawner.join().unwrap();
        collected.push(
            d.spawn::<Collect>(&node.scheduler, "r2", pumps * rounds * burst)
                .unwrap(),
        );
        for mut h in hs {
            h.wait_timeout(LONG).unwrap();
        }
    });
    for (mut h, name) in collected.into_iter().zip(receivers) {
        let got: Vec<(String, u64)> = h.wait_timeout(LONG).unwrap();
        assert_channels(name, &got, &senders);
    }
    assert_eq!(
        d.stats().held,
        0,
        "sends still held after every receiver finished"
    );
    stop(node);
}

/// Promise: "every send a committed record released is taken exactly once,
/// in its sender's order, through crashes and restarts of either side",
/// with receivers spawned before the first restart, between restarts
/// (right before a stop), and only in the last run; nodes stopped right
/// after `recover`, and in the middle of the load.
#[test]
fn sends_are_taken_once_in_order_across_restarts_of_senders_and_receivers() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("restarts.redb");
    let (pumps, rounds, burst) = (6u64, 40u64, 2u64);
    let expected = pumps * rounds * burst;
    let receivers = ["first", "middle", "last"];
    let senders: BTreeMap<String, u64> = (0..pumps)
        .map(|p| (format!("pump-{p}"), rounds * burst))
        .collect();

    let node = start(&path, true);
    node.durability
        .spawn::<Collect>(&node.scheduler, "first", expected)
        .unwrap();
    for p in 0..pumps {
        let targets = receivers.iter().map(|r| r.to_string()).collect();
        node.durability
            .spawn::<Pump>(
                &node.scheduler,
                &format!("pump-{p}"),
                (targets, rounds, burst),
            )
            .unwrap();
    }
    // Records to wait for before each stop (0: stop right after recover).
    let mut node = node;
    for (run, wait_records) in [30u64, 0, 40, 1, 25].into_iter().enumerate() {
        let before = node.durability.stats().records;
        until("some progress before the stop", || {
            node.durability.stats().records >= before + wait_records
                || node
                    .durability
                    .keys()
                    .unwrap()
                    .iter()
                    .all(|(k, ended)| *ended || !k.starts_with("pump"))
        });
        if run == 1 && !node.durability.contains("middle").unwrap() {
            // Spawned, then the node stops before its first record may be durable.
            node.durability
                .spawn::<Collect>(&node.scheduler, "middle", expected)
                .unwrap();
        }
        stop(node);
        node = start(&path, false);
        assert!(node.recovery.failed.is_empty());
        // A spawn is durable only once its receipt says so: spawn again
        // what a stop may have lost.
        for p in 0..pumps {
            let key = format!("pump-{p}");
            if !node.durability.contains(&key).unwrap() {
                let targets = receivers.iter().map(|r| r.to_string()).collect();
                node.durability
                    .spawn::<Pump>(&node.scheduler, &key, (targets, rounds, burst))
                    .unwrap();
            }
        }
        if !node.durability.contains("first").unwrap() {
            node.durability
                .spawn::<Collect>(&node.scheduler, "first", expected)
                .unwrap();
        }
    }
    for name in ["middle", "last"] {
        if !node.durability.contains(name).unwrap() {
            node.durability
                .spawn::<Collect>(&node.scheduler, name, expected)
                .unwrap();
        }
    }
    for p in 0..pumps {
        assert_eq!(
            outcome::<u64>(&node.durability, &format!("pump-{p}")),
            rounds * burst
        );
    }
    for name in receivers {
        let got: Vec<(String, u64)> = outcome(&node.durability, name);
        assert_channels(name, &got, &senders);
    }
    stop(node);
}

/// Promises: "Sends to a process whose journal has ended are dropped";
/// "A key spawned again after `forget` starts a new channel with each
/// sender"; a send to a key that does not run yet is kept and handed over
/// when it is spawned, also after a restart of the node.
#[test]
fn a_key_spawned_again_after_forget_takes_a_new_channel_from_a_sender_that_kept_sending() {
    let store = MemoryStore::new();
    let node = start_on(store.clone());
    let d = &node.durability;
    let cx = &node.scheduler;
    d.spawn::<Relay>(cx, "relay", ())
        .unwrap()
        .durable()
        .wait_timeout(LONG)
        .unwrap();
    let mut r = d.spawn::<Collect>(cx, "r", 3).unwrap();
    for n in 1..=3 {
        d.send::<Relay>(cx, "relay", &("r".to_owned(), n))
            .unwrap()
            .wait_timeout(LONG)
            .unwrap();
    }
    let got: Vec<(String, u64)> = r.wait_timeout(LONG).unwrap();
    assert_eq!(
        got,
        vec![
            ("relay".to_owned(), 1),
            ("relay".to_owned(), 2),
            ("relay".to_owned(), 3)
        ]
    );
    // A send to the ended r: dropped.
    d.send::<Relay>(cx, "relay", &("r".to_owned(), 99))
        .unwrap()
        .wait_timeout(LONG)
        .unwrap();
    let deadline = Instant::now() + LONG;
    while !d.forget("r").unwrap() {
        assert!(
            Instant::now() < deadline,
            "forget(r) of an ended process never returned true"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    assert!(!d.contains("r").unwrap());
    assert_eq!(d.status("r").unwrap(), None);
    // Sends while no r exists: kept.
    for n in [4, 5] {
        d.send::<Relay>(cx, "relay", &("r".to_owned(), n))
            .unwrap()
            .wait_timeout(LONG)
            .unwrap();
    }
    until(
        "the sends to a key that does not run are in the outbox",
        || {
            store
                .outbox()
                .unwrap()
                .iter()
                .filter(|o| o.to == "r")
                .count()
                == 2
        },
    );
    stop(node);

    // Node restarts; the relay resumes; r is spawned again afterwards.
    let node = start_on(store.clone());
    assert_eq!(node.recovery.resumed.len(), 1, "only the relay is resumed");
    let d = &node.durability;
    let cx = &node.scheduler;
    let mut r = d.spawn::<Collect>(cx, "r", 3).unwrap();
    d.send::<Relay>(cx, "relay", &("r".to_owned(), 6))
        .unwrap()
        .wait_timeout(LONG)
        .unwrap();
    let got: Vec<(String, u64)> = r.wait_timeout(LONG).unwrap();
    assert_eq!(
        got,
        vec![
            ("relay".to_owned(), 4),
            ("relay".to_owned(), 5),
            ("relay".to_owned(), 6)
        ],
        "the new r must take, once and in order, exactly what the relay sent after the forget"
    );
    until("the outbox is empty", || store.outbox().unwrap().is_empty());
    stop(node);
}

/// Promise: a key forgotten and spawned again, while its sender keeps
/// sending live (no restart): the new process takes the sender's later
/// sends, in order (a new channel), and none of the old ones.
#[test]
fn forget_and_respawn_of_a_live_receiver_starts_a_new_channel() {
    let dir = tempfile::tempdir().unwrap();
    let node = start(&dir.path().join("forget.redb"), true);
    let d = &node.durability;
    let cx = &node.scheduler;
    d.spawn::<Relay>(cx, "relay", ())
        .unwrap()
        .durable()
        .wait_timeout(LONG)
        .unwrap();
    for generation in 0..5u64 {
        let mut r = d.spawn::<Collect>(cx, "r", 4).unwrap();
        for n in 1..=4 {
            d.send::<Relay>(cx, "relay", &("r".to_owned(), generation * 10 + n))
                .unwrap()
                .wait_timeout(LONG)
                .unwrap();
        }
        let got: Vec<(String, u64)> = r.wait_timeout(LONG).unwrap();
        let want: Vec<(String, u64)> = (1..=4)
            .map(|n| ("relay".to_owned(), generation * 10 + n))
            .collect();
        assert_eq!(got, want, "generation {generation}");
        let deadline = Instant::now() + LONG;
        while !d.forget("r").unwrap() {
            assert!(Instant::now() < deadline, "forget(r) never returned true");
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    stop(node);
}

// ---------------------------------------------------------------- 2. corrupt files

fn assert_corrupt_naming(result: Result<RedbStore, DurableError>, path: &Path, what: &str) {
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    match result {
        Err(DurableError::Corrupt(message)) => {
            assert!(
                message.contains(&name),
                "{what}: Corrupt does not name the file: {message}"
            )
        }
        Err(other) => panic!("{what}: expected Corrupt, got {other:?}"),
        Ok(_) => panic!("{what}: the store was opened"),
    }
}

/// Promise: `RedbStore::create` and `open` refuse "an empty file, a file
/// that is not a journal store (another program's redb file, or garbage)"
/// with a `DurableError::Corrupt` naming the file, and never panic.
#[test]
fn create_and_open_refuse_empty_foreign_and_garbage_files_with_corrupt_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty-file.redb");
    std::fs::write(&empty, b"").unwrap();
    let garbage = dir.path().join("garbage-file.redb");
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let bytes: Vec<u8> = (0..65_536)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    std::fs::write(&garbage, &bytes).unwrap();
    let text = dir.path().join("text-file.redb");
    std::fs::write(&text, b"redb\n").unwrap();
    let foreign = dir.path().join("foreign-file.redb");
    {
        const TABLE: redb::TableDefinition<&str, u64> = redb::TableDefinition::new("accounts");
        let db = redb::Database::create(&foreign).unwrap();
        let tx = db.begin_write().unwrap();
        {
            let mut table = tx.open_table(TABLE).unwrap();
            table.insert("alice", 7).unwrap();
        }
        tx.commit().unwrap();
    }
    let foreign_empty = dir.path().join("foreign-empty.redb");
    drop(redb::Database::create(&foreign_empty).unwrap());

    for path in [&empty, &garbage, &text, &foreign, &foreign_empty] {
        let before = std::fs::read(path).unwrap();
        let open = std::panic::catch_unwind(|| RedbStore::open(path));
        assert_corrupt_naming(
            open.expect("open panicked"),
            path,
            &format!("open {}", path.display()),
        );
        let create = std::panic::catch_unwind(|| RedbStore::create(path));
        assert_corrupt_naming(
            create.expect("create panicked"),
            path,
            &format!("create {}", path.display()),
        );
        if path != &foreign && path != &foreign_empty {
            assert_eq!(
                std::fs::read(path).unwrap(),
                before,
                "refusing {} changed it",
                path.display()
            );
        } else if std::fs::read(path).unwrap() != before {
            eprintln!(
                "note: refusing the foreign redb file {} rewrote it",
                path.display()
            );
        }
    }
}

/// Promise: opening "refuses ... one altered since it was written" with
/// `Corrupt` naming the file, and "nothing of the store's reading panics".
/// Flips bytes all over a real store (and truncates it): every open either
/// refuses with `Corrupt`, or opens a store whose keys read the same as
/// before (or fail with `Corrupt`); nothing panics.
#[test]
fn a_damaged_store_is_refused_with_corrupt_never_a_panic_nor_wrong_data() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.redb");
    {
        let node = start(&good, true);
        let d = &node.durability;
        for i in 0..5 {
            d.spawn::<Quick>(&node.scheduler, &format!("q{i}"), format!("word-{i}"))
                .unwrap();
            d.spawn::<Once>(&node.scheduler, &format!("o{i}"), String::new())
                .unwrap()
                .durable()
                .wait_timeout(LONG)
                .unwrap();
        }
        for i in 0..5 {
            outcome::<String>(d, &format!("q{i}"));
        }
        stop(node);
    }
    let original = std::fs::read(&good).unwrap();
    let keys = Durability::open(RedbStore::open(&good).unwrap())
        .keys()
        .unwrap();
    assert_eq!(keys.len(), 10);

    let damaged = dir.path().join("damaged-copy.redb");
    let len = original.len();
    let mut offsets: Vec<usize> = (0..1024.min(len)).step_by(16).collect();
    offsets.extend((0..len).step_by((len / 100).max(1)));
    offsets.push(len - 1);
    let mut accepted = 0;
    let mut refused = 0;
    for offset in offsets {
        let mut bytes = original.clone();
        bytes[offset] ^= 0x5A;
        std::fs::write(&damaged, &bytes).unwrap();
        let result = std::panic::catch_unwind(|| match RedbStore::open(&damaged) {
            Ok(store) => {
                let durability = Durability::open(store);
                match durability.keys() {
                    Ok(found) => {
                        assert_eq!(
                            found, keys,
                            "flip at {offset}: opened, and keys read differently"
                        );
                        Ok(())
                    }
                    Err(DurableError::Corrupt(_)) => Ok(()),
                    Err(other) => panic!("flip at {offset}: keys() failed with {other:?}"),
                }
            }
            Err(e) => Err(e),
        });
        match result {
            Err(_) => panic!("flip at byte {offset} of {len}: a panic"),
            Ok(Ok(())) => accepted += 1,
            Ok(Err(e)) => {
                assert_corrupt_naming(Err(e), &damaged, &format!("flip at {offset}"));
                refused += 1;
            }
        }
    }
    eprintln!(
        "byte flips: {refused} refused, {accepted} opened with intact keys (file of {len} bytes)"
    );
}

/// Promise: opening refuses a file "altered since it was written" with
/// `DurableError::Corrupt` naming the file (`open`: `Store` only "when it
/// does not exist, another process holds it, or the disk refused"). A
/// store cut short is such a file.
#[test]
fn a_truncated_store_is_refused_with_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.redb");
    {
        let node = start(&good, true);
        node.durability
            .spawn::<Once>(&node.scheduler, "o", String::new())
            .unwrap()
            .durable()
            .wait_timeout(LONG)
            .unwrap();
        stop(node);
    }
    let original = std::fs::read(&good).unwrap();
    let len = original.len();
    let damaged = dir.path().join("truncated-copy.redb");
    let mut wrong = Vec::new();
    for cut in [len / 2, 4096.min(len - 1), 512, 100, 16, 1] {
        std::fs::write(&damaged, &original[..cut]).unwrap();
        let result = std::panic::catch_unwind(|| RedbStore::open(&damaged));
        match result.expect("panic on a truncated file") {
            Err(DurableError::Corrupt(m)) if m.contains("truncated-copy.redb") => {}
            Err(other) => wrong.push(format!("cut to {cut} of {len}: {other:?}")),
            Ok(_) => wrong.push(format!("cut to {cut} of {len}: opened")),
        }
    }
    assert!(
        wrong.is_empty(),
        "truncated stores not refused with Corrupt: {wrong:#?}"
    );
}

// ---------------------------------------------------------------- 3. receipts

/// Promise: "once [a receipt] says `Ok`, a crash no longer loses the
/// message"; a receipt settling with an error says `NotKept` ("it will
/// never be applied") or `InDoubt` (applied by a recovery if the write
/// finished). Tells race a shutdown; after the restart every Ok message is
/// in its process, no NotKept one is, and none is there twice.
#[test]
fn receipts_racing_a_shutdown_agree_with_what_the_recovered_processes_hold() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("receipts.redb");
    let node = start(&path, true);
    let keys: Vec<String> = (0..8).map(|i| format!("inbox-{i}")).collect();
    for key in &keys {
        node.durability
            .spawn::<Collect>(&node.scheduler, key, u64::MAX - 1)
            .unwrap()
            .durable()
            .wait_timeout(LONG)
            .unwrap();
    }
    // Acknowledged before the shutdown: these must survive.
    let mut ok = BTreeSet::new();
    for n in 1..=100u64 {
        let key = &keys[(n % keys.len() as u64) as usize];
        node.durability
            .send::<Collect>(&node.scheduler, key, &n)
            .unwrap()
            .wait_timeout(LONG)
            .unwrap();
        ok.insert((key.clone(), n));
    }
    let told = AtomicU64::new(0);
    let stop_telling = AtomicBool::new(false);
    let receipts: Vec<(String, u64, Result<Receipt, DurableError>)> = std::thread::scope(|s| {
        let teller = s.spawn(|| {
            let mut receipts = Vec::new();
            let mut n = 100u64;
            while !stop_telling.load(Ordering::Relaxed) && n < 20_000 {
                n += 1;
                let key = &keys[(n % keys.len() as u64) as usize];
                let receipt = node.durability.send::<Collect>(&node.scheduler, key, &n);
                receipts.push((key.clone(), n, receipt));
                told.store(n, Ordering::Relaxed);
            }
            receipts
        });
        until("some messages told", || told.load(Ordering::Relaxed) >= 400);
        node.scheduler.shutdown(Duration::from_secs(5));
        stop_telling.store(true, Ordering::Relaxed);
        teller.join().unwrap()
    });
    let mut not_kept = BTreeSet::new();
    let (mut in_doubt, mut refused) = (0, 0);
    for (key, n, receipt) in &receipts {
        match receipt {
            Err(_) => refused += 1,
            Ok(receipt) => match receipt.wait_timeout(LONG) {
                Ok(()) => {
                    ok.insert((key.clone(), *n));
                }
                Err(DurableError::NotKept(k)) => {
                    assert_eq!(&k, key, "NotKept names another key");
                    not_kept.insert((key.clone(), *n));
                }
                Err(DurableError::InDoubt(k)) => {
                    assert_eq!(&k, key, "InDoubt names another key");
                    in_doubt += 1;
                }
                Err(other) => panic!("receipt of {n} to {key} after a shutdown: {other:?}"),
            },
        }
    }
    eprintln!(
        "told {}: {} ok, {} not kept, {in_doubt} in doubt, {refused} refused by tell",
        receipts.len(),
        ok.len(),
        not_kept.len()
    );
    let Node {
        durability,
        scheduler,
        recovery,
    } = node;
    drop(recovery);
    drop(scheduler);
    drop(durability);

    let node = start(&path, false);
    assert_eq!(node.recovery.resumed.len(), keys.len());
    let mut held = BTreeSet::new();
    for key in &keys {
        node.durability
            .send::<Collect>(&node.scheduler, key, &STOP)
            .unwrap()
            .wait_timeout(LONG)
            .unwrap();
        let got: Vec<(String, u64)> = outcome(&node.durability, key);
        for (from, n) in got {
            assert_eq!(from, "outside");
            assert!(held.insert((key.clone(), n)), "{key} holds {n} twice");
        }
    }
    for m in &ok {
        assert!(
            held.contains(m),
            "message {m:?} had an Ok receipt, and was lost by the restart"
        );
    }
    for m in &not_kept {
        assert!(
            !held.contains(m),
            "message {m:?} was NotKept (never applied), and was applied"
        );
    }
    stop(node);
}

/// Promise: `send` to a process that does not run is refused with
/// `NoSuchKey`; a tell racing the process's end settles (Ok, `NotKept`) or
/// is refused, and never hangs.
#[test]
fn tells_to_a_missing_or_ending_process_are_refused_or_settle() {
    let dir = tempfile::tempdir().unwrap();
    let node = start(&dir.path().join("tell.redb"), true);
    let d = &node.durability;
    let cx = &node.scheduler;
    assert!(matches!(
        d.send::<Collect>(cx, "nobody", &1),
        Err(DurableError::NoSuchKey(_))
    ));
    for round in 0..20 {
        let key = format!("c{round}");
        let mut h = d.spawn::<Collect>(cx, &key, 1).unwrap();
        let mut receipts = Vec::new();
        for n in 0..20 {
            receipts.push(d.send::<Collect>(cx, &key, &n));
        }
        let got: Vec<(String, u64)> = h.wait_timeout(LONG).unwrap();
        assert_eq!(got, vec![("outside".to_owned(), 0)]);
        for (n, r) in receipts.into_iter().enumerate() {
            match r {
                Err(DurableError::NoSuchKey(_)) => {}
                Err(other) => panic!("tell {n}: {other:?}"),
                Ok(receipt) => match receipt.wait_timeout(LONG) {
                    Ok(()) | Err(DurableError::NotKept(_)) => {}
                    Err(other) => panic!("{key}, receipt of {n}: {other:?}"),
                },
            }
        }
        until("the ended process no longer takes tells", || {
            matches!(
                d.send::<Collect>(cx, &key, &1),
                Err(DurableError::NoSuchKey(_))
            )
        });
    }
    stop(node);
}

// ---------------------------------------------------------------- 4. status / keys

/// Promise: `status` "works after a restart, before or without a
/// recovery": Done with its outcome, Failed with the step's error, Pending
/// for a suspended one, None for a forgotten or unknown key; `keys` lists
/// every journal in order with whether it ended; after `recover` the
/// suspended one is `Running` under the PID `pid` gives.
#[test]
fn status_and_keys_after_a_restart_before_and_after_recovery() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("status.redb");
    let node = start(&path, true);
    let d = &node.durability;
    let cx = &node.scheduler;
    assert_eq!(
        d.spawn::<Quick>(cx, "b-done", "yes".into())
            .unwrap()
            .wait_timeout(LONG)
            .unwrap(),
        "yes"
    );
    let failed = d
        .spawn::<Quick>(cx, "c-failed", "fail: no".into())
        .unwrap()
        .wait_timeout(LONG);
    assert!(
        matches!(failed, Err(DurableError::Failed(ref e)) if e.contains("fail: no")),
        "{failed:?}"
    );
    d.spawn::<Once>(cx, "a-pending", String::new())
        .unwrap()
        .durable()
        .wait_timeout(LONG)
        .unwrap();
    d.spawn::<Quick>(cx, "d-forgotten", "x".into())
        .unwrap()
        .wait_timeout(LONG)
        .unwrap();
    until("forget", || d.forget("d-forgotten").unwrap());
    assert!(
        matches!(d.status("a-pending").unwrap(), Some(Status::Running(pid)) if Some(pid) == d.pid("a-pending"))
    );
    assert!(matches!(
        d.spawn::<Quick>(cx, "b-done", "again".into()),
        Err(DurableError::KeyTaken(_))
    ));
    stop(node);

    // Restarted, without a scheduler nor a recovery.
    let durability = Durability::open(RedbStore::open(&path).unwrap());
    let want_keys = vec![
        ("a-pending".to_owned(), false),
        ("b-done".to_owned(), true),
        ("c-failed".to_owned(), true),
    ];
    assert_eq!(durability.keys().unwrap(), want_keys);
    assert_eq!(
        durability.status("a-pending").unwrap(),
        Some(Status::Pending)
    );
    let done = durability.status("b-done").unwrap().unwrap();
    assert_eq!(done.outcome::<String>().unwrap().unwrap(), "yes");
    assert!(
        matches!(durability.status("c-failed").unwrap(), Some(Status::Failed(e)) if e.contains("fail: no"))
    );
    assert_eq!(durability.status("d-forgotten").unwrap(), None);
    assert_eq!(durability.status("nobody").unwrap(), None);
    assert!(!durability.contains("d-forgotten").unwrap());
    assert!(durability.contains("c-failed").unwrap());
    drop(durability);

    // Restarted, recovered.
    let node = start(&path, false);
    let d = &node.durability;
    assert_eq!(node.recovery.resumed.len(), 1);
    assert_eq!(node.recovery.resumed[0].key(), "a-pending");
    assert_eq!(
        d.status("a-pending").unwrap(),
        Some(Status::Running(node.recovery.resumed[0].pid()))
    );
    assert_eq!(d.pid("a-pending"), Some(node.recovery.resumed[0].pid()));
    assert_eq!(d.keys().unwrap(), want_keys);
    // The forgotten key can be used again.
    assert_eq!(
        d.spawn::<Quick>(&node.scheduler, "d-forgotten", "z".into())
            .unwrap()
            .wait_timeout(LONG)
            .unwrap(),
        "z"
    );
    stop(node);
}

// ---------------------------------------------------------------- 5. recover beside running

/// Promise: "`recover` never resumes a process that runs on its node ...
/// calling `recover` periodically beside running processes is safe": a
/// thread calls `recover` in a loop while others spawn, tell and finish
/// processes; no recovery resumes any, and each finishes exactly once.
#[test]
fn recover_called_again_beside_running_processes_resumes_none() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("again.redb");
    // First a restart, so that some processes run as resumed ones.
    {
        let node = start(&path, true);
        for i in 0..20 {
            node.durability
                .spawn::<Collect>(&node.scheduler, &format!("old-{i}"), 2)
                .unwrap()
                .durable()
                .wait_timeout(LONG)
                .unwrap();
        }
        stop(node);
    }
    let node = start(&path, false);
    assert_eq!(node.recovery.resumed.len(), 20);
    let d = &node.durability;
    let cx = &node.scheduler;
    let again = d.recover(cx).unwrap();
    assert!(
        again.resumed.is_empty() && again.failed.is_empty(),
        "second recover resumed {}",
        again.resumed.len()
    );

    let done = AtomicBool::new(false);
    let recoveries = AtomicU64::new(0);
    std::thread::scope(|s| {
        let recoverer = s.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                let r = d.recover(cx).unwrap();
                assert!(
                    r.failed.is_empty(),
                    "recover beside running processes failed: {:?}",
                    r.failed
                );
                let keys: Vec<&str> = r.resumed.iter().map(|s| s.key()).collect();
                assert!(
                    keys.is_empty(),
                    "recover beside running processes resumed {keys:?}"
                );
                recoveries.fetch_add(1, Ordering::Relaxed);
            }
        });
        let mut handles = Vec::new();
        for i in 0..60 {
            let key = format!("new-{i}");
            handles.push((key.clone(), d.spawn::<Collect>(cx, &key, 2).unwrap()));
            d.send::<Collect>(cx, &key, &1).unwrap();
            d.send::<Collect>(cx, &key, &2).unwrap();
            let old = format!("old-{}", i % 20);
            if i < 20 {
                d.send::<Collect>(cx, &old, &1).unwrap();
                d.send::<Collect>(cx, &old, &2).unwrap();
            }
        }
        for (key, mut h) in handles {
            let got: Vec<(String, u64)> = h.wait_timeout(LONG).unwrap();
            assert_eq!(
                got,
                vec![("outside".to_owned(), 1), ("outside".to_owned(), 2)],
                "{key}"
            );
        }
        for i in 0..20 {
            let got: Vec<(String, u64)> = outcome(d, &format!("old-{i}"));
            assert_eq!(
                got,
                vec![("outside".to_owned(), 1), ("outside".to_owned(), 2)]
            );
        }
        until("at least 3 recoveries ran beside the load", || {
            recoveries.load(Ordering::Relaxed) >= 3
        });
        done.store(true, Ordering::Relaxed);
        recoverer.join().unwrap();
    });
    assert_eq!(
        d.stats().running,
        0,
        "processes still counted running: {:?}",
        d.stats()
    );
    stop(node);
}

// ---------------------------------------------------------------- 6. simulation

/// Runs the pump workload in `sched::sim` on a `MemoryStore`, the node
/// stopped after `kills[i]` steps of run i, the last run to the end;
/// returns what each receiver took.
fn simulate_with(
    seed: u64,
    kills: &[u64],
    rounds: u64,
    burst: u64,
) -> BTreeMap<String, Vec<(String, u64)>> {
    let store = MemoryStore::new();
    let pumps = 4u64;
    let expected = pumps * rounds * burst;
    for (run, steps) in kills.iter().map(Some).chain([None]).enumerate() {
        let durability = Durability::for_simulation(store.clone());
        register(&durability);
        let mut sim = durability
            .install(Scheduler::builder())
            .simulation(Config::seed(seed * 100 + run as u64).workers(2));
        let recovery = durability.recover(&sim).unwrap();
        assert!(
            recovery.failed.is_empty(),
            "seed {seed}: {:?}",
            recovery.failed
        );
        // Spawned in the first run, and again in a later one if the kill
        // came before their first record was written (a spawn is durable
        // only once its receipt says so).
        if !durability.contains("r-early").unwrap() {
            durability
                .spawn::<Collect>(&sim, "r-early", expected)
                .unwrap();
        }
        for p in 0..pumps {
            let key = format!("p{p}");
            if !durability.contains(&key).unwrap() {
                let targets = vec!["r-early".to_owned(), "r-late".to_owned()];
                durability
                    .spawn::<Pump>(&sim, &key, (targets, rounds, burst))
                    .unwrap();
            }
        }
        if run == 1 && !durability.contains("r-late").unwrap() {
            durability
                .spawn::<Collect>(&sim, "r-late", expected)
                .unwrap();
        }
        match steps {
            Some(steps) => {
                for _ in 0..*steps {
                    sim.step();
                }
            }
            None => {
                if !durability.contains("r-late").unwrap() {
                    durability
                        .spawn::<Collect>(&sim, "r-late", expected)
                        .unwrap();
                }
                sim.run().unwrap();
            }
        }
        drop(recovery);
        drop(sim);
        drop(durability);
    }
    let durability = Durability::for_simulation(store.clone());
    let senders: BTreeMap<String, u64> = (0..pumps)
        .map(|p| (format!("p{p}"), rounds * burst))
        .collect();
    let mut taken = BTreeMap::new();
    for name in ["r-early", "r-late"] {
        let status = durability.status(name).unwrap();
        let got: Vec<(String, u64)> = match status {
            Some(s @ Status::Done(_)) => s.outcome().unwrap().unwrap(),
            other => panic!("seed {seed}, kills {kills:?}: {name} is {other:?} after the last run"),
        };
        assert_channels(name, &got, &senders);
        taken.insert(name.to_owned(), got);
    }
    assert!(
        store.outbox().unwrap().is_empty(),
        "seed {seed}: outbox not empty at the end"
    );
    taken
}

/// Promises of the simulation support: `Durability::for_simulation` on a
/// `store::MemoryStore` ("a 'restart' is a new Durability on a clone of the
/// store and a new simulation"), nodes stopped "anywhere by dropping its
/// simulation after any number of sim.step() calls": every send taken
/// once, in its sender's order, the outbox empty at the end; and "a seed
/// decides every order" for a workload without timers.
#[test]
fn simulated_nodes_killed_at_any_step_keep_the_channels() {
    for seed in 1..=12u64 {
        let kills = kills_of(seed);
        simulate_with(seed, &kills, 6, 2); // timers: channels only
        let first = simulate_with(seed, &kills, 1, 12);
        let second = simulate_with(seed, &kills, 1, 12);
        assert_eq!(
            first, second,
            "seed {seed}, kills {kills:?}: the same seed gave another order"
        );
    }
}

fn kills_of(seed: u64) -> Vec<u64> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..3)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % 60
        })
        .collect()
}

/// Promise: in `sched::sim`, "a seed decides every order" and "a seed
/// replays the same run". Four senders each send 2 numbers per step, one
/// step per 1 ms durable timer (`Output::set_timer`), to two receivers;
/// the same seed, with no kill at all, must give the same interleaving.
#[test]
fn a_seed_decides_every_order_with_durable_timers() {
    for seed in 1..=6u64 {
        let first = simulate_with(seed, &[], 6, 2);
        let second = simulate_with(seed, &[], 6, 2);
        assert_eq!(
            first, second,
            "seed {seed}: the same seed gave another order"
        );
    }
}

/// Promise (Output::send): "A send to a key whose journal has ended is
/// dropped" (guide: "Sends to a process whose journal has ended are
/// dropped"). A live node, the receiver ended: the send must not stay in
/// the store's outbox.
#[test]
fn a_send_to_an_ended_process_is_dropped_from_the_outbox() {
    let store = MemoryStore::new();
    let node = start_on(store.clone());
    let d = &node.durability;
    let cx = &node.scheduler;
    d.spawn::<Relay>(cx, "relay", ())
        .unwrap()
        .durable()
        .wait_timeout(LONG)
        .unwrap();
    let mut r = d.spawn::<Collect>(cx, "r", 1).unwrap();
    d.send::<Relay>(cx, "relay", &("r".to_owned(), 1))
        .unwrap()
        .wait_timeout(LONG)
        .unwrap();
    let _: Vec<(String, u64)> = r.wait_timeout(LONG).unwrap();
    until("r ended", || {
        d.keys().unwrap().contains(&("r".to_owned(), true))
    });
    d.send::<Relay>(cx, "relay", &("r".to_owned(), 2))
        .unwrap()
        .wait_timeout(LONG)
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let left: Vec<(String, String, u64)> = store
            .outbox()
            .unwrap()
            .into_iter()
            .map(|o| (o.from, o.to, o.seq))
            .collect();
        if left.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "after 5 s the outbox still holds {left:?}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    stop(node);
}
