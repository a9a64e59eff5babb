//! Blocks: a header followed by item slots, in one allocation of one of two
//! sizes (see "Two block sizes" in the module docs).

use std::alloc::Layout;
use std::mem::{offset_of, MaybeUninit};
use std::ops::Range;
use std::ptr;

use super::{BLOCK_CAP, FIRST_CAP};
use crate::sync::{AtomicBool, AtomicPtr, Ordering, UnsafeCell};

/// One item's place in a block.
pub(super) struct Slot<T> {
    /// Written once by the producer that claimed the slot, read once by the
    /// consumer after it saw `ready`.
    pub(super) value: UnsafeCell<MaybeUninit<T>>,
    /// Set (Release) by the producer after writing `value`; cleared by the
    /// consumer when the whole block is recycled or reused by `reset`, so
    /// blocks come back clean.
    pub(super) ready: AtomicBool,
}

/// The header every block starts with. Block pointers point here; the slots
/// follow in the same allocation (a [`WithSlots`]) and are reached only
/// through [`Block::slot`], from the block pointer itself (never through a
/// reference to the header, whose borrow would not cover them).
#[repr(C)]
pub(super) struct Block<T> {
    /// The block serving the next lap (set by the installer before it marks
    /// its own slot ready).
    pub(super) next: AtomicPtr<Block<T>>,
    /// How many slots follow: `FIRST_CAP` or `BLOCK_CAP`. Set when the block
    /// is allocated and never changed. Producers do not need it (see
    /// [`Block::slot`]); the consumer reads it to free and reopen.
    cap: usize,
}

/// The allocation behind a block pointer: the header, then `N` slots.
#[repr(C)]
struct WithSlots<T, const N: usize> {
    block: Block<T>,
    slots: [Slot<T>; N],
}

impl<T> Block<T> {
    /// Where the slots start, in blocks of every size: `repr(C)` puts the
    /// array right after the header, rounded up to the slot's alignment,
    /// whatever the array's length.
    const SLOTS: usize = {
        let at = offset_of!(WithSlots<T, BLOCK_CAP>, slots);
        assert!(at == offset_of!(WithSlots<T, 1>, slots));
        at
    };

    /// Allocates an empty first block (`FIRST_CAP` slots).
    pub(super) fn alloc_first() -> *mut Block<T> {
        Self::alloc(FIRST_CAP)
    }

    /// Allocates an empty full-size block (`BLOCK_CAP` slots).
    pub(super) fn alloc_full() -> *mut Block<T> {
        Self::alloc(BLOCK_CAP)
    }

    /// The layout of a block of `cap` slots: the header, then the slots, as
    /// `repr(C)` lays out a `WithSlots<T, cap>`.
    fn layout(cap: usize) -> Layout {
        let align = std::mem::align_of::<WithSlots<T, 1>>();
        let size = Self::SLOTS + cap * std::mem::size_of::<Slot<T>>();
        Layout::from_size_align(size, align)
            .expect("a block's layout fits in an isize")
            .pad_to_align()
    }

    /// Allocates an empty block of `cap` slots: `next` null, no slot ready.
    fn alloc(cap: usize) -> *mut Block<T> {
        debug_assert!((1..=BLOCK_CAP).contains(&cap));
        let layout = Self::layout(cap);
        let block = match Self::take_spare(layout) {
            Some(spare) => spare.as_ptr().cast::<Block<T>>(),
            None => {
                // SAFETY: the layout is not zero-sized (the header holds a
                // pointer).
                let block = unsafe { std::alloc::alloc(layout) }.cast::<Block<T>>();
                if block.is_null() {
                    std::alloc::handle_alloc_error(layout);
                }
                block
            }
        };
        // SAFETY: just allocated with room for the header and `cap` slots
        // at `SLOTS`, exclusively ours; each field is written once, in
        // place, before the pointer is published.
        unsafe {
            block.write(Block {
                next: AtomicPtr::new(ptr::null_mut()),
                cap,
            });
            let slots = block.cast::<u8>().add(Self::SLOTS).cast::<Slot<T>>();
            for index in 0..cap {
                slots.add(index).write(Slot {
                    value: UnsafeCell::new(MaybeUninit::uninit()),
                    ready: AtomicBool::new(false),
                });
            }
        }
        block
    }

    /// The slot of position offset `offset` (position `% LAP`).
    ///
    /// Slots are stored backwards, offset `o` at index `BLOCK_CAP - 1 - o`,
    /// and a block of `cap` slots serves the last `cap` offsets of its lap,
    /// `BLOCK_CAP - cap..BLOCK_CAP`. So the mapping is the same for both
    /// sizes and a producer never reads the header to find its slot.
    ///
    /// # Safety
    ///
    /// `block` is live and serves `offset`: `first_offset(block) <= offset <
    /// BLOCK_CAP`.
    #[inline]
    pub(super) unsafe fn slot<'a>(block: *mut Block<T>, offset: usize) -> &'a Slot<T> {
        debug_assert!(offset < BLOCK_CAP);
        // Checked before the size check below reads through the pointer: a
        // null one there would abort on Rust's own (non-unwinding) check,
        // where this fails the test or loom model that got there (a
        // consumer that moved on from an install position before the next
        // block was linked, for one).
        debug_assert!(!block.is_null(), "no block serves offset {offset}");
        let index = BLOCK_CAP - 1 - offset;
        // SAFETY: `block` points at a live `WithSlots<T, cap>` (the caller's
        // promise) and `index < cap`, so the slot lies inside the
        // allocation. The pointer is derived from `block`, which carries the
        // whole allocation's provenance.
        unsafe {
            debug_assert!(index < (*block).cap);
            &*block
                .cast::<u8>()
                .add(Self::SLOTS)
                .cast::<Slot<T>>()
                .add(index)
        }
    }

    /// The first offset `block` serves (0 for a full-size block).
    ///
    /// # Safety
    ///
    /// `block` is live.
    #[inline]
    pub(super) unsafe fn first_offset(block: *mut Block<T>) -> usize {
        // SAFETY: live (the caller's promise); `cap` never changes after
        // allocation, which happened before the pointer was published.
        BLOCK_CAP - unsafe { (*block).cap }
    }

    /// Clears the `ready` flags of the slots of `offsets`. Only for a block
    /// the consumer has to itself, once it took those slots' items.
    ///
    /// # Safety
    ///
    /// `block` is live and serves every offset in `offsets`.
    pub(super) unsafe fn clear(block: *mut Block<T>, offsets: Range<usize>) {
        for offset in offsets {
            // SAFETY: forwarded from the caller.
            unsafe { Self::slot(block, offset) }
                .ready
                .store(false, Ordering::Relaxed);
        }
    }

    /// How many slots `block` has.
    ///
    /// # Safety
    ///
    /// `block` is live.
    #[cfg(all(test, not(loom)))]
    pub(super) unsafe fn cap(block: *mut Block<T>) -> usize {
        // SAFETY: as in `first_offset`.
        unsafe { (*block).cap }
    }

    /// Frees a block made by [`Block::alloc_first`] or
    /// [`Block::alloc_full`].
    ///
    /// # Safety
    ///
    /// `block` came from one of them, no thread will access it again, and
    /// no slot holds an item (items are moved out before blocks are freed).
    pub(super) unsafe fn free(block: *mut Block<T>) {
        // SAFETY: the caller guarantees exclusive ownership of a live block
        // of `cap` slots, allocated with `layout(cap)`. The fields are
        // dropped in place (only loom's atomics have anything to drop);
        // `MaybeUninit` slots drop nothing.
        unsafe {
            let cap = (*block).cap;
            let slots = block.cast::<u8>().add(Self::SLOTS).cast::<Slot<T>>();
            for index in 0..cap {
                ptr::drop_in_place(slots.add(index));
            }
            ptr::drop_in_place(block);
            let layout = Self::layout(cap);
            if let Err(block) = Self::keep_spare(block.cast(), layout) {
                std::alloc::dealloc(block.as_ptr(), layout);
            }
        }
    }

    /// A block's memory kept by this thread (`spare.rs`).
    #[inline]
    fn take_spare(layout: Layout) -> Option<ptr::NonNull<u8>> {
        #[cfg(not(loom))]
        return super::spare::take(layout);
        #[cfg(loom)]
        {
            let _ = layout;
            None
        }
    }

    /// Keeps a freed block's memory for this thread's next block of its
    /// size (`spare.rs`); hands back what it does not keep.
    ///
    /// # Safety
    ///
    /// `block` was allocated with `layout` and nobody uses it any more.
    #[inline]
    unsafe fn keep_spare(block: *mut u8, layout: Layout) -> Result<(), ptr::NonNull<u8>> {
        // SAFETY: a block pointer is never null.
        let block = unsafe { ptr::NonNull::new_unchecked(block) };
        #[cfg(not(loom))]
        return super::spare::keep(block, layout);
        #[cfg(loom)]
        {
            let _ = layout;
            Err(block)
        }
    }
}
