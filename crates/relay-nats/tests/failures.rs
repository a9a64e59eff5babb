//! Failures with a real `nats-server`: the server restarts mid-stream, a
//! node leaves.
//!
//! A node that loses its connection ends its relations with every other
//! node and refuses sends to each until that node has ended its own in
//! turn (see `symmetric.rs`): sends while the server restarts are queued
//! or refused with the message handed back, never lost uncounted.

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use relay_nats::LinkError;
use sched::message::SendErrorKind;
use sched::prelude::*;
use support::*;

const WAIT: Duration = Duration::from_secs(30);

#[test]
fn traffic_resumes_after_a_server_restart_and_the_gap_is_counted() {
    let Some(mut server) = NatsServer::start() else {
        return;
    };
    let (one, t1) = node(&server, 1);
    let (two, t2) = node(&server, 2);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let to = two.spawn(Recorder(seen.clone())).unwrap().pid();

    // `sent` numbers the messages accepted; a refused one is handed back
    // and counted, and its number is used again.
    let mut sent = 0;
    let mut refused = 0u64;
    let mut send = |count: u64| {
        for _ in 0..count {
            match one.send(
                to,
                Seq {
                    from: 0,
                    n: sent + 1,
                },
            ) {
                Ok(()) => sent += 1,
                Err(error) => {
                    assert_eq!(error.kind(), SendErrorKind::Unreachable, "{error}");
                    let cause = error.cause().and_then(|c| c.downcast_ref::<LinkError>());
                    assert!(
                        matches!(
                            cause,
                            Some(LinkError::Resetting(2) | LinkError::NodeDown(2))
                        ),
                        "{cause:?}"
                    );
                    assert_eq!(
                        error.into_package().downcast::<Seq>().ok().map(|s| s.n),
                        Some(sent + 1),
                        "handed back"
                    );
                    refused += 1;
                }
            }
        }
        (sent, refused)
    };
    assert_eq!(send(1_000), (1_000, 0), "nothing is refused before");
    // Traffic flows before the restart. (Not "all of it arrived": on a
    // starved machine the server may drop a slow client's messages, and
    // the accounting below checks every one of them either way.)
    wait_until("the first messages", WAIT, || {
        !seen.lock().unwrap().is_empty()
    });

    server.restart();
    send(1_000); // while both clients reconnect
    wait_until("both reconnected", WAIT, || {
        t1.stats().reconnects >= 1 && t2.stats().reconnects >= 1
    });
    // Node 2 may resubscribe after node 1 published: keep sending until a
    // message is seen after the restart.
    let (mut last, _) = send(1);
    wait_until("traffic to resume", WAIT, || {
        let got = seen.lock().unwrap().last().map(|s| s.n);
        if got == Some(last) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
        last = send(1).0;
        false
    });
    let (last, refused) = send(1_000);
    wait_until("the last message", WAIT, || {
        seen.lock().unwrap().last().map(|s| s.n) == Some(last)
    });

    // A publish is counted once it returned on the transport's thread,
    // which can be after the frame arrived. What node 1 had accepted and
    // still queued when it noticed it lost the server is not published:
    // `abandoned`.
    wait_until("node 1 to count every send", WAIT, || {
        let s = t1.stats();
        s.published + s.publish_failed + s.abandoned >= last
    });
    let seen = seen.lock().unwrap();
    assert!(in_order_per_sender(&seen), "order kept across the restart");
    let (s1, s2) = (t1.stats(), t2.stats());
    assert_eq!(
        s1.published + s1.publish_failed + s1.abandoned,
        last,
        "every send accepted was published, abandoned or counted: {s1:?}"
    );
    assert_eq!(s1.refused, refused, "every send refused was counted");
    assert_eq!(
        seen.len() as u64 + s2.lost + s2.fenced,
        s1.published,
        "every published message was delivered, or counted lost or fenced: {s1:?} {s2:?}"
    );
    drop(seen);
    one.shutdown(Duration::from_secs(5));
    two.shutdown(Duration::from_secs(5));
}

#[test]
fn a_node_that_leaves_is_unreachable_until_it_comes_back() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let (one, _t1) = node(&server, 1);
    let (two, t2) = node(&server, 2);
    two.shutdown(Duration::from_secs(5));
    t2.close();
    drop((two, t2));

    wait_until("node 1 to learn that node 2 left", WAIT, || {
        match one.send(Pid::new(2, 1), Ping(1)) {
            Ok(()) => false,
            Err(err) => {
                assert_eq!(err.kind(), SendErrorKind::Unreachable);
                let cause = err.cause().and_then(|c| c.downcast_ref::<LinkError>());
                assert_eq!(cause, Some(&LinkError::NodeLeft(2)));
                assert_eq!(err.into_package().downcast::<Ping>().ok(), Some(Ping(1)));
                true
            }
        }
    });

    // Node 2 comes back: reachable again.
    let (two, _t2) = node(&server, 2);
    let echo = two.spawn(Echo).unwrap();
    wait_until("node 1 to learn that node 2 is back", WAIT, || {
        one.send(Pid::new(2, 1), Ping(1)).is_ok()
    });
    let mut player = one
        .spawn(Player {
            peer: echo.pid(),
            rounds: 5,
            started: false,
        })
        .unwrap();
    assert!(
        !player.wait_timeout(WAIT).is_err_and(|e| e.is_timeout()),
        "ping-pong with the new node 2"
    );
    one.shutdown(Duration::from_secs(5));
    two.shutdown(Duration::from_secs(5));
}

/// A scheduler dropped while its transport delivers a flood: the last
/// reference to the engine, and with it the transport, may go on the
/// transport's own thread, which must then end by itself rather than wait
/// for itself (it panicked with "failed to join thread"). Checked by a
/// panic hook over many drops; the drop lands on the transport's thread in
/// a fraction of them, not all, so this catches a regression only often.
#[test]
fn a_scheduler_dropped_while_its_transport_delivers_ends_without_a_panic() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    // Panics on the transports' threads are recorded; every panic is
    // still reported as usual.
    let panics = Arc::new(Mutex::new(Vec::<String>::new()));
    let seen = Arc::clone(&panics);
    let previous: Arc<dyn Fn(&std::panic::PanicHookInfo<'_>) + Send + Sync> =
        Arc::from(std::panic::take_hook());
    let report = Arc::clone(&previous);
    std::panic::set_hook(Box::new(move |info| {
        if std::thread::current().name() == Some("relay-nats") {
            seen.lock().unwrap().push(info.to_string());
        }
        report(info);
    }));
    let (one, _t1) = node(&server, 1);
    for round in 0..20 {
        let (two, t2) = node(&server, 2);
        let to = two
            .spawn(Recorder(Arc::new(Mutex::new(Vec::new()))))
            .unwrap()
            .pid();
        // Node 1 floods node 2's recorder, then node 2 goes mid-flood.
        // (Until node 1 hears this run of node 2, its frames are addressed
        // to the previous run and dropped: flood again until one lands.)
        wait_until("the flood arriving", WAIT, || {
            let burst = Burst {
                to,
                from: round,
                count: 2_000,
            };
            one.spawn(burst).unwrap();
            std::thread::sleep(Duration::from_millis(20));
            t2.stats().delivered > 0
        });
        drop(t2);
        drop(two);
    }
    std::thread::sleep(Duration::from_millis(500));
    let _ = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| previous(info)));
    one.shutdown(Duration::from_millis(200));
    let panics = panics.lock().unwrap();
    assert!(panics.is_empty(), "{panics:?}");
}

/// A node that dies (its connection gone for good, no goodbye) while
/// another streams to it: every frame the sender published is delivered
/// there, counted lost there, or counted `unconfirmed` by the sender once
/// its detector declares the node down. None vanishes uncounted.
#[test]
fn frames_to_a_node_that_dies_are_delivered_or_counted() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let (proxy, (one, t1), (two, t2)) = watchful_and_proxied(&server);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let to = two.spawn(Recorder(seen.clone())).unwrap().pid();
    let (mut accepted, mut killed) = (0u64, false);
    loop {
        let seq = Seq {
            from: 1,
            n: accepted + 1,
        };
        match one.send(to, seq) {
            Ok(()) => accepted += 1,
            // Declared down: nothing more leaves.
            Err(error) if killed => {
                assert_eq!(error.kind(), SendErrorKind::Unreachable, "{error}");
                break;
            }
            Err(error) => panic!("refused before the death: {error}"),
        }
        if !killed && seen.lock().unwrap().len() >= 500 {
            proxy.kill();
            killed = true;
        }
        std::thread::sleep(Duration::from_micros(300));
    }
    wait_until("node 1 to count every publish", WAIT, || {
        let s = t1.stats();
        s.published + s.publish_failed + s.abandoned == accepted
    });
    std::thread::sleep(Duration::from_millis(300));
    let (s1, s2) = (t1.stats(), t2.stats());
    let received = seen.lock().unwrap().len() as u64;
    assert!(s1.nodes_down >= 1, "{s1:?}");
    assert!(
        s1.unconfirmed > 0,
        "frames were sent after the death: {s1:?}"
    );
    // What node 1 counts as confirmed, node 2 saw.
    assert!(
        s1.published - s1.unconfirmed <= received + s2.lost,
        "confirmed but not seen: {s1:?} {s2:?} received {received}"
    );
    // And what node 2 did not see, node 1 counted.
    assert!(
        received + s2.lost + s1.unconfirmed >= s1.published,
        "vanished uncounted: {s1:?} {s2:?} received {received}"
    );
    eprintln!(
        "a node died: {} published, {received} received, {} unconfirmed",
        s1.published, s1.unconfirmed
    );
    one.shutdown(Duration::from_millis(200));
    two.shutdown(Duration::from_millis(200));
}

/// Takes nothing: what reaches it stays in its mailbox, unread (each
/// message's arrival steps it, and the step leaves every event there).
struct Hoarder;

impl sched::Process for Hoarder {
    type Done = ();
    fn step(&mut self, _: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
        Ok(())
    }
}

/// A node that dies with messages in its mailboxes that no process has
/// taken: the sender counts them (`unconfirmed`), because a node confirms
/// to a sender only what its processes took, not what reached it. Node 2
/// holds 300 messages unread in one process and has read 200 in another
/// (and confirmed those in a heartbeat) when its connection dies for good.
/// Before confirmations followed the reads, node 1 counted none of the 300.
#[test]
fn messages_a_dead_node_held_unread_are_counted_by_the_sender() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let (proxy, (one, t1), (two, t2)) = watchful_and_proxied(&server);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let reader = two.spawn(Recorder(seen.clone())).unwrap().pid();
    let hoarder = two.spawn(Hoarder).unwrap().pid();
    const HELD: u64 = 300;
    const READ: u64 = 200;
    for n in 1..=HELD.max(READ) {
        if n <= HELD {
            one.send(hoarder, Seq { from: 1, n }).unwrap();
        }
        if n <= READ {
            one.send(reader, Seq { from: 2, n }).unwrap();
        }
    }
    wait_until(
        "node 2 to have every message, and to read its reader's",
        WAIT,
        || t2.stats().delivered == HELD + READ && seen.lock().unwrap().len() as u64 == READ,
    );
    // Heartbeats every 100 ms confirm the reads; a few of them go out
    // before the connection dies.
    std::thread::sleep(Duration::from_millis(800));
    proxy.kill();
    wait_until("node 1 to declare node 2 down", WAIT, || {
        t1.stats().nodes_down >= 1
    });
    let s1 = t1.stats();
    assert_eq!(s1.published, HELD + READ, "{s1:?}");
    // Every unread message is counted; of the read ones, at most those a
    // late heartbeat had not yet confirmed (none on a calm machine).
    assert!(
        s1.unconfirmed >= HELD,
        "{} unread messages died uncounted: {s1:?}",
        HELD.saturating_sub(s1.unconfirmed)
    );
    assert!(s1.unconfirmed <= HELD + READ, "{s1:?}");
    eprintln!(
        "a node died holding {HELD} unread: node 1 counted {} unconfirmed",
        s1.unconfirmed
    );
    one.shutdown(Duration::from_millis(200));
    two.shutdown(Duration::from_millis(200));
}

/// Passes every message on to `to` as its own, keeping the receipt it
/// came with (as a keyed process's holder does when a shard has moved).
struct Passer {
    to: Pid,
}

impl sched::Process for Passer {
    type Done = ();
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            if let Event::Message(mut package) = event {
                let receipt = package.take_receipt();
                let (_, _, payload) = package.into_parts();
                let mut onward = sched::Package::from_payload(out.pid(), self.to, payload);
                if let Some(receipt) = receipt {
                    onward = onward.with_receipt(receipt);
                }
                out.forward(onward).map_err(|e| e.to_string())?;
            }
        }
        Ok(())
    }
}

/// A node that passed messages on to a third node and died before that
/// node confirmed them: the first sender counts them. Node 3 is cut off
/// (node 2 does not notice for 10 s), node 1 sends 100 messages to a
/// process of node 2 that passes each on to node 3, and node 2 dies once
/// its heartbeats have had time to confirm them. A frame passed on keeps
/// its first sender's receipt until the next node confirms it, so node 1
/// counts all 100; when node 2 told the receipt as it published, node 1
/// counted none, and nobody else lived to.
#[test]
fn messages_a_dead_node_passed_on_unconfirmed_are_counted_by_their_first_sender() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let beat = Duration::from_millis(100);
    let (proxy2, proxy3) = (
        FaultyProxy::start(server.port),
        FaultyProxy::start(server.port),
    );
    let (one, t1) = node_detecting(&server.url(), 1, beat, Duration::from_millis(600));
    let (two, t2) = node_detecting(&proxy2.url(), 2, beat, Duration::from_secs(10));
    let (three, _t3) = node_detecting(&proxy3.url(), 3, beat, DOWN_AFTER);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let recorder = three.spawn(Recorder(seen.clone())).unwrap().pid();
    let passer = two.spawn(Passer { to: recorder }).unwrap().pid();
    const WARM: u64 = 10;
    const PASSED: u64 = 100;
    for n in 1..=WARM {
        one.send(passer, Seq { from: 1, n }).unwrap();
    }
    wait_until("node 3 to read what node 2 passed on", WAIT, || {
        seen.lock().unwrap().len() as u64 == WARM
    });
    proxy3.kill();
    for n in WARM + 1..=WARM + PASSED {
        one.send(passer, Seq { from: 1, n }).unwrap();
    }
    wait_until("node 2 to pass every message on", WAIT, || {
        t2.stats().published == WARM + PASSED
    });
    // Heartbeats every 100 ms: node 2 confirms to node 1 what it did not
    // pass on (nothing) before it dies.
    std::thread::sleep(Duration::from_millis(800));
    wait_until("node 1 to declare node 3 down", WAIT, || {
        t1.stats().nodes_down >= 1
    });
    proxy2.kill();
    wait_until("node 1 to declare node 2 down (and node 3)", WAIT, || {
        t1.stats().nodes_down >= 2
    });
    let s1 = t1.stats();
    assert_eq!(s1.published, WARM + PASSED, "{s1:?}");
    assert_eq!(
        seen.lock().unwrap().len() as u64,
        WARM,
        "node 3 was cut off"
    );
    assert!(
        s1.unconfirmed >= PASSED,
        "{} messages passed on to a dead node died uncounted: {s1:?}",
        PASSED.saturating_sub(s1.unconfirmed)
    );
    assert!(s1.unconfirmed <= PASSED + WARM, "{s1:?}");
    for node in [one, two, three] {
        node.shutdown(Duration::from_millis(200));
    }
}

/// A node that dies while the sender has a backlog for it: node 1's bytes
/// to the server are held up (its publishes wait, so what it accepts
/// queues on its transport) while node 2 dies. Every message node 1
/// accepted is counted once, exactly: published, failed to publish, or
/// abandoned (queued when node 2 was declared down, never published). And
/// none of the published ones vanishes: node 2 saw it, counted it lost, or
/// node 1 counted it `unconfirmed`.
#[test]
fn a_backlog_for_a_node_that_dies_is_counted_exactly() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let beat = Duration::from_millis(100);
    let (proxy1, proxy2) = (
        FaultyProxy::start(server.port),
        FaultyProxy::start(server.port),
    );
    let (one, t1) = node_detecting(&proxy1.url(), 1, beat, Duration::from_millis(600));
    let (two, t2) = node_detecting(&proxy2.url(), 2, beat, DOWN_AFTER);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let to = two.spawn(Recorder(seen.clone())).unwrap().pid();
    let (mut accepted, mut full, mut killed) = (0u64, 0u64, false);
    loop {
        let seq = Seq {
            from: 1,
            n: accepted + 1,
        };
        match one.send(to, seq) {
            Ok(()) => accepted += 1,
            Err(error) if error.kind() == SendErrorKind::Full => {
                // The backlog is at its bound: the sender gets it back.
                full += 1;
                std::thread::yield_now();
            }
            // Declared down (or being reset): nothing more is accepted.
            Err(error) if killed => {
                assert_eq!(error.kind(), SendErrorKind::Unreachable, "{error}");
                break;
            }
            Err(error) => panic!("refused before the death: {error}"),
        }
        if !killed && seen.lock().unwrap().len() >= 500 {
            // Node 1's publishes wait from here on, past node 2's death
            // and its detection: what it accepts meanwhile queues.
            proxy1.stall(Duration::from_secs(3));
            proxy2.kill();
            killed = true;
        }
        if !killed {
            std::thread::sleep(Duration::from_micros(300));
        }
    }
    wait_until("node 1 to account for every accepted message", WAIT, || {
        let s = t1.stats();
        s.published + s.publish_failed + s.abandoned >= accepted
    });
    std::thread::sleep(Duration::from_millis(300));
    let (s1, s2) = (t1.stats(), t2.stats());
    let received = seen.lock().unwrap().len() as u64;
    eprintln!(
        "a node died with a backlog: {accepted} accepted ({full} refused full), {} published, \
         {} abandoned, {received} received, {} unconfirmed",
        s1.published, s1.abandoned, s1.unconfirmed
    );
    assert_eq!(
        s1.published + s1.publish_failed + s1.abandoned,
        accepted,
        "each accepted message counted once: {s1:?}"
    );
    assert!(s1.abandoned > 0, "a backlog was left at the death: {s1:?}");
    assert!(
        received + s2.lost + s1.unconfirmed >= s1.published,
        "vanished uncounted: {s1:?} {s2:?} received {received}"
    );
    one.shutdown(Duration::from_millis(200));
    two.shutdown(Duration::from_millis(200));
}

/// Frames node 1 accepted for a run of node 2 that is gone, still queued
/// when node 2 comes back as a new run, are not the new run's: the new
/// run's processes reuse the old one's PIDs, and must not receive them.
/// Node 1's publishes are held up (its queue fills) while node 2 vanishes
/// without a goodbye and a new node 2 starts; every such frame is counted
/// `abandoned`, and the new run's process at the same PID gets none.
#[test]
fn frames_queued_for_a_run_that_restarted_do_not_reach_the_new_run() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let beat = Duration::from_millis(100);
    // Patient detectors on both sides: the old run is replaced, not
    // declared down, and node 1 is not declared down while held up.
    let patient = Duration::from_secs(20);
    let (proxy1, proxy2) = (
        FaultyProxy::start(server.port),
        FaultyProxy::start(server.port),
    );
    let (one, t1) = node_detecting(&proxy1.url(), 1, beat, patient);
    let (old, _old_t) = node_detecting(&proxy2.url(), 2, beat, patient);
    let seen_old = Arc::new(Mutex::new(Vec::new()));
    let to = old.spawn(Recorder(seen_old.clone())).unwrap().pid();
    let mut accepted = 0u64;
    // Sends `n` (retrying while the backlog is full, for up to a second
    // when `fill`): returns how many were accepted so far.
    let mut send = |n: u64, fill: bool| {
        let until = std::time::Instant::now() + Duration::from_secs(1);
        let mut left = n;
        while left > 0 && (!fill || std::time::Instant::now() < until) {
            let seq = Seq {
                from: 1,
                n: accepted + 1,
            };
            match one.send(to, seq) {
                Ok(()) => {
                    accepted += 1;
                    left -= 1;
                }
                Err(error) if fill && error.kind() == SendErrorKind::Full => {
                    std::thread::yield_now()
                }
                Err(error) => panic!("refused: {error}"),
            }
        }
        accepted
    };
    send(10, false);
    wait_until("the old run to hear node 1", WAIT, || {
        seen_old.lock().unwrap().len() == 10
    });
    // Node 1's bytes wait from here on; what it accepts queues, past what
    // the NATS client buffers, up to the transport's backlog.
    proxy1.stall(Duration::from_secs(4));
    let queued_from = send(0, false);
    let queued_to = send(u64::MAX, true);
    // The old run vanishes without a goodbye; a new run starts at once.
    proxy2.kill();
    let (new, _new_t) = node_detecting(&server.url(), 2, beat, patient);
    let seen_new = Arc::new(Mutex::new(Vec::new()));
    let again = new.spawn(Recorder(seen_new.clone())).unwrap().pid();
    assert_eq!(again, to, "the new run's first process reuses the PID");
    wait_until("node 1 to account for every accepted message", WAIT, || {
        let s = t1.stats();
        s.published + s.publish_failed + s.abandoned == accepted
    });
    std::thread::sleep(Duration::from_millis(500));
    let s1 = t1.stats();
    let stray: Vec<u64> = seen_new
        .lock()
        .unwrap()
        .iter()
        .map(|seq| seq.n)
        .filter(|n| (queued_from + 1..=queued_to).contains(n))
        .collect();
    assert!(
        stray.is_empty(),
        "{} frames sent to the old run reached the new one: {s1:?}",
        stray.len()
    );
    assert!(
        s1.abandoned > 0,
        "frames were still queued when the new run was heard: {s1:?}"
    );
    eprintln!(
        "{} accepted while held up: {} published, {} abandoned",
        queued_to - queued_from,
        s1.published,
        s1.abandoned
    );
    one.shutdown(Duration::from_millis(200));
    old.shutdown(Duration::from_millis(200));
    new.shutdown(Duration::from_millis(200));
}
