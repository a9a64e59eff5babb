//! Tries to break what docs/guide/distributed.md ("A message for a node
//! that crashed", "What a lost node takes with it") and the CHANGELOG
//! ("Nodes confirm what their processes read, not what reached them")
//! promise about a node that dies with messages unread, written from the
//! documentation only:
//!
//! - every heartbeat confirms, for each sender, what the node's processes
//!   have *taken* of that sender's frames: the last frame it saw, less
//!   those still unread in its mailboxes. A message is taken when a step
//!   takes its payload out, or when it is dropped unread (a dead letter,
//!   which the node counts);
//! - when the failure detector declares the node down, the frames sent to
//!   it that it never confirmed are counted in the sender's
//!   `TransportStats::unconfirmed`: never received, received and never
//!   read, or read just before it went silent (after its last heartbeat).
//!
//! So the sender counts at least what the dead node held unread, never
//! more than it published to that node, and (once the dead node's
//! heartbeats went out after its reads and drops) exactly what it held
//! unread: neither what its processes read, nor its dead letters (a
//! process that ended with messages unread, a message for a process that
//! ended or never existed), nor what another node, still alive, holds
//! unread.
//!
//! "After its last heartbeat" is told apart from "before" without timing:
//! the test listens on the subject the dead node beats on
//! (`<prefix>.nodes.<n>`, docs/internals/relay-nats.md) with a raw client
//! of its own, and kills the node only once several of its beats went
//! out after the reads and drops.

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
/// Node 1's failure detector: down after 2 s of silence, long enough for
/// a live node's 100 ms heartbeats on a loaded machine, short enough for
/// the test.
const NODE_1_DOWN_AFTER: Duration = Duration::from_secs(2);
const BEAT: Duration = Duration::from_millis(100);
/// Beats of the doomed node to see after its reads and drops before it
/// is killed: each confirms what was taken when it went out.
const BEATS_AFTER: u64 = 5;

/// Counts the messages published on one subject, seen by a raw NATS
/// protocol connection of the test's own (no client library, no
/// runtime).
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
                    // MSG <subject> <sid> [reply-to] <bytes>
                    // HMSG <subject> <sid> [reply-to] <header bytes> <total bytes>
                    Some("MSG") | Some("HMSG") => {
                        let bytes: usize = words.last().and_then(|n| n.parse().ok()).unwrap();
                        let mut body = vec![0u8; bytes + 2];
                        if reader.read_exact(&mut body).is_err() {
                            return;
                        }
                        count.fetch_add(1, Ordering::SeqCst);
                    }
                    Some("PING") => {
                        // A failed write shows as a failed read next.
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
    fn wait_for_more(&self, n: u64) {
        let from = self.seen();
        wait_until("the doomed node's heartbeats", WAIT, || {
            self.seen() >= from + n
        });
    }
}

/// Node 1 (on the server, declaring a node down after
/// `NODE_1_DOWN_AFTER`), node 2 behind a proxy to kill it, and a listener
/// on node 2's heartbeats.
struct Cluster {
    server: NatsServer,
    proxy: FaultyProxy,
    one: Node,
    two: Node,
    beats: Listener,
}

fn cluster() -> Option<Cluster> {
    let server = NatsServer::start()?;
    let proxy = FaultyProxy::start(server.port);
    let one = node_detecting(&server.url(), 1, BEAT, NODE_1_DOWN_AFTER);
    let two = node_detecting(&proxy.url(), 2, BEAT, DOWN_AFTER);
    let beats = Listener::start(&server, "sched.nodes.2");
    wait_until("node 2 to beat", WAIT, || beats.seen() >= 2);
    Some(Cluster {
        server,
        proxy,
        one,
        two,
        beats,
    })
}

impl Cluster {
    fn t1(&self) -> &Arc<NatsTransport> {
        &self.one.1
    }
    fn t2(&self) -> &Arc<NatsTransport> {
        &self.two.1
    }

    /// Lets node 2's heartbeats confirm what its processes took, kills it
    /// for good (no goodbye), and returns node 1's counters once node 1
    /// declared it down.
    fn confirm_then_kill(&self) -> TransportStats {
        self.beats.wait_for_more(BEATS_AFTER);
        self.proxy.kill();
        wait_until("node 1 to declare node 2 down", WAIT, || {
            self.t1().stats().nodes_down >= 1
        });
        self.t1().stats()
    }

    fn shutdown(self) {
        self.one.0.shutdown(Duration::from_millis(200));
        self.two.0.shutdown(Duration::from_millis(200));
        drop(self.server);
    }
}

/// Checks node 1's counters against what the documentation says: at
/// least what node 2 held unread, at most what node 1 published to it,
/// and exactly what it held unread (its reads and drops were confirmed
/// by the beats the test waited for).
fn check(what: &str, s1: &TransportStats, published_to_two: u64, held_unread: u64) {
    eprintln!(
        "{what}: {published_to_two} published to node 2, {held_unread} held unread there: \
         node 1 counted {} unconfirmed",
        s1.unconfirmed
    );
    assert_eq!(
        s1.nodes_down, 1,
        "{what}: node 2 alone was declared down: {s1:?}"
    );
    assert!(
        s1.unconfirmed >= held_unread,
        "{what}: {} of the {held_unread} messages held unread died uncounted: {s1:?}",
        held_unread.saturating_sub(s1.unconfirmed)
    );
    assert!(
        s1.unconfirmed <= published_to_two,
        "{what}: counted more than the {published_to_two} published to node 2: {s1:?}"
    );
    assert_eq!(
        s1.unconfirmed, held_unread,
        "{what}: what node 2 read or dropped (and confirmed in the beats since) is not \
         unconfirmed; what it held unread is: {s1:?}"
    );
}

/// Never reads: what reaches it stays in its mailbox, unread. Finishes,
/// still reading nothing, in the first step after `stop` is set.
struct Hoarder {
    stop: Arc<AtomicBool>,
}

impl sched::Process for Hoarder {
    type Done = ();
    fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        if self.stop.load(Ordering::SeqCst) {
            out.finish(());
        }
        Ok(())
    }
}

fn hoarder(node: &Scheduler) -> (Completion<()>, Arc<AtomicBool>) {
    let stop = Arc::new(AtomicBool::new(false));
    let done = node
        .spawn(Hoarder {
            stop: Arc::clone(&stop),
        })
        .unwrap();
    (done, stop)
}

/// Reads (takes out) its first `keep_reading` messages, then reads no
/// more: the rest stay in its mailbox.
struct Partial {
    keep_reading: u64,
    read: Arc<AtomicU64>,
}

impl sched::Process for Partial {
    type Done = ();
    fn step(&mut self, events: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
        while self.read.load(Ordering::SeqCst) < self.keep_reading {
            match events.next() {
                Some(Event::Message(package)) => {
                    package.downcast::<Seq>().map_err(|_| "not a seq")?;
                    self.read.fetch_add(1, Ordering::SeqCst);
                }
                Some(_) => {}
                None => break,
            }
        }
        Ok(())
    }
}

/// Sends `counts[i]` numbered messages to `to[i]`, interleaved.
fn send_interleaved(one: &Scheduler, to: &[Pid], counts: &[u64]) -> u64 {
    let most = counts.iter().copied().max().unwrap_or(0);
    for n in 1..=most {
        for (i, (pid, count)) in to.iter().zip(counts).enumerate() {
            if n <= *count {
                one.send(*pid, Seq { from: i as u64, n }).unwrap();
            }
        }
    }
    counts.iter().sum()
}

#[test]
fn unread_messages_spread_over_several_processes_are_all_counted() {
    let Some(c) = cluster() else {
        return;
    };
    let (one, two) = (&c.one.0, &c.two.0);
    // A third node, alive throughout, also holds messages of node 1's
    // unread: not node 2's, never counted.
    let three = node_detecting(&c.server.url(), 3, BEAT, DOWN_AFTER);
    let (alive_hoarder, _) = hoarder(&three.0);
    let held: [u64; 4] = [40, 80, 120, 160];
    let hoarders: Vec<_> = held.iter().map(|_| hoarder(two)).collect();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let reader = two.spawn(Recorder(seen.clone())).unwrap().pid();
    const READ: u64 = 100;
    let mut to: Vec<Pid> = hoarders.iter().map(|(done, _)| done.pid()).collect();
    to.push(reader);
    let mut counts = held.to_vec();
    counts.push(READ);
    to.push(alive_hoarder.pid());
    counts.push(200);
    let published_to_two = send_interleaved(one, &to, &counts) - 200;
    wait_until(
        "node 2 to have every message, and to read its reader's",
        WAIT,
        || {
            c.t2().stats().delivered == published_to_two
                && seen.lock().unwrap().len() as u64 == READ
        },
    );
    wait_until("node 3 to have its messages", WAIT, || {
        three.1.stats().delivered == 200
    });
    let s1 = c.confirm_then_kill();
    assert_eq!(s1.published, published_to_two + 200, "{s1:?}");
    check(
        "unread in four processes, one reader, a live node holding its own",
        &s1,
        published_to_two,
        held.iter().sum(),
    );
    three.0.shutdown(Duration::from_millis(200));
    c.shutdown();
}

#[test]
fn a_process_that_read_some_and_left_the_rest_is_counted_for_the_rest() {
    let Some(c) = cluster() else {
        return;
    };
    let (one, two) = (&c.one.0, &c.two.0);
    // (sent, read of them)
    let plan: [(u64, u64); 3] = [(400, 150), (50, 1), (30, 30)];
    let readers: Vec<(Pid, Arc<AtomicU64>)> = plan
        .iter()
        .map(|&(_, keep_reading)| {
            let read = Arc::new(AtomicU64::new(0));
            let pid = two
                .spawn(Partial {
                    keep_reading,
                    read: Arc::clone(&read),
                })
                .unwrap()
                .pid();
            (pid, read)
        })
        .collect();
    let to: Vec<Pid> = readers.iter().map(|(pid, _)| *pid).collect();
    let counts: Vec<u64> = plan.iter().map(|(sent, _)| *sent).collect();
    let published_to_two = send_interleaved(one, &to, &counts);
    wait_until(
        "node 2 to have every message, and to read what it reads",
        WAIT,
        || {
            c.t2().stats().delivered == published_to_two
                && readers
                    .iter()
                    .zip(&plan)
                    .all(|((_, read), (_, keep))| read.load(Ordering::SeqCst) == *keep)
        },
    );
    let s1 = c.confirm_then_kill();
    assert_eq!(s1.published, published_to_two, "{s1:?}");
    let unread: u64 = plan.iter().map(|(sent, read)| sent - read).sum();
    check(
        "processes that read part of their mail",
        &s1,
        published_to_two,
        unread,
    );
    c.shutdown();
}

#[test]
fn messages_dropped_unread_by_processes_that_ended_are_taken_not_unconfirmed() {
    let Some(c) = cluster() else {
        return;
    };
    let (one, two) = (&c.one.0, &c.two.0);
    let (kept, _) = hoarder(two);
    let (terminated, _) = hoarder(two);
    let (finished, stop) = hoarder(two);
    let (kept_pid, terminated_pid, finished_pid) = (kept.pid(), terminated.pid(), finished.pid());
    const KEPT: u64 = 100;
    const TERMINATED: u64 = 150;
    const FINISHED: u64 = 150;
    let published_to_two = send_interleaved(
        one,
        &[kept_pid, terminated_pid, finished_pid],
        &[KEPT, TERMINATED, FINISHED],
    );
    wait_until("node 2 to have every message", WAIT, || {
        c.t2().stats().delivered == published_to_two
    });
    let dead_before = two.stats().dead_letters;
    // One ends from outside, the other finishes in a step that reads
    // nothing (stepped by a local message, itself left unread).
    two.terminate(terminated_pid).unwrap();
    stop.store(true, Ordering::SeqCst);
    two.send(finished_pid, Seq { from: 99, n: 1 }).unwrap();
    wait_until("both to end", WAIT, || {
        terminated.is_finished() && finished.is_finished()
    });
    // Their mail, and the local message that stepped the second.
    wait_until("their mail to be dead letters", WAIT, || {
        two.stats().dead_letters > dead_before + TERMINATED + FINISHED
    });
    let s1 = c.confirm_then_kill();
    assert_eq!(s1.published, published_to_two, "{s1:?}");
    check(
        "processes that ended with messages unread (dead letters there)",
        &s1,
        published_to_two,
        KEPT,
    );
    drop(kept);
    c.shutdown();
}

#[test]
fn messages_for_processes_that_ended_or_never_were_are_taken_not_unconfirmed() {
    let Some(c) = cluster() else {
        return;
    };
    let (one, two) = (&c.one.0, &c.two.0);
    let (kept, _) = hoarder(two);
    // Ended before anything was sent to it.
    let (ended, stop) = hoarder(two);
    stop.store(true, Ordering::SeqCst);
    two.send(ended.pid(), Seq { from: 99, n: 1 }).unwrap();
    let ended_pid = ended.pid();
    ended.wait().unwrap();
    let never = Pid::new(2, 987_654_321);
    const KEPT: u64 = 100;
    const TO_ENDED: u64 = 60;
    const TO_NEVER: u64 = 50;
    let published_to_two = send_interleaved(
        one,
        &[kept.pid(), ended_pid, never],
        &[KEPT, TO_ENDED, TO_NEVER],
    );
    wait_until(
        "node 2 to deliver or dead-letter every message",
        WAIT,
        || {
            let s2 = c.t2().stats();
            s2.delivered == KEPT && s2.dead_letters == TO_ENDED + TO_NEVER
        },
    );
    let s1 = c.confirm_then_kill();
    assert_eq!(s1.published, published_to_two, "{s1:?}");
    check(
        "messages for an ended and a never-existing process (dead letters there)",
        &s1,
        published_to_two,
        KEPT,
    );
    c.shutdown();
}

#[test]
fn an_urgent_message_held_unread_on_a_dead_node_is_counted() {
    // Across nodes an urgent message travels as itself
    // (docs/guide/scheduling.md): held unread, it is counted like any.
    let Some(c) = cluster() else {
        return;
    };
    let (one, two) = (&c.one.0, &c.two.0);
    let (kept, _) = hoarder(two);
    const URGENT: u64 = 40;
    const PLAIN: u64 = 60;
    for n in 1..=URGENT.max(PLAIN) {
        if n <= URGENT {
            one.send(kept.pid(), sched::message::Urgent::new(Seq { from: 1, n }))
                .unwrap();
        }
        if n <= PLAIN {
            one.send(kept.pid(), Seq { from: 2, n }).unwrap();
        }
    }
    wait_until("node 2 to have every message", WAIT, || {
        c.t2().stats().delivered == URGENT + PLAIN
    });
    let s1 = c.confirm_then_kill();
    assert_eq!(s1.published, URGENT + PLAIN, "{s1:?}");
    check(
        "urgent and plain messages held unread",
        &s1,
        URGENT + PLAIN,
        URGENT + PLAIN,
    );
    c.shutdown();
}
