//! Durable processes in the deterministic simulation, against a model.
//!
//! Each seed runs a workload of senders and receivers on an in-memory
//! store, stops the "node" at random steps (the simulation is dropped
//! mid-run, wherever it is: before a record is written, between a commit
//! and the release of its effects, in the middle of a recovery's
//! deliveries), starts it again on the same store, with a recovery, and
//! runs the last incarnation to the end. Before the last run the disk
//! refuses every n-th append in half the incarnations (the processes whose
//! write failed end with the error and resume at the next recovery).
//! Messages are delayed at random
//! (so that sends overtake each other and the outbox's copies), and a
//! second `recover` runs now and then beside the live processes. The
//! model checks every seed:
//! - each send a sender released is taken exactly once, in its sender's
//!   order (each receiver's outcome lists what it took);
//! - every process ends, with the result an uninterrupted run gives;
//! - nothing is left in the outbox;
//! - a recovery beside running processes resumes none of them (at most
//!   one incarnation).
//!
//! `DURABLE_SIM_SEEDS=1000 cargo test --release -p sched-durable --test
//! simulation` runs a thousand seeds; CI runs the default.

use std::collections::HashMap;
use std::time::Duration;

use sched::command::{CommandId, TypedCommand};
use sched::sim::{Config, Faults};
use sched_durable::prelude::*;
use sched_durable::store::{Append, Journal, MemoryStore, Outgoing, Store};
use sched_durable::Status;

const SENDERS: u64 = 6;
const RECEIVERS: u64 = 3;
/// Sends per sender.
const SENDS: u64 = 12;

/// An idempotent command: answers its number.
const ECHO: TypedCommand<u64, u64> = TypedCommand::new(CommandId(1));

/// Sends 1..=SENDS, send `n` to receiver `n % RECEIVERS`, one per step,
/// each step woken by an echo (interrupted by a restart, it goes on as
/// answered: the echo is idempotent). Ends with how many it sent.
struct Sender {
    sent: u64,
}

impl Durable for Sender {
    const KIND: &'static str = "sender";
    type Args = ();
    type Message = ();
    type Done = u64;

    fn create((): ()) -> Self {
        Sender { sent: 0 }
    }

    fn step(&mut self, input: Input<()>, out: &mut Effects<'_>) -> Result<(), BoxError> {
        if let Input::Start | Input::Completion { .. } = input {
            if self.sent == SENDS {
                out.finish(&self.sent)?;
            } else {
                self.sent += 1;
                let to = receiver(self.sent % RECEIVERS);
                out.send::<Receiver>(&to, &self.sent)?;
                out.command(ECHO, Tag(self.sent), self.sent)?;
            }
        }
        Ok(())
    }
}

fn receiver(i: u64) -> String {
    format!("receiver-{i}")
}

fn sender(i: u64) -> String {
    format!("sender-{i}")
}

/// How many sends receiver `r` takes in all.
fn expected_at(r: u64) -> u64 {
    SENDERS * (1..=SENDS).filter(|n| n % RECEIVERS == r).count() as u64
}

/// Takes sends, and ends with every (sender, number) it took, in order.
struct Receiver {
    expect: u64,
    taken: Vec<(String, u64)>,
}

impl Durable for Receiver {
    const KIND: &'static str = "receiver";
    type Args = u64;
    type Message = u64;
    type Done = Vec<(String, u64)>;

    fn create(expect: u64) -> Self {
        Receiver {
            expect,
            taken: Vec::new(),
        }
    }

    fn step(&mut self, input: Input<u64>, out: &mut Effects<'_>) -> Result<(), BoxError> {
        if let Input::Message { message, from } = input {
            let from = from.ok_or("a message from outside")?;
            self.taken.push((from, message));
            if self.taken.len() as u64 == self.expect {
                out.finish(&self.taken)?;
            }
        }
        Ok(())
    }
}

/// A small deterministic generator (xorshift).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// A store whose disk refuses every `every`-th append (a storage fault:
/// the write fails, nothing of it is kept), or none when `every` is 0.
struct Refusing {
    inner: MemoryStore,
    every: u64,
    appends: std::sync::atomic::AtomicU64,
}

impl Store for Refusing {
    fn append(&self, batch: &[Append]) -> Result<Vec<String>, DurableError> {
        let n = self
            .appends
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            + 1;
        if self.every > 0 && n.is_multiple_of(self.every) {
            return Err(DurableError::Store(
                "the disk refused (a test said so)".into(),
            ));
        }
        self.inner.append(batch)
    }
    fn running(&self) -> Result<Vec<Journal>, DurableError> {
        self.inner.running()
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
        self.inner.forget(key)
    }
    fn outbox(&self) -> Result<Vec<Outgoing>, DurableError> {
        self.inner.outbox()
    }
    fn outbox_to(&self, key: &str) -> Result<Vec<Outgoing>, DurableError> {
        self.inner.outbox_to(key)
    }
    fn ended(&self, key: &str) -> Result<Option<bool>, DurableError> {
        self.inner.ended(key)
    }
    fn discard(&self, entries: &[(String, String, u64)]) -> Result<(), DurableError> {
        self.inner.discard(entries)
    }
    fn size(&self) -> Result<u64, DurableError> {
        self.inner.size()
    }
}

/// One node's life on `store`: recovers, spawns what the store does not
/// hold yet, then runs `steps` steps (or to the end when `None`). Before
/// the last run, the disk refuses some appends: the processes whose write
/// failed end with the error and resume at a later recovery. Returns
/// whether the simulation had nothing left to do.
fn incarnation(store: &MemoryStore, seed: u64, steps: Option<u64>, rng: &mut Rng) -> bool {
    let every = if steps.is_some() && rng.next().is_multiple_of(2) {
        5 + rng.next() % 30
    } else {
        0
    };
    let durability = Durability::for_simulation(Refusing {
        inner: store.clone(),
        every,
        appends: std::sync::atomic::AtomicU64::new(0),
    });
    durability.register::<Sender>().register::<Receiver>();
    let builder = durability.install(Scheduler::builder().handler(ECHO, |n: u64, done| {
        let _ = done.complete(n);
        Ok(())
    }));
    let faults = Faults::none()
        .delay_messages(0.2, Duration::from_millis(5))
        .delay_completions(0.2, Duration::from_millis(5));
    let mut sim = builder.simulation(Config::seed(seed).workers(2).faults(faults));
    let recovery = durability.recover(&sim).expect("recovery");
    assert!(
        recovery.failed.is_empty(),
        "seed {seed}: {:?}",
        recovery.failed
    );
    // The workload, started once: receivers in a random order among the
    // senders, so that sends often find their receiver not running yet.
    let mut keys: Vec<(String, bool)> = (0..SENDERS)
        .map(|i| (sender(i), true))
        .chain((0..RECEIVERS).map(|i| (receiver(i), false)))
        .collect();
    for i in (1..keys.len()).rev() {
        keys.swap(i, (rng.next() % (i as u64 + 1)) as usize);
    }
    for (key, is_sender) in keys {
        if durability.contains(&key).unwrap() {
            continue;
        }
        if is_sender {
            durability.spawn::<Sender>(&sim, &key, ()).unwrap();
        } else {
            let r: u64 = key.trim_start_matches("receiver-").parse().unwrap();
            durability
                .spawn::<Receiver>(&sim, &key, expected_at(r))
                .unwrap();
        }
        // Some steps between spawns, so that senders run before their
        // receivers exist.
        for _ in 0..rng.next() % 20 {
            let _ = sim.step();
        }
    }
    let budget = steps.unwrap_or(u64::MAX);
    // In half the runs only: a recovery would also hand over what a
    // spawn failed to.
    let second_recovery_at = rng.next().is_multiple_of(2).then(|| rng.next() % 200);
    let mut ran = 0;
    while ran < budget {
        if Some(ran) == second_recovery_at {
            let running: Vec<String> = (0..SENDERS)
                .map(sender)
                .chain((0..RECEIVERS).map(receiver))
                .filter(|key| durability.pid(key).is_some())
                .collect();
            let again = durability.recover(&sim).expect("a second recovery");
            // It may resume a process whose write the disk refused, never
            // one that runs.
            let twice: Vec<&str> = again
                .resumed
                .iter()
                .map(|s| s.key())
                .filter(|key| running.iter().any(|r| r == key))
                .collect();
            assert!(
                twice.is_empty(),
                "seed {seed}: a recovery beside running processes resumed {twice:?}"
            );
        }
        if matches!(sim.step(), sched::sim::Progress::Quiet) {
            return true;
        }
        ran += 1;
        assert!(ran < 1_000_000, "seed {seed}: the simulation does not end");
    }
    false
}

/// Runs one seed: kills at random steps, then a last incarnation to the
/// end; checks the model.
fn run_seed(seed: u64) {
    let store = MemoryStore::new();
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let kills = rng.next() % 4;
    for _ in 0..kills {
        let steps = rng.next() % 400;
        incarnation(&store, seed, Some(steps), &mut rng);
    }
    assert!(
        incarnation(&store, seed, None, &mut rng),
        "seed {seed}: the last run did not end"
    );
    check(&store, seed);
}

fn check(store: &MemoryStore, seed: u64) {
    let durability = Durability::for_simulation(store.clone());
    for i in 0..SENDERS {
        let status = durability.status(&sender(i)).unwrap();
        assert_eq!(
            status
                .as_ref()
                .and_then(|s| s.outcome::<u64>().transpose().ok().flatten()),
            Some(SENDS),
            "seed {seed}: {} ended {status:?}",
            sender(i)
        );
    }
    for r in 0..RECEIVERS {
        let key = receiver(r);
        let taken: Vec<(String, u64)> = match durability.status(&key).unwrap() {
            Some(Status::Done(bytes)) => postcard::from_bytes(&bytes).unwrap(),
            other => {
                // Name the sends it never took.
                let journal = durability.inspect(&key).unwrap().expect("its journal");
                let took: Vec<(String, u64)> = journal
                    .records
                    .iter()
                    .flat_map(|record| record.inputs.iter())
                    .filter_map(|input| match input {
                        sched_durable::RecordedInput::Message {
                            from: Some((from, _)),
                            body,
                        } => Some((from.clone(), postcard::from_bytes::<u64>(body).unwrap())),
                        _ => None,
                    })
                    .collect();
                let missing: Vec<String> = (0..SENDERS)
                    .flat_map(|i| {
                        (1..=SENDS)
                            .filter(|n| n % RECEIVERS == r)
                            .map(move |n| (sender(i), n))
                    })
                    .filter(|send| !took.contains(send))
                    .map(|(from, n)| format!("{from}'s {n}"))
                    .collect();
                panic!(
                    "seed {seed}: {key} did not finish ({other:?}): it never took {}",
                    missing.join(", ")
                );
            }
        };
        let mut by_sender: HashMap<&str, Vec<u64>> = HashMap::new();
        for (from, n) in &taken {
            by_sender.entry(from).or_default().push(*n);
        }
        for i in 0..SENDERS {
            let expected: Vec<u64> = (1..=SENDS).filter(|n| n % RECEIVERS == r).collect();
            let got = by_sender.remove(sender(i).as_str()).unwrap_or_default();
            assert_eq!(
                got,
                expected,
                "seed {seed}: {key} took from {} out of order, twice or not at all",
                sender(i)
            );
        }
        assert!(
            by_sender.is_empty(),
            "seed {seed}: {key} took from strangers"
        );
    }
    assert!(
        store.outbox().unwrap().is_empty(),
        "seed {seed}: sends left in the outbox: {:?}",
        store.outbox().unwrap()
    );
}

#[test]
fn durable_sends_are_taken_once_in_order_through_random_kills_over_many_seeds() {
    let seeds: u64 = std::env::var("DURABLE_SIM_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(150);
    for seed in 1..=seeds {
        run_seed(seed);
    }
}

#[test]
fn the_memory_store_passes_the_store_suite() {
    let store = MemoryStore::new();
    let reopened = store.clone();
    sched_durable::store::conformance::check(store, move || reopened);
}
