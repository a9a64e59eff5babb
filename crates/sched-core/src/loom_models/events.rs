//! Models of the state word and the event queue: completions, messages
//! and kills racing a worker's steps.

use std::sync::atomic::Ordering::SeqCst;

use loom::thread;

use super::harness::{completion, message, Harness};
use crate::record::state::{state_of, Wake, BLOCKED, COMPLETE, IDLE, READY, RUNNING, STALE};
use crate::sync::{Arc, AtomicUsize};

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

/// A kill ticket races the worker that pops the queued process: exactly
/// one of them owns it, it ends exactly once, and the entry the ticket
/// made stale is dropped without touching the body (the ticket's claim is
/// `READY -> RUNNING | STALE`, the pop's `start_step` clears the mark).
#[test]
fn a_kill_ticket_races_the_worker_taking_the_queued_process() {
    loom::model(|| {
        let h = Harness::queued();
        let terminator = {
            let h = h.clone();
            thread::spawn(move || {
                h.terminate_with_ticket();
                h.reap();
            })
        };
        h.run_queued(IDLE);
        terminator.join().unwrap();
        h.settle(IDLE, 0);
        assert_eq!(state_of(h.record.state.load()), COMPLETE);
        assert_eq!(h.ended.load(SeqCst), 1, "ended exactly once");
        assert_eq!(
            h.record.state.load() & STALE,
            0,
            "the stale mark was consumed"
        );
    });
}

/// A kill ticket races a step that continues under a backlog (made
/// `READY` in its queue, `finish_step`'s `publish`): the kill flag wins
/// over the requeue, the ticket takes the queued process, or the worker
/// that pops it ends it; once in every case.
#[test]
fn a_kill_ticket_races_a_published_continue() {
    loom::model(|| {
        let h = Harness::running();
        let terminator = {
            let h = h.clone();
            thread::spawn(move || {
                h.terminate_with_ticket();
                h.reap();
            })
        };
        h.finish_publishing(READY, true);
        h.run_queued(READY);
        terminator.join().unwrap();
        h.settle(READY, 0);
        assert_eq!(state_of(h.record.state.load()), COMPLETE);
        assert_eq!(h.ended.load(SeqCst), 1, "ended exactly once");
    });
}

/// A kill ticket for a waiting process races a message that wakes it: the
/// message's wake queues it and the ticket finds it taken, or the ticket
/// (which made it ready) takes it and the message is dead-lettered or
/// refused; it ends once, and the message is never stranded.
#[test]
fn a_kill_ticket_for_a_waiting_process_races_a_message() {
    loom::model(|| {
        let h = Harness::parked(IDLE);
        let terminator = {
            let h = h.clone();
            thread::spawn(move || {
                h.terminate_with_ticket();
                h.reap();
            })
        };
        let sender = {
            let h = h.clone();
            thread::spawn(move || h.deliver(message()))
        };
        h.run_queued(IDLE);
        terminator.join().unwrap();
        sender.join().unwrap();
        h.settle(IDLE, 1);
        assert_eq!(state_of(h.record.state.load()), COMPLETE);
        assert_eq!(h.ended.load(SeqCst), 1, "ended exactly once");
    });
}
