//! A small workflow engine written on our API and on tokio, in one run
//! (`cargo bench -p benches --bench workflow`; `BENCH_QUICK=1` runs each
//! side once instead of three times):
//!
//! 50 000 workflows, each making three "http" calls one after another,
//! each completing after a random 1-20 ms (seeded: both sides wait the same
//! delays), then asking one of 100 tenant aggregators (workflow index % 100)
//! for a value and waiting for the reply, then finishing. 2 worker threads
//! on both sides.
//!
//! Per side: wall time (from the first workflow started to the last one
//! finished), CPU time of the whole process over the same span (user +
//! system, from `CLOCK_PROCESS_CPUTIME_ID`), and the peak of live
//! heap bytes above what was live at the start (a counting global
//! allocator), with the load average when the run began. The median of the
//! runs, and ours / tokio. Each side first runs once unmeasured, so that
//! neither pays alone for the process's first use of fresh heap pages.
//!
//! `WORKFLOW_SIDE=ours` or `WORKFLOW_SIDE=tokio` runs one side only (for
//! profiling it, or comparing two builds of it), with no ratio.
//!
//! Only Linux is supported.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use sched::message::Addr;
use sched::prelude::*;
use sched::process::Accepts;

const WORKERS: usize = 2;
const WORKFLOWS: usize = 50_000;
const TENANTS: usize = 100;
const CALLS: usize = 3;
const SEED: u64 = 0x5eed_f10e_da7a;

/// Counts live heap bytes and their peak (resettable).
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(bytes: usize) {
    let live = LIVE.fetch_add(bytes, Ordering::Relaxed) + bytes;
    if live > PEAK.load(Ordering::Relaxed) {
        PEAK.fetch_max(live, Ordering::Relaxed);
    }
}

// SAFETY: every call is forwarded to `System` with the caller's arguments;
// the counters are only bookkeeping.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's layout.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            grew(layout.size());
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's layout.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            grew(layout.size());
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: `ptr` came from this allocator with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded with the caller's arguments.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            grew(new_size);
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        new
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Starts a peak measurement: returns the bytes live now.
fn reset_peak() -> usize {
    let live = LIVE.load(Ordering::Relaxed);
    PEAK.store(live, Ordering::Relaxed);
    live
}

/// CPU time (user + system) of every thread of this process, ended ones
/// included, to the nanosecond (`CLOCK_PROCESS_CPUTIME_ID`: the kernel's
/// per-thread runtime sums, not the 10 ms ticks of `/proc/self/stat`).
fn cpu_time() -> Duration {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid timespec for the call to fill in.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut now) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_PROCESS_CPUTIME_ID)");
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}

#[path = "common/seeded.rs"]
mod seeded;

/// The simulated latencies: three per workflow, 1-20 ms, from a seeded
/// splitmix64 so both sides wait the same.
fn delays() -> Vec<[Duration; CALLS]> {
    let mut next = seeded::splitmix64(SEED);
    (0..WORKFLOWS)
        .map(|_| [(); CALLS].map(|()| Duration::from_millis(1 + next() % 20)))
        .collect()
}

/// The sum of every reply: aggregator `t` answers its k-th asker with k.
fn expected_total() -> u64 {
    let per_tenant = (WORKFLOWS / TENANTS) as u64;
    TENANTS as u64 * per_tenant * (per_tenant + 1) / 2
}

/// One run of one side.
#[derive(Clone, Copy)]
struct Run {
    wall: Duration,
    cpu: Duration,
    peak_bytes: usize,
}

/// Measures `body` (which returns the sum of the replies).
fn measure(body: impl FnOnce() -> u64) -> Run {
    let base = reset_peak();
    let cpu = cpu_time();
    let start = Instant::now();
    let total = body();
    let wall = start.elapsed();
    let cpu = cpu_time().saturating_sub(cpu);
    assert_eq!(total, expected_total(), "every workflow got its reply");
    Run {
        wall,
        cpu,
        peak_bytes: PEAK.load(Ordering::Relaxed).saturating_sub(base),
    }
}

// --------------------------------------------------------------------- ours

/// A question for an aggregator: where to send the value.
struct Ask {
    reply_to: Addr<u64>,
}

/// A tenant's aggregator: answers each question with how many it has had.
struct Aggregator {
    asked: u64,
}

impl Accepts for Aggregator {
    type Message = Ask;
}

impl Process for Aggregator {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            match event {
                Event::Message(package) => {
                    if let Ok(Ask { reply_to }) = package.downcast::<Ask>() {
                        self.asked += 1;
                        // The asker waits for this reply; it cannot have ended.
                        out.send(reply_to, self.asked)?;
                    }
                }
                Event::Cancel => out.finish(self.asked),
                _ => {}
            }
        }
        Ok(())
    }
}

/// The "http" call's simulated latency.
const CALL: Tag = Tag(1);

/// Three calls one after another, then a question to its aggregator;
/// finishes with the reply.
///
/// A real call would be a command yielded to a handler that performs the
/// request and completes it when the response arrives. Here the latency is
/// all there is to the call, so the workflow waits it out with an engine
/// timer, as a user simulating latency (or sleeping between retries) would:
/// a handler could only complete the command after the delay by keeping
/// timers of its own (a thread, or a second runtime), which is what engine
/// timers are for.
struct Workflow {
    delays: [Duration; CALLS],
    calls_done: usize,
    started: bool,
    aggregator: Addr<Ask>,
}

impl Accepts for Workflow {
    type Message = u64;
}

impl Process for Workflow {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        if !self.started {
            self.started = true;
            out.set_timer(self.delays[0], CALL);
            return Ok(());
        }
        for event in events {
            match event {
                Event::Timer { tag: CALL, .. } => {
                    self.calls_done += 1;
                    if let Some(&delay) = self.delays.get(self.calls_done) {
                        out.set_timer(delay, CALL);
                    } else {
                        let reply_to = Addr::from_pid(out.pid());
                        out.send(self.aggregator, Ask { reply_to })?;
                    }
                }
                Event::Message(package) => {
                    if let Ok(value) = package.downcast::<u64>() {
                        out.finish(value);
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }
}

fn ours(delays: &[[Duration; CALLS]]) -> Run {
    let scheduler = Scheduler::builder().workers(WORKERS).build();
    scheduler.start();
    let aggregators: Vec<Addr<Ask>> = (0..TENANTS)
        .map(|_| {
            let done = scheduler.spawn(Aggregator { asked: 0 }).expect("spawned");
            let addr = done.addr::<Aggregator>();
            drop(done);
            addr
        })
        .collect();
    let run = measure(|| {
        let workflows: Vec<Completion> = delays
            .iter()
            .enumerate()
            .map(|(i, delays)| {
                let workflow = Workflow {
                    delays: *delays,
                    calls_done: 0,
                    started: false,
                    aggregator: aggregators[i % TENANTS],
                };
                scheduler.spawn(workflow).expect("spawned")
            })
            .collect();
        workflows
            .into_iter()
            .map(|done| {
                let value = done.wait().expect("the workflow finishes");
                *value.downcast_ref::<u64>().expect("the reply")
            })
            .sum()
    });
    let report = scheduler.shutdown(Duration::from_secs(5));
    assert_eq!(report.forced, 0);
    run
}

// -------------------------------------------------------------------- tokio

fn tokio(delays: &[[Duration; CALLS]]) -> Run {
    use tokio::sync::{mpsc, oneshot};

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKERS)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let aggregators: Vec<mpsc::UnboundedSender<oneshot::Sender<u64>>> = (0..TENANTS)
        .map(|_| {
            let (tx, mut rx) = mpsc::unbounded_channel::<oneshot::Sender<u64>>();
            rt.spawn(async move {
                let mut asked = 0u64;
                while let Some(reply_to) = rx.recv().await {
                    asked += 1;
                    let _ = reply_to.send(asked);
                }
            });
            tx
        })
        .collect();
    let run = measure(|| {
        let workflows: Vec<_> = delays
            .iter()
            .enumerate()
            .map(|(i, delays)| {
                let delays = *delays;
                let aggregator = aggregators[i % TENANTS].clone();
                rt.spawn(async move {
                    for delay in delays {
                        tokio::time::sleep(delay).await;
                    }
                    let (reply_to, reply) = oneshot::channel();
                    aggregator.send(reply_to).expect("the aggregator runs");
                    reply.await.expect("the aggregator replies")
                })
            })
            .collect();
        rt.block_on(async {
            let mut total = 0;
            for workflow in workflows {
                total += workflow.await.expect("the workflow finishes");
            }
            total
        })
    });
    drop(aggregators);
    drop(rt);
    run
}

// ------------------------------------------------------------------- report

#[path = "common/tables.rs"]
mod tables;
use tables::{load_average, median};

#[path = "common/filter.rs"]
mod filter;

fn main() {
    let filtered_out = filter::another_bench_asked_for("workflow");
    if filtered_out {
        return;
    }
    // Processes in the counting allocator too (by default they come from
    // mimalloc, which it does not see), so both sides' memory is counted.
    sched::engine::use_global_allocator().expect("before the first process");
    // `cargo xtask bench --quick` sets BENCH_QUICK so the suite stays short.
    let runs = if std::env::var_os("BENCH_QUICK").is_some() {
        1
    } else {
        3
    };
    // `WORKFLOW_SIDE=ours` (or `tokio`) runs one side only, to profile it
    // or to compare two builds of it; the table then has no ratio.
    let only = std::env::var("WORKFLOW_SIDE").ok();
    let delays = delays();
    println!(
        "workflow: {WORKFLOWS} workflows x {CALLS} calls of 1-20 ms (seeded), then a reply from \
         one of {TENANTS} aggregators; {WORKERS} workers; {runs} run(s) per side, alternating"
    );
    println!("| run | side | load average | wall | CPU (user+sys) | peak live heap |");
    println!("|---|---|---|---|---|---|");
    // One unmeasured run of each side first: the process's first run pays
    // for faulting in fresh heap pages and growing the allocator's arenas,
    // which the runs after it reuse. Without it, whichever side ran first
    // paid that alone (about a quarter more wall and CPU time on ours).
    for (side, run) in [
        ("ours", ours as fn(&[[Duration; CALLS]]) -> Run),
        ("tokio", tokio),
    ] {
        if only.as_deref().is_none_or(|only| only == side) {
            run(&delays);
        }
    }
    let (mut ours_runs, mut tokio_runs) = (Vec::new(), Vec::new());
    let mut loads = Vec::new();
    for i in 1..=runs {
        for (side, run, runs) in [
            (
                "ours",
                ours as fn(&[[Duration; CALLS]]) -> Run,
                &mut ours_runs,
            ),
            ("tokio", tokio, &mut tokio_runs),
        ] {
            if only.as_deref().is_some_and(|only| only != side) {
                continue;
            }
            let load = load_average();
            let r = run(&delays);
            loads.push(load.clone());
            println!(
                "| {i} | {side} | {load} | {:.1?} | {:.0?} | {:.1} MB |",
                r.wall,
                r.cpu,
                r.peak_bytes as f64 / 1e6
            );
            runs.push(r);
        }
    }
    if only.is_some() {
        return;
    }
    println!();
    println!("| median of {runs} | ours | tokio | ours / tokio |");
    println!("|---|---|---|---|");
    type Metric = fn(&Run) -> f64;
    let metrics: [(&str, Metric, &str, f64); 3] = [
        ("wall", |r| r.wall.as_secs_f64(), "ms", 1e3),
        ("CPU (user+sys)", |r| r.cpu.as_secs_f64(), "ms", 1e3),
        ("peak live heap", |r| r.peak_bytes as f64, "MB", 1e-6),
    ];
    let mut figures = Vec::new();
    for (name, metric, unit, scale) in metrics {
        let ours = median(ours_runs.iter().map(metric).collect());
        let tokio = median(tokio_runs.iter().map(metric).collect());
        println!(
            "| {name} | {:.1} {unit} | {:.1} {unit} | {:.2} |",
            ours * scale,
            tokio * scale,
            ours / tokio
        );
        figures.push(tables::Figure {
            name: name.to_string(),
            unit,
            ours: ours * scale,
            peer: tokio * scale,
            peer_name: "tokio",
            loads: &loads,
        });
    }
    tables::record("workflow", &figures);
}
