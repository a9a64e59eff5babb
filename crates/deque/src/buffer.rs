//! The ring of slots the items live in.

use std::mem::MaybeUninit;

use crate::sync::UnsafeCell;

/// The byte a new ring's slots are filled with under loom (see
/// `Buffer::new`): `0xA5A5...` read as an integer item.
#[cfg(loom)]
const POISON: u8 = 0xA5;

/// A power-of-two array of possibly-uninitialised slots.
///
/// A buffer never drops the items in it: which slots hold live items is
/// known only to the deque (positions `head..tail`), so the deque moves items
/// out or drops them itself. Dropping a `Buffer` frees the memory only, which
/// is what retiring an old buffer after growth needs: its live items were
/// copied bitwise into the new one.
pub(crate) struct Buffer<T> {
    slots: Box<[UnsafeCell<MaybeUninit<T>>]>,
    mask: u32,
}

impl<T> Buffer<T> {
    /// Allocates a buffer of `capacity` slots; `capacity` is a power of two.
    ///
    /// Under loom every slot starts filled with `POISON` bytes, so that a
    /// model reading a slot nobody wrote (growth forgetting to copy a
    /// position) gets a value no model pushes, rather than whatever the
    /// allocator left there: often 0, or an item of an earlier iteration,
    /// either of which could pass for a real item.
    pub(crate) fn new(capacity: u32) -> Self {
        debug_assert!(capacity.is_power_of_two());
        let slots = (0..capacity)
            .map(|_| {
                #[allow(unused_mut)] // written only under loom
                let mut slot = MaybeUninit::<T>::uninit();
                #[cfg(loom)]
                // SAFETY: the pointer is valid for writing one `T` (it is a
                // local `MaybeUninit<T>`), and any bytes are a valid
                // `MaybeUninit<T>`.
                unsafe {
                    slot.as_mut_ptr().write_bytes(POISON, 1)
                };
                UnsafeCell::new(slot)
            })
            .collect();
        Buffer {
            slots,
            mask: capacity - 1,
        }
    }

    /// The number of slots.
    #[inline]
    pub(crate) fn capacity(&self) -> u32 {
        self.mask + 1
    }

    #[inline]
    fn slot(&self, position: u32) -> &UnsafeCell<MaybeUninit<T>> {
        // The mask keeps the index in bounds; the bounds check that remains
        // is cheap and never fails.
        &self.slots[(position & self.mask) as usize]
    }

    /// Moves the item at `position` out.
    ///
    /// # Safety
    ///
    /// The slot holds an initialised item that the caller has claimed: no
    /// other thread writes this slot until the caller is done, and the item
    /// is not read out again (it is moved out exactly once).
    #[inline]
    pub(crate) unsafe fn read(&self, position: u32) -> T {
        // SAFETY: the caller guarantees the slot is initialised and that
        // nothing writes it concurrently.
        self.slot(position)
            .with(|slot| unsafe { (*slot).assume_init_read() })
    }

    /// Writes `item` into the slot of `position`, without dropping what was
    /// there (a moved-out or never-written slot).
    ///
    /// # Safety
    ///
    /// No other thread reads or writes this slot concurrently.
    #[inline]
    pub(crate) unsafe fn write(&self, position: u32, item: T) {
        // SAFETY: the caller guarantees exclusive access to the slot.
        self.slot(position)
            .with_mut(|slot| unsafe { (*slot).write(item) });
    }

    /// Copies the item at `position` bitwise from `self` into `dest`; the
    /// item then lives in both buffers and the caller decides which copy is
    /// the real one (after growth: the new buffer's).
    ///
    /// # Safety
    ///
    /// The source slot is initialised and nothing writes it concurrently
    /// (other threads may read it); nothing accesses the destination slot
    /// concurrently.
    #[inline]
    pub(crate) unsafe fn copy_to(&self, dest: &Buffer<T>, position: u32) {
        self.slot(position).with(|src| {
            dest.slot(position).with_mut(|dst| {
                // SAFETY: both pointers are valid for one `MaybeUninit<T>`,
                // they are in different allocations, and the caller rules out
                // concurrent writes to the source and any access to the
                // destination.
                unsafe { std::ptr::copy_nonoverlapping(src, dst, 1) }
            })
        })
    }
}

impl<T> std::fmt::Debug for Buffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Buffer")
            .field("capacity", &self.capacity())
            .finish_non_exhaustive()
    }
}
