//! The typed API's promises, tested from its documentation only (the
//! CHANGELOG's "Typed from spawn to outcome" entry and the rustdoc of
//! `Process::Done`, `AnyProcess`, `Completion`, `Monitor::wait_timeout`,
//! `AskError::TimedOut`, `Builder::handler`, `TypedCommand`, `CommandRef`,
//! `Call`, `supervisor::Restarts` and `SupervisorBuilder::restarts_to`).
//!
//! Each test attacks one promise with concrete values, orders and counts.
//! Waits are bounded by generous deadlines (never a sleep used as
//! synchronisation): the file passes on a busy two-core machine.

use sched::actor::{AskError, Question, ReplyId, Responder, TimedOut};
use sched::command::{
    Call, CallError, CallEvent, Command, CommandError, CommandId, CommandRef, Completer, Rejected,
    TypedCommand, Yielded,
};
use sched::prelude::*;
use sched::process::{AnyProcess, UnexpectedValue};
use sched::supervisor::{
    RestartNotice, Restarts, Strategy, SupervisorError, SupervisorReport, WhichChildren,
};
use std::any::Any;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::task::{Poll, Wake, Waker};
use std::time::{Duration, Instant};

/// Long enough never to be reached on a healthy run: only a bound on a
/// hang.
const LONG: Duration = Duration::from_secs(10);

/// A short wait that is expected to give up.
const SHORT: Duration = Duration::from_millis(20);

fn started(workers: usize) -> Scheduler {
    let scheduler = Scheduler::builder().workers(workers).build();
    scheduler.start();
    scheduler
}

fn stop(scheduler: &Scheduler) {
    scheduler.shutdown(Duration::from_secs(2));
}

/// Polls `probe` until it gives `Some`, for at most `LONG`.
fn eventually<T>(what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + LONG;
    loop {
        if let Some(value) = probe() {
            return value;
        }
        assert!(Instant::now() < deadline, "gave up waiting for {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

// ---------------------------------------------------------------------
// A minimal executor: "Any executor works" (Completion's `Future` doc).
// ---------------------------------------------------------------------

struct Unpark(std::thread::Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

fn poll_once<F: Future + Unpin>(future: &mut F) -> Poll<F::Output> {
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = std::task::Context::from_waker(&waker);
    Pin::new(future).poll(&mut cx)
}

fn block_on<F: Future + Unpin>(future: &mut F) -> F::Output {
    let deadline = Instant::now() + LONG;
    loop {
        if let Poll::Ready(value) = poll_once(future) {
            return value;
        }
        assert!(Instant::now() < deadline, "the future never resolved");
        std::thread::park_timeout(Duration::from_millis(100));
    }
}

// ---------------------------------------------------------------------
// Processes.
// ---------------------------------------------------------------------

/// Finishes at its first step with the value it holds (a `T`: its `Done`).
struct Finish<T>(Option<T>);

impl<T: Any + Send> Process for Finish<T> {
    type Done = T;
    fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        out.finish(self.0.take().expect("finishes once"));
        Ok(())
    }
}

/// Says it finishes with a `D`, finishes with a `V`.
struct Liar<D, V> {
    value: Option<V>,
    done: PhantomData<fn() -> D>,
}

impl<D, V> Liar<D, V> {
    fn new(value: V) -> Self {
        Liar {
            value: Some(value),
            done: PhantomData,
        }
    }
}

impl<D: Any + Send, V: Any + Send> Process for Liar<D, V> {
    type Done = D;
    fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        out.finish(self.value.take().expect("finishes once"));
        Ok(())
    }
}

/// Finishes with the first `u32` it is sent.
struct FirstMessage;

impl Accepts for FirstMessage {
    type Message = u32;
}

impl Process for FirstMessage {
    type Done = u32;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        if let Some(Event::Message(n)) = events.typed::<Self>().next() {
            out.finish(n);
        }
        Ok(())
    }
}

/// Never finishes by itself.
struct Forever;

impl Process for Forever {
    type Done = u64;
    fn step(&mut self, events: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
        events.for_each(drop);
        Ok(())
    }
}

/// Ends at its first step: with a step error, or a panic.
enum Ends {
    WithError,
    WithPanic,
}

impl Process for Ends {
    type Done = u64;
    fn step(&mut self, _: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
        match self {
            Ends::WithError => Err("boom".into()),
            Ends::WithPanic => panic!("kaboom"),
        }
    }
}

/// Finishes with `u32`s, but upgrades itself to `next` at its first step.
struct UpgradesTo<P>(Option<P>);

impl<P: Process> Process for UpgradesTo<P> {
    type Done = u32;
    fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        out.upgrade(self.0.take().expect("upgrades once"), "run", ());
        Ok(())
    }
}

/// Spawns a child from its step and hands the child's completion out.
struct Spawner(mpsc::Sender<Completion<u64>>);

impl Process for Spawner {
    type Done = ();
    fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        let child: Completion<u64> = out.spawn(Finish(Some(9u64)))?;
        self.0.send(child).map_err(|_| "the test hung up")?;
        out.finish(());
        Ok(())
    }
}

// ---------------------------------------------------------------------
// `Process::Done`, `Completion<T>`, `ExitError::{TimedOut, UnexpectedType,
// AlreadyTaken}`.
// ---------------------------------------------------------------------

#[test]
fn spawn_gives_a_completion_of_the_process_done_and_wait_yields_the_value() {
    let scheduler = started(2);
    let number: Completion<u64> = scheduler.spawn(Finish(Some(42u64))).unwrap();
    assert_eq!(number.wait().unwrap(), 42);
    let text: Completion<String> = scheduler
        .spawn(Finish(Some(String::from("forty-two"))))
        .unwrap();
    assert_eq!(text.wait().unwrap(), "forty-two");
    let unit: Completion<()> = scheduler.spawn(Finish(Some(()))).unwrap();
    assert_eq!(unit.wait().unwrap(), ());
    let bytes: Completion<Vec<u8>> = scheduler
        .spawn(
            Spawn::new(Finish(Some(vec![1u8, 2, 3])))
                .method("run")
                .input(()),
        )
        .unwrap();
    assert_eq!(bytes.wait().unwrap(), vec![1, 2, 3]);
    stop(&scheduler);
}

#[test]
fn finishing_with_another_type_than_done_gives_unexpected_type_with_the_value() {
    let scheduler = started(2);
    let liar = scheduler
        .spawn(Liar::<u32, &'static str>::new("forty-two"))
        .unwrap();
    match liar.wait() {
        Err(ExitError::UnexpectedType(mut value)) => {
            assert!(value.is::<&str>());
            assert!(!value.is::<u32>());
            assert_eq!(value.expected(), "u32");
            assert_eq!(*value.into_value().downcast::<&str>().unwrap(), "forty-two");
        }
        other => panic!("expected UnexpectedType, got {other:?}"),
    }
    stop(&scheduler);
}

#[test]
fn unexpected_type_displays_as_the_errors_reference_says() {
    let scheduler = started(1);
    let liar = scheduler.spawn(Liar::<u32, u8>::new(7)).unwrap();
    let error = liar.wait().unwrap_err();
    assert!(!error.is_timeout());
    assert_eq!(
        error.to_string(),
        "the process finished with a value that is not a u32"
    );
    stop(&scheduler);
}

#[test]
fn unexpected_type_comes_through_try_take_wait_timeout_and_await_alike_then_already_taken() {
    let scheduler = started(2);

    // try_take
    let mut by_try = scheduler.spawn(Liar::<u32, i64>::new(-1)).unwrap();
    let taken = eventually("the liar's outcome", || by_try.try_take());
    match taken {
        Err(ExitError::UnexpectedType(mut v)) => assert!(v.is::<i64>()),
        other => panic!("try_take: {other:?}"),
    }
    assert!(matches!(
        by_try.try_take(),
        Some(Err(ExitError::AlreadyTaken))
    ));

    // wait_timeout
    let mut by_timeout = scheduler.spawn(Liar::<u32, i64>::new(-2)).unwrap();
    match by_timeout.wait_timeout(LONG) {
        Err(ExitError::UnexpectedType(v)) => {
            assert_eq!(*v.into_value().downcast::<i64>().unwrap(), -2)
        }
        other => panic!("wait_timeout: {other:?}"),
    }
    assert!(matches!(
        by_timeout.wait_timeout(LONG),
        Err(ExitError::AlreadyTaken)
    ));

    // await
    let mut by_await = scheduler.spawn(Liar::<u32, i64>::new(-3)).unwrap();
    match block_on(&mut by_await) {
        Err(ExitError::UnexpectedType(v)) => {
            assert_eq!(*v.into_value().downcast::<i64>().unwrap(), -3)
        }
        other => panic!("await: {other:?}"),
    }
    assert!(matches!(
        block_on(&mut by_await),
        Err(ExitError::AlreadyTaken)
    ));
    assert!(matches!(by_await.wait(), Err(ExitError::AlreadyTaken)));
    stop(&scheduler);
}

#[test]
fn wait_timeout_times_out_while_running_then_the_same_handle_waits_again() {
    let scheduler = started(2);
    let mut first = scheduler.spawn(FirstMessage).unwrap();
    for _ in 0..3 {
        match first.wait_timeout(SHORT) {
            Err(e) => {
                assert!(e.is_timeout(), "{e:?}");
                assert!(matches!(e, ExitError::TimedOut));
            }
            Ok(n) => panic!("finished with {n} before it was sent anything"),
        }
    }
    assert!(first.try_take().is_none(), "still running");
    assert!(!first.is_finished());
    scheduler.send(first.addr::<FirstMessage>(), 7).unwrap();
    assert_eq!(first.wait_timeout(LONG).unwrap(), 7);

    // Taken: every way of taking says so, and none of them is a timeout.
    assert!(!first.is_finished(), "ended, but its outcome was taken");
    match first.try_take() {
        Some(Err(e)) => {
            assert!(matches!(e, ExitError::AlreadyTaken));
            assert!(!e.is_timeout());
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        first.wait_timeout(LONG),
        Err(ExitError::AlreadyTaken)
    ));
    assert!(matches!(first.wait(), Err(ExitError::AlreadyTaken)));
    stop(&scheduler);
}

#[test]
fn a_blocking_wait_after_a_timed_out_wait_gets_the_value() {
    let scheduler = started(2);
    let mut first = scheduler.spawn(FirstMessage).unwrap();
    assert!(first.wait_timeout(SHORT).unwrap_err().is_timeout());
    scheduler.send(first.addr::<FirstMessage>(), 11).unwrap();
    assert_eq!(first.wait().unwrap(), 11);
    stop(&scheduler);
}

#[test]
fn awaiting_a_typed_completion_is_pending_then_ready_then_already_taken() {
    let scheduler = started(2);
    let mut first: Completion<u32> = scheduler.spawn(FirstMessage).unwrap();
    // Nothing sent: pending, and the handle stays usable.
    assert!(poll_once(&mut first).is_pending());
    assert!(first.wait_timeout(SHORT).unwrap_err().is_timeout());
    assert!(poll_once(&mut first).is_pending());
    scheduler.send(first.addr::<FirstMessage>(), 5).unwrap();
    let value: Result<u32, ExitError> = block_on(&mut first);
    assert_eq!(value.unwrap(), 5);
    match poll_once(&mut first) {
        Poll::Ready(Err(ExitError::AlreadyTaken)) => {}
        other => panic!("a second await: {other:?}"),
    }
    assert!(matches!(
        first.try_take(),
        Some(Err(ExitError::AlreadyTaken))
    ));
    stop(&scheduler);
}

#[test]
fn is_finished_says_ended_and_not_taken() {
    let scheduler = started(2);
    let mut first = scheduler.spawn(FirstMessage).unwrap();
    assert!(!first.is_finished());
    scheduler.send(first.addr::<FirstMessage>(), 3).unwrap();
    eventually("the process to end", || first.is_finished().then_some(()));
    assert_eq!(first.try_take().unwrap().unwrap(), 3);
    assert!(!first.is_finished());
    stop(&scheduler);
}

#[test]
fn dropping_a_completion_does_not_affect_the_process() {
    let scheduler = started(2);
    let first = scheduler.spawn(FirstMessage).unwrap();
    let pid = first.pid();
    let addr = first.addr::<FirstMessage>();
    let monitor = scheduler.context().monitor(pid);
    drop(first);
    assert_eq!(monitor.wait_timeout(SHORT), Err(TimedOut), "still running");
    scheduler.send(addr, 1).unwrap();
    let down = monitor.wait_timeout(LONG).expect("it ended");
    assert_eq!((down.pid, down.reason), (pid, ExitReason::Normal));
    stop(&scheduler);
}

#[test]
fn failures_reach_a_typed_handle_as_before() {
    let scheduler = started(2);
    match scheduler.spawn(Ends::WithError).unwrap().wait() {
        Err(ExitError::Step(e)) => assert_eq!(e.to_string(), "boom"),
        other => panic!("{other:?}"),
    }
    match scheduler.spawn(Ends::WithPanic).unwrap().wait() {
        Err(ExitError::Panicked { message }) => assert!(message.contains("kaboom"), "{message}"),
        other => panic!("{other:?}"),
    }
    let forever = scheduler.spawn(Forever).unwrap();
    scheduler.terminate(forever.pid()).unwrap();
    assert!(matches!(forever.wait(), Err(ExitError::Terminated)));
    stop(&scheduler);
}

#[test]
fn a_boxed_process_keeps_the_boxed_ones_done() {
    let scheduler = started(2);
    let choices: Vec<Box<dyn Process<Done = u64>>> = vec![
        Box::new(Finish(Some(1u64))),
        Box::new(UpgradesToU64),
        Box::new(Liar::<u64, u64>::new(3)),
    ];
    let mut values = Vec::new();
    for chosen in choices {
        let done: Completion<u64> = scheduler.spawn(chosen).unwrap();
        values.push(done.wait().unwrap());
    }
    assert_eq!(values, vec![1, 2, 3]);
    stop(&scheduler);
}

/// Finishes with 2 (a second kind of `u64` process for the box).
struct UpgradesToU64;

impl Process for UpgradesToU64 {
    type Done = u64;
    fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        out.finish(2u64);
        Ok(())
    }
}

#[test]
fn an_any_process_completes_with_a_payload_read_typed_at_run_time() {
    let scheduler = started(2);
    let any: Completion<Payload> = scheduler
        .spawn(AnyProcess::new(Finish(Some(3u32))))
        .unwrap();
    assert_eq!(*any.wait().unwrap().downcast::<u32>().unwrap(), 3);

    let typed: Completion<u32> = scheduler
        .spawn(AnyProcess::new(Finish(Some(4u32))))
        .unwrap()
        .typed();
    assert_eq!(typed.wait().unwrap(), 4);

    let wrong = scheduler
        .spawn(AnyProcess::new(Finish(Some(5u32))))
        .unwrap()
        .typed::<String>();
    match wrong.wait() {
        Err(ExitError::UnexpectedType(mut v)) => {
            assert!(v.is::<u32>());
            assert_eq!(v.expected(), std::any::type_name::<String>());
        }
        other => panic!("{other:?}"),
    }

    // An AnyProcess of an AnyProcess is the same thing.
    let twice = scheduler
        .spawn(AnyProcess::new(AnyProcess::new(Finish(Some(6u8)))))
        .unwrap()
        .typed::<u8>();
    assert_eq!(twice.wait().unwrap(), 6);
    stop(&scheduler);
}

#[test]
fn a_payload_done_is_the_value_itself_not_boxed_again() {
    let scheduler = started(1);
    // Done = Payload, finishing with a plain value: the waiter downcasts it.
    let plain: Completion<Payload> = scheduler.spawn(Liar::<Payload, u32>::new(42)).unwrap();
    assert_eq!(*plain.wait().unwrap().downcast::<u32>().unwrap(), 42);
    // Done = Payload, finishing with a payload: not a box in a box.
    let boxed = scheduler
        .spawn(Finish(Some(Box::new(43u32) as Payload)))
        .unwrap();
    assert_eq!(*boxed.wait().unwrap().downcast::<u32>().unwrap(), 43);
    stop(&scheduler);
}

#[test]
fn a_completion_spawned_from_a_step_is_typed_by_the_childs_done() {
    let scheduler = started(2);
    let (tx, rx) = mpsc::channel();
    let parent: Completion<()> = scheduler.spawn(Spawner(tx)).unwrap();
    let child: Completion<u64> = rx.recv_timeout(LONG).expect("the child's handle");
    assert_eq!(child.wait().unwrap(), 9);
    assert_eq!(parent.wait().unwrap(), ());
    let from_context: Completion<u64> = scheduler.context().spawn(Finish(Some(10u64))).unwrap();
    assert_eq!(from_context.wait().unwrap(), 10);
    stop(&scheduler);
}

#[test]
fn an_upgrade_to_a_process_of_another_done_gives_unexpected_type() {
    let scheduler = started(2);
    let same = scheduler
        .spawn(UpgradesTo(Some(Finish(Some(5u32)))))
        .unwrap();
    assert_eq!(same.wait().unwrap(), 5);

    let other = scheduler
        .spawn(UpgradesTo(Some(Finish(Some(String::from("v2"))))))
        .unwrap();
    match other.wait() {
        Err(ExitError::UnexpectedType(mut v)) => {
            assert!(v.is::<String>());
            assert_eq!(v.expected(), "u32");
            assert_eq!(*v.into_value().downcast::<String>().unwrap(), "v2");
        }
        o => panic!("{o:?}"),
    }
    stop(&scheduler);
}

#[test]
fn every_handles_timeout_reads_the_same_way() {
    assert!(ExitError::TimedOut.is_timeout());
    assert!(!ExitError::AlreadyTaken.is_timeout());
    assert!(!ExitError::Terminated.is_timeout());
    assert!(!ExitError::UnexpectedType(UnexpectedValue::new("u8", Box::new(1u16))).is_timeout());
    assert!(TimedOut.is_timeout());
    assert!(AskError::TimedOut.is_timeout());
    assert!(!AskError::NoReply.is_timeout());
    assert!(!AskError::AlreadyTaken.is_timeout());
}

#[test]
fn typed_after_the_outcome_was_taken_says_already_taken() {
    let scheduler = started(1);
    let mut any = scheduler
        .spawn(AnyProcess::new(Finish(Some(1u32))))
        .unwrap();
    let taken = eventually("the outcome", || any.try_take());
    assert_eq!(*taken.unwrap().downcast::<u32>().unwrap(), 1);
    assert!(matches!(
        any.typed::<u32>().wait(),
        Err(ExitError::AlreadyTaken)
    ));
    stop(&scheduler);
}

/// A holder of `Hold` questions that answers each at once with 5.
struct AnswersAtOnce;

impl Process for AnswersAtOnce {
    type Done = ();
    fn step(&mut self, events: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            if let Event::Request(request) = event {
                if let Ok((Hold, answer)) = request.take::<Hold>() {
                    answer.answer(5);
                }
            }
        }
        Ok(())
    }
}

/// A feed with one notice in it, and the scheduler that made it.
fn feed_with_one_notice() -> (Scheduler, Restarts) {
    let scheduler = started(2);
    let feed = Restarts::new(4);
    let supervisor = supervise(&feed)
        .child(ChildSpec::new("frag", || Fragile))
        .build();
    let supervisor = scheduler.spawn(supervisor).unwrap();
    let pid = child_pid(&scheduler, supervisor.pid(), "frag");
    fail(&scheduler, pid, "e1");
    until_restarts(&scheduler, supervisor.pid(), "frag", 1);
    (scheduler, feed)
}

#[test]
fn a_wait_of_zero_takes_what_is_already_there() {
    let scheduler = started(2);
    let mut done = scheduler.spawn(FirstMessage).unwrap();
    let monitor = scheduler.context().monitor(done.pid());
    assert_eq!(monitor.wait_timeout(Duration::ZERO), Err(TimedOut));
    assert!(done.wait_timeout(Duration::ZERO).unwrap_err().is_timeout());
    scheduler.send(done.addr::<FirstMessage>(), 8).unwrap();
    eventually("the end", || done.is_finished().then_some(()));
    assert_eq!(done.wait_timeout(Duration::ZERO).unwrap(), 8);
    eventually("the down", || monitor.try_take());
    assert_eq!(
        monitor.wait_timeout(Duration::ZERO).unwrap().reason,
        ExitReason::Normal
    );
    stop(&scheduler);

    let (scheduler, feed) = feed_with_one_notice();
    assert_eq!(
        feed.wait_timeout(Duration::ZERO)
            .unwrap()
            .message
            .as_deref(),
        Some("e1")
    );
    assert_eq!(feed.wait_timeout(Duration::ZERO), Err(TimedOut));
    stop(&scheduler);
}

// `Completion::wait_timeout`: "Waits up to `timeout` for the outcome: as
// `wait`, or `Err(ExitError::TimedOut)` if the process is still running
// then". The longest timeout is `Duration::MAX`; the outcome is there.
#[test]
fn a_completion_waits_up_to_the_longest_timeout() {
    let scheduler = started(2);
    let mut done = scheduler.spawn(Finish(Some(8u16))).unwrap();
    eventually("the end", || done.is_finished().then_some(()));
    assert_eq!(done.wait_timeout(Duration::MAX).unwrap(), 8);
    stop(&scheduler);
}

#[test]
fn a_monitor_waits_up_to_the_longest_timeout() {
    // `Monitor::wait_timeout`: "As `wait`, giving up after `timeout`:
    // `Err(TimedOut)` if the process is still running then".
    let scheduler = started(2);
    let done = scheduler.spawn(FirstMessage).unwrap();
    let monitor = scheduler.context().monitor(done.pid());
    scheduler.send(done.addr::<FirstMessage>(), 8).unwrap();
    eventually("the down", || monitor.try_take());
    assert_eq!(
        monitor.wait_timeout(Duration::MAX).unwrap().reason,
        ExitReason::Normal
    );
    stop(&scheduler);
}

#[test]
fn a_feed_waits_up_to_the_longest_timeout() {
    // `Restarts::wait_timeout`: "Waits up to `timeout` for the next
    // notice: `Err(TimedOut)` if none came".
    let (scheduler, feed) = feed_with_one_notice();
    assert_eq!(
        feed.wait_timeout(Duration::MAX).unwrap().message.as_deref(),
        Some("e1")
    );
    stop(&scheduler);
}

#[test]
fn a_reply_waits_up_to_the_longest_timeout() {
    // `Reply::wait_timeout`: "As `wait`, giving up after `timeout`."
    let scheduler = started(2);
    let asked = scheduler.spawn(AnswersAtOnce).unwrap();
    let mut reply = scheduler.ask(asked.pid(), Hold).unwrap();
    assert_eq!(reply.wait_timeout(Duration::MAX), Ok(5));
    stop(&scheduler);
}

// ---------------------------------------------------------------------
// `Monitor::wait_timeout` -> `Result<Down, TimedOut>`.
// ---------------------------------------------------------------------

#[test]
fn a_monitor_times_out_while_the_process_runs_then_waits_again() {
    let scheduler = started(2);
    let forever = scheduler.spawn(Forever).unwrap();
    let pid = forever.pid();
    let monitor = scheduler.context().monitor(pid);
    assert_eq!(monitor.wait_timeout(SHORT), Err(TimedOut));
    assert_eq!(monitor.wait_timeout(SHORT), Err(TimedOut));
    assert_eq!(monitor.try_take(), None);
    scheduler.terminate(pid).unwrap();
    let down = monitor.wait_timeout(LONG).expect("terminated");
    assert_eq!((down.pid, down.reason), (pid, ExitReason::Terminated));
    // A Down is cloned, not used up.
    assert_eq!(monitor.try_take(), Some(down.clone()));
    assert_eq!(monitor.try_take(), Some(down.clone()));
    assert_eq!(monitor.wait_timeout(SHORT), Ok(down.clone()));
    assert_eq!(monitor.wait(), down);
    stop(&scheduler);
}

#[test]
fn a_monitor_of_a_pid_that_never_was_is_down_at_once() {
    let scheduler = started(1);
    let nobody = Pid::local(987_654);
    let monitor = scheduler.context().monitor(nobody);
    let down = monitor.wait_timeout(LONG).expect("no such process");
    assert_eq!((down.pid, down.reason), (nobody, ExitReason::NoProcess));
    stop(&scheduler);
}

#[test]
fn a_monitor_awaited_after_a_timed_out_wait() {
    let scheduler = started(2);
    let first = scheduler.spawn(FirstMessage).unwrap();
    let mut monitor = scheduler.context().monitor(first.pid());
    assert_eq!(monitor.wait_timeout(SHORT), Err(TimedOut));
    assert!(poll_once(&mut monitor).is_pending());
    scheduler.send(first.addr::<FirstMessage>(), 1).unwrap();
    let down = block_on(&mut monitor);
    assert_eq!((down.pid, down.reason), (first.pid(), ExitReason::Normal));
    stop(&scheduler);
}

// ---------------------------------------------------------------------
// `AskError::TimedOut`.
// ---------------------------------------------------------------------

/// A question answered with a `u64`.
struct Hold;

impl Question for Hold {
    type Answer = u64;
}

/// Holds every `Hold` it is asked, and answers them all with 5 when it
/// gets a message.
#[derive(Default)]
struct Holder(Vec<Responder<u64>>);

impl Process for Holder {
    type Done = ();
    fn step(&mut self, events: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            match event {
                Event::Request(request) => {
                    if let Ok((Hold, answer)) = request.take::<Hold>() {
                        self.0.push(answer);
                    }
                }
                Event::Message(_) => self.0.drain(..).for_each(|a| a.answer(5)),
                _ => {}
            }
        }
        Ok(())
    }
}

#[test]
fn a_reply_times_out_then_a_later_wait_takes_the_answer() {
    let scheduler = started(2);
    let holder = scheduler.spawn(Holder::default()).unwrap();
    let mut reply = scheduler.ask(holder.pid(), Hold).unwrap();
    let error = reply.wait_timeout(SHORT).unwrap_err();
    assert_eq!(error, AskError::TimedOut);
    assert!(error.is_timeout());
    scheduler.send(holder.pid(), "answer now").unwrap();
    assert_eq!(reply.wait_timeout(LONG), Ok(5));
    assert_eq!(reply.wait_timeout(SHORT), Err(AskError::AlreadyTaken));
    stop(&scheduler);
}

/// Asks `target` a `Hold` with a 20 ms timeout from its first step, and
/// finishes with the answer or the error.
struct Asker {
    target: Pid,
    id: Option<ReplyId<u64>>,
}

impl Process for Asker {
    type Done = Result<u64, AskError>;
    fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        self.id = Some(out.ask(self.target, Hold, SHORT)?);
        Ok(())
    }
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        let id = self.id.expect("started");
        for event in events {
            if let Some(answer) = id.answer(event).answered() {
                out.finish(answer);
            }
        }
        Ok(())
    }
}

#[test]
fn a_steps_ask_that_times_out_is_told_asker_timed_out() {
    let scheduler = started(2);
    let holder = scheduler.spawn(Holder::default()).unwrap();
    let asker = scheduler
        .spawn(Asker {
            target: holder.pid(),
            id: None,
        })
        .unwrap();
    let answer = asker.wait().unwrap();
    assert_eq!(answer, Err(AskError::TimedOut));
    stop(&scheduler);
}

// ---------------------------------------------------------------------
// `Builder::handler`, `TypedCommand`, `CommandRef::input`.
// ---------------------------------------------------------------------

/// Yields one command with its data from `start` and finishes with what
/// its `Yielded` reads.
struct YieldOne<C: CommandRef> {
    command: C,
    data: Option<C::Data>,
    yielded: Option<Yielded<C::Result>>,
}

impl<C: CommandRef> YieldOne<C> {
    fn new(command: C, data: C::Data) -> Self {
        YieldOne {
            command,
            data: Some(data),
            yielded: None,
        }
    }
}

impl<C: CommandRef> Process for YieldOne<C> {
    type Done = Result<C::Result, CommandError>;
    fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        let data = self.data.take().expect("started once");
        self.yielded = Some(out.yield_command(self.command, Tag(1), data));
        Ok(())
    }
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        let yielded = self.yielded.expect("started");
        for event in events {
            if let Ok(result) = yielded.result(event) {
                out.finish(result);
            }
        }
        Ok(())
    }
}

/// The length of a string.
const LEN: TypedCommand<String, usize> = TypedCommand::new(CommandId(201));

/// Yields `LEN` twice ("a" tagged 1, "bbb" tagged 2) and finishes with
/// both lengths, each read through its own `Yielded`.
#[derive(Default)]
struct MeasureTwo {
    yields: Option<(Yielded<usize>, Yielded<usize>)>,
    first: Option<usize>,
    second: Option<usize>,
    handed_back: usize,
}

impl Process for MeasureTwo {
    type Done = (usize, usize, usize);
    fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        let a = out.yield_command(LEN, Tag(1), String::from("a"));
        let b = out.yield_command(LEN, Tag(2), String::from("bbb"));
        assert_eq!((a.tag(), b.tag()), (Tag(1), Tag(2)));
        self.yields = Some((a, b));
        Ok(())
    }
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        let (a, b) = self.yields.expect("started");
        for event in events {
            match a.result(event) {
                Ok(result) => self.first = Some(result?),
                Err(event) => {
                    self.handed_back += 1;
                    if let Ok(result) = b.result(event) {
                        self.second = Some(result?);
                    }
                }
            }
        }
        if let (Some(first), Some(second)) = (self.first, self.second) {
            out.finish((first, second, self.handed_back));
        }
        Ok(())
    }
}

#[test]
fn a_typed_handler_gets_the_data_itself_and_completes_with_its_result_type() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let scheduler = Scheduler::builder()
        .workers(2)
        .handler(LEN, move |text, done| {
            log.lock().unwrap().push(text.clone());
            let _ = done.complete(text.len());
            Ok(())
        })
        .build();
    scheduler.start();
    let (first, second, handed_back) = scheduler
        .spawn(MeasureTwo::default())
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!((first, second), (1, 3));
    assert_eq!(
        handed_back, 1,
        "the tag-2 completion was handed back by tag 1's Yielded"
    );
    let mut seen = seen.lock().unwrap().clone();
    seen.sort();
    assert_eq!(seen, vec![String::from("a"), String::from("bbb")]);
    stop(&scheduler);
}

const PLUS_ONE: TypedCommand<u32, u32> = TypedCommand::new(CommandId(202));

fn plus_one_scheduler(calls: &Arc<AtomicUsize>) -> Scheduler {
    let calls = Arc::clone(calls);
    let scheduler = Scheduler::builder()
        .workers(2)
        .handler(PLUS_ONE, move |n, done| {
            calls.fetch_add(1, Ordering::SeqCst);
            let _ = done.complete(n + 1);
            Ok(())
        })
        .build();
    scheduler.start();
    scheduler
}

#[test]
fn an_untyped_yield_whose_data_is_not_the_typed_handlers_d_is_rejected() {
    let calls = Arc::new(AtomicUsize::new(0));
    let scheduler = plus_one_scheduler(&calls);
    let wrong = YieldOne::new(PLUS_ONE.id(), Box::new("not a u32") as Payload);
    match scheduler.spawn(wrong).unwrap().wait().unwrap() {
        Err(CommandError::Rejected(_)) => {}
        other => panic!("expected Rejected, got {other:?}"),
    }
    assert_eq!(calls.load(Ordering::SeqCst), 0, "the handler never saw it");
    // A u64 is not a u32 either.
    let close = YieldOne::new(PLUS_ONE.id(), Box::new(41u64) as Payload);
    assert!(matches!(
        scheduler.spawn(close).unwrap().wait().unwrap(),
        Err(CommandError::Rejected(_))
    ));
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    stop(&scheduler);
}

#[test]
fn an_untyped_yield_whose_data_is_a_d_reaches_the_typed_handler() {
    let calls = Arc::new(AtomicUsize::new(0));
    let scheduler = plus_one_scheduler(&calls);
    let right = YieldOne::new(PLUS_ONE.id(), Box::new(41u32) as Payload);
    let result = scheduler.spawn(right).unwrap().wait().unwrap().unwrap();
    assert_eq!(*result.downcast::<u32>().unwrap(), 42);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    // And the typed yield itself.
    let typed = scheduler.spawn(YieldOne::new(PLUS_ONE, 1)).unwrap();
    assert_eq!(typed.wait().unwrap().unwrap(), 2);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    stop(&scheduler);
}

#[test]
fn a_typed_yield_answered_with_another_type_reads_unexpected_type() {
    const WIDE: TypedCommand<u32, u64> = TypedCommand::new(CommandId(204));
    let scheduler = Scheduler::builder()
        .workers(1)
        .handler(WIDE.id(), |_cmd, done| {
            let _ = done.complete(Box::new("text"));
            Ok(())
        })
        .build();
    scheduler.start();
    match scheduler
        .spawn(YieldOne::new(WIDE, 1))
        .unwrap()
        .wait()
        .unwrap()
    {
        Err(CommandError::UnexpectedType(mut v)) => {
            assert!(v.is::<&str>());
            assert_eq!(v.expected(), "u64");
        }
        other => panic!("{other:?}"),
    }
    let error = scheduler
        .spawn(YieldOne::new(WIDE, 2))
        .unwrap()
        .wait()
        .unwrap()
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "the command's result is a value that is not a u64"
    );
    stop(&scheduler);
}

#[test]
fn a_later_registration_of_the_same_id_replaces_the_earlier_typed_or_not() {
    const TYPED: TypedCommand<u32, u32> = TypedCommand::new(CommandId(205));
    // Typed first, untyped second: the untyped one answers.
    let untyped_wins = Scheduler::builder()
        .workers(1)
        .handler(TYPED, |n, done| {
            let _ = done.complete(n + 1);
            Ok(())
        })
        .handler(TYPED.id(), |_cmd, done| {
            let _ = done.complete(Box::new(1000u32));
            Ok(())
        })
        .build();
    untyped_wins.start();
    let got = untyped_wins
        .spawn(YieldOne::new(TYPED, 1))
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(got.unwrap(), 1000);
    stop(&untyped_wins);

    // Untyped first, typed second: the typed one answers.
    let typed_wins = Scheduler::builder()
        .workers(1)
        .handler(TYPED.id(), |_cmd, done| {
            let _ = done.complete(Box::new(1000u32));
            Ok(())
        })
        .handler(TYPED, |n, done| {
            let _ = done.complete(n + 1);
            Ok(())
        })
        .build();
    typed_wins.start();
    let got = typed_wins
        .spawn(YieldOne::new(TYPED, 1))
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(got.unwrap(), 2);
    stop(&typed_wins);
}

#[test]
fn two_typed_commands_sharing_an_id_are_checked_at_run_time() {
    // The handler is registered for `NUMBER`; `TEXT` and `WORD` name the
    // same id with another data type or another result type.
    const NUMBER: TypedCommand<u32, u32> = TypedCommand::new(CommandId(206));
    const TEXT: TypedCommand<String, u32> = TypedCommand::new(CommandId(206));
    const WORD: TypedCommand<u32, String> = TypedCommand::new(CommandId(206));
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&calls);
    let scheduler = Scheduler::builder()
        .workers(1)
        .handler(NUMBER, move |n, done| {
            counted.fetch_add(1, Ordering::SeqCst);
            let _ = done.complete(n * 3);
            Ok(())
        })
        .build();
    scheduler.start();
    let text = scheduler
        .spawn(YieldOne::new(TEXT, String::from("3")))
        .unwrap();
    assert!(matches!(
        text.wait().unwrap(),
        Err(CommandError::Rejected(_))
    ));
    assert_eq!(
        calls.load(Ordering::SeqCst),
        0,
        "data of another type never reaches the handler"
    );
    let word = scheduler.spawn(YieldOne::new(WORD, 3)).unwrap();
    match word.wait().unwrap() {
        Err(CommandError::UnexpectedType(mut v)) => {
            assert!(v.is::<u32>());
            assert_eq!(*v.into_value().downcast::<u32>().unwrap(), 9);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    stop(&scheduler);
}

/// A handler of a type of its own, registered through a closure.
struct Doubler {
    calls: AtomicUsize,
}

impl Doubler {
    fn handle(&self, cmd: Command, mut done: Completer) -> Result<(), Rejected> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let n = *cmd
            .data::<u64>()
            .ok_or_else(|| done.reject("expected a u64"))?;
        let _ = done.complete(Box::new(n * 2));
        Ok(())
    }
}

#[test]
fn a_handler_of_your_own_type_is_registered_through_a_closure() {
    const DOUBLE: CommandId = CommandId(207);
    let mine = Arc::new(Doubler {
        calls: AtomicUsize::new(0),
    });
    let registered = Arc::clone(&mine);
    let scheduler = Scheduler::builder()
        .workers(1)
        .handler(DOUBLE, move |cmd, done| registered.handle(cmd, done))
        .build();
    scheduler.start();
    let doubled = scheduler
        .spawn(YieldOne::new(DOUBLE, Box::new(21u64) as Payload))
        .unwrap()
        .wait()
        .unwrap()
        .unwrap();
    assert_eq!(*doubled.downcast::<u64>().unwrap(), 42);
    match scheduler
        .spawn(YieldOne::new(DOUBLE, Box::new("x") as Payload))
        .unwrap()
        .wait()
        .unwrap()
    {
        Err(CommandError::Rejected(e)) => assert_eq!(e.to_string(), "expected a u64"),
        other => panic!("{other:?}"),
    }
    assert_eq!(mine.calls.load(Ordering::SeqCst), 2);
    stop(&scheduler);
}

#[test]
fn command_ref_input_reads_the_data_or_gives_the_command_back_intact() {
    let typed = LEN.input(Command::new(LEN.id(), Tag(9), Box::new(String::from("hi"))));
    assert_eq!(typed.ok(), Some(String::from("hi")));

    let wrong = LEN
        .input(Command::new(LEN.id(), Tag(9), Box::new(7u8)))
        .expect_err("a u8 is not a String");
    assert_eq!((wrong.id, wrong.tag), (LEN.id(), Tag(9)));
    assert_eq!(wrong.data::<u8>(), Some(&7));

    let untyped = CommandId(3)
        .input(Command::new(CommandId(3), Tag(4), Box::new(7u8)))
        .expect("an untyped handler takes any command");
    assert_eq!((untyped.id, untyped.tag), (CommandId(3), Tag(4)));
    assert_eq!(untyped.data::<u8>(), Some(&7));
    assert_eq!(LEN.command_id(), CommandId(201));
    assert_eq!(CommandId(3).command_id(), CommandId(3));
}

/// A command reference of a type of our own: its handler receives the tag
/// with the text.
#[derive(Clone, Copy, Debug)]
struct Tagged;

impl CommandRef for Tagged {
    type Data = String;
    type Result = usize;
    type Input = (Tag, String);
    fn command_id(self) -> CommandId {
        CommandId(208)
    }
    fn input(self, command: Command) -> Result<(Tag, String), Command> {
        let Command { id, tag, data } = command;
        match data.downcast::<String>() {
            Ok(text) => Ok((tag, *text)),
            Err(data) => Err(Command::new(id, tag, data)),
        }
    }
}

#[test]
fn a_command_ref_of_your_own_hands_its_handler_its_own_input() {
    let tags = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&tags);
    let scheduler = Scheduler::builder()
        .workers(1)
        .handler(
            Tagged,
            move |(tag, text): (Tag, String), done: Completer<usize>| {
                log.lock().unwrap().push(tag);
                let _ = done.complete(text.len());
                Ok(())
            },
        )
        .build();
    scheduler.start();
    let measured = scheduler
        .spawn(YieldOne::new(Tagged, String::from("abcd")))
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(measured.unwrap(), 4);
    assert_eq!(*tags.lock().unwrap(), vec![Tag(1)]);
    // Its `input` refuses a u8: the engine rejects the yield.
    let refused = scheduler
        .spawn(YieldOne::new(CommandId(208), Box::new(1u8) as Payload))
        .unwrap()
        .wait()
        .unwrap();
    assert!(
        matches!(refused, Err(CommandError::Rejected(_))),
        "{refused:?}"
    );
    assert_eq!(tags.lock().unwrap().len(), 1);
    stop(&scheduler);
}

// ---------------------------------------------------------------------
// `Call<D, R>`.
// ---------------------------------------------------------------------

type Begin<D, R> = Box<dyn FnOnce(&mut Call<D, R>, &mut Output<'_>) + Send>;

/// Drives one call, started by `begin`, and finishes with its result and
/// the attempts made.
struct Drive<D: 'static, R: 'static> {
    call: Call<D, R>,
    begin: Option<Begin<D, R>>,
}

impl<D: Any + Send, R: Any + Send> Drive<D, R> {
    fn new(
        call: Call<D, R>,
        begin: impl FnOnce(&mut Call<D, R>, &mut Output<'_>) + Send + 'static,
    ) -> Self {
        Drive {
            call,
            begin: Some(Box::new(begin)),
        }
    }
}

impl<D: Any + Send, R: Any + Send> Process for Drive<D, R> {
    type Done = (Result<R, CallError>, u32);
    fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        (self.begin.take().expect("started once"))(&mut self.call, out);
        assert!(self.call.is_pending());
        Ok(())
    }
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            if let Some(result) = self.call.on_event(event, out).ended() {
                assert!(!self.call.is_pending());
                out.finish((result, self.call.attempts()));
            }
        }
        Ok(())
    }
}

/// Completers a handler keeps without completing, with their attempt.
type Stash<R> = Arc<Mutex<Vec<(u32, Completer<R>)>>>;

#[test]
fn issue_with_numbers_attempts_from_one_and_a_timed_out_attempt_is_retried() {
    const READ: TypedCommand<u32, String> = TypedCommand::new(CommandId(301));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let stash: Stash<String> = Arc::default();
    let (log, kept) = (Arc::clone(&seen), Arc::clone(&stash));
    let scheduler = Scheduler::builder()
        .workers(2)
        .handler(READ, move |replica, done| {
            log.lock().unwrap().push(replica);
            if replica == 2 {
                let _ = done.complete(format!("from replica {replica}"));
            } else {
                // Replica 1 (and any other) never answers.
                kept.lock().unwrap().push((replica, done));
            }
            Ok(())
        })
        .build();
    scheduler.start();
    let call = Call::new(READ, Tag(1), Duration::from_millis(30)).retries(20);
    let drive = Drive::new(call, |call, out| call.issue_with(out, |attempt| attempt));
    let (result, attempts) = scheduler.spawn(drive).unwrap().wait().unwrap();
    assert_eq!(result.unwrap(), "from replica 2");
    assert!(attempts >= 2, "{attempts}");
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        (1..=attempts).collect::<Vec<_>>(),
        "one datum per attempt, numbered from 1"
    );
    stop(&scheduler);
}

#[test]
fn start_sends_a_clone_of_the_same_data_and_a_failed_attempt_is_retried_at_once() {
    const ECHO: TypedCommand<String, String> = TypedCommand::new(CommandId(302));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let scheduler = Scheduler::builder()
        .workers(2)
        .handler(ECHO, move |text, done| {
            let mut seen = log.lock().unwrap();
            seen.push(text.clone());
            let n = seen.len();
            drop(seen);
            if n < 3 {
                let _ = done.fail(format!("attempt {n} failed"));
            } else {
                let _ = done.complete(format!("{text} #{n}"));
            }
            Ok(())
        })
        .build();
    scheduler.start();
    // A 10 s timeout per attempt: only failures make retries here.
    let call = Call::new(ECHO, Tag(2), LONG).retries(5);
    let drive = Drive::new(call, |call, out| call.issue(out, String::from("same")));
    let (result, attempts) = scheduler.spawn(drive).unwrap().wait().unwrap();
    assert_eq!(result.unwrap(), "same #3");
    assert_eq!(attempts, 3);
    assert_eq!(*seen.lock().unwrap(), vec!["same"; 3]);
    stop(&scheduler);
}

#[test]
fn a_call_whose_every_attempt_times_out_ends_timed_out_with_its_attempts() {
    const SILENT: TypedCommand<u32, String> = TypedCommand::new(CommandId(303));
    let stash: Stash<String> = Arc::default();
    let kept = Arc::clone(&stash);
    let scheduler = Scheduler::builder()
        .workers(2)
        .handler(SILENT, move |n, done| {
            kept.lock().unwrap().push((n, done));
            Ok(())
        })
        .build();
    scheduler.start();
    let call = Call::new(SILENT, Tag(3), Duration::from_millis(5)).retries(2);
    let drive = Drive::new(call, |call, out| call.issue_with(out, |n| n));
    let (result, attempts) = scheduler.spawn(drive).unwrap().wait().unwrap();
    match result {
        Err(CallError::TimedOut { attempts: 3 }) => {}
        other => panic!("{other:?}"),
    }
    assert_eq!(attempts, 3);
    let numbers: Vec<u32> = stash.lock().unwrap().iter().map(|(n, _)| *n).collect();
    assert_eq!(
        numbers,
        vec![1, 2, 3],
        "no attempt after the retries are spent"
    );
    stop(&scheduler);
}

#[test]
fn a_call_whose_every_attempt_fails_ends_failed_with_the_last_error() {
    const FAILS: TypedCommand<u32, String> = TypedCommand::new(CommandId(304));
    let scheduler = Scheduler::builder()
        .workers(2)
        .handler(FAILS, |n, done| {
            let _ = done.fail(format!("attempt {n}"));
            Ok(())
        })
        .build();
    scheduler.start();
    let call = Call::new(FAILS, Tag(4), LONG).retries(2);
    let drive = Drive::new(call, |call, out| call.issue_with(out, |n| n));
    let (result, attempts) = scheduler.spawn(drive).unwrap().wait().unwrap();
    match result {
        Err(CallError::Failed {
            attempts: 3,
            error: CommandError::Failed(e),
        }) => assert_eq!(e.to_string(), "attempt 3"),
        other => panic!("{other:?}"),
    }
    assert_eq!(attempts, 3);
    stop(&scheduler);
}

#[test]
fn a_call_answered_with_another_type_fails_the_attempt_with_unexpected_type() {
    const WIDE: TypedCommand<u32, u64> = TypedCommand::new(CommandId(305));
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&calls);
    let scheduler = Scheduler::builder()
        .workers(2)
        .handler(WIDE.id(), move |_cmd, done| {
            counted.fetch_add(1, Ordering::SeqCst);
            let _ = done.complete(Box::new("text"));
            Ok(())
        })
        .build();
    scheduler.start();
    let call = Call::new(WIDE, Tag(5), LONG).retries(1);
    let drive = Drive::new(call, |call, out| call.issue(out, 1));
    let (result, attempts) = scheduler.spawn(drive).unwrap().wait().unwrap();
    match result {
        Err(CallError::Failed {
            attempts: 2,
            error: CommandError::UnexpectedType(mut v),
        }) => {
            assert!(v.is::<&str>());
            assert_eq!(v.expected(), "u64");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(attempts, 2);
    assert_eq!(
        calls.load(Ordering::SeqCst),
        2,
        "the failed attempt was retried"
    );
    stop(&scheduler);
}

#[test]
fn an_untyped_call_starts_with_data_made_per_attempt() {
    const RAW: CommandId = CommandId(306);
    let scheduler = Scheduler::builder()
        .workers(1)
        .handler(RAW, |cmd, done| {
            let _ = done.complete(cmd.data);
            Ok(())
        })
        .build();
    scheduler.start();
    let call: Call = Call::new(RAW, Tag(6), LONG);
    let drive = Drive::new(call, |call, out| {
        call.issue_with(out, |n| Box::new(n * 10) as Payload)
    });
    let (result, attempts) = scheduler.spawn(drive).unwrap().wait().unwrap();
    assert_eq!(*result.unwrap().downcast::<u32>().unwrap(), 10);
    assert_eq!(attempts, 1);
    stop(&scheduler);
}

/// What `FirstWins` tells the test.
#[derive(Debug)]
enum Note {
    /// The call's result (an error as its text), and the attempts then.
    Result(Result<String, String>, u32),
    Swallowed,
}

/// Drives a call whose handler answers nothing by itself; reports the
/// result, then each completion swallowed after it; finishes when sent a
/// message, with the result, the swallowed count and the attempts.
struct FirstWins {
    call: Call<u32, String>,
    tx: mpsc::Sender<Note>,
    result: Option<Result<String, CallError>>,
    swallowed: u32,
}

impl Process for FirstWins {
    type Done = (Option<Result<String, CallError>>, u32, u32);
    fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        self.call.issue_with(out, |n| n);
        Ok(())
    }
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            match self.call.on_event(event, out) {
                CallEvent::Taken if self.result.is_some() => {
                    self.swallowed += 1;
                    let _ = self.tx.send(Note::Swallowed);
                }
                CallEvent::Taken => {} // a retry started
                // Not the call's: the test's "report" message.
                CallEvent::Other(Event::Message(_)) => {
                    out.finish((self.result.take(), self.swallowed, self.call.attempts()));
                }
                CallEvent::Other(_) => {}
                ended => {
                    let result = ended.ended().expect("answered or failed");
                    let told = match &result {
                        Ok(text) => Ok(text.clone()),
                        Err(e) => Err(e.to_string()),
                    };
                    let _ = self.tx.send(Note::Result(told, self.call.attempts()));
                    assert!(self.result.replace(result).is_none(), "a call ends once");
                }
            }
        }
        Ok(())
    }
}

#[test]
fn the_first_completion_of_any_attempt_wins_and_later_ones_are_swallowed() {
    const SLOW: TypedCommand<u32, String> = TypedCommand::new(CommandId(307));
    let stash: Stash<String> = Arc::default();
    let kept = Arc::clone(&stash);
    let scheduler = Scheduler::builder()
        .workers(2)
        .handler(SLOW, move |n, done| {
            kept.lock().unwrap().push((n, done));
            Ok(())
        })
        .build();
    scheduler.start();
    let (tx, rx) = mpsc::channel();
    let process = FirstWins {
        call: Call::new(SLOW, Tag(7), Duration::from_millis(20)).retries(10_000),
        tx,
        result: None,
        swallowed: 0,
    };
    let handle = scheduler.spawn(process).unwrap();

    // Let at least three attempts start, then answer the second one only.
    eventually("three attempts", || {
        (stash.lock().unwrap().len() >= 3).then_some(())
    });
    let second = {
        let mut stash = stash.lock().unwrap();
        let at = stash.iter().position(|(n, _)| *n == 2).expect("attempt 2");
        stash.remove(at).1
    };
    second
        .complete(String::from("answer of attempt 2"))
        .unwrap();

    let attempts = match rx.recv_timeout(LONG).expect("a result") {
        Note::Result(Ok(text), attempts) => {
            assert_eq!(
                text, "answer of attempt 2",
                "an earlier attempt's answer wins"
            );
            attempts
        }
        other => panic!("{other:?}"),
    };
    assert!(attempts >= 3, "{attempts}");

    // Every attempt made was dispatched; answer all the others, late.
    eventually("every attempt dispatched", || {
        (stash.lock().unwrap().len() as u32 == attempts - 1).then_some(())
    });
    let late: Vec<(u32, Completer<String>)> = stash.lock().unwrap().drain(..).collect();
    let numbers: Vec<u32> = late.iter().map(|(n, _)| *n).collect();
    let expected: Vec<u32> = (1..=attempts).filter(|n| *n != 2).collect();
    assert_eq!(numbers, expected, "one attempt each, numbered in order");
    for (n, done) in late {
        done.complete(format!("late answer of attempt {n}"))
            .unwrap();
    }
    for _ in 1..attempts {
        match rx.recv_timeout(LONG).expect("a swallowed completion") {
            Note::Swallowed => {}
            other => panic!("after the result: {other:?}"),
        }
    }
    scheduler.send(handle.pid(), "report").unwrap();
    let (result, swallowed, attempts_at_end) = handle.wait().unwrap();
    assert_eq!(result.unwrap().unwrap(), "answer of attempt 2");
    assert_eq!(swallowed, attempts - 1);
    assert_eq!(attempts_at_end, attempts, "no attempt after the call ended");
    assert!(rx.try_recv().is_err(), "nothing more was reported");
    stop(&scheduler);
}

/// Two calls side by side (tags 1 and 2) and a timer of its own (tag 3):
/// each call takes only its own events; finishes with both results and
/// how many events the calls handed back.
struct TwoCalls {
    first: Call<String, String>,
    second: Call<String, String>,
    results: [Option<String>; 2],
    timer_seen: bool,
    handed_back: u32,
}

impl Process for TwoCalls {
    type Done = (String, String, bool, u32);
    fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        self.first.issue(out, String::from("one"));
        self.second.issue(out, String::from("two"));
        out.set_timer(Duration::from_millis(1), Tag(3));
        Ok(())
    }
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            let event = match self.first.on_event(event, out) {
                CallEvent::Answered(answer) => {
                    self.results[0] = Some(answer);
                    continue;
                }
                CallEvent::Failed(why) => return Err(why.into()),
                CallEvent::Taken => continue,
                CallEvent::Other(event) => event,
            };
            self.handed_back += 1;
            let event = match self.second.on_event(event, out) {
                CallEvent::Answered(answer) => {
                    self.results[1] = Some(answer);
                    continue;
                }
                CallEvent::Failed(why) => return Err(why.into()),
                CallEvent::Taken => continue,
                CallEvent::Other(event) => event,
            };
            if let Event::Timer { tag: Tag(3), .. } = event {
                self.timer_seen = true;
            }
        }
        if let ([Some(a), Some(b)], true) = (&self.results, self.timer_seen) {
            out.finish((a.clone(), b.clone(), self.timer_seen, self.handed_back));
        }
        Ok(())
    }
}

#[test]
fn a_call_hands_back_every_event_that_is_not_its_own() {
    const ECHO: TypedCommand<String, String> = TypedCommand::new(CommandId(309));
    let scheduler = Scheduler::builder()
        .workers(2)
        .handler(ECHO, |text, done| {
            let _ = done.complete(format!("echo {text}"));
            Ok(())
        })
        .build();
    scheduler.start();
    let two = TwoCalls {
        first: Call::new(ECHO, Tag(1), LONG),
        second: Call::new(ECHO, Tag(2), LONG),
        results: [None, None],
        timer_seen: false,
        handed_back: 0,
    };
    let (a, b, timer_seen, handed_back) = scheduler.spawn(two).unwrap().wait().unwrap();
    assert_eq!((a.as_str(), b.as_str()), ("echo one", "echo two"));
    assert!(
        timer_seen,
        "the process's own timer was not taken by a call"
    );
    // The first call handed back the second's completion and the timer.
    assert_eq!(handed_back, 2);
    stop(&scheduler);
}

/// Runs a call, then starts it again with other data once it ended.
struct Twice {
    call: Call<String, String>,
    results: Vec<String>,
}

impl Process for Twice {
    type Done = Vec<String>;
    fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        self.call.issue(out, String::from("one"));
        Ok(())
    }
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            if let Some(result) = self.call.on_event(event, out).ended() {
                self.results.push(result?);
                if self.results.len() == 1 {
                    self.call.issue(out, String::from("two"));
                } else {
                    out.finish(std::mem::take(&mut self.results));
                }
            }
        }
        Ok(())
    }
}

#[test]
fn a_call_started_again_after_it_ended_runs_again() {
    const ECHO: TypedCommand<String, String> = TypedCommand::new(CommandId(308));
    let scheduler = Scheduler::builder()
        .workers(1)
        .handler(ECHO, |text, done| {
            let _ = done.complete(format!("echo {text}"));
            Ok(())
        })
        .build();
    scheduler.start();
    let twice = Twice {
        call: Call::new(ECHO, Tag(8), LONG),
        results: Vec::new(),
    };
    assert_eq!(
        scheduler.spawn(twice).unwrap().wait().unwrap(),
        vec![String::from("echo one"), String::from("echo two")]
    );
    stop(&scheduler);
}

// ---------------------------------------------------------------------
// `supervisor::Restarts`, `RestartNotice`, `SupervisorBuilder::restarts_to`
// and a supervisor's `Completion<SupervisorReport>`.
// ---------------------------------------------------------------------

/// Fails on each `String` message, with the message as its error's text;
/// finishes on "finish" or on a cancel.
struct Fragile;

impl Process for Fragile {
    type Done = ();
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            match event {
                Event::Cancel => {
                    out.finish(());
                    return Ok(());
                }
                Event::Message(message) => {
                    if let Some(text) = message.payload::<String>() {
                        if text == "finish" {
                            out.finish(());
                            return Ok(());
                        }
                        return Err(text.clone().into());
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }
}

fn supervise(feed: &Restarts) -> sched::supervisor::SupervisorBuilder {
    Supervisor::builder()
        .intensity(100, Duration::from_secs(60))
        .shutdown_timeout(Duration::from_secs(5))
        .restarts_to(feed)
}

/// The supervisor's report; the first comes once the children started.
fn report(scheduler: &Scheduler, supervisor: Pid) -> SupervisorReport {
    let mut reply = scheduler
        .ask(supervisor, WhichChildren)
        .expect("ask the supervisor");
    reply.wait_timeout(LONG).expect("a report")
}

fn child_pid(scheduler: &Scheduler, supervisor: Pid, name: &str) -> Pid {
    report(scheduler, supervisor)
        .child(name)
        .and_then(|c| c.pid)
        .expect("the child runs")
}

/// Waits until the supervisor's report counts `restarts` for `name`.
fn until_restarts(scheduler: &Scheduler, supervisor: Pid, name: &str, restarts: u32) {
    eventually("the restarts to be counted", || {
        let counted = report(scheduler, supervisor)
            .child(name)
            .map(|c| c.restarts);
        assert!(
            counted <= Some(restarts),
            "{counted:?} restarts, expected {restarts}"
        );
        (counted == Some(restarts)).then_some(())
    });
}

fn fail(scheduler: &Scheduler, pid: Pid, text: &str) {
    scheduler.send(pid, String::from(text)).unwrap();
}

fn next(feed: &Restarts) -> RestartNotice {
    feed.wait_timeout(LONG).expect("a restart notice")
}

#[test]
fn a_notice_per_restart_in_place_in_order() {
    let scheduler = started(2);
    let feed = Restarts::new(16);
    let supervisor = supervise(&feed)
        .child(ChildSpec::new("frag", || AnyProcess::new(Fragile)))
        .build();
    let supervisor = scheduler.spawn(supervisor).unwrap();
    let pid = child_pid(&scheduler, supervisor.pid(), "frag");
    for text in ["e1", "e2", "e3"] {
        fail(&scheduler, pid, text);
    }
    for text in ["e1", "e2", "e3"] {
        let notice = next(&feed);
        assert_eq!(notice.child, "frag");
        assert_eq!((notice.previous, notice.pid), (pid, pid));
        assert!(notice.in_place());
        assert_eq!(notice.reason, ExitReason::Error);
        assert_eq!(notice.message.as_deref(), Some(text));
    }
    assert_eq!(feed.wait_timeout(SHORT), Err(TimedOut));
    assert_eq!(feed.missed(), 0);
    assert_eq!(
        report(&scheduler, supervisor.pid())
            .child("frag")
            .unwrap()
            .restarts,
        3
    );
    stop(&scheduler);
}

#[test]
fn a_restart_under_a_new_pid_is_told_with_both_pids() {
    let scheduler = started(2);
    let feed = Restarts::new(16);
    let supervisor = supervise(&feed)
        .child(
            ChildSpec::new("frag", || Fragile)
                .restart_in_place(false)
                .register_as("frag-new-pid"),
        )
        .build();
    let supervisor = scheduler.spawn(supervisor).unwrap();
    let first = child_pid(&scheduler, supervisor.pid(), "frag");
    fail(&scheduler, first, "x");
    let notice = next(&feed);
    assert_eq!(notice.child, "frag");
    assert_eq!(notice.previous, first);
    assert_ne!(notice.pid, first);
    assert!(!notice.in_place());
    assert_eq!(notice.reason, ExitReason::Error);
    let second = notice.pid;
    eventually("the name to follow the new instance", || {
        (scheduler.context().whereis("frag-new-pid") == Some(second)).then_some(())
    });
    assert_eq!(child_pid(&scheduler, supervisor.pid(), "frag"), second);

    fail(&scheduler, second, "y");
    let again = next(&feed);
    assert_eq!(again.previous, second);
    assert_ne!(again.pid, second);
    assert_ne!(again.pid, first);
    assert_eq!(feed.wait_timeout(SHORT), Err(TimedOut));
    stop(&scheduler);
}

/// Fails on "x" with the error "x", panics with "kaboom" on "panic".
struct Breakable;

impl Process for Breakable {
    type Done = ();
    fn step(&mut self, events: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            if let Event::Message(message) = event {
                match message.payload::<&str>() {
                    Some(&"panic") => panic!("kaboom"),
                    Some(text) => return Err((*text).into()),
                    None => {}
                }
            }
        }
        Ok(())
    }
}

/// What a restart notice says of a failure, restarted in place or not.
fn notice_message(in_place: bool, trigger: &'static str) -> Option<String> {
    let scheduler = started(2);
    let feed = Restarts::new(4);
    let supervisor = supervise(&feed)
        .child(ChildSpec::new("breakable", || Breakable).restart_in_place(in_place))
        .build();
    let supervisor = scheduler.spawn(supervisor).unwrap();
    let pid = child_pid(&scheduler, supervisor.pid(), "breakable");
    scheduler.send(pid, trigger).unwrap();
    let notice = next(&feed);
    assert_eq!(notice.in_place(), in_place);
    stop(&scheduler);
    notice.message
}

#[test]
fn a_notice_in_place_says_the_errors_text_and_the_panics_message() {
    assert_eq!(notice_message(true, "x").as_deref(), Some("x"));
    assert_eq!(notice_message(true, "panic").as_deref(), Some("kaboom"));
}

#[test]
fn a_notice_under_a_new_pid_says_the_errors_text_and_the_panics_message() {
    // `RestartNotice::message`: "What it said (an error's text, a panic's
    // message), when the supervisor knew it at the restart."
    let error = notice_message(false, "x");
    assert!(
        error.is_none() || error.as_deref() == Some("x"),
        "{error:?}"
    );
    let panic = notice_message(false, "panic");
    assert!(
        panic.is_none() || panic.as_deref() == Some("kaboom"),
        "{panic:?}"
    );
}

#[test]
fn a_child_that_finishes_and_is_restarted_is_told_as_normal() {
    let scheduler = started(2);
    let feed = Restarts::new(4);
    let supervisor = supervise(&feed)
        .child(ChildSpec::new("frag", || Fragile))
        .build();
    let supervisor = scheduler.spawn(supervisor).unwrap();
    let first = child_pid(&scheduler, supervisor.pid(), "frag");
    fail(&scheduler, first, "finish");
    let notice = next(&feed);
    assert_eq!(notice.reason, ExitReason::Normal);
    assert_eq!(notice.previous, first);
    assert_ne!(
        notice.pid, first,
        "an end that is not a failure takes a new PID"
    );
    assert!(!notice.in_place());
    assert_eq!(notice.message, None);
    stop(&scheduler);
}

#[test]
fn a_full_feed_drops_the_notices_that_find_it_full_and_counts_them() {
    let scheduler = started(2);
    let feed = Restarts::new(2);
    let supervisor = supervise(&feed)
        .child(ChildSpec::new("frag", || Fragile))
        .build();
    let supervisor = scheduler.spawn(supervisor).unwrap();
    let pid = child_pid(&scheduler, supervisor.pid(), "frag");
    for text in ["e1", "e2", "e3", "e4", "e5"] {
        fail(&scheduler, pid, text);
    }
    until_restarts(&scheduler, supervisor.pid(), "frag", 5);
    assert_eq!(feed.missed(), 3);
    assert_eq!(feed.clone().missed(), 3, "a clone counts the same feed");
    let kept: Vec<Option<String>> = std::iter::from_fn(|| feed.try_next())
        .map(|n| n.message)
        .collect();
    assert_eq!(kept, vec![Some("e1".into()), Some("e2".into())]);
    assert_eq!(feed.missed(), 3);

    // Room again: the next restart is kept.
    fail(&scheduler, pid, "e6");
    assert_eq!(next(&feed).message.as_deref(), Some("e6"));
    assert_eq!(feed.missed(), 3);
    stop(&scheduler);
}

#[test]
fn a_feed_of_capacity_zero_keeps_one() {
    let scheduler = started(2);
    let feed = Restarts::new(0);
    let supervisor = supervise(&feed)
        .child(ChildSpec::new("frag", || Fragile))
        .build();
    let supervisor = scheduler.spawn(supervisor).unwrap();
    let pid = child_pid(&scheduler, supervisor.pid(), "frag");
    fail(&scheduler, pid, "e1");
    fail(&scheduler, pid, "e2");
    until_restarts(&scheduler, supervisor.pid(), "frag", 2);
    assert_eq!(
        feed.try_next().and_then(|n| n.message).as_deref(),
        Some("e1")
    );
    assert!(feed.try_next().is_none());
    assert_eq!(feed.missed(), 1);
    stop(&scheduler);
}

#[test]
fn clones_read_the_same_feed_each_notice_once() {
    let scheduler = started(2);
    let a = Restarts::new(16);
    let b = a.clone();
    let supervisor = supervise(&b)
        .child(ChildSpec::new("frag", || Fragile))
        .build();
    let supervisor = scheduler.spawn(supervisor).unwrap();
    let pid = child_pid(&scheduler, supervisor.pid(), "frag");
    for text in ["e1", "e2", "e3", "e4"] {
        fail(&scheduler, pid, text);
    }
    until_restarts(&scheduler, supervisor.pid(), "frag", 4);
    let read = [a.try_next(), b.try_next(), a.try_next(), b.try_next()];
    let texts: Vec<Option<String>> = read
        .into_iter()
        .map(|n| n.and_then(|n| n.message))
        .collect();
    assert_eq!(
        texts,
        vec![
            Some("e1".into()),
            Some("e2".into()),
            Some("e3".into()),
            Some("e4".into())
        ]
    );
    assert!(a.try_next().is_none());
    assert!(b.try_next().is_none());
    assert_eq!((a.missed(), b.missed()), (0, 0));
    stop(&scheduler);
}

#[test]
fn a_feed_times_out_when_no_notice_comes_and_wakes_a_waiter_on_another_thread() {
    let scheduler = started(2);
    let feed = Restarts::new(4);
    assert_eq!(feed.wait_timeout(SHORT), Err(TimedOut));
    assert!(feed.wait_timeout(SHORT).unwrap_err().is_timeout());
    let supervisor = supervise(&feed)
        .child(ChildSpec::new("frag", || Fragile))
        .build();
    let supervisor = scheduler.spawn(supervisor).unwrap();
    let pid = child_pid(&scheduler, supervisor.pid(), "frag");
    assert_eq!(feed.wait_timeout(SHORT), Err(TimedOut), "no restart yet");

    let reader = feed.clone();
    let waiting = std::thread::spawn(move || reader.wait_timeout(LONG));
    fail(&scheduler, pid, "wake up");
    let notice = waiting.join().unwrap().expect("the waiter got the notice");
    assert_eq!(notice.message.as_deref(), Some("wake up"));
    assert!(feed.try_next().is_none(), "read once, by the waiter");
    stop(&scheduler);
}

#[test]
fn a_later_restarts_to_replaces_the_feed() {
    let scheduler = started(2);
    let replaced = Restarts::new(4);
    let used = Restarts::new(4);
    let supervisor = Supervisor::builder()
        .intensity(100, Duration::from_secs(60))
        .restarts_to(&replaced)
        .restarts_to(&used)
        .child(ChildSpec::new("frag", || Fragile))
        .build();
    let supervisor = scheduler.spawn(supervisor).unwrap();
    let pid = child_pid(&scheduler, supervisor.pid(), "frag");
    fail(&scheduler, pid, "e1");
    assert_eq!(next(&used).message.as_deref(), Some("e1"));
    assert!(replaced.try_next().is_none());
    assert_eq!(replaced.missed(), 0);
    stop(&scheduler);
}

#[test]
fn every_supervisor_a_builder_builds_tells_the_same_feed() {
    let scheduler = started(2);
    let feed = Restarts::new(8);
    let builder = supervise(&feed).child(ChildSpec::new("frag", || Fragile));
    let one = scheduler.spawn(builder.build()).unwrap();
    let two = scheduler.spawn(builder.build()).unwrap();
    let first = child_pid(&scheduler, one.pid(), "frag");
    let second = child_pid(&scheduler, two.pid(), "frag");
    assert_ne!(first, second);
    fail(&scheduler, first, "one");
    let notice = next(&feed);
    assert_eq!(
        (notice.previous, notice.message.as_deref()),
        (first, Some("one"))
    );
    fail(&scheduler, second, "two");
    let notice = next(&feed);
    assert_eq!(
        (notice.previous, notice.message.as_deref()),
        (second, Some("two"))
    );
    stop(&scheduler);
}

#[test]
fn one_for_all_tells_each_restarted_child_in_start_order() {
    let scheduler = started(2);
    let feed = Restarts::new(16);
    let supervisor = supervise(&feed)
        .strategy(Strategy::OneForAll)
        .child(ChildSpec::new("a", || Fragile))
        .child(ChildSpec::new("b", || Fragile))
        .build();
    let supervisor = scheduler.spawn(supervisor).unwrap();
    let before = report(&scheduler, supervisor.pid());
    let (a, b) = (
        before.child("a").unwrap().pid.unwrap(),
        before.child("b").unwrap().pid.unwrap(),
    );
    fail(&scheduler, a, "boom");
    let first = next(&feed);
    let second = next(&feed);
    assert_eq!((first.child.as_str(), second.child.as_str()), ("a", "b"));
    assert_eq!((first.previous, second.previous), (a, b));
    assert_eq!(first.reason, ExitReason::Error);
    assert_eq!(second.reason, ExitReason::Terminated);
    assert!(!first.in_place() && !second.in_place());
    let after = eventually("both children restarted", || {
        let r = report(&scheduler, supervisor.pid());
        (r.total_restarts() == 2).then_some(r)
    });
    assert_eq!(after.child("a").unwrap().pid, Some(first.pid));
    assert_eq!(after.child("b").unwrap().pid, Some(second.pid));
    assert_eq!(
        feed.wait_timeout(SHORT),
        Err(TimedOut),
        "one notice per restart"
    );
    stop(&scheduler);
}

#[test]
fn no_restart_no_notice_by_the_restart_policy() {
    let scheduler = started(2);
    let feed = Restarts::new(8);
    let supervisor = supervise(&feed)
        .child(ChildSpec::new("temporary", || Fragile).restart(Restart::Temporary))
        .child(ChildSpec::new("transient", || Fragile).restart(Restart::Transient))
        .build();
    let supervisor = scheduler.spawn(supervisor).unwrap();
    let before = report(&scheduler, supervisor.pid());
    let temporary = before.child("temporary").unwrap().pid.unwrap();
    let transient = before.child("transient").unwrap().pid.unwrap();

    // A temporary child that fails is not restarted: nothing is told.
    fail(&scheduler, temporary, "gone");
    eventually("the temporary child to be forgotten", || {
        let r = report(&scheduler, supervisor.pid());
        r.child("temporary").unwrap().pid.is_none().then_some(())
    });
    // A transient child that finishes normally is not restarted either.
    fail(&scheduler, transient, "finish");
    eventually("the transient child to be stopped", || {
        let r = report(&scheduler, supervisor.pid());
        r.child("transient").unwrap().pid.is_none().then_some(())
    });
    assert_eq!(feed.wait_timeout(SHORT), Err(TimedOut));
    assert_eq!(report(&scheduler, supervisor.pid()).total_restarts(), 0);
    assert_eq!(feed.missed(), 0);
    stop(&scheduler);
}

#[test]
fn a_transient_child_that_fails_is_told() {
    let scheduler = started(2);
    let feed = Restarts::new(8);
    let supervisor = supervise(&feed)
        .child(ChildSpec::new("transient", || Fragile).restart(Restart::Transient))
        .build();
    let supervisor = scheduler.spawn(supervisor).unwrap();
    let pid = child_pid(&scheduler, supervisor.pid(), "transient");
    fail(&scheduler, pid, "e1");
    let notice = next(&feed);
    assert_eq!(
        (notice.child.as_str(), notice.message.as_deref()),
        ("transient", Some("e1"))
    );
    assert!(notice.in_place());
    stop(&scheduler);
}

#[test]
fn two_readers_waiting_on_clones_each_get_a_different_notice() {
    let scheduler = started(2);
    let feed = Restarts::new(8);
    let supervisor = supervise(&feed)
        .child(ChildSpec::new("frag", || Fragile))
        .build();
    let supervisor = scheduler.spawn(supervisor).unwrap();
    let pid = child_pid(&scheduler, supervisor.pid(), "frag");
    let (tx, rx) = mpsc::channel();
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (reader, tx) = (feed.clone(), tx.clone());
            std::thread::spawn(move || {
                let got = reader.wait_timeout(LONG);
                let _ = tx.send(());
                got
            })
        })
        .collect();
    fail(&scheduler, pid, "e1");
    rx.recv_timeout(LONG).expect("one reader woke");
    fail(&scheduler, pid, "e2");
    let mut got: Vec<String> = readers
        .into_iter()
        .map(|r| r.join().unwrap().expect("a notice each").message.unwrap())
        .collect();
    got.sort();
    assert_eq!(got, vec![String::from("e1"), String::from("e2")]);
    assert!(feed.try_next().is_none());
    stop(&scheduler);
}

#[test]
fn the_restart_over_the_intensity_under_a_new_pid_is_not_told() {
    let scheduler = started(2);
    let feed = Restarts::new(8);
    let supervisor = Supervisor::builder()
        .intensity(1, Duration::from_secs(60))
        .restarts_to(&feed)
        .child(ChildSpec::new("frag", || Fragile).restart_in_place(false))
        .build();
    let handle = scheduler.spawn(supervisor).unwrap();
    let first = child_pid(&scheduler, handle.pid(), "frag");
    fail(&scheduler, first, "e1");
    let notice = next(&feed);
    assert_eq!(notice.previous, first);
    fail(&scheduler, notice.pid, "e2");
    assert!(matches!(handle.wait(), Err(ExitError::Step(_))));
    assert!(
        feed.try_next().is_none(),
        "no restart was made, so none was told"
    );
    stop(&scheduler);
}

#[test]
fn a_cancelled_supervisor_completes_with_its_typed_report() {
    let scheduler = started(2);
    let feed = Restarts::new(8);
    let supervisor = supervise(&feed)
        .child(ChildSpec::new("frag", || Fragile))
        .build();
    let mut handle: Completion<SupervisorReport> = scheduler.spawn(supervisor).unwrap();
    assert!(handle.wait_timeout(SHORT).unwrap_err().is_timeout());
    let pid = child_pid(&scheduler, handle.pid(), "frag");
    fail(&scheduler, pid, "e1");
    fail(&scheduler, pid, "e2");
    next(&feed);
    next(&feed);
    assert!(matches!(
        handle.wait_timeout(SHORT),
        Err(ExitError::TimedOut)
    ));
    scheduler.context().cancel(handle.pid()).unwrap();
    let report = handle.wait_timeout(LONG).expect("the report");
    let frag = report.child("frag").expect("listed");
    assert_eq!(frag.restarts, 2);
    assert_eq!(frag.pid, None, "no child runs once the supervisor is done");
    assert_eq!(report.total_restarts(), 2);
    assert!(matches!(
        handle.try_take(),
        Some(Err(ExitError::AlreadyTaken))
    ));
    stop(&scheduler);
}

#[test]
fn a_supervisor_over_its_intensity_ends_with_a_step_error_on_its_typed_handle() {
    let scheduler = started(2);
    let feed = Restarts::new(8);
    let supervisor = Supervisor::builder()
        .intensity(1, Duration::from_secs(60))
        .restarts_to(&feed)
        .child(ChildSpec::new("frag", || Fragile))
        .build();
    let handle: Completion<SupervisorReport> = scheduler.spawn(supervisor).unwrap();
    let pid = child_pid(&scheduler, handle.pid(), "frag");
    fail(&scheduler, pid, "e1");
    assert_eq!(next(&feed).message.as_deref(), Some("e1"));
    fail(&scheduler, pid, "e2");
    match handle.wait() {
        Err(ExitError::Step(e)) => match e.downcast_ref::<SupervisorError>() {
            Some(SupervisorError::IntensityExceeded {
                restarts,
                within,
                child,
            }) => {
                assert_eq!(*restarts, 2);
                assert_eq!(*within, Duration::from_secs(60));
                assert_eq!(&**child, "frag");
            }
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    }
    stop(&scheduler);
}
