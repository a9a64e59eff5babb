//! Delayed messages and unlinks: a process sends messages with
//! `send(After(..))` to peers that may end before the deadline (and may itself
//! end first), some carrying a payload whose `Drop` panics (`message.rs`),
//! and cancels some at once; it unlinks peers that may be ending, then
//! sends itself a marker. All of it is logged for the ledger (`ledger.rs`,
//! `delayed_order.rs`) and the notice checks (`notices.rs`).

use std::sync::atomic::Ordering::SeqCst;
use std::time::{Duration, Instant};

use sched::prelude::*;
use sched::After;

use crate::delayed_order::DelayedSent;
use crate::message::{defuse, Bomb, Marker, Msg};
use crate::notices::CancelRec;
use crate::peers::still_open;
use crate::process::Stress;
use crate::shared::NOWHERE;

/// How many steps a process waits for a cancelled peer's close before it
/// unlinks it anyway.
const UNLINK_POLLS: u32 = 40;

/// The longest delay of a delayed message.
const MAX_DELAY_MICROS: u64 = 5_000;

impl Stress {
    /// Sends `n` delayed messages to one target: the process whose token
    /// it takes (solicited: the target waits for them), or, when nobody
    /// waits, a random peer (only in rounds where strays may reach
    /// processes) or a PID on no node (refused).
    pub(crate) fn send_after(&mut self, out: &mut Output<'_>, n: u8) {
        let strays = self.shared.strays_reach_processes();
        let (to, mut solicited) = match self.shared.take_token() {
            Some(pid) => (pid, true),
            None if strays && self.rng.chance(7, 8) => {
                (self.shared.random_peer(&mut self.rng), false)
            }
            // Now and then one to a PID on no node, which must be refused.
            None if self.rng.chance(1, 4) => {
                let nowhere = Pid::new(NOWHERE, self.rng.range(1, 1_000));
                return self.send_one_after(out, nowhere, false);
            }
            None => return,
        };
        for i in 0..n {
            if i > 0 && solicited {
                solicited = self.shared.take_token_for(to);
                if !solicited && !strays {
                    return;
                }
            }
            self.send_one_after(out, to, solicited);
        }
    }

    fn send_one_after(&mut self, out: &mut Output<'_>, to: Pid, solicited: bool) {
        let id = self.shared.next_message_id();
        // Whole milliseconds half the time, so that equal delays (whose
        // messages must arrive in the order sent) are common.
        let delay = if self.rng.chance(1, 2) {
            Duration::from_millis(self.rng.below(MAX_DELAY_MICROS / 1_000 + 1))
        } else {
            Duration::from_micros(self.rng.below(MAX_DELAY_MICROS + 1))
        };
        let armed = self.rng.chance(1, 4);
        let msg = Msg {
            id,
            to,
            solicited,
            delayed: true,
            marker: None,
            bomb: Bomb::new(armed),
        };
        let before = Instant::now();
        let result = out.send(After(delay, to), msg);
        let after = Instant::now();
        let timer = match result {
            Ok(timer) => timer,
            Err(e) => {
                let kind = e.kind();
                let back = defuse(e.into_package());
                if back != Some(id) {
                    self.violation(format!(
                        "send_after of message {id} failed ({kind}) and handed back {back:?}"
                    ));
                }
                self.log.refused.push((id, kind));
                self.log.delayed_refused += 1;
                return;
            }
        };
        self.log.sent.push(id);
        self.log.sent_solicited += u64::from(solicited);
        self.log.bombs_sent += u64::from(armed);
        self.log.delayed.push(DelayedSent {
            id,
            from: self.pid,
            to,
            // The engine's deadline lies between these two.
            earliest: before + delay,
            latest: after + delay,
        });
        if self.rng.chance(1, 6) && out.cancel_timer(timer) {
            // Never delivered, never dead-lettered; the scheduler dropped it
            // (a bomb went off in there).
            self.log.cancelled.push(id);
            self.log.bombs_cancelled += u64::from(armed);
            if solicited {
                // The receiver still waits for one: someone sends it.
                self.shared.ask(to, 1);
            }
        }
    }

    /// A delayed message `id` from `source` arrived.
    pub(crate) fn received_delayed(&mut self, id: u64, source: Pid) {
        self.log.delayed_received.push(id);
        let ended = self
            .shared
            .observed(source)
            .is_some_and(|o| o.steps.load(SeqCst) > 0 && o.open.load(SeqCst) == 0);
        self.log.after_sender_ended += u64::from(ended);
    }

    /// Unlinks a peer with a higher id than its own (so that the peer never
    /// waits for this process's exit, which the unlink takes away): one it
    /// linked to, or a random trapping process (which may have linked to
    /// it); then sends itself the marker that orders later exits. Half the
    /// time it first cancels a running peer and unlinks it once it closes
    /// (its links are signalled after its close): returns whether the step
    /// waits for that (see [`poll_unlink`](Stress::poll_unlink)).
    pub(crate) fn unlink_peer(&mut self, out: &mut Output<'_>) -> bool {
        let me = self.pid;
        let mut mine: Vec<Pid> = self
            .peer
            .linked
            .iter()
            .copied()
            .filter(|p| p.id() > me.id() && p.node() == me.node())
            .collect();
        // Those still running first: their end may race the unlink.
        let live: Vec<Pid> = mine
            .iter()
            .copied()
            .filter(|p| still_open(&self.shared.observed(*p)))
            .collect();
        if !live.is_empty() && self.rng.chance(3, 4) {
            mine = live;
        }
        let peer = if !mine.is_empty() && self.rng.chance(3, 4) {
            mine[self.rng.below(mine.len() as u64) as usize]
        } else {
            match self.shared.random_trapping(&mut self.rng) {
                Some(p) if p.id() > me.id() => p,
                _ => return false,
            }
        };
        let observed = self.shared.observed(peer);
        if still_open(&observed) && self.rng.chance(1, 2) {
            // It may finish on the cancel (its script says whether).
            let accepted = out.context().cancel(peer).is_ok();
            self.log.peers.cancels.push(CancelRec {
                target: peer,
                accepted,
            });
            if accepted {
                self.peer.unlink_when_closed = Some((peer, UNLINK_POLLS));
                return true;
            }
        }
        let open_before = still_open(&observed);
        self.unlink_now(out, peer);
        // Its end was under way during the call.
        self.log.peers.unlinks_racing += u64::from(open_before && !still_open(&observed));
        false
    }

    /// A step of a process that waits to unlink a cancelled peer: spins a
    /// little for the peer's close, and unlinks at once when it sees it
    /// (or when it has polled enough). Returns whether it still waits.
    pub(crate) fn poll_unlink(&mut self, out: &mut Output<'_>) -> bool {
        let Some((peer, left)) = self.peer.unlink_when_closed else {
            return false;
        };
        let observed = self.shared.observed(peer);
        let until = Instant::now() + Duration::from_micros(self.rng.range(5, 40));
        let was_open = still_open(&observed);
        let mut closed = !was_open;
        while !closed && Instant::now() < until {
            std::hint::spin_loop();
            closed = !still_open(&observed);
        }
        if !closed && left > 0 {
            self.peer.unlink_when_closed = Some((peer, left - 1));
            return true;
        }
        self.peer.unlink_when_closed = None;
        self.unlink_now(out, peer);
        // It closed while this step watched: the rest of its end (its
        // links' signals) races the unlink.
        self.log.peers.unlinks_racing += u64::from(was_open && closed);
        false
    }

    /// Unlinks `peer`, then sends itself the marker.
    fn unlink_now(&mut self, out: &mut Output<'_>, peer: Pid) {
        let me = self.pid;
        let seq = self.shared.next_serial();
        out.unlink(peer);
        self.peer.linked.retain(|p| *p != peer);
        self.log.peers.unlinks += 1;
        let id = self.shared.next_message_id();
        let mut msg = Msg::new(id, me, false);
        msg.marker = Some(Marker { peer, seq });
        // Refused (a full mailbox): no marker, no check of this unlink.
        self.send_msg(out, msg);
    }

    /// The marker of an unlink arrived: any exit from its peer seen from
    /// now on was queued after the unlink returned.
    pub(crate) fn saw_marker(&mut self, id: u64, source: Pid, marker: Marker) {
        if source != self.pid {
            return self.violation(format!(
                "unlink marker {id} came from {source}, not from itself"
            ));
        }
        self.log.peers.markers_seen += 1;
        self.peer.unlinked.insert(marker.peer, marker.seq);
    }
}
