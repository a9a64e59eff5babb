//! The state shared by the owner and its stealers.

use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};

use crossbeam_epoch::{self as epoch, Atomic, Owned};
use crossbeam_utils::CachePadded;

use crate::buffer::Buffer;
use crate::position::{distance, pack, unpack};
use crate::steal::Steal;
use crate::sync::{AtomicU32, AtomicU64};

/// Counters and the buffer of one deque.
///
/// The live items are the positions `head..tail` where
/// `tail = push_count - pop_count`. Stealing is a two-phase operation: a
/// stealer first *claims* positions by advancing `claimed_head` (packed with
/// `pop_count` in `pop_and_claimed`), then moves the items out, then
/// publishes `head = claimed_head`. While `head != claimed_head` a steal is
/// in progress: other stealers back off (they return `Steal::Retry`) and the
/// owner never writes a slot at or after `head`'s wrap-around point, so no
/// slot is ever written while a stealer may read it.
///
/// Each field sits on its own cache line: the owner writes `push_count` on
/// every push, stealers write `head`, both write `pop_and_claimed`.
pub(crate) struct Inner<T> {
    /// Total number of pushes by the owner (wrapping). Written only by the
    /// owner, with `Release`, after the pushed item is in its slot.
    pub(crate) push_count: CachePadded<AtomicU32>,
    /// `pack(pop_count, claimed_head)`; see [`crate::position::pack`].
    pub(crate) pop_and_claimed: CachePadded<AtomicU64>,
    /// The first position whose slot a stealer may still be reading; every
    /// position before it has been moved out. Written by stealers with
    /// `Release` once their reads are done.
    pub(crate) head: CachePadded<AtomicU32>,
    /// The current ring. Replaced only by the owner when it grows; old rings
    /// are retired through crossbeam-epoch because a stealer may still be
    /// reading from one.
    pub(crate) buffer: CachePadded<Atomic<Buffer<T>>>,
}

impl<T> Inner<T> {
    pub(crate) fn new(capacity: u32) -> Self {
        Inner {
            push_count: CachePadded::new(AtomicU32::new(0)),
            pop_and_claimed: CachePadded::new(AtomicU64::new(0)),
            head: CachePadded::new(AtomicU32::new(0)),
            buffer: CachePadded::new(Atomic::new(Buffer::new(capacity))),
        }
    }

    /// Claims `want(available)` positions (at least 1) at the top, for a
    /// stealer or for the owner taking its oldest items, and returns the
    /// first position and the count. The caller reads them from a buffer
    /// that is safe to read (pinned, or the owner's own), then calls
    /// [`release_top`](Inner::release_top).
    pub(crate) fn claim_top(&self, want: impl FnOnce(u32) -> u32) -> Result<(u32, u32), Steal<()>> {
        // Acquire (here and on `head`): pairs with the owner's Release pops
        // and with the previous stealer's Release of `head`, so that the
        // push count read next is at least the one they saw and the
        // computed tail is not behind the head.
        let word = self.pop_and_claimed.load(Acquire);
        let (pop_count, claimed) = unpack(word);
        if self.head.load(Acquire) != claimed {
            // Another stealer is between its claim and its publish.
            return Err(Steal::Retry);
        }
        // Acquire: pairs with the Release in `push`: the items up to this
        // count are in their slots.
        let push_count = self.push_count.load(Acquire);
        let available = distance(claimed, push_count.wrapping_sub(pop_count));
        if available == 0 {
            return Err(Steal::Empty);
        }
        let count = want(available).clamp(1, available);
        // Acquire on success: the buffer pointer loaded after this is at
        // least as new as the one the counted pushes wrote into.
        match self.pop_and_claimed.compare_exchange(
            word,
            pack(pop_count, claimed.wrapping_add(count)),
            Acquire,
            Acquire,
        ) {
            Ok(_) => Ok((claimed, count)),
            // The owner popped or another stealer claimed in between; our
            // count may be based on a stale tail, so start over.
            Err(_) => Err(Steal::Retry),
        }
    }

    /// Publishes `head` past a claim whose slots have been read.
    pub(crate) fn release_top(&self, start: u32, count: u32) {
        // Release: our reads of the slots happen before the owner's next
        // write to them (it acquires `head` before reusing a slot).
        self.head.store(start.wrapping_add(count), Release);
    }

    /// Approximate number of items not yet claimed by a stealer. Never
    /// negative and never more than were pushed; may be stale by the time
    /// it returns.
    pub(crate) fn len(&self) -> usize {
        let (pop_count, claimed) = unpack(self.pop_and_claimed.load(Relaxed));
        let push_count = self.push_count.load(Relaxed);
        distance(claimed, push_count.wrapping_sub(pop_count)) as usize
    }
}

impl<T> Drop for Inner<T> {
    fn drop(&mut self) {
        // `&mut self`: every handle is gone, so no steal is in progress and
        // `head == claimed_head`; the live items are `head..tail`.
        let push_count = self.push_count.load(Relaxed);
        let (pop_count, _) = unpack(self.pop_and_claimed.load(Relaxed));
        let head = self.head.load(Relaxed);
        let tail = push_count.wrapping_sub(pop_count);
        // SAFETY: no other thread can access the deque any more, so the
        // current buffer cannot be retired concurrently, and we are its only
        // user: taking it out of the epoch pointer without pinning is sound.
        let buffer = unsafe { self.buffer.load(Relaxed, epoch::unprotected()).into_owned() };
        // Declared after `buffer`, so dropped before it: if an item's `Drop`
        // panics, the guard drops the rest while unwinding (a second panic
        // aborts, as for a `Vec`), then the ring is freed.
        let mut left = Leftovers {
            buffer: &buffer,
            next: head,
            tail,
        };
        left.drop_all();
    }
}

/// The items still in a deque that is being dropped: positions
/// `next..tail` of `buffer`, each initialised and owned by no one else.
struct Leftovers<'a, T> {
    buffer: &'a Owned<Buffer<T>>,
    next: u32,
    tail: u32,
}

impl<T> Leftovers<'_, T> {
    /// Drops the items one by one, moving `next` past each before its
    /// `Drop` runs, so a panicking one is never dropped again.
    fn drop_all(&mut self) {
        while self.next != self.tail {
            let position = self.next;
            self.next = position.wrapping_add(1);
            // SAFETY: `position` is in `next..tail` (see the type), and
            // `next` has moved past it: it is read out exactly once.
            drop(unsafe { self.buffer.read(position) });
        }
    }
}

impl<T> Drop for Leftovers<'_, T> {
    fn drop(&mut self) {
        // Nothing left unless an item's `Drop` panicked in `drop_all`.
        self.drop_all();
    }
}

impl<T> std::fmt::Debug for Inner<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inner")
            .field("len", &self.len())
            .finish_non_exhaustive()
    }
}
