//! Service under sustained overload, ours and tokio in one run
//! (`cargo bench -p benches --bench overload`; `BENCH_QUICK=1` runs each
//! side once instead of three times, `OVERLOAD_PROCESSES=N` changes the
//! bulk's size):
//!
//! 50 000 processes (tasks) on 2 workers each run 20 rounds of a ~20 µs
//! busy step followed by a 1-50 ms timer (seeded, the same on both sides):
//! about 10 s of CPU per worker, far more ready work than workers for
//! the whole run. Beside them:
//!
//! - 16 **probes** re-arm a 15 ms timer, again and again, and record how
//!   late the step (poll) that sees it starts after the deadline;
//! - a **foreign thread** posts a message stamped with the time to probe 0
//!   every 1 ms, and probe 0 records how long after the stamp the step
//!   (poll) that reads it starts.
//!
//! Three sides: **ours** (every process at `Normal`), **ours, probes
//! High** (the probes at `Priority::High`, the bulk at `Normal`) and
//! **tokio**. Per side and run: timer lateness p50 / p99 / max over all
//! probes, the worst probe, the outside message's p50 / p99 / max, and the
//! bulk's worst timer lateness per process (p50 / p99 / max over the
//! processes' own worst). For ours, each probe's worst wait against the
//! fair-share limit (and the bulk's worst wait against the same limit):
//! the step time of the ready work ahead of it divided
//! by the workers (the ready count sampled every 5 ms, times the measured
//! mean step, over the workers); a ratio of 1 is a perfectly fair wait.
//!
//! Only Linux is supported (the load average comes from `/proc/loadavg`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use sched::prelude::*;
use sched::Priority;

const WORKERS: usize = 2;
const PROCESSES: usize = 50_000;
const ROUNDS: u32 = 20;
const STEP: Duration = Duration::from_micros(20);
const TIMER: Duration = Duration::from_millis(15);
const POST_EVERY: Duration = Duration::from_millis(1);
const PROBES: usize = 16;

/// The same ~20 µs of work for one step on both sides.
fn work() -> u64 {
    busy::work(STEP)
}

/// Each bulk process's delays: `ROUNDS` of 1-50 ms, from a seeded
/// splitmix64.
fn delays(processes: usize) -> Vec<Vec<Duration>> {
    let mut next = seeded::splitmix64(0x0ee1_0ad5);
    (0..processes)
        .map(|_| {
            (0..ROUNDS)
                .map(|_| Duration::from_millis(1 + next() % 50))
                .collect()
        })
        .collect()
}

/// What the probes and the bulk recorded in one run.
#[derive(Default)]
struct Samples {
    /// Per probe: its timers' lateness.
    timer: Vec<Mutex<Vec<Duration>>>,
    /// Probe 0's outside messages, stamp to step.
    message: Mutex<Vec<Duration>>,
    /// Per bulk process: its worst timer lateness.
    bulk_worst: Mutex<Vec<Duration>>,
}

impl Samples {
    fn new() -> Samples {
        Samples {
            timer: (0..PROBES).map(|_| Mutex::new(Vec::new())).collect(),
            ..Samples::default()
        }
    }
}

fn push(into: &Mutex<Vec<Duration>>, sample: Duration) {
    into.lock().unwrap_or_else(|e| e.into_inner()).push(sample);
}

fn take(from: &Mutex<Vec<Duration>>) -> Vec<Duration> {
    std::mem::take(&mut *from.lock().unwrap_or_else(|e| e.into_inner()))
}

/// One side's figures in one run.
struct Run {
    wall: Duration,
    probes: Vec<Sorted>,
    all_timers: Sorted,
    message: Sorted,
    bulk_worst: Sorted,
    /// Ours only: each probe's worst wait over the fair-share limit.
    fair_ratio: Option<Vec<f64>>,
    /// Ours only: the fair-share limit itself (the bulk's worst wait is
    /// judged against it too).
    fair_limit: Option<Duration>,
}

impl Run {
    fn of(samples: &Samples, wall: Duration, fair_limit: Option<Duration>) -> Run {
        let probes: Vec<Sorted> = samples.timer.iter().map(|m| Sorted::of(take(m))).collect();
        let all_timers = Sorted::of(probes.iter().flat_map(|p| p.0.iter().copied()).collect());
        let message = Sorted::of(take(&samples.message));
        let fair_ratio = fair_limit.map(|limit| {
            probes
                .iter()
                .map(|p| p.max().as_secs_f64() / limit.as_secs_f64().max(1e-9))
                .collect()
        });
        Run {
            wall,
            probes,
            all_timers,
            message,
            bulk_worst: Sorted::of(take(&samples.bulk_worst)),
            fair_ratio,
            fair_limit,
        }
    }

    fn worst_probe(&self) -> Duration {
        self.probes
            .iter()
            .map(Sorted::max)
            .max()
            .unwrap_or_default()
    }
}

// --------------------------------------------------------------------- ours

const ROUND: Tag = Tag(1);
const PROBE: Tag = Tag(2);

/// `ROUNDS` rounds of one busy step then a timer; keeps its worst lateness.
struct Bulk {
    delays: Vec<Duration>,
    next: usize,
    deadline: Option<Instant>,
    worst: Duration,
    samples: Arc<Samples>,
}

impl Process for Bulk {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        let now = Instant::now();
        let fired = events
            .filter(|e| matches!(e, Event::Timer { tag: ROUND, .. }))
            .count();
        if fired > 0 {
            if let Some(deadline) = self.deadline {
                self.worst = self.worst.max(now.saturating_duration_since(deadline));
            }
        }
        if self.next > 0 && fired == 0 {
            return Ok(());
        }
        work();
        match self.delays.get(self.next) {
            Some(&delay) => {
                self.next += 1;
                self.deadline = Some(Instant::now() + delay);
                out.set_timer(delay, ROUND);
            }
            None => {
                push(&self.samples.bulk_worst, self.worst);
                out.finish(());
            }
        }
        Ok(())
    }
}

/// Re-arms a 15 ms timer; probe 0 also reads the outside messages.
struct Probe {
    index: usize,
    priority: Priority,
    deadline: Option<Instant>,
    samples: Arc<Samples>,
    stop: Arc<AtomicBool>,
}

impl Process for Probe {
    type Done = Payload;
    fn init(&mut self, cx: &InitContext, _: &str, _: Payload) -> Result<(), InitError> {
        cx.set_priority(self.priority);
        Ok(())
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        let now = Instant::now();
        let mut fired = self.deadline.is_none();
        for event in events {
            match event {
                Event::Timer { tag: PROBE, .. } => {
                    if let Some(deadline) = self.deadline {
                        push(
                            &self.samples.timer[self.index],
                            now.saturating_duration_since(deadline),
                        );
                    }
                    fired = true;
                }
                Event::Message(package) => {
                    if let Some(sent) = package.payload::<Instant>() {
                        push(&self.samples.message, now.saturating_duration_since(*sent));
                    }
                }
                _ => {}
            }
        }
        if self.stop.load(Ordering::Relaxed) {
            out.finish(());
        } else if fired {
            self.deadline = Some(Instant::now() + TIMER);
            out.set_timer(TIMER, PROBE);
        }
        Ok(())
    }
}

#[path = "common/poster.rs"]
mod poster;
use poster::poster;

#[path = "common/seeded.rs"]
mod seeded;

fn ours(delays: &[Vec<Duration>], probes_at: Priority) -> Run {
    let scheduler = Arc::new(Scheduler::builder().workers(WORKERS).build());
    scheduler.start();
    let samples = Arc::new(Samples::new());
    let stop = Arc::new(AtomicBool::new(false));
    let probes: Vec<Completion> = (0..PROBES)
        .map(|index| {
            scheduler
                .spawn(Probe {
                    index,
                    priority: probes_at,
                    deadline: None,
                    samples: samples.clone(),
                    stop: stop.clone(),
                })
                .expect("spawned")
        })
        .collect();
    let probe0 = probes[0].pid();
    let outside = scheduler.clone();
    let posting = poster(
        POST_EVERY,
        move |now| {
            let _ = outside.send(probe0, now);
        },
        stop.clone(),
    );
    // The ready count, sampled while the bulk runs.
    let sampling = {
        let scheduler = scheduler.clone();
        let stop = stop.clone();
        thread::spawn(move || {
            let mut counts = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let stats = scheduler.stats();
                let queued: usize = stats.workers.iter().map(|w| w.local_queue_len).sum();
                counts.push(queued + stats.global_queue_len);
                thread::sleep(Duration::from_millis(5));
            }
            counts
        })
    };
    let start = Instant::now();
    let bulk: Vec<Completion> = delays
        .iter()
        .map(|delays| {
            scheduler
                .spawn(Bulk {
                    delays: delays.clone(),
                    next: 0,
                    deadline: None,
                    worst: Duration::ZERO,
                    samples: samples.clone(),
                })
                .expect("spawned")
        })
        .collect();
    for done in bulk {
        done.wait().expect("a bulk process finishes");
    }
    let wall = start.elapsed();
    stop.store(true, Ordering::Relaxed);
    posting.join().expect("the poster");
    let counts = sampling.join().expect("the sampler");
    for probe in probes {
        probe.wait().expect("a probe stops");
    }
    let report = scheduler.shutdown(Duration::from_secs(5));
    assert_eq!(report.forced, 0);
    // The fair share of a wait: the ready work ahead (the mean ready count
    // while the bulk ran, each a step of the measured mean length) over
    // the workers.
    let steps = (delays.len() as u64) * u64::from(ROUNDS + 1);
    let mean_step = wall.mul_f64(WORKERS as f64) / steps.max(1) as u32;
    let mean_ready = counts.iter().sum::<usize>() as f64 / counts.len().max(1) as f64;
    let limit = mean_step.mul_f64(mean_ready / WORKERS as f64);
    Run::of(&samples, wall, Some(limit))
}

// -------------------------------------------------------------------- tokio

fn tokio(delays: &[Vec<Duration>]) -> Run {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKERS)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let samples = Arc::new(Samples::new());
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<Instant>();
    let mut rx = Some(rx);
    let probes: Vec<_> = (0..PROBES)
        .map(|index| {
            let (samples, stop) = (samples.clone(), stop.clone());
            let mut rx = if index == 0 { rx.take() } else { None };
            rt.spawn(async move {
                let mut deadline = tokio::time::Instant::now() + TIMER;
                let sleep = tokio::time::sleep_until(deadline);
                tokio::pin!(sleep);
                while !stop.load(Ordering::Relaxed) {
                    tokio::select! {
                        () = &mut sleep => {
                            let late = tokio::time::Instant::now().saturating_duration_since(deadline);
                            push(&samples.timer[index], late);
                            deadline = tokio::time::Instant::now() + TIMER;
                            sleep.as_mut().reset(deadline);
                        }
                        Some(sent) = async { match rx.as_mut() { Some(rx) => rx.recv().await, None => std::future::pending().await } } => {
                            push(&samples.message, Instant::now().saturating_duration_since(sent));
                        }
                    }
                }
            })
        })
        .collect();
    let posting = poster(
        POST_EVERY,
        move |now| {
            let _ = tx.send(now);
        },
        stop.clone(),
    );
    let start = Instant::now();
    let bulk: Vec<_> = delays
        .iter()
        .map(|delays| {
            let delays = delays.clone();
            let samples = samples.clone();
            rt.spawn(async move {
                let mut worst = Duration::ZERO;
                for delay in delays {
                    work();
                    let deadline = tokio::time::Instant::now() + delay;
                    tokio::time::sleep_until(deadline).await;
                    worst =
                        worst.max(tokio::time::Instant::now().saturating_duration_since(deadline));
                }
                work();
                push(&samples.bulk_worst, worst);
            })
        })
        .collect();
    rt.block_on(async {
        for done in bulk {
            done.await.expect("a bulk task finishes");
        }
    });
    let wall = start.elapsed();
    stop.store(true, Ordering::Relaxed);
    posting.join().expect("the poster");
    rt.block_on(async {
        for probe in probes {
            probe.await.expect("a probe stops");
        }
    });
    drop(rt);
    Run::of(&samples, wall, None)
}

// ------------------------------------------------------------------- report

#[path = "common/busy.rs"]
mod busy;
use busy::Sorted;

#[path = "common/tables.rs"]
mod tables;
use tables::{load_average, median};

#[path = "common/filter.rs"]
mod filter;

fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1e3)
}

fn main() {
    if filter::another_bench_asked_for("overload") {
        return;
    }
    let runs = if std::env::var_os("BENCH_QUICK").is_some() {
        1
    } else {
        3
    };
    let processes = std::env::var("OVERLOAD_PROCESSES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(PROCESSES);
    busy::calibrate();
    println!(
        "overload: {processes} processes x {ROUNDS} rounds of a {STEP:?} step and a 1-50 ms timer, \
         {WORKERS} workers; {PROBES} probes re-arming a {TIMER:?} timer, a message posted to probe 0 \
         from another thread every {POST_EVERY:?}; {runs} run(s) per side, alternating"
    );
    println!();
    println!(
        "| run | side | load average | wall (s) | probe timers p50 / p99 / max (ms) | worst probe (ms) | \
         outside message p50 / p99 / max (ms) | bulk worst per process p50 / p99 / max (ms) |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let delays = delays(processes);
    type Side<'a> = (&'a str, Box<dyn Fn() -> Run + 'a>);
    let sides: [Side<'_>; 3] = [
        ("ours", Box::new(|| ours(&delays, Priority::Normal))),
        (
            "ours, probes High",
            Box::new(|| ours(&delays, Priority::High)),
        ),
        ("tokio", Box::new(|| tokio(&delays))),
    ];
    let mut all: Vec<Vec<Run>> = sides.iter().map(|_| Vec::new()).collect();
    let mut loads = Vec::new();
    for i in 1..=runs {
        for (s, (side, run)) in sides.iter().enumerate() {
            let average = load_average();
            let r = run();
            loads.push(average.clone());
            println!(
                "| {i} | {side} | {average} | {:.1} | {} / {} / {} | {} | {} / {} / {} | {} / {} / {} |",
                r.wall.as_secs_f64(),
                ms(r.all_timers.at(50)),
                ms(r.all_timers.at(99)),
                ms(r.all_timers.max()),
                ms(r.worst_probe()),
                ms(r.message.at(50)),
                ms(r.message.at(99)),
                ms(r.message.max()),
                ms(r.bulk_worst.at(50)),
                ms(r.bulk_worst.at(99)),
                ms(r.bulk_worst.max()),
            );
            all[s].push(r);
        }
    }
    println!();
    println!("Per probe, worst timer lateness (ms) and, for ours, over the fair-share limit:");
    println!();
    println!(
        "| run | side | {} |",
        (0..PROBES)
            .map(|p| format!("p{p}"))
            .collect::<Vec<_>>()
            .join(" | ")
    );
    println!("|---|---|{}", "---|".repeat(PROBES));
    for (s, (side, _)) in sides.iter().enumerate() {
        for (i, r) in all[s].iter().enumerate() {
            let cells: Vec<String> = r
                .probes
                .iter()
                .enumerate()
                .map(|(p, probe)| match &r.fair_ratio {
                    Some(ratio) => format!("{} ({:.2})", ms(probe.max()), ratio[p]),
                    None => ms(probe.max()),
                })
                .collect();
            println!("| {} | {side} | {} |", i + 1, cells.join(" | "));
        }
    }
    println!();
    // The bulk's own worst wait (the worst of any bulk process's timer
    // lateness) against the same fair-share limit.
    for (s, (side, _)) in sides.iter().enumerate() {
        let ratios: Vec<String> = all[s]
            .iter()
            .filter_map(|r| {
                let limit = r.fair_limit?.as_secs_f64().max(1e-9);
                Some(format!("{:.2}", r.bulk_worst.max().as_secs_f64() / limit))
            })
            .collect();
        if !ratios.is_empty() {
            println!(
                "{side}: the bulk's worst wait over the fair-share limit, by run: {}",
                ratios.join(", ")
            );
        }
    }
    println!();
    println!("| median of {runs} (ms) | ours | ours, probes High | tokio | ours / tokio |");
    println!("|---|---|---|---|---|");
    type Metric = fn(&Run) -> Duration;
    let metrics: [(&str, Metric); 8] = [
        ("probe timer p50", |r| r.all_timers.at(50)),
        ("probe timer p99", |r| r.all_timers.at(99)),
        ("worst probe", Run::worst_probe),
        ("outside message p50", |r| r.message.at(50)),
        ("outside message p99", |r| r.message.at(99)),
        ("outside message max", |r| r.message.max()),
        ("bulk worst per process p99", |r| r.bulk_worst.at(99)),
        ("bulk worst per process max", |r| r.bulk_worst.max()),
    ];
    let mut figures = Vec::new();
    for (name, metric) in metrics {
        let m = |s: usize| median(all[s].iter().map(|r| metric(r).as_secs_f64()).collect());
        let (ours, high, tokio) = (m(0), m(1), m(2));
        println!(
            "| {name} | {:.2} | {:.2} | {:.2} | {:.2} |",
            ours * 1e3,
            high * 1e3,
            tokio * 1e3,
            ours / tokio.max(1e-9)
        );
        figures.push(tables::Figure {
            name: name.to_string(),
            unit: "ms",
            ours: ours * 1e3,
            peer: tokio * 1e3,
            peer_name: "tokio",
            loads: &loads,
        });
    }
    tables::record("overload", &figures);
}
