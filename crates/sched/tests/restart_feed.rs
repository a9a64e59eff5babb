//! Restart notices read from outside through a `Restarts` feed: one per
//! restart, in place or under a new PID, typed, in order; a full feed
//! drops and counts instead of holding the supervisor up.

use std::time::Duration;

use sched::prelude::*;
use sched::supervisor::{RestartNotice, Restarts};

const WAIT: Duration = Duration::from_secs(10);

/// Fails on a message "fail", panics on "panic"; ends on its cancel.
struct Fragile;

impl Process for Fragile {
    type Done = ();
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            match event {
                Event::Message(m) if m.payload::<&str>() == Some(&"fail") => {
                    return Err("told to fail".into())
                }
                Event::Message(m) if m.payload::<&str>() == Some(&"panic") => {
                    panic!("told to panic")
                }
                Event::Cancel => out.finish(()),
                _ => {}
            }
        }
        Ok(())
    }
}

fn whereis(scheduler: &Scheduler, name: &str) -> Pid {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        if let Some(pid) = scheduler.context().whereis(name) {
            return pid;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{name} never registered"
        );
        std::thread::yield_now();
    }
}

fn next(feed: &Restarts) -> RestartNotice {
    feed.wait_timeout(WAIT).expect("a restart notice")
}

#[test]
fn each_restart_in_place_or_under_a_new_pid_gives_one_typed_notice_in_order() {
    let scheduler = Scheduler::builder().workers(2).build();
    scheduler.start();
    let feed = Restarts::new(16);
    let supervisor = Supervisor::builder()
        .intensity(10, Duration::from_secs(60))
        .child(ChildSpec::new("kept", || Fragile).register_as("kept"))
        .child(
            ChildSpec::new("renewed", || Fragile)
                .register_as("renewed")
                .restart_in_place(false),
        )
        .restarts_to(&feed)
        .build();
    let handle = scheduler.spawn(supervisor).unwrap();

    let kept = whereis(&scheduler, "kept");
    scheduler.send(kept, "fail").unwrap();
    let notice = next(&feed);
    assert_eq!(notice.child, "kept");
    assert_eq!((notice.previous, notice.pid), (kept, kept));
    assert!(notice.in_place());
    assert_eq!(notice.reason, ExitReason::Error);
    assert_eq!(notice.message.as_deref(), Some("told to fail"));

    let renewed = whereis(&scheduler, "renewed");
    scheduler.send(renewed, "panic").unwrap();
    let notice = next(&feed);
    assert_eq!(notice.child, "renewed");
    assert_eq!(notice.previous, renewed);
    assert_ne!(notice.pid, renewed, "restarted under a new PID");
    assert!(!notice.in_place());
    assert_eq!(notice.reason, ExitReason::Panicked);
    assert_eq!(scheduler.context().whereis("renewed"), Some(notice.pid));

    // Exactly one notice per restart: nothing more is queued.
    assert_eq!(feed.try_next(), None);
    assert_eq!(feed.missed(), 0);
    scheduler.context().cancel(handle.pid()).unwrap();
    let report = handle.wait().unwrap();
    assert_eq!(report.total_restarts(), 2);
    scheduler.shutdown(WAIT);
}

#[test]
fn a_full_feed_counts_what_it_drops_and_the_supervisor_goes_on() {
    let scheduler = Scheduler::builder().workers(2).build();
    scheduler.start();
    let feed = Restarts::new(2);
    let supervisor = Supervisor::builder()
        .intensity(100, Duration::from_secs(60))
        .child(ChildSpec::new("kept", || Fragile).register_as("kept"))
        .restarts_to(&feed)
        .build();
    let handle = scheduler.spawn(supervisor).unwrap();
    let kept = whereis(&scheduler, "kept");
    for _ in 0..5 {
        scheduler.send(kept, "fail").unwrap();
    }
    // Nobody reads: two notices are kept, three are counted as missed.
    let deadline = std::time::Instant::now() + WAIT;
    while feed.missed() < 3 {
        assert!(
            std::time::Instant::now() < deadline,
            "missed {}",
            feed.missed()
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(feed.missed(), 3);
    assert!(next(&feed).in_place());
    assert!(next(&feed).in_place());
    assert_eq!(feed.try_next(), None);
    scheduler.context().cancel(handle.pid()).unwrap();
    assert_eq!(handle.wait().unwrap().total_restarts(), 5);
    scheduler.shutdown(WAIT);
}
