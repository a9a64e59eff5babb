//! A supervised child restarted in place keeps its PID and its mailbox:
//! of the requests queued behind the one that crashes it, none is lost.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use sched::actor::AskError;
use sched::prelude::*;
use sched::supervisor::{
    RestartedInPlace, SupervisorError, SupervisorReport, WatchRestarts, WhichChildren,
};

const WAIT: Duration = Duration::from_secs(10);
/// The request that crashes the service.
const POISON: u64 = u64::MAX;

/// Answers each number with `(its instance, the number)`; panics on
/// `POISON`, fails on `POISON - 1`.
struct Service {
    instance: usize,
    closes: Arc<AtomicUsize>,
}

impl Process for Service {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            match event {
                Event::Request(request) => {
                    let n = *request.payload::<u64>().ok_or("not a number")?;
                    if n == POISON {
                        panic!("poisoned request");
                    }
                    if n == POISON - 1 {
                        return Err("a request it cannot handle".into());
                    }
                    request.reply((self.instance, n));
                }
                Event::Cancel => out.finish(()),
                _ => {}
            }
        }
        Ok(())
    }

    fn close(&mut self) {
        self.closes.fetch_add(1, SeqCst);
    }
}

struct Fixture {
    scheduler: Scheduler,
    supervisor: Completion<SupervisorReport>,
    instances: Arc<AtomicUsize>,
    closes: Arc<AtomicUsize>,
}

fn fixture(max_restarts: u32) -> Fixture {
    fixture_with(max_restarts, true)
}

fn fixture_with(max_restarts: u32, in_place: bool) -> Fixture {
    let scheduler = Scheduler::builder().workers(2).build();
    scheduler.start();
    let instances = Arc::new(AtomicUsize::new(0));
    let closes = Arc::new(AtomicUsize::new(0));
    let (made, closed) = (Arc::clone(&instances), Arc::clone(&closes));
    let spec = ChildSpec::new("service", move || Service {
        instance: made.fetch_add(1, SeqCst) + 1,
        closes: Arc::clone(&closed),
    })
    .register_as("service")
    .restart_in_place(in_place);
    let supervisor = Supervisor::builder()
        .intensity(max_restarts, Duration::from_secs(60))
        .child(spec)
        .build();
    let supervisor = scheduler.spawn(supervisor).unwrap();
    Fixture {
        scheduler,
        supervisor,
        instances,
        closes,
    }
}

fn service(scheduler: &Scheduler) -> Pid {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        if let Some(pid) = scheduler.context().whereis("service") {
            return pid;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the service never started"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn report(f: &Fixture) -> SupervisorReport {
    f.scheduler
        .ask(f.supervisor.pid(), WhichChildren)
        .unwrap()
        .wait_timeout(WAIT)
        .unwrap()
}

/// The report once the child has been restarted `restarts` times (the
/// supervisor learns of a restart in place by a message of its own) and
/// what its failure said is known (for a new incarnation, from the old
/// one's outcome, stored just after its down).
fn report_after(f: &Fixture, restarts: u32) -> SupervisorReport {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let report = report(f);
        let child = &report.children[0];
        if child.restarts >= restarts && child.last_error.is_some() {
            return report;
        }
        assert!(std::time::Instant::now() < deadline, "{report:?}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn the_first_report_comes_once_the_children_are_started_and_named() {
    // No polling of `whereis`: the supervisor answers after its first
    // start of the children.
    for _ in 0..20 {
        let f = fixture(5);
        let first = report(&f);
        let pid = first.children[0].pid.expect("started before the answer");
        assert_eq!(
            f.scheduler.context().whereis("service"),
            Some(pid),
            "and named"
        );
        assert_eq!(first.children[0].last_exit, None);
        f.scheduler.shutdown(WAIT);
    }
}

#[test]
fn a_restart_reports_what_the_crash_said() {
    for in_place in [true, false] {
        let f = fixture_with(5, in_place);
        let pid = report(&f).children[0].pid.expect("started");
        let _ = f
            .scheduler
            .ask(pid, Box::new(POISON) as Payload)
            .unwrap()
            .wait_timeout(WAIT);
        let child = report_after(&f, 1).children[0].clone();
        assert_eq!(
            child.last_exit,
            Some(ExitReason::Panicked),
            "in place: {in_place}"
        );
        let said = child.last_error.expect("the panic's message");
        assert!(said.contains("poisoned request"), "{said}");
        let pid = child.pid.expect("running again");
        let _ = f
            .scheduler
            .ask(pid, Box::new(POISON - 1) as Payload)
            .unwrap()
            .wait_timeout(WAIT);
        let child = report_after(&f, 2).children[0].clone();
        assert_eq!(
            child.last_exit,
            Some(ExitReason::Error),
            "in place: {in_place}"
        );
        let said = child.last_error.expect("the error's text");
        assert!(said.contains("a request it cannot handle"), "{said}");
        f.scheduler.shutdown(WAIT);
    }
}

/// Hands each restart notice it gets to the test.
struct Watcher(std::sync::mpsc::Sender<RestartedInPlace>);

impl Process for Watcher {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            match event {
                Event::Message(m) => {
                    if let Some(notice) = m.payload::<RestartedInPlace>() {
                        let _ = self.0.send(notice.clone());
                    }
                }
                Event::Cancel => out.finish(()),
                _ => {}
            }
        }
        Ok(())
    }
}

#[test]
fn a_watcher_is_told_of_each_restart_in_place_with_what_the_crash_said() {
    let f = fixture(5);
    let (tx, notices) = std::sync::mpsc::channel();
    let mut watcher = f.scheduler.spawn(Watcher(tx)).unwrap();
    let sup = f.supervisor.pid();
    // Asked twice: told once per restart all the same.
    for _ in 0..2 {
        f.scheduler
            .send(sup, WatchRestarts::to(watcher.pid()))
            .unwrap();
    }
    // Read by the supervisor before this question (one sender's messages
    // and requests keep their order), so the watch is on before the crash.
    let pid = report(&f).children[0].pid.expect("started");
    for (poison, reason, said) in [
        (POISON, ExitReason::Panicked, "poisoned request"),
        (POISON - 1, ExitReason::Error, "a request it cannot handle"),
    ] {
        let _ = f
            .scheduler
            .ask(pid, Box::new(poison) as Payload)
            .unwrap()
            .wait_timeout(WAIT);
        let notice = notices.recv_timeout(WAIT).expect("a restart notice");
        assert_eq!((notice.child.as_str(), notice.pid), ("service", pid));
        assert_eq!(notice.reason, reason);
        assert!(notice.message.contains(said), "{notice:?}");
    }
    // The same PID throughout, and no notice beyond one per restart.
    assert_eq!(report_after(&f, 2).children[0].pid, Some(pid));
    assert!(notices.recv_timeout(Duration::from_millis(50)).is_err());
    // A watcher that ended is dropped; the supervisor goes on.
    f.scheduler.context().cancel(watcher.pid()).unwrap();
    let _ended = watcher.wait_timeout(WAIT).unwrap();
    let _ = f
        .scheduler
        .ask(pid, Box::new(POISON) as Payload)
        .unwrap()
        .wait_timeout(WAIT);
    assert_eq!(report_after(&f, 3).children[0].restarts, 3);
    f.scheduler.shutdown(WAIT);
}

#[test]
fn of_the_queued_requests_only_the_crashing_one_is_lost() {
    const N: u64 = 2_000;
    let f = fixture(5);
    let pid = service(&f.scheduler);
    let monitor = f.scheduler.context().monitor(pid);
    // Requests queued around the poisoned one, from two threads at once.
    let replies: Vec<_> = (0..N)
        .map(|n| {
            let question = if n == N / 2 { POISON } else { n };
            f.scheduler.ask(pid, Box::new(question) as Payload).unwrap()
        })
        .collect();
    let mut lost = Vec::new();
    let mut by_instance = [0u64; 3];
    for (n, mut reply) in replies.into_iter().enumerate() {
        match reply.wait_timeout(WAIT) {
            Ok(answer) => {
                let (instance, m) = *answer.downcast::<(usize, u64)>().unwrap();
                assert_eq!(m, n as u64);
                by_instance[instance] += 1;
            }
            Err(AskError::TimedOut) => panic!("request {n} was never answered"),
            Err(error) => lost.push((n, error)),
        }
    }
    assert_eq!(
        lost,
        vec![(N as usize / 2, AskError::NoReply)],
        "only the crashing request"
    );
    // Before it, the first instance; after it, the second: none lost.
    assert_eq!(by_instance[1] + by_instance[2], N - 1);
    assert!(by_instance[2] >= N / 2 - 1, "{by_instance:?}");
    assert_eq!(f.instances.load(SeqCst), 2);
    assert_eq!(f.closes.load(SeqCst), 1, "the failed instance was closed");
    // Same PID, same name, still running: nobody saw it end.
    assert_eq!(f.scheduler.context().whereis("service"), Some(pid));
    assert!(monitor
        .wait_timeout(Duration::from_millis(50))
        .is_err_and(|e| e.is_timeout()));
    let child = &report(&f).children[0];
    assert_eq!((child.pid, child.restarts), (Some(pid), 1));
    f.scheduler.shutdown(WAIT);
}

#[test]
fn restarts_in_place_count_against_the_intensity() {
    let f = fixture(2);
    let pid = service(&f.scheduler);
    for crash in [POISON, POISON - 1, POISON] {
        let _ = f
            .scheduler
            .ask(pid, Box::new(crash) as Payload)
            .unwrap()
            .wait_timeout(WAIT);
    }
    // The third restart is one too many: the supervisor stops and fails.
    let outcome = f.supervisor.wait().unwrap_err();
    let ExitError::Step(error) = outcome else {
        panic!("expected the supervisor's error, got {outcome:?}");
    };
    assert!(matches!(
        error.downcast_ref::<SupervisorError>(),
        Some(SupervisorError::IntensityExceeded { restarts: 3, .. })
    ));
    assert_eq!(
        f.scheduler.context().whereis("service"),
        None,
        "the child was terminated"
    );
    f.scheduler.shutdown(WAIT);
}

/// Whether a child is restarted in place when its spec does not say: in
/// place under one-for-one (unless temporary), a new PID under
/// one-for-all, which restarts siblings together.
#[test]
fn restarting_in_place_is_the_default_where_it_is_safe() {
    use sched::Strategy;
    fn pid_after_a_crash(strategy: Strategy) -> (Pid, Pid) {
        let scheduler = Scheduler::builder().workers(2).build();
        scheduler.start();
        let closes = Arc::new(AtomicUsize::new(0));
        let spec = ChildSpec::new("service", move || Service {
            instance: 0,
            closes: Arc::clone(&closes),
        })
        .register_as("service");
        let supervisor = Supervisor::builder()
            .strategy(strategy)
            .intensity(5, Duration::from_secs(60))
            .child(spec)
            .build();
        let _supervisor = scheduler.spawn(supervisor).unwrap();
        let before = service(&scheduler);
        let mut crash = scheduler
            .ask(before, Box::new(POISON - 1) as Payload)
            .unwrap();
        let _ = crash.wait_timeout(WAIT);
        // A later request is answered by whoever holds the name then.
        let deadline = std::time::Instant::now() + WAIT;
        let after = loop {
            if let Some(pid) = scheduler.context().whereis("service") {
                if let Ok(mut reply) = scheduler.ask(pid, Box::new(1u64) as Payload) {
                    if reply.wait_timeout(WAIT).is_ok() {
                        break pid;
                    }
                }
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no service after the crash"
            );
            std::thread::sleep(Duration::from_millis(1));
        };
        scheduler.shutdown(WAIT);
        (before, after)
    }
    let (before, after) = pid_after_a_crash(Strategy::OneForOne);
    assert_eq!(before, after, "one-for-one restarts in place by default");
    let (before, after) = pid_after_a_crash(Strategy::OneForAll);
    assert_ne!(before, after, "one-for-all takes a new PID by default");

    // A temporary child is not restarted at all, in place or not.
    let scheduler = Scheduler::builder().workers(2).build();
    scheduler.start();
    let closes = Arc::new(AtomicUsize::new(0));
    let spec = ChildSpec::new("service", move || Service {
        instance: 0,
        closes: Arc::clone(&closes),
    })
    .restart(Restart::Temporary)
    .register_as("service");
    let _supervisor = scheduler
        .spawn(Supervisor::builder().child(spec).build())
        .unwrap();
    let once = service(&scheduler);
    let monitor = scheduler.context().monitor(once);
    let _ = scheduler
        .ask(once, Box::new(POISON - 1) as Payload)
        .unwrap()
        .wait_timeout(WAIT);
    assert_eq!(
        monitor.wait_timeout(WAIT).unwrap().reason,
        ExitReason::Error
    );
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(
        scheduler.context().whereis("service"),
        None,
        "not restarted"
    );
    scheduler.shutdown(WAIT);
}
