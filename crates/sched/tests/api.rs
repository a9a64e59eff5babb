//! The facade's API: submission forms, messaging, and races with shutdown.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use sched::message::{into_payload, SendErrorKind};
use sched::prelude::*;
use sched::process::SubmitError;
use sched::Package;

const PATIENCE: Duration = Duration::from_secs(10);

/// Finishes with the input it was given (a `u64`), or waits for messages
/// when started with method "wait".
struct Echo {
    input: Option<u64>,
}

impl Process for Echo {
    type Done = Payload;
    fn init(&mut self, _: &InitContext, method: &str, input: Payload) -> Result<(), InitError> {
        match method {
            "echo" => {
                let n = input
                    .downcast::<u64>()
                    .map_err(|_| InitError::failed("echo takes a u64"))?;
                self.input = Some(*n);
                Ok(())
            }
            "wait" => Ok(()),
            other => Err(InitError::unknown_method(other)),
        }
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        if let Some(n) = self.input {
            out.finish(n);
            return Ok(());
        }
        for event in events {
            match event {
                Event::Message(p) => {
                    out.finish(p.into_payload());
                    return Ok(());
                }
                Event::Cancel => {
                    out.finish("cancelled");
                    return Ok(());
                }
                _ => {}
            }
        }
        out.idle();
        Ok(())
    }

    fn close(&mut self) {}
}

fn started(workers: usize) -> Scheduler {
    let s = Scheduler::builder().workers(workers).build();
    s.start();
    s
}

#[test]
fn submit_takes_any_input_and_passes_boxed_payloads_through() {
    let s = started(1);
    let a = s
        .spawn(
            Spawn::new(Echo { input: None })
                .method("echo")
                .input(5u64)
                .at(Pid::local(1)),
        )
        .unwrap();
    let boxed: Payload = Box::new(6u64);
    let b = s
        .spawn(
            Spawn::new(Echo { input: None })
                .method("echo")
                .input(boxed)
                .at(Pid::local(2)),
        )
        .unwrap();
    assert_eq!(a.wait().unwrap().downcast_ref::<u64>(), Some(&5));
    assert_eq!(b.wait().unwrap().downcast_ref::<u64>(), Some(&6));
}

#[test]
fn init_errors_come_back_unchanged() {
    let s = started(1);
    let err = s
        .spawn(
            Spawn::new(Echo { input: None })
                .method("echo")
                .input("not a number")
                .at(Pid::local(1)),
        )
        .unwrap_err();
    match err {
        SubmitError::Init { error, .. } => {
            assert_eq!(error.to_string(), "init failed: echo takes a u64")
        }
        other => panic!("unexpected {other}"),
    }
    let err = s
        .spawn(
            Spawn::new(Echo { input: None })
                .method("nope")
                .at(Pid::local(1)),
        )
        .unwrap_err();
    assert!(matches!(
        err,
        SubmitError::Init {
            error: InitError::UnknownMethod { .. },
            ..
        }
    ));
    assert!(s.processes().is_empty());
}

#[test]
fn spawn_allocates_distinct_pids() {
    let s = started(2);
    let handles: Vec<_> = (0..100u64)
        .map(|i| {
            s.spawn(Spawn::new(Echo { input: None }).method("echo").input(i))
                .unwrap()
        })
        .collect();
    let mut pids: Vec<Pid> = handles.iter().map(Completion::pid).collect();
    pids.sort();
    pids.dedup();
    assert_eq!(pids.len(), 100);
    for (i, h) in handles.into_iter().enumerate() {
        assert_eq!(h.wait().unwrap().downcast_ref::<u64>(), Some(&(i as u64)));
    }
}

#[test]
fn send_to_and_the_receiver_trait_deliver_messages() {
    let s = started(1);
    let a = s
        .spawn(
            Spawn::new(Echo { input: None })
                .method("wait")
                .at(Pid::local(1)),
        )
        .unwrap();
    s.context()
        .forward(Package::new(Pid::local(0), Pid::local(1), "via send_to"))
        .unwrap();
    assert_eq!(
        a.wait().unwrap().downcast_ref::<&str>(),
        Some(&"via send_to")
    );

    let b = s
        .spawn(
            Spawn::new(Echo { input: None })
                .method("wait")
                .at(Pid::local(2)),
        )
        .unwrap();
    s.context()
        .forward(Package::new(Pid::local(0), Pid::local(2), 9u8))
        .unwrap();
    assert_eq!(b.wait().unwrap().downcast_ref::<u8>(), Some(&9));

    let err = s
        .context()
        .forward(Package::new(Pid::local(0), Pid::local(2), 1u8))
        .unwrap_err();
    assert_eq!(err.kind(), SendErrorKind::UnknownTarget);
}

#[test]
fn wait_timeout_and_try_take_report_a_running_process() {
    let s = started(1);
    let mut h = s
        .spawn(
            Spawn::new(Echo { input: None })
                .method("wait")
                .at(Pid::local(1)),
        )
        .unwrap();
    assert!(h.try_take().is_none());
    assert!(!h.is_finished());
    assert!(h
        .wait_timeout(Duration::from_millis(20))
        .is_err_and(|e| e.is_timeout()));
    s.context()
        .forward(Package::new(Pid::local(0), Pid::local(1), 1u32))
        .unwrap();
    let outcome = h.wait_timeout(PATIENCE).expect("finished");
    assert_eq!(outcome.downcast_ref::<u32>(), Some(&1));
}

#[test]
fn a_submit_racing_shutdown_is_refused_or_reports_its_outcome() {
    for _ in 0..20 {
        let s = Arc::new(started(2));
        let completed = Arc::new(AtomicUsize::new(0));
        let submitter = {
            let s = s.clone();
            let completed = completed.clone();
            std::thread::spawn(move || {
                let mut accepted = Vec::new();
                let mut refused = 0;
                for _ in 0..200 {
                    match s.spawn(Spawn::new(Echo { input: None }).method("wait")) {
                        Ok(h) => accepted.push(h),
                        Err(SubmitError::ShuttingDown) => refused += 1,
                        Err(e) => panic!("unexpected {e}"),
                    }
                }
                for mut h in accepted {
                    // Every accepted process reports exactly one outcome:
                    // cancelled gracefully or forced.
                    let outcome = h.wait_timeout(PATIENCE);
                    assert!(
                        matches!(&outcome, Ok(v) if v.downcast_ref::<&str>() == Some(&"cancelled"))
                            || matches!(outcome, Err(ExitError::Cancelled))
                    );
                    completed.fetch_add(1, Ordering::SeqCst);
                }
                refused
            })
        };
        std::thread::sleep(Duration::from_micros(200));
        let report = s.shutdown(Duration::from_secs(2));
        let refused = submitter.join().unwrap();
        assert_eq!(completed.load(Ordering::SeqCst) + refused, 200);
        assert_eq!(report.still_running, 0);
    }
}

#[test]
fn into_payload_does_not_box_twice() {
    let p = into_payload(into_payload(3i16));
    assert_eq!(p.downcast_ref::<i16>(), Some(&3));
}

/// With every message name imported by glob, a send through an
/// `Arc<Scheduler>` is the scheduler's own `send` (a target and a
/// message), not a trait's that takes a package.
mod glob_imported {
    use sched::message::*;
    use sched::prelude::*;
    use std::sync::Arc;

    #[test]
    fn a_send_through_an_arc_is_the_scheduler_s() {
        let scheduler = Arc::new(Scheduler::builder().workers(1).build());
        let err = scheduler.send(Pid::local(9), "hello").unwrap_err();
        assert_eq!(err.kind(), SendErrorKind::UnknownTarget);
    }
}
