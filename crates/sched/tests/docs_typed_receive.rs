//! The promises of typed receive (`Events::typed`, `Accepts`,
//! `Event<M = Package>`) and of `WorkerStats::parks`, checked from their
//! documentation alone:
//!
//! - a process that accepts one message type reads each message as that
//!   type, in per-sender order, across as many steps as it takes;
//! - what a step does not read of the typed iterator is kept for its next
//!   steps, still typed, still in order;
//! - a message of another type sent by bare PID is dropped (once, even when
//!   its `Drop` panics) and does not stop the messages after it;
//! - every other event (timers, completions, downs, exits, requests,
//!   replies, the cancel) comes through as it is, and a timer cancelled
//!   while reading typed is never handed out;
//! - an urgent message read typed is the value sent, unwrapped, ahead of
//!   the backlog;
//! - `parks` counts the times a worker slept: not while it is busy, not
//!   while it sleeps on, and once per sleep it wakes from.

use std::fmt::Debug;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sched::command::{Command, CommandId, Completer, Rejected};
use sched::prelude::*;
use sched::process::Accepts;
use sched::sim::Config;
use sched::{After, Urgent};

/// Generous: every wait in this file is for something that takes
/// microseconds on an idle machine.
const WAIT: Duration = Duration::from_secs(10);

/// Polls `ready` until it holds, or fails the test after `WAIT`.
fn wait_until(what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !ready() {
        assert!(Instant::now() < deadline, "waited {WAIT:?} for {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Everything the process-wide `tracing` subscriber writes, shared with
/// the tests (installed once, by the first test that asks for it).
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The warnings logged so far (by every test of this file), installing
/// the subscriber that captures them on first use.
fn warnings() -> &'static Captured {
    static CAPTURED: std::sync::OnceLock<Captured> = std::sync::OnceLock::new();
    CAPTURED.get_or_init(|| {
        let captured = Captured::default();
        let writer = captured.clone();
        tracing_subscriber::fmt()
            .with_max_level(tracing::Level::WARN)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .init();
        captured
    })
}

/// The captured lines that mention `needle`.
fn warned_about(needle: &str) -> Vec<String> {
    let text = warnings().0.lock().unwrap().clone();
    String::from_utf8_lossy(&text)
        .lines()
        .filter(|line| line.contains("WARN") && line.contains(needle))
        .map(str::to_owned)
        .collect()
}

/// A message of a type the receiver does not accept; counts its drops.
struct Stranger(Arc<AtomicUsize>);

impl Drop for Stranger {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
    }
}

// ---------------------------------------------------------------------
// Per-sender order across many steps.

/// A message numbered in its sender's sequence.
struct Numbered {
    sender: usize,
    n: u64,
}

/// Checks that each sender's numbers come in order, without gaps, and
/// finishes with (steps, out-of-order reports) once it has `expect`.
struct InOrder {
    next: Vec<u64>,
    expect: u64,
    got: u64,
    steps: u64,
    wrong: Vec<String>,
}

impl Accepts for InOrder {
    type Message = Numbered;
}

impl Process for InOrder {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        self.steps += 1;
        for event in events.typed::<Self>() {
            match event {
                Event::Message(Numbered { sender, n }) => {
                    if self.next[sender] != n && self.wrong.len() < 10 {
                        self.wrong.push(format!(
                            "sender {sender}: {n} where {} was due",
                            self.next[sender]
                        ));
                    }
                    self.next[sender] = n + 1;
                    self.got += 1;
                }
                Event::Cancel => out.finish((self.steps, std::mem::take(&mut self.wrong))),
                _ => {}
            }
        }
        if self.got == self.expect {
            out.finish((self.steps, std::mem::take(&mut self.wrong)));
        }
        Ok(())
    }
}

/// Sends its numbers to `to` from its steps, `per_step` per step.
struct StepSender {
    to: sched::message::Addr<Numbered>,
    sender: usize,
    next: u64,
    count: u64,
    per_step: u64,
}

impl Process for StepSender {
    type Done = Payload;
    fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        let end = (self.next + self.per_step).min(self.count);
        while self.next < end {
            let n = self.next;
            out.send(
                self.to,
                Numbered {
                    sender: self.sender,
                    n,
                },
            )?;
            self.next += 1;
        }
        if self.next == self.count {
            out.finish(());
        } else {
            out.continue_();
        }
        Ok(())
    }
}

#[test]
fn typed_reads_keep_each_senders_order_across_many_steps() {
    const THREADS: usize = 4;
    const PROCESSES: usize = 2;
    const EACH: u64 = 5_000;
    let scheduler = Scheduler::builder().workers(2).build();
    scheduler.start();
    let mut done = scheduler
        .spawn(InOrder {
            next: vec![0; THREADS + PROCESSES],
            expect: EACH * (THREADS + PROCESSES) as u64,
            got: 0,
            steps: 0,
            wrong: Vec::new(),
        })
        .unwrap();
    let to = done.addr::<InOrder>();
    let senders: Vec<Completion> = (0..PROCESSES)
        .map(|i| {
            scheduler
                .spawn(StepSender {
                    to,
                    sender: THREADS + i,
                    next: 0,
                    count: EACH,
                    per_step: 100,
                })
                .unwrap()
        })
        .collect();
    std::thread::scope(|s| {
        for sender in 0..THREADS {
            let scheduler = &scheduler;
            s.spawn(move || {
                for n in 0..EACH {
                    scheduler.send(to, Numbered { sender, n }).unwrap();
                }
            });
        }
    });
    for mut sender in senders {
        sender.wait_timeout(WAIT).expect("no error");
    }
    let outcome = done.wait_timeout(WAIT).expect("all received");
    let (steps, wrong) = outcome
        .downcast_ref::<(u64, Vec<String>)>()
        .expect("its report");
    eprintln!("{} messages in {steps} steps", EACH * 6);
    assert!(wrong.is_empty(), "out of order: {wrong:?}");
    assert_eq!(scheduler.shutdown(WAIT).forced, 0);
}

// ---------------------------------------------------------------------
// Partial reads of the typed iterator.

/// Reads at most one typed message per step (and nothing at all on every
/// third step), continuing while events are left; finishes with what it
/// read once it has `expect` messages.
struct OneAtATime {
    read: Vec<(u8, u32)>,
    expect: usize,
    steps: u64,
    empty_handed: u64,
}

impl Accepts for OneAtATime {
    type Message = (u8, u32);
}

impl Process for OneAtATime {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        self.steps += 1;
        if self.steps.is_multiple_of(3) {
            // Reads nothing: everything is kept for the next step.
            out.continue_();
            return Ok(());
        }
        match events.typed::<Self>().next() {
            Some(Event::Message(m)) => self.read.push(m),
            Some(Event::Cancel) => {
                out.finish(std::mem::take(&mut self.read));
                return Ok(());
            }
            Some(_) => {}
            None => self.empty_handed += 1,
        }
        if self.read.len() == self.expect {
            out.finish(std::mem::take(&mut self.read));
        } else if !events.is_empty() {
            out.continue_();
        }
        Ok(())
    }
}

#[test]
fn a_step_that_reads_part_of_the_typed_events_gets_the_rest_later_in_order() {
    const EACH: u32 = 300;
    let strangers = Arc::new(AtomicUsize::new(0));
    let scheduler = Scheduler::builder().workers(2).build();
    let mut done = scheduler
        .spawn(OneAtATime {
            read: Vec::new(),
            expect: 2 * EACH as usize,
            steps: 0,
            empty_handed: 0,
        })
        .unwrap();
    let to = done.addr::<OneAtATime>();
    let pid = done.pid();
    // A backlog queued before the scheduler runs: the first step sees all
    // of it and reads one.
    let mut sent_strangers = 0;
    for n in 0..EACH {
        scheduler.send(to, (0u8, n)).unwrap();
        if n % 60 == 0 {
            scheduler.send(pid, Bomb::<0>::new(&strangers)).unwrap();
            sent_strangers += 1;
        } else if n % 30 == 0 {
            scheduler
                .send(pid, Stranger(Arc::clone(&strangers)))
                .unwrap();
            sent_strangers += 1;
        }
    }
    scheduler.start();
    // A second sender while the backlog is being read.
    std::thread::scope(|s| {
        let scheduler = &scheduler;
        let strangers = &strangers;
        let sent = s.spawn(move || {
            let mut sent = 0;
            for n in 0..EACH {
                scheduler.send(to, (1u8, n)).unwrap();
                if n % 60 == 0 {
                    scheduler.send(pid, Bomb::<64>::new(strangers)).unwrap();
                    sent += 1;
                } else if n % 30 == 0 {
                    scheduler
                        .send(pid, Stranger(Arc::clone(strangers)))
                        .unwrap();
                    sent += 1;
                }
            }
            sent
        });
        sent_strangers += sent.join().unwrap();
    });
    let read = done.wait_timeout(WAIT).expect("all read");
    let read = read.downcast_ref::<Vec<(u8, u32)>>().expect("its list");
    for sender in 0..2u8 {
        let from: Vec<u32> = read
            .iter()
            .filter(|(s, _)| *s == sender)
            .map(|(_, n)| *n)
            .collect();
        assert_eq!(
            from,
            (0..EACH).collect::<Vec<_>>(),
            "sender {sender}'s messages, as read one per step"
        );
    }
    // Each stranger that came before its sender's last message was read
    // (and dropped) on the way: exactly once each.
    wait_until("every stranger dropped", || {
        strangers.load(SeqCst) >= sent_strangers
    });
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(strangers.load(SeqCst), sent_strangers, "dropped once each");
    assert_eq!(scheduler.shutdown(WAIT).forced, 0);

    // What the last step leaves unread, strangers included, is a dead
    // letter when the process ends (and a stranger is dropped once).
    let strangers = Arc::new(AtomicUsize::new(0));
    let scheduler = Scheduler::builder().workers(1).build();
    let mut done = scheduler.spawn(UntilLast(Vec::new())).unwrap();
    let to = done.addr::<UntilLast>();
    scheduler.send(to, "a").unwrap();
    scheduler.send(to, "last").unwrap();
    scheduler.send(to, "b").unwrap();
    scheduler
        .send(done.pid(), Stranger(Arc::clone(&strangers)))
        .unwrap();
    scheduler.send(to, "c").unwrap();
    scheduler.start();
    let read = done.wait_timeout(WAIT).expect("ended");
    assert_eq!(read.downcast_ref::<Vec<&str>>(), Some(&vec!["a", "last"]));
    wait_until("three dead letters", || scheduler.stats().dead_letters >= 3);
    assert_eq!(scheduler.stats().dead_letters, 3, "b, the stranger and c");
    assert_eq!(
        strangers.load(SeqCst),
        1,
        "the unread stranger dropped once"
    );
    assert_eq!(scheduler.shutdown(WAIT).forced, 0);
}

/// Reads typed until "last", and returns at once, leaving the rest.
struct UntilLast(Vec<&'static str>);

impl Accepts for UntilLast {
    type Message = &'static str;
}

impl Process for UntilLast {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events.typed::<Self>() {
            if let Event::Message(word) = event {
                self.0.push(word);
                if word == "last" {
                    out.finish(std::mem::take(&mut self.0));
                    return Ok(());
                }
            }
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------
// Strangers from several threads.

/// The same layout as a `u64` pair, but another type.
#[allow(dead_code)]
struct Impostor(u64, u64);

/// Collects every `u64` it reads; finishes with them at `expect`.
struct Gather {
    got: Vec<u64>,
    expect: usize,
}

impl Accepts for Gather {
    type Message = u64;
}

impl Process for Gather {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events.typed::<Self>() {
            match event {
                Event::Message(n) => self.got.push(n),
                Event::Cancel => out.finish(std::mem::take(&mut self.got)),
                _ => {}
            }
        }
        if self.got.len() == self.expect {
            out.finish(std::mem::take(&mut self.got));
        }
        Ok(())
    }
}

#[test]
fn strangers_from_many_threads_are_dropped_once_and_every_typed_message_arrives_once() {
    const THREADS: u64 = 4;
    const EACH: u64 = 3_000;
    let drops = Arc::new(AtomicUsize::new(0));
    let scheduler = Scheduler::builder().workers(2).build();
    scheduler.start();
    let mut done = scheduler
        .spawn(Gather {
            got: Vec::new(),
            expect: (THREADS * EACH) as usize,
        })
        .unwrap();
    let to = done.addr::<Gather>();
    let pid = done.pid();
    let strangers: usize = std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let scheduler = &scheduler;
                let drops = &drops;
                s.spawn(move || {
                    let mut strangers = 0;
                    for i in 0..EACH {
                        let n = t * 1_000_000 + i;
                        // Strangers first, so that each comes before its
                        // sender's last typed message. Values a mix-up
                        // would put among the typed ones.
                        match i % 5 {
                            0 => scheduler.send(pid, Stranger(Arc::clone(drops))).unwrap(),
                            1 => scheduler.send(pid, n as u32 + 500_000).unwrap(),
                            2 => scheduler.send(pid, n as i64 + 500_000).unwrap(),
                            3 => scheduler.send(pid, Impostor(n + 500_000, 0)).unwrap(),
                            _ => scheduler.send(pid, format!("{n}")).unwrap(),
                        }
                        if i % 5 == 0 {
                            strangers += 1;
                        }
                        scheduler.send(to, n).unwrap();
                    }
                    strangers
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    let got = done.wait_timeout(WAIT).expect("all read");
    let mut got = got.downcast::<Vec<u64>>().expect("its list");
    got.sort_unstable();
    let mut expected: Vec<u64> = (0..THREADS)
        .flat_map(|t| (0..EACH).map(move |i| t * 1_000_000 + i))
        .collect();
    expected.sort_unstable();
    assert_eq!(got.len(), expected.len());
    assert!(
        *got == expected,
        "a typed message lost, doubled or invented"
    );
    wait_until("every counted stranger dropped", || {
        drops.load(SeqCst) >= strangers
    });
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(drops.load(SeqCst), strangers, "each stranger dropped once");
    assert_eq!(scheduler.shutdown(WAIT).forced, 0);
}

// ---------------------------------------------------------------------
// A stranger whose drop panics.

/// A stranger whose `Drop` panics (unless already unwinding, which would
/// abort the test binary whoever is at fault); `N` pads it (0: one word,
/// inline; 64: too big to travel inline).
struct Bomb<const N: usize>(Arc<AtomicUsize>, [u8; N]);

impl<const N: usize> Bomb<N> {
    fn new(count: &Arc<AtomicUsize>) -> Self {
        Bomb(Arc::clone(count), [0; N])
    }
}

impl<const N: usize> Drop for Bomb<N> {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
        if !std::thread::panicking() {
            panic!("a stranger's drop panics");
        }
    }
}

/// Notes each `&str` it reads; finishes with them at "last".
struct Words(Vec<&'static str>);

impl Accepts for Words {
    type Message = &'static str;
}

impl Process for Words {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events.typed::<Self>() {
            match event {
                Event::Message(word) => {
                    self.0.push(word);
                    if word == "last" {
                        out.finish(std::mem::take(&mut self.0));
                    }
                }
                Event::Cancel => out.finish(std::mem::take(&mut self.0)),
                _ => {}
            }
        }
        Ok(())
    }
}

#[test]
fn a_stranger_whose_drop_panics_takes_nothing_down() {
    let _ = warnings();
    let bombs = Arc::new(AtomicUsize::new(0));
    let scheduler = Scheduler::builder().workers(1).build();
    scheduler.start();
    let mut done = scheduler.spawn(Words(Vec::new())).unwrap();
    let words = done.addr::<Words>();
    let pid = done.pid();
    // One at a time (each read before the next is sent), then in one
    // batch: inline, boxed, urgent.
    scheduler.send(words, "one").unwrap();
    scheduler.send(pid, Bomb::<0>::new(&bombs)).unwrap();
    wait_until("the first bomb read", || bombs.load(SeqCst) == 1);
    scheduler.send(words, "two").unwrap();
    scheduler.send(pid, Bomb::<64>::new(&bombs)).unwrap();
    scheduler
        .send(pid, Urgent::new(Bomb::<0>::new(&bombs)))
        .unwrap();
    scheduler
        .send(pid, Urgent::new(Bomb::<64>::new(&bombs)))
        .unwrap();
    scheduler.send(words, "last").unwrap();
    let read = done
        .wait_timeout(WAIT)
        .expect("finished, not taken down by a stranger's drop");
    assert_eq!(
        read.downcast_ref::<Vec<&str>>().expect("its list"),
        &["one", "two", "last"]
    );
    assert_eq!(bombs.load(SeqCst), 4, "each bomb dropped once");
    // "dropped with a warning naming the process".
    let warned = warned_about(&format!("pid={pid}"));
    assert!(
        warned
            .iter()
            .any(|line| line.contains("another type") && line.contains("&str")),
        "no warning names the process: {warned:?}"
    );
    // The worker is still there and serves the next process.
    let mut next = scheduler.spawn(Words(Vec::new())).unwrap();
    scheduler.send(next.addr::<Words>(), "last").unwrap();
    next.wait_timeout(WAIT).expect("finished");
    assert_eq!(scheduler.shutdown(WAIT).forced, 0);
}

// ---------------------------------------------------------------------
// Every other event comes through as it is.

const DOUBLE: CommandId = CommandId(11);

/// Finishes at its first message.
struct EndsOnMessage;

impl Process for EndsOnMessage {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        if events.any(|e| matches!(e, Event::Message(_))) {
            out.finish(());
        }
        Ok(())
    }
}

/// Fails at its first message.
struct FailsOnMessage;

impl Process for FailsOnMessage {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
        if events.any(|e| matches!(e, Event::Message(_))) {
            return Err("asked to fail".into());
        }
        Ok(())
    }
}

/// Answers a `u64` question with its square; finishes when cancelled.
struct Squarer;

impl Process for Squarer {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            match event {
                Event::Request(request) => {
                    let n = *request.payload::<u64>().ok_or("not a u64")?;
                    request.reply(n * n);
                }
                Event::Cancel => out.finish(()),
                _ => {}
            }
        }
        Ok(())
    }
}

/// On its first step sets a timer, yields a command, asks the squarer,
/// monitors one process, links (trapping exits) to another and sends
/// itself a 0 ("ready"); then logs every event it reads typed, until the
/// cancel.
struct Everything {
    log: Arc<Mutex<Vec<String>>>,
    squarer: Pid,
    watched: Pid,
    linked: Pid,
    started: bool,
}

impl Accepts for Everything {
    type Message = u64;
}

impl Process for Everything {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        let mut log = Vec::new();
        if !self.started {
            self.started = true;
            out.set_timer(Duration::from_millis(1), Tag(7));
            out.yield_command(DOUBLE, Tag(3), Box::new(21u64));
            let _ = out.ask(self.squarer, Box::new(12u64) as Payload, WAIT)?;
            let _ = out.monitor(self.watched);
            out.trap_exits(true);
            out.link(self.linked);
            // Read at a later step: by then all of the above is in place.
            out.send(out.pid(), 0u64)?;
            log.push("setup".to_owned());
        }
        for event in events.typed::<Self>() {
            log.push(match event {
                Event::Message(0) => "ready".to_owned(),
                Event::Message(n) => {
                    let n: u64 = n; // typed: no package, no downcast
                    format!("message {n}")
                }
                Event::Timer { tag: Tag(t), .. } => format!("timer {t}"),
                Event::Completion {
                    tag: Tag(t),
                    result,
                } => {
                    let value = result.map(|p| p.downcast_ref::<u64>().copied());
                    format!("completion {t} {value:?}")
                }
                Event::Reply { result, .. } => {
                    let answer = result.map(|p| p.downcast_ref::<u64>().copied());
                    format!("reply {answer:?}")
                }
                Event::Down(down) => format!(
                    "down {} {:?}",
                    if down.pid == self.watched {
                        "watched"
                    } else {
                        "someone else"
                    },
                    down.reason
                ),
                Event::Exit { pid, reason, .. } => format!(
                    "exit {} {reason:?}",
                    if pid == self.linked {
                        "linked"
                    } else {
                        "someone else"
                    }
                ),
                Event::Request(request) => {
                    let n = *request.payload::<u64>().ok_or("not a u64")?;
                    request.reply(n + 1);
                    format!("request {n}")
                }
                Event::Cancel => {
                    out.finish(());
                    "cancel".to_owned()
                }
                _ => "something else".to_owned(),
            });
        }
        self.log.lock().unwrap().extend(log);
        Ok(())
    }
}

#[test]
fn every_event_but_messages_comes_through_typed_reading_as_it_is() {
    let scheduler = Scheduler::builder()
        .workers(2)
        .handler(
            DOUBLE,
            |cmd: Command, done: Completer| -> Result<(), Rejected> {
                let n = *cmd.data.downcast::<u64>().expect("a u64");
                let _ = done.complete(Box::new(n * 2) as Payload);
                Ok(())
            },
        )
        .build();
    scheduler.start();
    let squarer = scheduler.spawn(Squarer).unwrap().pid();
    let watched = scheduler.spawn(EndsOnMessage).unwrap().pid();
    let linked = scheduler.spawn(FailsOnMessage).unwrap().pid();
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut done = scheduler
        .spawn(Everything {
            log: Arc::clone(&log),
            squarer,
            watched,
            linked,
            started: false,
        })
        .unwrap();
    let has = |entry: &str| log.lock().unwrap().iter().any(|e| e == entry);
    wait_until("the setup in place", || has("ready"));
    // Now that the monitor and the link are in place, end both.
    scheduler.send(watched, "end").unwrap();
    scheduler.send(linked, "fail").unwrap();
    scheduler.send(done.addr::<Everything>(), 5u64).unwrap();
    let mut answer = scheduler
        .ask(done.pid(), Box::new(9u64) as Payload)
        .unwrap();
    let answer = answer.wait_timeout(WAIT).expect("answered");
    assert_eq!(answer.downcast_ref::<u64>(), Some(&10));
    let mut expected = vec![
        "setup",
        "ready",
        "timer 7",
        "completion 3 Ok(Some(42))",
        "reply Ok(Some(144))",
        "down watched Normal",
        "exit linked Error",
        "message 5",
        "request 9",
    ];
    wait_until("every kind of event", || expected.iter().all(|e| has(e)));
    scheduler.context().cancel(done.pid()).unwrap();
    done.wait_timeout(WAIT).expect("finished");
    expected.push("cancel");
    let mut seen = log.lock().unwrap().clone();
    assert_eq!(seen.last().map(String::as_str), Some("cancel"));
    seen.sort();
    expected.sort_unstable();
    assert_eq!(seen, expected, "each event exactly once, as it is");
    assert_eq!(scheduler.shutdown(WAIT).forced, 0);
}

// ---------------------------------------------------------------------
// A timer cancelled while reading typed.

fn spin(time: Duration) {
    let until = Instant::now() + time;
    while Instant::now() < until {
        std::hint::spin_loop();
    }
}

/// Sends itself 42 in 1 ms and sets a timeout for 2 ms, then keeps its
/// worker busy past both; reading typed, it cancels the timeout when the
/// 42 comes, and must never see the timeout afterwards.
struct ReplyOrTimeout {
    timeout: Option<TimerId>,
}

impl Accepts for ReplyOrTimeout {
    type Message = u64;
}

impl Process for ReplyOrTimeout {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        let Some(timeout) = self.timeout else {
            out.send(After(Duration::from_millis(1), out.pid()), 42u64)?;
            self.timeout = Some(out.set_timer(Duration::from_millis(2), Tag(1)));
            spin(Duration::from_millis(20));
            return Ok(());
        };
        for event in events.typed::<Self>() {
            match event {
                Event::Message(n) => {
                    out.cancel_timer(timeout);
                    out.finish(Some(n));
                }
                // Last call wins: seeing the timer at all changes the
                // outcome, even after the message in the same batch.
                Event::Timer { tag: Tag(1), .. } => out.finish(None::<u64>),
                _ => {}
            }
        }
        Ok(())
    }
}

#[test]
fn a_timer_cancelled_while_reading_typed_is_never_handed_out() {
    let scheduler = Scheduler::builder().workers(1).build();
    scheduler.start();
    for round in 0..5 {
        let mut done = scheduler
            .spawn(ReplyOrTimeout { timeout: None })
            .unwrap()
            .typed::<Option<u64>>();
        let got = done.wait_timeout(WAIT).expect("finished");
        assert_eq!(got, Some(42), "round {round}: the cancelled timer was seen");
    }
    assert_eq!(scheduler.stats().pending_timers, 0);
    assert_eq!(scheduler.shutdown(WAIT).forced, 0);
}

// ---------------------------------------------------------------------
// Urgent messages read typed.

/// Reads one typed message per step and waits for the next arrival,
/// noting each, until "stop".
struct UrgentReader(Vec<String>);

impl Accepts for UrgentReader {
    type Message = &'static str;
}

impl Process for UrgentReader {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        if let Some(Event::Message(text)) = events.typed::<Self>().next() {
            let text: &str = text; // the value sent, not the `Urgent` wrapper
            self.0.push(text.to_owned());
            if text == "stop" {
                out.finish(std::mem::take(&mut self.0));
            }
        }
        Ok(())
    }
}

#[test]
fn read_typed_urgent_messages_are_unwrapped_and_every_lane_keeps_its_place() {
    let drops = Arc::new(AtomicUsize::new(0));
    let mut sim = Scheduler::builder().simulation(Config::seed(5).workers(1));
    let mut reader = sim
        .context()
        .spawn(UrgentReader(Vec::new()))
        .expect("spawned");
    let pid = reader.pid();
    sim.context().send(pid, "work").expect("alive");
    sim.context().send(pid, Urgent::new("1")).expect("alive");
    // An urgent stranger: dropped, and the next typed one read instead.
    sim.context()
        .send(pid, Urgent::new(Stranger(Arc::clone(&drops))))
        .expect("alive");
    sim.context().send(pid, Urgent::new("2")).expect("alive");
    // One step: it reads "1" and leaves the stranger, "2" and "work".
    sim.run().expect("quiet");
    sim.context().send(pid, Urgent::new("3")).expect("alive");
    sim.run().expect("quiet");
    for poke in ["poke", "poke"] {
        sim.context().send(pid, poke).expect("alive");
        sim.run().expect("quiet");
    }
    sim.context().send(pid, Urgent::new("stop")).expect("alive");
    sim.run().expect("quiet");
    let read = reader.try_take().expect("ended").expect("finished");
    let read = read.downcast_ref::<Vec<String>>().expect("its list");
    // "2", left unread behind the stranger, kept its urgency: read before
    // "3", which came later, and both before "work", which came first.
    assert_eq!(read, &["1", "2", "3", "work", "stop"]);
    assert_eq!(drops.load(SeqCst), 1, "the urgent stranger dropped once");

    // The system lane too: a shutdown's cancel is read, typed, before a
    // backlog of 10 000 messages (strangers among them) that came first.
    let mut sim = Scheduler::builder().simulation(Config::seed(6).workers(1));
    let mut slow = sim
        .context()
        .spawn(OnePerStep { read: 0 })
        .expect("spawned");
    for i in 0..10_000u32 {
        sim.context().send(slow.pid(), i).expect("alive");
        if i % 100 == 0 {
            sim.context()
                .send(slow.pid(), Stranger(Arc::clone(&drops)))
                .expect("alive");
        }
    }
    let report = sim.shutdown(Duration::from_secs(10));
    assert_eq!(report.forced, 0);
    let read = slow.try_take().expect("ended").expect("finished");
    assert_eq!(
        read.downcast_ref::<u32>(),
        Some(&0),
        "messages read before the cancel"
    );
}

/// Reads one typed event per step, continuing while events are left;
/// finishes at the cancel with how many messages it read before it.
struct OnePerStep {
    read: u32,
}

impl Accepts for OnePerStep {
    type Message = u32;
}

impl Process for OnePerStep {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        match events.typed::<Self>().next() {
            Some(Event::Cancel) => {
                out.finish(self.read);
                return Ok(());
            }
            Some(Event::Message(_)) => self.read += 1,
            _ => {}
        }
        if !events.is_empty() {
            out.continue_();
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------
// Messages of every size and alignment.

/// Collects `expect` messages of type `M`, then finishes with them.
struct Collect<M> {
    got: Vec<M>,
    expect: usize,
}

impl<M: Send + 'static> Accepts for Collect<M> {
    type Message = M;
}

impl<M: Send + 'static> Process for Collect<M> {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events.typed::<Self>() {
            if let Event::Message(m) = event {
                self.got.push(m);
            }
        }
        if self.got.len() == self.expect {
            out.finish(std::mem::take(&mut self.got));
        }
        Ok(())
    }
}

/// A stranger to every `Collect<M>` below.
struct Noise(#[allow(dead_code)] u8);

/// Sends `make(0..n)` typed, with a stranger (a `Noise`) after each, and
/// checks that exactly those values come back, in order; then the same
/// again, every message wrapped in `Urgent` and sent by PID.
fn round_trip<M>(scheduler: &Scheduler, n: u64, make: impl Fn(u64) -> M)
where
    M: PartialEq + Debug + Send + 'static,
{
    let mut done = scheduler
        .spawn(Collect::<M> {
            got: Vec::new(),
            expect: n as usize,
        })
        .unwrap();
    let to = done.addr::<Collect<M>>();
    for i in 0..n {
        scheduler.send(to, make(i)).unwrap();
        scheduler.send(done.pid(), Noise(0xA5)).unwrap();
    }
    let name = std::any::type_name::<M>();
    let got = done
        .wait_timeout(WAIT)
        .unwrap_or_else(|e| panic!("{name}: not all read: {e}"));
    let got = got.downcast::<Vec<M>>().expect("its list");
    let expected: Vec<M> = (0..n).map(&make).collect();
    assert!(
        *got == expected,
        "{name}: {got:?} where {expected:?} was sent"
    );
    // The same values sent urgent, by PID: read typed, each is the value
    // sent, unwrapped, in the order sent (urgent ones keep their order
    // among themselves).
    let mut done = scheduler
        .spawn(Collect::<M> {
            got: Vec::new(),
            expect: n as usize,
        })
        .unwrap();
    for i in 0..n {
        scheduler.send(done.pid(), Urgent::new(make(i))).unwrap();
        scheduler
            .send(done.pid(), Urgent::new(Noise(0x5A)))
            .unwrap();
    }
    let got = done
        .wait_timeout(WAIT)
        .unwrap_or_else(|e| panic!("{name}: not all urgent ones read: {e}"));
    let got = got.downcast::<Vec<M>>().expect("its list");
    assert!(
        *got == expected,
        "{name} urgent: {got:?} where {expected:?} was sent"
    );
}

/// 16 bytes, aligned to 16: small enough to travel inline, more aligned
/// than a machine word.
#[derive(Debug, PartialEq)]
#[repr(align(16))]
struct Aligned16(u8);

/// 64 bytes, aligned to 64.
#[derive(Debug, PartialEq)]
#[repr(align(64))]
struct Aligned64(u64);

/// A message that counts its drops; `N` pads it (0: two words, inline;
/// 64: too big to travel inline).
struct Tracked<const N: usize> {
    id: u64,
    _pad: [u8; N],
    drops: Arc<AtomicUsize>,
}

impl<const N: usize> Drop for Tracked<N> {
    fn drop(&mut self) {
        self.drops.fetch_add(1, SeqCst);
    }
}

/// Reads `Tracked<N>`s, keeps their ids and drops them in the step.
struct Ids<const N: usize> {
    ids: Vec<u64>,
    expect: usize,
}

impl<const N: usize> Accepts for Ids<N> {
    type Message = Tracked<N>;
}

impl<const N: usize> Process for Ids<N> {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events.typed::<Self>() {
            if let Event::Message(m) = event {
                self.ids.push(m.id);
            }
        }
        if self.ids.len() == self.expect {
            out.finish(std::mem::take(&mut self.ids));
        }
        Ok(())
    }
}

/// Sends 200 `Tracked<N>` typed, each followed by a `Tracked<M>` (same
/// shape or not, another type) by PID: the typed ones arrive once each,
/// in order, and every message is dropped exactly once.
fn tracked_round_trip<const N: usize, const M: usize>(scheduler: &Scheduler) {
    const COUNT: u64 = 200;
    let typed = Arc::new(AtomicUsize::new(0));
    let strangers = Arc::new(AtomicUsize::new(0));
    let mut done = scheduler
        .spawn(Ids::<N> {
            ids: Vec::new(),
            expect: COUNT as usize,
        })
        .unwrap();
    let to = done.addr::<Ids<N>>();
    for id in 0..COUNT {
        let stranger = Tracked::<M> {
            id: id + 1_000,
            _pad: [0; M],
            drops: Arc::clone(&strangers),
        };
        scheduler.send(done.pid(), stranger).unwrap();
        let message = Tracked::<N> {
            id,
            _pad: [0; N],
            drops: Arc::clone(&typed),
        };
        scheduler.send(to, message).unwrap();
    }
    let ids = done.wait_timeout(WAIT).expect("all read");
    let ids = ids.downcast::<Vec<u64>>().expect("its list");
    assert_eq!(
        *ids,
        (0..COUNT).collect::<Vec<_>>(),
        "Tracked<{N}> among Tracked<{M}>"
    );
    assert_eq!(
        typed.load(SeqCst),
        COUNT as usize,
        "typed ones dropped once each"
    );
    wait_until("the strangers dropped", || {
        strangers.load(SeqCst) >= COUNT as usize
    });
    assert_eq!(
        strangers.load(SeqCst),
        COUNT as usize,
        "strangers dropped once each"
    );
}

#[test]
fn typed_messages_of_every_size_and_alignment_arrive_as_sent_and_drop_once() {
    let scheduler = Scheduler::builder().workers(2).build();
    scheduler.start();
    round_trip(&scheduler, 50, |_| ());
    round_trip(&scheduler, 50, |i| i as u8);
    round_trip(&scheduler, 50, |i| u128::MAX - u128::from(i));
    round_trip(&scheduler, 50, |i| Aligned16(i as u8));
    round_trip(&scheduler, 50, Aligned64);
    round_trip(&scheduler, 50, |i| format!("message number {i}"));
    round_trip(&scheduler, 50, |i| [i, i + 1, i + 2]);
    round_trip(&scheduler, 50, |i| [i; 4]);
    round_trip(&scheduler, 50, |i| vec![i; (i % 5) as usize]);
    round_trip(&scheduler, 50, Box::new);
    round_trip(&scheduler, 50, |i| Some(Arc::new(i)));
    // Inline among inline of the same shape; boxed among inline; inline
    // among boxed.
    tracked_round_trip::<0, 1>(&scheduler);
    tracked_round_trip::<64, 0>(&scheduler);
    tracked_round_trip::<0, 64>(&scheduler);
    assert_eq!(scheduler.shutdown(WAIT).forced, 0);
}

// ---------------------------------------------------------------------
// `WorkerStats::parks`.

/// Counts the `u64`s it reads, until cancelled.
struct Tally(Arc<AtomicU64>);

impl Accepts for Tally {
    type Message = u64;
}

impl Process for Tally {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events.typed::<Self>() {
            match event {
                Event::Message(_) => {
                    self.0.fetch_add(1, SeqCst);
                }
                Event::Cancel => out.finish(()),
                _ => {}
            }
        }
        Ok(())
    }
}

fn parks(scheduler: &Scheduler) -> u64 {
    scheduler.stats().totals().parks
}

/// Waits until every worker of `scheduler` is parked (or about to), then
/// gives one about to park time to fall asleep.
fn all_parked(scheduler: &Scheduler, workers: usize) {
    wait_until("every worker parked", || {
        scheduler.stats().parked_workers == workers
    });
    std::thread::sleep(Duration::from_millis(20));
}

#[test]
fn parks_do_not_grow_while_workers_sleep_and_grow_once_per_sleep_they_wake_from() {
    const ROUNDS: u64 = 20;
    // One worker, no timers: nothing but a send wakes it ("an engine with
    // none does not wake").
    let scheduler = Scheduler::builder().workers(1).build();
    scheduler.start();
    let seen = Arc::new(AtomicU64::new(0));
    let tally = scheduler.spawn(Tally(Arc::clone(&seen))).unwrap();
    let to = tally.addr::<Tally>();
    all_parked(&scheduler, 1);
    // Asleep: a park is counted when the worker wakes from it, and
    // nothing wakes it.
    let asleep = parks(&scheduler);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        parks(&scheduler),
        asleep,
        "parks grew while the worker slept on"
    );
    // Each round wakes it once, with one message, and lets it sleep
    // again: at most one park ends per round, and once it has truly slept
    // before a message, that park is counted when the message wakes it.
    for n in 1..=ROUNDS {
        scheduler.send(to, n).unwrap();
        wait_until("the message read", || seen.load(SeqCst) == n);
        all_parked(&scheduler, 1);
    }
    let after = parks(&scheduler);
    let grew = after - asleep;
    eprintln!("{ROUNDS} wakes from outside: {grew} parks");
    assert!(grew >= 1, "{ROUNDS} sleeps woken from, no park counted");
    assert!(grew <= ROUNDS, "{grew} parks for {ROUNDS} wakes");
    // And asleep again, it stays put.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        parks(&scheduler),
        after,
        "parks grew while the worker slept on"
    );
    assert_eq!(scheduler.shutdown(WAIT).forced, 0);

    // Two workers and a timer an hour away: parked workers sleep until
    // their earliest timer, so neither wakes, and no park is counted.
    let scheduler = Scheduler::builder().workers(2).build();
    scheduler.start();
    let armed = Arc::new(AtomicBool::new(false));
    let mut sleeper = scheduler
        .spawn(Alarm {
            armed: Arc::clone(&armed),
        })
        .unwrap();
    wait_until("the timer set", || armed.load(SeqCst));
    all_parked(&scheduler, 2);
    assert_eq!(scheduler.stats().pending_timers, 1);
    let asleep = parks(&scheduler);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        parks(&scheduler),
        asleep,
        "parks grew while both workers slept until an hour-away timer"
    );
    scheduler.context().cancel(sleeper.pid()).unwrap();
    sleeper.wait_timeout(WAIT).expect("finished");
    assert_eq!(scheduler.shutdown(WAIT).forced, 0);
}

/// Sets a timer an hour away at its first step; finishes when cancelled.
struct Alarm {
    armed: Arc<AtomicBool>,
}

impl Process for Alarm {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        if !self.armed.load(SeqCst) {
            out.set_timer(Duration::from_secs(3600), Tag(1));
            self.armed.store(true, SeqCst);
        }
        for event in events {
            if let Event::Cancel = event {
                out.finish(());
            }
        }
        Ok(())
    }
}

/// Runs a step at a time, continuing, until `stop`.
struct Busy {
    steps: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
}

impl Process for Busy {
    type Done = Payload;
    fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        self.steps.fetch_add(1, SeqCst);
        if self.stop.load(SeqCst) {
            out.finish(());
        } else {
            out.continue_();
        }
        Ok(())
    }
}

#[test]
fn a_worker_that_always_has_work_does_not_count_parks() {
    let scheduler = Scheduler::builder().workers(1).build();
    scheduler.start();
    let steps = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let mut busy = scheduler
        .spawn(Busy {
            steps: Arc::clone(&steps),
            stop: Arc::clone(&stop),
        })
        .unwrap();
    // Past its first steps, the park it woke from to run them (if any) is
    // counted.
    wait_until("the first steps", || steps.load(SeqCst) >= 100);
    let before = parks(&scheduler);
    let from = steps.load(SeqCst);
    std::thread::sleep(Duration::from_millis(300));
    wait_until("many more steps", || steps.load(SeqCst) >= from + 10_000);
    let after = parks(&scheduler);
    stop.store(true, SeqCst);
    busy.wait_timeout(WAIT).expect("finished");
    assert_eq!(
        after,
        before,
        "the only worker parked while its one process kept continuing ({} steps)",
        steps.load(SeqCst) - from
    );
    assert_eq!(scheduler.shutdown(WAIT).forced, 0);
}
