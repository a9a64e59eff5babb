//! What a process publishes of itself for introspection, beside the
//! protocol words: when its last step started, how many timers it has
//! pending and what type it is.
//!
//! The owner writes them (a relaxed store each, on the step path, only
//! with the `introspection` feature); `processes()` and `process_info`
//! read them from any thread. They are figures, not synchronisation:
//! nothing decides anything on them, so a reader may see one step late.
//! They are not written under loom (the models do not read them), so they
//! add no branch to the models.
//!
//! The type index's top bit says that the process may have relations
//! (monitors, links, names, published figures): set before any is added,
//! never cleared, so a walk of 100 000 processes skips the lock of each
//! one that never had any. A relation added while the walk runs may be
//! missed, as it may be with the lock: the list is of one moment.

use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};

use crate::sync::{AtomicU16, AtomicU32};

/// The published figures of one process: eight bytes, the room the event
/// queue gave back when its closed flag moved into its claim word.
#[derive(Debug, Default)]
pub(crate) struct Figures {
    /// When its last step started, in milliseconds since the engine
    /// started, plus one (`0`: never stepped). Wraps after 49 days.
    last_step: AtomicU32,
    /// Its pending timers as of its last step, saturating.
    timers: AtomicU16,
    /// Its type, as an index into the engine's type names, plus one (`0`:
    /// not known yet, or not recorded), below [`RELATED`].
    kind: AtomicU16,
}

/// In `kind`: the process may have relations.
const RELATED: u16 = 1 << 15;

#[cfg_attr(not(all(feature = "introspection", not(loom))), allow(dead_code))]
impl Figures {
    /// Records the start of a step at `now_ms` (milliseconds since the
    /// engine started). Owner only.
    #[inline]
    pub(crate) fn step_started(&self, now_ms: u32) {
        self.last_step.store(now_ms.wrapping_add(1).max(1), Relaxed);
    }

    /// Milliseconds since the engine started at the start of its last
    /// step; `None` if it never took one.
    pub(crate) fn last_step_ms(&self) -> Option<u32> {
        match self.last_step.load(Relaxed) {
            0 => None,
            at => Some(at - 1),
        }
    }

    /// Publishes how many timers are pending (saturating). Owner only;
    /// stores only when the figure changed, so the common step writes
    /// nothing.
    #[inline]
    pub(crate) fn set_timers(&self, pending: usize) {
        let pending = u16::try_from(pending).unwrap_or(u16::MAX);
        if self.timers.load(Relaxed) != pending {
            self.timers.store(pending, Relaxed);
        }
    }

    /// The pending timers as of its last step (`u16::MAX` means at least
    /// that many).
    pub(crate) fn timers(&self) -> u16 {
        self.timers.load(Relaxed)
    }

    /// Records its type's index in the engine's type names (below
    /// `RELATED - 1`: the engine's table stops there). Once per instance,
    /// so a read-modify-write that keeps the relations bit is cheap here.
    pub(crate) fn set_kind(&self, index: u16) {
        let kind = index.saturating_add(1) & !RELATED;
        let _ = self
            .kind
            .fetch_update(Relaxed, Relaxed, |k| Some(k & RELATED | kind));
    }

    /// Its type's index in the engine's type names, if recorded.
    pub(crate) fn kind(&self) -> Option<u16> {
        (self.kind.load(Relaxed) & !RELATED).checked_sub(1)
    }

    /// Marks the process as one that may have relations (any thread,
    /// before adding one). Not under loom: the models never read it, and
    /// `may_be_related` says yes there.
    #[inline]
    pub(crate) fn mark_related(&self) {
        #[cfg(not(loom))]
        if self.kind.load(Relaxed) & RELATED == 0 {
            self.kind.fetch_or(RELATED, Release);
        }
    }

    /// Whether the process may have relations: `false` only if none was
    /// ever added (before the last mark this thread can see).
    #[inline]
    pub(crate) fn may_be_related(&self) -> bool {
        cfg!(loom) || self.kind.load(Acquire) & RELATED != 0
    }
}
