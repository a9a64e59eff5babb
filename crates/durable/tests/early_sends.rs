//! Sends that go ahead of their record's sync ("early sends",
//! `crates/durable/src/runner.rs`): a receiver steps on a send before the
//! sender's record is durable, and its own record must never be written
//! unless the sender's is. Here the sender's record is refused by the
//! store while the receiver's record, which took that record's send,
//! waits in the writer's queue behind it: the receiver's record must not
//! be written (its journal would take a send its sender's journal does
//! not have: after a recovery the sender sends that number again, and
//! the receiver drops it as a copy, or takes a different message under
//! it). Then a recovery on the same store runs both to the end, each send
//! taken exactly once, in order.

mod support;

use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::{Condvar, Mutex};
use sched_durable::prelude::*;
use sched_durable::store::{Append, Journal, MemoryStore, Outgoing, Store};
use sched_durable::{Record, RecordedInput};
use support::{scheduler, WAIT};

/// The number of hops of the ping-pong.
const HOPS: u64 = 6;
/// The ping's record whose batch the store refuses: its first (it
/// sends 1), so that nothing of the pong is in the refused batch.
const REFUSED: u64 = 0;

/// Set once the writer is inside the append that will be refused.
static ENTERED: (Mutex<bool>, Condvar) = (Mutex::new(false), Condvar::new());
/// Set once the pong has stepped on the refused record's send.
static STEPPED: (Mutex<bool>, Condvar) = (Mutex::new(false), Condvar::new());
/// The store has refused its batch (once).
static REFUSED_ONCE: AtomicBool = AtomicBool::new(false);

fn set(flag: &(Mutex<bool>, Condvar)) {
    *flag.0.lock() = true;
    flag.1.notify_all();
}

fn wait_for(flag: &(Mutex<bool>, Condvar), what: &str) {
    let deadline = Instant::now() + WAIT;
    let mut set = flag.0.lock();
    while !*set {
        assert!(
            !flag.1.wait_until(&mut set, deadline).timed_out(),
            "timed out waiting for {what}"
        );
    }
}

/// Sends 1 to the pong; on each reply `k`, sends `k + 1`, or finishes
/// with `k` at `HOPS`.
struct Ping;

impl Durable for Ping {
    const KIND: &'static str = "ping";
    type Args = ();
    type Message = u64;
    type Done = u64;
    fn create(_: ()) -> Self {
        Ping
    }
    fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        out.send(Key::<Pong>::new("pong"), 1)?;
        Ok(())
    }
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events.typed::<Self>() {
            match event {
                Event::Message(message) if message == HOPS => out.finish(message),
                Event::Message(message) => out.send(Key::<Pong>::new("pong"), message + 1)?,
                _ => {}
            }
        }
        Ok(())
    }
}

/// Takes the ping's numbers, each the next one (anything else fails it),
/// replies with it, and finishes with the list at `HOPS`. On the refused
/// record's number (first time only), it steps once the writer holds
/// that record: its own record is queued behind it.
#[derive(Default)]
struct Pong {
    seen: Vec<u64>,
}

impl Durable for Pong {
    const KIND: &'static str = "pong";
    type Args = ();
    type Message = u64;
    type Done = Vec<u64>;
    fn create(_: ()) -> Self {
        Pong::default()
    }
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events.typed::<Self>() {
            if let Event::Message(message) = event {
                if message != self.seen.len() as u64 + 1 {
                    return Err(format!("{message} after {:?}", self.seen).into());
                }
                if message == REFUSED + 1 && !REFUSED_ONCE.load(SeqCst) {
                    wait_for(&ENTERED, "the writer to hold the ping's record");
                    set(&STEPPED);
                }
                self.seen.push(message);
                out.send(Key::<Ping>::new("ping"), message)?;
                if message == HOPS {
                    out.finish(&self.seen);
                }
            }
        }
        Ok(())
    }
}

/// A memory store that refuses, once, the batch holding the ping's
/// record `REFUSED`, after the pong has stepped on that record's send.
struct Refusing(MemoryStore);

impl Store for Refusing {
    fn append(&self, batch: &[Append]) -> Result<Vec<String>, DurableError> {
        let refused = batch.iter().any(|a| a.key == "ping" && a.seq == REFUSED);
        if refused && !REFUSED_ONCE.load(SeqCst) {
            set(&ENTERED);
            wait_for(&STEPPED, "the pong to step on the refused record's send");
            REFUSED_ONCE.store(true, SeqCst);
            return Err(DurableError::Store("refused once, by the test".into()));
        }
        self.0.append(batch)
    }
    fn running(&self) -> Result<Vec<Journal>, DurableError> {
        self.0.running()
    }
    fn journal(&self, key: &str) -> Result<Option<Journal>, DurableError> {
        self.0.journal(key)
    }
    fn keys(&self) -> Result<Vec<(String, bool)>, DurableError> {
        self.0.keys()
    }
    fn contains(&self, key: &str) -> Result<bool, DurableError> {
        self.0.contains(key)
    }
    fn forget(&self, key: &str) -> Result<bool, DurableError> {
        self.0.forget(key)
    }
    fn outbox(&self) -> Result<Vec<Outgoing>, DurableError> {
        self.0.outbox()
    }
    fn discard(&self, entries: &[(String, String, u64)]) -> Result<(), DurableError> {
        self.0.discard(entries)
    }
    fn size(&self) -> Result<u64, DurableError> {
        self.0.size()
    }
    fn atomic_batches(&self) -> bool {
        self.0.atomic_batches()
    }
}

/// The (sender, number) of every send `journal` took.
fn taken(journal: &Journal) -> Vec<(String, u64)> {
    journal
        .records
        .iter()
        .flat_map(|bytes| Record::decode(bytes).unwrap().inputs)
        .filter_map(|input| match input {
            RecordedInput::Message { from, .. } => from,
            _ => None,
        })
        .collect()
}

#[test]
fn a_record_that_stepped_on_an_early_send_is_not_written_when_the_senders_record_is_not() {
    let store = MemoryStore::new();
    {
        let durability = Durability::open(Refusing(store.clone()));
        durability.register::<Ping>().register::<Pong>();
        let scheduler = scheduler(&durability, Arc::default());
        let pong = durability.spawn::<Pong>(&scheduler, "pong", ()).unwrap();
        pong.durable().wait_timeout(WAIT).unwrap();
        let ping = durability.spawn::<Ping>(&scheduler, "ping", ()).unwrap();
        // Both end on the refused batch: the ping's record was not
        // written, nor was the pong's that stepped on its send (queued
        // behind it: the pong stepped while the store held the ping's).
        assert!(matches!(ping.wait(), Err(DurableError::Failed(_))));
        assert!(matches!(pong.wait(), Err(DurableError::Failed(_))));
        scheduler.shutdown(WAIT);
    }
    assert!(REFUSED_ONCE.load(SeqCst));
    // The ping's first record was refused: it has no journal, and the
    // pong's journal took nothing (a send it took would be one no
    // sender's journal has).
    assert!(store.journal("ping").unwrap().is_none());
    let pong = store.journal("pong").unwrap().unwrap();
    assert_eq!(taken(&pong), Vec::new(), "the pong took a send never made");

    // A restart on the same store: both resume and end as an
    // uninterrupted run does, each send taken once, in order.
    let durability = Durability::open(store.clone());
    durability.register::<Ping>().register::<Pong>();
    let scheduler = scheduler(&durability, Arc::default());
    let mut recovery = durability.recover(&scheduler).unwrap();
    assert!(recovery.failed.is_empty(), "{:?}", recovery.failed);
    assert_eq!(recovery.resumed.len(), 1);
    let pong = recovery.resumed.remove(0).of::<Pong>().unwrap();
    let ping = durability.spawn::<Ping>(&scheduler, "ping", ()).unwrap();
    assert_eq!(ping.wait().unwrap(), HOPS);
    assert_eq!(pong.wait().unwrap(), (1..=HOPS).collect::<Vec<_>>());
    scheduler.shutdown(WAIT);
    let pong = store.journal("pong").unwrap().unwrap();
    let numbers: Vec<u64> = taken(&pong).into_iter().map(|(_, n)| n).collect();
    assert_eq!(
        numbers,
        (1..=HOPS).collect::<Vec<_>>(),
        "once each, in order"
    );
    assert!(store.outbox().unwrap().is_empty());
}
