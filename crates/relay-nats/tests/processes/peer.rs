//! The other node as an OS process: this test binary run again with
//! [`ROLE`] set, so that it runs only [`CHILD_TEST`] in that role. It
//! talks in lines: commands on its stdin, answers on its stdout prefixed
//! with [`PREFIX`] (the test harness prints its own lines there too).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use crate::tally::Stream;

/// The environment variable that makes the binary a child, naming its role.
pub(crate) const ROLE: &str = "RELAY_NATS_CHILD_ROLE";
/// The server's URL, for the child.
pub(crate) const URL: &str = "RELAY_NATS_CHILD_URL";
/// The id of the parent's recorder (a process of node 1), for the child.
pub(crate) const PEER: &str = "RELAY_NATS_CHILD_PEER";
/// The child's node number (2 when not set).
pub(crate) const NODE: &str = "RELAY_NATS_CHILD_NODE";
/// The test that runs the child's role.
pub(crate) const CHILD_TEST: &str = "node_2_in_a_child_process";
/// What starts each of the child's own lines.
pub(crate) const PREFIX: &str = "child: ";

/// A child process running node 2, killed on drop.
pub(crate) struct Peer {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
}

impl Peer {
    /// Starts this binary again as node 2 in `role`, its stream messages
    /// going to process `peer` of node 1.
    pub(crate) fn spawn(role: &str, url: &str, peer: u64) -> Peer {
        Peer::spawn_node(role, url, peer, 2)
    }

    /// [`Peer::spawn`] as node `node`.
    pub(crate) fn spawn_node(role: &str, url: &str, peer: u64, node: u32) -> Peer {
        let exe = std::env::current_exe().expect("the test binary's path");
        let mut child = Command::new(exe)
            .args([CHILD_TEST, "--exact", "--nocapture", "--test-threads=1"])
            .env(ROLE, role)
            .env(URL, url)
            .env(PEER, peer.to_string())
            .env(NODE, node.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the child starts");
        let stdout = child.stdout.take().expect("piped");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                // The harness may have begun the line (`test name ... `).
                if let Some(at) = line.find(PREFIX) {
                    if tx.send(line[at + PREFIX.len()..].to_owned()).is_err() {
                        break;
                    }
                }
            }
        });
        let stdin = child.stdin.take();
        Peer {
            child,
            stdin,
            lines,
        }
    }

    /// The child's next line, which must start with `word`: the numbers
    /// after it.
    pub(crate) fn expect(&self, word: &str, timeout: Duration) -> Vec<u64> {
        let line = match self.lines.recv_timeout(timeout) {
            Ok(line) => line,
            Err(RecvTimeoutError::Timeout) => panic!("the child did not say {word:?} in time"),
            Err(RecvTimeoutError::Disconnected) => panic!("the child ended before saying {word:?}"),
        };
        let mut words = line.split_whitespace();
        assert_eq!(words.next(), Some(word), "the child said {line:?}");
        words
            .map(|w| w.parse().expect("the child says numbers"))
            .collect()
    }

    /// Sends the child a command line.
    pub(crate) fn tell(&mut self, command: &str) {
        let stdin = self.stdin.as_mut().expect("the child's stdin is open");
        writeln!(stdin, "{command}").expect("the child reads its stdin");
        stdin.flush().expect("the child reads its stdin");
    }

    /// Reads the child's report: every line up to `end`.
    pub(crate) fn report(&self, timeout: Duration) -> Report {
        let deadline = Instant::now() + timeout;
        let mut report = Report::default();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self
                .lines
                .recv_timeout(left)
                .expect("the child reports in time");
            let mut words = line.split_whitespace();
            let word = words.next().unwrap_or_default();
            let numbers: Vec<u64> = words.map(|w| w.parse().expect("numbers")).collect();
            match (word, numbers.as_slice()) {
                ("end", []) => return report,
                ("sent", [n]) => report.sent = *n,
                ("sent_to", [to, n]) => {
                    report.sent_to.insert(*to as u32, *n);
                }
                ("pings", [pings, disorder]) => report.pings = (*pings, *disorder),
                ("fanin", [from, count, last, skipped, disorder]) => {
                    let stream = Stream {
                        count: *count,
                        last: *last,
                        skipped: *skipped,
                        disorder: *disorder,
                    };
                    report.fanin.insert(*from, stream);
                }
                (
                    "stats",
                    [published, publish_failed, refused, delivered, dead_letters, rejected, lost, reconnects, fenced, abandoned],
                ) => {
                    report.stats = Counts {
                        published: *published,
                        publish_failed: *publish_failed,
                        refused: *refused,
                        delivered: *delivered,
                        dead_letters: *dead_letters,
                        rejected: *rejected,
                        lost: *lost,
                        reconnects: *reconnects,
                        fenced: *fenced,
                        abandoned: *abandoned,
                    }
                }
                _ => panic!("the child said {line:?}"),
            }
        }
    }

    /// Sends the child a signal (`STOP`, `CONT`, ...) with `kill`.
    #[allow(dead_code)]
    pub(crate) fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.child.id().to_string())
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -{signal} failed");
    }

    /// Kills the child (SIGKILL on Unix: no goodbye, no flush).
    pub(crate) fn kill(&mut self) {
        self.child.kill().expect("the child can be killed");
        self.child.wait().expect("the child is reaped");
    }

    /// Closes the child's stdin and waits for it to exit.
    pub(crate) fn wait(mut self, timeout: Duration) -> ExitStatus {
        drop(self.stdin.take());
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().expect("the child's status") {
                return status;
            }
            assert!(Instant::now() < deadline, "the child did not exit");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A child's transport counters (the fields of `TransportStats`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Counts {
    pub(crate) published: u64,
    pub(crate) publish_failed: u64,
    pub(crate) refused: u64,
    pub(crate) delivered: u64,
    pub(crate) dead_letters: u64,
    pub(crate) rejected: u64,
    pub(crate) lost: u64,
    pub(crate) reconnects: u64,
    pub(crate) fenced: u64,
    pub(crate) abandoned: u64,
}

/// What a child reported.
#[derive(Debug, Default)]
pub(crate) struct Report {
    /// Messages it sent in its stream, if it ran one.
    pub(crate) sent: u64,
    /// Messages it sent to each other node, if it ran senders that count.
    pub(crate) sent_to: BTreeMap<u32, u64>,
    /// Pings its echoes answered, and how many were out of order.
    pub(crate) pings: (u64, u64),
    /// What its recorder received, by sender.
    pub(crate) fanin: BTreeMap<u64, Stream>,
    /// Its transport's counters.
    pub(crate) stats: Counts,
}
