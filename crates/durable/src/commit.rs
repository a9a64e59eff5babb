//! Group commit: one writer thread turns the records of every worker into
//! batches, each written with one sync.
//!
//! Protocol: a durable process yields the journal's command with its
//! record ([`Submission`]); the command's handler, on the worker, only
//! queues it. The writer takes everything queued (up to
//! [`MAX_BATCH_RECORDS`] records or [`MAX_BATCH_BYTES`] bytes), appends
//! it in one `Store::append` call, then completes each command: `Ok` once
//! the whole batch is durable, the store's error otherwise. While one
//! batch syncs, the next one gathers: a record waits for at most the sync
//! in progress and its own, and the number of syncs follows the load, not
//! the number of records. There is no lingering: an idle writer syncs a
//! lone record at once. A store that panics fails the batch it was
//! writing, as an error would; one that blocks holds every durable
//! process of its `Durability` (as a command handler that blocks holds
//! its commands).
//!
//! Sends that go ahead of their record (`runner.rs`, "early sends"): a
//! submission may carry sends to durable processes running here, which
//! the writer hands over *while it queues the record*, under the queue's
//! lock. So any record a receiver writes after stepping on such a send is
//! queued after the sender's record: it is written in the same batch or a
//! later one. Each record names the records whose early sends it stepped
//! on (`after`), and the writer keeps the rule that makes this safe:
//! - a record is written only if every record it stepped on was written
//!   (in an earlier batch, or earlier in the same batch of a store whose
//!   batches are all or nothing, [`Store::atomic_batches`]); for any other
//!   store a batch is cut before a record that depends on one in it;
//! - once a record of a runner (an incarnation) fails, the runner's later
//!   records, and every record that stepped on one of them, fail unwritten
//!   (`poisoned`): no journal gets a hole, and no receiver's journal takes
//!   a send its sender's journal does not have.
//!
//! So after a crash at any point, every durable record that took a send
//! has the sender's record of that send durable too (batches are durable
//! in order, each whole or not at all per process).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, OnceLock, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use sched::command::Completer;
use sched::engine::Context;
use sched::prelude::*;

use crate::error::{panic_text, DurableError};
use crate::store::{Append, Store};

/// The most records one sync writes.
pub const MAX_BATCH_RECORDS: usize = 8192;
/// The most bytes one sync writes (a batch holds at least one record).
pub const MAX_BATCH_BYTES: usize = 8 << 20;

/// A record as a runner hands it to the journal's command.
pub(crate) struct Submission {
    pub(crate) append: Append,
    /// The runner that wrote it (a number no other runner has).
    pub(crate) incarnation: u64,
    /// The records whose early sends it stepped on: (incarnation, record
    /// number), the latest of each.
    pub(crate) after: Vec<(u64, u64)>,
    /// Hands the record's early sends over, as it is queued.
    pub(crate) early: Option<HandOver>,
}

/// What hands a record's early sends to their receivers, given the
/// scheduler's context.
pub(crate) type HandOver = Box<dyn FnOnce(&Context) + Send>;

/// Why a record was not written, with its number: what the writer fails a
/// record's command with, so that a runner with several records in flight
/// knows which one.
#[derive(Debug)]
pub(crate) struct Unwritten {
    pub(crate) seq: u64,
    pub(crate) error: DurableError,
}

impl std::fmt::Display for Unwritten {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "record {} was not written: {}", self.seq, self.error)
    }
}

impl std::error::Error for Unwritten {}

/// Fails a record's command with why it was not written.
fn fail(done: Completer, seq: u64, error: DurableError) {
    let _ = done.fail(Unwritten { seq, error });
}

struct Item {
    append: Append,
    incarnation: u64,
    after: Vec<(u64, u64)>,
    done: Completer,
}

struct Queue {
    items: Vec<Item>,
    stopped: bool,
    /// The runners (incarnations) with a record in the batch being
    /// written now, and what waits for that write to end
    /// ([`Writer::after_written`]).
    writing: HashSet<u64>,
    after_batch: Vec<Release>,
}

/// What a runner that ended leaves to do once no record of it can still
/// reach the store (see [`Writer::after_written`]).
pub(crate) type Release = Box<dyn FnOnce() + Send>;

impl Queue {
    fn new() -> Queue {
        Queue {
            items: Vec::new(),
            stopped: false,
            writing: HashSet::new(),
            after_batch: Vec::new(),
        }
    }
}

/// A latency histogram of microseconds, log-linear (see `bucket_of`).
pub(crate) struct Latency {
    buckets: [AtomicU64; LATENCY_BUCKETS],
    max_us: AtomicU64,
}

/// Eight buckets per power of two of microseconds (a bucket's width is at
/// most an eighth of its value), up to about 2^32 µs.
const SUB: usize = 8;
const LATENCY_BUCKETS: usize = 33 * SUB;

fn bucket_of(us: u64) -> usize {
    if us < SUB as u64 {
        return us as usize;
    }
    let octave = 63 - us.leading_zeros() as usize; // >= 3
    let sub = ((us >> (octave - 3)) & (SUB as u64 - 1)) as usize;
    ((octave - 2) * SUB + sub).min(LATENCY_BUCKETS - 1)
}

/// The largest value of a bucket.
fn upper_of(bucket: usize) -> u64 {
    if bucket < SUB {
        return bucket as u64;
    }
    let octave = bucket / SUB + 2;
    let sub = (bucket % SUB) as u64;
    ((SUB as u64 + sub + 1) << (octave - 3)) - 1
}

impl Default for Latency {
    fn default() -> Self {
        Latency {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            max_us: AtomicU64::new(0),
        }
    }
}

impl Latency {
    pub(crate) fn record(&self, took: Duration) {
        let us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        self.buckets[bucket_of(us)].fetch_add(1, Relaxed);
        self.max_us.fetch_max(us, Relaxed);
    }

    /// The upper bound of the bucket holding quantile `q` (0..=1), at most
    /// the largest value recorded.
    pub(crate) fn quantile(&self, q: f64) -> Duration {
        let counts: Vec<u64> = self.buckets.iter().map(|b| b.load(Relaxed)).collect();
        let total: u64 = counts.iter().sum();
        if total == 0 {
            return Duration::ZERO;
        }
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let rank = ((total as f64) * q).ceil().max(1.0) as u64;
        let max = self.max_us.load(Relaxed);
        let mut seen = 0;
        for (i, count) in counts.iter().enumerate() {
            seen += count;
            if seen >= rank {
                return Duration::from_micros(upper_of(i).min(max));
            }
        }
        Duration::from_micros(max)
    }

    pub(crate) fn max(&self) -> Duration {
        Duration::from_micros(self.max_us.load(Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_value_falls_in_a_bucket_whose_bound_is_within_an_eighth() {
        for us in (0..100_000u64).chain([1 << 20, (1 << 30) + 12_345, u64::from(u32::MAX)]) {
            let bucket = bucket_of(us);
            let upper = upper_of(bucket);
            assert!(upper >= us, "{us} in bucket {bucket} bounded by {upper}");
            assert!(upper - us <= us / 8, "{us} bounded by {upper}: too wide");
            if bucket > 0 {
                assert!(
                    upper_of(bucket - 1) < us,
                    "{us} belongs to an earlier bucket"
                );
            }
        }
    }

    #[test]
    fn quantiles_come_from_the_recorded_values() {
        let latency = Latency::default();
        for us in 1..=100u64 {
            latency.record(Duration::from_micros(us * 10));
        }
        let p50 = latency.quantile(0.5).as_micros() as u64;
        assert!((500..=562).contains(&p50), "{p50}");
        assert_eq!(latency.quantile(1.0), Duration::from_micros(1_000));
        assert_eq!(latency.max(), Duration::from_micros(1_000));
    }
}

/// The writer's counters, read by [`crate::Durability::stats`].
#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) records: AtomicU64,
    pub(crate) bytes: AtomicU64,
    pub(crate) syncs: AtomicU64,
    pub(crate) failed_syncs: AtomicU64,
    pub(crate) largest_batch: AtomicU64,
    pub(crate) sync: Latency,
}

pub(crate) struct Writer {
    queue: Mutex<Queue>,
    ready: Condvar,
    /// Per runner (incarnation): the number of its first record that was
    /// not written; that record, every later one of the runner, and every
    /// record that stepped on one of them fail unwritten.
    poisoned: Mutex<HashMap<u64, u64>>,
    /// The store's batches are all or nothing ([`Store::atomic_batches`]).
    atomic: bool,
    pub(crate) counters: Counters,
    /// Set in a simulation (`Durability::for_simulation`): no writer
    /// thread, a process of the simulation writes instead.
    simulated: Option<Simulated>,
}

/// The simulation's writer: records queue as they do on a running node
/// (early sends handed over as they are queued), and a process of the
/// simulation, woken by each record, writes everything queued when it
/// steps, in the batches the writer thread would cut. So the order of
/// writes is the simulation's, batches hold several records, and a kill
/// can fall between a record's queueing and its write.
struct Simulated {
    store: Arc<dyn Store>,
    /// The writer itself, for its process.
    writer: Weak<Writer>,
    /// The writing process, spawned with the first record.
    process: OnceLock<Pid>,
}

/// The process that writes a simulation's journal (see [`Simulated`]).
struct Flusher {
    writer: Arc<Writer>,
}

impl Process for Flusher {
    type Done = ();

    fn step(&mut self, events: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
        events.for_each(drop);
        if let Some(sim) = &self.writer.simulated {
            self.writer.write_queued(&*sim.store);
        }
        Ok(())
    }
}

impl Writer {
    /// Starts the writer thread over `store`.
    pub(crate) fn start(store: Arc<dyn Store>) -> (Arc<Writer>, JoinHandle<()>) {
        let writer = Arc::new(Writer {
            queue: Mutex::new(Queue::new()),
            ready: Condvar::new(),
            poisoned: Mutex::new(HashMap::new()),
            atomic: store.atomic_batches(),
            counters: Counters::default(),
            simulated: None,
        });
        let thread = {
            let writer = writer.clone();
            std::thread::Builder::new()
                .name("sched-durable-writer".into())
                .spawn(move || writer.run(&*store))
                .expect("the journal's writer thread starts")
        };
        (writer, thread)
    }

    /// A writer without a thread, for a simulation: a process of the
    /// simulation writes the records (see [`Simulated`]).
    pub(crate) fn simulated(store: Arc<dyn Store>) -> Arc<Writer> {
        Arc::new_cyclic(|writer| Writer {
            queue: Mutex::new(Queue::new()),
            ready: Condvar::new(),
            poisoned: Mutex::new(HashMap::new()),
            atomic: store.atomic_batches(),
            counters: Counters::default(),
            simulated: Some(Simulated {
                store,
                writer: writer.clone(),
                process: OnceLock::new(),
            }),
        })
    }

    /// Wakes the simulation's writing process (spawning it with the first
    /// record). `false` if it could not be reached.
    fn wake(&self, sim: &Simulated, cx: &Context) -> bool {
        let pid = match sim.process.get() {
            Some(pid) => *pid,
            None => {
                let Some(writer) = sim.writer.upgrade() else {
                    return false;
                };
                let Ok(pid) = cx.allocate_pid() else {
                    return false;
                };
                if cx.spawn(Spawn::new(Flusher { writer }).at(pid)).is_err() {
                    return false;
                }
                *sim.process.get_or_init(|| pid)
            }
        };
        cx.send(pid, ()).is_ok()
    }

    /// Writes everything queued, in the batches the writer thread would
    /// cut (the simulation's writing process).
    fn write_queued(&self, store: &dyn Store) {
        loop {
            let batch = {
                let mut queue = self.queue.lock();
                if queue.items.is_empty() {
                    return;
                }
                self.cut(&mut queue)
            };
            self.write(store, batch);
        }
    }

    /// Queues a record; `done` completes once it is durable. Its early
    /// sends are handed over under the queue's lock, before it is queued:
    /// a record a receiver writes after stepping on one is queued after
    /// this one.
    pub(crate) fn submit(&self, submission: Submission, done: Completer) {
        let Submission {
            append,
            incarnation,
            after,
            early,
        } = submission;
        let item = Item {
            append,
            incarnation,
            after,
            done,
        };
        if let Some(sim) = &self.simulated {
            if !self.wake(sim, item.done.context()) {
                fail(item.done, item.append.seq, DurableError::Stopped);
                return;
            }
        }
        let mut queue = self.queue.lock();
        if queue.stopped {
            drop(queue);
            fail(item.done, item.append.seq, DurableError::Stopped);
            return;
        }
        hand_over(&item.done, early);
        queue.items.push(item);
        drop(queue);
        self.ready.notify_one();
    }

    /// Fails, unwritten, every record of the runner `incarnation` from
    /// `from` on that the writer has not taken yet (a runner that stops
    /// with records in flight), and those that stepped on their early
    /// sends. Returns the first record that is surely not written (every
    /// later one is not either); those before it may have been.
    pub(crate) fn abandon(&self, incarnation: u64, from: u64) -> Option<u64> {
        let mut removed = Vec::new();
        {
            let mut queue = self.queue.lock();
            let mut poisoned = self.poisoned.lock();
            poison(&mut poisoned, incarnation, from);
            let mut kept = Vec::with_capacity(queue.items.len());
            for item in queue.items.drain(..) {
                if item.incarnation == incarnation && item.append.seq >= from {
                    removed.push(item);
                } else {
                    kept.push(item);
                }
            }
            queue.items = kept;
        }
        let first = removed.iter().map(|item| item.append.seq).min();
        for item in removed {
            let key = item.append.key.clone();
            fail(item.done, item.append.seq, DurableError::NotKept(key));
        }
        first
    }

    /// Runs `release` once no record of the runner `incarnation` can
    /// still reach the store: at once, unless the batch being written now
    /// holds one, then as soon as that write has ended (written or not).
    /// A runner that ends calls it after [`abandon`](Writer::abandon), so
    /// nothing of it is queued any more; what it releases (its key, for
    /// the next process of the key on this node) is then not given to a
    /// process that could read the journal before a record of the ended
    /// one lands in it, and write its own records under the same numbers.
    pub(crate) fn after_written(&self, incarnation: u64, release: Release) {
        let mut queue = self.queue.lock();
        if queue.writing.contains(&incarnation) {
            queue.after_batch.push(release);
            return;
        }
        drop(queue);
        release();
    }

    /// Stops taking records; the writer writes what is queued and ends.
    pub(crate) fn stop(&self) {
        self.queue.lock().stopped = true;
        self.ready.notify_one();
    }

    fn take(&self) -> Option<Vec<Item>> {
        let mut queue = self.queue.lock();
        while queue.items.is_empty() {
            if queue.stopped {
                return None;
            }
            self.ready.wait(&mut queue);
        }
        Some(self.cut(&mut queue))
    }

    /// Takes the next batch off a queue that holds records.
    fn cut(&self, queue: &mut Queue) -> Vec<Item> {
        let mut bytes = 0;
        let mut count = 0;
        // For a store whose batches are not all or nothing: the runners
        // with a record in this batch. A record that stepped on one of
        // theirs, or a second record of one of them, waits for the next
        // batch, when the first one's fate is known.
        let mut runners: HashSet<u64> = HashSet::new();
        for item in &queue.items {
            let len = item.append.record.len();
            if count > 0 && (count == MAX_BATCH_RECORDS || bytes + len > MAX_BATCH_BYTES) {
                break;
            }
            if !self.atomic {
                if runners.contains(&item.incarnation)
                    || item.after.iter().any(|(i, _)| runners.contains(i))
                {
                    break;
                }
                runners.insert(item.incarnation);
            }
            bytes += len;
            count += 1;
        }
        let rest = queue.items.split_off(count);
        let batch = std::mem::replace(&mut queue.items, rest);
        queue
            .writing
            .extend(batch.iter().map(|item| item.incarnation));
        batch
    }

    /// The batch taken last has been written (or refused): what waited
    /// for it runs (see [`after_written`](Writer::after_written)).
    fn batch_ended(&self) {
        let waiting = {
            let mut queue = self.queue.lock();
            queue.writing.clear();
            std::mem::take(&mut queue.after_batch)
        };
        for release in waiting {
            release();
        }
    }

    fn run(&self, store: &dyn Store) {
        while let Some(batch) = self.take() {
            self.write(store, batch);
        }
    }

    /// Writes one batch with one append, and completes its records'
    /// commands. Records that follow one that was not written fail
    /// unwritten. What waited for the batch's write to end runs once the
    /// append has returned, before any command is completed: a runner
    /// that ends on seeing its last record durable finds its key's
    /// release free to run.
    fn write(&self, store: &dyn Store, batch: Vec<Item>) {
        let mut poisoned = self.poisoned.lock();
        let mut written = Vec::with_capacity(batch.len());
        for item in batch {
            let refused = poisoned
                .get(&item.incarnation)
                .is_some_and(|&first| item.append.seq >= first)
                .then(|| item.append.key.clone())
                .or_else(|| {
                    item.after.iter().find_map(|&(incarnation, seq)| {
                        poisoned
                            .get(&incarnation)
                            .is_some_and(|&first| seq >= first)
                            .then(|| {
                                format!(
                                    "a send of a record that was not written ({incarnation}/{seq})"
                                )
                            })
                    })
                });
            match refused {
                Some(why) => {
                    poison(&mut poisoned, item.incarnation, item.append.seq);
                    let error = DurableError::Store(format!(
                        "record {} of {:?} was not written: it follows {why}",
                        item.append.seq, item.append.key
                    ));
                    fail(item.done, item.append.seq, error);
                }
                None => written.push(item),
            }
        }
        // Not held while the store writes: a runner that stops must not
        // wait for a sync to abandon its records.
        drop(poisoned);
        if written.is_empty() {
            self.batch_ended();
            return;
        }
        let (appends, rest): (Vec<Append>, Vec<(u64, Completer)>) = written
            .into_iter()
            .map(|item| (item.append, (item.incarnation, item.done)))
            .unzip();
        let bytes: usize = appends.iter().map(|a| a.record.len()).sum();
        let started = Instant::now();
        // The store is user code: a panic fails this batch's records
        // (their effects are never released) and the writer goes on.
        let result =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| store.append(&appends)))
                .unwrap_or_else(|panic| {
                    Err(DurableError::Store(format!(
                        "the store panicked: {}",
                        panic_text(panic)
                    )))
                });
        self.counters.sync.record(started.elapsed());
        self.batch_ended();
        let c = &self.counters;
        match &result {
            Ok(_) => {
                c.syncs.fetch_add(1, Relaxed);
                c.records.fetch_add(appends.len() as u64, Relaxed);
                c.bytes.fetch_add(bytes as u64, Relaxed);
                c.largest_batch.fetch_max(appends.len() as u64, Relaxed);
            }
            Err(e) => {
                c.failed_syncs.fetch_add(1, Relaxed);
                tracing::error!(
                    "a journal batch of {} records was not written: {e}",
                    appends.len()
                );
            }
        }
        let mut poisoned = self.poisoned.lock();
        for (append, (incarnation, done)) in appends.iter().zip(rest) {
            let failed = match &result {
                Ok(fenced) => fenced.contains(&append.key),
                Err(_) => true,
            };
            if failed {
                poison(&mut poisoned, incarnation, append.seq);
            }
            // A process that ended meanwhile no longer waits: nothing to
            // tell it.
            match &result {
                Ok(_) if failed => fail(done, append.seq, DurableError::Fenced(append.key.clone())),
                Ok(_) => {
                    let _ = done.complete(Box::new(append.seq));
                }
                Err(e) => fail(done, append.seq, e.clone()),
            }
        }
    }
}

/// Marks `seq` of the runner `incarnation` not written (and so every
/// later record of it).
fn poison(poisoned: &mut HashMap<u64, u64>, incarnation: u64, seq: u64) {
    let first = poisoned.entry(incarnation).or_insert(seq);
    *first = (*first).min(seq);
}

/// Hands early sends to their receivers. One whose receiver has ended is
/// not lost: its sender sends it again once its record is durable, to
/// whatever process has the key then, and the outbox keeps it
/// (`runner.rs`).
fn hand_over(done: &Completer, early: Option<HandOver>) {
    if let Some(early) = early {
        early(done.context());
    }
}
