//! User values whose `Drop` panics, events a step does not read, and hooks
//! that restart processes: nothing of ours may die, leak a slot or lose an
//! event because of them.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use common::*;
use relay::{Package, Payload, Pid};
use sched_core::*;

/// A payload whose `Drop` panics.
struct Bomb;

impl Drop for Bomb {
    fn drop(&mut self) {
        panic!("a user Drop panicked");
    }
}

/// After whatever the test did, the single worker must still run a fresh
/// process to its end.
fn worker_still_runs(engine: &Engine, id: u64) {
    let probe = process(|_, out| {
        out.finish(7u64);
        Ok(())
    });
    assert_eq!(
        done_u64(wait(submit(engine, id, probe))),
        7,
        "the worker died"
    );
}

#[test]
fn a_panicking_drop_in_an_unread_message_does_not_kill_the_worker() {
    let engine = builder(1).build();
    // Ends at its first step without reading the message waiting for it:
    // the message becomes a dead letter, dropped by the engine.
    let ignores = process(|_, out| {
        out.finish(());
        Ok(())
    });
    let handle = submit(&engine, 1, ignores);
    engine
        .context()
        .forward(Package::new(Pid::local(99), Pid::local(1), Bomb))
        .expect("queued before the first step");
    engine.start();
    wait(handle).expect("done");
    worker_still_runs(&engine, 2);
    assert_eq!(engine.context().stats().dead_letters, 1);
}

#[test]
fn a_panicking_drop_in_a_terminated_process_queue_does_not_kill_the_worker() {
    let engine = started(1);
    // Never reads its events, so the message stays queued until the end.
    let deaf = process(|_, out| {
        out.idle();
        Ok(())
    });
    let handle = submit(&engine, 1, deaf);
    engine
        .context()
        .forward(Package::new(Pid::local(99), Pid::local(1), Bomb))
        .expect("delivered");
    engine.context().terminate(Pid::local(1)).expect("live");
    assert!(matches!(wait(handle), Err(ExitError::Terminated)));
    worker_still_runs(&engine, 2);
}

#[test]
fn a_panicking_drop_in_a_discarded_yield_does_not_kill_the_worker() {
    let engine = started(1);
    // Yields a command and then fails: the yield is never dispatched and
    // its payload is dropped by the engine.
    let fails = process(|_, out| {
        out.yield_command(SYNC, Tag(1), Box::new(Bomb));
        Err("failed after yielding".into())
    });
    assert!(matches!(
        wait(submit(&engine, 1, fails)),
        Err(ExitError::Step(_))
    ));
    worker_still_runs(&engine, 2);
}

/// A process whose `init` fails and whose `Drop` panics.
struct FailsAndExplodes;

impl Process for FailsAndExplodes {
    type Done = Payload;
    fn init(&mut self, _: &InitContext, _: &str, _: Payload) -> Result<(), InitError> {
        Err(InitError::failed("no"))
    }
    fn step(&mut self, _: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
        unreachable!("never initialised")
    }
    fn close(&mut self) {}
}

impl Drop for FailsAndExplodes {
    fn drop(&mut self) {
        panic!("Drop after a failed init");
    }
}

#[test]
fn a_process_whose_drop_panics_after_a_failed_init_frees_its_slot() {
    let engine = builder(1).max_processes(1).build();
    engine.start();
    for id in 1..=3 {
        let result = engine.context().spawn(
            Spawn::new(Box::new(FailsAndExplodes))
                .method("run")
                .at(Pid::local(id)),
        );
        assert!(
            matches!(result, Err(SubmitError::Init { .. })),
            "{result:?}"
        );
    }
    // The limit is one: the failed submissions must have given it back.
    worker_still_runs(&engine, 10);
}

/// Parks forever; its `Drop` panics.
struct ExplodesWhenDropped;

impl Process for ExplodesWhenDropped {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
        events.for_each(drop);
        Ok(())
    }
}

impl Drop for ExplodesWhenDropped {
    fn drop(&mut self) {
        panic!("Drop of a refused process");
    }
}

#[test]
fn a_process_refused_at_the_limit_whose_drop_panics_is_dropped_under_the_guard() {
    let engine = builder(1).max_processes(1).build();
    engine.start();
    let live = submit(
        &engine,
        1,
        process(|events, _| {
            events.for_each(drop);
            Ok(())
        }),
    );
    // Refused (the limit is taken): the process is the user's value and is
    // dropped here, where its panic must not reach the caller.
    // Its input's `Drop` panics too.
    let refused = engine.context().spawn(
        Spawn::new(ExplodesWhenDropped)
            .method("run")
            .input(Bomb)
            .at(Pid::local(2)),
    );
    assert!(
        matches!(refused, Err(SubmitError::TooManyProcesses { max: 1 })),
        "{refused:?}"
    );
    let spawned = engine.context().spawn(ExplodesWhenDropped);
    assert!(
        matches!(spawned, Err(SubmitError::TooManyProcesses { max: 1 })),
        "{spawned:?}"
    );
    engine
        .context()
        .terminate(Pid::local(1))
        .expect("still live");
    assert!(matches!(wait(live), Err(ExitError::Terminated)));
    worker_still_runs(&engine, 10);
}

#[test]
fn events_a_step_does_not_read_are_its_next_step_s_first_events() {
    let engine = builder(1).build();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    // Reads one event per step and asks to run again.
    let one_at_a_time = process(move |events, out| {
        match events.next() {
            Some(Event::Message(p)) => {
                let n = *p.payload::<u64>().expect("a u64");
                log.lock().unwrap().push(n);
                if n == 5 {
                    out.finish(());
                    return Ok(());
                }
            }
            Some(other) => panic!("unexpected {other:?}"),
            None => {}
        }
        out.continue_();
        Ok(())
    });
    let handle = submit(&engine, 1, one_at_a_time);
    for n in 1..=5u64 {
        engine
            .context()
            .forward(Package::new(Pid::local(99), Pid::local(1), n))
            .unwrap();
    }
    engine.start();
    wait(handle).expect("all five read");
    assert_eq!(
        *seen.lock().unwrap(),
        vec![1, 2, 3, 4, 5],
        "in order, none lost"
    );
    assert_eq!(engine.context().stats().dead_letters, 0);
}

#[test]
fn events_left_unread_by_a_finished_process_are_dead_letters() {
    let letters = Arc::new(AtomicUsize::new(0));
    let counter = letters.clone();
    let engine = builder(1)
        .on_dead_letter(move |_cx, _, _| {
            counter.fetch_add(1, Ordering::SeqCst);
        })
        .build();
    let reads_one = process(|events, out| {
        let _first = events.next();
        out.finish(());
        Ok(())
    });
    let handle = submit(&engine, 1, reads_one);
    for n in 0..4u64 {
        engine
            .context()
            .forward(Package::new(Pid::local(99), Pid::local(1), n))
            .unwrap();
    }
    engine.start();
    wait(handle).expect("done");
    assert_eq!(
        letters.load(Ordering::SeqCst),
        3,
        "the three unread messages"
    );
    assert_eq!(engine.context().stats().dead_letters, 3);
}

#[test]
fn on_complete_can_restart_a_process_at_the_process_limit() {
    let engine_slot: Arc<OnceLock<Weak<Engine>>> = Arc::default();
    let restarted: Arc<Mutex<Option<Result<Completion, SubmitError>>>> = Arc::default();
    let (slot, result) = (engine_slot.clone(), restarted.clone());
    let engine = Arc::new(
        builder(1)
            .max_processes(1)
            .on_complete(move |_cx, pid, _| {
                if pid != Pid::local(1) {
                    return;
                }
                let engine = slot.get().and_then(Weak::upgrade).expect("engine alive");
                let replacement = process(|_, out| {
                    out.finish(2u64);
                    Ok(())
                });
                let outcome = engine
                    .context()
                    .spawn(Spawn::new(replacement).method("run").at(Pid::local(2)));
                *result.lock().unwrap() = Some(outcome);
            })
            .build(),
    );
    engine_slot.set(Arc::downgrade(&engine)).unwrap();
    engine.start();
    let first = process(|_, out| {
        out.finish(1u64);
        Ok(())
    });
    assert_eq!(done_u64(wait(submit(&engine, 1, first))), 1);
    let restart = loop {
        if let Some(outcome) = restarted.lock().unwrap().take() {
            break outcome;
        }
        std::thread::yield_now();
    };
    let handle = restart.expect("the hook could restart at the limit");
    assert_eq!(done_u64(wait(handle)), 2);
}

/// Ends at its first step without reading, and panics in `unread` after
/// taking one of what it left.
struct PanicsInUnread;

impl Process for PanicsInUnread {
    type Done = relay::Payload;
    fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        out.finish(());
        Ok(())
    }
    fn unread(&mut self, unread: &mut Vec<Event>) {
        unread.remove(0);
        panic!("unread exploded");
    }
}

#[test]
fn a_panicking_unread_ends_the_process_as_panicked_and_leaves_the_rest_as_dead_letters() {
    let engine = builder(1).build();
    let handle = submit(&engine, 1, Box::new(PanicsInUnread));
    for n in 0..3u32 {
        engine
            .context()
            .send(Pid::local(1), n)
            .expect("queued before the first step");
    }
    engine.start();
    let outcome = wait(handle);
    assert!(
        matches!(&outcome, Err(ExitError::Panicked { message }) if message.contains("unread exploded")),
        "{outcome:?}"
    );
    worker_still_runs(&engine, 2);
    assert_eq!(
        engine.context().stats().dead_letters,
        2,
        "the one it took is its own, the two it left are dead letters"
    );
}
