//! What a light load of timers costs an otherwise idle engine, ours beside
//! tokio: `PROCESSES` processes (tasks) each re-arm a timer of a seeded
//! 5-50 ms and do nothing else, for 3 s, on 2 workers. The workers are
//! idle between timers, so what the load costs is their wake-ups: the finer
//! the timers' tick, the fewer due timers share one. Per side: CPU time of
//! the whole program per second (user + system, `getrusage`), context
//! switches per second (voluntary + involuntary), and how late each timer's
//! step (poll) came after its deadline, p50 / p99.
//!
//! ```text
//! cargo run --release -p benches --example timer_wakeups [PROCESSES...]
//! ```
//!
//! Only Linux is supported.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sched::prelude::*;

const WORKERS: usize = 2;
const RUN: Duration = Duration::from_secs(3);
const SEED: u64 = 0x7173_e12a;

/// A seeded generator of timer delays (xorshift64*), the same sequence
/// on both sides.
struct Delays(u64);

impl Delays {
    fn next(&mut self) -> Duration {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let r = self.0.wrapping_mul(0x2545_F491_4F6C_DD1D);
        Duration::from_micros(5_000 + r % 45_000)
    }
}

/// CPU time (user + system) and context switches of this process so far.
fn usage() -> (Duration, u64) {
    // SAFETY: `getrusage` writes a `rusage` we own; zeroed is a valid one.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to it, for this process.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    assert_eq!(rc, 0, "getrusage");
    let time = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    let cpu = time(ru.ru_utime) + time(ru.ru_stime);
    (cpu, (ru.ru_nvcsw + ru.ru_nivcsw) as u64)
}

/// One process: re-arms its timer until `until`, recording each timer's
/// lateness.
struct Ticker {
    delays: Delays,
    deadline: Option<Instant>,
    until: Instant,
    late: Arc<Mutex<Vec<Duration>>>,
    mine: Vec<Duration>,
}

impl Process for Ticker {
    type Done = ();
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        let now = Instant::now();
        let fired = events.any(|e| matches!(e, Event::Timer { .. }));
        if let (Some(deadline), true) = (self.deadline, fired) {
            self.mine.push(now.saturating_duration_since(deadline));
        } else if self.deadline.is_some() {
            return Ok(());
        }
        if now >= self.until {
            self.late.lock().unwrap().append(&mut self.mine);
            out.finish(());
            return Ok(());
        }
        let delay = self.delays.next();
        self.deadline = Some(Instant::now() + delay);
        out.set_timer(delay, Tag(0));
        Ok(())
    }
}

struct Side {
    cpu_per_s: Duration,
    switches_per_s: f64,
    p50: Duration,
    p99: Duration,
}

fn report(started: (Duration, u64), wall: Duration, mut late: Vec<Duration>) -> Side {
    let (cpu, switches) = usage();
    late.sort();
    let at = |q: f64| late[((late.len() - 1) as f64 * q) as usize];
    Side {
        cpu_per_s: (cpu - started.0).div_f64(wall.as_secs_f64()),
        switches_per_s: (switches - started.1) as f64 / wall.as_secs_f64(),
        p50: at(0.5),
        p99: at(0.99),
    }
}

fn ours(processes: usize) -> Side {
    let scheduler = Scheduler::builder().workers(WORKERS).build();
    scheduler.start();
    let late = Arc::new(Mutex::new(Vec::new()));
    let started = usage();
    let t0 = Instant::now();
    let until = t0 + RUN;
    let handles: Vec<_> = (0..processes)
        .map(|i| {
            scheduler
                .spawn(Ticker {
                    delays: Delays(SEED + i as u64),
                    deadline: None,
                    until,
                    late: Arc::clone(&late),
                    mine: Vec::new(),
                })
                .expect("spawned")
        })
        .collect();
    for handle in handles {
        handle.wait().expect("finished");
    }
    let side = report(
        started,
        t0.elapsed(),
        std::mem::take(&mut late.lock().unwrap()),
    );
    scheduler.shutdown(Duration::from_secs(1));
    side
}

fn tokio_side(processes: usize) -> Side {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKERS)
        .enable_all()
        .build()
        .expect("runtime");
    let late = Arc::new(Mutex::new(Vec::new()));
    let started = usage();
    let t0 = Instant::now();
    let until = t0 + RUN;
    rt.block_on(async {
        let tasks: Vec<_> = (0..processes)
            .map(|i| {
                let late = Arc::clone(&late);
                tokio::spawn(async move {
                    let mut delays = Delays(SEED + i as u64);
                    let mut mine = Vec::new();
                    while Instant::now() < until {
                        let deadline = tokio::time::Instant::now() + delays.next();
                        tokio::time::sleep_until(deadline).await;
                        mine.push(tokio::time::Instant::now().saturating_duration_since(deadline));
                    }
                    late.lock().unwrap().append(&mut mine);
                })
            })
            .collect();
        for task in tasks {
            task.await.expect("task");
        }
    });
    let side = report(
        started,
        t0.elapsed(),
        std::mem::take(&mut late.lock().unwrap()),
    );
    drop(rt);
    side
}

fn main() {
    let counts: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("a number of processes"))
        .collect();
    let counts = if counts.is_empty() {
        vec![100, 1_000, 10_000]
    } else {
        counts
    };
    println!("| processes | side | CPU per s | switches per s | late p50 | late p99 |");
    println!("|---|---|---|---|---|---|");
    for n in counts {
        for (name, side) in [("ours", ours(n)), ("tokio", tokio_side(n))] {
            println!(
                "| {n} | {name} | {:.1} ms | {:.0} | {:.2} ms | {:.2} ms |",
                side.cpu_per_s.as_secs_f64() * 1e3,
                side.switches_per_s,
                side.p50.as_secs_f64() * 1e3,
                side.p99.as_secs_f64() * 1e3,
            );
        }
    }
}
