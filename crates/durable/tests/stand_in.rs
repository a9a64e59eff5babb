//! `StandIn`: a plain process standing for a durable one. Stopped and
//! started again it resumes the same journal; what it passed on before a
//! cancel is journaled before the durable process is suspended; a key
//! whose process finished starts afresh; a stand-in that ends abnormally
//! takes its durable process with it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use sched_durable::prelude::*;
use sched_durable::store::MemoryStore;
use sched_durable::{StandIn, Status};

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

fn setup() -> (Arc<Durability>, Scheduler) {
    let durability = Arc::new(Durability::open(MemoryStore::new()));
    durability.register::<Sum>();
    let scheduler = durability.install(Scheduler::builder().workers(2)).build();
    scheduler.start();
    (durability, scheduler)
}

/// Cancels a stand-in and waits for its end: it delivers what it holds
/// first.
fn stop(scheduler: &Scheduler, stand_in: &mut sched::Completion<()>) {
    scheduler.context().cancel(stand_in.pid()).unwrap();
    stand_in.wait_timeout(WAIT).unwrap();
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

fn outcome(durability: &Durability, key: &str) -> u64 {
    let status = durability.status(key).unwrap().expect("journaled");
    status.outcome::<u64>().expect("done").unwrap()
}

/// Many messages then at once a cancel: every one is in the journal the
/// next stand-in resumes, however many were still being written when
/// the cancel came.
#[test]
fn a_cancel_suspends_only_once_every_message_passed_on_is_journaled() {
    let (durability, scheduler) = setup();
    let mut expected = 0;
    for round in 0..20_u64 {
        let mut stand_in = scheduler
            .spawn(StandIn::<Sum>::new(&durability, "s", 0))
            .unwrap();
        for n in 1..=50 {
            scheduler.send(stand_in.pid(), round * 100 + n).unwrap();
            expected += round * 100 + n;
        }
        scheduler.context().cancel(stand_in.pid()).unwrap();
        stand_in.wait_timeout(WAIT).unwrap();
    }
    let mut last = scheduler
        .spawn(StandIn::<Sum>::new(&durability, "s", 0))
        .unwrap();
    scheduler.send(last.pid(), 0_u64).unwrap();
    stop(&scheduler, &mut last);
    assert_eq!(outcome(&durability, "s"), expected);
    scheduler.shutdown(Duration::from_secs(1));
}

/// A key whose durable process finished: the next stand-in starts it
/// afresh from its arguments, not from the ended journal.
#[test]
fn a_key_whose_process_finished_starts_afresh() {
    let (durability, scheduler) = setup();
    let mut first = scheduler
        .spawn(StandIn::<Sum>::new(&durability, "k", 100))
        .unwrap();
    scheduler.send(first.pid(), 5_u64).unwrap();
    scheduler.send(first.pid(), 0_u64).unwrap();
    stop(&scheduler, &mut first);
    assert_eq!(outcome(&durability, "k"), 105);
    let mut second = scheduler
        .spawn(StandIn::<Sum>::new(&durability, "k", 1))
        .unwrap();
    scheduler.send(second.pid(), 2_u64).unwrap();
    scheduler.send(second.pid(), 0_u64).unwrap();
    stop(&scheduler, &mut second);
    assert_eq!(outcome(&durability, "k"), 3);
    scheduler.shutdown(Duration::from_secs(1));
}

/// A stand-in ended abnormally (a router fencing it): its durable
/// process ends with it, and its journal resumes with the next one.
#[test]
fn a_stand_in_that_ends_abnormally_takes_its_durable_process_with_it() {
    let (durability, scheduler) = setup();
    let mut stand_in = scheduler
        .spawn(StandIn::<Sum>::new(&durability, "t", 0))
        .unwrap();
    scheduler.send(stand_in.pid(), 7_u64).unwrap();
    let deadline = Instant::now() + WAIT;
    while durability.pid("t").is_none() {
        assert!(Instant::now() < deadline, "the durable process never ran");
        std::thread::sleep(Duration::from_millis(1));
    }
    // Wait for the 7 to be journaled, then end the stand-in abnormally.
    while journaled(&durability, "t") == 0 {
        assert!(Instant::now() < deadline, "the 7 was never journaled");
        std::thread::sleep(Duration::from_millis(1));
    }
    scheduler.terminate(stand_in.pid()).unwrap();
    assert!(stand_in.wait_timeout(WAIT).is_err());
    while durability.pid("t").is_some() {
        assert!(
            Instant::now() < deadline,
            "the durable process outlived its stand-in"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(durability.status("t").unwrap(), Some(Status::Pending));
    let mut next = scheduler
        .spawn(StandIn::<Sum>::new(&durability, "t", 0))
        .unwrap();
    scheduler.send(next.pid(), 0_u64).unwrap();
    stop(&scheduler, &mut next);
    assert_eq!(outcome(&durability, "t"), 7);
    scheduler.shutdown(Duration::from_secs(1));
}

/// A message of another type than the durable process takes is dropped;
/// the rest go on.
#[test]
fn a_message_of_another_type_is_dropped_and_the_rest_go_on() {
    let (durability, scheduler) = setup();
    let mut stand_in = scheduler
        .spawn(StandIn::<Sum>::new(&durability, "m", 0))
        .unwrap();
    scheduler.send(stand_in.pid(), "not a number").unwrap();
    scheduler.send(stand_in.pid(), 4_u64).unwrap();
    scheduler.send(stand_in.pid(), 0_u64).unwrap();
    stop(&scheduler, &mut stand_in);
    assert_eq!(outcome(&durability, "m"), 4);
    assert_eq!(
        durability.stats().stand_in_dropped,
        1,
        "the dropped one is counted"
    );
    scheduler.shutdown(Duration::from_secs(1));
}

/// Messages right behind the one that finishes the durable process:
/// they go, in order, to a fresh process of the key, not nowhere.
#[test]
fn messages_behind_the_one_that_finishes_go_to_a_fresh_process() {
    let (durability, scheduler) = setup();
    let mut stand_in = scheduler
        .spawn(StandIn::<Sum>::new(&durability, "b", 0))
        .unwrap();
    for n in [5_u64, 0, 3, 4, 0, 9] {
        scheduler.send(stand_in.pid(), n).unwrap();
    }
    stop(&scheduler, &mut stand_in);
    // The third process, fed the 9 and suspended: resumed, it finishes
    // with 9; the second finished with 7 (its journal forgotten when the
    // third started), the first with 5.
    let mut last = scheduler
        .spawn(StandIn::<Sum>::new(&durability, "b", 0))
        .unwrap();
    scheduler.send(last.pid(), 0_u64).unwrap();
    let deadline = Instant::now() + WAIT;
    while !matches!(durability.status("b").unwrap(), Some(Status::Done(_))) {
        assert!(Instant::now() < deadline, "the last process never finished");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(outcome(&durability, "b"), 9);
    stop(&scheduler, &mut last);
    scheduler.shutdown(Duration::from_secs(1));
}

/// Many keys, each finished and fed again back to back, cycle after
/// cycle: every cycle reaches a fresh process, even when the one that
/// just finished still holds its key for a moment as it closes.
#[test]
fn keys_finished_and_fed_again_back_to_back_reach_a_fresh_process_every_time() {
    let (durability, scheduler) = setup();
    let keys: Vec<String> = (0..32).map(|i| format!("c{i}")).collect();
    let mut stand_ins: Vec<_> = keys
        .iter()
        .map(|key| {
            scheduler
                .spawn(StandIn::<Sum>::new(&durability, key, 0))
                .unwrap()
        })
        .collect();
    let cycles = 30_u64;
    for cycle in 1..=cycles {
        for stand_in in &stand_ins {
            scheduler.send(stand_in.pid(), cycle).unwrap();
            scheduler.send(stand_in.pid(), 0_u64).unwrap();
        }
    }
    for stand_in in &mut stand_ins {
        stop(&scheduler, stand_in);
    }
    for key in &keys {
        assert_eq!(outcome(&durability, key), cycles, "{key}");
    }
    scheduler.shutdown(Duration::from_secs(1));
}
