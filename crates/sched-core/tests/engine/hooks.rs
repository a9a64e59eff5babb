//! Lifecycle hooks: every start and completion seen, errors and panics
//! contained.

use super::*;

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
        .context()
        .spawn(Spawn::new(p).method("run").at(Pid::local(2)))
        .unwrap_err();
    assert!(
        matches!(&err, SubmitError::Rejected { pid, error } if *pid == Pid::local(2) && error.to_string() == "rejected")
    );
    assert_eq!(closes.get(), 1, "an initialised process is closed");
    assert!(engine.context().processes().is_empty());
    assert_eq!(engine.context().stats().live_processes, 0);
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
        .context()
        .spawn(
            Spawn::new(Counter::new(1, SYNC))
                .method("run")
                .at(Pid::local(1)),
        )
        .unwrap_err();
    assert!(err.to_string().contains("start hook exploded"), "{err}");
    assert_eq!(done_u64(wait(submit(&engine, 2, Counter::new(2, SYNC)))), 2);
    assert_eq!(done_u64(wait(submit(&engine, 3, Counter::new(1, SYNC)))), 1);
}
