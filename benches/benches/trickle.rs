//! The other end of the load curve: a trickle of outside messages to an
//! otherwise idle scheduler, ours and tokio in one run
//! (`cargo bench -p benches --bench trickle`; `BENCH_QUICK=1` runs each
//! side once instead of three times).
//!
//! A foreign thread posts a message stamped with the time to one process
//! (sends it on a channel to one task) every 100, 250 or 500 µs for 2 s,
//! on 2 workers. Per side: the CPU time the whole program used per message
//! (user + system, from `getrusage`, the poster's own share included on
//! both sides) and the wake latency, stamp to the step (poll) that reads
//! it, p50 / p99 / max. Idle workers of ours linger before they park (up
//! to 300 µs, `idle_linger`): this is what that costs and buys, beside
//! ours with `idle_linger(Duration::ZERO)` (park at once).
//!
//! Only Linux is supported (the load average comes from `/proc/loadavg`).

use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use sched::prelude::*;

const WORKERS: usize = 2;
const FOR: Duration = Duration::from_secs(2);
const INTERVALS: [Duration; 3] = [
    Duration::from_micros(100),
    Duration::from_micros(250),
    Duration::from_micros(500),
];

/// User plus system CPU time of the whole process so far.
fn cpu() -> Duration {
    // SAFETY: `getrusage` writes the struct it is given; a zeroed
    // `rusage` is a valid value of it.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

struct Run {
    cpu_per_message: Duration,
    latency: Vec<Duration>,
}

impl Run {
    fn at(&self, q: usize) -> Duration {
        self.latency[(self.latency.len() - 1) * q / 100]
    }
}

/// Posts `post(now)` every `every` for `FOR`; returns how many it posted.
/// Sleeps between posts, so an idle engine really idles.
fn post_for(every: Duration, post: impl Fn(Instant)) -> u64 {
    let start = Instant::now();
    let mut next = start;
    let mut sent = 0;
    while start.elapsed() < FOR {
        post(Instant::now());
        sent += 1;
        next += every;
        if let Some(wait) = next.checked_duration_since(Instant::now()) {
            thread::sleep(wait);
        }
    }
    sent
}

/// Records stamp-to-step latency.
struct Reader {
    samples: Arc<Mutex<Vec<Duration>>>,
}

impl Process for Reader {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        let now = Instant::now();
        for event in events {
            match event {
                Event::Message(package) => {
                    if let Some(sent) = package.payload::<Instant>() {
                        let mut samples = self.samples.lock().unwrap_or_else(|e| e.into_inner());
                        samples.push(now.saturating_duration_since(*sent));
                    }
                }
                Event::Cancel => out.finish(()),
                _ => {}
            }
        }
        Ok(())
    }
}

fn ours(every: Duration) -> Run {
    ours_with(every, None)
}

fn ours_parking(every: Duration) -> Run {
    ours_with(every, Some(Duration::ZERO))
}

fn ours_with(every: Duration, linger: Option<Duration>) -> Run {
    let builder = Scheduler::builder().workers(WORKERS);
    let builder = match linger {
        Some(linger) => builder.idle_linger(linger),
        None => builder,
    };
    let scheduler = builder.build();
    scheduler.start();
    let samples = Arc::new(Mutex::new(Vec::new()));
    let reader = scheduler
        .spawn(Reader {
            samples: samples.clone(),
        })
        .expect("spawned");
    let pid = reader.pid();
    // Let the workers settle into idleness first.
    thread::sleep(Duration::from_millis(50));
    let before = cpu();
    let sent = post_for(every, |now| {
        let _ = scheduler.send(pid, now);
    });
    // The last message's step.
    thread::sleep(Duration::from_millis(5));
    let used = cpu() - before;
    scheduler.shutdown(Duration::from_secs(5));
    finish(used, sent, &samples)
}

fn tokio(every: Duration) -> Run {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKERS)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let samples = Arc::new(Mutex::new(Vec::new()));
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Instant>();
    let reader = {
        let samples = samples.clone();
        rt.spawn(async move {
            while let Some(sent) = rx.recv().await {
                let now = Instant::now();
                let mut samples = samples.lock().unwrap_or_else(|e| e.into_inner());
                samples.push(now.saturating_duration_since(sent));
            }
        })
    };
    thread::sleep(Duration::from_millis(50));
    let before = cpu();
    let sent = post_for(every, |now| {
        let _ = tx.send(now);
    });
    thread::sleep(Duration::from_millis(5));
    let used = cpu() - before;
    drop(tx);
    rt.block_on(reader).expect("the reader ends");
    drop(rt);
    finish(used, sent, &samples)
}

fn finish(used: Duration, sent: u64, samples: &Mutex<Vec<Duration>>) -> Run {
    let mut latency = std::mem::take(&mut *samples.lock().unwrap_or_else(|e| e.into_inner()));
    assert!(!latency.is_empty(), "no message was read");
    latency.sort_unstable();
    Run {
        cpu_per_message: used / sent.max(1) as u32,
        latency,
    }
}

#[path = "common/tables.rs"]
mod tables;
use tables::{load_average, median};

#[path = "common/filter.rs"]
mod filter;

fn us(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1e6)
}

fn main() {
    if filter::another_bench_asked_for("trickle") {
        return;
    }
    let runs = if std::env::var_os("BENCH_QUICK").is_some() {
        1
    } else {
        3
    };
    println!(
        "trickle: one message from another thread every 100 / 250 / 500 µs for {FOR:?} to an \
         otherwise idle scheduler, {WORKERS} workers; CPU of the whole program per message, and \
         stamp-to-step latency; {runs} run(s) per side, alternating"
    );
    println!();
    println!("| every | run | side | load average | CPU per message (µs) | latency p50 / p99 / max (µs) |");
    println!("|---|---|---|---|---|---|");
    let mut figures_runs = Vec::new();
    let mut loads = Vec::new();
    for every in INTERVALS {
        let (mut o, mut p, mut t) = (Vec::new(), Vec::new(), Vec::new());
        for i in 1..=runs {
            for (side, run, into) in [
                ("ours", ours as fn(Duration) -> Run, &mut o),
                ("ours, parking at once", ours_parking, &mut p),
                ("tokio", tokio, &mut t),
            ] {
                let average = load_average();
                let r = run(every);
                println!(
                    "| {every:?} | {i} | {side} | {average} | {} | {} / {} / {} |",
                    us(r.cpu_per_message),
                    us(r.at(50)),
                    us(r.at(99)),
                    us(r.at(100)),
                );
                loads.push(average);
                into.push(r);
            }
        }
        figures_runs.push((every, o, p, t));
    }
    println!();
    println!("| median of {runs} | ours | ours, parking at once | tokio | ours / tokio | parking at once / tokio |");
    println!("|---|---|---|---|---|---|");
    let mut figures = Vec::new();
    for (every, o, p, t) in &figures_runs {
        type Metric = fn(&Run) -> Duration;
        let metrics: [(&str, Metric); 3] = [
            ("CPU per message (µs)", |r| r.cpu_per_message),
            ("latency p50 (µs)", |r| r.at(50)),
            ("latency p99 (µs)", |r| r.at(99)),
        ];
        for (name, metric) in metrics {
            let ours = median(o.iter().map(|r| metric(r).as_secs_f64()).collect());
            let parking = median(p.iter().map(|r| metric(r).as_secs_f64()).collect());
            let tokio = median(t.iter().map(|r| metric(r).as_secs_f64()).collect());
            println!(
                "| every {every:?}: {name} | {:.1} | {:.1} | {:.1} | {:.2} | {:.2} |",
                ours * 1e6,
                parking * 1e6,
                tokio * 1e6,
                ours / tokio.max(1e-12),
                parking / tokio.max(1e-12)
            );
            figures.push(tables::Figure {
                name: format!("every {every:?}: {name}"),
                unit: "µs",
                ours: ours * 1e6,
                peer: tokio * 1e6,
                peer_name: "tokio",
                loads: &loads,
            });
        }
    }
    tables::record("trickle", &figures);
}
