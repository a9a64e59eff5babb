//! The process table seen through the engine: slots are reused with new
//! generations, a stale PID never reaches the slot's next process, and PIDs
//! users pick by hand never duplicate the engine's.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use common::*;
use relay::{Pid, SendErrorKind};
use sched_core::*;

/// A process that counts the messages it gets until it is cancelled.
fn counting(count: Arc<AtomicUsize>) -> Box<dyn Process<Done = relay::Payload>> {
    process(move |events: &mut Events<'_>, out: &mut Output<'_>| {
        for event in events {
            match event {
                Event::Message(_) => {
                    count.fetch_add(1, Ordering::SeqCst);
                }
                Event::Cancel => {
                    out.finish(());
                    return Ok(());
                }
                _ => {}
            }
        }
        out.idle();
        Ok(())
    })
}

fn quick() -> Box<dyn Process<Done = relay::Payload>> {
    process(|_: &mut Events<'_>, out: &mut Output<'_>| {
        out.finish(());
        Ok(())
    })
}

/// The slot index of a table PID (its id's low half, less one).
fn slot_of(pid: Pid) -> u64 {
    (pid.id() & u64::from(u32::MAX)) - 1
}

#[test]
fn a_stale_pid_never_reaches_the_next_process_in_its_slot() {
    let engine = started(1);
    let rounds = if cfg!(miri) { 10 } else { 400 };
    let mut ended = Vec::new();
    for _ in 0..rounds {
        let pid = engine.context().allocate_pid().unwrap();
        let done = engine
            .context()
            .spawn(Spawn::new(quick()).method("run").at(pid))
            .unwrap();
        wait(done).unwrap();
        ended.push(pid);
    }
    let count = Arc::new(AtomicUsize::new(0));
    let live = engine.context().allocate_pid().unwrap();
    let running = engine
        .context()
        .spawn(Spawn::new(counting(count.clone())).method("run").at(live))
        .unwrap();
    if !cfg!(miri) {
        // Freed slots came back (through the worker's cache and the pool)
        // under new generations.
        let slots: std::collections::HashSet<u64> = ended.iter().map(|&p| slot_of(p)).collect();
        assert!(slots.len() < ended.len(), "no slot was reused");
    }
    for &old in &ended {
        assert_ne!(old, live);
        let err = engine.context().send(old, ()).unwrap_err();
        // Refused as ended: the slot remembers the generation that ended.
        assert_eq!(err.kind(), SendErrorKind::Ended, "{old} reached {live}");
    }
    engine.context().send(live, ()).unwrap();
    // Read before the shutdown's cancel comes: a cancel in the same batch
    // is handed to the step first (the system lane), and this process
    // stops at it.
    let deadline = std::time::Instant::now() + PATIENCE;
    while count.load(Ordering::SeqCst) == 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let report = engine.shutdown(PATIENCE);
    assert_eq!(report.forced, 0);
    drop(running);
    assert_eq!(
        count.load(Ordering::SeqCst),
        1,
        "only the message to its own PID"
    );
}

#[test]
fn pids_chosen_by_hand_and_allocated_ones_never_coincide() {
    let engine = started(2);
    // The first ids a thread outside the workers is handed are 1, 2, ...
    let first = engine.context().allocate_pid().unwrap();
    let guessed = Pid::local(first.id() + 1);
    let count = Arc::new(AtomicUsize::new(0));
    let mine = engine
        .context()
        .spawn(
            Spawn::new(counting(count.clone()))
                .method("run")
                .at(guessed),
        )
        .unwrap();
    // The table reaches the id the user took: it is skipped.
    let spawned: Vec<Completion> = (0..3)
        .map(|_| {
            engine
                .context()
                .spawn(Spawn::new(quick()).method("run"))
                .unwrap()
        })
        .collect();
    assert!(spawned.iter().all(|c| c.pid() != guessed));
    // A live allocated PID submitted again by hand is a duplicate.
    let holder = engine
        .context()
        .spawn(Spawn::new(counting(count.clone())).method("run").at(first))
        .unwrap();
    let err = engine
        .context()
        .spawn(Spawn::new(quick()).method("run").at(first))
        .unwrap_err();
    assert!(matches!(err, SubmitError::DuplicatePid(pid) if pid == first));
    let err = engine
        .context()
        .spawn(Spawn::new(quick()).method("run").at(guessed))
        .unwrap_err();
    assert!(matches!(err, SubmitError::DuplicatePid(pid) if pid == guessed));
    // Both get their own messages.
    engine.context().send(guessed, ()).unwrap();
    engine.context().send(first, ()).unwrap();
    let mut pids: Vec<Pid> = engine.context().processes().iter().map(|p| p.pid).collect();
    pids.sort();
    assert!(pids.contains(&first) && pids.contains(&guessed));
    for done in spawned {
        wait(done).unwrap();
    }
    // Read before the shutdown's cancel comes: a cancel in the same batch
    // is handed to the step first (the system lane), and the process
    // stops at it, its message unread (a busy machine lets both land in
    // one batch).
    let deadline = std::time::Instant::now() + PATIENCE;
    while count.load(Ordering::SeqCst) < 2 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let report = engine.shutdown(PATIENCE);
    assert_eq!(report.forced, 0);
    // Each got its own message, and no other.
    assert_eq!(count.load(Ordering::SeqCst), 2);
    drop((mine, holder));
}
