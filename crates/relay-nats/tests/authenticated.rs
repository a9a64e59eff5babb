//! Only a node's own credentials can speak for it. A real `nats-server`
//! gives each node a user limited to the subjects of
//! `NatsConfig::permissions`; an intruder holding node 3's credentials (a
//! node of the cluster, but not node 1) and a guest with none try the
//! forgeries: a terminate, a link exit and a message claiming node 1's
//! PIDs, a goodbye for node 1, publishing on node 1's subjects, a frame
//! sent twice; and, knowing node 1's run from its heartbeats, a frame of
//! node 1's run numbered far ahead (a sequence jump) and an `up` for a new
//! run of node 1. None takes effect; each is refused by the server or
//! counted by the receiving node.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use relay_nats::NatsConfig;
use sched::prelude::*;
use sched::remote::Signal;
use sched::Package;
use support::*;

const WAIT: Duration = Duration::from_secs(30);

/// The server's configuration: users `node1` to `node3` with the
/// permissions their transports document, and `guest` with none.
fn authorization() -> String {
    let config = NatsConfig::new("nats://unused").cluster_names(NAMES);
    let quoted = |subjects: &[String]| {
        subjects
            .iter()
            .map(|s| format!("\"{s}\""))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut users = Vec::new();
    for node in 1..=3 {
        let allowed = config.permissions(node);
        users.push(format!(
            "{{ user: node{node}, password: p{node}, permissions: {{ publish: [{}], subscribe: [{}] }} }}",
            quoted(&allowed.publish),
            quoted(&allowed.subscribe)
        ));
    }
    let admin = config.admin_permissions();
    users.push(format!(
        "{{ user: admin, password: a, permissions: {{ publish: [{}], subscribe: [{}] }} }}",
        quoted(&admin.publish),
        quoted(&admin.subscribe)
    ));
    users.push(
        "{ user: guest, password: g, permissions: { publish: { deny: [\">\"] }, subscribe: { deny: [\">\"] } } }"
            .to_string(),
    );
    format!("authorization {{ users: [ {} ] }}\n", users.join(",\n"))
}

/// The administrator makes the names bucket (nodes may not).
fn make_bucket(server: &NatsServer) {
    let admin = NatsConfig::new(server.url()).cluster_names(NAMES).options(
        relay_nats::async_nats::ConnectOptions::with_user_and_password("admin".into(), "a".into()),
    );
    relay_nats::ClusterNames::create_bucket(admin).expect("the bucket is made");
}

/// A frame as `from`'s transport would stamp it: for node 2's run
/// `addressed` (0: any), from the run `incarnation`, number `seq`.
fn stamped(package: Package, incarnation: u64, seq: u64) -> Vec<u8> {
    let mut frame = codec().encode(&package).expect("encodable");
    frame[34..42].copy_from_slice(&incarnation.to_be_bytes());
    frame[42..50].copy_from_slice(&seq.to_be_bytes());
    frame
}

/// A membership announcement: kind (0 goodbye, 1 up, 2 heartbeat), node,
/// incarnation.
fn announcement(kind: u8, node: u32, incarnation: u64) -> Vec<u8> {
    let mut out = vec![kind];
    out.extend_from_slice(&node.to_be_bytes());
    out.extend_from_slice(&incarnation.to_be_bytes());
    out
}

#[test]
fn only_a_nodes_own_credentials_speak_for_it() {
    let Some(server) = NatsServer::start_with_config(&authorization()) else {
        return;
    };
    make_bucket(&server);
    let (one, _t1) = server.node_as(1, "node1", "p1");
    let (two, t2) = server.node_as(2, "node2", "p2");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let recorder = two.spawn(Recorder(seen.clone())).unwrap().pid();
    let mut target = two.spawn(Server { held: Vec::new() }).unwrap();
    // Node 1 reaches node 2: the permissions let the cluster work.
    let mut asked = one.ask(target.pid(), Ping(1)).unwrap();
    assert!(asked.wait_timeout(WAIT).is_ok(), "node 1 asks node 2");
    one.send(recorder, Seq { from: 1, n: 1 }).unwrap();
    wait_until("node 1's message", WAIT, || seen.lock().unwrap().len() == 1);

    let config = NatsConfig::new(server.url());
    let intruder = Some(("node3", "p3"));
    let as_node_3 = config.frame_subject(2, 3);
    let node_1 = Pid::new(1, 1);
    let terminate = Package::new(node_1, target.pid(), Signal::new(vec![1, 9], None));
    let exit = Package::new(node_1, target.pid(), Signal::new(vec![1, 6, 1, 0], None));
    let message = Package::new(node_1, recorder, Seq { from: 66, n: 1 });
    for (i, forged) in [terminate, exit, message].into_iter().enumerate() {
        let frame = stamped(forged, 0x5EED, 1 + i as u64);
        let errors = server.publish_raw_as(intruder, &as_node_3, &frame);
        assert!(
            errors.is_empty(),
            "node 3 may publish as itself: {errors:?}"
        );
    }
    // A goodbye for node 1, on node 3's announcement subject.
    let goodbye = announcement(0, 1, 7);
    let errors = server.publish_raw_as(intruder, "sched.nodes.3", &goodbye);
    assert!(errors.is_empty(), "{errors:?}");
    wait_until("four forgeries counted", WAIT, || t2.stats().forged >= 4);

    // On node 1's own subjects the server refuses node 3, and everyone
    // without credentials.
    let genuine_looking = stamped(Package::new(node_1, recorder, Seq { from: 66, n: 2 }), 1, 1);
    for (who, credentials) in [("node 3", intruder), ("a guest", Some(("guest", "g")))] {
        let errors =
            server.publish_raw_as(credentials, &config.frame_subject(2, 1), &genuine_looking);
        assert!(
            errors.iter().any(|e| e.contains("Permissions Violation")),
            "{who}: {errors:?}"
        );
        let errors = server.publish_raw_as(credentials, "sched.nodes.1", &goodbye);
        assert!(
            errors.iter().any(|e| e.contains("Permissions Violation")),
            "{who}: {errors:?}"
        );
    }
    let errors = server.publish_raw_as(None, &config.frame_subject(2, 1), &genuine_looking);
    assert!(
        !errors.is_empty(),
        "no credentials, no connection: {errors:?}"
    );

    // A frame node 3 may send, sent twice: the second is a replay.
    let own = stamped(
        Package::new(Pid::new(3, 1), recorder, Seq { from: 3, n: 1 }),
        0x3,
        10,
    );
    server.publish_raw_as(intruder, &as_node_3, &own);
    server.publish_raw_as(intruder, &as_node_3, &own);
    wait_until("the replay counted", WAIT, || t2.stats().duplicates == 1);

    // Nothing took effect: the target lives and answers, the recorder has
    // node 1's message and node 3's one, node 2 still reaches node 1.
    assert!(target.try_take().is_none(), "the target was not ended");
    let mut asked = one.ask(target.pid(), Ping(2)).unwrap();
    assert!(asked.wait_timeout(WAIT).is_ok(), "the target still answers");
    assert_eq!(
        *seen.lock().unwrap(),
        [Seq { from: 1, n: 1 }, Seq { from: 3, n: 1 }]
    );
    let back = one
        .spawn(Recorder(Arc::new(Mutex::new(Vec::new()))))
        .unwrap();
    two.send(back.pid(), Seq { from: 2, n: 1 })
        .expect("node 1 did not leave");
    assert_eq!(t2.stats().forged, 4, "{:?}", t2.stats());
    one.shutdown(Duration::from_millis(200));
    two.shutdown(Duration::from_millis(200));
}

/// The first message a raw client with `credentials` receives on
/// `subject` (what an intruder allowed to listen there learns).
fn overhear(server: &NatsServer, credentials: (&str, &str), subject: &str) -> Vec<u8> {
    let mut stream = TcpStream::connect(("127.0.0.1", server.port)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let (user, pass) = credentials;
    let hello = format!(
        "CONNECT {{\"verbose\":false,\"pedantic\":false,\"user\":\"{user}\",\"pass\":\"{pass}\"}}\r\nSUB {subject} 1\r\nPING\r\n"
    );
    stream.write_all(hello.as_bytes()).unwrap();
    let deadline = Instant::now() + WAIT;
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        // `MSG <subject> <sid> <length>\r\n<payload>\r\n`
        if let Some(at) = seen.windows(4).position(|w| w == b"MSG ") {
            let rest = &seen[at..];
            if let Some(end) = rest.windows(2).position(|w| w == b"\r\n") {
                let line = String::from_utf8_lossy(&rest[..end]).into_owned();
                let length: usize = line
                    .rsplit(' ')
                    .next()
                    .and_then(|n| n.parse().ok())
                    .expect("a payload length");
                let payload = &rest[end + 2..];
                if payload.len() >= length {
                    return payload[..length].to_vec();
                }
            }
        }
        assert!(Instant::now() < deadline, "nothing heard on {subject}");
        match stream.read(&mut buf) {
            Ok(0) => panic!("the server closed the connection: {seen:?}"),
            Ok(n) => seen.extend_from_slice(&buf[..n]),
            Err(_) => {} // a read timeout: read on
        }
    }
}

/// Knowing node 1's run from its heartbeats (node 3's credentials may
/// listen to every announcement), an intruder with node 3's credentials
/// sends a frame of node 1's run numbered far ahead of node 1's stream (a
/// sequence jump: taken, it would count a million frames lost and end
/// every relation with node 1) and announces a new run of node 1 (a
/// forged `up`: taken, node 1's real run would be over, its relations
/// ended and its frames stale). The server refuses both on node 1's own
/// subjects, to node 3 and to a guest; on node 3's subjects node 2 counts
/// them as forged. Nothing took effect: no relation between the two nodes
/// ended, node 1's stream arrives whole, nothing is counted lost or stale.
#[test]
fn a_forged_sequence_jump_and_a_forged_up_are_counted_and_change_nothing() {
    let Some(server) = NatsServer::start_with_config(&authorization()) else {
        return;
    };
    make_bucket(&server);
    let (one, t1) = server.node_as(1, "node1", "p1");
    let (two, t2) = server.node_as(2, "node2", "p2");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let recorder = two.spawn(Recorder(seen.clone())).unwrap().pid();
    let on_one = one.spawn(Server { held: Vec::new() }).unwrap().pid();
    let on_two = two.spawn(Server { held: Vec::new() }).unwrap().pid();
    // A relation each way: each node monitors the other's process.
    let watched_by_two = two.context().monitor(on_one);
    let watched_by_one = one.context().monitor(on_two);
    let mut asked = one.ask(on_two, Ping(1)).unwrap();
    assert!(asked.wait_timeout(WAIT).is_ok(), "node 1 asks node 2");
    let mut asked = two.ask(on_one, Ping(1)).unwrap();
    assert!(asked.wait_timeout(WAIT).is_ok(), "node 2 asks node 1");
    // Node 1 streams to node 2's recorder before and after the forgeries.
    let mut n = 0;
    let mut stream = |count: u64| {
        for _ in 0..count {
            n += 1;
            one.send(recorder, Seq { from: 1, n })
                .expect("node 2 is up");
        }
        n
    };
    let sent = stream(100);
    wait_until("node 1's first messages", WAIT, || {
        seen.lock().unwrap().len() as u64 == sent
    });

    // What node 1's heartbeats tell node 3: node 1's run.
    let intruder = ("node3", "p3");
    let beat = overhear(&server, intruder, "sched.nodes.1");
    let run_of_1 = u64::from_be_bytes(beat[5..13].try_into().unwrap());
    assert_eq!(&beat[1..5], &1u32.to_be_bytes(), "node 1's heartbeat");

    let config = NatsConfig::new(server.url());
    let jump = 1_000_000;
    // A frame of node 1's run, far ahead of its stream, on node 1's
    // subject: refused by the server, to node 3 and to a guest.
    let as_node_1 = stamped(
        Package::new(Pid::new(1, 1), recorder, Seq { from: 1, n: jump }),
        run_of_1,
        jump,
    );
    let up_for_1 = announcement(1, 1, 0xF0E1);
    for (who, credentials) in [("node 3", intruder), ("a guest", ("guest", "g"))] {
        let errors =
            server.publish_raw_as(Some(credentials), &config.frame_subject(2, 1), &as_node_1);
        assert!(
            errors.iter().any(|e| e.contains("Permissions Violation")),
            "{who}: {errors:?}"
        );
        let errors = server.publish_raw_as(Some(credentials), "sched.nodes.1", &up_for_1);
        assert!(
            errors.iter().any(|e| e.contains("Permissions Violation")),
            "{who}: {errors:?}"
        );
    }
    // The same on node 3's subjects, which it may publish on: a frame of
    // node 1's run numbered far ahead (with node 3's PID and with node
    // 1's), and an `up` for a new run of node 1 (and for its current run).
    let as_node_3 = config.frame_subject(2, 3);
    for source in [Pid::new(3, 1), Pid::new(1, 1)] {
        let frame = stamped(
            Package::new(source, recorder, Seq { from: 1, n: jump }),
            run_of_1,
            jump,
        );
        let errors = server.publish_raw_as(Some(intruder), &as_node_3, &frame);
        assert!(errors.is_empty(), "{errors:?}");
    }
    for run in [0xF0E1, run_of_1] {
        let errors =
            server.publish_raw_as(Some(intruder), "sched.nodes.3", &announcement(1, 1, run));
        assert!(errors.is_empty(), "{errors:?}");
    }
    wait_until("four forgeries counted", WAIT, || t2.stats().forged >= 4);

    // Nothing took effect: node 1's stream goes on, whole and in order;
    // the relations both ways stand; nothing was lost, stale or reset.
    let sent = stream(100);
    wait_until("node 1's later messages", WAIT, || {
        seen.lock().unwrap().len() as u64 == sent
    });
    let expected: Vec<Seq> = (1..=sent).map(|n| Seq { from: 1, n }).collect();
    assert_eq!(*seen.lock().unwrap(), expected);
    let mut asked = two.ask(on_one, Ping(2)).unwrap();
    assert!(asked.wait_timeout(WAIT).is_ok(), "node 1 still answers");
    assert!(
        watched_by_two.try_take().is_none(),
        "node 2's monitor stands"
    );
    assert!(
        watched_by_one.try_take().is_none(),
        "node 1's monitor stands"
    );
    let (s1, s2) = (t1.stats(), t2.stats());
    assert_eq!(s2.forged, 4, "{s2:?}");
    assert_eq!(
        (s2.lost, s2.stale, s2.resets, s2.nodes_down, s2.fenced),
        (0, 0, 0, 0, 0),
        "{s2:?}"
    );
    assert_eq!((s1.resets, s1.nodes_down), (0, 0), "{s1:?}");
    one.shutdown(Duration::from_millis(200));
    two.shutdown(Duration::from_millis(200));
}
