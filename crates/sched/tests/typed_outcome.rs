//! Typed outcomes: `Completion::typed` reads a process's done value as its
//! type, by blocking, without blocking, with a deadline and by awaiting;
//! a value of another type is an error that hands the value back, and a
//! process that failed keeps its error.

use std::time::Duration;

use sched::prelude::*;

const WAIT: Duration = Duration::from_secs(10);

/// Finishes with the sum of the numbers it is sent, once it gets a zero.
struct Sum(u64);

impl Process for Sum {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            let Event::Message(package) = event else {
                continue;
            };
            match package.downcast::<u64>() {
                Ok(0) => out.finish(self.0),
                Ok(n) => self.0 += n,
                Err(_) => return Err("not a number".into()),
            }
        }
        Ok(())
    }
}

fn scheduler() -> Scheduler {
    let scheduler = Scheduler::builder().workers(2).build();
    scheduler.start();
    scheduler
}

#[test]
fn a_typed_handle_reads_the_done_value_by_every_means() {
    let scheduler = scheduler();

    let blocking: Completion<u64> = scheduler.spawn(Sum(0)).unwrap().typed();
    let mut polling = scheduler.spawn(Sum(0)).unwrap().typed::<u64>();
    let mut deadline = scheduler.spawn(Sum(0)).unwrap().typed::<u64>();
    let awaited = scheduler.spawn(Sum(0)).unwrap().typed::<u64>();

    assert!(polling.try_take().is_none(), "nothing yet");
    assert!(deadline
        .wait_timeout(Duration::from_millis(5))
        .is_err_and(|e| e.is_timeout()));
    for (pid, n) in [
        (blocking.pid(), 1),
        (polling.pid(), 2),
        (deadline.pid(), 3),
        (awaited.pid(), 4),
    ] {
        scheduler.send(pid, n as u64 * 10).unwrap();
        scheduler.send(pid, 0u64).unwrap();
    }

    assert_eq!(blocking.wait().unwrap(), 10);
    assert_eq!(deadline.wait_timeout(WAIT).unwrap(), 30);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    assert_eq!(runtime.block_on(awaited).unwrap(), 40);
    let polled = loop {
        if let Some(outcome) = polling.try_take() {
            break outcome;
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    assert_eq!(polled.unwrap(), 20);
    assert!(matches!(
        polling.try_take(),
        Some(Err(ExitError::AlreadyTaken))
    ));
    scheduler.shutdown(WAIT);
}

#[test]
fn a_value_of_another_type_is_handed_back_and_errors_stay_errors() {
    let scheduler = scheduler();

    let wrong = scheduler.spawn(Sum(5)).unwrap().typed::<String>();
    scheduler.send(wrong.pid(), 0u64).unwrap();
    match wrong.wait() {
        Err(ExitError::UnexpectedType(wrong)) => {
            assert!(wrong.expected().contains("String"), "{}", wrong.expected());
            assert_eq!(wrong.into_value().downcast_ref::<u64>(), Some(&5));
        }
        other => panic!("expected the value back, got {other:?}"),
    }

    let failing = scheduler.spawn(Sum(0)).unwrap().typed::<u64>();
    scheduler.send(failing.pid(), "seven").unwrap();
    match failing.wait() {
        Err(ExitError::Step(error)) => assert_eq!(error.to_string(), "not a number"),
        other => panic!("expected the step's error, got {other:?}"),
    }

    // The untyped handle still gives the box itself, not a box in a box.
    let untyped = scheduler.spawn(Sum(7)).unwrap();
    scheduler.send(untyped.pid(), 0u64).unwrap();
    assert_eq!(untyped.wait().unwrap().downcast_ref::<u64>(), Some(&7));

    // A typed handle dropped before its process ends leaks nothing and
    // leaves the process alone.
    let dropped = scheduler.spawn(Sum(0)).unwrap().typed::<u64>();
    let pid = dropped.pid();
    drop(dropped);
    scheduler.send(pid, 0u64).unwrap();
    scheduler.shutdown(WAIT);
}
