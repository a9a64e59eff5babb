//! `ReplyTo::forward`, `Context::reply_pair` and `Output::reply_pair`
//! tested from their documentation only (the actors guide's "Passing a
//! question on" and the ask sections before it, and the rustdoc of
//! `ReplyTo`, `Reply`, `ReplyId`, `Request`, `Responder`, `AskError`),
//! trying to break what they promise: chains of hops, rights handed back
//! unspent, dropped rights, a step's pair answered or timed out exactly
//! once, what the answerer and `asker()` see, and rights moved between
//! threads.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use sched::actor::{AskError, Replied, ReplyTo};
use sched::message::SendErrorKind;
use sched::prelude::*;
use sched::ReplyId;

const WAIT: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Square(u64);
impl Question for Square {
    type Answer = u64;
}

/// A question nobody here takes.
struct Other;
impl Question for Other {
    type Answer = u64;
}

fn started() -> Scheduler {
    let scheduler = Scheduler::builder().workers(2).build();
    scheduler.start();
    scheduler
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + WAIT;
    while !done() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// What an answerer saw: the request's source, the responder's asker, n.
type Seen = Arc<Mutex<Vec<(Pid, Pid, u64)>>>;

/// Answers every `Square(n)` with `n * n`, recording what it saw, and an
/// untyped bare `u64` with its square through the untyped reply.
struct Squarer(Seen);
impl Process for Squarer {
    type Done = ();
    fn step(&mut self, events: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            if let Event::Request(request) = event {
                if let Some(n) = request.payload::<u64>().copied() {
                    request.reply(n * n);
                    continue;
                }
                let source = request.package().source();
                if let Ok((Square(n), answer)) = request.take::<Square>() {
                    self.0.lock().unwrap().push((source, answer.asker(), n));
                    answer.answer(n * n);
                }
            }
        }
        Ok(())
    }
}

fn squarer(scheduler: &Scheduler) -> (Pid, Seen) {
    let seen = Seen::default();
    let pid = scheduler.spawn(Squarer(Arc::clone(&seen))).unwrap().pid();
    (pid, seen)
}

/// Passes every `Square(n)` on to `to` as `Square(n + add)`, and any other
/// question as its payload, as it came (the rustdoc example of
/// `ReplyTo::forward`: `question.into_payload()`); records the asker each
/// right names, and counts every `Event::Reply` it gets (a hop never
/// learns of the answer). A forward that fails is answered `u64::MAX`.
struct Hop {
    to: Pid,
    add: u64,
    askers: Arc<Mutex<Vec<Pid>>>,
    replies: Arc<AtomicUsize>,
}
impl Process for Hop {
    type Done = ();
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            let request = match event {
                Event::Request(request) => request,
                Event::Reply { .. } => {
                    self.replies.fetch_add(1, Ordering::SeqCst);
                    continue;
                }
                _ => continue,
            };
            let forwarded = match request.take::<Square>() {
                Ok((Square(n), answer)) => {
                    self.askers.lock().unwrap().push(answer.asker());
                    let right = answer.into_reply_to();
                    right.forward(out.context(), self.to, Square(n + self.add))
                }
                Err(request) => {
                    let (question, right) = request.into_parts();
                    right.forward(out.context(), self.to, question.into_payload())
                }
            };
            if let Err((_, right)) = forwarded {
                right.reply(u64::MAX);
            }
        }
        Ok(())
    }
}

fn hop(scheduler: &Scheduler, to: Pid, add: u64) -> (Pid, Arc<Mutex<Vec<Pid>>>, Arc<AtomicUsize>) {
    let (askers, replies) = (Arc::default(), Arc::default());
    let hop = Hop {
        to,
        add,
        askers: Arc::clone(&askers),
        replies: Arc::clone(&replies),
    };
    (scheduler.spawn(hop).unwrap().pid(), askers, replies)
}

/// Ends at its first step, reading nothing.
struct Quitter;
impl Process for Quitter {
    type Done = ();
    fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        out.finish(());
        Ok(())
    }
}

/// How a [`Mishandler`] mishandles each request.
#[derive(Clone, Copy)]
enum Mishandle {
    /// `take::<Square>()`, then drops the responder.
    TakeAndDrop,
    /// Drops the request as it came.
    DropRequest,
    /// `take::<Other>()` fails, then drops the request.
    WrongTake,
    /// Answers a `String` through the untyped right.
    WrongAnswer,
    /// Keeps the right and finishes on its next message.
    HoldAndEnd,
}

/// Mishandles every request its way, counting them; finishes on a message.
struct Mishandler(Mishandle, Vec<ReplyTo>, Arc<AtomicUsize>);
impl Process for Mishandler {
    type Done = ();
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            match event {
                Event::Request(request) => match self.0 {
                    Mishandle::TakeAndDrop => drop(request.take::<Square>().ok()),
                    Mishandle::DropRequest => drop(request),
                    Mishandle::WrongTake => drop(request.take::<Other>().err()),
                    Mishandle::WrongAnswer => request.into_parts().1.reply(String::from("no")),
                    Mishandle::HoldAndEnd => {
                        self.2.fetch_add(1, Ordering::SeqCst);
                        self.1.push(request.into_parts().1);
                    }
                },
                Event::Message(_) => out.finish(()),
                _ => {}
            }
        }
        Ok(())
    }
}

/// Holds every `Square` right until a message: `true` answers them all,
/// `false` drops them all.
struct Holder {
    held: Vec<(u64, sched::actor::Responder<u64>)>,
    count: Arc<AtomicUsize>,
}
impl Process for Holder {
    type Done = ();
    fn step(&mut self, events: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            match event {
                Event::Request(request) => {
                    if let Ok((Square(n), answer)) = request.take::<Square>() {
                        self.held.push((n, answer));
                        self.count.fetch_add(1, Ordering::SeqCst);
                    }
                }
                Event::Message(m) => {
                    let answer = m.downcast::<bool>().unwrap_or(false);
                    for (n, right) in self.held.drain(..) {
                        if answer {
                            right.answer(n * n);
                        } else {
                            drop(right);
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }
}

fn holder(scheduler: &Scheduler) -> (Pid, Arc<AtomicUsize>) {
    let count = Arc::new(AtomicUsize::new(0));
    let held = Holder {
        held: Vec::new(),
        count: Arc::clone(&count),
    };
    (scheduler.spawn(held).unwrap().pid(), count)
}

/// What a [`PairAsker`] saw: its own PID and its right's `asker()`, every
/// reply to its pair, and every other `Event::Reply`.
#[derive(Default)]
struct PairLog {
    me: Mutex<Option<(Pid, Pid)>>,
    replies: Mutex<Vec<Result<u64, AskError>>>,
    stray: AtomicUsize,
}

impl PairLog {
    fn replies(&self) -> Vec<Result<u64, AskError>> {
        self.replies.lock().unwrap().clone()
    }
}

/// Makes a pair with `out.reply_pair::<Square>(timeout)` at its start and
/// forwards `Square(n)` to `to`, or keeps the right itself (no `to`) until
/// a message tells it to drop it.
struct PairAsker {
    to: Option<Pid>,
    n: u64,
    timeout: Duration,
    own: Option<ReplyTo>,
    id: Option<ReplyId<u64>>,
    log: Arc<PairLog>,
}
impl Process for PairAsker {
    type Done = ();
    fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        let (id, right) = out.reply_pair::<Square>(self.timeout);
        *self.log.me.lock().unwrap() = Some((out.pid(), right.asker()));
        self.id = Some(id);
        match self.to {
            Some(to) => right
                .forward(out.context(), to, Square(self.n))
                .map_err(|(e, _)| e)?,
            None => self.own = Some(right),
        }
        Ok(())
    }
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        let id = self.id.expect("made at start");
        for event in events {
            match id.answer(event) {
                Replied::Answered(n) => self.log.replies.lock().unwrap().push(Ok(n)),
                Replied::Failed(e) => self.log.replies.lock().unwrap().push(Err(e)),
                Replied::Other(Event::Reply { .. }) => {
                    self.log.stray.fetch_add(1, Ordering::SeqCst);
                }
                Replied::Other(Event::Message(_)) => self.own = None,
                Replied::Other(Event::Cancel) => out.finish(()),
                Replied::Other(_) => {}
            }
        }
        Ok(())
    }
}

fn pair_asker(
    scheduler: &Scheduler,
    to: Option<Pid>,
    n: u64,
    timeout: Duration,
) -> (Pid, Arc<PairLog>) {
    let log = Arc::new(PairLog::default());
    let asker = PairAsker {
        to,
        n,
        timeout,
        own: None,
        id: None,
        log: Arc::clone(&log),
    };
    (scheduler.spawn(asker).unwrap().pid(), log)
}

/// Waits for a step's pair to be replied to, then past its timeout and a
/// margin, and returns every reply it got (exactly one is promised).
fn settled_replies(log: &PairLog, timeout: Duration) -> Vec<Result<u64, AskError>> {
    wait_until("a reply to the step's pair", || !log.replies().is_empty());
    std::thread::sleep(timeout + Duration::from_millis(500));
    log.replies()
}

/// A question forwarded through three hops, each asking the next a new
/// question, is answered once to the original asker (outside and a step),
/// with the last hop's question; the hops never see a reply; every hop's
/// right and the answerer's request name the original asker.
#[test]
fn a_question_passed_through_three_hops_is_answered_once_to_the_original_asker() {
    let scheduler = started();
    let (sq, seen) = squarer(&scheduler);
    let (mut first, mut hops) = (sq, Vec::new());
    for add in [1, 10, 100] {
        let (pid, askers, replies) = hop(&scheduler, first, add);
        (first, hops) = (pid, [hops, vec![(askers, replies)]].concat());
    }
    let askers = || -> Vec<Pid> {
        let all = hops
            .iter()
            .map(|(askers, _)| askers.lock().unwrap().clone());
        all.collect::<Vec<_>>().concat()
    };
    let replies = || -> usize { hops.iter().map(|(_, r)| r.load(Ordering::SeqCst)).sum() };

    let mut reply = scheduler.ask(first, Square(1)).unwrap();
    assert_eq!(reply.wait_timeout(WAIT), Ok(112 * 112));
    assert_eq!(reply.wait_timeout(WAIT), Err(AskError::AlreadyTaken));
    assert_eq!(
        seen.lock().unwrap().clone(),
        [(Pid::OUTSIDE, Pid::OUTSIDE, 112)]
    );
    assert_eq!(askers(), [Pid::OUTSIDE; 3]);

    let timeout = Duration::from_millis(800);
    let (me, log) = pair_asker(&scheduler, Some(first), 2, timeout);
    assert_eq!(settled_replies(&log, timeout), [Ok(113 * 113)]);
    assert_eq!(
        *log.me.lock().unwrap(),
        Some((me, me)),
        "a step's right names the step"
    );
    assert_eq!(
        seen.lock().unwrap()[1],
        (me, me, 113),
        "source and asker after 4 hops"
    );
    let o = Pid::OUTSIDE;
    assert_eq!(
        askers(),
        [o, me, o, me, o, me],
        "the askers the hops' rights named"
    );
    assert_eq!(log.stray.load(Ordering::SeqCst), 0);
    assert_eq!(replies(), 0, "a hop saw a reply");
    scheduler.shutdown(Duration::from_secs(1));
}

/// A forward that cannot go (the process ended, never existed, its mailbox
/// is full) hands back the error, the question in its package, and the
/// right unspent: the asker is not answered, and the same right then
/// forwarded elsewhere is answered. From a step, as the guide's Router.
#[test]
fn a_forward_that_cannot_go_hands_the_question_and_the_right_back_unspent() {
    let scheduler = started();
    let (sq, _) = squarer(&scheduler);
    let mut ended = scheduler.spawn(Quitter).unwrap();
    ended.wait_timeout(WAIT).unwrap();
    let never = Pid::new(sq.node(), 1 << 40);
    let cx = scheduler.context();
    for (to, kind) in [
        (ended.pid(), SendErrorKind::Ended),
        (never, SendErrorKind::UnknownTarget),
    ] {
        let (mut reply, right) = cx.reply_pair::<Square>();
        let (error, right) = right.forward(cx, to, Square(5)).unwrap_err();
        assert_eq!(error.kind(), kind);
        assert_eq!(error.target(), to);
        assert_eq!(
            error.into_package().downcast::<Square>().ok(),
            Some(Square(5))
        );
        assert_eq!(right.asker(), Pid::OUTSIDE);
        let early = reply.wait_timeout(Duration::from_millis(200));
        assert_eq!(early, Err(AskError::TimedOut), "the right was spent");
        right
            .forward(cx, sq, Square(6))
            .map_err(|(e, _)| e)
            .unwrap();
        assert_eq!(reply.wait_timeout(WAIT), Ok(36));
    }

    // From a step: the guide's Router answers 0 through the right it got back.
    let (router, _, _) = hop(&scheduler, ended.pid(), 0);
    assert_eq!(
        scheduler.ask(router, Square(3)).unwrap().wait_timeout(WAIT),
        Ok(u64::MAX)
    );
    scheduler.shutdown(Duration::from_secs(1));
}

/// The guide: "If the question cannot go (`to` has ended, its mailbox is
/// full), the error comes back with the right unspent"; the rustdoc: "as
/// for `Context::send`: ... mailbox full". A process whose bounded mailbox
/// refuses a send (`Full`) must refuse a forward too, handing the right
/// back; then, once a step drains the mailbox, the same right goes.
#[test]
fn a_forward_to_a_full_mailbox_goes_all_the_same() {
    // Not started: nothing drains the mailbox of one.
    let bounded = Scheduler::builder().workers(1).mailbox_capacity(1).build();
    let (sq, _) = squarer(&bounded);
    bounded.send(sq, 1_u32).unwrap();
    let full = bounded.send(sq, 2_u32).unwrap_err();
    assert_eq!(full.kind(), SendErrorKind::Full, "the mailbox is full");
    // The docs: a question is not held to the mailbox's capacity (its
    // asker waits for it): the forward goes, and is answered once read.
    let cx = bounded.context();
    let (mut reply, right) = cx.reply_pair::<Square>();
    right
        .forward(cx, sq, Square(4))
        .map_err(|(e, _)| e)
        .expect("a question is never refused Full");
    bounded.start();
    assert_eq!(reply.wait_timeout(WAIT), Ok(16));
    bounded.shutdown(Duration::from_secs(1));
}

/// Every way a right goes unanswered: dropped at once, dropped after a
/// failed forward, and forwarded to a process that drops it (after a
/// take, as it came, after a wrong take) or ends holding it. Each asker
/// gets its one documented error, from outside and from a step.
#[test]
fn a_right_dropped_unanswered_answers_no_reply_once() {
    let scheduler = started();
    let cx = scheduler.context();
    let (mut reply, right) = cx.reply_pair::<Square>();
    drop(right);
    assert_eq!(reply.wait_timeout(WAIT), Err(AskError::NoReply));

    let ended = scheduler.spawn(Quitter).unwrap().pid();
    wait_until("the quitter to end", || cx.process_info(ended).is_none());
    let (mut reply, right) = cx.reply_pair::<Square>();
    let (_, right) = right.forward(cx, ended, Square(1)).unwrap_err();
    drop(right);
    assert_eq!(reply.wait_timeout(WAIT), Err(AskError::NoReply));

    for mode in [
        Mishandle::TakeAndDrop,
        Mishandle::DropRequest,
        Mishandle::WrongTake,
        Mishandle::WrongAnswer,
        Mishandle::HoldAndEnd,
    ] {
        let held = Arc::new(AtomicUsize::new(0));
        let mishandler = Mishandler(mode, Vec::new(), Arc::clone(&held));
        let to = scheduler.spawn(mishandler).unwrap().pid();
        let (mut reply, right) = cx.reply_pair::<Square>();
        right
            .forward(cx, to, Square(2))
            .map_err(|(e, _)| e)
            .unwrap();
        let timeout = Duration::from_millis(300);
        let (_, log) = pair_asker(&scheduler, Some(to), 3, timeout);
        if let Mishandle::HoldAndEnd = mode {
            wait_until("both rights to be held", || {
                held.load(Ordering::SeqCst) == 2
            });
            scheduler.send(to, ()).unwrap();
        }
        let outside = reply.wait_timeout(WAIT);
        let step = settled_replies(&log, timeout);
        match mode {
            Mishandle::WrongTake => {
                for got in [outside, step[0]] {
                    assert!(
                        matches!(got, Err(AskError::UnexpectedQuestion { .. })),
                        "{got:?}"
                    );
                }
            }
            Mishandle::WrongAnswer => {
                assert_eq!(outside, Err(AskError::UnexpectedType));
                assert_eq!(step[0], Err(AskError::UnexpectedType));
            }
            _ => {
                assert_eq!(outside, Err(AskError::NoReply));
                assert_eq!(step[0], Err(AskError::NoReply));
            }
        }
        assert_eq!(step.len(), 1, "one reply per step pair: {step:?}");
    }
    scheduler.shutdown(Duration::from_secs(1));
}

/// A step's pair is replied to exactly once: answered (no `TimedOut`
/// after its timeout passes), or timed out once (a later answer or drop
/// of the right sends nothing more), held by the step itself or by
/// another process.
#[test]
fn a_steps_pair_gets_exactly_one_reply() {
    let scheduler = started();
    let (sq, _) = squarer(&scheduler);
    let short = Duration::from_millis(200);

    let (_, answered) = pair_asker(&scheduler, Some(sq), 9, short * 3);
    assert_eq!(settled_replies(&answered, short * 3), [Ok(81)]);

    for answer_late in [true, false] {
        let (held, count) = holder(&scheduler);
        let (_, log) = pair_asker(&scheduler, Some(held), 4, short);
        wait_until("the holder to hold the right", || {
            count.load(Ordering::SeqCst) == 1
        });
        wait_until("the timeout", || !log.replies().is_empty());
        scheduler.send(held, answer_late).unwrap();
        std::thread::sleep(Duration::from_millis(500));
        assert_eq!(
            log.replies(),
            [Err(AskError::TimedOut)],
            "late answer {answer_late}"
        );
    }

    // The step keeps its own right past the timeout, then drops it.
    let (me, log) = pair_asker(&scheduler, None, 1, short);
    wait_until("the timeout", || !log.replies().is_empty());
    scheduler.send(me, ()).unwrap();
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(log.replies(), [Err(AskError::TimedOut)]);
    assert_eq!(log.stray.load(Ordering::SeqCst), 0);

    // Outside: a wait that times out leaves the forwarded answer for a later wait.
    let (held, count) = holder(&scheduler);
    let cx = scheduler.context();
    let (mut reply, right) = cx.reply_pair::<Square>();
    right
        .forward(cx, held, Square(12))
        .map_err(|(e, _)| e)
        .unwrap();
    wait_until("the holder to hold the right", || {
        count.load(Ordering::SeqCst) == 1
    });
    assert_eq!(reply.wait_timeout(short), Err(AskError::TimedOut));
    scheduler.send(held, true).unwrap();
    assert_eq!(reply.wait_timeout(WAIT), Ok(144));
    scheduler.shutdown(Duration::from_secs(1));
}

/// The answerer gets an ordinary request: an untyped question forwarded
/// as its payload (the rustdoc's router) reads as the bare value, not a
/// box in a box; a forward to a process that ends before reading it
/// answers `Unread` and hands the forwarded question back.
#[test]
fn the_answerer_reads_an_ordinary_request_and_an_unread_one_comes_back() {
    let scheduler = started();
    let (squarer, _) = squarer(&scheduler);
    let (router, _, _) = hop(&scheduler, squarer, 0);
    let mut reply = scheduler.ask(router, Box::new(7_u64) as Payload).unwrap();
    let answer = reply.wait_timeout(WAIT).unwrap();
    assert_eq!(answer.downcast_ref::<u64>(), Some(&49), "{answer:?}");
    let (mut reply, right) = scheduler.context().reply_pair::<Payload>();
    right
        .forward(scheduler.context(), squarer, Box::new(8_u64) as Payload)
        .map_err(|(e, _)| e)
        .unwrap();
    assert_eq!(
        reply.wait_timeout(WAIT).unwrap().downcast_ref::<u64>(),
        Some(&64)
    );
    scheduler.shutdown(Duration::from_secs(1));

    // Not started: the quitter ends at its first step with the question unread.
    let scheduler = Scheduler::builder().workers(1).build();
    let quitter = scheduler.spawn(Quitter).unwrap().pid();
    let cx = scheduler.context();
    let (mut reply, right) = cx.reply_pair::<Square>();
    right
        .forward(cx, quitter, Square(5))
        .map_err(|(e, _)| e)
        .unwrap();
    scheduler.start();
    assert_eq!(reply.wait_timeout(WAIT), Err(AskError::Unread));
    let question = reply.take_question().expect("the question handed back");
    assert_eq!(
        question.downcast::<Square>().ok().map(|q| *q),
        Some(Square(5))
    );
    assert!(reply.take_question().is_none(), "handed back twice");
    scheduler.shutdown(Duration::from_secs(1));
}

/// `Request::take` names "the last type tried" when a request that was
/// not a `Q` is dropped, and a responder dropped unanswered answers
/// `NoReply`. So: two wrong takes then a drop name the second type; a
/// wrong take, then a right one whose responder is dropped, is `NoReply`
/// (the process did take the question). Asked directly and forwarded.
#[test]
fn a_question_taken_after_a_wrong_take_and_dropped_answers_no_reply() {
    /// A third question type.
    struct Third;
    impl Question for Third {
        type Answer = u64;
    }
    /// Tries `Other`, then `Third` or `Square` (on even and odd numbers),
    /// and drops what it got.
    struct Picky;
    impl Process for Picky {
        type Done = ();
        fn step(&mut self, events: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
            for event in events {
                if let Event::Request(request) = event {
                    let request = request.take::<Other>().err().expect("not an Other");
                    let odd = request.payload::<Square>().is_some_and(|q| q.0 % 2 == 1);
                    if odd {
                        drop(request.take::<Square>().expect("a Square"));
                    } else {
                        drop(request.take::<Third>().err().expect("not a Third"));
                    }
                }
            }
            Ok(())
        }
    }

    let scheduler = started();
    let picky = scheduler.spawn(Picky).unwrap().pid();
    let cx = scheduler.context();
    let mut got = Vec::new();
    for n in [2, 3] {
        let asked = scheduler.ask(picky, Square(n)).unwrap().wait_timeout(WAIT);
        let (mut reply, right) = cx.reply_pair::<Square>();
        right
            .forward(cx, picky, Square(n))
            .map_err(|(e, _)| e)
            .unwrap();
        got.push((n, asked, reply.wait_timeout(WAIT)));
    }
    eprintln!("{got:?}");
    for (n, asked, forwarded) in got {
        for answer in [asked, forwarded] {
            if n % 2 == 1 {
                assert_eq!(answer, Err(AskError::NoReply), "taken as a Square, dropped");
            } else {
                match answer {
                    Err(AskError::UnexpectedQuestion { asked, expected }) => {
                        assert!(asked.ends_with("Square"), "{asked}");
                        assert!(
                            expected.ends_with("Third"),
                            "not the last tried: {expected}"
                        );
                    }
                    other => panic!("two wrong takes: {other:?}"),
                }
            }
        }
    }
    scheduler.shutdown(Duration::from_secs(1));
}

/// Rights crossing threads: four threads each make 150 pairs outside and
/// forward them into a hop; a parking process hands its rights to a
/// thread over a channel, which forwards them from there. Every asker
/// gets its own answer, once.
#[test]
fn rights_forwarded_from_many_threads_each_reach_their_own_asker() {
    /// Hands every request's number and right out of the engine.
    struct Parker(mpsc::Sender<(u64, ReplyTo)>);
    impl Process for Parker {
        type Done = ();
        fn step(&mut self, events: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
            for event in events {
                if let Event::Request(request) = event {
                    if let Ok((Square(n), answer)) = request.take::<Square>() {
                        let _ = self.0.send((n, answer.into_reply_to()));
                    }
                }
            }
            Ok(())
        }
    }

    let scheduler = started();
    let (sq, seen) = squarer(&scheduler);
    let (hop, _, _) = hop(&scheduler, sq, 0);
    let (rights, parked) = mpsc::channel();
    let parker = scheduler.spawn(Parker(rights)).unwrap().pid();
    std::thread::scope(|s| {
        let scheduler = &scheduler;
        s.spawn(move || {
            for (n, right) in parked.iter() {
                right
                    .forward(scheduler.context(), hop, Square(n + 1))
                    .map_err(|(e, _)| e)
                    .unwrap();
            }
        });
        let mut threads = Vec::new();
        for t in 0..4_u64 {
            threads.push(s.spawn(move || {
                let cx = scheduler.context();
                let mut replies = Vec::new();
                for i in 0..150_u64 {
                    let n = t * 1_000 + i;
                    if i % 3 == 0 {
                        replies.push((n + 1, scheduler.ask(parker, Square(n)).unwrap()));
                    } else {
                        let (reply, right) = cx.reply_pair::<Square>();
                        right
                            .forward(cx, hop, Square(n))
                            .map_err(|(e, _)| e)
                            .unwrap();
                        replies.push((n, reply));
                    }
                }
                for (n, mut reply) in replies {
                    assert_eq!(reply.wait_timeout(WAIT), Ok(n * n), "asked {n}");
                    assert_eq!(reply.wait_timeout(WAIT), Err(AskError::AlreadyTaken));
                }
            }));
        }
        for thread in threads {
            thread.join().unwrap();
        }
        scheduler.terminate(parker).unwrap();
    });
    assert_eq!(
        seen.lock().unwrap().len(),
        600,
        "each question answered once"
    );
    scheduler.shutdown(Duration::from_secs(1));
}
