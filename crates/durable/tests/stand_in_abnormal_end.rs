//! A `StandIn` that ends abnormally (a router fencing it, as a keyed
//! process is fenced when its shard's lease is lost) while it holds
//! messages it took from its mailbox and has not seen journaled: each is
//! counted in `DurableStats::stand_in_dropped`, not lost unseen. Before
//! this, a stand-in fenced with writes in flight dropped them with no
//! trace. (Messages it holds before its process runs are counted the
//! same way: the unit test in `stand_in.rs`.)

mod support;

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sched_durable::prelude::*;
use sched_durable::StandIn;
use support::Gated;

const WAIT: Duration = Duration::from_secs(10);

/// Sums what it is sent.
struct Sum(u64);

impl Durable for Sum {
    const KIND: &'static str = "sum";
    type Args = u64;
    type Message = u64;
    type Done = u64;

    fn create(start: u64) -> Self {
        Sum(start)
    }

    fn step(&mut self, events: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events.typed::<Self>() {
            if let Event::Message(n) = event {
                self.0 += n;
            }
        }
        Ok(())
    }
}

/// How many messages the journal of `key` holds.
fn journaled(durability: &Durability, key: &str) -> usize {
    durability.inspect(key).unwrap().map_or(0, |journal| {
        journal
            .records
            .iter()
            .flat_map(|r| r.inputs.iter())
            .filter(|i| matches!(i, sched_durable::RecordedInput::Message { .. }))
            .count()
    })
}

/// Opens the store's gate when dropped.
struct Reopen<'a>(&'a support::Gate);

impl Drop for Reopen<'_> {
    fn drop(&mut self) {
        self.0.open();
    }
}

fn until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Writes held back by the store: the stand-in has passed three deposits
/// on and waits on their receipts when it is terminated. All three are
/// counted, before the writes are let go.
#[test]
fn a_stand_in_ended_with_writes_in_flight_counts_each_as_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let (store, gate) = Gated::new(&dir.path().join("j.redb"));
    let durability = Arc::new(Durability::open(store));
    durability.register::<Sum>();
    let scheduler = durability
        .install(Scheduler::builder().workers(2).count_mailboxes(true))
        .build();
    scheduler.start();
    let mut stand_in = scheduler
        .spawn(StandIn::<Sum>::new(&durability, "a", 0))
        .unwrap();
    scheduler.send(stand_in.pid(), 7_u64).unwrap();
    until("the first deposit journaled", || {
        journaled(&durability, "a") == 1
    });
    let entered = gate.entered.load(Relaxed);
    gate.close();
    // Whatever fails below, the writer is let go (the durability joins it
    // as it drops).
    let _open = Reopen(&gate);
    for deposit in [1_u64, 2, 3] {
        scheduler.send(stand_in.pid(), deposit).unwrap();
    }
    // The writer holds a batch at the gate; the stand-in has all three
    // (passed on, receipts open) once nothing is left in its mailbox.
    until("a write held at the gate", || {
        gate.entered.load(Relaxed) > entered
    });
    until("the stand-in has read its mailbox", || {
        scheduler
            .context()
            .process_info(stand_in.pid())
            .is_some_and(|info| info.mailbox_depth == Some(0))
    });
    assert_eq!(durability.stats().stand_in_dropped, 0);
    scheduler.terminate(stand_in.pid()).unwrap();
    assert!(stand_in.wait_timeout(WAIT).is_err(), "terminated");
    assert_eq!(
        durability.stats().stand_in_dropped,
        3,
        "every deposit it held unjournaled is counted"
    );
    assert_eq!(scheduler.stats().dead_letters, 0);
    drop(_open);
    scheduler.shutdown(Duration::from_secs(1));
}
