//! [`Consumer`]: the single consumer handle, and [`queue`], which makes a
//! producer and a consumer.

use super::*;

use crate::sync::{Arc, AtomicU64};

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
    pub(super) queue: Arc<Reusable<T>>,
    /// The consumer's own cursor, in the consumer's memory rather than the
    /// queue's (whose internal cursor serves embedded use): next to the
    /// producers' claim word it would share their cache line, and two
    /// producers pushing into a draining consumer ran 1.6 times slower.
    /// Written back into the queue when the consumer is dropped.
    pub(super) cursor: Cursor<T>,
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

/// What a [`Consumer`] and its [`Producer`]s share: the queue, and which
/// use of it is current (bumped by every [`Consumer::reset`]).
pub(super) struct Reusable<T> {
    pub(super) generation: AtomicU64,
    pub(super) queue: Queue<T>,
}

impl<T> std::ops::Deref for Reusable<T> {
    type Target = Queue<T>;

    fn deref(&self) -> &Queue<T> {
        &self.queue
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
            queue: Arc::new(Reusable {
                generation: AtomicU64::new(0),
                queue: Queue::new(),
            }),
            cursor: Cursor::new(),
        }
    }

    /// Runs `f` on the cursor. `Consumer` is the queue's only consumer and
    /// not `Clone`, so `&mut self` makes this the only use of the cursor.
    pub(super) fn cursor_mut<R>(&mut self, f: impl FnOnce(&mut Cursor<T>, &Shared<T>) -> R) -> R {
        f(&mut self.cursor, &self.queue.shared)
    }

    /// Runs `f` on the cursor for reading.
    pub(super) fn cursor<R>(&self, f: impl FnOnce(&Cursor<T>, &Shared<T>) -> R) -> R {
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

    /// Frees the queue's blocks if nothing is pending, and returns whether
    /// it did: the queue then holds no memory beyond its shared part, as a
    /// new one, and the next push allocates a first (small) block again.
    ///
    /// For a consumer about to wait a long time: an idle process whose
    /// queue once received events keeps no block. Producers are not
    /// disturbed: a push racing the call either lands before it (and the
    /// call frees nothing) or after it, in a new block. Nothing is freed if
    /// an item is pending or a push is under way, or once the queue is
    /// closed (`close` keeps the block for a `reset`; dropping frees it).
    ///
    /// # Examples
    ///
    /// ```
    /// let (tx, mut rx) = mpsc::queue();
    /// tx.push(1).unwrap();
    /// assert!(!rx.shrink_to_fit(), "an item is pending");
    /// let mut batch = Vec::new();
    /// rx.drain_into(&mut batch);
    /// assert!(rx.shrink_to_fit(), "drained: the block is freed");
    /// assert!(!rx.shrink_to_fit(), "nothing left to free");
    /// tx.push(2).unwrap();
    /// batch.clear();
    /// rx.drain_into(&mut batch);
    /// assert_eq!(batch, [2]);
    /// ```
    pub fn shrink_to_fit(&mut self) -> bool {
        self.cursor_mut(|c, shared| c.shrink_to_fit(shared))
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
        self.cursor(|c, shared| c.is_closed(shared))
    }

    /// Prepares the queue for a new use: closes it (if it is not already),
    /// returns what was still pending, and reopens it under a new
    /// generation.
    ///
    /// Producers created before the reset, and their clones, are stale from
    /// then on: their pushes fail with [`PushError::Stale`] and can never
    /// deliver into the new use. Get fresh producers with
    /// [`producer`](Consumer::producer). The blocks are kept, so a reused
    /// queue needs no allocation.
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
        let queue = &*self.queue;
        let generation = &queue.generation;
        self.cursor.reset(&queue.shared, || {
            // Only the consumer writes it.
            let next = generation.load(Ordering::Relaxed) + 1;
            generation.store(next, Ordering::Release);
        })
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
        // Only the consumer writes it.
        self.queue.generation.load(Ordering::Relaxed)
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
