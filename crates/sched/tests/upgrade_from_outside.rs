//! `Scheduler::upgrade`: replacing a running process from outside its
//! steps, keeping its PID and its pending events.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sched::prelude::*;
use sched::process::UpgradeRequestError;

const WAIT: Duration = Duration::from_secs(10);

#[derive(Default)]
struct Counts {
    inits: AtomicUsize,
    closes: AtomicUsize,
}

/// Answers every request with `(version, n)` where `n` is the request's
/// number; can be told to hold its step until a channel says go, or to
/// finish.
struct Service {
    version: u32,
    counts: Arc<Counts>,
    /// Held in the step that reads "hold" until a value arrives; tells
    /// `holding` first.
    hold: Option<Arc<Mutex<mpsc::Receiver<()>>>>,
    holding: Option<mpsc::Sender<()>>,
    fail_init: bool,
}

impl Service {
    fn new(version: u32, counts: &Arc<Counts>) -> Self {
        Service {
            version,
            counts: Arc::clone(counts),
            hold: None,
            holding: None,
            fail_init: false,
        }
    }
}

impl Process for Service {
    type Done = Payload;
    fn init(&mut self, _: &InitContext, _: &str, _: Payload) -> Result<(), InitError> {
        if self.fail_init {
            return Err(InitError::failed("v3 is broken"));
        }
        self.counts.inits.fetch_add(1, SeqCst);
        Ok(())
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            match event {
                Event::Request(request) => {
                    let n = *request.payload::<u64>().ok_or("not a number")?;
                    request.reply((self.version, n));
                }
                Event::Message(m) if m.payload::<&str>() == Some(&"hold") => self.hold(),
                Event::Message(m) if m.payload::<&str>() == Some(&"hold, then finish") => {
                    self.hold();
                    out.finish(self.version);
                }
                Event::Cancel => out.finish(self.version),
                _ => {}
            }
        }
        Ok(())
    }

    fn close(&mut self) {
        self.counts.closes.fetch_add(1, SeqCst);
    }
}

impl Service {
    /// Stays in this step until the test says go (telling it first).
    fn hold(&self) {
        if let Some(holding) = &self.holding {
            holding.send(()).unwrap();
        }
        if let Some(hold) = &self.hold {
            hold.lock().unwrap().recv_timeout(WAIT).ok();
        }
    }

    /// A service that holds its step when told to; returns it, the sender
    /// that releases it and the receiver that says it is holding.
    fn holding(version: u32, counts: &Arc<Counts>) -> (Self, mpsc::Sender<()>, mpsc::Receiver<()>) {
        let (go, held) = mpsc::channel();
        let (holding, is_holding) = mpsc::channel();
        let mut service = Service::new(version, counts);
        service.hold = Some(Arc::new(Mutex::new(held)));
        service.holding = Some(holding);
        (service, go, is_holding)
    }
}

fn scheduler() -> Scheduler {
    let scheduler = Scheduler::builder().workers(2).build();
    scheduler.start();
    scheduler
}

fn answer(reply: &mut sched::actor::Reply) -> (u32, u64) {
    let value = reply.wait_timeout(WAIT).expect("answered");
    *value.downcast::<(u32, u64)>().unwrap()
}

#[test]
fn requests_queued_before_and_after_the_order_reach_the_new_version() {
    let scheduler = scheduler();
    let (old_counts, new_counts) = (Arc::new(Counts::default()), Arc::new(Counts::default()));
    let (v1, go, is_holding) = Service::holding(1, &old_counts);
    let pid = scheduler.spawn(v1).unwrap().pid();
    // Keep v1 inside a step while requests and the order queue up behind it.
    scheduler.send(pid, "hold").unwrap();
    is_holding.recv_timeout(WAIT).unwrap();
    let mut before: Vec<_> = (0..100u64)
        .map(|n| scheduler.ask(pid, Box::new(n) as Payload).unwrap())
        .collect();
    scheduler
        .context()
        .upgrade(pid, Service::new(2, &new_counts), "run", ())
        .unwrap();
    let mut after: Vec<_> = (100..200u64)
        .map(|n| scheduler.ask(pid, Box::new(n) as Payload).unwrap())
        .collect();
    go.send(()).unwrap();

    // The new `init` ran on this thread, before any of it.
    assert_eq!(new_counts.inits.load(SeqCst), 1);
    for (n, reply) in before.iter_mut().chain(after.iter_mut()).enumerate() {
        // Every request not yet handed to a step goes to the new process,
        // exactly once, in order.
        assert_eq!(answer(reply), (2, n as u64));
    }
    assert_eq!(old_counts.closes.load(SeqCst), 1, "the old close runs once");
    assert_eq!(new_counts.closes.load(SeqCst), 0, "the new one runs on");
    assert_eq!(scheduler.stats().live_processes, 1);
    scheduler.shutdown(WAIT);
    assert_eq!(new_counts.closes.load(SeqCst), 1);
}

#[test]
fn a_failed_init_leaves_the_old_process_running() {
    let scheduler = scheduler();
    let counts = Arc::new(Counts::default());
    let pid = scheduler.spawn(Service::new(1, &counts)).unwrap().pid();
    let mut broken = Service::new(3, &counts);
    broken.fail_init = true;
    match scheduler.context().upgrade(pid, broken, "run", ()) {
        Err(UpgradeRequestError::Init { pid: at, error }) => {
            assert_eq!(at, pid);
            assert_eq!(error.to_string(), "init failed: v3 is broken");
        }
        other => panic!("expected an init error, got {other:?}"),
    }
    assert_eq!(
        answer(&mut scheduler.ask(pid, Box::new(7u64) as Payload).unwrap()),
        (1, 7)
    );
    assert_eq!(counts.closes.load(SeqCst), 0, "nothing was closed");
    // The flag was given back: the next order goes through.
    scheduler
        .context()
        .upgrade(pid, Service::new(2, &counts), "run", ())
        .unwrap();
    assert_eq!(
        answer(&mut scheduler.ask(pid, Box::new(8u64) as Payload).unwrap()),
        (2, 8)
    );
    scheduler.shutdown(WAIT);
}

#[test]
fn an_unknown_pid_and_a_second_pending_order_are_refused() {
    let scheduler = scheduler();
    let counts = Arc::new(Counts::default());
    assert!(matches!(
        scheduler.context().upgrade(Pid::local(999_999), Service::new(2, &counts), "run", ()),
        Err(UpgradeRequestError::NoProcess(pid)) if pid == Pid::local(999_999)
    ));
    assert_eq!(counts.inits.load(SeqCst), 0, "no init for a refused order");

    let (v1, go, is_holding) = Service::holding(1, &counts);
    let pid = scheduler.spawn(v1).unwrap().pid();
    scheduler.send(pid, "hold").unwrap();
    is_holding.recv_timeout(WAIT).unwrap();
    scheduler
        .context()
        .upgrade(pid, Service::new(2, &counts), "run", ())
        .unwrap();
    assert!(matches!(
        scheduler.context().upgrade(pid, Service::new(3, &counts), "run", ()),
        Err(UpgradeRequestError::Pending(p)) if p == pid
    ));
    go.send(()).unwrap();
    assert_eq!(
        answer(&mut scheduler.ask(pid, Box::new(1u64) as Payload).unwrap()),
        (2, 1)
    );
    // Carried out: another may be ordered.
    scheduler
        .context()
        .upgrade(pid, Service::new(4, &counts), "run", ())
        .unwrap();
    assert_eq!(
        answer(&mut scheduler.ask(pid, Box::new(2u64) as Payload).unwrap()),
        (4, 2)
    );
    scheduler.shutdown(WAIT);
}

#[test]
fn an_order_that_arrives_after_the_end_only_closes_the_new_process() {
    let scheduler = scheduler();
    let (old_counts, new_counts) = (Arc::new(Counts::default()), Arc::new(Counts::default()));
    let (v1, go, is_holding) = Service::holding(1, &old_counts);
    let handle = scheduler.spawn(v1).unwrap();
    let pid = handle.pid();
    // v1 will finish in the step now holding; the order queues behind it.
    scheduler.send(pid, "hold, then finish").unwrap();
    is_holding.recv_timeout(WAIT).unwrap();
    scheduler
        .context()
        .upgrade(pid, Service::new(2, &new_counts), "run", ())
        .unwrap();
    go.send(()).unwrap();
    let outcome = handle.wait().unwrap();
    assert_eq!(outcome.downcast_ref::<u32>(), Some(&1), "v1 finished");
    assert_eq!(old_counts.closes.load(SeqCst), 1);
    // The new process never ran, but its init did: it is closed once.
    let deadline = std::time::Instant::now() + WAIT;
    while new_counts.closes.load(SeqCst) == 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(new_counts.closes.load(SeqCst), 1);
    assert_eq!(new_counts.inits.load(SeqCst), 1);
    assert_eq!(
        scheduler.stats().dead_letters,
        0,
        "an order is not a letter"
    );
    scheduler.shutdown(WAIT);
}

#[test]
fn no_request_is_lost_or_answered_twice_across_many_orders() {
    const SENDERS: u64 = 2;
    const PER_SENDER: u64 = 2_000;
    const ORDERS: u32 = 50;
    let scheduler = Arc::new(scheduler());
    let counts = Arc::new(Counts::default());
    let pid = scheduler.spawn(Service::new(0, &counts)).unwrap().pid();
    let senders: Vec<_> = (0..SENDERS)
        .map(|s| {
            let scheduler = Arc::clone(&scheduler);
            std::thread::spawn(move || {
                let replies: Vec<_> = (0..PER_SENDER)
                    .map(|i| {
                        scheduler
                            .ask(pid, Box::new(s * PER_SENDER + i) as Payload)
                            .unwrap()
                    })
                    .collect();
                replies
                    .into_iter()
                    .map(|mut reply| answer(&mut reply))
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut ordered = 0;
    let mut version = 1;
    while ordered < ORDERS {
        match scheduler
            .context()
            .upgrade(pid, Service::new(version, &counts), "run", ())
        {
            Ok(()) => {
                ordered += 1;
                version += 1;
            }
            Err(UpgradeRequestError::Pending(_)) => std::thread::yield_now(),
            Err(other) => panic!("unexpected refusal: {other}"),
        }
    }
    let mut seen: Vec<u64> = Vec::new();
    for sender in senders {
        let answers = sender.join().unwrap();
        // Answers to one sender come from versions that never go back.
        assert!(answers.windows(2).all(|w| w[0].0 <= w[1].0), "{answers:?}");
        seen.extend(answers.into_iter().map(|(_, n)| n));
    }
    seen.sort_unstable();
    let expected: Vec<u64> = (0..SENDERS * PER_SENDER).collect();
    assert_eq!(seen, expected, "each request answered exactly once");
    // Every instance but the last was closed exactly once.
    let deadline = std::time::Instant::now() + WAIT;
    while counts.closes.load(SeqCst) < ORDERS as usize && std::time::Instant::now() < deadline {
        std::thread::yield_now();
    }
    assert_eq!(counts.inits.load(SeqCst), ORDERS as usize + 1);
    assert_eq!(counts.closes.load(SeqCst), ORDERS as usize);
    scheduler.shutdown(WAIT);
    assert_eq!(counts.closes.load(SeqCst), ORDERS as usize + 1);
}
