//! Shutdown racing submissions and other shutdowns: nothing admitted is
//! lost, everything live gets the cancel, every caller gets the report.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use common::*;
use relay::Pid;
use sched_core::*;

/// Submits processes from `make` in a tight loop until the engine refuses
/// with `ShuttingDown`; returns the accepted handles.
fn submit_until_refused(
    engine: &Engine,
    first_id: u64,
    started: &AtomicUsize,
    make: impl Fn() -> Box<dyn Process<Done = relay::Payload>>,
) -> Vec<Completion> {
    let mut accepted = Vec::new();
    for id in first_id.. {
        match engine
            .context()
            .spawn(Spawn::new(make()).method("run").at(Pid::local(id)))
        {
            Ok(handle) => {
                accepted.push(handle);
                started.fetch_add(1, Ordering::SeqCst);
            }
            Err(SubmitError::ShuttingDown) => break,
            Err(other) => panic!("unexpected submit error: {other}"),
        }
    }
    accepted
}

/// Runs `rounds` engines, each with a thread submitting while the main
/// thread shuts down, and hands each round's report and accepted handles
/// to `check` as soon as the round is over (so a failure shows at once).
fn race_submissions_with_shutdown(
    rounds: usize,
    mut check: impl FnMut(ShutdownReport, Vec<Completion>),
) {
    (0..rounds)
        .map(|round| {
            let engine = Arc::new(started(2));
            let count = Arc::new(AtomicUsize::new(0));
            let submitter = {
                let (engine, count) = (engine.clone(), count.clone());
                std::thread::spawn(move || {
                    submit_until_refused(
                        &engine,
                        1 << 32,
                        &count,
                        || -> Box<dyn Process<Done = relay::Payload>> { Inbox::new() },
                    )
                })
            };
            // Let a few in first, so that shutdown has something to cancel
            // and the submitter is mid-loop when the flag goes up.
            while count.load(Ordering::SeqCst) < 1 + round % 8 {
                std::hint::spin_loop();
            }
            let report = engine.shutdown(PATIENCE);
            (report, submitter.join().unwrap())
        })
        .for_each(|(report, accepted)| check(report, accepted));
}

/// The race that lost processes: a shutdown that finds no live process
/// lets the workers go while a submission that passed its "not stopping"
/// check is about to count itself live and queue its process. The window
/// is a few instructions wide, so this test rarely hits it on code that
/// has the bug; the loom model `admission_and_stop_are_one_decision`
/// (`src/engine/live.rs`) explores it exhaustively and fails on the split
/// check (`cargo xtask mutants`).
#[test]
fn a_submission_racing_shutdown_of_an_empty_engine_is_refused_or_runs() {
    for round in 0..200 {
        let engine = Arc::new(started(2));
        let count = Arc::new(AtomicUsize::new(0));
        let submitter = {
            let (engine, count) = (engine.clone(), count.clone());
            std::thread::spawn(move || submit_until_refused(&engine, 1, &count, quick))
        };
        while count.load(Ordering::SeqCst) < 1 + round % 4 {
            std::hint::spin_loop();
        }
        engine.shutdown(PATIENCE);
        for mut handle in submitter.join().unwrap() {
            let pid = handle.pid();
            assert!(
                !handle.wait_timeout(PATIENCE).is_err_and(|e| e.is_timeout()),
                "{pid} was accepted while shutdown ran but never ran (round {round})"
            );
        }
    }
}

#[test]
fn a_submission_racing_shutdown_is_refused_or_reaches_an_outcome() {
    race_submissions_with_shutdown(200, |_, accepted| {
        for mut handle in accepted {
            let pid = handle.pid();
            let outcome = handle.wait_timeout(PATIENCE);
            assert!(
                !outcome.is_err_and(|e| e.is_timeout()),
                "{pid} was accepted during shutdown but never ran to an outcome"
            );
        }
    });
}

#[test]
fn every_process_admitted_during_shutdown_receives_the_cancel() {
    race_submissions_with_shutdown(200, |report, accepted| {
        // An `Inbox` ends with "cancelled" on its cancel; one that missed
        // the cancel would be forced at the deadline instead.
        assert_eq!(report.forced, 0, "a process missed the cancel: {report:?}");
        for handle in accepted {
            let outcome = wait(handle).expect("ended by its cancel");
            assert_eq!(outcome.downcast_ref::<&str>(), Some(&"cancelled"));
        }
    });
}

#[test]
fn concurrent_shutdowns_wait_for_the_first_and_return_its_report() {
    let engine = Arc::new(started(2));
    // Ends 100 ms after its cancel, so the first shutdown is still waiting
    // when the second call arrives.
    let release = Arc::new(AtomicBool::new(false));
    let flag = release.clone();
    let slow = process(move |events, out| {
        for event in events {
            if matches!(event, Event::Cancel) {
                out.yield_command(ASYNC, Tag(1), Box::new(Duration::from_millis(100)));
                return Ok(());
            }
            if let Event::Completion { tag: Tag(1), .. } = event {
                flag.store(true, Ordering::SeqCst);
                out.finish(());
                return Ok(());
            }
        }
        Ok(())
    });
    let handle = submit(&engine, 1, slow);
    let barrier = Arc::new(Barrier::new(2));
    let second = {
        let (engine, barrier) = (engine.clone(), barrier.clone());
        std::thread::spawn(move || {
            barrier.wait();
            engine.shutdown(PATIENCE)
        })
    };
    barrier.wait();
    let first = engine.shutdown(PATIENCE);
    let second = second.join().unwrap();
    assert!(
        release.load(Ordering::SeqCst),
        "a shutdown returned before the process ended"
    );
    assert_eq!(first.ended_gracefully, 1);
    assert_eq!(first, second, "both callers get the one shutdown's report");
    assert_eq!(engine.shutdown(Duration::ZERO), first, "a later call too");
    wait(handle).expect("done");
}

#[test]
fn a_shutdown_report_tells_processes_in_a_step_from_processes_queued_behind_it() {
    let engine = builder(1).build();
    let (unblock, blocked) = std::sync::mpsc::channel::<()>();
    let blocked = std::sync::Mutex::new(blocked);
    let stuck = process(move |_, out| {
        // Blocks its only worker until the test is over.
        let _ = blocked.lock().unwrap().recv_timeout(PATIENCE);
        out.finish(());
        Ok(())
    });
    let _stuck = submit(&engine, 1, stuck);
    let queued: Vec<_> = (2..5).map(|id| submit(&engine, id, Inbox::new())).collect();
    engine.start();
    // The stuck step must have started before the shutdown begins.
    while engine
        .context()
        .processes()
        .iter()
        .all(|p| p.state != ProcessState::Running)
    {
        std::thread::yield_now();
    }
    let report = engine.shutdown(Duration::from_millis(50));
    assert_eq!(report.still_running, 1, "{report:?}");
    assert_eq!(report.still_queued, 3, "{report:?}");
    assert_eq!(report.workers_detached, 1, "{report:?}");
    unblock.send(()).unwrap();
    drop(queued);
}

/// A process that finishes at its first step (so the engine often has no
/// live process when shutdown looks).
fn quick() -> Box<dyn Process<Done = relay::Payload>> {
    process(|_, out| {
        out.finish(());
        Ok(())
    })
}
