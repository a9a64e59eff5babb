//! Tries to break the documented promises of `sched::message::Resolved`,
//! from the documentation only (docs/guide/actors.md, "Sending often to one
//! process: `Resolved`"; the CHANGELOG; the rustdoc of `Resolved`,
//! `Scheduler::resolve`, `Context::resolve`): `None` without a process of
//! this engine; a send through the handle is a send by PID but for the
//! lookup (bound, urgency, wake-up, errors with the message back, order
//! mixed with sends by PID, source); it names the process, not the PID; a
//! child restarted in place has not ended; it never keeps the engine alive;
//! through another engine it is a send by PID there; `Clone`, `Debug`,
//! usable from many threads. Timeouts only guard against hangs.

use sched::message::SendErrorKind::{self, Ended, Full};
use sched::message::{Resolved, SendError};
use sched::prelude::*;
use sched::sim::{Config, Faults, Simulation};
use sched::supervisor::WhichChildren;
use sched::Urgent;
use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

const GUARD: Duration = Duration::from_secs(10);

fn spin_until(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < GUARD, "hang: waited {GUARD:?} for {what}");
        std::thread::yield_now();
    }
}

/// A numbered message: who sent it and its place among that sender's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Note(u32, u64);

fn notes(from: u32, seqs: std::ops::Range<u64>) -> Vec<Note> {
    seqs.map(|seq| Note(from, seq)).collect()
}

fn seqs_from<'a>(log: impl IntoIterator<Item = &'a Note>, from: u32) -> Vec<u64> {
    log.into_iter()
        .filter(|n| n.0 == from)
        .map(|n| n.1)
        .collect()
}

/// Why a send was refused and what it handed back (unwrapping `Urgent`).
fn refused(sent: Result<(), SendError>) -> (SendErrorKind, Note) {
    let err = sent.expect_err("the send should have been refused");
    let kind = err.kind();
    let note = match err.into_package().downcast::<Note>() {
        Ok(n) => n,
        Err(package) => match package.downcast::<Urgent>() {
            Ok(urgent) => *urgent.into_inner().downcast::<Note>().unwrap(),
            Err(other) => panic!("handed back something else: {other:?}"),
        },
    };
    (kind, note)
}

/// A send from outside through `handle`, or by its PID.
fn send(s: &Scheduler, handle: &Resolved, by_pid: bool, m: Note) -> Result<(), SendError> {
    if by_pid {
        s.send(handle.pid(), m)
    } else {
        s.send(handle, m)
    }
}

/// Runs `each(t, clone)` on four threads at once, each with its own clone
/// of `handle`, and `meanwhile` on this one.
fn four_threads<R: Send>(
    handle: &Resolved,
    meanwhile: impl FnOnce(),
    each: impl Fn(u32, Resolved) -> R + Sync,
) -> Vec<R> {
    let barrier = Barrier::new(5);
    std::thread::scope(|s| {
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let (handle, barrier, each) = (handle.clone(), &barrier, &each);
                s.spawn(move || {
                    barrier.wait();
                    each(t, handle)
                })
            })
            .collect();
        barrier.wait();
        meanwhile();
        threads.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

#[derive(Debug, Default)]
struct Log {
    read: Vec<Note>,
    sources: Vec<Pid>,
    unread: Vec<Note>,
}

type Shared = Arc<Mutex<Log>>;

/// Records the notes it reads, and those left unread when it ends; finishes
/// on "stop", on a cancel, or after `finish_after` notes.
struct Recorder(Shared, Option<usize>);

fn recorder(finish_after: Option<usize>) -> (Recorder, Shared) {
    let log = Shared::default();
    (Recorder(Arc::clone(&log), finish_after), log)
}

impl Process for Recorder {
    type Done = usize;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            let mut log = self.0.lock().unwrap();
            let stop = match event {
                Event::Message(m) => {
                    let source = m.source();
                    match m.downcast::<Note>() {
                        Ok(n) => {
                            log.read.push(n);
                            log.sources.push(source);
                            Some(log.read.len()) == self.1
                        }
                        Err(m) => m.payload::<&str>() == Some(&"stop"),
                    }
                }
                Event::Cancel => true,
                _ => false,
            };
            if stop {
                out.finish(log.read.len());
                return Ok(());
            }
        }
        Ok(())
    }
    fn unread(&mut self, unread: &mut Vec<Event>) {
        let mut log = self.0.lock().unwrap();
        for event in std::mem::take(unread) {
            match event {
                Event::Message(m) => match m.downcast::<Note>() {
                    Ok(n) => log.unread.push(n),
                    Err(m) => unread.push(Event::Message(m)),
                },
                other => unread.push(other),
            }
        }
    }
}

fn assert_shareable<T: Send + Sync + Clone + std::fmt::Debug + 'static>() {}

#[test]
fn resolve_is_none_without_a_process_of_this_engine_and_some_before_start() {
    assert_shareable::<Resolved>();
    let scheduler = Scheduler::builder().workers(1).build();
    let cx = scheduler.context();
    let (process, log) = recorder(None);
    let mut target = scheduler.spawn(process).unwrap();
    let pid = target.pid();
    let resolved = scheduler.resolve(pid).expect("spawned, not started");
    let (clone, of_cx) = (resolved.clone(), cx.resolve(pid).unwrap());
    assert_eq!([resolved.pid(), clone.pid(), of_cx.pid()], [pid; 3]);
    assert!(!format!("{resolved:?}").is_empty());
    // Never had; another node's (even with a live local id); the outside.
    assert!(scheduler.resolve(Pid::local(987_654_321)).is_none());
    assert!(scheduler.resolve(Pid::new(7, pid.id())).is_none());
    assert!(cx.resolve(Pid::new(7, pid.id())).is_none());
    assert!(scheduler.resolve(Pid::OUTSIDE).is_none());
    // Queued before start, read in the order sent, mixed with sends by PID.
    for seq in 0..30 {
        match seq % 3 {
            0 => scheduler.send(&resolved, Note(0, seq)).unwrap(),
            1 => scheduler.send(pid, Note(0, seq)).unwrap(),
            _ => cx.send(&clone, Note(0, seq)).unwrap(),
        }
    }
    scheduler.send(&of_cx, "stop").unwrap();
    scheduler.start();
    assert_eq!(target.wait_timeout(GUARD).unwrap(), 30);
    let log = log.lock().unwrap();
    assert_eq!(log.read, notes(0, 0..30));
    assert!(log.sources.iter().all(|&s| s == Pid::OUTSIDE));
    // Ended: None from both; the handles (alive) do not make it look live.
    assert!(scheduler.resolve(pid).is_none() && cx.resolve(pid).is_none());
    assert!(cx.process_info(pid).is_none());
    assert!(scheduler.processes().iter().all(|p| p.pid != pid));
    // Even once new processes (which may reuse its memory) have started.
    let others: Vec<_> = (0..64).map(|_| recorder(None)).collect();
    let mut others: Vec<_> = (others.into_iter())
        .map(|(p, log)| (scheduler.spawn(p).unwrap(), log))
        .collect();
    for handle in [&resolved, &clone, &of_cx] {
        let sent = scheduler.send(handle, Note(0, 99));
        assert_eq!(refused(sent), (Ended, Note(0, 99)));
    }
    // After a shutdown, a live process's handle is refused as by PID.
    let (process, _) = recorder(None);
    let live = scheduler.spawn(process).unwrap().pid();
    let resolved = scheduler.resolve(live).unwrap();
    assert_eq!(scheduler.shutdown(GUARD).forced, 0);
    let by_pid = scheduler.send(live, ()).unwrap_err().kind();
    let sent = scheduler.send(&resolved, Note(0, 1));
    assert_eq!((by_pid, refused(sent)), (Ended, (Ended, Note(0, 1))));
    for (other, log) in &mut others {
        assert_eq!(other.wait_timeout(GUARD).unwrap(), 0);
        assert!(log.lock().unwrap().unread.is_empty());
    }
    assert!(scheduler.resolve(live).is_none());
}

/// Threads send through clones of one handle (every third by PID) until the
/// target, which ends midway, refuses them, then 50 more each. Every note
/// is read once, left unread once, or refused `Ended` with itself handed
/// back, never two of these; each thread's notes arrive in its order; once
/// refused, always refused.
fn race_the_end(terminate: bool) {
    let scheduler = Scheduler::builder().workers(2).build();
    scheduler.start();
    let (process, log) = recorder(if terminate { None } else { Some(3_000) });
    let mut target = scheduler.spawn(process).unwrap();
    let pid = target.pid();
    let resolved = scheduler.resolve(pid).unwrap();
    let meanwhile = || {
        if terminate {
            spin_until("500 notes read", || log.lock().unwrap().read.len() >= 500);
            scheduler.terminate(pid).unwrap();
        }
    };
    let results = four_threads(&resolved, meanwhile, |t, handle| {
        let (mut accepted, mut refusals) = (Vec::new(), 0);
        let start = Instant::now();
        for seq in 0.. {
            assert!(start.elapsed() < GUARD, "thread {t}: never refused");
            // A fresh clone each time: clones come and go as the end races.
            let sent = send(&scheduler, &handle.clone(), seq % 3 == 2, Note(t, seq));
            if sent.is_ok() {
                assert_eq!(refusals, 0, "{seq} accepted after a refusal");
                accepted.push(seq);
            } else {
                assert_eq!(refused(sent), (Ended, Note(t, seq)));
                refusals += 1;
                if refusals == 50 {
                    break;
                }
            }
            if seq % 64 == 0 {
                std::thread::yield_now();
            }
        }
        accepted
    });
    match target.wait_timeout(GUARD) {
        Err(ExitError::Terminated) if terminate => {}
        Ok(3_000) if !terminate => {}
        other => panic!("{other:?}"),
    }
    let log = log.lock().unwrap();
    let delivered: Vec<Note> = log.read.iter().chain(&log.unread).copied().collect();
    for (t, accepted) in results.iter().enumerate() {
        // All accepted, once each, in order; nothing refused.
        assert_eq!(&seqs_from(&delivered, t as u32), accepted, "thread {t}");
    }
    assert_eq!(scheduler.stats().dead_letters, 0);
    scheduler.shutdown(GUARD);
}

#[test]
fn threads_sending_through_clones_while_the_target_is_terminated_lose_nothing() {
    race_the_end(true);
}

#[test]
fn threads_sending_through_clones_while_the_target_finishes_lose_nothing() {
    race_the_end(false);
}

#[test]
fn the_mailbox_bound_holds_exactly_under_concurrent_senders_and_urgent_overtakes() {
    const CAPACITY: usize = 64;
    const RESERVE: u64 = CAPACITY as u64 / 8;
    let builder = Scheduler::builder().workers(2);
    let scheduler = builder.mailbox_capacity(CAPACITY).build();
    let (process, log) = recorder(Some(CAPACITY + RESERVE as usize));
    let mut target = scheduler.spawn(process).unwrap();
    let resolved = scheduler.resolve(target.pid()).unwrap();
    // Not started: nothing drains the mailbox.
    let accepted = four_threads(
        &resolved,
        || {},
        |t, handle| {
            let mut accepted = Vec::new();
            for seq in 0..50 {
                let sent = send(&scheduler, &handle, seq % 4 == 3, Note(t, seq));
                if sent.is_ok() {
                    accepted.push(seq);
                } else {
                    assert_eq!(refused(sent), (Full, Note(t, seq)));
                }
            }
            accepted
        },
    );
    let total: usize = accepted.iter().map(Vec::len).sum();
    assert_eq!(total, CAPACITY, "{accepted:?}");
    // The urgent reserve, through the handle; then full for both kinds.
    for seq in 0..RESERVE {
        let urgent = Urgent::new(Note(9, seq));
        scheduler.send(&resolved, urgent).unwrap();
    }
    let urgent = || Urgent::new(Note(9, 99));
    let mut by_handle = scheduler.send(&resolved, urgent()).unwrap_err();
    let mut by_pid = scheduler.send(target.pid(), urgent()).unwrap_err();
    // Handed back in the same form (the `Urgent` itself) both ways.
    let wrapped = by_handle.package_mut().is::<Urgent>();
    assert_eq!(wrapped, by_pid.package_mut().is::<Urgent>());
    let full = (Full, Note(9, 99));
    assert_eq!(
        (refused(Err(by_handle)), refused(Err(by_pid))),
        (full, full)
    );
    assert_eq!(refused(scheduler.send(&resolved, Note(9, 99))), full);
    scheduler.start();
    assert_eq!(target.wait_timeout(GUARD).unwrap(), 72);
    let log = log.lock().unwrap();
    assert_eq!(log.read[..8], notes(9, 0..RESERVE)[..], "urgent first");
    for (t, accepted) in accepted.iter().enumerate() {
        assert_eq!(&seqs_from(&log.read, t as u32), accepted);
    }
    scheduler.shutdown(GUARD);
}

/// In its first step, sends `count` notes to `to` through the handle and by
/// PID alternately, and as many numbers to itself through a handle to
/// itself; then reads those back and finishes with them.
struct Sender(Resolved, u64, Vec<u64>);

impl Process for Sender {
    type Done = Vec<u64>;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        let Sender(to, count, own) = self;
        if own.is_empty() && events.is_empty() {
            let me = out.context().resolve(out.pid()).ok_or("no self")?;
            assert_eq!(me.pid(), out.pid());
            for seq in 0..*count {
                if seq % 2 == 0 {
                    out.send(&to.clone(), Note(1, seq))?;
                    out.send(&me, seq)?;
                } else {
                    out.send(to.pid(), Note(1, seq))?;
                    out.send(me.pid(), seq)?;
                }
            }
        }
        for event in events {
            if let Event::Message(m) = event {
                assert_eq!(m.source(), out.pid(), "a send to itself");
                own.push(*m.payload::<u64>().ok_or("not a u64")?);
            }
        }
        if own.len() as u64 == *count {
            out.finish(std::mem::take(own));
        }
        Ok(())
    }
}

#[test]
fn a_step_sends_through_handles_in_order_with_its_pid_as_source_and_to_itself() {
    let scheduler = Scheduler::builder().workers(2).build();
    scheduler.start();
    let (process, log) = recorder(Some(1_000));
    let mut target = scheduler.spawn(process).unwrap();
    let to = scheduler.resolve(target.pid()).unwrap();
    let mut sender = scheduler.spawn(Sender(to, 1_000, Vec::new())).unwrap();
    let own = sender.wait_timeout(GUARD).unwrap();
    assert_eq!(own, (0..1_000).collect::<Vec<_>>());
    assert_eq!(target.wait_timeout(GUARD).unwrap(), 1_000);
    let log = log.lock().unwrap();
    assert_eq!(log.read, notes(1, 0..1_000));
    assert!(log.sources.iter().all(|&s| s == sender.pid()));
    scheduler.shutdown(GUARD);
}

/// With one worker, the target cannot drain during this step: sends 9 notes
/// through the handle, one by PID, two urgent through the handle.
struct Filler(Resolved);

impl Process for Filler {
    type Done = Vec<Result<(), SendErrorKind>>;
    fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        let mut results = Vec::new();
        for seq in 0..12 {
            let sent = match seq {
                9 => out.send(self.0.pid(), Note(2, seq)),
                10 | 11 => out.send(&self.0, Urgent::new(Note(2, seq))),
                _ => out.send(&self.0, Note(2, seq)),
            };
            results.push(sent.map_err(|e| {
                let (kind, back) = refused(Err(e));
                assert_eq!(back, Note(2, seq), "handed back another message");
                kind
            }));
        }
        out.finish(results);
        Ok(())
    }
}

#[test]
fn from_a_step_the_handle_meets_the_same_bound_and_urgent_reserve() {
    let builder = Scheduler::builder().workers(1);
    let scheduler = builder.mailbox_capacity(8).build();
    scheduler.start();
    let (process, log) = recorder(Some(9));
    let mut target = scheduler.spawn(process).unwrap();
    let resolved = scheduler.resolve(target.pid()).unwrap();
    let mut filler = scheduler.spawn(Filler(resolved)).unwrap();
    let mut expected = vec![Ok(()); 8];
    expected.extend([Err(Full), Err(Full), Ok(()), Err(Full)]);
    assert_eq!(filler.wait_timeout(GUARD).unwrap(), expected);
    assert_eq!(target.wait_timeout(GUARD).unwrap(), 9);
    let read = seqs_from(&log.lock().unwrap().read, 2);
    assert_eq!(read, [10, 0, 1, 2, 3, 4, 5, 6, 7], "the urgent one first");
    scheduler.shutdown(GUARD);
}

/// At each message, sends to the handle's PID by PID and through the
/// handle; at the second, also through a handle it resolves anew, then
/// finishes with what each send gave.
struct Prober(Resolved, Vec<Result<(), SendErrorKind>>);

impl Process for Prober {
    type Done = Vec<Result<(), SendErrorKind>>;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for _ in events {
            let (old, n) = (&self.0, self.1.len() as u64);
            let mut sends = vec![
                out.send(old.pid(), Note(5, n)),
                out.send(old, Note(5, n + 1)),
            ];
            if n > 0 {
                let new = out.context().resolve(old.pid()).ok_or("nobody")?;
                sends.push(out.send(&new, Note(5, n + 2)));
                sends.push(out.send(old, Note(5, n + 3)));
            }
            self.1
                .extend(sends.into_iter().map(|s| s.map_err(|e| e.kind())));
            if n > 0 {
                out.finish(std::mem::take(&mut self.1));
            }
        }
        Ok(())
    }
}

#[test]
fn a_handle_never_reaches_the_next_process_at_a_chosen_pid() {
    // One worker: the prober's sends by PID go through that worker's cache.
    let scheduler = Scheduler::builder().workers(1).build();
    scheduler.start();
    let chosen = Pid::local(1 << 41);
    let (first, first_log) = recorder(None);
    let mut first = scheduler.spawn(Spawn::new(first).at(chosen)).unwrap();
    let old = scheduler.resolve(chosen).unwrap();
    let prober = Prober(old.clone(), Vec::new());
    let mut prober = scheduler.spawn(prober).unwrap();
    scheduler.send(prober.pid(), ()).unwrap();
    spin_until("the prober's first sends", || {
        first_log.lock().unwrap().read.len() == 2
    });
    scheduler.terminate(chosen).unwrap();
    let outcome = first.wait_timeout(GUARD);
    assert!(matches!(outcome, Err(ExitError::Terminated)));
    assert!(scheduler.resolve(chosen).is_none());
    // Ended, though a send by PID would say the chosen PID left no trace.
    let (gone, by_pid) = (Note(0, 1), scheduler.send(chosen, ()));
    assert_eq!(by_pid.unwrap_err().kind(), SendErrorKind::UnknownTarget);
    assert_eq!(refused(scheduler.send(&old, gone)), (Ended, gone));
    // A new process takes the PID: the old handle still names the old one.
    let (second, second_log) = recorder(None);
    let mut second = scheduler.spawn(Spawn::new(second).at(chosen)).unwrap();
    for seq in 2..50 {
        let gone = Note(0, seq);
        assert_eq!(refused(scheduler.send(&old, gone)), (Ended, gone));
    }
    let new = scheduler.resolve(chosen).expect("resolve anew");
    scheduler.send(&new, Note(1, 0)).unwrap();
    scheduler.send(chosen, Note(1, 1)).unwrap();
    scheduler.send(prober.pid(), ()).unwrap();
    let said = prober.wait_timeout(GUARD).unwrap();
    assert_eq!(
        said,
        [Ok(()), Ok(()), Ok(()), Err(Ended), Ok(()), Err(Ended)]
    );
    scheduler.send(&new, "stop").unwrap();
    assert_eq!(second.wait_timeout(GUARD).unwrap(), 4);
    let expected = [Note(1, 0), Note(1, 1), Note(5, 2), Note(5, 4)];
    assert_eq!(second_log.lock().unwrap().read, expected);
    let first_log = first_log.lock().unwrap();
    assert_eq!(first_log.read, notes(5, 0..2));
    assert!(first_log.unread.is_empty());
    scheduler.shutdown(GUARD);
}

/// Crashes on "crash"; logs each note with its incarnation.
struct Flaky(u32, Arc<Mutex<Vec<(u32, u64)>>>);

impl Process for Flaky {
    type Done = ();
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            match event {
                Event::Message(m) if m.payload::<&str>() == Some(&"crash") => {
                    return Err("crashed on purpose".into())
                }
                Event::Message(m) => {
                    let Note(_, seq) = *m.payload::<Note>().ok_or("a note")?;
                    self.1.lock().unwrap().push((self.0, seq));
                }
                Event::Cancel => out.finish(()),
                _ => {}
            }
        }
        Ok(())
    }
}

#[test]
fn a_child_restarted_in_place_is_still_reached_through_the_handle() {
    let scheduler = Scheduler::builder().workers(2).build();
    scheduler.start();
    let log = Arc::new(Mutex::new(Vec::new()));
    let (of_child, made) = (Arc::clone(&log), AtomicU32::new(0));
    let spec = ChildSpec::new("flaky", move || {
        Flaky(made.fetch_add(1, SeqCst) + 1, Arc::clone(&of_child))
    });
    let supervisor = Supervisor::builder()
        .intensity(3, Duration::from_secs(60))
        .child(spec)
        .build();
    let supervisor = scheduler.spawn(supervisor).unwrap().pid();
    let children = || {
        let mut reply = scheduler.ask(supervisor, WhichChildren).unwrap();
        let report = reply.wait_timeout(GUARD).unwrap();
        let child = report.child("flaky").unwrap();
        (child.pid, child.restarts)
    };
    let pid = children().0.unwrap();
    let resolved = scheduler.resolve(pid).expect("running child");
    scheduler.send(&resolved, Note(0, 0)).unwrap();
    scheduler.send(&resolved, "crash").unwrap();
    for seq in 1..4 {
        scheduler.send(&resolved, Note(0, seq)).unwrap();
    }
    spin_until("the new child's notes", || log.lock().unwrap().len() >= 4);
    for seq in 4..10 {
        scheduler.send(&resolved, Note(0, seq)).unwrap();
    }
    spin_until("its later notes", || log.lock().unwrap().len() >= 10);
    let second = (1..10).map(|s| (2, s));
    let expected: Vec<(u32, u64)> = [(1, 0)].into_iter().chain(second).collect();
    assert_eq!(*log.lock().unwrap(), expected);
    assert_eq!(children(), (Some(pid), 1));
    scheduler.shutdown(GUARD);
}

#[test]
fn handles_outlive_a_dropped_scheduler_and_do_not_keep_the_engine_alive() {
    let token = Arc::new(());
    let held = Arc::clone(&token);
    let scheduler = Scheduler::builder()
        .workers(2)
        .on_start(move |_, _| {
            let _ = &held;
            Ok(())
        })
        .build();
    scheduler.start();
    let (process, _log) = recorder(None);
    let mut target = scheduler.spawn(process).unwrap();
    let pid = target.pid();
    let handles: Vec<Resolved> = (0..8).map(|_| scheduler.resolve(pid).unwrap()).collect();
    let clones = handles.clone();
    scheduler.send(&handles[0], Note(0, 0)).unwrap();
    // Dropped without a shutdown: it shuts down with a zero deadline.
    drop(scheduler);
    let outcome = target.wait_timeout(GUARD);
    assert!(!matches!(outcome, Err(ExitError::TimedOut)), "{outcome:?}");
    assert_eq!(Arc::strong_count(&token), 1, "a handle kept the engine");
    let other = Scheduler::builder().workers(1).build();
    for handle in &clones {
        // Another engine, no process there: a send by PID there.
        let by_pid = other.send(pid, Note(0, 1)).unwrap_err().kind();
        let sent = other.send(handle, Note(0, 1));
        assert_eq!(refused(sent), (by_pid, Note(0, 1)));
    }
    drop((handles, other));
    std::thread::spawn(move || drop(clones)).join().unwrap();
}

#[test]
fn through_another_engine_a_handle_is_a_send_by_pid_there() {
    let build = || Scheduler::builder().workers(1).build();
    let (a, b, empty) = (build(), build(), build());
    a.start();
    b.start();
    let ((pa, log_a), (pb, log_b)) = (recorder(None), recorder(None));
    let (mut on_a, mut on_b) = (a.spawn(pa).unwrap(), b.spawn(pb).unwrap());
    assert_eq!(on_a.pid(), on_b.pid(), "the same first PIDs");
    let of_a = a.resolve(on_a.pid()).unwrap();
    b.send(&of_a, Note(2, 0)).unwrap();
    b.context().send(&of_a, Note(2, 1)).unwrap();
    let by_pid = empty.send(of_a.pid(), ()).unwrap_err().kind();
    assert_eq!(refused(empty.send(&of_a, Note(2, 9))), (by_pid, Note(2, 9)));
    // From a step of B's: a send by PID on B too.
    let sender = Sender(of_a.clone(), 10, Vec::new());
    b.spawn(sender).unwrap().wait_timeout(GUARD).unwrap();
    a.send(&of_a, "stop").unwrap();
    assert_eq!(on_a.wait_timeout(GUARD).unwrap(), 0, "B's sends reached A");
    assert!(log_a.lock().unwrap().read.is_empty());
    // A's process has ended; on B the handle still reaches B's.
    b.send(&of_a, Note(2, 2)).unwrap();
    b.send(&of_a, "stop").unwrap();
    assert_eq!(on_b.wait_timeout(GUARD).unwrap(), 13);
    let read = log_b.lock().unwrap().read.clone();
    assert_eq!(seqs_from(&read, 2), [0, 1, 2]);
    assert_eq!(seqs_from(&read, 1), (0..10).collect::<Vec<_>>());
    let sent = b.send(&of_a, Note(2, 3));
    assert_eq!(refused(sent), (Ended, Note(2, 3)));
    a.shutdown(GUARD);
    b.shutdown(GUARD);
}

/// Bounces a number back to its sender through a handle it resolves from
/// the step; serves first when it starts with a peer; finishes at `.0`.
struct Pong(u64, Option<Resolved>);

impl Process for Pong {
    type Done = u64;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        if let (true, Some(peer)) = (events.is_empty(), &self.1) {
            out.send(peer, 0u64)?; // the serve
        }
        for event in events {
            if let Event::Message(m) = event {
                let (source, n) = (m.source(), *m.payload::<u64>().ok_or("u64")?);
                if self.1.as_ref().map(Resolved::pid) != Some(source) {
                    self.1 = Some(out.context().resolve(source).ok_or("peer")?);
                }
                let _ = out.send(self.1.as_ref().unwrap(), n + 1);
                if n >= self.0 {
                    out.finish(n);
                }
            }
        }
        Ok(())
    }
}

#[test]
fn ping_pong_through_handles_never_loses_a_wake_up() {
    const LAST: u64 = 20_000;
    let scheduler = Scheduler::builder().workers(2).build();
    scheduler.start();
    let mut pong = scheduler.spawn(Pong(LAST, None)).unwrap();
    let serve = scheduler.resolve(pong.pid());
    let mut ping = scheduler.spawn(Pong(LAST, serve)).unwrap();
    let a = ping.wait_timeout(GUARD).unwrap();
    let b = pong.wait_timeout(GUARD).unwrap();
    assert_eq!((a.min(b), a.max(b)), (LAST, LAST + 1), "the ball was lost");
    scheduler.shutdown(GUARD);
}

/// One simulated run: 100 notes from outside to a recorder, through a
/// handle or by PID, half of them delayed; what it read, faults, hash.
fn simulated(seed: u64, by_pid: bool) -> (Vec<Note>, u64, u64) {
    let faults = Faults::none().delay_messages(0.5, Duration::from_millis(50));
    let config = Config::seed(seed).workers(2).faults(faults);
    let mut sim = Scheduler::builder().simulation(config);
    let (process, log) = recorder(None);
    let target = sim.context().spawn(process).unwrap();
    let resolved = sim.context().resolve(target.pid()).expect("spawned");
    for seq in 0..100 {
        let sent = if by_pid {
            sim.context().send(target.pid(), Note(0, seq))
        } else {
            sim.context().send(&resolved, Note(0, seq))
        };
        sent.unwrap();
    }
    sim.run().unwrap();
    let read = log.lock().unwrap().read.clone();
    let trace = sim.trace();
    (read, trace.faults(), trace.hash())
}

#[test]
fn on_a_simulated_engine_a_handle_is_faulted_and_ordered_as_a_send_by_pid() {
    for seed in 0..20 {
        let (read, faults, hash) = simulated(seed, false);
        assert_eq!(read, notes(0, 0..100), "seed {seed}");
        assert!(faults > 0, "seed {seed}: the faults skipped the handle");
        let by_pid = simulated(seed, true);
        assert_eq!(by_pid, (read, faults, hash), "seed {seed}: not as by PID");
        assert_eq!(simulated(seed, false).2, hash, "seed {seed}: no replay");
    }
}

#[test]
fn in_a_simulated_cluster_a_handle_sent_through_another_node_crosses_the_network() {
    let config = Config::seed(3).network_latency(Duration::from_millis(3));
    let nodes = [Scheduler::builder().node(1), Scheduler::builder().node(2)];
    let mut sim = Simulation::cluster(config, nodes).unwrap();
    let (process, log) = recorder(None);
    let target = sim.node(2).unwrap().spawn(process).unwrap().pid();
    assert_eq!(target.node(), 2);
    let (one, two) = (sim.node(1).unwrap(), sim.node(2).unwrap());
    assert!(one.resolve(target).is_none(), "another node's PID");
    let resolved = two.resolve(target).unwrap();
    for seq in 0..20 {
        one.send(&resolved, Note(1, seq)).unwrap();
    }
    sim.run().unwrap();
    assert_eq!(log.lock().unwrap().read, notes(1, 0..20));
}
