//! The counts a stress run checked, summed over its rounds, and the
//! summary printed at the end.

use std::collections::BTreeMap;
use std::time::Duration;

use sched::message::SendErrorKind;

use crate::check::Ended;
use crate::ledger::{CompletionCounts, MessageCounts};
use crate::notices::NoticeCounts;
use crate::script::Kind;

/// Everything counted so far.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    pub(crate) rounds: u64,
    /// Rounds by worker count (index 0: one worker).
    pub(crate) rounds_by_workers: [u64; 4],
    pub(crate) bounded_mailbox_rounds: u64,
    /// Rounds whose stray messages could reach live processes.
    pub(crate) stray_rounds: u64,
    pub(crate) submitted: u64,
    pub(crate) spawned: u64,
    /// Submissions `init` refused (unknown method, wrong input).
    pub(crate) refused_submissions: u64,
    pub(crate) ended: BTreeMap<&'static str, u64>,
    pub(crate) steps: u64,
    /// Upgrades carried out (a new instance took over a PID).
    pub(crate) upgrades: u64,
    pub(crate) messages: MessageCounts,
    /// Messages sent from inside steps, and how many answered a token.
    pub(crate) sent_by_steps: u64,
    pub(crate) sent_by_steps_solicited: u64,
    pub(crate) sent_by_feeder: u64,
    pub(crate) sent_by_feeder_solicited: u64,
    pub(crate) refused_sends: BTreeMap<&'static str, u64>,
    pub(crate) completions: CompletionCounts,
    pub(crate) issued: BTreeMap<Kind, u64>,
    pub(crate) terminations_accepted: u64,
    pub(crate) terminations_too_late: u64,
    pub(crate) held_stale: u64,
    pub(crate) notices: NoticeCounts,
    pub(crate) delayed: DelayedTally,
    /// Timer events dead-lettered (fired, unread when their process ended).
    pub(crate) timers_dead: u64,
}

/// What the run counted of delayed messages and of payloads whose `Drop`
/// panics.
#[derive(Debug, Default)]
pub(crate) struct DelayedTally {
    /// Accepted by `send(After(..))`, refused by it, and cancelled at once.
    pub(crate) sent: u64,
    pub(crate) refused: u64,
    pub(crate) cancelled: u64,
    pub(crate) received: u64,
    pub(crate) dead: u64,
    /// Received after every instance of their sender had closed.
    pub(crate) after_sender_ended: u64,
    /// Pairs of delayed messages from one sender to one receiver whose
    /// arrival order was checked against their deadlines.
    pub(crate) ordered_pairs: u64,
    /// Armed bombs sent (delayed or not), gone off in the dead-letter hook,
    /// and gone off in a cancelled timer.
    pub(crate) bombs_sent: u64,
    pub(crate) bombs_dead: u64,
    pub(crate) bombs_cancelled: u64,
}

impl Tally {
    pub(crate) fn ended(&mut self, ended: Ended) {
        let name = match ended {
            Ended::Done => "done",
            Ended::StepError => "step error",
            Ended::Panicked => "panicked",
            Ended::UpgradeFailed => "upgrade failed",
            Ended::Terminated => "terminated",
            Ended::OnCancel => "finished on cancel",
            Ended::Other => "other",
        };
        *self.ended.entry(name).or_default() += 1;
    }

    pub(crate) fn refused_send(&mut self, kind: SendErrorKind) {
        let name = match kind {
            SendErrorKind::UnknownTarget => "unknown target",
            SendErrorKind::Ended => "closed",
            SendErrorKind::Full => "mailbox full",
            _ => "other",
        };
        *self.refused_sends.entry(name).or_default() += 1;
    }

    pub(crate) fn add_messages(&mut self, m: MessageCounts) {
        self.messages.sent += m.sent;
        self.messages.refused += m.refused;
        self.messages.received += m.received;
        self.messages.dead += m.dead;
        self.messages.cancelled += m.cancelled;
    }

    pub(crate) fn add_completions(&mut self, c: CompletionCounts) {
        let t = &mut self.completions;
        t.issued += c.issued;
        t.seen += c.seen;
        t.dead += c.dead;
        t.stale += c.stale;
        t.vanished += c.vanished;
        t.discarded += c.discarded;
    }

    fn issued(&self, kinds: &[Kind]) -> u64 {
        kinds
            .iter()
            .map(|k| self.issued.get(k).copied().unwrap_or(0))
            .sum()
    }

    fn count(map: &BTreeMap<&'static str, u64>, name: &str) -> u64 {
        map.get(name).copied().unwrap_or(0)
    }

    /// The faults injected, by kind, as printed and as required to be
    /// non-zero.
    fn faults(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("step panics", Self::count(&self.ended, "panicked")),
            ("step errors", Self::count(&self.ended, "step error")),
            (
                "failed upgrades",
                Self::count(&self.ended, "upgrade failed"),
            ),
            ("handler panics", self.issued(&[Kind::HandlerPanic])),
            (
                "failed completions",
                self.issued(&[Kind::SyncFail, Kind::AsyncFail]),
            ),
            ("rejected commands", self.issued(&[Kind::Reject])),
            (
                "dropped completers",
                self.issued(&[Kind::SyncDrop, Kind::AsyncDrop]),
            ),
            (
                "completers held until termination",
                self.issued(&[Kind::Hold]),
            ),
            ("yields without a handler", self.issued(&[Kind::NoHandler])),
            ("discarded yields", self.completions.discarded),
            ("terminations", Self::count(&self.ended, "terminated")),
            ("refused submissions", self.refused_submissions),
        ]
    }

    /// What the run should have exercised and did not (empty when all of
    /// it happened at least once).
    pub(crate) fn missing(&self) -> Vec<&'static str> {
        let n = &self.notices;
        let mut missing: Vec<&'static str> = self
            .faults()
            .into_iter()
            .filter(|(_, n)| *n == 0)
            .map(|(name, _)| name)
            .collect();
        let more = [
            ("spawns from steps", self.spawned),
            ("upgrades", self.upgrades),
            ("messages between processes", self.sent_by_steps_solicited),
            ("asynchronous completions", self.issued(&[Kind::Async])),
            ("dead letters", self.messages.dead + self.completions.dead),
            ("stale completions", self.completions.stale),
            ("monitors", self.notices.monitors),
            ("downs with a real reason", n.downs - n.downs_no_process),
            ("downs of no process", n.downs_no_process),
            ("demonitors", n.demonitors_removed),
            ("links", n.links),
            ("exits with a real reason", n.exits - n.exits_no_process),
            ("exits of no process", n.exits_no_process),
            ("cancels seen", n.cancels_seen),
            ("asks refused", n.asks_refused),
            ("replies", n.replies_value),
            ("ask timeouts", n.replies_timeout),
            ("requests dropped", n.replies_no_reply),
            ("requests handed back unread", n.replies_unread),
            ("dead-lettered notices", n.dead),
            ("monitors from outside", n.outside),
            ("delayed messages received", self.delayed.received),
            ("delayed messages dead-lettered", self.delayed.dead),
            ("delayed messages cancelled", self.delayed.cancelled),
            (
                "delayed messages delivered after their sender ended",
                self.delayed.after_sender_ended,
            ),
            ("bombs gone off in dead letters", self.delayed.bombs_dead),
            (
                "bombs gone off in cancelled timers",
                self.delayed.bombs_cancelled,
            ),
            ("unlinks", n.unlinks),
            ("unlink markers seen", n.markers_seen),
            (
                "demonitors in the middle of a batch",
                n.mid_batch_demonitors,
            ),
            (
                "timers cancelled in the middle of a batch",
                n.timers_cancelled,
            ),
        ];
        missing.extend(more.iter().filter(|(_, n)| *n == 0).map(|(name, _)| *name));
        for (workers, rounds) in self.rounds_by_workers.iter().enumerate() {
            if *rounds == 0 {
                missing.push(["1 worker", "2 workers", "3 workers", "4 workers"][workers]);
            }
        }
        missing
    }

    /// Prints the summary of the run.
    pub(crate) fn print(&self, elapsed: Duration) {
        let by_workers = self.rounds_by_workers.map(|n| n.to_string()).join("/");
        let m = &self.messages;
        let c = &self.completions;
        let list = |map: &BTreeMap<&'static str, u64>| {
            map.iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        println!();
        println!(
            "stress: {} rounds in {:.1} s (rounds with 1/2/3/4 workers: {by_workers}; \
             {} with bounded mailboxes; {} with strays reaching live processes)",
            self.rounds,
            elapsed.as_secs_f64(),
            self.bounded_mailbox_rounds,
            self.stray_rounds
        );
        println!(
            "  processes    {} ({} submitted from outside, {} spawned from steps); \
             {} submissions refused by init",
            self.submitted + self.spawned,
            self.submitted,
            self.spawned,
            self.refused_submissions
        );
        println!("  outcomes     {}", list(&self.ended));
        println!(
            "  steps        {} (and {} upgrades, each a new instance under the same PID)",
            self.steps, self.upgrades
        );
        println!(
            "  messages     {} sent ({} from steps, {} of them asked for; {} from outside, \
             {} asked for) = {} received + {} dead-lettered + {} cancelled delayed ones",
            m.sent,
            self.sent_by_steps,
            self.sent_by_steps_solicited,
            self.sent_by_feeder,
            self.sent_by_feeder_solicited,
            m.received,
            m.dead,
            m.cancelled
        );
        println!(
            "               {} refused at send ({})",
            m.refused,
            list(&self.refused_sends)
        );
        let d = &self.delayed;
        println!(
            "  delayed      {} sent with send_after ({} refused) = {} received ({} after their \
             sender ended) + {} dead-lettered + {} cancelled; {} pairs checked for order",
            d.sent,
            d.refused,
            d.received,
            d.after_sender_ended,
            d.dead,
            d.cancelled,
            d.ordered_pairs
        );
        println!(
            "  bombs        {} payloads whose Drop panics sent; {} went off in dead letters, \
             {} in cancelled timers, no worker lost",
            d.bombs_sent, d.bombs_dead, d.bombs_cancelled
        );
        println!(
            "  completions  {} dispatched = {} seen + {} dead-lettered + {} stale \
             ({} of them held until termination) + {} dropped after a termination",
            c.issued, c.seen, c.dead, c.stale, self.held_stale, c.vanished
        );
        let kinds = self
            .issued
            .iter()
            .map(|(k, v)| format!("{k:?} {v}"))
            .collect::<Vec<_>>()
            .join(", ");
        println!("               by handler: {kinds}");
        let n = &self.notices;
        println!(
            "  monitors     {} set ({} from outside), {} removed ({} in the middle of a batch); \
             {} downs ({} of no process)",
            n.monitors,
            n.outside,
            n.demonitors_removed,
            n.mid_batch_demonitors,
            n.downs,
            n.downs_no_process
        );
        println!(
            "  links        {} made; {} exits ({} of no process)",
            n.links, n.exits, n.exits_no_process
        );
        println!(
            "               {} unlinks ({} racing the peer's end), {} of them checked by a marker \
             seen (exits after one: {} explained by a later link, none unexplained)",
            n.unlinks, n.unlinks_racing, n.markers_seen, n.late_exits_relinked
        );
        println!(
            "  timers       {} cancelled by a step after the first event of its batch (none of \
             them seen after), {} timer events seen, {} dead-lettered",
            n.timers_cancelled, n.timers_seen, self.timers_dead
        );
        println!(
            "  cancels      {} accepted, {} seen",
            n.cancels_accepted, n.cancels_seen
        );
        println!(
            "  asks         {} accepted, {} refused; replies: {} answers, {} timeouts, \
             {} no-replies, {} handed back unread; {} notices dead-lettered",
            n.asks_accepted,
            n.asks_refused,
            n.replies_value,
            n.replies_timeout,
            n.replies_no_reply,
            n.replies_unread,
            n.dead
        );
        println!(
            "  faults       {}",
            self.faults()
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        println!(
            "  terminate    {} accepted, {} too late (the process had ended)",
            self.terminations_accepted, self.terminations_too_late
        );
        println!(
            "  checked      one outcome per process, matching its script; one init and one \
             close per instance (upgrades included); no step on two workers at once; every message and completion accounted \
             for exactly once; every down, exit, cancel, request and reply accounted for against \
             its monitor, link, cancel or ask; delayed messages received by their target in \
             deadline order, or dead-lettered, never after a cancel; no exit after an unlink \
             returned, no down after a demonitor; no worker lost to a panicking drop; no live \
             process left after a round"
        );
    }
}
