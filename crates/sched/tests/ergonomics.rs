//! Less boilerplate: a process that writes only `step`, handlers written as
//! closures without type annotations.

use std::time::Duration;

use sched::command::CommandId;
use sched::prelude::*;
use sched::process::{SubmitError, DEFAULT_METHOD};

const PATIENCE: Duration = Duration::from_secs(10);
const DOUBLE: CommandId = CommandId(1);

/// Yields its input to `DOUBLE` and finishes with the result: only `step`.
struct Doubler {
    asked: bool,
}

impl Process for Doubler {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        if !self.asked {
            self.asked = true;
            out.yield_command(DOUBLE, Tag(1), Box::new(21u64));
            return Ok(());
        }
        for event in events {
            if let Event::Completion { result, .. } = event {
                out.finish(result?);
            }
        }
        Ok(())
    }
}

fn scheduler() -> Scheduler {
    let scheduler = Scheduler::builder()
        .workers(2)
        .handler(DOUBLE, |cmd, mut done| match cmd.data::<u64>() {
            Some(&n) => {
                let _ = done.complete(Box::new(n * 2));
                Ok(())
            }
            None => Err(done.reject("expected a u64")),
        })
        .build();
    scheduler.start();
    scheduler
}

#[test]
fn a_process_with_only_a_step_runs_under_the_default_method() {
    let scheduler = scheduler();
    let mut handle = scheduler
        .spawn(Doubler { asked: false })
        .expect("the default init accepts the default method");
    let value = handle.wait_timeout(PATIENCE).expect("done");
    assert_eq!(value.downcast_ref::<u64>(), Some(&42));
    scheduler.shutdown(PATIENCE);
}

#[test]
fn the_default_init_refuses_any_other_method() {
    let scheduler = scheduler();
    match scheduler.spawn(Spawn::new(Doubler { asked: false }).method("fly")) {
        Err(SubmitError::Init {
            error: InitError::UnknownMethod { method },
            ..
        }) => assert_eq!(method, "fly"),
        other => panic!("expected an unknown method, got {other:?}"),
    }
    assert_eq!(scheduler.stats().live_processes, 0);
    scheduler.shutdown(PATIENCE);
}

/// Finishes at its first step with its own PID.
struct Quick;

impl Process for Quick {
    type Done = Payload;
    fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        out.finish(out.pid());
        Ok(())
    }
}

#[test]
fn spawn_skips_pids_that_callers_chose_for_their_own_processes() {
    let scheduler = Scheduler::builder().workers(1).build();
    // Callers take the allocator's next ids before it hands them out.
    let next = scheduler.context().allocate_pid().unwrap();
    let mine: Vec<_> = (1..=3)
        .map(|k| {
            let pid = Pid::new(next.node(), next.id() + k);
            scheduler
                .spawn(Spawn::new(Inbox).method("run").at(pid))
                .unwrap()
        })
        .collect();
    let spawned: Vec<_> = (0..6)
        .map(|_| scheduler.spawn(Quick).expect("never a duplicate"))
        .collect();
    scheduler.start();
    for handle in spawned {
        let pid = handle.pid();
        assert!(mine.iter().all(|m| m.pid() != pid), "{pid} collided");
        let ran_as = handle.wait().unwrap();
        assert_eq!(ran_as.downcast_ref::<Pid>(), Some(&pid));
    }
    for m in &mine {
        scheduler.send(m.pid(), "stop").unwrap();
    }
    scheduler.shutdown(PATIENCE);
}

/// Waits for one message, then finishes.
struct Inbox;

impl Process for Inbox {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        if events.count() > 0 {
            out.finish(());
        }
        Ok(())
    }
}

#[test]
fn a_step_spawns_with_the_same_call_as_outside_code_and_sends_with_question_mark() {
    struct Parent;
    impl Process for Parent {
        type Done = Payload;
        fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
            if events.count() == 0 {
                // Generic spawn from a step: no Box, no PID, any input.
                let child = out.spawn(Inbox)?;
                // `?` on a send: its error converts into the step's.
                out.send(child.pid(), "go")?;
                out.finish(child);
            }
            Ok(())
        }
    }
    let scheduler = scheduler();
    let parent = scheduler.spawn(Parent).unwrap();
    let child = *parent.wait().unwrap().downcast::<Completion>().unwrap();
    child
        .wait()
        .expect("the child got its message and finished");
    scheduler.shutdown(PATIENCE);
}

#[test]
fn a_handle_says_already_taken_instead_of_panicking_and_tells_it_from_not_yet() {
    let scheduler = scheduler();
    let mut waiting = scheduler.spawn(Inbox).unwrap();
    assert!(
        waiting
            .wait_timeout(Duration::from_millis(1))
            .is_err_and(|e| e.is_timeout()),
        "still running: not yet"
    );
    assert!(waiting.try_take().is_none(), "still running: not yet");
    scheduler.send(waiting.pid(), "go").unwrap();
    assert!(waiting.wait_timeout(PATIENCE).is_ok());
    assert!(matches!(
        waiting.wait_timeout(PATIENCE),
        Err(ExitError::AlreadyTaken)
    ));
    assert!(matches!(
        waiting.try_take(),
        Some(Err(ExitError::AlreadyTaken))
    ));
    assert!(matches!(waiting.wait(), Err(ExitError::AlreadyTaken)));
    scheduler.shutdown(PATIENCE);
}

/// Starts work in `start` (no first-step flag); counts its calls.
struct StartsInStart {
    starts: u32,
    steps: u32,
    finish_in_start: bool,
    fail_in_start: bool,
}

impl StartsInStart {
    fn new() -> Self {
        StartsInStart {
            starts: 0,
            steps: 0,
            finish_in_start: false,
            fail_in_start: false,
        }
    }
}

impl Process for StartsInStart {
    type Done = Payload;
    fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        self.starts += 1;
        if self.fail_in_start {
            return Err("cannot start".into());
        }
        if self.finish_in_start {
            out.finish((self.starts, self.steps));
            return Ok(());
        }
        out.yield_command(DOUBLE, Tag(1), Box::new(21u64));
        Ok(())
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        self.steps += 1;
        for event in events {
            if let Event::Completion { result, .. } = event {
                let doubled = *result?.downcast::<u64>().map_err(|_| "not a u64")?;
                out.finish((self.starts, self.steps, doubled));
            }
        }
        Ok(())
    }
}

#[test]
fn start_yields_the_first_command_and_runs_once() {
    let scheduler = scheduler();
    let value = scheduler
        .spawn(StartsInStart::new())
        .unwrap()
        .wait()
        .unwrap();
    // One start; the first step (right after it, no events) and the step
    // with the completion.
    assert_eq!(value.downcast_ref::<(u32, u32, u64)>(), Some(&(1, 2, 42)));
    scheduler.shutdown(PATIENCE);
}

#[test]
fn a_start_that_finishes_or_fails_ends_the_process_without_a_step() {
    let scheduler = scheduler();
    let mut finishes = StartsInStart::new();
    finishes.finish_in_start = true;
    let value = scheduler.spawn(finishes).unwrap().wait().unwrap();
    assert_eq!(
        value.downcast_ref::<(u32, u32)>(),
        Some(&(1, 0)),
        "no step after done"
    );

    let mut fails = StartsInStart::new();
    fails.fail_in_start = true;
    let error = scheduler.spawn(fails).unwrap().wait().unwrap_err();
    assert_eq!(error.to_string(), "the step failed: cannot start");
    scheduler.shutdown(PATIENCE);
}

/// Upgrades itself to a `StartsInStart` on its first step.
struct UpgradesToStarter;

impl Process for UpgradesToStarter {
    type Done = Payload;
    fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        out.upgrade(StartsInStart::new(), DEFAULT_METHOD, ());
        Ok(())
    }
}

#[test]
fn the_new_instance_of_an_upgrade_is_started() {
    let scheduler = scheduler();
    let value = scheduler.spawn(UpgradesToStarter).unwrap().wait().unwrap();
    assert_eq!(value.downcast_ref::<(u32, u32, u64)>(), Some(&(1, 2, 42)));
    scheduler.shutdown(PATIENCE);
}
