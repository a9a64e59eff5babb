//! `JetStreamStore`, sched-durable's store for clusters, on a real
//! `nats-server` (JetStream, `sync_interval: always`): it passes the
//! store suite; a node whose lease lapsed is fenced off its journals by
//! the node that takes them over; and durable processes survive their
//! node being killed, again and again, resumed by the other node with the
//! outcome of an uninterrupted run and never two incarnations at once.

mod support;

#[path = "journal/failover.rs"]
mod failover;
#[path = "journal/live.rs"]
mod live;

use std::time::{Duration, Instant};

use sched_durable::store::{conformance, Append, Created, Outgoing, Store};
use sched_durable_jetstream::JetStreamStore;
use support::NatsServer;

/// The server syncs every message before acknowledging it.
pub(crate) const SYNC_ALWAYS: &str = "jetstream { sync_interval: always }\n";

pub(crate) fn server() -> Option<NatsServer> {
    NatsServer::start_with_config(SYNC_ALWAYS)
}

fn open(server: &NatsServer, node: u32, lease: Duration) -> JetStreamStore {
    JetStreamStore::builder(server.url(), node)
        .prefix("test")
        .lease(lease)
        .open()
        .expect("the store opens")
}

fn record(key: &str, seq: u64, bytes: &[u8]) -> Append {
    Append {
        key: key.to_owned(),
        seq,
        record: bytes.to_vec(),
        created: (seq == 0).then(|| Created {
            kind: "kind".to_owned(),
            args: vec![],
        }),
        ended: false,
        sent: vec![],
        taken: vec![],
        snapshot: None,
    }
}

fn records(store: &JetStreamStore, key: &str) -> Vec<Vec<u8>> {
    store.journal(key).unwrap().expect("a journal").records
}

/// Not a test of its own: a node of the failover test when the binary
/// runs as a child; passes at once otherwise.
#[test]
fn failover_node_in_a_child_process() {
    failover::child_if_asked();
}

#[test]
fn the_jetstream_store_passes_the_store_suite() {
    let Some(server) = server() else {
        return;
    };
    let started = Instant::now();
    let url = server.url();
    conformance::check(open(&server, 1, Duration::from_secs(5)), || {
        JetStreamStore::builder(url.clone(), 1)
            .prefix("test")
            .lease(Duration::from_secs(5))
            .open()
            .unwrap()
    });
    eprintln!("the store suite took {:?}", started.elapsed());
}

#[test]
fn a_node_whose_lease_lapsed_is_fenced_off_by_the_node_that_took_over() {
    let Some(server) = server() else {
        return;
    };
    let lease = Duration::from_millis(1500);
    let a = open(&server, 1, lease);
    let b = open(&server, 2, lease);
    a.append(&[record("p", 0, b"p0")]).unwrap();
    a.append(&[record("p", 1, b"p1")]).unwrap();

    // While A renews, B takes nothing over, however often it looks.
    for _ in 0..5 {
        assert!(b.running().unwrap().is_empty(), "A's lease is alive");
        std::thread::sleep(lease / 2);
    }
    assert_eq!(a.running().unwrap().len(), 1, "A still owns p");

    // A stops renewing (as if hung): within a lease, B takes p over.
    a.stop_renewing();
    let stopped = Instant::now();
    let journal = loop {
        let mut running = b.running().unwrap();
        if let Some(journal) = running.pop() {
            break journal;
        }
        assert!(
            stopped.elapsed() < lease * 3,
            "B never took p over after A's lease lapsed"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let took = stopped.elapsed();
    eprintln!("B took p over {took:?} after A stopped renewing (lease {lease:?})");
    assert!(took >= lease / 2, "taken over before the lease could lapse");
    assert_eq!(journal.key, "p");
    assert_eq!(journal.records, vec![b"p0".to_vec(), b"p1".to_vec()]);

    // A's next append is fenced and writes nothing.
    let before = b.history("p").unwrap();
    assert_eq!(before.last().unwrap().writer, b.writer(), "the takeover");
    assert_eq!(
        a.append(&[record("p", 2, b"from A")]),
        Ok(vec!["p".to_owned()])
    );
    assert_eq!(b.history("p").unwrap(), before, "A wrote nothing");
    assert_eq!(records(&b, "p").len(), 2);
    assert!(a.running().unwrap().is_empty(), "p is B's now");

    // B continues the journal; A stays fenced, also in a batch with a
    // journal of its own (which is written: a batch is not atomic across
    // processes, see the module's documentation).
    b.append(&[record("p", 2, b"from B")]).unwrap();
    assert_eq!(
        a.append(&[record("q", 0, b"q0"), record("p", 3, b"from A")]),
        Ok(vec!["p".to_owned()]),
        "q is written, p is fenced"
    );
    assert_eq!(records(&a, "q"), vec![b"q0".to_vec()]);
    assert_eq!(
        records(&b, "p"),
        vec![b"p0".to_vec(), b"p1".to_vec(), b"from B".to_vec()]
    );
    let history = b.history("p").unwrap();
    let writers: Vec<_> = history.iter().map(|w| w.writer.node).collect();
    assert_eq!(writers, [1, 1, 2, 2], "A, A, B's takeover, B");
    b.append(&[record("p", 3, b"B again")]).unwrap();

    // Two nodes creating one journal at once: one of them is fenced.
    let both = [
        a.append(&[record("r", 0, b"A's r")]),
        b.append(&[record("r", 0, b"B's r")]),
    ];
    assert_eq!(both[0], Ok(vec![]));
    assert_eq!(both[1], Ok(vec!["r".to_owned()]));
    assert_eq!(records(&b, "r"), vec![b"A's r".to_vec()]);
}

#[test]
fn a_released_lease_hands_journals_over_at_once_and_sends_follow_their_receiver() {
    let Some(server) = server() else {
        return;
    };
    let lease = Duration::from_secs(30);
    let a = open(&server, 1, lease);
    let b = open(&server, 2, lease);
    // A runs the receiver "rx"; B runs "tx", which sends to it.
    a.append(&[record("rx", 0, b"rx0")]).unwrap();
    let mut tx = record("tx", 0, b"tx0");
    tx.sent = vec![Outgoing {
        from: "tx".into(),
        to: "rx".into(),
        seq: 1,
        body: b"hello".to_vec(),
    }];
    b.append(&[tx]).unwrap();
    assert_eq!(a.outbox().unwrap().len(), 1, "rx is A's: A delivers it");
    assert!(
        b.outbox().unwrap().is_empty(),
        "not B's to deliver or discard"
    );

    let released = Instant::now();
    a.release_lease().unwrap();
    let running = b.running().unwrap();
    assert!(
        released.elapsed() < lease / 10,
        "taken over at once, not after a lease"
    );
    let mut keys: Vec<_> = running.into_iter().map(|j| j.key).collect();
    keys.sort();
    assert_eq!(keys, ["rx", "tx"]);
    assert_eq!(b.outbox().unwrap().len(), 1, "rx is B's now");
    assert!(a.outbox().unwrap().is_empty());
    assert_eq!(
        a.append(&[record("rx", 1, b"late")]),
        Ok(vec!["rx".to_owned()])
    );

    // A node restarted under the same number takes over its
    // predecessor's journals at once too.
    drop(b);
    let b2 = open(&server, 2, lease);
    assert_eq!(b2.running().unwrap().len(), 2);
}
