//! Weighted groups under saturation and under a flood, with tokio beside
//! for the flood (`cargo bench -p benches --bench groups`; `BENCH_QUICK=1`
//! runs each part once instead of three times, `GROUPS_FLOOD=N` changes
//! the flood's size):
//!
//! - **shares**: 2 workers saturated by 100 processes in each of two
//!   groups of weights 1 and 3, each step ~20 µs of work, for 2 s: each
//!   group's share of the step time (the engine's `groups()`, `busy`)
//!   and of the steps taken (counted by the processes);
//! - **flood**: the bench's thread spawns 1 000 000 processes (tasks) of
//!   5 steps of ~2 µs each (continuing; tokio: yielding) as fast as it
//!   can, so that most of them are ready at once, while 16 probes in
//!   another group re-arm a 5 ms timer and record how late the step (poll)
//!   that sees it starts. Three sides: **ours, groups** (flood and probes
//!   in groups of equal weight), **ours, one group** (everything in the
//!   default group) and **tokio**. Per side: probe lateness p50 / p99 /
//!   max, the worst probe, and the flood's wall time.
//!
//! Only Linux is supported (the load average comes from `/proc/loadavg`).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sched::prelude::*;
use sched::process::Group;

const WORKERS: usize = 2;
const FLOOD: usize = 1_000_000;
const FLOOD_STEPS: u32 = 5;
const PROBES: usize = 16;
const TIMER: Duration = Duration::from_millis(5);

/// About `micros` µs of work, the same on both sides.
fn work(micros: u64) -> u64 {
    busy::work(Duration::from_micros(micros))
}

fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1e3)
}

// Shares.

/// Continues with ~20 µs of work per step until told to stop, counting
/// its steps; in its group.
struct Busy {
    group: Group,
    steps: Arc<AtomicU64>,
}

impl Process for Busy {
    type Done = Payload;
    fn init(&mut self, cx: &InitContext, _: &str, _: Payload) -> Result<(), InitError> {
        cx.set_group(self.group);
        Ok(())
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        if events.next().is_some() {
            out.finish(());
            return Ok(());
        }
        work(20);
        self.steps.fetch_add(1, Relaxed);
        out.continue_();
        Ok(())
    }
}

/// The light group's share of the step time and of the steps.
fn shares() -> (f64, f64) {
    let scheduler = Scheduler::builder()
        .workers(WORKERS)
        .group("light", 1)
        .group("heavy", 3)
        .build();
    let groups = ["light", "heavy"].map(|n| scheduler.context().group(n).expect("declared"));
    let steps = [Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0))];
    let mut all = Vec::new();
    for _ in 0..100 {
        for (group, steps) in groups.iter().zip(&steps) {
            let busy = Busy {
                group: *group,
                steps: steps.clone(),
            };
            all.push(scheduler.spawn(busy).expect("spawned"));
        }
    }
    scheduler.start();
    std::thread::sleep(Duration::from_millis(300));
    let busy = |g: Group| {
        scheduler
            .context()
            .groups()
            .into_iter()
            .find(|i| i.group == g)
            .expect("a group")
            .busy
    };
    let busy0 = groups.map(busy);
    let steps0 = steps.each_ref().map(|s| s.load(Relaxed));
    std::thread::sleep(Duration::from_secs(2));
    let busy1 = groups.map(busy);
    let steps1 = steps.each_ref().map(|s| s.load(Relaxed));
    for done in &all {
        let _ = scheduler.send(done.pid(), ());
    }
    scheduler.shutdown(Duration::from_secs(10));
    let time = [0, 1].map(|i| (busy1[i] - busy0[i]).as_secs_f64());
    let took = [0, 1].map(|i| (steps1[i] - steps0[i]) as f64);
    (time[0] / (time[0] + time[1]), took[0] / (took[0] + took[1]))
}

// Flood.

/// Takes `FLOOD_STEPS` steps of ~2 µs, then ends; in its group.
struct Flooder {
    group: Group,
    left: u32,
}

impl Process for Flooder {
    type Done = Payload;
    fn init(&mut self, cx: &InitContext, _: &str, _: Payload) -> Result<(), InitError> {
        cx.set_group(self.group);
        Ok(())
    }

    fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        work(2);
        self.left -= 1;
        if self.left == 0 {
            out.finish(());
        } else {
            out.continue_();
        }
        Ok(())
    }
}

/// Re-arms a `TIMER` timer until `stop`, recording how late each step
/// that sees it starts.
struct Probe {
    group: Group,
    deadline: Option<Instant>,
    lateness: Vec<Duration>,
    stop: Arc<AtomicBool>,
    out: Arc<Mutex<Vec<Vec<Duration>>>>,
}

impl Process for Probe {
    type Done = Payload;
    fn init(&mut self, cx: &InitContext, _: &str, _: Payload) -> Result<(), InitError> {
        cx.set_group(self.group);
        Ok(())
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        let now = Instant::now();
        for _ in events.by_ref() {}
        if let Some(deadline) = self.deadline {
            self.lateness.push(now.saturating_duration_since(deadline));
        }
        if self.stop.load(Relaxed) {
            let lateness = std::mem::take(&mut self.lateness);
            self.out.lock().expect("not poisoned").push(lateness);
            out.finish(());
            return Ok(());
        }
        work(20);
        self.deadline = Some(Instant::now() + TIMER);
        out.set_timer(TIMER, Tag(1));
        Ok(())
    }
}

/// One flood run's figures.
struct Run {
    all: Sorted,
    worst_probe: Duration,
    wall: Duration,
}

fn run_of(per_probe: Vec<Vec<Duration>>, wall: Duration) -> Run {
    let worst_probe = per_probe
        .iter()
        .map(|p| p.iter().copied().max().unwrap_or_default())
        .max()
        .unwrap_or_default();
    Run {
        all: Sorted::of(per_probe.into_iter().flatten().collect()),
        worst_probe,
        wall,
    }
}

fn ours(flood: usize, groups: bool) -> Run {
    let builder = Scheduler::builder().workers(WORKERS);
    let builder = if groups {
        builder.group("flood", 1).group("probes", 1)
    } else {
        builder
    };
    let scheduler = builder.build();
    scheduler.start();
    let (flood_group, probe_group) = match groups {
        true => (
            scheduler.context().group("flood").expect("declared"),
            scheduler.context().group("probes").expect("declared"),
        ),
        false => (Group::DEFAULT, Group::DEFAULT),
    };
    let stop = Arc::new(AtomicBool::new(false));
    let results = Arc::new(Mutex::new(Vec::new()));
    let probes: Vec<Completion> = (0..PROBES)
        .map(|_| {
            scheduler
                .spawn(Probe {
                    group: probe_group,
                    deadline: None,
                    lateness: Vec::new(),
                    stop: stop.clone(),
                    out: results.clone(),
                })
                .expect("spawned")
        })
        .collect();
    std::thread::sleep(Duration::from_millis(50));
    // The flood comes from outside, as fast as this thread can spawn:
    // a million processes ready at once.
    let start = Instant::now();
    for _ in 0..flood {
        scheduler
            .spawn(Flooder {
                group: flood_group,
                left: FLOOD_STEPS,
            })
            .expect("spawned");
    }
    // The flood is over when only the probes are left.
    while scheduler.stats().live_processes > PROBES {
        std::thread::sleep(Duration::from_millis(5));
    }
    let wall = start.elapsed();
    stop.store(true, Relaxed);
    for probe in probes {
        probe.wait().expect("finished");
    }
    scheduler.shutdown(Duration::from_secs(10));
    let per_probe = std::mem::take(&mut *results.lock().expect("not poisoned"));
    run_of(per_probe, wall)
}

fn tokio(flood: usize) -> Run {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKERS)
        .enable_all()
        .build()
        .expect("a runtime");
    let stop = Arc::new(AtomicBool::new(false));
    let probes: Vec<_> = (0..PROBES)
        .map(|_| {
            let stop = stop.clone();
            runtime.spawn(async move {
                let mut lateness = Vec::new();
                while !stop.load(Relaxed) {
                    work(20);
                    let deadline = Instant::now() + TIMER;
                    tokio::time::sleep(TIMER).await;
                    lateness.push(Instant::now().saturating_duration_since(deadline));
                }
                lateness
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(50));
    let start = Instant::now();
    let tasks: Vec<_> = (0..flood)
        .map(|_| {
            runtime.spawn(async {
                for _ in 0..FLOOD_STEPS {
                    work(2);
                    tokio::task::yield_now().await;
                }
            })
        })
        .collect();
    let wall = runtime.block_on(async move {
        for task in tasks {
            task.await.expect("ran");
        }
        start.elapsed()
    });
    stop.store(true, Relaxed);
    let per_probe = runtime.block_on(async move {
        let mut all = Vec::new();
        for probe in probes {
            all.push(probe.await.expect("ran"));
        }
        all
    });
    run_of(per_probe, wall)
}

fn main() {
    if filter::another_bench_asked_for("groups") {
        return;
    }
    let runs = if std::env::var_os("BENCH_QUICK").is_some() {
        1
    } else {
        3
    };
    let flood = std::env::var("GROUPS_FLOOD")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(FLOOD);
    busy::calibrate();
    println!("groups, shares: {WORKERS} workers, 100 processes of ~20 µs steps in each of two groups of weights 1 and 3, 2 s");
    println!();
    println!("| run | load average | light: share of step time | light: share of steps |");
    println!("|---|---|---|---|");
    for i in 1..=runs {
        let average = load_average();
        let (time, steps) = shares();
        println!(
            "| {i} | {average} | {:.1} % | {:.1} % |",
            time * 100.0,
            steps * 100.0
        );
    }
    println!();
    println!(
        "groups, flood: {flood} processes of {FLOOD_STEPS} ~2 µs steps spawned from outside, \
         {PROBES} probes re-arming a {TIMER:?} timer, {WORKERS} workers; {runs} run(s) per side"
    );
    println!();
    println!("| run | side | load average | flood wall (s) | probe lateness p50 / p99 / max (ms) | worst probe (ms) |");
    println!("|---|---|---|---|---|---|");
    type Side<'a> = (&'a str, Box<dyn Fn() -> Run + 'a>);
    let sides: [Side<'_>; 3] = [
        ("ours, groups", Box::new(|| ours(flood, true))),
        ("ours, one group", Box::new(|| ours(flood, false))),
        ("tokio", Box::new(|| tokio(flood))),
    ];
    for i in 1..=runs {
        for (side, run) in &sides {
            let average = load_average();
            let r = run();
            println!(
                "| {i} | {side} | {average} | {:.2} | {} / {} / {} | {} |",
                r.wall.as_secs_f64(),
                ms(r.all.at(50)),
                ms(r.all.at(99)),
                ms(r.all.max()),
                ms(r.worst_probe),
            );
        }
    }
}

#[path = "common/busy.rs"]
mod busy;
use busy::Sorted;

#[path = "common/tables.rs"]
mod tables;
use tables::load_average;

#[path = "common/filter.rs"]
mod filter;
