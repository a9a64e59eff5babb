//! Chains of durable sends on one node, killed with SIGKILL at random
//! moments. Pairs of processes play ping-pong: each hop is a durable send
//! the receiver steps on before the sender's record is durable (an early
//! send), so most of a chain's records share syncs. After every kill the
//! child recovers and goes on; at the end, read from the store: every
//! pong took exactly 1, 2, ..., `HOPS` from its ping (none lost, none
//! twice, in order), every ping ended with `HOPS`, and every send any
//! journal took is one its sender's journal released (a receiver's record
//! was never durable without the sender's).

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sched_durable::prelude::*;
use sched_durable::store::{Journal, Store};
use sched_durable::{Record, RecordedEffect, RecordedInput, Spawned};

const ROLE: &str = "SCHED_DURABLE_CHAIN_CRASH_CHILD";
const PAIRS: u64 = 40;
const HOPS: u64 = 400;
const KILLS: u32 = 8;

/// Sends 1 to its pong; on each reply `k`, sends `k + 1`, or finishes at
/// `HOPS`. A reply out of turn fails it.
struct Ping {
    pong: String,
    last: u64,
}

impl Durable for Ping {
    const KIND: &'static str = "ping";
    type Args = String;
    type Message = u64;
    type Done = u64;
    fn create(pong: String) -> Self {
        Ping { pong, last: 0 }
    }
    fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        out.send(Key::<Pong>::new(self.pong.as_str()), 1)?;
        Ok(())
    }
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events.typed::<Self>() {
            if let Event::Message(message) = event {
                if message != self.last + 1 {
                    return Err(format!("reply {message} after {}", self.last).into());
                }
                self.last = message;
                if message == HOPS {
                    out.finish(message);
                } else {
                    out.send(Key::<Pong>::new(self.pong.as_str()), message + 1)?;
                }
            }
        }
        Ok(())
    }
}

/// Replies to each number, which must be the next one; finishes at
/// `HOPS`.
struct Pong {
    last: u64,
}

impl Durable for Pong {
    const KIND: &'static str = "pong";
    type Args = ();
    type Message = u64;
    type Done = u64;
    fn create(_: ()) -> Self {
        Pong { last: 0 }
    }
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        let Some(from) = events.sender().map(str::to_owned) else {
            return Ok(());
        };
        for event in events.typed::<Self>() {
            if let Event::Message(message) = event {
                if message != self.last + 1 {
                    return Err(format!("{message} after {}", self.last).into());
                }
                self.last = message;
                out.send(Key::<Ping>::new(from.as_str()), message)?;
                if message == HOPS {
                    out.finish(message);
                }
            }
        }
        Ok(())
    }
}

fn child(path: &str) {
    let durability = Durability::open(RedbStore::create(path).unwrap());
    durability.register::<Ping>().register::<Pong>();
    let scheduler = durability.install(Scheduler::builder().workers(2)).build();
    scheduler.start();
    let recovery = durability.recover(&scheduler).unwrap();
    assert!(recovery.failed.is_empty(), "{:?}", recovery.failed);
    let mut running = recovery.resumed;
    // Pings and pongs both finish with the last number they saw.
    let wait = |process: Spawned| match process.kind() {
        "ping" => process.of::<Ping>().and_then(Spawned::wait),
        _ => process.of::<Pong>().and_then(Spawned::wait),
    };
    for pair in 0..PAIRS {
        let pong = format!("pong-{pair}");
        if !durability.contains(&pong).unwrap() {
            running.push(
                durability
                    .spawn::<Pong>(&scheduler, &pong, ())
                    .unwrap()
                    .into_any(),
            );
        }
        let ping = format!("ping-{pair}");
        if !durability.contains(&ping).unwrap() {
            running.push(
                durability
                    .spawn::<Ping>(&scheduler, &ping, pong)
                    .unwrap()
                    .into_any(),
            );
        }
    }
    println!("running");
    for process in running {
        if let Err(e) = wait(process) {
            panic!("a process failed: {e}");
        }
    }
    println!("finished");
    scheduler.shutdown(Duration::from_secs(5));
    drop(durability);
    std::process::exit(0);
}

#[test]
fn chain_crash_child() {
    if let Ok(path) = std::env::var(ROLE) {
        child(&path);
    }
}

fn start(path: &std::path::Path) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "chain_crash_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ROLE, path.display().to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
}

/// The (sender, number) of every send `journal` took.
fn taken(journal: &Journal) -> Vec<(String, u64)> {
    journal
        .records
        .iter()
        .flat_map(|bytes| Record::decode(bytes).unwrap().inputs)
        .filter_map(|input| match input {
            RecordedInput::Message { from, .. } => from,
            _ => None,
        })
        .collect()
}

/// The (receiver, number) of every send `journal` released.
fn sent(journal: &Journal) -> Vec<(String, u64)> {
    journal
        .records
        .iter()
        .flat_map(|bytes| Record::decode(bytes).unwrap().effects)
        .filter_map(|effect| match effect {
            RecordedEffect::Send { to, seq, .. } => Some((to, seq)),
            _ => None,
        })
        .collect()
}

#[test]
fn chains_of_early_sends_killed_at_random_moments_take_each_send_once_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("chain.redb");
    // A small deterministic generator: the same kill moments every run.
    let mut state = 0x5eed_u64;
    let mut next = |low: u64, high: u64| {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        low + (state >> 33) % (high - low)
    };
    for kill in 0..KILLS {
        let mut child = start(&path);
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        if kill > 0 {
            // Mid-load: once it has recovered and runs (the first kill
            // comes in the first milliseconds, while the store is made).
            let running = lines
                .by_ref()
                .map_while(Result::ok)
                .any(|l| l.ends_with("running"));
            assert!(running, "the child did not run");
        }
        std::thread::sleep(Duration::from_millis(next(1, 100)));
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the child ended ({status}) before kill {kill}: make the load longer");
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
    }
    let mut last = start(&path);
    let deadline = Instant::now() + Duration::from_secs(600);
    let status = loop {
        if let Some(status) = last.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "the last run did not finish");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "the last run failed: {status}");

    let store = RedbStore::create(&path).unwrap();
    let journals: HashMap<String, Journal> = store
        .journals()
        .unwrap()
        .into_iter()
        .map(|j| (j.key.clone(), j))
        .collect();
    for pair in 0..PAIRS {
        let (ping, pong) = (format!("ping-{pair}"), format!("pong-{pair}"));
        let numbers = |journal: &Journal, from: &str| -> Vec<u64> {
            taken(journal)
                .into_iter()
                .map(|(sender, n)| {
                    assert_eq!(sender, from);
                    n
                })
                .collect()
        };
        let all: Vec<u64> = (1..=HOPS).collect();
        assert!(journals[&ping].ended && journals[&pong].ended);
        assert_eq!(numbers(&journals[&pong], &ping), all, "{pong} took");
        assert_eq!(numbers(&journals[&ping], &pong), all, "{ping} took");
        // What each took, its sender's journal released.
        assert_eq!(
            sent(&journals[&ping]),
            all.iter().map(|&n| (pong.clone(), n)).collect::<Vec<_>>()
        );
        assert_eq!(
            sent(&journals[&pong]),
            all.iter().map(|&n| (ping.clone(), n)).collect::<Vec<_>>()
        );
    }
    assert!(store.outbox().unwrap().is_empty(), "every send was taken");
}
