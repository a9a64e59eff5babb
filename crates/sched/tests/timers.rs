//! Engine-owned timers: wake-ups, delayed sends, cancellation, ownership
//! by the process, dead letters, shutdown.

use sched::prelude::*;
use sched::After;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(10);

/// The timer events a `Sleeper` saw: tag, and when after its start.
type Seen = Arc<Mutex<Vec<(u64, Duration)>>>;

/// Sets the timers it is given on its first step, records every timer
/// event, and finishes after `expect` of them.
struct Sleeper {
    timers: Vec<(Duration, u64)>,
    cancel: Vec<u64>,
    expect: usize,
    started: Option<Instant>,
    seen: Seen,
    ids: Vec<(u64, TimerId)>,
    /// Sets every timer at one base instant plus its delay
    /// (`set_timer(instant)`), rather than each at `set_timer(delay)`, which
    /// reads the clock once per call: a loop that straddles a tick would
    /// otherwise give timers of one delay two different ticks.
    one_base: bool,
}

impl Sleeper {
    fn new(timers: &[(u64, u64)], cancel: &[u64], expect: usize) -> (Self, Seen) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sleeper = Sleeper {
            timers: timers
                .iter()
                .map(|&(ms, tag)| (Duration::from_millis(ms), tag))
                .collect(),
            cancel: cancel.to_vec(),
            expect,
            started: None,
            seen: seen.clone(),
            ids: Vec::new(),
            one_base: false,
        };
        (sleeper, seen)
    }

    /// As [`Sleeper::new`], with every deadline taken from one instant.
    fn from_one_instant(timers: &[(u64, u64)], expect: usize) -> (Self, Seen) {
        let (mut sleeper, seen) = Self::new(timers, &[], expect);
        sleeper.one_base = true;
        (sleeper, seen)
    }
}

impl Process for Sleeper {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        if self.started.is_none() {
            self.started = Some(Instant::now());
            let base = out.now();
            for &(delay, tag) in &self.timers {
                let id = if self.one_base {
                    out.set_timer(base + delay, Tag(tag))
                } else {
                    out.set_timer(delay, Tag(tag))
                };
                self.ids.push((tag, id));
            }
            for tag in &self.cancel {
                let (_, id) = self.ids.iter().find(|(t, _)| t == tag).expect("set");
                assert!(out.cancel_timer(*id), "pending, so cancelled");
                assert!(!out.cancel_timer(*id), "only once");
            }
        }
        let started = self.started.expect("set above");
        for event in events {
            if let Event::Timer { id, tag } = event {
                let expected = self
                    .ids
                    .iter()
                    .find(|(t, _)| *t == tag.0)
                    .map(|(_, id)| *id);
                assert_eq!(
                    expected,
                    Some(id),
                    "the event carries the id set_timer returned"
                );
                let mut seen = self.seen.lock().unwrap();
                seen.push((tag.0, started.elapsed()));
                if seen.len() == self.expect {
                    out.finish(());
                }
            }
        }
        Ok(())
    }
}

#[test]
fn timers_fire_after_their_delay_in_deadline_order() {
    let scheduler = Scheduler::builder().workers(2).build();
    scheduler.start();
    let (sleeper, seen) = Sleeper::new(&[(30, 3), (10, 1), (20, 2), (0, 0)], &[], 4);
    scheduler.spawn(sleeper).unwrap().wait().unwrap();
    let seen = seen.lock().unwrap();
    let tags: Vec<u64> = seen.iter().map(|(t, _)| *t).collect();
    assert_eq!(tags, [0, 1, 2, 3]);
    for (tag, at) in seen.iter() {
        assert!(
            *at >= Duration::from_millis(10 * tag),
            "tag {tag} fired at {at:?}"
        );
    }
    assert_eq!(scheduler.stats().pending_timers, 0);
}

#[test]
fn a_cancelled_timer_never_fires() {
    let scheduler = Scheduler::builder().workers(2).build();
    scheduler.start();
    // Tag 1 (5 ms) is cancelled; tag 2 (40 ms) fires, well after 1 would have.
    let (sleeper, seen) = Sleeper::new(&[(5, 1), (40, 2)], &[1], 1);
    scheduler.spawn(sleeper).unwrap().wait().unwrap();
    let tags: Vec<u64> = seen.lock().unwrap().iter().map(|(t, _)| *t).collect();
    assert_eq!(tags, [2]);
}

#[test]
fn a_process_that_ends_takes_its_timers_with_it() {
    let scheduler = Scheduler::builder().workers(1).build();
    scheduler.start();
    // Ten one-minute timers; the process is terminated long before.
    let timers: Vec<(u64, u64)> = (0..10).map(|i| (60_000, i)).collect();
    let (sleeper, _) = Sleeper::new(&timers, &[], 10);
    let handle = scheduler.spawn(sleeper).unwrap();
    let deadline = Instant::now() + WAIT;
    while scheduler.stats().pending_timers < 10 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(scheduler.stats().pending_timers, 10);
    scheduler.terminate(handle.pid()).unwrap();
    assert!(handle.wait().is_err());
    assert_eq!(
        scheduler.stats().pending_timers,
        0,
        "cancelled and freed at the end"
    );
}

/// Counts the messages it receives until cancelled; finishes on "stop".
struct Inbox {
    got: Arc<Mutex<Vec<String>>>,
}

impl Process for Inbox {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            match event {
                Event::Message(m) => {
                    let text = m.downcast::<&str>().map_err(|_| "a &str")?;
                    self.got.lock().unwrap().push(text.to_owned());
                    if text == "stop" {
                        out.finish(());
                    }
                }
                Event::Cancel => out.finish(()),
                _ => {}
            }
        }
        Ok(())
    }
}

fn inbox() -> (Inbox, Arc<Mutex<Vec<String>>>) {
    let got = Arc::new(Mutex::new(Vec::new()));
    (Inbox { got: got.clone() }, got)
}

#[test]
fn a_delayed_send_from_outside_arrives_after_its_delay_and_can_be_cancelled() {
    let scheduler = Scheduler::builder().workers(2).build();
    scheduler.start();
    let (process, got) = inbox();
    let handle = scheduler.spawn(process).unwrap();
    let sent = Instant::now();
    let never = scheduler
        .send(After(Duration::from_millis(10), handle.pid()), "never")
        .unwrap();
    scheduler
        .send(After(Duration::from_millis(30), handle.pid()), "stop")
        .unwrap();
    assert!(scheduler.context().cancel_timer(never));
    handle.wait().unwrap();
    assert!(sent.elapsed() >= Duration::from_millis(30));
    assert_eq!(*got.lock().unwrap(), ["stop"]);
}

#[test]
fn a_delayed_send_to_an_unknown_pid_is_refused_at_once() {
    let scheduler = Scheduler::builder().workers(1).build();
    let err = scheduler
        .send(After(Duration::from_millis(1), Pid::local(4242)), "x")
        .unwrap_err();
    assert_eq!(err.into_package().downcast::<&str>().ok(), Some("x"));
}

#[test]
fn a_delayed_send_never_reaches_a_later_process_under_the_same_pid() {
    let scheduler = Scheduler::builder().workers(2).build();
    scheduler.start();
    let pid = Pid::local(1_000_000);
    let (first, _) = inbox();
    let handle = scheduler
        .spawn(Spawn::new(first).method("run").input(()).at(pid))
        .unwrap();
    scheduler
        .send(After(Duration::from_millis(30), pid), "for the first")
        .unwrap();
    scheduler.terminate(pid).unwrap();
    assert!(handle.wait().is_err());
    let (second, got) = inbox();
    let handle = scheduler
        .spawn(Spawn::new(second).method("run").input(()).at(pid))
        .unwrap();
    let deadline = Instant::now() + WAIT;
    while scheduler.stats().dead_letters == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(
        scheduler.stats().dead_letters,
        1,
        "the message is a dead letter"
    );
    scheduler.send(pid, "stop").unwrap();
    handle.wait().unwrap();
    assert_eq!(
        *got.lock().unwrap(),
        ["stop"],
        "the new process never saw it"
    );
}

#[test]
fn delayed_messages_to_a_process_ended_by_shutdown_are_dead_letters() {
    let scheduler = Scheduler::builder().workers(2).build();
    scheduler.start();
    let (process, got) = inbox();
    let handle = scheduler.spawn(process).unwrap();
    for _ in 0..5 {
        scheduler
            .send(After(Duration::from_secs(60), handle.pid()), "late")
            .unwrap();
    }
    assert_eq!(scheduler.stats().pending_timers, 5);
    let report = scheduler.shutdown(WAIT);
    // Cancelled at their target's end, not kept until shutdown's sweep.
    assert_eq!(report.timers_cancelled, 0);
    assert_eq!(scheduler.stats().dead_letters, 5);
    assert_eq!(scheduler.stats().pending_timers, 0);
    assert!(got.lock().unwrap().is_empty());
}

#[test]
fn an_idle_scheduler_with_a_pending_timer_sleeps_until_it_is_due() {
    let scheduler = Scheduler::builder().workers(2).build();
    scheduler.start();
    let (sleeper, seen) = Sleeper::new(&[(300, 1)], &[], 1);
    let handle = scheduler.spawn(sleeper).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    let parks_before = scheduler.stats().totals().parks;
    handle.wait().unwrap();
    let parks = scheduler.stats().totals().parks - parks_before;
    // Polling every millisecond would park about 250 times per worker.
    assert!(
        parks <= 20,
        "{parks} parks while waiting 250 ms for one timer"
    );
    assert_eq!(seen.lock().unwrap().len(), 1);
}

/// One process with many timers pending (past the point where its list of
/// pending timers becomes a set): cancelling every other one returns `true`
/// once and `false` after, exactly the others fire, and the list goes back
/// to a short one as they do (the engine checks each event against it).
#[test]
fn a_process_with_many_timers_cancels_and_receives_exactly_the_right_ones() {
    const N: u64 = 1_000;
    struct Many {
        ids: Vec<TimerId>,
        fired: Vec<u64>,
        second_cancels: usize,
    }
    impl Process for Many {
        type Done = Payload;
        fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
            if self.ids.is_empty() {
                let at = Instant::now() + Duration::from_millis(20);
                self.ids = (0..N).map(|n| out.set_timer(at, Tag(n))).collect();
                for id in self.ids.iter().step_by(2) {
                    assert!(out.cancel_timer(*id), "pending, so cancelled");
                }
                self.second_cancels = self
                    .ids
                    .iter()
                    .step_by(2)
                    .filter(|id| out.cancel_timer(**id))
                    .count();
                return Ok(());
            }
            for event in events {
                if let Event::Timer { tag, .. } = event {
                    self.fired.push(tag.0);
                }
            }
            if self.fired.len() as u64 == N / 2 {
                let mut fired = std::mem::take(&mut self.fired);
                fired.sort_unstable();
                out.finish((fired, self.second_cancels));
            }
            Ok(())
        }
    }
    let scheduler = Scheduler::builder().workers(2).build();
    scheduler.start();
    let done = scheduler
        .spawn(Many {
            ids: Vec::new(),
            fired: Vec::new(),
            second_cancels: 0,
        })
        .unwrap();
    let outcome = done.wait().unwrap();
    let (fired, second_cancels) = outcome.downcast_ref::<(Vec<u64>, usize)>().unwrap();
    assert_eq!(
        *second_cancels, 0,
        "a cancelled timer cannot be cancelled again"
    );
    assert_eq!(*fired, (0..N).filter(|n| n % 2 == 1).collect::<Vec<_>>());
    scheduler.shutdown(Duration::from_secs(5));
}

/// A worker fires the timers due at one tick a few dozen at a time: a
/// burst of hundreds of timers of one process, many on the same tick,
/// still reaches it in deadline order (equal deadlines in the order set),
/// every one of them once.
#[test]
fn a_burst_of_due_timers_larger_than_a_firing_chunk_arrives_in_deadline_order() {
    let scheduler = Scheduler::builder().workers(1).build();
    scheduler.start();
    // 400 timers over 8 deadlines (50 per tick), set out of order, all
    // from one base instant so that equal delays mean equal deadlines
    // however long the loop that sets them takes.
    let timers: Vec<(u64, u64)> = (0..400u64).map(|i| (1 + (i * 7) % 8, i)).collect();
    let (sleeper, seen) = Sleeper::from_one_instant(&timers, timers.len());
    scheduler.spawn(sleeper).unwrap().wait().unwrap();
    let tags: Vec<u64> = seen.lock().unwrap().iter().map(|(t, _)| *t).collect();
    let mut expected = timers.clone();
    // Stable: equal deadlines keep the order they were set in.
    expected.sort_by_key(|&(ms, _)| ms);
    let expected: Vec<u64> = expected.iter().map(|&(_, tag)| tag).collect();
    assert_eq!(tags, expected);
}

/// Delayed messages from one sender to one target with the same delay
/// arrive in the order sent, however many fall due together.
#[test]
fn many_delayed_messages_due_together_arrive_in_the_order_sent() {
    let scheduler = Scheduler::builder().workers(2).build();
    scheduler.start();
    let (process, got) = inbox();
    let handle = scheduler.spawn(process).unwrap();
    let texts: Vec<&'static str> = (0..300)
        .map(|i| &*Box::leak(format!("m{i}").into_boxed_str()))
        .chain(["stop"])
        .collect();
    for &text in &texts {
        scheduler
            .send(After(Duration::from_millis(20), handle.pid()), text)
            .unwrap();
    }
    handle.wait().unwrap();
    assert_eq!(*got.lock().unwrap(), texts);
}

/// Thousands of processes whose timers fall due on the same tick are all
/// woken, each once.
#[test]
fn thousands_of_timers_due_on_one_tick_each_wake_their_process_once() {
    let scheduler = Scheduler::builder().workers(2).build();
    scheduler.start();
    let handles: Vec<_> = (0..5_000)
        .map(|_| {
            let (sleeper, seen) = Sleeper::new(&[(15, 1)], &[], 1);
            (scheduler.spawn(sleeper).unwrap(), seen)
        })
        .collect();
    for (handle, seen) in handles {
        handle.wait().unwrap();
        assert_eq!(seen.lock().unwrap().len(), 1);
    }
    assert_eq!(scheduler.stats().pending_timers, 0);
}

/// On its first message: sends `ping` to `to` after 20 ms (a timer in the
/// wheel of the worker running it), then blocks until `gate` opens.
struct SendsThenBlocks {
    to: Pid,
    gate: std::sync::mpsc::Receiver<()>,
}

impl Process for SendsThenBlocks {
    type Done = ();
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        if events.any(|e| matches!(e, Event::Message(_))) {
            out.send(After(Duration::from_millis(20), self.to), "ping")?;
            let _ = self.gate.recv();
            out.finish(());
        }
        Ok(())
    }
}

/// Hands every message it reads to the test.
struct Forward(std::sync::mpsc::Sender<&'static str>);

impl Process for Forward {
    type Done = ();
    fn step(&mut self, events: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            if let Event::Message(m) = event {
                let _ = self.0.send(m.downcast::<&'static str>().unwrap_or("?"));
            }
        }
        Ok(())
    }
}

#[test]
fn a_step_that_blocks_does_not_hold_back_the_timers_of_its_worker() {
    let scheduler = Scheduler::builder().workers(2).build();
    scheduler.start();
    let (got, read) = std::sync::mpsc::channel();
    let receiver = scheduler.spawn(Forward(got)).unwrap().pid();
    let (open, gate) = std::sync::mpsc::channel();
    let blocker = scheduler
        .spawn(SendsThenBlocks { to: receiver, gate })
        .unwrap()
        .pid();
    scheduler.send(blocker, ()).unwrap();
    // The delayed send's timer is in the wheel of the worker now held in
    // the blocker's step: another thread fires it, and the other worker
    // runs the receiver.
    let arrived = read.recv_timeout(WAIT);
    open.send(()).unwrap();
    assert_eq!(
        arrived,
        Ok("ping"),
        "the timer waited for its blocked worker"
    );
    scheduler.shutdown(Duration::from_secs(1));
}
