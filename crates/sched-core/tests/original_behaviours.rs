//! Behaviours the scheduler this project descends from checks in its own
//! suite, which the other test files do not cover: the global queue's
//! batch transfer, staggered yields on one worker, many more workers than
//! cores, and command handlers that block their worker.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use relay::Payload;
use sched_core::*;

/// A process that blocks its worker inside its step until told to go on.
fn blocker(
    gate: Receiver<()>,
    entered: std::sync::mpsc::Sender<()>,
) -> Box<dyn Process<Done = relay::Payload>> {
    let gate = Mutex::new(gate);
    process(move |_, out| {
        entered.send(()).unwrap();
        gate.lock()
            .unwrap()
            .recv_timeout(PATIENCE)
            .expect("released");
        out.finish(());
        Ok(())
    })
}

fn finishes_at_once() -> Box<dyn Process<Done = relay::Payload>> {
    process(|_, out| {
        out.finish(());
        Ok(())
    })
}

#[test]
fn a_worker_takes_one_process_plus_a_batch_of_sixteen_from_the_global_queue() {
    let engine = builder(1).build();
    let (go, gate) = channel();
    let (entered_tx, entered) = channel();
    let first = submit(&engine, 1, blocker(gate, entered_tx));
    let rest: Vec<_> = (2..=40)
        .map(|id| submit(&engine, id, finishes_at_once()))
        .collect();
    assert_eq!(engine.context().stats().global_queue_len, 40);
    engine.start();
    entered
        .recv_timeout(PATIENCE)
        .expect("the blocker runs first");
    // The worker popped the blocker and moved 16 more to its own deque;
    // the other 23 wait in the global queue.
    let stats = engine.context().stats();
    assert_eq!(stats.global_queue_len, 23, "{stats:?}");
    assert_eq!(stats.workers[0].local_queue_len, 16, "{stats:?}");
    go.send(()).unwrap();
    wait(first).expect("done");
    for handle in rest {
        wait(handle).expect("done");
    }
}

/// Yields A (200 ms) and B (10 ms) in its first step, and C (50 ms) once
/// B's completion arrives; records the order of completions.
struct Staggered {
    order: Arc<Mutex<Vec<u64>>>,
    started: bool,
}

impl Process for Staggered {
    type Done = Payload;
    fn init(&mut self, _: &InitContext, _: &str, _: Payload) -> Result<(), InitError> {
        Ok(())
    }
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        if !self.started {
            self.started = true;
            out.yield_command(ASYNC, Tag(1), Box::new(Duration::from_millis(200)));
            out.yield_command(ASYNC, Tag(2), Box::new(Duration::from_millis(10)));
            return Ok(());
        }
        for event in events {
            if let Event::Completion { tag, result } = event {
                result?;
                let mut order = self.order.lock().unwrap();
                order.push(tag.0);
                if tag == Tag(2) {
                    out.yield_command(ASYNC, Tag(3), Box::new(Duration::from_millis(50)));
                }
                if order.len() == 3 {
                    out.finish(());
                }
            }
        }
        Ok(())
    }
    fn close(&mut self) {}
}

#[test]
fn staggered_yields_complete_in_completion_order_with_their_own_tags() {
    let engine = started(1);
    let order = Arc::new(Mutex::new(Vec::new()));
    let process = Box::new(Staggered {
        order: order.clone(),
        started: false,
    });
    wait(submit(&engine, 1, process)).expect("done");
    assert_eq!(*order.lock().unwrap(), vec![2, 3, 1]);
}

#[test]
fn three_yields_at_once_and_re_yields_as_they_complete_all_arrive_on_one_worker() {
    let engine = started(1);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let mut next_tag = 0u64;
    let many = process(move |events, out| {
        if next_tag == 0 {
            for _ in 0..3 {
                next_tag += 1;
                out.yield_command(
                    ASYNC,
                    Tag(next_tag),
                    Box::new(Duration::from_millis(next_tag)),
                );
            }
            return Ok(());
        }
        for event in events {
            if let Event::Completion { tag, .. } = event {
                let mut seen = log.lock().unwrap();
                seen.push(tag.0);
                if next_tag < 6 {
                    // A new yield while the others are still pending.
                    next_tag += 1;
                    out.yield_command(ASYNC, Tag(next_tag), Box::new(()));
                }
                if seen.len() == 6 {
                    out.finish(());
                }
            }
        }
        Ok(())
    });
    wait(submit(&engine, 1, many)).expect("no deadlock");
    let mut tags = seen.lock().unwrap().clone();
    tags.sort_unstable();
    assert_eq!(tags, vec![1, 2, 3, 4, 5, 6], "each tag exactly once");
}

#[test]
fn ten_thousand_processes_complete_on_thirty_two_workers() {
    let engine = started(32);
    let handles: Vec<_> = (0..10_000)
        .map(|i| {
            let command = if i % 2 == 0 { SYNC } else { ASYNC };
            submit(&engine, i + 1, Counter::new(5, command))
        })
        .collect();
    for handle in handles {
        assert_eq!(done_u64(wait(handle)), 5);
    }
    assert_eq!(engine.context().stats().live_processes, 0);
}

#[test]
fn processes_complete_while_a_handler_blocks_its_worker() {
    const BLOCKING: CommandId = CommandId(50);
    let (release, gate) = channel::<()>();
    let gate = Mutex::new(gate);
    let blocked = Arc::new(AtomicUsize::new(0));
    let inside = blocked.clone();
    let engine = builder(2)
        .handler(
            BLOCKING,
            move |cmd: Command, c: Completer| -> Result<(), Rejected> {
                // Blocks the worker that dispatched the command, inside the
                // handler call, until the test has seen the others finish.
                inside.fetch_add(1, Ordering::SeqCst);
                let _ = gate.lock().unwrap().recv_timeout(PATIENCE);
                let _ = c.complete(cmd.data);
                Ok(())
            },
        )
        .build();
    engine.start();
    let stuck = submit(&engine, 1, Counter::new(1, BLOCKING));
    while blocked.load(Ordering::SeqCst) == 0 {
        std::thread::yield_now();
    }
    let others: Vec<_> = (0..1_000)
        .map(|i| submit(&engine, 100 + i, Counter::new(3, SYNC)))
        .collect();
    for handle in others {
        assert_eq!(done_u64(wait(handle)), 3, "finished on the other worker");
    }
    release.send(()).unwrap();
    assert_eq!(done_u64(wait(stuck)), 1);
}
