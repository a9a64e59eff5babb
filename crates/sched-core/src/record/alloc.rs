//! Where a process's allocation (its record and, inline, its state) comes
//! from: mimalloc by default, or the program's global allocator when it
//! asked for that before its first process.
//!
//! # Why not the global allocator
//!
//! A process is allocated by the worker that spawned it and freed by the
//! worker that ran its last step; on a busy pool, thieves move many young
//! processes, so on glibc a large share of frees lands on another thread's
//! arena and waits for its lock, which the allocating worker holds for its
//! next spawn. A spawn-heavy tree of a million processes spent a tenth of
//! its samples in that lock and eight times the context switches of a run
//! where few processes moved (`docs/benchmarks/performance.md`). mimalloc
//! hands a block freed on another thread back to its owner's page through
//! a lock-free list, so a free never waits for the allocating thread.
//! Its pages are its own: what it holds does not show in a counting
//! `#[global_allocator]`, which is why a program that counts its memory
//! that way can ask for the global allocator ([`use_global_allocator`]).
//!
//! # The choice is made once
//!
//! Every record is freed by the allocator that made it, so the choice is
//! fixed before the first record: the first allocation settles it on
//! mimalloc unless [`use_global_allocator`] settled it first. A load of
//! one word that never changes after that is what an allocation and a
//! free pay for it.
//!
//! Under miri (which cannot run mimalloc's C code) and loom every record
//! comes from the global allocator. The choice's word has a loom model
//! (`every_thread_sees_the_one_settled_choice`, below: a first allocation,
//! a call to `use_global_allocator` and a free racing; it fails if a lost
//! race returned the loser's wish instead of the settled value).

use std::alloc::Layout;
use std::fmt;
use std::ptr::NonNull;

/// The program-wide choice (see "The choice is made once"): one word,
/// settled once by a compare-exchange from `UNDECIDED`. A type of its own,
/// on the crate's `sync` shim, so that the loom model below explores it;
/// the program's one instance is the static `CHOICE`.
// Under miri and loom records come from the global allocator: only the
// model uses the type there.
#[cfg_attr(any(miri, loom), allow(dead_code))]
mod choice {
    use crate::sync::AtomicU32;
    use std::sync::atomic::Ordering::Relaxed;

    pub(super) const UNDECIDED: u32 = 0;
    pub(super) const MIMALLOC: u32 = 1;
    pub(super) const GLOBAL: u32 = 2;

    pub(super) struct Choice {
        state: AtomicU32,
    }

    impl Choice {
        #[cfg(not(loom))]
        pub(super) const fn new() -> Choice {
            Choice {
                state: AtomicU32::new(UNDECIDED),
            }
        }

        #[cfg(loom)]
        pub(super) fn new() -> Choice {
            Choice {
                state: AtomicU32::new(UNDECIDED),
            }
        }

        /// The allocator records come from, settled on mimalloc if
        /// nothing was chosen yet.
        #[inline]
        pub(super) fn settled(&self) -> u32 {
            // Relaxed: the value is all that is communicated. The word
            // changes once, so every load after a thread has seen it
            // settled (or after a hand-off from a thread that had: a
            // record reaches the thread that frees it through one) reads
            // the settled value, by coherence; a load that still reads
            // `UNDECIDED` settles through the compare-exchange, which
            // returns the one value the first settling left.
            match self.state.load(Relaxed) {
                UNDECIDED => self.settle(MIMALLOC),
                chosen => chosen,
            }
        }

        /// Settles the choice on `wanted` unless it is settled already;
        /// the choice in force after the call.
        #[cold]
        pub(super) fn settle(&self, wanted: u32) -> u32 {
            match self
                .state
                .compare_exchange(UNDECIDED, wanted, Relaxed, Relaxed)
            {
                Ok(_) => wanted,
                Err(chosen) => chosen,
            }
        }
    }

    /// The program's choice.
    #[cfg(not(any(miri, loom)))]
    pub(super) static CHOICE: Choice = Choice::new();

    /// Two threads race to settle the choice, one on mimalloc (a first
    /// allocation) and one on the global allocator (`use_global_allocator`),
    /// while a third allocates and frees: whatever the interleaving, each
    /// sees one value, the same, and never `UNDECIDED` once it acted.
    #[cfg(all(test, loom))]
    #[test]
    fn every_thread_sees_the_one_settled_choice() {
        loom::model(|| {
            let choice = crate::sync::Arc::new(Choice::new());
            let allocating = {
                let choice = crate::sync::Arc::clone(&choice);
                loom::thread::spawn(move || {
                    let at_alloc = choice.settled();
                    let at_free = choice.settled();
                    assert_eq!(at_alloc, at_free, "freed by another allocator");
                    at_alloc
                })
            };
            let choosing = {
                let choice = crate::sync::Arc::clone(&choice);
                loom::thread::spawn(move || choice.settle(GLOBAL))
            };
            let mine = choice.settled();
            let (allocated, chose) = (allocating.join().unwrap(), choosing.join().unwrap());
            assert_ne!(mine, UNDECIDED);
            assert_eq!(allocated, mine);
            assert_eq!(chose, mine);
            assert_eq!(choice.settled(), mine);
        });
    }
}

/// Allocates a block of `layout` (non-zero size) for a record.
#[inline]
pub(crate) fn allocate(layout: Layout) -> NonNull<u8> {
    // SAFETY: every record layout has a non-zero size (a record has
    // fields), which both allocators require.
    let block = unsafe {
        #[cfg(not(any(miri, loom)))]
        {
            if choice::CHOICE.settled() == choice::MIMALLOC {
                std::alloc::GlobalAlloc::alloc(&mimalloc::MiMalloc, layout)
            } else {
                std::alloc::alloc(layout)
            }
        }
        #[cfg(any(miri, loom))]
        {
            std::alloc::alloc(layout)
        }
    };
    NonNull::new(block).unwrap_or_else(|| std::alloc::handle_alloc_error(layout))
}

/// Frees a block [`allocate`] returned for `layout`.
///
/// # Safety
///
/// `block` came from [`allocate`] with this `layout` and is freed once.
#[inline]
pub(crate) unsafe fn free(block: NonNull<u8>, layout: Layout) {
    // SAFETY: the choice never changes once a block was allocated, so
    // this is the allocator `allocate` used, with its layout (the
    // caller's promise).
    unsafe {
        #[cfg(not(any(miri, loom)))]
        {
            if choice::CHOICE.settled() == choice::MIMALLOC {
                std::alloc::GlobalAlloc::dealloc(&mimalloc::MiMalloc, block.as_ptr(), layout);
            } else {
                std::alloc::dealloc(block.as_ptr(), layout);
            }
        }
        #[cfg(any(miri, loom))]
        {
            std::alloc::dealloc(block.as_ptr(), layout);
        }
    }
}

/// Makes every process of every engine of this program take its memory
/// from the program's global allocator (`#[global_allocator]`, glibc's
/// malloc by default) instead of mimalloc: for a program that counts its
/// memory through its global allocator, or that must keep one allocator.
/// Call it before the first process is spawned; it cannot change the
/// allocator afterwards. Calling it again is harmless (`Ok` while the
/// global allocator is the choice). A process whose state is aligned more
/// strictly than 8 bytes keeps that state in a box of its own, which comes
/// from the global allocator whatever the choice.
///
/// By default processes come from mimalloc, which returns a process freed
/// on another worker than the one that spawned it without a lock: on
/// glibc, spawn-heavy work whose processes move between workers runs
/// markedly faster that way (the performance notes measure it).
///
/// # Errors
///
/// [`AllocatorChosen`] if a process was allocated before the call: they
/// all come from mimalloc, and so will the rest.
///
/// # Examples
///
/// ```
/// // First thing in `main`, before any engine spawns a process.
/// sched_core::use_global_allocator().expect("no process spawned yet");
/// let engine = sched_core::Engine::builder().workers(1).build();
/// # drop(engine);
/// ```
pub fn use_global_allocator() -> Result<(), AllocatorChosen> {
    #[cfg(not(any(miri, loom)))]
    if choice::CHOICE.settle(choice::GLOBAL) != choice::GLOBAL {
        return Err(AllocatorChosen);
    }
    Ok(())
}

/// [`use_global_allocator`] came too late: a process was already
/// allocated from mimalloc, so every process of this program is.
///
/// # Examples
///
/// ```
/// # use sched_core::AllocatorChosen;
/// let late = AllocatorChosen;
/// assert!(late.to_string().contains("already"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AllocatorChosen;

impl fmt::Display for AllocatorChosen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(
            "processes are already allocated from mimalloc: use_global_allocator must come before \
             the first spawn",
        )
    }
}

impl std::error::Error for AllocatorChosen {}

#[cfg(test)]
mod tests {
    use super::*;

    /// Blocks of several sizes come back writable and aligned, and free
    /// without complaint (miri checks the pairing on the global side).
    #[test]
    fn blocks_are_aligned_writable_and_freed() {
        for size in [8usize, 64, 200, 4096] {
            let layout = Layout::from_size_align(size, 16).unwrap();
            let block = allocate(layout);
            assert_eq!(block.as_ptr() as usize % 16, 0);
            // SAFETY: `size` bytes were just allocated.
            unsafe {
                block.as_ptr().write_bytes(0xa5, size);
                assert_eq!(*block.as_ptr().add(size - 1), 0xa5);
                free(block, layout);
            }
        }
    }
}
