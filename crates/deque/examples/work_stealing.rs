//! Work being stolen across threads.
//!
//! One thread starts with all the jobs in its deque; three idle threads
//! steal half of a victim's jobs at a time and run them from their own
//! deques, where they can be stolen again. Each job spins for a short,
//! uneven time. At the end every thread says how many jobs it ran, how many
//! it stole and from whom, and the program checks that every job ran exactly
//! once.
//!
//! Run it with `cargo run --release -p sched-deque --example work_stealing`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use deque::{Steal, Stealer, Worker};

const THREADS: usize = 4;
const JOBS: usize = 20_000;

/// What one thread did.
#[derive(Default)]
struct Report {
    ran: Vec<usize>,
    steals: usize,
    stolen_items: usize,
    stolen_from: [usize; THREADS],
}

/// Pretends to work for a few microseconds, more for some jobs than others.
fn run_job(job: usize) -> u64 {
    let spins = 200 + (job * 7919) % 1800;
    (0..spins as u64).fold(job as u64, |acc, x| acc.wrapping_mul(31).wrapping_add(x))
}

fn main() {
    let deques: Vec<Worker<usize>> = (0..THREADS).map(|_| Worker::new()).collect();
    for job in 0..JOBS {
        deques[0].push(job);
    }
    let stealers: Arc<Vec<Stealer<usize>>> = Arc::new(deques.iter().map(Worker::stealer).collect());
    let remaining = Arc::new(AtomicUsize::new(JOBS));
    let started = Instant::now();

    let handles: Vec<_> = deques
        .into_iter()
        .enumerate()
        .map(|(me, local)| {
            let stealers = stealers.clone();
            let remaining = remaining.clone();
            thread::spawn(move || {
                let mut report = Report::default();
                let mut checksum = 0u64;
                let mut victim = (me + 1) % THREADS;
                while remaining.load(Ordering::Acquire) > 0 {
                    let job = match local.pop() {
                        Some(job) => Some(job),
                        None => {
                            // Try each other thread once, starting after the
                            // last victim, taking half of what it has.
                            let mut found = None;
                            for _ in 0..THREADS {
                                victim = (victim + 1) % THREADS;
                                if victim == me {
                                    continue;
                                }
                                let before = local.len();
                                if let Steal::Success(job) =
                                    stealers[victim].steal_half_into(&local)
                                {
                                    report.steals += 1;
                                    report.stolen_items += 1 + local.len() - before;
                                    report.stolen_from[victim] += 1;
                                    found = Some(job);
                                    break;
                                }
                            }
                            if found.is_none() {
                                thread::sleep(Duration::from_micros(50));
                            }
                            found
                        }
                    };
                    if let Some(job) = job {
                        checksum = checksum.wrapping_add(run_job(job));
                        report.ran.push(job);
                        remaining.fetch_sub(1, Ordering::AcqRel);
                    }
                }
                std::hint::black_box(checksum);
                report
            })
        })
        .collect();

    let reports: Vec<Report> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let elapsed = started.elapsed();

    println!("{JOBS} jobs on {THREADS} threads in {elapsed:.2?}; all jobs started on thread 0\n");
    println!("thread  jobs run  steals  items stolen  stolen from (thread: times)");
    for (me, r) in reports.iter().enumerate() {
        let from: Vec<String> = r
            .stolen_from
            .iter()
            .enumerate()
            .filter(|(_, &n)| n > 0)
            .map(|(t, n)| format!("{t}: {n}"))
            .collect();
        println!(
            "{me:>6}  {:>8}  {:>6}  {:>12}  {}",
            r.ran.len(),
            r.steals,
            r.stolen_items,
            if from.is_empty() {
                "-".to_string()
            } else {
                from.join(", ")
            }
        );
    }

    let mut all: Vec<usize> = reports.iter().flat_map(|r| r.ran.iter().copied()).collect();
    all.sort_unstable();
    assert_eq!(
        all,
        (0..JOBS).collect::<Vec<_>>(),
        "a job was lost or ran twice"
    );
    println!("\nchecked: every one of the {JOBS} jobs ran exactly once");
}
