//! What a stress process does to its peers (monitors, links, cancels,
//! asks) and how it takes their notices (downs, exits, requests, replies,
//! cancels), logging each for the checker (`notices.rs`).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;
use std::time::Duration;

use sched::actor::{AskError, MonitorId, ReplyTo};
use sched::prelude::*;

use crate::notices::{
    Answer, AskRec, CancelRec, DownRec, ExitRec, LateExit, LinkRec, MonitorRec, ReplyRec,
    RequestRec,
};
use crate::observed::Observed;
use crate::process::{Awaiting, Stress};
use crate::script::{OnCancel, OnRequest};
use crate::shared::{lock, NOWHERE};

/// A process's dealings with its peers that outlive one step.
#[derive(Debug, Default)]
pub(crate) struct PeerState {
    /// Its monitors that it has not removed, with their serials.
    pub(crate) monitors: Vec<(MonitorId, u64)>,
    /// Requests taken apart in the last step, answered in the next.
    pub(crate) deferred: Vec<(u64, ReplyTo)>,
    /// Exits seen, by sender.
    exits_from: HashMap<Pid, usize>,
    /// It has called `trap_exits(true)`.
    pub(crate) trapping: bool,
    /// It saw a cancel and finishes at once.
    pub(crate) finishing: bool,
    /// The peers it linked to and has not unlinked since.
    pub(crate) linked: Vec<Pid>,
    /// Peers it unlinked and whose unlink marker it has seen, with the
    /// serial drawn before that `unlink` was called (the latest).
    pub(crate) unlinked: HashMap<Pid, u64>,
    /// The monitors (serials) whose down it saw, and those it removed.
    pub(crate) downs_seen: HashSet<u64>,
    pub(crate) demonitored: HashSet<u64>,
    /// Removes a monitor after the next event it reads.
    pub(crate) demonitor_mid_batch: bool,
    /// A cancelled peer it unlinks once it closes, and how many more
    /// steps it polls for that.
    pub(crate) unlink_when_closed: Option<(Pid, u32)>,
    /// A timer it cancels after the next event it reads, with its tag.
    pub(crate) timer_mid_batch: Option<(TimerId, u64)>,
    /// The tags of timers whose event it saw, and of those `cancel_timer`
    /// cancelled (returned `true`).
    pub(crate) timers_seen: HashSet<u64>,
    pub(crate) timers_cancelled: HashSet<u64>,
}

impl PeerState {
    /// What the next instance of an upgraded process takes over (a
    /// deferred request is dropped with this one: its asker gets
    /// `NoReply`).
    pub(crate) fn handed_over(&self) -> PeerState {
        PeerState {
            monitors: self.monitors.clone(),
            deferred: Vec::new(),
            exits_from: self.exits_from.clone(),
            trapping: self.trapping,
            finishing: false,
            linked: self.linked.clone(),
            unlinked: self.unlinked.clone(),
            downs_seen: self.downs_seen.clone(),
            demonitored: self.demonitored.clone(),
            demonitor_mid_batch: false,
            unlink_when_closed: None,
            timer_mid_batch: None,
            timers_seen: self.timers_seen.clone(),
            timers_cancelled: self.timers_cancelled.clone(),
        }
    }
}

/// What a peer knows of `target` before it acts on it: whether it has
/// stepped (so its PID is registered).
fn stepped(observed: &Option<Arc<Observed>>) -> bool {
    observed.as_ref().is_some_and(|o| o.steps.load(SeqCst) > 0)
}

/// Whether `target`, which had stepped before the call, still had an
/// open instance after it: it had certainly not ended during the call.
pub(crate) fn still_open(observed: &Option<Arc<Observed>>) -> bool {
    observed.as_ref().is_some_and(|o| o.open.load(SeqCst) > 0)
}

impl Stress {
    /// Traps exits, at the start of the first step.
    pub(crate) fn trap_exits(&mut self, out: &mut Output<'_>) {
        if !self.peer.trapping {
            out.trap_exits(true);
            self.peer.trapping = true;
            self.shared.traps(self.pid);
        }
    }

    /// Answers the requests deferred by the last step.
    pub(crate) fn answer_deferred(&mut self, deferred: Vec<(u64, ReplyTo)>) {
        for (serial, reply) in deferred {
            self.log.peers.replied.push(serial);
            reply.reply(serial);
        }
    }

    /// A notice that `target` ended with a real reason must come after its
    /// last `close`.
    fn after_close(&mut self, what: &str, target: Pid, reason: ExitReason) {
        if reason != ExitReason::NoProcess && still_open(&self.shared.observed(target)) {
            self.violation(format!(
                "{what} from {target} ({reason:?}) before its close"
            ));
        }
    }

    /// Takes a notice from a peer; gives back any other event.
    pub(crate) fn see_peer(&mut self, event: Event) -> Option<Event> {
        let me = self.pid;
        match event {
            Event::Down(down) => {
                let serial = lock(&self.shared.monitor_serials)
                    .get(&down.monitor)
                    .copied();
                let Some(serial) = serial else {
                    self.violation(format!("a down for a monitor never set: {down:?}"));
                    return None;
                };
                if down.monitor.target() != down.pid {
                    self.violation(format!("a down whose monitor watches another: {down:?}"));
                }
                self.after_close("a down", down.pid, down.reason);
                if self.peer.demonitored.contains(&serial) {
                    self.violation(format!(
                        "a down of monitor {serial} (of {}) after it removed that monitor",
                        down.pid
                    ));
                }
                self.peer.downs_seen.insert(serial);
                self.log.peers.downs.push(DownRec {
                    serial,
                    at: me,
                    target: down.pid,
                    reason: down.reason,
                    dead: false,
                });
                if matches!(self.awaiting, Awaiting::Down(s) if s == serial) {
                    self.awaiting = Awaiting::Nothing;
                }
            }
            Event::Exit { pid, reason, .. } => {
                self.after_close("an exit", pid, reason);
                if let Some(&unlink_seq) = self.peer.unlinked.get(&pid) {
                    // Queued after the marker the unlink sent: after the
                    // unlink returned (unless relinked since, which the
                    // checker sees).
                    self.log.peers.late_exits.push(LateExit {
                        at: me,
                        from: pid,
                        reason,
                        unlink_seq,
                    });
                }
                self.log.peers.exits.push(ExitRec {
                    at: me,
                    from: pid,
                    reason,
                    dead: false,
                });
                let seen = self.peer.exits_from.entry(pid).or_default();
                *seen += 1;
                if matches!(self.awaiting, Awaiting::Exit { from, seen: before } if from == pid && *seen > before)
                {
                    self.awaiting = Awaiting::Nothing;
                }
            }
            Event::Request(request) => {
                let Some(&serial) = request.payload::<u64>() else {
                    self.violation(format!("a request that is not a serial: {request:?}"));
                    return None;
                };
                self.log.peers.requests.push(RequestRec {
                    serial,
                    at: me,
                    dead: false,
                });
                let on_request = self.script.as_ref().map(|s| s.on_request);
                match on_request {
                    Some(OnRequest::Reply) => {
                        self.log.peers.replied.push(serial);
                        request.reply(serial);
                    }
                    Some(OnRequest::Later) => {
                        let (_question, reply) = request.into_parts();
                        self.peer.deferred.push((serial, reply));
                    }
                    Some(OnRequest::Drop) | None => drop(request),
                }
            }
            Event::Reply {
                id,
                result,
                question,
            } => {
                let serial = lock(&self.shared.ask_serials).get(&id).copied();
                let Some(serial) = serial else {
                    self.violation(format!("a reply to an ask never made: {id:?}"));
                    return None;
                };
                self.log.peers.replies.push(ReplyRec {
                    serial,
                    at: me,
                    answer: answer(result, question),
                    dead: false,
                });
                if matches!(self.awaiting, Awaiting::Reply(s) if s == serial) {
                    self.awaiting = Awaiting::Nothing;
                }
            }
            Event::Timer { tag, .. } => {
                if self.peer.timers_cancelled.contains(&tag.0) {
                    self.violation(format!(
                        "the Timer of {tag} reached a step after cancel_timer returned true"
                    ));
                }
                if !self.peer.timers_seen.insert(tag.0) {
                    self.violation(format!("the Timer of {tag} reached a step twice"));
                }
                self.log.peers.timers_seen += 1;
            }
            Event::Cancel => {
                self.log.peers.cancels_seen += 1;
                if self.script.as_ref().map(|s| s.on_cancel) == Some(OnCancel::Finish) {
                    self.peer.finishing = true;
                }
            }
            other => return Some(other),
        }
        None
    }

    /// Monitors a random peer; returns whether the step waits for it.
    pub(crate) fn monitor_peer(&mut self, out: &mut Output<'_>, wait: bool) -> bool {
        let target = self.shared.random_peer(&mut self.rng);
        let observed = self.shared.observed(target);
        let stepped = stepped(&observed);
        let id = out.monitor(target);
        let live = stepped && still_open(&observed);
        let serial = self.shared.next_serial();
        lock(&self.shared.monitor_serials).insert(id, serial);
        self.peer.monitors.push((id, serial));
        let wait = wait && target.id() > self.pid.id();
        self.log.peers.monitors.push(MonitorRec {
            serial,
            watcher: self.pid,
            target,
            wait,
            live,
        });
        if wait {
            self.awaiting = Awaiting::Down(serial);
        }
        wait
    }

    /// Removes one of its monitors, if it has any.
    pub(crate) fn demonitor(&mut self, out: &mut Output<'_>) {
        if self.peer.monitors.is_empty() {
            return;
        }
        let at = self.rng.below(self.peer.monitors.len() as u64) as usize;
        self.demonitor_at(out, at);
    }

    /// Links to a process that traps exits, a PID on no node, or itself;
    /// returns whether the step waits for the exit.
    pub(crate) fn link_peer(&mut self, out: &mut Output<'_>, wait: bool) -> bool {
        let target = match self.rng.below(5) {
            0 => self.pid,
            1 => Pid::new(NOWHERE, self.rng.range(1, 1_000)),
            _ => self
                .shared
                .random_trapping(&mut self.rng)
                .unwrap_or(self.pid),
        };
        let observed = self.shared.observed(target);
        let stepped = stepped(&observed);
        out.link(target);
        let seq = self.shared.next_serial();
        let live = stepped && still_open(&observed);
        let wait = wait && target.id() > self.pid.id();
        self.peer.linked.push(target);
        self.log.peers.links.push(LinkRec {
            from: self.pid,
            to: target,
            wait,
            live,
            seq,
        });
        if wait {
            let seen = self.peer.exits_from.get(&target).copied().unwrap_or(0);
            self.awaiting = Awaiting::Exit { from: target, seen };
        }
        wait
    }

    /// Asks a random peer to finish.
    pub(crate) fn cancel_peer(&mut self, out: &mut Output<'_>) {
        let target = self.shared.random_peer(&mut self.rng);
        let accepted = out.context().cancel(target).is_ok();
        self.log.peers.cancels.push(CancelRec { target, accepted });
    }

    /// Asks a random peer for its serial back; returns whether the step
    /// waits for the reply (the ask was accepted).
    pub(crate) fn ask_peer(&mut self, out: &mut Output<'_>, timeout: u8) -> bool {
        let target = self.shared.random_peer(&mut self.rng);
        let serial = self.shared.next_serial();
        let timeout = Duration::from_millis(u64::from(timeout));
        let accepted = match out.ask(target, Box::new(serial) as Payload, timeout) {
            Ok(id) => {
                lock(&self.shared.ask_serials).insert(id.id(), serial);
                true
            }
            Err(e) => {
                let back = e.into_package().payload::<u64>().copied();
                if back != Some(serial) {
                    self.violation(format!("a refused ask {serial} handed back {back:?}"));
                }
                false
            }
        };
        self.log.peers.asks.push(AskRec {
            serial,
            asker: self.pid,
            target,
            accepted,
        });
        if accepted {
            self.awaiting = Awaiting::Reply(serial);
        }
        accepted
    }
}

/// What a reply says, for the log.
pub(crate) fn answer(result: Result<Payload, AskError>, question: Option<Payload>) -> Answer {
    match result {
        Ok(value) => match value.downcast_ref::<u64>() {
            Some(&x) => Answer::Value(x),
            None => Answer::Odd("a value that is not a u64".into()),
        },
        Err(AskError::TimedOut) => Answer::Timeout,
        Err(AskError::NoReply) => Answer::NoReply,
        Err(AskError::Unread) => {
            Answer::Unread(question.and_then(|q| q.downcast_ref::<u64>().copied()))
        }
        Err(other) => Answer::Odd(format!("{other:?}")),
    }
}
