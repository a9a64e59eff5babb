//! Black-box tests of "priority levels are weights of one order", written
//! from the documentation alone: `docs/guide/scheduling.md` ("The
//! contract", "Priorities", "Groups: shares between tenants", "Light
//! processes first", "What to use when"), the changelog's "Priorities are
//! weights of one order, shared with groups" and the rustdoc of
//! `sched::Priority`.
//!
//! The promises attacked:
//!
//! 1. `High` 12, `Normal` 3, `Low` 1: under saturation each level with work
//!    ready gets its weight over the sum of the weights of the levels with
//!    work (12/16, 3/16, 1/16; 12/13 and 1/13; 3:1; 12/15 and 3/15), and a
//!    level with nothing ready leaves its share to the others by weight; a
//!    level back from idle banks no credit.
//! 2. It is a share of time, not of steps.
//! 3. Nothing starves: `Normal` at least 3/16, `Low` at least 1/16.
//! 4. With one level ready, it gets every step.
//! 5. A `High` process that becomes ready with no other `High` work ahead
//!    waits at most a few picks (three when steps cost alike), whatever
//!    the other levels' backlog.
//! 6. With groups, a lane weighs its level's weight times its group's.
//! 7. In a simulation every step is charged alike (also one that
//!    `spend`s virtual time), so shares are of steps, deterministic for a
//!    seed, and `sim.fairness()` reports no violation.
//!
//! Exact checks use the simulation (deterministic, so tolerances are
//! tight: a fraction of a point). Time shares on a running engine use one
//! worker and spinning steps; each step times itself (wall clock, from
//! entry to exit), which is what the engine charges too ("the time the OS
//! takes a worker's core away is charged to the step it interrupted"), so
//! the ratios hold on a loaded machine and the tolerances only need to
//! absorb noise and the engine's own per-step overhead. The running-engine
//! tests take a lock so that they run one at a time.
//!
//! Each test prints what it measured (`--nocapture` shows it).
//!
//! Written first against a guide that promised "at most three picks" to a
//! `High` process however it became ready, and outside work taken by the
//! levels' weights: three tests failed (a `High` process made ready from
//! another thread waited 18-59 equal steps; 300 `Normal` processes spawned
//! from outside after 300 `Low` ones got none of the first 1 000 steps).
//! The guide now says what the scheduler does (up to 61 steps in the
//! global queue first; outside spawns taken in spawn order, then served by
//! weight), and those tests check that.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use sched::prelude::*;
use sched::process::Group;
use sched::sim::{Config, Entry, Fairness, Simulation};
use sched::Priority;

const US: Duration = Duration::from_micros(1);

/// How many tally slots a test may use (a level, or a lane).
const SLOTS: usize = 8;

static SERIAL: Mutex<()> = Mutex::new(());

/// One running-engine test at a time: each uses one worker, and the
/// machine may have two cores shared with other programs.
fn serial() -> MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn spin(how_long: Duration) {
    if how_long.is_zero() {
        return;
    }
    let start = Instant::now();
    while start.elapsed() < how_long {
        std::hint::spin_loop();
    }
}

/// What the spinning processes did: steps and self-timed nanoseconds per
/// slot, and (when `logging`) the slot of every step in order.
#[derive(Default)]
struct Tally {
    steps: [AtomicU64; SLOTS],
    nanos: [AtomicU64; SLOTS],
    logging: std::sync::atomic::AtomicBool,
    log: Mutex<Vec<u8>>,
}

impl Tally {
    fn steps(&self) -> [u64; SLOTS] {
        std::array::from_fn(|i| self.steps[i].load(Relaxed))
    }
    fn nanos(&self) -> [u64; SLOTS] {
        std::array::from_fn(|i| self.nanos[i].load(Relaxed))
    }
    fn total_steps(&self) -> u64 {
        self.steps().iter().sum()
    }
}

fn delta(after: [u64; SLOTS], before: [u64; SLOTS]) -> [u64; SLOTS] {
    std::array::from_fn(|i| after[i] - before[i])
}

fn shares(counts: [u64; SLOTS]) -> [f64; SLOTS] {
    let total: u64 = counts.iter().sum();
    assert!(total > 0, "nothing counted");
    counts.map(|c| c as f64 / total as f64)
}

/// A process that stays ready: each step it `spend`s `spend` (simulated
/// time) and spins `spin` (real time), counts itself in its slot and
/// continues. It finishes at a message or a cancel, or after `left`
/// steps. After `switch.0` of its own steps it moves itself to
/// `switch.1`'s level and counts in `switch.2`'s slot.
struct Spinner {
    level: Priority,
    group: Option<Group>,
    slot: usize,
    spend: Duration,
    spin: Duration,
    left: Option<u32>,
    switch: Option<(u64, Priority, usize)>,
    own: u64,
    tally: Arc<Tally>,
}

impl Spinner {
    fn new(level: Priority, slot: usize, tally: &Arc<Tally>) -> Self {
        Spinner {
            level,
            group: None,
            slot,
            spend: Duration::ZERO,
            spin: Duration::ZERO,
            left: None,
            switch: None,
            own: 0,
            tally: Arc::clone(tally),
        }
    }
    fn group(mut self, group: Group) -> Self {
        self.group = Some(group);
        self
    }
    fn spend(mut self, spend: Duration) -> Self {
        self.spend = spend;
        self
    }
    fn spin(mut self, spin: Duration) -> Self {
        self.spin = spin;
        self
    }
}

impl Process for Spinner {
    type Done = ();
    fn init(&mut self, cx: &InitContext, _: &str, _: Payload) -> Result<(), InitError> {
        cx.set_priority(self.level);
        if let Some(group) = self.group {
            cx.set_group(group);
        }
        Ok(())
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        let mut stop = false;
        for event in events {
            if matches!(event, Event::Message(_) | Event::Cancel) {
                stop = true;
            }
        }
        if stop {
            out.finish(());
            return Ok(());
        }
        let start = Instant::now();
        if !self.spend.is_zero() {
            sched::sim::spend(self.spend);
        }
        spin(self.spin);
        let took = start.elapsed();
        self.tally.steps[self.slot].fetch_add(1, Relaxed);
        self.tally.nanos[self.slot].fetch_add(took.as_nanos() as u64, Relaxed);
        if self.tally.logging.load(Relaxed) {
            self.tally.log.lock().unwrap().push(self.slot as u8);
        }
        self.own += 1;
        if let Some((after, level, slot)) = self.switch {
            if self.own == after {
                out.set_priority(level);
                self.slot = slot;
            }
        }
        match &mut self.left {
            Some(0) => out.finish(()),
            Some(left) => {
                *left -= 1;
                out.continue_();
            }
            None => out.continue_(),
        }
        Ok(())
    }
}

/// Waits, never ready, at its level: a level whose processes all wait has
/// nothing ready. Finishes at a message.
struct Parked {
    level: Priority,
}

impl Process for Parked {
    type Done = ();
    fn init(&mut self, cx: &InitContext, _: &str, _: Payload) -> Result<(), InitError> {
        cx.set_priority(self.level);
        Ok(())
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        if events.next().is_some() {
            out.finish(());
        }
        Ok(())
    }
}

/// Tells every process to stop and lets the simulation go quiet.
fn sim_stop(sim: &mut Simulation, all: &[Pid]) {
    for &pid in all {
        let _ = sim.context().send(pid, "stop");
    }
    sim.run().expect("goes quiet");
}

/// Tells every process of a running engine to stop, waits for each, and
/// shuts the engine down.
fn engine_stop(scheduler: Scheduler, all: Vec<Completion<()>>) {
    for done in &all {
        let _ = scheduler.send(done.pid(), "stop");
    }
    for mut done in all {
        let _ = done.wait_timeout(Duration::from_secs(10));
    }
    scheduler.shutdown(Duration::from_secs(5));
}

/// What a level-share run of the simulation measured: the steps of each
/// level (in all, and on each worker), the trace's hash and the
/// simulation's fairness report.
struct LevelRun {
    steps: [u64; 3],
    per_worker: Vec<[u64; 3]>,
    hash: u64,
    fairness: Fairness,
}

/// One level-share run of the simulation: `counts` continuing processes at
/// `High`, `Normal`, `Low` (slots 0, 1, 2), and three parked processes at
/// each level that has none ready. Measures `measure` steps after a
/// warm-up of 2 000; asserts that the fairness report has no violation.
fn sim_level_run(seed: u64, workers: usize, counts: [usize; 3], measure: u64) -> LevelRun {
    let mut sim = Scheduler::builder().simulation(Config::seed(seed).workers(workers));
    let tally = Arc::new(Tally::default());
    let mut all = Vec::new();
    let mut slot_of = Vec::new();
    for (slot, (&level, &count)) in Priority::ALL.iter().zip(&counts).enumerate() {
        for _ in 0..count {
            let pid = sim
                .context()
                .spawn(Spinner::new(level, slot, &tally))
                .expect("spawned")
                .pid();
            all.push(pid);
            slot_of.push((pid, slot));
        }
        if count == 0 {
            for _ in 0..3 {
                let pid = sim
                    .context()
                    .spawn(Parked { level })
                    .expect("spawned")
                    .pid();
                all.push(pid);
            }
        }
    }
    sim.run_until(|sim| sim.steps() >= 2_000).expect("runs");
    let before = tally.steps();
    let from = sim.trace().entries().len();
    let target = sim.steps() + measure;
    sim.run_until(|sim| sim.steps() >= target).expect("runs");
    let steps = delta(tally.steps(), before);
    let mut per_worker = vec![[0u64; 3]; workers];
    for entry in &sim.trace().entries()[from..] {
        if let Entry::Step { worker, pid, .. } = entry {
            if let Some((_, slot)) = slot_of.iter().find(|(p, _)| p == pid) {
                per_worker[*worker][*slot] += 1;
            }
        }
    }
    let hash = sim.trace().hash();
    sim_stop(&mut sim, &all);
    let fairness = sim.fairness();
    assert_eq!(
        fairness.violation, None,
        "seed {seed}, {counts:?}: {:?}",
        fairness.worst
    );
    LevelRun {
        steps: [steps[0], steps[1], steps[2]],
        per_worker,
        hash,
        fairness,
    }
}

fn share3(steps: [u64; 3]) -> [f64; 3] {
    let total: u64 = steps.iter().sum();
    assert!(total > 0, "no steps");
    steps.map(|s| s as f64 / total as f64)
}

/// Promises 1, 3, 4 and 7, in steps, on one simulated worker: each
/// combination of ready levels gets the weights of the levels with work,
/// whatever the number of processes at each level (1 `High` process
/// against 30 `Low` ones still gets 12/13), and with the other levels'
/// processes present but parked (nothing ready), so that "a level with
/// nothing ready leaves its share to the others by weight" is what is
/// tested. Tolerance: 0.4 points on 40 000 deterministic steps, enough
/// for the stride's rounding and small enough to tell `Low`'s 1/13
/// (7.69 %) from the old turns' 1/16 (6.25 %) and `Normal`:`Low` 3:1
/// (25 %) from the old 15:1 (6.25 %).
#[test]
fn sim_each_level_gets_its_weight_over_the_levels_with_work() {
    let cases: [([usize; 3], [f64; 3]); 8] = [
        ([3, 40, 7], [12.0 / 16.0, 3.0 / 16.0, 1.0 / 16.0]),
        ([30, 3, 1], [12.0 / 16.0, 3.0 / 16.0, 1.0 / 16.0]),
        ([1, 0, 30], [12.0 / 13.0, 0.0, 1.0 / 13.0]),
        ([50, 0, 5], [12.0 / 13.0, 0.0, 1.0 / 13.0]),
        ([0, 2, 40], [0.0, 0.75, 0.25]),
        ([25, 4, 0], [12.0 / 15.0, 3.0 / 15.0, 0.0]),
        ([0, 0, 10], [0.0, 0.0, 1.0]),
        ([0, 7, 0], [0.0, 1.0, 0.0]),
    ];
    for (i, (counts, want)) in cases.into_iter().enumerate() {
        let run = sim_level_run(20 + i as u64, 1, counts, 40_000);
        let got = share3(run.steps);
        eprintln!(
            "counts {counts:?}: steps {:?}, shares {:.4?} (want {:.4?}), {} waits checked",
            run.steps, got, want, run.fairness.checked
        );
        for ((level, got), want) in Priority::ALL.iter().zip(got).zip(want) {
            assert!(
                (got - want).abs() < 0.004,
                "counts {counts:?}: {} had {got:.4} of the steps, not {want:.4} ({:?})",
                level.name(),
                run.steps
            );
        }
        // Nothing starves: each level with work gets its minimum.
        if counts[1] > 0 {
            assert!(got[1] >= 3.0 / 16.0 - 0.004, "{counts:?}: {got:?}");
        }
        if counts[2] > 0 {
            assert!(got[2] >= 1.0 / 16.0 - 0.004, "{counts:?}: {got:?}");
        }
    }
}

/// Promises 1, 3 and 7 on two simulated workers: with 20 processes at each
/// level spawned from outside, the work spreads and every worker serves
/// the levels 12 : 3 : 1 (the shares are kept per worker; "on every worker
/// where they have work ready"). Tolerance: 1.5 points per worker (a
/// worker's steps are half as many as on one worker, and a process moved
/// between workers shifts a few), still far from strict priority (0 %
/// for `Low`) or a pool where one worker serves no `Low` at all.
#[test]
fn sim_two_workers_each_serve_the_levels_by_weight() {
    let want = [12.0 / 16.0, 3.0 / 16.0, 1.0 / 16.0];
    for seed in [3, 8] {
        let run = sim_level_run(seed, 2, [20, 20, 20], 60_000);
        let pool = share3(run.steps);
        eprintln!(
            "seed {seed}, 2 workers: pool {:?} = {:.4?}, per worker {:?}",
            run.steps, pool, run.per_worker
        );
        for (got, want) in pool.iter().zip(want) {
            assert!(
                (got - want).abs() < 0.015,
                "seed {seed}: pool shares {pool:.4?}, not {want:.4?}"
            );
        }
        for (worker, steps) in run.per_worker.iter().enumerate() {
            let got = share3(*steps);
            for (share, want_share) in got.iter().zip(want) {
                assert!(
                    (share - want_share).abs() < 0.015,
                    "seed {seed}, worker {worker}: shares {got:.4?} ({steps:?}), not {want:.4?}"
                );
            }
        }
    }
}

/// Promise 7: a simulation's shares are deterministic for a seed: the
/// same seed twice gives the same steps at each level and the same trace
/// (hash), on one and on two workers.
#[test]
fn sim_shares_are_deterministic_for_a_seed() {
    for workers in [1, 2] {
        let first = sim_level_run(42, workers, [5, 9, 4], 20_000);
        let second = sim_level_run(42, workers, [5, 9, 4], 20_000);
        eprintln!(
            "{workers} worker(s), seed 42 twice: {:?} / {:?}",
            first.steps, second.steps
        );
        assert_eq!(first.steps, second.steps, "{workers} worker(s)");
        assert_eq!(first.per_worker, second.per_worker, "{workers} worker(s)");
        assert_eq!(first.hash, second.hash, "{workers} worker(s)");
    }
}

/// Waits at `Normal` until told "go", then stays ready for `burst` steps
/// (continues), counting in slot 1, and waits again; finishes at "stop".
struct Burst {
    burst: u32,
    left: u32,
    tally: Arc<Tally>,
}

impl Process for Burst {
    type Done = ();
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            if let Event::Message(m) = event {
                match m.payload::<&'static str>().copied() {
                    Some("go") => self.left = self.burst,
                    _ => {
                        out.finish(());
                        return Ok(());
                    }
                }
            }
        }
        if self.left > 0 {
            self.left -= 1;
            self.tally.steps[1].fetch_add(1, Relaxed);
            if self.tally.logging.load(Relaxed) {
                self.tally.log.lock().unwrap().push(1);
            }
            out.continue_();
        }
        Ok(())
    }
}

/// Promise 1, "a level that had nothing ready banks no credit: it starts
/// again from where the others are": on one simulated worker, `High` and
/// `Low` run alone for 20 000 steps while 10 `Normal` processes wait; then
/// all 10 are told to go (100 steps each). From that moment `Normal` gets
/// its 3/16 (60 of the next 320 steps, 300 of the next 1 600), not the
/// whole worker until it has caught up with 20 000 steps of charge; and it
/// does not start behind either: its first step comes within one round of
/// 16 picks. Tolerances: a third of the expected counts, far from "all
/// 320" (credit banked) and from 0 (starting behind).
#[test]
fn sim_a_level_back_from_idle_banks_no_credit() {
    let mut sim = Scheduler::builder().simulation(Config::seed(13).workers(1));
    let tally = Arc::new(Tally::default());
    let mut all = Vec::new();
    for (level, slot, n) in [(Priority::High, 0, 10), (Priority::Low, 2, 10)] {
        for _ in 0..n {
            all.push(
                sim.context()
                    .spawn(Spinner::new(level, slot, &tally))
                    .expect("spawned")
                    .pid(),
            );
        }
    }
    let bursts: Vec<Pid> = (0..10)
        .map(|_| {
            sim.context()
                .spawn(Burst {
                    burst: 100,
                    left: 0,
                    tally: Arc::clone(&tally),
                })
                .expect("spawned")
                .pid()
        })
        .collect();
    all.extend(&bursts);
    sim.run_until(|sim| sim.steps() >= 20_000).expect("runs");
    let idle = tally.steps();
    assert_eq!(idle[1], 0, "Normal had nothing ready");
    let low_alone = idle[2] as f64 / (idle[0] + idle[2]) as f64;
    tally.logging.store(true, Relaxed);
    for &pid in &bursts {
        sim.context().send(pid, "go").expect("alive");
    }
    sim.run_until(|_| tally.log.lock().unwrap().len() >= 1_600)
        .expect("runs");
    tally.logging.store(false, Relaxed);
    let log = tally.log.lock().unwrap().clone();
    let count =
        |range: std::ops::Range<usize>, slot: u8| log[range].iter().filter(|&&s| s == slot).count();
    let first_normal = log.iter().position(|&s| s == 1);
    let normal_320 = count(0..320, 1);
    let low_320 = count(0..320, 2);
    let normal_1600 = count(0..1_600, 1);
    let longest_normal_run = log[..1_600]
        .split(|&s| s != 1)
        .map(<[u8]>::len)
        .max()
        .unwrap_or(0);
    eprintln!(
        "High+Low alone: Low {:.4} of the steps; Normal back: first step after {first_normal:?}, \
         {normal_320}/320 then {normal_1600}/1600 (3/16: 60 and 300), Low {low_320}/320, \
         longest Normal run {longest_normal_run}",
        low_alone
    );
    sim_stop(&mut sim, &all);
    assert_eq!(sim.fairness().violation, None, "{:?}", sim.fairness().worst);
    assert!((low_alone - 1.0 / 13.0).abs() < 0.004, "{low_alone}");
    assert!(
        first_normal.is_some_and(|at| at <= 16),
        "Normal back from idle started behind: its first step after {first_normal:?} steps"
    );
    assert!(
        (40..=80).contains(&normal_320),
        "Normal back from idle had {normal_320} of the next 320 steps, not about 60 (3/16): \
         credit banked while idle?"
    );
    assert!(
        (200..=400).contains(&normal_1600),
        "Normal back from idle had {normal_1600} of the next 1 600 steps, not about 300"
    );
    assert!(
        low_320 >= 10,
        "Low had {low_320} of 320 steps when Normal came back"
    );
    assert!(
        longest_normal_run <= 8,
        "Normal ran {longest_normal_run} steps in a row when back from idle"
    );
}

/// Promise 7 when steps say how long they take (`sched::sim::spend`): a
/// simulation charges every step alike, so the levels share the *steps*
/// by weight even when their steps spend very different virtual times
/// (promise 2, shares of time, is for a running engine: the `engine_`
/// tests below). Three cases on one worker, each over a stretch of
/// virtual time:
/// - 20 `High` processes of 2 µs steps and one `Low` of 100 µs: 12/13 and
///   1/13 of the steps (on an engine, 1/13 of the time);
/// - `High` 10 µs, `Normal` 40 µs, `Low` 160 µs: 12/16, 3/16, 1/16 of the
///   steps;
/// - `Normal` processes of 1 µs steps beside `High` ones of 100 µs: 12/15
///   and 3/15 of the steps.
///
/// Tolerance: 0.4 points (deterministic). The time shares are printed:
/// they are not the engine's (see the report: `docs/guide/simulation.md`
/// says a spend is measured "as a running engine measures a step" and a
/// simulated workload "is ordered as a running engine orders it", which
/// holds for light-first but not for the levels' shares).
#[test]
fn sim_charges_every_step_alike_even_when_steps_spend_time() {
    struct Case {
        name: &'static str,
        levels: [(usize, Duration); 3],
        want: [f64; 3],
        stretch: Duration,
    }
    let cases = [
        Case {
            name: "High 2 µs x20, Low 100 µs x1",
            levels: [(20, 2 * US), (0, US), (1, 100 * US)],
            want: [12.0 / 13.0, 0.0, 1.0 / 13.0],
            stretch: Duration::from_millis(100),
        },
        Case {
            name: "High 10 µs, Normal 40 µs, Low 160 µs",
            levels: [(10, 10 * US), (10, 40 * US), (10, 160 * US)],
            want: [12.0 / 16.0, 3.0 / 16.0, 1.0 / 16.0],
            stretch: Duration::from_millis(200),
        },
        Case {
            name: "High 100 µs x5, Normal 1 µs x20 (a light flood)",
            levels: [(5, 100 * US), (20, US), (0, US)],
            want: [12.0 / 15.0, 3.0 / 15.0, 0.0],
            stretch: Duration::from_millis(100),
        },
    ];
    for (i, case) in cases.iter().enumerate() {
        let mut sim = Scheduler::builder().simulation(Config::seed(60 + i as u64).workers(1));
        let tally = Arc::new(Tally::default());
        let mut all = Vec::new();
        for (slot, (&level, &(count, spend))) in Priority::ALL.iter().zip(&case.levels).enumerate()
        {
            for _ in 0..count {
                let spinner = Spinner::new(level, slot, &tally).spend(spend);
                all.push(sim.context().spawn(spinner).expect("spawned").pid());
            }
            if count == 0 {
                all.push(
                    sim.context()
                        .spawn(Parked { level })
                        .expect("spawned")
                        .pid(),
                );
            }
        }
        let warm = Duration::from_millis(10);
        sim.run_until(|sim| sim.elapsed() >= warm).expect("runs");
        let before = tally.steps();
        let until = sim.elapsed() + case.stretch;
        sim.run_until(|sim| sim.elapsed() >= until).expect("runs");
        let steps = delta(tally.steps(), before);
        let time: [u64; 3] = std::array::from_fn(|l| steps[l] * case.levels[l].1.as_nanos() as u64);
        let got = share3(time);
        let step_shares = share3([steps[0], steps[1], steps[2]]);
        eprintln!(
            "{}: steps {:?}, step shares {:.4?} (want {:.4?}), time shares {:.4?}",
            case.name,
            &steps[..3],
            step_shares,
            case.want,
            got
        );
        sim_stop(&mut sim, &all);
        assert_eq!(sim.fairness().violation, None, "{}", case.name);
        for ((level, share), want) in Priority::ALL.iter().zip(step_shares).zip(case.want) {
            assert!(
                (share - want).abs() < 0.004,
                "{}: {} had {share:.4} of the steps, not {want:.4} (steps {:?}, time shares \
                 {:.4?})",
                case.name,
                level.name(),
                &steps[..3],
                got
            );
        }
    }
}

/// Promise 1 with a level changed by a step (`Output::set_priority`, "from
/// the next time it is queued"): 10 `Normal` and 10 `Low` processes share
/// 3:1 of the steps; once each `Low` one has moved itself to `High` (at
/// its 40th step), the levels share 12:3. Tolerance as in the first test.
#[test]
fn sim_a_level_changed_by_a_step_takes_the_new_level_s_share() {
    let mut sim = Scheduler::builder().simulation(Config::seed(17).workers(1));
    let tally = Arc::new(Tally::default());
    let mut all = Vec::new();
    for _ in 0..10 {
        let normal = Spinner::new(Priority::Normal, 1, &tally);
        all.push(sim.context().spawn(normal).expect("spawned").pid());
        let mut low = Spinner::new(Priority::Low, 2, &tally);
        low.switch = Some((40, Priority::High, 0));
        all.push(sim.context().spawn(low).expect("spawned").pid());
    }
    sim.run_until(|_| tally.steps()[2] >= 200).expect("runs");
    let early = tally.steps();
    let early_low = early[2] as f64 / (early[1] + early[2]) as f64;
    sim.run_until(|_| tally.steps()[2] >= 400).expect("runs");
    // Every `Low` process has switched (40 steps each, 10 of them).
    let before = tally.steps();
    let target = sim.steps() + 30_000;
    sim.run_until(|sim| sim.steps() >= target).expect("runs");
    let steps = delta(tally.steps(), before);
    let got = share3([steps[0], steps[1], steps[2]]);
    eprintln!(
        "Normal+Low before the switch: Low {early_low:.4} (want 0.25); after: steps {:?}, shares \
         {got:.4?} (want 0.8, 0.2, 0)",
        &steps[..3]
    );
    sim_stop(&mut sim, &all);
    assert_eq!(sim.fairness().violation, None);
    assert!((early_low - 0.25).abs() < 0.02, "{early:?}");
    assert_eq!(steps[2], 0, "no Low work left");
    assert!((got[0] - 0.8).abs() < 0.004, "{got:?}");
    assert!((got[1] - 0.2).abs() < 0.004, "{got:?}");
}

/// Promise 6: a lane weighs its level's weight times its group's, and one
/// pick rule serves them all. Two simulated configurations, one worker:
/// - groups of weights 1, 4 and 12: `High` in the first (12), `Normal` in
///   the second (12) and `Low` in the third (12) get equal shares, 12/37
///   each, whatever their process counts, and `Low` in the first group
///   (1) gets 1/37: the first group's `High` work 12 times its `Low`;
/// - groups of weights 1 and 3, each with all three levels: 12, 3, 1 and
///   36, 9, 3 of 64.
///
/// Tolerance: 0.5 points of 40 000 deterministic steps; a rule that
/// weighed only levels, or only groups, misses by several points.
#[test]
fn sim_a_lane_weighs_its_level_s_weight_times_its_group_s() {
    type Lane = (&'static str, Priority, usize);
    /// The groups with their weights, the lanes and each lane's share.
    type Setup = (&'static [(&'static str, u32)], Vec<Lane>, Vec<f64>);
    let configs: [Setup; 2] = [
        (
            &[("small", 1), ("mid", 4), ("big", 12)],
            vec![
                ("small", Priority::High, 2),
                ("mid", Priority::Normal, 10),
                ("big", Priority::Low, 30),
                ("small", Priority::Low, 5),
            ],
            vec![12.0 / 37.0, 12.0 / 37.0, 12.0 / 37.0, 1.0 / 37.0],
        ),
        (
            &[("a", 1), ("b", 3)],
            vec![
                ("a", Priority::High, 5),
                ("a", Priority::Normal, 5),
                ("a", Priority::Low, 5),
                ("b", Priority::High, 5),
                ("b", Priority::Normal, 5),
                ("b", Priority::Low, 5),
            ],
            [12.0, 3.0, 1.0, 36.0, 9.0, 3.0]
                .iter()
                .map(|w| w / 64.0)
                .collect(),
        ),
    ];
    for (c, (groups, lanes, want)) in configs.iter().enumerate() {
        let mut builder = Scheduler::builder();
        for &(name, weight) in *groups {
            builder = builder.group(name, weight);
        }
        let mut sim = builder.simulation(Config::seed(70 + c as u64).workers(1));
        let tally = Arc::new(Tally::default());
        let mut all = Vec::new();
        for (slot, &(group, level, count)) in lanes.iter().enumerate() {
            let group = sim.context().group(group).expect("declared");
            for _ in 0..count {
                let spinner = Spinner::new(level, slot, &tally).group(group);
                all.push(sim.context().spawn(spinner).expect("spawned").pid());
            }
        }
        sim.run_until(|sim| sim.steps() >= 2_000).expect("runs");
        let before = tally.steps();
        let target = sim.steps() + 40_000;
        sim.run_until(|sim| sim.steps() >= target).expect("runs");
        let got = shares(delta(tally.steps(), before));
        eprintln!(
            "groups {groups:?}: lane shares {:.4?} (want {:.4?})",
            &got[..lanes.len()],
            want
        );
        sim_stop(&mut sim, &all);
        assert_eq!(sim.fairness().violation, None, "{groups:?}");
        for (slot, &(group, level, _)) in lanes.iter().enumerate() {
            assert!(
                (got[slot] - want[slot]).abs() < 0.005,
                "groups {groups:?}: lane ({group}, {}) had {:.4} of the steps, not {:.4} \
                 (all: {:.4?})",
                level.name(),
                got[slot],
                want[slot],
                &got[..lanes.len()]
            );
        }
    }
}

/// A `High` process that waits for a message (from outside, or from a
/// step) and notes, at each step it is handed one, how many flood steps
/// ran since `mark` was set.
struct Woken {
    tally: Arc<Tally>,
    mark: Arc<AtomicU64>,
    waits: Arc<Mutex<Vec<u64>>>,
}

impl Process for Woken {
    type Done = ();
    fn init(&mut self, cx: &InitContext, _: &str, _: Payload) -> Result<(), InitError> {
        cx.set_priority(Priority::High);
        Ok(())
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        let mut woken = false;
        for event in events {
            if let Event::Message(m) = event {
                if m.payload::<&'static str>() == Some(&"stop") {
                    out.finish(());
                    return Ok(());
                }
                woken = true;
            }
        }
        if woken {
            let now = self.tally.total_steps();
            let mark = self.mark.load(Relaxed);
            self.waits.lock().unwrap().push(now - mark);
        }
        Ok(())
    }
}

/// A `Low` flood process that, every `every` of its own steps, marks the
/// flood's step count (its own step included) and sends a message to the
/// `High` process `to`: a wake from a step on the same worker.
struct Pinger {
    to: Pid,
    every: u64,
    own: u64,
    tally: Arc<Tally>,
    mark: Arc<AtomicU64>,
}

impl Process for Pinger {
    type Done = ();
    fn init(&mut self, cx: &InitContext, _: &str, _: Payload) -> Result<(), InitError> {
        cx.set_priority(Priority::Low);
        Ok(())
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        if events.next().is_some() {
            out.finish(());
            return Ok(());
        }
        self.tally.steps[2].fetch_add(1, Relaxed);
        self.own += 1;
        if self.own.is_multiple_of(self.every) {
            self.mark.store(self.tally.total_steps(), Relaxed);
            let _ = out.send(self.to, 1u32);
        }
        out.continue_();
        Ok(())
    }
}

/// One simulated worker with `flood` `Normal` and `flood` `Low` processes
/// continuing and a waiting `High` process, woken by a message from
/// outside 60 times at varied points of the flood: the flood steps run
/// between each send and the `High` process's step.
fn sim_outside_wake_waits(seed: u64, flood: usize) -> Vec<u64> {
    let mut sim = Scheduler::builder().simulation(Config::seed(seed).workers(1));
    let tally = Arc::new(Tally::default());
    let mark = Arc::new(AtomicU64::new(0));
    let waits = Arc::new(Mutex::new(Vec::new()));
    let mut all = Vec::new();
    let woken = sim
        .context()
        .spawn(Woken {
            tally: Arc::clone(&tally),
            mark: Arc::clone(&mark),
            waits: Arc::clone(&waits),
        })
        .expect("spawned")
        .pid();
    all.push(woken);
    for (level, slot) in [(Priority::Normal, 1), (Priority::Low, 2)] {
        for _ in 0..flood {
            all.push(
                sim.context()
                    .spawn(Spinner::new(level, slot, &tally))
                    .expect("spawned")
                    .pid(),
            );
        }
    }
    sim.run_until(|sim| sim.steps() >= 3_000).expect("runs");
    for i in 0..60u64 {
        let k = 3 + (i * 7) % 31;
        let target = sim.steps() + k;
        sim.run_until(|sim| sim.steps() >= target).expect("runs");
        mark.store(tally.total_steps(), Relaxed);
        let seen = waits.lock().unwrap().len();
        sim.context().send(woken, 1u32).expect("alive");
        sim.run_until(|_| waits.lock().unwrap().len() > seen)
            .expect("runs");
    }
    sim_stop(&mut sim, &all);
    let fairness = sim.fairness();
    assert_eq!(fairness.violation, None, "{:?}", fairness.worst);
    let waits = waits.lock().unwrap().clone();
    assert_eq!(waits.len(), 60);
    waits
}

/// Promise 5, "whatever the backlog of the other levels", for a `High`
/// process woken by a message from outside (the global queue of its
/// level, then its worker's queue), one simulated worker, continuing
/// `Normal` and `Low` floods (no chains: each flood step is one pick): the
/// flood steps it waits are the same beside a backlog of 600 as beside one
/// of 10 (at most 3 more), and far from the backlog (under 100 of 600).
/// How many steps that is, is
/// `sim_a_high_process_woken_from_outside_waits_at_most_the_global_interval_and_a_few_picks`.
#[test]
fn sim_a_high_process_woken_from_outside_waits_alike_whatever_the_backlog() {
    let small = sim_outside_wake_waits(31, 5);
    let large = sim_outside_wake_waits(31, 300);
    let (small_max, large_max) = (
        small.iter().max().copied().expect("waits"),
        large.iter().max().copied().expect("waits"),
    );
    eprintln!(
        "High woken from outside, flood steps waited: beside 10 {small:?} (max {small_max}); \
         beside 600 {large:?} (max {large_max})"
    );
    assert!(
        large_max <= small_max + 3,
        "beside 600 the High process waited up to {large_max} flood steps, beside 10 up to \
         {small_max}"
    );
    assert!(large_max < 100, "it waited behind the backlog: {large:?}");
}

/// Promise 5 for a `High` process made ready from another thread: "Woken
/// or spawned from another thread, it first waits in the global queue,
/// which a busy worker takes from once every 61 of its steps: up to 61
/// steps more" than the "about twelve steps" of a process ready in its
/// worker's queues. One simulated worker, 300 `Normal` and 300 `Low`
/// processes continuing (every step alike, no chains, so a pick is a
/// step): a `High` process woken from outside 60 times, then 20 `High`
/// processes spawned from outside one at a time; each wait at most 61 +
/// 12 flood steps. Measured: 27 to 57 steps for the wakes (a cycle of
/// about 61 steps, whatever the backlog), 18 to 56 for the spawns (which
/// failed the guide's first wording, three picks for any `High`
/// process).
#[test]
fn sim_a_high_process_woken_from_outside_waits_at_most_the_global_interval_and_a_few_picks() {
    let waits = sim_outside_wake_waits(31, 300);
    // Spawned from outside, one at a time, at varied points of the flood.
    let mut sim = Scheduler::builder().simulation(Config::seed(33).workers(1));
    let tally = Arc::new(Tally::default());
    let mut all = Vec::new();
    for (level, slot) in [(Priority::Normal, 1), (Priority::Low, 2)] {
        for _ in 0..300 {
            all.push(
                sim.context()
                    .spawn(Spinner::new(level, slot, &tally))
                    .expect("spawned")
                    .pid(),
            );
        }
    }
    sim.run_until(|sim| sim.steps() >= 3_000).expect("runs");
    let mut spawned = Vec::new();
    for i in 0..20u64 {
        let target = sim.steps() + 3 + (i * 11) % 41;
        sim.run_until(|sim| sim.steps() >= target).expect("runs");
        let before = tally.total_steps();
        let high = Arc::new(Tally::default());
        let mut one = Spinner::new(Priority::High, 0, &high);
        one.left = Some(0);
        all.push(sim.context().spawn(one).expect("spawned").pid());
        sim.run_until(|_| high.total_steps() > 0).expect("runs");
        spawned.push(tally.total_steps() - before);
    }
    sim_stop(&mut sim, &all);
    eprintln!(
        "beside 600 Normal+Low: a High process woken from outside waited {waits:?} flood steps \
         (max {:?}); spawned from outside, {spawned:?} (max {:?})",
        waits.iter().max(),
        spawned.iter().max()
    );
    // The guide: up to 61 steps in the global queue, then about twelve.
    assert!(
        waits.iter().all(|&w| w <= 61 + 12),
        "a High process woken from outside waited more than 61 + about twelve steps: {waits:?}"
    );
    assert!(
        spawned.iter().all(|&w| w <= 61 + 12),
        "a High process spawned from outside waited more than 61 + about twelve steps: \
         {spawned:?}"
    );
}

/// The same on a running engine (one worker, 300 `Normal` and 300 `Low`
/// processes of 20 µs steps, 40 wakes from the test thread): the flood
/// steps between the send and the `High` process's step. Allowed: 61
/// steps in the global queue, twelve ("about twelve steps") and two more
/// for the race between the test thread's count and the worker's step
/// under way. Measured mostly 18-43, up to 59 (also beside a flood of
/// 10).
#[test]
fn engine_a_high_process_woken_from_outside_waits_at_most_the_global_interval_and_a_few_picks() {
    let _serial = serial();
    let scheduler = Scheduler::builder().workers(1).build();
    let tally = Arc::new(Tally::default());
    let mark = Arc::new(AtomicU64::new(0));
    let waits = Arc::new(Mutex::new(Vec::new()));
    let mut all = Vec::new();
    for (level, slot) in [(Priority::Normal, 1), (Priority::Low, 2)] {
        for _ in 0..300 {
            let spinner = Spinner::new(level, slot, &tally).spin(20 * US);
            all.push(scheduler.spawn(spinner).expect("spawned"));
        }
    }
    let woken = scheduler
        .spawn(Woken {
            tally: Arc::clone(&tally),
            mark: Arc::clone(&mark),
            waits: Arc::clone(&waits),
        })
        .expect("spawned");
    scheduler.start();
    std::thread::sleep(Duration::from_millis(100));
    for i in 0..40u64 {
        std::thread::sleep(Duration::from_micros(300 + i * 37 % 500));
        let seen = waits.lock().unwrap().len();
        mark.store(tally.total_steps(), Relaxed);
        scheduler.send(woken.pid(), 1u32).expect("alive");
        let start = Instant::now();
        while waits.lock().unwrap().len() == seen && start.elapsed() < Duration::from_secs(2) {
            std::thread::yield_now();
        }
    }
    let _ = scheduler.send(woken.pid(), "stop");
    engine_stop(scheduler, all);
    let waits = waits.lock().unwrap().clone();
    eprintln!("engine, High woken from outside beside 600: flood steps waited {waits:?}");
    assert_eq!(waits.len(), 40);
    assert!(
        waits.iter().all(|&w| w <= 61 + 14),
        "a High process woken from another thread waited more than 61 + about twelve steps: \
         {waits:?}"
    );
}

/// Promises 1 and 3 for processes spawned from outside: "Processes spawned
/// from another thread wait in one global queue per group, `Normal` and
/// `Low` alike, and are taken in the order they were spawned; once in a
/// worker's queues, they are served by weight". One simulated worker; 300
/// `Low` processes and then 300 `Normal` ones are spawned from outside,
/// all continuing. Measured: the first 1 000 steps all go to `Low` (on one
/// worker and on two), then 3:1 (722:278); a running engine does the same
/// (about 90 ms of 100 µs steps with no `Normal` step, whichever level was
/// spawned first). Spawn order first, then `Normal` about 750 of the next
/// 1 000.
#[test]
fn sim_outside_spawns_are_taken_in_spawn_order_then_served_by_weight() {
    let mut sim = Scheduler::builder().simulation(Config::seed(5).workers(1));
    let tally = Arc::new(Tally::default());
    let mut all = Vec::new();
    for (level, slot) in [(Priority::Low, 2), (Priority::Normal, 1)] {
        for _ in 0..300 {
            all.push(
                sim.context()
                    .spawn(Spinner::new(level, slot, &tally))
                    .expect("spawned")
                    .pid(),
            );
        }
    }
    sim.run_until(|_| tally.total_steps() >= 1_000)
        .expect("runs");
    let first = tally.steps();
    let target = tally.total_steps() + 1_000;
    sim.run_until(|_| tally.total_steps() >= target)
        .expect("runs");
    let second = delta(tally.steps(), first);
    sim_stop(&mut sim, &all);
    eprintln!(
        "300 Low then 300 Normal spawned from outside: first 1 000 steps Normal {} Low {}; next \
         1 000 Normal {} Low {}",
        first[1], first[2], second[1], second[2]
    );
    // Spawn order first: the `Low` ones spawned first are taken first.
    assert!(
        first[2] >= first[1],
        "Low, spawned first, had {} of the first 1 000 steps and Normal {}",
        first[2],
        first[1]
    );
    // Then by weight, 3 to 1 (722:278 measured).
    assert!(
        (650..=800).contains(&second[1]),
        "once all were taken in, Normal had {} of 1 000 steps: about 750",
        second[1]
    );
}

/// Promise 5 for a wake by a step on the same worker (the `next` slot,
/// which "never [runs] while a higher level has work ready", and `High`
/// is the highest): a `Low` process of a flood of 30 `Normal` and 30
/// `Low` processes sends to a waiting `High` process at each of its
/// steps, 40 times; the `High` process is stepped within three flood
/// steps of the send (no slack: each flood step is one pick).
#[test]
fn sim_a_high_process_woken_by_a_low_step_waits_at_most_three_picks() {
    let mut sim = Scheduler::builder().simulation(Config::seed(32).workers(1));
    let tally = Arc::new(Tally::default());
    let mark = Arc::new(AtomicU64::new(0));
    let waits = Arc::new(Mutex::new(Vec::new()));
    let mut all = Vec::new();
    let woken = sim
        .context()
        .spawn(Woken {
            tally: Arc::clone(&tally),
            mark: Arc::clone(&mark),
            waits: Arc::clone(&waits),
        })
        .expect("spawned")
        .pid();
    all.push(woken);
    for (level, slot) in [(Priority::Normal, 1), (Priority::Low, 2)] {
        for _ in 0..30 {
            all.push(
                sim.context()
                    .spawn(Spinner::new(level, slot, &tally))
                    .expect("spawned")
                    .pid(),
            );
        }
    }
    let pinger = sim
        .context()
        .spawn(Pinger {
            to: woken,
            every: 1,
            own: 0,
            tally: Arc::clone(&tally),
            mark: Arc::clone(&mark),
        })
        .expect("spawned")
        .pid();
    all.push(pinger);
    sim.run_until(|_| waits.lock().unwrap().len() >= 40)
        .expect("runs");
    sim_stop(&mut sim, &all);
    let waits = waits.lock().unwrap().clone();
    let fairness = sim.fairness();
    eprintln!(
        "High woken by a Low step: flood steps waited {waits:?} (max {:?}); fairness worst {:?}",
        waits.iter().max(),
        fairness.worst
    );
    assert_eq!(fairness.violation, None);
    assert!(waits.len() >= 40);
    assert!(
        waits.iter().all(|&w| w <= 3),
        "a High process woken by a Low step waited more than three picks: {waits:?}"
    );
}

/// A `High` process that re-arms a timer of `period` `wakes` times and
/// notes how late (in virtual or real time) each wake was stepped.
struct Ticker {
    period: Duration,
    wakes: u32,
    due: Option<Instant>,
    late: Arc<Mutex<Vec<Duration>>>,
}

impl Process for Ticker {
    type Done = ();
    fn init(&mut self, cx: &InitContext, _: &str, _: Payload) -> Result<(), InitError> {
        cx.set_priority(Priority::High);
        Ok(())
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        let now = out.now();
        let mut timer = false;
        for event in events {
            match event {
                Event::Timer { .. } => timer = true,
                Event::Cancel | Event::Message(_) => {
                    out.finish(());
                    return Ok(());
                }
                _ => {}
            }
        }
        if timer {
            if let Some(due) = self.due {
                self.late
                    .lock()
                    .unwrap()
                    .push(now.saturating_duration_since(due));
            }
            self.wakes -= 1;
        }
        if self.due.is_none() || timer {
            if self.wakes == 0 {
                out.finish(());
            } else {
                self.due = Some(now + self.period);
                out.set_timer(self.period, Tag(7));
            }
        }
        Ok(())
    }
}

/// The lateness, in steps, of 40 wakes of a `High` process on a 1 ms
/// timer in a simulation whose steps take 50 µs (`Config::step_time`),
/// beside `flood` `Normal` and `flood` `Low` processes continuing.
fn sim_timer_lateness(flood: usize) -> Vec<u64> {
    let config = Config::seed(37).workers(1).step_time(50 * US);
    let mut sim = Scheduler::builder().simulation(config);
    let tally = Arc::new(Tally::default());
    let late = Arc::new(Mutex::new(Vec::new()));
    let mut all = Vec::new();
    for (level, slot) in [(Priority::Normal, 1), (Priority::Low, 2)] {
        for _ in 0..flood {
            all.push(
                sim.context()
                    .spawn(Spinner::new(level, slot, &tally))
                    .expect("spawned")
                    .pid(),
            );
        }
    }
    sim.context()
        .spawn(Ticker {
            period: Duration::from_millis(1),
            wakes: 40,
            due: None,
            late: Arc::clone(&late),
        })
        .expect("spawned");
    let limit = Duration::from_secs(1);
    sim.run_until(|sim| late.lock().unwrap().len() >= 40 || sim.elapsed() >= limit)
        .expect("runs");
    sim_stop(&mut sim, &all);
    assert_eq!(sim.fairness().violation, None);
    let late = late.lock().unwrap().clone();
    assert_eq!(late.len(), 40, "the ticker finished its wakes");
    late.iter().map(|d| (d.as_micros() / 50) as u64).collect()
}

/// Promise 5 for a timer wake, in a simulation whose steps take 50 µs: a
/// `High` process on a 1 ms timer beside 600 `Normal` and `Low`
/// processes continuing (a backlog of 30 ms) is stepped as late as beside
/// 10 (at most 3 steps more), and at most a tick (2 steps), a "look at
/// its timers every few steps" (the cookbook; 16 steps allowed), the step
/// under way and three picks after its deadline: 22 steps (1.1 ms), where
/// behind the backlog it would be 600. Which part of the lateness is the
/// worker's look at its timers and which the wait for a pick is not
/// observable, so the bound is the sum.
#[test]
fn sim_a_high_timer_wake_is_as_late_whatever_the_backlog() {
    let small = sim_timer_lateness(5);
    let large = sim_timer_lateness(300);
    let (small_max, large_max) = (
        small.iter().max().copied().expect("wakes"),
        large.iter().max().copied().expect("wakes"),
    );
    eprintln!(
        "High 1 ms timer, steps of 50 µs: late (in steps) beside 10 {small:?}, beside 600 \
         {large:?}"
    );
    assert!(
        large_max <= small_max + 3,
        "beside 600 the timer wake was up to {large_max} steps late, beside 10 up to {small_max}"
    );
    assert!(
        large_max <= 22,
        "a High timer wake was {large_max} steps of 50 µs late beside a backlog of 600"
    );
}

/// What a second of a running engine gave each slot: steps and
/// self-timed step time, and the step time the engine charged each
/// declared group (`Context::groups`, in the order given).
struct EngineRun {
    steps: [u64; SLOTS],
    nanos: [u64; SLOTS],
    group_busy: Vec<Duration>,
}

/// Spinners of a running engine: level, group (by name), slot, count,
/// spin per step.
type Spinners<'a> = &'a [(Priority, Option<&'a str>, usize, usize, Duration)];

/// Runs a one-worker engine (`groups` declared with their weights) with
/// `spinners` for a second after a warm-up of 250 ms.
fn engine_run(groups: &[(&str, u32)], spinners: Spinners<'_>) -> EngineRun {
    let mut builder = Scheduler::builder().workers(1);
    for &(name, weight) in groups {
        builder = builder.group(name, weight);
    }
    let scheduler = builder.build();
    let tally = Arc::new(Tally::default());
    let mut all = Vec::new();
    for &(level, group, slot, count, spin) in spinners {
        for _ in 0..count {
            let mut spinner = Spinner::new(level, slot, &tally).spin(spin);
            if let Some(group) = group {
                spinner = spinner.group(scheduler.context().group(group).expect("declared"));
            }
            all.push(scheduler.spawn(spinner).expect("spawned"));
        }
    }
    let busy = |scheduler: &Scheduler| -> Vec<Duration> {
        let infos = scheduler.context().groups();
        groups
            .iter()
            .map(|(name, _)| {
                infos
                    .iter()
                    .find(|info| info.name == *name)
                    .expect("a group")
                    .busy
            })
            .collect()
    };
    scheduler.start();
    std::thread::sleep(Duration::from_millis(250));
    let (steps0, nanos0, busy0) = (tally.steps(), tally.nanos(), busy(&scheduler));
    std::thread::sleep(Duration::from_secs(1));
    let (steps1, nanos1, busy1) = (tally.steps(), tally.nanos(), busy(&scheduler));
    engine_stop(scheduler, all);
    EngineRun {
        steps: delta(steps1, steps0),
        nanos: delta(nanos1, nanos0),
        group_busy: busy1.iter().zip(&busy0).map(|(a, b)| *a - *b).collect(),
    }
}

/// Promises 2 and 3 on a running engine (one worker): 20 `High` processes
/// of 20 µs steps and one `Low` process of 500 µs steps, all continuing.
/// `Low` gets about 1/13 (7.7 %) of the worker's time. Tolerance 3.5-16 %:
/// the engine's own per-step overhead is charged to `High`'s short steps
/// but not seen by their self-timing (which raises `Low`'s measured
/// share), and the machine may be loaded; one `Low` step per 12 `High`
/// ones would give it 500 / (500 + 240) = 68 %, strict priority 0 %.
#[test]
fn engine_low_long_steps_get_a_thirteenth_of_the_time_not_a_thirteenth_of_the_steps() {
    let _serial = serial();
    let run = engine_run(
        &[],
        &[
            (Priority::High, None, 0, 20, 20 * US),
            (Priority::Low, None, 2, 1, 500 * US),
        ],
    );
    let time = shares(run.nanos);
    let steps = shares(run.steps);
    eprintln!(
        "engine, High 20 µs x20 + Low 500 µs x1: steps {:?}, Low {:.2} % of the time, {:.3} % \
         of the steps",
        [run.steps[0], run.steps[2]],
        time[2] * 100.0,
        steps[2] * 100.0
    );
    assert!(run.steps[2] > 0, "Low starved: {:?}", run.steps);
    assert!(
        (0.035..=0.16).contains(&time[2]),
        "Low's 500 µs steps took {:.2} % of the worker's time beside High's 20 µs ones, not \
         about 1/13 (7.7 %)",
        time[2] * 100.0
    );
}

/// Promises 1 and 2 on a running engine: `Normal` and `Low` alone share
/// 3:1 of the time, here with 10 `Normal` processes of 20 µs steps and 2
/// `Low` ones of 300 µs. `Low` gets about 25 %. Tolerance 17-35 % (as
/// above, overhead and load); the old rule (15:1) gave 6.25 %, one `Low`
/// step per 3 `Normal` ones would give 300 / (300 + 60) = 83 %.
#[test]
fn engine_normal_and_low_share_the_time_three_to_one() {
    let _serial = serial();
    let run = engine_run(
        &[],
        &[
            (Priority::Normal, None, 1, 10, 20 * US),
            (Priority::Low, None, 2, 2, 300 * US),
        ],
    );
    let time = shares(run.nanos);
    eprintln!(
        "engine, Normal 20 µs x10 + Low 300 µs x2: steps {:?}, Low {:.2} % of the time",
        [run.steps[1], run.steps[2]],
        time[2] * 100.0
    );
    assert!(
        (0.17..=0.35).contains(&time[2]),
        "Low took {:.2} % of the worker's time beside Normal, not about 25 % (3:1)",
        time[2] * 100.0
    );
}

/// Promises 1 and 3 on a running engine: all three levels busy with steps
/// of 50 µs (10 processes each) get 12/16, 3/16 and 1/16 of the time:
/// `High` weighted, not strict. Tolerances: `High` 66-84 %, `Normal`
/// 13-25 %, `Low` 3.5-10 %: loose for a loaded machine, but strict
/// priority would give `Normal` and `Low` nothing, and `Normal` first
/// over `Low` would give `Low` nothing either.
#[test]
fn engine_three_busy_levels_share_twelve_three_one() {
    let _serial = serial();
    let run = engine_run(
        &[],
        &[
            (Priority::High, None, 0, 10, 50 * US),
            (Priority::Normal, None, 1, 10, 50 * US),
            (Priority::Low, None, 2, 10, 50 * US),
        ],
    );
    let time = shares(run.nanos);
    eprintln!(
        "engine, three levels of 50 µs x10: steps {:?}, time shares {:.2?} %",
        &run.steps[..3],
        time[..3].iter().map(|t| t * 100.0).collect::<Vec<_>>()
    );
    assert!((0.66..=0.84).contains(&time[0]), "High: {:.4?}", &time[..3]);
    assert!(
        (0.13..=0.25).contains(&time[1]),
        "Normal: {:.4?}",
        &time[..3]
    );
    assert!((0.035..=0.10).contains(&time[2]), "Low: {:.4?}", &time[..3]);
}

/// Promises 6 and 2 together on a running engine: groups of weights 1
/// and 3, one worker; the first group's `High` processes (lane weight 12)
/// step 20 µs, the second's `Low` ones (lane weight 3) step 300 µs. The
/// `Low` lane gets 3/15 (20 %) of the time, by the engine's own charge
/// (`Context::groups`, tolerance 5 points: it is the figure the rule
/// keeps) and by the steps' self-timing (13-30 %). Weighing levels only
/// would give 1/13 (7.7 %), groups only 3/4, one step per pick 83 %.
#[test]
fn engine_a_lane_s_time_share_is_level_weight_times_group_weight() {
    let _serial = serial();
    let run = engine_run(
        &[("one", 1), ("three", 3)],
        &[
            (Priority::High, Some("one"), 0, 20, 20 * US),
            (Priority::Low, Some("three"), 2, 2, 300 * US),
        ],
    );
    let time = shares(run.nanos);
    let charged =
        run.group_busy[1].as_secs_f64() / (run.group_busy[0] + run.group_busy[1]).as_secs_f64();
    eprintln!(
        "engine, (one, High) 20 µs x20 + (three, Low) 300 µs x2: steps {:?}, Low lane {:.2} % \
         of the self-timed time, {:.2} % of the charged time ({:?})",
        [run.steps[0], run.steps[2]],
        time[2] * 100.0,
        charged * 100.0,
        run.group_busy
    );
    assert!(
        (charged - 0.2).abs() <= 0.05,
        "the engine charged the (three, Low) lane {:.2} % of the time, not 20 % (3 of 15)",
        charged * 100.0
    );
    assert!(
        (0.13..=0.30).contains(&time[2]),
        "the (three, Low) lane took {:.2} % of the time, not about 20 % (3 of 15)",
        time[2] * 100.0
    );
}

/// Promise 4 on a running engine: with one level ready it gets every
/// step, so `Low` work alone runs as fast as the same work at `Normal`
/// (priorities cost nothing without contention). 10 processes of 300
/// steps of 20 µs (60 ms of spinning) at each level, alternating, three
/// times; the best run of each is compared. Tolerance: `Low` within 2.5
/// times `Normal`'s best (noise of a loaded machine); a scheduler that
/// held `Low` to its 1/16 even alone would take 16 times as long.
#[test]
fn engine_one_level_alone_gets_every_step() {
    let _serial = serial();
    let run_alone = |level: Priority| -> Duration {
        let scheduler = Scheduler::builder().workers(1).build();
        let tally = Arc::new(Tally::default());
        let all: Vec<Completion<()>> = (0..10)
            .map(|_| {
                let mut spinner = Spinner::new(level, 0, &tally).spin(20 * US);
                spinner.left = Some(299);
                scheduler.spawn(spinner).expect("spawned")
            })
            .collect();
        let start = Instant::now();
        scheduler.start();
        for mut done in all {
            done.wait_timeout(Duration::from_secs(10))
                .expect("finished in time");
        }
        let took = start.elapsed();
        assert_eq!(tally.steps()[0], 3_000);
        scheduler.shutdown(Duration::from_secs(5));
        took
    };
    let mut normal = Vec::new();
    let mut low = Vec::new();
    for _ in 0..3 {
        normal.push(run_alone(Priority::Normal));
        low.push(run_alone(Priority::Low));
    }
    let best = |runs: &[Duration]| runs.iter().min().copied().expect("runs");
    eprintln!("3 000 steps of 20 µs alone: Normal {normal:?}, Low {low:?}");
    assert!(
        best(&low) <= best(&normal).mul_f64(2.5),
        "Low alone took {:?} for the work Normal alone did in {:?}",
        best(&low),
        best(&normal)
    );
}

/// Promise 5 on a running engine: a `High` process on a 2 ms timer beside
/// 300 `Normal` and 300 `Low` processes of 100 µs steps (a backlog of
/// 60 ms), 40 wakes. "At most a few picks ... whatever the backlog":
/// about 0.3 ms, plus the timer tick (0.1 ms), the step under way and the
/// busy worker's look at its timers "every few steps" (the cookbook; 16
/// steps, 1.6 ms here, in the simulation): measured 1.2 ms at the median.
/// Tolerance: a median under 8 ms and three quarters under 15 ms (a
/// loaded machine takes the worker's core away for milliseconds at a
/// time); waiting behind the backlog would be 60 ms or more at every
/// wake.
#[test]
fn engine_a_high_timer_wake_skips_the_other_levels_backlog() {
    let _serial = serial();
    let scheduler = Scheduler::builder().workers(1).build();
    let tally = Arc::new(Tally::default());
    let mut all = Vec::new();
    for (level, slot) in [(Priority::Normal, 1), (Priority::Low, 2)] {
        for _ in 0..300 {
            let spinner = Spinner::new(level, slot, &tally).spin(100 * US);
            all.push(scheduler.spawn(spinner).expect("spawned"));
        }
    }
    let late = Arc::new(Mutex::new(Vec::new()));
    scheduler.start();
    std::thread::sleep(Duration::from_millis(100));
    let mut ticker = scheduler
        .spawn(Ticker {
            period: Duration::from_millis(2),
            wakes: 40,
            due: None,
            late: Arc::clone(&late),
        })
        .expect("spawned");
    let finished = ticker.wait_timeout(Duration::from_secs(20)).is_ok();
    let steps = tally.steps();
    engine_stop(scheduler, all);
    let mut late = late.lock().unwrap().clone();
    assert!(
        !late.is_empty(),
        "the ticker was never stepped on its timer"
    );
    late.sort_unstable();
    let at = |q: f64| late[((late.len() - 1) as f64 * q) as usize];
    eprintln!(
        "engine, High 2 ms timer beside 600 processes of 100 µs: {} wakes, median {:?}, p75 \
         {:?}, worst {:?} late (flood steps: {:?})",
        late.len(),
        at(0.5),
        at(0.75),
        late.last(),
        &steps[..3]
    );
    assert!(finished, "the ticker did not finish its 40 wakes");
    assert!(
        at(0.5) <= Duration::from_millis(8),
        "median lateness {:?}",
        at(0.5)
    );
    assert!(
        at(0.75) <= Duration::from_millis(15),
        "p75 lateness {:?}",
        at(0.75)
    );
}
