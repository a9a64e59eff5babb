//! Failure seen by both sides: when one node loses another (its detector
//! declared it down, or its own connection dropped), both end their
//! relations with each other, once, before traffic between them resumes.
//! Over a real `nats-server`, with one node behind a proxy that can stall
//! its bytes to the server or cut its connection.

mod support;

use std::sync::mpsc::{channel, Receiver};
use std::time::Duration;

use sched::prelude::*;
use support::*;

const WAIT: Duration = Duration::from_secs(30);

type Seen = Receiver<(Pid, ExitReason, &'static str)>;

/// Two nodes with a process each, each watched (monitor and trapped
/// link) from the other node; returns what each side's watcher sees.
struct Pair<'a> {
    one: &'a Scheduler,
    two: &'a Scheduler,
    /// Node 1's process, watched from node 2.
    on_one: Pid,
    /// Node 2's process, watched from node 1.
    on_two: Pid,
    /// How each ended.
    ends: [Completion; 2],
    seen_on_one: Seen,
    seen_on_two: Seen,
}

fn pair<'a>(one: &'a Scheduler, two: &'a Scheduler) -> Pair<'a> {
    let end_one = one.spawn(Server { held: Vec::new() }).unwrap();
    let end_two = two.spawn(Server { held: Vec::new() }).unwrap();
    let (on_one, on_two) = (end_one.pid(), end_two.pid());
    let (seen, seen_on_one) = channel();
    one.spawn(Watcher {
        watches: vec![Watch::Monitor(on_two), Watch::TrapLink(on_two)],
        seen,
    })
    .unwrap();
    let (seen, seen_on_two) = channel();
    two.spawn(Watcher {
        watches: vec![Watch::Monitor(on_one), Watch::TrapLink(on_one)],
        seen,
    })
    .unwrap();
    // The watches are in place on the other side once an ask sent after
    // them is answered (one sender, one order).
    std::thread::sleep(Duration::from_millis(200));
    assert!(one.ask(on_two, Ping(1)).unwrap().wait_timeout(WAIT).is_ok());
    assert!(two.ask(on_one, Ping(1)).unwrap().wait_timeout(WAIT).is_ok());
    Pair {
        one,
        two,
        on_one,
        on_two,
        ends: [end_one, end_two],
        seen_on_one,
        seen_on_two,
    }
}

/// The two signals a watcher gets when the other node is lost.
fn lost(seen: &Seen, pid: Pid) {
    let mut got = vec![
        seen.recv_timeout(WAIT).expect("a signal"),
        seen.recv_timeout(WAIT).expect("a second signal"),
    ];
    got.sort_by_key(|(_, _, what)| *what);
    assert_eq!(
        got,
        [
            (pid, ExitReason::NodeDown, "down"),
            (pid, ExitReason::NodeDown, "exit")
        ]
    );
}

/// Each watched process was ended by its link to the other node's
/// watcher (it does not trap exits), traffic between the nodes resumes,
/// and nothing fires twice.
fn linked_ends_resumes_and_nothing_fires_twice(pair: Pair<'_>) {
    for mut end in pair.ends {
        let outcome = end.wait_timeout(WAIT);
        assert!(
            matches!(
                outcome,
                Err(ExitError::Linked {
                    reason: ExitReason::NodeDown,
                    ..
                })
            ),
            "{outcome:?}"
        );
    }
    let fresh_one = pair.one.spawn(Server { held: Vec::new() }).unwrap().pid();
    let fresh_two = pair.two.spawn(Server { held: Vec::new() }).unwrap().pid();
    wait_until("node 2 answers node 1 again", WAIT, || {
        pair.one
            .ask(fresh_two, Ping(2))
            .is_ok_and(|mut r| r.wait_timeout(Duration::from_secs(2)).is_ok())
    });
    wait_until("node 1 answers node 2 again", WAIT, || {
        pair.two
            .ask(fresh_one, Ping(2))
            .is_ok_and(|mut r| r.wait_timeout(Duration::from_secs(2)).is_ok())
    });
    let quiet = Duration::from_millis(700);
    assert!(pair.seen_on_one.recv_timeout(quiet).is_err(), "fired twice");
    assert!(pair.seen_on_two.recv_timeout(quiet).is_err(), "fired twice");
}

#[test]
fn a_false_alarm_on_one_side_ends_the_relations_on_both() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    // Node 1 gives up on a node after 600 ms of silence; node 2 is patient.
    let (proxy, (one, t1), (two, t2)) = watchful_and_proxied(&server);
    let pair = pair(&one, &two);

    // Node 2's bytes are held for 2 s: node 1 declares it down, node 2
    // notices nothing (it still hears node 1).
    proxy.stall(Duration::from_secs(2));
    lost(&pair.seen_on_one, pair.on_two);
    // Heard again, node 2 is told, and ends its side: its monitor and link
    // of node 1's process deliver, as node 1's did.
    lost(&pair.seen_on_two, pair.on_one);
    assert!(t1.stats().nodes_down >= 1);
    assert_eq!(t2.stats().resets, 1, "{:?}", t2.stats());
    assert_eq!(t2.stats().nodes_down, 0, "node 2 saw no failure itself");
    linked_ends_resumes_and_nothing_fires_twice(pair);
    one.shutdown(Duration::from_millis(200));
    two.shutdown(Duration::from_millis(200));
}

#[test]
fn a_blip_on_one_side_ends_the_relations_on_both() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let proxy = FaultyProxy::start(server.port);
    let (one, t1) = node(&server, 1);
    let (two, t2) = node_at(&proxy.url(), 2);
    let pair = pair(&one, &two);

    // Node 2's connection drops and comes back within ~50 ms: node 1's
    // detector sees nothing.
    proxy.cut();
    lost(&pair.seen_on_two, pair.on_one);
    lost(&pair.seen_on_one, pair.on_two);
    // The relations end on the disconnect; the client counts its
    // reconnect when its connection is back, which may be later.
    wait_until("node 2 counts its reconnect", WAIT, || {
        t2.stats().reconnects >= 1
    });
    assert_eq!(t1.stats().nodes_down, 0, "node 1 saw no failure itself");
    assert!(t1.stats().resets >= 1, "{:?}", t1.stats());

    linked_ends_resumes_and_nothing_fires_twice(pair);
    one.shutdown(Duration::from_millis(200));
    two.shutdown(Duration::from_millis(200));
}

/// Blips and pauses of node 2, one after the other on the same two nodes
/// (node 1 declares a node down after 600 ms of silence): after each, the
/// relations set up before it ended on both sides, once, and traffic
/// resumed.
#[test]
fn every_blip_and_pause_ends_the_relations_on_both_sides_once() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let (proxy, (one, t1), (two, t2)) = watchful_and_proxied(&server);
    let faults: [(&str, Option<Duration>); 6] = [
        ("blip", None),
        ("pause 1 s", Some(Duration::from_secs(1))),
        ("blip", None),
        ("pause 3 s", Some(Duration::from_secs(3))),
        ("blip", None),
        ("pause 1 s", Some(Duration::from_secs(1))),
    ];
    for (round, (what, pause)) in faults.into_iter().enumerate() {
        let before = (t1.stats(), t2.stats());
        let pair = pair(&one, &two);
        match pause {
            Some(pause) => proxy.stall(pause),
            None => proxy.cut(),
        }
        lost(&pair.seen_on_one, pair.on_two);
        lost(&pair.seen_on_two, pair.on_one);
        linked_ends_resumes_and_nothing_fires_twice(pair);
        let after = (t1.stats(), t2.stats());
        match pause {
            // Node 1 declared node 2 down; node 2 ended its side when told.
            Some(_) => assert!(
                after.0.nodes_down > before.0.nodes_down && after.1.resets > before.1.resets,
                "round {round} ({what}): {after:?}"
            ),
            // Node 2 lost the server; node 1 ended its side when told.
            None => assert!(
                after.1.reconnects > before.1.reconnects && after.0.resets > before.0.resets,
                "round {round} ({what}): {after:?}"
            ),
        }
    }
    one.shutdown(Duration::from_millis(200));
    two.shutdown(Duration::from_millis(200));
}
