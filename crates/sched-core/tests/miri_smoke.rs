//! A small whole-engine run sized for miri (`cargo xtask miri sched-core`
//! runs the unit tests and this file): two workers, messages, synchronous
//! and asynchronous completions, a terminate and a shutdown, so the unsafe
//! code (record bodies handed between workers, the thread-local queue
//! pointer, deque and queue internals) runs under the race detector.

mod common;

use std::time::Duration;

use common::*;
use relay::{Package, Pid};
use sched_core::*;

#[test]
fn a_small_mixed_workload_runs_clean() {
    let engine = started(2);
    let counters: Vec<_> = (0..4)
        .map(|i| {
            submit(
                &engine,
                i,
                Counter::new(3, if i % 2 == 0 { SYNC } else { ASYNC }),
            )
        })
        .collect();
    let inbox = submit(&engine, 10, Inbox::new());
    for n in 0..3u64 {
        engine
            .context()
            .forward(Package::new(Pid::local(0), Pid::local(10), n))
            .unwrap();
    }
    engine
        .context()
        .forward(Package::new(Pid::local(0), Pid::local(10), "stop"))
        .unwrap();
    let blocked = submit(&engine, 11, Counter::new(1, NEVER));
    let mut counters = counters.into_iter();
    // A typed handle (its `typed` moves the record's count without a drop).
    let mut typed = counters.next().unwrap().typed::<u64>();
    let typed_outcome = typed.wait_timeout(PATIENCE).expect("finished in time");
    assert_eq!(typed_outcome, 3);
    // One read as the wrong type hands its value back.
    match counters.next().unwrap().typed::<String>().wait() {
        Err(ExitError::UnexpectedType(wrong)) => {
            assert_eq!(*wrong.into_value().downcast::<u64>().unwrap(), 3)
        }
        other => panic!("{other:?}"),
    }
    for c in counters {
        assert_eq!(done_u64(wait(c)), 3);
    }
    assert_eq!(done_u64(wait(inbox)), 3);
    engine.context().terminate(Pid::local(11)).unwrap();
    assert!(matches!(wait(blocked), Err(ExitError::Terminated)));
    let idle = submit(&engine, 12, Inbox::new());
    // Miri's clock is virtual: it jumps to the next timeout whenever every
    // thread waits, and the parked workers' timed waits make it run far
    // ahead of the work done, so the deadline is generous; the process
    // still ends as soon as it sees its cancel.
    let report = engine.shutdown(Duration::from_secs(120));
    assert_eq!(report.still_running, 0, "{report:?}");
    assert!(wait(idle).is_ok(), "the idle process finished on cancel");
    assert_eq!(engine.context().stats().live_processes, 0);
}

/// The simulation drives the same worker code on one thread, switching the
/// thread-local queue pointer from worker to worker between rounds: run a
/// small simulated system with faults so Miri checks that path too.
#[test]
fn a_small_simulation_runs_clean() {
    use sched_core::sim::{Config, Faults};
    let faults = Faults::none()
        .delay_messages(0.3, Duration::from_millis(2))
        .duplicate_messages::<u64>(0.2)
        .lose_completions(0.1)
        .fail_handlers(0.1);
    let mut sim = builder(2).simulation(Config::seed(3).workers(2).faults(faults));
    let counters: Vec<_> = (0..3)
        .map(|_| {
            sim.context()
                .spawn(Spawn::new(Counter::new(2, SYNC)).method("run"))
                .unwrap()
        })
        .collect();
    let inbox = sim
        .context()
        .spawn(Spawn::new(Inbox::new()).method("run"))
        .unwrap();
    for n in 0..3u64 {
        sim.context().send(inbox.pid(), n).unwrap();
    }
    sim.run().unwrap();
    for mut counter in counters {
        assert!(counter.try_take().is_some(), "every counter ended");
    }
    assert!(sim.trace().steps() > 5);
    let report = sim.shutdown(Duration::from_secs(1));
    assert_eq!(report.still_running, 0);
    assert_eq!(sim.context().stats().live_processes, 0);
}
