//! Event queue: N producers into one consumer that drains in batches, ours
//! against crossbeam-queue's `SegQueue` and std's `mpsc` channel, in one run.
//!
//! Each measured iteration moves `ITEMS` items per producer; producers are
//! real threads and the consumer drains whatever is ready into a reused
//! buffer, spinning briefly and then yielding when it finds nothing (2 cores,
//! up to 3 threads).
//! `uncontended` is one thread pushing a step's worth (64) then draining.

use std::hint::black_box;
use std::sync::mpsc as std_mpsc;
use std::thread;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use crossbeam_queue::SegQueue;

const ITEMS: u64 = 1_000;

/// Runs `producers` threads that each call `push` for `n` items while the
/// current thread calls `drain` (which appends ready items to the buffer)
/// until all arrived; returns the elapsed time.
fn run<P, D>(producers: usize, n: u64, make_push: impl Fn() -> P, mut drain: D) -> Duration
where
    P: FnMut(u64) + Send,
    D: FnMut(&mut Vec<u64>),
{
    let total = producers as u64 * n;
    let mut buf = Vec::with_capacity(4096);
    let start = Instant::now();
    thread::scope(|s| {
        for _ in 0..producers {
            let mut push = make_push();
            s.spawn(move || (0..n).for_each(&mut push));
        }
        let mut seen = 0;
        let mut idle = 0u32;
        while seen < total {
            drain(&mut buf);
            if buf.is_empty() {
                // Found nothing: spin a little, then yield (the same policy
                // for every queue).
                if idle < 6 {
                    (0..1u32 << idle).for_each(|_| std::hint::spin_loop());
                    idle += 1;
                } else {
                    thread::yield_now();
                }
                continue;
            }
            idle = 0;
            seen += buf.len() as u64;
            black_box(&buf);
            buf.clear();
        }
    });
    start.elapsed()
}

fn contended(c: &mut Criterion) {
    for producers in [1usize, 2] {
        let mut group = c.benchmark_group(format!("mpsc/{producers}p"));
        group.throughput(Throughput::Elements(producers as u64 * ITEMS));
        group.bench_function(BenchmarkId::from_parameter("ours"), |b| {
            b.iter_custom(|iters| {
                let (tx, mut rx) = mpsc::queue::<u64>();
                run(
                    producers,
                    iters * ITEMS,
                    || {
                        let tx = tx.clone();
                        move |i| tx.push(i).unwrap()
                    },
                    |buf| {
                        rx.drain_into(buf);
                    },
                )
            })
        });
        group.bench_function(BenchmarkId::from_parameter("segqueue"), |b| {
            b.iter_custom(|iters| {
                let q = SegQueue::<u64>::new();
                let q = &q;
                run(
                    producers,
                    iters * ITEMS,
                    || move |i| q.push(i),
                    |buf| {
                        while let Some(v) = q.pop() {
                            buf.push(v);
                        }
                    },
                )
            })
        });
        group.bench_function(BenchmarkId::from_parameter("std_mpsc"), |b| {
            b.iter_custom(|iters| {
                let (tx, rx) = std_mpsc::channel::<u64>();
                run(
                    producers,
                    iters * ITEMS,
                    || {
                        let tx = tx.clone();
                        move |i| tx.send(i).unwrap()
                    },
                    |buf| buf.extend(rx.try_iter()),
                )
            })
        });
        group.finish();
    }
}

fn uncontended(c: &mut Criterion) {
    const STEP: u64 = 64;
    let mut group = c.benchmark_group("mpsc/uncontended");
    group.throughput(Throughput::Elements(STEP));
    let mut buf = Vec::with_capacity(STEP as usize);
    group.bench_function(BenchmarkId::from_parameter("ours"), |b| {
        let (tx, mut rx) = mpsc::queue::<u64>();
        b.iter(|| {
            (0..STEP).for_each(|i| tx.push(i).unwrap());
            buf.clear();
            rx.drain_into(&mut buf);
            black_box(&buf);
        })
    });
    group.bench_function(BenchmarkId::from_parameter("segqueue"), |b| {
        let q = SegQueue::<u64>::new();
        b.iter(|| {
            (0..STEP).for_each(|i| q.push(i));
            buf.clear();
            while let Some(v) = q.pop() {
                buf.push(v);
            }
            black_box(&buf);
        })
    });
    group.bench_function(BenchmarkId::from_parameter("std_mpsc"), |b| {
        let (tx, rx) = std_mpsc::channel::<u64>();
        b.iter(|| {
            (0..STEP).for_each(|i| tx.send(i).unwrap());
            buf.clear();
            buf.extend(rx.try_iter());
            black_box(&buf);
        })
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(30)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));
    targets = contended, uncontended
}
criterion_main!(benches);
