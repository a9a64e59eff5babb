//! The consumer's position in the list of blocks, and draining from it.

use super::*;
use std::mem::{self};
use std::ptr;

use crate::sync::{spin_wait, Ordering};

/// The consumer's position in the queue: plain fields, touched only by the
/// single consumer.
pub(super) struct Cursor<T> {
    /// Next position to take. Invariant: never at a sentinel offset; at an
    /// install position only while the block after `block` is not linked
    /// yet (every item of `block` was taken).
    pub(super) head: u64,
    /// The block serving `head`'s lap, or null while the queue has none
    /// (before the first push; see [`Cursor::adopt_first`]). Owned by the
    /// consumer in the sense that only the consumer recycles it.
    pub(super) block: *mut Block<T>,
    /// A position no larger than the word's at some point since the last
    /// look: every position below it was claimed. `head >= claimed` means
    /// look again. Only a hint; `ready` decides.
    pub(super) claimed: u64,
    // Whether the queue is closed is the claim word's `CLOSED` bit, which
    // only the consumer sets or clears (see `is_closed`): a flag here would
    // cost a padded word in every queue, and a record embeds one.
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
    /// first position of lap 1's short lap, with no block yet (see the
    /// module docs).
    pub(super) fn new() -> Self {
        Cursor {
            head: START,
            block: ptr::null_mut(),
            claimed: 0,
        }
    }

    /// Makes sure the consumer holds the block serving `head`'s lap; `false`
    /// if the queue still has none (no push has installed the first block).
    ///
    /// While the consumer holds no block, `head` is the first position of
    /// the first block's (short) lap, so that block is the right one even if
    /// producers have moved `tail.block` further on since.
    #[inline]
    pub(super) fn adopt_first(&mut self, shared: &Shared<T>) -> bool {
        if self.block.is_null() {
            self.block = shared.first.load(Ordering::Acquire);
        }
        !self.block.is_null()
    }

    /// See [`Consumer::drain_into`].
    ///
    /// The empty case is inlined into the caller (a worker drains a
    /// process's queue before each step, and most steps of a process that
    /// continues find it empty): out of line, the call alone was two
    /// thirds of an empty drain's instructions.
    #[inline]
    pub(super) fn drain_into(&mut self, shared: &Shared<T>, out: &mut Vec<T>) -> usize {
        let looked = self.head >= self.claimed;
        if looked {
            // The one look at the producers' word (see `drain_claimed`).
            self.claimed = shared.tail.word.load(Ordering::Acquire) >> 1;
            if self.head >= self.claimed {
                return 0;
            }
        }
        self.drain_claimed(shared, out, looked)
    }

    /// `drain_into` once something is claimed, `looked` telling whether
    /// the call has looked at the producers' word already.
    #[inline(never)]
    fn drain_claimed(&mut self, shared: &Shared<T>, out: &mut Vec<T>, mut looked: bool) -> usize {
        let mut taken = 0;
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
            out.reserve(1);
            // Copied from the slot straight into the vector: moving the item
            // through an `Option<T>` on the stack cost store-forwarding
            // stalls (unaligned partial copies around the enum's tag) that
            // perf put at half of this function in a ping-pong benchmark.
            let copied = self.take_with(shared, |value| {
                let len = out.len();
                // SAFETY: `reserve(1)` made room for one more item at `len`;
                // `value` is a live `T` that the cursor never reads again,
                // so after the copy the vector owns it.
                unsafe {
                    ptr::copy_nonoverlapping(value, out.as_mut_ptr().add(len), 1);
                    out.set_len(len + 1);
                }
            });
            if copied.is_none() {
                // Claimed but not yet written: stop, never wait.
                break;
            }
            taken += 1;
        }
        taken
    }

    /// See [`Consumer::is_empty`].
    pub(super) fn is_empty(&self, shared: &Shared<T>) -> bool {
        let block = if self.block.is_null() {
            shared.first.load(Ordering::Acquire)
        } else {
            self.block
        };
        if block.is_null() {
            return true;
        }
        let (block, offset) = match (self.head % LAP) as usize {
            INSTALL => {
                // SAFETY: `block` is the consumer's, allocated while it
                // holds it.
                let next = unsafe { (*block).next.load(Ordering::Acquire) };
                if next.is_null() {
                    return true;
                }
                // SAFETY: linked, so live until the consumer recycles it.
                (next, unsafe { Block::first_offset(next) })
            }
            offset => (block, offset),
        };
        // SAFETY: `block` serves `offset` of its lap: it is the consumer's
        // block (or the first block while the consumer has none, see
        // `adopt_first`, or the block linked after the consumer's when
        // `head` waits at the install position, whose first slot is offset
        // 0), only recycled by this consumer through `&mut self`; `offset`
        // is below `BLOCK_CAP` and not below the block's first offset,
        // because `head` enters a lap there.
        let slot = unsafe { Block::slot(block, offset) };
        !slot.ready.load(Ordering::Acquire)
    }

    /// Whether the consumer closed the queue (it is the only one who can).
    /// Only the consumer sets or clears the word's `CLOSED` bit (`close`,
    /// `reset`), and producers' claims never change it, so a relaxed load
    /// on the consumer's side reads what the consumer last wrote.
    #[inline]
    pub(super) fn is_closed(&self, shared: &Shared<T>) -> bool {
        shared.tail.word.load(Ordering::Relaxed) & CLOSED != 0
    }

    /// See [`Consumer::shrink_to_fit`].
    pub(super) fn shrink_to_fit(&mut self, shared: &Shared<T>) -> bool {
        if self.is_closed(shared) || self.block.is_null() {
            // A closed queue is shrunk by `release`; a blockless one has
            // nothing to give.
            return false;
        }
        let word = shared.tail.word.load(Ordering::Acquire);
        let at = word >> 1;
        // Empty means every position claimed so far was taken: the word is
        // on `head`.
        if at != self.head {
            return false;
        }
        // Park the word on its lap's sentinel: producers wait there, and a
        // producer that read the word before cannot claim any more (its CAS
        // fails). The sentinel is above every claimed position, so the word
        // still only grows.
        let sentinel = (at / LAP) * LAP + SENTINEL as u64;
        if shared
            .tail
            .word
            .compare_exchange(word, sentinel << 1, Ordering::AcqRel, Ordering::Relaxed)
            .is_err()
        {
            // A push claimed a position meanwhile: not empty after all.
            return false;
        }
        // Nobody else touches a block now: every claim of our block was
        // taken, and no claim can succeed while the word rests here.
        // Producers that read the word after the store below see these
        // stores too.
        shared.tail.block.store(ptr::null_mut(), Ordering::Relaxed);
        shared.first.store(ptr::null_mut(), Ordering::Relaxed);
        // SAFETY: as argued, the block is ours alone with no item in it.
        unsafe { Block::free(self.block) };
        self.block = ptr::null_mut();
        // Back to a new queue's shape, a lap further on: `head` on the first
        // slot of a short lap, the word on the install position of the
        // virtual lap before it, so the next push installs a first block.
        let start = (at / LAP + 2) * LAP + FIRST_OFFSET;
        self.head = start;
        shared
            .tail
            .word
            .store(virtual_last_slot(start) << 1, Ordering::Release);
        true
    }

    /// See [`Consumer::close`].
    pub(super) fn close(&mut self, shared: &Shared<T>) -> Vec<T> {
        if self.is_closed(shared) {
            // Everything was taken by the first close and no claim has
            // succeeded since. Returning here also keeps a released cursor
            // (blocks freed) from looking at its blocks again.
            return Vec::new();
        }
        let mut word = shared.tail.word.fetch_or(CLOSED, Ordering::AcqRel);
        // A producer that claimed an install position is installing the next
        // block (or the first): it keeps that lap's first slot for its item,
        // which we must wait for like any claimed slot. Where that slot is
        // depends on the block, so wait for the installer to move the word
        // past it (a few stores away).
        let mut step = 0;
        while (word >> 1) % LAP == SENTINEL as u64 {
            spin_wait(&mut step);
            word = shared.tail.word.load(Ordering::Acquire);
        }
        // No claim can follow: everything pending lies below `end`.
        let end = word >> 1;
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
    /// `bump` moves the queue to its next generation; it runs before the
    /// reopened word is published.
    pub(super) fn reset(&mut self, shared: &Shared<T>, bump: impl FnOnce()) -> Vec<T> {
        let pending = self.close(shared);
        if self.block.is_null() {
            // Never pushed to: stay blockless, `head` on the next short lap's
            // first slot, the word on the install position of the virtual lap before
            // it. The new word is still larger than every earlier one (they
            // were at most the old virtual sentinel, closed).
            let start = self.head + LAP;
            self.reopen_at(shared, start, virtual_last_slot(start), bump);
            return pending;
        }
        // The queue is closed and every claimed slot was taken, so no
        // producer touches any block any more.
        // The word stays `head << 1 | CLOSED` until we store it.
        debug_assert_eq!(
            shared.tail.word.load(Ordering::Relaxed),
            self.head << 1 | CLOSED
        );
        // Restart at the next lap, in the same block (small or full), at the
        // first offset it serves: its slots below `head` in this lap were
        // taken (clear their flags now), the rest were never claimed; its
        // `next` is null (its lap's install position was never claimed),
        // and `tail.block` already points at it.
        // SAFETY: quiescent, as argued above; the block serves the offsets
        // from its first one up to `head`'s.
        let first = unsafe { Block::first_offset(self.block) };
        // SAFETY: as above.
        unsafe { Block::clear(self.block, first..(self.head % LAP) as usize) };
        // The new word is larger than every earlier one, so a stale
        // producer's CAS can never succeed.
        let start = (self.head / LAP + 1) * LAP + first as u64;
        self.reopen_at(shared, start, start, bump);
        pending
    }

    /// Opens the queue again in a new generation (`bump` stores it), the
    /// consumer at `start` and producers' next claim at `tail` (both larger
    /// than any earlier position, so a stale producer's CAS can never
    /// succeed).
    fn reopen_at(&mut self, shared: &Shared<T>, start: u64, tail: u64, bump: impl FnOnce()) {
        bump();
        self.head = start;
        // Publishes the generation and every read of the old items.
        shared.tail.word.store(tail << 1, Ordering::Release);
    }

    /// Takes the item at `head` if its push completed.
    #[inline]
    pub(super) fn try_take(&mut self, shared: &Shared<T>) -> Option<T> {
        // SAFETY: the item is read out exactly once, as `take_with` asks.
        self.take_with(shared, |value| unsafe { ptr::read(value) })
    }

    /// Hands the item at `head` to `take` if its push completed, then moves
    /// past it. `take` must move the item out (read it exactly once): the
    /// slot is not read again, and its block may be reused right after.
    #[inline(always)]
    fn take_with<R>(&mut self, shared: &Shared<T>, take: impl FnOnce(*const T) -> R) -> Option<R> {
        if !self.adopt_first(shared) {
            return None;
        }
        let mut offset = (self.head % LAP) as usize;
        if offset == INSTALL {
            // Every item of our block was taken; the next item, if any, is
            // in our block again if we can still reopen it, or else the
            // first of the next block, once its installer linked it.
            if self.reopen_block(shared) {
                offset = (self.head % LAP) as usize;
            } else {
                // SAFETY: `self.block` is still allocated (only we recycle
                // it).
                let next = unsafe { (*self.block).next.load(Ordering::Acquire) };
                if next.is_null() {
                    return None;
                }
                let done = mem::replace(&mut self.block, next);
                // Over the sentinel, to offset 0 of the next lap: blocks
                // after the first are full-size.
                self.head += 2;
                offset = 0;
                // SAFETY: only the consumer recycles; every slot of `done`
                // was taken, and no producer accesses it any more (the
                // installer linked `next` as its last access, and every
                // other claim of `done`'s lap came before the install
                // position's).
                unsafe { shared.recycle(done) };
            }
        }
        // SAFETY: `self.block` serves `head`'s lap and stays allocated while
        // we hold it; it serves `offset` (see `is_empty`).
        let slot = unsafe { Block::slot(self.block, offset) };
        if !slot.ready.load(Ordering::Acquire) {
            return None;
        }
        // `ready` (Acquire) synchronised with the producer's Release store
        // after it initialised the value; `take` reads it exactly once,
        // and `head` moves past it before anything else can run.
        let item = slot.value.with(|p| take(p.cast::<T>()));
        // `ready` stays set: the flags are cleared when the whole block is
        // recycled, reopened or reused by `reset`, and `head` has moved past
        // it.
        self.head += 1;
        if (self.head % LAP) as usize == INSTALL {
            // That was our block's last item: reopen it now, while no
            // producer may have claimed the install position yet. Waiting
            // for the next take would be too late: a take happens once a
            // push was claimed, which at this position is the install.
            self.reopen_block(shared);
        }
        Some(item)
    }

    /// At an install position (every item of our block taken) that no
    /// producer has claimed yet: reopens our block for the next lap (see "A
    /// drained block serves again" in the module docs) and moves `head` to
    /// the first slot it serves there. `false` if a producer claimed the
    /// install position (or the queue was closed) first: a next block is
    /// coming, and the caller follows its link.
    fn reopen_block(&mut self, shared: &Shared<T>) -> bool {
        let install = self.head;
        // SAFETY: `self.block` is live (only we free or recycle it).
        let first = unsafe { Block::first_offset(self.block) };
        let reopened = (install / LAP + 1) * LAP + first as u64;
        if shared.tail.word.load(Ordering::Relaxed) != install << 1 {
            return false;
        }
        // Every slot of our lap was taken and no producer touches them
        // again unless the CAS below succeeds, which publishes the clearing
        // to every later claim.
        // SAFETY: the block serves `first..BLOCK_CAP`.
        unsafe { Block::clear(self.block, first..BLOCK_CAP) };
        if shared
            .tail
            .word
            .compare_exchange(
                install << 1,
                reopened << 1,
                Ordering::Release,
                Ordering::Relaxed,
            )
            .is_err()
        {
            return false;
        }
        self.head = reopened;
        true
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
    /// No producer will push any more (every handle is gone or the queue
    /// stays closed: only `reset` reopens one, and it is never called after
    /// this). Later consumer calls are fine: they find the queue closed,
    /// blockless and empty.
    #[must_use = "the pending items are dropped by the caller, after it saved the cursor"]
    pub(super) unsafe fn release(&mut self, shared: &Shared<T>) -> Vec<T> {
        // Closing waits out in-flight pushes; afterwards no producer will
        // ever touch a block again (they see CLOSED first).
        let pending = self.close(shared);
        if !self.block.is_null() {
            // SAFETY: quiescent as argued above; `self.block` has no
            // successor (its lap's install position was never claimed) and no
            // items.
            unsafe { Block::free(self.block) };
            self.block = ptr::null_mut();
        }
        // The first block is freed by now (when the consumer left it, or
        // just above): a later `is_empty` or take must not find it there.
        // Nothing else reads `first`: producers never do.
        shared.first.store(ptr::null_mut(), Ordering::Relaxed);
        pending
    }
}
