//! A process's life: submission, admission limits, init, step and close
//! failures, termination.

use super::*;

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
    let stats = engine.context().stats();
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
                out.finish(());
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
    assert_eq!(engine.context().stats().global_queue_len, 1);
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
    let stats = engine.context().stats();
    assert_eq!(stats.workers.len(), 1);
    assert_eq!(stats.totals().steps, 6);
}

#[test]
fn terminating_a_blocked_process_ends_it_with_terminated() {
    let engine = started(2);
    let closes = CloseCounter::default();
    let mut p = Counter::new(1, NEVER);
    p.closes = closes.clone();
    let h = submit(&engine, 1, p);
    wait_for_state(&engine, Pid::local(1), ProcessState::Blocked);
    engine.context().terminate(Pid::local(1)).unwrap();
    assert!(matches!(wait(h), Err(ExitError::Terminated)));
    assert_eq!(closes.get(), 1);
    assert_eq!(
        engine
            .context()
            .forward(Package::new(Pid::local(0), Pid::local(1), ()))
            .unwrap_err()
            .kind(),
        SendErrorKind::UnknownTarget
    );
    assert_eq!(
        engine.context().terminate(Pid::local(1)),
        Err(TerminateError::NotFound(Pid::local(1)))
    );
}

#[test]
fn terminating_an_idle_process_ends_it() {
    let engine = started(1);
    let h = submit(&engine, 3, Inbox::new());
    wait_for_state(&engine, Pid::local(3), ProcessState::Idle);
    engine.context().terminate(Pid::local(3)).unwrap();
    assert!(matches!(wait(h), Err(ExitError::Terminated)));
    assert!(engine.context().processes().is_empty());
}

#[test]
fn terminating_an_unknown_pid_is_not_found() {
    let engine = started(1);
    assert_eq!(
        engine.context().terminate(Pid::local(9)),
        Err(TerminateError::NotFound(Pid::local(9)))
    );
}

#[test]
fn a_send_right_after_terminate_is_delivered_or_refused_cleanly() {
    let engine = started(2);
    for i in 0..50 {
        let h = submit(&engine, i, Inbox::new());
        engine.context().terminate(Pid::local(i)).unwrap();
        match engine
            .context()
            .forward(Package::new(Pid::local(0), Pid::local(i), ()))
        {
            Ok(()) => {}
            Err(e) => assert!(matches!(
                e.kind(),
                SendErrorKind::UnknownTarget | SendErrorKind::Ended
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
    assert!(engine.context().processes().is_empty());
    assert_eq!(engine.context().stats().live_processes, 0);
}

#[test]
fn a_live_pid_cannot_be_submitted_twice_and_keeps_its_route() {
    let engine = started(1);
    let first = submit(&engine, 5, Inbox::new());
    let err = engine
        .context()
        .spawn(Spawn::new(Inbox::new()).method("run").at(Pid::local(5)))
        .unwrap_err();
    assert!(matches!(err, SubmitError::DuplicatePid(p) if p == Pid::local(5)));
    engine
        .context()
        .forward(Package::new(Pid::local(0), Pid::local(5), "stop"))
        .unwrap();
    assert_eq!(done_u64(wait(first)), 0);
    // Once it has ended the PID is free again.
    let again = submit(&engine, 5, Counter::new(1, SYNC));
    assert_eq!(done_u64(wait(again)), 1);
}

#[test]
fn max_processes_is_enforced() {
    let engine = builder(1).max_processes(2).build();
    let _a = submit(&engine, 1, Inbox::new());
    let _b = submit(&engine, 2, Inbox::new());
    let err = engine
        .context()
        .spawn(Spawn::new(Inbox::new()).method("run").at(Pid::local(3)))
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
                    match engine.context().spawn(
                        Spawn::new(Inbox::new())
                            .method("run")
                            .at(Pid::local(t * 1000 + i)),
                    ) {
                        Ok(h) => accepted.push(h),
                        Err(SubmitError::TooManyProcesses { max: 50 }) => {}
                        Err(e) => panic!("unexpected {e}"),
                    }
                    peak.fetch_max(engine.context().stats().live_processes, Ordering::SeqCst);
                }
                accepted.len()
            })
        })
        .collect();
    let accepted: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
    assert_eq!(accepted, 50);
    assert!(peak.load(Ordering::SeqCst) <= 50);
    assert_eq!(engine.context().stats().live_processes, 50);
}

#[test]
fn submit_after_shutdown_is_refused() {
    let engine = started(1);
    engine.shutdown(Duration::from_millis(100));
    let err = engine
        .context()
        .spawn(Spawn::new(Inbox::new()).method("run").at(Pid::local(1)))
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
        .context()
        .spawn(
            Spawn::new(Counter::new(1, SYNC))
                .method("fly")
                .at(Pid::local(1)),
        )
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
    assert!(engine.context().processes().is_empty());
    assert_eq!(engine.context().stats().live_processes, 0);
    assert_eq!(
        engine.context().terminate(Pid::local(1)),
        Err(TerminateError::NotFound(Pid::local(1)))
    );
}

struct PanicsInInit;

impl Process for PanicsInInit {
    type Done = relay::Payload;
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
        .context()
        .spawn(
            Spawn::new(Box::new(PanicsInInit))
                .method("run")
                .at(Pid::local(1)),
        )
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
    type Done = relay::Payload;
    fn init(&mut self, _: &InitContext, _: &str, _: relay::Payload) -> Result<(), InitError> {
        Ok(())
    }
    fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        out.finish(());
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
