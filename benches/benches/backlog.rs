//! Reading a long backlog: 16 000 messages queued for one process, read
//! one per step (the process continues while events are left) against all
//! in one step (`cargo bench -p benches --bench backlog`; `BACKLOG=N`
//! changes the count). Three runs of each, alternated; the ratio of one
//! per step to all at once is the cost of a step over the cost of a
//! message, and must not grow with the backlog (`BACKLOG=32000` should
//! give about the same ratio): a step pays for what it reads and for what
//! arrived since the last one, not for what waits.
//!
//! The process's first step blocks its (only) worker until every message
//! is in its mailbox, so all of them are queued before it reads any; the
//! time is from that moment to the last message read.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sched::prelude::*;

/// Waits in its first step until `gate` opens, then reads its messages,
/// one per step or all at once, and finishes with when it started reading.
struct Reader {
    gate: Arc<AtomicBool>,
    one_per_step: bool,
    left: usize,
    started: Option<Instant>,
}

impl Process for Reader {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        if self.started.is_none() {
            while !self.gate.load(Ordering::Acquire) {
                std::thread::yield_now();
            }
            self.started = Some(Instant::now());
            out.continue_();
            return Ok(());
        }
        let per_step = if self.one_per_step { 1 } else { usize::MAX };
        for event in events.by_ref().take(per_step) {
            if let Event::Message(_) = event {
                self.left -= 1;
            }
        }
        if self.left == 0 {
            out.finish(self.started);
        } else {
            out.continue_();
        }
        Ok(())
    }
}

fn run(count: usize, one_per_step: bool) -> Duration {
    let scheduler = Scheduler::builder().workers(1).build();
    scheduler.start();
    let gate = Arc::new(AtomicBool::new(false));
    let reader = scheduler
        .spawn(Reader {
            gate: gate.clone(),
            one_per_step,
            left: count,
            started: None,
        })
        .expect("spawned");
    let pid = reader.pid();
    // The reader's first step is under way (or about to be) and holds the
    // worker: every message below waits in its mailbox.
    for i in 0..count {
        scheduler.send(pid, i as u64).expect("alive");
    }
    gate.store(true, Ordering::Release);
    let started = reader
        .typed::<Option<Instant>>()
        .wait()
        .expect("finished")
        .expect("it read");
    let elapsed = started.elapsed();
    scheduler.shutdown(Duration::from_secs(5));
    elapsed
}

fn main() {
    let count: usize = std::env::var("BACKLOG")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(16_000);
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "backlog of {count} messages, 1 worker (load {})",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    println!("| run | one per step | all in one step | ratio |");
    println!("|---|---|---|---|");
    for run_index in 1..=3 {
        let one = run(count, true);
        let all = run(count, false);
        println!(
            "| {run_index} | {:.2} ms | {:.3} ms | {:.1} |",
            one.as_secs_f64() * 1e3,
            all.as_secs_f64() * 1e3,
            one.as_secs_f64() / all.as_secs_f64()
        );
    }
}
