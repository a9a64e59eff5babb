//! Node 2 of `os_faults.rs`, run in a child process by
//! [`crate::peer::Peer`]: pairs of processes watched from node 1 and
//! watching node 1's, checked on its side after each fault.

use std::io::BufRead;
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

use sched::actor::AskError;
use sched::prelude::*;

use crate::peer::{PREFIX, URL};
use crate::support::{node_detecting, Ping, Pong, Server, Watch, Watcher, DOWN_AFTER};
use crate::{expect_lost, Fired, BEAT, QUIET, WAIT};

fn say(line: &str) {
    println!("{PREFIX}{line}");
}

/// The next command on stdin, split into words (empty at end of input).
fn command() -> Vec<String> {
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line).expect("stdin");
    line.split_whitespace().map(str::to_owned).collect()
}

fn pid_of_node_1(words: &[String], at: usize) -> Pid {
    Pid::new(1, words[at].parse().expect("a process id"))
}

/// One round's relations on this side.
struct Round {
    /// Node 2's process linked from node 1's watcher (ended by the link).
    end: Completion,
    /// What this side's watcher of node 1's processes sees.
    seen: Receiver<Fired>,
    /// An ask node 1's process holds without answering.
    held: sched::actor::Reply<Pong>,
    /// Node 1's processes this side watches: the linked one and the one
    /// that stays.
    end_one: Pid,
    stay_one: Pid,
}

/// Runs node 2 (with a patient detector, as the node behind the faults)
/// until told to quit.
pub(crate) fn run(role: &str) {
    assert_eq!(role, "faults", "no such role: {role}");
    let url = std::env::var(URL).expect("the server's URL");
    let (node, _transport) = node_detecting(&url, 2, BEAT, DOWN_AFTER);
    let stay = node.spawn(Server { held: Vec::new() }).unwrap().pid();
    say(&format!("ready {}", stay.id()));
    let mut round: Option<Round> = None;
    loop {
        let words = command();
        match words.first().map(String::as_str) {
            // Node 1's linked process and the one that stays: watch them
            // (a monitor each, and a trapped link to the first), ask the
            // first a question it holds, and start a process of this node
            // for node 1 to watch.
            Some("pair") => {
                let (end_one, stay_one) = (pid_of_node_1(&words, 1), pid_of_node_1(&words, 2));
                let end = node.spawn(Server { held: Vec::new() }).unwrap();
                let (seen, fired) = channel();
                node.spawn(Watcher {
                    watches: vec![
                        Watch::Monitor(end_one),
                        Watch::TrapLink(end_one),
                        Watch::Monitor(stay_one),
                    ],
                    seen,
                })
                .unwrap();
                // The watches are in place on node 1 once an ask sent
                // after them is answered (one sender, one order).
                std::thread::sleep(Duration::from_millis(200));
                let mut asked = node.ask(stay_one, Ping(1)).expect("node 1 reachable");
                asked.wait_timeout(WAIT).expect("node 1 answers");
                let held = node.ask(end_one, Ping(u64::MAX)).expect("node 1 reachable");
                say(&format!("paired {}", end.pid().id()));
                round = Some(Round {
                    end,
                    seen: fired,
                    held,
                    end_one,
                    stay_one,
                });
            }
            // After a fault: every relation of this side with node 1 ended
            // once, with NodeDown.
            Some("check") => {
                let Round {
                    end,
                    seen,
                    held,
                    end_one,
                    stay_one,
                } = round.as_mut().expect("paired");
                expect_lost(seen, *end_one, *stay_one);
                let outcome = end.wait_timeout(WAIT);
                assert!(
                    matches!(
                        outcome,
                        Err(ExitError::Linked {
                            reason: ExitReason::NodeDown,
                            ..
                        })
                    ),
                    "node 2's linked process: {outcome:?}"
                );
                assert_eq!(
                    held.wait_timeout(WAIT).map(|_| ()),
                    Err(AskError::NodeDown),
                    "node 2's held ask"
                );
                // Node 1's watches of this node's processes are gone here.
                let deadline = Instant::now() + WAIT;
                while node
                    .context()
                    .process_info(stay)
                    .expect("stays")
                    .monitored_by
                    != 0
                {
                    assert!(Instant::now() < deadline, "a watch of node 1 stranded");
                    std::thread::sleep(Duration::from_millis(10));
                }
                say("checked");
            }
            // Node 1's process answers again.
            Some("ask") => {
                let to = pid_of_node_1(&words, 1);
                let answered = node
                    .ask(to, Ping(2))
                    .is_ok_and(|mut r| r.wait_timeout(Duration::from_secs(2)).is_ok());
                say(&format!("answer {}", u8::from(answered)));
            }
            // Nothing more fires on this side.
            Some("quiet") => {
                let Round { seen, .. } = round.take().expect("paired");
                assert!(seen.recv_timeout(QUIET).is_err(), "fired twice on node 2");
                say("quiet");
            }
            Some("quit") | None => break,
            Some(other) => panic!("no such command: {other}"),
        }
    }
    node.shutdown(Duration::from_millis(200));
    say("end");
}
