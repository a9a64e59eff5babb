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

use std::mem::{self, MaybeUninit};
use std::ptr;

use crate::error::PushError;
use crate::sync::{
    spin_wait, Arc, AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering, UnsafeCell,
};

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

/// A handle that pushes items into a queue, from any thread.
///
/// Cheap to clone; all clones are bound to the same use (generation) of the
/// queue. Items pushed through one producer come out in the order they were
/// pushed.
///
/// # Examples
///
/// ```
/// let (tx, mut rx) = mpsc::queue();
/// let tx2 = tx.clone();
/// std::thread::spawn(move || tx2.push(1).unwrap()).join().unwrap();
/// tx.push(2).unwrap();
/// let mut batch = Vec::new();
/// rx.drain_into(&mut batch);
/// assert_eq!(batch, [1, 2]);
/// ```
pub struct Producer<T> {
    queue: Arc<Queue<T>>,
    generation: u64,
}

// SAFETY: a producer only moves `T` values into the queue (to be taken by the
// consumer on another thread), so it is Send and Sync when `T: Send`; all
// shared state is atomics and slot cells guarded by the claim protocol.
unsafe impl<T: Send> Send for Producer<T> {}
// SAFETY: see the `Send` impl: `push(&self)` is safe to call concurrently.
unsafe impl<T: Send> Sync for Producer<T> {}

impl<T> Clone for Producer<T> {
    fn clone(&self) -> Self {
        Producer {
            queue: self.queue.clone(),
            generation: self.generation,
        }
    }
}

impl<T> std::fmt::Debug for Producer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Producer")
            .field("generation", &self.generation)
            .field("closed", &self.is_closed())
            .finish()
    }
}

impl<T> Producer<T> {
    /// Appends `item` to the queue.
    ///
    /// Lock-free: a failed claim means another producer's claim succeeded.
    /// The one exception is the few stores while the producer that took the
    /// last slot of a block links the next one, which other producers wait
    /// out. No allocation happens in steady state: blocks are recycled by the
    /// consumer (a block is allocated only when the pool is empty).
    ///
    /// # Errors
    ///
    /// [`PushError::Closed`] if the queue was closed, [`PushError::Stale`] if
    /// it was reset after this producer was created. Either way the item is
    /// handed back inside the error.
    ///
    /// # Examples
    ///
    /// ```
    /// let (tx, mut rx) = mpsc::queue();
    /// tx.push("a").unwrap();
    /// rx.close();
    /// assert_eq!(tx.push("b").unwrap_err().into_inner(), "b");
    /// ```
    pub fn push(&self, item: T) -> Result<(), PushError<T>> {
        self.queue.shared.push(self.generation, item)
    }

    /// `true` if a push would fail now: the queue is closed, or it was reset
    /// after this producer was created.
    ///
    /// # Examples
    ///
    /// ```
    /// let (tx, mut rx) = mpsc::queue::<u32>();
    /// assert!(!tx.is_closed());
    /// rx.close();
    /// assert!(tx.is_closed());
    /// ```
    pub fn is_closed(&self) -> bool {
        self.queue.shared.is_closed_for(self.generation)
    }

    /// The generation (use of the queue) this producer is bound to.
    ///
    /// # Examples
    ///
    /// ```
    /// let (tx, mut rx) = mpsc::queue::<u32>();
    /// assert_eq!(tx.generation(), 0);
    /// rx.reset();
    /// assert_eq!(rx.producer().generation(), 1);
    /// ```
    pub fn generation(&self) -> u64 {
        self.generation
    }
}

/// The consumer's position in the queue: plain fields, touched only by the
/// single consumer.
struct Cursor<T> {
    /// Next position to take. Invariant: never at a sentinel offset.
    head: u64,
    /// The block serving `head`'s lap, or null while the queue has none
    /// (before the first push; see [`Cursor::adopt_first`]). Owned by the
    /// consumer in the sense that only the consumer recycles it.
    block: *mut Block<T>,
    /// A position no larger than the word's at some point since the last
    /// look: every position below it was claimed. `head >= claimed` means
    /// look again. Only a hint; `ready` decides.
    claimed: u64,
    /// The current generation (the consumer is its only writer).
    generation: u64,
    /// Whether the consumer closed the queue (it is the only one who can).
    closed: bool,
}

// Manual impls: a derive would require `T: Copy`, but the cursor only holds
// a pointer to blocks of `T`.
impl<T> Clone for Cursor<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Cursor<T> {}

impl<T> Cursor<T> {
    /// A cursor for a new queue: lap 0 is virtual, so `head` starts on the
    /// first position of lap 1, with no block yet (see the module docs).
    fn new() -> Self {
        Cursor {
            head: LAP,
            block: ptr::null_mut(),
            claimed: 0,
            generation: 0,
            closed: false,
        }
    }

    /// Makes sure the consumer holds the block serving `head`'s lap; `false`
    /// if the queue still has none (no push has installed the first block).
    ///
    /// While the consumer holds no block, `head` is the first position of
    /// the first block's lap, so that block is the right one even if
    /// producers have moved `tail.block` further on since.
    #[inline]
    fn adopt_first(&mut self, shared: &Shared<T>) -> bool {
        if self.block.is_null() {
            self.block = shared.first.load(Ordering::Acquire);
        }
        !self.block.is_null()
    }

    /// See [`Consumer::drain_into`].
    fn drain_into(&mut self, shared: &Shared<T>, out: &mut Vec<T>) -> usize {
        let mut taken = 0;
        let mut looked = false;
        loop {
            if self.head >= self.claimed {
                // At most one look per call: what was claimed by then is
                // all we take, so producers that keep pushing cannot hold
                // the consumer here (a worker draining a flooded process
                // would never get to run anything else). One look after the
                // call began is also enough to take every push that
                // completed before it.
                if looked {
                    break;
                }
                looked = true;
                // Look at the producers' word only when the known claims
                // are used up: an empty poll then reads that line instead of
                // the slot line a producer is about to write into.
                self.claimed = shared.tail.word.load(Ordering::Acquire) >> 1;
                if self.head >= self.claimed {
                    break;
                }
            }
            match self.try_take(shared) {
                Some(item) => {
                    out.push(item);
                    taken += 1;
                }
                // Claimed but not yet written: stop, never wait.
                None => break,
            }
        }
        taken
    }

    /// See [`Consumer::is_empty`].
    fn is_empty(&self, shared: &Shared<T>) -> bool {
        let block = if self.block.is_null() {
            shared.first.load(Ordering::Acquire)
        } else {
            self.block
        };
        if block.is_null() {
            return true;
        }
        let offset = (self.head % LAP) as usize;
        // SAFETY: `block` serves `head`'s lap (it is the consumer's, or the
        // first block while the consumer has none, see `adopt_first`) and is
        // only recycled by this consumer through `&mut self`;
        // `offset < BLOCK_CAP` because `head` never rests on a sentinel.
        let slot = unsafe { (*block).slots.get_unchecked(offset) };
        !slot.ready.load(Ordering::Acquire)
    }

    /// See [`Consumer::close`].
    fn close(&mut self, shared: &Shared<T>) -> Vec<T> {
        if self.closed {
            // Everything was taken by the first close and no claim has
            // succeeded since. Returning here also keeps a released cursor
            // (blocks freed) from looking at its blocks again.
            return Vec::new();
        }
        let word = shared.tail.word.fetch_or(CLOSED, Ordering::AcqRel);
        self.closed = true;
        // No claim can follow: everything pending lies below `end`. If `end`
        // is a sentinel, taking the slot before it moves `head` past it.
        let mut end = word >> 1;
        if self.block.is_null() && end + 1 == self.head {
            // The word rests on the virtual lap's sentinel: the first push
            // is installing the first block and keeps `head`'s position for
            // its item, which we must wait for like any claimed slot.
            end = self.head + 1;
        }
        let mut pending = Vec::new();
        while self.head < end {
            let mut step = 0;
            loop {
                if let Some(item) = self.try_take(shared) {
                    pending.push(item);
                    break;
                }
                // Claimed but not yet written: the producer is mid-push.
                spin_wait(&mut step);
            }
        }
        pending
    }

    /// See [`Consumer::reset`].
    fn reset(&mut self, shared: &Shared<T>) -> Vec<T> {
        let pending = self.close(shared);
        if self.block.is_null() {
            // Never pushed to: stay blockless, on the last slot of a fresh
            // virtual lap. The new word is still larger than every earlier
            // one (they were at most `head - 2`, closed).
            let start = self.head + LAP;
            self.generation += 1;
            shared
                .tail
                .generation
                .store(self.generation, Ordering::Release);
            self.head = start;
            shared.tail.word.store((start - 2) << 1, Ordering::Release);
            self.closed = false;
            return pending;
        }
        // The queue is closed and every claimed slot was taken, so no
        // producer touches any block or the pool any more, and the word
        // stays `head << 1 | CLOSED` until we store it.
        debug_assert_eq!(
            shared.tail.word.load(Ordering::Relaxed),
            self.head << 1 | CLOSED
        );
        while shared.pool.len.load(Ordering::Relaxed) > 1 {
            // SAFETY: closed and quiescent: the consumer is the only popper.
            match unsafe { shared.pool_pop() } {
                // SAFETY: popped, so no one else can reach it; its slots are
                // clear.
                Some(block) => unsafe { Block::free(block) },
                None => break,
            }
        }
        // Restart at the next lap, in the same block: its slots below `head`
        // were taken (clear their flags now), the rest were never claimed;
        // its `next` is null (its last slot was never claimed), and
        // `tail.block` already points at it.
        // SAFETY: quiescent, as argued above.
        unsafe { (*self.block).clear((self.head % LAP) as usize) };
        // The new word is larger than every earlier one, so a stale
        // producer's CAS can never succeed.
        let start = (self.head / LAP + 1) * LAP;
        self.generation += 1;
        shared
            .tail
            .generation
            .store(self.generation, Ordering::Release);
        self.head = start;
        // Publishes the generation and every read of the old items.
        shared.tail.word.store(start << 1, Ordering::Release);
        self.closed = false;
        pending
    }

    /// Takes the item at `head` if its push completed.
    #[inline]
    fn try_take(&mut self, shared: &Shared<T>) -> Option<T> {
        if !self.adopt_first(shared) {
            return None;
        }
        let offset = (self.head % LAP) as usize;
        // SAFETY: `self.block` serves `head`'s lap and stays allocated while
        // we hold it; `offset < BLOCK_CAP` (head never rests on a sentinel).
        let slot = unsafe { (*self.block).slots.get_unchecked(offset) };
        if !slot.ready.load(Ordering::Acquire) {
            return None;
        }
        // SAFETY: `ready` (Acquire) synchronised with the producer's Release
        // store after it initialised the value; the value is read exactly
        // once, since `head` moves past it before anything else can run.
        let item = slot.value.with(|p| unsafe { ptr::read(p).assume_init() });
        // `ready` stays set: the flags are cleared when the whole block is
        // recycled (or reused by `reset`), and `head` has moved past it.
        self.head += 1;
        if self.head % LAP == BLOCK_CAP as u64 {
            // We took the block's last slot. Its producer linked the next
            // block before marking the slot ready, and every other slot was
            // taken before, so no producer will touch this block again.
            // SAFETY: see above; `self.block` is still allocated.
            let next = unsafe { (*self.block).next.load(Ordering::Acquire) };
            debug_assert!(!next.is_null());
            let done = mem::replace(&mut self.block, next);
            self.head += 1;
            // SAFETY: only the consumer recycles; every slot of `done` was
            // taken (and cleared), and no producer accesses it any more.
            unsafe { shared.recycle(done) };
        }
        Some(item)
    }

    /// Closes the queue, frees every block and returns what was pending.
    ///
    /// The items are returned, not dropped: the caller drops them only after
    /// it has stored this cursor's final state wherever it keeps it, because
    /// a user `Drop` may panic, and the unwinding then runs the queue's own
    /// `Drop`. A stale cursor there would take (and drop) the same items
    /// again, from blocks freed meanwhile.
    ///
    /// # Safety
    ///
    /// No producer will push any more (every handle is gone or stays
    /// closed: only a consumer could reopen the queue, and this is its last
    /// use).
    #[must_use = "the pending items are dropped by the caller, after it saved the cursor"]
    unsafe fn release(&mut self, shared: &Shared<T>) -> Vec<T> {
        // Closing waits out in-flight pushes; afterwards no producer will
        // ever touch a block or the pool again (they see CLOSED first).
        let pending = self.close(shared);
        if !self.block.is_null() {
            // SAFETY: quiescent as argued above; `self.block` has no
            // successor (its last slot was never claimed) and no items.
            unsafe { Block::free(self.block) };
            self.block = ptr::null_mut();
        }
        // SAFETY: closed and quiescent, so the consumer is the only popper.
        while let Some(block) = unsafe { shared.pool_pop() } {
            // SAFETY: popped blocks are ours alone and hold no items.
            unsafe { Block::free(block) };
        }
        pending
    }
}

/// A queue to embed in a structure of one's own, for a consumer whose
/// exclusivity the embedding code guarantees by other means.
///
/// [`queue`], [`Producer`] and [`Consumer`] share a `Queue` through an
/// `Arc` and make exclusivity a matter of types (`&mut Consumer`). A
/// scheduler that already keeps each process in one shared allocation and
/// already guarantees that only one thread at a time runs it can put the
/// queue in that allocation instead, saving an allocation per process: it
/// pushes with [`push`](Queue::push) and consumes with the `unsafe`
/// consumer methods, whose contract is that at most one thread uses them at
/// a time. Queues used this way are never reset (generation 0).
///
/// # Examples
///
/// ```
/// use std::sync::{Arc, Mutex};
///
/// // Exclusivity from a mutex, for the example's sake.
/// struct Mailbox {
///     queue: mpsc::Queue<u32>,
///     consuming: Mutex<()>,
/// }
/// let mailbox = Arc::new(Mailbox { queue: mpsc::Queue::new(), consuming: Mutex::new(()) });
/// let remote = mailbox.clone();
/// std::thread::spawn(move || remote.queue.push(7).unwrap()).join().unwrap();
///
/// let _only_consumer = mailbox.consuming.lock().unwrap();
/// let mut batch = Vec::new();
/// // SAFETY: the consumer methods run under `consuming`.
/// assert_eq!(unsafe { mailbox.queue.drain_into(&mut batch) }, 1);
/// assert_eq!(unsafe { mailbox.queue.close() }, []);
/// assert!(mailbox.queue.push(8).unwrap_err().is_closed());
/// ```
pub struct Queue<T> {
    shared: Shared<T>,
    cursor: UnsafeCell<Cursor<T>>,
}

// SAFETY: producers only move `T` values in, to be taken on the consumer's
// thread, so the queue may be shared and sent when `T: Send`. The cursor is
// only reached through the `unsafe` consumer methods, whose callers promise
// one user at a time, or through `&mut` (`Consumer`, `Drop`).
unsafe impl<T: Send> Send for Queue<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for Queue<T> {}

impl<T> std::fmt::Debug for Queue<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queue")
            .field("closed", &self.is_closed())
            .finish_non_exhaustive()
    }
}

impl<T> Default for Queue<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Queue<T> {
    /// Creates an open, empty queue. Allocates nothing: the first block
    /// comes with the first push.
    ///
    /// # Examples
    ///
    /// ```
    /// let q = mpsc::Queue::<u8>::new();
    /// assert!(!q.is_closed());
    /// ```
    pub fn new() -> Self {
        Queue {
            // Lap 0 is virtual: the word starts on its last slot, so the
            // first claim installs the first block (see the module docs).
            shared: Shared {
                tail: Tail {
                    word: AtomicU64::new((LAP - 2) << 1),
                    generation: AtomicU64::new(0),
                    block: AtomicPtr::new(ptr::null_mut()),
                },
                pool: Pool {
                    head: AtomicPtr::new(ptr::null_mut()),
                    len: AtomicUsize::new(0),
                },
                first: AtomicPtr::new(ptr::null_mut()),
            },
            cursor: UnsafeCell::new(Cursor::new()),
        }
    }

    /// Appends `item`, from any thread; as [`Producer::push`].
    ///
    /// # Errors
    ///
    /// [`PushError::Closed`], with the item, once the queue was closed.
    ///
    /// # Examples
    ///
    /// ```
    /// let q = mpsc::Queue::new();
    /// q.push(1).unwrap();
    /// // SAFETY: this thread is the only consumer.
    /// assert_eq!(unsafe { q.close() }, [1]);
    /// ```
    pub fn push(&self, item: T) -> Result<(), PushError<T>> {
        self.shared.push(0, item)
    }

    /// `true` once the queue was closed.
    ///
    /// # Examples
    ///
    /// ```
    /// let q = mpsc::Queue::<u8>::new();
    /// // SAFETY: this thread is the only consumer.
    /// unsafe { q.close() };
    /// assert!(q.is_closed());
    /// ```
    pub fn is_closed(&self) -> bool {
        self.shared.is_closed_for(0)
    }

    /// Moves every ready item to the end of `out`; as
    /// [`Consumer::drain_into`].
    ///
    /// # Safety
    ///
    /// No other thread runs a consumer method (`drain_into`, `is_empty`,
    /// `close`) of this queue at the same time, and successive callers are
    /// ordered by happens-before (a lock, or an acquire/release hand-off).
    ///
    /// # Examples
    ///
    /// See [`Queue`].
    pub unsafe fn drain_into(&self, out: &mut Vec<T>) -> usize {
        // SAFETY: the caller is the only consumer right now.
        self.cursor
            .with_mut(|c| unsafe { &mut *c }.drain_into(&self.shared, out))
    }

    /// `true` if nothing is ready to be drained; as [`Consumer::is_empty`].
    ///
    /// # Safety
    ///
    /// As for [`drain_into`](Queue::drain_into).
    ///
    /// # Examples
    ///
    /// ```
    /// let q = mpsc::Queue::new();
    /// // SAFETY: this thread is the only consumer.
    /// assert!(unsafe { q.is_empty() });
    /// q.push(()).unwrap();
    /// assert!(!unsafe { q.is_empty() });
    /// ```
    pub unsafe fn is_empty(&self) -> bool {
        // SAFETY: the caller is the only consumer right now.
        self.cursor.with(|c| unsafe { &*c }.is_empty(&self.shared))
    }

    /// Closes the queue and returns what was pending; as
    /// [`Consumer::close`].
    ///
    /// # Safety
    ///
    /// As for [`drain_into`](Queue::drain_into).
    ///
    /// # Examples
    ///
    /// See [`Queue`].
    pub unsafe fn close(&self) -> Vec<T> {
        // SAFETY: the caller is the only consumer right now.
        self.cursor
            .with_mut(|c| unsafe { &mut *c }.close(&self.shared))
    }
}

impl<T> Drop for Queue<T> {
    fn drop(&mut self) {
        let shared = &self.shared;
        // SAFETY: `&mut self`: no producer handle or consumer is left.
        let pending = self.cursor.with_mut(|c| unsafe { (*c).release(shared) });
        // Dropped last: if an item's `Drop` panics, the cursor is already
        // closed and blockless, so nothing is dropped or freed twice.
        drop(pending);
    }
}

/// The single consumer of a queue: drains, closes and resets it.
///
/// Not `Clone`; it may move between threads (the worker running a process
/// changes). Dropping it closes the queue, drops any pending items and
/// frees the blocks.
///
/// # Examples
///
/// ```
/// let mut rx = mpsc::Consumer::new();
/// let tx = rx.producer();
/// tx.push(10).unwrap();
/// tx.push(11).unwrap();
/// let mut batch = Vec::new();
/// assert_eq!(rx.drain_into(&mut batch), 2);
/// assert_eq!(batch, [10, 11]);
/// ```
pub struct Consumer<T> {
    queue: Arc<Queue<T>>,
    /// The consumer's own cursor, in the consumer's memory rather than the
    /// queue's (whose internal cursor serves embedded use): next to the
    /// producers' claim word it would share their cache line, and two
    /// producers pushing into a draining consumer ran 1.6 times slower.
    /// Written back into the queue when the consumer is dropped.
    cursor: Cursor<T>,
}

// SAFETY: the consumer owns the right to take items (moving `T` to its
// thread), so it can move between threads when `T: Send`. The cursor's raw
// block pointer is only dereferenced under the queue protocol, not thread
// identity.
unsafe impl<T: Send> Send for Consumer<T> {}
// SAFETY: the only `&self` methods (`is_empty`, `producer`, `is_closed`,
// `generation`) do atomic loads or read plain fields that change only
// through `&mut self`.
unsafe impl<T: Send> Sync for Consumer<T> {}

impl<T> std::fmt::Debug for Consumer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Consumer")
            .field("generation", &self.generation())
            .field("closed", &self.is_closed())
            .field("empty", &self.is_empty())
            .finish()
    }
}

impl<T> Default for Consumer<T> {
    fn default() -> Self {
        Self::new()
    }
}

/// Creates an open queue and returns a producer and its consumer.
///
/// More producers come from [`Producer::clone`] or [`Consumer::producer`].
///
/// # Examples
///
/// ```
/// let (tx, mut rx) = mpsc::queue();
/// tx.push('x').unwrap();
/// let mut batch = Vec::new();
/// rx.drain_into(&mut batch);
/// assert_eq!(batch, ['x']);
/// ```
pub fn queue<T>() -> (Producer<T>, Consumer<T>) {
    let consumer = Consumer::new();
    (consumer.producer(), consumer)
}

impl<T> Consumer<T> {
    /// Creates an open, empty queue (generation 0) and returns its consumer.
    ///
    /// Allocates only the shared part: the first block is allocated by the
    /// first push, so a queue that never receives anything costs no block.
    ///
    /// # Examples
    ///
    /// ```
    /// let rx = mpsc::Consumer::<u64>::new();
    /// assert!(rx.is_empty());
    /// assert_eq!(rx.generation(), 0);
    /// ```
    pub fn new() -> Self {
        Consumer {
            queue: Arc::new(Queue::new()),
            cursor: Cursor::new(),
        }
    }

    /// Runs `f` on the cursor. `Consumer` is the queue's only consumer and
    /// not `Clone`, so `&mut self` makes this the only use of the cursor.
    fn cursor_mut<R>(&mut self, f: impl FnOnce(&mut Cursor<T>, &Shared<T>) -> R) -> R {
        f(&mut self.cursor, &self.queue.shared)
    }

    /// Runs `f` on the cursor for reading.
    fn cursor<R>(&self, f: impl FnOnce(&Cursor<T>, &Shared<T>) -> R) -> R {
        f(&self.cursor, &self.queue.shared)
    }

    /// Returns a new producer bound to the queue's current generation.
    ///
    /// # Examples
    ///
    /// ```
    /// let mut rx = mpsc::Consumer::new();
    /// rx.producer().push(5).unwrap();
    /// let mut batch = Vec::new();
    /// rx.drain_into(&mut batch);
    /// assert_eq!(batch, [5]);
    /// ```
    pub fn producer(&self) -> Producer<T> {
        Producer {
            queue: self.queue.clone(),
            generation: self.generation(),
        }
    }

    /// Moves every item that is ready, in claim order, to the end of `out`,
    /// and returns how many were moved.
    ///
    /// Never blocks: it stops at the first slot whose push has been claimed
    /// but not yet written. Bounded: it takes only what was claimed by the
    /// time it first looked at the producers' side, so producers that keep
    /// pushing cannot keep it draining forever; every push that completed
    /// before the call is taken. Items of one producer keep their order. With a
    /// reused `out` of sufficient capacity this allocates nothing.
    ///
    /// # Examples
    ///
    /// ```
    /// let (tx, mut rx) = mpsc::queue();
    /// let mut batch = Vec::with_capacity(64);
    /// for round in 0..3 {
    ///     tx.push(round).unwrap();
    ///     batch.clear();
    ///     assert_eq!(rx.drain_into(&mut batch), 1);
    ///     assert_eq!(batch, [round]);
    /// }
    /// ```
    pub fn drain_into(&mut self, out: &mut Vec<T>) -> usize {
        self.cursor_mut(|c, shared| c.drain_into(shared, out))
    }

    /// `true` if nothing is ready to be drained right now.
    ///
    /// Only a hint under concurrency (a push may complete right after), but
    /// exact for pushes that completed before the call.
    ///
    /// # Examples
    ///
    /// ```
    /// let (tx, mut rx) = mpsc::queue();
    /// assert!(rx.is_empty());
    /// tx.push(1).unwrap();
    /// assert!(!rx.is_empty());
    /// rx.drain_into(&mut Vec::new());
    /// assert!(rx.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.cursor(|c, shared| c.is_empty(shared))
    }

    /// Closes the queue and returns the items still pending, in claim order.
    ///
    /// After `close`, every push fails with [`PushError::Closed`] and hands
    /// its item back, so every item is either returned by a push error,
    /// drained before, or returned here. Pushes that claimed a slot before
    /// the close are waited for (they are a few instructions from done).
    /// Closing twice returns nothing the second time.
    ///
    /// # Examples
    ///
    /// ```
    /// let (tx, mut rx) = mpsc::queue();
    /// tx.push(1).unwrap();
    /// tx.push(2).unwrap();
    /// assert_eq!(rx.close(), [1, 2]);
    /// assert!(tx.push(3).unwrap_err().is_closed());
    /// assert!(rx.close().is_empty());
    /// ```
    pub fn close(&mut self) -> Vec<T> {
        self.cursor_mut(|c, shared| c.close(shared))
    }

    /// `true` once [`close`](Consumer::close) has been called (and until the
    /// next [`reset`](Consumer::reset)).
    ///
    /// # Examples
    ///
    /// ```
    /// let mut rx = mpsc::Consumer::<u8>::new();
    /// assert!(!rx.is_closed());
    /// rx.close();
    /// assert!(rx.is_closed());
    /// rx.reset();
    /// assert!(!rx.is_closed());
    /// ```
    pub fn is_closed(&self) -> bool {
        self.cursor(|c, _| c.closed)
    }

    /// Prepares the queue for a new use: closes it (if it is not already),
    /// returns what was still pending, and reopens it under a new
    /// generation.
    ///
    /// Producers created before the reset, and their clones, are stale from
    /// then on: their pushes fail with [`PushError::Stale`] and can never
    /// deliver into the new use. Get fresh producers with
    /// [`producer`](Consumer::producer). The blocks are kept, so a reused
    /// queue needs no allocation; the pool of spare blocks is trimmed to one.
    ///
    /// # Examples
    ///
    /// ```
    /// let (old, mut rx) = mpsc::queue();
    /// old.push("from the first use").unwrap();
    /// assert_eq!(rx.reset(), ["from the first use"]);
    /// assert!(old.push("late").unwrap_err().is_stale());
    /// let new = rx.producer();
    /// new.push("second use").unwrap();
    /// let mut batch = Vec::new();
    /// rx.drain_into(&mut batch);
    /// assert_eq!(batch, ["second use"]);
    /// ```
    pub fn reset(&mut self) -> Vec<T> {
        self.cursor_mut(|c, shared| c.reset(shared))
    }

    /// The current generation: 0 for a new queue, plus one per
    /// [`reset`](Consumer::reset).
    ///
    /// # Examples
    ///
    /// ```
    /// let mut rx = mpsc::Consumer::<u8>::new();
    /// rx.reset();
    /// rx.reset();
    /// assert_eq!(rx.generation(), 2);
    /// ```
    pub fn generation(&self) -> u64 {
        self.cursor(|c, _| c.generation)
    }
}

impl<T> Drop for Consumer<T> {
    fn drop(&mut self) {
        let queue = &*self.queue;
        // SAFETY: this is the consumer's last use; `release` closes the
        // queue first, so producers that are still around only ever see
        // CLOSED and touch no block.
        let pending = unsafe { self.cursor.release(&queue.shared) };
        // The queue's own cursor (unused so far, still at its start) takes
        // the final state, so that dropping the queue, when the last
        // producer goes, finds everything taken and no block to free.
        let done = self.cursor;
        // SAFETY: no one else uses the queue's cursor: the queue belongs to
        // this consumer, and embedded-use methods are not reachable here.
        queue.cursor.with_mut(|c| unsafe { *c = done });
        // Only now run the items' `Drop`s: one that panics unwinds into the
        // queue's `Drop` (when this was the last handle), which must find
        // the final state written back above, or it would take and drop
        // the same items again from blocks already freed. The other pending
        // items are still dropped by the `Vec`, each once.
        drop(pending);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize as StdCounter;
    use std::sync::Arc as StdArc;

    /// Counts its drops, to prove every item is dropped exactly once.
    struct Tracked(StdArc<StdCounter>);

    impl Drop for Tracked {
        fn drop(&mut self) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    fn pool_len<T>(rx: &Consumer<T>) -> usize {
        rx.queue.shared.pool.len.load(Ordering::SeqCst)
    }

    fn head<T>(rx: &Consumer<T>) -> u64 {
        rx.cursor(|c, _| c.head)
    }

    fn block<T>(rx: &Consumer<T>) -> *mut Block<T> {
        rx.cursor(|c, _| c.block)
    }

    #[test]
    fn fifo_across_many_blocks() {
        let (tx, mut rx) = queue();
        let n = if cfg!(miri) {
            3 * BLOCK_CAP + 5
        } else {
            40 * BLOCK_CAP + 7
        };
        for i in 0..n {
            tx.push(i).unwrap();
        }
        let mut out = Vec::new();
        assert_eq!(rx.drain_into(&mut out), n);
        assert_eq!(out, (0..n).collect::<Vec<_>>());
        assert!(rx.is_empty());
        assert!(pool_len(&rx) <= POOL_MAX);
    }

    #[test]
    fn head_never_rests_on_a_sentinel() {
        let (tx, mut rx) = queue();
        let mut out = Vec::new();
        for i in 0..BLOCK_CAP {
            tx.push(i).unwrap();
        }
        let start = head(&rx);
        rx.drain_into(&mut out);
        assert_eq!(
            head(&rx),
            start + LAP,
            "head skipped the sentinel into the next lap"
        );
        assert!(rx.is_empty());
        tx.push(99).unwrap();
        assert!(!rx.is_empty());
        out.clear();
        rx.drain_into(&mut out);
        assert_eq!(out, [99]);
    }

    #[test]
    fn a_queue_has_no_block_until_the_first_push() {
        let (tx, mut rx) = queue();
        assert!(block(&rx).is_null());
        assert!(rx.queue.shared.first.load(Ordering::SeqCst).is_null());
        assert!(rx.is_empty());
        assert_eq!(rx.drain_into(&mut Vec::new()), 0);
        tx.push(1).unwrap();
        assert!(!rx.is_empty(), "the consumer finds the first block");
        let mut out = Vec::new();
        assert_eq!(rx.drain_into(&mut out), 1);
        assert_eq!(out, [1]);
        assert!(!block(&rx).is_null());
    }

    #[test]
    fn the_first_block_is_found_after_producers_moved_past_it() {
        let (tx, mut rx) = queue();
        let n = 3 * BLOCK_CAP + 1;
        for i in 0..n {
            tx.push(i).unwrap();
        }
        let mut out = Vec::new();
        assert_eq!(rx.drain_into(&mut out), n);
        assert_eq!(out, (0..n).collect::<Vec<_>>());
    }

    #[test]
    fn an_unused_queue_closes_and_resets_without_a_block() {
        let (old, mut rx) = queue::<u8>();
        assert!(rx.close().is_empty());
        assert!(old.push(1).unwrap_err().is_closed());
        assert!(rx.reset().is_empty());
        assert!(block(&rx).is_null(), "reset allocated nothing");
        assert!(old.push(2).unwrap_err().is_stale());
        let tx = rx.producer();
        tx.push(3).unwrap();
        let mut out = Vec::new();
        rx.drain_into(&mut out);
        assert_eq!(out, [3]);
        assert!(rx.reset().is_empty());
        tx.push(4).unwrap_err();
        rx.producer().push(5).unwrap();
        assert_eq!(rx.close(), [5]);
    }

    #[test]
    fn drained_blocks_are_recycled_not_reallocated() {
        let (tx, mut rx) = queue();
        let mut out = Vec::new();
        for i in 0..BLOCK_CAP {
            tx.push(i).unwrap();
        }
        rx.drain_into(&mut out);
        assert_eq!(pool_len(&rx), 1, "the finished block went to the pool");
        for i in 0..BLOCK_CAP {
            tx.push(i).unwrap();
        }
        assert_eq!(pool_len(&rx), 0, "the installer took it back");
        out.clear();
        assert_eq!(rx.drain_into(&mut out), BLOCK_CAP);
        assert_eq!(pool_len(&rx), 1);
    }

    #[test]
    fn close_on_a_block_boundary_returns_everything() {
        let (tx, mut rx) = queue();
        for i in 0..BLOCK_CAP {
            tx.push(i).unwrap();
        }
        // The word now sits at the start of the next lap, past the sentinel.
        assert_eq!(rx.close(), (0..BLOCK_CAP).collect::<Vec<_>>());
        assert!(tx.push(7).unwrap_err().is_closed());
        assert!(rx.is_empty());
        assert!(rx.close().is_empty());
    }

    #[test]
    fn reset_reuses_the_block_and_skips_to_a_fresh_lap() {
        let (tx, mut rx) = queue();
        tx.push(1).unwrap();
        let first = rx.queue.shared.first.load(Ordering::SeqCst);
        assert_eq!(rx.reset(), [1]);
        assert_eq!(block(&rx), first, "no new block for a reused queue");
        assert_eq!(
            head(&rx),
            2 * LAP,
            "the first lap is virtual, the next is fresh"
        );
        assert!(tx.push(2).unwrap_err().is_stale());
        let tx = rx.producer();
        tx.push(3).unwrap();
        let mut out = Vec::new();
        rx.drain_into(&mut out);
        assert_eq!(out, [3]);
    }

    #[test]
    fn reset_trims_the_pool() {
        let (tx, mut rx) = queue();
        let mut out = Vec::new();
        for i in 0..(POOL_MAX + 2) * BLOCK_CAP {
            tx.push(i).unwrap();
        }
        rx.drain_into(&mut out);
        assert_eq!(pool_len(&rx), POOL_MAX);
        rx.reset();
        assert!(pool_len(&rx) <= 1);
    }

    #[test]
    fn stale_producer_of_a_closed_queue_is_stale_after_reset() {
        let (old, mut rx) = queue::<u8>();
        rx.close();
        assert!(old.push(1).unwrap_err().is_closed());
        assert!(old.is_closed());
        rx.reset();
        assert!(old.is_closed(), "stale producers report closed");
        let err = old.push(2).unwrap_err();
        assert!(err.is_stale());
        assert_eq!(err.into_inner(), 2);
        assert!(!rx.producer().is_closed());
    }

    #[test]
    fn many_resets_never_revive_old_producers() {
        let mut rx = Consumer::new();
        let mut olds = Vec::new();
        let rounds = if cfg!(miri) { 5 } else { 100 };
        for round in 0..rounds {
            let tx = rx.producer();
            tx.push(round).unwrap();
            for old in &olds {
                let old: &Producer<i32> = old;
                assert!(old.push(-1).unwrap_err().is_stale());
            }
            olds.push(tx);
            assert_eq!(rx.reset(), [round]);
        }
        assert_eq!(rx.generation(), rounds as u64);
    }

    #[test]
    fn every_item_is_dropped_exactly_once() {
        let drops = StdArc::new(StdCounter::new(0));
        let n = 2 * BLOCK_CAP + 3;
        {
            let (tx, mut rx) = queue();
            for _ in 0..n {
                tx.push(Tracked(drops.clone())).unwrap();
            }
            let mut out = Vec::new();
            rx.drain_into(&mut out);
            drop(out);
            assert_eq!(drops.load(std::sync::atomic::Ordering::SeqCst), n);
            for _ in 0..n {
                tx.push(Tracked(drops.clone())).unwrap();
            }
            // Dropping the consumer drops the pending items; the producer
            // outlives it and sees a closed queue.
            drop(rx);
            assert_eq!(drops.load(std::sync::atomic::Ordering::SeqCst), 2 * n);
            let err = tx.push(Tracked(drops.clone())).unwrap_err();
            assert!(err.is_closed());
            drop(err);
        }
        assert_eq!(drops.load(std::sync::atomic::Ordering::SeqCst), 2 * n + 1);
    }

    #[test]
    fn zero_sized_items() {
        let (tx, mut rx) = queue();
        for _ in 0..BLOCK_CAP + 2 {
            tx.push(()).unwrap();
        }
        let mut out = Vec::new();
        assert_eq!(rx.drain_into(&mut out), BLOCK_CAP + 2);
    }

    #[test]
    fn error_messages_name_the_cause() {
        let closed = PushError::Closed(1).to_string();
        let stale = PushError::Stale(1).to_string();
        assert!(closed.contains("closed"), "{closed}");
        assert!(stale.contains("stale"), "{stale}");
        assert_eq!(format!("{:?}", PushError::Stale(1)), "Stale(..)");
        let boxed: Box<dyn std::error::Error> = Box::new(PushError::Closed(()));
        assert!(boxed.to_string().contains("closed"));
    }

    #[test]
    fn debug_output() {
        let (tx, rx) = queue::<u8>();
        assert!(format!("{tx:?}").contains("generation: 0"));
        assert!(format!("{rx:?}").contains("empty: true"));
    }

    #[test]
    fn handles_are_send_and_sync() {
        fn assert_send_sync<X: Send + Sync>() {}
        assert_send_sync::<Producer<String>>();
        assert_send_sync::<Consumer<String>>();
        assert_send_sync::<PushError<String>>();
    }
}
