//! What the harness observes of each process: its log, handed over by
//! `close`, and the counters the harness and its peers read while it runs.

use std::sync::atomic::{
    AtomicBool, AtomicI32, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering::SeqCst,
};
use std::sync::Mutex;

use sched::message::SendErrorKind;

use crate::delayed_order::DelayedSent;
use crate::notices::{
    AskRec, CancelRec, DownRec, ExitRec, LateExit, LinkRec, MonitorRec, ReplyRec, RequestRec,
};
use crate::script::Kind;

/// What a process did and saw, handed to the checker by `close` (each
/// instance's, merged, when the process was upgraded).
#[derive(Debug, Default)]
pub(crate) struct Log {
    /// Commands yielded and dispatched: (tag, kind).
    pub(crate) issued: Vec<(u64, Kind)>,
    /// Tags yielded by the step that said done.
    pub(crate) discarded: Vec<u64>,
    /// Completions seen, by tag.
    pub(crate) seen: Vec<u64>,
    /// Messages `send` accepted, by id.
    pub(crate) sent: Vec<u64>,
    /// How many of `sent` answered a token.
    pub(crate) sent_solicited: u64,
    /// Messages `send` refused, by id, and why.
    pub(crate) refused: Vec<(u64, SendErrorKind)>,
    /// Messages received, by id.
    pub(crate) received: Vec<u64>,
    /// Messages asked for (tokens posted) and how many of them arrived.
    pub(crate) asked: u64,
    pub(crate) answered: u64,
    /// Children spawned from its steps.
    pub(crate) spawned: u64,
    /// Messages `send(After(..))` accepted (their ids are in `sent` too).
    pub(crate) delayed: Vec<DelayedSent>,
    /// How many `send(After(..))` refused (their ids are in `refused` too).
    pub(crate) delayed_refused: u64,
    /// Delayed messages whose timer `cancel_timer` cancelled (returned
    /// `true`): never to be delivered nor dead-lettered.
    pub(crate) cancelled: Vec<u64>,
    /// Delayed messages received, by id, in the order they arrived.
    pub(crate) delayed_received: Vec<u64>,
    /// Delayed messages received after every instance of their sender had
    /// closed.
    pub(crate) after_sender_ended: u64,
    /// Accepted messages carrying an armed bomb, and how many of those
    /// were delayed messages it cancelled (the scheduler dropped them).
    pub(crate) bombs_sent: u64,
    pub(crate) bombs_cancelled: u64,
    /// What it found wrong in what the scheduler gave it.
    pub(crate) violations: Vec<String>,
    /// Its monitors, links, cancels and asks, and the notices it saw.
    pub(crate) peers: PeerLog,
}

/// What a process did to and saw from its peers.
#[derive(Debug, Default)]
pub(crate) struct PeerLog {
    pub(crate) monitors: Vec<MonitorRec>,
    pub(crate) demonitors: Vec<(u64, bool)>,
    pub(crate) downs: Vec<DownRec>,
    pub(crate) links: Vec<LinkRec>,
    pub(crate) exits: Vec<ExitRec>,
    pub(crate) cancels: Vec<CancelRec>,
    pub(crate) cancels_seen: u32,
    /// It finished with `finish` because it saw a cancel.
    pub(crate) finished_on_cancel: bool,
    pub(crate) asks: Vec<AskRec>,
    pub(crate) replies: Vec<ReplyRec>,
    pub(crate) requests: Vec<RequestRec>,
    /// The request serials it replied to.
    pub(crate) replied: Vec<u64>,
    /// `unlink` calls, and the markers it saw after them.
    pub(crate) unlinks: u64,
    pub(crate) markers_seen: u64,
    /// Unlinks of a peer that had an open instance before the call and
    /// none after it (its end raced the unlink).
    pub(crate) unlinks_racing: u64,
    /// Exits seen after an unlink's marker from the peer it unlinked.
    pub(crate) late_exits: Vec<LateExit>,
    /// Monitors removed in the middle of a batch of events.
    pub(crate) mid_batch_demonitors: u64,
    /// Timer events seen, and timers `cancel_timer` cancelled.
    pub(crate) timers_seen: u64,
    pub(crate) timers_cancelled: u64,
}

impl PeerLog {
    fn merge(&mut self, later: PeerLog) {
        self.monitors.extend(later.monitors);
        self.demonitors.extend(later.demonitors);
        self.downs.extend(later.downs);
        self.links.extend(later.links);
        self.exits.extend(later.exits);
        self.cancels.extend(later.cancels);
        self.cancels_seen += later.cancels_seen;
        self.finished_on_cancel |= later.finished_on_cancel;
        self.asks.extend(later.asks);
        self.replies.extend(later.replies);
        self.requests.extend(later.requests);
        self.replied.extend(later.replied);
        self.unlinks += later.unlinks;
        self.markers_seen += later.markers_seen;
        self.unlinks_racing += later.unlinks_racing;
        self.late_exits.extend(later.late_exits);
        self.mid_batch_demonitors += later.mid_batch_demonitors;
        self.timers_seen += later.timers_seen;
        self.timers_cancelled += later.timers_cancelled;
    }
}

impl Log {
    /// Adds what a later instance of the same process did.
    pub(crate) fn merge(&mut self, later: Log) {
        self.issued.extend(later.issued);
        self.discarded.extend(later.discarded);
        self.seen.extend(later.seen);
        self.sent.extend(later.sent);
        self.sent_solicited += later.sent_solicited;
        self.refused.extend(later.refused);
        self.received.extend(later.received);
        self.asked += later.asked;
        self.answered += later.answered;
        self.spawned += later.spawned;
        self.delayed.extend(later.delayed);
        self.delayed_refused += later.delayed_refused;
        self.cancelled.extend(later.cancelled);
        self.delayed_received.extend(later.delayed_received);
        self.after_sender_ended += later.after_sender_ended;
        self.bombs_sent += later.bombs_sent;
        self.bombs_cancelled += later.bombs_cancelled;
        self.violations.extend(later.violations);
        self.peers.merge(later.peers);
    }
}

/// `Observed::terminate`: nobody tried to terminate the process.
pub(crate) const NOT_TERMINATED: u8 = 0;
/// `terminate` returned `Ok`: the process may end `Terminated`.
pub(crate) const TERMINATE_ACCEPTED: u8 = 1;
/// `terminate` returned `Ended`: the process had already ended.
pub(crate) const TERMINATE_TOO_LATE: u8 = 2;

/// What the harness observes of one process while it runs.
#[derive(Debug, Default)]
pub(crate) struct Observed {
    /// Set while a worker is inside the process's `step`.
    pub(crate) running: AtomicBool,
    /// Instances whose `init` succeeded and whose `close` has not run: a
    /// peer that reads more than 0 knows the process has not ended yet.
    pub(crate) open: AtomicI32,
    /// Steps that began while another step of the process was running.
    pub(crate) overlaps: AtomicU64,
    pub(crate) steps: AtomicU64,
    pub(crate) steps_after_close: AtomicU64,
    /// `init` and `close` calls, over every instance of the process (an
    /// upgrade adds one).
    pub(crate) inits: AtomicU32,
    pub(crate) closes: AtomicU32,
    /// Upgrades whose new instance's `init` succeeded, and failed.
    pub(crate) upgrades: AtomicU32,
    pub(crate) failed_upgrades: AtomicU32,
    /// The index of the next op, for the report of a hang.
    pub(crate) position: AtomicUsize,
    /// One of `NOT_TERMINATED`, `TERMINATE_ACCEPTED`, `TERMINATE_TOO_LATE`.
    pub(crate) terminate: AtomicU8,
    /// The process's log, from its `close`.
    pub(crate) log: Mutex<Option<Log>>,
}

impl Observed {
    /// Records what `terminate` answered; an accepted terminate is kept
    /// over a later "too late".
    pub(crate) fn terminate_result(&self, accepted: bool) {
        if accepted {
            self.terminate.store(TERMINATE_ACCEPTED, SeqCst);
        } else {
            let _ =
                self.terminate
                    .compare_exchange(NOT_TERMINATED, TERMINATE_TOO_LATE, SeqCst, SeqCst);
        }
    }
}
