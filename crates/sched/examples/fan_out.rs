//! Fan-out: processes yield commands that a thread pool completes.
//!
//! 200 processes each yield 10 "checksum" commands at once. The handler
//! does not compute anything on the scheduler's workers: it hands each
//! command and its `Completer` to a pool of 4 threads, which complete the
//! yields when done. Each process sums its 10 results and finishes.
//!
//! Run it with `cargo run --release -p sched --example fan_out`.

use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use sched::command::{Command, CommandId, Completer, Rejected};
use sched::prelude::*;

const CHECKSUM: CommandId = CommandId(1);
const PROCESSES: u64 = 200;
const FAN: u64 = 10;
const POOL_THREADS: usize = 4;

struct Job {
    seed: u64,
    completer: Completer,
}

fn checksum(seed: u64) -> u64 {
    (0..20_000u64).fold(seed, |h, x| h.rotate_left(5) ^ x.wrapping_mul(0x9E37_79B9))
}

struct Gather {
    pending: u64,
    sum: u64,
    asked: bool,
}

impl Process for Gather {
    type Done = u64;
    fn init(&mut self, _: &InitContext, _: &str, _: Payload) -> Result<(), InitError> {
        Ok(())
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        if !self.asked {
            self.asked = true;
            for i in 0..FAN {
                out.yield_command(CHECKSUM, Tag(i), Box::new(out.pid().id() * 100 + i));
            }
            self.pending = FAN;
            return Ok(());
        }
        for event in events {
            if let Event::Completion { result, .. } = event {
                let value = result?.downcast::<u64>().map_err(|_| "not a u64")?;
                self.sum = self.sum.wrapping_add(*value);
                self.pending -= 1;
            }
        }
        if self.pending == 0 {
            out.finish(self.sum);
        }
        Ok(())
    }

    fn close(&mut self) {}
}

fn main() {
    let (jobs, queue) = mpsc::channel::<Job>();
    let queue = Arc::new(Mutex::new(queue));
    let pool: Vec<_> = (0..POOL_THREADS)
        .map(|_| {
            let queue = queue.clone();
            thread::spawn(move || {
                let mut done = 0u64;
                loop {
                    let job = queue.lock().unwrap().recv();
                    let Ok(Job { seed, completer }) = job else {
                        break;
                    };
                    let _ = completer.complete(Box::new(checksum(seed)));
                    done += 1;
                }
                done
            })
        })
        .collect();

    let jobs = Mutex::new(jobs);
    let scheduler = Scheduler::builder()
        .workers(2)
        .handler(
            CHECKSUM,
            move |cmd: Command, mut completer: Completer| -> Result<(), Rejected> {
                let Some(&seed) = cmd.data::<u64>() else {
                    return Err(completer.reject("a checksum command carries a u64 seed"));
                };
                // If the pool is gone the completer comes back in the error and
                // is dropped, which fails the yield instead of hanging it.
                let _ = jobs.lock().unwrap().send(Job { seed, completer });
                Ok(())
            },
        )
        .build();
    scheduler.start();

    let started = Instant::now();
    let handles: Vec<_> = (0..PROCESSES)
        .map(|_| {
            scheduler
                .spawn(Gather {
                    pending: 0,
                    sum: 0,
                    asked: false,
                })
                .unwrap()
        })
        .collect();
    let mut all = 0u64;
    for h in handles {
        all = all.wrapping_add(h.wait().expect("done"));
    }
    let elapsed = started.elapsed();
    let report = scheduler.shutdown(Duration::from_secs(1));
    drop(scheduler); // drops the handler, closing the job channel
    let per_thread: Vec<u64> = pool.into_iter().map(|t| t.join().unwrap()).collect();

    println!("{PROCESSES} processes x {FAN} yields completed by a pool of {POOL_THREADS} threads in {elapsed:.2?}");
    println!("  yields completed per pool thread: {per_thread:?}");
    println!("  combined checksum: {all:#018x}");
    println!(
        "  shutdown: {} forced, {} still running",
        report.forced, report.still_running
    );
    assert_eq!(per_thread.iter().sum::<u64>(), PROCESSES * FAN);
}
