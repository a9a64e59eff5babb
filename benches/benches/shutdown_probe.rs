//! How far `shutdown` overruns its deadline when many processes ignore
//! their cancel (`cargo bench -p benches --bench shutdown_probe`).
//!
//! For each size, a 2-worker engine runs that many processes which have
//! taken their first step and wait for messages, ignoring `Event::Cancel`;
//! `shutdown(200 ms)` must then cancel them all, wait for the deadline and
//! force them. Printed: the time `shutdown` took, its overrun past the
//! deadline, and the report's counts. Three runs per size.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use relay::{Payload, Pid};
use sched_core::{BoxError, Engine, Events, InitContext, InitError, Output, Process, Spawn};

const DEADLINE: Duration = Duration::from_millis(200);
const SIZES: [usize; 3] = [10_000, 100_000, 300_000];
const RUNS: usize = 3;

/// Counts its first step, then waits for messages forever, ignoring every
/// event (cancel included).
struct Stubborn {
    started: Arc<AtomicUsize>,
    first: bool,
}

impl Process for Stubborn {
    type Done = Payload;
    fn init(&mut self, _: &InitContext, _: &str, _: Payload) -> Result<(), InitError> {
        Ok(())
    }
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        events.for_each(drop);
        if self.first {
            self.first = false;
            self.started.fetch_add(1, Ordering::Relaxed);
        }
        out.idle();
        Ok(())
    }
    fn close(&mut self) {}
}

fn main() {
    println!("shutdown({DEADLINE:?}) of processes that ignore their cancel, 2 workers");
    println!("| processes | took | past the deadline | forced | still queued | detached |");
    println!("|---|---|---|---|---|---|");
    for n in SIZES {
        for _ in 0..RUNS {
            let engine = Engine::builder().workers(2).build();
            engine.start();
            let started = Arc::new(AtomicUsize::new(0));
            for id in 1..=n as u64 {
                let process = Stubborn {
                    started: started.clone(),
                    first: true,
                };
                drop(
                    engine
                        .context()
                        .spawn(
                            Spawn::new(Box::new(process))
                                .method("run")
                                .at(Pid::local(id)),
                        )
                        .expect("submit"),
                );
            }
            while started.load(Ordering::Relaxed) < n {
                std::thread::sleep(Duration::from_millis(1));
            }
            let begun = Instant::now();
            let report = engine.shutdown(DEADLINE);
            let took = begun.elapsed();
            println!(
                "| {n} | {:.0} ms | {:.0} ms | {} | {} | {} |",
                took.as_secs_f64() * 1e3,
                took.saturating_sub(DEADLINE).as_secs_f64() * 1e3,
                report.forced,
                report.still_queued,
                report.workers_detached,
            );
        }
    }
}
