//! The stealers' handle: take items from the top, one or half at a time.

use std::sync::atomic::Ordering::Acquire;

use crossbeam_epoch::{self as epoch, Guard};

use crate::buffer::Buffer;
use crate::inner::Inner;
use crate::steal::Steal;
use crate::sync::Arc;
use crate::worker::Worker;

/// The most items one [`Stealer::steal_half_into`] takes.
pub const MAX_STEAL_BATCH: usize = 32;

/// A handle that steals from the top (FIFO end) of a [`Worker`]'s deque.
/// Clone it freely and share it between threads.
///
/// # Examples
///
/// ```
/// use deque::{Steal, Worker};
///
/// let w = Worker::new();
/// for i in 0..4 {
///     w.push(i);
/// }
/// let s = w.stealer();
/// assert_eq!(s.steal(), Steal::Success(0)); // the oldest item
/// assert_eq!(w.pop(), Some(3)); // the owner takes the newest
/// ```
pub struct Stealer<T> {
    inner: Arc<Inner<T>>,
}

// SAFETY: a stealer only moves items out of slots it has claimed through
// the atomic protocol, so it may be used from any thread as long as the
// items themselves may move between threads.
unsafe impl<T: Send> Send for Stealer<T> {}
// SAFETY: as for `Send`: every operation on a shared `&Stealer` goes through
// the atomic claim protocol.
unsafe impl<T: Send> Sync for Stealer<T> {}

/// Positions a stealer has claimed, with the guard that keeps the buffer it
/// reads them from alive.
struct Claim {
    start: u32,
    count: u32,
    guard: Guard,
}

impl<T> Stealer<T> {
    pub(crate) fn new(inner: Arc<Inner<T>>) -> Self {
        Stealer { inner }
    }

    /// Approximately how many items the deque holds. Never negative or
    /// absurd, but possibly stale by the time it returns.
    ///
    /// # Examples
    ///
    /// ```
    /// let w = deque::Worker::new();
    /// w.push(1);
    /// assert_eq!(w.stealer().len(), 1);
    /// ```
    pub fn len(&self) -> usize {
        self.inner.len()
    }

    /// Whether [`len`](Stealer::len) is zero.
    ///
    /// # Examples
    ///
    /// ```
    /// let w = deque::Worker::<u8>::new();
    /// assert!(w.stealer().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Claims up to `max(1, want(available))` positions from the top, with
    /// one CAS. `want` gets the number of items available (at least 1).
    fn claim(&self, want: impl FnOnce(u32) -> u32) -> Result<Claim, Steal<()>> {
        // Pin before anything else: the buffer we read must outlive the
        // reads, and an owner that grows after our CAS retires the buffer
        // only once we unpin.
        let guard = epoch::pin();
        let (start, count) = self.inner.claim_top(want)?;
        Ok(Claim {
            start,
            count,
            guard,
        })
    }

    /// Publishes that the positions of `claim` have been moved out, so the
    /// owner may reuse their slots and other stealers may claim.
    fn release(&self, claim: Claim) {
        self.inner.release_top(claim.start, claim.count);
        drop(claim.guard);
    }

    fn buffer<'g>(&self, guard: &'g Guard) -> &'g Buffer<T> {
        let shared = self.inner.buffer.load(Acquire, guard);
        // SAFETY: the pointer is never null (the deque always has a buffer)
        // and the buffer is only retired through the epoch collector, which
        // does not free it while `guard` is pinned.
        unsafe { shared.deref() }
    }

    /// Steals the item at the top (the oldest one).
    ///
    /// Returns [`Steal::Retry`] when it lost a race with the owner or
    /// another stealer; the caller may try again or look elsewhere.
    ///
    /// # Examples
    ///
    /// ```
    /// use deque::{Steal, Worker};
    ///
    /// let w = Worker::new();
    /// w.push(1);
    /// w.push(2);
    /// let s = w.stealer();
    /// assert_eq!(s.steal(), Steal::Success(1));
    /// assert_eq!(s.steal(), Steal::Success(2));
    /// assert_eq!(s.steal(), Steal::Empty);
    /// ```
    pub fn steal(&self) -> Steal<T> {
        let claim = match self.claim(|_| 1) {
            Ok(claim) => claim,
            Err(Steal::Empty) => return Steal::Empty,
            Err(_) => return Steal::Retry,
        };
        // SAFETY: the position is claimed by us alone; the slot holds the
        // item last pushed there (see `Inner`) and the owner does not write
        // it before we publish `head`.
        let item = unsafe { self.buffer(&claim.guard).read(claim.start) };
        self.release(claim);
        Steal::Success(item)
    }

    /// Steals about half of the items (rounded up, at most
    /// [`MAX_STEAL_BATCH`], and no more than `dest` can take without
    /// growing plus one) in one CAS. The oldest stolen item is returned to
    /// run at once; the others are pushed onto the bottom of `dest`, oldest
    /// first.
    ///
    /// `dest` is the thief's own deque: holding a `&Worker` means running on
    /// its owner's thread, since `Worker` is not `Sync`.
    ///
    /// # Examples
    ///
    /// ```
    /// use deque::{Steal, Worker};
    ///
    /// let victim = Worker::new();
    /// for i in 0..8 {
    ///     victim.push(i);
    /// }
    /// let thief = Worker::new();
    /// let first = victim.stealer().steal_half_into(&thief);
    /// assert_eq!(first, Steal::Success(0));
    /// assert_eq!(thief.len(), 3); // items 1, 2, 3
    /// assert_eq!(victim.len(), 4); // items 4..8
    /// ```
    pub fn steal_half_into(&self, dest: &Worker<T>) -> Steal<T> {
        if dest.is_same_deque(&self.inner) {
            // Moving items from a deque into itself would only reorder it.
            return self.steal();
        }
        let room = dest.spare_capacity();
        let claim = match self.claim(|available| {
            let half = available - available / 2;
            half.min(MAX_STEAL_BATCH as u32).min(room.saturating_add(1))
        }) {
            Ok(claim) => claim,
            Err(Steal::Empty) => return Steal::Empty,
            Err(_) => return Steal::Retry,
        };
        let buffer = self.buffer(&claim.guard);
        // SAFETY: (for the reads) every position of the claim is ours
        // alone, initialised and not written before we publish `head`.
        let first = unsafe { buffer.read(claim.start) };
        let moved = claim.count - 1;
        debug_assert!(moved <= room);
        // SAFETY: `moved <= room`, the destination's spare capacity measured
        // on this (its owner's) thread; positions `start + 1 ..` are ours.
        unsafe {
            dest.extend_claimed(moved, |i| {
                buffer.read(claim.start.wrapping_add(1).wrapping_add(i))
            })
        };
        self.release(claim);
        Steal::Success(first)
    }
}

impl<T> Clone for Stealer<T> {
    fn clone(&self) -> Self {
        Stealer {
            inner: self.inner.clone(),
        }
    }
}

impl<T> std::fmt::Debug for Stealer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stealer").field("len", &self.len()).finish()
    }
}
