//! Less boilerplate: a process that writes only `step`, handlers written as
//! closures without type annotations.

use std::time::Duration;

use sched::*;

const PATIENCE: Duration = Duration::from_secs(10);
const DOUBLE: CommandId = CommandId(1);

/// Yields its input to `DOUBLE` and finishes with the result: only `step`.
struct Doubler {
    asked: bool,
}

impl Process for Doubler {
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        if !self.asked {
            self.asked = true;
            out.yield_command(DOUBLE, Tag(1), Box::new(21u64));
            return Ok(());
        }
        for event in events {
            if let Event::Completion { result, .. } = event {
                out.done(result?);
            }
        }
        Ok(())
    }
}

fn scheduler() -> Scheduler {
    let scheduler = Scheduler::builder()
        .workers(2)
        .handler(DOUBLE, |cmd, done| match cmd.data::<u64>() {
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
        .spawn(Doubler { asked: false }, DEFAULT_METHOD, ())
        .expect("the default init accepts the default method");
    let value = handle
        .wait_timeout(PATIENCE)
        .expect("finished")
        .expect("done");
    assert_eq!(value.downcast_ref::<u64>(), Some(&42));
    scheduler.shutdown(PATIENCE);
}

#[test]
fn the_default_init_refuses_any_other_method() {
    let scheduler = scheduler();
    match scheduler.spawn(Doubler { asked: false }, "fly", ()) {
        Err(SubmitError::Init {
            error: InitError::UnknownMethod { method },
            ..
        }) => assert_eq!(method, "fly"),
        other => panic!("expected an unknown method, got {other:?}"),
    }
    assert_eq!(scheduler.stats().live_processes, 0);
    scheduler.shutdown(PATIENCE);
}
