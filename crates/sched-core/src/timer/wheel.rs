//! A hierarchical timing wheel: the engine's pending timers, keyed by
//! deadline in ticks.
//!
//! # Structure
//!
//! Six levels of 64 slots. A slot of level `n` spans `64^n` ticks, so level
//! 0 holds single ticks and the whole wheel spans `64^6 = 2^36` ticks. A
//! pending entry sits in the level given by the highest 6-bit digit in which
//! its deadline differs from `elapsed`, in the slot named by its deadline's
//! digit at that level. Reading a deadline in base 64 this way means an
//! entry never needs sorting: it only moves down a level when `elapsed`
//! reaches the start of its slot (a cascade), so at most five times for a
//! deadline within the span, and a level 0 slot holds the entries due at
//! exactly one tick. Appending to slots and cascading in list order keeps
//! equal deadlines in insertion order.
//!
//! Each slot is a circular doubly linked list threaded through a slab
//! (`Vec<Entry<T>>` with a free list, linked by `u32` indices rather than
//! pointers, so there is no unsafe code and links are half the size). The
//! list's head is the only per-slot state, its tail is the head's `prev`.
//! Insert appends at the tail and remove unlinks in place, both O(1), and a
//! removed entry's slab slot is reused by the next insert at once. Each slab
//! slot keeps a generation that is bumped whenever it is vacated, so a
//! [`Key`] to a fired or removed entry is recognised as stale.
//!
//! Each level has a `u64` occupancy bitmap, one bit per non-empty slot: the
//! next slot to expire is found with a rotate and a `trailing_zeros`, never
//! by walking entries, which keeps [`Wheel::next_deadline`] cheap.
//!
//! Invariants between calls, with `e` = `elapsed`:
//! - every entry in the wheel has a deadline `> e`; entries inserted with a
//!   deadline `<= e` wait in a separate overdue list and fire at the next
//!   poll;
//! - an entry of level `n < 5` agrees with `e` in every digit above `n` and
//!   its digit `n` is greater than `e`'s, so its slot starts after `e` and
//!   lower levels always expire before higher ones;
//! - deadlines `2^36` or more ticks ahead (more precisely: differing from
//!   `e` above the top digit) are clamped into level 5, in the slot of their
//!   own top digit read circularly: a slot at or before `e`'s top digit
//!   stands for the next turn of the top level. That slot always starts at
//!   or before the deadline, so a clamped entry is re-placed when its slot
//!   is reached and never fires early.
//!
//! A poll that jumps `2^36` ticks or more would otherwise re-place every
//! clamped entry once per turn of the top level; instead it takes all
//! entries out, sorts them and places the survivors afresh (O(n log n), for
//! a jump of more than two years at one tick per millisecond).

use std::fmt;
use std::mem;

/// Levels in the wheel.
const LEVELS: usize = 6;
/// Bits of the deadline that select a slot within one level.
const SLOT_BITS: u32 = 6;
/// Slots per level.
const SLOTS: usize = 1 << SLOT_BITS;
const SLOT_MASK: u64 = SLOTS as u64 - 1;
/// Ticks the wheel spans; a longer jump of `poll` rebuilds it instead.
const RANGE: u64 = 1 << (SLOT_BITS * LEVELS as u32);
/// The list of entries inserted with a deadline already reached; it follows
/// the `LEVELS * SLOTS` slot lists in `Wheel::heads`.
const OVERDUE: usize = LEVELS * SLOTS;
/// Lists: every slot of every level, then the overdue list.
const LISTS: usize = OVERDUE + 1;
/// The null link (an empty list, or the end of the free list).
const NONE: u32 = u32::MAX;

/// Identifies one inserted timer; stale keys (fired or removed) are detected
/// by a generation counter.
///
/// A slab slot's generation wraps after `2^32` reuses, so a key held across
/// that many reuses of its slot could name a later timer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    index: u32,
    generation: u32,
}

impl Key {
    /// Packs the key into one word, e.g. to store it in an atomic.
    pub(crate) fn to_bits(self) -> u64 {
        u64::from(self.generation) << 32 | u64::from(self.index)
    }

    /// Unpacks a word made by [`Key::to_bits`]. Any word is accepted: one
    /// that names no timer is simply stale.
    pub(crate) fn from_bits(bits: u64) -> Key {
        Key {
            index: bits as u32,
            generation: (bits >> 32) as u32,
        }
    }
}

/// One slab slot: a pending timer, or a vacant slot on the free list.
struct Entry<T> {
    deadline: u64,
    /// The previous entry in the entry's circular list.
    prev: u32,
    /// The next entry in the circular list, or while vacant the next vacant
    /// slot.
    next: u32,
    /// Bumped whenever the slot is vacated, so keys to the old timer go
    /// stale.
    generation: u32,
    /// The list holding the entry: `level * SLOTS + slot`, or `OVERDUE`.
    /// Kept so that remove finds the head to update without recomputing the
    /// placement.
    list: u16,
    /// `None` while vacant.
    value: Option<T>,
}

/// A hierarchical timing wheel of values of type `T`.
///
/// Deadlines are in ticks (the caller uses 1 tick = 1 ms since the engine
/// started). `elapsed` starts at 0.
pub(crate) struct Wheel<T> {
    slab: Vec<Entry<T>>,
    /// First vacant slab slot, or `NONE`.
    free: u32,
    /// Head of each list (`NONE` when empty): the slots, then `OVERDUE`.
    heads: Box<[u32; LISTS]>,
    /// Per level, bit `s` set when slot `s` is non-empty.
    occupied: [u64; LEVELS],
    elapsed: u64,
    len: usize,
    /// At most the earliest overdue deadline while the overdue list is not
    /// empty: a removal may leave it lower than that, which is allowed of a
    /// lower bound and spares a walk.
    overdue_min: u64,
    /// Indices taken out of lists during a poll; kept to reuse its capacity.
    scratch: Vec<u32>,
    /// The slab looks at shrinking when `len` falls to this: a quarter of
    /// its slots when it last grew, then half of `len` at each look, so the
    /// looks (one pass each) come at geometrically spaced sizes.
    look_at: usize,
    /// The generation a slot made afresh starts at: past every generation
    /// of a slot the slab has cut off.
    fresh_generation: u32,
}

/// Below this many slots the slab never shrinks.
const SHRINK_FROM: usize = 1024;

impl<T> Wheel<T> {
    pub(crate) fn new() -> Self {
        Wheel {
            slab: Vec::new(),
            free: NONE,
            heads: Box::new([NONE; LISTS]),
            occupied: [0; LEVELS],
            elapsed: 0,
            len: 0,
            overdue_min: 0,
            scratch: Vec::new(),
            look_at: 0,
            fresh_generation: 0,
        }
    }

    /// Inserts `value` due at `deadline`. A deadline at or before
    /// `elapsed()` is due at the next `poll`.
    ///
    /// # Panics
    ///
    /// If `u32::MAX` timers are pending.
    pub(crate) fn insert(&mut self, deadline: u64, value: T) -> Key {
        let index = self.allocate(deadline, value);
        if deadline <= self.elapsed {
            self.overdue_min = if self.heads[OVERDUE] == NONE {
                deadline
            } else {
                self.overdue_min.min(deadline)
            };
            self.link(index, OVERDUE);
        } else {
            self.place(index);
        }
        Key {
            index,
            generation: self.slab[index as usize].generation,
        }
    }

    /// Removes a pending timer; `None` if the key is stale (already fired or
    /// removed). O(1).
    pub(crate) fn remove(&mut self, key: Key) -> Option<T> {
        let entry = self.slab.get(key.index as usize)?;
        if entry.generation != key.generation || entry.value.is_none() {
            return None;
        }
        self.unlink(key.index);
        let value = self.release(key.index);
        self.maybe_shrink();
        Some(value)
    }

    /// The value of a pending timer; `None` if the key is stale.
    pub(crate) fn get_mut(&mut self, key: Key) -> Option<&mut T> {
        let entry = self.slab.get_mut(key.index as usize)?;
        if entry.generation != key.generation {
            return None;
        }
        entry.value.as_mut()
    }

    /// A lower bound of the earliest pending deadline, or `None` when empty.
    ///
    /// It equals that deadline when the earliest timer sits in level 0 (its
    /// deadline is in the same aligned block of 64 ticks as `elapsed()`);
    /// otherwise it is the start of the earliest non-empty slot, and polling
    /// at that instant cascades the slot so the next answer is tighter. For
    /// overdue timers it is at most the earliest overdue deadline. Costs a
    /// few bitmap operations.
    pub(crate) fn next_deadline(&self) -> Option<u64> {
        if self.heads[OVERDUE] != NONE {
            return Some(self.overdue_min);
        }
        self.next_expiry().map(|(_, start)| start)
    }

    /// Moves every entry with deadline `<= now` into `out`, in non-decreasing
    /// deadline order (equal deadlines in insertion order), and moves
    /// `elapsed()` to `max(elapsed(), now)`. Timers inserted with a deadline
    /// already reached fire here even when `now < elapsed()`: time never runs
    /// backwards, so they would otherwise wait for a later poll.
    pub(crate) fn poll(&mut self, now: u64, out: &mut impl FnMut(Key, u64, T)) {
        let mut batch = mem::take(&mut self.scratch);
        // Overdue deadlines are all at or before `elapsed`, hence before
        // anything in the wheel: firing them first keeps `out` in order.
        if self.heads[OVERDUE] != NONE {
            self.detach_into(OVERDUE, &mut batch);
            self.fire_sorted(&mut batch, u64::MAX, out);
        }
        if now > self.elapsed && now - self.elapsed >= RANGE {
            self.rebuild(now, &mut batch, out);
        } else if now > self.elapsed {
            // Slots expire in order of their start; each one either fires
            // (level 0, or entries due right at the start) or moves its
            // entries to lower levels, relative to the new `elapsed`.
            while let Some((list, start)) = self.next_expiry() {
                if start > now {
                    break;
                }
                self.elapsed = start;
                self.detach_into(list, &mut batch);
                for index in batch.drain(..) {
                    if self.slab[index as usize].deadline == start {
                        let (key, value) = self.release_keyed(index);
                        out(key, start, value);
                    } else {
                        self.place(index);
                    }
                }
            }
            // Every slot left starts after `now`, so the placements stay
            // valid relative to `now`.
            self.elapsed = now;
        }
        self.scratch = batch;
        self.maybe_shrink();
    }

    /// Gives back the slab's vacant top and spare capacity when few of its
    /// slots are in use (see the module's documentation).
    fn maybe_shrink(&mut self) {
        let slots = self.slab.len();
        if slots < SHRINK_FROM || self.len > self.look_at {
            return;
        }
        self.look_at = self.len / 2;
        let keep = self
            .slab
            .iter()
            .rposition(|e| e.value.is_some())
            .map_or(0, |i| i + 1);
        for entry in &self.slab[keep..] {
            self.fresh_generation = self.fresh_generation.max(entry.generation);
        }
        self.slab.truncate(keep);
        self.free = NONE;
        for index in (0..keep).rev() {
            let entry = &mut self.slab[index];
            if entry.value.is_none() {
                entry.next = self.free;
                self.free = index as u32;
            }
        }
        self.slab.shrink_to((2 * keep).max(SHRINK_FROM / 4));
        if self.scratch.capacity() > SHRINK_FROM {
            self.scratch = Vec::new();
        }
    }

    /// Pending timers.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Whether no timer is pending.
    // Part of the wheel's interface that the engine does not read yet.
    #[cfg_attr(any(not(test), loom), allow(dead_code))]
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The instant up to which the wheel has been polled.
    // Part of the wheel's interface that the engine does not read yet.
    #[cfg_attr(any(not(test), loom), allow(dead_code))]
    pub(crate) fn elapsed(&self) -> u64 {
        self.elapsed
    }

    /// Removes and returns every pending entry (shutdown), in no particular
    /// order. Their keys go stale.
    pub(crate) fn drain(&mut self) -> Vec<T> {
        let mut values = Vec::with_capacity(self.len);
        for index in 0..self.slab.len() as u32 {
            if self.slab[index as usize].value.is_some() {
                values.push(self.release(index));
            }
        }
        self.heads.fill(NONE);
        self.occupied = [0; LEVELS];
        values
    }

    /// Takes a vacant slab slot (or grows the slab) for a new entry, not yet
    /// linked into any list.
    fn allocate(&mut self, deadline: u64, value: T) -> u32 {
        self.len += 1;
        if self.free != NONE {
            let index = self.free;
            let entry = &mut self.slab[index as usize];
            self.free = entry.next;
            entry.deadline = deadline;
            entry.value = Some(value);
            return index;
        }
        // `NONE` itself must never become an index.
        assert!(self.slab.len() < NONE as usize, "timer wheel is full");
        self.look_at = (self.slab.len() + 1) / 4;
        self.slab.push(Entry {
            deadline,
            prev: NONE,
            next: NONE,
            generation: self.fresh_generation,
            list: 0,
            value: Some(value),
        });
        (self.slab.len() - 1) as u32
    }

    /// Vacates an unlinked entry's slot and returns its value.
    /// Vacates a slot that fires: its value, and the key it was inserted
    /// under (its generation before the vacating bump).
    fn release_keyed(&mut self, index: u32) -> (Key, T) {
        let key = Key {
            index,
            generation: self.slab[index as usize].generation,
        };
        (key, self.release(index))
    }

    fn release(&mut self, index: u32) -> T {
        let entry = &mut self.slab[index as usize];
        let value = entry.value.take().expect("released a vacant timer slot");
        entry.generation = entry.generation.wrapping_add(1);
        entry.next = self.free;
        self.free = index;
        self.len -= 1;
        value
    }

    /// Links an entry whose deadline is after `elapsed` into the slot its
    /// deadline's base-64 digits select.
    fn place(&mut self, index: u32) {
        let deadline = self.slab[index as usize].deadline;
        debug_assert!(deadline > self.elapsed);
        // The highest differing bit selects the level: every digit above it
        // is shared with `elapsed`, so the slot holding the deadline's digit
        // at that level lies ahead in the current turn of that level.
        let highest = 63 - (deadline ^ self.elapsed).leading_zeros();
        let level = (highest / SLOT_BITS).min(LEVELS as u32 - 1);
        let slot = (deadline >> (level * SLOT_BITS)) & SLOT_MASK;
        self.link(index, level as usize * SLOTS + slot as usize);
    }

    /// The earliest non-empty slot's list and start instant. Lower levels
    /// always expire first, so only the lowest non-empty level is looked at.
    fn next_expiry(&self) -> Option<(usize, u64)> {
        let level = self.occupied.iter().position(|&bits| bits != 0)?;
        let shift = level as u32 * SLOT_BITS;
        let digit = (self.elapsed >> shift) & SLOT_MASK;
        // Rotating puts the slot after `elapsed`'s at bit 0, so the count of
        // trailing zeros is the distance to the next occupied slot, reading
        // the level circularly.
        let rotated = self.occupied[level].rotate_right(((digit + 1) & SLOT_MASK) as u32);
        let ahead = digit + 1 + u64::from(rotated.trailing_zeros());
        // Wrapping past slot 63 means the next turn, which only clamped
        // entries in the top level can need.
        debug_assert!(ahead < SLOTS as u64 || level == LEVELS - 1);
        let turn = self.elapsed >> (shift + SLOT_BITS) << (shift + SLOT_BITS);
        let start = turn + (ahead << shift);
        Some((level * SLOTS + (ahead & SLOT_MASK) as usize, start))
    }

    /// Empties a list into `into`, in list (insertion) order.
    fn detach_into(&mut self, list: usize, into: &mut Vec<u32>) {
        let head = mem::replace(&mut self.heads[list], NONE);
        if list < OVERDUE {
            self.occupied[list / SLOTS] &= !(1 << (list % SLOTS));
        }
        let mut index = head;
        while index != NONE {
            into.push(index);
            index = self.slab[index as usize].next;
            if index == head {
                break;
            }
        }
    }

    /// Sorts taken-out entries by deadline (stably, so equal deadlines keep
    /// their list order), fires those due by `now` and places the rest.
    fn fire_sorted(&mut self, batch: &mut Vec<u32>, now: u64, out: &mut impl FnMut(Key, u64, T)) {
        let slab = &self.slab;
        batch.sort_by_key(|&index| slab[index as usize].deadline);
        for index in batch.drain(..) {
            let deadline = self.slab[index as usize].deadline;
            if deadline <= now {
                let (key, value) = self.release_keyed(index);
                out(key, deadline, value);
            } else {
                self.place(index);
            }
        }
    }

    /// Handles a poll that jumps the whole span of the wheel or more: every
    /// entry is taken out and either fires or is placed relative to `now`.
    fn rebuild(&mut self, now: u64, batch: &mut Vec<u32>, out: &mut impl FnMut(Key, u64, T)) {
        for list in 0..OVERDUE {
            if self.heads[list] != NONE {
                self.detach_into(list, batch);
            }
        }
        self.elapsed = now;
        self.fire_sorted(batch, now, out);
    }

    /// Appends an entry at the tail of a list.
    fn link(&mut self, index: u32, list: usize) {
        let head = self.heads[list];
        let (prev, next) = if head == NONE {
            self.heads[list] = index;
            if list < OVERDUE {
                self.occupied[list / SLOTS] |= 1 << (list % SLOTS);
            }
            (index, index)
        } else {
            let tail = self.slab[head as usize].prev;
            self.slab[tail as usize].next = index;
            self.slab[head as usize].prev = index;
            (tail, head)
        };
        let entry = &mut self.slab[index as usize];
        entry.prev = prev;
        entry.next = next;
        entry.list = list as u16;
    }

    /// Takes an entry out of its list.
    fn unlink(&mut self, index: u32) {
        let Entry {
            prev, next, list, ..
        } = self.slab[index as usize];
        let list = usize::from(list);
        if next == index {
            // The only entry: the list becomes empty.
            self.heads[list] = NONE;
            if list < OVERDUE {
                self.occupied[list / SLOTS] &= !(1 << (list % SLOTS));
            }
            return;
        }
        self.slab[prev as usize].next = next;
        self.slab[next as usize].prev = prev;
        if self.heads[list] == index {
            self.heads[list] = next;
        }
    }
}

impl<T> fmt::Debug for Wheel<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Wheel")
            .field("elapsed", &self.elapsed)
            .field("len", &self.len)
            .field("next_deadline", &self.next_deadline())
            .finish_non_exhaustive()
    }
}

#[cfg(all(test, not(loom)))]
#[path = "wheel_tests.rs"]
mod tests;
