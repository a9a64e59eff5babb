//! Timeouts: a workflow with a deadline.
//!
//! 40 order workflows each run three steps (reserve, charge, ship), one
//! after another, as commands a "payment service" thread completes after a
//! while. Each workflow sets one timer for its whole deadline (100 ms) when
//! it starts. If the three steps finish first, it cancels the timer and
//! ends with `Ok(Receipt)`; if the timer fires first, it ends at once with
//! `Err(TimedOut)`, naming the steps it got through. Ending drops the step
//! still in flight: its late completion is refused (the completer reports
//! the process stale), so nothing runs on after the deadline.
//!
//! Every fourth order hits a slow charge (300 ms): exactly those time out,
//! after "reserve".
//!
//! Run it with `cargo run -p sched --example timeouts`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use sched::command::{Command, CommandId, Completer};
use sched::prelude::*;

const STEP: CommandId = CommandId(1);
const STEPS: [&str; 3] = ["reserve", "charge", "ship"];
const ORDERS: u64 = 40;
const DEADLINE: Duration = Duration::from_millis(100);
/// The tag of the deadline timer; command tags are the step's index.
const DEADLINE_TAG: Tag = Tag(u64::MAX);

/// What the service is asked to do.
#[derive(Clone, Copy)]
struct StepRequest {
    order: u64,
    step: usize,
}

/// A workflow that finished in time.
#[derive(Debug)]
struct Receipt {
    order: u64,
    took: Duration,
}

/// A workflow that ran out of time, and the steps it completed.
#[derive(Debug)]
struct TimedOut {
    order: u64,
    completed: Vec<&'static str>,
}

type OrderResult = Result<Receipt, TimedOut>;

struct Order {
    id: u64,
    next_step: usize,
    started: Option<Instant>,
    deadline: Option<TimerId>,
}

impl Order {
    fn request(&self, out: &mut Output<'_>) {
        let request = StepRequest {
            order: self.id,
            step: self.next_step,
        };
        out.yield_command(STEP, Tag(self.next_step as u64), Box::new(request));
    }
}

impl Process for Order {
    type Done = OrderResult;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        if self.started.is_none() {
            self.started = Some(Instant::now());
            self.deadline = Some(out.set_timer(DEADLINE, DEADLINE_TAG));
            self.request(out);
            return Ok(());
        }
        for event in events {
            match event {
                Event::Timer {
                    tag: DEADLINE_TAG, ..
                } => {
                    let result: OrderResult = Err(TimedOut {
                        order: self.id,
                        completed: STEPS[..self.next_step].to_vec(),
                    });
                    out.finish(result);
                    return Ok(());
                }
                Event::Completion { result, .. } => {
                    result?;
                    self.next_step += 1;
                    if self.next_step < STEPS.len() {
                        self.request(out);
                    } else {
                        out.cancel_timer(self.deadline.take().expect("set at start"));
                        let took = self.started.expect("started").elapsed();
                        let result: OrderResult = Ok(Receipt {
                            order: self.id,
                            took,
                        });
                        out.finish(result);
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// How long the service takes for a step: every fourth order's charge is
/// far slower than the deadline.
fn latency(request: &StepRequest) -> Duration {
    if STEPS[request.step] == "charge" && request.order % 4 == 3 {
        Duration::from_millis(300)
    } else {
        Duration::from_millis(5 + request.order % 10)
    }
}

fn main() {
    // The service: one thread that completes each request once its latency
    // has passed (requests are served in deadline order).
    let (requests, incoming) = mpsc::channel::<(Instant, StepRequest, Completer)>();
    let refused = Arc::new(AtomicUsize::new(0));
    let refused_by_service = refused.clone();
    let service = thread::spawn(move || {
        let mut pending: Vec<(Instant, StepRequest, Completer)> = Vec::new();
        loop {
            pending.sort_by_key(|(due, ..)| std::cmp::Reverse(*due));
            let wait = pending
                .last()
                .map(|(due, ..)| due.saturating_duration_since(Instant::now()));
            let received = match wait {
                Some(wait) => incoming.recv_timeout(wait),
                None => incoming
                    .recv()
                    .map_err(|_| mpsc::RecvTimeoutError::Disconnected),
            };
            match received {
                Ok(request) => pending.push(request),
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    let (_, request, done) = pending.pop().expect("one was due");
                    if done.complete(Box::new(request.step)).is_err() {
                        // The workflow ended (its deadline passed) first.
                        refused_by_service.fetch_add(1, Ordering::Relaxed);
                    }
                }
                Err(mpsc::RecvTimeoutError::Disconnected) if pending.is_empty() => return,
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let due = pending.last().expect("not empty").0;
                    thread::sleep(due.saturating_duration_since(Instant::now()));
                    let (_, request, done) = pending.pop().expect("not empty");
                    if done.complete(Box::new(request.step)).is_err() {
                        refused_by_service.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }
    });

    let scheduler = Scheduler::builder()
        .workers(2)
        .handler(STEP, move |command: Command, mut done: Completer| {
            let Some(&request) = command.data::<StepRequest>() else {
                return Err(done.reject("not a StepRequest"));
            };
            let due = Instant::now() + latency(&request);
            requests
                .send((due, request, done))
                .map_err(|mut unsent| (unsent.0).2.reject("the service has stopped"))
        })
        .build();
    scheduler.start();

    let orders: Vec<Completion<OrderResult>> = (0..ORDERS)
        .map(|id| {
            let order = Order {
                id,
                next_step: 0,
                started: None,
                deadline: None,
            };
            scheduler.spawn(order).expect("spawned")
        })
        .collect();

    let (mut finished, mut timed_out) = (Vec::new(), Vec::new());
    for done in orders {
        match done.wait().expect("every order ends") {
            Ok(receipt) => finished.push(receipt),
            Err(timeout) => timed_out.push(timeout),
        }
    }
    // Every deadline timer either fired or was cancelled.
    assert_eq!(scheduler.stats().pending_timers, 0);
    scheduler.shutdown(Duration::from_secs(1));
    drop(scheduler); // the handler, and with it the service's channel
    service.join().expect("the service thread");

    let slowest = finished.iter().map(|r| r.took).max().unwrap_or_default();
    println!(
        "{} orders finished in time (slowest {slowest:?}, deadline {DEADLINE:?}), {} timed out",
        finished.len(),
        timed_out.len()
    );
    for timeout in timed_out.iter().take(3) {
        println!(
            "  order {} timed out after {:?}",
            timeout.order, timeout.completed
        );
    }
    println!(
        "{} late completions refused (their workflow had ended)",
        refused.load(Ordering::Relaxed)
    );

    assert!(finished
        .iter()
        .all(|r| r.order % 4 != 3 && r.took < DEADLINE));
    assert_eq!(timed_out.len() as u64, ORDERS / 4);
    for timeout in &timed_out {
        assert_eq!(timeout.order % 4, 3, "only orders with a slow charge");
        assert_eq!(timeout.completed, ["reserve"]);
    }
    assert_eq!(refused.load(Ordering::Relaxed), timed_out.len());
}
