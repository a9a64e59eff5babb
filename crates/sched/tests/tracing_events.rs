//! What the engine tells `tracing`: a span per step (trace level, with the
//! PID) and the lifecycle events (debug level): spawn, end with its reason,
//! upgrade, exit signals of links, a supervisor's restarts.
//!
//! One test: it installs the process-wide subscriber the workers log to.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sched::prelude::*;

const WAIT: Duration = Duration::from_secs(10);

/// Everything the subscriber writes, shared with the test.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Fails at its first message; until then waits.
struct Fragile;

impl Process for Fragile {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            match event {
                Event::Message(_) => return Err("fragile broke".into()),
                Event::Cancel => out.finish(()),
                _ => {}
            }
        }
        Ok(())
    }
}

/// Takes 60 ms in its only step.
struct Slow;

impl Process for Slow {
    type Done = Payload;
    fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        std::thread::sleep(Duration::from_millis(60));
        out.finish(());
        Ok(())
    }
}

/// Links to `peer`, trapping exits, and finishes at the first exit signal.
struct Watcher {
    peer: Pid,
}

impl Process for Watcher {
    type Done = Payload;
    fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        out.trap_exits(true);
        out.link(self.peer);
        out.send(self.peer, "break")?;
        Ok(())
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            if let Event::Exit { .. } = event {
                out.finish(());
            }
        }
        Ok(())
    }
}

#[test]
fn steps_are_spans_and_lifecycle_events_are_logged() {
    let captured = Captured::default();
    let writer = captured.clone();
    tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_span_events(tracing_subscriber::fmt::format::FmtSpan::NEW)
        .with_writer(move || writer.clone())
        .init();

    let scheduler = Scheduler::builder().workers(2).build();
    scheduler.start();
    let fragile = scheduler.spawn(Fragile).unwrap();
    let fragile_pid = fragile.pid();
    let watcher = scheduler.spawn(Watcher { peer: fragile_pid }).unwrap();
    watcher.wait().unwrap();
    assert!(fragile.wait().is_err());
    let upgraded = scheduler.spawn(Fragile).unwrap();
    scheduler
        .context()
        .upgrade(upgraded.pid(), Fragile, "run", ())
        .unwrap();
    scheduler.send(upgraded.pid(), "break").unwrap();
    assert!(upgraded.wait().is_err());

    // A step of 60 ms is reported while it runs (default threshold 10 ms).
    let slow = scheduler.spawn(Slow).unwrap();
    let slow_pid = slow.pid();
    slow.wait().unwrap();

    let child = ChildSpec::new("fragile", || Fragile).restart_in_place(false);
    let supervisor = Supervisor::builder().child(child).build();
    let supervisor = scheduler.spawn(supervisor).unwrap();
    let first = wait_for_child(&scheduler, supervisor.pid(), None);
    scheduler.send(first, "break").unwrap();
    let second = wait_for_child(&scheduler, supervisor.pid(), Some(first));
    assert_ne!(first, second);
    scheduler.shutdown(WAIT);

    let text = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    let has = |needle: &str| text.lines().any(|line| line.contains(needle));
    let pid = fragile_pid.to_string();
    assert!(
        has(&format!("step{{pid={pid}}}")),
        "a span per step:\n{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.contains("DEBUG") && l.contains("spawned") && l.contains(&pid)),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.contains("ended") && l.contains(&pid) && l.contains("reason=failed")),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.contains("exit signal") && l.contains(&format!("from={pid}"))),
        "{text}"
    );
    assert!(has("upgraded from outside"), "{text}");
    assert!(
        text.lines().any(|l| l.contains("WARN")
            && l.contains("has been running")
            && l.contains(&format!("pid={slow_pid}"))),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.contains("restarted") && l.contains(&format!("child={second}"))),
        "{text}"
    );
}

/// The supervisor's current child, once it differs from `not`.
fn wait_for_child(scheduler: &Scheduler, supervisor: Pid, not: Option<Pid>) -> Pid {
    use sched::supervisor::WhichChildren;
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let report = scheduler
            .ask(supervisor, WhichChildren)
            .unwrap()
            .wait_timeout(WAIT)
            .unwrap();
        if let Some(pid) = report.children.first().and_then(|c| c.pid) {
            if Some(pid) != not {
                return pid;
            }
        }
        assert!(std::time::Instant::now() < deadline, "no new child");
        std::thread::sleep(Duration::from_millis(1));
    }
}
