//! The scheduler suite's ping-pong (1 000 pairs, 100 round trips each, on
//! 2 workers), repeated in one engine and reported as percentiles of the
//! per-iteration times: for comparing two builds on a shared machine.
//!
//! This machine switches between a fast and a slow mode for seconds at a
//! time (the same binary's ping-pong takes 15 or 28 ms a run), which a
//! criterion mean over two seconds cannot tell from a change. The 10th
//! and 25th percentiles over 60 iterations stay in the fast mode unless
//! the whole run fell in the slow one; run the builds alternately, several
//! times each.
//!
//! ```text
//! cargo build --release -p benches --example ping_pong_probe
//! ITERS=60 target/release/examples/ping_pong_probe
//! ```

use std::time::{Duration, Instant};

use sched_core::{Engine, Spawn};

#[path = "../benches/common/latch.rs"]
mod latch;
use latch::Latch;
#[path = "../benches/scheduler/player.rs"]
mod player;
use player::Player;

const PAIRS: usize = 1_000;
const ROUNDS: u32 = 100;

/// One iteration: every pair spawned from outside, then waited for.
fn iteration(engine: &Engine) -> Duration {
    let latch = Latch::new(2 * PAIRS);
    let started = Instant::now();
    for _ in 0..PAIRS {
        let cx = engine.context();
        let (a, z) = (
            cx.allocate_pid().expect("pids left"),
            cx.allocate_pid().expect("pids left"),
        );
        let player = |peer, serves| Player::new(peer, serves, ROUNDS, latch.clone());
        cx.spawn(Spawn::new(player(a, false)).method("run").at(z))
            .expect("submitted");
        cx.spawn(Spawn::new(player(z, true)).method("run").at(a))
            .expect("submitted");
    }
    latch.wait();
    started.elapsed()
}

fn main() {
    let iterations: usize = std::env::var("ITERS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60)
        .max(1);
    let engine = Engine::builder().workers(2).build();
    engine.start();
    let mut times: Vec<f64> = (0..iterations)
        .map(|_| iteration(&engine).as_secs_f64() * 1e3)
        .collect();
    times.sort_by(f64::total_cmp);
    let at = |fraction: f64| times[((times.len() - 1) as f64 * fraction) as usize];
    println!(
        "ping-pong, {PAIRS} pairs x {ROUNDS} round trips, {iterations} iterations: \
         p10 {:.2} ms, p25 {:.2} ms, median {:.2} ms",
        at(0.10),
        at(0.25),
        at(0.50)
    );
    let report = engine.shutdown(Duration::from_secs(5));
    assert_eq!(report.forced, 0, "every pair had ended");
}
