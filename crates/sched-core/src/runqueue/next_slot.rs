//! A worker's `next` slot: the process its last step woke or spawned, run
//! right after that step on the same core.
//!
//! The owner fills and empties it; an idle worker may take what has sat in
//! it for a while (its owner is inside a long step), so the slot cannot
//! hide runnable work from idle workers. Every take is one atomic
//! exchange of the pointer, so each record in the slot is taken by exactly
//! one thread. A put into an empty slot is a plain store: only the owner
//! ever writes a pointer into it, and a thief only ever empties it, so an
//! empty slot stays empty until the owner's store (one read-modify-write
//! fewer for each process a step wakes on its own worker).

use std::ptr;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};

use crate::record::{Record, RecordRef};
use crate::sync::AtomicPtr;

/// Holds at most one `RecordRef` (as a raw pointer from `into_raw`).
///
/// Aligned to its own cache lines (two, as `CachePadded` does on x86-64):
/// its owner writes it at every step, and a small allocation beside it
/// (another worker's slot, made in the same loop) would make each of those
/// writes miss.
#[derive(Debug)]
#[repr(align(128))]
pub(crate) struct NextSlot {
    ptr: AtomicPtr<Record>,
}

impl Default for NextSlot {
    fn default() -> Self {
        NextSlot {
            ptr: AtomicPtr::new(ptr::null_mut()),
        }
    }
}

impl NextSlot {
    /// Puts `record` in the slot (owner only); returns the previous
    /// occupant, if a thief has not taken it.
    pub(crate) fn put(&self, record: RecordRef) -> Option<RecordRef> {
        let new = RecordRef::into_raw(record).cast_mut();
        // Relaxed: an empty slot is written by nobody but us (a thief only
        // empties a full one), so nothing can come between this load and
        // the store; the pointer a thief took is its own.
        if self.ptr.load(Relaxed).is_null() {
            // Release: a thief's acquiring load or exchange that finds the
            // pointer finds the reference's record as we left it.
            self.ptr.store(new, Release);
            return None;
        }
        let old = self.ptr.swap(new, AcqRel);
        // SAFETY: a non-null pointer in the slot came from `into_raw`
        // and the swap made us its only holder.
        (!old.is_null()).then(|| unsafe { RecordRef::from_raw(old) })
    }

    /// Empties the slot (owner). Costs one load when it is empty.
    pub(crate) fn take(&self) -> Option<RecordRef> {
        if self.ptr.load(Acquire).is_null() {
            return None;
        }
        let old = self.ptr.swap(ptr::null_mut(), AcqRel);
        // SAFETY: as in `put`: the swap handed the pointer to us alone.
        (!old.is_null()).then(|| unsafe { RecordRef::from_raw(old) })
    }

    /// The occupant's address (null when empty), for a thief to tell
    /// whether the same process is still waiting there.
    pub(crate) fn peek(&self) -> *const Record {
        self.ptr.load(Acquire)
    }

    /// Takes the occupant if it is still `seen` (a thief).
    pub(crate) fn steal(&self, seen: *const Record) -> Option<RecordRef> {
        if seen.is_null() {
            return None;
        }
        self.ptr
            .compare_exchange(seen.cast_mut(), ptr::null_mut(), AcqRel, Acquire)
            .ok()
            // SAFETY: the exchange moved the pointer out of the slot, so we
            // hold the reference `put` stored.
            .map(|taken| unsafe { RecordRef::from_raw(taken) })
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.peek().is_null()
    }
}

impl Drop for NextSlot {
    fn drop(&mut self) {
        drop(self.take());
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use crate::sync::{thread, Arc};

    fn record(id: u64) -> RecordRef {
        RecordRef::new(relay::Pid::local(id), crate::loom_models::Inert)
    }

    /// The owner puts two records and takes what is left while a thief
    /// steals what it saw: every record ends up with exactly one of them
    /// (checked by the reference counts: a double take would free twice,
    /// a lost one would leak, and loom reports both).
    #[test]
    fn each_record_in_the_slot_is_taken_exactly_once() {
        loom::model(|| {
            let slot = Arc::new(NextSlot::default());
            let (a, b) = (record(1), record(2));
            assert!(slot.put(a.clone()).is_none());
            let thief = {
                let slot = slot.clone();
                thread::spawn(move || {
                    let seen = slot.peek();
                    slot.steal(seen).map(|r| r.pid.id())
                })
            };
            let displaced = slot.put(b.clone()).map(|r| r.pid.id());
            let left = slot.take().map(|r| r.pid.id());
            let stolen = thief.join().unwrap();
            let mut all: Vec<u64> = [displaced, left, stolen].into_iter().flatten().collect();
            all.sort_unstable();
            assert_eq!(all, vec![1, 2], "each record taken once");
            assert_eq!(RecordRef::count(&a), 1);
            assert_eq!(RecordRef::count(&b), 1);
        });
    }

    /// A put into the slot a thief is emptying: the owner takes what is
    /// there and puts the same record back (a plain store into the empty
    /// slot) while a thief that saw it the first time steals. Whichever
    /// copy the thief's exchange takes, the record is taken exactly once
    /// more than it was put, never twice and never lost.
    #[test]
    fn a_put_into_the_emptied_slot_races_a_thief_that_saw_it_before() {
        loom::model(|| {
            let slot = Arc::new(NextSlot::default());
            let a = record(1);
            assert!(slot.put(a.clone()).is_none());
            let thief = {
                let slot = slot.clone();
                let seen = slot.peek();
                thread::spawn(move || slot.steal(seen).is_some())
            };
            let first = slot.take();
            let had = first.is_some();
            drop(first);
            let displaced = slot.put(a.clone());
            let left = slot.take();
            let stolen = thief.join().unwrap();
            let taken = usize::from(had)
                + usize::from(displaced.is_some())
                + usize::from(left.is_some())
                + usize::from(stolen);
            assert_eq!(taken, 2, "two puts, each taken once");
            drop((displaced, left));
            assert_eq!(RecordRef::count(&a), 1);
            assert!(slot.is_empty());
        });
    }
}
