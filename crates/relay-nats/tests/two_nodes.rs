//! Two schedulers (nodes 1 and 2), each with its own NATS transport,
//! against a real `nats-server` on loopback.

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use relay_nats::{EncodeError, NatsConfig, NatsTransport};
use sched::message::SendErrorKind;
use sched::prelude::*;
use sched::Package;
use support::*;

const WAIT: Duration = Duration::from_secs(20);

#[test]
fn ping_pong_between_processes_on_two_nodes() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let (one, t1) = node(&server, 1);
    let (two, t2) = node(&server, 2);
    let echo = two.spawn(Echo).unwrap();
    assert_eq!(echo.pid().node(), 2);
    let mut player = one
        .spawn(Player {
            peer: echo.pid(),
            rounds: 500,
            started: false,
        })
        .unwrap();
    let result = player.wait_timeout(WAIT).expect("the rounds finished");
    assert_eq!(result.downcast_ref::<u64>(), Some(&500));
    // A transport counts a delivery once the engine has taken the message,
    // so the process it woke may finish before the count is made: wait for
    // the counts rather than read them at once.
    // The same for a publish, counted once it returned on the transport's
    // thread, which can be after the frame arrived.
    wait_until(
        "both nodes counted 500 deliveries and publishes",
        WAIT,
        || {
            let (s1, s2) = (t1.stats(), t2.stats());
            (s1.delivered, s2.delivered, s1.published, s2.published) == (500, 500, 500, 500)
        },
    );
    let (s1, s2) = (t1.stats(), t2.stats());
    assert_eq!((s1.published, s1.delivered), (500, 500));
    assert_eq!((s2.published, s2.delivered), (500, 500));
    assert_eq!(s1.lost + s2.lost + s1.rejected + s2.rejected, 0);
    one.shutdown(Duration::from_secs(5));
    two.shutdown(Duration::from_secs(5));
}

#[test]
fn each_senders_order_is_kept_from_steps_and_from_outside() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let (one, _t1) = node(&server, 1);
    let (two, t2) = node(&server, 2);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let recorder = two.spawn(Recorder(seen.clone())).unwrap();
    let to = recorder.pid();
    for from in 1..=3 {
        one.spawn(Burst {
            to,
            from,
            count: 2_000,
        })
        .unwrap();
    }
    for n in 1..=2_000 {
        one.send(to, Seq { from: 0, n }).expect("sent from outside");
    }
    wait_until("8 000 messages", WAIT, || {
        seen.lock().unwrap().len() == 8_000
    });
    let seen = seen.lock().unwrap();
    assert!(in_order_per_sender(&seen), "per-sender order kept");
    assert_eq!(t2.stats().lost, 0);
    drop(seen);
    one.shutdown(Duration::from_secs(5));
    two.shutdown(Duration::from_secs(5));
}

#[test]
fn an_unregistered_type_is_refused_with_the_package_back() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let (one, t1) = node(&server, 1);
    let err = one.send(Pid::new(2, 1), 42_u32).unwrap_err();
    assert_eq!(err.kind(), SendErrorKind::Unencodable);
    let cause = err.cause().and_then(|c| c.downcast_ref::<EncodeError>());
    assert!(matches!(cause, Some(EncodeError::NotRegistered)), "{err}");
    assert_eq!(err.into_package().downcast::<u32>().ok(), Some(42));

    // Too large for the codec's limit: refused the same way.
    let big = Ping(0);
    let codec = codec().max_message_bytes(10);
    assert!(matches!(
        codec.encode(&Package::new(Pid::OUTSIDE, Pid::new(2, 1), big)),
        Err(EncodeError::TooLarge { max: 10, .. })
    ));
    assert_eq!(t1.stats().refused, 1);
    assert_eq!(t1.stats().published, 0);
    one.shutdown(Duration::from_secs(5));
}

#[test]
fn malformed_and_oversized_messages_are_rejected_and_the_node_keeps_working() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let (one, _t1) = node(&server, 1);
    let (two, t2) = node(&server, 2);
    let subject = NatsConfig::new(server.url()).frame_subject(2, 1);
    server.publish_raw(&subject, b"junk");
    server.publish_raw(&subject, &vec![1u8; 5_000]); // over the 4 096-byte limit
    let mut unknown_tag = codec()
        .encode(&Package::new(Pid::new(1, 1), Pid::new(2, 1), Ping(1)))
        .unwrap();
    let at = unknown_tag.len() - 3; // inside the JSON body: breaks it
    unknown_tag[at] = b'{';
    server.publish_raw(&subject, &unknown_tag);
    wait_until("three rejections", WAIT, || t2.stats().rejected == 3);

    let echo = two.spawn(Echo).unwrap();
    let mut player = one
        .spawn(Player {
            peer: echo.pid(),
            rounds: 10,
            started: false,
        })
        .unwrap();
    let result = player.wait_timeout(WAIT).expect("node 2 still answers");
    assert_eq!(result.downcast_ref::<u64>(), Some(&10));
    one.shutdown(Duration::from_secs(5));
    two.shutdown(Duration::from_secs(5));
}

#[test]
fn a_message_for_a_missing_process_is_a_dead_letter_on_the_receiving_node() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let (one, _t1) = node(&server, 1);
    let (two, t2) = node(&server, 2);
    one.send(Pid::new(2, 999), Ping(1)).expect("published");
    wait_until("a dead letter", WAIT, || t2.stats().dead_letters == 1);
    one.shutdown(Duration::from_secs(5));
    two.shutdown(Duration::from_secs(5));
}

/// Attaching returns only once the server has the node's subscription: a
/// frame published the moment `node` returned is not dropped by the server
/// for want of a subscriber, even when the receiving node's operations
/// reach the server late (here 300 ms, through a proxy).
#[test]
fn a_message_sent_right_after_the_receiver_attached_is_not_lost() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let proxy = SlowProxy::start(server.port, Duration::from_millis(300));
    let (one, _t1) = node(&server, 1);
    let (two, t2) = node_at(&proxy.url(), 2);
    one.send(Pid::new(2, 999), Ping(1)).expect("published");
    wait_until("a dead letter", WAIT, || t2.stats().dead_letters == 1);
    one.shutdown(Duration::from_secs(5));
    two.shutdown(Duration::from_secs(5));
}

#[test]
fn a_connection_to_nowhere_is_a_typed_error() {
    let options = relay_nats::async_nats::ConnectOptions::new()
        .connection_timeout(Duration::from_millis(200));
    let config = NatsConfig::new("nats://127.0.0.1:1").options(options);
    let err = NatsTransport::connect(config).unwrap_err();
    assert!(matches!(err, relay_nats::ConnectError::Nats(_)), "{err}");
}

#[test]
fn a_frame_addressed_to_an_earlier_run_of_the_node_never_reaches_this_one() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let (two, t2) = node(&server, 2);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let to = two.spawn(Recorder(seen.clone())).unwrap().pid();
    let subject = NatsConfig::new(server.url()).frame_subject(2, 1);
    let fresh = codec()
        .encode(&Package::new(Pid::new(1, 5), to, Seq { from: 9, n: 1 }))
        .unwrap();
    // The same frame, addressed to another run of node 2 (the header's
    // addressed incarnation, bytes 26..34): a PID of that run, which this
    // run may have given to another process.
    let mut stale = codec()
        .encode(&Package::new(Pid::new(1, 5), to, Seq { from: 9, n: 2 }))
        .unwrap();
    stale[26..34].copy_from_slice(&0xDEAD_BEEF_u64.to_be_bytes());
    server.publish_raw(&subject, &stale);
    server.publish_raw(&subject, &fresh);
    wait_until("the fresh frame", WAIT, || !seen.lock().unwrap().is_empty());
    wait_until("the stale frame counted", WAIT, || t2.stats().stale == 1);
    assert_eq!(*seen.lock().unwrap(), [Seq { from: 9, n: 1 }]);
    assert_eq!(t2.stats().delivered, 1);
    two.shutdown(Duration::from_millis(200));
}

/// Signals from a node that never announced itself (node 7: a raw client
/// here): one that cannot be read is rejected, a terminate for no process
/// is a dead letter, and the watch it set up ends when the failure
/// detector gives up on the silent node, so nothing is kept for it and
/// nothing is sent to it.
#[test]
fn signals_that_cannot_be_acted_on_are_counted_and_a_silent_senders_watches_end() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let (two, t2) = node_detecting(
        &server.url(),
        2,
        Duration::from_millis(100),
        Duration::from_millis(600),
    );
    let mut watched = two.spawn(Server { held: Vec::new() }).unwrap();
    let subject = NatsConfig::new(server.url()).frame_subject(2, 7);
    let from = Pid::new(7, 1);
    let signal = |to: Pid, bytes: Vec<u8>| {
        codec()
            .encode(&Package::new(
                from,
                to,
                sched::remote::Signal::new(bytes, None),
            ))
            .unwrap()
    };
    let stamped = |mut frame: Vec<u8>, seq: u64| {
        frame[34..42].copy_from_slice(&77u64.to_be_bytes());
        frame[42..50].copy_from_slice(&seq.to_be_bytes());
        frame
    };
    // An operation this version does not know.
    server.publish_raw(&subject, &stamped(signal(watched.pid(), vec![1, 99]), 1));
    wait_until("the unreadable signal rejected", WAIT, || {
        t2.stats().rejected == 1
    });
    // A terminate for a process that never was.
    server.publish_raw(&subject, &stamped(signal(Pid::new(2, 999), vec![1, 9]), 2));
    wait_until("the terminate a dead letter", WAIT, || {
        t2.stats().dead_letters == 1
    });
    // Node 7 monitors the live process (monitor id 5).
    let mut monitor = vec![1, 1];
    monitor.extend_from_slice(&5u64.to_be_bytes());
    server.publish_raw(&subject, &stamped(signal(watched.pid(), monitor), 3));
    wait_until("the monitor acted on", WAIT, || t2.stats().delivered == 1);
    // Node 7 never beats: it is declared down, and its watch ends.
    wait_until("node 7 declared down", WAIT, || t2.stats().nodes_down == 1);
    two.send(watched.pid(), Ping(0)).unwrap(); // the watched process fails
    assert!(watched.wait_timeout(WAIT).is_err_and(|e| !e.is_timeout()));
    std::thread::sleep(Duration::from_millis(300));
    let s = t2.stats();
    assert_eq!(
        (s.published, s.refused),
        (0, 0),
        "no down for node 7: {s:?}"
    );
    two.shutdown(Duration::from_millis(200));
}
