//! Loom models of the engine's protocol: the state word with its wakeup
//! flag, the per-process event queue, and parking.
//!
//! Run with `cargo xtask loom sched-core`. The models drive the real
//! [`Record`] (its [`StateWord`] and its `mpsc` event queue) and the real
//! [`Sleepers`]; the worker side is a [`Harness`] that does what
//! `worker/step.rs` does around a step (`start_step`, drain, `finish_step`,
//! requeue or end) against a loom `Mutex<VecDeque>` run queue instead of
//! the work-stealing deques, which keeps every model small enough to
//! explore exhaustively with two preemptions.
//!
//! Every model ends by running whatever is still queued on the main thread
//! (after joining the others) and then checks:
//! - every event pushed was seen by exactly one step, or came back as a
//!   dead letter when the process ended, or was refused by a closed queue;
//! - nothing is left pending in the queue of a process that is parked
//!   (no stranded event);
//! - the process was never in the run queue twice, never stepped by two
//!   threads at once, and ended at most (or exactly) once.

use std::collections::VecDeque;
use std::sync::atomic::Ordering::SeqCst;

use loom::thread;
use relay::{Package, Payload, Pid};

use crate::contract::command::Tag;
use crate::contract::error::InitError;
use crate::contract::event::{BoxError, Event};
use crate::contract::output::{Events, Output};
use crate::contract::process::{InitContext, Process};
use crate::record::state::{
    state_of, AfterStep, Wake, BLOCKED, COMPLETE, IDLE, READY, RUNNING, TERMINATE,
};
use crate::record::Record;
use crate::sync::{Arc, AtomicBool, AtomicUsize, Mutex};
use crate::worker::sleep::Sleepers;

/// The models never call the process: the harness stands in for `step`.
pub(crate) struct Inert;

impl Process for Inert {
    fn init(&mut self, _: &InitContext, _: &str, _: Payload) -> Result<(), InitError> {
        Ok(())
    }
    fn step(&mut self, _: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
        unreachable!("the loom harness never steps the process")
    }
    fn close(&mut self) {}
}

fn completion(tag: u64) -> Event {
    Event::Completion {
        tag: Tag(tag),
        result: Ok(Box::new(())),
    }
}

fn message() -> Event {
    Event::Message(Package::new(Pid::local(0), Pid::local(1), ()))
}

/// One process, a run queue, and the counters the checks read.
struct Harness {
    record: Arc<Record>,
    run_queue: Mutex<VecDeque<Arc<Record>>>,
    /// Times the process was pushed onto the run queue.
    queued: AtomicUsize,
    /// Times a worker took it off the run queue and ran it.
    runs: AtomicUsize,
    /// Events drained by steps.
    seen: AtomicUsize,
    /// Events handed back by `close` when the process ended.
    dead: AtomicUsize,
    /// Events whose push failed (the queue was closed).
    refused: AtomicUsize,
    /// Times the process ended.
    ended: AtomicUsize,
    /// Set while some thread owns the process (between `start_step` and
    /// `finish_step`/`complete`).
    owned: AtomicBool,
}

impl Harness {
    fn new() -> Arc<Self> {
        Arc::new(Harness {
            record: Arc::new(Record::new(Pid::local(1), Box::new(Inert))),
            run_queue: Mutex::new(VecDeque::new()),
            queued: AtomicUsize::new(0),
            runs: AtomicUsize::new(0),
            seen: AtomicUsize::new(0),
            dead: AtomicUsize::new(0),
            refused: AtomicUsize::new(0),
            ended: AtomicUsize::new(0),
            owned: AtomicBool::new(false),
        })
    }

    /// A harness whose process is in the run queue (as after `submit`).
    fn queued() -> Arc<Self> {
        let h = Harness::new();
        h.schedule();
        h
    }

    /// A harness whose process a worker (the calling thread) is stepping.
    fn running() -> Arc<Self> {
        let h = Harness::new();
        assert_eq!(h.take(), 0);
        h
    }

    /// A harness whose process is parked in `state` (`IDLE` or `BLOCKED`).
    fn parked(state: u32) -> Arc<Self> {
        let h = Harness::running();
        h.finish(state);
        assert_eq!(state_of(h.record.state.load()), state);
        h
    }

    /// Queues the process, checking it is not queued already.
    fn schedule(&self) {
        let mut queue = self.run_queue.lock();
        assert!(
            !queue.iter().any(|r| Arc::ptr_eq(r, &self.record)),
            "the process was queued twice"
        );
        queue.push_back(self.record.clone());
        self.queued.fetch_add(1, SeqCst);
    }

    /// What a producer (completer, sender) does: push, then wake.
    fn deliver(&self, event: Event) {
        match self.record.deliver(event) {
            Ok(Wake::Schedule) => self.schedule(),
            Ok(Wake::Nothing) => {}
            Err(_) => {
                self.refused.fetch_add(1, SeqCst);
            }
        }
    }

    /// What `Engine::terminate` does.
    fn terminate(&self) {
        if self.record.state.kill(TERMINATE) == Wake::Schedule {
            self.schedule();
        }
    }

    /// `READY -> RUNNING` (or still `RUNNING` when it was queued to
    /// continue), as a worker that dequeued the process.
    fn take(&self) -> u32 {
        let kill = self.record.state.start_step();
        assert!(
            !self.owned.swap(true, SeqCst),
            "the process is owned by two threads at once"
        );
        kill
    }

    /// Drains the events, as a worker does before `step`.
    fn drain(&self) -> usize {
        let mut events = Vec::new();
        // SAFETY: called between `take` and `finish`, while this thread owns
        // the process (the `owned` flag asserts it).
        let n = unsafe {
            self.record
                .with_body(|_| self.record.drain_events(&mut events))
        };
        self.seen.fetch_add(n, SeqCst);
        n
    }

    /// `worker/step.rs`'s `after_step`: the step wanted `desired`.
    fn finish(&self, desired: u32) {
        // Ownership is handed on by the CAS inside `finish_step`; clear the
        // flag first, as the body is not touched after it.
        self.owned.store(false, SeqCst);
        match self.record.state.finish_step(desired) {
            AfterStep::Parked => {}
            AfterStep::Requeue { .. } => self.schedule(),
            AfterStep::Kill(_) => {
                self.owned.store(true, SeqCst);
                self.end();
            }
        }
    }

    /// `worker/step.rs`'s `end`: complete, close the queue (dead letters).
    fn end(&self) {
        self.record.state.complete();
        // SAFETY: this thread owns the process (it was RUNNING and its kill
        // flag was seen), and after `complete` nobody else takes it.
        let dead = unsafe { self.record.with_body(|_| self.record.close_events()) };
        self.dead.fetch_add(dead.len(), SeqCst);
        self.ended.fetch_add(1, SeqCst);
        self.owned.store(false, SeqCst);
    }

    /// Takes the process off the run queue and steps it once (a step that
    /// drains its events and then wants `desired`, or ends if killed).
    /// Returns whether there was anything to run.
    fn run_queued(&self, desired: u32) -> bool {
        self.run_queued_with(|_| desired)
    }

    /// As [`run_queued`](Harness::run_queued), with the wanted state
    /// decided after the drain from what the steps have seen so far.
    fn run_queued_with(&self, want: impl Fn(&Harness) -> u32) -> bool {
        let Some(record) = self.run_queue.lock().pop_front() else {
            return false;
        };
        assert!(Arc::ptr_eq(&record, &self.record));
        self.runs.fetch_add(1, SeqCst);
        if self.take() != 0 {
            self.end();
        } else {
            self.drain();
            self.finish(want(self));
        }
        true
    }

    /// After joining every other thread: runs what is still queued, then
    /// checks the invariants with `events` pushed in all.
    fn settle(&self, desired: u32, events: usize) {
        while self.run_queued(desired) {}
        let word = self.record.state.load();
        assert!(
            !matches!(state_of(word), READY | RUNNING),
            "the process is ready (or queued to continue) but in no run queue: {word:#x}"
        );
        assert!(!self.owned.load(SeqCst));
        assert_eq!(
            self.runs.load(SeqCst),
            self.queued.load(SeqCst),
            "every queueing leads to exactly one run"
        );
        assert_eq!(
            self.seen.load(SeqCst) + self.dead.load(SeqCst) + self.refused.load(SeqCst),
            events,
            "every event is seen once, dead-lettered or refused"
        );
        if state_of(word) == COMPLETE {
            assert_eq!(self.ended.load(SeqCst), 1);
        } else {
            assert_eq!(self.ended.load(SeqCst), 0);
            // SAFETY: every other thread has been joined and the process is
            // parked: nobody else can touch the body.
            let empty = unsafe { self.record.with_body(|_| self.record.no_events()) };
            assert!(empty, "a parked process has a pending event (stranded)");
        }
    }
}

/// A completion arrives while the worker finishes the step that yielded
/// the command: either the worker sees the wakeup flag and requeues, or the
/// completer finds the process blocked and schedules it. Exactly one of the
/// two queues it, and a later step drains the completion.
#[test]
fn completion_races_end_of_step() {
    loom::model(|| {
        let h = Harness::running();
        let completer = {
            let h = h.clone();
            thread::spawn(move || h.deliver(completion(1)))
        };
        h.finish(BLOCKED);
        while h.run_queued(IDLE) {}
        completer.join().unwrap();
        h.settle(IDLE, 1);
        assert_eq!(h.queued.load(SeqCst), 1, "queued exactly once");
        assert_eq!(h.seen.load(SeqCst), 1);
        assert_eq!(state_of(h.record.state.load()), IDLE);
    });
}

/// Two completions of a step's two yields race each other and the end of
/// that step; a worker keeps running the process from the run queue.
#[test]
fn two_completions_race() {
    loom::model(|| {
        let h = Harness::running();
        let completers: Vec<_> = (1..=2)
            .map(|tag| {
                let h = h.clone();
                thread::spawn(move || h.deliver(completion(tag)))
            })
            .collect();
        h.finish(BLOCKED);
        // The process waits (blocked) until it has seen both completions.
        let want = |h: &Harness| {
            if h.seen.load(SeqCst) < 2 {
                BLOCKED
            } else {
                IDLE
            }
        };
        while h.run_queued_with(want) {}
        for c in completers {
            c.join().unwrap();
        }
        while h.run_queued_with(want) {}
        h.settle(IDLE, 2);
        assert_eq!(h.seen.load(SeqCst), 2);
        assert_eq!(state_of(h.record.state.load()), IDLE);
        let queued = h.queued.load(SeqCst);
        assert!((1..=2).contains(&queued), "queued {queued} times");
    });
}

/// A message arrives while the worker moves the process from Running to
/// Idle after a step that asked to wait for messages.
#[test]
fn message_races_running_to_idle() {
    loom::model(|| {
        let h = Harness::running();
        let sender = {
            let h = h.clone();
            thread::spawn(move || h.deliver(message()))
        };
        h.finish(IDLE);
        while h.run_queued(IDLE) {}
        sender.join().unwrap();
        h.settle(IDLE, 1);
        assert_eq!(h.queued.load(SeqCst), 1, "queued exactly once");
        assert_eq!(h.seen.load(SeqCst), 1);
    });
}

/// A message arrives while a step continues and the process, still
/// RUNNING, sits in the run queue and is taken again (no transition on
/// either side, unless the sender's WAKE is there to clear). The sender
/// must not queue it a second time, and a later step must drain the
/// message before the process parks.
#[test]
fn message_races_a_continuing_step() {
    loom::model(|| {
        let h = Harness::running();
        let sender = {
            let h = h.clone();
            thread::spawn(move || h.deliver(message()))
        };
        h.drain();
        h.finish(READY);
        // The continued step (and one more): each waits once it has seen
        // the message, or after two runs.
        let want = |h: &Harness| {
            if h.seen.load(SeqCst) == 1 || h.runs.load(SeqCst) >= 2 {
                IDLE
            } else {
                READY
            }
        };
        while h.run_queued_with(want) {}
        sender.join().unwrap();
        h.settle(IDLE, 1);
        assert_eq!(h.seen.load(SeqCst), 1);
        assert_ne!(state_of(h.record.state.load()), RUNNING);
    });
}

/// A message arrives while a worker takes the queued process
/// (`READY -> RUNNING`), drains its (empty) queue and parks it idle. The
/// sender's wake finds it ready or running and must still make sure that
/// the message is drained by some step.
#[test]
fn message_races_a_worker_taking_the_process() {
    loom::model(|| {
        let h = Harness::queued();
        let worker = {
            let h = h.clone();
            thread::spawn(move || while h.run_queued(IDLE) {})
        };
        h.deliver(message());
        worker.join().unwrap();
        h.settle(IDLE, 1);
        assert_eq!(h.seen.load(SeqCst), 1);
    });
}

/// Two senders wake the same idle process: it is scheduled exactly once
/// per transition out of Idle (never queued twice), and both messages are
/// drained.
#[test]
fn two_senders_wake_one_idle_process() {
    loom::model(|| {
        let h = Harness::parked(IDLE);
        let schedules = Arc::new(AtomicUsize::new(0));
        let senders: Vec<_> = (0..2)
            .map(|_| {
                let h = h.clone();
                let schedules = schedules.clone();
                thread::spawn(move || match h.record.deliver(message()) {
                    Ok(Wake::Schedule) => {
                        schedules.fetch_add(1, SeqCst);
                        h.schedule();
                    }
                    Ok(Wake::Nothing) => {}
                    Err(_) => unreachable!("the process never ends here"),
                })
            })
            .collect();
        for s in senders {
            s.join().unwrap();
        }
        // No worker ran in between: exactly one sender made it ready.
        assert_eq!(schedules.load(SeqCst), 1);
        h.settle(IDLE, 2);
        assert_eq!(h.runs.load(SeqCst), 1);
        assert_eq!(h.seen.load(SeqCst), 2);
    });
}

/// Two senders wake an idle process while a worker runs it from the queue
/// as soon as it is scheduled: never queued twice, never owned twice, both
/// messages drained.
#[test]
fn two_senders_race_a_worker() {
    loom::model(|| {
        let h = Harness::parked(IDLE);
        let senders: Vec<_> = (0..2)
            .map(|_| {
                let h = h.clone();
                thread::spawn(move || h.deliver(message()))
            })
            .collect();
        while h.run_queued(IDLE) {}
        for s in senders {
            s.join().unwrap();
        }
        h.settle(IDLE, 2);
        assert_eq!(h.seen.load(SeqCst), 2);
    });
}

/// `terminate` races the end of a running step, with a completion in
/// flight: the process ends exactly once (never parks for good), and the
/// completion is seen, dead-lettered or refused.
#[test]
fn terminate_races_a_running_step() {
    loom::model(|| {
        let h = Harness::running();
        let terminator = {
            let h = h.clone();
            thread::spawn(move || h.terminate())
        };
        let completer = {
            let h = h.clone();
            thread::spawn(move || h.deliver(completion(1)))
        };
        h.finish(BLOCKED);
        while h.run_queued(BLOCKED) {}
        terminator.join().unwrap();
        completer.join().unwrap();
        h.settle(BLOCKED, 1);
        assert_eq!(state_of(h.record.state.load()), COMPLETE);
        assert_eq!(h.ended.load(SeqCst), 1, "ended exactly once");
    });
}

/// `terminate` races a step that asked to continue (`READY`): the kill
/// flag wins over the requeue, or ends the process when it is next taken.
#[test]
fn terminate_races_a_continuing_step() {
    loom::model(|| {
        let h = Harness::running();
        let terminator = {
            let h = h.clone();
            thread::spawn(move || h.terminate())
        };
        h.finish(READY);
        // The process continues; run it a bounded number of times here,
        // the rest after the join.
        for _ in 0..2 {
            h.run_queued(READY);
        }
        terminator.join().unwrap();
        h.settle(READY, 0);
        assert_eq!(state_of(h.record.state.load()), COMPLETE);
        assert_eq!(h.ended.load(SeqCst), 1, "ended exactly once");
    });
}

/// The work a producer pushes and a parking worker looks for.
enum WorkQueue {
    /// The global queue (a loom `Mutex<VecDeque>` under loom).
    Global(crate::sync::Fifo<u32>),
    /// A worker's deque, checked through its stealer.
    Local(deque::Worker<u32>, deque::Stealer<u32>),
}

impl WorkQueue {
    fn push(&self, item: u32) {
        match self {
            WorkQueue::Global(q) => q.push(item),
            WorkQueue::Local(w, _) => w.push(item),
        }
    }
    fn has_work(&self) -> bool {
        match self {
            WorkQueue::Global(q) => !q.is_empty(),
            WorkQueue::Local(_, s) => !s.is_empty(),
        }
    }
}

/// A producer pushes work and notifies while the only worker goes to
/// park: the worker either sees the work before sleeping or is unparked
/// (a lost wakeup would leave it asleep forever, which loom reports as a
/// deadlock). After `park` returns the work is visible.
fn push_races_park(queue: WorkQueue) {
    let queue = Arc::new(queue);
    let sleepers = Arc::new(Sleepers::new(1));
    let worker = {
        let queue = queue.clone();
        let sleepers = sleepers.clone();
        thread::spawn(move || {
            sleepers.park(0, || queue.has_work(), || None, std::time::Duration::ZERO);
            assert!(queue.has_work(), "woke up without work");
        })
    };
    queue.push(1);
    sleepers.notify_one();
    worker.join().unwrap();
    assert_eq!(sleepers.sleeping(), 0, "the worker is off the sleeper list");
}

#[test]
fn push_to_the_global_queue_races_park() {
    loom::model(|| push_races_park(WorkQueue::Global(crate::sync::Fifo::new())));
}

#[test]
fn push_to_a_local_deque_races_park() {
    loom::model(|| {
        let worker = deque::Worker::with_capacity(2);
        let stealer = worker.stealer();
        push_races_park(WorkQueue::Local(worker, stealer))
    });
}

/// Two workers park while one producer pushes one item and notifies once:
/// one of them takes the work (the other may sleep until the engine's
/// shutdown sets `exit` and wakes everyone, modelled here).
#[test]
fn one_push_two_parking_workers() {
    loom::model(|| {
        let queue = Arc::new(crate::sync::Fifo::<u32>::new());
        let sleepers = Arc::new(Sleepers::new(2));
        let taken = Arc::new(AtomicUsize::new(0));
        let exit = Arc::new(AtomicBool::new(false));
        let workers: Vec<_> = (0..2)
            .map(|me| {
                let queue = queue.clone();
                let sleepers = sleepers.clone();
                let taken = taken.clone();
                let exit = exit.clone();
                thread::spawn(move || {
                    sleepers.park(
                        me,
                        || !queue.is_empty() || exit.load(SeqCst),
                        || None,
                        std::time::Duration::ZERO,
                    );
                    if queue.pop().is_some() {
                        taken.fetch_add(1, SeqCst);
                    }
                })
            })
            .collect();
        queue.push(1);
        sleepers.notify_one();
        // A notified worker takes the item; then let the other one go.
        while taken.load(SeqCst) == 0 && !queue.is_empty() {
            thread::yield_now();
        }
        exit.store(true, SeqCst);
        sleepers.notify_all();
        for w in workers {
            w.join().unwrap();
        }
        assert_eq!(taken.load(SeqCst), 1, "the item was taken");
        assert!(queue.is_empty());
    });
}

/// Another thread sets a timer (already due) in the wheel of the only
/// worker while it goes to park with no timer pending: the worker either
/// reads the timer's deadline after announcing its sleep (and does not
/// sleep) or is found on the idle list and woken, exactly as
/// `Shared::set_timer` and the worker loop do. Under loom a timed park
/// waits for a notification only (there is no clock), so a lost wakeup is
/// a deadlock loom reports.
#[test]
fn a_timer_set_while_the_worker_parks_is_never_missed() {
    use crate::sync::fence;
    use crate::timer::registry::Timers;
    use crate::timer::{Action, What};

    loom::model(|| {
        let timers = Arc::new(Timers::new(1));
        let sleepers = Arc::new(Sleepers::new(1));
        let worker = {
            let timers = timers.clone();
            let sleepers = sleepers.clone();
            thread::spawn(move || {
                let mut due = Vec::new();
                loop {
                    if timers.any_due(0, std::time::Instant::now) {
                        timers.poll(0, std::time::Instant::now(), &mut due);
                        if !due.is_empty() {
                            return due.len();
                        }
                    }
                    sleepers.park(0, || false, || timers.due_at(0), std::time::Duration::ZERO);
                }
            })
        };
        let record = Arc::new(Record::new(Pid::local(1), Box::new(Inert)));
        let action = Action {
            record,
            what: What::Wake {
                tag: Tag(1),
                id: None,
            },
        };
        let past = std::time::Instant::now() - std::time::Duration::from_millis(1);
        let (_, earlier) = timers.insert(0, past, action);
        assert!(earlier, "the only timer is the earliest");
        fence(SeqCst);
        sleepers.wake(0);
        assert_eq!(worker.join().unwrap(), 1, "the timer fired once");
        assert_eq!(sleepers.sleeping(), 0);
    });
}

/// A monitor is attached while its target ends: it fires exactly once,
/// either from the end's list or at once with the end's reason.
#[test]
fn a_monitor_set_while_the_process_ends_fires_exactly_once() {
    use crate::contract::down::ExitReason;
    use crate::record::relations::{Relations, Watch, Watcher};

    loom::model(|| {
        let relations = Arc::new(Relations::default());
        let watcher = Arc::new(Record::new(Pid::local(2), Box::new(Inert)));
        let ender = {
            let relations = relations.clone();
            thread::spawn(move || {
                relations
                    .end(ExitReason::Normal)
                    .map_or(0, |related| related.monitors.len())
            })
        };
        let attached = relations.with_live(|related| {
            related.monitors.push(Watch {
                id: 1,
                watcher: Watcher::Process(watcher.clone()),
            })
        });
        let fired_by_end = ender.join().unwrap();
        let fired_at_once = usize::from(attached == Err(ExitReason::Normal));
        assert_eq!(fired_by_end + fired_at_once, 1, "fired exactly once");
    });
}
