//! Owner push/pop and steal throughput: ours against crossbeam-deque and st3.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;

use benches::{DEQUE_BATCHES, DEQUE_STEAL_ITEMS};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

fn owner_push_pop(c: &mut Criterion) {
    let mut group = c.benchmark_group("deque/owner_push_pop");
    for &n in &DEQUE_BATCHES {
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::new("ours", n), &n, |b, &n| {
            let w = deque::Worker::with_capacity(n);
            b.iter(|| {
                for i in 0..n {
                    w.push(black_box(i));
                }
                while let Some(i) = w.pop() {
                    black_box(i);
                }
            })
        });
        group.bench_with_input(BenchmarkId::new("crossbeam-deque", n), &n, |b, &n| {
            let w = crossbeam_deque::Worker::new_lifo();
            b.iter(|| {
                for i in 0..n {
                    w.push(black_box(i));
                }
                while let Some(i) = w.pop() {
                    black_box(i);
                }
            })
        });
        group.bench_with_input(BenchmarkId::new("st3", n), &n, |b, &n| {
            let w = st3::lifo::Worker::new(n);
            b.iter(|| {
                for i in 0..n {
                    w.push(black_box(i))
                        .expect("st3 capacity is the batch size");
                }
                while let Some(i) = w.pop() {
                    black_box(i);
                }
            })
        });
    }
    group.finish();
}

/// Runs `thief` on another thread until `stop` is set, while the calling
/// thread (the owner) does `owner`; returns what the owner returned.
fn with_thief<R>(
    thief: impl FnOnce(&AtomicBool) -> usize + Send + 'static,
    owner: impl FnOnce() -> R,
) -> (R, usize) {
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let handle = thread::spawn(move || thief(&stop2));
    let r = owner();
    stop.store(true, Ordering::Release);
    (r, handle.join().expect("thief thread panicked"))
}

/// The owner's side of the steal benchmarks: pushes `n` items in bursts of
/// 100, popping 10 after each burst, then pops what is left; returns how
/// many it popped.
fn owner_bursts(n: usize, mut push: impl FnMut(usize), mut pop: impl FnMut() -> bool) -> usize {
    let mut popped = 0;
    for burst in 0..n / 100 {
        for i in 0..100 {
            push(burst * 100 + i);
        }
        popped += (0..10).filter(|_| pop()).count();
    }
    while pop() {
        popped += 1;
    }
    popped
}

/// One owner pushes `DEQUE_STEAL_ITEMS` items in bursts and pops what is
/// left; one thief steals concurrently (one at a time, or half at a time
/// into its own deque). Every item is taken exactly once.
fn steal(c: &mut Criterion) {
    let n = DEQUE_STEAL_ITEMS;
    let mut group = c.benchmark_group("deque/steal");
    group.throughput(Throughput::Elements(n as u64));
    group.sample_size(20);

    for half in [false, true] {
        let mode = if half { "half" } else { "one" };
        group.bench_function(BenchmarkId::new("ours", mode), |b| {
            b.iter(|| {
                let w = deque::Worker::new();
                let s = w.stealer();
                let (popped, stolen) = with_thief(
                    move |stop| {
                        let mine = deque::Worker::new();
                        let mut got = 0;
                        while !stop.load(Ordering::Acquire) || !s.is_empty() {
                            let r = if half {
                                s.steal_half_into(&mine)
                            } else {
                                s.steal()
                            };
                            if let deque::Steal::Success(i) = r {
                                black_box(i);
                                got += 1;
                                while let Some(i) = mine.pop() {
                                    black_box(i);
                                    got += 1;
                                }
                            }
                        }
                        got
                    },
                    || owner_bursts(n, |i| w.push(i), || w.pop().is_some()),
                );
                assert_eq!(popped + stolen, n);
            })
        });
        group.bench_function(BenchmarkId::new("crossbeam-deque", mode), |b| {
            b.iter(|| {
                let w = crossbeam_deque::Worker::new_lifo();
                let s = w.stealer();
                let (popped, stolen) = with_thief(
                    move |stop| {
                        let mine = crossbeam_deque::Worker::new_lifo();
                        let mut got = 0;
                        while !stop.load(Ordering::Acquire) || !s.is_empty() {
                            let r = if half {
                                s.steal_batch_and_pop(&mine)
                            } else {
                                s.steal()
                            };
                            if let crossbeam_deque::Steal::Success(i) = r {
                                black_box(i);
                                got += 1;
                                while let Some(i) = mine.pop() {
                                    black_box(i);
                                    got += 1;
                                }
                            }
                        }
                        got
                    },
                    || owner_bursts(n, |i| w.push(i), || w.pop().is_some()),
                );
                assert_eq!(popped + stolen, n);
            })
        });
        group.bench_function(BenchmarkId::new("st3", mode), |b| {
            b.iter(|| {
                let w = st3::lifo::Worker::new(n);
                let s = w.stealer();
                let (popped, stolen) = with_thief(
                    move |stop| {
                        let mine = st3::lifo::Worker::new(n);
                        let mut got = 0;
                        loop {
                            let count = move |k: usize| if half { (k - k / 2).min(32) } else { 1 };
                            match s.steal_and_pop(&mine, count) {
                                Ok((i, _)) => {
                                    black_box(i);
                                    got += 1;
                                    while let Some(i) = mine.pop() {
                                        black_box(i);
                                        got += 1;
                                    }
                                }
                                Err(st3::StealError::Busy) => {}
                                Err(st3::StealError::Empty) => {
                                    if stop.load(Ordering::Acquire) {
                                        break;
                                    }
                                }
                            }
                        }
                        got
                    },
                    || {
                        owner_bursts(
                            n,
                            |i| w.push(i).expect("capacity is n"),
                            || w.pop().is_some(),
                        )
                    },
                );
                assert_eq!(popped + stolen, n);
            })
        });
    }
    group.finish();
}

criterion_group!(benches, owner_push_pop, steal);
criterion_main!(benches);
