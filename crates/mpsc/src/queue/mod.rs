//! The queue: a segmented list of blocks with a claim word.
//!
//! See `docs/internals/mpsc.md` for the full argument; the invariants the code relies
//! on are restated at each `unsafe` block.
//!
//! # Positions and the claim word
//!
//! Every push claims a *position*, a `u64` that only grows over the queue's
//! whole life (across resets too). Position `p` has offset `p % LAP` in the
//! block serving lap `p / LAP`. Offsets below `BLOCK_CAP` are slots. Offset
//! `INSTALL` (`BLOCK_CAP`) is the lap's *install position*: it holds no
//! item; claiming it makes the claimer install the next block, and its item
//! goes into that block's first slot. Offset `SENTINEL` (`BLOCK_CAP + 1`)
//! never holds an item either: the word rests there while the installer
//! works, and producers that find it there wait.
//!
//! `Tail::word` is `position << 1 | CLOSED`. Producers claim with a CAS from
//! `w` to `w + ONE`; close sets `CLOSED`; reset stores a word with a larger
//! position. So the word's successive values strictly increase: a CAS that
//! succeeds proves nothing (no claim, close or reset) happened between the
//! load that produced `w` and the CAS. That is what makes the generation
//! check and the block pointer read before the CAS trustworthy.
//!
//! # A block is allocated when an item needs it
//!
//! The claim after a block's last slot installs the next block, not the
//! claim of the last slot itself: a process that received exactly as many
//! events as its block holds keeps that block only, instead of a second,
//! empty, full-size one beside it (before, a process that had received its
//! first three events held a 1 KiB block it might never use). The consumer
//! that took a block's last item waits at the install position until the
//! next block is linked, and only then recycles the block it finished.
//!
//! # A drained block serves again
//!
//! A consumer that takes its block's last item while the word still rests
//! on that lap's install position (no producer has claimed it, so no next
//! block is coming) *reopens* its block for the next lap: it clears the
//! block's `ready` flags and CASes the word from the install position to
//! the first slot the block serves in the next lap, and moves `head` there.
//! Producers then claim slots of the same block as usual, never an install
//! position; one that read the old word fails its claim and reads the new
//! one. If the CAS fails, a producer claimed the install position and links
//! a next block, which the consumer follows as before. So a queue that is
//! drained as fast as it fills never leaves its first block: before, a
//! process that had received three events reached a full block (1 KiB)
//! with its fourth, for the rest of its life.
//!
//! # Two block sizes: a short first lap
//!
//! The first block has `FIRST_CAP` slots, every later one `BLOCK_CAP`. Most
//! processes that receive anything receive a few events at a time, and a
//! full block would be most of such a process's memory; with reopening (above)
//! a process that receives its events one or two at a time never leaves its
//! first block, and one that receives many crosses a block boundary only
//! every `BLOCK_CAP` events after the first few. Sizes in between (3, then
//! 7 slots before full ones) were tried and dropped: with blocks of three
//! sizes freed on other threads than the ones that allocated them, glibc's
//! `_int_malloc` went from 1.4% to 9.6% of skynet's samples (each worker)
//! and skynet took about 30% longer. A block of `cap` slots serves the
//! *last* `cap` slot offsets of a lap, `BLOCK_CAP - cap..BLOCK_CAP`, so the
//! first block's lap is short: it starts at offset `FIRST_OFFSET` instead
//! of 0. Every block therefore ends on the same last slot, install position
//! and sentinel, and slots are stored backwards (offset `o` at index
//! `BLOCK_CAP - 1 - o`, see [`Block::slot`]), so a producer maps its offset
//! to a slot the same way whatever the block's size and never reads the
//! block's header. Only the consumer asks a block for its size: to reopen
//! it, to start its lap after a reset, and to free it with its layout.
//!
//! # The first block is allocated by the first push
//!
//! A new queue owns no block: most processes never receive an event, and a
//! block is most of an idle process's memory. The word starts on the install
//! position of a *virtual* lap (position `LAP - 2`, with `tail.block` null)
//! and the consumer's `head` on the first position of the next (short) lap,
//! `START`. The first claim therefore installs, as at any block boundary: it
//! installs the first block, publishes it in `first` (the consumer's way to
//! find it, since `tail.block` may have moved on by the time the consumer
//! looks), and moves the word past the sentinel, over the short lap's unused
//! offsets *and* over `head`'s position, which it keeps for its own item.
//! See [`Shared::install`].

use std::mem::MaybeUninit;

use crate::error::PushError;
use crate::sync::{spin_wait, AtomicPtr, AtomicU64, Ordering};

/// Positions per lap: a full block's slots, then the install position and
/// the sentinel (see the module docs).
///
/// 16 keeps a block of the scheduler's 64-byte events under 1 KiB (14 slots
/// plus the link), so allocations stay on the allocator's per-thread fast
/// path. With 32 positions, spawning a process spent about 40% of its time
/// allocating its block and skynet (1M processes) about 45% in malloc/free;
/// with 8 (for every block, not just the first), skynet, whose parents
/// receive 10 messages each, took 16-32% longer from the extra block
/// boundaries.
#[cfg(not(loom))]
const LAP: u64 = 16;
/// Small blocks under loom (3 slots, and 2 in the first) so that models
/// cross block boundaries.
#[cfg(loom)]
const LAP: u64 = 5;

/// Item slots per full block.
const BLOCK_CAP: usize = (LAP - 2) as usize;
/// The offset of a lap's install position: claiming it holds no item, it
/// makes the claimer the one that installs the next block.
const INSTALL: usize = BLOCK_CAP;
/// The offset of a lap's sentinel: the word rests there while the next
/// block is installed.
const SENTINEL: usize = BLOCK_CAP + 1;

/// Item slots of the first block.
///
/// 1: one slot of a 64-byte event makes the first block 88 bytes instead of
/// 1 KiB, which is what a process that received its first messages holds
/// beyond an idle one (while it waits with a timer pending it holds
/// none, see `Consumer::shrink_to_fit`). Since a drained block is reopened
/// by the consumer, a queue that receives one event at a time claims plain
/// slots, never an install position: ping-pong measured the same with 1
/// and 2 slots (11.7, 10.1, 11.9 ms against 10.0, 11.1, 11.5 ms, run
/// alternately), and the workflow benchmark's peak heap was lower by about
/// 1.5 MB (events waiting for their step each hold a first block).
#[cfg(not(loom))]
const FIRST_CAP: usize = 1;
/// Under loom still smaller than the rest, so models cross from the short
/// block into a full one.
#[cfg(loom)]
const FIRST_CAP: usize = 2;

/// The offset of the first block's first slot.
const FIRST_OFFSET: u64 = (BLOCK_CAP - FIRST_CAP) as u64;

const _: () = assert!(FIRST_CAP >= 1 && FIRST_CAP < BLOCK_CAP);

/// The consumer's first position in a new queue: the first slot of the
/// first block's short lap (lap 0 is virtual).
const START: u64 = LAP + FIRST_OFFSET;

/// Where the word rests in a queue without a block whose consumer waits at
/// `head` (the first slot of a short lap): the install position of the
/// virtual lap before it.
const fn virtual_last_slot(head: u64) -> u64 {
    head - FIRST_OFFSET - 2
}

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

/// What producers touch on every push.
struct Tail<T> {
    /// `position << 1 | CLOSED`; see the module docs.
    word: AtomicU64,
    /// The block serving the lap of `word`'s position.
    block: AtomicPtr<Block<T>>,
}

/// Which use of a reusable queue (see [`Consumer::reset`]) a producer
/// pushes for: the queue's current generation and the producer's own. The
/// generation lives beside the queue, not in it, so an embedded [`Queue`],
/// which is never reset, does not carry it.
#[derive(Clone, Copy)]
struct Use<'a> {
    current: &'a AtomicU64,
    mine: u64,
}

impl Use<'_> {
    /// Whether the queue was reset since the producer was made. Read after
    /// the word (see `push`).
    fn is_stale(self) -> bool {
        self.current.load(Ordering::Relaxed) != self.mine
    }
}

/// The state shared by the consumer and all producers.
///
/// Deliberately not padded to cache lines: there is one queue per process,
/// so padding would make every process pay 256 bytes and an over-aligned
/// allocation (glibc's slow `memalign` path, 3% of spawning a process).
///
/// A queue keeps no pool of finished blocks of its own: they go to the
/// finishing thread's spares (`spare.rs`), which the next install on that
/// thread takes from. A pool here was 16 bytes in every queue, most of
/// which never finish a block.
struct Shared<T> {
    tail: Tail<T>,
    /// The first block, set once by the first push (see the module docs);
    /// read by the consumer only while it holds no block.
    first: AtomicPtr<Block<T>>,
}

impl<T> Shared<T> {
    /// Frees a block the consumer finished (to this thread's spares, see
    /// `spare.rs`).
    ///
    /// # Safety
    ///
    /// Only the consumer calls this, with a block no producer will access
    /// again and whose items were all taken.
    unsafe fn recycle(&self, block: *mut Block<T>) {
        // SAFETY: forwarded from the caller.
        unsafe { Block::free(block) };
    }

    /// Installs the block after `prev` (the queue's small first block when
    /// `prev` is null), links it, and moves the word from the sentinel past
    /// the new block's first slot, which it keeps for the caller's item.
    /// Returns the new block and that slot's offset.
    ///
    /// # Safety
    ///
    /// The caller claimed the install position of `prev`'s lap (of the
    /// virtual lap when `prev` is null); that claim makes it the only
    /// installer until this returns: the next claim of an install position
    /// needs the word past this sentinel.
    unsafe fn install(&self, prev: *mut Block<T>) -> (*mut Block<T>, usize) {
        let (next, first) = if prev.is_null() {
            // Published in `first`, the consumer's way to find it
            // (`tail.block` may have moved on by the time it looks).
            let block = Block::alloc_first();
            self.first.store(block, Ordering::Release);
            (block, FIRST_OFFSET as usize)
        } else {
            let block = Block::alloc_full();
            // SAFETY: `prev` is live: the consumer recycles it only after it
            // read this link, and no one else frees a block in use. Every
            // slot of `prev` was claimed before its install position, so
            // once the consumer follows the link no producer touches `prev`
            // again (we do not either).
            unsafe { (*prev).next.store(block, Ordering::Release) };
            (block, 0)
        };
        self.tail.block.store(next, Ordering::Release);
        // Past the sentinel, over the offsets a short lap leaves out and over
        // the slot we keep; leaves CLOSED as it is (a close that raced us
        // waits for our item, see `Cursor::close`).
        self.tail
            .word
            .fetch_add((first as u64 + 2) * ONE, Ordering::Release);
        (next, first)
    }

    /// Appends `item` for a producer of `user` (`None` for the embedded
    /// queue, which has a single use); see [`Producer::push`].
    fn push(&self, user: Option<Use<'_>>, item: T) -> Result<(), PushError<T>> {
        let tail = &self.tail;
        let mut step = 0;
        let mut contention = 0;
        let mut word = tail.word.load(Ordering::Acquire);
        loop {
            // Read after the word: a word published by a reset (or any later
            // claim) carries the reset's generation store with it.
            if user.is_some_and(|user| user.is_stale()) {
                return Err(PushError::Stale(item));
            }
            if word & CLOSED != 0 {
                return Err(PushError::Closed(item));
            }
            let offset = ((word >> 1) % LAP) as usize;
            if offset == SENTINEL {
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
                    let (block, offset) = if offset == INSTALL {
                        // We claimed an install position (the virtual
                        // lap's while the queue has no block): no item goes
                        // there; we install the next block, and our item
                        // takes its first slot.
                        // SAFETY: see above.
                        unsafe { self.install(block) }
                    } else {
                        (block, offset)
                    };
                    // SAFETY: either we installed `block` and keep its
                    // first slot (`install` moved the word over it), or the
                    // claim succeeded with the word unchanged since it was
                    // loaded, so `block` is the block serving this lap (it
                    // was published before the word reached this lap, and a
                    // newer block is published only after a claim of this
                    // lap's install position, which comes after ours). The
                    // block cannot be recycled before this slot is taken, and
                    // the slot is ours alone: no other claim gets `offset` in
                    // this lap, and the consumer reads it only once `ready`
                    // is set. The block serves `offset`: a lap's claims
                    // start at its block's first offset (the word jumps
                    // there) and end below the install position.
                    unsafe {
                        let slot = Block::slot(block, offset);
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

    /// Whether a push for `user` would fail now.
    fn is_closed_for(&self, user: Option<Use<'_>>) -> bool {
        let word = self.tail.word.load(Ordering::Acquire);
        word & CLOSED != 0 || user.is_some_and(|user| user.is_stale())
    }
}

mod block;
mod consumer;
mod cursor;
mod owned;
mod producer;
#[cfg(not(loom))]
mod spare;
#[cfg(all(test, not(loom)))]
mod tests;

use block::Block;
use consumer::Reusable;
pub use consumer::{queue, Consumer};
use cursor::Cursor;
pub use owned::Queue;
pub use producer::Producer;
