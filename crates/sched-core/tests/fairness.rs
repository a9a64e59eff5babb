//! No runnable process waits unboundedly, whatever keeps its worker busy:
//! for each way a process can make itself runnable again (continue, a
//! message to itself, a synchronous completion, a timer that is due at
//! once, two processes waking each other), processes queued behind it on
//! the same worker still run, on one worker and on two.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use common::*;
use relay::Pid;
use sched_core::*;

/// How a hog makes itself runnable again after every step.
#[derive(Clone, Copy, Debug)]
enum Wake {
    Continue,
    SelfMessage,
    SyncCompletion,
    /// A zero-delay timer: due at the worker's next timer check, and then
    /// queued in the timer queue, which runs before the deque.
    Timer,
    /// Sends to its partner (`id ^ 1`) and waits; the partner does the same.
    Partner,
}

/// A process that keeps itself (or its partner) runnable until `stop`.
fn hog(id: u64, how: Wake, stop: Arc<AtomicBool>) -> Box<dyn Process<Done = relay::Payload>> {
    process(move |events, out| {
        // Reading the events keeps the engine from re-delivering them.
        let seen = events.count();
        if stop.load(Ordering::Relaxed) {
            out.finish(seen);
            return Ok(());
        }
        match how {
            Wake::Continue => out.continue_(),
            Wake::SelfMessage => {
                let me = out.pid();
                out.send(me, ()).expect("to itself");
                out.idle();
            }
            Wake::SyncCompletion => {
                out.yield_command(SYNC, Tag(1), Box::new(()));
                out.idle();
            }
            Wake::Timer => {
                out.set_timer(std::time::Duration::ZERO, Tag(1));
                out.idle();
            }
            Wake::Partner => {
                // The partner may have finished already (after `stop`).
                let _ = out.send(Pid::local(id ^ 1), ());
                out.idle();
            }
        }
        Ok(())
    })
}

/// A process that finishes at its first step.
fn victim() -> Box<dyn Process<Done = relay::Payload>> {
    process(|_, out| {
        out.finish(());
        Ok(())
    })
}

/// Queues `hogs` hogs and then five victims before the workers start (so
/// the first worker takes them all from the global queue into its own
/// deque), and checks that every victim finishes while the hogs run.
fn victims_run_beside(workers: usize, how: Wake, hogs: u64) {
    let engine = builder(workers).build();
    let stop = Arc::new(AtomicBool::new(false));
    // Partners come in pairs (ids 2k, 2k+1); the others need no partner.
    let count = if matches!(how, Wake::Partner) {
        hogs * 2
    } else {
        hogs
    };
    let hog_handles: Vec<_> = (0..count)
        .map(|i| submit(&engine, 100 + i, hog(100 + i, how, stop.clone())))
        .collect();
    let victims: Vec<_> = (0..5)
        .map(|i| submit(&engine, 1000 + i, victim()))
        .collect();
    engine.start();
    for handle in victims {
        let pid = handle.pid();
        assert!(
            wait_or_none(handle),
            "{pid} never ran beside {count} hog(s) waking by {how:?} on {workers} worker(s)"
        );
    }
    stop.store(true, Ordering::Relaxed);
    if matches!(how, Wake::Partner) {
        // A partner waiting for a message that will not come is ended by
        // the shutdown's cancel instead.
        engine.shutdown(PATIENCE);
    } else {
        for handle in hog_handles {
            wait(handle).expect("the hog finishes once told to");
        }
    }
}

/// Whether the process finished within the tests' patience.
fn wait_or_none(mut handle: Completion) -> bool {
    !handle.wait_timeout(PATIENCE).is_err_and(|e| e.is_timeout())
}

#[test]
fn a_continuing_process_does_not_starve_its_worker() {
    victims_run_beside(1, Wake::Continue, 1);
}

#[test]
fn continuing_processes_do_not_starve_two_workers() {
    victims_run_beside(2, Wake::Continue, 2);
}

#[test]
fn a_process_messaging_itself_does_not_starve_its_worker() {
    victims_run_beside(1, Wake::SelfMessage, 1);
}

#[test]
fn processes_messaging_themselves_do_not_starve_two_workers() {
    victims_run_beside(2, Wake::SelfMessage, 2);
}

#[test]
fn a_process_woken_by_its_own_synchronous_completions_does_not_starve_its_worker() {
    victims_run_beside(1, Wake::SyncCompletion, 1);
}

#[test]
fn processes_woken_by_synchronous_completions_do_not_starve_two_workers() {
    victims_run_beside(2, Wake::SyncCompletion, 2);
}

#[test]
fn processes_woken_by_their_own_timers_do_not_starve_their_worker() {
    victims_run_beside(1, Wake::Timer, 8);
}

#[test]
fn processes_woken_by_their_own_timers_do_not_starve_two_workers() {
    victims_run_beside(2, Wake::Timer, 8);
}

#[test]
fn two_processes_waking_each_other_do_not_starve_their_worker() {
    victims_run_beside(1, Wake::Partner, 1);
}

#[test]
fn pairs_waking_each_other_do_not_starve_two_workers() {
    victims_run_beside(2, Wake::Partner, 2);
}

/// A step that wakes a process and then runs long (here: until that
/// process has run, or the tests' patience is over) must not hide it in
/// its worker's `next` slot while the other worker is idle: the idle
/// worker takes it. Prints the wake-to-run latency it measured.
#[test]
fn a_process_woken_by_a_long_step_is_taken_by_an_idle_worker() {
    use std::sync::mpsc::{channel, Sender};
    use std::sync::Mutex;
    use std::time::Instant;

    let engine = started(2);
    // Both workers asleep first: the one that runs the step is woken for
    // it, the other must still come for what the step wakes.
    while engine.context().stats().parked_workers < 2 {
        std::thread::yield_now();
    }
    let (ran_tx, ran_rx) = channel::<Instant>();
    let ran_tx = Mutex::new(Some(ran_tx));
    let waiting = Mutex::new(Some(ran_rx));
    let latency: Arc<Mutex<Option<std::time::Duration>>> = Arc::default();
    let measured = latency.clone();
    let parent = process(move |_, out| {
        let tx: Sender<Instant> = ran_tx.lock().unwrap().take().expect("one step");
        let child = process(move |_, out| {
            let _ = tx.send(Instant::now());
            out.finish(());
            Ok(())
        });
        let pid = out.context().allocate_pid().expect("pids left");
        let woken_at = Instant::now();
        drop(
            out.spawn(Spawn::new(child).method("run").at(pid))
                .expect("spawned"),
        );
        // The long step: it ends when the child has run elsewhere.
        let rx = waiting.lock().unwrap().take().expect("one step");
        let ran_at = rx.recv_timeout(PATIENCE).ok();
        *measured.lock().unwrap() = ran_at.map(|t| t - woken_at);
        out.finish(ran_at.is_some());
        Ok(())
    });
    let ran_elsewhere = wait(submit(&engine, 1 << 40, parent)).expect("done");
    assert_eq!(
        ran_elsewhere.downcast_ref::<bool>(),
        Some(&true),
        "the woken process waited for the whole long step while a worker was idle"
    );
    println!(
        "wake-to-run latency of a process hidden behind a long step: {:?}",
        latency.lock().unwrap().expect("measured")
    );
}
