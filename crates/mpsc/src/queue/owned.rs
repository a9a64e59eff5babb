//! [`Queue`]: the queue embedded in its owner, for a consumer whose
//! exclusivity the embedding code guarantees.

use super::*;
use std::ptr;

use crate::error::PushError;
use crate::sync::{AtomicPtr, AtomicU64, UnsafeCell};

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
/// a time. Queues used this way are never reset, and carry no generation.
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
    pub(super) shared: Shared<T>,
    pub(super) cursor: UnsafeCell<Cursor<T>>,
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
            // Lap 0 is virtual: the word starts on its install position, so the
            // first claim installs the first block (see the module docs).
            shared: Shared {
                tail: Tail {
                    word: AtomicU64::new(virtual_last_slot(START) << 1),
                    block: AtomicPtr::new(ptr::null_mut()),
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
        self.shared.push(None, item)
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
        self.shared.is_closed_for(None)
    }

    /// Moves every ready item to the end of `out`; as
    /// [`Consumer::drain_into`].
    ///
    /// # Safety
    ///
    /// No other thread runs a consumer method (`drain_into`, `is_empty`,
    /// `shrink_to_fit`, `close`) of this queue at the same time, and successive callers are
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

    /// Frees the queue's blocks if nothing is pending; as
    /// [`Consumer::shrink_to_fit`].
    ///
    /// # Safety
    ///
    /// As for [`drain_into`](Queue::drain_into).
    ///
    /// # Examples
    ///
    /// ```
    /// let q = mpsc::Queue::new();
    /// q.push(1).unwrap();
    /// let mut batch = Vec::new();
    /// // SAFETY: this thread is the only consumer.
    /// unsafe {
    ///     q.drain_into(&mut batch);
    ///     assert!(q.shrink_to_fit());
    /// }
    /// q.push(2).unwrap();
    /// // SAFETY: as above.
    /// assert_eq!(unsafe { q.close() }, [2]);
    /// ```
    pub unsafe fn shrink_to_fit(&self) -> bool {
        // SAFETY: the caller is the only consumer right now.
        self.cursor
            .with_mut(|c| unsafe { &mut *c }.shrink_to_fit(&self.shared))
    }

    /// Closes the queue and returns what was pending; as
    /// [`Consumer::close`], and frees the queue's blocks: a `Queue` cannot be
    /// reopened, so a closed one keeps no memory beyond its own (the
    /// scheduler closes a process's queue when the process ends, while
    /// handles to the process may keep its record for much longer).
    /// Every later push fails with [`PushError::Closed`]; later drains
    /// find nothing.
    ///
    /// # Safety
    ///
    /// As for [`drain_into`](Queue::drain_into).
    ///
    /// # Examples
    ///
    /// See [`Queue`].
    pub unsafe fn close(&self) -> Vec<T> {
        // SAFETY: the caller is the only consumer right now, and no
        // producer can push again: a `Queue` has no reset, so it stays
        // closed, which is what `release` asks.
        self.cursor
            .with_mut(|c| unsafe { (*c).release(&self.shared) })
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
