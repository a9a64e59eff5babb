//! The queue: a segmented list of fixed-size blocks with a claim word.
//!
//! See `docs/mpsc.md` for the full argument; the invariants the code relies
//! on are restated at each `unsafe` block.
//!
//! # Positions and the claim word
//!
//! Every push claims a *position*, a `u64` that only grows over the queue's
//! whole life (across resets too). Position `p` lives in slot `p % LAP` of
//! the block serving lap `p / LAP`. Offsets `0..BLOCK_CAP` are slots; offset
//! `BLOCK_CAP` is a *sentinel* that never holds an item: the word rests there
//! while the producer that claimed the last slot of a block installs the next
//! block.
//!
//! `Tail::word` is `position << 1 | CLOSED`. Producers claim with a CAS from
//! `w` to `w + ONE`; close sets `CLOSED`; reset stores a word with a larger
//! position. So the word's successive values strictly increase: a CAS that
//! succeeds proves nothing (no claim, close or reset) happened between the
//! load that produced `w` and the CAS. That is what makes the generation
//! check and the block pointer read before the CAS trustworthy.
//!
//! # The first block is allocated by the first push
//!
//! A new queue owns no block: most processes never receive an event, and a
//! block is most of an idle process's memory. The word starts on the last
//! slot of a *virtual* lap (position `LAP - 2`, with `tail.block` null) and
//! the consumer's `head` on the first position of the next lap. The first
//! claim therefore takes the virtual lap's last slot, which makes it the
//! installer, as for any block boundary: it installs the first block,
//! publishes it in `first` (the consumer's way to find it, since `tail.block`
//! may have moved on by the time the consumer looks), and moves the word two
//! positions on, past the sentinel *and* over `head`'s position, which it
//! keeps for its own item. See [`Shared::install_first`].

use std::mem::MaybeUninit;
use std::ptr;

use crate::error::PushError;
use crate::sync::{spin_wait, AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering, UnsafeCell};

/// Positions per block, counting the sentinel.
///
/// 16 keeps a block of the scheduler's 56-byte events under 1 KiB (15 slots
/// of 64 bytes plus the link): every process owns one block from birth, so
/// this is most of a process's memory, and allocations under 1 KiB stay on
/// the allocator's per-thread fast path. With 32 positions, spawning a
/// process spent about 40% of its time allocating its block and skynet
/// (1M processes) about 45% in malloc/free.
#[cfg(not(loom))]
const LAP: u64 = 16;
/// Tiny blocks under loom so that models cross block boundaries.
#[cfg(loom)]
const LAP: u64 = 4;

/// Item slots per block.
const BLOCK_CAP: usize = (LAP - 1) as usize;

/// Recycled blocks kept in the pool at most (blocks in use not counted).
#[cfg(not(loom))]
const POOL_MAX: usize = 2;
#[cfg(loom)]
const POOL_MAX: usize = 1;

/// Spins `2^round` times (at most 64) after a lost claim; the loser retries
/// at once under loom, where a lost CAS already means another thread moved.
#[inline]
fn backoff(round: &mut u32) {
    #[cfg(not(loom))]
    {
        for _ in 0..(1u32 << *round) {
            std::hint::spin_loop();
        }
        if *round < 6 {
            *round += 1;
        }
    }
    #[cfg(loom)]
    let _ = round;
}

/// The closed bit of the claim word.
const CLOSED: u64 = 1;
/// One position in the claim word.
const ONE: u64 = 2;

/// One item's place in a block.
struct Slot<T> {
    /// Written once by the producer that claimed the slot, read once by the
    /// consumer after it saw `ready`.
    value: UnsafeCell<MaybeUninit<T>>,
    /// Set (Release) by the producer after writing `value`; cleared by the
    /// consumer when the whole block is recycled or reused by `reset`, so
    /// blocks come back clean.
    ready: AtomicBool,
}

/// A fixed-size segment of the queue.
struct Block<T> {
    /// The block serving the next lap (set by the installer before it marks
    /// its own slot ready), or the pool link while the block is in the pool.
    next: AtomicPtr<Block<T>>,
    slots: [Slot<T>; BLOCK_CAP],
}

impl<T> Block<T> {
    /// Allocates an empty block: `next` null, no slot ready.
    fn alloc() -> *mut Block<T> {
        #[cfg(not(loom))]
        {
            use std::alloc::{alloc_zeroed, handle_alloc_error, Layout};
            let layout = Layout::new::<Block<T>>();
            // SAFETY: the layout is not zero-sized (`next` is a pointer).
            // Every field of `Block` is valid when all bits are zero:
            // `AtomicPtr` (null), `AtomicBool` (false), and
            // `UnsafeCell<MaybeUninit<T>>` (any bits). Zeroing avoids building
            // a possibly large array on the stack. The allocation has the
            // layout of a `Box<Block<T>>`, so `Block::free` may rebuild one.
            let block = unsafe { alloc_zeroed(layout) }.cast::<Block<T>>();
            if block.is_null() {
                handle_alloc_error(layout);
            }
            block
        }
        #[cfg(loom)]
        {
            Box::into_raw(Box::new(Block {
                next: AtomicPtr::new(ptr::null_mut()),
                slots: std::array::from_fn(|_| Slot {
                    value: UnsafeCell::new(MaybeUninit::uninit()),
                    ready: AtomicBool::new(false),
                }),
            }))
        }
    }

    /// Clears the `ready` flags of the first `upto` slots. Only for a block
    /// the consumer has to itself, once it took those slots' items.
    fn clear(&self, upto: usize) {
        for slot in &self.slots[..upto] {
            slot.ready.store(false, Ordering::Relaxed);
        }
    }

    /// Frees a block allocated by [`Block::alloc`].
    ///
    /// # Safety
    ///
    /// `block` came from `Block::alloc`, no thread will access it again, and
    /// no slot holds an item (items are moved out before blocks are freed).
    unsafe fn free(block: *mut Block<T>) {
        // SAFETY: the caller guarantees exclusive ownership of an allocation
        // made by `Box::into_raw`; `MaybeUninit` slots drop nothing.
        drop(unsafe { Box::from_raw(block) });
    }
}

/// What producers touch on every push.
struct Tail<T> {
    /// `position << 1 | CLOSED`; see the module docs.
    word: AtomicU64,
    /// The current generation; bumped by `reset` before the new word is
    /// published.
    generation: AtomicU64,
    /// The block serving the lap of `word`'s position.
    block: AtomicPtr<Block<T>>,
}

/// Recycled blocks: a Treiber stack the consumer pushes onto and the
/// installing producer pops from.
///
/// Pops are serialised: only the producer that claimed the last slot of the
/// tail block pops, and the next such claim cannot happen before that
/// producer moved the word past the sentinel (after its pop). While the queue
/// is closed, only the consumer pops. With a single popper and nodes that are
/// only freed by the popper, there is no ABA and no read of a freed node.
struct Pool<T> {
    head: AtomicPtr<Block<T>>,
    len: AtomicUsize,
}

/// The state shared by the consumer and all producers.
///
/// Deliberately not padded to cache lines: there is one queue per process,
/// so padding would make every process pay 256 bytes and an over-aligned
/// allocation (glibc's slow `memalign` path, 3% of spawning a process). The
/// pool shares the tail's line, but it is touched once per block (15
/// pushes), not per push.
struct Shared<T> {
    tail: Tail<T>,
    pool: Pool<T>,
    /// The first block, set once by the first push (see the module docs);
    /// read by the consumer only while it holds no block.
    first: AtomicPtr<Block<T>>,
}

impl<T> Shared<T> {
    /// Pops a recycled block, `next` reset to null.
    ///
    /// # Safety
    ///
    /// The caller is the only thread that may pop right now (see [`Pool`]).
    unsafe fn pool_pop(&self) -> Option<*mut Block<T>> {
        let mut head = self.pool.head.load(Ordering::Acquire);
        loop {
            if head.is_null() {
                return None;
            }
            // SAFETY: `head` is in the pool and only the caller pops, so it
            // stays allocated; the Acquire load synchronised with the push
            // that wrote its `next`.
            let next = unsafe { (*head).next.load(Ordering::Relaxed) };
            match self
                .pool
                .head
                .compare_exchange(head, next, Ordering::Acquire, Ordering::Acquire)
            {
                Ok(_) => {
                    self.pool.len.fetch_sub(1, Ordering::Relaxed);
                    // SAFETY: the block is now ours alone.
                    unsafe { (*head).next.store(ptr::null_mut(), Ordering::Relaxed) };
                    return Some(head);
                }
                Err(current) => head = current,
            }
        }
    }

    /// Gives a drained block back to the pool, or frees it if the pool is
    /// full.
    ///
    /// # Safety
    ///
    /// Only the consumer calls this, with a block no producer will access
    /// again and whose items were all taken.
    unsafe fn recycle(&self, block: *mut Block<T>) {
        if self.pool.len.load(Ordering::Relaxed) >= POOL_MAX {
            // SAFETY: forwarded from the caller.
            unsafe { Block::free(block) };
            return;
        }
        // Clear the flags here, in one pass over lines no producer touches,
        // rather than one store per take on lines producers are writing.
        // SAFETY: the block is exclusively ours (see above).
        unsafe { (*block).clear(BLOCK_CAP) };
        // Count before linking so a concurrent pop can never take the count
        // below zero.
        self.pool.len.fetch_add(1, Ordering::Relaxed);
        let mut head = self.pool.head.load(Ordering::Relaxed);
        loop {
            // SAFETY: the block is exclusively ours until the CAS publishes it.
            unsafe { (*block).next.store(head, Ordering::Relaxed) };
            match self
                .pool
                .head
                .compare_exchange(head, block, Ordering::Release, Ordering::Relaxed)
            {
                Ok(_) => return,
                Err(current) => head = current,
            }
        }
    }

    /// Links a block after `prev` and moves the word from the sentinel of
    /// `prev`'s lap to the first position of the next lap.
    ///
    /// # Safety
    ///
    /// The caller claimed the last slot of `prev`, the current tail block;
    /// that claim makes it the only installer (and the only pool popper)
    /// until this returns.
    unsafe fn install_next(&self, prev: *mut Block<T>) {
        // SAFETY: we are the only popper (see above).
        let next = unsafe { self.pool_pop() }.unwrap_or_else(Block::alloc);
        // SAFETY: `prev` cannot be recycled before our own slot in it is
        // taken, which happens after we mark it ready.
        unsafe { (*prev).next.store(next, Ordering::Release) };
        self.tail.block.store(next, Ordering::Release);
        // Leaves CLOSED as it is: a close that raced us still holds.
        self.tail.word.fetch_add(ONE, Ordering::Release);
    }

    /// Installs the queue's first block for the producer that claimed the
    /// virtual lap's last slot, claims the first slot of the new lap for it
    /// (the consumer's `head`), and returns the block.
    ///
    /// # Safety
    ///
    /// The caller's claim was the virtual last slot (`tail.block` was null
    /// when it claimed); that makes it the only installer, as in
    /// [`install_next`](Shared::install_next).
    unsafe fn install_first(&self) -> *mut Block<T> {
        // SAFETY: we are the only popper (a reset queue may have kept none,
        // but the rule is the same).
        let block = unsafe { self.pool_pop() }.unwrap_or_else(Block::alloc);
        self.first.store(block, Ordering::Release);
        self.tail.block.store(block, Ordering::Release);
        // Past the sentinel and over the position we keep; leaves CLOSED as
        // it is (a close that raced us waits for our item, see `close`).
        self.tail.word.fetch_add(2 * ONE, Ordering::Release);
        block
    }
    /// Appends `item` for a producer bound to `generation`; see
    /// [`Producer::push`].
    fn push(&self, generation: u64, item: T) -> Result<(), PushError<T>> {
        let tail = &self.tail;
        let mut step = 0;
        let mut contention = 0;
        let mut word = tail.word.load(Ordering::Acquire);
        loop {
            // Read after the word: a word published by a reset (or any later
            // claim) carries the reset's generation store with it.
            if tail.generation.load(Ordering::Relaxed) != generation {
                return Err(PushError::Stale(item));
            }
            if word & CLOSED != 0 {
                return Err(PushError::Closed(item));
            }
            let offset = ((word >> 1) % LAP) as usize;
            if offset == BLOCK_CAP {
                // Another producer is linking the next block.
                spin_wait(&mut step);
                word = tail.word.load(Ordering::Acquire);
                continue;
            }
            // Must be read before the claim: after it, the block may be
            // completed and the pointer moved on by other producers.
            let block = tail.block.load(Ordering::Acquire);
            match tail.word.compare_exchange_weak(
                word,
                word + ONE,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    let (block, offset) = if block.is_null() {
                        // The queue had no block: we claimed the virtual
                        // lap's last slot (the only claim possible while
                        // `tail.block` is null), and our item goes into the
                        // first slot of the first block.
                        // SAFETY: see above.
                        (unsafe { self.install_first() }, 0)
                    } else {
                        if offset + 1 == BLOCK_CAP {
                            // SAFETY: we claimed the last slot of the tail block.
                            unsafe { self.install_next(block) };
                        }
                        (block, offset)
                    };
                    // SAFETY: the claim succeeded with the word unchanged
                    // since it was loaded, so `block` is the block serving
                    // this lap (it was published before the word reached this
                    // lap, and a newer block is published only after a claim
                    // of this lap's last slot, which comes after ours). The
                    // block cannot be recycled before this slot is taken, and
                    // the slot is ours alone: no other claim gets `offset` in
                    // this lap, and the consumer reads it only once `ready`
                    // is set. For the first block, slot 0 is ours because
                    // `install_first` moved the word over its position.
                    unsafe {
                        let slot = (*block).slots.get_unchecked(offset);
                        slot.value.with_mut(|p| p.write(MaybeUninit::new(item)));
                        // Our last access to the block: once the consumer
                        // sees this, the block may be recycled.
                        slot.ready.store(true, Ordering::Release);
                    }
                    return Ok(());
                }
                Err(current) => {
                    word = current;
                    // Lost the race: back off a little, exponentially, so
                    // contending producers stop bouncing the word's line.
                    backoff(&mut contention);
                }
            }
        }
    }

    /// Whether a push under `generation` would fail now.
    fn is_closed_for(&self, generation: u64) -> bool {
        let word = self.tail.word.load(Ordering::Acquire);
        word & CLOSED != 0 || self.tail.generation.load(Ordering::Relaxed) != generation
    }
}

mod consumer;
mod cursor;
mod owned;
mod producer;
#[cfg(all(test, not(loom)))]
mod tests;

pub use consumer::{queue, Consumer};
use cursor::Cursor;
pub use owned::Queue;
pub use producer::Producer;
