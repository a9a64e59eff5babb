//! Sends between durable processes as a reliable, ordered channel: each
//! send a committed record released is taken exactly once, in its
//! sender's order, whichever path brings it first: live, from the outbox
//! when its receiver is spawned or recovered, or after a restart.

mod support;

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use sched::command::{CommandId, Completer, TypedCommand};
use sched_durable::prelude::*;
use support::*;

/// Keeps every number it is sent, in order; finishes with them when sent
/// 0 (or once it has `expect` of them). Each sender sends it increasing
/// numbers: one out of its sender's order fails the log.
#[derive(Default)]
struct Log {
    seen: Vec<u64>,
    /// Finish once this many numbers (0 = only on a 0).
    expect: u64,
    last: std::collections::HashMap<String, u64>,
}

impl Durable for Log {
    const KIND: &'static str = "log";
    type Args = u64;
    type Message = u64;
    type Done = Vec<u64>;

    fn create(expect: u64) -> Self {
        Log {
            expect,
            ..Log::default()
        }
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        let from = events.sender().map(str::to_owned);
        for event in events.typed::<Self>() {
            if let Event::Message(message) = event {
                if message == 0 {
                    out.finish(&self.seen);
                    return Ok(());
                }
                if let Some(from) = &from {
                    let last = self.last.entry(from.clone()).or_insert(0);
                    if message <= *last {
                        return Err(format!("{message} from {from} after {last}").into());
                    }
                    *last = message;
                }
                self.seen.push(message);
                if self.expect > 0 && self.seen.len() as u64 == self.expect {
                    out.finish(&self.seen);
                }
            }
        }
        Ok(())
    }
}

/// Sends every number it is told to the log its arguments name.
struct Relay {
    to: String,
}

impl Durable for Relay {
    const KIND: &'static str = "relay";
    type Args = String;
    type Message = u64;
    type Done = ();

    fn create(to: String) -> Self {
        Relay { to }
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events.typed::<Self>() {
            if let Event::Message(message) = event {
                out.send(Key::<Log>::new(self.to.as_str()), message)?;
                if message == 0 {
                    out.finish(());
                }
            }
        }
        Ok(())
    }
}

fn open(path: &std::path::Path) -> (Durability, Scheduler) {
    let durability = Durability::open(RedbStore::create(path).unwrap());
    durability.register::<Log>().register::<Relay>();
    let scheduler = scheduler(&durability, Arc::default());
    (durability, scheduler)
}

fn until(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn a_send_made_before_its_receiver_runs_is_taken_first_once_it_is_spawned() {
    let dir = tempfile::tempdir().unwrap();
    let (durability, scheduler) = open(&dir.path().join("j.redb"));
    durability.recover(&scheduler).unwrap();
    let _relay = durability
        .spawn::<Relay>(&scheduler, "relay", "log".into())
        .unwrap();
    durability
        .send::<Relay>(&scheduler, "relay", &1)
        .unwrap()
        .wait_timeout(WAIT)
        .unwrap();
    // The relay's send of 1 finds no log running: the outbox keeps it.
    until("the first send to be released", || {
        durability.stats().undelivered == 1
    });
    let mut log = durability.spawn::<Log>(&scheduler, "log", 0).unwrap();
    // The next sends reach the log live; the first one still comes first.
    for n in [2, 3, 0] {
        durability
            .send::<Relay>(&scheduler, "relay", &n)
            .unwrap()
            .wait_timeout(WAIT)
            .unwrap();
    }
    assert_eq!(log.wait_timeout(WAIT).unwrap(), vec![1, 2, 3]);
    assert_eq!(durability.stats().held, 0);
    scheduler.shutdown(Duration::from_secs(5));
}

/// Holds every command of its id until the test lets it go.
const PARK: TypedCommand<u64, u64> = TypedCommand::new(CommandId(40));

/// Yields `PARK` at its start; when it comes back (interrupted by a
/// restart, or answered), sends its number to the log and finishes.
struct Waiter {
    n: u64,
}

impl Durable for Waiter {
    const KIND: &'static str = "waiter";
    type Args = u64;
    type Message = ();
    type Done = ();

    fn create(n: u64) -> Self {
        Waiter { n }
    }

    fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        out.command(PARK, Tag(1), self.n)?;
        Ok(())
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events.typed::<Self>() {
            if let Event::Completion { .. } = event {
                out.send(Key::<Log>::new("zz-log"), self.n)?;
                out.finish(());
            }
        }
        Ok(())
    }
}

fn waiter_node(
    path: &std::path::Path,
    parked: Arc<Mutex<Vec<Completer>>>,
) -> (Durability, Scheduler) {
    let durability = Durability::open(RedbStore::create(path).unwrap());
    durability.register::<Log>().register::<Waiter>();
    let builder = Scheduler::builder().workers(2).handler(
        PARK.id(),
        move |_: sched::command::Command, done: Completer| {
            parked.lock().push(done);
            Ok(())
        },
    );
    let scheduler = durability.install(builder).build();
    scheduler.start();
    (durability, scheduler)
}

/// A recovery resumes processes one after the other; a resumed process
/// that sends at once may find its receiver not yet running. That send
/// is kept, and delivered by the same recovery, not a later one.
#[test]
fn sends_between_processes_resumed_by_one_recovery_arrive_without_another() {
    const WAITERS: u64 = 300;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.redb");
    {
        let parked = Arc::new(Mutex::new(Vec::new()));
        let (durability, scheduler) = waiter_node(&path, parked.clone());
        // The log sorts after every waiter: a recovery resumes it last.
        let log = durability
            .spawn::<Log>(&scheduler, "zz-log", WAITERS)
            .unwrap();
        log.durable().wait_timeout(WAIT).unwrap();
        for n in 1..=WAITERS {
            durability
                .spawn::<Waiter>(&scheduler, &format!("waiter-{n:04}"), n)
                .unwrap();
        }
        until("every command to be parked", || {
            parked.lock().len() as u64 == WAITERS
        });
        scheduler.shutdown(Duration::from_secs(5));
        drop(scheduler);
        drop(durability);
        parked.lock().clear();
    }
    let (durability, scheduler) = waiter_node(&path, Arc::default());
    let mut recovery = durability.recover(&scheduler).unwrap();
    assert!(recovery.failed.is_empty(), "{:?}", recovery.failed);
    assert_eq!(recovery.interrupted, WAITERS);
    let log = recovery
        .resumed
        .iter()
        .position(|s| s.key() == "zz-log")
        .expect("the log was resumed");
    let mut seen = recovery
        .resumed
        .remove(log)
        .of::<Log>()
        .unwrap()
        .wait_timeout(WAIT)
        .expect("every waiter's send reached the log in this recovery");
    seen.sort_unstable();
    assert_eq!(seen, (1..=WAITERS).collect::<Vec<_>>());
    scheduler.shutdown(Duration::from_secs(5));
}

#[test]
fn a_process_that_could_not_be_resumed_keeps_the_sends_made_to_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.redb");
    {
        let (durability, scheduler) = open(&path);
        let log = durability.spawn::<Log>(&scheduler, "log", 0).unwrap();
        log.durable().wait_timeout(WAIT).unwrap();
        scheduler.shutdown(Duration::from_secs(5));
    }
    // The log's type is missing on this start (its code is being fixed):
    // the relay's sends to it must wait, not vanish.
    {
        let durability = Durability::open(RedbStore::create(&path).unwrap());
        durability.register::<Relay>();
        let scheduler = scheduler(&durability, Arc::default());
        let recovery = durability.recover(&scheduler).unwrap();
        assert_eq!(recovery.failed.len(), 1, "the log is reported");
        let mut relay = durability
            .spawn::<Relay>(&scheduler, "relay", "log".into())
            .unwrap();
        for n in [5, 6, 0] {
            durability
                .send::<Relay>(&scheduler, "relay", &n)
                .unwrap()
                .wait_timeout(WAIT)
                .unwrap();
        }
        relay.wait_timeout(WAIT).unwrap();
        scheduler.shutdown(Duration::from_secs(5));
        drop(scheduler);
        // A second recovery without the type still keeps them.
        let scheduler = support::scheduler(&durability, Arc::default());
        let recovery = durability.recover(&scheduler).unwrap();
        assert_eq!(recovery.waiting, 3, "the sends wait for the log");
        scheduler.shutdown(Duration::from_secs(5));
    }
    // With the type back, the log resumes and takes them, in order.
    let (durability, scheduler) = open(&path);
    let mut recovery = durability.recover(&scheduler).unwrap();
    assert!(recovery.failed.is_empty(), "{:?}", recovery.failed);
    assert_eq!(recovery.resent, 3);
    assert_eq!(
        recovery
            .resumed
            .remove(0)
            .of::<Log>()
            .unwrap()
            .wait_timeout(WAIT)
            .unwrap(),
        vec![5, 6]
    );
    scheduler.shutdown(Duration::from_secs(5));
}

#[test]
fn a_key_forgotten_and_spawned_again_takes_the_sends_made_to_it_afterwards() {
    let dir = tempfile::tempdir().unwrap();
    let (durability, scheduler) = open(&dir.path().join("j.redb"));
    let _relay = durability
        .spawn::<Relay>(&scheduler, "relay", "log".into())
        .unwrap();
    let mut first = durability.spawn::<Log>(&scheduler, "log", 2).unwrap();
    for n in [1, 2] {
        durability
            .send::<Relay>(&scheduler, "relay", &n)
            .unwrap()
            .wait_timeout(WAIT)
            .unwrap();
    }
    assert_eq!(first.wait_timeout(WAIT).unwrap(), vec![1, 2]);
    until("the first log to be gone", || {
        durability.pid("log").is_none()
    });
    // Sent to the ended log: never taken, and dropped when it is
    // forgotten.
    durability
        .send::<Relay>(&scheduler, "relay", &3)
        .unwrap()
        .wait_timeout(WAIT)
        .unwrap();
    until("the send to the ended log", || {
        durability.stats().undelivered == 1
    });
    assert!(durability.forget("log").unwrap());
    // Sent while the key has no journal: kept for the next log.
    durability
        .send::<Relay>(&scheduler, "relay", &4)
        .unwrap()
        .wait_timeout(WAIT)
        .unwrap();
    until("the send to no log", || durability.stats().undelivered == 2);
    let mut second = durability.spawn::<Log>(&scheduler, "log", 0).unwrap();
    for n in [5, 0] {
        durability
            .send::<Relay>(&scheduler, "relay", &n)
            .unwrap()
            .wait_timeout(WAIT)
            .unwrap();
    }
    // The relay's numbering to "log" went on (4, 5, 6 after 1, 2, 3): the
    // new log starts its channel at the first send it can find.
    assert_eq!(second.wait_timeout(WAIT).unwrap(), vec![4, 5]);
    scheduler.shutdown(Duration::from_secs(5));
}

#[test]
fn many_senders_racing_one_receivers_spawn_lose_and_repeat_nothing() {
    const RELAYS: u64 = 40;
    const ROUNDS: u64 = 25;
    let dir = tempfile::tempdir().unwrap();
    let (durability, scheduler) = open(&dir.path().join("j.redb"));
    let relays: Vec<String> = (0..RELAYS).map(|i| format!("relay-{i}")).collect();
    for key in &relays {
        durability
            .spawn::<Relay>(&scheduler, key, "log".into())
            .unwrap();
    }
    let told = Arc::new(AtomicU64::new(0));
    let teller = {
        let counter = told.clone();
        let relays = relays.clone();
        let cx = scheduler.context();
        let durability = &durability;
        std::thread::scope(|s| {
            let handle = s.spawn(move || {
                let told = counter;
                for round in 1..=ROUNDS {
                    for key in &relays {
                        durability.send::<Relay>(&cx, key, &round).unwrap();
                        told.fetch_add(1, Relaxed);
                    }
                }
            });
            // The log is spawned while the relays are sending.
            until("some sends", || told.load(Relaxed) > RELAYS * 3);
            let log = durability
                .spawn::<Log>(&scheduler, "log", RELAYS * ROUNDS)
                .unwrap();
            handle.join().unwrap();
            log
        })
    };
    let mut teller = teller;
    let seen = teller.wait_timeout(WAIT).unwrap();
    assert_eq!(seen.len() as u64, RELAYS * ROUNDS);
    let mut counts = vec![0u64; ROUNDS as usize + 1];
    for n in seen {
        counts[n as usize] += 1;
    }
    assert!(
        counts[1..].iter().all(|&c| c == RELAYS),
        "every relay's every round once: {counts:?}"
    );
    assert_eq!(durability.stats().held, 0);
    scheduler.shutdown(Duration::from_secs(5));
}

/// Sends 1 and 2 to the log at its start, then yields `PARK`; when that
/// comes back, sends 3 and finishes.
struct Burst;

impl Durable for Burst {
    const KIND: &'static str = "burst";
    type Args = ();
    type Message = ();
    type Done = ();

    fn create((): ()) -> Self {
        Burst
    }

    fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        out.send(Key::<Log>::new("log"), 1)?;
        out.send(Key::<Log>::new("log"), 2)?;
        out.command(PARK, Tag(1), 0)?;
        Ok(())
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events.typed::<Self>() {
            if let Event::Completion { .. } = event {
                out.send(Key::<Log>::new("log"), 3)?;
                out.finish(());
            }
        }
        Ok(())
    }
}

fn gated_node(
    path: &std::path::Path,
    parked: Arc<Mutex<Vec<Completer>>>,
) -> (Durability, Scheduler, Arc<Gate>) {
    let (store, gate) = Gated::new(path);
    let durability = Durability::open(store);
    durability.register::<Log>().register::<Burst>();
    let builder = Scheduler::builder().workers(2).handler(
        PARK.id(),
        move |_: sched::command::Command, done: Completer| {
            parked.lock().push(done);
            Ok(())
        },
    );
    let scheduler = durability.install(builder).build();
    scheduler.start();
    (durability, scheduler, gate)
}

/// A resumed sender's new send reaches its receiver live before the
/// copies of its earlier sends come from the outbox: the receiver holds it
/// until they do, and takes all three in order.
#[test]
fn a_resumed_senders_new_send_that_overtakes_its_copies_waits_for_them() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.redb");
    {
        let parked = Arc::new(Mutex::new(Vec::new()));
        let (durability, scheduler, gate) = gated_node(&path, parked.clone());
        let log = durability.spawn::<Log>(&scheduler, "log", 3).unwrap();
        log.durable().wait_timeout(WAIT).unwrap();
        // The log takes 1 and 2, but none of its records after this point
        // reaches the disk: only the sender's outbox keeps them.
        gate.hold_key("log");
        durability.spawn::<Burst>(&scheduler, "sender", ()).unwrap();
        until("the sender's command", || parked.lock().len() == 1);
        scheduler.shutdown(Duration::from_secs(5));
        drop(scheduler);
        drop(durability);
        parked.lock().clear();
    }
    let (durability, scheduler, gate) = gated_node(&path, Arc::default());
    gate.close_outbox();
    let appended_before = gate.appended.lock().len();
    std::thread::scope(|s| {
        let recovering = s.spawn(|| durability.recover(&scheduler).unwrap());
        // The resumed sender is handed its command back interrupted and
        // sends 3, live, while the recovery has not read the outbox yet.
        until("the sender's record with its third send", || {
            gate.appended.lock()[appended_before..]
                .iter()
                .any(|key| key == "sender")
        });
        std::thread::sleep(Duration::from_millis(50));
        gate.open_outbox();
        let mut recovery = recovering.join().unwrap();
        assert!(recovery.failed.is_empty(), "{:?}", recovery.failed);
        let log = recovery
            .resumed
            .iter()
            .position(|s| s.key() == "log")
            .expect("the log resumed");
        assert_eq!(
            recovery
                .resumed
                .remove(log)
                .of::<Log>()
                .unwrap()
                .wait_timeout(WAIT)
                .expect("the log took all three"),
            vec![1, 2, 3]
        );
    });
    scheduler.shutdown(Duration::from_secs(5));
}
