//! Durable processes in one OS process: write-ahead, failure of the
//! store, suspension and recovery, sends once across restarts, timers at
//! their absolute deadlines, interrupted commands, and non-determinism.

mod support;

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use sched::command::{CommandId, TypedCommand};
use sched_durable::prelude::*;
use sched_durable::store::conformance;
use sched_durable::{RecordedEffect, RecordedInput, Status};
use support::*;

#[test]
fn the_redb_store_passes_the_store_suite() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.redb");
    conformance::check(RedbStore::create(&path).unwrap(), || {
        RedbStore::create(&path).unwrap()
    });
}

#[test]
fn a_durable_process_runs_to_its_outcome_and_its_journal_says_what_it_did() {
    let dir = tempfile::tempdir().unwrap();
    let durability = Durability::open(RedbStore::create(dir.path().join("j.redb")).unwrap());
    durability.register::<Tally>();
    let scheduler = scheduler(&durability, Arc::default());
    assert_eq!(durability.recover(&scheduler).unwrap().resumed.len(), 0);

    let tally = durability.spawn::<Tally>(&scheduler, "t", ()).unwrap();
    tally.durable().wait_timeout(WAIT).unwrap();
    for n in 1..=4u64 {
        durability
            .send::<Tally>(&scheduler, "t", &n)
            .unwrap()
            .wait_timeout(WAIT)
            .unwrap();
    }
    durability.send::<Tally>(&scheduler, "t", &0).unwrap();
    assert_eq!(tally.wait().unwrap(), 10);
    assert_eq!(
        durability.pid("t"),
        None,
        "an ended process leaves the directory"
    );

    let journal = durability.inspect("t").unwrap().unwrap();
    assert!(journal.ended);
    assert_eq!(journal.kind, "tally");
    let inputs: Vec<_> = journal
        .records
        .iter()
        .flat_map(|r| r.inputs.clone())
        .collect();
    assert_eq!(
        inputs.len(),
        6,
        "the start, four numbers and the zero: {inputs:?}"
    );
    assert_eq!(inputs[0], RecordedInput::Start);
    let last = journal.records.last().unwrap();
    assert_eq!(
        last.effects,
        vec![RecordedEffect::Done(postcard::to_stdvec(&10u64).unwrap())]
    );

    // The key is taken until the journal is forgotten.
    assert!(matches!(
        durability.spawn::<Tally>(&scheduler, "t", ()),
        Err(DurableError::KeyTaken(_))
    ));
    assert!(durability.forget("t").unwrap());
    let again = durability.spawn::<Tally>(&scheduler, "t", ()).unwrap();
    again.durable().wait_timeout(WAIT).unwrap();
    let stats = durability.stats();
    assert!(stats.records >= 7 && stats.syncs >= 1 && stats.syncs <= stats.records);
    scheduler.shutdown(Duration::from_secs(5));
}

/// Yields an echo on its start, and finishes with the answer.
struct Asker;

impl Durable for Asker {
    const KIND: &'static str = "asker";
    type Args = ();
    type Message = ();
    type Done = u64;

    fn create(_: ()) -> Self {
        Asker
    }

    fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        out.command(ECHO, Tag(1), 41)?;
        Ok(())
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events.typed::<Self>() {
            if let Event::Completion { result, .. } = event {
                match result {
                    Ok(answer) => out.finish(answer.decode::<u64>()? + 1),
                    Err(Failure::Interrupted) => out.finish(u64::MAX),
                    Err(failure) => return Err(failure.into()),
                }
            }
        }
        Ok(())
    }
}

#[test]
fn no_effect_is_released_before_the_input_that_caused_it_is_durable() {
    let dir = tempfile::tempdir().unwrap();
    let (store, gate) = Gated::new(&dir.path().join("j.redb"));
    let durability = Durability::open(store);
    durability.register::<Asker>();
    let echoes = Arc::new(AtomicU64::new(0));
    let scheduler = scheduler(&durability, echoes.clone());

    gate.close();
    let asker = durability.spawn::<Asker>(&scheduler, "asker", ()).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        echoes.load(Relaxed),
        0,
        "the command left before its record was durable"
    );
    assert!(asker.durable().try_result().is_none());

    gate.open();
    asker.durable().wait_timeout(WAIT).unwrap();
    assert_eq!(asker.wait().unwrap(), 42);
    assert_eq!(echoes.load(Relaxed), 1);
    scheduler.shutdown(Duration::from_secs(5));
}

#[test]
fn a_write_the_store_refuses_releases_nothing_and_fails_the_process() {
    let dir = tempfile::tempdir().unwrap();
    let (store, gate) = Gated::new(&dir.path().join("j.redb"));
    let durability = Durability::open(store);
    durability.register::<Asker>();
    let echoes = Arc::new(AtomicU64::new(0));
    let scheduler = scheduler(&durability, echoes.clone());

    gate.fail(true);
    let asker = durability.spawn::<Asker>(&scheduler, "asker", ()).unwrap();
    let receipt = asker.durable().wait_timeout(WAIT);
    assert!(
        matches!(receipt, Err(DurableError::Store(ref e)) if e.contains("disk is full")),
        "{receipt:?}"
    );
    match asker.wait() {
        Err(DurableError::Failed(e)) => assert!(e.contains("disk is full"), "{e}"),
        other => panic!("expected a failure, got {other:?}"),
    }
    assert_eq!(echoes.load(Relaxed), 0);
    assert_eq!(durability.stats().failed_syncs, 1);
    scheduler.shutdown(Duration::from_secs(5));
}

/// Opens the store at `path` with every test type registered, and a
/// started scheduler.
fn node(path: &std::path::Path, echoes: Arc<AtomicU64>) -> (Durability, Scheduler) {
    let durability = Durability::open(RedbStore::create(path).unwrap());
    durability
        .register::<Tally>()
        .register::<Asker>()
        .register::<Sender>()
        .register::<Sleeper>()
        .register::<Clocked>()
        .register::<Stuck>();
    let scheduler = scheduler(&durability, echoes);
    (durability, scheduler)
}

/// Stops a node as a shutdown does, then drops its journal.
fn stop(durability: Durability, scheduler: Scheduler) {
    scheduler.shutdown(Duration::from_secs(5));
    drop(scheduler);
    drop(durability);
}

#[test]
fn a_suspended_process_resumes_where_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.redb");
    let (durability, scheduler) = node(&path, Arc::default());
    let tally = durability.spawn::<Tally>(&scheduler, "t", ()).unwrap();
    for n in [1u64, 2, 3] {
        durability
            .send::<Tally>(&scheduler, "t", &n)
            .unwrap()
            .wait_timeout(WAIT)
            .unwrap();
    }
    stop(durability, scheduler);
    assert!(matches!(tally.wait(), Err(DurableError::Suspended)));

    let (durability, scheduler) = node(&path, Arc::default());
    let mut recovery = durability.recover(&scheduler).unwrap();
    assert!(recovery.failed.is_empty(), "{:?}", recovery.failed);
    assert_eq!(recovery.resumed.len(), 1);
    durability
        .send::<Tally>(&scheduler, "t", &4)
        .unwrap()
        .wait_timeout(WAIT)
        .unwrap();
    durability.send::<Tally>(&scheduler, "t", &0).unwrap();
    assert_eq!(
        recovery
            .resumed
            .remove(0)
            .of::<Tally>()
            .unwrap()
            .wait()
            .unwrap(),
        10
    );
    stop(durability, scheduler);
}

/// Sends `count` ones to the tally `to`, one per step, each step woken by
/// an echo; then tells it 0 and finishes.
#[derive(serde::Serialize, serde::Deserialize)]
struct Sender {
    to: String,
    count: u64,
    sent: u64,
}

impl Sender {
    /// Sends the next one (and yields an echo to be woken), or the zero
    /// and finishes.
    fn next(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        let to = Key::<Tally>::new(self.to.clone());
        if self.sent == self.count {
            out.send(to, 0)?;
            out.finish(self.sent);
        } else {
            self.sent += 1;
            out.send(to, 1)?;
            out.command(ECHO, Tag(self.sent), self.sent)?;
        }
        Ok(())
    }
}

impl Durable for Sender {
    const KIND: &'static str = "sender";
    type Args = (String, u64);
    type Message = ();
    type Done = u64;

    fn create((to, count): (String, u64)) -> Self {
        Sender { to, count, sent: 0 }
    }

    fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        self.next(out)
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events.typed::<Self>() {
            if let Event::Completion { .. } = event {
                self.next(out)?;
            }
        }
        Ok(())
    }
}

#[test]
fn a_send_the_receiver_had_not_journaled_is_delivered_once_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.redb");
    // The receiver's records are lost from its start on (the node stops
    // before they reach the disk, as the gate pretends), the sender's are
    // durable: the sends are only in the sender's journal and the outbox.
    {
        let (store, gate) = Gated::new(&path);
        let durability = Durability::open(store);
        durability.register::<Tally>().register::<Sender>();
        let scheduler = scheduler(&durability, Arc::default());
        let tally = durability.spawn::<Tally>(&scheduler, "tally", ()).unwrap();
        tally.durable().wait_timeout(WAIT).unwrap();
        gate.hold_key("tally");
        let sender = durability
            .spawn::<Sender>(&scheduler, "sender", ("tally".into(), 50))
            .unwrap();
        assert_eq!(sender.wait().unwrap(), 50);
        // Nothing the tally took after the hold is durable: the node
        // stops with the sends only in the sender's journal.
        scheduler.shutdown(Duration::from_secs(5));
        let _ = tally.wait();
    }
    let (durability, scheduler) = node(&path, Arc::default());
    let mut recovery = durability.recover(&scheduler).unwrap();
    assert!(recovery.failed.is_empty(), "{:?}", recovery.failed);
    assert_eq!(recovery.resumed.len(), 1, "only the tally is left to run");
    assert_eq!(recovery.resent, 51, "50 ones and the zero");
    assert_eq!(
        recovery
            .resumed
            .remove(0)
            .of::<Tally>()
            .unwrap()
            .wait()
            .unwrap(),
        50
    );
    stop(durability, scheduler);

    // A third start finds nothing to resume, and nothing left to deliver.
    let (durability, scheduler) = node(&path, Arc::default());
    let recovery = durability.recover(&scheduler).unwrap();
    assert_eq!((recovery.resumed.len(), recovery.resent), (0, 0));
    stop(durability, scheduler);
}

/// Sets a timer for `millis` after its start, and finishes with the time
/// the timer fell due (ms since the epoch, as its step saw it).
struct Sleeper {
    millis: u64,
}

impl Durable for Sleeper {
    const KIND: &'static str = "sleeper";
    type Args = u64;
    type Message = ();
    type Done = u64;

    fn create(millis: u64) -> Self {
        Sleeper { millis }
    }

    fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        out.set_timer(Duration::from_millis(self.millis), Tag(1));
        Ok(())
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events.typed::<Self>() {
            if let Event::Timer { .. } = event {
                let at = out.now().duration_since(UNIX_EPOCH)?.as_millis() as u64;
                out.finish(at);
            }
        }
        Ok(())
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

#[test]
fn a_timer_falls_due_at_its_absolute_deadline_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.redb");
    let (durability, scheduler) = node(&path, Arc::default());
    let spawned_at = now_ms();
    let sleeper = durability.spawn::<Sleeper>(&scheduler, "s", 3_000).unwrap();
    sleeper.durable().wait_timeout(WAIT).unwrap();
    stop(durability, scheduler);
    std::thread::sleep(Duration::from_millis(1_500));

    let restarted = Instant::now();
    let (durability, scheduler) = node(&path, Arc::default());
    let mut recovery = durability.recover(&scheduler).unwrap();
    assert_eq!(recovery.timers, 1);
    let fell_due = recovery
        .resumed
        .remove(0)
        .of::<Sleeper>()
        .unwrap()
        .wait()
        .unwrap();
    let waited = restarted.elapsed();
    assert!(fell_due >= spawned_at + 3_000, "the timer fell due early");
    // Had the timer started over at the restart, it would have waited 3 s
    // from there; it waits what was left, about 1.5 s.
    assert!(
        waited < Duration::from_millis(2_900),
        "waited {waited:?} after the restart"
    );
    stop(durability, scheduler);
}

/// A command whose handler never answers.
const NEVER: TypedCommand<u64, u64> = TypedCommand::new(CommandId(2));

/// Yields a command that never completes; finishes with what became of it.
struct Stuck;

impl Durable for Stuck {
    const KIND: &'static str = "stuck";
    type Args = ();
    type Message = ();
    type Done = (u64, bool);

    fn create(_: ()) -> Self {
        Stuck
    }

    fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        out.command(NEVER, Tag(5), 1)?;
        Ok(())
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events.typed::<Self>() {
            if let Event::Completion { tag, result } = event {
                out.finish((tag.0, matches!(result, Err(Failure::Interrupted))));
            }
        }
        Ok(())
    }
}

#[test]
fn a_command_in_flight_when_the_node_stops_comes_back_interrupted() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.redb");
    let held = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let started = {
        let durability = Durability::open(RedbStore::create(&path).unwrap());
        durability.register::<Stuck>();
        let keep = held.clone();
        let builder = Scheduler::builder()
            .workers(2)
            .handler(NEVER, move |_: u64, done| {
                keep.lock().push(done);
                Ok(())
            });
        let scheduler = durability.install(builder).build();
        scheduler.start();
        let stuck = durability.spawn::<Stuck>(&scheduler, "stuck", ()).unwrap();
        stuck.durable().wait_timeout(WAIT).unwrap();
        let deadline = Instant::now() + WAIT;
        while held.lock().is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(held.lock().len(), 1, "the command was yielded");
        stop(durability, scheduler);
        true
    };
    assert!(started);
    let (durability, scheduler) = node(&path, Arc::default());
    let mut recovery = durability.recover(&scheduler).unwrap();
    assert_eq!(recovery.interrupted, 1);
    assert_eq!(
        recovery
            .resumed
            .remove(0)
            .of::<Stuck>()
            .unwrap()
            .wait()
            .unwrap(),
        (5, true)
    );
    stop(durability, scheduler);
    held.lock().clear();
}

/// Decides from the wall clock: before `switch_ms` it sets timer 1, after
/// it timer 2. A replay after `switch_ms` does something else.
struct Clocked {
    switch_ms: u64,
}

impl Durable for Clocked {
    const KIND: &'static str = "clocked";
    type Args = u64;
    type Message = ();
    type Done = ();

    fn create(switch_ms: u64) -> Self {
        Clocked { switch_ms }
    }

    fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        let tag = if now_ms() < self.switch_ms { 1 } else { 2 };
        out.set_timer(Duration::from_secs(3_600), Tag(tag));
        Ok(())
    }

    fn step(&mut self, _: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
        Ok(())
    }
}

#[test]
fn a_step_that_branches_on_the_wall_clock_is_reported_on_replay() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.redb");
    let switch_ms = now_ms() + 400;
    let (durability, scheduler) = node(&path, Arc::default());
    let clocked = durability
        .spawn::<Clocked>(&scheduler, "clocked", switch_ms)
        .unwrap();
    clocked.durable().wait_timeout(WAIT).unwrap();
    // The test needs the first step to have run before the switch.
    let journal = durability.inspect("clocked").unwrap().unwrap();
    let first = &journal.records[0];
    assert!(
        first.at_ms < switch_ms,
        "the machine took 400 ms to run one step"
    );
    stop(durability, scheduler);
    while now_ms() <= switch_ms {
        std::thread::sleep(Duration::from_millis(20));
    }

    let (durability, scheduler) = node(&path, Arc::default());
    let recovery = durability.recover(&scheduler).unwrap();
    assert!(recovery.resumed.is_empty());
    match &recovery.failed[..] {
        [DurableError::NonDeterminism {
            key,
            record,
            expected,
            found,
        }] => {
            assert_eq!((key.as_str(), *record), ("clocked", 0));
            assert!(expected.starts_with("timer 1"), "{expected}");
            assert!(found.starts_with("timer 2"), "{found}");
        }
        other => panic!("expected one NonDeterminism, got {other:?}"),
    }
    assert!(
        durability.inspect("clocked").unwrap().is_some(),
        "its journal is kept"
    );
    stop(durability, scheduler);
}

#[test]
fn a_journal_of_an_unregistered_type_is_reported_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.redb");
    let (durability, scheduler) = node(&path, Arc::default());
    durability
        .spawn::<Tally>(&scheduler, "t", ())
        .unwrap()
        .durable()
        .wait_timeout(WAIT)
        .unwrap();
    stop(durability, scheduler);

    let durability = Durability::open(RedbStore::create(&path).unwrap());
    let scheduler = support::scheduler(&durability, Arc::default());
    let recovery = durability.recover(&scheduler).unwrap();
    assert!(matches!(
        &recovery.failed[..],
        [DurableError::UnknownKind { key, kind }] if key == "t" && kind == "tally"
    ));
    stop(durability, scheduler);
}

#[test]
fn compaction_drops_forgotten_journals_and_keeps_the_rest() {
    use sched_durable::store::{Append, Created, Store};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.redb");
    let store = RedbStore::create(&path).unwrap();
    let append = |key: &str, seq: u64, ended: bool| Append {
        key: key.to_owned(),
        seq,
        record: vec![seq as u8; 100],
        created: (seq == 0).then(|| Created {
            kind: "k".into(),
            args: vec![],
        }),
        ended,
        sent: vec![],
        taken: vec![],
        snapshot: None,
    };
    for seq in 0..10 {
        store
            .append(&[
                append("gone", seq, seq == 9),
                append("kept", seq, false),
                append("done", seq, seq == 9),
            ])
            .unwrap();
    }
    assert!(store.forget("gone").unwrap());
    store.append(&[append("gone", 0, false)]).unwrap();
    let dropped = store.compact().unwrap();
    assert!(
        dropped >= 10 * 100,
        "the forgotten journal's records: {dropped} bytes"
    );
    assert_eq!(store.journal("kept").unwrap().unwrap().records.len(), 10);
    let done = store.journal("done").unwrap().unwrap();
    assert!(
        done.ended && done.records.len() == 10,
        "an ended journal is kept"
    );
    assert_eq!(
        store.journal("gone").unwrap().unwrap().records.len(),
        1,
        "the new process of the key"
    );
    // Appends go on after a compaction, and a reopen reads the same.
    store.append(&[append("kept", 10, false)]).unwrap();
    drop(store);
    let store = RedbStore::create(&path).unwrap();
    assert_eq!(store.journal("kept").unwrap().unwrap().records.len(), 11);
    assert_eq!(store.running().unwrap().len(), 2);
}

/// A tally whose state is snapshotted.
#[derive(Default, serde::Serialize, serde::Deserialize)]
struct Saved {
    total: u64,
    seen: u64,
}

impl Durable for Saved {
    const KIND: &'static str = "saved";
    type Args = ();
    type Message = u64;
    type Done = (u64, u64);

    fn create(_: ()) -> Self {
        Saved::default()
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events.typed::<Self>() {
            if let Event::Message(message) = event {
                self.seen += 1;
                if message == 0 {
                    out.finish((self.total, self.seen));
                } else {
                    self.total += message;
                }
            }
        }
        Ok(())
    }
}

#[test]
fn a_snapshotted_process_resumes_from_its_latest_snapshot_and_compaction_drops_what_it_covers() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.redb");
    let open = || {
        let durability = Durability::open(RedbStore::create(&path).unwrap());
        durability.register_with_snapshots::<Saved>(4);
        let scheduler = support::scheduler(&durability, Arc::default());
        (durability, scheduler)
    };
    let (durability, scheduler) = open();
    durability.spawn::<Saved>(&scheduler, "s", ()).unwrap();
    for n in 1..=10u64 {
        durability
            .send::<Saved>(&scheduler, "s", &n)
            .unwrap()
            .wait_timeout(WAIT)
            .unwrap();
    }
    // One record per message here (each waits for the last): records 0
    // (the start) to 10; snapshots after records 3 and 7.
    let journal = durability.inspect("s").unwrap().unwrap();
    assert_eq!(
        journal.first, 8,
        "the records the latest snapshot covers are not read back"
    );
    assert_eq!(journal.records.len(), 3);
    stop(durability, scheduler);

    let store = RedbStore::create(&path).unwrap();
    assert!(
        store.compact().unwrap() > 0,
        "compaction drops the covered records"
    );
    drop(store);

    let (durability, scheduler) = open();
    let mut recovery = durability.recover(&scheduler).unwrap();
    assert!(recovery.failed.is_empty(), "{:?}", recovery.failed);
    assert_eq!(recovery.from_snapshots, 1);
    durability.send::<Saved>(&scheduler, "s", &0).unwrap();
    assert_eq!(
        recovery
            .resumed
            .remove(0)
            .of::<Saved>()
            .unwrap()
            .wait()
            .unwrap(),
        (55, 11)
    );
    stop(durability, scheduler);

    // Registered without snapshots, a truncated journal cannot be replayed.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.redb");
    {
        let durability = Durability::open(RedbStore::create(&path).unwrap());
        durability.register_with_snapshots::<Saved>(2);
        let scheduler = support::scheduler(&durability, Arc::default());
        durability.spawn::<Saved>(&scheduler, "s", ()).unwrap();
        for n in 1..=3u64 {
            durability
                .send::<Saved>(&scheduler, "s", &n)
                .unwrap()
                .wait_timeout(WAIT)
                .unwrap();
        }
        stop(durability, scheduler);
    }
    let durability = Durability::open(RedbStore::create(&path).unwrap());
    durability.register::<Saved>();
    let scheduler = support::scheduler(&durability, Arc::default());
    let recovery = durability.recover(&scheduler).unwrap();
    assert!(
        matches!(&recovery.failed[..], [DurableError::Corrupt(e)] if e.contains("without snapshots")),
        "{:?}",
        recovery.failed
    );
    stop(durability, scheduler);
}

#[test]
fn a_fenced_process_stops_without_releasing_and_the_others_of_its_batch_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let (store, gate) = Gated::new(&dir.path().join("j.redb"));
    let durability = Durability::open(store);
    durability.register::<Tally>();
    let scheduler = scheduler(&durability, Arc::default());
    let a = durability.spawn::<Tally>(&scheduler, "a", ()).unwrap();
    let b = durability.spawn::<Tally>(&scheduler, "b", ()).unwrap();
    a.durable().wait_timeout(WAIT).unwrap();
    b.durable().wait_timeout(WAIT).unwrap();

    gate.fence_key("a");
    let refused = durability
        .send::<Tally>(&scheduler, "a", &0)
        .unwrap()
        .wait_timeout(WAIT);
    assert_eq!(refused, Err(DurableError::Fenced("a".into())));
    match a.wait() {
        Err(DurableError::Failed(e)) => assert!(e.contains("fenced off"), "{e}"),
        other => panic!("expected the fence, got {other:?}"),
    }
    durability
        .send::<Tally>(&scheduler, "b", &3)
        .unwrap()
        .wait_timeout(WAIT)
        .unwrap();
    durability.send::<Tally>(&scheduler, "b", &0).unwrap();
    assert_eq!(b.wait().unwrap(), 3);
    scheduler.shutdown(Duration::from_secs(5));
}

#[test]
fn a_store_that_panics_fails_its_batch_and_the_journal_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let (store, gate) = Gated::new(&dir.path().join("j.redb"));
    let durability = Durability::open(store);
    durability.register::<Asker>().register::<Tally>();
    let echoes = Arc::new(AtomicU64::new(0));
    let scheduler = scheduler(&durability, echoes.clone());

    gate.panic_next(1);
    let asker = durability.spawn::<Asker>(&scheduler, "asker", ()).unwrap();
    let receipt = asker.durable().wait_timeout(WAIT);
    assert!(
        matches!(receipt, Err(DurableError::Store(ref e)) if e.contains("the store panicked: the store fell over")),
        "{receipt:?}"
    );
    assert!(matches!(asker.wait(), Err(DurableError::Failed(_))));
    assert_eq!(
        echoes.load(Relaxed),
        0,
        "nothing of the failed record was released"
    );

    // The writer survived: the next process is journaled as usual.
    let tally = durability.spawn::<Tally>(&scheduler, "t", ()).unwrap();
    durability
        .send::<Tally>(&scheduler, "t", &4)
        .unwrap()
        .wait_timeout(WAIT)
        .unwrap();
    durability.send::<Tally>(&scheduler, "t", &0).unwrap();
    assert_eq!(tally.wait().unwrap(), 4);
    assert_eq!(durability.stats().failed_syncs, 1);
    scheduler.shutdown(Duration::from_secs(5));
}

/// A recovery reads the running journals, then a process among them
/// finishes before the recovery claims it: it is not resumed from its old
/// journal (it would run a second time, and its journal would fork).
#[test]
fn a_process_that_ends_while_a_recovery_reads_the_store_is_not_resumed() {
    let dir = tempfile::tempdir().unwrap();
    let (store, gate) = Gated::new(&dir.path().join("j.redb"));
    let durability = Durability::open(store);
    durability.register::<Tally>();
    let scheduler = scheduler(&durability, Arc::default());
    let mut tally = durability.spawn::<Tally>(&scheduler, "t", ()).unwrap();
    durability
        .send::<Tally>(&scheduler, "t", &5)
        .unwrap()
        .wait_timeout(WAIT)
        .unwrap();
    gate.close_running();
    std::thread::scope(|s| {
        let recovering = s.spawn(|| durability.recover(&scheduler).unwrap());
        let deadline = Instant::now() + WAIT;
        while gate.running_reads.load(Relaxed) == 0 {
            assert!(
                Instant::now() < deadline,
                "the recovery never read the store"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        // The read listed the tally as running; now it finishes.
        durability.send::<Tally>(&scheduler, "t", &0).unwrap();
        assert_eq!(tally.wait_timeout(WAIT).unwrap(), 5);
        while durability.pid("t").is_some() {
            assert!(Instant::now() < deadline, "the tally never left");
            std::thread::sleep(Duration::from_millis(1));
        }
        gate.open_running();
        let recovery = recovering.join().unwrap();
        assert!(
            recovery.resumed.is_empty(),
            "resumed {:?} after it ended",
            recovery
                .resumed
                .iter()
                .map(sched_durable::Spawned::key)
                .collect::<Vec<_>>()
        );
        assert!(recovery.failed.is_empty(), "{:?}", recovery.failed);
    });
    assert_eq!(durability.pid("t"), None);
    scheduler.shutdown(Duration::from_secs(5));
}

#[test]
fn status_and_keys_tell_what_became_of_each_process_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.redb");
    {
        let (durability, scheduler) = node(&path, Arc::default());
        let done = durability.spawn::<Tally>(&scheduler, "done", ()).unwrap();
        durability.send::<Tally>(&scheduler, "done", &7).unwrap();
        durability.send::<Tally>(&scheduler, "done", &0).unwrap();
        assert_eq!(done.wait().unwrap(), 7);
        let waiting = durability
            .spawn::<Tally>(&scheduler, "waiting", ())
            .unwrap();
        waiting.durable().wait_timeout(WAIT).unwrap();
        assert!(matches!(
            durability.status("waiting").unwrap(),
            Some(Status::Running(pid)) if pid == waiting.pid()
        ));
        stop(durability, scheduler);
    }
    // Restarted, before any recovery.
    let durability = Durability::open(RedbStore::create(&path).unwrap());
    let done = durability.status("done").unwrap().expect("a journal");
    assert_eq!(done.outcome::<u64>().transpose().unwrap(), Some(7));
    assert_eq!(durability.status("waiting").unwrap(), Some(Status::Pending));
    assert_eq!(durability.status("nobody").unwrap(), None);
    assert_eq!(
        durability.keys().unwrap(),
        vec![("done".to_owned(), true), ("waiting".to_owned(), false)]
    );
    assert!(durability.forget("done").unwrap());
    assert_eq!(durability.status("done").unwrap(), None);
    assert_eq!(durability.keys().unwrap().len(), 1);
}

/// Fails on its first message.
struct Fails;

impl Durable for Fails {
    const KIND: &'static str = "fails";
    type Args = ();
    type Message = ();
    type Done = ();
    fn create((): ()) -> Self {
        Fails
    }
    fn step(&mut self, events: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events.typed::<Self>() {
            if let Event::Message(()) = event {
                return Err("no such account".into());
            }
        }
        Ok(())
    }
}

#[test]
fn the_status_of_a_failed_process_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let durability = Durability::open(RedbStore::create(dir.path().join("j.redb")).unwrap());
    durability.register::<Fails>();
    let scheduler = scheduler(&durability, Arc::default());
    let failing = durability.spawn::<Fails>(&scheduler, "f", ()).unwrap();
    durability.send::<Fails>(&scheduler, "f", &()).unwrap();
    assert!(matches!(failing.wait(), Err(DurableError::Failed(_))));
    let deadline = Instant::now() + WAIT;
    while durability.pid("f").is_some() {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(1));
    }
    match durability.status("f").unwrap() {
        Some(Status::Failed(why)) => assert!(why.contains("no such account"), "{why}"),
        other => panic!("expected Failed, got {other:?}"),
    }
    scheduler.shutdown(Duration::from_secs(5));
}

struct OpenOnDrop(Arc<Gate>);

impl Drop for OpenOnDrop {
    fn drop(&mut self) {
        self.0.open();
    }
}

/// A shutdown while a told message's record is being written: its
/// receipt says it is in doubt (and a recovery applies it, for it was
/// written); a message queued behind it says it was not kept (and it is
/// not applied).
#[test]
fn receipts_of_a_shutdown_say_in_doubt_or_not_kept_and_recovery_agrees() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.redb");
    {
        let (store, gate) = Gated::new(&path);
        let durability = Durability::open(store);
        durability.register::<Tally>();
        let scheduler = scheduler(&durability, Arc::default());
        let tally = durability.spawn::<Tally>(&scheduler, "t", ()).unwrap();
        tally.durable().wait_timeout(WAIT).unwrap();
        gate.close();
        // Opens the gate on the way out, a failed assertion's too: the
        // writer must not hold the journal's drop forever.
        let _opens = OpenOnDrop(gate.clone());
        let entered = gate.entered.load(Relaxed);
        let in_doubt = durability.send::<Tally>(&scheduler, "t", &5).unwrap();
        // The record with 5 is in the writer's hands (held at the gate);
        // 7 arrives while it is in flight, and waits for the next record.
        let deadline = Instant::now() + WAIT;
        while gate.entered.load(Relaxed) == entered {
            assert!(
                Instant::now() < deadline,
                "the record never reached the store"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        let not_kept = durability.send::<Tally>(&scheduler, "t", &7).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        scheduler.shutdown(Duration::from_secs(5));
        assert_eq!(
            in_doubt.wait_timeout(WAIT),
            Err(DurableError::InDoubt("t".into()))
        );
        assert_eq!(
            not_kept.wait_timeout(WAIT),
            Err(DurableError::NotKept("t".into()))
        );
        // The writer writes what it holds before it stops.
        gate.open();
        drop(scheduler);
        drop(durability);
    }
    let (durability, scheduler) = node(&path, Arc::default());
    let mut recovery = durability.recover(&scheduler).unwrap();
    durability.send::<Tally>(&scheduler, "t", &0).unwrap();
    assert_eq!(
        recovery
            .resumed
            .remove(0)
            .of::<Tally>()
            .unwrap()
            .wait_timeout(WAIT)
            .unwrap(),
        5,
        "the message in doubt was written; the one not kept was not"
    );
    stop(durability, scheduler);
}
