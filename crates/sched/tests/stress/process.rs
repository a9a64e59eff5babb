//! The stress process: it runs its script and logs everything it sends,
//! yields and sees, so that the checker can account for every message and
//! every completion once the round is over.

use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;

use sched::prelude::*;

pub(crate) use crate::message::Msg;
pub(crate) use crate::observed::{Log, Observed, TERMINATE_ACCEPTED, TERMINATE_TOO_LATE};

use crate::handlers::{command, completed_as_expected, describe};
use crate::peers::PeerState;
use crate::rng::Rng;
use crate::script::{failure_message, panic_message, upgrade_failure_message, Kind, Op, Script};
use crate::shared::{lock, Shared};

/// The data of a yielded command.
#[derive(Debug)]
pub(crate) struct Yielded {
    pub(crate) tag: u64,
    pub(crate) issuer: Pid,
    /// Yielded by a step that also said done: it must never be dispatched.
    pub(crate) discarded: bool,
}

/// Clears the running flag when a step returns or unwinds.
struct Running<'a>(&'a AtomicBool);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.store(false, SeqCst);
    }
}

/// What the process waits for before it runs its next op.
#[derive(Debug)]
pub(crate) enum Awaiting {
    Nothing,
    /// The completions of these yields: (tag, kind).
    Completions(Vec<(u64, Kind)>),
    /// This many more solicited messages.
    Messages(u64),
    /// The down of the monitor with this serial.
    Down(u64),
    /// One more exit from `from` than the `seen` so far.
    Exit {
        from: Pid,
        seen: usize,
    },
    /// The reply to the ask with this serial.
    Reply(u64),
}

/// A process that runs a [`Script`].
#[derive(Debug)]
pub(crate) struct Stress {
    pub(crate) pid: Pid,
    pub(crate) script: Option<Script>,
    next: usize,
    pub(crate) rng: Rng,
    pub(crate) awaiting: Awaiting,
    pub(crate) log: Log,
    observed: Arc<Observed>,
    pub(crate) shared: Arc<Shared>,
    pub(crate) peer: PeerState,
}

impl Stress {
    /// A process that takes its script from `init`'s input.
    pub(crate) fn new(observed: Arc<Observed>, shared: Arc<Shared>) -> Self {
        Stress {
            pid: Pid::local(0),
            script: None,
            next: 0,
            rng: Rng::new(0),
            awaiting: Awaiting::Nothing,
            log: Log::default(),
            observed,
            shared,
            peer: PeerState::default(),
        }
    }

    pub(crate) fn violation(&mut self, what: String) {
        self.log.violations.push(what);
    }

    fn see(&mut self, event: Event) {
        let Some(event) = self.see_peer(event) else {
            return;
        };
        match event {
            Event::Completion { tag, result } => {
                self.log.seen.push(tag.0);
                let Awaiting::Completions(waiting) = &mut self.awaiting else {
                    return self.violation(format!(
                        "a completion of {tag} while it waits for {:?}",
                        self.awaiting
                    ));
                };
                let Some(i) = waiting.iter().position(|(t, _)| *t == tag.0) else {
                    let waiting = format!("{waiting:?}");
                    return self.violation(format!(
                        "a completion of {tag}, which it does not wait for (waits for {waiting})"
                    ));
                };
                let (_, kind) = waiting.swap_remove(i);
                if waiting.is_empty() {
                    self.awaiting = Awaiting::Nothing;
                }
                if !completed_as_expected(kind, tag.0, &result) {
                    self.violation(format!(
                        "{tag} ({kind:?}) completed with {}",
                        describe(&result)
                    ));
                }
            }
            Event::Message(mut package) => {
                let target = package.target();
                let source = package.source();
                let Some(msg) = package.payload_mut::<Msg>() else {
                    return self.violation(format!("a message that is not a Msg: {package:?}"));
                };
                // Taken apart here: its drop must not go off in this step.
                msg.bomb.defuse();
                let (id, to, solicited) = (msg.id, msg.to, msg.solicited);
                let (delayed, marker) = (msg.delayed, msg.marker);
                self.log.received.push(id);
                if delayed {
                    self.received_delayed(id, source);
                }
                if let Some(marker) = marker {
                    self.saw_marker(id, source, marker);
                }
                if target != self.pid || to != self.pid {
                    self.violation(format!(
                        "message {id} addressed to {to} (package target {target}) was delivered here"
                    ));
                }
                if solicited {
                    match &mut self.awaiting {
                        Awaiting::Messages(left) => {
                            self.log.answered += 1;
                            *left -= 1;
                            if *left == 0 {
                                self.awaiting = Awaiting::Nothing;
                            }
                        }
                        other => {
                            let other = format!("{other:?}");
                            self.violation(format!(
                                "solicited message {id} arrived while it waits for {other}"
                            ));
                        }
                    }
                }
            }
            other => self.violation(format!("an event no script asks for: {other:?}")),
        }
    }

    /// Runs ops until one ends the step.
    fn run_ops(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        loop {
            if self.peer.finishing {
                self.log.peers.finished_on_cancel = true;
                out.finish(self.pid.id());
                return Ok(());
            }
            if !matches!(self.awaiting, Awaiting::Nothing) {
                out.idle();
                return Ok(());
            }
            if self.poll_unlink(out) {
                out.continue_();
                return Ok(());
            }
            let script = self.script.as_ref().expect("init stored the script");
            let Some(op) = script.ops.get(self.next).cloned() else {
                self.violation("stepped again after its ending op".into());
                out.idle();
                return Ok(());
            };
            self.next += 1;
            self.observed.position.store(self.next, SeqCst);
            match op {
                Op::Continue => {
                    out.continue_();
                    return Ok(());
                }
                Op::Yield {
                    kinds,
                    and_continue,
                } => {
                    let mut waiting = Vec::with_capacity(kinds.len());
                    for kind in kinds {
                        let tag = self.shared.next_tag();
                        out.yield_command(command(kind), Tag(tag), self.yielded(tag, false));
                        self.log.issued.push((tag, kind));
                        waiting.push((tag, kind));
                    }
                    if and_continue {
                        // The yields win: the step still waits for them.
                        out.continue_();
                    }
                    self.awaiting = Awaiting::Completions(waiting);
                    return Ok(());
                }
                Op::Idle(n) => {
                    let n = u64::from(n);
                    self.shared.ask(self.pid, n);
                    self.log.asked += n;
                    self.awaiting = Awaiting::Messages(n);
                    out.idle();
                    return Ok(());
                }
                Op::Send(n) => {
                    for _ in 0..n {
                        self.send(out);
                    }
                }
                Op::Spawn => self.spawn(out),
                Op::Done => {
                    out.finish(self.pid.id());
                    return Ok(());
                }
                Op::DoneDiscarding => {
                    let tag = self.shared.next_tag();
                    out.yield_command(command(Kind::Sync), Tag(tag), self.yielded(tag, true));
                    self.log.discarded.push(tag);
                    out.finish(self.pid.id());
                    return Ok(());
                }
                Op::Upgrade => {
                    let next = self.next_instance();
                    out.upgrade(next, "upgrade", self.next);
                    return Ok(());
                }
                Op::UpgradeFail => {
                    let next = self.next_instance();
                    out.upgrade(next, "upgrade-fail", ());
                    return Ok(());
                }
                Op::MonitorPeer { wait } => {
                    if self.monitor_peer(out, wait) {
                        out.idle();
                        return Ok(());
                    }
                }
                Op::Demonitor => self.demonitor(out),
                Op::LinkPeer { wait } => {
                    if self.link_peer(out, wait) {
                        out.idle();
                        return Ok(());
                    }
                }
                Op::CancelPeer => self.cancel_peer(out),
                Op::AskPeer { timeout } => {
                    if self.ask_peer(out, timeout) {
                        out.idle();
                        return Ok(());
                    }
                }
                Op::SendAfter(n) => self.send_after(out, n),
                Op::UnlinkPeer => {
                    if self.unlink_peer(out) {
                        out.continue_();
                        return Ok(());
                    }
                }
                Op::DemonitorMidBatch => {
                    self.arm_mid_batch(out);
                    out.continue_();
                    return Ok(());
                }
                Op::Fail => return Err(failure_message(self.pid.id()).into()),
                Op::Panic => panic!("{}", panic_message(self.pid.id())),
            }
        }
    }

    /// The instance an upgrade hands over to: the same script, position
    /// and random state, a log of its own (this one's goes to the checker
    /// from this one's `close`).
    fn next_instance(&self) -> Stress {
        Stress {
            pid: self.pid,
            script: self.script.clone(),
            next: self.next,
            rng: self.rng.clone(),
            awaiting: Awaiting::Nothing,
            log: Log::default(),
            observed: self.observed.clone(),
            shared: self.shared.clone(),
            peer: self.peer.handed_over(),
        }
    }

    fn yielded(&self, tag: u64, discarded: bool) -> Payload {
        Box::new(Yielded {
            tag,
            issuer: self.pid,
            discarded,
        })
    }
}

impl Process for Stress {
    type Done = Payload;
    fn init(&mut self, cx: &InitContext, method: &str, input: Payload) -> Result<(), InitError> {
        self.observed.inits.fetch_add(1, SeqCst);
        match method {
            "run" => {}
            "upgrade" => {
                // The previous instance ran its ops up to here.
                let at = input
                    .downcast::<usize>()
                    .map_err(|_| InitError::failed("an upgrade takes the op index"))?;
                if cx.pid() != self.pid || *at != self.next {
                    self.violation(format!(
                        "upgraded under {} at op {at}, the old instance was {} at op {}",
                        cx.pid(),
                        self.pid,
                        self.next
                    ));
                }
                self.observed.upgrades.fetch_add(1, SeqCst);
                self.observed.open.fetch_add(1, SeqCst);
                return Ok(());
            }
            "upgrade-fail" => {
                self.observed.failed_upgrades.fetch_add(1, SeqCst);
                return Err(InitError::failed(upgrade_failure_message(self.pid.id())));
            }
            _ => return Err(InitError::unknown_method(method)),
        }
        let script = input
            .downcast::<Script>()
            .map_err(|_| InitError::failed("injected: the input is not a script"))?;
        self.pid = cx.pid();
        self.rng = Rng::new(script.seed);
        self.script = Some(*script);
        self.observed.open.fetch_add(1, SeqCst);
        Ok(())
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        let observed = self.observed.clone();
        if observed.running.swap(true, SeqCst) {
            observed.overlaps.fetch_add(1, SeqCst);
        }
        let _running = Running(&observed.running);
        observed.steps.fetch_add(1, SeqCst);
        // Every instance that was initialised has been closed: this step
        // runs on a closed process. (An upgraded process's old instances
        // are closed; its current one is not.)
        if observed.closes.load(SeqCst) >= observed.inits.load(SeqCst) {
            observed.steps_after_close.fetch_add(1, SeqCst);
        }
        self.trap_exits(out);
        let deferred = std::mem::take(&mut self.peer.deferred);
        for event in events {
            self.see(event);
            self.mid_batch(out, true);
        }
        self.mid_batch(out, false);
        self.answer_deferred(deferred);
        self.run_ops(out)
    }

    fn close(&mut self) {
        self.observed.open.fetch_sub(1, SeqCst);
        self.observed.closes.fetch_add(1, SeqCst);
        let log = std::mem::take(&mut self.log);
        let mut slot = lock(&self.observed.log);
        match &mut *slot {
            // An earlier instance of an upgraded process.
            Some(earlier) => earlier.merge(log),
            None => *slot = Some(log),
        }
    }
}
