//! A process resolved once (`sched::message::Resolved`): sends through it
//! behave as sends by PID (order, mailbox bound, the error of an ended
//! process), name the incarnation rather than the PID, and fall back to a
//! send by PID through another engine.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use sched::message::{Resolved, SendErrorKind};
use sched::prelude::*;

/// Keeps every `u64` it reads, with its sender; finishes on `u64::MAX`.
struct Log(Arc<Mutex<Vec<(Pid, u64)>>>);

impl Process for Log {
    type Done = ();
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            if let Event::Message(package) = event {
                let Some(&n) = package.payload::<u64>() else {
                    continue;
                };
                if n == u64::MAX {
                    out.finish(());
                    continue;
                }
                self.0.lock().unwrap().push((package.source(), n));
            }
        }
        Ok(())
    }
}

fn started() -> Scheduler {
    let scheduler = Scheduler::builder().workers(2).build();
    scheduler.start();
    scheduler
}

fn log() -> Arc<Mutex<Vec<(Pid, u64)>>> {
    Arc::new(Mutex::new(Vec::new()))
}

#[test]
fn sends_through_a_handle_and_by_pid_mixed_arrive_in_the_order_sent() {
    let scheduler = started();
    let seen = log();
    let target = scheduler.spawn(Log(Arc::clone(&seen))).unwrap();
    let resolved = scheduler.resolve(target.pid()).expect("running");
    assert_eq!(resolved.pid(), target.pid());
    for n in 0..2_000u64 {
        if n % 3 == 0 {
            scheduler.send(target.pid(), n).unwrap();
        } else {
            scheduler.send(&resolved, n).unwrap();
        }
    }
    scheduler.send(&resolved, u64::MAX).unwrap();
    target.wait().unwrap();
    let seen = seen.lock().unwrap();
    let numbers: Vec<u64> = seen.iter().map(|&(_, n)| n).collect();
    assert_eq!(numbers, (0..2_000).collect::<Vec<_>>());
    assert!(seen.iter().all(|&(from, _)| from == Pid::OUTSIDE));
    scheduler.shutdown(Duration::from_secs(5));
}

#[test]
fn a_handle_to_an_ended_process_refuses_with_the_message_back() {
    let scheduler = started();
    let target = scheduler.spawn(Log(log())).unwrap();
    let resolved = scheduler.resolve(target.pid()).expect("running");
    scheduler.send(&resolved, u64::MAX).unwrap();
    target.wait().unwrap();
    let refused = scheduler.send(&resolved, 7u64).unwrap_err();
    assert_eq!(refused.kind(), SendErrorKind::Ended);
    assert_eq!(refused.into_package().downcast::<u64>().ok(), Some(7));
    // As a send by PID says, and nothing resolves the PID any more.
    let by_pid = scheduler.send(resolved.pid(), 7u64).unwrap_err();
    assert_eq!(by_pid.kind(), SendErrorKind::Ended);
    assert!(scheduler.resolve(resolved.pid()).is_none());
    scheduler.shutdown(Duration::from_secs(5));
}

#[test]
fn nothing_resolves_an_unknown_pid_or_another_nodes() {
    let scheduler = started();
    assert!(scheduler.resolve(Pid::local(404)).is_none());
    assert!(scheduler.resolve(Pid::OUTSIDE).is_none());
    scheduler.shutdown(Duration::from_secs(5));
}

#[test]
fn a_handle_keeps_the_mailbox_bound() {
    let scheduler = Scheduler::builder().workers(1).mailbox_capacity(4).build();
    // Not started: nothing reads, so the mailbox fills.
    let target = scheduler.spawn(Log(log())).unwrap();
    let resolved = scheduler.resolve(target.pid()).expect("spawned");
    let mut full = None;
    for n in 0..64u64 {
        if let Err(refused) = scheduler.send(&resolved, n) {
            full = Some((n, refused));
            break;
        }
    }
    let (at, refused) = full.expect("the bound refused a send");
    assert_eq!(refused.kind(), SendErrorKind::Full);
    assert_eq!(refused.into_package().downcast::<u64>().ok(), Some(at));
    // By PID, the same mailbox is full.
    let by_pid = scheduler.send(target.pid(), 99u64).unwrap_err();
    assert_eq!(by_pid.kind(), SendErrorKind::Full);
}

/// Sends `count` numbers through a handle it is given, then finishes.
struct Forwarder {
    to: Resolved,
    count: u64,
}

impl Process for Forwarder {
    type Done = ();
    fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for n in 0..self.count {
            out.send(&self.to, n)?;
        }
        out.send(&self.to, u64::MAX)?;
        out.finish(());
        Ok(())
    }
}

#[test]
fn a_step_sends_through_a_handle_as_itself() {
    let scheduler = started();
    let seen = log();
    let target = scheduler.spawn(Log(Arc::clone(&seen))).unwrap();
    let to = scheduler.resolve(target.pid()).expect("running");
    let forwarder = scheduler.spawn(Forwarder { to, count: 500 }).unwrap();
    let from = forwarder.pid();
    forwarder.wait().unwrap();
    target.wait().unwrap();
    let seen = seen.lock().unwrap();
    assert_eq!(
        seen.iter().map(|&(_, n)| n).collect::<Vec<_>>(),
        (0..500).collect::<Vec<_>>()
    );
    assert!(seen.iter().all(|&(source, _)| source == from));
    scheduler.shutdown(Duration::from_secs(5));
}

#[test]
fn through_another_engine_a_handle_is_a_send_by_pid_there() {
    // Two engines hand out the same first PIDs: a handle of one, sent to
    // through the other, must reach the other's process of that PID (as
    // the PID would), never the first engine's process.
    let first = started();
    let second = started();
    let (first_seen, second_seen) = (log(), log());
    let in_first = first.spawn(Log(Arc::clone(&first_seen))).unwrap();
    let in_second = second.spawn(Log(Arc::clone(&second_seen))).unwrap();
    assert_eq!(in_first.pid(), in_second.pid(), "both engines' first PID");
    let resolved = first.resolve(in_first.pid()).expect("running");
    second.send(&resolved, 1u64).unwrap();
    second.send(&resolved, u64::MAX).unwrap();
    let mut in_second = in_second;
    in_second
        .wait_timeout(Duration::from_secs(10))
        .expect("the second engine's process read both");
    assert_eq!(second_seen.lock().unwrap().as_slice(), &[(Pid::OUTSIDE, 1)]);
    assert!(first_seen.lock().unwrap().is_empty(), "{:?}", first_seen);
    first.send(&resolved, 2u64).unwrap();
    first.send(&resolved, u64::MAX).unwrap();
    in_first.wait().unwrap();
    assert_eq!(first_seen.lock().unwrap().as_slice(), &[(Pid::OUTSIDE, 2)]);
    // A handle of an engine that is gone is still safe to hold and drop.
    first.shutdown(Duration::from_secs(5));
    drop(first);
    assert_eq!(
        second.send(&resolved, 3u64).unwrap_err().kind(),
        SendErrorKind::Ended
    );
    drop(resolved);
    second.shutdown(Duration::from_secs(5));
}

/// Records `(its instance, n)` for each number; panics on `u64::MAX`.
struct Crashy {
    instance: usize,
    seen: Arc<Mutex<Vec<(usize, u64)>>>,
}

impl Process for Crashy {
    type Done = ();
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            match event {
                Event::Message(package) => match package.payload::<u64>() {
                    Some(&u64::MAX) => panic!("poisoned"),
                    Some(&n) => self.seen.lock().unwrap().push((self.instance, n)),
                    None => {}
                },
                Event::Cancel => out.finish(()),
                _ => {}
            }
        }
        Ok(())
    }
}

#[test]
fn a_child_restarted_in_place_is_still_reached_through_its_handle() {
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    let scheduler = started();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let instances = Arc::new(AtomicUsize::new(0));
    let (made, log) = (Arc::clone(&instances), Arc::clone(&seen));
    let spec = ChildSpec::new("crashy", move || Crashy {
        instance: made.fetch_add(1, SeqCst) + 1,
        seen: Arc::clone(&log),
    })
    .register_as("crashy");
    let supervisor = Supervisor::builder()
        .intensity(5, Duration::from_secs(60))
        .child(spec)
        .build();
    let _supervisor = scheduler.spawn(supervisor).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let pid = loop {
        if let Some(pid) = scheduler.context().whereis("crashy") {
            break pid;
        }
        assert!(std::time::Instant::now() < deadline, "never registered");
        std::thread::sleep(Duration::from_millis(1));
    };
    let resolved = scheduler.resolve(pid).expect("running");
    scheduler.send(&resolved, 1u64).unwrap();
    scheduler.send(&resolved, u64::MAX).unwrap();
    scheduler.send(&resolved, 2u64).unwrap();
    while seen.lock().unwrap().len() < 2 {
        assert!(std::time::Instant::now() < deadline, "{:?}", seen);
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(seen.lock().unwrap().as_slice(), &[(1, 1), (2, 2)]);
    // Restarted in place: the same process, still reached.
    scheduler.send(&resolved, 3u64).unwrap();
    while seen.lock().unwrap().len() < 3 {
        assert!(std::time::Instant::now() < deadline, "{:?}", seen);
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(seen.lock().unwrap()[2], (2, 3));
    scheduler.shutdown(Duration::from_secs(5));
}
