//! The failover test: two nodes as child OS processes (this test binary
//! started again, see `child_if_asked`), sharing one `JetStreamStore`
//! stream; each recovers every 200 ms. Two durable counters run on node 1;
//! the node that runs them is killed (SIGKILL) or frozen (SIGSTOP, then
//! thawed once the other took over, to meet the fence), five times; the
//! other resumes them. They finish with the outcome of an uninterrupted
//! run, and their journals show that each incarnation wrote in one run,
//! began by a takeover, and never wrote again after the next took over.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sched_durable::prelude::*;
use sched_durable::store::Store;
use sched_durable::{Record, RecordedEffect};
use sched_durable_jetstream::{JetStreamStore, Written};

use crate::support::NatsServer;

const ROLE: &str = "DURABLE_JETSTREAM_NODE";
const URL: &str = "DURABLE_JETSTREAM_URL";
const SPAWN: &str = "DURABLE_JETSTREAM_SPAWN";

const PREFIX: &str = "failover";
const LEASE: Duration = Duration::from_millis(1_000);
const RECOVER_EVERY: Duration = Duration::from_millis(200);
/// Timer steps per counter: one record each.
const STEPS: u64 = 1_000;
const KEYS: [&str; 2] = ["counter-1", "counter-2"];
const KILLS: usize = 5;
const WAIT: Duration = Duration::from_secs(60);

/// Counts `steps` timer steps of 10 ms, folding each step's number into
/// an order-sensitive checksum; finishes with it.
struct Counter {
    steps: u64,
    at: u64,
    sum: u64,
}

fn fold(sum: u64, at: u64) -> u64 {
    sum.wrapping_mul(31).wrapping_add(at * at)
}

impl Durable for Counter {
    const KIND: &'static str = "counter";
    type Args = u64;
    type Message = ();
    type Done = u64;

    fn create(steps: u64) -> Self {
        Counter {
            steps,
            at: 0,
            sum: 7,
        }
    }

    fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        out.set_timer(Duration::from_millis(10), Tag(1));
        Ok(())
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events.typed::<Self>() {
            if let Event::Timer { .. } = event {
                self.at += 1;
                self.sum = fold(self.sum, self.at);
                if self.at == self.steps {
                    out.finish(self.sum);
                } else {
                    out.set_timer(Duration::from_millis(10), Tag(1));
                }
            }
        }
        Ok(())
    }
}

fn uninterrupted(steps: u64) -> u64 {
    (1..=steps).fold(7, fold)
}

/// Runs a node when the binary was started as one: until its stdin
/// closes (or it is killed).
pub(crate) fn child_if_asked() {
    let Ok(node) = std::env::var(ROLE) else {
        return;
    };
    let node: u32 = node.parse().expect("a node number");
    let url = std::env::var(URL).expect("the server's URL");
    std::thread::spawn(|| {
        let mut sink = Vec::new();
        let _ = std::io::stdin().read_to_end(&mut sink);
        std::process::exit(0);
    });
    let store = JetStreamStore::builder(url, node)
        .prefix(PREFIX)
        .lease(LEASE)
        .open()
        .expect("the store opens");
    let durability = Durability::open(store);
    durability.register::<Counter>();
    let scheduler = durability
        .install(Scheduler::builder().workers(2).node(node))
        .build();
    scheduler.start();
    let mut resumed = Vec::new();
    if std::env::var_os(SPAWN).is_some() {
        durability.recover(&scheduler).expect("recovery");
        for key in KEYS {
            resumed.push(
                durability
                    .spawn::<Counter>(&scheduler, key, STEPS)
                    .expect("spawned"),
            );
        }
    }
    loop {
        match durability.recover(&scheduler) {
            Ok(recovery) => {
                for failed in &recovery.failed {
                    eprintln!("node {node}: not resumed: {failed}");
                }
                if !recovery.resumed.is_empty() {
                    eprintln!("node {node}: resumed {}", recovery.resumed.len());
                }
                resumed.extend(
                    recovery
                        .resumed
                        .into_iter()
                        .map(|s| s.of::<Counter>().expect("only counters run")),
                );
            }
            Err(e) => eprintln!("node {node}: recovery failed: {e}"),
        }
        // Say how each process this incarnation ran ended.
        resumed.retain_mut(|spawned| {
            let key = spawned.key().to_owned();
            match spawned.wait_timeout(Duration::ZERO) {
                Err(DurableError::TimedOut) => true,
                Ok(outcome) => {
                    eprintln!("node {node}: {key} finished: {outcome}");
                    false
                }
                Err(e) => {
                    eprintln!("node {node}: {key} stopped: {e}");
                    false
                }
            }
        });
        std::thread::sleep(RECOVER_EVERY);
    }
}

struct Node {
    number: u32,
    child: Child,
    said: Arc<Mutex<Vec<String>>>,
}

impl Node {
    fn start(server: &NatsServer, number: u32, spawn: bool) -> Node {
        let mut command = Command::new(std::env::current_exe().expect("the test binary"));
        command
            .args([
                "--exact",
                "failover_node_in_a_child_process",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(ROLE, number.to_string())
            .env(URL, server.url())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if spawn {
            command.env(SPAWN, "1");
        }
        let mut child = command.spawn().expect("the node starts");
        let stderr = child.stderr.take().expect("its stderr");
        let said = Arc::new(Mutex::new(Vec::new()));
        let lines = said.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if line.starts_with("node ") {
                    eprintln!("{line}");
                    lines.lock().unwrap().push(line);
                }
            }
        });
        Node {
            number,
            child,
            said,
        }
    }

    /// What the node said so far (its lines starting with "node ").
    fn said(&self) -> Vec<String> {
        self.said.lock().unwrap().clone()
    }

    fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill {signal} failed");
    }

    fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The journal's messages, read by a store that never owns anything.
fn history(observer: &JetStreamStore, key: &str) -> Vec<Written> {
    observer.history(key).expect("the history reads")
}

fn records(history: &[Written]) -> u64 {
    history.iter().map(|w| w.records.len() as u64).sum()
}

fn owner(history: &[Written]) -> Option<u32> {
    history.last().map(|w| w.writer.node)
}

/// Every incarnation wrote in one run of messages, the first of which
/// (after the very first run) is its takeover; returns the number of
/// takeovers.
fn check_fence(key: &str, history: &[Written]) -> usize {
    let mut seen = Vec::new();
    let mut takeovers = 0;
    for (i, written) in history.iter().enumerate() {
        if seen.last() == Some(&written.writer) {
            assert!(
                !written.records.is_empty(),
                "{key}: a second takeover by {} in a row",
                written.writer
            );
            continue;
        }
        assert!(
            !seen.contains(&written.writer),
            "{key}: {} wrote again after {} took over: {history:?}",
            written.writer,
            seen.last().unwrap()
        );
        if i > 0 {
            assert!(
                written.records.is_empty(),
                "{key}: {} wrote a record without taking over first",
                written.writer
            );
            takeovers += 1;
        }
        seen.push(written.writer);
    }
    takeovers
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn durable_processes_survive_their_node_being_killed_five_times() {
    let Some(server) = crate::server() else {
        return;
    };
    let started = Instant::now();
    let observer = JetStreamStore::builder(server.url(), 99)
        .prefix(PREFIX)
        .lease(LEASE)
        .open()
        .expect("the observer opens");
    let mut nodes = vec![
        Node::start(&server, 1, true),
        Node::start(&server, 2, false),
    ];
    let watched = KEYS[0];
    wait_for("the counters to start", || {
        KEYS.iter().all(|k| records(&history(&observer, k)) >= 10)
    });

    let mut failovers = Vec::new();
    let mut frozen_once = false;
    for round in 0..KILLS {
        let now = history(&observer, watched);
        let ended = observer.journal(watched).unwrap().is_some_and(|j| j.ended);
        if ended {
            eprintln!("the counters ended after {round} kills");
            break;
        }
        let victim = owner(&now).expect("an owner");
        let at = nodes
            .iter()
            .position(|n| n.number == victim)
            .expect("the owner is one of the nodes");
        let mut node = Some(nodes.remove(at));
        // Round 2 freezes the owner instead: it comes back after the
        // other took over, and must find itself fenced.
        let freeze = round == 2;
        let killed = Instant::now();
        if freeze {
            node.as_ref().unwrap().signal("-STOP");
            eprintln!("round {round}: froze node {victim}");
        } else {
            node.take().unwrap().kill();
            eprintln!("round {round}: killed node {victim}");
        }
        wait_for("the other node to take over", || {
            KEYS.iter()
                .all(|k| owner(&history(&observer, k)) != Some(victim))
        });
        let took = killed.elapsed();
        failovers.push(took);
        eprintln!("round {round}: node {victim} down, taken over after {took:?}");
        if let Some(node) = node {
            frozen_once = true;
            let before = node.said().len();
            node.signal("-CONT");
            // Its timers are due and its steps run: their records are
            // fenced, its processes stop, and it resumes nothing.
            wait_for("the thawed node to meet the fence", || {
                let said = node.said();
                KEYS.iter().all(|k| {
                    said.iter()
                        .any(|l| l.contains(&format!("{k} stopped")) && l.contains("fenced"))
                })
            });
            std::thread::sleep(RECOVER_EVERY * 3);
            let since = node.said().split_off(before);
            assert!(
                !since.iter().any(|l| l.contains("resumed")),
                "the thawed node resumed what another runs: {since:?}"
            );
            node.kill();
        }
        // The node comes back, as the standby.
        nodes.push(Node::start(&server, victim, false));
        let from = records(&history(&observer, watched));
        wait_for("the counter to go on", || {
            let h = history(&observer, watched);
            records(&h) >= (from + 40).min(STEPS + 1)
                || observer.journal(watched).unwrap().is_some_and(|j| j.ended)
        });
    }

    wait_for("the counters to finish", || {
        KEYS.iter()
            .all(|k| observer.journal(k).unwrap().is_some_and(|j| j.ended))
    });
    for key in KEYS {
        let journal = observer.journal(key).unwrap().unwrap();
        let last = Record::decode(journal.records.last().unwrap()).unwrap();
        let outcome = last
            .effects
            .iter()
            .find_map(|e| match e {
                RecordedEffect::Done(bytes) => Some(postcard::from_bytes::<u64>(bytes).unwrap()),
                _ => None,
            })
            .expect("the last record is the outcome");
        assert_eq!(outcome, uninterrupted(STEPS), "{key}'s outcome");
        // The start, then one record per timer step.
        assert_eq!(journal.records.len() as u64, STEPS + 1, "{key}'s records");
        let takeovers = check_fence(key, &history(&observer, key));
        eprintln!("{key}: {} records, {takeovers} takeovers", STEPS + 1);
        assert!(takeovers >= failovers.len(), "{key}: {takeovers} takeovers");
    }
    assert!(frozen_once || failovers.len() < 3);
    for node in nodes {
        node.kill();
    }
    eprintln!(
        "failovers: {failovers:?} (lease {LEASE:?}); the test took {:?}",
        started.elapsed()
    );
    for took in &failovers {
        assert!(
            *took < LEASE * 3 + Duration::from_secs(5),
            "a failover took {took:?}"
        );
    }
}
