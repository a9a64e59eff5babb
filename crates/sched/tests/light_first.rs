//! Light processes first: a process whose steps are short, woken by its
//! timer while a worker has a backlog of heavy steps, is stepped ahead of
//! that backlog, while a process woken the same way whose steps are heavy
//! waits its turn behind it; and the heavy processes keep stepping.
//!
//! Measured in steps, not time: every heavy step counts itself in one
//! shared counter, and a probe notes the counter when it sets its timer
//! and when it is stepped. The difference is the steps that ran during
//! its sleep (at most `SLEEP / HEAVY_STEP`, fewer on a loaded machine)
//! plus the steps it waited behind once its timer fell due.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sched::prelude::*;

/// How many heavy processes the one worker has.
const HEAVY: usize = 600;
/// How long a heavy step works.
const HEAVY_STEP: Duration = Duration::from_micros(40);
/// A heavy process's sleep between steps, 1 to `HEAVY_SLEEPS` ms by its
/// index: less than a turn of the backlog (`HEAVY * HEAVY_STEP` = 24 ms),
/// so the worker stays overloaded and nearly every heavy process is
/// waiting in line; and varied, so that a probe's timer falls due beside
/// timers set before it (whose processes take the `next` slot first).
const HEAVY_SLEEPS: u64 = 10;
/// A probe's sleep between steps.
const SLEEP: Duration = Duration::from_millis(3);
/// How many wakes each probe records.
const WAKES: usize = 40;

/// Busy for `d` (wall time).
fn work(d: Duration) {
    let until = Instant::now() + d;
    while Instant::now() < until {
        std::hint::spin_loop();
    }
}

/// Sleeps `sleep`, steps `HEAVY_STEP`, again and again.
struct Heavy {
    steps: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    own: u64,
    least: Arc<Mutex<Vec<u64>>>,
    sleep: Duration,
}

impl Process for Heavy {
    type Done = ();
    fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        out.set_timer(self.sleep, Tag(0));
        Ok(())
    }

    fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        if self.stop.load(SeqCst) {
            self.least.lock().unwrap().push(self.own);
            out.finish(());
            return Ok(());
        }
        work(HEAVY_STEP);
        self.own += 1;
        self.steps.fetch_add(1, SeqCst);
        out.set_timer(self.sleep, Tag(0));
        Ok(())
    }
}

/// Sleeps `SLEEP`, then notes how many heavy steps ran since it set the
/// timer; its own step works `step` (light: nothing; heavy: as a heavy
/// process's).
struct Probe {
    steps: Arc<AtomicU64>,
    step: Duration,
    set_at: u64,
    seen: Vec<u64>,
}

impl Process for Probe {
    type Done = Vec<u64>;
    fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        self.set_at = self.steps.load(SeqCst);
        out.set_timer(SLEEP, Tag(1));
        Ok(())
    }

    fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        self.seen.push(self.steps.load(SeqCst) - self.set_at);
        if self.seen.len() == WAKES {
            out.finish(std::mem::take(&mut self.seen));
            return Ok(());
        }
        work(self.step);
        self.set_at = self.steps.load(SeqCst);
        out.set_timer(SLEEP, Tag(1));
        Ok(())
    }
}

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v[v.len() / 2]
}

#[test]
fn a_light_process_woken_by_its_timer_is_stepped_ahead_of_a_heavy_backlog() {
    let scheduler = Scheduler::builder().workers(1).build();
    scheduler.start();
    let steps = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let least = Arc::new(Mutex::new(Vec::new()));
    for i in 0..HEAVY as u64 {
        scheduler
            .spawn(Heavy {
                steps: steps.clone(),
                stop: stop.clone(),
                own: 0,
                least: least.clone(),
                sleep: Duration::from_millis(1 + i % HEAVY_SLEEPS),
            })
            .expect("spawned");
    }
    // Let the backlog build up: every heavy process has stepped.
    let deadline = Instant::now() + Duration::from_secs(60);
    while steps.load(SeqCst) < 2 * HEAVY as u64 {
        assert!(
            Instant::now() < deadline,
            "the heavy processes never stepped"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let probe = |step| Probe {
        steps: steps.clone(),
        step,
        set_at: 0,
        seen: Vec::new(),
    };
    let mut light = scheduler.spawn(probe(Duration::ZERO)).expect("spawned");
    let mut heavy = scheduler.spawn(probe(HEAVY_STEP)).expect("spawned");
    let light = light
        .wait_timeout(Duration::from_secs(120))
        .expect("light probe done");
    let heavy = heavy
        .wait_timeout(Duration::from_secs(120))
        .expect("heavy probe done");
    stop.store(true, SeqCst);
    scheduler.shutdown(Duration::from_secs(30));

    // The light probe's first wake may come before any step of it was
    // measured, as may the heavy probe's: both are judged by the median.
    let during_sleep = (SLEEP.as_micros() / HEAVY_STEP.as_micros()) as u64;
    let (light, heavy) = (median(light), median(heavy));
    assert!(
        light <= during_sleep + 40,
        "the light probe waited behind the backlog: a median of {light} heavy steps from its \
         timer's setting to its step ({during_sleep} at most during its sleep)"
    );
    assert!(
        heavy >= HEAVY as u64 / 2,
        "the heavy probe did not wait its turn: a median of {heavy} heavy steps ({HEAVY} in line)"
    );
    let least = least.lock().unwrap();
    assert_eq!(least.len(), HEAVY, "every heavy process finished");
    assert!(
        least.iter().all(|&own| own >= 2),
        "a heavy process was starved: {:?} steps at least",
        least.iter().min()
    );
}
