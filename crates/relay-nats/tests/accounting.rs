//! Counted losses, exactly, over a real `nats-server`: a flood of 200 000
//! frames, each delivered, dead-lettered or counted lost on the receiver;
//! and a node's memory stays flat under a million frames from fresh
//! incarnations (a run of a node is remembered only until the next one).

mod support;

use std::io::Write;
use std::net::TcpStream;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use relay_nats::{NatsConfig, NatsTransport, TransportStats};
use sched::message::SendErrorKind;
use sched::prelude::*;
use sched::Package;
use support::*;

const WAIT: Duration = Duration::from_secs(60);

/// Counts the `Seq`s it receives, and those that are not above the last
/// one from their sender (none, when order is kept).
struct Counter {
    count: Arc<AtomicU64>,
    disorder: Arc<AtomicU64>,
    last: std::collections::HashMap<u64, u64>,
    /// The last number received from sender 1.
    high: Arc<AtomicU64>,
}

impl Counter {
    fn new() -> (Counter, Arc<AtomicU64>, Arc<AtomicU64>) {
        let (count, disorder) = (Arc::default(), Arc::default());
        let counter = Counter {
            count: Arc::clone(&count),
            disorder: Arc::clone(&disorder),
            last: Default::default(),
            high: Arc::default(),
        };
        (counter, count, disorder)
    }
}

impl sched::Process for Counter {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            if let Event::Message(package) = event {
                let seq = package.downcast::<Seq>().map_err(|_| "not a seq")?;
                let last = self.last.entry(seq.from).or_insert(0);
                if seq.n <= *last {
                    self.disorder.fetch_add(1, Relaxed);
                }
                *last = seq.n;
                if seq.from == 1 {
                    self.high.store(seq.n, Relaxed);
                }
                self.count.fetch_add(1, Relaxed);
            }
        }
        Ok(())
    }
}

/// Posts `seq` to `to` from outside, again while the transport's backlog
/// is full or the nodes reset their relations; how many times it was
/// refused.
fn post(node: &Scheduler, to: Pid, seq: Seq) -> u64 {
    let mut refused = 0;
    loop {
        match node.send(to, seq) {
            Ok(()) => return refused,
            Err(error) => {
                assert!(
                    matches!(
                        error.kind(),
                        SendErrorKind::Full | SendErrorKind::Unreachable
                    ),
                    "{error}"
                );
                refused += 1;
                std::thread::sleep(Duration::from_micros(200));
            }
        }
    }
}

/// What the receiver accounted for: every frame it was sent is one of
/// these, once.
fn accounted(s: &TransportStats) -> u64 {
    s.delivered + s.dead_letters + s.lost + s.fenced
}

/// Node 1 floods node 2 with 200 000 frames as fast as its backlog takes
/// them, one in ten to a process that never existed. Then it sends until
/// one more frame arrives, so that a frame lost at the end of the flood
/// shows as a gap too. What node 1 published is exactly what node 2
/// delivered, dead-lettered, or counted lost (or dropped while resetting,
/// counted fenced), and what it delivered reached the process in order.
#[test]
fn a_flood_of_200_000_frames_is_delivered_dead_lettered_or_counted_lost_exactly() {
    const FLOOD: u64 = 200_000;
    let Some(server) = NatsServer::start() else {
        return;
    };
    let started = Instant::now();
    let (one, t1) = node(&server, 1);
    let (two, t2) = node(&server, 2);
    let (counter, received, disorder) = Counter::new();
    let high = Arc::clone(&counter.high);
    let to = two.spawn(counter).unwrap().pid();
    let nobody = Pid::new(2, 1_000_000);
    // Node 1 hears of node 2 (its frames address node 2's run): probes,
    // as sender 0, until one arrives.
    let mut probes = 0;
    wait_until("node 2 to answer", WAIT, || {
        probes += 1;
        one.send(to, Seq { from: 0, n: probes }).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        received.load(Relaxed) > 0
    });
    let mut refused = 0;
    for n in 1..=FLOOD {
        let target = if n % 10 == 0 { nobody } else { to };
        refused += post(&one, target, Seq { from: 1, n });
    }
    // Then one more at a time until the last one sent arrives: a frame
    // lost at the end of the flood then shows as a gap before it.
    let mut n = FLOOD;
    wait_until("the last frame after the flood", WAIT, || {
        if high.load(Relaxed) == n {
            return true;
        }
        n += 1;
        refused += post(&one, to, Seq { from: 1, n });
        std::thread::sleep(Duration::from_millis(20));
        false
    });
    let sent = n + probes;
    wait_until("node 1 to count every publish", WAIT, || {
        let s = t1.stats();
        s.published + s.publish_failed == sent
    });
    wait_until("node 2 to account for every frame", WAIT, || {
        accounted(&t2.stats()) >= t1.stats().published
    });
    std::thread::sleep(Duration::from_millis(200));
    let (s1, s2) = (t1.stats(), t2.stats());
    assert_eq!(s1.publish_failed, 0, "{s1:?}");
    assert_eq!(s1.refused, refused, "{s1:?}");
    assert_eq!(
        accounted(&s2),
        s1.published,
        "published = delivered + dead letters + lost + fenced: {s1:?} {s2:?}"
    );
    assert_eq!(received.load(Relaxed), s2.delivered, "{s2:?}");
    assert_eq!(disorder.load(Relaxed), 0, "order kept");
    assert!(
        s2.dead_letters > 0 && s2.dead_letters <= FLOOD / 10,
        "{s2:?}"
    );
    assert_eq!((s2.rejected, s2.forged, s2.duplicates), (0, 0, 0), "{s2:?}");
    eprintln!(
        "flood: {} published, {} delivered, {} dead letters, {} lost, {} fenced, {refused} refused and sent again, in {:?}",
        s1.published,
        s2.delivered,
        s2.dead_letters,
        s2.lost,
        s2.fenced,
        started.elapsed()
    );
    one.shutdown(Duration::from_millis(200));
    two.shutdown(Duration::from_millis(200));
}

/// This process's resident set, in KiB.
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let line = status
        .lines()
        .find(|line| line.starts_with("VmRSS:"))
        .expect("VmRSS");
    line.split_whitespace()
        .nth(1)
        .and_then(|kib| kib.parse().ok())
        .expect("a number of KiB")
}

/// Publishes message frames for `to` on node 3's subject over one raw
/// connection, each from a run of node 3 never seen before (the runs
/// `runs`), in batches of [`BATCH`]; `pace` is called after each batch
/// with the number published so far.
fn fresh_runs(server: &NatsServer, to: Pid, runs: std::ops::Range<u64>, mut pace: impl FnMut(u64)) {
    let mut stream = TcpStream::connect(("127.0.0.1", server.port)).expect("connect");
    stream
        .write_all(b"CONNECT {\"verbose\":false,\"pedantic\":false}\r\n")
        .unwrap();
    let subject = NatsConfig::new(server.url()).frame_subject(2, 3);
    let template = codec()
        .encode(&Package::new(Pid::new(3, 1), to, Seq { from: 3, n: 1 }))
        .expect("encodable");
    let (mut batch, mut published) = (Vec::new(), 0);
    for run in runs {
        let mut frame = template.clone();
        frame[34..42].copy_from_slice(&run.to_be_bytes());
        frame[42..50].copy_from_slice(&1u64.to_be_bytes());
        batch.extend_from_slice(format!("PUB {subject} {}\r\n", frame.len()).as_bytes());
        batch.extend_from_slice(&frame);
        batch.extend_from_slice(b"\r\n");
        published += 1;
        if published % BATCH == 0 {
            stream.write_all(&batch).unwrap();
            batch.clear();
            pace(published);
        }
    }
    stream.write_all(&batch).unwrap();
    pace(published);
}

/// Frames published at once before waiting for node 2 to catch up: well
/// within its subscription's buffer, so that none is dropped.
const BATCH: u64 = 2_000;

/// The frames `transport` has handled: delivered, or dropped as its
/// sender's node is fenced.
fn handled(transport: &NatsTransport) -> u64 {
    let s = transport.stats();
    s.delivered + s.fenced + s.dead_letters
}

/// Waits until `transport` has handled `target` frames, or nothing more
/// is handled for a second (some were dropped).
fn catch_up(transport: &NatsTransport, target: u64) {
    let (mut last, mut since) = (handled(transport), Instant::now());
    while last < target && since.elapsed() < Duration::from_secs(1) {
        std::thread::sleep(Duration::from_millis(2));
        let now = handled(transport);
        if now != last {
            (last, since) = (now, Instant::now());
        }
    }
}

/// The environment variable that makes the binary run the measurement
/// itself (in a process of its own, so that what earlier tests of the
/// binary allocated and freed cannot hide a growth).
const MEASURE: &str = "RELAY_NATS_MEASURE_RSS";

/// Frames from `count` fresh runs of node 3 (a raw client that never
/// announces itself: each frame says it comes from a run never seen
/// before): node 2 handles each (delivers it, or drops it once node 3 is
/// declared down and fenced) and remembers only the last run, so its
/// memory stays flat. Measured after `warm` of them (the allocator's pools
/// and the client's buffers filled), and again after the rest; run in a
/// child process of its own (`test` is the calling test's name).
fn memory_stays_flat_under_frames_from_fresh_runs(
    test: &str,
    count: u64,
    warm: u64,
    bound_kib: u64,
) {
    if std::env::var_os(MEASURE).is_none() {
        // The server is the child's; this one holds the tests' turn (and
        // skips the test where `nats-server` is not installed).
        let Some(_turn) = NatsServer::start() else {
            return;
        };
        let exe = std::env::current_exe().expect("the test binary's path");
        let status = std::process::Command::new(exe)
            .args([test, "--exact", "--nocapture"])
            .env(MEASURE, "1")
            .status()
            .expect("the test binary runs again");
        assert!(status.success(), "the measurement failed");
        return;
    }
    let Some(server) = NatsServer::start() else {
        return;
    };
    let started = Instant::now();
    let (two, t2) = node(&server, 2);
    let (counter, _received, _) = Counter::new();
    let to = two.spawn(counter).unwrap().pid();
    let first = 1 << 40;
    fresh_runs(&server, to, first..first + warm, |n| catch_up(&t2, n));
    let before = rss_kib();
    let handled_before = handled(&t2);
    fresh_runs(&server, to, first + warm..first + count, |n| {
        catch_up(&t2, warm + n)
    });
    let after = rss_kib();
    let s = t2.stats();
    eprintln!(
        "{count} frames from fresh runs: RSS {before} KiB after {handled_before} handled, {after} KiB after {}, in {:?}; {s:?}",
        handled(&t2),
        started.elapsed()
    );
    // Each frame was the first of its run: a baseline, never a gap nor a
    // replay, and never taken for another node's.
    assert_eq!(
        (s.lost, s.duplicates, s.forged, s.rejected),
        (0, 0, 0, 0),
        "{s:?}"
    );
    assert!(
        handled(&t2) >= count * 99 / 100,
        "node 2 handled the frames: {s:?}"
    );
    assert!(
        after <= before + bound_kib,
        "RSS grew from {before} KiB to {after} KiB over {} frames from fresh runs",
        count - warm
    );
    two.shutdown(Duration::from_millis(200));
}

/// About 10 s in a debug build on 2 cores.
#[test]
fn memory_stays_flat_under_1_000_000_frames_from_fresh_runs() {
    memory_stays_flat_under_frames_from_fresh_runs(
        "memory_stays_flat_under_1_000_000_frames_from_fresh_runs",
        1_000_000,
        100_000,
        4 * 1024,
    );
}
