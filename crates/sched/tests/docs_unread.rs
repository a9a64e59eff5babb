//! Tries to break `Process::unread`, written from its documentation only
//! (the rustdoc of the provided method, the CHANGELOG entry, and the
//! process contract in docs/reference/process-contract.md):
//!
//! - at a process's end, what it left unread (its last step's leftovers
//!   and what came after that step, until its mailbox closed) is offered
//!   once, before `close`, in the order it would have been read;
//! - what `unread` takes out is no dead letter; what stays is counted in
//!   `Stats::dead_letters` and goes to the dead-letter hook;
//! - a send after the mailbox closed fails with `SendErrorKind::Ended`
//!   and hands its message back (this file found the rustdoc naming a
//!   `SendErrorKind::Closed` that does not exist; it names `Ended` now);
//! - called only when something is unread, and only after a successful
//!   `init`;
//! - a panic in it ends the process as `Panicked`, and leaves what is
//!   still in `unread` as dead letters;
//! - `Box<P>` and `AnyProcess` forward it.
//!
//! Timeouts below only guard against hangs: nothing asserts on time.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use sched::actor::AskError;
use sched::message::SendErrorKind;
use sched::prelude::*;
use sched::process::{AnyProcess, DEFAULT_METHOD};

const GUARD: Duration = Duration::from_secs(30);

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + GUARD;
    while !done() {
        assert!(
            Instant::now() < deadline,
            "hang: waited {GUARD:?} for {what}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The `u64` messages among `events`, in order.
fn numbers(events: &[Event]) -> Vec<u64> {
    events
        .iter()
        .filter_map(|event| match event {
            Event::Message(m) => m.payload::<u64>().copied(),
            _ => None,
        })
        .collect()
}

/// What a process under test records about itself.
#[derive(Default)]
struct Log {
    /// Messages its steps read, in reading order.
    read: Mutex<Vec<u64>>,
    /// The messages each `unread` call was offered.
    offered: Mutex<Vec<Vec<u64>>>,
    /// What `unread` took out.
    taken: Mutex<Vec<u64>>,
    /// "step", "unread", "close", in the order they ran.
    calls: Mutex<Vec<&'static str>>,
}

impl Log {
    fn read(&self) -> Vec<u64> {
        self.read.lock().unwrap().clone()
    }
    fn offered(&self) -> Vec<Vec<u64>> {
        self.offered.lock().unwrap().clone()
    }
    fn taken(&self) -> Vec<u64> {
        self.taken.lock().unwrap().clone()
    }
    fn calls(&self) -> Vec<&'static str> {
        self.calls.lock().unwrap().clone()
    }
    fn count(&self, what: &str) -> usize {
        self.calls().iter().filter(|c| **c == what).count()
    }
    /// Records an `unread` call, and takes out the messages `take` picks.
    fn unread(&self, unread: &mut Vec<Event>, take: impl Fn(u64) -> bool) {
        self.calls.lock().unwrap().push("unread");
        self.offered.lock().unwrap().push(numbers(unread));
        let mut kept = Vec::new();
        for event in unread.drain(..) {
            match &event {
                Event::Message(m) if m.payload::<u64>().is_some_and(|n| take(*n)) => {
                    self.taken
                        .lock()
                        .unwrap()
                        .push(*m.payload::<u64>().unwrap());
                }
                _ => kept.push(event),
            }
        }
        *unread = kept;
    }
}

/// What a dead-letter hook recorded: each `u64` message, with its process.
type Hooked = Arc<Mutex<Vec<(Pid, u64)>>>;

/// A scheduler whose dead-letter hook records every `u64` message (with
/// its process) it is handed.
fn scheduler_with_hook(workers: usize) -> (Scheduler, Hooked) {
    let dead = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&dead);
    let scheduler = Scheduler::builder()
        .workers(workers)
        .on_dead_letter(move |_cx, pid, event| {
            if let Event::Message(m) = &event {
                if let Some(n) = m.payload::<u64>() {
                    seen.lock().unwrap().push((pid, *n));
                }
            }
        })
        .build();
    (scheduler, dead)
}

fn dead_of(dead: &Mutex<Vec<(Pid, u64)>>, pid: Pid) -> Vec<u64> {
    dead.lock()
        .unwrap()
        .iter()
        .filter(|(p, _)| *p == pid)
        .map(|(_, n)| *n)
        .collect()
}

// ---------------------------------------------------------------------------
// Processes
// ---------------------------------------------------------------------------

/// Reads one message per step (its first step, after `gate`, waits to be
/// let go); finishes in the step that reads `finish_at`.
struct OneAtATime {
    log: Arc<Log>,
    finish_at: Option<u64>,
    /// Told when the first step has read its message; waited on before
    /// that step returns.
    gate: Option<(Sender<()>, Receiver<()>)>,
    take: fn(u64) -> bool,
}

impl Process for OneAtATime {
    type Done = u64;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        self.log.calls.lock().unwrap().push("step");
        let mut last = None;
        if let Some(Event::Message(m)) = events.next() {
            let n = *m.payload::<u64>().expect("a u64");
            self.log.read.lock().unwrap().push(n);
            last = Some(n);
        }
        if let Some((reached, go)) = self.gate.take() {
            reached.send(()).unwrap();
            go.recv_timeout(GUARD).expect("let go");
        }
        if let Some(n) = last.filter(|n| Some(*n) == self.finish_at) {
            out.finish(n);
        }
        Ok(())
    }
    fn unread(&mut self, unread: &mut Vec<Event>) {
        self.log.unread(unread, self.take);
    }
    fn close(&mut self) {
        self.log.calls.lock().unwrap().push("close");
    }
}

/// Reads nothing: finishes at its first step (the rustdoc's `Quitter`),
/// records what it is offered and takes out what `take` picks.
struct Quitter {
    log: Arc<Log>,
    take: fn(u64) -> bool,
}

impl Process for Quitter {
    type Done = ();
    fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        self.log.calls.lock().unwrap().push("step");
        out.finish(());
        Ok(())
    }
    fn unread(&mut self, unread: &mut Vec<Event>) {
        self.log.unread(unread, self.take);
    }
    fn close(&mut self) {
        self.log.calls.lock().unwrap().push("close");
    }
}

fn all(_: u64) -> bool {
    true
}
fn none(_: u64) -> bool {
    false
}
fn even(n: u64) -> bool {
    n.is_multiple_of(2)
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

/// The last step reads message 1 of 1..=5 and, while it runs, 6..=8 are
/// sent: `unread` is offered 2..=8, in that order, once, before `close`;
/// what it keeps is counted and hooked; a send after the end fails
/// `Ended` with its message back.
#[test]
fn what_the_last_step_left_and_what_came_after_is_offered_once_in_order_before_close() {
    let (scheduler, dead) = scheduler_with_hook(1);
    let log = Arc::new(Log::default());
    let (reached_tx, reached) = channel();
    let (go, go_rx) = channel();
    let mut done = scheduler
        .spawn(OneAtATime {
            log: Arc::clone(&log),
            finish_at: Some(1),
            gate: Some((reached_tx, go_rx)),
            take: none,
        })
        .unwrap();
    let pid = done.pid();
    for n in 1..=5u64 {
        scheduler.send(pid, n).unwrap();
    }
    scheduler.start();
    reached.recv_timeout(GUARD).expect("the first step ran");
    // The step is running (and will finish): the process is alive, its
    // mailbox open.
    for n in 6..=8u64 {
        scheduler.send(pid, n).expect("sent while the process runs");
    }
    go.send(()).unwrap();
    assert_eq!(done.wait_timeout(GUARD).unwrap(), 1);

    assert_eq!(log.read(), [1]);
    assert_eq!(log.offered(), [vec![2, 3, 4, 5, 6, 7, 8]], "once, in order");
    assert_eq!(log.calls(), ["step", "unread", "close"]);

    // A send after the end fails (`Ended`), the message handed back.
    let refused = scheduler.send(pid, 9u64).unwrap_err();
    assert_eq!(refused.kind(), SendErrorKind::Ended, "{refused}");
    assert_eq!(refused.into_package().downcast::<u64>().ok(), Some(9));

    // What stayed is counted and hooked; the refused 9 is not.
    wait_until("seven dead letters", || dead_of(&dead, pid).len() >= 7);
    let mut hooked = dead_of(&dead, pid);
    hooked.sort_unstable();
    assert_eq!(hooked, [2, 3, 4, 5, 6, 7, 8]);
    assert_eq!(scheduler.stats().dead_letters, 7);
    assert_eq!(log.count("unread"), 1);
    scheduler.shutdown(GUARD);
}

/// `unread` is not called when nothing is unread: a process that read
/// everything and finished, one that finished with nothing ever sent, one
/// terminated (and one cancelled) while waiting with an empty mailbox.
#[test]
fn unread_is_not_called_when_nothing_is_unread() {
    let (scheduler, _dead) = scheduler_with_hook(2);
    scheduler.start();

    // Reads everything it gets, finishes on the third message.
    let reader = Arc::new(Log::default());
    let mut done = scheduler
        .spawn(OneAtATime {
            log: Arc::clone(&reader),
            finish_at: Some(3),
            gate: None,
            take: all,
        })
        .unwrap();
    for n in 1..=3u64 {
        // One at a time: each is read before the next is sent.
        scheduler.send(done.pid(), n).unwrap();
        wait_until("the message to be read", || reader.read().len() as u64 == n);
    }
    assert_eq!(done.wait_timeout(GUARD).unwrap(), 3);

    // Nothing sent at all.
    let quiet = Arc::new(Log::default());
    scheduler
        .spawn(Quitter {
            log: Arc::clone(&quiet),
            take: all,
        })
        .unwrap()
        .wait_timeout(GUARD)
        .unwrap();

    // Waiting with nothing queued, then terminated / cancelled.
    let mut idle_logs = Vec::new();
    for cancel in [false, true] {
        let idle = Arc::new(Log::default());
        let mut done = scheduler
            .spawn(OneAtATime {
                log: Arc::clone(&idle),
                finish_at: None,
                gate: None,
                take: all,
            })
            .unwrap();
        wait_until("its first step", || idle.count("step") == 1);
        if cancel {
            // Reads the cancel (its one event) and goes on waiting; then
            // terminated.
            scheduler.context().cancel(done.pid()).unwrap();
            wait_until("the cancel's step", || idle.count("step") == 2);
        }
        scheduler.terminate(done.pid()).unwrap();
        assert!(matches!(
            done.wait_timeout(GUARD),
            Err(ExitError::Terminated)
        ));
        idle_logs.push(idle);
    }

    for log in [&reader, &quiet].into_iter().chain(idle_logs.iter()) {
        assert_eq!(log.count("unread"), 0, "{:?}", log.calls());
        assert_eq!(log.count("close"), 1);
    }
    assert_eq!(scheduler.stats().dead_letters, 0);
    scheduler.shutdown(GUARD);
}

/// What `unread` takes out is no dead letter; what stays is counted in
/// `Stats::dead_letters` and handed to the hook, each once. Over many
/// processes at once on two workers.
#[test]
fn what_unread_takes_is_no_dead_letter_and_what_stays_is_counted_and_hooked() {
    let (scheduler, dead) = scheduler_with_hook(2);
    let mut runs = Vec::new();
    for p in 0..50u64 {
        let log = Arc::new(Log::default());
        let done = scheduler
            .spawn(Quitter {
                log: Arc::clone(&log),
                take: even,
            })
            .unwrap();
        for n in 0..(p % 7) * 3 {
            scheduler.send(done.pid(), 1_000 * p + n).unwrap();
        }
        runs.push((p, log, done));
    }
    scheduler.start();
    let mut expected_dead = 0;
    for (p, log, done) in &mut runs {
        done.wait_timeout(GUARD).unwrap();
        let sent: Vec<u64> = (0..(*p % 7) * 3).map(|n| 1_000 * *p + n).collect();
        if sent.is_empty() {
            assert_eq!(log.count("unread"), 0, "process {p}: nothing unread");
            continue;
        }
        assert_eq!(log.offered(), std::slice::from_ref(&sent), "process {p}");
        let odd: Vec<u64> = sent.iter().copied().filter(|n| !even(*n)).collect();
        let evens: Vec<u64> = sent.iter().copied().filter(|n| even(*n)).collect();
        assert_eq!(log.taken(), evens);
        expected_dead += odd.len();
        let pid = done.pid();
        wait_until("its dead letters", || {
            dead_of(&dead, pid).len() >= odd.len()
        });
        let mut hooked = dead_of(&dead, pid);
        hooked.sort_unstable();
        assert_eq!(hooked, odd, "process {p}: what stayed, each once");
        assert_eq!(log.calls(), ["step", "unread", "close"]);
    }
    assert_eq!(scheduler.stats().dead_letters as usize, expected_dead);
    assert_eq!(dead.lock().unwrap().len(), expected_dead);
    scheduler.shutdown(GUARD);
}

/// Finishes with 42 at its first step; its `unread` takes the first two
/// messages out, then panics.
struct PanicsInUnread {
    log: Arc<Log>,
}

impl Process for PanicsInUnread {
    type Done = u64;
    fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        self.log.calls.lock().unwrap().push("step");
        out.finish(42);
        Ok(())
    }
    fn unread(&mut self, unread: &mut Vec<Event>) {
        self.log.calls.lock().unwrap().push("unread");
        self.log.offered.lock().unwrap().push(numbers(unread));
        for event in unread.drain(..2) {
            self.log.taken.lock().unwrap().extend(numbers(&[event]));
        }
        panic!("unread blew up");
    }
    fn close(&mut self) {
        self.log.calls.lock().unwrap().push("close");
    }
}

/// A panic in `unread` ends the process as `Panicked` (though its step
/// finished with a value), what it had taken out is not a dead letter,
/// what was still in `unread` is; `close` still runs once, and the worker
/// goes on.
#[test]
fn a_panic_in_unread_ends_the_process_as_panicked_and_leaves_the_rest_as_dead_letters() {
    let (scheduler, dead) = scheduler_with_hook(1);
    let log = Arc::new(Log::default());
    let mut done = scheduler
        .spawn(PanicsInUnread {
            log: Arc::clone(&log),
        })
        .unwrap();
    let pid = done.pid();
    for n in 1..=6u64 {
        scheduler.send(pid, n).unwrap();
    }
    scheduler.start();
    match done.wait_timeout(GUARD) {
        Err(ExitError::Panicked { message }) => {
            assert!(message.contains("unread blew up"), "{message}")
        }
        other => panic!("expected Panicked, got {other:?}"),
    }
    assert_eq!(log.offered(), [vec![1, 2, 3, 4, 5, 6]]);
    assert_eq!(log.taken(), [1, 2]);
    wait_until("four dead letters", || dead_of(&dead, pid).len() >= 4);
    let mut hooked = dead_of(&dead, pid);
    hooked.sort_unstable();
    assert_eq!(hooked, [3, 4, 5, 6], "what was still in unread");
    assert_eq!(scheduler.stats().dead_letters, 4);
    assert_eq!(
        log.calls(),
        ["step", "unread", "close"],
        "close once, after"
    );
    let refused = scheduler.send(pid, 7u64).unwrap_err();
    assert_eq!(refused.kind(), SendErrorKind::Ended);
    // The worker still serves processes.
    let after = Arc::new(Log::default());
    let mut next = scheduler
        .spawn(Quitter {
            log: Arc::clone(&after),
            take: all,
        })
        .unwrap();
    scheduler.send(next.pid(), 100u64).unwrap();
    next.wait_timeout(GUARD).unwrap();
    scheduler.shutdown(GUARD);
}

/// Terminated while waiting, with leftovers of its last step queued: they
/// are offered (with whatever came after), before `close`. Read and
/// offered together are every message, in the order sent.
#[test]
fn terminate_offers_what_the_waiting_process_left() {
    let (scheduler, dead) = scheduler_with_hook(1);
    let log = Arc::new(Log::default());
    let mut done = scheduler
        .spawn(OneAtATime {
            log: Arc::clone(&log),
            finish_at: None,
            gate: None,
            take: even,
        })
        .unwrap();
    let pid = done.pid();
    for n in 1..=6u64 {
        scheduler.send(pid, n).unwrap();
    }
    scheduler.start();
    wait_until("the first read", || !log.read().is_empty());
    scheduler.terminate(pid).unwrap();
    assert!(matches!(
        done.wait_timeout(GUARD),
        Err(ExitError::Terminated)
    ));
    let offered = log.offered();
    assert_eq!(offered.len(), 1, "offered once: {offered:?}");
    let mut whole = log.read();
    whole.extend(&offered[0]);
    assert_eq!(whole, [1, 2, 3, 4, 5, 6], "read, then offered, in order");
    let calls = log.calls();
    assert_eq!(&calls[calls.len() - 2..], ["unread", "close"]);
    let stayed: Vec<u64> = offered[0].iter().copied().filter(|n| !even(*n)).collect();
    wait_until("the dead letters", || {
        dead_of(&dead, pid).len() >= stayed.len()
    });
    let mut hooked = dead_of(&dead, pid);
    hooked.sort_unstable();
    assert_eq!(hooked, stayed);
    assert_eq!(scheduler.stats().dead_letters as usize, stayed.len());
    assert_eq!(
        scheduler.send(pid, 9u64).unwrap_err().kind(),
        SendErrorKind::Ended
    );
    scheduler.shutdown(GUARD);
}

/// Finishes in the step that brings `Event::Cancel`, without reading the
/// rest of that step's events.
struct QuitsOnCancel {
    log: Arc<Log>,
}

impl Process for QuitsOnCancel {
    type Done = ();
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        self.log.calls.lock().unwrap().push("step");
        for event in events {
            match event {
                Event::Cancel => {
                    out.finish(());
                    return Ok(());
                }
                Event::Message(m) => self
                    .log
                    .read
                    .lock()
                    .unwrap()
                    .push(*m.payload::<u64>().unwrap()),
                _ => {}
            }
        }
        Ok(())
    }
    fn unread(&mut self, unread: &mut Vec<Event>) {
        self.log.unread(unread, all);
    }
    fn close(&mut self) {
        self.log.calls.lock().unwrap().push("close");
    }
}

/// A cancel is read first (the system lane): a process that finishes at
/// once leaves the messages of that step, offered in order. All taken:
/// no dead letter.
#[test]
fn a_cancel_read_first_leaves_the_messages_of_its_step_to_unread() {
    let (scheduler, _dead) = scheduler_with_hook(1);
    let log = Arc::new(Log::default());
    let mut done = scheduler
        .spawn(QuitsOnCancel {
            log: Arc::clone(&log),
        })
        .unwrap();
    for n in 1..=4u64 {
        scheduler.send(done.pid(), n).unwrap();
    }
    scheduler.context().cancel(done.pid()).unwrap();
    scheduler.start();
    done.wait_timeout(GUARD).unwrap();
    let mut whole = log.read();
    let offered = log.offered();
    assert_eq!(offered.len(), 1, "{offered:?}");
    whole.extend(&offered[0]);
    assert_eq!(whole, [1, 2, 3, 4]);
    assert!(
        log.read().is_empty(),
        "the cancel came first: {:?}",
        log.read()
    );
    assert_eq!(log.taken(), [1, 2, 3, 4]);
    assert_eq!(log.calls(), ["step", "unread", "close"]);
    assert_eq!(scheduler.stats().dead_letters, 0, "all taken out");
    scheduler.shutdown(GUARD);
}

/// Ignores cancels and never reads its messages: shutdown's deadline
/// force-completes it; what it left is offered before `close`.
#[test]
fn a_process_forced_at_the_shutdown_deadline_is_offered_what_it_left() {
    struct Stubborn {
        log: Arc<Log>,
    }
    impl Process for Stubborn {
        type Done = ();
        fn step(&mut self, events: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
            self.log.calls.lock().unwrap().push("step");
            // Takes the cancel (the system lane comes first) and nothing
            // else.
            if let Some(Event::Message(m)) = events.next() {
                self.log
                    .read
                    .lock()
                    .unwrap()
                    .push(*m.payload::<u64>().unwrap());
            }
            Ok(())
        }
        fn unread(&mut self, unread: &mut Vec<Event>) {
            self.log.unread(unread, all);
        }
        fn close(&mut self) {
            self.log.calls.lock().unwrap().push("close");
        }
    }
    let (scheduler, _dead) = scheduler_with_hook(1);
    let log = Arc::new(Log::default());
    let mut done = scheduler
        .spawn(Stubborn {
            log: Arc::clone(&log),
        })
        .unwrap();
    for n in 1..=4u64 {
        scheduler.send(done.pid(), n).unwrap();
    }
    scheduler.start();
    wait_until("the first step", || log.count("step") >= 1);
    scheduler.shutdown(Duration::from_millis(200));
    assert!(matches!(
        done.wait_timeout(GUARD),
        Err(ExitError::Cancelled)
    ));
    let offered = log.offered();
    assert_eq!(
        offered.len(),
        1,
        "offered once at the forced end: {:?}",
        log.calls()
    );
    let mut whole = log.read();
    whole.extend(&offered[0]);
    assert_eq!(whole, [1, 2, 3, 4]);
    let calls = log.calls();
    assert_eq!(&calls[calls.len() - 2..], ["unread", "close"]);
}

/// `Box<P>`, `Box<dyn Process>`, `AnyProcess` (and one of an
/// `AnyProcess`) forward `unread` to the process inside.
#[test]
fn boxes_and_any_process_forward_unread() {
    for how in 0..4 {
        let (scheduler, _dead) = scheduler_with_hook(1);
        let log = Arc::new(Log::default());
        let quitter = Quitter {
            log: Arc::clone(&log),
            take: all,
        };
        // Spawned before the scheduler starts: the messages are queued
        // before its first step.
        let pid = match how {
            0 => scheduler.spawn(Box::new(quitter)).unwrap().pid(),
            1 => {
                let boxed: Box<dyn Process<Done = ()>> = Box::new(quitter);
                scheduler.spawn(boxed).unwrap().pid()
            }
            2 => scheduler.spawn(AnyProcess::new(quitter)).unwrap().pid(),
            _ => scheduler
                .spawn(AnyProcess::new(AnyProcess::new(quitter)))
                .unwrap()
                .pid(),
        };
        for n in 1..=4u64 {
            scheduler.send(pid, n).unwrap();
        }
        scheduler.start();
        wait_until("its close", || log.count("close") == 1);
        let offered = log.offered();
        assert_eq!(offered.len(), 1, "wrapper {how}: {:?}", log.calls());
        assert_eq!(offered[0], [1, 2, 3, 4], "wrapper {how}");
        assert_eq!(log.calls(), ["step", "unread", "close"], "wrapper {how}");
        assert_eq!(
            scheduler.stats().dead_letters,
            0,
            "wrapper {how}: its unread took all"
        );
        scheduler.shutdown(GUARD);
    }
}

/// Senders race the end: every send that was accepted is read, or offered
/// to `unread` (once, in each sender's order after what was read), and
/// what `unread` keeps is each a dead letter; every send refused fails
/// `Ended` with its message back, and so does every later one. `unread`
/// blocks a little while the senders go on.
#[test]
fn every_accepted_send_is_read_or_offered_and_every_later_one_is_refused_ended() {
    /// Reads every message until it has read `quota`, then finishes,
    /// leaving the rest of that step's batch.
    struct Quota {
        log: Arc<Log>,
        quota: usize,
    }
    impl Process for Quota {
        type Done = ();
        fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
            let mut read = self.log.read.lock().unwrap();
            for event in events {
                if let Event::Message(m) = event {
                    read.push(*m.payload::<u64>().unwrap());
                    if read.len() >= self.quota {
                        out.finish(());
                        return Ok(());
                    }
                }
            }
            Ok(())
        }
        fn unread(&mut self, unread: &mut Vec<Event>) {
            // Blocks a while: sends meanwhile must not be accepted.
            std::thread::sleep(Duration::from_millis(5));
            self.log.unread(unread, |n| n % 3 == 0);
            std::thread::sleep(Duration::from_millis(5));
        }
        fn close(&mut self) {
            self.log.calls.lock().unwrap().push("close");
        }
    }
    const SENDERS: u64 = 3;
    for round in 0..12u64 {
        let (scheduler, dead) = scheduler_with_hook(2);
        scheduler.start();
        let log = Arc::new(Log::default());
        let mut done = scheduler
            .spawn(Quota {
                log: Arc::clone(&log),
                quota: 200 + 150 * round as usize,
            })
            .unwrap();
        let pid = done.pid();
        let accepted: Vec<Vec<u64>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..SENDERS)
                .map(|sender| {
                    let scheduler = &scheduler;
                    s.spawn(move || {
                        let mut accepted = Vec::new();
                        for n in 0.. {
                            let message = sender * 1_000_000_000 + n;
                            match scheduler.send(pid, message) {
                                Ok(()) => accepted.push(message),
                                Err(refused) => {
                                    assert_eq!(refused.kind(), SendErrorKind::Ended, "{refused}");
                                    assert_eq!(
                                        refused.into_package().downcast::<u64>().ok(),
                                        Some(message),
                                        "the message back"
                                    );
                                    break;
                                }
                            }
                            if n % 64 == 0 {
                                std::thread::yield_now();
                            }
                        }
                        // Closed for good.
                        for later in 0..50 {
                            let refused = scheduler.send(pid, u64::MAX - later).unwrap_err();
                            assert_eq!(refused.kind(), SendErrorKind::Ended);
                        }
                        accepted
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        done.wait_timeout(GUARD).unwrap();
        let read = log.read();
        let offered = log.offered();
        assert!(
            offered.len() <= 1,
            "round {round}: offered {} times",
            offered.len()
        );
        let offered = offered.into_iter().next().unwrap_or_default();
        let taken = log.taken();
        let kept: Vec<u64> = offered.iter().copied().filter(|n| n % 3 != 0).collect();
        wait_until("the dead letters", || {
            dead_of(&dead, pid).len() >= kept.len()
        });
        // Each accepted message read or offered, exactly once, and each
        // sender's in order across the two.
        let mut whole = read.clone();
        whole.extend(&offered);
        for sender in 0..SENDERS {
            let mine: Vec<u64> = whole
                .iter()
                .copied()
                .filter(|n| n / 1_000_000_000 == sender)
                .collect();
            assert_eq!(
                mine,
                accepted[sender as usize],
                "round {round}, sender {sender}: read then offered is what was accepted, in order \
                 ({} read, {} offered, {} accepted)",
                read.len(),
                offered.len(),
                accepted[sender as usize].len()
            );
        }
        let mut hooked = dead_of(&dead, pid);
        hooked.sort_unstable();
        let mut kept_sorted = kept.clone();
        kept_sorted.sort_unstable();
        assert_eq!(
            hooked, kept_sorted,
            "round {round}: what stayed, and nothing else"
        );
        assert_eq!(
            scheduler.stats().dead_letters as usize,
            kept.len(),
            "round {round}"
        );
        assert_eq!(taken.len() + kept.len(), offered.len());
        assert_eq!(log.count("close"), 1);
        scheduler.shutdown(GUARD);
    }
}

/// A router's use: at its end, `unread` hands everything to a next
/// process (through the scheduler, as code outside a step sends) and
/// takes it out; the next process reads it in order, and nothing is a
/// dead letter. A send from `unread` to its own process fails `Ended`
/// with the message back.
#[test]
fn unread_can_hand_its_messages_on_to_another_process_in_order() {
    /// The sends to itself `unread` made: why each was refused, and the
    /// number it got back.
    type Refusals = Arc<Mutex<Vec<(SendErrorKind, Option<u64>)>>>;
    struct Router {
        scheduler: Arc<Mutex<Weak<Scheduler>>>,
        next: Pid,
        me: Option<Pid>,
        to_self: Refusals,
        log: Arc<Log>,
    }
    impl Process for Router {
        type Done = ();
        fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
            self.me = Some(out.pid());
            Ok(())
        }
        fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
            // Reads one, then ends.
            if let Some(Event::Message(m)) = events.next() {
                self.log
                    .read
                    .lock()
                    .unwrap()
                    .push(*m.payload::<u64>().unwrap());
                out.finish(());
            }
            Ok(())
        }
        fn unread(&mut self, unread: &mut Vec<Event>) {
            self.log.calls.lock().unwrap().push("unread");
            self.log.offered.lock().unwrap().push(numbers(unread));
            let scheduler = self.scheduler.lock().unwrap().upgrade().expect("alive");
            // To itself: closed.
            let refused = scheduler.send(self.me.unwrap(), 777u64).unwrap_err();
            self.to_self.lock().unwrap().push((
                refused.kind(),
                refused.into_package().downcast::<u64>().ok(),
            ));
            for event in std::mem::take(unread) {
                if let Event::Message(m) = event {
                    let n = *m.payload::<u64>().unwrap();
                    scheduler
                        .send(self.next, n)
                        .expect("the next process takes it");
                    self.log.taken.lock().unwrap().push(n);
                }
            }
        }
        fn close(&mut self) {
            self.log.calls.lock().unwrap().push("close");
        }
    }
    /// Reads everything; finishes on 0.
    struct Next(Arc<Log>);
    impl Process for Next {
        type Done = ();
        fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
            for event in events {
                if let Event::Message(m) = event {
                    let n = *m.payload::<u64>().unwrap();
                    if n == 0 {
                        out.finish(());
                    } else {
                        self.0.read.lock().unwrap().push(n);
                    }
                }
            }
            Ok(())
        }
    }
    let (scheduler, _dead) = scheduler_with_hook(2);
    let scheduler = Arc::new(scheduler);
    let handle = Arc::new(Mutex::new(Arc::downgrade(&scheduler)));
    let next_log = Arc::new(Log::default());
    let mut next = scheduler.spawn(Next(Arc::clone(&next_log))).unwrap();
    let log = Arc::new(Log::default());
    let to_self = Arc::new(Mutex::new(Vec::new()));
    let mut router = scheduler
        .spawn(Router {
            scheduler: Arc::clone(&handle),
            next: next.pid(),
            me: None,
            to_self: Arc::clone(&to_self),
            log: Arc::clone(&log),
        })
        .unwrap();
    for n in 1..=200u64 {
        scheduler.send(router.pid(), n).unwrap();
    }
    scheduler.start();
    router.wait_timeout(GUARD).unwrap();
    assert_eq!(log.read(), [1]);
    assert_eq!(log.offered(), [(2..=200).collect::<Vec<u64>>()]);
    assert_eq!(log.calls(), ["unread", "close"]);
    assert_eq!(
        *to_self.lock().unwrap(),
        [(SendErrorKind::Ended, Some(777))],
        "its own mailbox is closed while unread runs"
    );
    scheduler.send(next.pid(), 0u64).unwrap();
    next.wait_timeout(GUARD).unwrap();
    assert_eq!(next_log.read(), (2..=200).collect::<Vec<u64>>(), "in order");
    assert_eq!(scheduler.stats().dead_letters, 0);
    scheduler.shutdown(GUARD);
}

/// A step that fails (`Err`) after reading one message: the rest is
/// offered, before `close`.
#[test]
fn a_step_that_fails_is_offered_what_it_left() {
    struct Fails(Arc<Log>);
    impl Process for Fails {
        type Done = ();
        fn step(&mut self, events: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
            if let Some(Event::Message(m)) = events.next() {
                self.0
                    .read
                    .lock()
                    .unwrap()
                    .push(*m.payload::<u64>().unwrap());
            }
            Err("failed on purpose".into())
        }
        fn unread(&mut self, unread: &mut Vec<Event>) {
            self.0.unread(unread, all);
        }
        fn close(&mut self) {
            self.0.calls.lock().unwrap().push("close");
        }
    }
    let (scheduler, _dead) = scheduler_with_hook(1);
    let log = Arc::new(Log::default());
    let mut done = scheduler.spawn(Fails(Arc::clone(&log))).unwrap();
    for n in 1..=5u64 {
        scheduler.send(done.pid(), n).unwrap();
    }
    scheduler.start();
    assert!(matches!(done.wait_timeout(GUARD), Err(ExitError::Step(_))));
    assert_eq!(log.read(), [1]);
    assert_eq!(log.offered(), [vec![2, 3, 4, 5]]);
    assert_eq!(log.calls(), ["unread", "close"]);
    assert_eq!(scheduler.stats().dead_letters, 0);
    scheduler.shutdown(GUARD);
}

/// Upgrades: the events the upgrading step left go to the new instance
/// (the process goes on under its PID, it has not ended), not to the old
/// one's `unread` (which would take them all out). An upgrade whose new
/// `init` fails never calls the new instance's `unread` (nor its
/// `close`); what was pending is the old one's `unread`'s (before its
/// `close`) or dead letters, each once.
#[test]
fn an_upgrade_is_no_end_and_a_failed_init_is_never_offered_anything() {
    struct Old {
        log: Arc<Log>,
        new: Option<New>,
    }
    impl Process for Old {
        type Done = ();
        fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
            if let Some(Event::Message(m)) = events.next() {
                self.log
                    .read
                    .lock()
                    .unwrap()
                    .push(*m.payload::<u64>().unwrap());
                out.upgrade(self.new.take().unwrap(), DEFAULT_METHOD, ());
            }
            Ok(())
        }
        fn unread(&mut self, unread: &mut Vec<Event>) {
            self.log.unread(unread, all);
        }
        fn close(&mut self) {
            self.log.calls.lock().unwrap().push("close");
        }
    }
    struct New {
        log: Arc<Log>,
        fail: bool,
        inits: Arc<AtomicUsize>,
    }
    impl Process for New {
        type Done = ();
        fn init(&mut self, _: &InitContext, _: &str, _: Payload) -> Result<(), InitError> {
            self.inits.fetch_add(1, SeqCst);
            if self.fail {
                Err(InitError::Failed("refused on purpose".into()))
            } else {
                Ok(())
            }
        }
        fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
            for event in events {
                if let Event::Message(m) = event {
                    let n = *m.payload::<u64>().unwrap();
                    self.log.read.lock().unwrap().push(n);
                    if n == 4 {
                        out.finish(());
                    }
                }
            }
            Ok(())
        }
        fn unread(&mut self, unread: &mut Vec<Event>) {
            self.log.unread(unread, all);
        }
        fn close(&mut self) {
            self.log.calls.lock().unwrap().push("close");
        }
    }
    for fail in [false, true] {
        let (scheduler, dead) = scheduler_with_hook(1);
        let (old_log, new_log) = (Arc::new(Log::default()), Arc::new(Log::default()));
        let inits = Arc::new(AtomicUsize::new(0));
        let mut done = scheduler
            .spawn(Old {
                log: Arc::clone(&old_log),
                new: Some(New {
                    log: Arc::clone(&new_log),
                    fail,
                    inits: Arc::clone(&inits),
                }),
            })
            .unwrap();
        let pid = done.pid();
        for n in 1..=4u64 {
            scheduler.send(pid, n).unwrap();
        }
        scheduler.start();
        let outcome = done.wait_timeout(GUARD);
        assert_eq!(old_log.read(), [1]);
        assert_eq!(inits.load(SeqCst), 1);
        if !fail {
            assert!(outcome.is_ok(), "{outcome:?}");
            assert_eq!(
                old_log.count("unread"),
                0,
                "the old instance did not end its process"
            );
            assert_eq!(
                new_log.read(),
                [2, 3, 4],
                "the new instance read what was left"
            );
            assert_eq!(new_log.count("unread"), 0);
            assert_eq!(scheduler.stats().dead_letters, 0);
        } else {
            assert!(matches!(outcome, Err(ExitError::Upgrade(_))), "{outcome:?}");
            assert_eq!(new_log.count("unread"), 0, "its init failed");
            assert_eq!(new_log.count("close"), 0);
            let calls = old_log.calls();
            if let Some(u) = calls.iter().position(|c| *c == "unread") {
                let c = calls.iter().position(|c| *c == "close").unwrap();
                assert!(u < c, "unread before close: {calls:?}");
            }
            let mut accounted = old_log.taken();
            wait_until("the dead letters", || {
                accounted.len() + dead_of(&dead, pid).len() >= 3
            });
            accounted.extend(dead_of(&dead, pid));
            accounted.sort_unstable();
            assert_eq!(
                accounted,
                [2, 3, 4],
                "taken by the old unread or dead, once"
            );
        }
        assert_eq!(old_log.count("close"), 1);
        scheduler.shutdown(GUARD);
    }
}

/// A question left unread goes back to its asker (`AskError::Unread`,
/// with the question) when `unread` leaves it where it is, "as it does by
/// default": it is no dead letter; the messages around it are offered in
/// order (and, kept, are dead letters).
#[test]
fn a_question_left_in_unread_goes_back_to_its_asker_as_by_default() {
    let (scheduler, dead) = scheduler_with_hook(1);
    let log = Arc::new(Log::default());
    let mut done = scheduler
        .spawn(Quitter {
            log: Arc::clone(&log),
            take: none,
        })
        .unwrap();
    let pid = done.pid();
    scheduler.send(pid, 1u64).unwrap();
    let mut reply = scheduler.ask(pid, Box::new(5u64) as Payload).unwrap();
    scheduler.send(pid, 2u64).unwrap();
    scheduler.start();
    done.wait_timeout(GUARD).unwrap();
    assert_eq!(reply.wait_timeout(GUARD).unwrap_err(), AskError::Unread);
    assert_eq!(
        reply.take_question().unwrap().downcast_ref::<u64>(),
        Some(&5),
        "the question back"
    );
    assert_eq!(log.offered(), [vec![1, 2]]);
    wait_until("two dead letters", || dead_of(&dead, pid).len() >= 2);
    let mut hooked = dead_of(&dead, pid);
    hooked.sort_unstable();
    assert_eq!(hooked, [1, 2], "the question is not one of them");
    assert_eq!(scheduler.stats().dead_letters, 2);
    scheduler.shutdown(GUARD);
}
