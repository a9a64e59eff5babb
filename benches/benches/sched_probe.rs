//! Measurements of the scheduler that have no peer to race, printed as a
//! small report (`cargo bench -p benches --bench sched_probe`):
//!
//! - memory per live idle process: resident set size (from
//!   `/proc/self/statm`) before and after 100 000 processes have taken
//!   their first step and gone idle, divided by 100 000; tokio tasks
//!   parked on a channel are measured the same way for context;
//! - CPU time of a started engine with nothing to do over 1 s (the sum of
//!   every thread's run time from `/proc/self/task/*/schedstat`, or
//!   utime+stime from `/proc/self/stat` where schedstat is missing), next
//!   to an idle tokio runtime and to no runtime at all;
//! - wake latency: from `send` on an outside thread to the start of the
//!   target's step, with every worker parked (the sender sleeps between
//!   samples and checks that both workers are parked), median and 99th
//!   percentile over 1 000 samples, next to tokio's channel wake latency
//!   and a thread blocked on a std channel measured the same way; once on
//!   an idle machine and once beside a busy-loop thread (`latency.rs`);
//! - context switches per completion in the yield fan-out workload, ours
//!   and tokio's, and how often the completing thread is preempted
//!   (`switches.rs`).
//!
//! `SCHED_PROBE_PARTS` (a comma-separated list of `memory`, `idle-cpu`,
//! `latency`, `switches`) runs only those parts.
//!
//! Only Linux is supported (it reads `/proc`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use relay::{Package, Payload, Pid};
use sched_core::{BoxError, Engine, Event, Events, InitContext, InitError, Output, Process, Spawn};

const WORKERS: usize = 2;
const IDLE_PROCESSES: usize = 100_000;

/// Set in the child processes that measure memory, each on a fresh heap.
const CHILD: &str = "SCHED_PROBE_MEMORY";

#[path = "common/fan_out.rs"]
mod fan_out;
#[path = "common/filter.rs"]
mod filter;
#[path = "common/latch.rs"]
mod latch;
#[path = "sched_probe/latency.rs"]
mod latency;
#[path = "sched_probe/switches.rs"]
mod switches;

fn main() {
    match std::env::var(CHILD).as_deref() {
        Ok("ours") => return println!("{}", ours_memory(false)),
        Ok("ours-messaged") => return println!("{}", ours_memory(true)),
        Ok("tokio") => return println!("{}", tokio_memory()),
        _ => {}
    }
    if filter::another_bench_asked_for("sched_probe") {
        return;
    }
    // `SCHED_PROBE_PARTS=latency,switches` runs only those parts.
    let parts = std::env::var("SCHED_PROBE_PARTS").unwrap_or_default();
    let wanted = |part: &str| parts.is_empty() || parts.split(',').any(|p| p == part);
    if wanted("memory") {
        memory_per_idle_process();
    }
    if wanted("idle-cpu") {
        idle_cpu();
    }
    if wanted("latency") {
        latency::wake_latency();
    }
    if wanted("switches") {
        switches::fan_out_switches();
    }
}

fn engine() -> Engine {
    let engine = Engine::builder().workers(WORKERS).build();
    engine.start();
    engine
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKERS)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// Resident set size in bytes.
fn rss() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("/proc/self/statm");
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("resident pages");
    pages * 4096
}

/// CPU time this process's threads have used so far.
fn cpu_time() -> Duration {
    let mut total_ns = 0u64;
    let mut found = false;
    if let Ok(tasks) = std::fs::read_dir("/proc/self/task") {
        for task in tasks.flatten() {
            let path = task.path().join("schedstat");
            if let Ok(text) = std::fs::read_to_string(path) {
                if let Some(ns) = text
                    .split_whitespace()
                    .next()
                    .and_then(|s| s.parse::<u64>().ok())
                {
                    total_ns += ns;
                    found = true;
                }
            }
        }
    }
    if found {
        return Duration::from_nanos(total_ns);
    }
    // utime and stime are fields 14 and 15, in clock ticks (100 Hz on Linux).
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    let after_name = &stat[stat.rfind(')').expect("comm") + 2..];
    let fields: Vec<u64> = after_name
        .split_whitespace()
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    Duration::from_millis((fields[11] + fields[12]) * 10)
}

// ------------------------------------------------------------------- memory

/// Takes one step, then waits for messages until cancelled.
struct Idle {
    started: Arc<AtomicUsize>,
}

impl Process for Idle {
    type Done = Payload;
    fn init(&mut self, _: &InitContext, _: &str, _: Payload) -> Result<(), InitError> {
        Ok(())
    }
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        let mut cancelled = false;
        for event in events {
            cancelled |= matches!(event, Event::Cancel);
        }
        if cancelled {
            out.finish(());
        } else {
            self.started.fetch_add(1, Ordering::Release);
            out.idle();
        }
        Ok(())
    }
    fn close(&mut self) {}
}

fn wait_for(counter: &AtomicUsize, n: usize) {
    while counter.load(Ordering::Acquire) < n {
        thread::sleep(Duration::from_millis(1));
    }
}

/// Runs one memory measurement in a child process, so that neither side
/// reuses memory the other freed.
fn measure_in_child(which: &str) -> f64 {
    let exe = std::env::current_exe().expect("current exe");
    let output = std::process::Command::new(exe)
        .env(CHILD, which)
        .output()
        .expect("probe child");
    assert!(output.status.success(), "probe child failed: {output:?}");
    String::from_utf8_lossy(&output.stdout)
        .trim()
        .parse()
        .expect("bytes per process")
}

fn memory_per_idle_process() {
    let ours = measure_in_child("ours");
    let messaged = measure_in_child("ours-messaged");
    let tokio = measure_in_child("tokio");
    println!(
        "memory per live idle process ({IDLE_PROCESSES} idle, RSS delta, fresh process each):"
    );
    println!("  ours:  {ours:.0} bytes per process (never sent anything: no event block yet)");
    println!(
        "  ours:  {messaged:.0} bytes per process after one message (its queue's first block: \
         1 slot of {} bytes, kept while it waits for messages only)",
        std::mem::size_of::<Event>()
    );
    println!(
        "  tokio: {tokio:.0} bytes per task (for context: a task parked on an unbounded mpsc \
         receiver it owns, the sender held outside)"
    );
}

/// An empty vector whose buffer is already resident: a buffer of this size
/// comes from `mmap`, and its pages would otherwise become resident (and be
/// counted per process) only as the measurement fills them.
fn pre_touched<T>(capacity: usize) -> Vec<T> {
    let mut list = Vec::with_capacity(capacity);
    for slot in list.spare_capacity_mut() {
        *slot = std::mem::MaybeUninit::zeroed();
    }
    std::hint::black_box(&mut list);
    list
}

/// Bytes of resident memory per idle process.
fn ours_memory(messaged: bool) -> f64 {
    let engine = engine();
    let started = Arc::new(AtomicUsize::new(0));
    // Allocated and touched before the first reading: the harness's own
    // list of PIDs is not the engine's memory.
    let mut pids = pre_touched(1_000 + IDLE_PROCESSES);
    // Warm up the allocator and the routing table's shards.
    submit_idle(&engine, &started, 1_000, &mut pids);
    wait_for(&started, 1_000);
    let before = rss();
    submit_idle(&engine, &started, IDLE_PROCESSES, &mut pids);
    wait_for(&started, 1_000 + IDLE_PROCESSES);
    if messaged {
        // One message each: the process steps once more and idles again,
        // now with its queue's first block allocated.
        let from = Pid::local(0);
        for &pid in &pids[1_000..] {
            engine
                .context()
                .forward(Package::new(from, pid, ()))
                .expect("the idle process is alive");
        }
        wait_for(&started, 1_000 + 2 * IDLE_PROCESSES);
    }
    let after = rss();
    let report = engine.shutdown(Duration::from_secs(10));
    assert_eq!(report.forced, 0);
    after.saturating_sub(before) as f64 / IDLE_PROCESSES as f64
}

/// Bytes of resident memory per idle tokio task.
fn tokio_memory() -> f64 {
    let rt = runtime();
    let started = Arc::new(AtomicUsize::new(0));
    let mut senders = pre_touched(IDLE_PROCESSES + 1_000);
    spawn_idle_tasks(&rt, &started, &mut senders, 1_000);
    wait_for(&started, 1_000);
    let before = rss();
    spawn_idle_tasks(&rt, &started, &mut senders, IDLE_PROCESSES);
    wait_for(&started, 1_000 + IDLE_PROCESSES);
    let after = rss();
    drop(senders);
    drop(rt);
    after.saturating_sub(before) as f64 / IDLE_PROCESSES as f64
}

/// Submits `n` idle processes and records their PIDs in `pids`.
fn submit_idle(engine: &Engine, started: &Arc<AtomicUsize>, n: usize, pids: &mut Vec<Pid>) {
    for _ in 0..n {
        let pid = engine.context().allocate_pid().expect("pids left");
        pids.push(pid);
        let process = Idle {
            started: started.clone(),
        };
        drop(
            engine
                .context()
                .spawn(Spawn::new(process).method("run").at(pid))
                .expect("submitted"),
        );
    }
}

fn spawn_idle_tasks(
    rt: &tokio::runtime::Runtime,
    started: &Arc<AtomicUsize>,
    senders: &mut Vec<tokio::sync::mpsc::UnboundedSender<u32>>,
    n: usize,
) {
    for _ in 0..n {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<u32>();
        senders.push(tx);
        let started = started.clone();
        rt.spawn(async move {
            started.fetch_add(1, Ordering::Release);
            let _ = rx.recv().await;
        });
    }
}

// ---------------------------------------------------------------------- CPU

fn idle_cpu() {
    let measure = || {
        let before = cpu_time();
        thread::sleep(Duration::from_secs(1));
        cpu_time() - before
    };
    let nothing = measure();
    let ours = {
        let engine = engine();
        let used = measure();
        engine.shutdown(Duration::from_secs(1));
        used
    };
    let tokio = {
        let rt = runtime();
        let used = measure();
        drop(rt);
        used
    };
    println!("CPU time over 1 s, idle, measured from right after start (all threads):");
    println!("  no runtime: {:?}", nothing);
    println!("  ours:       {:?}", ours);
    println!("  tokio:      {:?}", tokio);
}
