//! One word per process for what senders and shutdown account in its
//! mailbox: how many messages are queued and not yet drained (counted when
//! the engine bounds mailboxes, or for introspection's mailbox depth when
//! the builder's `count_mailboxes(true)` asks), whether shutdown's cancel was
//! queued, and whether an upgrade ordered from outside is on its way.
//!
//! All live in one 32-bit word so that the record stays in a smaller
//! allocator size class; the count never reaches the flag bits, because a
//! bound is at most [`MAX_CAPACITY`] and the count exceeds its bound only
//! by the senders racing past it, each of which takes its increment back.
//!
//! The upgrade flag is claimed by the one caller whose order may be in
//! the queue (a second is refused until the worker has taken the first),
//! before it queues the order; the worker looks for the order among the
//! events it drained only while the flag is set, and clears it once it
//! has taken the order. Claiming happens before the push, and the drain
//! that takes the order acquires that push, so a worker that drained an
//! order always sees the flag (`engine/upgrade.rs`).

use std::sync::atomic::Ordering::{AcqRel, Acquire};

use crate::sync::AtomicU32;

/// Shutdown's cancel was queued.
const CANCEL_SENT: u32 = 1 << 31;

/// An upgrade ordered from outside is queued, or about to be.
const UPGRADE_ORDERED: u32 = 1 << 30;

/// The process has been sent an urgent message (sticky: never cleared;
/// see `contract/urgent.rs`).
const URGENT_SEEN: u32 = 1 << 29;

/// The largest bound a mailbox enforces; a larger capacity means none.
/// Below [`URGENT_SEEN`] with room for an urgent reserve and for senders
/// racing past the bound.
pub(crate) const MAX_CAPACITY: usize = 1 << 27;

/// The count's bits.
const COUNT: u32 = !(CANCEL_SENT | UPGRADE_ORDERED | URGENT_SEEN);

/// The mailbox word of one process.
#[derive(Debug, Default)]
pub(crate) struct Mailbox(AtomicU32);

impl Mailbox {
    /// Counts one more queued message, unless `capacity` are queued
    /// already (then nothing is counted and the send must fail).
    pub(crate) fn reserve(&self, capacity: usize) -> bool {
        debug_assert!(capacity <= MAX_CAPACITY);
        let queued = self.0.fetch_add(1, AcqRel) & COUNT;
        if queued as usize >= capacity {
            self.0.fetch_sub(1, AcqRel);
            return false;
        }
        true
    }

    /// Counts one more queued message in an unbounded mailbox (for
    /// introspection's depth). The count saturates at [`MAX_CAPACITY`], so
    /// it never reaches the flags: a mailbox that deep reads as that deep.
    pub(crate) fn count(&self) {
        let queued = self.0.fetch_add(1, AcqRel) & COUNT;
        if queued as usize >= MAX_CAPACITY {
            self.0.fetch_sub(1, AcqRel);
        }
    }

    /// `n` messages left the mailbox (drained by a step, or their send
    /// failed after all). Takes away at most what is counted: a saturated
    /// count (see [`count`](Mailbox::count)) missed some.
    pub(crate) fn release(&self, n: usize) {
        let n = u32::try_from(n).unwrap_or(u32::MAX);
        let mut word = self.0.load(Acquire);
        loop {
            let take = n.min(word & COUNT);
            if take == 0 {
                return;
            }
            match self
                .0
                .compare_exchange_weak(word, word - take, AcqRel, Acquire)
            {
                Ok(_) => return,
                Err(current) => word = current,
            }
        }
    }

    /// Marks the process as sent an urgent message: from now on its owner
    /// looks for them in what it drains. Before the message is queued.
    pub(crate) fn mark_urgent(&self) {
        if self.0.load(Acquire) & URGENT_SEEN == 0 {
            self.0.fetch_or(URGENT_SEEN, AcqRel);
        }
    }

    /// Whether the process has ever been sent an urgent message.
    #[inline]
    pub(crate) fn urgent_seen(&self) -> bool {
        self.0.load(Acquire) & URGENT_SEEN != 0
    }

    /// Messages queued and not yet drained, as counted.
    pub(crate) fn depth(&self) -> u32 {
        self.0.load(Acquire) & COUNT
    }

    /// Marks shutdown's cancel as queued; `true` for the first caller only.
    pub(crate) fn claim_cancel(&self) -> bool {
        self.0.fetch_or(CANCEL_SENT, AcqRel) & CANCEL_SENT == 0
    }

    /// Claims the right to queue an upgrade order: `false` if another
    /// order is still on its way.
    pub(crate) fn claim_upgrade(&self) -> bool {
        self.0.fetch_or(UPGRADE_ORDERED, AcqRel) & UPGRADE_ORDERED == 0
    }

    /// Whether an upgrade order is queued or about to be: the owner looks
    /// for it among the events it drained.
    pub(crate) fn upgrade_ordered(&self) -> bool {
        self.0.load(Acquire) & UPGRADE_ORDERED != 0
    }

    /// The order was taken (or never queued): another may be claimed.
    pub(crate) fn release_upgrade(&self) {
        self.0.fetch_and(!UPGRADE_ORDERED, AcqRel);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn the_bound_holds_and_released_room_is_reused() {
        let mailbox = Mailbox::default();
        assert!(mailbox.reserve(2));
        assert!(mailbox.reserve(2));
        assert!(!mailbox.reserve(2), "full");
        mailbox.release(1);
        assert!(mailbox.reserve(2), "room again");
        assert!(!mailbox.reserve(2));
    }

    #[test]
    fn the_upgrade_flag_is_claimed_once_at_a_time_and_leaves_the_rest_alone() {
        let mailbox = Mailbox::default();
        assert!(mailbox.reserve(2));
        assert!(!mailbox.upgrade_ordered());
        assert!(mailbox.claim_upgrade());
        assert!(mailbox.upgrade_ordered());
        assert!(!mailbox.claim_upgrade(), "one order at a time");
        assert!(mailbox.claim_cancel());
        assert!(mailbox.reserve(2), "the flags are not messages");
        assert!(!mailbox.reserve(2));
        mailbox.release_upgrade();
        assert!(!mailbox.upgrade_ordered());
        assert!(!mailbox.claim_cancel(), "the cancel flag stays");
        assert!(mailbox.claim_upgrade(), "free again");
    }

    #[test]
    fn the_cancel_flag_is_claimed_once_and_leaves_the_count_alone() {
        let mailbox = Mailbox::default();
        assert!(mailbox.reserve(1));
        assert!(mailbox.claim_cancel());
        assert!(!mailbox.claim_cancel(), "claimed once");
        assert!(!mailbox.reserve(1), "still full: the flag is not a message");
        mailbox.release(1);
        assert!(mailbox.reserve(1));
        assert!(!mailbox.claim_cancel());
    }
}
