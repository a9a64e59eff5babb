//! Promises of the actor layer that a race or a hostile value used to break:
//! a cancelled timer, a removed monitor and an unlinked peer stay silent
//! even when their event is already on its way; delayed messages belong to
//! their message (delivered whatever became of the sender, dead letters at
//! once when the target ends, in order per sender and target); panicking
//! `Drop`s and wakers never take a worker down.

use sched::actor::MonitorId;
use sched::prelude::*;
use sched::After;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(10);

fn spin(for_: Duration) {
    let until = Instant::now() + for_;
    while Instant::now() < until {
        std::hint::spin_loop();
    }
}

/// The cookbook's "timeout on a reply", with the reply and the timeout due
/// in the same batch: the step reads the reply first, cancels the timeout,
/// and must never see it afterwards in that same batch.
struct ReplyOrTimeout {
    timeout: Option<TimerId>,
    cancelled: Option<bool>,
}

impl Process for ReplyOrTimeout {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        if self.timeout.is_none() {
            // The "reply" falls due 1 ms before the timeout; the step keeps
            // its worker busy past both, so one poll of the wheel delivers
            // both, reply first, into one batch.
            out.send(After(Duration::from_millis(1), out.pid()), 42u64)?;
            self.timeout = Some(out.set_timer(Duration::from_millis(2), Tag(1)));
            spin(Duration::from_millis(20));
            return Ok(());
        }
        for event in events {
            match event {
                Event::Message(reply) => {
                    self.cancelled = Some(out.cancel_timer(self.timeout.expect("armed")));
                    out.finish((reply.downcast::<u64>().ok(), self.cancelled));
                }
                Event::Timer { tag: Tag(1), .. } => {
                    out.finish((None::<u64>, self.cancelled));
                }
                _ => {}
            }
        }
        Ok(())
    }
}

#[test]
fn a_timer_cancelled_while_its_event_is_in_the_batch_is_never_seen() {
    let scheduler = Scheduler::builder().workers(1).build();
    scheduler.start();
    for _ in 0..5 {
        let asker = ReplyOrTimeout {
            timeout: None,
            cancelled: None,
        };
        let answer = scheduler.spawn(asker).unwrap().wait().unwrap();
        assert_eq!(
            answer.downcast_ref::<(Option<u64>, Option<bool>)>(),
            Some(&(Some(42), Some(true))),
            "the reply came first: the timeout was cancelled before the step saw it"
        );
    }
    scheduler.shutdown(WAIT);
}

/// The same with a busy neighbour: a hog keeps the only worker while the
/// timeout and the reply fall due.
#[test]
fn the_cookbook_timeout_pattern_answers_right_with_a_busy_worker() {
    struct Hog;
    impl Process for Hog {
        type Done = Payload;
        fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
            spin(Duration::from_millis(1));
            out.finish(());
            Ok(())
        }
    }
    struct Oracle;
    impl Process for Oracle {
        type Done = Payload;
        fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
            for event in events {
                if let Event::Message(question) = event {
                    out.send(question.source(), 42u64)?;
                    // The hogs run before the asker (the latest spawned
                    // first), past its timeout, and the worker fires the
                    // timeout between their steps: the reply and the
                    // timeout wait in one batch.
                    // (More hogs than the worker's steps between two looks
                    // at its timers.)
                    for _ in 0..40 {
                        out.spawn(Hog)?;
                    }
                }
            }
            Ok(())
        }
    }
    struct Asker {
        oracle: Pid,
        timeout: Option<TimerId>,
    }
    impl Process for Asker {
        type Done = Payload;
        fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
            if self.timeout.is_none() {
                out.send(self.oracle, "question")?;
                self.timeout = Some(out.set_timer(Duration::from_millis(5), Tag(1)));
            }
            for event in events {
                match event {
                    Event::Message(reply) => {
                        out.cancel_timer(self.timeout.expect("armed"));
                        out.finish(reply.downcast::<u64>().ok());
                    }
                    Event::Timer { tag: Tag(1), .. } => out.finish(None::<u64>),
                    _ => {}
                }
            }
            Ok(())
        }
    }
    let scheduler = Scheduler::builder().workers(1).build();
    scheduler.start();
    for _ in 0..5 {
        let oracle = scheduler.spawn(Oracle).unwrap();
        let asker = Asker {
            oracle: oracle.pid(),
            timeout: None,
        };
        let answer = scheduler.spawn(asker).unwrap().wait().unwrap();
        assert_eq!(answer.downcast_ref::<Option<u64>>(), Some(&Some(42)));
        scheduler.terminate(oracle.pid()).unwrap();
    }
    scheduler.shutdown(WAIT);
}

/// Two downs in one batch: the step reads the first and removes the other
/// monitor; the other's down, already in the batch, must never be handed
/// out.
#[test]
fn a_monitor_removed_mid_batch_is_never_seen() {
    struct Ends;
    impl Process for Ends {
        type Done = Payload;
        fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
            out.finish(());
            Ok(())
        }
    }
    #[derive(Default)]
    struct Watcher {
        monitors: Vec<MonitorId>,
        seen: Vec<&'static str>,
    }
    impl Process for Watcher {
        type Done = Payload;
        fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
            if self.monitors.is_empty() {
                for _ in 0..2 {
                    let child = out.spawn(Ends)?;
                    self.monitors.push(out.monitor(child.pid()));
                }
                // The other worker takes the children meanwhile: both
                // downs arrive while this step runs.
                spin(Duration::from_millis(30));
                return Ok(());
            }
            for event in events {
                if let Event::Down(down) = event {
                    self.seen.push("down");
                    let other = self
                        .monitors
                        .iter()
                        .copied()
                        .find(|&m| m != down.monitor)
                        .expect("two monitors");
                    assert!(out.demonitor(other), "its down was not handed out");
                    out.finish(self.seen.clone());
                }
            }
            Ok(())
        }
    }
    let scheduler = Scheduler::builder().workers(2).build();
    scheduler.start();
    for _ in 0..5 {
        let seen = scheduler.spawn(Watcher::default()).unwrap().wait().unwrap();
        let seen = seen.downcast_ref::<Vec<&'static str>>().unwrap();
        assert_eq!(*seen, ["down"], "the removed monitor's down was seen");
    }
    scheduler.shutdown(WAIT);
}

/// `unlink` is final even in the gap between a peer's PID leaving the
/// table and its end signalling its links: no exit signal may come after
/// it returns. The gap is held open on purpose: the peer's end wakes an
/// outside monitor before it signals its links, and that monitor's waker
/// (user code, which may block) waits until the unlinker has unlinked. The
/// unlinker traps exits and, right after `unlink` returns, sends itself a
/// marker: an exit signal sent before the unlink is queued before the
/// marker; one queued after the marker came after `unlink` returned.
#[test]
fn unlink_in_the_gap_of_the_peers_end_stops_its_signal() {
    use std::future::Future;
    use std::sync::atomic::AtomicBool;
    use std::task::{Context as TaskContext, Wake, Waker};

    struct DiesOnCue;
    impl Process for DiesOnCue {
        type Done = Payload;
        fn step(&mut self, events: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
            for event in events {
                if let Event::Message(_) = event {
                    return Err("boom".into());
                }
            }
            Ok(())
        }
    }
    /// Blocks the peer's end, after its PID left the table and before its
    /// links are signalled, until the unlinker has unlinked (or 5 s).
    struct HoldsTheGap(Arc<AtomicBool>);
    impl Wake for HoldsTheGap {
        fn wake(self: Arc<Self>) {
            let until = Instant::now() + Duration::from_secs(5);
            while !self.0.load(SeqCst) && Instant::now() < until {
                std::thread::yield_now();
            }
        }
    }
    struct Unlinker {
        peer: Pid,
        unlinked: Arc<AtomicBool>,
        started: bool,
        marker_seen: bool,
    }
    impl Process for Unlinker {
        type Done = Payload;
        fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
            if !self.started {
                self.started = true;
                out.trap_exits(true);
                out.link(self.peer);
                out.send(self.peer, "die")?;
                // Wait until the peer's PID is gone (its end has begun and
                // is held in the gap), then unlink.
                let until = Instant::now() + Duration::from_secs(5);
                while out.context().cancel(self.peer).is_ok() && Instant::now() < until {
                    std::thread::yield_now();
                }
                out.unlink(self.peer);
                out.send(out.pid(), "marker")?;
                self.unlinked.store(true, SeqCst);
                out.send(After(Duration::from_millis(5), out.pid()), "finish")?;
                return Ok(());
            }
            for event in events {
                match event {
                    Event::Exit { .. } if self.marker_seen => {
                        return Err("an exit signal after unlink returned".into());
                    }
                    Event::Message(m) if m.payload::<&str>() == Some(&"marker") => {
                        self.marker_seen = true;
                    }
                    Event::Message(_) => out.finish(()),
                    _ => {}
                }
            }
            Ok(())
        }
    }
    let scheduler = Scheduler::builder().workers(2).build();
    scheduler.start();
    for round in 0..20 {
        let peer = scheduler.spawn(DiesOnCue).unwrap();
        let unlinked = Arc::new(AtomicBool::new(false));
        let mut monitor = Box::pin(scheduler.context().monitor(peer.pid()));
        let waker = Waker::from(Arc::new(HoldsTheGap(unlinked.clone())));
        assert!(monitor
            .as_mut()
            .poll(&mut TaskContext::from_waker(&waker))
            .is_pending());
        let unlinker = Unlinker {
            peer: peer.pid(),
            unlinked,
            started: false,
            marker_seen: false,
        };
        let mut me = scheduler.spawn(unlinker).unwrap();
        assert!(peer.wait().is_err());
        if let Err(error) = me.wait_timeout(WAIT) {
            panic!("round {round}: {error:?}");
        }
    }
    scheduler.shutdown(WAIT);
}

/// A delayed message belongs to its message: the sender ending first does
/// not cancel it.
#[test]
fn a_delayed_message_outlives_its_sender() {
    struct SendsAndEnds {
        to: Pid,
    }
    impl Process for SendsAndEnds {
        type Done = Payload;
        fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
            out.send(After(Duration::from_millis(20), self.to), "later")?;
            out.finish(());
            Ok(())
        }
    }
    struct Receiver;
    impl Process for Receiver {
        type Done = Payload;
        fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
            for event in events {
                if let Event::Message(m) = event {
                    out.finish(m.into_payload());
                }
            }
            Ok(())
        }
    }
    let scheduler = Scheduler::builder().workers(2).build();
    scheduler.start();
    let mut receiver = scheduler.spawn(Receiver).unwrap();
    let to = receiver.pid();
    scheduler
        .spawn(SendsAndEnds { to })
        .unwrap()
        .wait()
        .unwrap();
    let got = receiver.wait_timeout(WAIT).expect("delivered");
    assert_eq!(got.downcast_ref::<&str>(), Some(&"later"));
    assert_eq!(scheduler.stats().dead_letters, 0);
    scheduler.shutdown(WAIT);
}

/// Delayed messages to a process that ends are cancelled at its end, as
/// dead letters, not kept (with the ended record) until their deadline.
#[test]
fn delayed_messages_to_an_ended_process_go_at_its_end() {
    struct Idle;
    impl Process for Idle {
        type Done = Payload;
        fn step(&mut self, _: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
            Ok(())
        }
    }
    let letters = Arc::new(AtomicUsize::new(0));
    let counted = letters.clone();
    let scheduler = Scheduler::builder()
        .workers(2)
        .on_dead_letter(move |_, _, event| {
            if matches!(event, Event::Message(_)) {
                counted.fetch_add(1, SeqCst);
            }
        })
        .build();
    scheduler.start();
    for _ in 0..100 {
        let target = scheduler.spawn(Idle).unwrap();
        for _ in 0..10 {
            scheduler
                .send(After(Duration::from_secs(3600), target.pid()), 7u8)
                .unwrap();
        }
        scheduler.terminate(target.pid()).unwrap();
        assert!(target.wait().is_err());
    }
    assert_eq!(scheduler.stats().pending_timers, 0, "nothing kept");
    assert_eq!(scheduler.stats().dead_letters, 1000);
    assert_eq!(letters.load(SeqCst), 1000, "each passed to the hook once");
    scheduler.shutdown(WAIT);
}

/// From outside threads as from steps: delayed messages to one target with
/// the same delay arrive in the order they were sent.
#[test]
fn delayed_messages_from_one_sender_arrive_in_order() {
    struct Collects {
        got: Vec<u32>,
        expect: usize,
    }
    impl Process for Collects {
        type Done = Payload;
        fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
            for event in events {
                if let Event::Message(m) = event {
                    self.got.push(*m.payload::<u32>().expect("a u32"));
                    if self.got.len() == self.expect {
                        out.finish(std::mem::take(&mut self.got));
                    }
                }
            }
            Ok(())
        }
    }
    let scheduler = Scheduler::builder().workers(2).build();
    scheduler.start();
    let target = scheduler
        .spawn(Collects {
            got: Vec::new(),
            expect: 1000,
        })
        .unwrap();
    for i in 0..1000u32 {
        scheduler
            .send(After(Duration::from_millis(10), target.pid()), i)
            .unwrap();
    }
    let got = target.wait().unwrap();
    let got = got.downcast_ref::<Vec<u32>>().unwrap();
    assert_eq!(*got, (0..1000).collect::<Vec<_>>());
    scheduler.shutdown(WAIT);
}

/// A value whose `Drop` panics.
struct Bomb;
impl Drop for Bomb {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            panic!("Bomb dropped");
        }
    }
}

/// The engine still runs processes on every worker.
fn assert_alive(scheduler: &Scheduler, workers: usize) {
    struct Quick;
    impl Process for Quick {
        type Done = Payload;
        fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
            out.finish(1u8);
            Ok(())
        }
    }
    let handles: Vec<_> = (0..workers * 20)
        .map(|_| scheduler.spawn(Quick).unwrap())
        .collect();
    for mut handle in handles {
        assert!(handle.wait_timeout(WAIT).is_ok(), "a worker ran it");
    }
}

#[test]
fn a_late_reply_whose_drop_panics_is_contained() {
    struct SlowResponder;
    impl Process for SlowResponder {
        type Done = Payload;
        fn step(&mut self, events: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
            for event in events {
                if let Event::Request(request) = event {
                    // Answer late, from another thread, with the worker
                    // free to fire the asker's timeout meanwhile.
                    std::thread::spawn(move || {
                        std::thread::sleep(Duration::from_millis(30));
                        request.reply(Bomb);
                    });
                }
            }
            Ok(())
        }
    }
    struct Asks {
        to: Pid,
        asked: bool,
    }
    impl Process for Asks {
        type Done = Payload;
        fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
            if !self.asked {
                self.asked = true;
                out.ask(self.to, Box::new(()) as Payload, Duration::from_millis(1))?;
            }
            for event in events {
                match event {
                    Event::Reply { result: Err(_), .. } => {
                        // Stay a while: the late answer arrives and is
                        // dropped before a step could see it.
                        out.send(After(Duration::from_millis(60), out.pid()), "end")?;
                    }
                    Event::Reply { result: Ok(_), .. } => return Err("a late answer".into()),
                    Event::Message(_) => out.finish(()),
                    _ => {}
                }
            }
            Ok(())
        }
    }
    let scheduler = Scheduler::builder().workers(2).build();
    scheduler.start();
    for _ in 0..3 {
        let responder = scheduler.spawn(SlowResponder).unwrap();
        let asks = Asks {
            to: responder.pid(),
            asked: false,
        };
        scheduler.spawn(asks).unwrap().wait().unwrap();
        scheduler.terminate(responder.pid()).unwrap();
    }
    assert_alive(&scheduler, 2);
    scheduler.shutdown(WAIT);
}

#[test]
fn a_hook_panic_whose_payload_panics_on_drop_is_contained() {
    struct Ends;
    impl Process for Ends {
        type Done = Payload;
        fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
            out.finish(());
            Ok(())
        }
    }
    let scheduler = Scheduler::builder()
        .workers(2)
        .on_complete(|_, _, _| std::panic::panic_any(Bomb))
        .build();
    scheduler.start();
    for _ in 0..10 {
        let mut done = scheduler.spawn(Ends).unwrap();
        assert!(done.wait_timeout(WAIT).is_ok(), "the outcome arrives");
    }
    assert_alive(&scheduler, 2);
    scheduler.shutdown(WAIT);

    let scheduler = Scheduler::builder()
        .workers(1)
        .on_start(|_, _| std::panic::panic_any(Bomb))
        .build();
    scheduler.start();
    let refused = scheduler.spawn(Ends);
    assert!(refused.is_err(), "the start hook's panic refuses it");
    assert_eq!(
        scheduler.stats().live_processes,
        0,
        "nothing left registered"
    );
    let report = scheduler.shutdown(WAIT);
    assert_eq!(report.still_queued, 0);
}

#[test]
fn a_command_handler_panic_whose_payload_panics_on_drop_is_contained() {
    const BOOM: sched::command::CommandId = sched::command::CommandId(3);
    struct Yields;
    impl Process for Yields {
        type Done = Payload;
        fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
            let mut first = true;
            for event in events {
                first = false;
                if let Event::Completion { result, .. } = event {
                    out.finish(result.is_err());
                }
            }
            // Nothing is yielded above, so this step has yielded nothing
            // yet (what `yield_count() == 0` checked).
            if first {
                out.yield_command(BOOM, Tag(1), Box::new(()));
            }
            Ok(())
        }
    }
    let scheduler = Scheduler::builder()
        .workers(2)
        .handler(
            BOOM,
            |_: sched::command::Command,
             _: sched::command::Completer|
             -> Result<(), sched::command::Rejected> { std::panic::panic_any(Bomb) },
        )
        .build();
    scheduler.start();
    for _ in 0..5 {
        let failed = scheduler.spawn(Yields).unwrap().wait().unwrap();
        assert_eq!(
            failed.downcast_ref::<bool>(),
            Some(&true),
            "HandlerPanicked"
        );
    }
    assert_alive(&scheduler, 2);
    scheduler.shutdown(WAIT);
}

#[test]
fn a_waker_that_panics_does_not_lose_the_outcome() {
    use std::future::Future;
    use std::pin::Pin;
    use std::task::{Context as TaskContext, RawWaker, RawWakerVTable, Waker};

    fn raw() -> RawWaker {
        RawWaker::new(std::ptr::null(), &VTABLE)
    }
    static VTABLE: RawWakerVTable = RawWakerVTable::new(
        |_| raw(),
        |_| panic!("wake panicked"),
        |_| panic!("wake_by_ref panicked"),
        |_| {},
    );
    struct Later;
    impl Process for Later {
        type Done = Payload;
        fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
            for event in events {
                if let Event::Message(_) = event {
                    out.finish(5u8);
                }
            }
            Ok(())
        }
    }
    let scheduler = Scheduler::builder().workers(1).build();
    scheduler.start();
    let mut completion = scheduler.spawn(Later).unwrap();
    let pid = completion.pid();
    // SAFETY: the vtable's functions ignore the data pointer.
    let waker = unsafe { Waker::from_raw(raw()) };
    let mut cx = TaskContext::from_waker(&waker);
    assert!(Pin::new(&mut completion).poll(&mut cx).is_pending());
    scheduler.send(pid, "go").unwrap();
    let value = completion
        .wait_timeout(WAIT)
        .expect("stored despite the waker");
    assert_eq!(value.downcast_ref::<u8>(), Some(&5));
    assert_alive(&scheduler, 1);
    scheduler.shutdown(WAIT);
}

#[test]
fn a_process_that_ignores_cancel_is_forced_and_counted_exactly() {
    /// Ignores its cancel, and takes a while to close: when the report is
    /// made, the workers are still ending such processes, which is no
    /// stuck step.
    struct Deaf;
    impl Process for Deaf {
        type Done = Payload;
        fn step(&mut self, _: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
            Ok(())
        }
        fn close(&mut self) {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    let scheduler = Scheduler::builder().workers(2).build();
    scheduler.start();
    let handles: Vec<_> = (0..50).map(|_| scheduler.spawn(Deaf).unwrap()).collect();
    let report = scheduler.shutdown(Duration::from_millis(50));
    assert_eq!(report.still_running, 0, "no step was stuck: {report:?}");
    assert_eq!(
        report.ended_gracefully + report.forced + report.still_queued as u64,
        50,
        "{report:?}"
    );
    for mut handle in handles {
        assert!(matches!(
            handle.wait_timeout(WAIT),
            Err(ExitError::Cancelled)
        ));
    }
}
