//! Stress: for `SCHED_STRESS_SECS` seconds (default 2), rounds of a few
//! hundred scripted processes (see `tests/script`) on 2 to 4 workers, with
//! some of them terminated at random moments. Checks the invariants of
//! `tests/scripts.rs` at volume: every process ends exactly once with what
//! its script implies (or `Terminated`, for one that was terminated),
//! sees each event at most once (exactly once unless terminated), never
//! runs on two workers at once; and live processes return to zero.

mod script;

use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use relay::Pid;
use sched_core::{Engine, ExitError, Spawn, TerminateError};
use script::*;

/// xorshift64*: the test needs cheap, reproducible randomness only.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn random_handler(rng: &mut Rng) -> Handler {
    match rng.below(4) {
        0 => Handler::Sync,
        1 => Handler::Async,
        2 => Handler::Reject,
        _ => Handler::Drop,
    }
}

fn random_op(rng: &mut Rng) -> Op {
    match rng.below(16) {
        0..=3 => Op::Continue,
        4..=9 => Op::Yield(random_handler(rng)),
        10..=12 => Op::Idle(1 + rng.below(3) as u8),
        13 => Op::Done,
        14 => Op::Fail,
        _ => Op::Panic,
    }
}

fn random_script(rng: &mut Rng) -> Vec<Op> {
    let len = rng.below(12);
    (0..len).map(|_| random_op(rng)).collect()
}

/// One round: `count` processes on `workers` workers, every `kill_every`th
/// one terminated right after it is submitted or half-way through.
fn round(rng: &mut Rng, first_id: u64, count: u64, workers: usize) -> Result<(), String> {
    let (builder, pool) = builder(workers, 2);
    let engine: Engine = builder.build();
    engine.start();
    let (ask, asks) = mpsc::channel();
    let scripts: Vec<Vec<Op>> = (0..count).map(|_| random_script(rng)).collect();
    let doomed: Vec<bool> = (0..count).map(|_| rng.below(10) == 0).collect();
    let result = std::thread::scope(|s| {
        let sender = s.spawn(|| serve_messages(&engine, asks));
        let mut handles = Vec::new();
        for (i, ops) in scripts.iter().enumerate() {
            let id = first_id + i as u64;
            let observed = Arc::new(Observed::default());
            let process = Scripted::new(id, ops, observed.clone(), ask.clone());
            let handle = engine
                .context()
                .spawn(Spawn::new(process).method("run").at(Pid::local(id)))
                .map_err(|e| e.to_string())?;
            handles.push((id, ops, handle, observed));
            // Terminate some earlier process while the later ones start.
            let victim = i / 2;
            if doomed[victim] && i % 2 == 1 {
                match engine
                    .context()
                    .terminate(Pid::local(first_id + victim as u64))
                {
                    Ok(()) | Err(TerminateError::NotFound(_)) => {}
                    Err(e) => return Err(e.to_string()),
                }
            }
        }
        drop(ask);
        let mut failures = Vec::new();
        for (i, (id, ops, mut handle, observed)) in handles.into_iter().enumerate() {
            let outcome = match handle.wait_timeout(PATIENCE) {
                Err(ExitError::TimedOut) => {
                    failures.push(format!("process {id} {ops:?} never ended"));
                    continue;
                }
                outcome => outcome,
            };
            if let Err(e) = check(id, ops, outcome, &observed, doomed[i]) {
                failures.push(e);
            }
        }
        // Messages to a terminated process may be refused; every other
        // ask is served (a process that asked waits for all of them).
        let (sent, _refused) = sender.join().expect("the sender does not panic");
        let wanted: u64 = scripts
            .iter()
            .zip(&doomed)
            .filter(|(_, &doomed)| !doomed)
            .map(|(s, _)| expected(s).1.messages)
            .sum();
        if sent < wanted {
            failures.push(format!("sent {sent} messages, the survivors want {wanted}"));
        }
        let stats = engine.context().stats();
        if stats.live_processes != 0 || !engine.context().processes().is_empty() {
            failures.push(format!(
                "{} processes still live after all ended",
                stats.live_processes
            ));
        }
        if failures.is_empty() {
            Ok(())
        } else {
            Err(failures.join("\n"))
        }
    });
    shut_down(engine, pool, result)
}

#[test]
fn scripted_processes_under_load() {
    quiet_script_panics();
    let secs: u64 = std::env::var("SCHED_STRESS_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2);
    let deadline = Instant::now() + Duration::from_secs(secs);
    let mut rng = Rng(0x5EED_1234_ABCD_0001);
    let mut rounds = 0u64;
    let mut processes = 0u64;
    loop {
        let workers = 2 + (rounds % 3) as usize;
        let count = if cfg!(miri) { 10 } else { 300 };
        if let Err(e) = round(&mut rng, 1, count, workers) {
            panic!("round {rounds} ({workers} workers):\n{e}");
        }
        rounds += 1;
        processes += count;
        if Instant::now() >= deadline || cfg!(miri) {
            break;
        }
    }
    assert!(processes >= 300, "at least one full round ran");
}
