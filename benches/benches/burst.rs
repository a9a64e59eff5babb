//! Schedule latency under a burst, ours and tokio in one run
//! (`cargo bench -p benches --bench burst`; `BENCH_QUICK=1` runs each side
//! once instead of three times):
//!
//! 50 000 processes (tasks) are started at once, 2 worker threads, in two
//! loads: **busy**, each running 60 short steps (polls) of the same fixed
//! work back to back; **timers**, each waiting three engine (tokio) timers
//! of 1-20 ms one after another (seeded, the same on both sides), with the
//! same fixed work in each step, as the workflow benchmark's calls do.
//! While they run:
//!
//! - 16 **timer probes** (started 1 ms apart) each set a 15 ms timer again
//!   and again and record how late the step (poll) that sees it starts
//!   after the deadline;
//! - a **foreign thread** posts a message stamped with the time to a probe
//!   process (sends it on a channel to a probe task) every 1 ms, and the
//!   probe records how long after the stamp the step (poll) that receives
//!   it starts.
//!
//! Per side: the burst's wall time (first spawn to the last busy process
//! finished) and p50 / p99 / max of both latencies; the median of the runs,
//! and ours / tokio. Each run's load average is printed with it.
//!
//! Only Linux is supported (the load average comes from `/proc/loadavg`).

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use sched::prelude::*;

const WORKERS: usize = 2;
const BUSY: usize = 50_000;
const STEPS: u32 = 60;
/// Iterations of the fixed work of one step (about a microsecond).
const WORK: u64 = 300;
const TIMER: Duration = Duration::from_millis(15);
const POST_EVERY: Duration = Duration::from_millis(1);
/// Timer probes running side by side (staggered), for enough samples in
/// a short burst.
const TIMER_PROBES: usize = 16;

/// The same work for one step on both sides.
fn work() -> u64 {
    let mut x = black_box(0x9e37_79b9_7f4a_7c15u64);
    for _ in 0..black_box(WORK) {
        x = x.rotate_left(5) ^ x.wrapping_mul(0x0100_0000_01b3);
    }
    black_box(x)
}

/// Where the probes put their samples.
#[derive(Default)]
struct Samples {
    timer: Mutex<Vec<Duration>>,
    message: Mutex<Vec<Duration>>,
}

fn record(into: &Mutex<Vec<Duration>>, sample: Duration) {
    into.lock().unwrap_or_else(|e| e.into_inner()).push(sample);
}

/// One side's figures in one run.
#[derive(Clone, Copy)]
struct Run {
    wall: Duration,
    timer: Percentiles,
    message: Percentiles,
}

#[derive(Clone, Copy)]
struct Percentiles {
    p50: Duration,
    p99: Duration,
    max: Duration,
}

impl Percentiles {
    fn of(samples: &Mutex<Vec<Duration>>, what: &str) -> Percentiles {
        let mut samples = samples.lock().unwrap_or_else(|e| e.into_inner()).clone();
        assert!(
            samples.len() >= 5,
            "too few {what} samples: {}",
            samples.len()
        );
        samples.sort_unstable();
        let at = |q: usize| samples[(samples.len() - 1) * q / 100];
        Percentiles {
            p50: at(50),
            p99: at(99),
            max: at(100),
        }
    }
}

// --------------------------------------------------------------------- ours

/// Runs `STEPS` steps of fixed work, then finishes.
struct Busy {
    left: u32,
}

impl Process for Busy {
    type Done = Payload;
    fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        work();
        self.left -= 1;
        if self.left == 0 {
            out.finish(());
        } else {
            out.continue_();
        }
        Ok(())
    }
}

const CALL: Tag = Tag(2);

/// Waits its three delays one after another, with fixed work in each step.
struct Waiter {
    delays: [Duration; 3],
    next: usize,
}

impl Process for Waiter {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        work();
        let fired = events
            .filter(|e| matches!(e, Event::Timer { tag: CALL, .. }))
            .count();
        if self.next == 0 || fired > 0 {
            match self.delays.get(self.next) {
                Some(&delay) => {
                    out.set_timer(delay, CALL);
                    self.next += 1;
                }
                None => out.finish(()),
            }
        }
        Ok(())
    }
}

/// The two loads.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Load {
    Busy,
    Timers,
}

impl Load {
    fn name(self) -> &'static str {
        match self {
            Load::Busy => "busy",
            Load::Timers => "timers",
        }
    }
}

/// Three delays of 1-20 ms per process, from a seeded splitmix64.
fn delays() -> Vec<[Duration; 3]> {
    let mut next = seeded::splitmix64(0x5eed_b0b5);
    (0..BUSY)
        .map(|_| [(); 3].map(|()| Duration::from_millis(1 + next() % 20)))
        .collect()
}

const PROBE: Tag = Tag(1);

/// Sets a timer again and again while the burst runs; records lateness.
struct TimerProbe {
    deadline: Option<Instant>,
    samples: Arc<Samples>,
    stop: Arc<AtomicBool>,
}

impl Process for TimerProbe {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        let now = Instant::now();
        let mut fired = self.deadline.is_none();
        for event in events {
            if let Event::Timer { tag: PROBE, .. } = event {
                if let Some(deadline) = self.deadline {
                    record(&self.samples.timer, now.saturating_duration_since(deadline));
                }
                fired = true;
            }
        }
        if self.stop.load(Ordering::Relaxed) {
            out.finish(());
        } else if fired {
            let set_at = Instant::now();
            out.set_timer(TIMER, PROBE);
            self.deadline = Some(set_at + TIMER);
        }
        Ok(())
    }
}

/// Records how long each stamped message took to reach its step.
struct MessageProbe {
    samples: Arc<Samples>,
}

impl Process for MessageProbe {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        let now = Instant::now();
        for event in events {
            match event {
                Event::Message(package) => {
                    if let Some(sent) = package.payload::<Instant>() {
                        record(&self.samples.message, now.saturating_duration_since(*sent));
                    }
                }
                Event::Cancel => out.finish(()),
                _ => {}
            }
        }
        Ok(())
    }
}

#[path = "common/poster.rs"]
mod poster;
use poster::poster;

#[path = "common/seeded.rs"]
mod seeded;

fn ours(load: Load, delays: &[[Duration; 3]]) -> Run {
    let scheduler = Arc::new(Scheduler::builder().workers(WORKERS).build());
    scheduler.start();
    let samples = Arc::new(Samples::default());
    let stop = Arc::new(AtomicBool::new(false));
    let timer_probes: Vec<Completion> = (0..TIMER_PROBES)
        .map(|_| {
            thread::sleep(Duration::from_millis(1));
            scheduler
                .spawn(TimerProbe {
                    deadline: None,
                    samples: samples.clone(),
                    stop: stop.clone(),
                })
                .expect("spawned")
        })
        .collect();
    let message_probe = scheduler
        .spawn(MessageProbe {
            samples: samples.clone(),
        })
        .expect("spawned");
    let probe: Pid = message_probe.pid();
    let outside = scheduler.clone();
    let posting = poster(
        POST_EVERY,
        move |now| {
            let _ = outside.send(probe, now);
        },
        stop.clone(),
    );
    let start = Instant::now();
    let busy: Vec<Completion> = delays
        .iter()
        .map(|&delays| match load {
            Load::Busy => scheduler.spawn(Busy { left: STEPS }),
            Load::Timers => scheduler.spawn(Waiter { delays, next: 0 }),
        })
        .map(|spawned| spawned.expect("spawned"))
        .collect();
    for done in busy {
        done.wait().expect("a busy process finishes");
    }
    let wall = start.elapsed();
    stop.store(true, Ordering::Relaxed);
    posting.join().expect("the poster");
    for probe in timer_probes {
        probe.wait().expect("a timer probe stops");
    }
    let report = scheduler.shutdown(Duration::from_secs(5));
    assert_eq!(report.forced, 0);
    drop(message_probe);
    Run {
        wall,
        timer: Percentiles::of(&samples.timer, "timer"),
        message: Percentiles::of(&samples.message, "message"),
    }
}

// -------------------------------------------------------------------- tokio

fn tokio(load: Load, delays: &[[Duration; 3]]) -> Run {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKERS)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let samples = Arc::new(Samples::default());
    let stop = Arc::new(AtomicBool::new(false));
    let timer_probes: Vec<_> = (0..TIMER_PROBES)
        .map(|_| {
            thread::sleep(Duration::from_millis(1));
            let (samples, stop) = (samples.clone(), stop.clone());
            rt.spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let deadline = tokio::time::Instant::now() + TIMER;
                    tokio::time::sleep_until(deadline).await;
                    let late = tokio::time::Instant::now().saturating_duration_since(deadline);
                    record(&samples.timer, late);
                }
            })
        })
        .collect();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Instant>();
    let message_probe = {
        let samples = samples.clone();
        rt.spawn(async move {
            while let Some(sent) = rx.recv().await {
                record(
                    &samples.message,
                    Instant::now().saturating_duration_since(sent),
                );
            }
        })
    };
    let posting = poster(
        POST_EVERY,
        move |now| {
            let _ = tx.send(now);
        },
        stop.clone(),
    );
    let start = Instant::now();
    let busy: Vec<_> = delays
        .iter()
        .map(|&delays| match load {
            Load::Busy => rt.spawn(async {
                for _ in 0..STEPS {
                    work();
                    tokio::task::yield_now().await;
                }
            }),
            Load::Timers => rt.spawn(async move {
                for delay in delays {
                    work();
                    tokio::time::sleep(delay).await;
                }
                work();
            }),
        })
        .collect();
    rt.block_on(async {
        for done in busy {
            done.await.expect("a busy task finishes");
        }
    });
    let wall = start.elapsed();
    stop.store(true, Ordering::Relaxed);
    posting.join().expect("the poster");
    rt.block_on(async {
        for probe in timer_probes {
            probe.await.expect("a timer probe stops");
        }
        message_probe.await.expect("the message probe stops");
    });
    drop(rt);
    Run {
        wall,
        timer: Percentiles::of(&samples.timer, "timer"),
        message: Percentiles::of(&samples.message, "message"),
    }
}

// ------------------------------------------------------------------- report

#[path = "common/tables.rs"]
mod tables;
use tables::{load_average, median};

fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1e3)
}

#[path = "common/filter.rs"]
mod filter;

fn main() {
    if filter::another_bench_asked_for("burst") {
        return;
    }
    let runs = if std::env::var_os("BENCH_QUICK").is_some() {
        1
    } else {
        3
    };
    println!(
        "burst: {BUSY} processes started at once ({STEPS} busy steps each, or three timers of \
         1-20 ms each), {WORKERS} workers; a {TIMER:?} timer set again and again (lateness of its \
         step) and a message posted from another thread every {POST_EVERY:?} (post to step); \
         {runs} run(s) per side, alternating"
    );
    let delays = delays();
    for load in [Load::Busy, Load::Timers] {
        report(load, runs, &delays);
    }
}

fn report(load: Load, runs: usize, delays: &[[Duration; 3]]) {
    println!();
    println!("load: {}", load.name());
    println!(
        "| run | side | load average | burst wall (ms) | timer late p50 / p99 / max (ms) | message p50 / p99 / max (ms) |"
    );
    println!("|---|---|---|---|---|---|");
    let (mut ours_runs, mut tokio_runs) = (Vec::new(), Vec::new());
    let mut loads = Vec::new();
    for i in 1..=runs {
        for (side, run, runs) in [
            (
                "ours",
                ours as fn(Load, &[[Duration; 3]]) -> Run,
                &mut ours_runs,
            ),
            ("tokio", tokio, &mut tokio_runs),
        ] {
            let average = load_average();
            let r = run(load, delays);
            loads.push(average.clone());
            println!(
                "| {i} | {side} | {average} | {} | {} / {} / {} | {} / {} / {} |",
                ms(r.wall),
                ms(r.timer.p50),
                ms(r.timer.p99),
                ms(r.timer.max),
                ms(r.message.p50),
                ms(r.message.p99),
                ms(r.message.max),
            );
            runs.push(r);
        }
    }
    println!();
    println!(
        "| {} load, median of {runs} (ms) | ours | tokio | ours / tokio |",
        load.name()
    );
    println!("|---|---|---|---|");
    type Metric = fn(&Run) -> Duration;
    let metrics: [(&str, Metric); 7] = [
        ("burst wall", |r| r.wall),
        ("timer late p50", |r| r.timer.p50),
        ("timer late p99", |r| r.timer.p99),
        ("timer late max", |r| r.timer.max),
        ("message p50", |r| r.message.p50),
        ("message p99", |r| r.message.p99),
        ("message max", |r| r.message.max),
    ];
    let mut figures = Vec::new();
    for (name, metric) in metrics {
        let ours = median(ours_runs.iter().map(|r| metric(r).as_secs_f64()).collect());
        let tokio = median(tokio_runs.iter().map(|r| metric(r).as_secs_f64()).collect());
        println!(
            "| {name} | {:.2} | {:.2} | {:.2} |",
            ours * 1e3,
            tokio * 1e3,
            ours / tokio.max(1e-9)
        );
        figures.push(tables::Figure {
            name: format!("{} load: {name}", load.name()),
            unit: "ms",
            ours: ours * 1e3,
            peer: tokio * 1e3,
            peer_name: "tokio",
            loads: &loads,
        });
    }
    tables::record("burst", &figures);
}
