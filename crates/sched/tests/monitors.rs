//! Monitors, graceful cancel of one process, and registered names.

use sched::actor::{NameError, TimedOut};
use sched::prelude::*;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(10);

/// Ends the way its first message says.
struct Obedient;

impl Process for Obedient {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            match event {
                Event::Message(m) => match *m.payload::<&str>().unwrap_or(&"") {
                    "finish" => out.finish(()),
                    "fail" => return Err("asked to fail".into()),
                    "panic" => panic!("asked to panic"),
                    _ => {}
                },
                Event::Cancel => out.finish("cancelled gracefully"),
                _ => {}
            }
        }
        Ok(())
    }
}

fn started(workers: usize) -> Scheduler {
    let scheduler = Scheduler::builder().workers(workers).build();
    scheduler.start();
    scheduler
}

#[test]
fn an_outside_monitor_reports_how_the_process_ended() {
    let scheduler = started(2);
    for (order, reason) in [
        ("finish", ExitReason::Normal),
        ("fail", ExitReason::Error),
        ("panic", ExitReason::Panicked),
    ] {
        let pid = scheduler.spawn(Obedient).unwrap().pid();
        let monitor = scheduler.context().monitor(pid);
        assert_eq!(monitor.try_take(), None);
        scheduler.send(pid, order).unwrap();
        let down = monitor.wait_timeout(WAIT).expect("it ended");
        assert_eq!(
            (down.pid, down.reason, down.monitor),
            (pid, reason, monitor.id())
        );
    }
    let pid = scheduler.spawn(Obedient).unwrap().pid();
    let monitor = scheduler.context().monitor(pid);
    scheduler.terminate(pid).unwrap();
    assert_eq!(monitor.wait().reason, ExitReason::Terminated);
    // Ended, then monitored: the PID is gone.
    assert_eq!(
        scheduler.context().monitor(pid).wait().reason,
        ExitReason::NoProcess
    );
    assert_eq!(
        scheduler
            .context()
            .monitor(Pid::local(777_777))
            .wait()
            .reason,
        ExitReason::NoProcess
    );
}

#[test]
fn a_demonitored_monitor_never_fires() {
    let scheduler = started(1);
    let pid = scheduler.spawn(Obedient).unwrap().pid();
    let monitor = scheduler.context().monitor(pid);
    assert!(scheduler.context().demonitor(monitor.id()));
    assert!(!scheduler.context().demonitor(monitor.id()), "removed once");
    scheduler.send(pid, "finish").unwrap();
    assert_eq!(
        monitor.wait_timeout(Duration::from_millis(100)),
        Err(TimedOut)
    );
}

/// Spawns `children` children, monitors each (twice for the first), tells
/// them to fail, and ends with the downs it saw, once its timer says no
/// more are coming.
struct Parent {
    children: usize,
    downs: Vec<Down>,
    started: bool,
}

impl Process for Parent {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        if !self.started {
            self.started = true;
            for i in 0..self.children {
                let child = out.spawn(Obedient)?;
                out.monitor(child.pid());
                if i == 0 {
                    out.monitor(child.pid());
                }
                out.send(child.pid(), "fail")?;
            }
        }
        for event in events {
            match event {
                Event::Down(down) => {
                    self.downs.push(down);
                    if self.downs.len() == self.children + 1 {
                        // Wait a little for any extra (wrong) notification.
                        out.set_timer(Duration::from_millis(50), Tag(0));
                    }
                }
                Event::Timer { .. } => out.finish(std::mem::take(&mut self.downs)),
                _ => {}
            }
        }
        Ok(())
    }
}

#[test]
fn a_process_monitor_fires_exactly_once_per_monitor() {
    let scheduler = started(2);
    let parent = Parent {
        children: 50,
        downs: Vec::new(),
        started: false,
    };
    let downs = scheduler.spawn(parent).unwrap().wait().unwrap();
    let downs = downs.downcast_ref::<Vec<Down>>().unwrap();
    assert_eq!(downs.len(), 51);
    let distinct: std::collections::HashSet<_> = downs.iter().map(|d| d.monitor).collect();
    assert_eq!(distinct.len(), 51, "no monitor fired twice");
    assert!(downs.iter().all(|d| d.reason == ExitReason::Error));
}

/// Monitors `target`, then ends at once (or, as `watcher: false`, counts
/// any down it gets).
struct Watcher {
    target: Pid,
    leave: bool,
    downs: Arc<AtomicUsize>,
}

impl Process for Watcher {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        if self.leave {
            out.monitor(self.target);
            out.finish(());
            return Ok(());
        }
        for event in events {
            match event {
                Event::Down(_) => {
                    self.downs.fetch_add(1, SeqCst);
                }
                Event::Cancel => out.finish(()),
                _ => {}
            }
        }
        Ok(())
    }
}

#[test]
fn a_monitor_never_reaches_a_later_process_under_the_watchers_pid() {
    let scheduler = started(2);
    let target = scheduler.spawn(Obedient).unwrap().pid();
    let watcher_pid = Pid::local(5_000_000);
    let downs = Arc::new(AtomicUsize::new(0));
    let first = Watcher {
        target,
        leave: true,
        downs: downs.clone(),
    };
    scheduler
        .spawn(Spawn::new(first).method("run").input(()).at(watcher_pid))
        .unwrap()
        .wait()
        .unwrap();
    let second = Watcher {
        target,
        leave: false,
        downs: downs.clone(),
    };
    let second = scheduler
        .spawn(Spawn::new(second).method("run").input(()).at(watcher_pid))
        .unwrap();
    let monitor = scheduler.context().monitor(target);
    scheduler.send(target, "finish").unwrap();
    monitor.wait_timeout(WAIT).expect("the target ended");
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(downs.load(SeqCst), 0, "the later process was not told");
    scheduler.context().cancel(second.pid()).unwrap();
    second.wait().unwrap();
}

#[test]
fn monitors_racing_the_end_each_fire_exactly_once() {
    let scheduler = started(2);
    for _ in 0..200 {
        let pid = scheduler.spawn(Obedient).unwrap().pid();
        let racer = {
            let posted = scheduler.send(pid, "finish");
            posted.map(|_| ())
        };
        racer.unwrap();
        let monitors: Vec<_> = (0..4).map(|_| scheduler.context().monitor(pid)).collect();
        for monitor in monitors {
            let down = monitor.wait_timeout(WAIT).expect("fired");
            assert!(matches!(
                down.reason,
                ExitReason::Normal | ExitReason::NoProcess
            ));
        }
    }
}

/// Ignores the cancel: keeps running.
struct Stubborn;

impl Process for Stubborn {
    type Done = Payload;
    fn step(&mut self, _: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
        Ok(())
    }
}

#[test]
fn cancel_lets_the_process_finish_its_own_way_and_terminate_forces_it() {
    let scheduler = started(2);
    let graceful = scheduler.spawn(Obedient).unwrap();
    scheduler.context().cancel(graceful.pid()).unwrap();
    let result = graceful.wait().unwrap();
    assert_eq!(result.downcast_ref::<&str>(), Some(&"cancelled gracefully"));

    let mut stubborn = scheduler.spawn(Stubborn).unwrap();
    scheduler.context().cancel(stubborn.pid()).unwrap();
    assert!(stubborn
        .wait_timeout(Duration::from_millis(100))
        .is_err_and(|e| e.is_timeout()));
    scheduler.terminate(stubborn.pid()).unwrap();
    assert!(matches!(stubborn.wait(), Err(sched::ExitError::Terminated)));
    assert!(scheduler.context().cancel(Pid::local(123_456)).is_err());
}

#[test]
fn names_are_registered_found_refused_and_released_at_the_end() {
    let scheduler = started(2);
    let first = scheduler.spawn(Obedient).unwrap();
    let second = scheduler.spawn(Obedient).unwrap();
    scheduler
        .context()
        .register_name("db", first.pid())
        .unwrap();
    scheduler
        .context()
        .register_name("primary", first.pid())
        .unwrap();
    assert_eq!(scheduler.context().whereis("db"), Some(first.pid()));
    match scheduler.context().register_name("db", second.pid()) {
        Err(NameError::Taken { by, .. }) => assert_eq!(by, first.pid()),
        other => panic!("expected Taken, got {other:?}"),
    }
    assert_eq!(
        scheduler.context().register_name("x", Pid::local(999_999)),
        Err(NameError::NoProcess(Pid::local(999_999)))
    );
    scheduler.send("db", "finish").unwrap();
    first.wait().unwrap();
    let deadline = Instant::now() + WAIT;
    while scheduler.context().whereis("db").is_some() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(
        scheduler.context().whereis("db"),
        None,
        "released at the end"
    );
    assert_eq!(scheduler.context().whereis("primary"), None);
    assert!(scheduler.send("db", "x").is_err());
    scheduler
        .context()
        .register_name("db", second.pid())
        .unwrap();
    assert_eq!(
        scheduler.context().unregister_name("db"),
        Some(second.pid())
    );
    assert_eq!(scheduler.context().whereis("db"), None);
}

/// Yields a command nobody completes, then waits; finishes on cancel.
struct Blocked {
    yielded: bool,
}

impl Process for Blocked {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        if !self.yielded {
            self.yielded = true;
            out.yield_command(sched::command::CommandId(1), Tag(1), Box::new(()));
            return Ok(());
        }
        for event in events {
            if let Event::Cancel = event {
                out.finish("compensated");
            }
        }
        Ok(())
    }
}

#[test]
fn cancel_reaches_a_process_blocked_on_a_yield() {
    let kept = Arc::new(std::sync::Mutex::new(Vec::new()));
    let keeper = kept.clone();
    let scheduler = Scheduler::builder()
        .workers(2)
        .handler(sched::command::CommandId(1), move |_cmd, done| {
            // Never completed while the test runs.
            keeper.lock().unwrap().push(done);
            Ok(())
        })
        .build();
    scheduler.start();
    let blocked = scheduler.spawn(Blocked { yielded: false }).unwrap();
    let deadline = Instant::now() + WAIT;
    while kept.lock().unwrap().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    scheduler.context().cancel(blocked.pid()).unwrap();
    let result = blocked.wait().unwrap();
    assert_eq!(result.downcast_ref::<&str>(), Some(&"compensated"));
    // The yield's late completion finds the process gone.
    let done = kept.lock().unwrap().pop().unwrap();
    assert!(done.is_abandoned());
    assert!(done.complete(Box::new(())).is_err());
}

/// Signals when its `init` runs (its PID is routable then), waits for the
/// go, and fails.
struct Refuses {
    ready: std::sync::mpsc::Sender<()>,
    go: std::sync::Mutex<std::sync::mpsc::Receiver<()>>,
}

impl Process for Refuses {
    type Done = Payload;
    fn init(
        &mut self,
        _: &sched::InitContext,
        _: &str,
        _: sched::Payload,
    ) -> Result<(), sched::InitError> {
        self.ready.send(()).unwrap();
        self.go.lock().unwrap().recv().unwrap();
        Err(sched::InitError::failed("refused"))
    }
    fn step(&mut self, _: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
        Ok(())
    }
}

#[test]
fn a_monitor_set_while_init_runs_fires_when_init_fails() {
    let scheduler = Arc::new(started(1));
    let pid = scheduler.context().allocate_pid().unwrap();
    let (ready, ready_rx) = std::sync::mpsc::channel();
    let (go_tx, go) = std::sync::mpsc::channel();
    let submitter = {
        let scheduler = scheduler.clone();
        std::thread::spawn(move || {
            let process = Refuses {
                ready,
                go: std::sync::Mutex::new(go),
            };
            scheduler
                .spawn(Spawn::new(process).method("run").input(()).at(pid))
                .err()
        })
    };
    ready_rx.recv().unwrap();
    let monitor = scheduler.context().monitor(pid);
    go_tx.send(()).unwrap();
    assert!(submitter.join().unwrap().is_some(), "init failed");
    let down = monitor.wait_timeout(WAIT).expect("the monitor fired");
    assert_eq!(down.reason, ExitReason::NoProcess);
}

/// Wakes the task by panicking: a hostile waker.
struct PanickingWaker;

impl std::task::Wake for PanickingWaker {
    fn wake(self: Arc<Self>) {
        panic!("a waker that panics");
    }
}

#[test]
fn an_outside_monitor_is_a_future_of_its_down() {
    let scheduler = started(2);
    let pid = scheduler.spawn(Obedient).unwrap().pid();
    let monitor = scheduler.context().monitor(pid);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let down = std::thread::scope(|scope| {
        // Ends only once the task waits on the monitor.
        scope.spawn(|| {
            std::thread::sleep(Duration::from_millis(50));
            scheduler.send(pid, "fail").unwrap();
        });
        runtime.block_on(async { tokio::time::timeout(WAIT, monitor).await.expect("it ended") })
    });
    assert_eq!((down.pid, down.reason), (pid, ExitReason::Error));

    // A waker that panics when woken does not stop the down.
    let pid = scheduler.spawn(Obedient).unwrap().pid();
    let mut monitor = scheduler.context().monitor(pid);
    let waker = std::task::Waker::from(Arc::new(PanickingWaker));
    let mut cx = std::task::Context::from_waker(&waker);
    use std::future::Future;
    assert!(std::pin::Pin::new(&mut monitor).poll(&mut cx).is_pending());
    scheduler.send(pid, "finish").unwrap();
    assert_eq!(
        monitor.wait_timeout(WAIT).map(|d| d.reason),
        Ok(ExitReason::Normal)
    );
    match std::pin::Pin::new(&mut monitor).poll(&mut cx) {
        std::task::Poll::Ready(down) => assert_eq!(down.pid, pid),
        std::task::Poll::Pending => panic!("the down is there"),
    }
    scheduler.shutdown(Duration::from_secs(1));
}
