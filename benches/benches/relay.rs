//! Route throughput of the relay crate's PID routing table: 2 threads
//! routing to random targets among 100 000 registered PIDs, against the same
//! workload on a `std::sync::RwLock<HashMap>`, plus a 1-thread baseline.
//!
//! The receiver is a per-PID atomic counter and the payload is `()` (a
//! zero-sized payload costs no allocation), so what is measured is the
//! table: hashing, shard locking, lookup and the route's `Arc` clone.
//! Throughput is reported in routes (elements) per second.

use std::collections::HashMap;
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier, RwLock};
use std::thread;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use relay::{Package, Pid, Receiver, Router, SendError};

/// Registered PIDs.
const PIDS: u64 = 100_000;

/// A receiver that only counts what it accepts.
#[derive(Default)]
struct Counter(AtomicU64);

impl Receiver for Counter {
    fn send(&self, package: Package) -> Result<(), SendError> {
        black_box(package);
        self.0.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

/// The next pseudo-random PID among the registered ones (xorshift64).
fn next_pid(state: &mut u64) -> Pid {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    Pid::local(*state % PIDS)
}

/// Runs `iters` routes on each of `threads` threads at once and returns the
/// wall time from the common start to the last thread's finish.
fn run_threads<F>(threads: u64, iters: u64, route: &F) -> Duration
where
    F: Fn(Package) + Sync,
{
    let start = Barrier::new(threads as usize + 1);
    thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|thread| {
                let start = &start;
                scope.spawn(move || {
                    let source = Pid::local(PIDS + thread);
                    let mut rng = 0x9E37_79B9_7F4A_7C15_u64
                        ^ (thread + 1).wrapping_mul(0xD1B5_4A32_D192_ED03);
                    start.wait();
                    for _ in 0..iters {
                        route(Package::new(source, next_pid(&mut rng), ()));
                    }
                })
            })
            .collect();
        start.wait();
        let began = Instant::now();
        for handle in handles {
            handle.join().expect("routing thread panicked");
        }
        began.elapsed()
    })
}

fn route(c: &mut Criterion) {
    let router: Router<Arc<Counter>> = Router::with_capacity(PIDS as usize);
    let mut peer: HashMap<Pid, Arc<Counter>> = HashMap::with_capacity(PIDS as usize);
    for id in 0..PIDS {
        let counter = Arc::new(Counter::default());
        router
            .register(Pid::local(id), Arc::clone(&counter))
            .expect("fresh PID");
        peer.insert(Pid::local(id), counter);
    }
    let peer = RwLock::new(peer);

    let ours = |package: Package| {
        router.route(package).expect("every target is registered");
    };
    let rwlock_hashmap = |package: Package| {
        // The same clone-then-deliver protocol as `Router::route`.
        let route = peer
            .read()
            .expect("not poisoned")
            .get(&package.target())
            .cloned();
        route
            .expect("every target is registered")
            .send(package)
            .expect("counter accepts");
    };

    let mut group = c.benchmark_group("relay/route_100k_pids");
    for threads in [1_u64, 2] {
        // One iteration routes one package on each thread.
        group.throughput(Throughput::Elements(threads));
        group.bench_with_input(
            BenchmarkId::new("ours", threads),
            &threads,
            |b, &threads| b.iter_custom(|iters| run_threads(threads, iters, &ours)),
        );
        group.bench_with_input(
            BenchmarkId::new("rwlock-hashmap", threads),
            &threads,
            |b, &threads| b.iter_custom(|iters| run_threads(threads, iters, &rwlock_hashmap)),
        );
    }
    group.finish();
}

criterion_group!(benches, route);
criterion_main!(benches);
