//! A step that runs long is reported while it still runs, once; short
//! steps never are; with no threshold nothing is watched.

use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sched::prelude::*;

const WAIT: Duration = Duration::from_secs(10);

/// Its first step says it started, then blocks until released.
struct Blocks {
    started: mpsc::Sender<()>,
    release: Arc<Mutex<mpsc::Receiver<()>>>,
}

impl Process for Blocks {
    type Done = Payload;
    fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        self.started.send(()).unwrap();
        let _ = self.release.lock().unwrap().recv_timeout(WAIT);
        out.finish(());
        Ok(())
    }
}

/// Many short steps.
struct Busy(u32);

impl Process for Busy {
    type Done = Payload;
    fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        self.0 -= 1;
        if self.0 == 0 {
            out.finish(());
        } else {
            out.continue_();
        }
        Ok(())
    }
}

fn blocking(scheduler: &Scheduler) -> (Completion, mpsc::Sender<()>) {
    let (started, is_started) = mpsc::channel();
    let (release, released) = mpsc::channel();
    let process = Blocks {
        started,
        release: Arc::new(Mutex::new(released)),
    };
    let handle = scheduler.spawn(process).unwrap();
    is_started.recv_timeout(WAIT).unwrap();
    (handle, release)
}

#[test]
fn a_long_step_is_reported_while_it_runs_and_only_once() {
    let hooked: Arc<Mutex<Vec<(Pid, Duration)>>> = Arc::default();
    let seen = Arc::clone(&hooked);
    let scheduler = Scheduler::builder()
        .workers(2)
        .long_step_threshold(Some(Duration::from_millis(20)))
        .on_long_step(move |_, pid, _worker, running| seen.lock().unwrap().push((pid, running)))
        .build();
    scheduler.start();
    scheduler.spawn(Busy(20_000)).unwrap().wait().unwrap();
    assert_eq!(scheduler.stats().long_steps, 0, "short steps are not long");

    let (handle, release) = blocking(&scheduler);
    let deadline = Instant::now() + WAIT;
    while scheduler.stats().long_steps == 0 {
        assert!(Instant::now() < deadline, "never reported");
        std::thread::sleep(Duration::from_millis(2));
    }
    assert!(!handle.is_finished(), "reported while the step still runs");
    let hooked_now = hooked.lock().unwrap().clone();
    assert_eq!(hooked_now.len(), 1, "the hook ran once");
    assert_eq!(hooked_now[0].0, handle.pid());
    assert!(
        hooked_now[0].1 >= Duration::from_millis(20),
        "{:?}",
        hooked_now[0].1
    );
    // Still the same step: not reported again.
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(scheduler.stats().long_steps, 1);
    release.send(()).unwrap();
    handle.wait().unwrap();
    scheduler.shutdown(WAIT);
}

#[test]
fn without_a_threshold_nothing_is_reported() {
    let scheduler = Scheduler::builder()
        .workers(1)
        .long_step_threshold(None)
        .build();
    scheduler.start();
    let (handle, release) = blocking(&scheduler);
    std::thread::sleep(Duration::from_millis(60));
    assert_eq!(scheduler.stats().long_steps, 0);
    release.send(()).unwrap();
    handle.wait().unwrap();
    scheduler.shutdown(WAIT);
}

/// The voluntary context switches of this process's thread named `name`
/// (Linux's `/proc`): how often it went to sleep. `None` while no thread
/// has the name: a new thread names itself once it first runs, which on a
/// loaded machine can be a while after it was spawned.
#[cfg(target_os = "linux")]
fn sleeps_of(name: &str) -> Option<u64> {
    for task in std::fs::read_dir("/proc/self/task").unwrap() {
        let path = task.unwrap().path();
        let comm = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
        if comm.trim() != name {
            continue;
        }
        let status = std::fs::read_to_string(path.join("status")).ok()?;
        let line = status
            .lines()
            .find(|l| l.starts_with("voluntary_ctxt_switches:"))?;
        return line.split_whitespace().nth(1)?.parse().ok();
    }
    None
}

/// While every worker is parked the watcher thread sleeps for good (it
/// used to wake every few milliseconds, idle or not), and the first step
/// after the idle spell wakes it: a long step is still reported.
#[cfg(target_os = "linux")]
#[test]
fn an_idle_engine_lets_the_watcher_sleep_and_a_step_wakes_it() {
    let scheduler = Scheduler::builder()
        .workers(2)
        .thread_name("dz")
        .long_step_threshold(Some(Duration::from_millis(20)))
        .build();
    scheduler.start();
    scheduler.spawn(Busy(1_000)).unwrap().wait().unwrap();
    // Let the workers park and the watcher doze: until its sleeps have not
    // changed for 50 ms. A fixed pause was not enough on a loaded machine
    // (load 7 to 9: woken 5 times in the window), where the workers' last
    // yields before they park can take a time slice each. A watcher that
    // polls (every 10 ms would be half the threshold) never settles.
    let deadline = Instant::now() + WAIT;
    let mut last = sleeps_of("dz-watcher");
    let mut settled_since = Instant::now();
    while settled_since.elapsed() < Duration::from_millis(50) {
        assert!(
            Instant::now() < deadline,
            "the watcher kept waking with every worker parked"
        );
        std::thread::sleep(Duration::from_millis(5));
        let now = sleeps_of("dz-watcher");
        if now.is_none() || now != last {
            last = now;
            settled_since = Instant::now();
        }
    }
    let before = last.expect("settled");
    std::thread::sleep(Duration::from_millis(300));
    let woke = sleeps_of("dz-watcher").expect("the watcher runs") - before;
    // Waking every 10 ms (half the threshold) would be about 30.
    assert!(woke <= 3, "the watcher woke {woke} times over 300 ms idle");

    let (handle, release) = blocking(&scheduler);
    let deadline = Instant::now() + WAIT;
    while scheduler.stats().long_steps == 0 {
        assert!(
            Instant::now() < deadline,
            "never reported after the idle spell"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    release.send(()).unwrap();
    handle.wait().unwrap();
    scheduler.shutdown(WAIT);
}
