//! The producer side: a cloneable handle that pushes.

use super::*;

use crate::error::PushError;
use crate::sync::Arc;

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
    pub(super) queue: Arc<Reusable<T>>,
    pub(super) generation: u64,
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
    /// The one exception is the few stores while the producer that claimed
    /// the place after a block's last slot links the next one (and puts its
    /// item there), which other producers wait
    /// out. No allocation happens in steady state: a drained block is reopened
    /// by the consumer, and one it finished is kept by its thread for the
    /// next block installed there.
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
        self.queue.shared.push(Some(self.user()), item)
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
        self.queue.shared.is_closed_for(Some(self.user()))
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

    fn user(&self) -> Use<'_> {
        Use {
            current: &self.queue.generation,
            mine: self.generation,
        }
    }
}
