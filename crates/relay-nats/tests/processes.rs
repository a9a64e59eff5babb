//! Two nodes as two OS processes: this test binary runs node 1 and starts
//! itself again as node 2 (see `processes/peer.rs`), both against a real
//! `nats-server` on loopback. 100 000 messages by PID in ping-pong pairs
//! and in fan-in, both ways; the server restarted in the middle of a run;
//! node 2 killed in the middle of a run.

mod support;

#[path = "processes/child.rs"]
mod child;
#[path = "processes/cluster.rs"]
mod cluster;
#[path = "processes/peer.rs"]
mod peer;
#[path = "processes/tally.rs"]
mod tally;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use relay_nats::LinkError;
use sched::message::SendErrorKind;
use sched::prelude::*;
use support::*;
use tally::{stream, total, CountingPlayer, Stream, Tally, TallyRecorder};

use peer::Peer;

/// Ping-pong pairs (a player on node 1, an echo on node 2).
const PAIRS: u64 = 10;
/// Round trips per pair.
const ROUNDS: u64 = 2_000;
/// Senders on each node, all sending to one recorder on the other node.
const SENDERS: u64 = 3;
/// Messages per sender.
const COUNT: u64 = 10_000;
/// The sender number of the steady streams of the restart test.
const STREAM_FROM: u64 = 200;

const WAIT: Duration = Duration::from_secs(60);

/// Not a test of its own: node 2 when the binary runs as a child (see
/// `processes/peer.rs`); passes at once otherwise.
#[test]
fn node_2_in_a_child_process() {
    if let Ok(role) = std::env::var(peer::ROLE) {
        child::run(&role);
    }
}

/// A stream that received `1..=count`, each once and in order.
fn complete(count: u64) -> Stream {
    Stream {
        count,
        last: count,
        skipped: 0,
        disorder: 0,
    }
}

#[test]
fn two_processes_exchange_100_000_messages_each_once_and_in_order() {
    assert_eq!(2 * PAIRS * ROUNDS + 2 * SENDERS * COUNT, 100_000);
    let Some(server) = NatsServer::start() else {
        return;
    };
    let started = Instant::now();
    let (one, t1) = node(&server, 1);
    let tally = Tally::default();
    let recorder = one.spawn(TallyRecorder(tally.clone()));
    let mut child = Peer::spawn("exchange", &server.url(), recorder.unwrap().pid().id());
    let ready = child.expect("ready", WAIT);
    let (child_recorder, echoes) = (Pid::new(2, ready[0]), &ready[1..]);
    assert_eq!(echoes.len() as u64, PAIRS);

    let pongs = Arc::new(AtomicU64::new(0));
    let players: Vec<_> = echoes
        .iter()
        .map(|&echo| {
            let player = CountingPlayer::new(Pid::new(2, echo), ROUNDS, pongs.clone());
            one.spawn(player).unwrap()
        })
        .collect();
    for from in 1..=SENDERS {
        let burst = Burst {
            to: child_recorder,
            from,
            count: COUNT,
        };
        one.spawn(burst).unwrap();
    }
    for mut player in players {
        let result = player.wait_timeout(WAIT).expect("the rounds finished");
        assert_eq!(result.downcast_ref::<u64>(), Some(&ROUNDS));
    }
    wait_until("node 2's fan-in", WAIT, || total(&tally) >= SENDERS * COUNT);
    child.tell(&format!("report {}", SENDERS * COUNT));
    let report = child.report(WAIT);

    // Node 1 received each of node 2's senders' numbers once, in order.
    for from in 101..=100 + SENDERS {
        assert_eq!(stream(&tally, from), complete(COUNT), "from {from}");
    }
    assert_eq!(total(&tally), SENDERS * COUNT);
    // And node 2 received node 1's, and every ping once, in order.
    for from in 1..=SENDERS {
        assert_eq!(
            report.fanin.get(&from),
            Some(&complete(COUNT)),
            "from {from}"
        );
    }
    assert_eq!(report.fanin.len() as u64, SENDERS);
    assert_eq!(report.pings, (PAIRS * ROUNDS, 0));
    assert_eq!(pongs.load(Relaxed), PAIRS * ROUNDS);

    // The transports agree: everything published was delivered, nothing
    // lost, refused or rejected, both ways.
    let each_way = PAIRS * ROUNDS + SENDERS * COUNT;
    // A delivery is counted once the engine has taken the message, which
    // can be after the process it woke has already counted it.
    // And a publish once it returned on the transport's thread, which can
    // be after the frame arrived.
    wait_until("node 1 to count its deliveries and publishes", WAIT, || {
        let s = t1.stats();
        s.delivered >= each_way && s.published >= each_way
    });
    let s1 = t1.stats();
    let s2 = report.stats;
    assert_eq!((s1.published, s1.delivered), (each_way, each_way), "{s1:?}");
    assert_eq!((s2.published, s2.delivered), (each_way, each_way), "{s2:?}");
    assert_eq!(
        s1.publish_failed + s1.refused + s1.dead_letters,
        0,
        "{s1:?}"
    );
    assert_eq!(s1.rejected + s1.lost, 0, "{s1:?}");
    assert_eq!(
        s2.publish_failed + s2.refused + s2.dead_letters,
        0,
        "{s2:?}"
    );
    assert_eq!(s2.rejected + s2.lost, 0, "{s2:?}");
    assert!(child.wait(WAIT).success(), "node 2 exited cleanly");
    one.shutdown(Duration::from_millis(200));
    eprintln!(
        "100 000 messages between two processes in {:?}",
        started.elapsed()
    );
}

#[test]
fn a_server_restart_in_the_middle_loses_only_what_the_receivers_count() {
    let Some(mut server) = NatsServer::start() else {
        return;
    };
    let (one, t1) = node(&server, 1);
    let tally = Tally::default();
    let recorder = one.spawn(TallyRecorder(tally.clone()));
    let mut child = Peer::spawn("stream", &server.url(), recorder.unwrap().pid().id());
    let to = Pid::new(2, child.expect("ready", WAIT)[0]);

    let stop = AtomicBool::new(false);
    let sent = std::thread::scope(|scope| {
        let sender = scope.spawn(|| child::send_until(&one, to, &stop));
        let from_child = || stream(&tally, STREAM_FROM).count;
        wait_until("traffic from node 2", WAIT, || from_child() >= 500);

        server.restart();
        wait_until("node 1 to reconnect", WAIT, || t1.stats().reconnects >= 1);
        // Traffic from node 2 resumed on a new connection, so node 2 is
        // subscribed again too; keep node 1's stream going a little longer.
        let resumed = from_child() + 500;
        wait_until("traffic to resume", WAIT, || from_child() >= resumed);
        stop.store(true, Relaxed);
        sender.join().expect("the sender thread")
    });
    child.tell(&format!("stop {sent}"));
    let child_sent = child.expect("sent", WAIT)[0];
    let report = child.report(WAIT);
    wait_until("node 2's last message", WAIT, || {
        stream(&tally, STREAM_FROM).last == child_sent
    });
    // A delivery is counted once the engine has taken the message, which
    // can be after the process it woke has already counted it.
    let received = stream(&tally, STREAM_FROM).count;
    wait_until("node 1 to count its deliveries", WAIT, || {
        t1.stats().delivered >= received
    });
    // And a publish once it returned on the transport's thread, which can
    // be after node 2 got the frame and reported.
    wait_until("node 1 to count what it published", WAIT, || {
        let s = t1.stats();
        s.published + s.publish_failed + s.abandoned >= sent
    });
    let (s1, s2) = (t1.stats(), report.stats);
    assert!(s1.reconnects >= 1 && s2.reconnects >= 1, "{s1:?} {s2:?}");

    // Node 1 to node 2: every number either arrived, once and in order,
    // or is counted: lost in transit (the receiver's gap count) or refused
    // by the client (the sender's count). Sends were all accepted.
    let got = report.fanin[&STREAM_FROM];
    assert_eq!((got.last, got.disorder), (sent, 0), "{got:?}");
    assert_eq!(got.count + got.skipped, sent, "{got:?}");
    assert_eq!(
        got.skipped,
        s2.lost + s2.fenced + s1.publish_failed + s1.abandoned,
        "{got:?} {s1:?} {s2:?}"
    );
    assert_eq!(
        s1.published + s1.publish_failed + s1.abandoned,
        sent,
        "{s1:?}"
    );
    assert_eq!(s2.delivered, got.count, "{s2:?}");
    // Node 2 to node 1: the same.
    let got = stream(&tally, STREAM_FROM);
    assert_eq!((got.last, got.disorder), (child_sent, 0), "{got:?}");
    assert_eq!(got.count + got.skipped, child_sent, "{got:?}");
    assert_eq!(
        got.skipped,
        s1.lost + s1.fenced + s2.publish_failed + s2.abandoned,
        "{got:?} {s1:?} {s2:?}"
    );
    assert_eq!(
        s2.published + s2.publish_failed + s2.abandoned,
        child_sent,
        "{s2:?}"
    );
    assert_eq!(s1.delivered, got.count, "{s1:?}");
    // Refused sends (while the nodes reset their relations) were sent
    // again by the streams: refused, never skipped.
    assert_eq!(s1.rejected + s2.rejected, 0);
    eprintln!(
        "restart: node 1 sent {sent}, node 2 lost {}; node 2 sent {child_sent}, node 1 lost {}",
        s2.lost + s2.fenced + s1.publish_failed,
        s1.lost + s1.fenced + s2.publish_failed
    );
    assert!(child.wait(WAIT).success(), "node 2 exited cleanly");
    one.shutdown(Duration::from_millis(200));
}

#[test]
fn a_node_killed_in_the_middle_leaves_the_other_running() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let (one, t1) = node(&server, 1);
    let mut child = Peer::spawn("echo", &server.url(), 0);
    let ready = child.expect("ready", WAIT);
    let (recorder, echo) = (Pid::new(2, ready[0]), Pid::new(2, ready[1]));
    let names = relay_nats::ClusterNames::new(&one, t1.clone()).unwrap();
    assert_eq!(
        names.whereis("echo").unwrap(),
        Some(echo),
        "registered by node 2"
    );
    // Monitors of node 2's processes, from a step and from outside, and a
    // link that traps the exit.
    let (seen, downs) = std::sync::mpsc::channel();
    let watches = vec![
        Watch::Monitor(echo),
        Watch::Monitor(recorder),
        Watch::TrapLink(echo),
    ];
    one.spawn(Watcher { watches, seen }).unwrap();
    let outside = one.context().monitor(recorder);
    let pongs = Arc::new(AtomicU64::new(0));
    let player = CountingPlayer::new(echo, u64::MAX, pongs.clone());
    let mut stuck = one.spawn(player).unwrap();
    wait_until("ping-pong under way", WAIT, || pongs.load(Relaxed) >= 200);
    assert!(downs.try_recv().is_err(), "node 2's processes live");

    child.kill(); // SIGKILL: no goodbye
    let killed = Instant::now();
    // The node said no goodbye, and its heartbeats stop: the failure
    // detector declares it down, and sends to it are refused from then on.
    let mut n = 0;
    wait_until("node 1 to declare node 2 down", WAIT, || {
        n += 1;
        match one.send(recorder, Seq { from: 0, n }) {
            Ok(()) => {
                std::thread::sleep(Duration::from_millis(10));
                false
            }
            Err(err) => {
                assert_eq!(err.kind(), SendErrorKind::Unreachable);
                let cause = err.cause().and_then(|c| c.downcast_ref::<LinkError>());
                assert_eq!(cause, Some(&LinkError::NodeDown(2)));
                true
            }
        }
    });
    let detected = killed.elapsed();
    // Pongs node 2 sent before it died may still have been arriving at
    // the kill; by the time it is declared down (seconds later) they are
    // all in, and none can come after.
    let at_down = pongs.load(Relaxed);
    // The bound is `down_after` plus a heartbeat (4.25 s here); the rest is
    // slack for a loaded machine. Not before `down_after` less a heartbeat
    // (the last one heard may be that old when the node dies).
    let bound = DOWN_AFTER + HEARTBEAT;
    assert!(
        detected < bound + Duration::from_secs(2),
        "declared down after {detected:?}"
    );
    assert!(
        detected >= DOWN_AFTER - HEARTBEAT,
        "declared down too early: {detected:?}"
    );
    assert_eq!(t1.stats().nodes_down, 1);
    // Every monitor and link toward node 2 fired, once, with NodeDown,
    // within the same bound.
    let mut fired: Vec<_> = (0..3).map(|_| downs.recv_timeout(WAIT).unwrap()).collect();
    fired.sort_by_key(|(pid, _, what)| (*what, pid.id()));
    let mut want = vec![
        (echo, ExitReason::NodeDown, "down"),
        (recorder, ExitReason::NodeDown, "down"),
        (echo, ExitReason::NodeDown, "exit"),
    ];
    want.sort_by_key(|(pid, _, what)| (*what, pid.id()));
    assert_eq!(fired, want);
    let down = outside
        .wait_timeout(WAIT)
        .expect("the outside monitor fires");
    assert_eq!(down.reason, ExitReason::NodeDown);
    // Its name went with it.
    assert_eq!(names.whereis("echo").unwrap(), None);
    assert!(
        killed.elapsed() < bound + Duration::from_secs(2),
        "downs after {:?}",
        killed.elapsed()
    );
    let after = t1.stats();
    assert_eq!(after.publish_failed, 0, "{after:?}");
    // The player, which monitors nothing, waits for an answer that never
    // comes.
    assert_eq!(pongs.load(Relaxed), at_down);
    assert!(stuck
        .wait_timeout(Duration::from_millis(100))
        .is_err_and(|e| e.is_timeout()));

    // Node 1 keeps working: locally, and with a new node 2.
    let local_echo = one.spawn(Echo).unwrap().pid();
    let local = CountingPlayer::new(local_echo, 100, Arc::default());
    let mut local = one.spawn(local).unwrap();
    assert!(
        !local.wait_timeout(WAIT).is_err_and(|e| e.is_timeout()),
        "local ping-pong"
    );
    // A new run of node 2 is up again for node 1 (its attach says so).
    let mut child = Peer::spawn("echo", &server.url(), 0);
    let echo = Pid::new(2, child.expect("ready", WAIT)[1]);
    assert_eq!(
        names.whereis("echo").unwrap(),
        Some(echo),
        "the new run took the name"
    );
    wait_until("node 1 to hear the new node 2", WAIT, || {
        one.send(recorder, Seq { from: 0, n: 0 }).is_ok()
    });
    let player = CountingPlayer::new(echo, 100, Arc::default());
    let mut player = one.spawn(player).unwrap();
    let result = player
        .wait_timeout(WAIT)
        .expect("ping-pong with the new node 2");
    assert_eq!(result.downcast_ref::<u64>(), Some(&100));

    // A node that leaves properly is refused at once, with the package.
    child.tell("quit");
    child.expect("end", WAIT);
    assert!(child.wait(WAIT).success(), "node 2 left cleanly");
    wait_until("node 1 to learn that node 2 left", WAIT, || {
        match one.send(recorder, Ping(1)) {
            Ok(()) => false,
            Err(err) => {
                assert_eq!(err.kind(), SendErrorKind::Unreachable);
                let cause = err.cause().and_then(|c| c.downcast_ref::<LinkError>());
                assert_eq!(cause, Some(&LinkError::NodeLeft(2)));
                true
            }
        }
    });

    // And shutting down does not hang on the player that lost its peer.
    let shutdown = Instant::now();
    let report = one.shutdown(Duration::from_secs(2));
    assert!(shutdown.elapsed() < Duration::from_secs(10), "{report:?}");
    assert_eq!((report.still_running, report.workers_detached), (0, 0));
    assert!(
        !stuck.wait_timeout(WAIT).is_err_and(|e| e.is_timeout()),
        "the stuck player ended"
    );
}

#[test]
fn ten_nodes_exchange_a_million_messages_with_exact_accounting() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    const NODES: u32 = 10;
    let started = Instant::now();
    let (one, t1) = node(&server, 1);
    let tally = Tally::default();
    let recorder = one.spawn(TallyRecorder(tally.clone())).unwrap().pid().id();
    let mut children: Vec<_> = (2..=NODES)
        .map(|n| Peer::spawn_node("cluster", &server.url(), 0, n))
        .collect();
    let mut recorders = vec![recorder];
    for child in &children {
        recorders.push(child.expect("ready", WAIT)[0]);
    }
    let go = format!(
        "go {}",
        recorders
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(" ")
    );
    for child in &mut children {
        child.tell(&go);
    }
    let expected = cluster::start(&one, 1, &recorders);
    cluster::settle(&tally, expected, &t1);

    // Every node's account: what it received per sender, and its
    // transport's counters.
    let mut reports = vec![(1u32, own_report(&tally, &t1))];
    for (i, child) in children.iter().enumerate() {
        reports.push((i as u32 + 2, child.report(WAIT)));
    }
    let elapsed = started.elapsed();
    let (mut published, mut delivered, mut lost, mut received) = (0, 0, 0, 0);
    let mut fenced = 0;
    for (node, report) in &reports {
        let s = report.stats;
        published += s.published;
        delivered += s.delivered;
        lost += s.lost;
        fenced += s.fenced;
        assert_eq!(
            s.rejected + s.dead_letters + s.publish_failed,
            0,
            "node {node}: {s:?}"
        );
        assert_eq!(
            report.fanin.len() as u32,
            NODES - 1,
            "node {node} heard every other"
        );
        for (from, stream) in &report.fanin {
            assert_eq!(stream.disorder, 0, "node {node} from {from}: order kept");
            received += stream.count;
        }
    }
    let sent = cluster::PER_PAIR * u64::from(NODES * (NODES - 1));
    assert!(sent >= 1_000_000);
    assert_eq!(published, sent, "every message was published");
    assert_eq!(received, delivered, "every delivery reached its recorder");
    assert_eq!(
        delivered + lost + fenced,
        published,
        "every message delivered, or counted lost or fenced"
    );
    eprintln!(
        "{NODES} nodes: {sent} messages in {elapsed:?}, {lost} counted lost ({:.0} messages/s)",
        sent as f64 / elapsed.as_secs_f64()
    );
    for child in children {
        assert!(child.wait(WAIT).success());
    }
    one.shutdown(Duration::from_millis(200));
}

/// Four nodes, each an OS process, each sending 20 000 numbered messages
/// to every other node's recorder (paced: about two seconds); node 4 is
/// killed (SIGKILL) early in the run. The three others go on: each
/// published exactly what its senders sent; every stream between two of
/// them arrives whole and in order, each number received or counted; and
/// each node's transport accounts for every frame that reached it, to
/// the frame: what the other two sent it, and what it saw of node 4's
/// stream, is exactly what it delivered, dead-lettered, or counted lost
/// or fenced.
#[test]
fn four_nodes_one_killed_every_frame_delivered_dead_lettered_or_counted_lost() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    const NODES: u32 = 4;
    const KILLED: u32 = 4;
    let started = Instant::now();
    let (one, t1) = node(&server, 1);
    let tally = Tally::default();
    let recorder = one.spawn(TallyRecorder(tally.clone())).unwrap().pid().id();
    let mut children: Vec<_> = (2..=NODES)
        .map(|n| Peer::spawn_node("survivor", &server.url(), 0, n))
        .collect();
    let mut recorders = vec![recorder];
    for child in &children {
        recorders.push(child.expect("ready", WAIT)[0]);
    }
    let go = format!(
        "go {KILLED} {}",
        recorders
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(" ")
    );
    for child in &mut children {
        child.tell(&go);
    }
    let senders = cluster::start_until_down(&one, 1, &recorders);
    wait_until("node 4's stream under way", WAIT, || {
        stream(&tally, u64::from(KILLED)).count >= 3_000
    });
    let mut killed = children.pop().expect("node 4");
    killed.kill();
    let sent = cluster::sent(senders);
    for from in [2, 3] {
        wait_until("the survivors' streams", WAIT, || {
            stream(&tally, from).last >= cluster::KILL_PER_PAIR
        });
    }
    let sent_by_1: u64 = sent.iter().map(|(_, n)| n).sum();
    wait_until("node 1 to count its publishes", WAIT, || {
        let s = t1.stats();
        s.published + s.publish_failed + s.abandoned >= sent_by_1
    });
    let received = total(&tally);
    wait_until("node 1 to count its deliveries", WAIT, || {
        t1.stats().delivered >= received
    });
    let mut own = own_report(&tally, &t1);
    own.sent_to = sent.into_iter().collect();
    let mut reports = vec![(1u32, own)];
    for (i, child) in children.iter().enumerate() {
        reports.push((i as u32 + 2, child.report(WAIT)));
    }
    let elapsed = started.elapsed();
    let sent_by = |from: u32, to: u32| {
        let report = &reports.iter().find(|(node, _)| *node == from).unwrap().1;
        report.sent_to[&to]
    };
    let survivors = [1, 2, 3];
    let mut lost = 0;
    for (node, report) in &reports {
        let (node, s) = (*node, report.stats);
        // Each message its senders had accepted (to node 4 too) it
        // published, failed to publish, or abandoned (queued for node 4
        // when node 4 was declared down): exactly.
        let own_sent: u64 = report.sent_to.values().sum();
        assert_eq!(
            s.published + s.publish_failed + s.abandoned,
            own_sent,
            "node {node}: {s:?}"
        );
        assert!(report.sent_to[&KILLED] <= cluster::KILL_PER_PAIR);
        // Every stream from another survivor arrived whole, in order.
        let mut expected = 0;
        for from in survivors.into_iter().filter(|&n| n != node) {
            let got = report.fanin[&u64::from(from)];
            let want = sent_by(from, node);
            assert_eq!(want, cluster::KILL_PER_PAIR, "{from} to {node}: all sent");
            assert_eq!(
                (got.last, got.disorder),
                (want, 0),
                "{from} to {node}: {got:?}"
            );
            assert_eq!(got.count + got.skipped, want, "{from} to {node}: {got:?}");
            expected += want;
        }
        // And node 4's, as far as it went.
        let from_killed = report
            .fanin
            .get(&u64::from(KILLED))
            .copied()
            .unwrap_or_default();
        assert_eq!(from_killed.disorder, 0, "node 4 to {node}: {from_killed:?}");
        assert!(from_killed.count > 0, "node 4 to {node}: {from_killed:?}");
        expected += from_killed.count + from_killed.skipped;
        // Every frame that reached this node's transport is accounted for.
        let received: u64 = report.fanin.values().map(|stream| stream.count).sum();
        assert_eq!(s.delivered, received, "node {node}: {s:?}");
        assert_eq!(s.rejected, 0, "node {node}: {s:?}");
        assert_eq!(
            s.delivered + s.dead_letters + s.lost + s.fenced,
            expected,
            "node {node}: sent to it = delivered + dead letters + lost + fenced: {s:?}"
        );
        lost += s.lost + s.fenced;
    }
    // Node 1 declared node 4 down (whether or not its senders were still
    // sending to it by then).
    wait_until("node 1 to declare node 4 down", WAIT, || {
        t1.stats().nodes_down >= 1
    });
    // What it sent node 4 after the kill, node 4 never confirmed: node 1
    // counts it (some, not more than it sent there).
    let s1 = t1.stats();
    assert!(
        s1.unconfirmed > 0 && s1.unconfirmed <= sent_by(1, KILLED),
        "{s1:?}"
    );
    eprintln!(
        "{NODES} nodes, node {KILLED} killed: {sent_by_1} sent by node 1, {lost} counted lost or fenced on the survivors, in {elapsed:?}"
    );
    for child in children {
        assert!(child.wait(WAIT).success());
    }
    one.shutdown(Duration::from_millis(200));
}

/// Node 1's report, as a child's.
fn own_report(tally: &Tally, transport: &relay_nats::NatsTransport) -> peer::Report {
    let s = transport.stats();
    peer::Report {
        fanin: tally.lock().unwrap().clone(),
        stats: peer::Counts {
            published: s.published,
            publish_failed: s.publish_failed,
            refused: s.refused,
            delivered: s.delivered,
            dead_letters: s.dead_letters,
            rejected: s.rejected,
            lost: s.lost,
            reconnects: s.reconnects,
            fenced: s.fenced,
            abandoned: s.abandoned,
        },
        ..Default::default()
    }
}
