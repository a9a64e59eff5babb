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
//! The calls are made two ways, each a table of its own: waited out on the
//! runtime's own timers (`set_timer`, `tokio::time::sleep`), and made to
//! a service of two OS threads that answer each after its delay, as a new
//! user's app calls a blocking client (a command whose handler hands its
//! `Completer` to the service, a `oneshot` the tokio task awaits).
//! `WORKFLOW_CALLS=timers` or `WORKFLOW_CALLS=service` runs one way only.
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

use std::sync::Arc;

use sched::command::{Completer, TypedCommand};
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

#[path = "common/service.rs"]
mod service;
use service::{Reply, Service};

/// How many threads the outside service has.
const SERVICE_THREADS: usize = 2;

/// How a workflow makes its calls.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Calls {
    /// Waited out on the runtime's own timers.
    Timers,
    /// Made to the outside service's threads, which answer after the delay.
    Service,
}

impl Calls {
    fn name(self) -> &'static str {
        match self {
            Calls::Timers => "timers",
            Calls::Service => "service threads",
        }
    }
}

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

/// The call to the outside service: its delay in, an answer out.
const SERVICE: TypedCommand<Duration, u64> = TypedCommand::new(CommandId(1));

impl Reply for Completer<u64> {
    fn reply(self, value: u64) {
        let _ = self.complete(value);
    }
}

/// Three calls one after another, then a question to its aggregator;
/// finishes with the reply.
///
/// A real call would be a command yielded to a handler that performs the
/// request and completes it when the response arrives. Here the latency is
/// all there is to the call, so the workflow waits it out with an engine
/// timer, as a user simulating latency (or sleeping between retries) would:
/// a handler could only complete the command after the delay by keeping
/// timers of its own (a thread, or a second runtime), which is what engine
/// timers are for. With [`Calls::Service`] it is that: a command whose
/// handler gives the completer to the service's threads.
struct Workflow {
    calls: Calls,
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
            self.call(self.delays[0], out);
            return Ok(());
        }
        for event in events {
            match event {
                Event::Timer { tag: CALL, .. } | Event::Completion { tag: CALL, .. } => {
                    self.calls_done += 1;
                    if let Some(&delay) = self.delays.get(self.calls_done) {
                        self.call(delay, out);
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

impl Workflow {
    /// Makes one call that answers after `delay`.
    fn call(&self, delay: Duration, out: &mut Output<'_>) {
        match self.calls {
            Calls::Timers => {
                out.set_timer(delay, CALL);
            }
            Calls::Service => {
                out.yield_command(SERVICE, CALL, delay);
            }
        }
    }
}

fn ours(calls: Calls, delays: &[[Duration; CALLS]]) -> Run {
    let service = Arc::new(Service::<Completer<u64>>::new(SERVICE_THREADS));
    let scheduler = Scheduler::builder()
        .workers(WORKERS)
        .handler(SERVICE, move |delay: Duration, done: Completer<u64>| {
            service.call(delay, 0, done);
            Ok(())
        })
        .build();
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
                    calls,
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

impl Reply for tokio::sync::oneshot::Sender<u64> {
    fn reply(self, value: u64) {
        let _ = self.send(value);
    }
}

fn tokio(calls: Calls, delays: &[[Duration; CALLS]]) -> Run {
    use tokio::sync::{mpsc, oneshot};

    let service = Arc::new(Service::<oneshot::Sender<u64>>::new(SERVICE_THREADS));

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
                let service = Arc::clone(&service);
                rt.spawn(async move {
                    for delay in delays {
                        match calls {
                            Calls::Timers => tokio::time::sleep(delay).await,
                            Calls::Service => {
                                let (answer_to, answer) = oneshot::channel();
                                service.call(delay, 0, answer_to);
                                answer.await.expect("the service answers");
                            }
                        }
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
    // `WORKFLOW_CALLS=timers` (or `service`) runs one way of calling only.
    let ways: Vec<Calls> = match std::env::var("WORKFLOW_CALLS").ok().as_deref() {
        Some("timers") => vec![Calls::Timers],
        Some("service") => vec![Calls::Service],
        _ => vec![Calls::Timers, Calls::Service],
    };
    let delays = delays();
    let mut figures = Vec::new();
    let mut loads = Vec::new();
    let mut medians = Vec::new();
    for calls in ways {
        let (ours_runs, tokio_runs, way_loads) = runs_of(calls, runs, only.as_deref(), &delays);
        loads.extend(way_loads);
        if only.is_none() {
            medians.push((calls, ours_runs, tokio_runs));
        }
    }
    for (calls, ours_runs, tokio_runs) in medians {
        println!();
        println!(
            "| calls on {}: median of {runs} | ours | tokio | ours / tokio |",
            calls.name()
        );
        println!("|---|---|---|---|");
        type Metric = fn(&Run) -> f64;
        let metrics: [(&str, Metric, &str, f64); 3] = [
            ("wall", |r| r.wall.as_secs_f64(), "ms", 1e3),
            ("CPU (user+sys)", |r| r.cpu.as_secs_f64(), "ms", 1e3),
            ("peak live heap", |r| r.peak_bytes as f64, "MB", 1e-6),
        ];
        for (name, metric, unit, scale) in metrics {
            let ours = median(ours_runs.iter().map(metric).collect());
            let tokio = median(tokio_runs.iter().map(metric).collect());
            println!(
                "| {name} | {:.1} {unit} | {:.1} {unit} | {:.2} |",
                ours * scale,
                tokio * scale,
                ours / tokio
            );
            let name = match calls {
                Calls::Timers => name.to_string(),
                Calls::Service => format!("{name}, service threads"),
            };
            figures.push((name, unit, ours * scale, tokio * scale));
        }
    }
    let figures: Vec<tables::Figure<'_>> = figures
        .into_iter()
        .map(|(name, unit, ours, peer)| tables::Figure {
            name,
            unit,
            ours,
            peer,
            peer_name: "tokio",
            loads: &loads,
        })
        .collect();
    if !figures.is_empty() {
        tables::record("workflow", &figures);
    }
}

/// Ours' and tokio's runs of one way of calling (alternating, after one
/// unmeasured run each), and the load average each began at.
fn runs_of(
    calls: Calls,
    runs: usize,
    only: Option<&str>,
    delays: &[[Duration; CALLS]],
) -> (Vec<Run>, Vec<Run>, Vec<String>) {
    type Side = fn(Calls, &[[Duration; CALLS]]) -> Run;
    let sides: [(&str, Side); 2] = [("ours", ours), ("tokio", tokio)];
    println!(
        "workflow, calls on {}: {WORKFLOWS} workflows x {CALLS} calls of 1-20 ms (seeded), then a \
         reply from one of {TENANTS} aggregators; {WORKERS} workers; {runs} run(s) per side, \
         alternating",
        calls.name()
    );
    println!("| run | side | load average | wall | CPU (user+sys) | peak live heap |");
    println!("|---|---|---|---|---|---|");
    // One unmeasured run of each side first: the process's first run pays
    // for faulting in fresh heap pages and growing the allocator's arenas,
    // which the runs after it reuse. Without it, whichever side ran first
    // paid that alone (about a quarter more wall and CPU time on ours).
    for (side, run) in sides {
        if only.is_none_or(|only| only == side) {
            run(calls, delays);
        }
    }
    let (mut ours_runs, mut tokio_runs, mut loads) = (Vec::new(), Vec::new(), Vec::new());
    for i in 1..=runs {
        for (side, run) in sides {
            if only.is_some_and(|only| only != side) {
                continue;
            }
            let load = load_average();
            let r = run(calls, delays);
            loads.push(load.clone());
            println!(
                "| {i} | {side} | {load} | {:.1?} | {:.0?} | {:.1} MB |",
                r.wall,
                r.cpu,
                r.peak_bytes as f64 / 1e6
            );
            if side == "ours" {
                ours_runs.push(r);
            } else {
                tokio_runs.push(r);
            }
        }
    }
    (ours_runs, tokio_runs, loads)
}
