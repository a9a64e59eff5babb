//! The engine's behaviour: the original implementation's checklist where
//! it applies to our design, plus the process contract (`docs/process-contract.md`).

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use common::*;
use relay::{Package, Pid, Receiver, SendErrorKind};
use sched_core::*;

#[test]
fn a_process_yielding_to_an_async_handler_completes() {
    let engine = started(2);
    let outcome = wait(submit(&engine, 1, Counter::new(10, ASYNC)));
    assert_eq!(done_u64(outcome), 10);
}

#[test]
fn many_processes_on_many_workers_all_complete() {
    let engine = started(4);
    let handles: Vec<_> = (0..100)
        .map(|i| submit(&engine, i, Counter::new(50, ASYNC)))
        .collect();
    for h in handles {
        assert_eq!(done_u64(wait(h)), 50);
    }
    let stats = engine.stats();
    assert_eq!(stats.workers.len(), 4);
    assert_eq!(stats.totals().completed, 100);
    assert_eq!(stats.live_processes, 0);
}

#[test]
fn a_sleeping_yield_takes_at_least_its_duration() {
    let engine = started(2);
    let start = Instant::now();
    let p = process({
        let mut asked = false;
        move |events, out| {
            if !asked {
                asked = true;
                out.yield_command(ASYNC, Tag(1), Box::new(Duration::from_millis(50)));
            } else if events.next().is_some() {
                out.done(Box::new(()));
            }
            Ok(())
        }
    });
    wait(submit(&engine, 1, p)).unwrap();
    assert!(start.elapsed() >= Duration::from_millis(50));
}

#[test]
fn work_submitted_before_start_runs_after_start() {
    let engine = builder(2).build();
    let h = submit(&engine, 1, Counter::new(3, SYNC));
    assert_eq!(engine.stats().global_queue_len, 1);
    engine.start();
    assert_eq!(done_u64(wait(h)), 3);
}

#[test]
fn one_worker_counts_exactly_the_steps_taken() {
    let engine = started(1);
    // 5 yields, one per step, plus the step that sees the last completion.
    assert_eq!(
        done_u64(wait(submit(&engine, 1, Counter::new(5, ASYNC)))),
        5
    );
    let stats = engine.stats();
    assert_eq!(stats.workers.len(), 1);
    assert_eq!(stats.totals().steps, 6);
}

#[test]
fn messages_reach_a_process_by_pid_and_finished_pids_are_unknown() {
    let engine = started(2);
    let h = submit(&engine, 7, Inbox::new());
    for i in 0..3 {
        engine
            .send(Package::new(Pid::local(0), Pid::local(7), i as u64))
            .unwrap();
    }
    engine
        .send(Package::new(Pid::local(0), Pid::local(7), "stop"))
        .unwrap();
    assert_eq!(done_u64(wait(h)), 3);
    let err = engine
        .send(Package::new(Pid::local(0), Pid::local(7), 1u8))
        .unwrap_err();
    assert_eq!(err.kind(), SendErrorKind::UnknownTarget);
    assert_eq!(err.target(), Pid::local(7));
    assert_eq!(
        err.into_package().downcast::<u8>().ok(),
        Some(1),
        "the message comes back"
    );
}

#[test]
fn sending_to_an_unknown_pid_fails_naming_it() {
    let engine = started(1);
    let err = engine
        .send(Package::new(Pid::local(1), Pid::local(404), ()))
        .unwrap_err();
    assert_eq!(err.kind(), SendErrorKind::UnknownTarget);
    assert!(err.to_string().contains("<0.404>"), "{err}");
}

#[test]
fn terminating_a_blocked_process_ends_it_with_terminated() {
    let engine = started(2);
    let closes = CloseCounter::default();
    let mut p = Counter::new(1, NEVER);
    p.closes = closes.clone();
    let h = submit(&engine, 1, p);
    wait_for_state(&engine, Pid::local(1), ProcessState::Blocked);
    engine.terminate(Pid::local(1)).unwrap();
    assert!(matches!(wait(h), Err(ExitError::Terminated)));
    assert_eq!(closes.get(), 1);
    assert_eq!(
        engine
            .send(Package::new(Pid::local(0), Pid::local(1), ()))
            .unwrap_err()
            .kind(),
        SendErrorKind::UnknownTarget
    );
    assert_eq!(
        engine.terminate(Pid::local(1)),
        Err(TerminateError::NotFound(Pid::local(1)))
    );
}

#[test]
fn terminating_an_idle_process_ends_it() {
    let engine = started(1);
    let h = submit(&engine, 3, Inbox::new());
    wait_for_state(&engine, Pid::local(3), ProcessState::Idle);
    engine.terminate(Pid::local(3)).unwrap();
    assert!(matches!(wait(h), Err(ExitError::Terminated)));
    assert!(engine.processes().is_empty());
}

#[test]
fn terminating_an_unknown_pid_is_not_found() {
    let engine = started(1);
    assert_eq!(
        engine.terminate(Pid::local(9)),
        Err(TerminateError::NotFound(Pid::local(9)))
    );
}

#[test]
fn a_send_right_after_terminate_is_delivered_or_refused_cleanly() {
    let engine = started(2);
    for i in 0..50 {
        let h = submit(&engine, i, Inbox::new());
        engine.terminate(Pid::local(i)).unwrap();
        match engine.send(Package::new(Pid::local(0), Pid::local(i), ())) {
            Ok(()) => {}
            Err(e) => assert!(matches!(
                e.kind(),
                SendErrorKind::UnknownTarget | SendErrorKind::Closed
            )),
        }
        assert!(matches!(wait(h), Err(ExitError::Terminated)));
    }
}

#[test]
fn close_runs_once_per_process_and_routes_are_released() {
    let engine = started(2);
    let closes = CloseCounter::default();
    let handles: Vec<_> = (0..1000)
        .map(|i| {
            let mut p = Counter::new(2, SYNC);
            p.closes = closes.clone();
            submit(&engine, i, p)
        })
        .collect();
    for h in handles {
        wait(h).unwrap();
    }
    assert_eq!(closes.get(), 1000);
    assert!(engine.processes().is_empty());
    assert_eq!(engine.stats().live_processes, 0);
}

#[test]
fn a_live_pid_cannot_be_submitted_twice_and_keeps_its_route() {
    let engine = started(1);
    let first = submit(&engine, 5, Inbox::new());
    let err = engine
        .submit(Pid::local(5), Inbox::new(), "run", Box::new(()))
        .unwrap_err();
    assert!(matches!(err, SubmitError::DuplicatePid(p) if p == Pid::local(5)));
    engine
        .send(Package::new(Pid::local(0), Pid::local(5), "stop"))
        .unwrap();
    assert_eq!(done_u64(wait(first)), 0);
    // Once it has ended the PID is free again.
    let again = submit(&engine, 5, Counter::new(1, SYNC));
    assert_eq!(done_u64(wait(again)), 1);
}

#[test]
fn a_message_sent_right_after_submit_is_never_lost() {
    let engine = started(2);
    for i in 0..100 {
        let h = submit(&engine, i, Inbox::new());
        let sender = {
            let pid = Pid::local(i);
            let engine = &engine;
            move || {
                engine
                    .send(Package::new(Pid::local(0), pid, "stop"))
                    .unwrap()
            }
        };
        std::thread::scope(|s| {
            s.spawn(sender);
        });
        assert_eq!(done_u64(wait(h)), 0);
    }
}

#[test]
fn a_yield_without_handler_completes_with_an_error_event() {
    let engine = started(1);
    let p = process({
        let mut asked = false;
        move |events, out| {
            if !asked {
                asked = true;
                out.yield_command(CommandId(999), Tag(1), Box::new(()));
                return Ok(());
            }
            for e in events {
                if let Event::Completion {
                    tag: Tag(1),
                    result,
                } = e
                {
                    let err = result.unwrap_err();
                    assert!(matches!(
                        err,
                        CommandError::NoHandler {
                            command: CommandId(999)
                        }
                    ));
                    return Err(err.into());
                }
            }
            Ok(())
        }
    });
    let outcome = wait(submit(&engine, 1, p));
    assert!(matches!(outcome, Err(ExitError::Step(e)) if e.to_string().contains("999")));
}

#[test]
fn a_rejecting_handler_delivers_its_error_to_the_process() {
    let engine = started(1);
    let outcome = wait(submit(&engine, 1, Counter::new(1, REJECT)));
    match outcome {
        Err(ExitError::Step(e)) => {
            assert_eq!(
                e.to_string(),
                "the handler rejected the command: handler failed"
            )
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn a_panicking_handler_fails_the_yield_and_the_worker_survives() {
    let engine = started(1);
    let outcome = wait(submit(&engine, 1, Counter::new(1, PANIC)));
    assert!(matches!(outcome, Err(ExitError::Step(e)) if e.to_string().contains("panicked")));
    assert_eq!(done_u64(wait(submit(&engine, 2, Counter::new(3, SYNC)))), 3);
}

#[test]
fn a_dropped_completer_completes_its_yield_with_dropped() {
    let engine = started(1);
    let outcome = wait(submit(&engine, 1, Counter::new(1, DROP)));
    assert!(matches!(outcome, Err(ExitError::Step(e)) if e.to_string().contains("dropped")));
}

#[test]
fn max_processes_is_enforced() {
    let engine = builder(1).max_processes(2).build();
    let _a = submit(&engine, 1, Inbox::new());
    let _b = submit(&engine, 2, Inbox::new());
    let err = engine
        .submit(Pid::local(3), Inbox::new(), "run", Box::new(()))
        .unwrap_err();
    assert!(matches!(err, SubmitError::TooManyProcesses { max: 2 }));
}

#[test]
fn concurrent_submits_never_exceed_the_maximum() {
    let engine = Arc::new(builder(2).max_processes(50).build());
    engine.start();
    let barrier = Arc::new(Barrier::new(4));
    let peak = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let engine = engine.clone();
            let barrier = barrier.clone();
            let peak = peak.clone();
            std::thread::spawn(move || {
                barrier.wait();
                let mut accepted = Vec::new();
                for i in 0..200 {
                    match engine.submit(Pid::local(t * 1000 + i), Inbox::new(), "run", Box::new(()))
                    {
                        Ok(h) => accepted.push(h),
                        Err(SubmitError::TooManyProcesses { max: 50 }) => {}
                        Err(e) => panic!("unexpected {e}"),
                    }
                    peak.fetch_max(engine.stats().live_processes, Ordering::SeqCst);
                }
                accepted.len()
            })
        })
        .collect();
    let accepted: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
    assert_eq!(accepted, 50);
    assert!(peak.load(Ordering::SeqCst) <= 50);
    assert_eq!(engine.stats().live_processes, 50);
}

#[test]
fn submit_after_shutdown_is_refused() {
    let engine = started(1);
    engine.shutdown(Duration::from_millis(100));
    let err = engine
        .submit(Pid::local(1), Inbox::new(), "run", Box::new(()))
        .unwrap_err();
    assert!(matches!(err, SubmitError::ShuttingDown));
}

#[test]
fn a_step_error_is_the_outcome() {
    let engine = started(1);
    let outcome = wait(submit(
        &engine,
        1,
        process(|_, _| Err("step failed".into())),
    ));
    assert!(matches!(outcome, Err(ExitError::Step(e)) if e.to_string() == "step failed"));
}

#[test]
fn init_errors_fail_the_submission_and_schedule_nothing() {
    let engine = started(1);
    let err = engine
        .submit(Pid::local(1), Counter::new(1, SYNC), "fly", Box::new(()))
        .unwrap_err();
    match err {
        SubmitError::Init {
            pid,
            error: InitError::UnknownMethod { method },
        } => {
            assert_eq!(pid, Pid::local(1));
            assert_eq!(method, "fly");
        }
        other => panic!("unexpected {other}"),
    }
    assert!(engine.processes().is_empty());
    assert_eq!(engine.stats().live_processes, 0);
    assert_eq!(
        engine.terminate(Pid::local(1)),
        Err(TerminateError::NotFound(Pid::local(1)))
    );
}

struct PanicsInInit;

impl Process for PanicsInInit {
    fn init(&mut self, _: &InitContext, _: &str, _: relay::Payload) -> Result<(), InitError> {
        panic!("init exploded")
    }
    fn step(&mut self, _: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
        unreachable!("never initialised")
    }
    fn close(&mut self) {
        unreachable!("close is only called after a successful init")
    }
}

#[test]
fn a_panic_in_init_is_an_init_error() {
    let engine = started(1);
    let err = engine
        .submit(Pid::local(1), Box::new(PanicsInInit), "run", Box::new(()))
        .unwrap_err();
    assert!(
        matches!(err, SubmitError::Init { error: InitError::Panicked { message }, .. } if message == "init exploded")
    );
}

#[test]
fn a_panic_in_step_ends_the_process_and_the_worker_goes_on() {
    let engine = started(1);
    let closes = CloseCounter::default();
    let mut p = process(|_, _| panic!("step exploded"));
    p.closes = closes.clone();
    let outcome = wait(submit(&engine, 1, p));
    assert!(matches!(outcome, Err(ExitError::Panicked { message }) if message == "step exploded"));
    assert_eq!(closes.get(), 1, "close still runs");
    assert_eq!(done_u64(wait(submit(&engine, 2, Counter::new(2, SYNC)))), 2);
}

struct PanicsInClose;

impl Process for PanicsInClose {
    fn init(&mut self, _: &InitContext, _: &str, _: relay::Payload) -> Result<(), InitError> {
        Ok(())
    }
    fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        out.done(Box::new(()));
        Ok(())
    }
    fn close(&mut self) {
        panic!("close exploded")
    }
}

#[test]
fn a_panic_in_close_turns_a_done_outcome_into_a_panic_error() {
    let engine = started(1);
    let outcome = wait(submit(&engine, 1, Box::new(PanicsInClose)));
    assert!(matches!(outcome, Err(ExitError::Panicked { message }) if message == "close exploded"));
    assert_eq!(done_u64(wait(submit(&engine, 2, Counter::new(1, SYNC)))), 1);
}

#[test]
fn completions_arrive_in_completion_order_with_their_tags() {
    let engine = started(2);
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let p = process({
        let order = order.clone();
        let mut asked = false;
        move |events, out| {
            if !asked {
                asked = true;
                out.yield_command(ASYNC, Tag(1), Box::new(Duration::from_millis(150)));
                out.yield_command(ASYNC, Tag(2), Box::new(Duration::from_millis(10)));
                return Ok(());
            }
            let mut order = order.lock().unwrap();
            for e in events {
                if let Some(tag) = e.tag() {
                    order.push(tag.0);
                    if tag == Tag(2) {
                        // Staggered: yield C after B arrives.
                        out.yield_command(ASYNC, Tag(3), Box::new(Duration::from_millis(40)));
                    }
                }
            }
            if order.len() == 3 {
                out.done(Box::new(()));
            }
            Ok(())
        }
    });
    wait(submit(&engine, 1, p)).unwrap();
    assert_eq!(*order.lock().unwrap(), [2, 3, 1]);
}

#[test]
fn a_completer_used_after_its_process_ended_reports_stale() {
    let stash: Arc<std::sync::Mutex<Vec<Completer>>> = Arc::default();
    let engine = Engine::builder()
        .workers(1)
        .handler(CommandId(1), {
            let stash = stash.clone();
            move |_: Command, c: Completer| -> Result<(), Rejected> {
                stash.lock().unwrap().push(c);
                Ok(())
            }
        })
        .build();
    engine.start();
    let p = process(|_, out| {
        out.yield_command(CommandId(1), Tag(1), Box::new(()));
        Ok(())
    });
    let h = submit(&engine, 1, p);
    wait_for_state(&engine, Pid::local(1), ProcessState::Blocked);
    engine.terminate(Pid::local(1)).unwrap();
    assert!(matches!(wait(h), Err(ExitError::Terminated)));
    let completer = stash.lock().unwrap().pop().expect("the handler kept it");
    assert_eq!(completer.pid(), Pid::local(1));
    assert_eq!(
        completer.complete(Box::new(())),
        Err(CompleteError::Stale {
            pid: Pid::local(1),
            tag: Tag(1)
        })
    );

    // A new process under the same PID is not reachable through an old
    // completer either.
    let p = process(|_, out| {
        out.yield_command(CommandId(1), Tag(1), Box::new(()));
        Ok(())
    });
    let h = submit(&engine, 1, p);
    wait_for_state(&engine, Pid::local(1), ProcessState::Blocked);
    engine.terminate(Pid::local(1)).unwrap();
    wait(h).unwrap_err();
    let stale = stash.lock().unwrap().pop().unwrap();
    let p = process(|events, out| {
        assert_eq!(events.len(), 0, "no stale completion may arrive here");
        out.idle();
        Ok(())
    });
    let h = submit(&engine, 1, p);
    wait_for_state(&engine, Pid::local(1), ProcessState::Idle);
    assert!(stale.complete(Box::new(())).is_err());
    engine.terminate(Pid::local(1)).unwrap();
    assert!(matches!(wait(h), Err(ExitError::Terminated)));
}

#[test]
fn yields_written_by_a_done_step_are_discarded_and_counted() {
    let engine = started(1);
    let p = process(|_, out| {
        out.yield_command(SYNC, Tag(1), Box::new(()));
        out.done(Box::new(5u64));
        Ok(())
    });
    assert_eq!(done_u64(wait(submit(&engine, 1, p))), 5);
    assert_eq!(engine.stats().totals().discarded_yields, 1);
}

#[test]
fn a_process_that_always_continues_does_not_starve_a_later_one() {
    let engine = started(1);
    let stop = Arc::new(AtomicBool::new(false));
    let hog = process({
        let stop = stop.clone();
        move |_, out| {
            if stop.load(Ordering::SeqCst) {
                out.done(Box::new(()));
            } else {
                out.continue_();
            }
            Ok(())
        }
    });
    let hog = submit(&engine, 1, hog);
    // Let the hog settle into its loop on the only worker.
    std::thread::sleep(Duration::from_millis(20));
    let later = submit(&engine, 2, Counter::new(3, SYNC));
    assert_eq!(done_u64(wait(later)), 3);
    stop.store(true, Ordering::SeqCst);
    wait(hog).unwrap();
}

#[test]
fn continuing_processes_take_turns_on_one_worker() {
    // Started only once all three are queued: a worker already running
    // could finish the first one's steps before the others are submitted,
    // and then nobody was waiting (it happened under ThreadSanitizer).
    let engine = builder(1).build();
    let log = Arc::new(std::sync::Mutex::new(Vec::new()));
    let handles: Vec<_> = (0..3u64)
        .map(|id| {
            let log = log.clone();
            let mut left = 5;
            submit(
                &engine,
                id,
                process(move |_, out| {
                    log.lock().unwrap().push(id);
                    left -= 1;
                    if left == 0 {
                        out.done(Box::new(()));
                    } else {
                        out.continue_();
                    }
                    Ok(())
                }),
            )
        })
        .collect();
    engine.start();
    for h in handles {
        wait(h).unwrap();
    }
    let log = log.lock().unwrap();
    // No process runs its 5 steps back to back while the others wait.
    for window in log.windows(3) {
        assert!(
            !(window[0] == window[1] && window[1] == window[2]),
            "{log:?}"
        );
    }
}

#[test]
fn a_process_never_runs_on_two_workers_at_once() {
    let engine = started(2);
    let overlaps = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..200u64)
        .map(|id| {
            let in_step = Arc::new(AtomicBool::new(false));
            let overlaps = overlaps.clone();
            let mut left = 20;
            submit(
                &engine,
                id,
                process(move |events, out| {
                    if in_step.swap(true, Ordering::SeqCst) {
                        overlaps.fetch_add(1, Ordering::SeqCst);
                    }
                    events.for_each(drop);
                    left -= 1;
                    if left == 0 {
                        out.done(Box::new(()));
                    } else if left % 2 == 0 {
                        out.yield_command(ASYNC, Tag(left), Box::new(()));
                    } else {
                        out.yield_command(SYNC, Tag(left), Box::new(()));
                        out.continue_();
                    }
                    in_step.store(false, Ordering::SeqCst);
                    Ok(())
                }),
            )
        })
        .collect();
    for h in handles {
        wait(h).unwrap();
    }
    assert_eq!(overlaps.load(Ordering::SeqCst), 0);
}

#[test]
fn processes_lists_live_processes_with_their_state() {
    let engine = started(1);
    let _h = submit(&engine, 4, Inbox::new());
    wait_for_state(&engine, Pid::local(4), ProcessState::Idle);
    let list = engine.processes();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].pid, Pid::local(4));
    assert_eq!(list[0].state.to_string(), "idle");
    assert_eq!(list[0].steps, 1);
}

#[test]
fn shutdown_cancels_live_processes_gracefully() {
    let engine = started(2);
    let closes = CloseCounter::default();
    let handles: Vec<_> = (0..10)
        .map(|i| {
            let mut p = Inbox::new();
            p.closes = closes.clone();
            submit(&engine, i, p)
        })
        .collect();
    let report = engine.shutdown(Duration::from_secs(2));
    assert_eq!(report.ended_gracefully, 10);
    assert_eq!(report.forced, 0);
    assert!(
        report.elapsed < Duration::from_secs(1),
        "returns when all ended: {report:?}"
    );
    for h in handles {
        let v = wait(h).unwrap();
        assert_eq!(v.downcast_ref::<&str>(), Some(&"cancelled"));
    }
    assert_eq!(closes.get(), 10);
}

#[test]
fn shutdown_forces_processes_that_ignore_cancel_at_the_deadline() {
    let engine = started(2);
    let mut stubborn = Inbox::new();
    stubborn.ignore_cancel = true;
    let closes = stubborn.closes.clone();
    let h = submit(&engine, 1, stubborn);
    let blocked = submit(&engine, 2, Counter::new(1, NEVER));
    let report = engine.shutdown(Duration::from_millis(200));
    assert_eq!(report.forced, 2);
    assert_eq!(report.still_running, 0);
    assert_eq!(report.workers_detached, 0);
    assert!(
        report.elapsed < Duration::from_millis(200) + Duration::from_millis(400),
        "{report:?}"
    );
    assert!(matches!(wait(h), Err(ExitError::Cancelled)));
    assert!(matches!(wait(blocked), Err(ExitError::Cancelled)));
    assert_eq!(closes.get(), 1);
}

#[test]
fn shutdown_waits_for_in_flight_completions_that_arrive_in_time() {
    let engine = started(2);
    let p = process({
        let mut asked = false;
        move |events, out| {
            if !asked {
                asked = true;
                out.yield_command(ASYNC, Tag(1), Box::new(Duration::from_millis(100)));
                return Ok(());
            }
            for e in events {
                if e.tag() == Some(Tag(1)) {
                    out.done(Box::new(7u64));
                }
            }
            Ok(())
        }
    });
    let h = submit(&engine, 1, p);
    let report = engine.shutdown(Duration::from_secs(5));
    assert_eq!(report.ended_gracefully, 1);
    assert_eq!(done_u64(wait(h)), 7);
}

#[test]
fn dead_letters_are_counted() {
    let engine = started(1);
    let p = process(|events, out| {
        events.for_each(drop);
        out.yield_command(NEVER, Tag(1), Box::new(()));
        Ok(())
    });
    let h = submit(&engine, 1, p);
    wait_for_state(&engine, Pid::local(1), ProcessState::Blocked);
    engine.terminate(Pid::local(1)).unwrap();
    // Whatever was sent after the terminate and before the end is a dead
    // letter, never silently lost: it is either refused or counted.
    let mut refused = 0;
    let mut accepted = 0;
    for _ in 0..10 {
        match engine.send(Package::new(Pid::local(0), Pid::local(1), ())) {
            Ok(()) => accepted += 1,
            Err(_) => refused += 1,
        }
    }
    wait(h).unwrap_err();
    assert_eq!(accepted + refused, 10);
    assert_eq!(engine.stats().dead_letters, accepted);
}

/// Polls until `pid` is in `state`.
fn wait_for_state(engine: &Engine, pid: Pid, state: ProcessState) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if engine
            .processes()
            .iter()
            .any(|p| p.pid == pid && p.state == state)
        {
            return;
        }
        assert!(Instant::now() < deadline, "{pid} never reached {state}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn lifecycle_hooks_see_every_start_and_completion() {
    let started_pids = Arc::new(std::sync::Mutex::new(Vec::new()));
    let completed = Arc::new(std::sync::Mutex::new(Vec::new()));
    let engine = builder(2)
        .on_start({
            let started_pids = started_pids.clone();
            move |_cx, pid| {
                started_pids.lock().unwrap().push(pid.id());
                Ok(())
            }
        })
        .on_complete({
            let completed = completed.clone();
            move |_cx, pid, outcome| completed.lock().unwrap().push((pid.id(), outcome.is_ok()))
        })
        .build();
    engine.start();
    let handles: Vec<_> = (1..=5)
        .map(|i| submit(&engine, i, Counter::new(2, SYNC)))
        .collect();
    for h in handles {
        wait(h).unwrap();
    }
    let mut s = started_pids.lock().unwrap().clone();
    s.sort_unstable();
    assert_eq!(s, [1, 2, 3, 4, 5]);
    let mut c = completed.lock().unwrap().clone();
    c.sort_unstable();
    assert_eq!(c, [(1, true), (2, true), (3, true), (4, true), (5, true)]);
}

#[test]
fn an_on_start_error_rejects_the_submission_and_closes_the_process() {
    let engine = builder(1)
        .on_start(|_cx, pid| {
            if pid.id() == 2 {
                Err("rejected".into())
            } else {
                Ok(())
            }
        })
        .build();
    engine.start();
    let mut p = Counter::new(1, SYNC);
    let closes = p.closes.clone();
    p.closes = closes.clone();
    let err = engine
        .submit(Pid::local(2), p, "run", Box::new(()))
        .unwrap_err();
    assert!(
        matches!(&err, SubmitError::Rejected { pid, error } if *pid == Pid::local(2) && error.to_string() == "rejected")
    );
    assert_eq!(closes.get(), 1, "an initialised process is closed");
    assert!(engine.processes().is_empty());
    assert_eq!(engine.stats().live_processes, 0);
    assert_eq!(done_u64(wait(submit(&engine, 3, Counter::new(1, SYNC)))), 1);
}

#[test]
fn panicking_hooks_are_contained() {
    let engine = builder(1)
        .on_start(|_cx, pid| {
            if pid.id() == 1 {
                panic!("start hook exploded")
            } else {
                Ok(())
            }
        })
        .on_complete(|_cx, _, _| panic!("complete hook exploded"))
        .build();
    engine.start();
    let err = engine
        .submit(Pid::local(1), Counter::new(1, SYNC), "run", Box::new(()))
        .unwrap_err();
    assert!(err.to_string().contains("start hook exploded"), "{err}");
    assert_eq!(done_u64(wait(submit(&engine, 2, Counter::new(2, SYNC)))), 2);
    assert_eq!(done_u64(wait(submit(&engine, 3, Counter::new(1, SYNC)))), 1);
}

#[test]
fn a_full_mailbox_refuses_and_hands_the_message_back() {
    let engine = builder(1).mailbox_capacity(2).build();
    // Not started: nothing drains the mailbox.
    let _h = submit(&engine, 1, Inbox::new());
    for i in 0..2u32 {
        engine
            .send(Package::new(Pid::local(0), Pid::local(1), i))
            .unwrap();
    }
    let err = engine
        .send(Package::new(Pid::local(0), Pid::local(1), 2u32))
        .unwrap_err();
    assert_eq!(err.kind(), SendErrorKind::Full);
    assert_eq!(err.into_package().downcast::<u32>().ok(), Some(2));
    engine.start();
    // Once drained, there is room again.
    let deadline = Instant::now() + PATIENCE;
    while engine
        .send(Package::new(Pid::local(0), Pid::local(1), 3u32))
        .is_err()
    {
        assert!(Instant::now() < deadline, "the mailbox never drained");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn dead_letters_reach_the_hook() {
    let letters = Arc::new(std::sync::Mutex::new(Vec::new()));
    let engine = builder(1)
        .on_dead_letter({
            let letters = letters.clone();
            move |_cx, pid, event| {
                if let Event::Message(p) = event {
                    letters
                        .lock()
                        .unwrap()
                        .push((pid, p.downcast::<u32>().unwrap()));
                }
            }
        })
        .build();
    // Queue messages before start, then terminate: they are never stepped.
    let h = submit(&engine, 1, Inbox::new());
    for i in 0..3u32 {
        engine
            .send(Package::new(Pid::local(0), Pid::local(1), i))
            .unwrap();
    }
    engine.terminate(Pid::local(1)).unwrap();
    engine.start();
    assert!(matches!(wait(h), Err(ExitError::Terminated)));
    assert_eq!(
        *letters.lock().unwrap(),
        [(Pid::local(1), 0), (Pid::local(1), 1), (Pid::local(1), 2)]
    );
    assert_eq!(engine.stats().dead_letters, 3);
}

/// A process spawned by a short step goes to its worker's `next` slot and
/// runs on the same core once the step ends, while another worker sits
/// idle (an idle worker only takes from the slot what has waited there far
/// longer than a step; see `fairness.rs` for the long step).
#[test]
fn a_process_spawned_by_a_short_step_runs_after_that_step_on_the_same_worker() {
    use std::sync::Mutex;
    use std::thread::ThreadId;

    let engine = started(2);
    // (thread, still inside the parent's step) for the child.
    let child_ran: Arc<Mutex<Option<(ThreadId, bool)>>> = Arc::default();
    let in_parent = Arc::new(AtomicBool::new(false));
    let parent_thread: Arc<Mutex<Option<ThreadId>>> = Arc::default();
    let (seen, flag, parent_seen) = (child_ran.clone(), in_parent.clone(), parent_thread.clone());
    let parent = process(move |_, out| {
        flag.store(true, Ordering::SeqCst);
        *parent_seen.lock().unwrap() = Some(std::thread::current().id());
        let (seen, in_step) = (seen.clone(), flag.clone());
        let child = process(move |_, out| {
            *seen.lock().unwrap() =
                Some((std::thread::current().id(), in_step.load(Ordering::SeqCst)));
            out.done(Box::new(()));
            Ok(())
        });
        let pid = out.allocate_pid().expect("pids left");
        let child = out
            .submit_boxed(pid, child, "run", Box::new(()))
            .expect("spawned");
        flag.store(false, Ordering::SeqCst);
        out.done(Box::new(child));
        Ok(())
    });
    // An id the allocator will not hand out to the child.
    let outcome = wait(submit(&engine, 1 << 40, parent));
    let mut child = *outcome
        .expect("parent done")
        .downcast::<Completion>()
        .unwrap();
    child
        .wait_timeout(PATIENCE)
        .expect("child finished")
        .expect("child done");
    let (thread, during_parent) = child_ran.lock().unwrap().expect("the child ran");
    assert!(
        !during_parent,
        "the child ran while its parent's step was running"
    );
    assert_eq!(
        Some(thread),
        *parent_thread.lock().unwrap(),
        "the child moved to another worker"
    );
    engine.shutdown(PATIENCE);
}

/// A step's sends go through its worker's cache of recently resolved
/// records; a PID whose process ended and was then taken by a new process
/// must still reach the new one, and a send to an ended PID must still say
/// the target is unknown.
#[test]
fn a_pid_taken_anew_gets_messages_sent_through_a_worker_s_route_cache() {
    use std::sync::mpsc;

    const TARGET: u64 = 50;
    let engine = started(1);
    // Forwards every `u32` it receives to TARGET and reports how the send
    // went.
    let (results_tx, results) = mpsc::channel::<Result<(), SendErrorKind>>();
    let forwarder = process(move |events, out| {
        for event in events {
            match event {
                Event::Message(package) => {
                    let n = *package.into_payload().downcast::<u32>().unwrap();
                    let sent = out.send(Package::new(Pid::local(1), Pid::local(TARGET), n));
                    results_tx.send(sent.map_err(|e| e.kind())).unwrap();
                }
                Event::Cancel => {
                    out.done(Box::new(()));
                    return Ok(());
                }
                _ => {}
            }
        }
        out.idle();
        Ok(())
    });
    let _forwarder = submit(&engine, 1, forwarder);
    // A target that ends with the first number it receives.
    let target = || {
        process(|events, out| {
            for event in events {
                if let Event::Message(package) = event {
                    let n = *package.into_payload().downcast::<u32>().unwrap();
                    out.done(Box::new(u64::from(n)));
                    return Ok(());
                }
            }
            out.idle();
            Ok(())
        })
    };
    let forward = |n: u32| {
        engine
            .send(Package::new(Pid::local(0), Pid::local(1), n))
            .unwrap();
        results
            .recv_timeout(PATIENCE)
            .expect("the forwarder reported")
    };

    let first = submit(&engine, TARGET, target());
    assert_eq!(forward(1), Ok(()));
    assert_eq!(done_u64(wait(first)), 1);
    // The first target has ended (and its PID is free once its outcome is
    // in): the cached route must not swallow the message.
    assert_eq!(forward(2), Err(SendErrorKind::UnknownTarget));
    let second = submit(&engine, TARGET, target());
    assert_eq!(forward(3), Ok(()));
    assert_eq!(done_u64(wait(second)), 3, "the new process got the message");
    engine.shutdown(PATIENCE);
}
