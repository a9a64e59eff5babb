//! `StandIn` against a store that fences, as a cluster store does: a
//! message whose append the fence refused was written nowhere, so the
//! stand-in passes it on again to the next process it has, which resumes
//! the journal and takes it back. Two nodes share one `MemoryStore`
//! behind `Fencing`, which refuses an append to a journal from any node
//! but the one that created it or last took it over.
//!
//! The case this guards: a keyed process moved away from a node and back
//! while the node's old incarnation of its durable process had not closed
//! yet. The new stand-in linked with that stale incarnation, whose
//! appends the store refused; it used to drop what it had passed on (five
//! deposits of an account in a three-node run).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sched_durable::prelude::*;
use sched_durable::store::{Append, Journal, MemoryStore, Outgoing, SendWatcher, Store};
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

/// One node's view of a store shared by several: the journals are the
/// shared `MemoryStore`'s, and `writers` says which node may write each.
#[derive(Clone)]
struct Fencing {
    inner: MemoryStore,
    node: u32,
    writers: Arc<Mutex<HashMap<String, u32>>>,
}

impl Fencing {
    fn nodes() -> (Fencing, Fencing) {
        let one = Fencing {
            inner: MemoryStore::new(),
            node: 1,
            writers: Arc::default(),
        };
        let two = Fencing {
            node: 2,
            ..one.clone()
        };
        (one, two)
    }
}

impl Store for Fencing {
    fn append(&self, batch: &[Append]) -> Result<Vec<String>, DurableError> {
        let mut writers = self.writers.lock().unwrap();
        let mut kept = Vec::new();
        let mut fenced = Vec::new();
        for append in batch {
            if append.created.is_some() {
                writers.insert(append.key.clone(), self.node);
            }
            if writers.get(&append.key) == Some(&self.node) {
                kept.push(append.clone());
            } else if !fenced.contains(&append.key) {
                fenced.push(append.key.clone());
            }
        }
        self.inner.append(&kept)?;
        Ok(fenced)
    }

    fn running(&self) -> Result<Vec<Journal>, DurableError> {
        let writers = self.writers.lock().unwrap();
        let mine = self.inner.running()?;
        Ok(mine
            .into_iter()
            .filter(|j| writers.get(&j.key) == Some(&self.node))
            .collect())
    }

    fn take_over(&self, key: &str) -> Result<Option<Journal>, DurableError> {
        let mut writers = self.writers.lock().unwrap();
        let journal = self.inner.take_over(key)?;
        if journal.is_some() {
            writers.insert(key.to_owned(), self.node);
        }
        Ok(journal)
    }

    fn journal(&self, key: &str) -> Result<Option<Journal>, DurableError> {
        self.inner.journal(key)
    }

    fn keys(&self) -> Result<Vec<(String, bool)>, DurableError> {
        self.inner.keys()
    }

    fn contains(&self, key: &str) -> Result<bool, DurableError> {
        self.inner.contains(key)
    }

    fn forget(&self, key: &str) -> Result<bool, DurableError> {
        self.inner.forget(key)
    }

    fn outbox(&self) -> Result<Vec<Outgoing>, DurableError> {
        self.inner.outbox()
    }

    fn outbox_to(&self, key: &str) -> Result<Vec<Outgoing>, DurableError> {
        self.inner.outbox_to(key)
    }

    fn ended(&self, key: &str) -> Result<Option<bool>, DurableError> {
        self.inner.ended(key)
    }

    fn discard(&self, entries: &[(String, String, u64)]) -> Result<(), DurableError> {
        self.inner.discard(entries)
    }

    fn atomic_batches(&self) -> bool {
        self.inner.atomic_batches()
    }

    fn watch_sends(&self, sends: SendWatcher) -> Result<bool, DurableError> {
        self.inner.watch_sends(sends)
    }

    fn size(&self) -> Result<u64, DurableError> {
        self.inner.size()
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
    let (one_store, two_store) = Fencing::nodes();
    let (one, scheduler_one) = node(one_store);
    let (two, scheduler_two) = node(two_store);

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
