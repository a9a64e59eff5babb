//! Random scripts: what each stress process does, op by op, and the
//! ending that implies.

use crate::rng::Rng;

/// How the handler of a yielded command completes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Kind {
    /// Completed inside the handler call.
    Sync,
    /// Completed later, from a completer thread.
    Async,
    /// Failed (a completion with an error) inside the handler call.
    SyncFail,
    /// Failed later, from a completer thread.
    AsyncFail,
    /// Refused by the handler: `Err(completer.reject(..))`.
    Reject,
    /// The handler drops its completer: the process gets `Dropped`.
    SyncDrop,
    /// A completer thread drops the completer.
    AsyncDrop,
    /// The handler panics.
    HandlerPanic,
    /// No handler is registered for the command.
    NoHandler,
    /// The handler keeps the completer until the round is over: the process
    /// waits until it is terminated, and the late completion is stale.
    Hold,
}

impl Kind {
    /// Every kind, for tallies.
    pub(crate) const ALL: [Kind; 10] = [
        Kind::Sync,
        Kind::Async,
        Kind::SyncFail,
        Kind::AsyncFail,
        Kind::Reject,
        Kind::SyncDrop,
        Kind::AsyncDrop,
        Kind::HandlerPanic,
        Kind::NoHandler,
        Kind::Hold,
    ];

    fn random(rng: &mut Rng, doomed: bool) -> Kind {
        match rng.below(if doomed { 21 } else { 20 }) {
            0..=4 => Kind::Sync,
            5..=9 => Kind::Async,
            10 => Kind::SyncFail,
            11 | 12 => Kind::AsyncFail,
            13 => Kind::Reject,
            14 => Kind::SyncDrop,
            15 | 16 => Kind::AsyncDrop,
            17 => Kind::HandlerPanic,
            18 | 19 => Kind::NoHandler,
            _ => Kind::Hold,
        }
    }
}

/// One op of a script. A step runs ops until one makes it return (`Send`,
/// `Spawn`, `Demonitor`, `CancelPeer`, `SendAfter`, `UnlinkPeer` never do; `MonitorPeer`, `LinkPeer`
/// and `AskPeer` do when they wait).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Op {
    /// Ask to run again.
    Continue,
    /// Yield one command per kind and wait for all their completions;
    /// `and_continue` also asks to continue, which the yields override.
    Yield {
        kinds: Vec<Kind>,
        and_continue: bool,
    },
    /// Ask for this many messages and wait until they have all arrived.
    /// Other processes (their `Send` ops) or the feeder thread send them.
    Idle(u8),
    /// Send this many messages: to processes that asked for one if any are
    /// waiting, otherwise to a random PID (live, ended or never used).
    Send(u8),
    /// Spawn a child with a random script.
    Spawn,
    /// Hand over to a new instance of the process (`Output::upgrade`),
    /// which takes the script from here under the same PID: messages sent
    /// to it before, during and after the upgrade must all arrive.
    Upgrade,
    /// Finish with the process's id.
    Done,
    /// Yield a command and finish in the same step: the yield must be
    /// discarded, never dispatched.
    DoneDiscarding,
    /// Return an error from `step`.
    Fail,
    /// Panic inside `step`.
    Panic,
    /// Upgrade to an instance whose `init` fails: the process ends with
    /// `ExitError::Upgrade`, the old instance closed once, the new never.
    UpgradeFail,
    /// Monitor a random process of the round (or a PID with no process);
    /// `wait` waits for its down if the target's id is above this one's.
    MonitorPeer { wait: bool },
    /// Remove one of its monitors, picked at random.
    Demonitor,
    /// Link to a process that traps exits, to a PID on a node that does
    /// not exist, or to itself; `wait` as for `MonitorPeer`.
    LinkPeer { wait: bool },
    /// Ask a random process (or a PID with no process) to finish.
    CancelPeer,
    /// Ask a random process its request serial back, and wait for the
    /// reply, the timeout (in milliseconds) at the latest.
    AskPeer { timeout: u8 },
    /// Send this many messages with `send(After(..))` (a random delay of 0 to
    /// 5 ms each) to one target: a process that asked for them if any
    /// waits, otherwise a random peer (which may end before the deadline).
    /// Some carry a payload whose `Drop` panics; some are cancelled at once.
    SendAfter(u8),
    /// Unlink a peer with a higher id (one it linked to, or a trapping
    /// process), then send itself a marker: an exit from that peer seen
    /// after the marker came after `unlink` returned.
    UnlinkPeer,
    /// Remove a monitor in the middle of the next step's batch of events
    /// (preferring one whose target has ended: its down may be in the
    /// batch), and ask to continue; now and then also set a short timer
    /// and cancel it there, after sending itself a message that comes
    /// first in that batch.
    DemonitorMidBatch,
}

/// What a process does with a cancel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OnCancel {
    /// Carries on with its script.
    Ignore,
    /// Finishes at once with `done(id)`.
    Finish,
}

/// What a process does with a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OnRequest {
    /// Replies in the step that sees it.
    Reply,
    /// Drops it unanswered.
    Drop,
    /// Takes it apart and replies in its next step.
    Later,
}

/// How a process that is not terminated ends, given its script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ending {
    /// `Ok(id)`.
    Done,
    /// `ExitError::Step` with the process's failure message.
    Fail,
    /// `ExitError::Panicked` with the process's panic message.
    Panic,
    /// `ExitError::Upgrade` with the process's upgrade failure message.
    UpgradeFail,
    /// It waits on a held completer: it can only end terminated.
    Held,
}

/// A process's script: ops that end with exactly one ending op (or with a
/// `Hold` yield that nothing completes), plus the seed of its own choices
/// (stray targets, children).
#[derive(Debug, Clone)]
pub(crate) struct Script {
    pub(crate) ops: Vec<Op>,
    pub(crate) seed: u64,
    /// How deep in the spawn tree it is (0 for the harness's processes).
    pub(crate) depth: u8,
    /// The harness will terminate it at some random moment.
    pub(crate) doomed: bool,
    pub(crate) on_cancel: OnCancel,
    pub(crate) on_request: OnRequest,
}

/// Spawn trees stop at this depth.
const MAX_DEPTH: u8 = 2;

impl Script {
    /// A random script for a process `depth` levels down the spawn tree.
    pub(crate) fn random(rng: &mut Rng, depth: u8) -> Script {
        let doomed = rng.chance(1, 8);
        let len = if depth == 0 {
            rng.below(9)
        } else {
            rng.below(5)
        };
        let mut ops = Vec::with_capacity(len as usize + 2);
        let mut held = false;
        for _ in 0..len {
            let op = match rng.below(30) {
                0..=2 => Op::Continue,
                3..=7 => {
                    let n = rng.range(1, 3);
                    Op::Yield {
                        kinds: (0..n).map(|_| Kind::random(rng, doomed)).collect(),
                        and_continue: rng.chance(1, 4),
                    }
                }
                8..=10 => Op::Idle(rng.range(1, 3) as u8),
                11..=14 => Op::Send(rng.range(1, 2) as u8),
                15 if depth < MAX_DEPTH => Op::Spawn,
                16 if depth == 0 => Op::Spawn,
                17 => Op::Upgrade,
                18 | 19 => Op::MonitorPeer {
                    wait: rng.chance(1, 2),
                },
                20 => Op::Demonitor,
                21 | 22 => Op::LinkPeer {
                    wait: rng.chance(1, 2),
                },
                23 => Op::CancelPeer,
                24 => Op::AskPeer {
                    timeout: rng.range(1, 30) as u8,
                },
                25..=27 => Op::SendAfter(rng.range(1, 3) as u8),
                28 => Op::UnlinkPeer,
                29 => Op::DemonitorMidBatch,
                _ => Op::Continue,
            };
            held = matches!(&op, Op::Yield { kinds, .. } if kinds.contains(&Kind::Hold));
            ops.push(op);
            if held {
                // Nothing after a held yield runs.
                break;
            }
        }
        if !held && rng.chance(1, 4) {
            // Right before its end: the sender is gone before the deadline.
            ops.push(Op::SendAfter(rng.range(1, 3) as u8));
        }
        ops.push(match rng.below(21) {
            0..=10 => Op::Done,
            11 | 12 => Op::DoneDiscarding,
            13..=16 => Op::Fail,
            17 | 18 => Op::Panic,
            _ => Op::UpgradeFail,
        });
        let on_cancel = if rng.chance(1, 2) {
            OnCancel::Finish
        } else {
            OnCancel::Ignore
        };
        let on_request = match rng.below(3) {
            0 => OnRequest::Reply,
            1 => OnRequest::Drop,
            _ => OnRequest::Later,
        };
        Script {
            ops,
            seed: rng.next(),
            depth,
            doomed,
            on_cancel,
            on_request,
        }
    }

    /// How many upgrades it goes through if nobody terminates it.
    pub(crate) fn upgrades(&self) -> u32 {
        self.ops.iter().filter(|op| **op == Op::Upgrade).count() as u32
    }

    /// How the process ends if nobody terminates it.
    pub(crate) fn ending(&self) -> Ending {
        for op in &self.ops {
            match op {
                Op::Yield { kinds, .. } if kinds.contains(&Kind::Hold) => return Ending::Held,
                Op::Done | Op::DoneDiscarding => return Ending::Done,
                Op::Fail => return Ending::Fail,
                Op::Panic => return Ending::Panic,
                Op::UpgradeFail => return Ending::UpgradeFail,
                _ => {}
            }
        }
        unreachable!("every script ends with an ending op")
    }
}

/// The message a process fails with, so the checker can tell its error
/// from any other.
pub(crate) fn failure_message(id: u64) -> String {
    format!("injected: process {id} failed")
}

/// The message a process panics with (the panic hook keeps these quiet).
pub(crate) fn panic_message(id: u64) -> String {
    format!("injected: process {id} panicked")
}

/// The message the new instance's `init` fails with in an `UpgradeFail`.
pub(crate) fn upgrade_failure_message(id: u64) -> String {
    format!("injected: process {id} refused its upgrade")
}

/// The message the panicking handler panics with.
pub(crate) const HANDLER_PANIC: &str = "injected: handler panicked";

/// Whether a panic message is one the stress run injects on purpose.
pub(crate) fn is_injected_panic(message: &str) -> bool {
    message.starts_with("injected: ")
}
