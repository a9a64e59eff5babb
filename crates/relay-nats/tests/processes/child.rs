//! Node 2, run in a child process by [`crate::peer::Peer`].

use std::io::BufRead;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use relay_nats::NatsTransport;
use sched::message::SendErrorKind;
use sched::prelude::*;

use crate::peer::{NODE, PEER, PREFIX, URL};
use crate::support::{node_at, Seq};
use crate::tally::{stream, total, CheckedEcho, Tally, TallyRecorder};
use crate::{COUNT, PAIRS, SENDERS, STREAM_FROM};

const WAIT: Duration = Duration::from_secs(60);

fn say(line: &str) {
    println!("{PREFIX}{line}");
}

/// The next command on stdin, split into words (empty at end of input).
fn command() -> Vec<String> {
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line).expect("stdin");
    line.split_whitespace().map(str::to_owned).collect()
}

fn number(words: &[String], at: usize) -> u64 {
    words[at].parse().expect("a number")
}

/// Runs node 2 in `role` until the parent is done with it.
pub(crate) fn run(role: &str) {
    let url = std::env::var(URL).expect("the server's URL");
    let peer: u64 = std::env::var(PEER).expect("the peer").parse().unwrap();
    let peer = Pid::new(1, peer);
    let me: u32 = std::env::var(NODE).map_or(2, |n| n.parse().expect("a node number"));
    let (node, transport) = node_at(&url, me);
    let tally = Tally::default();
    let recorder = node.spawn(TallyRecorder(tally.clone())).unwrap();
    let recorder = recorder.pid().id();
    let pings = Arc::new(AtomicU64::new(0));
    let disorder = Arc::new(AtomicU64::new(0));
    let echo = |node: &Scheduler| {
        let echo = CheckedEcho {
            pings: pings.clone(),
            disorder: disorder.clone(),
            last: Default::default(),
        };
        node.spawn(echo).unwrap().pid().id()
    };
    match role {
        // Echoes for the parent's players, and senders to the parent's
        // recorder; reports once the parent's messages are all in.
        "exchange" => {
            let echoes: Vec<String> = (0..PAIRS).map(|_| echo(&node).to_string()).collect();
            say(&format!("ready {recorder} {}", echoes.join(" ")));
            for from in 1..=SENDERS {
                let burst = crate::support::Burst {
                    to: peer,
                    from: 100 + from,
                    count: COUNT,
                };
                node.spawn(burst).unwrap();
            }
            let words = command();
            assert_eq!(words.first().map(String::as_str), Some("report"));
            let expected = number(&words, 1);
            wait_for(|| total(&tally) >= expected);
        }
        // A steady stream to the parent's recorder (from outside any
        // process) until told to stop; reports once the parent's stream
        // has arrived up to its last number.
        "stream" => {
            say(&format!("ready {recorder}"));
            let stop = AtomicBool::new(false);
            let (sent, last) = std::thread::scope(|scope| {
                let sender = scope.spawn(|| send_until(&node, peer, &stop));
                let words = command();
                assert_eq!(words.first().map(String::as_str), Some("stop"));
                stop.store(true, Relaxed);
                let sent = sender.join().expect("the sender thread");
                (sent, number(&words, 1))
            });
            say(&format!("sent {sent}"));
            wait_for(|| stream(&tally, STREAM_FROM).last >= last);
            // A frame is counted once its publish returned on the
            // transport's thread, which can be after it arrived.
            wait_for(|| {
                let s = transport.stats();
                s.published + s.publish_failed + s.abandoned >= sent
            });
        }
        // An echo and a recorder; leaves properly when told to quit, or is
        // killed.
        "echo" => {
            let echo = echo(&node);
            let names = relay_nats::ClusterNames::new(&node, transport.clone()).unwrap();
            names.register("echo", Pid::new(me, echo)).unwrap();
            say(&format!("ready {recorder} {echo}"));
            let words = command();
            assert_eq!(words.first().map(String::as_str), Some("quit"));
            node.shutdown(Duration::from_millis(200));
            transport.close();
            say("end");
            return;
        }
        // One node of a cluster: told every node's recorder, sends its
        // share to each other node, and reports once it has received its
        // share from each (or nothing more came for a while).
        "cluster" => {
            say(&format!("ready {recorder}"));
            let words = command();
            assert_eq!(words.first().map(String::as_str), Some("go"));
            let recorders: Vec<u64> = (1..words.len()).map(|at| number(&words, at)).collect();
            let expected = crate::cluster::start(&node, me, &recorders);
            crate::cluster::settle(&tally, expected, &transport);
        }
        // One node of the four-node run in which one is killed: told
        // which one and every node's recorder, sends its share to each
        // other node (giving up on the one declared down), and reports
        // what it sent to each once the streams of the nodes that were not
        // killed have all arrived.
        "survivor" => {
            say(&format!("ready {recorder}"));
            let words = command();
            assert_eq!(words.first().map(String::as_str), Some("go"));
            let killed = number(&words, 1) as u32;
            let recorders: Vec<u64> = (2..words.len()).map(|at| number(&words, at)).collect();
            let senders = crate::cluster::start_until_down(&node, me, &recorders);
            let sent = crate::cluster::sent(senders);
            let others = (1..=recorders.len() as u64).filter(|&n| n != u64::from(me));
            for from in others.filter(|&n| n != u64::from(killed)) {
                wait_for(|| stream(&tally, from).last >= crate::cluster::KILL_PER_PAIR);
            }
            let total: u64 = sent.iter().map(|(_, n)| n).sum();
            wait_for(|| {
                let s = transport.stats();
                s.published + s.publish_failed + s.abandoned >= total
            });
            for (to, n) in sent {
                say(&format!("sent_to {to} {n}"));
            }
        }
        other => panic!("no such role: {other}"),
    }
    report(&tally, &pings, &disorder, &transport);
    node.shutdown(Duration::from_millis(200));
}

/// Posts `Seq { from: STREAM_FROM, n }` for n = 1, 2, ... every 200 µs
/// until `stop`; returns the last n.
pub(crate) fn send_until(node: &Scheduler, to: Pid, stop: &AtomicBool) -> u64 {
    let mut n = 0;
    while !stop.load(Relaxed) {
        let seq = Seq {
            from: STREAM_FROM,
            n: n + 1,
        };
        match node.send(to, seq) {
            Ok(()) => n += 1,
            // Refused (and counted) while the nodes reset their relations
            // after a loss, as across a server restart: sent again.
            Err(error) => assert_eq!(error.kind(), SendErrorKind::Unreachable, "{error}"),
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    n
}

fn wait_for(mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !done() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn report(tally: &Tally, pings: &AtomicU64, disorder: &AtomicU64, transport: &NatsTransport) {
    for (from, stream) in tally.lock().unwrap().iter() {
        say(&stream.line(*from));
    }
    say(&format!(
        "pings {} {}",
        pings.load(Relaxed),
        disorder.load(Relaxed)
    ));
    // A publish is counted once it returned on the transport's thread,
    // which can be after its frame arrived (and the parent asked for this
    // report): the counts must have settled before they are reported.
    let mut s = transport.stats();
    let deadline = Instant::now() + WAIT;
    loop {
        std::thread::sleep(Duration::from_millis(20));
        let now = transport.stats();
        let same = (now.published, now.publish_failed) == (s.published, s.publish_failed);
        s = now;
        if same || Instant::now() >= deadline {
            break;
        }
    }
    say(&format!(
        "stats {} {} {} {} {} {} {} {} {} {}",
        s.published,
        s.publish_failed,
        s.refused,
        s.delivered,
        s.dead_letters,
        s.rejected,
        s.lost,
        s.reconnects,
        s.fenced,
        s.abandoned
    ));
    say("end");
}
