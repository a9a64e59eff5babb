//! Context switches per completion in the yield fan-out workload: 1 000
//! processes (tasks) each wait 10 times in a row for a command that one
//! outside thread completes. The whole process's voluntary and involuntary
//! context switches (`getrusage(RUSAGE_SELF)`, which includes every thread)
//! are counted over `ROUNDS` rounds and divided by the completions. The
//! completing thread's own involuntary switches say whether the workers
//! starve it (preempt it to spin or yield).

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use sched_core::{Command, Completer, Engine, Rejected, Spawn};

use super::fan_out::{FanOut, REMOTE, YIELDS};
use super::latch::Latch;
use super::{runtime, WORKERS};

const TASKS: usize = 1_000;
const ROUNDS: usize = 30;

/// Voluntary and involuntary context switches of `who` so far.
fn switches(who: libc::c_int) -> (u64, u64) {
    // SAFETY: `getrusage` writes into the zeroed struct we own.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        assert_eq!(libc::getrusage(who, &mut usage), 0, "getrusage");
        usage
    };
    (usage.ru_nvcsw as u64, usage.ru_nivcsw as u64)
}

struct Measured {
    per_completion: f64,
    /// Of which involuntary (preemptions, and `sched_yield`s that switched).
    involuntary: f64,
    /// The completing thread's voluntary switches (blocking on its empty
    /// channel) per completion.
    completer_blocked: f64,
    /// Worker parks per completion (ours only; tokio does not say).
    parks: Option<f64>,
    completer_involuntary: f64,
    round: Duration,
}

/// Runs `round` once to warm up, then `ROUNDS` times counted; the
/// completer's figure is filled in by the caller once its thread ended.
fn measure(mut round: impl FnMut()) -> Measured {
    round(); // warm-up
    let (v0, i0) = switches(libc::RUSAGE_SELF);
    let started = Instant::now();
    for _ in 0..ROUNDS {
        round();
    }
    let elapsed = started.elapsed();
    let (v1, i1) = switches(libc::RUSAGE_SELF);
    let completions = (ROUNDS * TASKS * YIELDS) as f64;
    Measured {
        per_completion: ((v1 - v0) + (i1 - i0)) as f64 / completions,
        involuntary: (i1 - i0) as f64 / completions,
        completer_blocked: 0.0,
        completer_involuntary: 0.0,
        parks: None,
        round: elapsed / ROUNDS as u32,
    }
}

fn ours() -> Measured {
    let (to_completer, completions) = mpsc::channel::<Completer>();
    let completer = thread::spawn(move || {
        let before = switches(libc::RUSAGE_THREAD);
        for c in completions {
            c.complete(Box::new(())).expect("the process waits");
        }
        let after = switches(libc::RUSAGE_THREAD);
        (after.0 - before.0, after.1 - before.1)
    });
    let engine = Engine::builder()
        .workers(WORKERS)
        .handler(
            REMOTE,
            move |_: Command, c: Completer| -> Result<(), Rejected> {
                to_completer.send(c).expect("completer thread alive");
                Ok(())
            },
        )
        .build();
    engine.start();
    let round = || {
        let latch = Latch::new(TASKS);
        for _ in 0..TASKS {
            let process = FanOut::new(latch.clone());
            let pid = engine.context().allocate_pid().expect("pid");
            drop(
                engine
                    .context()
                    .spawn(Spawn::new(process).method("run").at(pid))
                    .expect("submitted"),
            );
        }
        latch.wait();
    };
    let parks = || -> u64 {
        engine
            .context()
            .stats()
            .workers
            .iter()
            .map(|w| w.parks)
            .sum()
    };
    let parks_before = parks();
    let mut measured = measure(round);
    measured.parks = Some((parks() - parks_before) as f64 / (ROUNDS * TASKS * YIELDS) as f64);
    // The handler (and its sender) go with the engine once dropped, which
    // ends the completer thread's loop.
    engine.shutdown(Duration::from_secs(5));
    drop(engine);
    let preempted = completer.join().expect("completer thread");
    measured.completer_blocked = preempted.0 as f64 / (ROUNDS * TASKS * YIELDS) as f64;
    measured.completer_involuntary = preempted.1 as f64 / (ROUNDS * TASKS * YIELDS) as f64;
    measured
}

fn tokio() -> Measured {
    let rt = runtime();
    let (to_completer, completions) = mpsc::channel::<tokio::sync::oneshot::Sender<()>>();
    let completer = thread::spawn(move || {
        let before = switches(libc::RUSAGE_THREAD);
        for c in completions {
            c.send(()).expect("the task waits");
        }
        let after = switches(libc::RUSAGE_THREAD);
        (after.0 - before.0, after.1 - before.1)
    });
    let sender = to_completer.clone();
    let round = || {
        let latch = Latch::new(TASKS);
        for _ in 0..TASKS {
            let latch = latch.clone();
            let to_completer = sender.clone();
            rt.spawn(async move {
                for _ in 0..YIELDS {
                    let (tx, rx) = tokio::sync::oneshot::channel();
                    to_completer.send(tx).expect("completer thread alive");
                    rx.await.expect("completed");
                }
                latch.count_down();
            });
        }
        latch.wait();
    };
    let mut measured = measure(round);
    drop(to_completer);
    drop(sender);
    drop(rt);
    let preempted = completer.join().expect("completer thread");
    measured.completer_blocked = preempted.0 as f64 / (ROUNDS * TASKS * YIELDS) as f64;
    measured.completer_involuntary = preempted.1 as f64 / (ROUNDS * TASKS * YIELDS) as f64;
    measured
}

/// Runs both sides and prints the comparison.
pub(crate) fn fan_out_switches() {
    let ours = ours();
    let tokio = tokio();
    println!(
        "yield fan-out ({TASKS} x {YIELDS} completions from one outside thread, {ROUNDS} rounds), \
         context switches per completion (whole process) and the completing thread's \
         involuntary switches per completion:"
    );
    for (name, m) in [("ours", &ours), ("tokio", &tokio)] {
        println!(
            "  {name:<6} {:.4} per completion ({:.4} involuntary), completer blocked {:.4} and \
             preempted {:.4} per completion, {:?} per round{}",
            m.per_completion,
            m.involuntary,
            m.completer_blocked,
            m.completer_involuntary,
            m.round,
            m.parks
                .map(|p| format!(", {p:.4} worker parks per completion"))
                .unwrap_or_default()
        );
    }
    println!(
        "  ours / tokio: switches {:.2}, time per round {:.2}",
        ours.per_completion / tokio.per_completion,
        ours.round.as_secs_f64() / tokio.round.as_secs_f64()
    );
}
