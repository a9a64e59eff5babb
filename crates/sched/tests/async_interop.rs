//! Async interop: awaiting a `Completion` from tokio, and handlers doing
//! async work that learn their process is gone (`Completer::is_abandoned`,
//! `Completer::abandoned`).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::task::{Context as TaskContext, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use sched::command::{Command, CommandId, CompleteError, Completer, Rejected};
use sched::prelude::*;
use sched::process::Outcome;

const PATIENCE: Duration = Duration::from_secs(10);
const WORK: CommandId = CommandId(1);
const QUICK: CommandId = CommandId(2);

/// Waits for one message and ends with it; ends with "cancelled" on a
/// shutdown's cancel.
struct Echo;

impl Process for Echo {
    type Done = Payload;
    fn init(&mut self, _: &InitContext, _: &str, _: Payload) -> Result<(), InitError> {
        Ok(())
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            match event {
                Event::Message(p) => {
                    out.finish(p.into_payload());
                    return Ok(());
                }
                Event::Cancel => {
                    out.finish("cancelled");
                    return Ok(());
                }
                _ => {}
            }
        }
        out.idle();
        Ok(())
    }

    fn close(&mut self) {}
}

/// Yields the given commands on its first step, then ends with the payload
/// of the first completion it receives.
struct Yielder {
    commands: Vec<CommandId>,
}

impl Process for Yielder {
    type Done = Payload;
    fn init(&mut self, _: &InitContext, _: &str, _: Payload) -> Result<(), InitError> {
        Ok(())
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for (n, command) in self.commands.drain(..).enumerate() {
            out.yield_command(command, Tag(n as u64), Box::new(()));
        }
        for event in events {
            if let Event::Completion { result, .. } = event {
                out.finish(result?);
                return Ok(());
            }
        }
        Ok(())
    }

    fn close(&mut self) {}
}

fn started(builder: sched::SchedulerBuilder) -> Scheduler {
    let s = builder.workers(2).build();
    s.start();
    s
}

fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a tokio runtime")
}

fn multi_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .expect("a tokio runtime")
}

/// A waker that counts its wakes; `Arc::strong_count` on it tells whether
/// anyone still holds a clone.
#[derive(Default)]
struct CountingWaker {
    wakes: AtomicUsize,
}

impl Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.wakes.fetch_add(1, Ordering::SeqCst);
    }
}

fn poll_once<F: Future + Unpin>(future: &mut F, waker: &Waker) -> Poll<F::Output> {
    Pin::new(future).poll(&mut TaskContext::from_waker(waker))
}

/// Waits up to `PATIENCE` for `condition` (a wake runs just after the
/// outcome is visible to blocking waiters, on the worker's thread).
fn eventually(what: &str, condition: impl Fn() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !condition() {
        assert!(Instant::now() < deadline, "never: {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Awaits `future`, failing the test if it takes longer than `PATIENCE`.
/// (Not `tokio::time::timeout`: at its deadline it polls the future once
/// more, which would hide a missing wake.)
async fn within<F: Future>(future: F) -> F::Output {
    tokio::select! {
        biased;
        () = tokio::time::sleep(PATIENCE) => panic!("not woken within {PATIENCE:?}"),
        output = future => output,
    }
}

fn text(outcome: Outcome) -> &'static str {
    *outcome
        .expect("the process succeeded")
        .downcast::<&'static str>()
        .expect("a &str")
}

#[test]
fn a_completion_is_awaited_on_a_current_thread_runtime() {
    let s = started(Scheduler::builder());
    let mut echo = s.spawn(Echo).unwrap();
    let rt = current_thread();
    rt.block_on(async {
        // Still running: the first await really is pending.
        let early = tokio::time::timeout(Duration::from_millis(20), &mut echo).await;
        assert!(early.is_err(), "the process has not been sent anything");
        // Sent while the await below is pending: only a wake resolves it.
        let pid = echo.pid();
        let ((), outcome) = tokio::join!(
            async {
                tokio::time::sleep(Duration::from_millis(20)).await;
                s.send(pid, "hello").unwrap();
            },
            within(&mut echo),
        );
        assert_eq!(text(outcome), "hello");
    });
    s.shutdown(PATIENCE);
}

#[test]
fn completions_are_awaited_from_many_tasks_on_a_multi_thread_runtime() {
    const N: u64 = 64;
    let s = started(Scheduler::builder());
    let rt = multi_thread();
    let handles: Vec<_> = (0..N).map(|_| s.spawn(Echo).unwrap()).collect();
    let pids: Vec<Pid> = handles.iter().map(Completion::pid).collect();
    let tasks: Vec<_> = handles
        .into_iter()
        .map(|c| rt.spawn(async move { *c.await.unwrap().downcast::<u64>().unwrap() }))
        .collect();
    // Give the tasks time to register their wakers before anything ends.
    std::thread::sleep(Duration::from_millis(20));
    for (n, pid) in pids.iter().enumerate() {
        s.send(*pid, n as u64).unwrap();
    }
    let sum: u64 = rt.block_on(async {
        let mut sum = 0;
        for task in tasks {
            sum += within(task).await.unwrap();
        }
        sum
    });
    assert_eq!(sum, N * (N - 1) / 2);
    s.shutdown(PATIENCE);
}

#[test]
fn a_second_take_by_any_means_is_a_typed_error() {
    let s = started(Scheduler::builder());
    let rt = current_thread();

    // Await, then await again, then the blocking and non-blocking takes.
    let mut c = s.spawn(Echo).unwrap();
    s.send(c.pid(), "once").unwrap();
    rt.block_on(async {
        let first = within(&mut c).await;
        assert_eq!(text(first), "once");
        assert!(matches!((&mut c).await, Err(ExitError::AlreadyTaken)));
    });
    assert!(matches!(c.try_take(), Some(Err(ExitError::AlreadyTaken))));
    assert!(matches!(
        c.wait_timeout(Duration::ZERO),
        Err(ExitError::AlreadyTaken)
    ));
    assert!(matches!(c.wait(), Err(ExitError::AlreadyTaken)));

    // A blocking take first, then an await.
    let mut c = s.spawn(Echo).unwrap();
    s.send(c.pid(), "blocking").unwrap();
    assert_eq!(text(c.wait_timeout(PATIENCE)), "blocking");
    rt.block_on(async {
        assert!(matches!((&mut c).await, Err(ExitError::AlreadyTaken)));
    });
    s.shutdown(PATIENCE);
}

#[test]
fn a_dropped_await_leaves_the_handle_usable_and_holds_no_waker() {
    let s = started(Scheduler::builder());
    let mut c = s.spawn(Echo).unwrap();

    // An await abandoned by a timeout: the handle can still be waited on.
    let rt = current_thread();
    rt.block_on(async {
        let early = tokio::time::timeout(Duration::from_millis(5), &mut c).await;
        assert!(early.is_err());
    });
    drop(rt);

    // A pending poll registers the waker; the next poll with another waker
    // replaces it (the first is released), the same waker is kept once.
    let first = Arc::new(CountingWaker::default());
    let second = Arc::new(CountingWaker::default());
    let first_waker = Waker::from(first.clone());
    let second_waker = Waker::from(second.clone());
    assert!(poll_once(&mut c, &first_waker).is_pending());
    assert_eq!(
        Arc::strong_count(&first),
        3,
        "registered: ours, the Waker, the slot's clone"
    );
    assert!(poll_once(&mut c, &second_waker).is_pending());
    assert_eq!(Arc::strong_count(&first), 2, "replaced by the second waker");
    assert!(poll_once(&mut c, &second_waker).is_pending());
    assert_eq!(
        Arc::strong_count(&second),
        3,
        "the same task is registered once"
    );

    // The end wakes the registered task, and the outcome is there to take.
    s.send(c.pid(), "later").unwrap();
    assert_eq!(text(c.wait_timeout(PATIENCE)), "later");
    eventually("the end woke the awaiting task", || {
        second.wakes.load(Ordering::SeqCst) == 1
    });
    assert_eq!(first.wakes.load(Ordering::SeqCst), 0);
    eventually("the wake released the slot's clone", || {
        Arc::strong_count(&second) == 2
    });

    // Dropping a handle that is being awaited releases its waker.
    let mut c = s.spawn(Echo).unwrap();
    let pid = c.pid();
    assert!(poll_once(&mut c, &first_waker).is_pending());
    assert_eq!(Arc::strong_count(&first), 3);
    drop(c);
    assert_eq!(
        Arc::strong_count(&first),
        2,
        "the dropped handle let the waker go"
    );
    // The process still ends normally, with nobody to take its outcome.
    s.send(pid, "unread").unwrap();
    eventually("the process ended", || s.processes().is_empty());
    assert_eq!(first.wakes.load(Ordering::SeqCst), 0);
    s.shutdown(PATIENCE);
}

/// A handler that runs every command on a tokio runtime, racing a minute's
/// work against the process's end, and reports which won and when.
fn racing_handler(
    handle: tokio::runtime::Handle,
    report: mpsc::Sender<(&'static str, Instant)>,
) -> impl Fn(Command, Completer) -> Result<(), Rejected> + Send + Sync + 'static {
    let report = Mutex::new(report);
    move |_cmd, done: Completer| {
        let report = report.lock().unwrap().clone();
        handle.spawn(async move {
            tokio::select! {
                () = tokio::time::sleep(Duration::from_secs(60)) => {
                    let _ = done.complete(Box::new("worked a minute"));
                    let _ = report.send(("worked", Instant::now()));
                }
                () = done.abandoned() => {
                    assert!(done.is_abandoned());
                    let _ = report.send(("abandoned", Instant::now()));
                }
            }
        });
        Ok(())
    }
}

#[test]
fn an_async_handler_stops_early_when_its_process_is_terminated() {
    for rt in [current_thread(), multi_thread()] {
        // A thread drives the runtime (a current-thread runtime runs its
        // tasks only inside `Runtime::block_on`).
        let handle = rt.handle().clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let driver = std::thread::spawn(move || rt.block_on(stopped));
        let (tx, rx) = mpsc::channel();
        let s = started(Scheduler::builder().handler(WORK, racing_handler(handle, tx)));
        let c = s
            .spawn(Yielder {
                commands: vec![WORK],
            })
            .unwrap();
        // Let the handler's task start its race.
        std::thread::sleep(Duration::from_millis(50));
        assert!(rx.try_recv().is_err(), "nothing is finished yet");

        let terminated = Instant::now();
        s.terminate(c.pid()).unwrap();
        let (how, at) = rx.recv_timeout(PATIENCE).expect("the handler's task ended");
        assert_eq!(how, "abandoned");
        let took = at.duration_since(terminated);
        assert!(took < Duration::from_secs(1), "stopped after {took:?}");
        assert!(matches!(c.wait(), Err(ExitError::Terminated)));

        s.shutdown(PATIENCE);
        stop.send(()).unwrap();
        driver.join().unwrap().unwrap();
    }
}

#[test]
fn abandoned_resolves_when_the_process_ends_and_nobody_holds_its_completion() {
    let rt = multi_thread();
    let (tx, rx) = mpsc::channel();
    let s = started(
        Scheduler::builder()
            .handler(WORK, racing_handler(rt.handle().clone(), tx))
            .handler(QUICK, |_, done: Completer| -> Result<(), Rejected> {
                // Completed a little later, so the slow handler's task is
                // waiting on `abandoned` by then.
                std::thread::spawn(move || {
                    std::thread::sleep(Duration::from_millis(50));
                    let _ = done.complete(Box::new("quick"));
                });
                Ok(())
            }),
    );
    let c = s
        .spawn(Yielder {
            commands: vec![WORK, QUICK],
        })
        .unwrap();
    // Nobody will take the outcome: the record's slot is marked abandoned
    // before the process ends.
    drop(c);
    let (how, _) = rx.recv_timeout(PATIENCE).expect("the handler's task ended");
    assert_eq!(
        how, "abandoned",
        "the process finished on the quick completion"
    );
    s.shutdown(PATIENCE);
}

#[test]
fn is_abandoned_turns_true_at_terminate_and_completing_is_then_stale() {
    let kept: Arc<Mutex<Option<Completer>>> = Arc::default();
    let s = started(Scheduler::builder().handler(WORK, {
        let kept = kept.clone();
        move |_, done: Completer| -> Result<(), Rejected> {
            *kept.lock().unwrap() = Some(done);
            Ok(())
        }
    }));
    let c = s
        .spawn(Yielder {
            commands: vec![WORK],
        })
        .unwrap();
    let deadline = Instant::now() + PATIENCE;
    let done = loop {
        if let Some(done) = kept.lock().unwrap().take() {
            break done;
        }
        assert!(Instant::now() < deadline, "the handler ran");
        std::thread::sleep(Duration::from_millis(1));
    };
    assert!(
        !done.is_abandoned(),
        "the process is waiting for this completion"
    );

    s.terminate(c.pid()).unwrap();
    assert!(done.is_abandoned(), "true as soon as terminate returns");
    // An abandoned future made now resolves on its first poll.
    let probe = Arc::new(CountingWaker::default());
    let mut gone = done.abandoned();
    assert!(poll_once(&mut gone, &Waker::from(probe)).is_ready());

    assert!(matches!(c.wait(), Err(ExitError::Terminated)));
    assert!(done.is_abandoned());
    assert!(matches!(
        done.complete(Box::new(())),
        Err(CompleteError::Stale { .. })
    ));
    s.shutdown(PATIENCE);
}

#[test]
fn abandoned_futures_release_their_wakers_and_are_woken_by_the_end() {
    let kept: Arc<Mutex<Option<Completer>>> = Arc::default();
    let s = started(Scheduler::builder().handler(WORK, {
        let kept = kept.clone();
        move |_, done: Completer| -> Result<(), Rejected> {
            *kept.lock().unwrap() = Some(done);
            Ok(())
        }
    }));
    let c = s
        .spawn(Yielder {
            commands: vec![WORK],
        })
        .unwrap();
    let deadline = Instant::now() + PATIENCE;
    let done = loop {
        if let Some(done) = kept.lock().unwrap().take() {
            break done;
        }
        assert!(Instant::now() < deadline, "the handler ran");
        std::thread::sleep(Duration::from_millis(1));
    };

    let counter = Arc::new(CountingWaker::default());
    let waker = Waker::from(counter.clone());
    // A handler re-creating the future in a loop (as `select!` in a loop
    // does) leaves nothing behind.
    for _ in 0..100 {
        let mut gone = done.abandoned();
        assert!(poll_once(&mut gone, &waker).is_pending());
        assert!(poll_once(&mut gone, &waker).is_pending());
    }
    assert_eq!(
        Arc::strong_count(&counter),
        2,
        "every dropped future let its waker go"
    );

    // Two futures waiting, one of them moved to another thread first.
    let mut here = done.abandoned();
    let mut there = done.abandoned();
    assert!(poll_once(&mut here, &waker).is_pending());
    let elsewhere = {
        let waker = waker.clone();
        std::thread::spawn(move || {
            assert!(poll_once(&mut there, &waker).is_pending());
            there
        })
        .join()
        .unwrap()
    };
    assert_eq!(Arc::strong_count(&counter), 4);

    // The process ends by itself: both are woken, then resolve.
    assert!(done.complete(Box::new("finished")).is_ok());
    assert_eq!(text(c.wait()), "finished");
    eventually("both futures were woken", || {
        counter.wakes.load(Ordering::SeqCst) == 2
    });
    eventually("woken wakers are released", || {
        Arc::strong_count(&counter) == 2
    });
    let mut elsewhere = elsewhere;
    assert!(poll_once(&mut here, &waker).is_ready());
    assert!(poll_once(&mut elsewhere, &waker).is_ready());
    s.shutdown(PATIENCE);
}
