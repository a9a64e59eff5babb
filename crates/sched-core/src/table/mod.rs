//! The process table: where the engine finds a process by the PID it
//! allocated for it, without a lock shared by many processes.
//!
//! # How table PIDs look
//!
//! A table PID's id is `generation << 32 | (index + 1)`: the slot's index
//! (plus one, so that no id is 0, the id of [`Pid::OUTSIDE`]) in the low 32
//! bits and how many times the slot was used before in the high ones. The
//! first use of each slot therefore has a small id, `<0.1>`, `<0.2>`, ...;
//! its second use is `<0.4294967297>` for slot 0, and so on. A slot whose
//! generations run out is retired, never reused: no id is handed out twice.
//!
//! # What it costs
//!
//! - allocating a PID takes an id from this thread's [`IdCache`] and stores
//!   `RESERVED` into the slot: no shared write unless the cache runs dry
//!   (once per `BLOCK` PIDs);
//! - registering is one CAS on the slot, unregistering one CAS on the slot
//!   (and the freed id goes to this thread's cache);
//! - a lookup locks the slot for one reference-count increment (two
//!   read-modify-writes on the slot's line, which only the process's own
//!   senders share), then compares the record's PID.
//!
//! PIDs users choose (`submit` with a PID that was not allocated, or no
//! longer reserved) do not go here: see [`Registry`](registry::Registry),
//! which keeps them apart from these.

mod free;
pub(crate) mod registry;
mod slot;

#[cfg(all(test, loom))]
mod loom;
#[cfg(all(test, not(loom)))]
mod tests;

use relay::{Pid, PidsExhausted};

pub(crate) use free::IdCache;
use free::Pool;
use segments::Segments;

/// What the table needs of what it holds: the PID it is registered under,
/// to tell a stale PID from the slot's current occupant, and the counted
/// reference it is held by.
pub(crate) trait Keyed: Sized {
    /// The counted reference a slot's word stands for.
    type Ref: Counted<Self>;

    fn pid(&self) -> Pid;
}

/// A counted reference that a slot's word can hold as a raw pointer (an
/// `Arc`, or the engine's own record reference).
pub(crate) trait Counted<T>: Clone + std::ops::Deref<Target = T> {
    /// Gives up the reference as a pointer that keeps its count.
    fn into_raw(this: Self) -> *const T;

    /// Takes back a count given up with `into_raw`.
    ///
    /// # Safety
    ///
    /// `ptr` came from `into_raw`, and its count is taken back once.
    unsafe fn from_raw(ptr: *const T) -> Self;

    /// The address it points to.
    fn as_ptr(this: &Self) -> *const T;

    /// Adds one count to what `ptr` points to.
    ///
    /// # Safety
    ///
    /// `ptr` came from `into_raw`, and a count held elsewhere keeps it
    /// alive for the call.
    unsafe fn increment(ptr: *const T);
}

impl<T> Counted<T> for crate::sync::Arc<T> {
    fn into_raw(this: Self) -> *const T {
        crate::sync::Arc::into_raw(this)
    }

    unsafe fn from_raw(ptr: *const T) -> Self {
        // SAFETY: forwarded from the caller.
        unsafe { crate::sync::Arc::from_raw(ptr) }
    }

    fn as_ptr(this: &Self) -> *const T {
        crate::sync::Arc::as_ptr(this)
    }

    unsafe fn increment(ptr: *const T) {
        // SAFETY: forwarded from the caller.
        unsafe { crate::sync::Arc::increment_strong_count(ptr) }
    }
}

/// Slot indices (so that `index + 1` fits the low 32 bits of an id).
const INDICES: u64 = if segments::CAPACITY < u32::MAX as u64 {
    segments::CAPACITY
} else {
    u32::MAX as u64
};

/// Generations of one slot; they also fit a reserved word's bits above
/// its tag on any target.
const GENERATIONS: u64 = if (usize::MAX >> 2) as u64 > u32::MAX as u64 {
    1 << 32
} else {
    (usize::MAX >> 2) as u64 + 1
};

/// The id of slot `index`'s `generation`-th use.
const fn encode(index: u64, generation: u64) -> u64 {
    generation << 32 | (index + 1)
}

/// The slot index and generation of a table id, or `None` for an id no
/// table hands out.
fn decode(id: u64) -> Option<(u64, u32)> {
    let low = id & u64::from(u32::MAX);
    let generation = id >> 32;
    (low != 0 && low <= INDICES && generation < GENERATIONS).then(|| (low - 1, generation as u32))
}

/// The id of the slot's next use after `id`, if it has generations left.
fn successor(id: u64) -> Option<u64> {
    let (index, generation) = decode(id)?;
    let next = u64::from(generation) + 1;
    (next < GENERATIONS).then(|| encode(index, next))
}

/// What registering in the table did.
#[derive(Debug)]
pub(crate) enum Claim<T: Keyed> {
    /// `pid` was reserved: the record is registered under it.
    Registered,
    /// `pid` is registered in the table already: the record comes back.
    Live(T::Ref),
    /// `pid` is not reserved here (never allocated, of another node, or
    /// its slot has moved on): the record comes back.
    Unreserved(T::Ref),
}

/// Slots indexed by PID, and the free ids to hand out.
pub(crate) struct ProcessTable<T: Keyed> {
    node: u32,
    segments: Segments<T>,
    pool: Pool,
}

impl<T: Keyed> ProcessTable<T> {
    pub(crate) fn new(node: u32) -> Self {
        ProcessTable {
            node,
            segments: Segments::new(),
            pool: Pool::new(),
        }
    }

    /// The node whose PIDs this table hands out.
    pub(crate) fn node(&self) -> u32 {
        self.node
    }

    /// A fresh PID, its slot reserved for it. `cache` is the calling
    /// worker's (`None` on other threads).
    pub(crate) fn allocate(&self, cache: Option<&mut IdCache>) -> Result<Pid, PidsExhausted> {
        let exhausted = PidsExhausted { node: self.node };
        let id = self.pool.take(cache).ok_or(exhausted)?;
        let (index, generation) = decode(id).expect("free ids are table ids");
        let slot = self.segments.get_or_grow(index).expect("free ids fit");
        slot.reserve(generation);
        Ok(Pid::new(self.node, id))
    }

    /// Registers `record` under `pid` if `pid` is reserved in this table;
    /// otherwise hands `record` back, saying whether `pid` is registered
    /// here already.
    pub(crate) fn register(&self, pid: Pid, record: T::Ref) -> Claim<T> {
        let Some((slot, generation)) = self.slot(pid) else {
            return Claim::Unreserved(record);
        };
        match slot.claim(generation, record) {
            Ok(()) => Claim::Registered,
            Err(record) if slot.holds(pid) => Claim::Live(record),
            Err(record) => Claim::Unreserved(record),
        }
    }

    /// Gives up the reservation of `pid` if it still stands (a spawn that
    /// was refused before registering).
    pub(crate) fn cancel(&self, pid: Pid, cache: Option<&mut IdCache>) {
        if let Some((slot, generation)) = self.slot(pid) {
            if slot.cancel(generation) {
                self.release(pid, cache);
            }
        }
    }

    /// Removes `record` from `pid`'s slot if it is there, freeing the slot
    /// for its next generation; returns the table's reference.
    pub(crate) fn unregister(
        &self,
        pid: Pid,
        record: &T::Ref,
        cache: Option<&mut IdCache>,
    ) -> Option<T::Ref> {
        let (slot, generation) = self.slot(pid)?;
        let removed = slot.remove(record, generation)?;
        self.release(pid, cache);
        Some(removed)
    }

    /// The record registered under `pid`, if any.
    #[inline]
    pub(crate) fn get(&self, pid: Pid) -> Option<T::Ref> {
        self.slot(pid)?.0.get(pid)
    }

    /// Whether `pid` is a PID of this table that was handed out and whose
    /// process has ended (or whose start was refused): its slot has moved
    /// past its generation. `false` for a live PID, one never handed out,
    /// or one of another node or not of the table's form.
    pub(crate) fn ended(&self, pid: Pid) -> bool {
        if pid.node() != self.node {
            return false;
        }
        let Some((index, generation)) = decode(pid.id()) else {
            return false;
        };
        // A slot past the allocated segments was never used.
        self.segments
            .get(index)
            .is_some_and(|slot| slot.used(generation) == slot::Use::Ended)
    }

    /// Whether a record is registered under `pid`.
    pub(crate) fn holds(&self, pid: Pid) -> bool {
        self.slot(pid).is_some_and(|(slot, _)| slot.holds(pid))
    }

    /// Runs `f` on every registered record, in index order, with no count
    /// taken: each slot's word stays locked for its call, so `f` must be
    /// short, must not panic and must not take a lock (see
    /// [`Slot::visit`](slot::Slot::visit)); to do more with a record,
    /// note its PID and look it up after the walk.
    pub(crate) fn visit(&self, mut f: impl FnMut(&T)) {
        self.segments.for_each(|_, slot| {
            slot.visit(&mut f);
        });
    }

    /// Every registered record's PID (each slot read once, in index order).
    pub(crate) fn pids(&self) -> Vec<Pid> {
        let mut pids = Vec::new();
        self.segments.for_each(|_, slot| {
            if let Some(pid) = slot.occupant_pid() {
                pids.push(pid);
            }
        });
        pids
    }

    /// The slot of `pid` and the generation `pid` names, if `pid` is a
    /// table PID of this node whose segment exists.
    #[inline]
    fn slot(&self, pid: Pid) -> Option<(&slot::Slot<T>, u32)> {
        if pid.node() != self.node {
            return None;
        }
        let (index, generation) = decode(pid.id())?;
        Some((self.segments.get(index)?, generation))
    }

    /// Frees `pid`'s slot for its next generation (retires it if it has
    /// none left).
    fn release(&self, pid: Pid, cache: Option<&mut IdCache>) {
        match successor(pid.id()) {
            Some(next) => self.pool.give(next, cache),
            None => tracing::debug!(%pid, "process table slot retired"),
        }
    }
}

impl<T: Keyed> std::fmt::Debug for ProcessTable<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProcessTable")
            .field("node", &self.node)
            .field("segments", &self.segments)
            .finish_non_exhaustive()
    }
}

// The slots' storage, in this file because every lookup of the table
// goes through it (`ProcessTable::slot`, then `Segments::get`).
mod segments {
    //! The slots, in segments that never move: a fixed directory of lazily
    //! allocated segments, each twice the size of the one before.
    //!
    //! Segment `k` holds `BASE << k` slots, indices `BASE * (2^k - 1)` up to
    //! the next segment's first. A slot's address is fixed from the moment its
    //! segment is published, so a reader needs no lock against growth: growing
    //! publishes a new segment with one CAS on its directory entry and never
    //! copies a slot.

    use std::ptr;
    use std::sync::atomic::Ordering::{AcqRel, Acquire};

    use super::slot::Slot;
    use super::Keyed;
    use crate::sync::AtomicPtr;

    /// log2 of the first segment's size.
    #[cfg(not(loom))]
    const BASE_SHIFT: u32 = 6;
    #[cfg(loom)]
    const BASE_SHIFT: u32 = 1;

    /// Segments in the directory: enough for `super::INDICES` slots.
    #[cfg(not(loom))]
    const SEGMENTS: usize = 27;
    #[cfg(loom)]
    const SEGMENTS: usize = 3;

    /// Indices the directory can hold.
    pub(super) const CAPACITY: u64 = ((1_u64 << SEGMENTS) - 1) << BASE_SHIFT;

    // Outside loom the directory covers every index a 32-bit low half can name.
    const _: () = assert!(cfg!(loom) || CAPACITY >= u32::MAX as u64);

    /// The directory of segments.
    pub(super) struct Segments<T: Keyed> {
        directory: [AtomicPtr<Slot<T>>; SEGMENTS],
    }

    impl<T: Keyed> Segments<T> {
        pub(super) fn new() -> Self {
            Segments {
                directory: std::array::from_fn(|_| AtomicPtr::new(ptr::null_mut())),
            }
        }

        /// The slot at `index`, if its segment exists.
        #[inline]
        pub(super) fn get(&self, index: u64) -> Option<&Slot<T>> {
            let (segment, offset) = locate(index)?;
            let first = self.directory[segment].load(Acquire);
            if first.is_null() {
                return None;
            }
            // SAFETY: a published segment holds `len(segment)` slots and lives
            // as long as `self`; `offset` is below that length (`locate`).
            Some(unsafe { &*first.add(offset) })
        }

        /// The slot at `index`, allocating its segment if need be. `None` for
        /// an index beyond the directory.
        pub(super) fn get_or_grow(&self, index: u64) -> Option<&Slot<T>> {
            let (segment, offset) = locate(index)?;
            let entry = &self.directory[segment];
            let mut first = entry.load(Acquire);
            if first.is_null() {
                let fresh: Box<[Slot<T>]> = (0..len(segment)).map(|_| Slot::new()).collect();
                let fresh = Box::into_raw(fresh).cast::<Slot<T>>();
                match entry.compare_exchange(ptr::null_mut(), fresh, AcqRel, Acquire) {
                    Ok(_) => {
                        tracing::debug!(segment, slots = len(segment), "process table grew");
                        first = fresh;
                    }
                    Err(winner) => {
                        // SAFETY: ours was never published: we still own it.
                        drop(unsafe { boxed(fresh, segment) });
                        first = winner;
                    }
                }
            }
            // SAFETY: as in `get`.
            Some(unsafe { &*first.add(offset) })
        }

        /// Every slot of every published segment, in index order.
        pub(super) fn for_each(&self, mut f: impl FnMut(u64, &Slot<T>)) {
            for (segment, entry) in self.directory.iter().enumerate() {
                let first = entry.load(Acquire);
                if first.is_null() {
                    continue;
                }
                let start = ((1_u64 << segment) - 1) << BASE_SHIFT;
                for offset in 0..len(segment) {
                    // SAFETY: as in `get`.
                    f(start + offset as u64, unsafe { &*first.add(offset) });
                }
            }
        }
    }

    impl<T: Keyed> Drop for Segments<T> {
        fn drop(&mut self) {
            for (segment, entry) in self.directory.iter().enumerate() {
                let first = entry.load(Acquire);
                if !first.is_null() {
                    // SAFETY: published segments are ours alone now (`&mut self`)
                    // and came from `Box::into_raw` with this length.
                    drop(unsafe { boxed(first, segment) });
                }
            }
        }
    }

    /// The number of slots in segment `segment`.
    fn len(segment: usize) -> usize {
        1 << (segment as u32 + BASE_SHIFT)
    }

    /// The segment and offset of `index`, or `None` beyond the directory.
    #[inline]
    fn locate(index: u64) -> Option<(usize, usize)> {
        if index >= CAPACITY {
            return None;
        }
        // Shifted by one segment's worth, indices of segment `k` fall in
        // `[BASE << k, BASE << (k + 1))`: the top bit names the segment.
        let shifted = index + (1 << BASE_SHIFT);
        let top = u64::BITS - 1 - shifted.leading_zeros();
        let segment = (top - BASE_SHIFT) as usize;
        Some((segment, (shifted - (1 << top)) as usize))
    }

    /// Rebuilds the box of a segment from its first slot.
    ///
    /// # Safety
    ///
    /// `first` came from `Box::into_raw` of a boxed slice of `len(segment)`
    /// slots, and nothing else owns it.
    unsafe fn boxed<T: Keyed>(first: *mut Slot<T>, segment: usize) -> Box<[Slot<T>]> {
        // SAFETY: the caller's contract.
        unsafe { Box::from_raw(ptr::slice_from_raw_parts_mut(first, len(segment))) }
    }

    impl<T: Keyed> std::fmt::Debug for Segments<T> {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            let published = self
                .directory
                .iter()
                .filter(|e| !e.load(Acquire).is_null())
                .count();
            f.debug_struct("Segments")
                .field("published", &published)
                .finish()
        }
    }

    #[cfg(all(test, not(loom)))]
    mod tests {
        use super::*;

        #[test]
        fn segments_double_and_tile_the_indices() {
            assert_eq!(locate(0), Some((0, 0)));
            assert_eq!(locate(63), Some((0, 63)));
            assert_eq!(locate(64), Some((1, 0)));
            assert_eq!(locate(191), Some((1, 127)));
            assert_eq!(locate(192), Some((2, 0)));
            assert_eq!(
                locate(CAPACITY - 1),
                Some((SEGMENTS - 1, len(SEGMENTS - 1) - 1))
            );
            assert_eq!(locate(CAPACITY), None);
        }
    }
}
