//! Yielded commands: handlers that complete, reject, panic or drop their
//! completer, completion order, stale completers.

use super::*;

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
                out.finish(());
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
    engine.context().terminate(Pid::local(1)).unwrap();
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
    engine.context().terminate(Pid::local(1)).unwrap();
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
    engine.context().terminate(Pid::local(1)).unwrap();
    assert!(matches!(wait(h), Err(ExitError::Terminated)));
}

#[test]
fn yields_written_by_a_done_step_are_discarded_and_counted() {
    let engine = started(1);
    let p = process(|_, out| {
        out.yield_command(SYNC, Tag(1), Box::new(()));
        out.finish(5u64);
        Ok(())
    });
    assert_eq!(done_u64(wait(submit(&engine, 1, p))), 5);
    assert_eq!(engine.context().stats().totals().discarded_yields, 1);
}
