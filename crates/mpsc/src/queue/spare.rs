//! Spare first blocks, kept per thread.
//!
//! A queue that is emptied and shrunk between events (a process that waits
//! for a timer gives its block back, see `Consumer::shrink_to_fit`) frees
//! its small first block and allocates one again for its next event. A
//! worker thread that fires a tick's timers does that for thousands of
//! queues in a row: the allocator's own per-thread cache holds seven chunks
//! of a size, the rest went through its shared bins, and the pile of freed
//! small chunks made every larger allocation sweep them (glibc's
//! `malloc_consolidate`). Together the allocator was about a sixth of a
//! timer-heavy workload's worker time.
//!
//! So a thread keeps up to [`KEEP`] freed first blocks (at most
//! [`KEEP_BYTES`] of them) of one layout, the first it frees, and hands
//! them to the next first-block allocations on the same thread. Blocks
//! freed on one thread and allocated on another move between threads'
//! spares, which is all a cache of plain memory needs: the block is
//! initialised afresh on allocation. What a thread keeps is freed when the
//! thread exits. Blocks of any other layout (queues of another item type
//! on the same thread) go to the allocator as before.
//!
//! Not under loom, whose models must see every allocation, and where a
//! block kept by one model run would leak into the next.

use std::alloc::Layout;
use std::cell::RefCell;
use std::ptr::NonNull;

/// At most this many spare blocks per thread.
const KEEP: usize = 64;

/// And at most this many bytes of them.
const KEEP_BYTES: usize = 8 * 1024;

/// One thread's spare blocks, all of `layout`.
struct Spare {
    /// The layout of the blocks kept, fixed by the first block kept.
    layout: Option<Layout>,
    blocks: Vec<NonNull<u8>>,
}

impl Drop for Spare {
    fn drop(&mut self) {
        if let Some(layout) = self.layout {
            for block in self.blocks.drain(..) {
                // SAFETY: every block kept was allocated with `layout` and is
                // owned by this cache alone (see `keep`).
                unsafe { std::alloc::dealloc(block.as_ptr(), layout) };
            }
        }
    }
}

thread_local! {
    static SPARE: RefCell<Spare> = const {
        RefCell::new(Spare {
            layout: None,
            blocks: Vec::new(),
        })
    };
}

/// A spare block of `layout` kept by this thread, if there is one: its
/// memory, uninitialised for the caller's purposes.
pub(super) fn take(layout: Layout) -> Option<NonNull<u8>> {
    SPARE
        .try_with(|spare| {
            let mut spare = spare.try_borrow_mut().ok()?;
            if spare.layout != Some(layout) {
                return None;
            }
            spare.blocks.pop()
        })
        .ok()
        .flatten()
}

/// Keeps `block` (allocated with `layout`, no longer used by anyone) for
/// this thread's next [`take`]; hands it back if this thread keeps enough
/// already, keeps another layout, or is exiting.
pub(super) fn keep(block: NonNull<u8>, layout: Layout) -> Result<(), NonNull<u8>> {
    SPARE
        .try_with(|spare| {
            let Ok(mut spare) = spare.try_borrow_mut() else {
                return Err(block);
            };
            let limit = KEEP.min(KEEP_BYTES / layout.size().max(1));
            match spare.layout {
                None => spare.layout = Some(layout),
                Some(kept) if kept != layout => return Err(block),
                Some(_) => {}
            }
            if spare.blocks.len() >= limit {
                return Err(block);
            }
            if spare.blocks.capacity() == 0 {
                spare.blocks.reserve_exact(limit);
            }
            spare.blocks.push(block);
            Ok(())
        })
        .unwrap_or(Err(block))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alloc(layout: Layout) -> NonNull<u8> {
        // SAFETY: a non-zero-sized layout.
        NonNull::new(unsafe { std::alloc::alloc(layout) }).expect("allocated")
    }

    #[test]
    fn a_kept_block_is_taken_back_once_and_only_for_its_layout() {
        std::thread::spawn(|| {
            let small = Layout::from_size_align(88, 8).unwrap();
            let other = Layout::from_size_align(40, 8).unwrap();
            let block = alloc(small);
            keep(block, small).expect("kept");
            assert_eq!(take(other), None, "another layout");
            assert_eq!(take(small), Some(block));
            assert_eq!(take(small), None, "taken once");
            // Another layout is not kept while this thread keeps `small`.
            let stranger = alloc(other);
            let back = keep(stranger, other).expect_err("not kept");
            // SAFETY: allocated above with `other`, handed back unused.
            unsafe { std::alloc::dealloc(back.as_ptr(), other) };
            // SAFETY: as above, with `small`.
            unsafe { std::alloc::dealloc(block.as_ptr(), small) };
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_thread_keeps_a_bounded_number_and_frees_them_when_it_exits() {
        std::thread::spawn(|| {
            let layout = Layout::from_size_align(88, 8).unwrap();
            let limit = KEEP.min(KEEP_BYTES / 88);
            let mut refused = 0;
            for _ in 0..limit + 5 {
                if let Err(block) = keep(alloc(layout), layout) {
                    refused += 1;
                    // SAFETY: allocated with `layout`, handed back unused.
                    unsafe { std::alloc::dealloc(block.as_ptr(), layout) };
                }
            }
            assert_eq!(refused, 5, "kept up to the limit");
            // The rest are freed by the thread's exit (miri checks no leak).
        })
        .join()
        .unwrap();
    }
}
