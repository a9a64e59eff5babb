//! Supervision: restart strategies, restart policies, restart intensity,
//! shutdown of a supervision tree, and names that follow restarts.

use sched::prelude::*;
use sched::supervisor::{SupervisorError, SupervisorReport, WhichChildren};
use sched::Strategy;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(10);

/// What the children of a test tell it: starts per name, and the order in
/// which incarnations closed.
#[derive(Default)]
struct Log {
    starts: Mutex<Vec<&'static str>>,
    closed: Mutex<Vec<&'static str>>,
}

impl Log {
    fn starts_of(&self, name: &str) -> usize {
        self.starts
            .lock()
            .unwrap()
            .iter()
            .filter(|n| **n == name)
            .count()
    }
}

/// Ends the way its messages say; finishes when cancelled, unless stubborn.
struct Member {
    name: &'static str,
    log: Arc<Log>,
    stubborn: bool,
}

impl Process for Member {
    type Done = Payload;
    fn init(&mut self, _: &InitContext, _: &str, _: Payload) -> Result<(), InitError> {
        self.log.starts.lock().unwrap().push(self.name);
        Ok(())
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            match event {
                Event::Message(m) => match *m.payload::<&str>().unwrap_or(&"") {
                    "crash" => return Err("asked to crash".into()),
                    "panic" => panic!("asked to panic"),
                    "finish" => out.finish(()),
                    _ => {}
                },
                Event::Cancel if !self.stubborn => out.finish(()),
                _ => {}
            }
        }
        Ok(())
    }

    fn close(&mut self) {
        self.log.closed.lock().unwrap().push(self.name);
    }
}

/// A member restarted as in OTP, under a new PID: what these tests check
/// (restarts in place are `restart_in_place.rs`'s).
fn member(name: &'static str, log: &Arc<Log>) -> ChildSpec {
    let log = Arc::clone(log);
    ChildSpec::new(name, move || Member {
        name,
        log: Arc::clone(&log),
        stubborn: false,
    })
    .restart_in_place(false)
}

fn started(workers: usize) -> Scheduler {
    let scheduler = Scheduler::builder().workers(workers).build();
    scheduler.start();
    scheduler
}

fn report(scheduler: &Scheduler, supervisor: Pid) -> SupervisorReport {
    let mut reply = scheduler.ask(supervisor, WhichChildren).unwrap();
    reply.wait_timeout(WAIT).expect("the supervisor answers")
}

fn pid_of(report: &SupervisorReport, name: &str) -> Option<Pid> {
    report.child(name).unwrap().pid
}

/// Polls the supervisor's report until `done` holds, or panics at the
/// deadline.
fn report_when(
    scheduler: &Scheduler,
    supervisor: Pid,
    what: &str,
    done: impl Fn(&SupervisorReport) -> bool,
) -> SupervisorReport {
    let deadline = Instant::now() + WAIT;
    loop {
        let now = report(scheduler, supervisor);
        if done(&now) {
            return now;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting: {what}: {now:?}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn wait_until(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting: {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn supervisor_error(outcome: &Result<SupervisorReport, ExitError>) -> &SupervisorError {
    match outcome {
        Err(ExitError::Step(e)) => e.downcast_ref::<SupervisorError>().expect("typed"),
        other => panic!("expected a supervisor error, got {other:?}"),
    }
}

/// Cancels the supervisor and returns its done report.
fn cancelled(
    scheduler: &Scheduler,
    handle: sched::Completion<SupervisorReport>,
) -> SupervisorReport {
    scheduler.context().cancel(handle.pid()).unwrap();
    handle.wait().expect("done")
}

#[test]
fn one_for_one_restarts_only_the_crashing_child() {
    let scheduler = started(2);
    let log = Arc::new(Log::default());
    let supervisor = Supervisor::builder()
        .strategy(Strategy::OneForOne)
        .intensity(1, Duration::from_secs(60))
        .children(["a", "b", "c"].map(|n| member(n, &log)))
        .build();
    let handle = scheduler.spawn(supervisor).unwrap();
    let before = report_when(&scheduler, handle.pid(), "all started", |r| {
        r.children.iter().all(|c| c.pid.is_some())
    });
    let old_b = pid_of(&before, "b").unwrap();
    scheduler.send(old_b, "crash").unwrap();
    let after = report_when(&scheduler, handle.pid(), "b restarted", |r| {
        pid_of(r, "b").is_some_and(|b| b != old_b)
    });
    assert_eq!(pid_of(&after, "a"), pid_of(&before, "a"));
    assert_eq!(pid_of(&after, "c"), pid_of(&before, "c"));
    let b = after.child("b").unwrap();
    assert_eq!((b.restarts, b.last_exit), (1, Some(ExitReason::Error)));
    assert_eq!(log.starts_of("a") + log.starts_of("c"), 2);

    let done = cancelled(&scheduler, handle);
    assert_eq!(done.total_restarts(), 1);
    assert!(done.children.iter().all(|c| c.pid.is_none()));
    scheduler.shutdown(WAIT);
}

#[test]
fn one_for_all_restarts_every_child_once_in_order() {
    let scheduler = started(2);
    let log = Arc::new(Log::default());
    // One regrouping is allowed; a second (a down of a terminated sibling
    // taken for a crash) would exceed the intensity and end the supervisor
    // with an error instead of the report below.
    let supervisor = Supervisor::builder()
        .strategy(Strategy::OneForAll)
        .intensity(1, Duration::from_secs(60))
        .children(["a", "b", "c"].map(|n| member(n, &log)))
        .build();
    let handle = scheduler.spawn(supervisor).unwrap();
    let before = report_when(&scheduler, handle.pid(), "all started", |r| {
        r.children.iter().all(|c| c.pid.is_some())
    });
    scheduler
        .send(pid_of(&before, "b").unwrap(), "crash")
        .unwrap();
    let after = report_when(&scheduler, handle.pid(), "all restarted", |r| {
        r.children
            .iter()
            .all(|c| c.restarts == 1 && c.pid.is_some())
    });
    for (old, new) in before.children.iter().zip(&after.children) {
        assert_ne!(old.pid, new.pid, "{} has a new PID", new.name);
    }
    // The crashed child first, then its siblings terminated last-started
    // first; then all started again in order.
    assert_eq!(*log.closed.lock().unwrap(), ["b", "c", "a"]);
    assert_eq!(*log.starts.lock().unwrap(), ["a", "b", "c", "a", "b", "c"]);
    let c = after.child("c").unwrap();
    assert_eq!(c.last_exit, Some(ExitReason::Terminated));

    let done = cancelled(&scheduler, handle);
    assert_eq!(done.total_restarts(), 3, "one regrouping, no more");
    scheduler.shutdown(WAIT);
}

#[test]
fn restart_policies_decide_who_comes_back() {
    let scheduler = started(2);
    let log = Arc::new(Log::default());
    let supervisor = Supervisor::builder()
        .intensity(10, Duration::from_secs(60))
        .child(member("transient-ok", &log).restart(Restart::Transient))
        .child(member("transient-bad", &log).restart(Restart::Transient))
        .child(member("temporary", &log).restart(Restart::Temporary))
        .child(member("permanent", &log).restart(Restart::Permanent))
        .build();
    let handle = scheduler.spawn(supervisor).unwrap();
    let before = report_when(&scheduler, handle.pid(), "all started", |r| {
        r.children.iter().all(|c| c.pid.is_some())
    });
    for (name, order) in [
        ("transient-ok", "finish"),
        ("transient-bad", "panic"),
        ("temporary", "crash"),
        ("permanent", "finish"),
    ] {
        scheduler
            .send(pid_of(&before, name).unwrap(), order)
            .unwrap();
    }
    let after = report_when(&scheduler, handle.pid(), "all four ended", |r| {
        r.children.iter().all(|c| c.last_exit.is_some())
            && pid_of(r, "transient-bad").is_some()
            && pid_of(r, "permanent").is_some()
    });
    let summary = |name| {
        let c = after.child(name).unwrap();
        (c.pid.is_some(), c.restarts, c.last_exit.unwrap())
    };
    assert_eq!(summary("transient-ok"), (false, 0, ExitReason::Normal));
    assert_eq!(summary("transient-bad"), (true, 1, ExitReason::Panicked));
    assert_eq!(summary("temporary"), (false, 0, ExitReason::Error));
    assert_eq!(summary("permanent"), (true, 1, ExitReason::Normal));

    let done = cancelled(&scheduler, handle);
    assert_eq!(done.total_restarts(), 2);
    assert_eq!(log.starts_of("temporary"), 1);
    assert_eq!(log.starts_of("transient-ok"), 1);
    scheduler.shutdown(WAIT);
}

/// Fails its first step.
struct Crasher;

impl Process for Crasher {
    type Done = Payload;
    fn step(&mut self, _: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
        Err("crashed at once".into())
    }
}

#[test]
fn exceeding_the_intensity_ends_the_supervisor_and_all_its_children() {
    let scheduler = started(2);
    let log = Arc::new(Log::default());
    for strategy in [Strategy::OneForOne, Strategy::OneForAll] {
        let supervisor = Supervisor::builder()
            .strategy(strategy)
            .intensity(2, Duration::from_secs(60))
            .child(member("bystander", &log))
            .child(ChildSpec::new("crasher", || Crasher))
            .child(member("late", &log))
            .build();
        let outcome = scheduler.spawn(supervisor).unwrap().wait();
        match supervisor_error(&outcome) {
            SupervisorError::IntensityExceeded {
                restarts,
                within,
                child,
            } => {
                assert_eq!((*restarts, *within), (3, Duration::from_secs(60)));
                assert_eq!(&**child, "crasher");
            }
            other => panic!("{other}"),
        }
        assert!(outcome.unwrap_err().to_string().contains("3 restarts"));
        // Every child had closed before the outcome was given.
        let log_starts = log.starts.lock().unwrap().len();
        assert_eq!(log.closed.lock().unwrap().len(), log_starts, "{strategy:?}");
        wait_until("no child left", || scheduler.stats().live_processes == 0);
    }
    // One-for-one never touched the bystander; one-for-all restarted it
    // with each of the two regroupings.
    assert_eq!(log.starts_of("bystander"), 1 + 3);
    scheduler.shutdown(WAIT);
}

/// Its `init` fails when the shared switch is on.
struct Fragile {
    broken: Arc<AtomicUsize>,
}

impl Process for Fragile {
    type Done = Payload;
    fn init(&mut self, _: &InitContext, _: &str, _: Payload) -> Result<(), InitError> {
        if self.broken.load(SeqCst) > 0 {
            Err(InitError::failed("cannot start"))
        } else {
            Ok(())
        }
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            match event {
                Event::Message(_) => return Err("crash".into()),
                Event::Cancel => out.finish(()),
                _ => {}
            }
        }
        Ok(())
    }
}

#[test]
fn failed_restarts_count_toward_the_intensity() {
    let scheduler = started(2);
    let broken = Arc::new(AtomicUsize::new(0));
    let switch = Arc::clone(&broken);
    let supervisor = Supervisor::builder()
        .intensity(4, Duration::from_secs(60))
        .child(ChildSpec::new("fragile", move || Fragile {
            broken: Arc::clone(&switch),
        }))
        .build();
    let handle = scheduler.spawn(supervisor).unwrap();
    let pid = handle.pid();
    let first = report_when(&scheduler, pid, "started", |r| {
        pid_of(r, "fragile").is_some()
    });
    broken.store(1, SeqCst);
    scheduler
        .send(pid_of(&first, "fragile").unwrap(), "crash")
        .unwrap();
    let outcome = handle.wait();
    assert!(matches!(
        supervisor_error(&outcome),
        SupervisorError::IntensityExceeded { restarts: 5, .. }
    ));
    wait_until("no child left", || scheduler.stats().live_processes == 0);
    scheduler.shutdown(WAIT);
}

#[test]
fn a_child_that_cannot_start_at_first_fails_the_supervisor() {
    let scheduler = started(2);
    let log = Arc::new(Log::default());
    let supervisor = Supervisor::builder()
        .child(member("first", &log))
        .child(ChildSpec::new("broken", || Fragile {
            broken: Arc::new(AtomicUsize::new(1)),
        }))
        .child(member("never", &log))
        .build();
    let outcome = scheduler.spawn(supervisor).unwrap().wait();
    match supervisor_error(&outcome) {
        SupervisorError::StartFailed { child, error } => {
            assert_eq!(&**child, "broken");
            assert!(error.to_string().contains("cannot start"), "{error}");
        }
        other => panic!("{other}"),
    }
    assert_eq!(*log.starts.lock().unwrap(), ["first"]);
    assert_eq!(*log.closed.lock().unwrap(), ["first"]);
    wait_until("no child left", || scheduler.stats().live_processes == 0);
    scheduler.shutdown(WAIT);
}

#[test]
fn shutdown_ends_a_supervision_tree_gracefully() {
    let scheduler = started(2);
    let log = Arc::new(Log::default());
    let pool = Supervisor::builder()
        .strategy(Strategy::OneForOne)
        .children(["w1", "w2", "w3"].map(|n| member(n, &log)));
    let root = Supervisor::builder()
        .strategy(Strategy::OneForAll)
        .child(member("cache", &log))
        .child(ChildSpec::new("pool", move || pool.build()))
        .build();
    let handle = scheduler.spawn(root).unwrap();
    let root_pid = handle.pid();
    let tree = report_when(&scheduler, root_pid, "pool started", |r| {
        pid_of(r, "pool").is_some()
    });
    let pool_pid = pid_of(&tree, "pool").unwrap();
    report_when(&scheduler, pool_pid, "workers started", |r| {
        r.children.iter().all(|c| c.pid.is_some())
    });
    assert_eq!(scheduler.stats().live_processes, 6);

    let shutdown = scheduler.shutdown(WAIT);
    assert_eq!(shutdown.forced, 0, "{shutdown:?}");
    let done = handle.wait().expect("the root finished done");
    assert!(done.children.iter().all(|c| c.pid.is_none()));
    assert_eq!(log.closed.lock().unwrap().len(), 4);
}

#[test]
fn a_cancelled_supervisor_terminates_children_that_ignore_the_cancel() {
    let scheduler = started(2);
    let log = Arc::new(Log::default());
    let stubborn_log = Arc::clone(&log);
    let supervisor = Supervisor::builder()
        .shutdown_timeout(Duration::from_millis(50))
        .child(member("polite", &log))
        .child(ChildSpec::new("stubborn", move || Member {
            name: "stubborn",
            log: Arc::clone(&stubborn_log),
            stubborn: true,
        }))
        .build();
    let handle = scheduler.spawn(supervisor).unwrap();
    report_when(&scheduler, handle.pid(), "started", |r| {
        r.children.iter().all(|c| c.pid.is_some())
    });
    let started_at = Instant::now();
    let done = cancelled(&scheduler, handle);
    assert!(started_at.elapsed() >= Duration::from_millis(50));
    assert_eq!(
        done.child("polite").unwrap().last_exit,
        Some(ExitReason::Normal)
    );
    assert_eq!(
        done.child("stubborn").unwrap().last_exit,
        Some(ExitReason::Terminated)
    );
    assert_eq!(done.total_restarts(), 0);
    wait_until("all ended", || scheduler.stats().live_processes == 0);
    scheduler.shutdown(WAIT);
}

#[test]
fn a_registered_name_follows_the_restarted_child() {
    let scheduler = started(2);
    let log = Arc::new(Log::default());
    let supervisor = Supervisor::builder()
        .intensity(5, Duration::from_secs(60))
        .child(member("db", &log).register_as("db"))
        .build();
    let handle = scheduler.spawn(supervisor).unwrap();
    let mut current = pid_of(
        &report_when(&scheduler, handle.pid(), "started", |r| {
            pid_of(r, "db").is_some()
        }),
        "db",
    )
    .unwrap();
    assert_eq!(scheduler.context().whereis("db"), Some(current));
    for restarts in 1..=3 {
        scheduler.send("db", "crash").unwrap();
        let now = report_when(&scheduler, handle.pid(), "db restarted", |r| {
            r.child("db").unwrap().restarts == restarts && pid_of(r, "db").is_some()
        });
        let new = pid_of(&now, "db").unwrap();
        assert_ne!(new, current);
        assert_eq!(scheduler.context().whereis("db"), Some(new));
        current = new;
    }
    cancelled(&scheduler, handle);
    assert_eq!(scheduler.context().whereis("db"), None);
    scheduler.shutdown(WAIT);
}

#[test]
fn a_terminated_supervisor_takes_its_children_with_it() {
    let scheduler = Scheduler::builder().workers(2).build();
    scheduler.start();
    let supervisor = Supervisor::builder()
        .child(ChildSpec::new("a", || Idle))
        .child(ChildSpec::new("b", || Idle))
        .build();
    let handle = scheduler.spawn(supervisor).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while scheduler.stats().live_processes < 3 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(scheduler.stats().live_processes, 3);
    scheduler.terminate(handle.pid()).unwrap();
    assert!(handle.wait().is_err());
    while scheduler.stats().live_processes > 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(
        scheduler.stats().live_processes,
        0,
        "the children ended too"
    );
}

/// Waits for messages forever (does not trap exits).
struct Idle;

impl Process for Idle {
    type Done = Payload;
    fn step(&mut self, _: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
        Ok(())
    }
}
