//! What introspection costs with 100 000 live processes
//! (`cargo bench -p benches --bench introspect`): `processes()` (every live
//! process's `ProcessInfo`, sorted by PID) and `process_info(pid)` (one,
//! by a lookup in the process table). Two workers, every process idle
//! (waiting for a message), a tenth of them registered under a name.

use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use sched::prelude::*;

const PROCESSES: usize = 100_000;

/// Waits for a message, then finishes.
struct Idle;

impl Process for Idle {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        if events.next().is_some() {
            out.finish(());
        }
        Ok(())
    }
}

fn introspect(c: &mut Criterion) {
    let scheduler = Scheduler::builder()
        .workers(2)
        .max_processes(2 * PROCESSES)
        .build();
    scheduler.start();
    let pids: Vec<Pid> = (0..PROCESSES)
        .map(|i| {
            let pid = scheduler.spawn(Idle).expect("spawn").pid();
            if i % 10 == 0 {
                scheduler
                    .context()
                    .register_name(&format!("idle-{i}"), pid)
                    .expect("name");
            }
            pid
        })
        .collect();
    // Let every process take its first step and wait.
    while scheduler
        .stats()
        .workers
        .iter()
        .map(|w| w.steps)
        .sum::<u64>()
        < PROCESSES as u64
    {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(scheduler.processes().len(), PROCESSES);

    let mut group = c.benchmark_group("introspect-100k");
    group.sample_size(20);
    group.bench_function("processes", |b| b.iter(|| scheduler.processes().len()));
    let mut at = 0;
    group.bench_function("process_info", |b| {
        b.iter(|| {
            at = (at + 7_919) % PROCESSES;
            scheduler.context().process_info(pids[at]).is_some()
        })
    });
    group.finish();
    scheduler.shutdown(Duration::from_secs(10));
}

criterion_group!(benches, introspect);
criterion_main!(benches);
