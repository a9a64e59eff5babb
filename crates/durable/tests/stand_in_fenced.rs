//! `StandIn` against a store that fences, as a cluster store does: a
//! message whose append the fence refused was written nowhere, so the
//! stand-in passes it on again to the next process it has, which resumes
//! the journal and takes it back. Two nodes share one store that fences
//! (`fencing/mod.rs`).
//!
//! The case this guards: a keyed process moved away from a node and back
//! while the node's old incarnation of its durable process had not closed
//! yet. The new stand-in linked with that stale incarnation, whose
//! appends the store refused; it used to drop what it had passed on (five
//! deposits of an account in a three-node run).

mod fencing;

use std::sync::Arc;
use std::time::{Duration, Instant};

use fencing::Fencing;
use sched_durable::prelude::*;
use sched_durable::StandIn;

const WAIT: Duration = Duration::from_secs(10);

/// Sums what it is sent; 0 finishes it with the sum.
struct Sum(u64);

impl Durable for Sum {
    const KIND: &'static str = "sum";
    type Args = u64;
    type Message = u64;
    type Done = u64;

    fn create(start: u64) -> Self {
        Sum(start)
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events.typed::<Self>() {
            match event {
                Event::Message(0) => out.finish(self.0),
                Event::Message(n) => self.0 += n,
                _ => {}
            }
        }
        Ok(())
    }
}

fn node(store: Fencing) -> (Arc<Durability>, Scheduler) {
    let durability = Arc::new(Durability::open(store));
    durability.register::<Sum>();
    let scheduler = durability.install(Scheduler::builder().workers(2)).build();
    scheduler.start();
    (durability, scheduler)
}

fn until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Node 1 runs the key's durable process; node 2 takes its journal over
/// and journals a 2; then a stand-in on node 1 finds node 1's old
/// incarnation still running and passes 3, 4 and 0 to it. The store
/// refuses that incarnation's appends: the stand-in passes the three on
/// again to a process that resumes the journal (taking it back from node
/// 2), so the sum closes with all of them.
#[test]
fn messages_a_fenced_process_was_refused_go_to_the_next_one() {
    let store = Fencing::new();
    let (one, scheduler_one) = node(store.node(1));
    let (two, scheduler_two) = node(store.node(2));

    // Node 1's incarnation: linked with nothing, so it outlives the move.
    let stale = one.spawn::<Sum>(&scheduler_one, "k", 0).unwrap().pid();
    one.send::<Sum>(&scheduler_one, "k", &1)
        .unwrap()
        .wait_timeout(WAIT)
        .unwrap();

    // Node 2 takes the journal over, journals a 2 and suspends it.
    let resumed = two
        .resume(&scheduler_two, "k")
        .unwrap()
        .expect("a running journal");
    two.send::<Sum>(&scheduler_two, "k", &2)
        .unwrap()
        .wait_timeout(WAIT)
        .unwrap();
    scheduler_two.context().cancel(resumed.pid()).unwrap();
    until("node 2's process to suspend", || two.pid("k").is_none());

    // Back on node 1: the stand-in finds the stale incarnation.
    assert_eq!(one.pid("k"), Some(stale));
    let mut stand_in = scheduler_one
        .spawn(StandIn::<Sum>::new(&one, "k", 0))
        .unwrap();
    for n in [3_u64, 4, 0] {
        scheduler_one.send(stand_in.pid(), n).unwrap();
    }
    until("the sum to close", || {
        matches!(one.status("k"), Ok(Some(sched_durable::Status::Done(_))))
    });
    let status = one.status("k").unwrap().unwrap();
    assert_eq!(status.outcome::<u64>().expect("done").unwrap(), 10);
    assert_ne!(
        one.pid("k"),
        Some(stale),
        "the stale incarnation still runs"
    );
    scheduler_one.context().cancel(stand_in.pid()).unwrap();
    stand_in.wait_timeout(WAIT).unwrap();
    scheduler_one.shutdown(Duration::from_secs(1));
    scheduler_two.shutdown(Duration::from_secs(1));
}

/// A message whose write the store fails for good (a timeout, a lost
/// connection: it may or may not be written, so it is not passed on
/// again) is dropped with a warning and counted in `stand_in_dropped`;
/// the next message goes to a process that resumes the journal.
#[test]
fn a_message_the_store_fails_for_good_is_counted_dropped() {
    let store = Fencing::new();
    let (one, scheduler) = node(store.node(1));
    let mut stand_in = scheduler.spawn(StandIn::<Sum>::new(&one, "k", 0)).unwrap();
    scheduler.send(stand_in.pid(), 1_u64).unwrap();
    until("the 1 to be journaled", || {
        one.inspect("k")
            .ok()
            .flatten()
            .is_some_and(|j| !j.records.is_empty())
    });
    store.fail_appends(true);
    scheduler.send(stand_in.pid(), 2_u64).unwrap();
    until("the 2 to be dropped", || one.stats().stand_in_dropped == 1);
    store.fail_appends(false);
    scheduler.send(stand_in.pid(), 3_u64).unwrap();
    scheduler.send(stand_in.pid(), 0_u64).unwrap();
    until("the sum to close", || {
        matches!(one.status("k"), Ok(Some(sched_durable::Status::Done(_))))
    });
    let status = one.status("k").unwrap().unwrap();
    assert_eq!(status.outcome::<u64>().expect("done").unwrap(), 4);
    assert_eq!(one.stats().stand_in_dropped, 1);
    scheduler.context().cancel(stand_in.pid()).unwrap();
    stand_in.wait_timeout(WAIT).unwrap();
    scheduler.shutdown(Duration::from_secs(1));
}
