//! Faults of a node that is an OS process, over a real `nats-server`:
//! this test binary runs node 1 and starts itself again as node 2 (see
//! `processes/peer.rs`), connected through a proxy the test can cut.
//! Node 2's connection blips (cut, back within ~50 ms), node 2 pauses for
//! 1, 3 and 6 s (SIGSTOP, then SIGCONT), and node 2 is killed (SIGKILL,
//! then started again), each five times, one after the other on the same
//! two nodes. After every fault, on both sides: every monitor of the other
//! node's processes fired once, with `NodeDown`; every link delivered its
//! exit (trapped, or ending the linked process); every ask held by the
//! other side failed with `NodeDown`; no watch of the other node is left on
//! a process; then traffic resumes and nothing fires again.

mod support;

#[path = "os_faults/child.rs"]
mod child;
#[allow(dead_code)]
#[path = "processes/peer.rs"]
mod peer;
#[allow(dead_code)]
#[path = "processes/tally.rs"]
mod tally;

use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

use sched::actor::AskError;
use sched::prelude::*;
use support::*;

use peer::Peer;

/// A monitor's or a link's signal, as a [`Watcher`] reports it.
pub(crate) type Fired = (Pid, ExitReason, &'static str);

/// Both nodes beat every 100 ms; node 1 declares a node down after 600 ms
/// of silence (so a pause of 1 s is a failure to it), node 2 after the
/// tests' patient 4 s.
pub(crate) const BEAT: Duration = Duration::from_millis(100);
const WATCHFUL: Duration = Duration::from_millis(600);
/// How long nothing more may fire after a fault's relations have ended.
pub(crate) const QUIET: Duration = Duration::from_millis(500);
pub(crate) const WAIT: Duration = Duration::from_secs(30);

/// Not a test of its own: node 2 when the binary runs as a child (see
/// `processes/peer.rs`); passes at once otherwise.
#[test]
fn node_2_in_a_child_process() {
    if let Ok(role) = std::env::var(peer::ROLE) {
        child::run(&role);
    }
}

/// The three signals a watcher of the other node's `end` (monitored and
/// linked, trapping exits) and `stay` (monitored) gets when that node is
/// lost: each once, with `NodeDown`.
pub(crate) fn expect_lost(seen: &Receiver<Fired>, end: Pid, stay: Pid) {
    let key = |&(pid, _, what): &Fired| (what, pid.node(), pid.id());
    let mut got: Vec<Fired> = (0..3)
        .map(|_| seen.recv_timeout(WAIT).expect("a monitor or a link fired"))
        .collect();
    got.sort_by_key(key);
    let mut want = vec![
        (end, ExitReason::NodeDown, "down"),
        (end, ExitReason::NodeDown, "exit"),
        (stay, ExitReason::NodeDown, "down"),
    ];
    want.sort_by_key(key);
    assert_eq!(got, want);
}

#[derive(Debug, Clone, Copy)]
enum Fault {
    /// Node 2's connection cut: it reconnects within ~50 ms.
    Blip,
    /// Node 2's process stopped (SIGSTOP) this long, then continued.
    Pause(Duration),
    /// Node 2's process killed (SIGKILL), then started again.
    Kill,
}

/// Node 1 in this process, node 2 in a child behind a proxy.
struct Pair {
    proxy: FaultyProxy,
    one: Scheduler,
    t1: std::sync::Arc<relay_nats::NatsTransport>,
    child: Peer,
    /// A process of each node that lives through every fault, watched by
    /// the other node in every round.
    stay_one: Pid,
    stay_two: Pid,
    // Last: the server outlives the nodes.
    _server: NatsServer,
}

impl Pair {
    fn start() -> Option<Pair> {
        let server = NatsServer::start()?;
        let proxy = FaultyProxy::start(server.port);
        let (one, t1) = node_detecting(&server.url(), 1, BEAT, WATCHFUL);
        let stay_one = one.spawn(Server { held: Vec::new() }).unwrap().pid();
        let (child, stay_two) = Pair::child(&proxy);
        Some(Pair {
            proxy,
            one,
            t1,
            child,
            stay_one,
            stay_two,
            _server: server,
        })
    }

    /// Node 2 started in a child process, through the proxy, and its
    /// process that stays.
    fn child(proxy: &FaultyProxy) -> (Peer, Pid) {
        let child = Peer::spawn("faults", &proxy.url(), 0);
        let stay_two = Pid::new(2, child.expect("ready", WAIT)[0]);
        (child, stay_two)
    }

    /// Sets up relations both ways, applies `fault`, and checks that every
    /// one of them ended once on both sides, then that traffic resumes and
    /// nothing fires again. Returns how long the round took.
    fn round(&mut self, fault: Fault) -> Duration {
        let started = Instant::now();
        let one = &self.one;
        let before = self.t1.stats();
        // Node 2 watches node 1's processes (and holds an ask to one)...
        let mut end_one = one.spawn(Server { held: Vec::new() }).unwrap();
        self.child.tell(&format!(
            "pair {} {}",
            end_one.pid().id(),
            self.stay_one.id()
        ));
        let end_two = Pid::new(2, self.child.expect("paired", WAIT)[0]);
        // ... and node 1 node 2's, from a step and from outside.
        let (seen, fired) = channel();
        one.spawn(Watcher {
            watches: vec![
                Watch::Monitor(end_two),
                Watch::TrapLink(end_two),
                Watch::Monitor(self.stay_two),
            ],
            seen,
        })
        .unwrap();
        let outside = one.context().monitor(end_two);
        std::thread::sleep(Duration::from_millis(200));
        let mut held = one.ask(end_two, Ping(u64::MAX)).expect("node 2 reachable");
        // Node 1's watches and held ask are in place on node 2 once an ask
        // sent after them is answered (one sender, one order), and node
        // 2's on node 1 too (node 2 sent them before its answer).
        let mut asked = one.ask(self.stay_two, Ping(1)).expect("node 2 reachable");
        asked.wait_timeout(WAIT).expect("node 2 answers");
        assert!(fired.try_recv().is_err(), "nothing fired before the fault");

        match fault {
            Fault::Blip => self.proxy.cut(),
            Fault::Pause(pause) => {
                self.child.signal("STOP");
                std::thread::sleep(pause);
                self.child.signal("CONT");
            }
            Fault::Kill => self.child.kill(),
        }

        // Node 1's side: every relation with node 2's processes ended once.
        expect_lost(&fired, end_two, self.stay_two);
        let down = outside
            .wait_timeout(WAIT)
            .expect("the outside monitor fired");
        assert_eq!(down.reason, ExitReason::NodeDown);
        assert_eq!(
            held.wait_timeout(WAIT).map(|_| ()),
            Err(AskError::NodeDown),
            "node 1's held ask"
        );
        let outcome = end_one.wait_timeout(WAIT);
        assert!(
            matches!(
                outcome,
                Err(ExitError::Linked {
                    reason: ExitReason::NodeDown,
                    ..
                })
            ),
            "node 1's linked process: {outcome:?}"
        );
        wait_until("node 2's watches to leave node 1", WAIT, || {
            one.context()
                .process_info(self.stay_one)
                .expect("stays")
                .monitored_by
                == 0
        });
        let after = self.t1.stats();
        match fault {
            // Node 2 lost the server (node 1 saw nothing): node 1 ended
            // its side when told.
            Fault::Blip => assert!(after.resets > before.resets, "{after:?}"),
            // Node 1's detector declared node 2 down.
            Fault::Pause(_) | Fault::Kill => {
                assert!(after.nodes_down > before.nodes_down, "{after:?}");
            }
        }

        if let Fault::Kill = fault {
            // Node 2's side died with it: a new run takes over.
            let (child, stay_two) = Pair::child(&self.proxy);
            (self.child, self.stay_two) = (child, stay_two);
        } else {
            // Node 2's side, checked there.
            self.child.tell("check");
            self.child.expect("checked", WAIT);
        }
        // Traffic resumes both ways.
        wait_until("node 2 to answer node 1 again", WAIT, || {
            one.ask(self.stay_two, Ping(2))
                .is_ok_and(|mut r| r.wait_timeout(Duration::from_secs(2)).is_ok())
        });
        wait_until("node 1 to answer node 2 again", WAIT, || {
            self.child.tell(&format!("ask {}", self.stay_one.id()));
            self.child.expect("answer", WAIT) == [1]
        });
        // And nothing fires again, on either side.
        if !matches!(fault, Fault::Kill) {
            self.child.tell("quiet");
        }
        assert!(fired.recv_timeout(QUIET).is_err(), "fired twice on node 1");
        if !matches!(fault, Fault::Kill) {
            self.child.expect("quiet", WAIT);
        }
        started.elapsed()
    }

    fn stop(mut self) {
        self.child.tell("quit");
        self.child.expect("end", WAIT);
        assert!(self.child.wait(WAIT).success(), "node 2 exited cleanly");
        self.one.shutdown(Duration::from_millis(200));
    }
}

/// Runs `faults` in order on one pair of nodes, reporting each round's
/// time.
fn run(faults: &[Fault]) {
    let Some(mut pair) = Pair::start() else {
        return;
    };
    for (round, &fault) in faults.iter().enumerate() {
        let took = pair.round(fault);
        eprintln!("round {round}: {fault:?} in {took:?}");
    }
    pair.stop();
}

#[test]
fn fifty_ms_blips_end_every_relation_once_on_both_sides() {
    run(&[Fault::Blip; 5]);
}

#[test]
fn pauses_of_1_3_and_6_s_end_every_relation_once_on_both_sides() {
    let pauses = [1, 3, 6].map(|s| Fault::Pause(Duration::from_secs(s)));
    run(&pauses.repeat(5));
}

#[test]
fn sigkill_ends_every_relation_once_and_a_new_run_takes_over() {
    run(&[Fault::Kill; 5]);
}
