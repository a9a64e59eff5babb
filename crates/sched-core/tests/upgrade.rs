//! Upgrade: a step replaces its process with a new one under the same PID.
//! Every test counts `init`, `close` and `Drop` per instance: `close` runs
//! exactly once for every instance whose `init` succeeded, never for one
//! whose `init` failed or never ran, and every instance is dropped.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use relay::{Package, Payload, Pid};
use sched_core::*;

/// What happened to one process instance.
#[derive(Default, Debug)]
struct Tally {
    inits: AtomicUsize,
    closes: AtomicUsize,
    drops: AtomicUsize,
    steps: AtomicUsize,
}

impl Tally {
    fn counts(&self) -> (usize, usize, usize) {
        (
            self.inits.load(SeqCst),
            self.closes.load(SeqCst),
            self.drops.load(SeqCst),
        )
    }
}

type InitFn = Box<dyn FnMut(&InitContext, &str, Payload) -> Result<(), InitError> + Send>;
type StepFn = Box<dyn FnMut(&mut Events<'_>, &mut Output<'_>) -> Result<(), BoxError> + Send>;

/// A process instance whose `init` and `step` are closures and whose
/// `init`, `close` and `Drop` are counted in its [`Tally`].
struct Instance {
    tally: Arc<Tally>,
    init: InitFn,
    step: StepFn,
    close_panics: bool,
}

fn instance(
    step: impl FnMut(&mut Events<'_>, &mut Output<'_>) -> Result<(), BoxError> + Send + 'static,
) -> (Instance, Arc<Tally>) {
    let tally = Arc::new(Tally::default());
    let instance = Instance {
        tally: tally.clone(),
        init: Box::new(|_, _, _| Ok(())),
        step: Box::new(step),
        close_panics: false,
    };
    (instance, tally)
}

/// `instance` whose `init` runs `init` (after counting the call).
fn with_init(
    (mut instance, tally): (Instance, Arc<Tally>),
    init: impl FnMut(&InitContext, &str, Payload) -> Result<(), InitError> + Send + 'static,
) -> (Instance, Arc<Tally>) {
    instance.init = Box::new(init);
    (instance, tally)
}

impl Process for Instance {
    type Done = Payload;
    fn init(&mut self, cx: &InitContext, method: &str, input: Payload) -> Result<(), InitError> {
        self.tally.inits.fetch_add(1, SeqCst);
        (self.init)(cx, method, input)
    }
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        self.tally.steps.fetch_add(1, SeqCst);
        (self.step)(events, out)
    }
    fn close(&mut self) {
        self.tally.closes.fetch_add(1, SeqCst);
        if self.close_panics {
            panic!("old close exploded");
        }
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        self.tally.drops.fetch_add(1, SeqCst);
    }
}

/// A step that finishes at once with `value`.
fn finishes_with(
    value: u64,
) -> impl FnMut(&mut Events<'_>, &mut Output<'_>) -> Result<(), BoxError> {
    move |_, out| {
        out.finish(value);
        Ok(())
    }
}

/// A step that upgrades to `next` (once) at its first step.
fn upgrades_to(
    next: Instance,
) -> impl FnMut(&mut Events<'_>, &mut Output<'_>) -> Result<(), BoxError> {
    let mut next = Some(next);
    move |_, out| {
        out.upgrade(next.take().expect("upgrades once"), "v2", 5u64);
        Ok(())
    }
}

fn message(to: u64, text: &'static str) -> Package {
    Package::new(Pid::local(999), Pid::local(to), text)
}

/// Counts messages until `"stop"`, then finishes with the count.
fn counts_until_stop(
    mut count: u64,
) -> impl FnMut(&mut Events<'_>, &mut Output<'_>) -> Result<(), BoxError> {
    move |events, out| {
        for event in events {
            if let Event::Message(m) = event {
                match m.payload::<&str>() {
                    Some(&"stop") => {
                        out.finish(count);
                        return Ok(());
                    }
                    _ => count += 1,
                }
            }
        }
        Ok(())
    }
}

fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn the_new_process_gets_the_method_and_input_and_is_stepped_at_once() {
    let engine = started(2);
    let seen = Arc::new(Mutex::new(None));
    let seen_in_init = seen.clone();
    let (v2, v2_tally) = with_init(instance(finishes_with(0)), move |cx, method, input| {
        *seen_in_init.lock().unwrap() = Some((
            cx.pid(),
            method.to_owned(),
            *input.downcast::<u64>().unwrap(),
        ));
        Ok(())
    });
    let (v1, v1_tally) = instance(upgrades_to(v2));
    let outcome = wait(submit(&engine, 7, Box::new(v1)));
    assert_eq!(done_u64(outcome), 0);
    assert_eq!(
        seen.lock().unwrap().take(),
        Some((Pid::local(7), "v2".to_owned(), 5))
    );
    assert_eq!(v1_tally.counts(), (1, 1, 1), "old: init, close, drop once");
    assert_eq!(v2_tally.counts(), (1, 1, 1), "new: init, close, drop once");
    // Nothing was pending: the new process was stepped anyway.
    assert_eq!(v2_tally.steps.load(SeqCst), 1);
    assert_eq!(engine.context().stats().totals().upgrades, 1);
    assert_eq!(engine.context().stats().live_processes, 0);
}

#[test]
fn pending_and_later_messages_reach_the_new_process_under_the_same_pid() {
    let engine = builder(1).build();
    let (v2, v2_tally) = instance(counts_until_stop(0));
    let mut v2 = Some(v2);
    // Counts messages until "upgrade", then hands its count over and
    // leaves the rest of this step's events unread.
    let mut count = 0u64;
    let (v1, v1_tally) = instance(move |events, out| {
        for event in events {
            if let Event::Message(m) = event {
                if m.payload::<&str>() == Some(&"upgrade") {
                    let mut next = v2.take().expect("upgrades once");
                    next.step = Box::new(counts_until_stop(count));
                    out.upgrade(next, "run", ());
                    return Ok(());
                }
                count += 1;
            }
        }
        Ok(())
    });
    let handle = submit(&engine, 1, Box::new(v1));
    // Before the first step: all of these wait in the queue together.
    for text in ["a", "b", "upgrade", "c", "d"] {
        engine.context().forward(message(1, text)).expect("queued");
    }
    engine.start();
    eventually("the new process ran", || v2_tally.steps.load(SeqCst) > 0);
    // After the upgrade, the route is the same.
    engine
        .context()
        .forward(message(1, "e"))
        .expect("the PID still routes");
    engine
        .context()
        .forward(message(1, "stop"))
        .expect("the PID still routes");
    assert_eq!(done_u64(wait(handle)), 5, "a, b, c, d, e: none lost");
    assert_eq!(v1_tally.counts(), (1, 1, 1));
    assert_eq!(v2_tally.counts(), (1, 1, 1));
    assert_eq!(engine.context().stats().dead_letters, 0);
}

#[test]
fn completions_of_commands_yielded_before_the_upgrade_reach_the_new_process() {
    let engine = started(2);
    let (v2, v2_tally) = instance(|events, out| {
        for event in events {
            if let Event::Completion { tag, result } = event {
                result?;
                out.finish(tag.0);
            }
        }
        Ok(())
    });
    let mut v2 = Some(v2);
    let mut asked = false;
    let (v1, v1_tally) = instance(move |events, out| {
        if !asked {
            asked = true;
            out.yield_command(ASYNC, Tag(7), Box::new(Duration::from_millis(50)));
            return Ok(());
        }
        // Woken by the message while the command is in flight.
        for event in events {
            if let Event::Message(_) = event {
                out.upgrade(v2.take().expect("upgrades once"), "run", ());
            }
        }
        Ok(())
    });
    let handle = submit(&engine, 1, Box::new(v1));
    eventually("the first step ran", || v1_tally.steps.load(SeqCst) > 0);
    engine
        .context()
        .forward(message(1, "upgrade"))
        .expect("queued");
    assert_eq!(done_u64(wait(handle)), 7);
    assert_eq!(v1_tally.counts(), (1, 1, 1));
    assert_eq!(v2_tally.counts(), (1, 1, 1));
}

#[test]
fn a_failed_init_ends_with_an_upgrade_error_and_closes_only_the_old_process() {
    let engine = builder(1).build();
    let (v2, v2_tally) = with_init(instance(finishes_with(0)), |_, _, _| {
        Err(InitError::failed("v2 refuses"))
    });
    let (v1, v1_tally) = instance(upgrades_to(v2));
    let handle = submit(&engine, 1, Box::new(v1));
    engine
        .context()
        .forward(message(1, "pending"))
        .expect("queued");
    engine.start();
    let error = wait(handle).expect_err("the upgrade failed");
    assert!(
        matches!(&error, ExitError::Upgrade(UpgradeError::Init(InitError::Failed(e))) if e.to_string() == "v2 refuses"),
        "{error:?}"
    );
    assert_eq!(
        error.to_string(),
        "the upgrade failed: the new process did not start: init failed: v2 refuses"
    );
    assert_eq!(v1_tally.counts(), (1, 1, 1), "the old close ran once");
    assert_eq!(v2_tally.counts(), (1, 0, 1), "no close after a failed init");
    // The process is gone: its PID no longer routes, and the message it
    // never read is a dead letter.
    assert!(engine.context().forward(message(1, "late")).is_err());
    assert_eq!(engine.context().stats().dead_letters, 1);
    assert_eq!(engine.context().stats().totals().upgrades, 0);
}

#[test]
fn a_panicking_init_is_a_typed_error_and_the_worker_survives() {
    let engine = started(1);
    let (v2, v2_tally) = with_init(instance(finishes_with(0)), |_, _, _| {
        panic!("v2 init exploded")
    });
    let (v1, v1_tally) = instance(upgrades_to(v2));
    let error = wait(submit(&engine, 1, Box::new(v1))).expect_err("the upgrade failed");
    assert!(
        matches!(&error, ExitError::Upgrade(UpgradeError::Init(InitError::Panicked { message })) if message == "v2 init exploded"),
        "{error:?}"
    );
    assert_eq!(v1_tally.counts(), (1, 1, 1));
    assert_eq!(v2_tally.counts(), (1, 0, 1));
    let (probe, _) = instance(finishes_with(3));
    assert_eq!(done_u64(wait(submit(&engine, 2, Box::new(probe)))), 3);
}

#[test]
fn a_panicking_old_close_ends_the_process_and_the_new_one_never_starts() {
    let engine = started(1);
    let (v2, v2_tally) = instance(finishes_with(0));
    let (mut v1, v1_tally) = instance(upgrades_to(v2));
    v1.close_panics = true;
    let error = wait(submit(&engine, 1, Box::new(v1))).expect_err("close panicked");
    assert!(
        matches!(&error, ExitError::Panicked { message } if message == "old close exploded"),
        "{error:?}"
    );
    assert_eq!(
        v1_tally.counts(),
        (1, 1, 1),
        "closed once, not again by the end"
    );
    assert_eq!(v2_tally.counts(), (0, 0, 1));
}

#[test]
fn an_upgrade_with_yields_in_the_same_step_is_refused_and_nothing_is_dispatched() {
    let handled = Arc::new(AtomicUsize::new(0));
    let counted = handled.clone();
    let engine = builder(1)
        .handler(
            CommandId(50),
            move |_: Command, c: Completer| -> Result<(), Rejected> {
                counted.fetch_add(1, SeqCst);
                let _ = c.complete(Box::new(()));
                Ok(())
            },
        )
        .build();
    engine.start();
    let (v2, v2_tally) = instance(finishes_with(0));
    let mut v2 = Some(v2);
    let (v1, v1_tally) = instance(move |_, out| {
        out.yield_command(CommandId(50), Tag(1), Box::new(()));
        out.yield_command(CommandId(50), Tag(2), Box::new(()));
        out.upgrade(v2.take().expect("once"), "run", ());
        Ok(())
    });
    let error = wait(submit(&engine, 1, Box::new(v1))).expect_err("refused");
    assert!(
        matches!(
            error,
            ExitError::Upgrade(UpgradeError::Yielded { count: 2 })
        ),
        "{error:?}"
    );
    assert_eq!(handled.load(SeqCst), 0, "the yields were never dispatched");
    assert_eq!(engine.context().stats().totals().discarded_yields, 2);
    assert_eq!(v1_tally.counts(), (1, 1, 1));
    assert_eq!(v2_tally.counts(), (0, 0, 1));
}

#[test]
fn the_last_of_upgrade_and_done_in_a_step_wins() {
    let engine = started(2);

    // Upgrade, then done: finished; the unused new process is dropped.
    let (v2, v2_tally) = instance(finishes_with(2));
    let mut v2 = Some(v2);
    let (v1, v1_tally) = instance(move |_, out| {
        out.upgrade(v2.take().expect("once"), "run", ());
        out.finish(1u64);
        Ok(())
    });
    assert_eq!(done_u64(wait(submit(&engine, 1, Box::new(v1)))), 1);
    assert_eq!(v1_tally.counts(), (1, 1, 1));
    assert_eq!(v2_tally.counts(), (0, 0, 1));

    // Done (or continue), then upgrade: upgraded.
    let (v2, v2_tally) = instance(finishes_with(2));
    let mut v2 = Some(v2);
    let (v1, v1_tally) = instance(move |_, out| {
        out.finish(1u64);
        out.continue_();
        out.upgrade(v2.take().expect("once"), "run", ());
        Ok(())
    });
    assert_eq!(done_u64(wait(submit(&engine, 2, Box::new(v1)))), 2);
    assert_eq!(v1_tally.counts(), (1, 1, 1));
    assert_eq!(v2_tally.counts(), (1, 1, 1));
}

#[test]
fn a_step_that_upgrades_and_then_fails_drops_the_new_process_unstarted() {
    let engine = started(1);
    let (v2, v2_tally) = instance(finishes_with(2));
    let mut v2 = Some(v2);
    let (v1, v1_tally) = instance(move |_, out| {
        out.upgrade(v2.take().expect("once"), "run", ());
        Err("changed my mind".into())
    });
    let error = wait(submit(&engine, 1, Box::new(v1))).expect_err("step error");
    assert!(matches!(error, ExitError::Step(_)), "{error:?}");
    assert_eq!(v1_tally.counts(), (1, 1, 1));
    assert_eq!(v2_tally.counts(), (0, 0, 1));
}

/// A step that tells the test it is running, waits for the go-ahead, then
/// upgrades to `next`.
fn upgrades_when_told(
    next: Instance,
    running: Sender<()>,
    go: std::sync::mpsc::Receiver<()>,
) -> impl FnMut(&mut Events<'_>, &mut Output<'_>) -> Result<(), BoxError> {
    let mut next = Some(next);
    let go = Mutex::new(go);
    move |_, out| {
        running.send(()).unwrap();
        go.lock().unwrap().recv().unwrap();
        out.upgrade(next.take().expect("once"), "run", ());
        Ok(())
    }
}

#[test]
fn an_upgrade_after_a_terminate_request_ends_the_process_terminated() {
    let engine = started(1);
    let (running_tx, running) = channel();
    let (go, go_rx) = channel();
    let (v2, v2_tally) = instance(finishes_with(2));
    let (v1, v1_tally) = instance(upgrades_when_told(v2, running_tx, go_rx));
    let handle = submit(&engine, 1, Box::new(v1));
    running.recv().unwrap();
    engine
        .context()
        .terminate(Pid::local(1))
        .expect("still live");
    go.send(()).unwrap();
    assert!(matches!(wait(handle), Err(ExitError::Terminated)));
    assert_eq!(v1_tally.counts(), (1, 1, 1));
    assert_eq!(v2_tally.counts(), (0, 0, 1), "never started");
    assert_eq!(engine.context().stats().live_processes, 0);
}

#[test]
fn a_terminate_during_the_new_init_ends_the_new_process_and_closes_it() {
    let engine = started(1);
    let (in_init_tx, in_init) = channel::<()>();
    let (go, go_rx) = channel::<()>();
    let go_rx = Mutex::new(go_rx);
    let (v2, v2_tally) = with_init(instance(finishes_with(2)), move |_, _, _| {
        in_init_tx.send(()).unwrap();
        go_rx.lock().unwrap().recv().unwrap();
        Ok(())
    });
    let (v1, v1_tally) = instance(upgrades_to(v2));
    let handle = submit(&engine, 1, Box::new(v1));
    in_init.recv().unwrap();
    engine
        .context()
        .terminate(Pid::local(1))
        .expect("still live");
    go.send(()).unwrap();
    assert!(matches!(wait(handle), Err(ExitError::Terminated)));
    assert_eq!(v1_tally.counts(), (1, 1, 1));
    assert_eq!(v2_tally.counts(), (1, 1, 1), "initialised, so closed once");
    assert_eq!(
        v2_tally.steps.load(SeqCst),
        0,
        "killed before its first step"
    );
}

#[test]
fn an_upgrade_during_shutdown_ends_the_process_cancelled() {
    let engine = started(1);
    let (running_tx, running) = channel();
    let (go, go_rx) = channel();
    let (v2, v2_tally) = instance(finishes_with(2));
    let (v1, v1_tally) = instance(upgrades_when_told(v2, running_tx, go_rx));
    let handle = submit(&engine, 1, Box::new(v1));
    running.recv().unwrap();
    std::thread::scope(|s| {
        let shutdown = s.spawn(|| engine.shutdown(PATIENCE));
        // Shutdown has begun once submissions are refused.
        eventually("shutdown began", || {
            let (probe, _) = instance(finishes_with(0));
            matches!(
                engine
                    .context()
                    .spawn(Spawn::new(Box::new(probe)).method("run").at(Pid::local(2))),
                Err(SubmitError::ShuttingDown)
            )
        });
        go.send(()).unwrap();
        let report = shutdown.join().unwrap();
        assert_eq!(report.forced, 0, "{report:?}");
    });
    assert!(matches!(wait(handle), Err(ExitError::Cancelled)));
    assert_eq!(v1_tally.counts(), (1, 1, 1));
    assert_eq!(v2_tally.counts(), (0, 0, 1), "never started");
}

#[test]
fn a_process_can_upgrade_many_times_and_each_version_is_closed_once() {
    let engine = started(2);
    let tallies: Arc<Mutex<Vec<Arc<Tally>>>> = Arc::default();
    /// Upgrades to a fresh instance of itself until `left` is 0.
    fn generation(left: u64, tallies: Arc<Mutex<Vec<Arc<Tally>>>>) -> Instance {
        let inner = tallies.clone();
        let (me, tally) = instance(move |_, out| {
            if left == 0 {
                out.finish(0u64);
            } else {
                out.upgrade(generation(left - 1, inner.clone()), "run", ());
            }
            Ok(())
        });
        tallies.lock().unwrap().push(tally);
        me
    }
    let first = generation(50, tallies.clone());
    assert_eq!(done_u64(wait(submit(&engine, 1, Box::new(first)))), 0);
    let tallies = tallies.lock().unwrap();
    assert_eq!(tallies.len(), 51);
    for (i, tally) in tallies.iter().enumerate() {
        assert_eq!(tally.counts(), (1, 1, 1), "generation {i}");
    }
    assert_eq!(engine.context().stats().totals().upgrades, 50);
}

/// The original's guard against missed wakeups: 300 upgrades in a row on
/// one worker, each given 2 s.
#[test]
fn three_hundred_sequential_upgrades_on_one_worker_each_finish_in_time() {
    let engine = started(1);
    let runs = if cfg!(miri) { 10 } else { 300 };
    for i in 0..runs {
        let (v2, v2_tally) = instance(finishes_with(i));
        let (v1, v1_tally) = instance(upgrades_to(v2));
        let mut handle = submit(&engine, i + 1, Box::new(v1));
        let outcome = handle.wait_timeout(Duration::from_secs(2));
        assert!(
            !outcome.as_ref().is_err_and(|e| e.is_timeout()),
            "upgrade run {i} missed its 2 s deadline"
        );
        assert_eq!(done_u64(outcome), i);
        assert_eq!(v1_tally.counts(), (1, 1, 1));
        assert_eq!(v2_tally.counts(), (1, 1, 1));
    }
    assert_eq!(engine.context().stats().totals().upgrades, runs);
}

#[test]
fn the_on_complete_hook_sees_one_outcome_for_an_upgraded_pid() {
    let seen: Arc<Mutex<Vec<(Pid, bool)>>> = Arc::default();
    let hooked = seen.clone();
    let engine = builder(1)
        .on_complete(move |_cx, pid, outcome| hooked.lock().unwrap().push((pid, outcome.is_ok())))
        .build();
    engine.start();
    let (v2, _) = instance(finishes_with(1));
    let (v1, _) = instance(upgrades_to(v2));
    assert_eq!(done_u64(wait(submit(&engine, 4, Box::new(v1)))), 1);
    assert_eq!(*seen.lock().unwrap(), vec![(Pid::local(4), true)]);
}
