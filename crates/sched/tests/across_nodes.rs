//! Monitors, links and asks between processes of two engines, joined by an
//! in-process transport that delivers at once (so every signal's handling
//! re-enters the other engine from inside a send): they keep their local
//! promises across nodes, and a lost node ends them all with the node-down
//! reason. The same relations over NATS, between OS processes, are in
//! `relay-nats`'s tests.

use std::collections::HashMap;
use std::sync::mpsc::{channel, Receiver as Rx, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sched::actor::{AskError, MonitorId, ReplyTo};
use sched::message::{Receiver, SendError, SendErrorKind};
use sched::prelude::*;
use sched::remote::{NodeDown, RemoteTransport};
use sched::{Package, Urgent};

const WAIT: Duration = Duration::from_secs(10);

/// Joins engines in one process; a node can be cut off, which tells the
/// others (and it) that they lost each other, as a failure detector does.
#[derive(Default)]
struct Loopback {
    nodes: Mutex<HashMap<u32, Arc<dyn Receiver + Send + Sync>>>,
    cut: Mutex<Vec<u32>>,
    /// Packages that went over the wire still wrapped in `Urgent`.
    urgent_on_the_wire: std::sync::atomic::AtomicUsize,
}

impl std::fmt::Debug for Loopback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Loopback")
    }
}

impl RemoteTransport for Loopback {
    fn attach(&self, node: u32, local: Arc<dyn Receiver + Send + Sync>) {
        self.nodes.lock().unwrap().insert(node, local);
    }

    fn send(&self, package: Package) -> Result<(), SendError> {
        if package.is::<Urgent>() {
            self.urgent_on_the_wire
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        let (from, to) = (package.source().node(), package.target().node());
        let cut = self.cut.lock().unwrap();
        if cut.contains(&from) || cut.contains(&to) {
            return Err(SendError::new(SendErrorKind::Unreachable, package));
        }
        drop(cut);
        // Not under the lock: the receiver may send back at once.
        let inbox = self.nodes.lock().unwrap().get(&to).cloned();
        let signal = package.is::<sched::remote::Signal>();
        match inbox {
            // What the receiving engine makes of a signal (one it cannot
            // read, a terminate that finds no process) is the receiving
            // side's to count, as over a real wire: the signal left.
            Some(inbox) if signal => {
                let _ = inbox.send(package);
                Ok(())
            }
            Some(inbox) => inbox.send(package),
            None => Err(SendError::unknown_target(package)),
        }
    }
}

impl Loopback {
    /// Tells `observer` alone that it lost `lost`, the wire intact: a
    /// failure detector's false alarm.
    fn false_alarm(&self, observer: u32, lost: u32) {
        let inbox = self.nodes.lock().unwrap().get(&observer).cloned().unwrap();
        let me = Pid::new(observer, 0);
        inbox
            .send(Package::new(me, me, NodeDown::new(lost)))
            .unwrap();
    }

    /// Cuts `node` off: it and every other node are told they lost each
    /// other.
    fn cut_off(&self, node: u32) {
        self.cut.lock().unwrap().push(node);
        let nodes: Vec<_> = self
            .nodes
            .lock()
            .unwrap()
            .iter()
            .map(|(n, inbox)| (*n, Arc::clone(inbox)))
            .collect();
        for (n, inbox) in &nodes {
            let lost: Vec<u32> = match *n == node {
                true => nodes
                    .iter()
                    .map(|(m, _)| *m)
                    .filter(|m| *m != node)
                    .collect(),
                false => vec![node],
            };
            for lost in lost {
                let me = Pid::new(*n, 0);
                inbox
                    .send(Package::new(me, me, NodeDown::new(lost)))
                    .unwrap();
            }
        }
    }
}

fn pair() -> (Arc<Loopback>, Scheduler, Scheduler) {
    let wire: Arc<Loopback> = Arc::default();
    let one = Scheduler::builder()
        .workers(2)
        .node(1)
        .remote(wire.clone())
        .build();
    let two = Scheduler::builder()
        .workers(2)
        .node(2)
        .remote(wire.clone())
        .build();
    one.start();
    two.start();
    (wire, one, two)
}

/// A process of node 2: ends as its message says, answers numbers with
/// their double, holds or drops other requests.
struct Target {
    held: Vec<ReplyTo>,
}

impl Process for Target {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            match event {
                Event::Message(m) => match m.payload::<&'static str>().copied() {
                    Some("fail") => return Err("boom".into()),
                    Some("finish") => out.finish(()),
                    Some("panic") => panic!("kaboom"),
                    _ => {}
                },
                Event::Request(request) => {
                    if let Some(n) = request.payload::<u64>().copied() {
                        request.reply(n * 2);
                    } else if request.payload::<&'static str>() == Some(&"hold") {
                        self.held.push(request.into_parts().1);
                    }
                    // Anything else is dropped unanswered.
                }
                _ => {}
            }
        }
        Ok(())
    }
}

fn target() -> Target {
    Target { held: Vec::new() }
}

/// What a probe is told to do.
enum Cmd {
    Monitor(Pid),
    Demonitor,
    Link(Pid),
    Unlink(Pid),
    Trap,
    Ask(Pid, Box<dyn std::any::Any + Send>, Duration),
    /// Answers "ping": everything the probe was told before this has been
    /// acted on.
    Ping,
}

/// A process of node 1 that does what it is told and reports every event.
struct Probe {
    report: Sender<String>,
    monitor: Option<MonitorId>,
}

impl Process for Probe {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            let line = match event {
                Event::Message(m) => match m.downcast::<Cmd>() {
                    Ok(Cmd::Monitor(pid)) => {
                        self.monitor = Some(out.monitor(pid));
                        continue;
                    }
                    Ok(Cmd::Demonitor) => {
                        let id = self.monitor.take().expect("a monitor to remove");
                        format!("demonitor {}", out.demonitor(id))
                    }
                    Ok(Cmd::Link(pid)) => {
                        out.link(pid);
                        continue;
                    }
                    Ok(Cmd::Unlink(pid)) => {
                        out.unlink(pid);
                        continue;
                    }
                    Ok(Cmd::Trap) => {
                        out.trap_exits(true);
                        continue;
                    }
                    Ok(Cmd::Ask(pid, question, timeout)) => match out.ask(pid, question, timeout) {
                        Ok(_) => continue,
                        Err(e) => format!("ask refused {:?}", e.kind()),
                    },
                    Ok(Cmd::Ping) => "ping".to_owned(),
                    Err(_) => "a stray message".to_owned(),
                },
                Event::Down(down) => format!(
                    "down {} {:?} {}",
                    down.pid,
                    down.reason,
                    down.detail.as_deref().unwrap_or("-")
                ),
                Event::Exit {
                    pid,
                    reason,
                    detail,
                } => format!("exit {pid} {reason:?} {}", detail.as_deref().unwrap_or("-")),
                Event::Reply {
                    result, question, ..
                } => match result {
                    Ok(answer) => format!("reply {:?}", answer.downcast_ref::<u64>()),
                    Err(e) => format!(
                        "reply {e:?} question back: {}",
                        question.is_some_and(|q| q.downcast_ref::<u64>().is_some())
                    ),
                },
                other => format!("{other:?}"),
            };
            let _ = self.report.send(line);
        }
        Ok(())
    }
}

fn probe(one: &Scheduler) -> (Pid, Rx<String>, Completion) {
    let (report, lines) = channel();
    let handle = one
        .spawn(Probe {
            report,
            monitor: None,
        })
        .unwrap();
    (handle.pid(), lines, handle)
}

fn tell(one: &Scheduler, probe: Pid, cmd: Cmd) {
    one.send(probe, cmd).unwrap();
}

/// The next line the probe reports.
fn next(lines: &Rx<String>) -> String {
    lines.recv_timeout(WAIT).expect("the probe reports")
}

/// Pings the probe: the lines before "ping" are all it reported so far.
fn settle(one: &Scheduler, probe: Pid, lines: &Rx<String>) -> Vec<String> {
    tell(one, probe, Cmd::Ping);
    let mut seen = Vec::new();
    loop {
        let line = next(lines);
        if line == "ping" {
            return seen;
        }
        seen.push(line);
    }
}

#[test]
fn a_monitor_of_a_live_remote_process_fires_once_when_it_ends_with_how() {
    let (_wire, one, two) = pair();
    let t = two.spawn(target()).unwrap().pid();
    let (p, lines, _h) = probe(&one);
    tell(&one, p, Cmd::Monitor(t));
    let outside = one.context().monitor(t);
    assert_eq!(
        settle(&one, p, &lines),
        Vec::<String>::new(),
        "alive: no down"
    );
    assert!(
        outside.try_take().is_none(),
        "alive: no down outside either"
    );
    two.send(t, "fail").unwrap();
    assert_eq!(next(&lines), format!("down {t} Error boom"));
    let down = outside
        .wait_timeout(WAIT)
        .expect("the outside monitor fires");
    assert_eq!((down.pid, down.reason), (t, ExitReason::Error));
    assert_eq!(down.detail.as_deref(), Some("boom"));
    assert_eq!(
        settle(&one, p, &lines),
        Vec::<String>::new(),
        "exactly once"
    );
}

#[test]
fn a_monitor_of_a_remote_pid_without_a_process_says_no_process() {
    let (_wire, one, _two) = pair();
    let (p, lines, _h) = probe(&one);
    let nobody = Pid::new(2, 4242);
    tell(&one, p, Cmd::Monitor(nobody));
    assert_eq!(next(&lines), format!("down {nobody} NoProcess -"));
    let outside = one
        .context()
        .monitor(nobody)
        .wait_timeout(WAIT)
        .expect("at once");
    assert_eq!(outside.reason, ExitReason::NoProcess);
}

#[test]
fn a_remote_panic_reaches_the_monitor_with_its_message() {
    let (_wire, one, two) = pair();
    let t = two.spawn(target()).unwrap().pid();
    let monitor = one.context().monitor(t);
    two.send(t, "panic").unwrap();
    let down = monitor.wait_timeout(WAIT).expect("fires");
    assert_eq!(down.reason, ExitReason::Panicked);
    assert!(down.detail.as_deref().unwrap_or("").contains("kaboom"));
}

#[test]
fn a_remote_demonitor_means_no_down_ever() {
    let (_wire, one, two) = pair();
    let t = two.spawn(target()).unwrap().pid();
    let (p, lines, _h) = probe(&one);
    tell(&one, p, Cmd::Monitor(t));
    tell(&one, p, Cmd::Demonitor);
    assert_eq!(next(&lines), "demonitor true");
    // An outside handle dropped removes its monitor too.
    drop(one.context().monitor(t));
    let kept = one.context().monitor(t);
    two.send(t, "fail").unwrap();
    assert_eq!(
        kept.wait_timeout(WAIT).map(|d| d.reason),
        Ok(ExitReason::Error)
    );
    assert_eq!(
        settle(&one, p, &lines),
        Vec::<String>::new(),
        "the removed monitor never fires"
    );
    assert!(!one.context().demonitor(kept.id()), "fired already");
}

#[test]
fn a_link_across_nodes_carries_an_abnormal_end_and_ends_the_other() {
    let (_wire, one, two) = pair();
    let t = two.spawn(target()).unwrap().pid();
    let (p, lines, mut handle) = probe(&one);
    tell(&one, p, Cmd::Link(t));
    assert!(settle(&one, p, &lines).is_empty());
    two.send(t, "fail").unwrap();
    let ended = handle.wait_timeout(WAIT);
    assert!(
        ended.as_ref().is_err_and(|e| !e.is_timeout()),
        "an abnormal end ends the linked process: {ended:?}"
    );
}

#[test]
fn a_link_across_nodes_works_from_either_side_and_both_ways() {
    let (_wire, one, two) = pair();
    // The probe on node 1 traps; its end (abnormal) reaches node 2's
    // linked target, which does not trap and ends with it.
    let t = two.spawn(target()).unwrap().pid();
    let watch_t = two.context().monitor(t);
    let (p, lines, _h) = probe(&one);
    tell(&one, p, Cmd::Trap);
    tell(&one, p, Cmd::Link(t));
    assert!(settle(&one, p, &lines).is_empty());
    one.terminate(p).unwrap();
    let down = watch_t.wait_timeout(WAIT).expect("the linked target ends");
    assert_eq!(down.reason, ExitReason::Linked);
}

#[test]
fn a_trapping_process_gets_the_remote_exit_as_an_event_normal_or_not() {
    let (_wire, one, two) = pair();
    let (a, b) = (
        two.spawn(target()).unwrap().pid(),
        two.spawn(target()).unwrap().pid(),
    );
    let (p, lines, _h) = probe(&one);
    tell(&one, p, Cmd::Trap);
    tell(&one, p, Cmd::Link(a));
    tell(&one, p, Cmd::Link(b));
    tell(&one, p, Cmd::Link(Pid::new(2, 999_999)));
    assert_eq!(
        next(&lines),
        format!("exit {} NoProcess -", Pid::new(2, 999_999))
    );
    two.send(a, "finish").unwrap();
    assert_eq!(next(&lines), format!("exit {a} Normal -"));
    two.send(b, "fail").unwrap();
    assert_eq!(next(&lines), format!("exit {b} Error boom"));
    assert!(settle(&one, p, &lines).is_empty(), "one signal per link");
}

#[test]
fn after_an_unlink_across_nodes_no_exit_signal_comes() {
    let (_wire, one, two) = pair();
    let t = two.spawn(target()).unwrap().pid();
    let watch_t = one.context().monitor(t);
    let (p, lines, handle) = probe(&one);
    tell(&one, p, Cmd::Link(t));
    tell(&one, p, Cmd::Link(t));
    tell(&one, p, Cmd::Unlink(t));
    assert!(settle(&one, p, &lines).is_empty());
    two.send(t, "fail").unwrap();
    assert_eq!(
        watch_t.wait_timeout(WAIT).map(|d| d.reason),
        Ok(ExitReason::Error)
    );
    assert!(settle(&one, p, &lines).is_empty());
    assert!(!handle.is_finished(), "the unlinked probe lives on");
}

#[test]
fn an_ask_across_nodes_is_answered_from_outside_and_from_a_step() {
    let (_wire, one, two) = pair();
    let t = two.spawn(target()).unwrap().pid();
    let mut reply = one.ask(t, Box::new(21u64) as Payload).unwrap();
    let answer = reply.wait_timeout(WAIT).unwrap();
    assert_eq!(answer.downcast_ref::<u64>(), Some(&42));
    let (p, lines, _h) = probe(&one);
    tell(&one, p, Cmd::Ask(t, Box::new(5u64), WAIT));
    assert_eq!(next(&lines), "reply Some(10)");
}

#[test]
fn an_ask_across_nodes_keeps_the_local_errors() {
    let (_wire, one, two) = pair();
    let t = two.spawn(target()).unwrap().pid();
    let (p, lines, _h) = probe(&one);
    // Held and never answered: the step's timeout.
    tell(
        &one,
        p,
        Cmd::Ask(t, Box::new("hold"), Duration::from_millis(50)),
    );
    assert_eq!(next(&lines), "reply TimedOut question back: false");
    // Dropped unanswered.
    tell(&one, p, Cmd::Ask(t, Box::new("drop"), WAIT));
    assert_eq!(next(&lines), "reply NoReply question back: false");
    // Nobody there: the question comes back, unread.
    tell(&one, p, Cmd::Ask(Pid::new(2, 777), Box::new(3u64), WAIT));
    assert_eq!(next(&lines), "reply Unread question back: true");
    let mut outside = one
        .ask(Pid::new(2, 777), Box::new(3u64) as Payload)
        .unwrap();
    assert_eq!(outside.wait_timeout(WAIT).unwrap_err(), AskError::Unread);
    assert_eq!(
        outside
            .take_question()
            .and_then(|q| q.downcast_ref::<u64>().copied()),
        Some(3)
    );
}

#[test]
fn a_lost_node_ends_every_relation_with_node_down_once() {
    let (wire, one, two) = pair();
    let (t, u) = (
        two.spawn(target()).unwrap().pid(),
        two.spawn(target()).unwrap().pid(),
    );
    // On node 2, a monitor of a node-1 process: the watch is dropped when
    // node 1 is lost, and fires there with node-down.
    let (p, lines, _h) = probe(&one);
    let (q, qlines, mut linked) = probe(&one);
    let from_two = two.context().monitor(p);
    tell(&one, p, Cmd::Monitor(t));
    tell(&one, p, Cmd::Trap);
    tell(&one, p, Cmd::Link(u));
    tell(&one, p, Cmd::Ask(t, Box::new("hold"), WAIT));
    tell(&one, q, Cmd::Link(t));
    let outside = one.context().monitor(u);
    let mut asked = one.ask(t, Box::new("hold") as Payload).unwrap();
    assert!(settle(&one, p, &lines).is_empty());
    // `q` too has acted on its link before the cut: else the link may be
    // made after it, refused at once, and `t` never hear of it.
    assert!(settle(&one, q, &qlines).is_empty());

    wire.cut_off(2);

    let mut got = vec![next(&lines), next(&lines), next(&lines)];
    got.sort();
    let mut want = vec![
        format!("down {t} NodeDown -"),
        format!("exit {u} NodeDown -"),
        "reply NodeDown question back: false".to_owned(),
    ];
    want.sort();
    assert_eq!(got, want);
    assert_eq!(
        outside.wait_timeout(WAIT).map(|d| d.reason),
        Ok(ExitReason::NodeDown)
    );
    assert_eq!(asked.wait_timeout(WAIT).unwrap_err(), AskError::NodeDown);
    assert!(linked.wait_timeout(WAIT).is_err_and(|e| !e.is_timeout()));
    assert_eq!(
        from_two.wait_timeout(WAIT).map(|d| d.reason),
        Ok(ExitReason::NodeDown)
    );
    // Node 2 lost node 1 too: `t` and `u`, linked with `q` and `p`
    // there, ended with them.
    for pid in [t, u] {
        let down = two
            .context()
            .monitor(pid)
            .wait_timeout(WAIT)
            .map(|d| d.reason);
        assert!(
            matches!(down, Ok(ExitReason::Linked | ExitReason::NoProcess)),
            "{down:?}"
        );
    }
    // And a new relation with the lost node fails at once.
    tell(&one, p, Cmd::Monitor(t));
    assert_eq!(next(&lines), format!("down {t} NodeDown -"));
    tell(&one, p, Cmd::Link(t));
    assert_eq!(next(&lines), format!("exit {t} NodeDown -"));
    let refused = one.ask(t, Box::new(1u64) as Payload).unwrap_err();
    assert_eq!(refused.kind(), SendErrorKind::Unreachable);
    assert_eq!(
        refused.into_package().downcast::<u64>().ok(),
        Some(1),
        "the question back"
    );
}

#[test]
fn after_a_false_alarm_the_real_end_is_not_told_twice() {
    let (wire, one, two) = pair();
    let (t, u) = (
        two.spawn(target()).unwrap().pid(),
        two.spawn(target()).unwrap().pid(),
    );
    let (p, lines, _h) = probe(&one);
    tell(&one, p, Cmd::Monitor(t));
    tell(&one, p, Cmd::Trap);
    tell(&one, p, Cmd::Link(u));
    let outside = one.context().monitor(t);
    assert!(settle(&one, p, &lines).is_empty());
    wire.false_alarm(1, 2);
    let mut got = vec![next(&lines), next(&lines)];
    got.sort();
    assert_eq!(
        got,
        [
            format!("down {t} NodeDown -"),
            format!("exit {u} NodeDown -")
        ]
    );
    assert_eq!(
        outside.wait_timeout(WAIT).map(|d| d.reason),
        Ok(ExitReason::NodeDown)
    );
    // Node 2 never lost node 1: its processes' ends are sent, and find
    // nothing left to tell.
    let ends = (two.context().monitor(t), two.context().monitor(u));
    two.send(t, "fail").unwrap();
    two.send(u, "fail").unwrap();
    assert!(
        !ends.0.wait_timeout(WAIT).is_err_and(|e| e.is_timeout())
            && !ends.1.wait_timeout(WAIT).is_err_and(|e| e.is_timeout())
    );
    assert!(
        settle(&one, p, &lines).is_empty(),
        "each relation fired once"
    );
    assert_eq!(
        outside.try_take().map(|d| d.reason),
        Some(ExitReason::NodeDown)
    );
    // The wire works: a new monitor learns the real state.
    tell(&one, p, Cmd::Monitor(t));
    assert_eq!(next(&lines), format!("down {t} NoProcess -"));
}

/// The end of a remote process, a demonitor and the loss of its node race
/// (on three threads), 200 times: each monitor is told at most once, and
/// exactly once unless the demonitor came first. (The relations' table is
/// one lock per engine, outside loom's models, which build no transport:
/// this is the check that reaches these interleavings.)
#[test]
fn an_end_a_demonitor_and_a_lost_node_racing_tell_each_monitor_once() {
    let (wire, one, two) = pair();
    let (p, lines, _h) = probe(&one);
    let rounds = if cfg!(miri) { 5 } else { 200 };
    let mut outcomes = HashMap::new();
    for round in 0..rounds {
        let t = two.spawn(target()).unwrap().pid();
        tell(&one, p, Cmd::Monitor(t));
        assert!(settle(&one, p, &lines).is_empty());
        std::thread::scope(|scope| {
            scope.spawn(|| two.send(t, "fail").unwrap());
            if round % 2 == 0 {
                scope.spawn(|| tell(&one, p, Cmd::Demonitor));
            }
            scope.spawn(|| wire.false_alarm(1, 2));
        });
        assert!(!two
            .context()
            .monitor(t)
            .wait_timeout(WAIT)
            .is_err_and(|e| e.is_timeout()));
        let mut seen = settle(&one, p, &lines);
        let removed = seen.contains(&"demonitor true".to_owned());
        let downs = |seen: &[String]| seen.iter().filter(|l| l.starts_with("down")).count();
        // A monitor attached after `t` ended is told at once, while the
        // thread that ended `t` may still be sending the probe's down (the
        // relations close before the downs go out): so a missing down is
        // waited for, not counted as none.
        while !removed && downs(&seen) == 0 {
            let line = lines
                .recv_timeout(WAIT)
                .unwrap_or_else(|_| panic!("round {round}: no down came: {seen:?}"));
            seen.push(line);
        }
        // Anything told twice would be there by now or in the next round's
        // first settle, which must find nothing.
        seen.extend(settle(&one, p, &lines));
        assert_eq!(
            downs(&seen),
            usize::from(!removed),
            "round {round}: {seen:?}"
        );
        let how = seen
            .iter()
            .find_map(|l| l.strip_prefix("down ").and_then(|l| l.split(' ').nth(1)))
            .unwrap_or("removed")
            .to_owned();
        *outcomes.entry(how).or_insert(0) += 1;
    }
    // A down told twice after the last round would come in this while.
    std::thread::sleep(Duration::from_millis(50));
    assert!(settle(&one, p, &lines).is_empty(), "a late second down");
    // Which won each round is the machine's to decide (not asserted);
    // every round told its monitor once, or not at all after a demonitor.
    eprintln!("outcomes: {outcomes:?}");
}

/// Finishes at its cancel.
struct EndsOnCancel;

impl Process for EndsOnCancel {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            if let Event::Cancel = event {
                out.finish("cancelled from afar");
            }
        }
        Ok(())
    }
}

#[test]
fn terminate_and_cancel_reach_a_process_of_another_node() {
    let (wire, one, two) = pair();
    let t = two.spawn(target()).unwrap().pid();
    let (p, lines, _h) = probe(&one);
    tell(&one, p, Cmd::Monitor(t));
    assert!(settle(&one, p, &lines).is_empty());
    // From outside node 1, to a live process of node 2.
    one.terminate(t).unwrap();
    assert_eq!(next(&lines), format!("down {t} Terminated -"));
    // To an ended one, or a PID never used there: the request leaves, and
    // its node finds nothing to end.
    assert_eq!(one.terminate(t), Ok(()));
    assert_eq!(one.context().cancel(Pid::new(2, 4242)), Ok(()));

    // A cancel is handed to the process, which ends its own way.
    let mut c = two.spawn(EndsOnCancel).unwrap();
    one.context().cancel(c.pid()).unwrap();
    let outcome = c.wait_timeout(WAIT).expect("it ends");
    assert_eq!(outcome.downcast_ref::<&str>(), Some(&"cancelled from afar"));

    // A process that ignores its cancel keeps running.
    let stays = two.spawn(target()).unwrap().pid();
    tell(&one, p, Cmd::Monitor(stays));
    one.context().cancel(stays).unwrap();
    assert!(settle(&one, p, &lines).is_empty(), "still running");

    // Node 2 cut off: the request cannot leave, and says so.
    wire.cut_off(2);
    assert_eq!(next(&lines), format!("down {stays} NodeDown -"));
    assert_eq!(
        one.terminate(stays),
        Err(sched::process::TerminateError::Unreachable(stays))
    );
    assert_eq!(
        one.context().cancel(stays),
        Err(sched::process::TerminateError::Unreachable(stays))
    );
}

#[test]
fn an_urgent_message_to_another_node_goes_as_its_message() {
    // Urgency orders the receiving node's mailbox; the wire carries the
    // message itself (a transport need not know the wrapper), and the
    // target reads it as sent.
    let (wire, one, two) = pair();
    let mut done = two.spawn(target()).expect("spawned");
    one.send(done.pid(), Urgent::new("finish")).expect("sent");
    done.wait_timeout(WAIT).expect("finished");
    assert_eq!(
        wire.urgent_on_the_wire
            .load(std::sync::atomic::Ordering::Relaxed),
        0
    );
    one.shutdown(WAIT);
    two.shutdown(WAIT);
}
