//! The owner's handle: push and pop at the bottom.

use std::cell::Cell;
use std::marker::PhantomData;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};

use crossbeam_epoch::{self as epoch, Owned};

use crate::buffer::Buffer;
use crate::inner::Inner;
use crate::position::{distance, pack, unpack, MAX_CAPACITY};
use crate::steal::Steal;
use crate::stealer::Stealer;
use crate::sync::Arc;

/// The capacity a deque starts with unless told otherwise. Tiny under loom
/// so that the models explore growth.
#[cfg(not(loom))]
const DEFAULT_CAPACITY: u32 = 64;
#[cfg(loom)]
const DEFAULT_CAPACITY: u32 = 2;

/// The owner's end of a work-stealing deque: push and pop at the bottom
/// (LIFO), from one thread, without locks.
///
/// A `Worker` is [`Send`] but not [`Sync`]: it can move to another thread,
/// but only one thread uses it at a time, which is what lets `push` and
/// `pop` work on counters cached in the handle itself. Stealers, made with
/// [`Worker::stealer`], take items from the top (FIFO) from any thread.
///
/// The buffer grows (doubling) when a push finds it full; old buffers are
/// retired through crossbeam-epoch and freed once no stealer can still be
/// reading them. Items left in the deque when the last handle is dropped are
/// dropped exactly once.
///
/// # Examples
///
/// ```
/// use deque::Worker;
///
/// let w = Worker::new();
/// w.push(1);
/// w.push(2);
/// assert_eq!(w.pop(), Some(2));
/// assert_eq!(w.pop(), Some(1));
/// assert_eq!(w.pop(), None);
/// ```
pub struct Worker<T> {
    inner: Arc<Inner<T>>,
    /// The current buffer. Only the owner replaces it, so the owner may use
    /// it without pinning: it is retired only by the owner's own `grow`.
    buffer: Cell<*const Buffer<T>>,
    /// Mirror of `inner.push_count` (the owner is its only writer).
    push_count: Cell<u32>,
    /// Mirror of the pop count in `inner.pop_and_claimed` (the owner is the
    /// only one that changes it).
    pop_count: Cell<u32>,
    /// A lower bound of `inner.head`, refreshed only when the buffer looks
    /// full, so that a push usually touches no shared cache line but the one
    /// it publishes on.
    head_bound: Cell<u32>,
    /// `Cell` already makes the handle `!Sync`; this keeps it so if the
    /// fields change.
    _not_sync: PhantomData<Cell<()>>,
}

// SAFETY: the handle owns its caches exclusively and the shared state is
// designed for one owner thread plus any number of stealers; moving the
// handle to another thread moves the owner role with it. Items cross threads
// (stolen items surface elsewhere), hence `T: Send`.
unsafe impl<T: Send> Send for Worker<T> {}

impl<T> Worker<T> {
    /// Creates an empty deque with a small default capacity (64 slots).
    ///
    /// # Examples
    ///
    /// ```
    /// let w = deque::Worker::<u32>::new();
    /// assert!(w.is_empty());
    /// ```
    pub fn new() -> Self {
        Self::with_capacity(DEFAULT_CAPACITY as usize)
    }

    /// Creates an empty deque whose buffer holds at least `capacity` items
    /// before it first grows. The capacity is rounded up to a power of two
    /// (at least 1).
    ///
    /// # Panics
    ///
    /// If `capacity` is more than 2^30.
    ///
    /// # Examples
    ///
    /// ```
    /// let w = deque::Worker::<u32>::with_capacity(5);
    /// assert_eq!(w.capacity(), 8);
    /// ```
    pub fn with_capacity(capacity: usize) -> Self {
        assert!(
            capacity <= MAX_CAPACITY as usize,
            "deque capacity {capacity} is more than the maximum {MAX_CAPACITY}"
        );
        let capacity = (capacity.max(1) as u32).next_power_of_two();
        let inner = Arc::new(Inner::new(capacity));
        // SAFETY: the deque was just made; nothing can retire its buffer.
        let buffer = unsafe { inner.buffer.load(Relaxed, epoch::unprotected()).as_raw() };
        Worker {
            inner,
            buffer: Cell::new(buffer),
            push_count: Cell::new(0),
            pop_count: Cell::new(0),
            head_bound: Cell::new(0),
            _not_sync: PhantomData,
        }
    }

    /// Creates a handle for stealing from this deque. Stealers can be cloned
    /// and shared between threads.
    ///
    /// # Examples
    ///
    /// ```
    /// let w = deque::Worker::new();
    /// w.push("job");
    /// let s = w.stealer();
    /// let stolen = std::thread::spawn(move || s.steal().success()).join().unwrap();
    /// assert_eq!(stolen, Some("job"));
    /// ```
    pub fn stealer(&self) -> Stealer<T> {
        Stealer::new(self.inner.clone())
    }

    /// The number of items the current buffer holds before the next push
    /// grows it.
    ///
    /// # Examples
    ///
    /// ```
    /// let w = deque::Worker::with_capacity(2);
    /// for i in 0..3 {
    ///     w.push(i);
    /// }
    /// assert_eq!(w.capacity(), 4);
    /// ```
    pub fn capacity(&self) -> usize {
        self.buffer().capacity() as usize
    }

    /// The number of items in the deque that no stealer has claimed. Exact
    /// when no steal races it; otherwise it may count items a stealer is
    /// taking at that moment, and never reports a negative or absurd size.
    ///
    /// # Examples
    ///
    /// ```
    /// let w = deque::Worker::new();
    /// w.push(1);
    /// w.push(2);
    /// assert_eq!(w.len(), 2);
    /// ```
    pub fn len(&self) -> usize {
        let (_, claimed) = unpack(self.inner.pop_and_claimed.load(Relaxed));
        distance(claimed, self.tail()) as usize
    }

    /// Whether [`len`](Worker::len) is zero.
    ///
    /// # Examples
    ///
    /// ```
    /// let w = deque::Worker::new();
    /// assert!(w.is_empty());
    /// w.push(());
    /// assert!(!w.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    #[inline]
    fn buffer(&self) -> &Buffer<T> {
        // SAFETY: the cached pointer is the current buffer, which only this
        // handle's `grow` retires (and it updates the cache when it does);
        // `self.inner` keeps the deque alive.
        unsafe { &*self.buffer.get() }
    }

    #[inline]
    fn tail(&self) -> u32 {
        self.push_count.get().wrapping_sub(self.pop_count.get())
    }

    /// Pushes an item at the bottom. It will be the next one `pop` returns;
    /// stealers take it after every item pushed before it. Grows the buffer
    /// if it is full.
    ///
    /// # Panics
    ///
    /// If the deque would hold more than 2^30 items.
    ///
    /// # Examples
    ///
    /// ```
    /// let w = deque::Worker::new();
    /// w.push(7);
    /// assert_eq!(w.pop(), Some(7));
    /// ```
    #[inline]
    pub fn push(&self, item: T) {
        let tail = self.tail();
        let mut capacity = self.buffer().capacity();
        if tail.wrapping_sub(self.head_bound.get()) >= capacity {
            // Acquire: pairs with the Release store of `head` at the end of
            // a steal, so the stealer's reads of the slots before `head`
            // happen before we reuse them.
            self.head_bound.set(self.inner.head.load(Acquire));
            if tail.wrapping_sub(self.head_bound.get()) >= capacity {
                self.grow(tail);
                capacity = self.buffer().capacity();
            }
        }
        debug_assert!(tail.wrapping_sub(self.head_bound.get()) < capacity);
        // SAFETY: `tail - head < capacity`, so the slot of `tail` is not the
        // slot of any position a stealer may still read (those lie in
        // `head..tail`), and only the owner writes slots.
        unsafe { self.buffer().write(tail, item) };
        let push_count = self.push_count.get().wrapping_add(1);
        self.push_count.set(push_count);
        // Release: a stealer that sees this count (Acquire) sees the item.
        self.inner.push_count.store(push_count, Release);
    }

    /// Pops the most recently pushed item that no stealer has taken.
    ///
    /// # Examples
    ///
    /// ```
    /// let w = deque::Worker::new();
    /// w.push('a');
    /// w.push('b');
    /// assert_eq!(w.pop(), Some('b'));
    /// ```
    #[inline]
    pub fn pop(&self) -> Option<T> {
        let tail = self.tail();
        let pop_count = self.pop_count.get();
        let new_pop_count = pop_count.wrapping_add(1);
        // Relaxed: if the claimed head read here is stale, the CAS below
        // fails and we retry with the fresh one.
        let mut word = self.inner.pop_and_claimed.load(Relaxed);
        loop {
            let (_, claimed) = unpack(word);
            if claimed == tail {
                return None;
            }
            // Release: a stealer that acquires the new pop count also sees
            // every push before it, so the tail it computes is never behind
            // its head.
            match self.inner.pop_and_claimed.compare_exchange_weak(
                word,
                pack(new_pop_count, claimed),
                Release,
                Relaxed,
            ) {
                Ok(_) => break,
                Err(current) => word = current,
            }
        }
        self.pop_count.set(new_pop_count);
        let position = tail.wrapping_sub(1);
        // SAFETY: the CAS moved the tail below `position` while the claimed
        // head was at most `position`, so no stealer has claimed it or can
        // claim it now; it was written by our own push and not moved out.
        Some(unsafe { self.buffer().read(position) })
    }

    /// Takes the **oldest** item, the one stealers would take next: the
    /// owner's way to run its deque first-in first-out.
    ///
    /// The same claim a stealer makes, so it races stealers safely, but
    /// without the epoch pin a stealer needs: only the owner retires
    /// buffers, so its own buffer stays valid while it reads. `Retry` means
    /// a stealer was between its claim and its publish; try again.
    ///
    /// # Examples
    ///
    /// ```
    /// use deque::{Steal, Worker};
    ///
    /// let w = Worker::new();
    /// w.push(1);
    /// w.push(2);
    /// assert_eq!(w.steal_own(), Steal::Success(1));
    /// assert_eq!(w.pop(), Some(2));
    /// assert_eq!(w.steal_own(), Steal::Empty);
    /// ```
    pub fn steal_own(&self) -> Steal<T> {
        let (start, count) = match self.inner.claim_top(|_| 1) {
            Ok(claim) => claim,
            Err(Steal::Empty) => return Steal::Empty,
            Err(_) => return Steal::Retry,
        };
        // SAFETY: the position is claimed by us alone and was written by our
        // own push; our cached buffer is the current one and holds every
        // position from `head` to the tail (growth copies them), and only
        // this handle could retire it.
        let item = unsafe { self.buffer().read(start) };
        self.inner.release_top(start, count);
        Steal::Success(item)
    }

    /// Doubles the buffer: copies the live items into a new ring, publishes
    /// it and retires the old one through the epoch collector.
    #[cold]
    fn grow(&self, tail: u32) {
        let old = self.buffer();
        let new_capacity = old
            .capacity()
            .checked_mul(2)
            .filter(|&c| c <= MAX_CAPACITY)
            .unwrap_or_else(|| panic!("deque cannot grow past {MAX_CAPACITY} items"));
        let new = Owned::new(Buffer::new(new_capacity));
        // Copy from `head`, not from the claimed head: a stealer that has
        // claimed positions but not yet loaded the buffer pointer may load
        // the new one, so every position it may read must be there.
        let mut position = self.head_bound.get();
        while position != tail {
            // SAFETY: positions `head..tail` are initialised; only the owner
            // writes slots and stealers only read them; `new` is private.
            unsafe { old.copy_to(&new, position) };
            position = position.wrapping_add(1);
        }
        let guard = epoch::pin();
        // Release: a stealer that loads the new pointer (Acquire) sees the
        // copied items.
        let old_shared = self.inner.buffer.swap(new, Release, &guard);
        self.buffer
            .set(self.inner.buffer.load(Relaxed, &guard).as_raw());
        // SAFETY: the old buffer is unreachable from the deque now; stealers
        // that loaded it are pinned, and the collector frees it only after
        // they unpin. Dropping a `Buffer` frees memory without dropping
        // items, whose live copies are in the new buffer.
        unsafe { guard.defer_destroy(old_shared) };
        // A large retired buffer should not wait for the thread-local bag
        // to fill up before the collector sees it.
        guard.flush();
    }

    /// Moves up to `count` items that the caller has claimed from another
    /// deque into this one, in order, without growing. Used by steal-half.
    ///
    /// # Safety
    ///
    /// `count <= self.spare_capacity()`, and `read(i)` for `i in 0..count`
    /// yields items the caller owns.
    pub(crate) unsafe fn extend_claimed(&self, count: u32, mut read: impl FnMut(u32) -> T) {
        let tail = self.tail();
        for i in 0..count {
            // SAFETY: the caller guarantees the space; the slot is free as in
            // `push`.
            unsafe { self.buffer().write(tail.wrapping_add(i), read(i)) };
        }
        let push_count = self.push_count.get().wrapping_add(count);
        self.push_count.set(push_count);
        self.inner.push_count.store(push_count, Release);
    }

    /// How many items can be pushed before the buffer grows, refreshing the
    /// cached head first.
    pub(crate) fn spare_capacity(&self) -> u32 {
        self.head_bound.set(self.inner.head.load(Acquire));
        self.buffer()
            .capacity()
            .saturating_sub(self.tail().wrapping_sub(self.head_bound.get()))
    }

    /// Whether `stealer` steals from this very deque.
    pub(crate) fn is_same_deque(&self, inner: &Arc<Inner<T>>) -> bool {
        Arc::ptr_eq(&self.inner, inner)
    }
}

impl<T> Default for Worker<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> std::fmt::Debug for Worker<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker")
            .field("len", &self.len())
            .field("capacity", &self.capacity())
            .finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
