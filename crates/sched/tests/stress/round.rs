//! One round: a fresh scheduler with 1 to 4 workers, a few hundred
//! processes with random scripts submitted from outside (plus the children
//! their steps spawn), the helper threads that send messages, complete
//! yields and terminate processes; then, once everything has ended, every
//! check.

use std::collections::HashMap;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use sched::command::CompleteError;
use sched::prelude::*;
use sched::process::{Outcome, SubmitError};

use crate::accounts::{check_all, Records};
use crate::feeder::feed;
use crate::handlers::CompleterThreads;
use crate::hooks::build;
use crate::process::{Log, Observed, Stress};
use crate::rng::Rng;
use crate::script::Script;
use crate::shared::{lock, Shared, Tracked};
use crate::tally::Tally;
use crate::terminator::terminate_doomed;
use crate::violations::Violations;

/// How long the harness waits for a process before it reports a hang.
const PATIENCE: Duration = Duration::from_secs(20);

/// A submission `init` had to refuse.
pub(crate) struct Refused {
    pub(crate) pid: Pid,
    pub(crate) observed: Arc<Observed>,
}

/// Runs round `number` from `seed`, adds its counts to `tally`, and
/// returns the report of what went wrong, if anything did.
pub(crate) fn run(number: u64, seed: u64, tally: &mut Tally) -> Result<(), String> {
    let mut rng = Rng::new(seed);
    let workers = 1 + (number % 4) as usize;
    let mailbox = rng.chance(1, 3).then(|| rng.range(1, 4) as usize);
    let count = if cfg!(debug_assertions) {
        rng.range(50, 250)
    } else {
        rng.range(200, 1_500)
    };
    let strays = rng.chance(1, 2);
    let shared = Arc::new(Shared::new(strays));
    let scheduler = build(workers, mailbox, &shared);
    let completers = CompleterThreads::start(&shared, 2, &mut rng);
    let mut violations = Violations::default();

    // Some processes wait in the global queue before the workers start.
    let start_at = rng.below(count / 2 + 1);
    let mut refused = Vec::new();
    let mut ended = Vec::new();
    let mut hung = false;
    let feeder_rng = rng.split();
    let feeder_log = thread::scope(|s| {
        let feeder = s.spawn(|| feed(&scheduler, &shared, feeder_rng));
        let terminator = s.spawn(|| terminate_doomed(&scheduler, &shared));
        for i in 0..count {
            if i == start_at {
                scheduler.start();
            }
            submit(&scheduler, &shared, &mut rng, &mut refused, &mut violations);
            if rng.chance(1, 16) {
                thread::yield_now();
            }
        }
        scheduler.start();
        hung = wait_all(&shared, &mut ended);
        shared.stop.store(true, SeqCst);
        terminator.join().expect("the terminator does not panic");
        feeder.join().expect("the feeder does not panic")
    });

    if hung {
        let report = format!(
            "with {workers} workers, mailbox capacity {mailbox:?}, strays reaching \
             processes {strays}: {}",
            hang_report(&scheduler, &ended)
        );
        scheduler.shutdown(Duration::from_secs(1));
        drop_held(&shared);
        completers.stop(&shared);
        return Err(report);
    }

    // Every process has ended: a held completer can only be stale now.
    for completer in std::mem::take(&mut *lock(&shared.held)) {
        let tag = completer.tag();
        match completer.complete(Box::new(tag.0)) {
            Err(CompleteError::Stale { tag: t, .. }) if t == tag => {
                lock(&shared.stale).push(tag.0);
                tally.held_stale += 1;
            }
            other => violations.push(format!(
                "{tag}: completing a held completer after its process ended gave {other:?}"
            )),
        }
    }
    let live = scheduler.stats().live_processes;
    let listed = scheduler.processes();
    if live != 0 || !listed.is_empty() {
        violations.push(format!(
            "{live} processes still live after every one ended: {listed:?}"
        ));
    }
    completers.stop(&shared);
    let report = scheduler.shutdown(Duration::from_secs(5));
    if (report.forced, report.still_running, report.workers_detached) != (0, 0, 0) {
        violations.push(format!(
            "shutdown of an empty scheduler had work left: {report:?}"
        ));
    }

    let logs = take_logs(&ended, &mut violations);
    let records = Records {
        ended: &ended,
        logs: &logs,
        refused: &refused,
        feeder: &feeder_log,
        bounded: mailbox.is_some(),
    };
    check_all(&scheduler, &shared, &records, tally, &mut violations);

    tally.rounds += 1;
    tally.rounds_by_workers[workers - 1] += 1;
    tally.bounded_mailbox_rounds += u64::from(mailbox.is_some());
    tally.stray_rounds += u64::from(strays);
    if violations.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} violations with {workers} workers, mailbox capacity {mailbox:?}, \
             strays reaching processes {strays}, {} processes:\n{}",
            violations.total(),
            ended.len(),
            violations.report()
        ))
    }
}

/// Submits one process from outside: mostly a good one (through `spawn`,
/// with or without a chosen PID), sometimes one `init` must refuse.
fn submit(
    scheduler: &Scheduler,
    shared: &Arc<Shared>,
    rng: &mut Rng,
    refused: &mut Vec<Refused>,
    violations: &mut Violations,
) {
    let script = Script::random(rng, 0);
    let observed = Arc::new(Observed::default());
    let process = Stress::new(observed.clone(), shared.clone());
    let bad = rng.below(40);
    if bad < 2 {
        let pid = scheduler.context().allocate_pid().expect("PIDs left");
        shared.saw_pid(pid);
        let (method, result) = if bad == 0 {
            (
                "fly",
                scheduler.spawn(Spawn::new(process).method("fly").input(script).at(pid)),
            )
        } else {
            (
                "run",
                scheduler.spawn(Spawn::new(process).method("run").input(42u32).at(pid)),
            )
        };
        match result {
            Err(SubmitError::Init {
                pid: p,
                error: InitError::UnknownMethod { method: m },
            }) if p == pid && m == method => {}
            Err(SubmitError::Init {
                pid: p,
                error: InitError::Failed(e),
            }) if p == pid && method == "run" && e.to_string().contains("not a script") => {}
            other => violations.push(format!(
                "a submission init must refuse ({method}) gave {:?}",
                other.map(|c| c.pid())
            )),
        }
        refused.push(Refused { pid, observed });
        return;
    }
    let result = if rng.chance(1, 2) {
        scheduler.spawn(Spawn::new(process).method("run").input(script.clone()))
    } else {
        let pid = scheduler.context().allocate_pid().expect("PIDs left");
        scheduler.spawn(
            Spawn::new(process)
                .method("run")
                .input(script.clone())
                .at(pid),
        )
    };
    let completion = match result {
        Ok(completion) => completion,
        Err(e) => return violations.push(format!("submitting {script:?} failed: {e}")),
    };
    let pid = completion.pid();
    // Some are watched from outside too: registered (`spawn` returned),
    // certainly live if an instance is still open after the call.
    let outside = rng.chance(1, 4).then(|| {
        let monitor = scheduler.context().monitor(pid);
        (monitor, observed.open.load(SeqCst) > 0)
    });
    if script.doomed && rng.chance(1, 4) {
        // Right away: often before its first step, sometimes before the
        // workers have started.
        let accepted = scheduler.terminate(pid).is_ok();
        observed.terminate_result(accepted);
    }
    let tracked = Tracked {
        pid,
        script,
        observed,
        completion,
        parent: None,
        outside,
    };
    shared.admit(tracked, rng);
}

/// Waits until every process admitted so far (and every one they spawn)
/// has ended. Returns whether one did not end in time.
fn wait_all(shared: &Shared, ended: &mut Vec<(Tracked, Option<Outcome>)>) -> bool {
    let mut patience = PATIENCE;
    let mut hung = false;
    loop {
        // A process is admitted by the step that spawned it, before that
        // step's process ends: once a batch has all ended, an empty list
        // means nobody is left to admit more.
        let batch = shared.take_tracked();
        if batch.is_empty() {
            return hung;
        }
        for mut tracked in batch {
            let outcome = match tracked.completion.wait_timeout(patience) {
                Err(ExitError::TimedOut) => None,
                outcome => Some(outcome),
            };
            if outcome.is_none() {
                hung = true;
                patience = Duration::from_millis(10);
            }
            ended.push((tracked, outcome));
        }
    }
}

/// Describes the processes that did not end.
fn hang_report(scheduler: &Scheduler, ended: &[(Tracked, Option<Outcome>)]) -> String {
    let states: HashMap<Pid, String> = scheduler
        .processes()
        .into_iter()
        .map(|p| (p.pid, format!("{} after {} steps", p.state, p.steps)))
        .collect();
    let stuck: Vec<String> = ended
        .iter()
        .filter(|(_, outcome)| outcome.is_none())
        .map(|(t, _)| {
            format!(
                "  {} (doomed {}, terminate {}): {}, at op {} of {:?}",
                t.pid,
                t.script.doomed,
                t.observed.terminate.load(SeqCst),
                states.get(&t.pid).map_or("not registered", String::as_str),
                t.observed.position.load(SeqCst),
                t.script.ops
            )
        })
        .collect();
    const SHOWN: usize = 20;
    let more = match stuck.len().saturating_sub(SHOWN) {
        0 => String::new(),
        n => format!("\n  ... and {n} more"),
    };
    format!(
        "{} processes did not end within {PATIENCE:?} (a hang):\n{}{more}\nstats: {:?}",
        stuck.len(),
        stuck[..stuck.len().min(SHOWN)].join("\n"),
        scheduler.stats()
    )
}

/// Drops the held completers (after a hang, to let the threads go).
fn drop_held(shared: &Shared) {
    drop(std::mem::take(&mut *lock(&shared.held)));
}

/// Each ended process's log (from its `close`).
fn take_logs(ended: &[(Tracked, Option<Outcome>)], violations: &mut Violations) -> Vec<Log> {
    ended
        .iter()
        .map(|(t, _)| {
            lock(&t.observed.log).take().unwrap_or_else(|| {
                violations.push(format!("{}: ended without handing over its log", t.pid));
                Log::default()
            })
        })
        .collect()
}
