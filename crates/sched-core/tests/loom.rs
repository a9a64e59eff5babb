//! Loom models of the engine through its public API: a real `Engine` with
//! one worker thread, a process that yields a command, and a handler that
//! completes it from another thread, so the completion races the worker's
//! end of step, its parking and its requeueing, through the real worker
//! loop, completer and shutdown.
//!
//! The protocol-level models (two completions, two senders, terminate, the
//! parking handshake) are in `src/loom_models/`, where they can reach the
//! state word and the sleepers directly, and run at the preemption bound
//! `cargo xtask loom` sets (2).
//!
//! The two-worker models here run a whole engine (two workers, the
//! submitting thread, shutdown) and explore at most one preemption per
//! execution: at two, each takes over a quarter of an hour on two cores
//! (about 72 000 executions at one, in under a minute). One preemption is
//! enough to reach the hand-overs they are about (the other worker steals
//! the process between its steps: the steal model asserts that it really
//! happens), and the protocol each hand-over rests on (the state word, the
//! next slot, parking) is modelled at bound 2 in `src/loom_models/` and
//! beside the next slot (`src/runqueue/next_slot.rs`).
#![cfg(loom)]

use loom::thread;

/// Runs a two-worker engine model with at most one preemption per
/// execution (see the module docs).
fn two_worker_model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(1);
    builder.check(f);
}
use relay::{Payload, Pid};
use sched_core::*;

const LATER: CommandId = CommandId(1);

/// Yields one command (tag 1), then finishes with its completion's value.
struct YieldOnce {
    asked: bool,
}

impl Process for YieldOnce {
    type Done = Payload;
    fn init(&mut self, _: &InitContext, _: &str, _: Payload) -> Result<(), InitError> {
        Ok(())
    }
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        if !self.asked {
            self.asked = true;
            out.yield_command(LATER, Tag(1), Box::new(20u32));
            return Ok(());
        }
        for event in events {
            if let Event::Completion {
                tag: Tag(1),
                result,
            } = event
            {
                let n = *result?.downcast::<u32>().expect("a u32");
                out.finish(n + 1);
            }
        }
        Ok(())
    }
    fn close(&mut self) {}
}

/// One worker; the handler hands the completer to a new thread that
/// completes it. Whatever the interleaving, the process ends with the
/// value the completion carried, and shutdown finds nothing left.
#[test]
fn a_completion_from_another_thread_reaches_a_one_worker_engine() {
    loom::model(|| {
        let engine = Engine::builder()
            .workers(1)
            .handler(
                LATER,
                |cmd: Command, c: Completer| -> Result<(), Rejected> {
                    let n = *cmd.data::<u32>().expect("a u32");
                    thread::spawn(move || {
                        c.complete(Box::new(n * 2))
                            .expect("the process waits for it");
                    });
                    Ok(())
                },
            )
            .build();
        engine.start();
        let done = engine
            .context()
            .spawn(
                Spawn::new(Box::new(YieldOnce { asked: false }))
                    .method("run")
                    .at(Pid::local(1)),
            )
            .expect("submit");
        let value = done.wait().expect("done");
        assert_eq!(value.downcast_ref::<u32>(), Some(&41));
        let report = engine.shutdown(std::time::Duration::from_secs(1));
        assert_eq!(report.still_running, 0);
        assert_eq!(engine.context().stats().live_processes, 0);
    });
}

/// Completes every command inside the handler call.
const NOW: CommandId = CommandId(2);

/// Yields to `NOW` `left` times, then finishes.
struct YieldSync {
    left: u32,
}

impl Process for YieldSync {
    type Done = Payload;
    fn init(&mut self, _: &InitContext, _: &str, _: Payload) -> Result<(), InitError> {
        Ok(())
    }
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        events.for_each(drop);
        if self.left == 0 {
            out.finish(());
        } else {
            self.left -= 1;
            out.yield_command(NOW, Tag(u64::from(self.left)), Box::new(()));
        }
        Ok(())
    }
    fn close(&mut self) {}
}

/// Two workers: a synchronous completion sets the wakeup flag, the worker
/// requeues the process on its own deque and wakes the other worker, which
/// may steal it at once. The process is never stepped by both, and ends.
#[test]
fn a_requeued_process_stolen_by_the_other_worker() {
    two_worker_model(|| {
        let engine = Engine::builder()
            .workers(2)
            .handler(NOW, |_: Command, c: Completer| -> Result<(), Rejected> {
                c.complete(Box::new(())).expect("the process is running");
                Ok(())
            })
            .build();
        engine.start();
        let done = engine
            .context()
            .spawn(
                Spawn::new(Box::new(YieldSync { left: 1 }))
                    .method("run")
                    .at(Pid::local(1)),
            )
            .expect("submit");
        done.wait().expect("done");
        let report = engine.shutdown(std::time::Duration::from_secs(1));
        assert_eq!(report.still_running, 0);
    });
}

/// Steps once, asks to continue (its worker requeues it on the stealable
/// FIFO deque and wakes the other worker), then finishes at its second
/// step. Records the loom thread of each step.
struct ContinueOnce {
    steps: std::sync::Arc<std::sync::Mutex<Vec<loom::thread::ThreadId>>>,
}

impl Process for ContinueOnce {
    type Done = Payload;
    fn init(&mut self, _: &InitContext, _: &str, _: Payload) -> Result<(), InitError> {
        Ok(())
    }
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        events.for_each(drop);
        let mut steps = self.steps.lock().unwrap();
        steps.push(thread::current().id());
        if steps.len() == 1 {
            out.continue_();
        } else {
            out.finish(());
        }
        Ok(())
    }
    fn close(&mut self) {}
}

/// Two workers, a process that continues once: in some executions the
/// other worker steals it between its two steps. The record's owner check
/// (debug and loom builds) asserts that no two workers are ever inside its
/// body at once; the model also checks that the steal really happens, so
/// the ownership hand-over between workers is explored, not assumed.
#[test]
fn a_continued_process_stolen_by_the_other_worker() {
    use std::sync::atomic::{AtomicBool, Ordering};
    static STOLEN: AtomicBool = AtomicBool::new(false);
    two_worker_model(|| {
        let steps = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let engine = Engine::builder().workers(2).build();
        engine.start();
        let done = engine
            .context()
            .spawn(
                Spawn::new(Box::new(ContinueOnce {
                    steps: steps.clone(),
                }))
                .method("run")
                .at(Pid::local(1)),
            )
            .expect("submit");
        done.wait().expect("done");
        let steps = steps.lock().unwrap();
        assert_eq!(steps.len(), 2);
        if steps[0] != steps[1] {
            STOLEN.store(true, Ordering::Relaxed);
        }
        drop(steps);
        let report = engine.shutdown(std::time::Duration::from_secs(1));
        assert_eq!(report.still_running, 0);
    });
    assert!(
        STOLEN.load(Ordering::Relaxed),
        "no explored execution had the other worker take the continued process"
    );
}
