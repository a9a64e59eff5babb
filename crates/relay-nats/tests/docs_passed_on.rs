//! Tries to break what the CHANGELOG ("A message passed on to another
//! node is confirmed once that node confirms it") and
//! docs/guide/distributed.md ("A message for a node that crashed", "What a
//! lost node takes with it") promise about a message a node passes on to
//! another node keeping its receipt, written from the documentation only:
//!
//! - a node confirms to a sender, in its heartbeats, only what its
//!   processes took. A step that passes a message on keeping its receipt
//!   (`Package::take_receipt`, then `with_receipt` on the package it
//!   forwards) has not taken it: the first node's frame stays unconfirmed
//!   until the next node confirms the forwarded frame;
//! - if the node in the middle dies first, the first sender counts the
//!   message in `TransportStats::unconfirmed`; if the last node takes it
//!   and confirms, the first sender does not count it;
//! - the middle transport holds the receipt until the next node confirms
//!   the frame, *or until it counts it `unconfirmed` itself* (the next
//!   node declared down): then the first sender sees it confirmed;
//! - a step that takes the payload out and sends a new message (no
//!   receipt kept) has taken it: confirmed at once.
//!
//! "After the confirmations went out" is told apart without timing: the
//! test listens on the subjects the nodes beat on (`<prefix>.nodes.<n>`)
//! with raw clients of its own, and acts only once several beats of the
//! confirming node went out after what they confirm.

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use relay_nats::{NatsTransport, TransportStats};
use sched::prelude::*;
use support::*;

const WAIT: Duration = Duration::from_secs(60);
const BEAT: Duration = Duration::from_millis(100);
/// Node 1's failure detector: down after 2 s of silence, long enough for
/// a live node's 100 ms heartbeats on a loaded machine.
const NODE_1_DOWN_AFTER: Duration = Duration::from_secs(2);
/// Beats to see from a node after what they must confirm.
const BEATS_AFTER: u64 = 5;

/// Counts the messages published on one subject, seen by a raw NATS
/// protocol connection of the test's own.
struct Listener {
    seen: Arc<AtomicU64>,
}

impl Listener {
    fn start(server: &NatsServer, subject: &str) -> Listener {
        let stream = TcpStream::connect(("127.0.0.1", server.port)).expect("connect");
        let mut writer = stream.try_clone().expect("clone");
        writer
            .write_all(
                format!(
                    "CONNECT {{\"verbose\":false,\"pedantic\":false,\"headers\":true}}\r\n\
                     SUB {subject} 1\r\nPING\r\n"
                )
                .as_bytes(),
            )
            .unwrap();
        let seen = Arc::new(AtomicU64::new(0));
        let ready = Arc::new(AtomicBool::new(false));
        let (count, subscribed) = (Arc::clone(&seen), Arc::clone(&ready));
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stream);
            let mut line = String::new();
            loop {
                line.clear();
                match reader.read_line(&mut line) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
                let words: Vec<&str> = line.split_whitespace().collect();
                match words.first().copied() {
                    Some("MSG") | Some("HMSG") => {
                        let bytes: usize = words.last().and_then(|n| n.parse().ok()).unwrap();
                        let mut body = vec![0u8; bytes + 2];
                        if reader.read_exact(&mut body).is_err() {
                            return;
                        }
                        count.fetch_add(1, Ordering::SeqCst);
                    }
                    Some("PING") => {
                        let _ = writer.write_all(b"PONG\r\n");
                    }
                    Some("PONG") => subscribed.store(true, Ordering::SeqCst),
                    _ => {}
                }
            }
        });
        wait_until("the listener to subscribe", WAIT, || {
            ready.load(Ordering::SeqCst)
        });
        Listener { seen }
    }

    fn seen(&self) -> u64 {
        self.seen.load(Ordering::SeqCst)
    }

    /// Waits until `n` more messages were published on the subject.
    fn wait_for_more(&self, what: &str, n: u64) {
        let from = self.seen();
        wait_until(what, WAIT, || self.seen() >= from + n);
    }
}

/// A listener on node `n`'s heartbeats, once it has beaten twice.
fn beats_of(server: &NatsServer, n: u32) -> Listener {
    let beats = Listener::start(server, &format!("sched.nodes.{n}"));
    wait_until("the node to beat", WAIT, || beats.seen() >= 2);
    beats
}

/// Takes nothing: what reaches it stays in its mailbox, unread.
struct Hoarder;

impl sched::Process for Hoarder {
    type Done = ();
    fn step(&mut self, _: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
        Ok(())
    }
}

/// Passes every `Seq` on to the process its sender number routes it to
/// (`routes`: `(from, to)`), keeping the receipt it came with (`keep`), or
/// taking the payload out and sending it anew (`!keep`). A refused pass
/// is counted in `refused` and its package dropped.
struct Passer {
    routes: Vec<(u64, Pid)>,
    keep: bool,
    refused: Arc<AtomicU64>,
}

impl Passer {
    fn keeping(to: Pid) -> Passer {
        Passer {
            routes: vec![(u64::MAX, to)],
            keep: true,
            refused: Arc::new(AtomicU64::new(0)),
        }
    }

    fn route(&self, from: u64) -> Pid {
        self.routes
            .iter()
            .find(|(f, _)| *f == from || *f == u64::MAX)
            .map(|(_, to)| *to)
            .expect("a route for every sender")
    }
}

impl sched::Process for Passer {
    type Done = ();
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            if let Event::Message(mut package) = event {
                let from = package.payload::<Seq>().ok_or("not a seq")?.from;
                let to = self.route(from);
                let passed = if self.keep {
                    let receipt = package.take_receipt();
                    let (_, _, payload) = package.into_parts();
                    let mut onward = sched::Package::from_payload(out.pid(), to, payload);
                    if let Some(receipt) = receipt {
                        onward = onward.with_receipt(receipt);
                    }
                    out.forward(onward)
                } else {
                    let seq = package.downcast::<Seq>().map_err(|_| "not a seq")?;
                    out.send(to, seq)
                };
                if passed.is_err() {
                    self.refused.fetch_add(1, Ordering::SeqCst);
                }
            }
        }
        Ok(())
    }
}

fn shutdown(nodes: impl IntoIterator<Item = Scheduler>) {
    for node in nodes {
        node.shutdown(Duration::from_millis(200));
    }
}

/// Kills the node behind `proxy` and returns `t1`'s counters once it has
/// declared one more node down than `before`.
fn kill_and_count(proxy: &FaultyProxy, t1: &NatsTransport, what: &str) -> TransportStats {
    let before = t1.stats().nodes_down;
    proxy.kill();
    wait_until(what, WAIT, || t1.stats().nodes_down > before);
    t1.stats()
}

/// All three alive: node 2 passes `PASSED` messages on to node 3 keeping
/// their receipts, node 3 reads them all and confirms them; node 2 also
/// holds `HELD` other messages of node 1 unread. Once node 3's beats
/// confirmed the reads and node 2's beats went out after that, node 2
/// dies: node 1 counts exactly the `HELD` messages node 2 held unread,
/// none of those passed on and read by node 3.
#[test]
fn messages_passed_on_and_read_by_the_last_node_are_not_counted_when_the_middle_dies() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let proxy2 = FaultyProxy::start(server.port);
    let (one, t1) = node_detecting(&server.url(), 1, BEAT, NODE_1_DOWN_AFTER);
    let (two, t2) = node_detecting(&proxy2.url(), 2, BEAT, DOWN_AFTER);
    let (three, t3) = node_detecting(&server.url(), 3, BEAT, DOWN_AFTER);
    let (beats2, beats3) = (beats_of(&server, 2), beats_of(&server, 3));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let recorder = three.spawn(Recorder(seen.clone())).unwrap().pid();
    let passer = Passer::keeping(recorder);
    let refused = passer.refused.clone();
    let passer = two.spawn(passer).unwrap().pid();
    let hoarder = two.spawn(Hoarder).unwrap().pid();
    const PASSED: u64 = 150;
    const HELD: u64 = 40;
    for n in 1..=PASSED {
        one.send(passer, Seq { from: 1, n }).unwrap();
        if n <= HELD {
            one.send(hoarder, Seq { from: 2, n }).unwrap();
        }
    }
    wait_until("node 3 to read everything node 2 passed on", WAIT, || {
        seen.lock().unwrap().len() as u64 == PASSED
            && t2.stats().delivered == PASSED + HELD
            && t3.stats().delivered == PASSED
    });
    beats3.wait_for_more("node 3's beats after its reads", BEATS_AFTER);
    beats2.wait_for_more("node 2's beats after node 3's", BEATS_AFTER);
    let s1 = kill_and_count(&proxy2, &t1, "node 1 to declare node 2 down");
    eprintln!(
        "passed on and read: {PASSED}, held unread on node 2: {HELD}; node 1 counted {} \
         unconfirmed",
        s1.unconfirmed
    );
    assert_eq!(refused.load(Ordering::SeqCst), 0, "no pass was refused");
    assert_eq!(s1.published, PASSED + HELD, "{s1:?}");
    assert_eq!(s1.nodes_down, 1, "node 2 alone was declared down: {s1:?}");
    assert!(
        s1.unconfirmed >= HELD,
        "{} messages node 2 held unread died uncounted: {s1:?}",
        HELD.saturating_sub(s1.unconfirmed)
    );
    assert_eq!(
        s1.unconfirmed, HELD,
        "messages passed on and read by node 3 (confirmed to node 2) were counted unconfirmed \
         by node 1: {s1:?}"
    );
    assert_eq!(
        seen.lock().unwrap().as_slice(),
        (1..=PASSED)
            .map(|n| Seq { from: 1, n })
            .collect::<Vec<_>>()
            .as_slice(),
        "node 3 read every passed message once, in order"
    );
    shutdown([one, two, three]);
}

/// Node 3 is alive and receives everything node 2 passes on, but its
/// process never reads it: node 3 confirms none of it to node 2, so node 2
/// confirms none of it to node 1 (node 2's step did not take it either).
/// Node 2 then dies, after many beats: node 1 counts every message passed
/// on to the hoarder, though each reached node 3, and none of the `WARM`
/// messages node 2 passed on to a reader there.
#[test]
fn messages_passed_on_to_a_live_node_that_never_reads_them_are_counted_when_the_middle_dies() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let proxy2 = FaultyProxy::start(server.port);
    let (one, t1) = node_detecting(&server.url(), 1, BEAT, NODE_1_DOWN_AFTER);
    let (two, t2) = node_detecting(&proxy2.url(), 2, BEAT, DOWN_AFTER);
    let (three, t3) = node_detecting(&server.url(), 3, BEAT, DOWN_AFTER);
    let (beats2, beats3) = (beats_of(&server, 2), beats_of(&server, 3));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let recorder = three.spawn(Recorder(seen.clone())).unwrap().pid();
    let hoarder = three.spawn(Hoarder).unwrap().pid();
    let refused = Arc::new(AtomicU64::new(0));
    // Sender 1's messages to the reader, sender 2's to the hoarder.
    let passer = Passer {
        routes: vec![(1, recorder), (2, hoarder)],
        keep: true,
        refused: refused.clone(),
    };
    let passer = two.spawn(passer).unwrap().pid();
    const WARM: u64 = 30;
    const PASSED: u64 = 120;
    for n in 1..=PASSED {
        if n <= WARM {
            one.send(passer, Seq { from: 1, n }).unwrap();
        }
        one.send(passer, Seq { from: 2, n }).unwrap();
    }
    wait_until(
        "node 3 to receive everything, and read the reader's",
        WAIT,
        || {
            seen.lock().unwrap().len() as u64 == WARM
                && t2.stats().delivered == WARM + PASSED
                && t3.stats().delivered == WARM + PASSED
        },
    );
    beats3.wait_for_more("node 3's beats after its reads", BEATS_AFTER);
    beats2.wait_for_more("node 2's beats after node 3's", BEATS_AFTER);
    let s1 = kill_and_count(&proxy2, &t1, "node 1 to declare node 2 down");
    eprintln!(
        "{PASSED} passed on and held unread on node 3, {WARM} passed on and read: node 1 \
         counted {} unconfirmed",
        s1.unconfirmed
    );
    assert_eq!(refused.load(Ordering::SeqCst), 0, "no pass was refused");
    assert_eq!(s1.published, WARM + PASSED, "{s1:?}");
    assert_eq!(s1.nodes_down, 1, "node 2 alone was declared down: {s1:?}");
    assert!(
        s1.unconfirmed >= PASSED,
        "{} messages passed on to a node that never read them died with the middle node \
         uncounted: {s1:?}",
        PASSED.saturating_sub(s1.unconfirmed)
    );
    assert_eq!(
        s1.unconfirmed, PASSED,
        "messages passed on and read on node 3 were counted: {s1:?}"
    );
    shutdown([one, two, three]);
}

/// Node 3 dies (cut off for good) while node 2 passes messages on to it;
/// node 2, which lives, declares it down and counts what it passed on
/// and node 3 never confirmed in its own `unconfirmed`. Node 1 then sees
/// those messages as confirmed: when node 2 dies later (after many
/// beats), node 1 counts none of them.
#[test]
fn messages_the_middle_node_counts_itself_are_confirmed_to_the_first_sender() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let (proxy2, proxy3) = (
        FaultyProxy::start(server.port),
        FaultyProxy::start(server.port),
    );
    let (one, t1) = node_detecting(&server.url(), 1, BEAT, NODE_1_DOWN_AFTER);
    // Node 2 declares node 3 down after 4 s: long enough to have passed
    // every message on to it first.
    let (two, t2) = node_detecting(&proxy2.url(), 2, BEAT, DOWN_AFTER);
    let (three, _t3) = node_detecting(&proxy3.url(), 3, BEAT, DOWN_AFTER);
    let (beats2, beats3) = (beats_of(&server, 2), beats_of(&server, 3));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let recorder = three.spawn(Recorder(seen.clone())).unwrap().pid();
    let passer = Passer::keeping(recorder);
    let refused = passer.refused.clone();
    let passer = two.spawn(passer).unwrap().pid();
    const WARM: u64 = 20;
    const PASSED: u64 = 100;
    for n in 1..=WARM {
        one.send(passer, Seq { from: 1, n }).unwrap();
    }
    wait_until("node 3 to read what node 2 passed on", WAIT, || {
        seen.lock().unwrap().len() as u64 == WARM
    });
    beats3.wait_for_more("node 3's beats after its reads", BEATS_AFTER);
    proxy3.kill();
    for n in WARM + 1..=WARM + PASSED {
        one.send(passer, Seq { from: 1, n }).unwrap();
    }
    wait_until("node 2 to pass every message on", WAIT, || {
        t2.stats().published == WARM + PASSED
    });
    let s2_before = t2.stats();
    assert_eq!(
        s2_before.nodes_down, 0,
        "node 2 passed everything on before it declared node 3 down: {s2_before:?}"
    );
    wait_until("node 2 to declare node 3 down", WAIT, || {
        t2.stats().nodes_down >= 1
    });
    let s2 = t2.stats();
    eprintln!(
        "node 3 died with {PASSED} passed on unread: node 2 counted {} unconfirmed",
        s2.unconfirmed
    );
    assert_eq!(refused.load(Ordering::SeqCst), 0, "no pass was refused");
    assert_eq!(
        seen.lock().unwrap().len() as u64,
        WARM,
        "node 3 was cut off"
    );
    assert!(
        s2.unconfirmed >= PASSED,
        "{} messages node 2 passed on to a dead node went uncounted by node 2: {s2:?}",
        PASSED.saturating_sub(s2.unconfirmed)
    );
    assert!(
        s2.unconfirmed <= WARM + PASSED,
        "node 2 counted more than it published: {s2:?}"
    );
    // Node 1 declared node 3 down too (it heard it), with nothing sent.
    wait_until("node 1 to declare node 3 down", WAIT, || {
        t1.stats().nodes_down >= 1
    });
    assert_eq!(t1.stats().unconfirmed, 0, "node 1 sent node 3 nothing");
    // Node 2's beats after its own count confirm the messages to node 1.
    beats2.wait_for_more("node 2's beats after it counted", BEATS_AFTER);
    let s1 = kill_and_count(&proxy2, &t1, "node 1 to declare node 2 down");
    eprintln!(
        "then node 2 died: node 1 counted {} unconfirmed",
        s1.unconfirmed
    );
    assert_eq!(s1.published, WARM + PASSED, "{s1:?}");
    assert_eq!(
        s1.unconfirmed, 0,
        "messages node 2 counted itself were counted again by node 1: {s1:?} (node 2: {s2:?})"
    );
    shutdown([one, two, three]);
}

/// The documented difference: node 2 passes sender 1's messages on
/// keeping their receipts, and sender 2's by taking the payload out and
/// sending it anew (no receipt). Node 3 receives both and reads neither.
/// After many beats node 2 dies: node 1 counts exactly the messages whose
/// receipts were kept; those sent anew were taken on node 2 and confirmed
/// at once.
#[test]
fn a_message_sent_anew_is_confirmed_at_once_unlike_one_passed_on_with_its_receipt() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let proxy2 = FaultyProxy::start(server.port);
    let (one, t1) = node_detecting(&server.url(), 1, BEAT, NODE_1_DOWN_AFTER);
    let (two, t2) = node_detecting(&proxy2.url(), 2, BEAT, DOWN_AFTER);
    let (three, t3) = node_detecting(&server.url(), 3, BEAT, DOWN_AFTER);
    let beats2 = beats_of(&server, 2);
    let hoarder = three.spawn(Hoarder).unwrap().pid();
    let refused = Arc::new(AtomicU64::new(0));
    let keeper = two
        .spawn(Passer {
            routes: vec![(u64::MAX, hoarder)],
            keep: true,
            refused: refused.clone(),
        })
        .unwrap()
        .pid();
    let copier = two
        .spawn(Passer {
            routes: vec![(u64::MAX, hoarder)],
            keep: false,
            refused: refused.clone(),
        })
        .unwrap()
        .pid();
    const KEPT: u64 = 60;
    const ANEW: u64 = 140;
    for n in 1..=ANEW {
        if n <= KEPT {
            one.send(keeper, Seq { from: 1, n }).unwrap();
        }
        one.send(copier, Seq { from: 2, n }).unwrap();
    }
    wait_until(
        "node 3 to receive everything node 2 passed on",
        WAIT,
        || t2.stats().delivered == KEPT + ANEW && t3.stats().delivered == KEPT + ANEW,
    );
    beats2.wait_for_more("node 2's beats after its steps", BEATS_AFTER);
    let s1 = kill_and_count(&proxy2, &t1, "node 1 to declare node 2 down");
    eprintln!(
        "{KEPT} passed on with receipts, {ANEW} sent anew, all unread on node 3: node 1 \
         counted {} unconfirmed",
        s1.unconfirmed
    );
    assert_eq!(refused.load(Ordering::SeqCst), 0, "no pass was refused");
    assert_eq!(s1.published, KEPT + ANEW, "{s1:?}");
    assert_eq!(s1.nodes_down, 1, "node 2 alone was declared down: {s1:?}");
    assert!(
        s1.unconfirmed >= KEPT,
        "{} messages passed on with their receipts died uncounted: {s1:?}",
        KEPT.saturating_sub(s1.unconfirmed)
    );
    assert_eq!(
        s1.unconfirmed, KEPT,
        "messages node 2 took and sent anew were not confirmed at once: {s1:?}"
    );
    shutdown([one, two, three]);
}

/// Two hops: node 2 passes on to node 3, which passes on to node 4, both
/// keeping the receipts. Node 4 reads sender 1's messages and hoards
/// sender 2's. Node 3's step took neither, so it confirms to node 2 only
/// what node 4 confirmed to it, and node 2 to node 1 only what node 3
/// confirmed. After many beats of nodes 4, 3 and 2, node 2 dies: node 1
/// counts exactly sender 2's messages (held unread two nodes on).
#[test]
fn a_receipt_kept_over_two_hops_is_confirmed_only_by_the_last_node() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let proxy2 = FaultyProxy::start(server.port);
    let (one, t1) = node_detecting(&server.url(), 1, BEAT, NODE_1_DOWN_AFTER);
    let (two, t2) = node_detecting(&proxy2.url(), 2, BEAT, DOWN_AFTER);
    let (three, t3) = node_detecting(&server.url(), 3, BEAT, DOWN_AFTER);
    let (four, t4) = node_detecting(&server.url(), 4, BEAT, DOWN_AFTER);
    let (beats2, beats3, beats4) = (
        beats_of(&server, 2),
        beats_of(&server, 3),
        beats_of(&server, 4),
    );
    let seen = Arc::new(Mutex::new(Vec::new()));
    let recorder = four.spawn(Recorder(seen.clone())).unwrap().pid();
    let hoarder = four.spawn(Hoarder).unwrap().pid();
    let refused = Arc::new(AtomicU64::new(0));
    let second = three
        .spawn(Passer {
            routes: vec![(1, recorder), (2, hoarder)],
            keep: true,
            refused: refused.clone(),
        })
        .unwrap()
        .pid();
    let first = two
        .spawn(Passer {
            routes: vec![(u64::MAX, second)],
            keep: true,
            refused: refused.clone(),
        })
        .unwrap()
        .pid();
    const READ: u64 = 80;
    const UNREAD: u64 = 50;
    for n in 1..=READ.max(UNREAD) {
        if n <= READ {
            one.send(first, Seq { from: 1, n }).unwrap();
        }
        if n <= UNREAD {
            one.send(first, Seq { from: 2, n }).unwrap();
        }
    }
    wait_until(
        "node 4 to receive everything, and read sender 1's",
        WAIT,
        || {
            seen.lock().unwrap().len() as u64 == READ
                && t2.stats().delivered == READ + UNREAD
                && t3.stats().delivered == READ + UNREAD
                && t4.stats().delivered == READ + UNREAD
        },
    );
    beats4.wait_for_more("node 4's beats after its reads", BEATS_AFTER);
    beats3.wait_for_more("node 3's beats after node 4's", BEATS_AFTER);
    beats2.wait_for_more("node 2's beats after node 3's", BEATS_AFTER);
    let s1 = kill_and_count(&proxy2, &t1, "node 1 to declare node 2 down");
    eprintln!(
        "two hops: {READ} read on node 4, {UNREAD} unread there: node 1 counted {} unconfirmed",
        s1.unconfirmed
    );
    assert_eq!(refused.load(Ordering::SeqCst), 0, "no pass was refused");
    assert_eq!(s1.published, READ + UNREAD, "{s1:?}");
    assert_eq!(s1.nodes_down, 1, "node 2 alone was declared down: {s1:?}");
    assert!(
        s1.unconfirmed >= UNREAD,
        "{} messages held unread two hops on died with the first hop uncounted: {s1:?}",
        UNREAD.saturating_sub(s1.unconfirmed)
    );
    assert_eq!(
        s1.unconfirmed, UNREAD,
        "messages read two hops on were counted: {s1:?}"
    );
    shutdown([one, two, three, four]);
}
