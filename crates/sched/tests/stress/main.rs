//! Stress run of the whole scheduler, through the `sched` facade.
//!
//! Round after round, for `SCHED_STRESS_SECS` seconds (default 3), a fresh
//! [`Scheduler`](sched::Scheduler) with 1 to 4 workers runs a few hundred
//! processes with random scripts (`script.rs`): they continue; yield
//! commands that complete synchronously, asynchronously from other threads,
//! with an error, by a rejection, by a dropped completer, by a panicking
//! handler, through no handler at all, or never (held until the process is
//! terminated); wait for messages that other processes' steps (or a feeder
//! thread) send them; send stray messages to live, ended and unused PIDs;
//! spawn children from their steps; upgrade to a new instance of
//! themselves under the same PID (or to one whose `init` fails); fail;
//! panic; send delayed messages (`send(After(..))`, 0 to 5 ms) to peers that
//! may end before the deadline, often right before ending themselves, and
//! cancel some at once; unlink peers that may be ending, then send
//! themselves a marker that orders any later exit; remove monitors in the
//! middle of a batch of events. Some messages carry a payload whose
//! `Drop` panics: dead-lettered or cancelled, it goes off inside the
//! scheduler, which must lose no worker to it (`delayed.rs`, `message.rs`,
//! `mid_batch.rs`). A terminator thread ends some of them from outside at random
//! moments, some before they ever ran.
//!
//! Once a round's processes have all ended, the checker verifies (see
//! `check.rs` and `ledger.rs`) that every process reported exactly one
//! outcome, the one its script implies (or `Terminated`, when a terminate
//! was accepted), to its handle and to the `on_complete` hook alike; that
//! `init` and `close` ran once each per instance (and never `close` for an
//! instance whose `init` failed); that no process was stepped on two
//! workers at once (a per-process flag set while inside `step`); that every
//! message accepted by `send` or `send(After(..))` was received or
//! dead-lettered exactly once (a delayed one whose `cancel_timer` returned
//! true, neither), none refused at send was delivered, and delayed
//! messages from one sender with certainly non-decreasing deadlines
//! arrived in the order sent; that no exit came after an unlink's marker
//! (unless a link made since explains it) and no down after a demonitor; that every dispatched yield
//! completed exactly once (seen, dead-lettered, or stale after the end); and
//! that the scheduler's own counters agree and no process is left live.
//!
//! Between the random rounds, fault rounds (`faults.rs`) take one class of
//! adversarial use at a time: submissions racing shutdown (none lost, none
//! missing its cancel), processes that wake themselves every step (the
//! processes queued behind them still run), and payloads whose `Drop`
//! panics inside the scheduler (no worker dies).
//!
//! `SCHED_STRESS_SEED` replays a run's scripts (not its timing).
//! `cargo xtask stress [--seconds N]` runs this in release with `--nocapture`,
//! and `cargo xtask ci` runs it for 30 seconds.

mod accounts;
mod actions;
mod check;
mod delayed;
mod delayed_order;
mod faults;
mod feeder;
mod handlers;
mod hooks;
mod ledger;
mod message;
mod mid_batch;
mod notice_records;
mod notices;
#[cfg(test)]
mod notices_tests;
mod observed;
mod peers;
mod process;
mod rng;
mod round;
mod script;
mod shared;
mod tally;
mod terminator;
mod violations;

use std::time::{Duration, Instant, SystemTime};

use rng::Rng;
use tally::Tally;

/// How long a plain `cargo test` runs the stress test.
const DEFAULT_SECS: u64 = 3;
/// From this many rounds on, every kind of fault must have happened at
/// least once (the rarest, a held completer, comes about once a round).
const COVERAGE_ROUNDS: u64 = 40;

#[test]
fn random_scripts_on_the_whole_scheduler() {
    quiet_injected_panics();
    let secs = env_number("SCHED_STRESS_SECS").unwrap_or(DEFAULT_SECS);
    let seed = env_number("SCHED_STRESS_SEED").unwrap_or_else(|| {
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    });
    println!("stress: {secs} s of rounds, SCHED_STRESS_SEED={seed}");
    let started = Instant::now();
    let deadline = started + Duration::from_secs(secs);
    let mut seeds = Rng::new(seed);
    let mut tally = Tally::default();
    let mut number = 0;
    loop {
        let round_seed = seeds.next();
        if let Err(report) = round::run(number, round_seed, &mut tally) {
            panic!(
                "stress: round {number} failed (SCHED_STRESS_SEED={seed} replays its scripts):\n\
                 {report}"
            );
        }
        if let Err(report) = faults::run(number, round_seed) {
            panic!("stress: fault round {number} failed (SCHED_STRESS_SEED={seed}):\n{report}");
        }
        number += 1;
        // At least one round per worker count, however short the run.
        if Instant::now() >= deadline && number >= 4 {
            break;
        }
    }
    tally.print(started.elapsed());
    println!(
        "  fault rounds {number} (a third each: submissions racing shutdown, self-waking hogs, \
         panicking drops), each checked"
    );
    if tally.rounds < COVERAGE_ROUNDS {
        println!("stress: too few rounds to require every kind of fault");
        return;
    }
    let missing = tally.missing();
    assert!(
        missing.is_empty(),
        "stress: {} rounds never exercised: {} (a generator or handler bug?)",
        tally.rounds,
        missing.join(", ")
    );
}

/// A number from the environment, decimal or `0x` hexadecimal.
fn env_number(name: &str) -> Option<u64> {
    let text = std::env::var(name).ok()?;
    let text = text.trim();
    let parsed = match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => text.parse(),
    };
    Some(parsed.unwrap_or_else(|e| panic!("{name}={text:?} is not a number: {e}")))
}

/// Keeps the panics the run injects (in steps and handlers, caught by the
/// scheduler) off the output, thousands of them; any other panic is
/// reported as usual.
fn quiet_injected_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let payload = info.payload();
            let message = payload
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| payload.downcast_ref::<&str>().copied())
                .unwrap_or("");
            if !script::is_injected_panic(message) {
                default(info);
            }
        }));
    });
}
