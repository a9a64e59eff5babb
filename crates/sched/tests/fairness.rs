//! The scheduling contract under overload, checked by the simulation: every
//! wait of every process (from becoming ready to its step) stays within the
//! bound the scheduler documents for its lane's weight (level and group)
//! and the work ahead of it,
//! whatever made it ready (a message from a step, a message from outside, a
//! timer, its own continue, a spawn), across seeds; and the levels get
//! their shares.
//!
//! The bound is checked inside the simulation, at every step
//! (`Simulation::fairness`); a violation names the process and is in the
//! trace. `cargo xtask mutants ready-queue-newest-first`,
//! `levels-never-charged` (`High` strictly first) and
//! `lanes-bank-credit-while-idle` break the ready order and must make
//! `the_bound_holds_for_every_wait_under_overload` fail; so must
//! `mutants nursery-never-flushed` (what a step woke would wait in the
//! worker's nursery for as long as its chains keep it busy).
//! `mutants thief-takes-lowest-level-first` is caught by the test of
//! stealing below.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use sched::prelude::*;
use sched::process::Group;
use sched::sim::{Config, Entry, Simulation};
use sched::Priority;

/// Busy work under overload: each round, a few steps of work (continues),
/// then a timer of 1-50 ms (by its index), for `rounds` rounds. Every
/// third one also wakes a peer with a message each round.
struct Worker {
    index: u64,
    rounds: u32,
    left: u32,
    peer: Option<Pid>,
    group: Group,
}

impl Process for Worker {
    type Done = Payload;
    fn init(&mut self, cx: &InitContext, _: &str, _: Payload) -> Result<(), InitError> {
        cx.set_group(self.group);
        Ok(())
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for _ in events.by_ref() {}
        if self.left > 0 {
            self.left -= 1;
            out.continue_();
            return Ok(());
        }
        if self.rounds == 0 {
            out.finish(());
            return Ok(());
        }
        self.rounds -= 1;
        self.left = 3;
        if let Some(peer) = self.peer {
            let _ = out.send(peer, self.rounds);
        }
        let ms = 1 + (self.index * 7 + u64::from(self.rounds) * 13) % 50;
        out.set_timer(Duration::from_millis(ms), Tag(1));
        Ok(())
    }
}

/// Re-arms a 15 ms timer and answers messages, `count` times, at the
/// priority it is given.
struct Probe {
    priority: Priority,
    count: u32,
    armed: bool,
}

impl Process for Probe {
    type Done = Payload;
    fn init(&mut self, cx: &InitContext, _: &str, _: Payload) -> Result<(), InitError> {
        cx.set_priority(self.priority);
        Ok(())
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        let mut timer = false;
        for event in events.by_ref() {
            timer |= matches!(event, Event::Timer { .. });
        }
        if timer || !self.armed {
            if self.count == 0 {
                out.finish(());
            } else {
                self.count -= 1;
                self.armed = true;
                out.set_timer(Duration::from_millis(15), Tag(2));
            }
        }
        Ok(())
    }
}

/// A process that floods its level: continues `steps` times, switching
/// from `High` to `Low` half way (a step may change its level).
struct Flood {
    steps: u32,
    start: Priority,
    then: Priority,
}

impl Process for Flood {
    type Done = Payload;
    fn init(&mut self, cx: &InitContext, _: &str, _: Payload) -> Result<(), InitError> {
        cx.set_priority(self.start);
        Ok(())
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for _ in events.by_ref() {}
        self.steps -= 1;
        if self.steps == 10 {
            out.set_priority(self.then);
        }
        if self.steps == 0 {
            out.finish(());
        } else {
            out.continue_();
        }
        Ok(())
    }
}

/// One seed's overload: `workers` workers, 120 busy processes (a third
/// waking peers), 8 probes at each level, 6 floods (High turning Low, Low
/// turning High), two pairs that keep waking each other, and a message
/// from outside to a probe every 2 ms of
/// virtual time; every step takes 20 µs. Odd seeds declare two groups of
/// weights 1 and 3 and spread the busy processes over them and the
/// default group.
fn overload(seed: u64, workers: usize, keep_trace: bool) -> Simulation {
    let config = Config::seed(seed)
        .workers(workers)
        .step_time(Duration::from_micros(20))
        .keep_trace(keep_trace);
    let builder = match seed % 2 {
        1 => Scheduler::builder().group("a", 1).group("b", 3),
        _ => Scheduler::builder(),
    };
    let mut sim = builder.simulation(config);
    let groups = match seed % 2 {
        1 => vec![
            Group::DEFAULT,
            sim.context().group("a").expect("declared"),
            sim.context().group("b").expect("declared"),
        ],
        _ => vec![Group::DEFAULT],
    };
    let mut pids = Vec::new();
    for index in 0..120u64 {
        let peer = (index % 3 == 0).then(|| pids.last().copied()).flatten();
        let done = sim
            .context()
            .spawn(Worker {
                index,
                rounds: 4,
                left: 3,
                peer,
                group: groups[index as usize % groups.len()],
            })
            .expect("spawned");
        pids.push(done.pid());
    }
    let mut probes = Vec::new();
    for (i, priority) in Priority::ALL.into_iter().cycle().take(24).enumerate() {
        let done = sim
            .context()
            .spawn(Probe {
                priority,
                count: 3 + i as u32 % 3,
                armed: false,
            })
            .expect("spawned");
        probes.push(done.pid());
    }
    for i in 0..6 {
        let (start, then) = if i % 2 == 0 {
            (Priority::High, Priority::Low)
        } else {
            (Priority::Low, Priority::High)
        };
        sim.context()
            .spawn(Flood {
                steps: 60,
                start,
                then,
            })
            .expect("spawned");
    }
    // Two pairs that wake each other, one message a step, all along:
    // chains that keep a worker's nursery busy on top of what waits there.
    for _ in 0..2 {
        let spawn = |sim: &mut Simulation| {
            sim.context()
                .spawn(Ping {
                    peer: None,
                    rounds: 500,
                })
                .expect("spawned")
                .pid()
        };
        let (a, b) = (spawn(&mut sim), spawn(&mut sim));
        sim.context().send(a, b).expect("alive");
        sim.context().send(b, a).expect("alive");
    }
    for tick in 0..40 {
        let _ = sim.context().send(probes[tick % probes.len()], "outside");
        sim.run_for(Duration::from_millis(2)).expect("runs");
    }
    sim.run().expect("goes quiet");
    sim
}

#[test]
fn the_bound_holds_for_every_wait_under_overload() {
    let seeds: u64 = std::env::var("FAIRNESS_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000);
    let mut checked = 0;
    let mut closest = None::<sched::sim::Wait>;
    for seed in 0..seeds {
        let workers = 1 + (seed % 3) as usize;
        let sim = overload(seed, workers, false);
        let fairness = sim.fairness();
        if let Some(wait) = fairness.violation {
            // The same seed again, keeping its trace: the violation is in
            // it, naming the process, after the steps that led to it.
            let again = overload(seed, workers, true).trace();
            let entries = again.entries();
            let at = entries
                .iter()
                .position(|entry| matches!(entry, Entry::Unfair(w) if *w == wait))
                .expect("the violation is in the trace");
            let before: Vec<String> = entries[at.saturating_sub(12)..=at]
                .iter()
                .map(ToString::to_string)
                .collect();
            panic!(
                "seed {seed}, {workers} workers: {wait}\n...\n{}",
                before.join("\n")
            );
        }
        assert!(fairness.checked > 1_000, "seed {seed}: {fairness:?}");
        checked += fairness.checked;
        if let Some(worst) = fairness.worst {
            let ratio = |w: &sched::sim::Wait| w.waited as f64 / w.bound as f64;
            if closest.as_ref().is_none_or(|c| ratio(&worst) > ratio(c)) {
                closest = Some(worst);
            }
        }
    }
    eprintln!(
        "{seeds} seeds, {checked} waits checked; closest to its bound: {}",
        closest.expect("some wait")
    );
}

#[test]
fn a_run_within_the_bound_has_no_unfair_entry() {
    // The report and the trace agree: no violation, no `Unfair` entry, and
    // the worst wait within its bound. (Runs that break the bound are made
    // by the mutations named at the top of this file.)
    let mut sim = Scheduler::builder().simulation(Config::seed(9).workers(2));
    for i in 0..40 {
        sim.context()
            .spawn(Flood {
                steps: 30,
                start: Priority::ALL[i % 3],
                then: Priority::ALL[(i + 1) % 3],
            })
            .expect("spawned");
    }
    sim.run().expect("goes quiet");
    let fairness = sim.fairness();
    assert_eq!(fairness.violation, None);
    let worst = fairness.worst.expect("waits were checked");
    assert!(worst.waited <= worst.bound, "{worst}");
    assert!(!sim
        .trace()
        .entries()
        .iter()
        .any(|entry| matches!(entry, Entry::Unfair(_))));
}

/// Counts its steps until told to stop (a message).
struct Counter {
    priority: Priority,
    steps: u64,
}

impl Process for Counter {
    type Done = Payload;
    fn init(&mut self, cx: &InitContext, _: &str, _: Payload) -> Result<(), InitError> {
        cx.set_priority(self.priority);
        Ok(())
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        if events.next().is_some() {
            out.finish(self.steps);
        } else {
            self.steps += 1;
            out.continue_();
        }
        Ok(())
    }
}

/// The steps each level got when `counts` processes of each level (High,
/// Normal, Low) continue for 50 000 steps on one worker.
fn shares(counts: [usize; 3]) -> [u64; 3] {
    let mut sim = Scheduler::builder().simulation(Config::seed(5).workers(1));
    let mut all = Vec::new();
    for (level, &count) in Priority::ALL.iter().zip(&counts) {
        for _ in 0..count {
            let done = sim
                .context()
                .spawn(Counter {
                    priority: *level,
                    steps: 0,
                })
                .expect("spawned");
            all.push((level_index(*level), done));
        }
    }
    for _ in 0..50_000 {
        sim.step();
    }
    for (_, done) in &all {
        sim.context().send(done.pid(), "stop").expect("alive");
    }
    sim.run().expect("goes quiet");
    let mut steps = [0u64; 3];
    for (level, mut done) in all {
        let outcome = done.try_take().expect("ended").expect("finished");
        steps[level] += *outcome.downcast_ref::<u64>().expect("its count");
    }
    steps
}

fn level_index(level: Priority) -> usize {
    Priority::ALL
        .iter()
        .position(|&p| p == level)
        .expect("a level")
}

#[test]
fn each_level_gets_its_weight_s_share_under_saturation() {
    let share =
        |steps: [u64; 3], level: usize| steps[level] as f64 / steps.iter().sum::<u64>() as f64;
    // All three saturated: weights 12, 3 and 1, of 16.
    let all = shares([20, 20, 20]);
    assert!((share(all, 0) - 0.75).abs() < 0.02, "{all:?}");
    assert!((share(all, 1) - 0.1875).abs() < 0.02, "{all:?}");
    assert!((share(all, 2) - 0.0625).abs() < 0.01, "{all:?}");
    // A `High` flood: `Low` gets its weight among the levels with work,
    // 1 of 13 (`Normal`'s weight, with `Normal` empty, is nobody's).
    let flood = shares([50, 0, 5]);
    assert!((share(flood, 2) - 1.0 / 13.0).abs() < 0.005, "{flood:?}");
    // `Normal` and `Low`: 3 to 1.
    let calm = shares([0, 20, 20]);
    assert!((share(calm, 2) - 0.25).abs() < 0.01, "{calm:?}");
    // One level alone gets every step.
    let low_only = shares([0, 0, 10]);
    assert!(share(low_only, 2) > 0.99, "{low_only:?}");
}

/// Sends `rounds` messages back and forth with its peer (told by the
/// first message), one per step: each wakes the other into the `next`
/// slot.
struct Ping {
    peer: Option<Pid>,
    rounds: u32,
}

impl Process for Ping {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            if let Event::Message(m) = event {
                if let Some(peer) = m.payload::<Pid>() {
                    self.peer = Some(*peer);
                }
                if self.rounds == 0 {
                    out.finish(());
                    return Ok(());
                }
                self.rounds -= 1;
                let peer = self.peer.expect("told its peer");
                out.send(peer, out.pid())?;
            }
        }
        Ok(())
    }
}

/// Continues, counting its steps in `steps`, until told to stop.
struct Tally {
    priority: Priority,
    steps: Arc<AtomicU64>,
}

impl Process for Tally {
    type Done = ();
    fn init(&mut self, cx: &InitContext, _: &str, _: Payload) -> Result<(), InitError> {
        cx.set_priority(self.priority);
        Ok(())
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        if events.next().is_some() {
            out.finish(());
        } else {
            self.steps.fetch_add(1, Relaxed);
            out.continue_();
        }
        Ok(())
    }
}

/// Spawns a `Low` tally from its step when a message comes, and tells
/// `child` its PID.
struct Spawner {
    steps: Arc<AtomicU64>,
    child: Arc<std::sync::Mutex<Option<Pid>>>,
}

impl Process for Spawner {
    type Done = ();
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        if events.next().is_some() {
            let steps = Arc::clone(&self.steps);
            let pid = out.spawn(Tally {
                priority: Priority::Low,
                steps,
            })?;
            *self.child.lock().expect("not poisoned") = Some(pid.pid());
            out.finish(());
        }
        Ok(())
    }
}

#[test]
fn a_level_back_from_idle_banks_no_credit() {
    // One worker: `High` and `Normal` processes compete for 20 000 steps
    // while `Low` has nothing ready; then a step spawns a `Low` process
    // (so it joins the worker's own queues, not through the global ones).
    // It gets `Low`'s share from there on (1 step in 16), not a run of
    // steps making up for the time `Low` had nothing to run.
    let mut sim = Scheduler::builder().simulation(Config::seed(11).workers(1));
    let busy = Arc::new(AtomicU64::new(0));
    let mut all = Vec::new();
    for priority in [Priority::High, Priority::Normal] {
        for _ in 0..20 {
            let steps = Arc::clone(&busy);
            let done = sim
                .context()
                .spawn(Tally { priority, steps })
                .expect("spawned");
            all.push(done.pid());
        }
    }
    let (low, child) = (Arc::new(AtomicU64::new(0)), Arc::default());
    let spawner = Spawner {
        steps: Arc::clone(&low),
        child: Arc::clone(&child),
    };
    let spawner = sim.context().spawn(spawner).expect("spawned").pid();
    for _ in 0..20_000 {
        sim.step();
    }
    sim.context().send(spawner, ()).expect("alive");
    let start = busy.load(Relaxed);
    while busy.load(Relaxed) + low.load(Relaxed) < start + 1_600 {
        sim.step();
    }
    let steps = low.load(Relaxed);
    let child = child.lock().expect("not poisoned").expect("spawned");
    for pid in all.into_iter().chain([child]) {
        sim.context().send(pid, "stop").expect("alive");
    }
    sim.run().expect("goes quiet");
    // About 100 of the 1 600.
    assert!(
        (20..=300).contains(&steps),
        "a Low process that came after 20 000 steps of High and Normal work got {steps} of the \
         next 1 600 steps: its share is about 100"
    );
    assert_eq!(sim.fairness().violation, None);
}

/// Counts its steps that read messages in `read`, until told to stop by an
/// empty message.
struct Echo {
    priority: Priority,
    read: Arc<AtomicU64>,
}

impl Process for Echo {
    type Done = ();
    fn init(&mut self, cx: &InitContext, _: &str, _: Payload) -> Result<(), InitError> {
        cx.set_priority(self.priority);
        Ok(())
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        let mut read = false;
        for event in events {
            if let Event::Message(message) = event {
                if message.payload::<()>().is_some() {
                    out.finish(());
                    return Ok(());
                }
                read = true;
            }
        }
        self.read.fetch_add(u64::from(read), Relaxed);
        Ok(())
    }
}

#[test]
fn outside_wakeups_are_taken_by_the_levels_weights() {
    // One worker; messages from outside (the global queues) to 100 `High`
    // and 100 `Low` processes, five to each level per step of the worker,
    // more than it can step: the global queues of both levels stay full.
    // The worker takes from them by the levels' weights, 12 to 1, so
    // `Low` gets about a thirteenth of the steps; taking `High`'s first
    // whenever it has work would leave `Low` none.
    let mut sim = Scheduler::builder().simulation(Config::seed(9).workers(1));
    let spawn = |priority| {
        let read = Arc::new(AtomicU64::new(0));
        let all = (0..100)
            .map(|_| {
                let read = Arc::clone(&read);
                sim.context()
                    .spawn(Echo { priority, read })
                    .expect("spawned")
            })
            .collect::<Vec<_>>();
        (all, read)
    };
    let ((high, high_read), (low, low_read)) = (spawn(Priority::High), spawn(Priority::Low));
    sim.run().expect("started");
    for round in 0..20_000usize {
        for i in 0..5 {
            let to = (round * 5 + i) % 100;
            sim.context().send(high[to].pid(), 1u8).expect("alive");
            sim.context().send(low[to].pid(), 1u8).expect("alive");
        }
        sim.step();
    }
    let (high_read, low_read) = (high_read.load(Relaxed), low_read.load(Relaxed));
    for done in high.iter().chain(&low) {
        sim.context().send(done.pid(), ()).expect("alive");
    }
    sim.run().expect("goes quiet");
    let share = low_read as f64 / (high_read + low_read) as f64;
    assert!(
        (0.04..=0.12).contains(&share),
        "Low was woken from outside for {low_read} steps to High's {high_read} ({:.1} %): about \
         1/13 (7.7 %)",
        share * 100.0
    );
}

#[test]
fn the_next_slot_does_not_jump_ahead_of_higher_level_work() {
    // One worker: a `High` process that keeps continuing, beside two
    // `Normal` ones that wake each other (the `next` slot's case). While
    // the `High` one is ready, a `Normal` step is never followed by
    // another `Normal` step: the woken partner goes to its queue instead
    // of running from the slot, and the turns give `High` the next pick.
    let mut sim = Scheduler::builder().simulation(Config::seed(4).workers(1));
    let high = sim
        .context()
        .spawn(Counter {
            priority: Priority::High,
            steps: 0,
        })
        .expect("spawned");
    let a = sim
        .context()
        .spawn(Ping {
            peer: None,
            rounds: 200,
        })
        .expect("spawned");
    let b = sim
        .context()
        .spawn(Ping {
            peer: None,
            rounds: 200,
        })
        .expect("spawned");
    sim.run_until(|sim| sim.steps() >= 20).expect("runs");
    sim.context().send(a.pid(), b.pid()).expect("alive");
    sim.context().send(b.pid(), a.pid()).expect("alive");
    sim.run_until(|sim| sim.steps() >= 600).expect("runs");
    let pings = [a.pid(), b.pid()];
    let stepped: Vec<Pid> = sim
        .trace()
        .entries()
        .iter()
        .filter_map(|entry| match entry {
            Entry::Step { pid, .. } => Some(*pid),
            _ => None,
        })
        .collect();
    let normal_pairs = stepped
        .windows(2)
        .filter(|w| pings.contains(&w[0]) && pings.contains(&w[1]))
        .count();
    let normal_steps = stepped.iter().filter(|p| pings.contains(p)).count();
    assert!(normal_steps > 50, "the pair ran {normal_steps} steps");
    assert_eq!(
        normal_pairs, 0,
        "a woken Normal process ran ahead of High work"
    );
    sim.context().send(high.pid(), "stop").expect("alive");
}

/// Spawns `count` `Low` and then `count` `High` counters in its first
/// step, noting the `High` ones' PIDs, and finishes.
struct Brood {
    count: usize,
    high: std::sync::Arc<std::sync::Mutex<Vec<Pid>>>,
}

impl Process for Brood {
    type Done = Payload;
    fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for priority in [Priority::Low, Priority::High] {
            for _ in 0..self.count {
                let child = out.spawn(Counter { priority, steps: 0 })?;
                if priority == Priority::High {
                    self.high.lock().expect("not poisoned").push(child.pid());
                }
            }
        }
        out.finish(());
        Ok(())
    }
}

#[test]
fn a_thief_takes_the_highest_level_first() {
    // Two workers; one step on one of them spawns 20 `Low` then 20 `High`
    // processes, all queued on that worker. The idle worker steals, and
    // the first process it runs is a `High` one, whichever it took.
    for seed in 0..20 {
        let mut sim = Scheduler::builder().simulation(Config::seed(seed).workers(2));
        let high = std::sync::Arc::default();
        let brood = sim
            .context()
            .spawn(Brood {
                count: 20,
                high: std::sync::Arc::clone(&high),
            })
            .expect("spawned")
            .pid();
        sim.run_until(|sim| sim.steps() >= 400).expect("runs");
        let trace = sim.trace();
        let steps: Vec<(usize, Pid)> = trace
            .entries()
            .iter()
            .filter_map(|entry| match entry {
                Entry::Step { worker, pid, .. } => Some((*worker, *pid)),
                _ => None,
            })
            .collect();
        let parent = steps
            .iter()
            .find(|(_, pid)| *pid == brood)
            .expect("the brood stepped")
            .0;
        let (_, first_stolen) = steps
            .iter()
            .find(|(worker, pid)| *worker != parent && *pid != brood)
            .expect("the other worker ran a child");
        let high = high.lock().expect("not poisoned");
        assert_eq!(high.len(), 20);
        assert!(
            high.contains(first_stolen),
            "seed {seed}: the thief first ran {first_stolen}, a Low process"
        );
    }
}

/// Waits for messages, at the level its `init` chose if any.
struct Child {
    choose: Option<Priority>,
}

impl Process for Child {
    type Done = Payload;
    fn init(&mut self, cx: &InitContext, _: &str, _: Payload) -> Result<(), InitError> {
        if let Some(level) = self.choose {
            cx.set_priority(level);
        }
        Ok(())
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        if events.next().is_some() {
            out.finish(());
        }
        Ok(())
    }
}

/// At `level`, spawns a child that does not choose its level and one that
/// chooses `Normal`, noting their PIDs.
struct Parent {
    level: Priority,
    children: std::sync::Arc<std::sync::Mutex<Vec<Pid>>>,
}

impl Process for Parent {
    type Done = Payload;
    fn init(&mut self, cx: &InitContext, _: &str, _: Payload) -> Result<(), InitError> {
        cx.set_priority(self.level);
        Ok(())
    }

    fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for choose in [None, Some(Priority::Normal)] {
            let child = out.spawn(Child { choose })?;
            self.children
                .lock()
                .expect("not poisoned")
                .push(child.pid());
        }
        out.finish(());
        Ok(())
    }
}

#[test]
fn a_child_starts_at_its_parents_level_unless_it_chooses() {
    let mut sim = Scheduler::builder().simulation(Config::seed(1).workers(2));
    let mut families = Vec::new();
    for level in Priority::ALL {
        let children = std::sync::Arc::default();
        sim.context()
            .spawn(Parent {
                level,
                children: std::sync::Arc::clone(&children),
            })
            .expect("spawned");
        families.push((level, children));
    }
    let outside = sim
        .context()
        .spawn(Child { choose: None })
        .expect("spawned")
        .pid();
    sim.run().expect("goes quiet");
    let level_of = |sim: &Simulation, pid: Pid| {
        sim.context()
            .process_info(pid)
            .expect("still waiting")
            .priority
    };
    for (level, children) in families {
        let children = children.lock().expect("not poisoned");
        assert_eq!(level_of(&sim, children[0]), level, "inherited");
        assert_eq!(level_of(&sim, children[1]), Priority::Normal, "chosen");
    }
    assert_eq!(level_of(&sim, outside), Priority::Normal, "from outside");
}
