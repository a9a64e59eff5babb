//! Durable processes against the physical limit, in one run
//! (`cargo bench -p benches --bench durable`; `BENCH_QUICK=1` runs each
//! side once instead of three times).
//!
//! Throughput and latency: 10 000 durable processes on 2 workers, each
//! running 30 rounds of a command answered at once (31 journaled events
//! each: the start and 30 answers), on the embedded store in the
//! temporary directory. Beside it, the raw loop: the same shape with
//! nothing but the disk (10 000 records of our mean record size written
//! per batch with one `write` and one `fdatasync`, 31 batches, each record
//! waiting for the previous batch, as each of our processes waits for its
//! previous record). Reported per side: events/s, bytes/s, and the
//! latency from a record's submission to its durability (p50 / p99 /
//! max); ours also gives its syncs and the largest batch.
//!
//! Latency at a steady rate (the load below capacity): 1 000 durable
//! processes told messages from an outside thread at 50 000 a second
//! (bursts of 50 every millisecond) for 3 s; ours reports the time from
//! the step to its record's durability (p50 / p99 / max); the raw loop
//! gets 17-byte records at the same rate from a producer thread and a
//! writer that writes and `fdatasync`s whatever is queued, and reports
//! the time from a record's queueing to its sync. The saturated run above
//! is the overloaded case: its max is the worst any process waited.
//!
//! Workflows: a durable workflow of 3 steps, run one at a time (300 of
//! them) and 100 at a time (20 rounds), from its spawn to its outcome:
//! by commands (each step a command through the facade's command path,
//! answered at once by a handler: 4 records in a row) and by durable sends
//! (each step a send to a durable service process, which replies with a
//! send: 7 records in a row, the workflow's and the service's in turn).
//! Beside them, the same 3-step workflow as a plain (non-durable) process
//! with commands, and a raw loop of the journal's own record and batch
//! sizes: one `write` and one `fdatasync` per batch, as many batches as
//! the workflow run's syncs, each of the run's mean bytes per sync (its
//! records' total bytes over its syncs), one after the other.
//!
//! Recovery: 100 000 durable processes, each waiting on a timer an hour
//! away, suspended by a shutdown; the time `recover` takes to read,
//! rebuild and resume them all on a new scheduler: from their journals,
//! then again with a snapshot after every record (restored, nothing
//! replayed).

use std::fs::OpenOptions;
use std::io::Write;
use std::time::{Duration, Instant};

use sched::command::{CommandId, TypedCommand};
use sched_durable::prelude::*;
use sched_durable::DurableStats;

const PROCESSES: u64 = 10_000;
const ROUNDS: u64 = 30;
const RECOVERED: u64 = 100_000;

const ECHO: TypedCommand<u64, u64> = TypedCommand::new(CommandId(1));

struct Looper {
    left: u64,
    sum: u64,
}

impl Durable for Looper {
    const KIND: &'static str = "looper";
    type Args = u64;
    type Message = ();
    type Done = u64;

    fn create(rounds: u64) -> Self {
        Looper {
            left: rounds,
            sum: 0,
        }
    }

    fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        out.command(ECHO, Tag(1), self.left)?;
        Ok(())
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events.typed::<Self>() {
            if let Event::Completion { result, .. } = event {
                self.sum += result?.decode::<u64>()?;
                self.left -= 1;
                if self.left == 0 {
                    out.finish(self.sum);
                } else {
                    out.command(ECHO, Tag(1), self.left)?;
                }
            }
        }
        Ok(())
    }
}

/// Waits an hour, then finishes.
#[derive(serde::Serialize, serde::Deserialize)]
struct Sleeper;

impl Durable for Sleeper {
    const KIND: &'static str = "sleeper";
    type Args = ();
    type Message = ();
    type Done = ();
    fn create(_: ()) -> Self {
        Sleeper
    }
    fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        out.set_timer(Duration::from_secs(3_600), Tag(1));
        Ok(())
    }
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events.typed::<Self>() {
            if let Event::Timer { .. } = event {
                out.finish(());
            }
        }
        Ok(())
    }
}

fn durability(path: &std::path::Path) -> (Durability, Scheduler) {
    durability_with(path, false)
}

/// With `snapshots`, sleepers snapshot after every record.
fn durability_with(path: &std::path::Path, snapshots: bool) -> (Durability, Scheduler) {
    let durability = Durability::open(RedbStore::create(path).unwrap());
    durability
        .register::<Looper>()
        .register::<Sink>()
        .register::<Flow>()
        .register::<Service>();
    if snapshots {
        durability.register_with_snapshots::<Sleeper>(1);
    } else {
        durability.register::<Sleeper>();
    }
    let builder = Scheduler::builder()
        .workers(2)
        .handler(ECHO, |n: u64, done| {
            let _ = done.complete(n);
            Ok(())
        });
    let scheduler = durability.install(builder).build();
    scheduler.start();
    (durability, scheduler)
}

struct Side {
    events_per_s: f64,
    bytes_per_s: f64,
    p50: Duration,
    p99: Duration,
    max: Duration,
    note: String,
}

fn ours(dir: &std::path::Path) -> (Side, u64, DurableStats) {
    let path = dir.join("ours.redb");
    let _ = std::fs::remove_file(&path);
    let (durability, scheduler) = durability(&path);
    let started = Instant::now();
    let spawned: Vec<_> = (0..PROCESSES)
        .map(|i| {
            durability
                .spawn::<Looper>(&scheduler, &format!("p{i}"), ROUNDS)
                .unwrap()
        })
        .collect();
    let expected: u64 = (1..=ROUNDS).sum();
    for s in spawned {
        assert_eq!(s.wait().unwrap(), expected);
    }
    let took = started.elapsed();
    let stats = durability.stats();
    let events = PROCESSES * (ROUNDS + 1);
    assert_eq!(stats.records, events, "one record per event in this load");
    scheduler.shutdown(Duration::from_secs(5));
    drop(scheduler);
    drop(durability);
    let mean = stats.bytes / stats.records;
    (
        Side {
            events_per_s: events as f64 / took.as_secs_f64(),
            bytes_per_s: stats.bytes as f64 / took.as_secs_f64(),
            p50: stats.durable_p50,
            p99: stats.durable_p99,
            max: stats.durable_max,
            note: format!(
                "{} syncs, largest batch {}, sync p99 {:?}, {} B/record",
                stats.syncs, stats.largest_batch, stats.sync_p99, mean
            ),
        },
        mean,
        stats,
    )
}

/// The raw loop of a run's own record and batch sizes: `syncs` batches,
/// each of the run's mean bytes per sync, one `write` + `fdatasync` each,
/// one after the other. Returns (bytes/s, p50, p99 of one batch).
fn raw_same(dir: &std::path::Path, stats: &DurableStats) -> (f64, Duration, Duration) {
    let path = dir.join("raw-same.log");
    let mut file = OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(&path)
        .unwrap();
    let syncs = stats.syncs.max(1);
    let per_batch = (stats.bytes / syncs).max(1);
    let batch: Vec<u8> = (0..per_batch).map(|i| i as u8).collect();
    let mut latencies = Vec::with_capacity(syncs as usize);
    let started = Instant::now();
    for _ in 0..syncs {
        let submitted = Instant::now();
        file.write_all(&batch).unwrap();
        file.sync_data().unwrap();
        latencies.push(submitted.elapsed());
    }
    let took = started.elapsed();
    latencies.sort();
    let at = |q: usize| latencies[(latencies.len() - 1) * q / 100];
    (
        (syncs * per_batch) as f64 / took.as_secs_f64(),
        at(50),
        at(99),
    )
}

fn raw(dir: &std::path::Path, record: u64) -> Side {
    let path = dir.join("raw.log");
    let mut file = OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(&path)
        .unwrap();
    let batch: Vec<u8> = (0..PROCESSES * record).map(|i| i as u8).collect();
    let mut latencies = Vec::with_capacity((ROUNDS + 1) as usize);
    let started = Instant::now();
    for _ in 0..=ROUNDS {
        let submitted = Instant::now();
        file.write_all(&batch).unwrap();
        file.sync_data().unwrap();
        latencies.push(submitted.elapsed());
    }
    let took = started.elapsed();
    latencies.sort();
    let at = |q: usize| latencies[(latencies.len() - 1) * q / 100];
    let events = PROCESSES * (ROUNDS + 1);
    Side {
        events_per_s: events as f64 / took.as_secs_f64(),
        bytes_per_s: (events * record) as f64 / took.as_secs_f64(),
        p50: at(50),
        p99: at(99),
        max: at(100),
        note: format!("{} syncs of {} records", ROUNDS + 1, PROCESSES),
    }
}

/// Takes messages; never ends.
struct Sink;

impl Durable for Sink {
    const KIND: &'static str = "sink";
    type Args = ();
    type Message = u64;
    type Done = ();
    fn create(_: ()) -> Self {
        Sink
    }
    fn step(&mut self, _: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
        Ok(())
    }
}

const SINKS: u64 = 1_000;
const RATE_BURST: u64 = 50;
const STEADY_FOR: Duration = Duration::from_secs(3);

/// Calls `each(i)` RATE_BURST times every millisecond for STEADY_FOR.
fn steady(mut each: impl FnMut(u64)) {
    let start = Instant::now();
    let mut next = start;
    let mut i = 0;
    while start.elapsed() < STEADY_FOR {
        for _ in 0..RATE_BURST {
            each(i);
            i += 1;
        }
        next += Duration::from_millis(1);
        if let Some(wait) = next.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
    }
}

fn steady_ours(dir: &std::path::Path) -> (Duration, Duration, Duration, u64, Duration) {
    let path = dir.join("steady.redb");
    let _ = std::fs::remove_file(&path);
    let (durability, scheduler) = durability(&path);
    let keys: Vec<String> = (0..SINKS).map(|i| format!("k{i}")).collect();
    for key in &keys {
        durability
            .spawn::<Sink>(&scheduler, key, ())
            .unwrap()
            .durable()
            .wait_timeout(Duration::from_secs(60))
            .unwrap();
    }
    let mut last = None;
    steady(|i| {
        last = Some(
            durability
                .send::<Sink>(&scheduler, &keys[(i % SINKS) as usize], &i)
                .unwrap(),
        );
    });
    last.unwrap().wait_timeout(Duration::from_secs(60)).unwrap();
    let stats = durability.stats();
    scheduler.shutdown(Duration::from_secs(5));
    (
        stats.durable_p50,
        stats.durable_p99,
        stats.durable_max,
        stats.syncs,
        stats.sync_p99,
    )
}

fn steady_raw(dir: &std::path::Path) -> (Duration, Duration, Duration, u64) {
    use std::sync::{Arc, Condvar, Mutex};
    let path = dir.join("steady.log");
    let mut file = OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(&path)
        .unwrap();
    /// Records queued with their time, and whether the producer is done.
    type Queue = (Mutex<(Vec<(Instant, [u8; 17])>, bool)>, Condvar);
    let queue: Arc<Queue> = Arc::default();
    let writer = {
        let queue = queue.clone();
        std::thread::spawn(move || {
            let mut latencies = Vec::new();
            let mut syncs = 0;
            let mut buffer = Vec::new();
            loop {
                let batch = {
                    let mut q = queue.0.lock().unwrap();
                    while q.0.is_empty() && !q.1 {
                        q = queue.1.wait(q).unwrap();
                    }
                    if q.0.is_empty() {
                        break;
                    }
                    std::mem::take(&mut q.0)
                };
                buffer.clear();
                for (_, record) in &batch {
                    buffer.extend_from_slice(record);
                }
                file.write_all(&buffer).unwrap();
                file.sync_data().unwrap();
                syncs += 1;
                let now = Instant::now();
                latencies.extend(batch.iter().map(|(at, _)| now - *at));
            }
            (latencies, syncs)
        })
    };
    steady(|i| {
        let mut q = queue.0.lock().unwrap();
        q.0.push((Instant::now(), [i as u8; 17]));
        queue.1.notify_one();
    });
    queue.0.lock().unwrap().1 = true;
    queue.1.notify_one();
    let (mut latencies, syncs) = writer.join().unwrap();
    latencies.sort();
    let at = |q: usize| latencies[(latencies.len() - 1) * q / 100];
    (at(50), at(99), at(100), syncs)
}

fn recovery(dir: &std::path::Path, snapshots: bool) -> (Duration, Duration, u64) {
    let path = dir.join("recovery.redb");
    let _ = std::fs::remove_file(&path);
    {
        let (durability, scheduler) = durability_with(&path, snapshots);
        let spawned: Vec<_> = (0..RECOVERED)
            .map(|i| {
                durability
                    .spawn::<Sleeper>(&scheduler, &format!("s{i}"), ())
                    .unwrap()
            })
            .collect();
        for s in &spawned {
            s.durable().wait_timeout(Duration::from_secs(120)).unwrap();
        }
        scheduler.shutdown(Duration::from_secs(30));
    }
    let (durability, scheduler) = durability_with(&path, snapshots);
    let started = Instant::now();
    let recovery = durability.recover(&scheduler).unwrap();
    let from_snapshots = recovery.from_snapshots;
    let recovered = started.elapsed();
    assert_eq!(recovery.resumed.len() as u64, RECOVERED);
    assert!(recovery.failed.is_empty());
    // Running again: every one has stepped its resume (armed its timer).
    let live = Instant::now();
    while scheduler.stats().live_processes < RECOVERED as usize {
        std::thread::sleep(Duration::from_millis(1));
    }
    let running = recovered + live.elapsed();
    scheduler.shutdown(Duration::from_secs(30));
    (recovered, running, from_snapshots)
}

/// The 3-step workflow's steps.
const STEPS: u64 = 3;

/// A durable workflow of `STEPS` steps, each waiting for the one before:
/// by commands (`Args = None`), or by sends to the durable service of
/// that key, which replies with a send. Finishes with the sum of the
/// answers.
struct Flow {
    service: Option<String>,
    done: u64,
    sum: u64,
}

impl Flow {
    fn ask(&self, out: &mut Output<'_>) -> Result<(), DurableError> {
        match &self.service {
            None => out.command(ECHO, Tag(1), self.done + 1),
            Some(service) => out.send(Key::<Service>::new(service.as_str()), self.done + 1),
        }
    }
}

impl Durable for Flow {
    const KIND: &'static str = "flow";
    type Args = Option<String>;
    type Message = u64;
    type Done = u64;

    fn create(service: Option<String>) -> Self {
        Flow {
            service,
            done: 0,
            sum: 0,
        }
    }

    fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        Ok(self.ask(out)?)
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events.typed::<Self>() {
            let answer = match event {
                Event::Completion { result, .. } => result?.decode::<u64>()?,
                Event::Message(message) => message,
                _ => continue,
            };
            self.sum += answer;
            self.done += 1;
            if self.done == STEPS {
                out.finish(self.sum);
            } else {
                self.ask(out)?;
            }
        }
        Ok(())
    }
}

/// A durable service: answers each workflow's send with a send back.
struct Service;

impl Durable for Service {
    const KIND: &'static str = "service";
    type Args = ();
    type Message = u64;
    type Done = ();
    fn create(_: ()) -> Self {
        Service
    }
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        let from = events.sender().map(str::to_owned);
        for event in events.typed::<Self>() {
            if let (Event::Message(message), Some(from)) = (event, &from) {
                out.send(Key::<Flow>::new(from.as_str()), message)?;
            }
        }
        Ok(())
    }
}

/// The same 3-step workflow as a plain process, by commands.
struct PlainFlow {
    done: u64,
    sum: u64,
}

impl Process for PlainFlow {
    type Done = Payload;
    fn start(&mut self, out: &mut sched::Output<'_>) -> Result<(), BoxError> {
        out.yield_command(ECHO, Tag(1), 1);
        Ok(())
    }

    fn step(
        &mut self,
        events: &mut sched::Events<'_>,
        out: &mut sched::Output<'_>,
    ) -> Result<(), BoxError> {
        for event in events {
            if let sched::Event::Completion { result, .. } = event {
                let answer = *result?.downcast::<u64>().map_err(|_| "not a u64")?;
                self.sum += answer;
                self.done += 1;
                if self.done == STEPS {
                    out.finish(self.sum);
                } else {
                    out.yield_command(ECHO, Tag(1), self.done + 1);
                }
            }
        }
        Ok(())
    }
}

/// How the 3-step workflow's steps are made.
#[derive(Clone, Copy, PartialEq, Eq)]
enum By {
    Commands,
    Sends,
    Plain,
}

impl By {
    fn name(self) -> &'static str {
        match self {
            By::Commands => "durable, by commands",
            By::Sends => "durable, by sends",
            By::Plain => "plain process, by commands",
        }
    }
}

const ONE_AT_A_TIME: usize = 300;
const CONCURRENT: usize = 100;
const CONCURRENT_ROUNDS: usize = 20;
const SERVICES: usize = 10;

/// Latencies in order, and the quantile `q` (percent) of them.
fn quantile(sorted: &[Duration], q: usize) -> Duration {
    sorted[(sorted.len() - 1) * q / 100]
}

/// Runs workflows `by`, `at_once` at a time for `rounds` rounds, each
/// from its spawn to its outcome. Returns the latencies (sorted), each
/// round's slowest, and the journal's figures.
fn workflows(
    dir: &std::path::Path,
    by: By,
    at_once: usize,
    rounds: usize,
) -> (Vec<Duration>, Vec<Duration>, DurableStats) {
    let path = dir.join("flows.redb");
    let _ = std::fs::remove_file(&path);
    let (durability, scheduler) = durability(&path);
    for s in 0..SERVICES {
        durability
            .spawn::<Service>(&scheduler, &format!("svc-{s}"), ())
            .unwrap()
            .durable()
            .wait_timeout(Duration::from_secs(60))
            .unwrap();
    }
    let expected: u64 = (1..=STEPS).sum();
    // One unmeasured round: the store's first pages, the workers' first
    // steps.
    let mut latencies = Vec::with_capacity(at_once * rounds);
    let mut slowest = Vec::with_capacity(rounds);
    for round in 0..=rounds {
        let started: Vec<(Instant, Box<dyn FnOnce() -> u64>)> = (0..at_once)
            .map(|i| {
                let at = Instant::now();
                let key = format!("f{round}-{i}");
                let wait: Box<dyn FnOnce() -> u64> = match by {
                    By::Plain => {
                        let done = scheduler.spawn(PlainFlow { done: 0, sum: 0 }).unwrap();
                        Box::new(move || *done.wait().unwrap().downcast::<u64>().unwrap())
                    }
                    By::Commands | By::Sends => {
                        let service = (by == By::Sends).then(|| format!("svc-{}", i % SERVICES));
                        let spawned = durability.spawn::<Flow>(&scheduler, &key, service).unwrap();
                        Box::new(move || spawned.wait().unwrap())
                    }
                };
                (at, wait)
            })
            .collect();
        let mut worst = Duration::ZERO;
        for (at, wait) in started {
            assert_eq!(wait(), expected);
            let took = at.elapsed();
            worst = worst.max(took);
            if round > 0 {
                latencies.push(took);
            }
        }
        if round > 0 {
            slowest.push(worst);
        }
    }
    let stats = durability.stats();
    scheduler.shutdown(Duration::from_secs(5));
    latencies.sort();
    slowest.sort();
    (latencies, slowest, stats)
}

/// The one-at-a-time and 100-concurrent workflow figures of one run.
fn workflow_run(dir: &std::path::Path, run: usize) {
    for by in [By::Commands, By::Sends, By::Plain] {
        let (one, _, stats) = workflows(dir, by, 1, ONE_AT_A_TIME);
        let mut line = format!(
            "run {run} workflow one at a time, {:<26}: p50 {:>9.3?} p99 {:>9.3?} max {:>9.3?}",
            by.name(),
            quantile(&one, 50),
            quantile(&one, 99),
            quantile(&one, 100),
        );
        if by != By::Plain {
            let (raw_bps, raw_p50, raw_p99) = raw_same(dir, &stats);
            line += &format!(
                "  ({} records in {} syncs, sync p50 {:?}; raw loop of the same {} B per sync: p50 {:?} p99 {:?}, {:.1} MB/s)",
                stats.records,
                stats.syncs,
                stats.sync_p50,
                stats.bytes / stats.syncs.max(1),
                raw_p50,
                raw_p99,
                raw_bps / 1e6
            );
        }
        println!("{line} (load {})", load());
        let (all, slowest, _) = workflows(dir, by, CONCURRENT, CONCURRENT_ROUNDS);
        println!(
            "run {run} workflow {CONCURRENT} at a time, {:<26}: p50 {:>9.3?} p99 {:>9.3?} max {:>9.3?}; slowest of each round: median {:>9.3?}, worst {:>9.3?} (load {})",
            by.name(),
            quantile(&all, 50),
            quantile(&all, 99),
            quantile(&all, 100),
            quantile(&slowest, 50),
            quantile(&slowest, 100),
            load()
        );
    }
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn main() {
    let runs = if std::env::var_os("BENCH_QUICK").is_some() {
        1
    } else {
        3
    };
    let dir =
        tempfile::tempdir_in(std::env::var("BENCH_DIR").unwrap_or_else(|_| ".".into())).unwrap();
    println!(
        "durable: {PROCESSES} processes x {} events, 2 workers, store in {} (load {})",
        ROUNDS + 1,
        dir.path().display(),
        load()
    );
    // `DURABLE_ONLY=workflows` (or throughput, steady, recovery) runs one
    // part, for profiling it.
    let only = std::env::var("DURABLE_ONLY").ok();
    let part = |name: &str| only.as_deref().is_none_or(|o| o == name);
    for run in (1..=runs).filter(|_| part("workflows")) {
        workflow_run(dir.path(), run);
    }
    for run in (1..=runs).filter(|_| part("throughput")) {
        let (ours, record, stats) = ours(dir.path());
        let raw = raw(dir.path(), record);
        let (same_bps, same_p50, same_p99) = raw_same(dir.path(), &stats);
        for (name, side) in [("ours", &ours), ("raw loop", &raw)] {
            println!(
                "run {run} {name:>8}: {:>9.0} events/s {:>7.1} MB/s  submit->durable p50 {:?} p99 {:?} max {:?}  ({})",
                side.events_per_s,
                side.bytes_per_s / 1e6,
                side.p50,
                side.p99,
                side.max,
                side.note
            );
        }
        println!(
            "run {run} raw loop of our own sizes: {:>7.1} MB/s ({} syncs of {} B, our mean bytes per sync; sync p50 {:?} p99 {:?})",
            same_bps / 1e6,
            stats.syncs,
            stats.bytes / stats.syncs.max(1),
            same_p50,
            same_p99
        );
        println!(
            "run {run}   ratios: bytes/s {:.3} of the raw loop of our own sizes, {:.3} of the raw loop of {PROCESSES} records per sync; p99 {:.2}x raw (load {})",
            ours.bytes_per_s / same_bps,
            ours.bytes_per_s / raw.bytes_per_s,
            ours.p99.as_secs_f64() / raw.p99.as_secs_f64(),
            load()
        );
    }
    for run in (1..=runs).filter(|_| part("steady")) {
        let ours = steady_ours(dir.path());
        let raw = steady_raw(dir.path());
        println!(
            "steady {run}: 50 000 messages/s for {STEADY_FOR:?}: ours step->durable p50 {:?} p99 {:?} max {:?} ({} syncs, sync p99 {:?}); raw queue->synced p50 {:?} p99 {:?} max {:?} ({} syncs); p99 {:.2}x raw (load {})",
            ours.0, ours.1, ours.2, ours.3, ours.4, raw.0, raw.1, raw.2, raw.3,
            ours.1.as_secs_f64() / raw.1.as_secs_f64(),
            load()
        );
    }
    for snapshots in [false, true].into_iter().filter(|_| part("recovery")) {
        let (recovered, running, restored) = recovery(dir.path(), snapshots);
        println!(
            "recovery ({}): {RECOVERED} suspended processes read, rebuilt and resumed in {recovered:?} ({restored} from snapshots); all running after {running:?}",
            if snapshots { "from snapshots" } else { "from journals" }
        );
    }
}
