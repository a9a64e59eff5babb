//! Spare blocks, kept per thread.
//!
//! Every block a consumer is done with (a full block it finished, a small
//! first block it left, the blocks of a queue it shrank or closed) goes
//! here, and every block allocated takes from here first. Two patterns
//! made this worth a cache of our own:
//!
//! - A queue that is emptied and shrunk between events (a process that
//!   waits for a timer gives its block back, see `Consumer::shrink_to_fit`)
//!   frees its small first block and allocates one again for its next
//!   event. A worker thread that fires a tick's timers does that for
//!   thousands of queues in a row: the allocator's own per-thread cache
//!   holds seven chunks of a size, the rest went through its shared bins,
//!   and the pile of freed small chunks made every larger allocation sweep
//!   them (glibc's `malloc_consolidate`).
//! - A busy queue crosses a block boundary every 14 items. Each queue used
//!   to keep a pool of two finished blocks for its next installs, 16 bytes
//!   in every queue (most of which never finish a block); a thread's spares
//!   serve every queue it installs blocks for.
//!
//! So a thread keeps freed blocks of up to [`CLASSES`] layouts (the first
//! ones it frees: a queue's two block sizes), up to [`KEEP`] blocks and
//! [`KEEP_BYTES`] bytes of each, and hands them to the next allocations of
//! that layout on the same thread. Blocks freed on one thread and
//! allocated on another move between threads' spares, which is all a
//! cache of plain memory needs: a block is initialised afresh when it is
//! allocated. What a thread keeps is freed when the thread exits. Blocks
//! of other layouts (queues of a third item type on the same thread) go to
//! the allocator as before.
//!
//! Not under loom, whose models must see every allocation, and where a
//! block kept by one model run would leak into the next.

use std::alloc::Layout;
use std::cell::RefCell;
use std::ptr::NonNull;

/// Layouts a thread keeps blocks of: a queue's first and full blocks.
const CLASSES: usize = 2;

/// At most this many spare blocks of a layout per thread.
///
/// Blocks move between threads whenever a process is stolen: the worker
/// that fired its timer allocated its block, the one that stepped it frees
/// it. So the spares must absorb a tick's worth of that imbalance. In the
/// workflow benchmark (50 000 workflows on 2 workers), 64 blocks (8 KiB)
/// left about 3.6 allocations per workflow on the workers, 256 (32 KiB)
/// about 2.8, and 512 (64 KiB) 2.6, so 256 it is.
const KEEP: usize = 256;

/// And at most this many bytes of them.
const KEEP_BYTES: usize = 32 * 1024;

/// A thread's spare blocks of one layout.
struct Class {
    /// The layout of the blocks kept, fixed by the first block kept.
    layout: Option<Layout>,
    blocks: Vec<NonNull<u8>>,
}

/// One thread's spare blocks.
struct Spare {
    classes: [Class; CLASSES],
}

impl Drop for Spare {
    fn drop(&mut self) {
        for class in &mut self.classes {
            if let Some(layout) = class.layout {
                for block in class.blocks.drain(..) {
                    // SAFETY: every block kept in this class was allocated
                    // with `layout` and is owned by this cache alone (see
                    // `keep`).
                    unsafe { std::alloc::dealloc(block.as_ptr(), layout) };
                }
            }
        }
    }
}

thread_local! {
    static SPARE: RefCell<Spare> = const {
        RefCell::new(Spare {
            classes: [
                Class {
                    layout: None,
                    blocks: Vec::new(),
                },
                Class {
                    layout: None,
                    blocks: Vec::new(),
                },
            ],
        })
    };
}

/// A spare block of `layout` kept by this thread, if there is one: its
/// memory, uninitialised for the caller's purposes.
pub(super) fn take(layout: Layout) -> Option<NonNull<u8>> {
    SPARE
        .try_with(|spare| {
            let mut spare = spare.try_borrow_mut().ok()?;
            spare
                .classes
                .iter_mut()
                .find(|class| class.layout == Some(layout))?
                .blocks
                .pop()
        })
        .ok()
        .flatten()
}

/// Keeps `block` (allocated with `layout`, no longer used by anyone) for
/// this thread's next [`take`]; hands it back if this thread keeps enough
/// of its layout already, keeps two other layouts, or is exiting.
pub(super) fn keep(block: NonNull<u8>, layout: Layout) -> Result<(), NonNull<u8>> {
    SPARE
        .try_with(|spare| {
            let Ok(mut spare) = spare.try_borrow_mut() else {
                return Err(block);
            };
            let class = match spare
                .classes
                .iter()
                .position(|class| class.layout == Some(layout))
            {
                Some(at) => &mut spare.classes[at],
                None => match spare.classes.iter_mut().find(|c| c.layout.is_none()) {
                    Some(free) => {
                        free.layout = Some(layout);
                        free
                    }
                    None => return Err(block),
                },
            };
            let limit = KEEP.min(KEEP_BYTES / layout.size().max(1));
            if class.blocks.len() >= limit {
                return Err(block);
            }
            if class.blocks.capacity() == 0 {
                class.blocks.reserve_exact(limit);
            }
            class.blocks.push(block);
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

    fn free(block: NonNull<u8>, layout: Layout) {
        // SAFETY: every caller allocated `block` with `layout` and hands it
        // over unused.
        unsafe { std::alloc::dealloc(block.as_ptr(), layout) };
    }

    #[test]
    fn a_kept_block_is_taken_back_once_and_only_for_its_layout() {
        std::thread::spawn(|| {
            let small = Layout::from_size_align(88, 8).unwrap();
            let full = Layout::from_size_align(1024, 8).unwrap();
            let third = Layout::from_size_align(40, 8).unwrap();
            let a = alloc(small);
            let b = alloc(full);
            keep(a, small).expect("kept");
            keep(b, full).expect("kept: a second layout");
            assert_eq!(take(third), None, "a layout never kept");
            assert_eq!(take(full), Some(b));
            assert_eq!(take(small), Some(a));
            assert_eq!(take(small), None, "taken once");
            // A third layout is not kept while this thread keeps two.
            let stranger = alloc(third);
            free(keep(stranger, third).expect_err("not kept"), third);
            free(a, small);
            free(b, full);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_thread_keeps_a_bounded_number_and_frees_them_when_it_exits() {
        std::thread::spawn(|| {
            for (size, limit) in [(88, KEEP.min(KEEP_BYTES / 88)), (1024, KEEP_BYTES / 1024)] {
                let layout = Layout::from_size_align(size, 8).unwrap();
                let mut refused = 0;
                for _ in 0..limit + 5 {
                    if let Err(block) = keep(alloc(layout), layout) {
                        refused += 1;
                        free(block, layout);
                    }
                }
                assert_eq!(refused, 5, "{size}-byte blocks kept up to the limit");
            }
            // The rest are freed by the thread's exit (miri checks no leak).
        })
        .join()
        .unwrap();
    }
}
