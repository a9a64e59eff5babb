//! The harness the models drive: one process, a run queue, and what a
//! worker does around a step.

use std::collections::VecDeque;
use std::sync::atomic::Ordering::SeqCst;

use relay::{Package, Payload, Pid};

use crate::contract::command::Tag;
use crate::contract::error::BoxError;
use crate::contract::error::InitError;
use crate::contract::event::Event;
use crate::contract::output::{Events, Output};
use crate::contract::process::{InitContext, Process};
use crate::record::state::{
    state_of, AfterStep, Killed, Wake, BLOCKED, COMPLETE, IDLE, READY, RUNNING, TERMINATE,
};
use crate::record::RecordRef;
use crate::sync::{Arc, AtomicBool, AtomicUsize, Mutex};

/// The models never call the process: the harness stands in for `step`.
pub(crate) struct Inert;

impl Process for Inert {
    type Done = Payload;
    fn init(&mut self, _: &InitContext, _: &str, _: Payload) -> Result<(), InitError> {
        Ok(())
    }
    fn step(&mut self, _: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
        unreachable!("the loom harness never steps the process")
    }
    fn close(&mut self) {}
}

pub(super) fn completion(tag: u64) -> Event {
    Event::Completion {
        tag: Tag(tag),
        result: Ok(Box::new(())),
    }
}

pub(super) fn message() -> Event {
    Event::Message(Package::new(Pid::local(0), Pid::local(1), ()))
}

/// One process, a run queue, and the counters the checks read.
pub(super) struct Harness {
    pub(super) record: RecordRef,
    pub(super) run_queue: Mutex<VecDeque<RecordRef>>,
    /// Kill tickets (`Shared::kills`).
    pub(super) tickets: Mutex<VecDeque<(RecordRef, bool)>>,
    /// Times the process was pushed onto the run queue.
    pub(super) queued: AtomicUsize,
    /// Times a worker took it off the run queue and ran it.
    pub(super) runs: AtomicUsize,
    /// Events drained by steps.
    pub(super) seen: AtomicUsize,
    /// Events handed back by `close` when the process ended.
    pub(super) dead: AtomicUsize,
    /// Events whose push failed (the queue was closed).
    pub(super) refused: AtomicUsize,
    /// Times the process ended.
    pub(super) ended: AtomicUsize,
    /// Set while some thread owns the process (between `start_step` and
    /// `finish_step`/`complete`).
    pub(super) owned: AtomicBool,
    /// The owner's reference (the schedule's, see `record/PROTOCOL.md`):
    /// the run-queue entry or ticket it took the process with. Parking
    /// leaves it to the state word, as the worker does.
    /// A std mutex, not loom's: only the owner touches it, so it adds no
    /// synchronisation the model relies on, and no branches to explore.
    held: std::sync::Mutex<Option<RecordRef>>,
}

impl Harness {
    pub(super) fn new() -> Arc<Self> {
        Arc::new(Harness {
            record: RecordRef::new(Pid::local(1), Inert),
            run_queue: Mutex::new(VecDeque::new()),
            tickets: Mutex::new(VecDeque::new()),
            queued: AtomicUsize::new(0),
            runs: AtomicUsize::new(0),
            seen: AtomicUsize::new(0),
            dead: AtomicUsize::new(0),
            refused: AtomicUsize::new(0),
            ended: AtomicUsize::new(0),
            owned: AtomicBool::new(false),
            held: std::sync::Mutex::new(None),
        })
    }

    /// A harness whose process is in the run queue (as after `submit`).
    pub(super) fn queued() -> Arc<Self> {
        let h = Harness::new();
        // The submitter's reference becomes the schedule's.
        h.push(h.record.clone());
        h
    }

    /// A harness whose process a worker (the calling thread) is stepping.
    pub(super) fn running() -> Arc<Self> {
        let h = Harness::new();
        assert_eq!(h.take(), 0);
        *h.held_ref() = Some(h.record.clone());
        h
    }

    /// A harness whose process is parked in `state` (`IDLE` or `BLOCKED`).
    pub(super) fn parked(state: u32) -> Arc<Self> {
        let h = Harness::running();
        h.finish(state);
        assert_eq!(state_of(h.record.state.load()), state);
        h
    }

    /// Queues the process a wake made ready, with the reference its
    /// state word held (`Shared::after_wake`).
    pub(super) fn schedule(&self) {
        // SAFETY: the caller's wake returned `Schedule`: the parked
        // reference is its to take.
        self.push(unsafe { RecordRef::unpark(&self.record) });
    }

    /// Puts `entry` in the run queue, checking it is not queued already.
    fn push(&self, entry: RecordRef) {
        let mut queue = self.run_queue.lock();
        assert!(
            !queue.iter().any(|r| RecordRef::ptr_eq(r, &self.record)),
            "the process was queued twice"
        );
        queue.push_back(entry);
        self.queued.fetch_add(1, SeqCst);
    }

    /// What a producer (completer, sender) does: push, then wake.
    pub(super) fn deliver(&self, event: Event) {
        match self.record.deliver(event) {
            Ok(Wake::Schedule) => self.schedule(),
            Ok(Wake::Nothing) => {}
            Err(_) => {
                self.refused.fetch_add(1, SeqCst);
            }
        }
    }

    /// What `Engine::terminate` does.
    pub(super) fn terminate(&self) {
        if self.record.state.kill(TERMINATE) == Wake::Schedule {
            self.schedule();
        }
    }

    /// What `Shared::end_soon` does for a terminate: a queued or waiting
    /// process gets a kill ticket.
    pub(super) fn terminate_with_ticket(&self) {
        match self.record.state.kill_queued(TERMINATE) {
            // SAFETY: `Schedule`: the kill's wake made it ready, so the
            // parked reference is this thread's (as `Shared::end_soon`).
            Killed::Schedule => self
                .tickets
                .lock()
                .push_back((unsafe { RecordRef::unpark(&self.record) }, false)),
            Killed::Queued => self.tickets.lock().push_back((self.record.clone(), true)),
            Killed::Nothing => {}
        }
    }

    /// What `reap_killed` does: each ticket's process taken out of its
    /// turn and ended, if no worker took it first.
    pub(super) fn reap(&self) {
        loop {
            let Some((record, queued)) = self.tickets.lock().pop_front() else {
                return;
            };
            if record.state.claim_killed(queued).is_some() {
                assert!(
                    !self.owned.swap(true, SeqCst),
                    "a ticket took a process another thread owns"
                );
                *self.held_ref() = Some(record);
                self.end();
            } else {
                assert!(queued, "a ticket without a queue entry lost its claim");
            }
        }
    }

    /// `READY -> RUNNING` (or still `RUNNING` when it was queued to
    /// continue), as a worker that dequeued the process.
    pub(super) fn take(&self) -> u32 {
        self.take_entry()
            .expect("a stale entry in a model without kill tickets")
    }

    /// [`take`](Harness::take), or `None` for an entry a kill ticket made
    /// stale (dropped without touching the process).
    pub(super) fn take_entry(&self) -> Option<u32> {
        let kill = self.record.state.start_step()?;
        assert!(
            !self.owned.swap(true, SeqCst),
            "the process is owned by two threads at once"
        );
        Some(kill)
    }

    /// Drains the events, as a worker does before `step`.
    pub(super) fn drain(&self) -> usize {
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

    /// The owner's reference.
    fn held_ref(&self) -> std::sync::MutexGuard<'_, Option<RecordRef>> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `worker/mod.rs`'s `after_step`: the step wanted `desired`.
    pub(super) fn finish(&self, desired: u32) {
        self.finish_publishing(desired, false);
    }

    /// [`finish`](Harness::finish), with `finish_step`'s `publish` (a
    /// continue made `READY` in its queue).
    pub(super) fn finish_publishing(&self, desired: u32, publish: bool) {
        // Ownership is handed on by the CAS inside `finish_step`; clear the
        // flag first, as the body is not touched after it.
        self.owned.store(false, SeqCst);
        let held = self.held_ref().take().expect("the owner holds a reference");
        match self.record.state.finish_step(desired, publish) {
            AfterStep::Parked => RecordRef::park(held),
            AfterStep::Requeue { .. } => self.push(held),
            AfterStep::Kill(_) => {
                self.owned.store(true, SeqCst);
                *self.held_ref() = Some(held);
                self.end();
            }
        }
    }

    /// `worker/mod.rs`'s `end`: complete, close the queue (dead letters).
    pub(super) fn end(&self) {
        self.record.state.complete();
        // SAFETY: this thread owns the process (it was RUNNING and its kill
        // flag was seen), and after `complete` nobody else takes it.
        let dead = unsafe { self.record.with_body(|_| self.record.close_events()) };
        self.dead.fetch_add(dead.len(), SeqCst);
        self.ended.fetch_add(1, SeqCst);
        self.owned.store(false, SeqCst);
        // The schedule's reference ends with the process.
        drop(self.held_ref().take().expect("the owner holds a reference"));
    }

    /// Takes the process off the run queue and steps it once (a step that
    /// drains its events and then wants `desired`, or ends if killed).
    /// Returns whether there was anything to run.
    pub(super) fn run_queued(&self, desired: u32) -> bool {
        self.run_queued_with(|_| desired)
    }

    /// As [`run_queued`](Harness::run_queued), with the wanted state
    /// decided after the drain from what the steps have seen so far.
    pub(super) fn run_queued_with(&self, want: impl Fn(&Harness) -> u32) -> bool {
        let Some(record) = self.run_queue.lock().pop_front() else {
            return false;
        };
        assert!(RecordRef::ptr_eq(&record, &self.record));
        self.runs.fetch_add(1, SeqCst);
        match self.take_entry() {
            // A stale entry: dropped, with the reference it held.
            None => {}
            Some(0) => {
                *self.held_ref() = Some(record);
                self.drain();
                self.finish(want(self));
            }
            Some(_) => {
                *self.held_ref() = Some(record);
                self.end();
            }
        }
        true
    }

    /// After joining every other thread: runs what is still queued, then
    /// checks the invariants with `events` pushed in all.
    pub(super) fn settle(&self, desired: u32, events: usize) {
        self.reap();
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
        // The harness's own reference, and the parked word's: a reference
        // taken twice, or one that leaked, shows in the count.
        let parked = usize::from(!matches!(state_of(word), COMPLETE));
        assert_eq!(
            RecordRef::count(&self.record) as usize,
            1 + parked,
            "the record's references: one of the harness's, and the state word's while parked"
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

impl Drop for Harness {
    /// A process left parked keeps a reference in its state word, which
    /// a wake would have taken: taken here, so the record is freed.
    fn drop(&mut self) {
        if matches!(state_of(self.record.state.load()), BLOCKED | IDLE) {
            // SAFETY: every thread of the model has been joined; nobody
            // else can wake the process and take the reference.
            drop(unsafe { RecordRef::unpark(&self.record) });
        }
    }
}
