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
