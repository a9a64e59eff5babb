//! What a process does in the middle of a batch of events: remove a
//! monitor (whose down may be further on in the batch) and cancel a timer
//! (whose event may be further on too). Neither event may reach a step
//! afterwards; `false` from `demonitor` or `cancel_timer` means the event
//! reached a step before.

use std::time::Duration;

use sched::prelude::*;

use crate::message::Msg;
use crate::peers::still_open;
use crate::process::Stress;

impl Stress {
    /// Sets up what the next step does in the middle of its batch: remove
    /// a monitor; now and then cancel a short timer, set here after a
    /// message to itself (which comes first in that batch).
    pub(crate) fn arm_mid_batch(&mut self, out: &mut Output<'_>) {
        self.peer.demonitor_mid_batch = true;
        if self.rng.chance(1, 2) {
            let id = self.shared.next_message_id();
            self.send_msg(out, Msg::new(id, self.pid, false));
        }
        if self.rng.chance(1, 2) {
            let tag = self.shared.next_serial();
            let delay = Duration::from_micros(self.rng.below(3) * 100);
            let id = out.set_timer(delay, Tag(tag));
            self.peer.timer_mid_batch = Some((id, tag));
        }
    }

    /// After an event of the batch (`in_batch`) or after the whole batch:
    /// what [`arm_mid_batch`](Stress::arm_mid_batch) set up.
    pub(crate) fn mid_batch(&mut self, out: &mut Output<'_>, in_batch: bool) {
        if std::mem::take(&mut self.peer.demonitor_mid_batch) {
            // The rest of the batch is still to be read: a down of the
            // monitor removed here must not be among it.
            let removed = self.demonitor_ended(out);
            self.log.peers.mid_batch_demonitors += u64::from(in_batch && removed);
        }
        if let Some((id, tag)) = self.peer.timer_mid_batch.take() {
            if out.cancel_timer(id) {
                // Its event must not come, even if it is further on in
                // this batch.
                self.peer.timers_cancelled.insert(tag);
                self.log.peers.timers_cancelled += 1;
            } else if !self.peer.timers_seen.contains(&tag) {
                self.violation(format!(
                    "cancel_timer of {} returned false, yet its Timer never reached a step",
                    Tag(tag)
                ));
            }
        }
    }

    /// Removes one of its monitors, preferring one whose down it has not
    /// seen and whose target has ended (the down may be on its way, or
    /// further on in this batch).
    /// Returns whether it had a monitor to remove.
    pub(crate) fn demonitor_ended(&mut self, out: &mut Output<'_>) -> bool {
        if self.peer.monitors.is_empty() {
            return false;
        }
        let ended: Vec<usize> = (0..self.peer.monitors.len())
            .filter(|&i| {
                let (id, serial) = self.peer.monitors[i];
                !self.peer.downs_seen.contains(&serial)
                    && !still_open(&self.shared.observed(id.target()))
            })
            .collect();
        let at = if ended.is_empty() {
            self.rng.below(self.peer.monitors.len() as u64) as usize
        } else {
            ended[self.rng.below(ended.len() as u64) as usize]
        };
        self.demonitor_at(out, at);
        true
    }

    pub(crate) fn demonitor_at(&mut self, out: &mut Output<'_>, at: usize) {
        let (id, serial) = self.peer.monitors.swap_remove(at);
        let removed = out.demonitor(id);
        self.peer.demonitored.insert(serial);
        if !removed && !self.peer.downs_seen.contains(&serial) {
            // `false` says the down reached a step before (each monitor is
            // removed once): this process would have seen it.
            self.violation(format!(
                "demonitor of monitor {serial} (of {}) returned false, yet its down \
                 never reached the process",
                id.target()
            ));
        }
        self.log.peers.demonitors.push((serial, removed));
    }
}
