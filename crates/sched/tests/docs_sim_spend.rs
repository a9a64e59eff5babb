//! Black-box tests of `sched::sim::spend` and of the light queues' check in
//! a simulation, written from the documentation alone:
//! `docs/guide/simulation.md` ("Running a simulation", "Checking the
//! scheduling bound", "Where a simulation differs from a running engine"),
//! `docs/guide/scheduling.md` ("Light processes first") and the changelog's
//! "Simulation: steps that take time, and light queues checked".
//!
//! Not asserted here (the first version of the documentation did not
//! say; it now does, and `a_spend_shows_at_once_and_adds_to_step_time`
//! checks it): whether `out.now()` read right after a `spend` shows it,
//! and how `Config::step_time` and `spend` combine.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sched::prelude::*;
use sched::sim::{Config, Fairness};
use sched::Priority;

const US: Duration = Duration::from_micros(1);
const MS: Duration = Duration::from_millis(1);

fn median(values: &[Duration]) -> Duration {
    assert!(!values.is_empty(), "no values to take the median of");
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    sorted[sorted.len() / 2]
}

/// Spends each of `plan` in one step, continuing between them, and
/// finishes with what each `spend` returned.
struct Spender {
    plan: Vec<Duration>,
    next: usize,
    returned: Vec<bool>,
}

impl Spender {
    fn new(plan: Vec<Duration>) -> Self {
        Spender {
            plan,
            next: 0,
            returned: Vec::new(),
        }
    }
}

impl Process for Spender {
    type Done = Vec<bool>;
    fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        if let Some(&time) = self.plan.get(self.next) {
            self.next += 1;
            self.returned.push(sched::sim::spend(time));
        }
        if self.next < self.plan.len() {
            out.continue_();
        } else {
            out.finish(std::mem::take(&mut self.returned));
        }
        Ok(())
    }
}

/// `docs/guide/simulation.md`: "`sched::sim::spend(duration)`, called in a
/// step, says that this step takes that long: the virtual clock moves by it
/// before the step ends", and "One clock for all workers. A step's `spend`
/// and `step_time` move the one virtual clock, so the steps of different
/// workers follow each other in time instead of overlapping: two workers do
/// not finish a backlog in half the virtual time one takes." With nothing
/// else moving the clock (no timers, no `step_time`), a run's virtual time
/// is exactly the sum of its spends, whatever the worker count; `spend`
/// returns `true` in each step (also for a zero spend).
#[test]
fn the_one_virtual_clock_moves_by_exactly_the_sum_of_the_spends() {
    let plans: Vec<Vec<Duration>> = (0..30u64)
        .map(|i| {
            (0..(i % 7 + 1))
                .map(|j| Duration::from_nanos((i * 7_919 + j * 104_729) % 90_001))
                .chain([Duration::ZERO])
                .collect()
        })
        .collect();
    let total: Duration = plans.iter().flatten().sum();
    let steps: u64 = plans.iter().map(|plan| plan.len() as u64).sum();
    for workers in [1, 2, 4] {
        for seed in 0..5 {
            let mut sim = Scheduler::builder().simulation(Config::seed(seed).workers(workers));
            let mut spenders = Vec::new();
            for plan in &plans {
                spenders.push(
                    sim.context()
                        .spawn(Spender::new(plan.clone()))
                        .expect("spawned"),
                );
            }
            assert!(!sched::sim::spend(Duration::from_secs(5)), "test thread");
            assert_eq!(sim.elapsed(), Duration::ZERO, "a spend outside moved it");
            sim.run().expect("quiet");
            assert!(!sched::sim::spend(Duration::from_secs(5)), "test thread");
            assert_eq!(
                sim.elapsed(),
                total,
                "{workers} workers, seed {seed}: not the sum of the spends"
            );
            assert_eq!(sim.steps(), steps, "one step per spend");
            for (spender, plan) in spenders.iter_mut().zip(&plans) {
                let returned = spender.try_take().expect("ended").expect("finished");
                assert_eq!(returned, vec![true; plan.len()], "spend in a step");
            }
        }
    }
}

/// Calls `spend` in its step from places that are not a simulated step:
/// a thread it starts during the step. Finishes with what both the step's
/// own call and the other thread's returned.
struct FromAnotherThread;

impl Process for FromAnotherThread {
    type Done = (bool, bool);
    fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        let other = std::thread::scope(|scope| {
            scope
                .spawn(|| sched::sim::spend(Duration::from_secs(3_600)))
                .join()
                .expect("the thread ended")
        });
        let own = sched::sim::spend(Duration::from_millis(2));
        out.finish((own, other));
        Ok(())
    }
}

/// `sched::sim::spend` (its doc): "Returns whether a simulated step was
/// under way on this thread; anywhere else (a running engine's step, a
/// test's own thread) it does nothing and returns `false`." Checked on the
/// test's thread, in a step of a running engine, and on a thread a
/// simulated step starts (the step under way is not on that thread: its
/// hour must not reach the clock, which moves by the step's own 2 ms).
#[test]
fn spend_is_false_and_does_nothing_outside_a_simulated_step() {
    assert!(!sched::sim::spend(Duration::from_millis(1)));
    assert!(!sched::sim::spend(Duration::ZERO));

    let scheduler = Scheduler::builder().workers(1).build();
    scheduler.start();
    let mut running = scheduler
        .spawn(Spender::new(vec![Duration::from_secs(3_600), US, MS]))
        .expect("spawned");
    let wall = Instant::now();
    let returned = running
        .wait_timeout(Duration::from_secs(60))
        .expect("the running engine's process finished");
    assert_eq!(returned, vec![false; 3], "spend in a running engine's step");
    // "does nothing": the engine did not sleep or wait out the hour.
    assert!(wall.elapsed() < Duration::from_secs(50));
    scheduler.shutdown(Duration::from_secs(5));

    let mut sim = Scheduler::builder().simulation(Config::seed(3).workers(2));
    let mut process = sim.context().spawn(FromAnotherThread).expect("spawned");
    sim.run().expect("quiet");
    let (own, other) = process.try_take().expect("ended").expect("finished");
    assert!(own, "spend in the simulated step itself");
    assert!(!other, "spend on another thread during a simulated step");
    assert_eq!(sim.elapsed(), Duration::from_millis(2));
    assert!(!sched::sim::spend(MS), "test thread after a run");
}

/// Notes `out.now()` at the start of each step, spends `spend` and
/// continues, `steps` times. Notes `out.now()` again after the spend.
struct Clocked {
    spend: Duration,
    steps: u32,
    log: Arc<Mutex<Vec<(Instant, Instant)>>>,
}

impl Process for Clocked {
    type Done = ();
    fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        let before = out.now();
        assert!(sched::sim::spend(self.spend));
        let after = out.now();
        self.log.lock().unwrap().push((before, after));
        self.steps -= 1;
        if self.steps == 0 {
            out.finish(());
        } else {
            out.continue_();
        }
        Ok(())
    }
}

/// `docs/guide/simulation.md`: "the virtual clock moves by it before the
/// step ends" and "Time is virtual: `Output::now()` and `Context::now()`
/// read it"; "`Config::step_time` makes each step take some virtual time".
/// So a step's `out.now()` is at least the previous step's plus its spend
/// (one worker, one process: nothing else runs between them), never goes
/// back within a step, and with `step_time` the run takes at least the
/// steps' `step_time` and at least the spends, at most both added.
#[test]
fn a_spend_is_seen_by_the_next_steps_clock_and_combines_with_step_time() {
    const STEPS: u32 = 40;
    let spend = Duration::from_micros(37);
    for step_time in [None, Some(Duration::from_micros(10))] {
        let log = Arc::new(Mutex::new(Vec::new()));
        let mut config = Config::seed(9).workers(1);
        if let Some(step_time) = step_time {
            config = config.step_time(step_time);
        }
        let mut sim = Scheduler::builder().simulation(config);
        let start = sim.now();
        sim.context()
            .spawn(Clocked {
                spend,
                steps: STEPS,
                log: Arc::clone(&log),
            })
            .expect("spawned");
        sim.run().expect("quiet");
        let log = log.lock().unwrap();
        assert_eq!(log.len(), STEPS as usize);
        for (i, &(before, after)) in log.iter().enumerate() {
            assert!(after >= before, "the clock went back in step {i}");
            assert!(before >= start);
            if i > 0 {
                let previous = log[i - 1].0;
                assert!(
                    before >= previous + spend,
                    "step {i} began {:?} after step {}, less than its spend {spend:?}",
                    before - previous,
                    i - 1
                );
            }
        }
        let spends = spend * STEPS;
        match step_time {
            None => assert_eq!(sim.elapsed(), spends),
            Some(step_time) => {
                let elapsed = sim.elapsed();
                let steps = step_time * STEPS;
                assert!(elapsed >= spends.max(steps), "{elapsed:?}");
                assert!(elapsed <= spends + steps, "{elapsed:?}");
                println!(
                    "step_time {step_time:?} and spend {spend:?}, {STEPS} steps: {elapsed:?} \
                     (same-step now moved: {})",
                    log.iter().any(|(before, after)| after > before)
                );
            }
        }
    }
}

/// A process of a mixed workload that never calls `spend`: it continues a
/// few steps, sleeps on a timer, pokes a partner, and starts over.
struct Plain {
    index: u32,
    partner: Option<Pid>,
    busy: u32,
    rounds: u32,
}

impl Process for Plain {
    type Done = u32;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for _ in events {}
        if self.busy > 0 {
            self.busy -= 1;
            out.continue_();
            return Ok(());
        }
        if self.rounds == 0 {
            out.finish(self.index);
            return Ok(());
        }
        self.rounds -= 1;
        self.busy = self.index % 5;
        if let Some(partner) = self.partner {
            let _ = out.send(partner, self.rounds);
        }
        out.set_timer(
            Duration::from_micros(u64::from(300 + self.index * 37)),
            Tag(0),
        );
        Ok(())
    }
}

impl Accepts for Plain {
    type Message = u32;
}

/// Runs the plain workload; returns the trace's hash, the step count and
/// the fairness report, and the script.
fn plain_run(config: Config) -> (u64, u64, Fairness, sched::sim::Script) {
    let mut sim = Scheduler::builder().simulation(config.keep_trace(false));
    let mut previous = None;
    for index in 0..60 {
        let spawned = sim
            .context()
            .spawn(Plain {
                index,
                partner: previous,
                busy: index % 3,
                rounds: 6,
            })
            .expect("spawned");
        previous = Some(spawned.pid());
    }
    for round in 0..20u32 {
        if let Some(pid) = previous {
            let _ = sim.context().send(pid, round);
        }
        sim.run_for(Duration::from_micros(250)).expect("in time");
    }
    sim.run().expect("quiet");
    let trace = sim.trace();
    (trace.hash(), trace.steps(), sim.fairness(), sim.script())
}

/// CHANGELOG ("Simulation: steps that take time"): "without `spend`, every
/// measured step takes no time, so no light queue is used and runs replay
/// as before"; `Fairness::light`: "waits in a light queue (light processes
/// first: only when steps say how long they take, `sim::spend`)";
/// simulation.md: "With the same source and the same inputs a run is the
/// same, step for step" (the same seed, and its script, give equal hashes).
/// With and without `step_time`, timers, continues, messages from steps and
/// from outside: no light wait, none over its bound, and exact replays.
#[test]
fn without_spend_no_light_queue_is_used_and_runs_replay() {
    for workers in [1, 2, 3] {
        for seed in 0..8u64 {
            let step_time = (seed % 2 == 1).then(|| Duration::from_micros(20));
            let config = || {
                let config = Config::seed(seed).workers(workers);
                match step_time {
                    Some(time) => config.step_time(time),
                    None => config,
                }
            };
            let (hash, steps, fairness, script) = plain_run(config());
            let what = format!("{workers} workers, seed {seed}, step_time {step_time:?}");
            assert!(steps > 500, "{what}: {steps} steps");
            assert!(fairness.checked > 0, "{what}: nothing checked");
            assert_eq!(fairness.light, 0, "{what}: a light queue was used");
            assert!(
                fairness.violation.is_none(),
                "{what}: {:?}",
                fairness.violation
            );
            let worst = fairness.worst.expect("waits were checked");
            assert!(!worst.light, "{what}: the worst wait was in a light queue");
            let (again, again_steps, _, _) = plain_run(config());
            assert_eq!((again, again_steps), (hash, steps), "{what}: seed replay");
            let replay = {
                let config = Config::script(script).workers(workers);
                match step_time {
                    Some(time) => config.step_time(time),
                    None => config,
                }
            };
            let (replayed, replayed_steps, _, _) = plain_run(replay);
            assert_eq!((replayed, replayed_steps), (hash, steps), "{what}: script");
        }
    }
}

/// Where the lateness of timers is written: (light?, lateness).
type Lateness = Arc<Mutex<Vec<(bool, Duration)>>>;

/// Virtual time before which nothing is measured (the workers start
/// measuring, the probes show their first light steps).
const WARM_UP: Duration = Duration::from_millis(20);

/// Wakes on its timer every `sleep`, spends `spend` in each step, and
/// notes how late each wake was stepped (its `out.now()` at the start of
/// the step against the deadline it set), from its third wake on and once
/// past `WARM_UP`: a new process "counts as heavy until a light step shows
/// otherwise", and its first step is not judged, so its first wake waits
/// with the heavy ones by design.
struct Sleeper {
    sleep: Duration,
    spend: Duration,
    light: bool,
    priority: Priority,
    deadline: Option<Instant>,
    wakes: u32,
    origin: Instant,
    lateness: Lateness,
    refused: Arc<AtomicU64>,
}

/// Spends `time`, counting in `refused` a spend that returned `false`.
fn spend_or_count(time: Duration, refused: &AtomicU64) {
    if !sched::sim::spend(time) {
        refused.fetch_add(1, Ordering::Relaxed);
    }
}

impl Process for Sleeper {
    type Done = ();
    fn init(&mut self, cx: &InitContext, _: &str, _: Payload) -> Result<(), InitError> {
        cx.set_priority(self.priority);
        Ok(())
    }
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        let now = out.now();
        let mut woken = self.deadline.is_none();
        for event in events {
            if let Event::Timer { tag: Tag(7), .. } = event {
                woken = true;
            }
        }
        if !woken {
            return Ok(());
        }
        if let Some(deadline) = self.deadline {
            assert!(now >= deadline, "a timer fired early");
            self.wakes += 1;
            if self.wakes > 2 && deadline >= self.origin + WARM_UP {
                self.lateness
                    .lock()
                    .unwrap()
                    .push((self.light, now - deadline));
            }
        }
        spend_or_count(self.spend, &self.refused);
        let deadline = now + self.sleep;
        self.deadline = Some(deadline);
        out.set_timer(deadline, Tag(7));
        Ok(())
    }
}

/// Continues forever, spending `spend` in each step.
struct Grinder {
    spend: Duration,
    refused: Arc<AtomicU64>,
}

impl Process for Grinder {
    type Done = ();
    fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        spend_or_count(self.spend, &self.refused);
        out.continue_();
        Ok(())
    }
}

/// Woken by messages from outside the simulation's steps; spends 1 µs.
struct Echo {
    refused: Arc<AtomicU64>,
}

impl Accepts for Echo {
    type Message = u32;
}

impl Process for Echo {
    type Done = ();
    fn step(&mut self, events: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
        for _ in events {}
        spend_or_count(US, &self.refused);
        Ok(())
    }
}

/// What one run of the backlog found.
struct Backlog {
    hash: u64,
    refused: u64,
    fairness: Fairness,
    light: Vec<Duration>,
    heavy: Vec<Duration>,
}

/// A heavy backlog (about 150 timer-woken processes of 50 µs steps, some `Low`, and
/// processes that continue with 20 µs steps) with light probes woken by
/// their timers (1 µs steps, one of them `High`) and by messages from
/// outside, run for 150 ms of virtual time.
fn backlog(seed: u64, workers: usize) -> Backlog {
    let lateness: Lateness = Arc::new(Mutex::new(Vec::new()));
    let refused = Arc::new(AtomicU64::new(0));
    let mut sim = Scheduler::builder().simulation(Config::seed(seed).workers(workers));
    let origin = sim.now();
    let sleeper = |sleep, spend, light, priority| Sleeper {
        sleep,
        spend,
        light,
        priority,
        deadline: None,
        wakes: 0,
        origin,
        lateness: Arc::clone(&lateness),
        refused: Arc::clone(&refused),
    };
    let heavy = Duration::from_micros(50);
    // A few more or fewer by seed: with one worker, the seed alone changes
    // nothing (one candidate at each decision).
    for i in 0..(140 + seed as u32 % 21) {
        let priority = if i % 15 == 0 {
            Priority::Low
        } else {
            Priority::Normal
        };
        sim.context()
            .spawn(sleeper(MS, heavy, false, priority))
            .expect("spawned");
    }
    for _ in 0..20 {
        sim.context()
            .spawn(Grinder {
                spend: Duration::from_micros(20),
                refused: Arc::clone(&refused),
            })
            .expect("spawned");
    }
    for i in 0..5 {
        let priority = if i == 0 {
            Priority::High
        } else {
            Priority::Normal
        };
        sim.context()
            .spawn(sleeper(Duration::from_millis(3), US, true, priority))
            .expect("spawned");
    }
    let echoes: Vec<Pid> = (0..3)
        .map(|_| {
            let echo = Echo {
                refused: Arc::clone(&refused),
            };
            sim.context().spawn(echo).expect("spawned").pid()
        })
        .collect();
    for round in 0..150u32 {
        for echo in &echoes {
            sim.context().send(*echo, round).expect("alive");
        }
        // Not `run_for`: it does not stop while steps keep the system busy
        // (the clock moved by spends and `step_time`), so the test stops
        // by the clock itself.
        let until = MS * (round + 1);
        sim.run_until(|sim| sim.elapsed() >= until)
            .expect("in time");
    }
    let fairness = sim.fairness();
    let hash = sim.trace().hash();
    let lateness = lateness.lock().unwrap();
    let (light, heavy): (Vec<_>, Vec<_>) = lateness.iter().partition(|(light, _)| *light);
    Backlog {
        hash,
        refused: refused.load(Ordering::Relaxed),
        fairness,
        light: light.into_iter().map(|(_, late)| late).collect(),
        heavy: heavy.into_iter().map(|(_, late)| late).collect(),
    }
}

/// `docs/guide/scheduling.md`, "Light processes first": "A simulation whose
/// steps say how long they take (`sched::sim::spend`) orders them the same
/// way, and its check holds every wait to these bounds"; "checks that the
/// light probes' timers are stepped well ahead of the heavy ones'".
/// simulation.md: "`fairness.light` counts the light queue's waits", and
/// every simulation checks the bound. Over 50 seeds of 1 to 3 workers: the
/// light queue is used, no wait is over its bound, the light probes' timers
/// are stepped far sooner after their deadlines than the heavy ones' (by
/// `out.now()`, the one virtual clock; a timer fires up to a 100 µs tick
/// late by itself), and a run with spends replays exactly.
#[test]
fn light_probes_go_ahead_of_a_heavy_backlog_and_every_wait_is_within_its_bound() {
    let mut light_medians = Vec::new();
    let mut heavy_medians = Vec::new();
    for seed in 0..50u64 {
        let workers = 1 + (seed % 3) as usize;
        let run = backlog(seed, workers);
        let what = format!("seed {seed}, {workers} workers");
        assert_eq!(run.refused, 0, "{what}: spend returned false in a step");
        let fairness = &run.fairness;
        assert!(fairness.checked > 1_000, "{what}: {}", fairness.checked);
        assert!(fairness.light > 0, "{what}: no light queue was used");
        assert!(fairness.light <= fairness.checked);
        if let Some(violation) = &fairness.violation {
            panic!("{what}: a wait over its bound: {violation}");
        }
        let worst = fairness.worst.as_ref().expect("waits were checked");
        assert!(worst.waited <= worst.bound, "{what}: {worst}");
        assert!(
            run.light.len() > 100,
            "{what}: {} light wakes",
            run.light.len()
        );
        assert!(
            run.heavy.len() > 500,
            "{what}: {} heavy wakes",
            run.heavy.len()
        );
        let light = median(&run.light);
        let heavy = median(&run.heavy);
        println!(
            "{what}: light median {light:?} worst {:?}, heavy median {heavy:?}",
            run.light.iter().max().unwrap()
        );
        assert!(
            light * 2 < heavy,
            "{what}: light timers' median lateness {light:?}, heavy ones' {heavy:?}"
        );
        let light_worst = *run.light.iter().max().unwrap();
        assert!(
            light_worst < heavy,
            "{what}: a light timer stepped {light_worst:?} late, heavy median {heavy:?}"
        );
        light_medians.push(light);
        heavy_medians.push(heavy);
        if seed % 10 == 0 {
            let again = backlog(seed, workers);
            assert_eq!(again.hash, run.hash, "{what}: the same seed, another run");
            assert_eq!(again.light, run.light);
            assert_eq!(again.heavy, run.heavy);
        }
    }
    println!(
        "median lateness over seeds: light {:?}, heavy {:?}",
        median(&light_medians),
        median(&heavy_medians)
    );
}

/// Spends `spend` in its first step and finishes.
struct Sloth {
    spend: Duration,
}

impl Process for Sloth {
    type Done = bool;
    fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        out.finish(sched::sim::spend(self.spend));
        Ok(())
    }
}

/// Sets a timer of `after` and finishes, when it fires, with how late it
/// was stepped.
struct Alarm {
    after: Duration,
    deadline: Option<Instant>,
}

impl Process for Alarm {
    type Done = Duration;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        let now = out.now();
        for event in events {
            if let Event::Timer { .. } = event {
                let deadline = self.deadline.expect("a timer was set");
                assert!(now >= deadline, "fired early");
                out.finish(now - deadline);
                return Ok(());
            }
        }
        if self.deadline.is_none() {
            let deadline = now + self.after;
            self.deadline = Some(deadline);
            out.set_timer(deadline, Tag(1));
        }
        Ok(())
    }
}

/// simulation.md: "the virtual clock moves by it before the step ends";
/// timers "never fire early" (cookbook.md) and "A one-hour timeout fires as
/// soon as nothing else is left to do". A step that says it takes ten
/// hours, or a hundred years, moves the clock that far without hanging the
/// run in wall time; a 1 ms timer set before it fires after it, late by
/// about that much, but fires. `Duration::MAX` (more than the clock can
/// hold; what it does is not documented) must not panic or hang either, and
/// the timer still fires.
#[test]
fn huge_spends_move_the_clock_that_far_and_late_timers_still_fire() {
    let century = Duration::from_secs(100 * 365 * 24 * 3_600);
    for (spend, workers) in [
        (Duration::from_secs(10 * 3_600), 1),
        (Duration::from_secs(10 * 3_600), 3),
        (century, 2),
    ] {
        let mut sim = Scheduler::builder().simulation(Config::seed(4).workers(workers));
        let mut alarm = sim
            .context()
            .spawn(Alarm {
                after: MS,
                deadline: None,
            })
            .expect("spawned");
        // The alarm's first step sets its timer before the sloth runs.
        sim.run_until(|sim| sim.steps() >= 1).expect("a step");
        assert_eq!(sim.steps(), 1);
        let mut sloth = sim.context().spawn(Sloth { spend }).expect("spawned");
        let wall = Instant::now();
        sim.run().expect("quiet");
        assert!(wall.elapsed() < Duration::from_secs(10), "{spend:?}: hung");
        assert!(sloth.try_take().expect("ended").expect("finished"));
        assert_eq!(sim.elapsed(), spend, "{spend:?}, {workers} workers");
        let late = alarm.try_take().expect("ended").expect("finished");
        assert!(
            late + MS >= spend && late <= spend,
            "{spend:?}: the alarm was stepped {late:?} late"
        );
    }

    let mut sim = Scheduler::builder().simulation(Config::seed(5).workers(2));
    let mut alarm = sim
        .context()
        .spawn(Alarm {
            after: MS,
            deadline: None,
        })
        .expect("spawned");
    sim.run_until(|sim| sim.steps() >= 1).expect("a step");
    let mut sloth = sim
        .context()
        .spawn(Sloth {
            spend: Duration::MAX,
        })
        .expect("spawned");
    let wall = Instant::now();
    sim.run().expect("quiet");
    assert!(
        wall.elapsed() < Duration::from_secs(10),
        "Duration::MAX: hung"
    );
    assert!(sloth.try_take().expect("ended").expect("finished"));
    let late = alarm.try_take().expect("ended").expect("finished");
    assert!(late >= century, "the alarm was stepped {late:?} late");
    println!(
        "after spend(Duration::MAX): elapsed {:?}, alarm {late:?} late",
        sim.elapsed()
    );
}

/// Spends 1 µs `times` times in its one step, then fails as `how` says.
struct Hostile {
    times: u32,
    how: &'static str,
}

impl Process for Hostile {
    type Done = ();
    fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for _ in 0..self.times {
            assert!(sched::sim::spend(US));
        }
        match self.how {
            "panic" => panic!("a hostile step"),
            "error" => Err("a hostile step".into()),
            _ => {
                out.finish(());
                Ok(())
            }
        }
    }
}

/// simulation.md: a crashed step "is a panic: the process ends `Panicked`"
/// (coming-from-tokio.md: "a panic in `step` ... is caught; the process
/// ends with `ExitError::Panicked` and the worker goes on"); `spend`'s
/// doc: it returns `true` only while "a simulated step was under way on
/// this thread". A step that spends 1 µs 10 000 times takes 10 ms; steps
/// that spend and then panic or fail end their process as any other does,
/// the simulation goes on (a later step's `spend` still counts), and no
/// step stays "under way" on the test's thread after the run.
#[test]
fn many_spends_in_one_step_add_up_and_a_failing_step_leaves_nothing_under_way() {
    let mut sim = Scheduler::builder().simulation(Config::seed(8).workers(2));
    let mut many = sim
        .context()
        .spawn(Hostile {
            times: 10_000,
            how: "finish",
        })
        .expect("spawned");
    sim.run().expect("quiet");
    many.try_take().expect("ended").expect("finished");
    assert_eq!(sim.elapsed(), Duration::from_millis(10));

    let mut panicked = sim
        .context()
        .spawn(Hostile {
            times: 3,
            how: "panic",
        })
        .expect("spawned");
    let mut failed = sim
        .context()
        .spawn(Hostile {
            times: 5,
            how: "error",
        })
        .expect("spawned");
    sim.run().expect("quiet");
    assert!(
        !sched::sim::spend(Duration::from_secs(1)),
        "a step still under way on the test thread after a failing step"
    );
    match panicked.try_take().expect("ended") {
        Err(ExitError::Panicked { .. }) => {}
        other => panic!("expected a panic, got {other:?}"),
    }
    match failed.try_take().expect("ended") {
        Err(ExitError::Step(_)) => {}
        other => panic!("expected a step error, got {other:?}"),
    }
    let after_failures = sim.elapsed();
    println!("after a panicking and a failing step: {after_failures:?} (10 ms + 8 µs if spent)");
    assert!(after_failures >= Duration::from_millis(10));
    assert!(after_failures <= Duration::from_millis(10) + 8 * US);

    // The simulation goes on, and later steps' spends count.
    let mut later = sim
        .context()
        .spawn(Spender::new(vec![MS, MS]))
        .expect("spawned");
    sim.run().expect("quiet");
    assert_eq!(
        later.try_take().expect("ended").expect("finished"),
        [true, true]
    );
    assert_eq!(sim.elapsed(), after_failures + 2 * MS);
    assert!(!sched::sim::spend(MS));
}

/// `Simulation::run_for`: "runs until that much virtual time has passed",
/// and `Config::step_time` is "for systems that never go idle". A system
/// that never goes quiet, whose steps move the clock by `spend` or by
/// `step_time`, stops soon after the duration (it used to run on to the
/// step limit, found by this file's first version).
#[test]
fn run_for_stops_when_spends_or_step_time_move_the_clock() {
    for step_time in [None, Some(Duration::from_micros(20))] {
        let mut config = Config::seed(0).workers(2).max_steps(100_000);
        if let Some(time) = step_time {
            config = config.step_time(time);
        }
        let mut sim = Scheduler::builder().simulation(config);
        let refused = Arc::new(AtomicU64::new(0));
        for _ in 0..20 {
            sim.context()
                .spawn(Grinder {
                    spend: if step_time.is_some() {
                        Duration::ZERO
                    } else {
                        20 * US
                    },
                    refused: Arc::clone(&refused),
                })
                .expect("spawned");
        }
        for round in 1..=3u32 {
            let result = sim.run_for(MS);
            assert!(
                result.is_ok() && sim.elapsed() < round * MS + 100 * US,
                "step_time {step_time:?}, round {round}: {result:?} after {} steps, {:?} of \
                 virtual time",
                sim.steps(),
                sim.elapsed()
            );
            assert!(sim.elapsed() >= round * MS, "{:?}", sim.elapsed());
        }
        assert_eq!(refused.load(Ordering::Relaxed), 0);
    }
}

/// `sched::sim::spend`: "the simulation's virtual clock moves by that
/// much at once (the step's own `out.now()` after the call shows it), on
/// top of `Config::step_time`, which moves it after the step".
#[test]
fn a_spend_shows_at_once_and_adds_to_step_time() {
    /// Spends 7 µs, reading the clock around it, `left` times.
    struct Reader {
        left: u32,
        seen: Arc<Mutex<Vec<(Instant, Instant)>>>,
    }
    impl Process for Reader {
        type Done = ();
        fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
            let before = out.now();
            assert!(sched::sim::spend(7 * US));
            self.seen.lock().unwrap().push((before, out.now()));
            self.left -= 1;
            if self.left == 0 {
                out.finish(());
            } else {
                out.continue_();
            }
            Ok(())
        }
    }
    let config = Config::seed(4).workers(1).step_time(10 * US);
    let mut sim = Scheduler::builder().simulation(config);
    let seen = Arc::new(Mutex::new(Vec::new()));
    sim.context()
        .spawn(Reader {
            left: 5,
            seen: Arc::clone(&seen),
        })
        .expect("spawned");
    sim.run().expect("runs");
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 5);
    for (i, (before, after)) in seen.iter().enumerate() {
        assert_eq!(
            *after - *before,
            7 * US,
            "step {i}: the spend shows at once"
        );
        if let Some((next, _)) = seen.get(i + 1) {
            assert_eq!(*next - *after, 10 * US, "step {i}: then the step time");
        }
    }
    assert_eq!(sim.elapsed(), 5 * (7 + 10) * US);
}
