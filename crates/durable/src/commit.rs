//! Group commit: one writer thread turns the records of every worker into
//! batches, each written with one sync.
//!
//! Protocol: a durable process yields the journal's command with its
//! record ([`crate::store::Append`]); the command's handler, on the
//! worker, only queues it. The writer takes everything queued (up to
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

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use sched::command::Completer;

use crate::error::{panic_text, DurableError};
use crate::store::{Append, Store};

/// The most records one sync writes.
pub const MAX_BATCH_RECORDS: usize = 8192;
/// The most bytes one sync writes (a batch holds at least one record).
pub const MAX_BATCH_BYTES: usize = 8 << 20;

struct Queue {
    items: Vec<(Append, Completer)>,
    stopped: bool,
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
    pub(crate) counters: Counters,
    /// Set when records are written on the thread that submits them
    /// (`Durability::for_simulation`): no writer thread, one append per
    /// record.
    inline: Option<Arc<dyn Store>>,
}

impl Writer {
    /// Starts the writer thread over `store`.
    pub(crate) fn start(store: Arc<dyn Store>) -> (Arc<Writer>, JoinHandle<()>) {
        let writer = Arc::new(Writer {
            queue: Mutex::new(Queue {
                items: Vec::new(),
                stopped: false,
            }),
            ready: Condvar::new(),
            counters: Counters::default(),
            inline: None,
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

    /// A writer without a thread: each record is written when it is
    /// submitted, on the submitting thread (in a simulation, the
    /// simulation's own), so that the order of writes is the
    /// simulation's.
    pub(crate) fn inline(store: Arc<dyn Store>) -> Arc<Writer> {
        Arc::new(Writer {
            queue: Mutex::new(Queue {
                items: Vec::new(),
                stopped: false,
            }),
            ready: Condvar::new(),
            counters: Counters::default(),
            inline: Some(store),
        })
    }

    /// Queues a record; `done` completes once it is durable.
    pub(crate) fn submit(&self, append: Append, done: Completer) {
        if let Some(store) = &self.inline {
            if self.queue.lock().stopped {
                let _ = done.fail(DurableError::Stopped);
            } else {
                self.write(&**store, vec![(append, done)]);
            }
            return;
        }
        let mut queue = self.queue.lock();
        if queue.stopped {
            drop(queue);
            let _ = done.fail(DurableError::Stopped);
            return;
        }
        queue.items.push((append, done));
        drop(queue);
        self.ready.notify_one();
    }

    /// Stops taking records; the writer writes what is queued and ends.
    pub(crate) fn stop(&self) {
        self.queue.lock().stopped = true;
        self.ready.notify_one();
    }

    fn take(&self) -> Option<Vec<(Append, Completer)>> {
        let mut queue = self.queue.lock();
        while queue.items.is_empty() {
            if queue.stopped {
                return None;
            }
            self.ready.wait(&mut queue);
        }
        let mut bytes = 0;
        let mut count = 0;
        for (append, _) in &queue.items {
            if count > 0
                && (count == MAX_BATCH_RECORDS || bytes + append.record.len() > MAX_BATCH_BYTES)
            {
                break;
            }
            bytes += append.record.len();
            count += 1;
        }
        let rest = queue.items.split_off(count);
        Some(std::mem::replace(&mut queue.items, rest))
    }

    fn run(&self, store: &dyn Store) {
        while let Some(batch) = self.take() {
            self.write(store, batch);
        }
    }

    /// Writes one batch with one append, and completes its records'
    /// commands.
    fn write(&self, store: &dyn Store, batch: Vec<(Append, Completer)>) {
        {
            let (appends, waiters): (Vec<Append>, Vec<Completer>) = batch.into_iter().unzip();
            let bytes: usize = appends.iter().map(|a| a.record.len()).sum();
            let keys: Vec<String> = appends.iter().map(|a| a.key.clone()).collect();
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
            for (key, done) in keys.into_iter().zip(waiters) {
                // A process that ended meanwhile no longer waits: nothing
                // to tell it.
                let _ = match &result {
                    Ok(fenced) if fenced.contains(&key) => done.fail(DurableError::Fenced(key)),
                    Ok(_) => done.complete(Box::new(())),
                    Err(e) => done.fail(e.clone()),
                };
            }
        }
    }
}
