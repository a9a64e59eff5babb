//! Skynet (a million-leaf tree of processes, sums sent up as messages) on
//! two workers, printing per run its time, each worker's steps, steals
//! and parks, and how many processes of each subtree size were first
//! stepped on another worker than the one that spawned them: what work
//! stealing moved, by grain.
//!
//! ```text
//! cargo run --release -p benches --example skynet_moves [RUNS]
//! ```
//!
//! A thief that takes big subtrees moves few processes; one that takes
//! leaves moves many, and each moved leaf's record is freed on another
//! thread than the one that allocated it.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Instant;

use sched::prelude::*;
use sched::Scheduler;

/// Processes first stepped away from their spawner's thread, by
/// `log10` of their subtree's size (1 to 1 000 000).
static MOVED: [AtomicU64; 7] = [const { AtomicU64::new(0) }; 7];

/// A number for the current thread.
fn thread() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    thread_local!(static ME: u64 = NEXT.fetch_add(1, Relaxed));
    ME.with(|me| *me)
}

struct Node {
    /// The thread that spawned it, until its first step.
    born: Option<u64>,
    num: u64,
    size: u64,
    parent: Option<Pid>,
    waiting: u64,
    sum: u64,
}

impl Node {
    fn new(num: u64, size: u64, parent: Option<Pid>) -> Node {
        Node {
            born: Some(thread()),
            num,
            size,
            parent,
            waiting: 0,
            sum: 0,
        }
    }

    fn report(&self, out: &mut Output<'_>, sum: u64) -> Result<(), BoxError> {
        if let Some(parent) = self.parent {
            out.send(parent, sum)?;
        }
        out.finish(sum);
        Ok(())
    }
}

impl Process for Node {
    type Done = u64;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        if let Some(born) = self.born.take() {
            if born != thread() {
                MOVED[self.size.ilog10() as usize].fetch_add(1, Relaxed);
            }
            if self.size == 1 {
                return self.report(out, self.num);
            }
            let sub = self.size / 10;
            for i in 0..10 {
                out.spawn(Node::new(self.num + i * sub, sub, Some(out.pid())))?;
            }
            self.waiting = 10;
        }
        for event in events {
            if let Event::Message(package) = event {
                self.sum += *package.payload::<u64>().expect("a u64 sum");
                self.waiting -= 1;
            }
        }
        if self.waiting == 0 {
            return self.report(out, self.sum);
        }
        out.idle();
        Ok(())
    }
}

fn main() {
    let runs: usize = std::env::args()
        .nth(1)
        .map_or(10, |a| a.parse().expect("RUNS is a number"));
    let scheduler = Scheduler::builder().workers(2).build();
    scheduler.start();
    println!("| ms | per worker: steps, stolen, parks | moved by subtree size 1, 10, ... 10^6 |");
    println!("|---|---|---|");
    for _ in 0..runs {
        let before = scheduler.context().stats();
        let started = Instant::now();
        let root = scheduler
            .spawn(Node::new(0, 1_000_000, None))
            .expect("spawned");
        let sum = root.wait().expect("the root's sum");
        let took = started.elapsed();
        assert_eq!(sum, 499_999_500_000);
        let after = scheduler.context().stats();
        let workers: Vec<String> = after
            .workers
            .iter()
            .zip(&before.workers)
            .map(|(a, b)| {
                format!(
                    "{}, {}, {}",
                    a.steps - b.steps,
                    a.stolen - b.stolen,
                    a.parks - b.parks
                )
            })
            .collect();
        let moved: Vec<u64> = MOVED.iter().map(|m| m.swap(0, Relaxed)).collect();
        println!(
            "| {:.1} | {} | {:?} |",
            took.as_secs_f64() * 1e3,
            workers.join(" / "),
            moved
        );
    }
}
