//! The crash test: a workflow load of durable processes in a child OS
//! process, killed with SIGKILL at random moments and started again on the
//! same store each time, until it finishes. Then, read from the store:
//! every workflow ended with the result an uninterrupted run gives, and
//! the counter every workflow sends to took each send exactly once.
//!
//! Each workflow runs `rounds` rounds of: a timer, a command (an echo that
//! answers after a millisecond), a send to the counter. A command
//! interrupted by a kill is issued again (the echo is idempotent). Beside
//! the load, code outside tells an inbox numbers one at a time and prints
//! those whose receipt said `Ok`: every one of them must be in the
//! inbox's journal at the end (nothing acknowledged is lost).
//!
//! Both process types snapshot their state, so recoveries restore
//! snapshots and replay what follows. The always-run test is sized for CI
//! (400 workflows of 100 rounds, 12 kills); the ignored one is the full
//! load (10 000 workflows of 200 rounds, 100 kills):
//! `cargo test --release -p sched-durable --test crash -- --ignored`.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use sched::command::{CommandId, TypedCommand};
use sched_durable::prelude::*;
use sched_durable::store::Store;
use sched_durable::{Record, RecordedEffect, Spawned};

const ROLE: &str = "SCHED_DURABLE_CRASH_CHILD";

/// Answers its number after a millisecond.
const SLOW_ECHO: TypedCommand<u64, u64> = TypedCommand::new(CommandId(3));

/// Takes every workflow's sends (its round, from `w<number>`), marking
/// each (workflow, round) in a bitmap; finishes with how many distinct
/// sends it took and how many it took twice, once it has them all.
#[derive(serde::Serialize, serde::Deserialize)]
struct Counter {
    rounds: u64,
    expected: u64,
    distinct: u64,
    twice: u64,
    seen: Vec<u64>,
}

impl Durable for Counter {
    const KIND: &'static str = "counter";
    type Args = (u64, u64);
    type Message = u64;
    type Done = (u64, u64);
    fn create((workflows, rounds): (u64, u64)) -> Self {
        let expected = workflows * rounds;
        Counter {
            rounds,
            expected,
            distinct: 0,
            twice: 0,
            seen: vec![0; expected.div_ceil(64) as usize],
        }
    }
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        let Some(from) = events.sender().map(str::to_owned) else {
            return Ok(());
        };
        for event in events.typed::<Self>() {
            if let Event::Message(round) = event {
                let number: u64 = from.trim_start_matches('w').parse()?;
                let bit = number * self.rounds + (round - 1);
                let (word, mask) = ((bit / 64) as usize, 1u64 << (bit % 64));
                if self.seen[word] & mask == 0 {
                    self.seen[word] |= mask;
                    self.distinct += 1;
                } else {
                    self.twice += 1;
                }
                if self.distinct == self.expected {
                    out.finish((self.distinct, self.twice));
                }
            }
        }
        Ok(())
    }
}

/// `rounds` rounds of timer, command, send; finishes with the sum of the
/// answers.
#[derive(serde::Serialize, serde::Deserialize)]
struct Workflow {
    number: u64,
    rounds: u64,
    round: u64,
    sum: u64,
}

impl Durable for Workflow {
    const KIND: &'static str = "workflow";
    type Args = (u64, u64);
    type Message = ();
    type Done = u64;

    fn create((number, rounds): (u64, u64)) -> Self {
        Workflow {
            number,
            rounds,
            round: 0,
            sum: 0,
        }
    }

    fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        self.wait(out);
        Ok(())
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events.typed::<Self>() {
            match event {
                Event::Timer { .. } => {
                    out.command(SLOW_ECHO, Tag(self.round + 1), self.round + 1)?;
                }
                Event::Completion { tag, result } => match result {
                    Ok(answer) => {
                        self.round += 1;
                        self.sum += answer.decode::<u64>()?;
                        out.send(Key::<Counter>::new("counter"), self.round)?;
                        if self.round == self.rounds {
                            out.finish(self.sum);
                        } else {
                            self.wait(out);
                        }
                    }
                    Err(Failure::Interrupted) => out.command(SLOW_ECHO, tag, tag.0)?,
                    Err(failure) => return Err(failure.into()),
                },
                _ => {}
            }
        }
        Ok(())
    }
}

impl Workflow {
    fn wait(&self, out: &mut Output<'_>) {
        out.set_timer(
            Duration::from_millis(20 + (self.number * 7 + self.round * 13) % 100),
            Tag(0),
        );
    }
}

/// Takes the numbers told from outside; never ends (the test reads its
/// journal).
struct Inbox;

impl Durable for Inbox {
    const KIND: &'static str = "inbox";
    type Args = ();
    type Message = u64;
    type Done = ();
    fn create(_: ()) -> Self {
        Inbox
    }
    fn step(&mut self, _: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
        Ok(())
    }
}

/// Both load types snapshot their state: a recovery replays at most the
/// records after the latest snapshot. The inbox keeps its whole journal.
fn register(durability: &Durability) {
    durability
        .register_with_snapshots::<Counter>(256)
        .register_with_snapshots::<Workflow>(16)
        .register::<Inbox>();
}

/// The child: resume what the store holds, start what it lacks, run until
/// every workflow ended, say so, and exit.
fn child(path: &str, workflows: u64, rounds: u64) {
    let durability = Durability::open(RedbStore::create(path).unwrap());
    register(&durability);
    let builder = Scheduler::builder()
        .workers(2)
        .handler(SLOW_ECHO, |n: u64, done| {
            let _ = done.complete_after(Duration::from_millis(1), n);
            Ok(())
        });
    let scheduler = durability.install(builder).build();
    scheduler.start();
    let recovery = durability.recover(&scheduler).unwrap();
    assert!(recovery.failed.is_empty(), "{:?}", recovery.failed);
    println!(
        "recovered {} in {:?}",
        recovery.resumed.len(),
        recovery.took
    );
    // The inbox never ends: nothing waits for it.
    let (counter, running): (Vec<Spawned>, Vec<Spawned>) = recovery
        .resumed
        .into_iter()
        .filter(|s| s.key() != "inbox")
        .partition(|s| s.key() == "counter");
    let mut counter: Vec<Spawned<(u64, u64)>> = counter
        .into_iter()
        .map(|s| s.of::<Counter>().unwrap())
        .collect();
    let mut running: Vec<Spawned<u64>> = running
        .into_iter()
        .map(|s| s.of::<Workflow>().unwrap())
        .collect();
    if !durability.contains("counter").unwrap() {
        let spawned = durability
            .spawn::<Counter>(&scheduler, "counter", (workflows, rounds))
            .unwrap();
        spawned
            .durable()
            .wait_timeout(Duration::from_secs(60))
            .unwrap();
        counter.push(spawned);
    }
    for number in 0..workflows {
        let key = format!("w{number}");
        if !durability.contains(&key).unwrap() {
            running.push(
                durability
                    .spawn::<Workflow>(&scheduler, &key, (number, rounds))
                    .unwrap(),
            );
        }
    }
    if !durability.contains("inbox").unwrap() {
        let inbox = durability.spawn::<Inbox>(&scheduler, "inbox", ()).unwrap();
        inbox
            .durable()
            .wait_timeout(Duration::from_secs(60))
            .unwrap();
    }
    println!("running");
    // Beside the load, code outside tells the inbox numbers unique to this
    // run, one at a time, and says which were acknowledged (durable).
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let run = u64::from(std::process::id()) * 1_000_000;
            for i in 1.. {
                if stop.load(std::sync::atomic::Ordering::Relaxed) {
                    break;
                }
                let n = run + i;
                let told = durability.send::<Inbox>(&scheduler, "inbox", &n);
                if told
                    .and_then(|r| r.wait_timeout(Duration::from_secs(10)))
                    .is_ok()
                {
                    println!("acked {n}");
                }
                std::thread::sleep(Duration::from_millis(2));
            }
        });
        /// Stops the teller however this thread leaves the scope (a
        /// failed wait panics, and the scope would wait for the teller).
        struct Stop<'a>(&'a std::sync::atomic::AtomicBool);
        impl Drop for Stop<'_> {
            fn drop(&mut self) {
                self.0.store(true, std::sync::atomic::Ordering::Relaxed);
            }
        }
        let _stop = Stop(&stop);
        for workflow in running {
            if let Err(e) = workflow.wait() {
                panic!("a workflow failed: {e}");
            }
        }
    });
    for counter in counter {
        assert_eq!(counter.wait().unwrap(), (workflows * rounds, 0));
    }
    println!("finished");
    scheduler.shutdown(Duration::from_secs(5));
    drop(durability);
    std::process::exit(0);
}

#[test]
fn crash_child() {
    if let Ok(args) = std::env::var(ROLE) {
        let mut parts = args.split(',');
        let path = parts.next().unwrap().to_owned();
        let workflows = parts.next().unwrap().parse().unwrap();
        let rounds = parts.next().unwrap().parse().unwrap();
        child(&path, workflows, rounds);
    }
}

struct Running {
    child: Child,
    lines: mpsc::Receiver<String>,
}

fn start(path: &std::path::Path, workflows: u64, rounds: u64) -> Running {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "crash_child", "--nocapture", "--test-threads=1"])
        .env(ROLE, format!("{},{workflows},{rounds}", path.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    Running { child, lines }
}

/// The number of an `acked <n>` line.
fn acked_number(line: &str) -> Option<u64> {
    line.strip_prefix("acked ")?.parse().ok()
}

/// A small deterministic generator (the kill moments of a run are the
/// same in every run of the test).
struct Moments(u64);

impl Moments {
    fn next_millis(&mut self, low: u64, high: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        low + (self.0 >> 33) % (high - low)
    }
}

/// Waits for the child to say `running` (it recovered and started what
/// it lacked); false if it did not within a minute.
fn wait_running(run: &Running) -> bool {
    let deadline = Instant::now() + Duration::from_secs(60);
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        match run.lines.recv_timeout(left) {
            Ok(line) if line == "running" => return true,
            Ok(_) => {}
            Err(_) => return false,
        }
    }
    false
}

/// Runs the load in a child killed `kills` times: one kill in four at a
/// random moment from its start (during recovery, often), the others at
/// a random moment up to `window` after it says it is running (in the
/// middle of the load); then a last run to the end, and the checks.
fn crash_run(workflows: u64, rounds: u64, kills: u32, window: u64) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("crash.redb");
    let mut moments = Moments(0x5eed);
    let mut killed = 0;
    let mut mid_load = 0;
    let mut acked: Vec<u64> = Vec::new();
    while killed < kills {
        let mut run = start(&path, workflows, rounds);
        if killed == 0 {
            // In the first milliseconds of the first start: the store is
            // being created.
            std::thread::sleep(Duration::from_millis(moments.next_millis(1, 10)));
        } else if killed % 4 == 0 {
            std::thread::sleep(Duration::from_millis(moments.next_millis(1, 300)));
        } else {
            assert!(wait_running(&run), "the child did not start running");
            std::thread::sleep(Duration::from_millis(moments.next_millis(1, window)));
            mid_load += 1;
        }
        if let Some(status) = run.child.try_wait().unwrap() {
            assert!(status.success(), "the child failed: {status}");
            panic!("the load finished after {killed} kills: make it longer");
        }
        run.child.kill().unwrap(); // SIGKILL
        run.child.wait().unwrap();
        // What it printed before the kill: the reader ends at the pipe's end.
        acked.extend(run.lines.iter().filter_map(|l| acked_number(&l)));
        killed += 1;
    }
    assert!(mid_load >= kills / 2);
    // The last run goes to the end.
    {
        let mut run = start(&path, workflows, rounds);
        let deadline = Instant::now() + Duration::from_secs(600);
        let status = loop {
            if let Some(status) = run.child.try_wait().unwrap() {
                break status;
            }
            assert!(Instant::now() < deadline, "the last run did not finish");
            std::thread::sleep(Duration::from_millis(20));
        };
        let said: Vec<String> = run.lines.iter().collect();
        acked.extend(said.iter().filter_map(|l| acked_number(l)));
        assert!(
            status.success(),
            "the last run failed: {status}; it said {said:?}"
        );
        assert!(said.iter().any(|l| l == "finished"), "{said:?}");
        let said: Vec<&String> = said.iter().filter(|l| acked_number(l).is_none()).collect();
        eprintln!("after {killed} kills, the last run said {said:?}");
    }

    let store = RedbStore::create(&path).unwrap();
    let journals: std::collections::HashMap<String, _> = store
        .journals()
        .unwrap()
        .into_iter()
        .map(|j| (j.key.clone(), j))
        .collect();
    let expected: u64 = (1..=rounds).sum();
    for number in 0..workflows {
        let journal = &journals[&format!("w{number}")];
        assert!(journal.ended, "w{number} did not end");
        let last = Record::decode(journal.records.last().unwrap()).unwrap();
        let outcome = last.effects.iter().find_map(|e| match e {
            RecordedEffect::Done(bytes) => Some(postcard::from_bytes::<u64>(bytes).unwrap()),
            _ => None,
        });
        assert_eq!(
            outcome,
            Some(expected),
            "w{number} ended with another result"
        );
    }
    // The counter took each send once: every (workflow, round) once, and
    // none twice (its bitmap, rebuilt by every recovery, says so).
    let counter = &journals["counter"];
    assert!(counter.ended);
    let last = Record::decode(counter.records.last().unwrap()).unwrap();
    let outcome = last.effects.iter().find_map(|e| match e {
        RecordedEffect::Done(bytes) => Some(postcard::from_bytes::<(u64, u64)>(bytes).unwrap()),
        _ => None,
    });
    assert_eq!(
        outcome,
        Some((workflows * rounds, 0)),
        "(distinct sends taken, sends taken twice)"
    );
    assert!(store.outbox().unwrap().is_empty(), "every send was taken");

    // Every number told from outside and acknowledged is in the inbox's
    // journal, whatever moment the kills came at.
    let inbox = &journals["inbox"];
    assert_eq!(inbox.first, 0, "the inbox keeps its whole journal");
    let mut taken = std::collections::HashSet::new();
    for bytes in &inbox.records {
        for input in Record::decode(bytes).unwrap().inputs {
            if let sched_durable::RecordedInput::Message { body, .. } = input {
                taken.insert(postcard::from_bytes::<u64>(&body).unwrap());
            }
        }
    }
    assert!(
        acked.len() > 100,
        "only {} numbers acknowledged",
        acked.len()
    );
    let lost: Vec<_> = acked.iter().filter(|n| !taken.contains(n)).collect();
    assert!(lost.is_empty(), "acknowledged and lost: {lost:?}");
}

#[test]
fn four_hundred_workflows_killed_twelve_times_end_as_an_uninterrupted_run_and_each_send_arrives_once(
) {
    crash_run(400, 100, 12, 300);
}

#[test]
#[ignore = "a minute or more; run with --release"]
fn two_thousand_workflows_killed_fifty_times() {
    crash_run(2_000, 200, 50, 150);
}

#[test]
#[ignore = "the full load: minutes; run with --release"]
fn ten_thousand_workflows_killed_a_hundred_times() {
    crash_run(10_000, 200, 100, 100);
}
