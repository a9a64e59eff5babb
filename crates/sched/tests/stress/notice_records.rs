//! What the stress run records of the notices processes exchange (monitors
//! and their downs, links and their exits, cancels, asks, requests and
//! replies) and the counts it reports; `notices.rs` checks them.

use sched::prelude::*;

/// A monitor a process set (`serial` is unique within the round).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MonitorRec {
    pub(crate) serial: u64,
    pub(crate) watcher: Pid,
    pub(crate) target: Pid,
    /// The watcher waited for its down.
    pub(crate) wait: bool,
    /// The target was certainly registered and not yet ended when the
    /// monitor was set (it had stepped before, an instance was still open
    /// after): the down must give its real reason.
    pub(crate) live: bool,
}

/// A down notification, seen by a step or dead-lettered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DownRec {
    pub(crate) serial: u64,
    /// The process it reached.
    pub(crate) at: Pid,
    pub(crate) target: Pid,
    pub(crate) reason: ExitReason,
    pub(crate) dead: bool,
}

/// A link a process made (`live` as for [`MonitorRec`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LinkRec {
    pub(crate) from: Pid,
    pub(crate) to: Pid,
    pub(crate) wait: bool,
    pub(crate) live: bool,
    /// A round serial drawn right after `link` returned: a link whose
    /// serial is below an unlink's (drawn before `unlink` was called) was
    /// made before that unlink began, and the unlink removed it.
    pub(crate) seq: u64,
}

/// An exit that process `at` saw from `from` after the marker of its
/// unlink of `from` (whose serial, drawn before `unlink` was called, is
/// `unlink_seq`): the exit was queued after that unlink returned. It is
/// a violation unless a link between the two was made (or was being made)
/// after the unlink began.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LateExit {
    pub(crate) at: Pid,
    pub(crate) from: Pid,
    pub(crate) reason: ExitReason,
    pub(crate) unlink_seq: u64,
}

/// An exit signal, seen by a step or dead-lettered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ExitRec {
    pub(crate) at: Pid,
    pub(crate) from: Pid,
    pub(crate) reason: ExitReason,
    pub(crate) dead: bool,
}

/// A cancel a process asked for, and whether `cancel` accepted it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CancelRec {
    pub(crate) target: Pid,
    pub(crate) accepted: bool,
}

/// An ask; its request carries `serial`, and a reply answers it back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AskRec {
    pub(crate) serial: u64,
    pub(crate) asker: Pid,
    pub(crate) target: Pid,
    pub(crate) accepted: bool,
}

/// What a reply said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Answer {
    Value(u64),
    Timeout,
    NoReply,
    /// `Unread`, with the question handed back (its serial, if a u64).
    Unread(Option<u64>),
    /// Anything else (already wrong).
    Odd(String),
}

/// A reply, seen by a step or dead-lettered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ReplyRec {
    pub(crate) serial: u64,
    pub(crate) at: Pid,
    pub(crate) answer: Answer,
    pub(crate) dead: bool,
}

/// A request, seen by a step or dead-lettered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RequestRec {
    pub(crate) serial: u64,
    pub(crate) at: Pid,
    pub(crate) dead: bool,
}

/// A monitor set from outside at submission, and what it got by the end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OutsideRec {
    pub(crate) target: Pid,
    pub(crate) live: bool,
    pub(crate) got: Option<(Pid, ExitReason)>,
}

/// A process of the round, as the notices see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Party {
    pub(crate) pid: Pid,
    /// How it ended, as monitors must report it.
    pub(crate) reason: ExitReason,
    /// It did not end by its script (terminated, or finished on a
    /// cancel): what it waited for may not have come.
    pub(crate) loose: bool,
    pub(crate) cancels_seen: u32,
    /// The request serials it replied to.
    pub(crate) replied: Vec<u64>,
}

/// Everything a round recorded about notices.
#[derive(Debug, Default)]
pub(crate) struct Notices {
    pub(crate) parties: Vec<Party>,
    pub(crate) monitors: Vec<MonitorRec>,
    /// `demonitor` calls: (monitor serial, what it returned).
    pub(crate) demonitors: Vec<(u64, bool)>,
    pub(crate) downs: Vec<DownRec>,
    pub(crate) links: Vec<LinkRec>,
    pub(crate) exits: Vec<ExitRec>,
    pub(crate) cancels: Vec<CancelRec>,
    pub(crate) asks: Vec<AskRec>,
    pub(crate) replies: Vec<ReplyRec>,
    pub(crate) requests: Vec<RequestRec>,
    pub(crate) outside: Vec<OutsideRec>,
    pub(crate) late_exits: Vec<LateExit>,
    /// `unlink` calls, their markers seen, and monitors removed in the
    /// middle of a batch (counts only).
    pub(crate) unlinks: u64,
    pub(crate) unlinks_racing: u64,
    pub(crate) markers_seen: u64,
    pub(crate) mid_batch_demonitors: u64,
    pub(crate) timers_seen: u64,
    pub(crate) timers_cancelled: u64,
}

/// The totals the notice checks verified.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct NoticeCounts {
    pub(crate) monitors: u64,
    pub(crate) demonitors_removed: u64,
    pub(crate) downs: u64,
    pub(crate) downs_no_process: u64,
    pub(crate) links: u64,
    pub(crate) exits: u64,
    pub(crate) exits_no_process: u64,
    pub(crate) cancels_accepted: u64,
    pub(crate) cancels_seen: u64,
    pub(crate) asks_accepted: u64,
    pub(crate) asks_refused: u64,
    pub(crate) replies_value: u64,
    pub(crate) replies_timeout: u64,
    pub(crate) replies_no_reply: u64,
    pub(crate) replies_unread: u64,
    pub(crate) dead: u64,
    pub(crate) outside: u64,
    pub(crate) unlinks: u64,
    pub(crate) unlinks_racing: u64,
    pub(crate) markers_seen: u64,
    /// Exits seen after an unlink's marker that a later link explains.
    pub(crate) late_exits_relinked: u64,
    pub(crate) mid_batch_demonitors: u64,
    pub(crate) timers_seen: u64,
    pub(crate) timers_cancelled: u64,
}

impl NoticeCounts {
    pub(crate) fn add(&mut self, o: NoticeCounts) {
        let NoticeCounts {
            monitors,
            demonitors_removed,
            downs,
            downs_no_process,
            links,
            exits,
            exits_no_process,
            cancels_accepted,
            cancels_seen,
            asks_accepted,
            asks_refused,
            replies_value,
            replies_timeout,
            replies_no_reply,
            replies_unread,
            dead,
            outside,
            unlinks,
            unlinks_racing,
            markers_seen,
            late_exits_relinked,
            mid_batch_demonitors,
            timers_seen,
            timers_cancelled,
        } = o;
        self.monitors += monitors;
        self.demonitors_removed += demonitors_removed;
        self.downs += downs;
        self.downs_no_process += downs_no_process;
        self.links += links;
        self.exits += exits;
        self.exits_no_process += exits_no_process;
        self.cancels_accepted += cancels_accepted;
        self.cancels_seen += cancels_seen;
        self.asks_accepted += asks_accepted;
        self.asks_refused += asks_refused;
        self.replies_value += replies_value;
        self.replies_timeout += replies_timeout;
        self.replies_no_reply += replies_no_reply;
        self.replies_unread += replies_unread;
        self.dead += dead;
        self.outside += outside;
        self.unlinks += unlinks;
        self.unlinks_racing += unlinks_racing;
        self.markers_seen += markers_seen;
        self.late_exits_relinked += late_exits_relinked;
        self.mid_batch_demonitors += mid_batch_demonitors;
        self.timers_seen += timers_seen;
        self.timers_cancelled += timers_cancelled;
    }
}
