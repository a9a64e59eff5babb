//! The scheduler against tokio's multi-thread runtime (and rayon for
//! skynet), each workload side by side in one run, 2 worker threads each.
//!
//! Ours is the engine (`sched_core::Engine`, which the `sched` facade
//! re-exports). The engine, the tokio runtime and the rayon pool are built
//! and started once per workload, outside the timed loop, so what is
//! measured is the steady state. Every iteration asserts its result.
//!
//! | workload | ours | tokio |
//! |---|---|---|
//! | spawn-many | 10 000 one-step processes submitted from outside | 10 000 tasks spawned from outside |
//! | yield-many | 200 processes x 1 000 `continue` steps | 200 tasks x 1 000 `yield_now` |
//! | ping-pong | 1 000 pairs x 100 round trips of `Output::send` by PID (`ours+resolved`: through a `Resolved` handle on the peer) | 1 000 pairs x 100 round trips over mpsc channels |
//! | chained-spawn | 1 000 processes, each `Output::spawn`s the next | 1 000 chained `tokio::spawn` |
//! | yield-fan-out | 1 000 processes x 10 yields, completed by another thread | 1 000 tasks x 10 oneshots completed by another thread |
//! | skynet | 1 000 000 leaves in a 10-ary tree, results as messages | `tokio::spawn` tree; rayon `join` |
//!
//! Completion of a batch is signalled by a [`Latch`] (an atomic countdown
//! and a condition variable) that both sides use the same way.

use std::hint::black_box;
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use relay::{Payload, Pid};
use sched_core::{
    BoxError, Command, CommandId, Completer, Engine, Event, Events, InitContext, InitError, Output,
    Process, Rejected, Spawn,
};

/// Worker threads on every side.
const WORKERS: usize = 2;

const SPAWN_MANY: usize = 10_000;
const YIELD_TASKS: usize = 200;
const YIELD_STEPS: usize = 1_000;
const PING_PONG_PAIRS: usize = 1_000;
const PING_PONG_ROUNDS: u32 = 100;
const CHAIN: usize = 1_000;
const FAN_OUT_TASKS: usize = 1_000;
const SKYNET_SIZE: u64 = 1_000_000;
const SKYNET_DIV: u64 = 10;
const SKYNET_SUM: u64 = 499_999_500_000;

#[path = "common/fan_out.rs"]
mod fan_out;
#[path = "common/latch.rs"]
mod latch;
use fan_out::{FanOut, REMOTE, YIELDS as FAN_OUT_YIELDS};
use latch::Latch;
#[path = "scheduler/player.rs"]
mod player;
use player::Player;
#[path = "scheduler/skynet.rs"]
mod skynet;
use skynet::skynet;
#[path = "scheduler/yield_fan_out.rs"]
mod yield_fan_out;
use yield_fan_out::yield_fan_out;

fn engine() -> Engine {
    let engine = Engine::builder().workers(WORKERS).build();
    engine.start();
    engine
}

/// The engine, with or without the histograms recording (their overhead
/// is the ratio of `ours+histograms` to `ours`).
fn engine_recording(histograms: bool) -> Engine {
    let engine = Engine::builder()
        .workers(WORKERS)
        .histograms(histograms)
        .build();
    engine.start();
    engine
}

fn engine_with(
    id: CommandId,
    handler: impl Fn(Command, Completer) -> Result<(), Rejected> + Send + Sync + 'static,
) -> Engine {
    let engine = Engine::builder()
        .workers(WORKERS)
        .handler(id, handler)
        .build();
    engine.start();
    engine
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKERS)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

fn shut(engine: Engine) {
    let report = engine.shutdown(Duration::from_secs(5));
    assert_eq!(report.forced, 0, "every process had ended");
}

fn pid(engine: &Engine) -> Pid {
    engine.context().allocate_pid().expect("pids left")
}

/// Spawns `process` at `pid`, stored inline in its record (one allocation
/// per process, as tokio stores a future in its task).
fn submit<P: Process<Done = Payload>>(engine: &Engine, pid: Pid, process: P) {
    engine
        .context()
        .spawn(Spawn::new(process).method("run").at(pid))
        .expect("submitted");
}

/// Sends `payload` from the stepping process to `to`.
fn send<T: std::any::Any + Send>(
    out: &mut Output<'_>,
    to: Pid,
    payload: T,
) -> Result<(), BoxError> {
    out.send(to, payload).map_err(|e| e.to_string().into())
}

/// `init` for processes that take no input.
fn init_run(method: &str) -> Result<(), InitError> {
    if method == "run" {
        Ok(())
    } else {
        Err(InitError::unknown_method(method))
    }
}

// ---------------------------------------------------------------- spawn-many

struct OneStep {
    latch: Arc<Latch>,
}

impl Process for OneStep {
    type Done = Payload;
    fn init(&mut self, _: &InitContext, method: &str, _: Payload) -> Result<(), InitError> {
        init_run(method)
    }
    fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        self.latch.count_down();
        out.finish(());
        Ok(())
    }
    fn close(&mut self) {}
}

fn spawn_many(c: &mut Criterion) {
    let mut group = c.benchmark_group("spawn-many");
    let engine = engine();
    group.bench_function("ours", |b| {
        b.iter(|| {
            let latch = Latch::new(SPAWN_MANY);
            for _ in 0..SPAWN_MANY {
                let process = OneStep {
                    latch: latch.clone(),
                };
                submit(&engine, pid(&engine), process);
            }
            latch.wait();
        })
    });
    shut(engine);

    let rt = runtime();
    group.bench_function("tokio", |b| {
        b.iter(|| {
            let latch = Latch::new(SPAWN_MANY);
            for _ in 0..SPAWN_MANY {
                let latch = latch.clone();
                rt.spawn(async move { latch.count_down() });
            }
            latch.wait();
        })
    });
    drop(rt);
    group.finish();
}

// ---------------------------------------------------------------- yield-many

struct Continuer {
    left: usize,
    latch: Arc<Latch>,
}

impl Process for Continuer {
    type Done = Payload;
    fn init(&mut self, _: &InitContext, method: &str, _: Payload) -> Result<(), InitError> {
        init_run(method)
    }
    fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        self.left -= 1;
        if self.left == 0 {
            self.latch.count_down();
            out.finish(());
        } else {
            out.continue_();
        }
        Ok(())
    }
    fn close(&mut self) {}
}

fn yield_many(c: &mut Criterion) {
    let mut group = c.benchmark_group("yield-many");
    for (name, histograms) in [("ours", false), ("ours+histograms", true)] {
        // One engine at a time: the other's idle workers stay out of it.
        let engine = engine_recording(histograms);
        group.bench_function(name, |b| {
            b.iter(|| {
                let latch = Latch::new(YIELD_TASKS);
                for _ in 0..YIELD_TASKS {
                    let process = Continuer {
                        left: YIELD_STEPS,
                        latch: latch.clone(),
                    };
                    submit(&engine, pid(&engine), process);
                }
                latch.wait();
            })
        });
        shut(engine);
    }

    let rt = runtime();
    group.bench_function("tokio", |b| {
        b.iter(|| {
            let latch = Latch::new(YIELD_TASKS);
            for _ in 0..YIELD_TASKS {
                let latch = latch.clone();
                rt.spawn(async move {
                    // The first poll is the first step, as for ours.
                    for _ in 1..YIELD_STEPS {
                        tokio::task::yield_now().await;
                    }
                    latch.count_down();
                });
            }
            latch.wait();
        })
    });
    drop(rt);
    group.finish();
}

// ----------------------------------------------------------------- ping-pong

fn ping_pong(c: &mut Criterion) {
    let mut group = c.benchmark_group("ping-pong");
    // `ours+resolved`: each player keeps a handle on its peer (`Resolved`),
    // as a tokio task keeps its channels, instead of sending by PID.
    for (name, histograms, resolving) in [
        ("ours", false, false),
        ("ours+histograms", true, false),
        ("ours+resolved", false, true),
    ] {
        // One engine at a time: the other's idle workers stay out of it.
        let engine = engine_recording(histograms);
        group.bench_function(name, |b| {
            b.iter(|| {
                let latch = Latch::new(2 * PING_PONG_PAIRS);
                for _ in 0..PING_PONG_PAIRS {
                    let (a, z) = (pid(&engine), pid(&engine));
                    let player = |peer, serves| {
                        let player = Player::new(peer, serves, PING_PONG_ROUNDS, latch.clone());
                        if resolving {
                            player.resolving()
                        } else {
                            player
                        }
                    };
                    // The ponger is registered before the pinger serves.
                    submit(&engine, z, player(a, false));
                    submit(&engine, a, player(z, true));
                }
                latch.wait();
            })
        });
        shut(engine);
    }

    let rt = runtime();
    group.bench_function("tokio", |b| {
        b.iter(|| {
            let latch = Latch::new(2 * PING_PONG_PAIRS);
            for _ in 0..PING_PONG_PAIRS {
                let (to_pong, mut pong_rx) = tokio::sync::mpsc::unbounded_channel::<u32>();
                let (to_ping, mut ping_rx) = tokio::sync::mpsc::unbounded_channel::<u32>();
                let l = latch.clone();
                rt.spawn(async move {
                    for _ in 0..PING_PONG_ROUNDS {
                        let n = pong_rx.recv().await.expect("a ball");
                        to_ping.send(n + 1).expect("pinger alive");
                    }
                    l.count_down();
                });
                let l = latch.clone();
                rt.spawn(async move {
                    to_pong.send(0).expect("ponger alive");
                    for round in 1..=PING_PONG_ROUNDS {
                        let n = ping_rx.recv().await.expect("a ball");
                        if round < PING_PONG_ROUNDS {
                            to_pong.send(n + 1).expect("ponger alive");
                        }
                    }
                    l.count_down();
                });
            }
            latch.wait();
        })
    });
    drop(rt);
    group.finish();
}

// ------------------------------------------------------------- chained-spawn

struct Link {
    left: usize,
    latch: Arc<Latch>,
}

impl Process for Link {
    type Done = Payload;
    fn init(&mut self, _: &InitContext, method: &str, _: Payload) -> Result<(), InitError> {
        init_run(method)
    }
    fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        if self.left == 1 {
            self.latch.count_down();
        } else {
            let next = Link {
                left: self.left - 1,
                latch: self.latch.clone(),
            };
            let pid = out.context().allocate_pid()?;
            out.spawn(Spawn::new(next).method("run").at(pid))?;
        }
        out.finish(());
        Ok(())
    }
    fn close(&mut self) {}
}

fn tokio_link(left: usize, latch: Arc<Latch>) {
    if left == 1 {
        latch.count_down();
    } else {
        tokio::spawn(async move { tokio_link(left - 1, latch) });
    }
}

fn chained_spawn(c: &mut Criterion) {
    let mut group = c.benchmark_group("chained-spawn");
    let engine = engine();
    group.bench_function("ours", |b| {
        b.iter(|| {
            let latch = Latch::new(1);
            let first = Link {
                left: CHAIN,
                latch: latch.clone(),
            };
            submit(&engine, pid(&engine), first);
            latch.wait();
        })
    });
    shut(engine);

    let rt = runtime();
    group.bench_function("tokio", |b| {
        b.iter(|| {
            let latch = Latch::new(1);
            let l = latch.clone();
            rt.spawn(async move { tokio_link(CHAIN, l) });
            latch.wait();
        })
    });
    drop(rt);
    group.finish();
}

criterion_group!(
    benches,
    spawn_many,
    yield_many,
    ping_pong,
    chained_spawn,
    yield_fan_out,
    skynet
);
criterion_main!(benches);
