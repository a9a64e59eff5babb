//! Tries to break what the documentation promises about a `Receipt` on a
//! package that goes through a real engine, written from the
//! documentation only (CHANGELOG "Nodes confirm what their processes
//! read ... `Receipt` on a package", the `Receipt` guarantee in
//! docs/internals/relay.md, docs/guide/distributed.md "A message for a
//! node that crashed", and the rustdoc of `Receipt`, `Acknowledge`,
//! `Package::with_receipt`, `take_receipt`, `Events`, `Process::unread`):
//!
//! - a package delivered to a process (`Context::forward`, a
//!   `relay::Router` whose route forwards into the engine, a process
//!   passing it on) tells its receipt once: when a step takes its payload
//!   out (a downcast, `events.typed`, `into_parts`), or when the package
//!   is dropped (by the step, or unread when the process ends:
//!   terminated, finished, failed, panicked, shut down; or dropped after
//!   `Process::unread` kept it); never while it sits in a mailbox, nor
//!   when a step leaves it for the next, nor when a send is refused and
//!   hands it back.
//!
//! Timeouts only guard against hangs: nothing asserts on time.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sched::message::SendErrorKind;
use sched::message::{Acknowledge, Package, Payload, Receipt, Receiver, Router, SendError};
use sched::prelude::*;

const GUARD: Duration = Duration::from_secs(30);
/// The shutdown deadline: most processes here ignore their cancel, and
/// are forced at it (what they still hold is told all the same).
const SHUTDOWN: Duration = Duration::from_millis(300);
/// The source of the packages the test sends from outside.
const OUTSIDE: Pid = Pid::local(0);

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + GUARD;
    while !done() {
        assert!(
            Instant::now() < deadline,
            "hang: waited {GUARD:?} for {what}"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn started(workers: usize) -> Scheduler {
    let scheduler = Scheduler::builder().workers(workers).build();
    scheduler.start();
    scheduler
}

/// Records every token it is told, in order.
#[derive(Default)]
struct Tally(Mutex<Vec<u64>>);

impl Acknowledge for Tally {
    fn taken(&self, token: u64) {
        self.0.lock().unwrap().push(token);
    }
}

impl Tally {
    fn tokens(&self) -> Vec<u64> {
        self.0.lock().unwrap().clone()
    }
    fn total(&self) -> usize {
        self.0.lock().unwrap().len()
    }
    fn count(&self, token: u64) -> usize {
        self.tokens().iter().filter(|t| **t == token).count()
    }
    /// Each of `tokens` told exactly once, and nothing else told.
    fn each_once(&self, tokens: impl IntoIterator<Item = u64>) -> bool {
        let mut told = self.tokens();
        told.sort_unstable();
        let mut want: Vec<u64> = tokens.into_iter().collect();
        want.sort_unstable();
        told == want
    }
}

fn receipt(tally: &Arc<Tally>, token: u64) -> Receipt {
    Receipt::new(Arc::clone(tally) as Arc<dyn Acknowledge>, token)
}

/// Makes a package to the PID it is given.
type Maker = Box<dyn Fn(Pid) -> Package>;

/// The payloads the tests send: small ones (inline without a receipt),
/// a large one, and a `Payload` given to `Package::new`.
fn kinds() -> Vec<(&'static str, Maker)> {
    vec![
        ("u8", Box::new(|to| Package::new(OUTSIDE, to, 7_u8))),
        (
            "String",
            Box::new(|to| Package::new(OUTSIDE, to, String::from("ping"))),
        ),
        (
            "(u64, u64, u64)",
            Box::new(|to| Package::new(OUTSIDE, to, (1_u64, 2_u64, 3_u64))),
        ),
        (
            "[u64; 64]",
            Box::new(|to| Package::new(OUTSIDE, to, [9_u64; 64])),
        ),
        (
            "Payload of u32",
            Box::new(|to| Package::new(OUTSIDE, to, Box::new(5_u32) as Payload)),
        ),
    ]
}

/// Takes the payload out as one of `kinds()`'s types (the misses before
/// the hit are missed downcasts): the type's name, or the package back.
fn take_out(package: Package) -> Result<&'static str, Package> {
    let p = match package.downcast::<u8>() {
        Ok(n) => return if n == 7 { Ok("u8") } else { Ok("u8?") },
        Err(p) => p,
    };
    let p = match p.downcast::<String>() {
        Ok(s) => {
            return if s == "ping" {
                Ok("String")
            } else {
                Ok("String?")
            }
        }
        Err(p) => p,
    };
    let p = match p.downcast::<(u64, u64, u64)>() {
        Ok(t) => {
            return if t == (1, 2, 3) {
                Ok("(u64, u64, u64)")
            } else {
                Ok("(u64, u64, u64)?")
            }
        }
        Err(p) => p,
    };
    let p = match p.downcast::<[u64; 64]>() {
        Ok(a) => {
            return if a == [9; 64] {
                Ok("[u64; 64]")
            } else {
                Ok("[u64; 64]?")
            }
        }
        Err(p) => p,
    };
    match p.downcast::<u32>() {
        Ok(n) => {
            if n == 5 {
                Ok("Payload of u32")
            } else {
                Ok("Payload of u32?")
            }
        }
        Err(p) => Err(p),
    }
}

/// What a [`Reader`] saw of one message.
#[derive(Debug, Clone, PartialEq)]
struct Read {
    /// The kind it read it as.
    kind: &'static str,
    /// Whether the package carried a receipt when the step got it.
    had_receipt: bool,
    /// Receipts told when the step got the package, and just before the
    /// downcast that took it (after the missed ones).
    told_on_arrival: usize,
    told_before: usize,
    /// Receipts told right after the downcast, in the same step.
    told_after: usize,
}

/// Reads every message: downcasts it to one of `kinds()`'s types.
/// Finishes at a `Stop`.
struct Reader {
    tally: Arc<Tally>,
    log: Arc<Mutex<Vec<Read>>>,
}

#[derive(Debug)]
struct Stop;

impl Process for Reader {
    type Done = ();
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            let Event::Message(package) = event else {
                continue;
            };
            if package.is::<Stop>() {
                out.finish(());
                return Ok(());
            }
            let had_receipt = package.has_receipt();
            let told_on_arrival = self.tally.total();
            // Borrows first: they take nothing.
            let _ = package.is::<String>();
            let _ = package.payload::<[u64; 64]>();
            let package = package.downcast::<Stop>().unwrap_err();
            let told_before = self.tally.total();
            let kind = take_out(package).map_err(|_| "an unknown kind")?;
            let told_after = self.tally.total();
            self.log.lock().unwrap().push(Read {
                kind,
                had_receipt,
                told_on_arrival,
                told_before,
                told_after,
            });
        }
        Ok(())
    }
}

fn reader(scheduler: &Scheduler) -> (Completion<()>, Arc<Tally>, Arc<Mutex<Vec<Read>>>) {
    let tally = Arc::new(Tally::default());
    let log = Arc::new(Mutex::new(Vec::new()));
    let done = scheduler
        .spawn(Reader {
            tally: Arc::clone(&tally),
            log: Arc::clone(&log),
        })
        .unwrap();
    (done, tally, log)
}

/// Sends `kinds()` one at a time through `send`, each with a receipt
/// (token = its index), waiting for the reader to read each; checks each
/// was told exactly once, in the step that took it out.
fn each_kind_read_once(
    to: Pid,
    tally: &Tally,
    log: &Mutex<Vec<Read>>,
    tally_arc: &Arc<Tally>,
    mut send: impl FnMut(Package),
) {
    for (i, (name, make)) in kinds().iter().enumerate() {
        send(make(to).with_receipt(receipt(tally_arc, i as u64)));
        wait_until(&format!("the reader to read {name}"), || {
            log.lock().unwrap().len() > i
        });
        let read = log.lock().unwrap()[i].clone();
        assert_eq!(
            read,
            Read {
                kind: name,
                had_receipt: true,
                told_on_arrival: i,
                told_before: i,
                told_after: i + 1,
            },
            "{name}: delivered untold, told once by the step's downcast"
        );
        assert_eq!(tally.count(i as u64), 1, "{name}");
    }
}

#[test]
fn a_step_that_downcasts_a_forwarded_package_tells_its_receipt_once() {
    let scheduler = started(2);
    let (done, tally, log) = reader(&scheduler);
    let to = done.pid();
    each_kind_read_once(to, &tally, &log, &tally, |package| {
        scheduler.context().forward(package).unwrap();
    });
    scheduler
        .context()
        .forward(Package::new(OUTSIDE, to, Stop))
        .unwrap();
    done.wait().unwrap();
    assert!(
        tally.each_once(0..kinds().len() as u64),
        "{:?}",
        tally.tokens()
    );
    scheduler.shutdown(SHUTDOWN);
    assert!(
        tally.each_once(0..kinds().len() as u64),
        "{:?}",
        tally.tokens()
    );
}

/// A route that hands what it is sent to an engine.
struct IntoEngine(Arc<Scheduler>);

impl Receiver for IntoEngine {
    fn send(&self, package: Package) -> Result<(), SendError> {
        self.0.context().forward(package)
    }
}

#[test]
fn through_a_relay_router_into_the_engine_a_receipt_is_told_once_by_the_read() {
    let scheduler = Arc::new(started(2));
    let (done, tally, log) = reader(&scheduler);
    let to = done.pid();
    let router: Router<Arc<IntoEngine>> = Router::new();
    let route = Arc::new(IntoEngine(Arc::clone(&scheduler)));
    router.register(to, Arc::clone(&route)).ok().unwrap();
    each_kind_read_once(to, &tally, &log, &tally, |package| {
        router.route(package).unwrap();
    });

    // Refused by the table (no such PID registered): back, untold.
    let others = Arc::new(Tally::default());
    let err = router
        .route(Package::new(OUTSIDE, Pid::local(999_999), 1_u8).with_receipt(receipt(&others, 1)))
        .unwrap_err();
    assert_eq!(err.kind(), SendErrorKind::UnknownTarget);
    assert!(others.tokens().is_empty(), "a refusal takes nothing");

    // Refused by the engine, the process having ended: back, untold.
    scheduler
        .context()
        .forward(Package::new(OUTSIDE, to, Stop))
        .unwrap();
    done.wait().unwrap();
    let mut ended = router
        .route(Package::new(OUTSIDE, to, [1_u64; 64]).with_receipt(receipt(&others, 2)))
        .unwrap_err();
    assert_eq!(ended.kind(), SendErrorKind::Ended);
    assert!(ended.package_mut().has_receipt());
    assert_eq!(ended.package_mut().payload::<[u64; 64]>(), Some(&[1; 64]));
    assert!(others.tokens().is_empty(), "a refusal takes nothing");
    assert_eq!(err.into_package().downcast::<u8>().ok(), Some(1));
    assert_eq!(others.tokens(), vec![1]);
    drop(ended);
    assert_eq!(others.tokens(), vec![1, 2]);
    assert!(
        tally.each_once(0..kinds().len() as u64),
        "{:?}",
        tally.tokens()
    );
    scheduler.shutdown(SHUTDOWN);
}

#[test]
fn a_refused_forward_hands_the_package_back_untold() {
    let scheduler = started(1);
    let tally = Arc::new(Tally::default());
    for (i, (name, make)) in kinds().iter().enumerate() {
        let err = scheduler
            .context()
            .forward(make(Pid::local(424_242)).with_receipt(receipt(&tally, i as u64)))
            .unwrap_err();
        assert_eq!(err.kind(), SendErrorKind::UnknownTarget, "{name}");
        assert_eq!(tally.total(), i, "{name}: refused, not taken");
        let (kind, package) = err.into_parts();
        assert_eq!(kind, SendErrorKind::UnknownTarget);
        assert!(package.has_receipt(), "{name}: the receipt came back too");
        assert_eq!(take_out(package).ok(), Some(*name));
        assert_eq!(
            tally.count(i as u64),
            1,
            "{name}: told by the caller's read"
        );
    }
    scheduler.shutdown(SHUTDOWN);
}

/// Never reads: what reaches it stays in its mailbox. Records the most
/// events it was offered in a step; finishes, still reading nothing, in
/// the first step after `stop` is set.
struct Hoarder {
    offered: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

impl Process for Hoarder {
    type Done = ();
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        self.offered.fetch_max(events.len(), Ordering::SeqCst);
        if self.stop.load(Ordering::SeqCst) {
            out.finish(());
        }
        Ok(())
    }
}

struct Hoarding {
    done: Completion<()>,
    offered: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

fn hoarder(scheduler: &Scheduler) -> Hoarding {
    let (offered, stop) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicBool::new(false)),
    );
    let done = scheduler
        .spawn(Hoarder {
            offered: Arc::clone(&offered),
            stop: Arc::clone(&stop),
        })
        .unwrap();
    Hoarding {
        done,
        offered,
        stop,
    }
}

/// Forwards one receipted package of each kind to `to` (tokens from
/// `first`), and waits until the hoarder has been offered them all.
fn hoard_every_kind(scheduler: &Scheduler, h: &Hoarding, tally: &Arc<Tally>, first: u64) {
    let to = h.done.pid();
    for (i, (_, make)) in kinds().iter().enumerate() {
        scheduler
            .context()
            .forward(make(to).with_receipt(receipt(tally, first + i as u64)))
            .unwrap();
    }
    wait_until("the hoarder to be offered every message", || {
        h.offered.load(Ordering::SeqCst) == kinds().len()
    });
    assert!(
        tally.tokens().is_empty(),
        "left unread in the mailbox, taken all the same: {:?}",
        tally.tokens()
    );
}

#[test]
fn messages_a_terminated_process_never_read_are_told_once() {
    let scheduler = started(2);
    let tally = Arc::new(Tally::default());
    let h = hoarder(&scheduler);
    hoard_every_kind(&scheduler, &h, &tally, 0);
    let dead_before = scheduler.stats().dead_letters;
    scheduler.terminate(h.done.pid()).unwrap();
    assert!(h.done.wait().is_err(), "terminated");
    wait_until("every unread message to be told", || {
        tally.total() >= kinds().len()
    });
    assert!(
        tally.each_once(0..kinds().len() as u64),
        "{:?}",
        tally.tokens()
    );
    assert!(scheduler.stats().dead_letters >= dead_before + kinds().len() as u64);
    scheduler.shutdown(SHUTDOWN);
    assert!(
        tally.each_once(0..kinds().len() as u64),
        "{:?}",
        tally.tokens()
    );
}

#[test]
fn messages_a_process_that_finished_never_read_are_told_once() {
    let scheduler = started(2);
    let tally = Arc::new(Tally::default());
    let h = hoarder(&scheduler);
    hoard_every_kind(&scheduler, &h, &tally, 0);
    h.stop.store(true, Ordering::SeqCst);
    // One more, to step it: it finishes in that step, reading nothing.
    let trigger = kinds().len() as u64;
    scheduler
        .context()
        .forward(Package::new(OUTSIDE, h.done.pid(), ()).with_receipt(receipt(&tally, trigger)))
        .unwrap();
    h.done.wait().unwrap();
    wait_until("every unread message to be told", || {
        tally.total() > kinds().len()
    });
    assert!(tally.each_once(0..=trigger), "{:?}", tally.tokens());
    scheduler.shutdown(SHUTDOWN);
    assert!(tally.each_once(0..=trigger), "{:?}", tally.tokens());
}

#[test]
fn messages_left_unread_at_shutdown_are_told_once() {
    let scheduler = started(2);
    let tally = Arc::new(Tally::default());
    let h = hoarder(&scheduler);
    hoard_every_kind(&scheduler, &h, &tally, 0);
    // The hoarder ignores its cancel (it reads nothing): forced at the
    // deadline.
    scheduler.shutdown(Duration::from_millis(200));
    drop(scheduler);
    wait_until("every unread message to be told", || {
        tally.total() >= kinds().len()
    });
    assert!(
        tally.each_once(0..kinds().len() as u64),
        "{:?}",
        tally.tokens()
    );
}

/// Fails (or panics) in its first step that sees a message, reading
/// nothing.
struct Failing {
    panic: bool,
    armed: Arc<AtomicBool>,
}

impl Process for Failing {
    type Done = ();
    fn step(&mut self, _: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
        if !self.armed.load(Ordering::SeqCst) {
            return Ok(());
        }
        if self.panic {
            panic!("a step that panics, on purpose, with messages unread");
        }
        Err("a step that fails, on purpose, with messages unread".into())
    }
}

#[test]
fn messages_a_failed_or_panicked_process_never_read_are_told_once() {
    for panic in [false, true] {
        // One worker: the messages are all in the mailbox before the
        // process's first step (the test holds it off with `armed`
        // until they are).
        let scheduler = started(1);
        let tally = Arc::new(Tally::default());
        let armed = Arc::new(AtomicBool::new(false));
        let done = scheduler
            .spawn(Failing {
                panic,
                armed: Arc::clone(&armed),
            })
            .unwrap();
        for (i, (_, make)) in kinds().iter().enumerate() {
            scheduler
                .context()
                .forward(make(done.pid()).with_receipt(receipt(&tally, i as u64)))
                .unwrap();
        }
        armed.store(true, Ordering::SeqCst);
        // One more, so that a step runs armed.
        let last = kinds().len() as u64;
        scheduler
            .context()
            .forward(Package::new(OUTSIDE, done.pid(), ()).with_receipt(receipt(&tally, last)))
            .unwrap();
        assert!(done.wait().is_err(), "panic {panic}: it ended abnormally");
        wait_until("every unread message to be told", || {
            tally.total() > kinds().len()
        });
        assert!(
            tally.each_once(0..=last),
            "panic {panic}: {:?}",
            tally.tokens()
        );
        scheduler.shutdown(SHUTDOWN);
        assert!(
            tally.each_once(0..=last),
            "panic {panic}: {:?}",
            tally.tokens()
        );
    }
}

/// Reads nothing in its steps; in `unread`, takes out (downcasts) the
/// `u8` messages and keeps the rest (dead letters).
struct Picky {
    tally: Arc<Tally>,
    told_in_unread: Arc<Mutex<Vec<(usize, usize)>>>,
    stop: Arc<AtomicBool>,
}

impl Process for Picky {
    type Done = ();
    fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        if self.stop.load(Ordering::SeqCst) {
            out.finish(());
        }
        Ok(())
    }
    fn unread(&mut self, unread: &mut Vec<Event>) {
        let before = self.tally.total();
        let mut kept = Vec::new();
        for event in unread.drain(..) {
            match event {
                Event::Message(package) if package.is::<u8>() => {
                    let _ = package.downcast::<u8>();
                }
                other => kept.push(other),
            }
        }
        *unread = kept;
        self.told_in_unread
            .lock()
            .unwrap()
            .push((before, self.tally.total()));
    }
}

#[test]
fn messages_taken_or_kept_by_unread_are_each_told_once() {
    let scheduler = started(1);
    let tally = Arc::new(Tally::default());
    let told_in_unread = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let done = scheduler
        .spawn(Picky {
            tally: Arc::clone(&tally),
            told_in_unread: Arc::clone(&told_in_unread),
            stop: Arc::clone(&stop),
        })
        .unwrap();
    let to = done.pid();
    // Tokens 0..3: u8 (taken in unread); 10..13: [u64; 64] (kept).
    for i in 0..3_u64 {
        scheduler
            .context()
            .forward(Package::new(OUTSIDE, to, i as u8).with_receipt(receipt(&tally, i)))
            .unwrap();
        scheduler
            .context()
            .forward(Package::new(OUTSIDE, to, [i; 64]).with_receipt(receipt(&tally, 10 + i)))
            .unwrap();
    }
    stop.store(true, Ordering::SeqCst);
    scheduler
        .context()
        .forward(Package::new(OUTSIDE, to, [9_u64; 64]).with_receipt(receipt(&tally, 13)))
        .unwrap();
    done.wait().unwrap();
    let want = [0, 1, 2, 10, 11, 12, 13];
    wait_until("every message to be told", || tally.total() >= want.len());
    assert!(tally.each_once(want), "{:?}", tally.tokens());
    let calls = told_in_unread.lock().unwrap().clone();
    assert_eq!(calls.len(), 1, "unread offered once");
    assert_eq!(
        calls[0],
        (0, 3),
        "nothing told before unread; the three taken there, told there"
    );
    scheduler.shutdown(SHUTDOWN);
    assert!(tally.each_once(want), "{:?}", tally.tokens());
}

/// Takes every message and drops it without reading it, noting how many
/// receipts were told right after each drop.
struct Dropper {
    tally: Arc<Tally>,
    after_drop: Arc<Mutex<Vec<usize>>>,
}

impl Process for Dropper {
    type Done = ();
    fn step(&mut self, events: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            drop(event);
            self.after_drop.lock().unwrap().push(self.tally.total());
        }
        Ok(())
    }
}

#[test]
fn a_step_that_drops_a_message_unread_tells_it_once_there() {
    let scheduler = started(2);
    let tally = Arc::new(Tally::default());
    let after_drop = Arc::new(Mutex::new(Vec::new()));
    let done = scheduler
        .spawn(Dropper {
            tally: Arc::clone(&tally),
            after_drop: Arc::clone(&after_drop),
        })
        .unwrap();
    for (i, (name, make)) in kinds().iter().enumerate() {
        scheduler
            .context()
            .forward(make(done.pid()).with_receipt(receipt(&tally, i as u64)))
            .unwrap();
        wait_until(name, || after_drop.lock().unwrap().len() > i);
        assert_eq!(
            after_drop.lock().unwrap()[i],
            i + 1,
            "{name}: told at the drop"
        );
    }
    assert!(
        tally.each_once(0..kinds().len() as u64),
        "{:?}",
        tally.tokens()
    );
    scheduler.shutdown(SHUTDOWN);
    assert!(
        tally.each_once(0..kinds().len() as u64),
        "{:?}",
        tally.tokens()
    );
}

/// Reads one message per step and leaves the rest for the next.
struct OneAtATime {
    tally: Arc<Tally>,
    /// (told before the step's read, told after it) for each read.
    reads: Arc<Mutex<Vec<(usize, usize)>>>,
    gate: Arc<AtomicBool>,
}

impl Process for OneAtATime {
    type Done = ();
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        if !self.gate.load(Ordering::SeqCst) {
            return Ok(());
        }
        if let Some(Event::Message(package)) = events.next() {
            let before = self.tally.total();
            take_out(package).map_err(|_| "an unknown kind")?;
            self.reads
                .lock()
                .unwrap()
                .push((before, self.tally.total()));
        }
        if !events.is_empty() {
            out.continue_();
        }
        Ok(())
    }
}

#[test]
fn messages_a_step_leaves_for_the_next_are_told_only_when_read() {
    let scheduler = started(1);
    let tally = Arc::new(Tally::default());
    let reads = Arc::new(Mutex::new(Vec::new()));
    let gate = Arc::new(AtomicBool::new(false));
    let done = scheduler
        .spawn(OneAtATime {
            tally: Arc::clone(&tally),
            reads: Arc::clone(&reads),
            gate: Arc::clone(&gate),
        })
        .unwrap();
    for (i, (_, make)) in kinds().iter().enumerate() {
        scheduler
            .context()
            .forward(make(done.pid()).with_receipt(receipt(&tally, i as u64)))
            .unwrap();
    }
    gate.store(true, Ordering::SeqCst);
    // A step to start the reading (a message read like the others).
    let n = kinds().len();
    scheduler
        .context()
        .forward(Package::new(OUTSIDE, done.pid(), 7_u8).with_receipt(receipt(&tally, n as u64)))
        .unwrap();
    wait_until("every message to be read", || {
        reads.lock().unwrap().len() > n
    });
    let reads = reads.lock().unwrap().clone();
    let want: Vec<(usize, usize)> = (0..=n).map(|i| (i, i + 1)).collect();
    assert_eq!(reads, want, "each told by its own read, none before");
    assert!(tally.each_once(0..=n as u64), "{:?}", tally.tokens());
    scheduler.shutdown(SHUTDOWN);
}

/// Passes each message on to `to`: readdressed as it is, or, as a hop
/// that takes the payload apart, with its receipt moved onto the new
/// package. Notes how many receipts were told right after each pass.
struct Relay {
    to: Pid,
    hop: bool,
    tally: Arc<Tally>,
    after_pass: Arc<Mutex<Vec<usize>>>,
}

impl Process for Relay {
    type Done = ();
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            let Event::Message(mut package) = event else {
                continue;
            };
            if self.hop {
                let receipt = package.take_receipt().ok_or("no receipt")?;
                let (source, _, payload) = package.into_parts();
                let onward = Package::from_payload(source, self.to, payload).with_receipt(receipt);
                out.forward(onward).map_err(|e| e.to_string())?;
            } else {
                out.forward(package.with_target(self.to))
                    .map_err(|e| e.to_string())?;
            }
            self.after_pass.lock().unwrap().push(self.tally.total());
        }
        Ok(())
    }
}

#[test]
fn a_process_passing_a_package_on_does_not_tell_it_the_reader_does() {
    for hop in [false, true] {
        // One worker: the reader cannot read while the relay's step runs.
        let scheduler = started(1);
        let (done, tally, log) = reader(&scheduler);
        let after_pass = Arc::new(Mutex::new(Vec::new()));
        let relay = scheduler
            .spawn(Relay {
                to: done.pid(),
                hop,
                tally: Arc::clone(&tally),
                after_pass: Arc::clone(&after_pass),
            })
            .unwrap();
        let via = relay.pid();
        each_kind_read_once(done.pid(), &tally, &log, &tally, |package| {
            scheduler
                .context()
                .forward(package.with_target(via))
                .unwrap();
        });
        let passes = after_pass.lock().unwrap().clone();
        let want: Vec<usize> = (0..kinds().len()).collect();
        assert_eq!(passes, want, "hop {hop}: passing on told nothing");
        assert!(
            tally.each_once(0..kinds().len() as u64),
            "hop {hop}: {:?}",
            tally.tokens()
        );
        scheduler.shutdown(SHUTDOWN);
        assert!(tally.each_once(0..kinds().len() as u64), "hop {hop}");
    }
}

/// Reads its messages through `events.typed`, which takes each out.
struct Counter {
    tally: Arc<Tally>,
    /// (value, receipts told right after it was handed out).
    seen: Arc<Mutex<Vec<(u64, usize)>>>,
}

// Large on purpose: a message the package boxes.
#[allow(clippy::large_enum_variant)]
enum Count {
    Add(u64),
    Big([u64; 64]),
}

impl Accepts for Counter {
    type Message = Count;
}

impl Process for Counter {
    type Done = ();
    fn step(&mut self, events: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events.typed::<Self>() {
            if let Event::Message(count) = event {
                let n = match count {
                    Count::Add(n) => n,
                    Count::Big(a) => a[0],
                };
                self.seen.lock().unwrap().push((n, self.tally.total()));
            }
        }
        Ok(())
    }
}

#[test]
fn a_typed_read_tells_once_and_a_message_of_another_type_dropped_there_too() {
    let scheduler = started(2);
    let tally = Arc::new(Tally::default());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let done = scheduler
        .spawn(Counter {
            tally: Arc::clone(&tally),
            seen: Arc::clone(&seen),
        })
        .unwrap();
    let to = done.pid();
    let forward = |package: Package| scheduler.context().forward(package).unwrap();
    forward(Package::new(OUTSIDE, to, Count::Add(5)).with_receipt(receipt(&tally, 1)));
    wait_until("the first read", || seen.lock().unwrap().len() == 1);
    forward(Package::new(OUTSIDE, to, Count::Big([8; 64])).with_receipt(receipt(&tally, 2)));
    wait_until("the second read", || seen.lock().unwrap().len() == 2);
    assert_eq!(
        *seen.lock().unwrap(),
        vec![(5, 1), (8, 2)],
        "each told when the typed read handed it out"
    );
    // Not a `Count`: dropped (with a warning) by the typed read; told.
    forward(Package::new(OUTSIDE, to, 3_u8).with_receipt(receipt(&tally, 3)));
    wait_until("the stray message to be told", || tally.total() == 3);
    assert!(tally.each_once([1, 2, 3]), "{:?}", tally.tokens());
    scheduler.shutdown(SHUTDOWN);
    assert!(tally.each_once([1, 2, 3]), "{:?}", tally.tokens());
}

#[test]
fn an_urgent_message_held_unread_is_not_told_until_the_process_ends() {
    use sched::message::Urgent;
    let scheduler = started(2);
    // Held unread: the wrapper taken off on the way is no read.
    let tally = Arc::new(Tally::default());
    let h = hoarder(&scheduler);
    let to = h.done.pid();
    scheduler
        .context()
        .forward(Package::new(OUTSIDE, to, Urgent::new(7_u8)).with_receipt(receipt(&tally, 1)))
        .unwrap();
    scheduler
        .context()
        .forward(
            Package::new(OUTSIDE, to, Urgent::new([9_u64; 64])).with_receipt(receipt(&tally, 2)),
        )
        .unwrap();
    wait_until("the hoarder to be offered both", || {
        h.offered.load(Ordering::SeqCst) == 2
    });
    assert!(
        tally.tokens().is_empty(),
        "urgent messages left unread, taken all the same: {:?}",
        tally.tokens()
    );
    scheduler.terminate(to).unwrap();
    assert!(h.done.wait().is_err());
    wait_until("both to be told", || tally.total() >= 2);
    assert!(tally.each_once([1, 2]), "{:?}", tally.tokens());
    scheduler.shutdown(SHUTDOWN);
}

#[test]
fn an_urgent_message_read_by_a_step_is_told_once_by_that_read() {
    use sched::message::Urgent;
    let scheduler = started(2);
    let (done, tally, log) = reader(&scheduler);
    let to = done.pid();
    for (i, payload) in [
        Urgent::new(7_u8),
        Urgent::new([9_u64; 64]),
        Urgent::new(Box::new(5_u32) as Payload),
    ]
    .into_iter()
    .enumerate()
    {
        scheduler
            .context()
            .forward(Package::new(OUTSIDE, to, payload).with_receipt(receipt(&tally, i as u64)))
            .unwrap();
        wait_until("the read", || log.lock().unwrap().len() > i);
        let read = log.lock().unwrap()[i].clone();
        assert_eq!(
            (read.told_on_arrival, read.told_before, read.told_after),
            (i, i, i + 1),
            "urgent {i}: {read:?}"
        );
    }
    assert!(tally.each_once(0..3), "{:?}", tally.tokens());
    scheduler.shutdown(SHUTDOWN);
}
