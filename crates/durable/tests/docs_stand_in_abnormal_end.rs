//! Written from the docs alone (the guide's "One live writer per journal"
//! and "Limits", `DurableStats::stand_in_dropped`, `StandIn::close`, the
//! changelog's "A `StandIn` that ends abnormally counts what it held"):
//! a stand-in that ends abnormally counts each message it held and had not
//! seen journaled; a write then in flight may still land and is then read
//! by the key's next process ("counted and read, never neither"); a
//! stand-in cancelled normally delivers everything and counts nothing.
//!
//! Two of these tests found that a key's next process resumed while a
//! write of the ended one was still held at the store: the write landed
//! behind the new process's first record, under the same number, and the
//! journal read `Corrupt`. A key is now let go only once its last write
//! has landed (the guide's "A key is let go only once its last write has
//! landed").

mod support;

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Once};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use sched::ExitError;
use sched_durable::prelude::*;
use sched_durable::{RecordedInput, StandIn, Status};
use support::{Gate, Gated};

/// Remembers every value it is sent (other than 0), in order; finishes
/// with them when sent 0. The sum is what the guide's accounts keep; the
/// list says which messages were read, and whether one was read twice.
struct Seen(Vec<u64>);

impl Durable for Seen {
    const KIND: &'static str = "seen";
    type Args = ();
    type Message = u64;
    type Done = Vec<u64>;

    fn create(_: ()) -> Self {
        Seen(Vec::new())
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events.typed::<Self>() {
            match event {
                Event::Message(0) => out.finish(self.0.clone()),
                Event::Message(n) => self.0.push(n),
                _ => {}
            }
        }
        Ok(())
    }
}

/// Opens the gate (and stops failing) when dropped, so that the writer
/// thread can be joined whatever a test did before it panicked.
struct OpenOnDrop(Arc<Gate>);

impl Drop for OpenOnDrop {
    fn drop(&mut self) {
        self.0.fail(false);
        self.0.open();
    }
}

/// Every warning (and error) logged, with its target and fields.
static LOGGED: Mutex<Vec<String>> = Mutex::new(Vec::new());

struct WarnLog;

struct Fields(String);

impl tracing::field::Visit for Fields {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        let _ = write!(self.0, "{}={:?} ", field.name(), value);
    }
}

impl tracing::Subscriber for WarnLog {
    fn enabled(&self, metadata: &tracing::Metadata<'_>) -> bool {
        *metadata.level() <= tracing::Level::WARN
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut fields = Fields(String::new());
        event.record(&mut fields);
        let metadata = event.metadata();
        LOGGED.lock().push(format!(
            "{} {}: {}",
            metadata.level(),
            metadata.target(),
            fields.0
        ));
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

fn log_warnings() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let _ = tracing::subscriber::set_global_default(WarnLog);
    });
}

/// The warnings logged so far that name `key`.
fn warnings_about(key: &str) -> Vec<String> {
    LOGGED
        .lock()
        .iter()
        .filter(|line| line.starts_with("WARN") && line.contains(key))
        .cloned()
        .collect()
}

/// Polls `done` every millisecond until it holds or `within` has passed.
fn wait_until(within: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if done() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The messages (other than 0) in `key`'s journal, in order.
fn journaled(durability: &Durability, key: &str) -> Vec<u64> {
    let Some(journal) = durability.inspect(key).expect("the journal reads") else {
        return Vec::new();
    };
    let mut values = Vec::new();
    for record in &journal.records {
        for input in &record.inputs {
            if let RecordedInput::Message { body, .. } = input {
                let value: u64 = postcard::from_bytes(body).expect("a u64 message");
                if value != 0 {
                    values.push(value);
                }
            }
        }
    }
    values
}

/// Waits until every append that reached the store got through it, and
/// nothing more arrives for 50 ms.
fn settle(gate: &Gate) {
    let settled = wait_until(Duration::from_secs(3), || {
        let entered = gate.entered.load(Relaxed);
        if gate.appends.load(Relaxed) != entered {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
        gate.entered.load(Relaxed) == entered && gate.appends.load(Relaxed) == entered
    });
    assert!(settled, "the writer did not settle");
}

fn no_repeats(values: &[u64], what: &str) {
    let unique: BTreeSet<u64> = values.iter().copied().collect();
    assert_eq!(
        unique.len(),
        values.len(),
        "{what} holds a message twice: {values:?}"
    );
}

/// A durability on a gated store, `Seen` registered, and a started
/// scheduler of 2 workers.
struct Rig {
    durability: Arc<Durability>,
    scheduler: Scheduler,
    gate: Arc<Gate>,
    _dir: tempfile::TempDir,
}

impl Rig {
    fn new() -> (Rig, OpenOnDrop) {
        log_warnings();
        let dir = tempfile::tempdir().unwrap();
        let (store, gate) = Gated::new(&dir.path().join("journal.redb"));
        let durability = Arc::new(Durability::open(store));
        durability.register::<Seen>();
        let scheduler = durability.install(Scheduler::builder().workers(2)).build();
        scheduler.start();
        let guard = OpenOnDrop(gate.clone());
        (
            Rig {
                durability,
                scheduler,
                gate,
                _dir: dir,
            },
            guard,
        )
    }

    fn stand_in(&self, key: &str) -> sched::Completion<()> {
        self.scheduler
            .spawn(StandIn::<Seen>::new(&self.durability, key, ()))
            .expect("the stand-in starts")
    }

    fn send_range(&self, to: Pid, values: std::ops::RangeInclusive<u64>) {
        for value in values {
            self.scheduler
                .send(to, value)
                .expect("the stand-in takes it");
        }
    }

    fn dropped(&self) -> u64 {
        self.durability.stats().stand_in_dropped
    }

    /// Waits until `key`'s durable process no longer runs here.
    fn wait_durable_gone(&self, key: &str) {
        assert!(
            wait_until(Duration::from_secs(3), || self
                .durability
                .pid(key)
                .is_none()),
            "the durable process {key} still runs after its stand-in ended"
        );
    }

    /// Starts a new stand-in for `key`, sends it 0, waits for the durable
    /// process to finish, cancels the stand-in: what the process read.
    fn finish(&self, key: &str) -> Vec<u64> {
        let mut next = self.stand_in(key);
        self.scheduler.send(next.pid(), 0_u64).unwrap();
        let finished = wait_until(Duration::from_secs(4), || {
            matches!(self.durability.status(key), Ok(Some(Status::Done(_))))
        });
        let status = self.durability.status(key).unwrap();
        assert!(finished, "{key} did not finish: {status:?}");
        self.scheduler.context().cancel(next.pid()).unwrap();
        next.wait_timeout(Duration::from_secs(2))
            .expect("the next stand-in ends when cancelled");
        status
            .expect("a journal")
            .outcome::<Vec<u64>>()
            .expect("done")
            .expect("a list")
    }

    fn shutdown(self) {
        self.gate.fail(false);
        self.gate.open();
        let report = self.scheduler.shutdown(Duration::from_secs(1));
        assert_eq!(report.still_running, 0);
    }
}

/// 100 messages journaled, the writes held, 100 more sent, a write held in
/// flight at the gate, then the stand-in terminated (what a router fencing
/// it does). Every message is journaled or counted; none already journaled
/// is counted; after the gate opens, the key's next process reads exactly
/// the journal, each message once.
fn terminate_while_writes_are_held(key: &str, resume_before_the_gate_opens: bool) {
    const FIRST: u64 = 100;
    const TOTAL: u64 = 200;
    let (rig, _open) = Rig::new();
    let dropped_before = rig.dropped();
    let mut stand_in = rig.stand_in(key);
    let pid = stand_in.pid();

    rig.send_range(pid, 1..=FIRST);
    assert!(
        wait_until(Duration::from_secs(3), || {
            journaled(&rig.durability, key).len() as u64 == FIRST
        }),
        "the first {FIRST} were not journaled: {}",
        journaled(&rig.durability, key).len()
    );
    // Give the stand-in a moment to see them journaled.
    std::thread::sleep(Duration::from_millis(20));

    let entered = rig.gate.entered.load(Relaxed);
    rig.gate.close();
    rig.send_range(pid, FIRST + 1..=TOTAL);
    assert!(
        wait_until(Duration::from_secs(3), || rig.gate.entered.load(Relaxed)
            > entered),
        "no write reached the held store"
    );
    // Let the stand-in take everything from its mailbox.
    std::thread::sleep(Duration::from_millis(50));
    let dead_before = rig.scheduler.stats().dead_letters;

    let durable = rig.durability.pid(key).expect("the durable process runs");
    rig.scheduler.terminate(pid).expect("the stand-in runs");
    let ended = stand_in.wait_timeout(Duration::from_secs(2));
    assert!(
        matches!(ended, Err(ExitError::Terminated)),
        "the stand-in ended with {ended:?}"
    );
    let dropped = rig.dropped() - dropped_before;
    let held_journal = journaled(&rig.durability, key);
    // The durable process ends with its stand-in (its key stays taken
    // here until its held write has landed).
    assert!(
        wait_until(Duration::from_secs(3), || rig
            .scheduler
            .context()
            .process_info(durable)
            .is_none()),
        "the durable process {key} still runs after its stand-in ended"
    );
    let dead = rig.scheduler.stats().dead_letters - dead_before;
    let status = rig.durability.status(key).unwrap();
    eprintln!(
        "{key}: at the end: counted {dropped}, journaled {} (gate held), dead letters {dead}, status {status:?}",
        held_journal.len()
    );

    // Never neither (as far as the journal can tell now).
    assert!(
        held_journal.len() as u64 + dropped >= TOTAL,
        "{key}: {} journaled + {dropped} counted < {TOTAL} sent (dead letters {dead})",
        held_journal.len()
    );
    // Already journaled: not counted.
    assert!(
        dropped <= TOTAL - FIRST,
        "{key}: {dropped} counted, but {FIRST} of {TOTAL} were journaled before the writes were held"
    );
    // The warning.
    if dropped > 0 {
        let warnings = warnings_about(key);
        assert_eq!(
            warnings.len(),
            1,
            "{key}: {dropped} counted: one warning naming the key expected; logged: {:?}",
            LOGGED.lock()
        );
        eprintln!("{key}: warnings: {warnings:?}");
    }
    // Its journal waits for the next process; the key stays the ended
    // process's (`Running`) until its held write has landed.
    assert!(
        matches!(status, Some(Status::Pending | Status::Running(_))),
        "{key}: the journal should wait for the next process, not {status:?}"
    );

    let read = if resume_before_the_gate_opens {
        // The key's next process is resumed while the old write is still
        // held; then the gate opens.
        let mut next = rig.stand_in(key);
        let resumed = wait_until(Duration::from_secs(2), || rig.durability.pid(key).is_some());
        rig.scheduler.send(next.pid(), 0_u64).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        let pending_appends = rig.gate.entered.load(Relaxed) - rig.gate.appends.load(Relaxed);
        rig.gate.open();
        settle(&rig.gate);
        wait_until(Duration::from_secs(3), || {
            !matches!(
                rig.durability.status(key),
                Ok(Some(Status::Running(_) | Status::Pending))
            )
        });
        let status = rig.durability.status(key);
        let records = rig
            .durability
            .inspect(key)
            .map(|j| j.map(|j| j.records.len()));
        rig.scheduler.context().cancel(next.pid()).unwrap();
        let next_ended = next.wait_timeout(Duration::from_secs(2));
        eprintln!(
            "{key}: next process resumed: {resumed}; appends held when the gate opened: \
             {pending_appends}; status {status:?}; records {records:?}; next stand-in {next_ended:?}"
        );
        let status = match status {
            Ok(status) => status,
            Err(error) => panic!(
                "{key}: the journal no longer reads once the old incarnation's held write \
                 landed behind the resumed process's: {error} ({dropped} counted)"
            ),
        };
        assert!(
            matches!(status, Some(Status::Done(_))),
            "{key} did not finish: {status:?}"
        );
        status
            .expect("a journal")
            .outcome::<Vec<u64>>()
            .expect("done")
            .expect("a list")
    } else {
        rig.gate.open();
        settle(&rig.gate);
        rig.finish(key)
    };
    let final_journal = journaled(&rig.durability, key);
    let dropped_final = rig.dropped() - dropped_before;

    let read_set: BTreeSet<u64> = read.iter().copied().collect();
    let journal_set: BTreeSet<u64> = final_journal.iter().copied().collect();
    let neither: Vec<u64> = (1..=TOTAL).filter(|v| !read_set.contains(v)).collect();
    let landed_late = final_journal.len() - held_journal.len();
    eprintln!(
        "{key}: after: read {} (sum {}), journaled {} ({landed_late} landed after the end), \
         counted {dropped_final}, missing from what was read {}",
        read.len(),
        read.iter().sum::<u64>(),
        final_journal.len(),
        neither.len()
    );

    no_repeats(&final_journal, "the journal");
    no_repeats(&read, "what the next process read");
    assert!(
        (1..=FIRST).all(|v| read_set.contains(&v)),
        "{key}: a message journaled before the writes were held was not read"
    );
    assert_eq!(
        dropped_final, dropped,
        "{key}: stand_in_dropped moved after the stand-in's end"
    );
    // Counted and read, never neither.
    assert!(
        neither.len() as u64 <= dropped,
        "{key}: {} messages were neither read nor counted ({dropped} counted): {neither:?}",
        neither.len()
    );
    // The key's next process reads what landed, the late write too.
    let unread_but_journaled: Vec<u64> = journal_set.difference(&read_set).copied().collect();
    assert!(
        unread_but_journaled.is_empty(),
        "{key}: journaled but not read by the next process: {unread_but_journaled:?}"
    );
    assert_eq!(
        read.iter().sum::<u64>(),
        final_journal.iter().sum::<u64>(),
        "{key}: the sum is not the journal's"
    );
    rig.shutdown();
}

#[test]
fn a_terminated_stand_in_counts_what_it_held_and_the_next_process_reads_what_landed() {
    terminate_while_writes_are_held("abnormal-1", false);
}

#[test]
fn a_write_that_lands_after_the_next_process_resumed_is_still_counted_or_read() {
    terminate_while_writes_are_held("abnormal-early-resume", true);
}

/// Writes held while 100 messages go to the stand-in, which is then
/// cancelled normally: it delivers everything first and counts nothing.
#[test]
fn a_cancelled_stand_in_delivers_everything_and_counts_nothing() {
    const TOTAL: u64 = 100;
    let key = "cancelled-1";
    let (rig, _open) = Rig::new();
    let dropped_before = rig.dropped();
    let mut stand_in = rig.stand_in(key);
    let pid = stand_in.pid();
    rig.send_range(pid, 1..=10);
    assert!(wait_until(Duration::from_secs(3), || {
        journaled(&rig.durability, key).len() == 10
    }));

    let entered = rig.gate.entered.load(Relaxed);
    rig.gate.close();
    rig.send_range(pid, 11..=TOTAL);
    assert!(
        wait_until(Duration::from_secs(3), || rig.gate.entered.load(Relaxed)
            > entered),
        "no write reached the held store"
    );
    rig.scheduler
        .context()
        .cancel(pid)
        .expect("the stand-in runs");
    // It waits for its messages to be journaled: still running while the
    // writes are held.
    assert!(
        matches!(
            stand_in.wait_timeout(Duration::from_millis(100)),
            Err(ExitError::TimedOut)
        ),
        "the cancelled stand-in ended before its messages were journaled"
    );
    rig.gate.open();
    stand_in
        .wait_timeout(Duration::from_secs(3))
        .expect("a cancelled stand-in ends normally");
    rig.wait_durable_gone(key);
    assert_eq!(
        rig.dropped() - dropped_before,
        0,
        "a normal cancel counted messages"
    );
    assert!(
        warnings_about(key).is_empty(),
        "warnings: {:?}",
        warnings_about(key)
    );

    let read = rig.finish(key);
    no_repeats(&read, "what was read");
    assert_eq!(read.iter().sum::<u64>(), TOTAL * (TOTAL + 1) / 2);
    assert_eq!(
        read,
        (1..=TOTAL).collect::<Vec<_>>(),
        "read out of order or not at all"
    );
    assert_eq!(rig.dropped() - dropped_before, 0);
    rig.shutdown();
}

/// Everything journaled (and the writer idle) when the stand-in is
/// terminated: nothing is counted, and the next process reads it all.
#[test]
fn a_terminated_stand_in_with_everything_journaled_counts_nothing() {
    const TOTAL: u64 = 50;
    let key = "idle-1";
    let (rig, _open) = Rig::new();
    let dropped_before = rig.dropped();
    let mut stand_in = rig.stand_in(key);
    let pid = stand_in.pid();
    rig.send_range(pid, 1..=TOTAL);
    assert!(wait_until(Duration::from_secs(3), || {
        journaled(&rig.durability, key).len() as u64 == TOTAL
    }));
    settle(&rig.gate);
    // Give the stand-in time to see its messages journaled.
    std::thread::sleep(Duration::from_millis(50));

    rig.scheduler.terminate(pid).expect("the stand-in runs");
    let ended = stand_in.wait_timeout(Duration::from_secs(2));
    assert!(matches!(ended, Err(ExitError::Terminated)), "{ended:?}");
    rig.wait_durable_gone(key);
    assert_eq!(
        rig.dropped() - dropped_before,
        0,
        "messages journaled before the end were counted"
    );
    assert!(
        warnings_about(key).is_empty(),
        "warnings: {:?}",
        warnings_about(key)
    );

    let read = rig.finish(key);
    assert_eq!(read, (1..=TOTAL).collect::<Vec<_>>());
    assert_eq!(rig.dropped() - dropped_before, 0);
    rig.shutdown();
}

/// Writes refused by the store for good while the stand-in runs, then the
/// stand-in terminated: a message is counted at most once, and none that
/// was journaled before is counted.
#[test]
fn failed_writes_then_a_terminate_count_each_message_at_most_once() {
    const FIRST: u64 = 50;
    const TOTAL: u64 = 100;
    let key = "failing-1";
    let (rig, _open) = Rig::new();
    let dropped_before = rig.dropped();
    let mut stand_in = rig.stand_in(key);
    let pid = stand_in.pid();
    rig.send_range(pid, 1..=FIRST);
    assert!(wait_until(Duration::from_secs(3), || {
        journaled(&rig.durability, key).len() as u64 == FIRST
    }));
    settle(&rig.gate);
    std::thread::sleep(Duration::from_millis(20));

    let entered = rig.gate.entered.load(Relaxed);
    rig.gate.fail(true);
    rig.send_range(pid, FIRST + 1..=TOTAL);
    assert!(wait_until(Duration::from_secs(3), || {
        rig.gate.entered.load(Relaxed) > entered
    }));
    std::thread::sleep(Duration::from_millis(100));
    let dropped_failing = rig.dropped() - dropped_before;

    let terminated = rig.scheduler.terminate(pid);
    let ended = stand_in.wait_timeout(Duration::from_secs(2));
    rig.gate.fail(false);
    let dropped = rig.dropped() - dropped_before;
    let journal = journaled(&rig.durability, key);
    eprintln!(
        "{key}: counted {dropped_failing} while failing, {dropped} after the terminate \
         ({terminated:?}, {ended:?}); journaled {}",
        journal.len()
    );
    no_repeats(&journal, "the journal");
    assert!(
        journal.len() as u64 + dropped >= TOTAL,
        "{key}: {} journaled + {dropped} counted < {TOTAL}",
        journal.len()
    );
    assert!(
        dropped <= TOTAL - FIRST,
        "{key}: {dropped} counted, more than the {} sent after the writes began to fail",
        TOTAL - FIRST
    );
    rig.shutdown();
}

/// Without a stand-in: a durable process suspended (cancelled) while a
/// write of its is held at the store, then resumed (`Durability::resume`)
/// as soon as it no longer runs here, before the held write lands. The
/// journal must stay readable, and the resumed process must read what
/// its journal holds. (Localises the early-resume failure above.)
#[test]
fn resume_while_the_suspended_incarnations_write_is_held_keeps_the_journal_readable() {
    let key = "resume-held-1";
    let (rig, _open) = Rig::new();
    let first = rig
        .durability
        .spawn::<Seen>(&rig.scheduler, key, ())
        .expect("spawned");
    for value in 1..=10_u64 {
        rig.durability
            .send::<Seen>(&rig.scheduler, key, &value)
            .unwrap()
            .wait_timeout(Duration::from_secs(3))
            .expect("journaled");
    }
    let entered = rig.gate.entered.load(Relaxed);
    rig.gate.close();
    for value in 11..=20_u64 {
        rig.durability
            .send::<Seen>(&rig.scheduler, key, &value)
            .unwrap();
    }
    assert!(wait_until(Duration::from_secs(3), || {
        rig.gate.entered.load(Relaxed) > entered
    }));
    rig.scheduler.context().cancel(first.pid()).unwrap();
    let gone = wait_until(Duration::from_secs(1), || rig.durability.pid(key).is_none());
    eprintln!("{key}: suspended while its write is held: {gone}");
    // While the suspended process's write is held, its key stays taken:
    // a resume then is refused, and succeeds once the write has landed.
    let mut resumed = false;
    if gone {
        match rig.durability.resume(&rig.scheduler, key) {
            Ok(Some(_)) => {
                resumed = true;
                std::thread::sleep(Duration::from_millis(50));
                let _ = rig.durability.send::<Seen>(&rig.scheduler, key, &0);
            }
            Err(sched_durable::DurableError::KeyTaken(_)) => {}
            other => panic!("{key}: resume while the write is held: {other:?}"),
        }
    }
    rig.gate.open();
    settle(&rig.gate);
    if !resumed {
        assert!(
            wait_until(Duration::from_secs(3), || matches!(
                rig.durability.resume(&rig.scheduler, key),
                Ok(Some(_))
            )),
            "{key}: never resumed once the write landed"
        );
        rig.durability
            .send::<Seen>(&rig.scheduler, key, &0)
            .unwrap();
    }
    wait_until(Duration::from_secs(3), || {
        !matches!(
            rig.durability.status(key),
            Ok(Some(Status::Running(_) | Status::Pending))
        )
    });
    let status = rig.durability.status(key);
    let journal = rig
        .durability
        .inspect(key)
        .map(|_| journaled(&rig.durability, key));
    eprintln!("{key}: status {status:?}; journal {journal:?}");
    let status = status.expect("the journal reads");
    let read = status
        .expect("a journal")
        .outcome::<Vec<u64>>()
        .expect("done")
        .expect("a list");
    let journal = journal.expect("the journal reads");
    no_repeats(&journal, "the journal");
    assert_eq!(
        read, journal,
        "the resumed process did not read its journal"
    );
    rig.shutdown();
}
