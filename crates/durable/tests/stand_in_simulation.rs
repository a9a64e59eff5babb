//! `StandIn` in the deterministic simulation, against a model: what a
//! router (the keyed processes of a cluster) sends to a key through its
//! stand-ins reaches the key's journals exactly once, in the order sent,
//! through everything the stand-in promises to survive:
//!
//! - stand-ins cancelled at random (a hand-off or a passivation), the
//!   router holding what comes meanwhile until the stand-in has ended,
//!   then starting the next one, as the keyed hosts do;
//! - the durable process finishing (a 0 closes it) with messages right
//!   behind it, which go to a fresh process of the key;
//! - another node taking the journal over at random moments (the store's
//!   fence then refuses the running process's appends): what was refused
//!   goes again to a process that resumes the journal;
//! - journal writes completing late, and messages arriving late (each
//!   sender's in order), at random.
//!
//! The model: the messages of every journal of the key, the forgotten
//! (finished) ones in the order they were forgotten and then the last,
//! are the messages sent, in order, each once; every journal but the last
//! ends with its 0, the only 0 it holds.
//!
//! `STAND_IN_SIM_SEEDS=2000 cargo test --release -p sched-durable --test
//! stand_in_simulation` runs more seeds; a failure names its seed, and
//! `STAND_IN_SIM_SEED=<seed>` runs that one alone.

mod fencing;

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use fencing::Fencing;
use sched::sim::{Config, Faults, Progress};
use sched_durable::prelude::*;
use sched_durable::store::{Journal, Store};
use sched_durable::{Inspection, RecordedInput, StandIn};

const KEY: &str = "k";
/// The node that takes the journal over now and then (this one is 1).
const ELSEWHERE: u32 = 2;

/// Keeps what it is sent; a 0 finishes it with all of it.
struct Log(Vec<u64>);

impl Durable for Log {
    const KIND: &'static str = "log";
    type Args = ();
    type Message = u64;
    type Done = Vec<u64>;

    fn create((): ()) -> Self {
        Log(Vec::new())
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events.typed::<Self>() {
            if let Event::Message(n) = event {
                self.0.push(n);
                if n == 0 {
                    out.finish(&self.0);
                }
            }
        }
        Ok(())
    }
}

/// A small deterministic generator (xorshift).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn one_in(&mut self, n: u64) -> bool {
        self.next().is_multiple_of(n)
    }
}

/// What the router does next.
#[derive(Debug, Clone, Copy)]
enum Op {
    /// Sends this number to the key (0 closes its process).
    Send(u64),
    /// Cancels the key's stand-in, holding what comes until it has ended.
    Cancel,
    /// Another node takes the key's journal over.
    TakeElsewhere,
    /// Runs the simulation this many decisions.
    Run(u64),
}

fn plan(seed: u64) -> Vec<Op> {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut ops = Vec::new();
    for n in 1..=40 {
        ops.push(Op::Send(if rng.one_in(8) { 0 } else { n }));
        if rng.one_in(6) {
            ops.push(Op::Cancel);
        }
        if rng.one_in(7) {
            ops.push(Op::TakeElsewhere);
        }
        if rng.one_in(2) {
            ops.push(Op::Run(rng.next() % 30));
        }
    }
    ops
}

/// The router's side: one stand-in of the key at a time, as a keyed host
/// keeps one process per key.
struct Router {
    durability: Arc<Durability>,
    current: Option<sched::Completion<()>>,
    stopping: Option<sched::Completion<()>>,
    held: VecDeque<u64>,
}

impl Router {
    fn send(&mut self, sim: &sched::sim::Simulation, n: u64) -> Result<(), String> {
        if self.stopping.is_some() {
            self.held.push_back(n);
            return Ok(());
        }
        if self.current.is_none() {
            let stand_in = StandIn::<Log>::new(&self.durability, KEY, ());
            let spawned = sim.context().spawn(stand_in).map_err(|e| e.to_string())?;
            self.current = Some(spawned);
        }
        let pid = self.current.as_ref().expect("a stand-in").pid();
        sim.context()
            .send(pid, n)
            .map_err(|e| format!("the stand-in took no {n}: {e:?}"))
    }

    fn cancel(&mut self, sim: &sched::sim::Simulation) {
        if self.stopping.is_some() {
            return;
        }
        if let Some(current) = self.current.take() {
            // Ended already (it never does on its own): its end is seen
            // below all the same.
            let _ = sim.context().cancel(current.pid());
            self.stopping = Some(current);
        }
    }

    /// After a decision: a stopped stand-in that has ended lets what was
    /// held go to the next one.
    fn settle(&mut self, sim: &sched::sim::Simulation) -> Result<(), String> {
        let Some(stopping) = self.stopping.as_mut() else {
            return Ok(());
        };
        if let Some(result) = stopping.try_take() {
            result.map_err(|e| format!("a cancelled stand-in ended abnormally: {e:?}"))?;
            self.stopping = None;
            while let Some(n) = self.held.pop_front() {
                self.send(sim, n)?;
            }
        }
        Ok(())
    }
}

/// The numbers a journal's records took, in order.
fn taken(journal: &Journal) -> Result<Vec<u64>, String> {
    let inspection = Inspection::from_journal(journal).map_err(|e| e.to_string())?;
    let mut numbers = Vec::new();
    for record in &inspection.records {
        for input in &record.inputs {
            if let RecordedInput::Message { body, .. } = input {
                numbers.push(postcard::from_bytes::<u64>(body).map_err(|e| e.to_string())?);
            }
        }
    }
    Ok(numbers)
}

fn run(seed: u64) -> Result<(), String> {
    let store = Fencing::new();
    let durability = Arc::new(Durability::for_simulation(store.clone()));
    durability.register::<Log>();
    let faults = Faults::none()
        .delay_messages(0.2, Duration::from_millis(3))
        .delay_completions(0.3, Duration::from_millis(3));
    let builder = durability.install(Scheduler::builder());
    let mut sim = builder.simulation(Config::seed(seed).workers(2).faults(faults));
    let mut router = Router {
        durability: Arc::clone(&durability),
        current: None,
        stopping: None,
        held: VecDeque::new(),
    };
    let mut sent = Vec::new();
    let mut decisions = 0_u64;
    let mut decide = |sim: &mut sched::sim::Simulation, router: &mut Router| {
        decisions += 1;
        if decisions > 2_000_000 {
            return Err("the simulation does not end".to_owned());
        }
        let progress = sim.step();
        router.settle(sim).map(|()| progress)
    };
    for op in plan(seed) {
        match op {
            Op::Send(n) => {
                router.send(&sim, n)?;
                sent.push(n);
            }
            Op::Cancel => router.cancel(&sim),
            Op::TakeElsewhere => store.take_over_as(KEY, ELSEWHERE),
            Op::Run(n) => {
                for _ in 0..n {
                    decide(&mut sim, &mut router)?;
                }
            }
        }
    }
    // The end: the last stand-in cancelled, everything run out.
    loop {
        router.cancel(&sim);
        let quiet = matches!(decide(&mut sim, &mut router)?, Progress::Quiet);
        if quiet && router.stopping.is_none() && router.current.is_none() {
            break;
        }
    }

    let mut journals = store.forgotten();
    journals.extend(store.journal(KEY).map_err(|e| e.to_string())?);
    let mut got = Vec::new();
    for (i, journal) in journals.iter().enumerate() {
        let numbers = taken(journal)?;
        let last = i + 1 == journals.len();
        let zeros = numbers.iter().filter(|&&n| n == 0).count();
        // An ended journal took one 0, its last; a running one none; only
        // the last journal may still run.
        let well_formed = if journal.ended {
            numbers.last() == Some(&0) && zeros == 1
        } else {
            last && zeros == 0
        };
        if !well_formed {
            return Err(format!(
                "journal {i} of {} (ended: {}) took {numbers:?}",
                journals.len(),
                journal.ended
            ));
        }
        got.extend(numbers);
    }
    if got != sent {
        return Err(format!("sent {sent:?}\n journaled {got:?}"));
    }
    Ok(())
}

fn seeds() -> Vec<u64> {
    if let Some(seed) = std::env::var("STAND_IN_SIM_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        return vec![seed];
    }
    let count = std::env::var("STAND_IN_SIM_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300);
    (0..count).collect()
}

#[test]
fn messages_through_stand_ins_reach_the_journals_once_in_order_over_many_seeds() {
    let mut takeovers = 0;
    for seed in seeds() {
        takeovers += plan(seed)
            .iter()
            .filter(|op| matches!(op, Op::TakeElsewhere))
            .count();
        if let Err(why) = run(seed) {
            panic!("seed {seed} (STAND_IN_SIM_SEED={seed}): {why}");
        }
    }
    eprintln!("{} seeds, {takeovers} takeovers elsewhere", seeds().len());
    assert!(takeovers > 0, "no seed took a journal elsewhere");
}
