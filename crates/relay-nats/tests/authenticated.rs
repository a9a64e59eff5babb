//! Only a node's own credentials can speak for it. A real `nats-server`
//! gives each node a user limited to the subjects of
//! `NatsConfig::permissions`; an intruder holding node 3's credentials (a
//! node of the cluster, but not node 1) and a guest with none try the
//! forgeries: a terminate, a link exit and a message claiming node 1's
//! PIDs, a goodbye for node 1, publishing on node 1's subjects, a frame
//! sent twice. None takes effect; each is refused by the server or
//! counted by the receiving node.

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use relay_nats::NatsConfig;
use sched::prelude::*;
use sched::remote::Signal;
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
    users.push(
        "{ user: guest, password: g, permissions: { publish: { deny: [\">\"] }, subscribe: { deny: [\">\"] } } }"
            .to_string(),
    );
    format!("authorization {{ users: [ {} ] }}\n", users.join(",\n"))
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
    let (one, _t1) = server.node_as(1, "node1", "p1");
    let (two, t2) = server.node_as(2, "node2", "p2");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let recorder = two.spawn(Recorder(seen.clone())).unwrap().pid();
    let mut target = two.spawn(Server { held: Vec::new() }).unwrap();
    // Node 1 reaches node 2: the permissions let the cluster work.
    let mut asked = one.ask(target.pid(), Ping(1)).unwrap();
    assert!(asked.wait_timeout(WAIT).is_ok(), "node 1 asks node 2");
    one.post(recorder, Seq { from: 1, n: 1 }).unwrap();
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
    two.post(back.pid(), Seq { from: 2, n: 1 })
        .expect("node 1 did not leave");
    assert_eq!(t2.stats().forged, 4, "{:?}", t2.stats());
    one.shutdown(Duration::from_millis(200));
    two.shutdown(Duration::from_millis(200));
}
