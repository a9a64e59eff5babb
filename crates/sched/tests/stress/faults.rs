//! Fault rounds run between the random rounds, one class at a time:
//! submissions racing shutdown, processes that wake themselves every step
//! beside processes that must still run, and user values whose `Drop`
//! panics inside the scheduler. Each checks its own guarantee.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use sched::command::{CommandId, Completer, Rejected};
use sched::prelude::*;
use sched::process::SubmitError;
use sched::Package;

use crate::rng::Rng;

/// How long a fault round waits for anything before it reports a hang.
const PATIENCE: Duration = Duration::from_secs(20);
/// Completes inside the handler call.
const SYNC: CommandId = CommandId(1);

/// Runs fault round `number` (its class is `number % 3`).
pub(crate) fn run(number: u64, seed: u64) -> Result<(), String> {
    let mut rng = Rng::new(seed);
    let workers = 1 + (rng.next() % 4) as usize;
    match number % 3 {
        0 => submit_racing_shutdown(workers, &mut rng),
        1 => self_waking_hogs(workers),
        _ => panicking_drops(workers),
    }
}

/// A process defined by a closure.
struct Step<F>(F);

impl<F> Process for Step<F>
where
    F: FnMut(&mut Events<'_>, &mut Output<'_>) -> Result<(), BoxError> + Send + 'static,
{
    type Done = Payload;
    fn init(&mut self, _: &InitContext, _: &str, _: Payload) -> Result<(), InitError> {
        Ok(())
    }
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        (self.0)(events, out)
    }
    fn close(&mut self) {}
}

/// Ends on its cancel (or on a message), with "cancelled".
fn cancellable() -> impl Process<Done = Payload> {
    Step(|events: &mut Events<'_>, out: &mut Output<'_>| {
        if events.any(|e| matches!(e, Event::Cancel)) {
            out.finish("cancelled");
        }
        Ok(())
    })
}

fn scheduler(workers: usize) -> Scheduler {
    Scheduler::builder()
        .workers(workers)
        .handler(
            SYNC,
            |cmd: sched::command::Command, c: Completer| -> Result<(), Rejected> {
                let _ = c.complete(cmd.data);
                Ok(())
            },
        )
        .build()
}

/// Every submission either fails with `ShuttingDown` or gets the cancel
/// and an outcome; none is forced, none lost.
fn submit_racing_shutdown(workers: usize, rng: &mut Rng) -> Result<(), String> {
    let scheduler = Arc::new(scheduler(workers));
    scheduler.start();
    let submitted = Arc::new(AtomicUsize::new(0));
    let submitters: Vec<_> = (0..2)
        .map(|_| {
            let (scheduler, submitted) = (scheduler.clone(), submitted.clone());
            thread::spawn(move || {
                let mut accepted = Vec::new();
                loop {
                    match scheduler.spawn(cancellable()) {
                        Ok(handle) => {
                            accepted.push(handle);
                            submitted.fetch_add(1, SeqCst);
                        }
                        Err(SubmitError::ShuttingDown) => return Ok(accepted),
                        Err(other) => return Err(format!("unexpected submit error: {other}")),
                    }
                }
            })
        })
        .collect();
    let head_start = 1 + (rng.next() % 64) as usize;
    while submitted.load(SeqCst) < head_start {
        thread::yield_now();
    }
    let report = scheduler.shutdown(PATIENCE);
    if report.forced != 0 || report.still_running != 0 || report.still_queued != 0 {
        return Err(format!(
            "submit racing shutdown: a process missed its cancel: {report:?}"
        ));
    }
    for submitter in submitters {
        for mut handle in submitter.join().map_err(|_| "a submitter panicked")?? {
            let pid = handle.pid();
            match handle.wait_timeout(PATIENCE) {
                Ok(value) if value.downcast_ref::<&str>() == Some(&"cancelled") => {}
                Err(ExitError::TimedOut) => {
                    return Err(format!("{pid} was accepted but never ended"))
                }
                other => return Err(format!("{pid} ended with {other:?}, not its cancel")),
            }
        }
    }
    Ok(())
}

/// Hogs that wake themselves (a message to self, or a synchronous
/// completion) every step cannot keep the processes queued behind them
/// on their worker from running.
fn self_waking_hogs(workers: usize) -> Result<(), String> {
    let scheduler = scheduler(workers);
    let stop = Arc::new(AtomicBool::new(false));
    let hogs: Vec<_> = (0..workers as u64)
        .map(|i| {
            let stop = stop.clone();
            let hog = Step(move |events: &mut Events<'_>, out: &mut Output<'_>| {
                events.for_each(drop);
                if stop.load(SeqCst) {
                    out.finish(());
                } else if i % 2 == 0 {
                    let me = out.pid();
                    out.send(me, ())?;
                    out.idle();
                } else {
                    out.yield_command(SYNC, Tag(i), Box::new(()));
                    out.idle();
                }
                Ok(())
            });
            scheduler.spawn(hog).expect("spawn a hog")
        })
        .collect();
    let victims: Vec<_> = (0..8)
        .map(|_| {
            let victim = Step(|_: &mut Events<'_>, out: &mut Output<'_>| {
                out.finish(());
                Ok(())
            });
            scheduler.spawn(victim).expect("spawn a victim")
        })
        .collect();
    scheduler.start();
    let mut starved = Vec::new();
    for mut victim in victims {
        if victim.wait_timeout(PATIENCE).is_err_and(|e| e.is_timeout()) {
            starved.push(victim.pid());
        }
    }
    stop.store(true, SeqCst);
    for mut hog in hogs {
        if hog.wait_timeout(PATIENCE).is_err_and(|e| e.is_timeout()) {
            return Err(format!("hog {} did not stop", hog.pid()));
        }
    }
    if !starved.is_empty() {
        return Err(format!("starved beside self-waking hogs: {starved:?}"));
    }
    scheduler.shutdown(PATIENCE);
    Ok(())
}

/// A payload whose `Drop` panics (with the stress run's injected-panic
/// prefix, so the output stays quiet).
struct Bomb;

impl Drop for Bomb {
    fn drop(&mut self) {
        panic!("injected: a payload's Drop panicked");
    }
}

/// Payloads whose `Drop` panics, dropped by the scheduler as unread
/// messages of an ended process, messages to a terminated process, and
/// yields of a failed step: every worker survives, every count adds up.
fn panicking_drops(workers: usize) -> Result<(), String> {
    let scheduler = scheduler(workers);
    scheduler.start();
    let mut handles = Vec::new();
    for i in 0..16u64 {
        let kind = i % 3;
        let process = Step(move |_: &mut Events<'_>, out: &mut Output<'_>| {
            match kind {
                // Never reads; terminated from outside.
                0 => out.idle(),
                // Ends at once, leaving its messages unread.
                1 => out.finish(()),
                // Yields a bomb, then fails: the yield is discarded.
                _ => {
                    out.yield_command(SYNC, Tag(1), Box::new(Bomb));
                    return Err("injected: failed after yielding".into());
                }
            }
            Ok(())
        });
        let handle = scheduler.spawn(process).expect("spawn");
        let pid = handle.pid();
        for _ in 0..3 {
            // Refused once the process has ended: then the bomb comes back
            // to us and goes off here, on our thread, caught below.
            if let Err(refused) =
                scheduler
                    .context()
                    .forward(Package::new(Pid::local(0), pid, Bomb))
            {
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(refused)));
            }
        }
        if kind == 0 {
            scheduler
                .terminate(pid)
                .map_err(|e| format!("terminate {pid}: {e}"))?;
        }
        handles.push((kind, handle));
    }
    for (kind, mut handle) in handles {
        let pid = handle.pid();
        let outcome = match handle.wait_timeout(PATIENCE) {
            Err(ExitError::TimedOut) => return Err(format!("{pid} never ended")),
            outcome => outcome,
        };
        let expected = match kind {
            0 => matches!(outcome, Err(ExitError::Terminated)),
            1 => outcome.is_ok(),
            _ => matches!(outcome, Err(ExitError::Step(_))),
        };
        if !expected {
            return Err(format!("{pid} (kind {kind}) ended with {outcome:?}"));
        }
    }
    // Every worker still runs processes.
    let probes: Vec<_> = (0..workers * 4)
        .map(|_| {
            let probe = Step(|_: &mut Events<'_>, out: &mut Output<'_>| {
                out.finish(());
                Ok(())
            });
            scheduler.spawn(probe).expect("spawn a probe")
        })
        .collect();
    for mut probe in probes {
        if probe.wait_timeout(PATIENCE).is_err_and(|e| e.is_timeout()) {
            return Err("a worker died dropping a panicking payload".into());
        }
    }
    let report = scheduler.shutdown(PATIENCE);
    if report.workers_detached != 0 {
        return Err(format!("workers lost: {report:?}"));
    }
    Ok(())
}
