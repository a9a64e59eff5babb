//! Shutdown with thousands of processes mid-flight: spinning forever,
//! blocked on yields whose completions never come, idle waiting for
//! messages, and stepping slowly, half of them heeding the cancel event and
//! half ignoring it as far as the contract lets them (they never finish by
//! themselves, so only the deadline can end them). Checks the promises of
//! `docs/reference/shutdown.md` at volume, on several worker counts: shutdown returns
//! in bounded time, every process reports exactly one outcome and is closed
//! exactly once, the report agrees with the outcomes, and every worker
//! thread is joined (none is left behind).

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sched::command::{Command, CommandId, CompleteError, Completer, Rejected};
use sched::prelude::*;

/// The command whose completions never come: its handler keeps the
/// completer (so the yield is not completed as `Dropped`) and never uses it.
const HOLD: CommandId = CommandId(1);

/// How long shutdown gives the processes before forcing them. The
/// processes that heed cancel must all have ended by then: on one worker
/// the woken ones come back from the global queue a batch at a time between
/// rounds of the spinners, the slow ones and the stalls, which takes
/// about 350 ms in a debug build; the deadline leaves several times that
/// for a loaded CI machine.
const DEADLINE: Duration = Duration::from_millis(1_500);

/// What shutdown may take beyond `DEADLINE`. The engine's own bound is
/// 100 ms (past it, workers still ending forced processes are detached and
/// finish on their own). The rest
/// is slack for CI: on 2 shared cores this test competes with other test
/// binaries, and a thread that is ready to run can wait a scheduler tick or
/// several before it gets a core, so the bound is generous rather than
/// tight; what it catches is a shutdown that hangs or waits for processes
/// that will never end.
const OVERRUN: Duration = Duration::from_secs(2);

/// How long each step of a slow process takes.
const SLOW_STEP: Duration = Duration::from_millis(5);
/// How long a stalling process takes over the step that sees cancel.
const STALL: Duration = Duration::from_millis(100);

/// Processes of each kind that heed or ignore cancel (so four times this
/// many spinning, blocked and idle processes in all, plus `SLOW` slow ones
/// and `SLOW` stalling ones).
const PER_KIND: usize = 500;
/// Slow and stalling processes of each kind: few, since they hold a worker
/// for the length of their steps.
const SLOW: usize = 2;

/// How long the processes may take to reach their first step.
const PATIENCE: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Continues on every step.
    Spin,
    /// Yields `HOLD` once, then waits for its completion.
    Blocked,
    /// Waits for messages that never come.
    Idle,
    /// Continues on every step, each step taking `SLOW_STEP`.
    Slow,
    /// Continues on every step; the step that sees cancel takes `STALL`.
    Stall,
}

/// The value a process that heeds cancel finishes with.
#[derive(Debug, PartialEq, Eq)]
struct Heeded;

/// Per-process counters shared with the test, indexed by PID id.
struct Ledger {
    closes: Vec<AtomicU32>,
    outcomes: Vec<AtomicU32>,
    first_steps: AtomicUsize,
    /// When the last process that heeded cancel ended: how much of
    /// `DEADLINE` they needed, printed to keep an eye on the margin.
    last_heeded: Mutex<Option<Instant>>,
}

impl Ledger {
    fn new(count: usize) -> Arc<Self> {
        Arc::new(Ledger {
            closes: (0..count).map(|_| AtomicU32::new(0)).collect(),
            outcomes: (0..count).map(|_| AtomicU32::new(0)).collect(),
            first_steps: AtomicUsize::new(0),
            last_heeded: Mutex::new(None),
        })
    }
}

struct Busy {
    index: usize,
    kind: Kind,
    heeds_cancel: bool,
    stepped: bool,
    ledger: Arc<Ledger>,
}

impl Process for Busy {
    type Done = Payload;
    fn init(&mut self, _: &InitContext, method: &str, _: Payload) -> Result<(), InitError> {
        match method {
            "run" => Ok(()),
            other => Err(InitError::unknown_method(other)),
        }
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        let cancelled = events.any(|e| matches!(e, Event::Cancel));
        if cancelled && self.heeds_cancel {
            out.finish(Heeded);
            return Ok(());
        }
        let first = !self.stepped;
        if first {
            self.stepped = true;
            self.ledger.first_steps.fetch_add(1, SeqCst);
        }
        match self.kind {
            Kind::Spin => out.continue_(),
            Kind::Stall => {
                if cancelled {
                    std::thread::sleep(STALL);
                }
                out.continue_();
            }
            Kind::Slow => {
                std::thread::sleep(SLOW_STEP);
                out.continue_();
            }
            Kind::Blocked if first => {
                out.yield_command(HOLD, Tag(0), Box::new(()));
            }
            Kind::Blocked | Kind::Idle => out.idle(),
        }
        Ok(())
    }

    fn close(&mut self) {
        self.ledger.closes[self.index].fetch_add(1, SeqCst);
    }
}

/// The threads of this process, from `/proc/self/task`.
#[cfg(target_os = "linux")]
fn thread_count() -> usize {
    std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task is readable")
        .count()
}

/// Waits for the thread count to come back to `baseline`. A joined thread
/// has finished running our code, but the kernel removes it from
/// `/proc/self/task` a moment later (the join wakes on the thread clearing
/// its id, which comes before its final exit), so a strict check right
/// after the join could see a thread that is already gone in every way
/// that matters.
#[cfg(target_os = "linux")]
fn assert_threads_return_to(baseline: usize, workers: usize) {
    let give_up = Instant::now() + Duration::from_secs(2);
    loop {
        let now = thread_count();
        if now == baseline {
            return;
        }
        assert!(
            Instant::now() < give_up,
            "{workers} workers: {now} threads after shutdown, {baseline} before the scheduler"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn shutdown_under_load(workers: usize) {
    #[cfg(target_os = "linux")]
    let threads_before = thread_count();

    let kinds = [Kind::Spin, Kind::Blocked, Kind::Idle];
    let mut plan: Vec<(Kind, bool)> = Vec::new();
    for _ in 0..PER_KIND {
        for kind in kinds {
            plan.push((kind, true));
            plan.push((kind, false));
        }
    }
    for _ in 0..SLOW {
        plan.push((Kind::Slow, false));
        plan.push((Kind::Stall, false));
    }
    let count = plan.len();
    let blocked = plan.iter().filter(|(k, _)| *k == Kind::Blocked).count();

    let ledger = Ledger::new(count);
    let held: Arc<Mutex<Vec<Completer>>> = Arc::default();
    let scheduler = Scheduler::builder()
        .workers(workers)
        .handler(HOLD, {
            let held = held.clone();
            move |_: Command, done: Completer| -> Result<(), Rejected> {
                held.lock().unwrap().push(done);
                Ok(())
            }
        })
        .on_complete({
            let ledger = ledger.clone();
            move |_cx, pid, outcome| {
                ledger.outcomes[pid.id() as usize].fetch_add(1, SeqCst);
                if outcome.is_ok() {
                    *ledger.last_heeded.lock().unwrap() = Some(Instant::now());
                }
            }
        })
        .build();
    scheduler.start();

    let handles: Vec<Completion> = plan
        .iter()
        .enumerate()
        .map(|(index, &(kind, heeds_cancel))| {
            let process = Busy {
                index,
                kind,
                heeds_cancel,
                stepped: false,
                ledger: ledger.clone(),
            };
            scheduler
                .spawn(
                    Spawn::new(process)
                        .method("run")
                        .input(())
                        .at(Pid::local(index as u64)),
                )
                .expect("submit")
        })
        .collect();

    // Mid-flight: every process has stepped, every blocked one has its
    // yield in flight, and the spinners keep the workers busy.
    let give_up = Instant::now() + PATIENCE;
    while ledger.first_steps.load(SeqCst) < count || held.lock().unwrap().len() < blocked {
        assert!(
            Instant::now() < give_up,
            "{workers} workers: the processes did not all start"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(scheduler.stats().live_processes, count);

    let started = Instant::now();
    let report = scheduler.shutdown(DEADLINE);
    let took = started.elapsed();
    let heeders_took = ledger.last_heeded.lock().unwrap().map(|t| t - started);
    eprintln!(
        "{workers} workers, {count} processes: shutdown took {took:?}, the last heeder \
         ended after {heeders_took:?}; {report:?}"
    );

    assert!(
        took >= DEADLINE,
        "{workers} workers: processes that ignore cancel were ended before the deadline ({took:?})"
    );
    assert!(
        took < DEADLINE + OVERRUN,
        "{workers} workers: shutdown took {took:?} with a deadline of {DEADLINE:?}"
    );
    // No step here blocks for long, but on a loaded machine the workers
    // may still be ending forced processes when the 100 ms bound comes:
    // then they are detached, the processes not yet ended are counted in
    // `still_queued` (or `still_running`, one per busy worker), and they
    // still end, as forced, after shutdown has returned.
    let unfinished = (report.still_running + report.still_queued) as u64;
    if report.workers_detached == 0 {
        assert_eq!(unfinished, 0, "{workers} workers: {report:?}");
    }

    let mut heeded = 0u64;
    let mut cancelled = 0u64;
    for (index, mut handle) in handles.into_iter().enumerate() {
        let (kind, heeds_cancel) = plan[index];
        let outcome = if unfinished == 0 {
            assert!(
                handle.is_finished(),
                "{workers} workers: process {index} ({kind:?}) has no outcome after shutdown"
            );
            handle.wait()
        } else {
            match handle.wait_timeout(PATIENCE) {
                Err(ExitError::TimedOut) => {
                    panic!("{workers} workers: process {index} ({kind:?}) never got an outcome")
                }
                outcome => outcome,
            }
        };
        match outcome {
            Ok(value) if heeds_cancel && value.downcast_ref::<Heeded>().is_some() => heeded += 1,
            Err(ExitError::Cancelled) if !heeds_cancel => cancelled += 1,
            other => panic!(
                "{workers} workers: process {index} ({kind:?}, heeds cancel: {heeds_cancel}) \
                 ended with {other:?}"
            ),
        }
        assert_eq!(
            ledger.outcomes[index].load(SeqCst),
            1,
            "{workers} workers: outcomes reported for process {index}"
        );
        assert_eq!(
            ledger.closes[index].load(SeqCst),
            1,
            "{workers} workers: closes of process {index}"
        );
    }
    assert_eq!(
        report.ended_gracefully, heeded,
        "{workers} workers: {report:?}"
    );
    assert_eq!(
        report.forced + unfinished,
        cancelled,
        "{workers} workers: {report:?}"
    );
    assert_eq!(heeded + cancelled, count as u64);
    assert_eq!(scheduler.stats().live_processes, 0);

    // The completers kept alive outlived their processes: using them now
    // reaches nothing.
    let completers = std::mem::take(&mut *held.lock().unwrap());
    assert_eq!(completers.len(), blocked);
    for done in completers {
        assert!(matches!(
            done.complete(Box::new(())),
            Err(CompleteError::Stale { .. })
        ));
    }

    drop(scheduler);
    #[cfg(target_os = "linux")]
    assert_threads_return_to(threads_before, workers);
}

/// One test running the worker counts in turn, not one test per count: the
/// test harness runs tests on threads of this process, so a test running
/// beside this one would make the thread count meaningless.
#[test]
fn shutdown_under_load_reports_every_process_once_and_joins_every_worker() {
    for workers in [1, 2, 4] {
        shutdown_under_load(workers);
    }
}
