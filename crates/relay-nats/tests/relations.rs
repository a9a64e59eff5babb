//! Monitors, links and asks between two nodes over a real `nats-server`:
//! the local promises hold across nodes, a node that leaves ends every
//! relation with it, and asks survive a server restart (answered, or
//! failed with a typed error, never hung); names registered on one node
//! are found from the other, and go with their process or node.

mod support;

use std::sync::mpsc::channel;
use std::time::{Duration, Instant};

use relay_nats::{ClusterNameError, ClusterNames};
use sched::actor::AskError;
use sched::prelude::*;
use support::*;

const WAIT: Duration = Duration::from_secs(30);

#[test]
fn monitors_links_and_asks_cross_nodes() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let (one, _t1) = node(&server, 1);
    let (two, _t2) = node(&server, 2);
    let s = two.spawn(Server { held: Vec::new() }).unwrap().pid();
    let other = two.spawn(Server { held: Vec::new() }).unwrap().pid();

    // Ask from outside, and through a typed wait.
    let mut reply = one.ask(s, Ping(7)).unwrap();
    let answer = reply.wait_timeout(WAIT).expect("answered");
    assert_eq!(answer, Pong(7));

    let (seen, lines) = channel();
    let watcher = Watcher {
        watches: vec![Watch::Monitor(s), Watch::TrapLink(s), Watch::Monitor(other)],
        seen,
    };
    one.spawn(watcher).unwrap();
    let mut linked = one
        .spawn(Watcher {
            watches: vec![Watch::Link(s)],
            seen: channel().0,
        })
        .unwrap();
    let outside = one.context().monitor(s);
    // Everything is set up on node 2 once an ask sent after it is
    // answered (one sender, one order).
    std::thread::sleep(Duration::from_millis(200));
    assert!(one.ask(s, Ping(1)).unwrap().wait_timeout(WAIT).is_ok());
    assert!(lines.try_recv().is_err(), "nothing has ended");

    two.send(s, Ping(0)).unwrap(); // s fails
    let mut got = vec![
        lines.recv_timeout(WAIT).unwrap(),
        lines.recv_timeout(WAIT).unwrap(),
    ];
    got.sort_by_key(|(_, _, what)| *what);
    assert_eq!(
        got,
        [
            (s, ExitReason::Error, "down"),
            (s, ExitReason::Error, "exit")
        ]
    );
    let down = outside
        .wait_timeout(WAIT)
        .expect("the outside monitor fires");
    assert_eq!(
        (down.reason, down.detail.as_deref()),
        (ExitReason::Error, Some("told to fail"))
    );
    let ended = linked.wait_timeout(WAIT);
    assert!(ended.as_ref().is_err_and(|e| !e.is_timeout()), "{ended:?}");
    // The monitor of `other` did not fire: it lives.
    assert!(lines.recv_timeout(Duration::from_millis(300)).is_err());

    // An ask to a process that has ended comes back unread.
    let mut gone = one.ask(s, Ping(3)).unwrap();
    assert_eq!(gone.wait_timeout(WAIT).unwrap_err(), AskError::Unread);
    assert_eq!(
        gone.take_question()
            .and_then(|q| q.downcast_ref::<Ping>().copied()),
        Some(Ping(3))
    );
    one.shutdown(Duration::from_millis(200));
    two.shutdown(Duration::from_millis(200));
}

#[test]
fn a_node_that_leaves_ends_every_relation_with_node_down() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let (one, _t1) = node(&server, 1);
    let (two, t2) = node(&server, 2);
    let s = two.spawn(Server { held: Vec::new() }).unwrap().pid();
    let (seen, lines) = channel();
    one.spawn(Watcher {
        watches: vec![Watch::Monitor(s), Watch::TrapLink(s)],
        seen,
    })
    .unwrap();
    let outside = one.context().monitor(s);
    let mut held = one.ask(s, Ping(u64::MAX)).unwrap();
    assert!(one.ask(s, Ping(1)).unwrap().wait_timeout(WAIT).is_ok());

    // Node 2's transport leaves while its processes still run.
    t2.close();
    let mut got = vec![
        lines.recv_timeout(WAIT).unwrap(),
        lines.recv_timeout(WAIT).unwrap(),
    ];
    got.sort_by_key(|(_, _, what)| *what);
    assert_eq!(
        got,
        [
            (s, ExitReason::NodeDown, "down"),
            (s, ExitReason::NodeDown, "exit")
        ]
    );
    assert_eq!(
        outside.wait_timeout(WAIT).map(|d| d.reason),
        Ok(ExitReason::NodeDown)
    );
    assert_eq!(held.wait_timeout(WAIT).unwrap_err(), AskError::NodeDown);
    one.shutdown(Duration::from_millis(200));
    two.shutdown(Duration::from_millis(200));
}

#[test]
fn asks_across_nodes_survive_a_server_restart() {
    let Some(mut server) = NatsServer::start() else {
        return;
    };
    let (one, t1) = node(&server, 1);
    let (two, t2) = node(&server, 2);
    let s = two.spawn(Server { held: Vec::new() }).unwrap().pid();
    for n in 1..=50 {
        let mut reply = one.ask(s, Ping(n)).unwrap();
        let answer = reply
            .wait_timeout(WAIT)
            .expect("answered before the restart");
        assert_eq!(answer, Pong(n));
    }
    // Asks in flight while the server restarts: each is answered, or
    // fails with a typed error; none hangs.
    let mut in_flight: Vec<_> = (100..150).map(|n| one.ask(s, Ping(n)).unwrap()).collect();
    server.restart();
    let during: Vec<_> = (150..200)
        .filter_map(|n| one.ask(s, Ping(n)).ok())
        .collect();
    in_flight.extend(during);
    let started = Instant::now();
    let (mut answered, mut failed) = (0, 0);
    for mut reply in in_flight {
        match reply.wait_timeout(Duration::from_secs(10)) {
            // A `Pong` (an answer of another type would be
            // `AskError::UnexpectedType`, the failure below).
            Ok(Pong(_)) => answered += 1,
            Err(AskError::NodeDown) => failed += 1,
            Err(other) => panic!("an ask across the restart failed with {other:?}"),
        }
    }
    assert!(started.elapsed() < Duration::from_secs(30), "nothing hung");
    wait_until("both reconnected", WAIT, || {
        t1.stats().reconnects >= 1 && t2.stats().reconnects >= 1
    });
    // After the restart, asks are answered again (node 2 may resubscribe
    // a little after node 1 reconnects: retry until one is).
    wait_until("an ask answered after the restart", WAIT, || {
        one.ask(s, Ping(7))
            .ok()
            .and_then(|mut r| r.wait_timeout(Duration::from_millis(500)).ok())
            .is_some()
    });
    for n in 300..350 {
        let mut reply = one.ask(s, Ping(n)).unwrap();
        let answer = reply
            .wait_timeout(WAIT)
            .expect("answered after the restart");
        assert_eq!(answer, Pong(n));
    }
    eprintln!("across the restart: {answered} answered, {failed} failed with NodeDown");
    one.shutdown(Duration::from_millis(200));
    two.shutdown(Duration::from_millis(200));
}

/// Two nodes with cluster names, and a `Server` on each (`s` on node 1,
/// `other` on node 2).
struct Named {
    one: Scheduler,
    two: Scheduler,
    t1: std::sync::Arc<relay_nats::NatsTransport>,
    t2: std::sync::Arc<relay_nats::NatsTransport>,
    names1: ClusterNames,
    names2: ClusterNames,
    s: Pid,
    other: Pid,
}

fn named_pair(server: &NatsServer) -> Named {
    let (one, t1) = node(server, 1);
    let (two, t2) = node(server, 2);
    let names1 = ClusterNames::new(&one, t1.clone()).unwrap();
    let names2 = ClusterNames::new(&two, t2.clone()).unwrap();
    let s = one.spawn(Server { held: Vec::new() }).unwrap().pid();
    let other = two.spawn(Server { held: Vec::new() }).unwrap().pid();
    Named {
        one,
        two,
        t1,
        t2,
        names1,
        names2,
        s,
        other,
    }
}

#[test]
fn names_hold_across_nodes_and_go_with_their_process() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let Named {
        one,
        two,
        t1: _,
        t2,
        names1,
        names2,
        s,
        other,
    } = named_pair(&server);

    names1.register("db", s).unwrap();
    names1.register("db", s).unwrap(); // again: still s's
    assert_eq!(names2.whereis("db").unwrap(), Some(s));
    assert_eq!(
        names2.register("db", other),
        Err(ClusterNameError::Taken {
            name: "db".into(),
            by: s
        })
    );
    assert!(matches!(
        names2.register("has space", other),
        Err(ClusterNameError::InvalidName(_))
    ));
    assert_eq!(names2.register("x", s), Err(ClusterNameError::NotLocal(s)));
    assert_eq!(names2.whereis("nobody").unwrap(), None);
    // By name, then by PID, across nodes.
    let found = names2.whereis("db").unwrap().unwrap();
    let mut reply = two.ask(found, Ping(4)).unwrap();
    assert_eq!(reply.wait_timeout(WAIT).unwrap(), Pong(4));

    // The process ends: its name is released, and node 2 may take it.
    one.send(s, Ping(0)).unwrap();
    wait_until("the name released", WAIT, || {
        names2.whereis("db").unwrap().is_none()
    });
    names2.register("db", other).unwrap();
    assert_eq!(names1.whereis("db").unwrap(), Some(other));
    assert!(!names2.unregister("db", s).unwrap(), "not s's any more");
    assert!(names2.unregister("db", other).unwrap());
    assert_eq!(names1.whereis("db").unwrap(), None);

    // A node that leaves takes its names with it.
    let kept = two.spawn(Server { held: Vec::new() }).unwrap().pid();
    names2.register("cache", kept).unwrap();
    assert_eq!(names1.whereis("cache").unwrap(), Some(kept));
    t2.close();
    wait_until("node 2's names released", WAIT, || {
        names1.whereis("cache").unwrap().is_none()
    });
    one.shutdown(Duration::from_millis(200));
    two.shutdown(Duration::from_millis(200));
}

/// The `_async` calls give what the blocking ones give, from async code on
/// a runtime of the caller's (here a single-threaded one, which a blocking
/// call inside a task would stall), and their futures are `Send`.
#[test]
fn names_work_from_async_code_on_any_runtime() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let Named {
        one,
        two,
        t1,
        t2: _,
        names1,
        names2,
        s,
        other,
    } = named_pair(&server);
    fn is_send<T: Send>(value: T) -> T {
        value
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        // Two calls at once on one thread: neither blocks the other.
        let (registered, missing) = tokio::join!(
            is_send(names1.register_async("queue", s)),
            names2.whereis_async("nobody"),
        );
        registered.unwrap();
        assert_eq!(missing.unwrap(), None);
        assert_eq!(
            is_send(names2.whereis_async("queue")).await.unwrap(),
            Some(s)
        );
        assert_eq!(
            names2.register_async("queue", other).await,
            Err(ClusterNameError::Taken {
                name: "queue".into(),
                by: s
            })
        );
        assert_eq!(
            names2.register_async("x", s).await,
            Err(ClusterNameError::NotLocal(s))
        );
        assert!(matches!(
            names1.whereis_async("has space").await,
            Err(ClusterNameError::InvalidName(_))
        ));
        assert!(!names1.unregister_async("queue", other).await.unwrap());
        assert!(is_send(names1.unregister_async("queue", s)).await.unwrap());
        assert_eq!(names2.whereis_async("queue").await.unwrap(), None);
        names2.register_async("queue", other).await.unwrap();
        assert_eq!(names1.whereis_async("queue").await.unwrap(), Some(other));
    });
    // The keeper watches what `register_async` registered: the holder's
    // end releases the name.
    two.send(other, Ping(0)).unwrap();
    wait_until("the name released", WAIT, || {
        names1.whereis("queue").unwrap().is_none()
    });
    // A closed transport answers at once, with a typed error.
    t1.close();
    let closed = runtime.block_on(names1.whereis_async("queue"));
    assert!(
        matches!(closed, Err(ClusterNameError::Unavailable(_))),
        "{closed:?}"
    );
    one.shutdown(Duration::from_millis(200));
    two.shutdown(Duration::from_millis(200));
}

/// Finishes at its cancel.
struct EndsOnCancel;

impl Process for EndsOnCancel {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        if events.any(|event| matches!(event, Event::Cancel)) {
            out.finish(());
        }
        Ok(())
    }
}

#[test]
fn terminate_and_cancel_cross_nodes() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let (one, _t1) = node(&server, 1);
    let (two, t2) = node(&server, 2);
    let s = two.spawn(Server { held: Vec::new() }).unwrap().pid();
    let c = two.spawn(EndsOnCancel).unwrap().pid();
    assert!(one.ask(s, Ping(1)).unwrap().wait_timeout(WAIT).is_ok());
    let (terminated, cancelled) = (one.context().monitor(s), one.context().monitor(c));

    one.terminate(s).unwrap();
    assert_eq!(
        terminated.wait_timeout(WAIT).map(|d| d.reason),
        Ok(ExitReason::Terminated)
    );
    one.context().cancel(c).unwrap();
    assert_eq!(
        cancelled.wait_timeout(WAIT).map(|d| d.reason),
        Ok(ExitReason::Normal)
    );

    // Node 2 leaves: a request to it cannot leave, and says so.
    let kept = two.spawn(Server { held: Vec::new() }).unwrap().pid();
    let lost = one.context().monitor(kept);
    t2.close();
    assert_eq!(
        lost.wait_timeout(WAIT).map(|d| d.reason),
        Ok(ExitReason::NodeDown)
    );
    assert_eq!(
        one.terminate(kept),
        Err(sched::process::TerminateError::Unreachable(kept))
    );
    one.shutdown(Duration::from_millis(200));
    two.shutdown(Duration::from_millis(200));
}
