//! Processes and stores the durable tests share.

#![allow(dead_code, unreachable_pub)]

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};
use sched::command::{CommandId, TypedCommand};
use sched_durable::prelude::*;
use sched_durable::store::{Append, Journal, Outgoing, Store};

/// Echoes its number, once a timer of the number's milliseconds modulo 5
/// has passed.
pub const ECHO: TypedCommand<u64, u64> = TypedCommand::new(CommandId(1));

pub const WAIT: Duration = Duration::from_secs(30);

/// A scheduler with `durability`'s journal and the echo handler, started.
pub fn scheduler(durability: &Durability, echoes: Arc<AtomicU64>) -> Scheduler {
    let builder = Scheduler::builder()
        .workers(2)
        .handler(ECHO, move |n: u64, done| {
            echoes.fetch_add(1, Relaxed);
            let _ = done.complete(n);
            Ok(())
        });
    let scheduler = durability.install(builder).build();
    scheduler.start();
    scheduler
}

/// Counts what it is told; finishes with the total when told 0.
#[derive(Default)]
pub struct Tally {
    pub total: u64,
}

impl Durable for Tally {
    const KIND: &'static str = "tally";
    type Args = ();
    type Message = u64;
    type Done = u64;

    fn create(_: ()) -> Self {
        Tally::default()
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events.typed::<Self>() {
            if let Event::Message(message) = event {
                if message == 0 {
                    out.finish(self.total);
                } else {
                    self.total += message;
                }
            }
        }
        Ok(())
    }
}

/// A store whose writes can be held back (`close`) or refused (`fail`).
pub struct Gated {
    inner: Box<dyn Store>,
    gate: Arc<Gate>,
}

#[derive(Default)]
pub struct Gate {
    closed: Mutex<bool>,
    opened: Condvar,
    failing: Mutex<bool>,
    held: Mutex<Option<String>>,
    fenced: Mutex<Option<String>>,
    panics: Mutex<u32>,
    pub appends: AtomicU64,
    /// Appends that reached the store (counted before the gate holds
    /// them).
    pub entered: AtomicU64,
    /// Every key whose record was appended, in order.
    pub appended: Mutex<Vec<String>>,
    outbox_closed: Mutex<bool>,
    outbox_opened: Condvar,
    /// Reads of the running journals (`Store::running`) finished.
    pub running_reads: AtomicU64,
    running_closed: Mutex<bool>,
    running_opened: Condvar,
}

impl Gate {
    pub fn close(&self) {
        *self.closed.lock() = true;
    }
    pub fn open(&self) {
        *self.closed.lock() = false;
        self.opened.notify_all();
    }
    /// The next `times` appends panic.
    pub fn panic_next(&self, times: u32) {
        *self.panics.lock() = times;
    }
    pub fn fail(&self, on: bool) {
        *self.failing.lock() = on;
    }
    /// From now on, records of `key` are acknowledged and not written: as
    /// if the node had stopped before they reached the disk.
    /// From now on, records of `key` are refused by the fence (as if
    /// another node had taken the journal over).
    pub fn fence_key(&self, key: &str) {
        *self.fenced.lock() = Some(key.to_owned());
    }
    /// Holds reads of the whole outbox (`Store::outbox`, which a recovery
    /// makes) until `open_outbox`.
    pub fn close_outbox(&self) {
        *self.outbox_closed.lock() = true;
    }
    pub fn open_outbox(&self) {
        *self.outbox_closed.lock() = false;
        self.outbox_opened.notify_all();
    }
    /// Holds the answer of the next reads of the running journals (read
    /// from the store first) until `open_running`.
    pub fn close_running(&self) {
        *self.running_closed.lock() = true;
    }
    pub fn open_running(&self) {
        *self.running_closed.lock() = false;
        self.running_opened.notify_all();
    }
    pub fn hold_key(&self, key: &str) {
        *self.held.lock() = Some(key.to_owned());
    }
}

impl Gated {
    pub fn new(path: &Path) -> (Gated, Arc<Gate>) {
        let gate = Arc::new(Gate::default());
        (
            Gated {
                inner: Box::new(RedbStore::create(path).unwrap()),
                gate: gate.clone(),
            },
            gate,
        )
    }
}

impl Store for Gated {
    fn append(&self, batch: &[Append]) -> Result<Vec<String>, DurableError> {
        self.gate.entered.fetch_add(1, Relaxed);
        let mut closed = self.gate.closed.lock();
        while *closed {
            self.gate.opened.wait(&mut closed);
        }
        drop(closed);
        {
            let mut panics = self.gate.panics.lock();
            if *panics > 0 {
                *panics -= 1;
                drop(panics);
                panic!("the store fell over (a test said so)");
            }
        }
        if *self.gate.failing.lock() {
            return Err(DurableError::Store(
                "the disk is full (a test said so)".into(),
            ));
        }
        self.gate.appends.fetch_add(1, Relaxed);
        self.gate
            .appended
            .lock()
            .extend(batch.iter().map(|a| a.key.clone()));
        if let Some(fenced) = &*self.gate.fenced.lock() {
            let kept: Vec<Append> = batch.iter().filter(|a| &a.key != fenced).cloned().collect();
            self.inner.append(&kept)?;
            let refused = batch.iter().any(|a| &a.key == fenced);
            return Ok(if refused {
                vec![fenced.clone()]
            } else {
                vec![]
            });
        }
        match &*self.gate.held.lock() {
            Some(held) => {
                let kept: Vec<Append> = batch.iter().filter(|a| &a.key != held).cloned().collect();
                self.inner.append(&kept)
            }
            None => self.inner.append(batch),
        }
    }
    fn running(&self) -> Result<Vec<Journal>, DurableError> {
        let read = self.inner.running();
        self.gate.running_reads.fetch_add(1, Relaxed);
        let mut closed = self.gate.running_closed.lock();
        while *closed {
            self.gate.running_opened.wait(&mut closed);
        }
        read
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
        let mut closed = self.gate.outbox_closed.lock();
        while *closed {
            self.gate.outbox_opened.wait(&mut closed);
        }
        drop(closed);
        self.inner.outbox()
    }
    fn outbox_to(&self, key: &str) -> Result<Vec<Outgoing>, DurableError> {
        self.inner.outbox_to(key)
    }
    fn outbox_holds_earlier(&self, to: &str, from: &str, seq: u64) -> Result<bool, DurableError> {
        self.inner.outbox_holds_earlier(to, from, seq)
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
