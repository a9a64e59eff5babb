//! How long a terminate takes under a flood, ours and tokio in one run
//! (`cargo bench -p benches --bench terminate`; `BENCH_QUICK=1` runs each
//! side once instead of three times):
//!
//! 20 000 processes (tasks) on 2 workers each run ~20 µs busy steps and
//! continue (yield) without end: a turn of the run queue is about 200 ms.
//! Beside them, 40 victims of the same kind are started and each has
//! stepped at least twice (so each waits somewhere in the queue); then,
//! one at a time, each is terminated (`Scheduler::terminate`; tokio's
//! `JoinHandle::abort`) and the time until its completion reports the
//! end (`Completion::wait`; the `JoinHandle`'s `Cancelled`) is recorded.
//! Reported per side and run: p50 / p99 / max over the victims (the max
//! is the worst single process).
//!
//! Only Linux is supported (the load average comes from `/proc/loadavg`).

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sched::prelude::*;

#[path = "common/busy.rs"]
mod busy;
use busy::Sorted;

#[path = "common/filter.rs"]
mod filter;

const WORKERS: usize = 2;
const FLOOD: usize = 20_000;
const VICTIMS: usize = 40;
const STEP: Duration = Duration::from_micros(20);

/// Steps ~20 µs and continues until `stop`; counts its steps.
struct Busy {
    stop: Arc<AtomicBool>,
    steps: Arc<AtomicU32>,
}

impl Process for Busy {
    type Done = Payload;
    fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        std::hint::black_box(busy::work(STEP));
        self.steps.fetch_add(1, Relaxed);
        if self.stop.load(Relaxed) {
            out.finish(());
        } else {
            out.continue_();
        }
        Ok(())
    }
}

fn wait_until(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting: {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn ours() -> Vec<Duration> {
    let scheduler = Scheduler::builder().workers(WORKERS).build();
    scheduler.start();
    let stop = Arc::new(AtomicBool::new(false));
    let flood_steps = Arc::new(AtomicU32::new(0));
    for _ in 0..FLOOD {
        scheduler
            .spawn(Busy {
                stop: stop.clone(),
                steps: flood_steps.clone(),
            })
            .expect("spawned");
    }
    wait_until("the flood to step", || {
        flood_steps.load(Relaxed) as usize >= FLOOD
    });
    let victims: Vec<_> = (0..VICTIMS)
        .map(|_| {
            let steps = Arc::new(AtomicU32::new(0));
            let completion = scheduler
                .spawn(Busy {
                    stop: stop.clone(),
                    steps: steps.clone(),
                })
                .expect("spawned");
            (completion, steps)
        })
        .collect();
    wait_until("every victim to step twice", || {
        victims.iter().all(|(_, s)| s.load(Relaxed) >= 2)
    });
    let mut samples = Vec::with_capacity(VICTIMS);
    for (mut completion, _) in victims {
        let started = Instant::now();
        scheduler.terminate(completion.pid()).expect("running");
        let outcome = completion.wait_timeout(Duration::from_secs(60));
        samples.push(started.elapsed());
        assert!(matches!(outcome, Err(ExitError::Terminated)));
    }
    stop.store(true, Relaxed);
    scheduler.shutdown(Duration::from_secs(60));
    samples
}

async fn busy_task(stop: Arc<AtomicBool>, steps: Arc<AtomicU32>) {
    while !stop.load(Relaxed) {
        std::hint::black_box(busy::work(STEP));
        steps.fetch_add(1, Relaxed);
        tokio::task::yield_now().await;
    }
}

fn tokio() -> Vec<Duration> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKERS)
        .build()
        .expect("runtime");
    let stop = Arc::new(AtomicBool::new(false));
    let flood_steps = Arc::new(AtomicU32::new(0));
    let flood: Vec<_> = (0..FLOOD)
        .map(|_| runtime.spawn(busy_task(stop.clone(), flood_steps.clone())))
        .collect();
    wait_until("the flood to step", || {
        flood_steps.load(Relaxed) as usize >= FLOOD
    });
    let victims: Vec<_> = (0..VICTIMS)
        .map(|_| {
            let steps = Arc::new(AtomicU32::new(0));
            let handle = runtime.spawn(busy_task(stop.clone(), steps.clone()));
            (handle, steps)
        })
        .collect();
    wait_until("every victim to step twice", || {
        victims.iter().all(|(_, s)| s.load(Relaxed) >= 2)
    });
    let mut samples = Vec::with_capacity(VICTIMS);
    for (handle, _) in victims {
        let started = Instant::now();
        handle.abort();
        let outcome = runtime.block_on(handle);
        samples.push(started.elapsed());
        assert!(outcome.is_err_and(|e| e.is_cancelled()));
    }
    stop.store(true, Relaxed);
    for task in flood {
        let _ = runtime.block_on(task);
    }
    samples
}

fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1e3)
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn main() {
    if filter::another_bench_asked_for("terminate") {
        return;
    }
    let runs = if std::env::var_os("BENCH_QUICK").is_some() {
        1
    } else {
        3
    };
    busy::calibrate();
    println!(
        "terminate: {FLOOD} processes of {STEP:?} steps continuing without end on {WORKERS} \
         workers; {VICTIMS} victims, each waiting in the queue, terminated one at a time; \
         {runs} run(s) per side, alternating"
    );
    println!();
    println!("| run | side | load average | terminate to end p50 / p99 / max (ms) |");
    println!("|---|---|---|---|");
    for run in 1..=runs {
        for (side, samples) in [("ours", ours as fn() -> Vec<Duration>), ("tokio", tokio)] {
            let samples = Sorted::of(samples());
            println!(
                "| {run} | {side} | {} | {} / {} / {} |",
                load(),
                ms(samples.at(50)),
                ms(samples.at(99)),
                ms(samples.max())
            );
        }
    }
}
