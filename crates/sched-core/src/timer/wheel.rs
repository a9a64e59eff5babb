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
//! Each slot is a list of references to entries of a slab (`Vec<Entry<T>>`
//! with a free list): a reference is the entry's slab index and its
//! generation when it was listed, one word, so there is no unsafe code and
//! no pointer to chase. Insert appends a reference, touching only the new
//! entry and the list's tail (a linked list also touched the old tail and
//! the head, two more entries likely out of cache). Remove vacates the
//! entry at once (its slab slot is reused by the next insert) and bumps
//! its generation, which makes its reference stale where it stands: it is
//! skipped when its list is taken out, so removal is O(1) without a
//! search. Each list counts its live entries, so the occupancy bitmaps
//! (below) stay exact: a list whose last live entry leaves is cleared at
//! once, and one that holds more than twice as many stale references as
//! live ones (plus a few) is compacted, so stale references never cost
//! more than the live ones. Taking a list out reads its references in
//! order and can load the entries a few places ahead while it handles one.
//! A slab slot's generation also tells a [`Key`] to a fired or removed
//! entry apart from a later one.
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
//! a jump of more than 79 days at one tick per 100 µs).

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
    /// The deadline while pending; while vacant, the next vacant slot (or
    /// `NONE`), which saves a field.
    deadline: u64,
    /// Bumped whenever the slot is vacated, so keys and list references to
    /// the old timer go stale.
    generation: u32,
    /// The list holding the entry's reference: `level * SLOTS + slot`, or
    /// `OVERDUE`. Kept so that removal can count the list's live entries
    /// down without looking for the reference.
    list: u16,
    /// `None` while vacant.
    value: Option<T>,
}

/// A list's reference to an entry: its key's bits (generation and index).
type Ref = u64;

/// One slot's list (or the overdue list).
#[derive(Default)]
struct List {
    /// References in insertion order; some may be stale (their entry was
    /// removed since, see the module's documentation).
    refs: Vec<Ref>,
    /// How many of `refs` are live.
    live: u32,
}

/// A hierarchical timing wheel of values of type `T`.
///
/// Deadlines are in ticks (the caller uses 1 tick = 100 µs since the
/// engine started). `elapsed` starts at 0.
pub(crate) struct Wheel<T> {
    slab: Vec<Entry<T>>,
    /// First vacant slab slot, or `NONE`.
    free: u32,
    /// Every slot's list, then the overdue list.
    lists: Box<[List]>,
    /// Per level, bit `s` set when slot `s` has a live entry.
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

/// A list is compacted once it holds more than twice as many stale
/// references as live ones, plus this many.
const STALE_SLACK: usize = 32;

/// How many entries ahead of the one handled a list's reader loads.
const PREFETCH_AHEAD: usize = 8;

impl<T> Wheel<T> {
    pub(crate) fn new() -> Self {
        Wheel {
            slab: Vec::new(),
            free: NONE,
            lists: (0..LISTS).map(|_| List::default()).collect(),
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
            self.overdue_min = if self.lists[OVERDUE].live == 0 {
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
    /// removed). O(1): its list keeps a stale reference, skipped later.
    pub(crate) fn remove(&mut self, key: Key) -> Option<T> {
        let entry = self.slab.get(key.index as usize)?;
        if entry.generation != key.generation || entry.value.is_none() {
            return None;
        }
        let list = usize::from(entry.list);
        let value = self.release(key.index);
        self.forget(list);
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
        if self.lists[OVERDUE].live != 0 {
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
        if self.lists[OVERDUE].live != 0 {
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

    /// Gives back the slab's vacant top and spare capacity, and the lists'
    /// spare capacity, when few of its slots are in use (see the module's
    /// documentation).
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
                entry.deadline = u64::from(self.free);
                self.free = index as u32;
            }
        }
        self.slab.shrink_to((2 * keep).max(SHRINK_FROM / 4));
        for list in self.lists.iter_mut() {
            // References past the cut slab are stale: compacting drops them.
            if list.refs.len() > list.live as usize {
                let slab = &self.slab;
                list.refs.retain(|&r| is_live(slab, r));
            }
            list.refs.shrink_to(2 * list.refs.len());
        }
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
        for list in self.lists.iter_mut() {
            list.refs.clear();
            list.live = 0;
        }
        self.occupied = [0; LEVELS];
        values
    }

    /// Takes a vacant slab slot (or grows the slab) for a new entry, not yet
    /// listed.
    fn allocate(&mut self, deadline: u64, value: T) -> u32 {
        self.len += 1;
        if self.free != NONE {
            let index = self.free;
            let entry = &mut self.slab[index as usize];
            self.free = entry.deadline as u32;
            entry.deadline = deadline;
            entry.value = Some(value);
            return index;
        }
        // `NONE` itself must never become an index.
        assert!(self.slab.len() < NONE as usize, "timer wheel is full");
        if self.slab.len() == self.slab.capacity() {
            // Grown by a quarter, not doubled: a wheel that peaks at 25 000
            // timers held room for 32 768 (each entry 40 bytes of a
            // timer-heavy process's memory). Large reallocations move pages
            // rather than copy them, so the smaller steps cost little.
            self.slab
                .reserve_exact((self.slab.len() / 4).max(SHRINK_FROM / 4));
        }
        self.look_at = (self.slab.len() + 1) / 4;
        self.slab.push(Entry {
            deadline,
            generation: self.fresh_generation,
            list: 0,
            value: Some(value),
        });
        (self.slab.len() - 1) as u32
    }

    /// Vacates a slot that fires: its value, and the key it was inserted
    /// under (its generation before the vacating bump).
    fn release_keyed(&mut self, index: u32) -> (Key, T) {
        let key = Key {
            index,
            generation: self.slab[index as usize].generation,
        };
        (key, self.release(index))
    }

    /// Vacates a slot (its references go stale) and returns its value.
    fn release(&mut self, index: u32) -> T {
        let entry = &mut self.slab[index as usize];
        let value = entry.value.take().expect("released a vacant timer slot");
        entry.generation = entry.generation.wrapping_add(1);
        entry.deadline = u64::from(self.free);
        self.free = index;
        self.len -= 1;
        value
    }

    /// Lists an entry whose deadline is after `elapsed` in the slot its
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

    /// Empties a list into `into`: the indices of its live entries, in
    /// insertion order. Its references' buffer stays with the list.
    fn detach_into(&mut self, list: usize, into: &mut Vec<u32>) {
        if list < OVERDUE {
            self.occupied[list / SLOTS] &= !(1 << (list % SLOTS));
        }
        let mut refs = mem::take(&mut self.lists[list].refs);
        self.lists[list].live = 0;
        for (at, &r) in refs.iter().enumerate() {
            // The entries were listed over time and lie anywhere in the
            // slab: start loading those a few references ahead.
            if let Some(&ahead) = refs.get(at + PREFETCH_AHEAD) {
                if let Some(entry) = self.slab.get(Key::from_bits(ahead).index as usize) {
                    crate::sync::prefetch(entry, mem::size_of::<Entry<T>>());
                }
            }
            if is_live(&self.slab, r) {
                into.push(Key::from_bits(r).index);
            }
        }
        // The buffer stays for the slot's next turn, which likely holds
        // about as many: trimmed only when far larger than this turn needed
        // (growing it back costs a copy per doubling).
        let held = refs.len();
        refs.clear();
        if refs.capacity() > 4 * held + 64 {
            refs.shrink_to(2 * held);
        }
        debug_assert!(self.lists[list].refs.is_empty(), "listed while detaching");
        self.lists[list].refs = refs;
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
            if self.lists[list].live != 0 {
                self.detach_into(list, batch);
            }
        }
        self.elapsed = now;
        self.fire_sorted(batch, now, out);
    }

    /// Appends a reference to an entry at the end of a list.
    fn link(&mut self, index: u32, list: usize) {
        let entry = &mut self.slab[index as usize];
        entry.list = list as u16;
        let r = Key {
            index,
            generation: entry.generation,
        }
        .to_bits();
        let target = &mut self.lists[list];
        target.refs.push(r);
        target.live += 1;
        if target.live == 1 && list < OVERDUE {
            self.occupied[list / SLOTS] |= 1 << (list % SLOTS);
        }
    }

    /// A live entry of `list` was removed (its reference is stale now):
    /// counts it down, and clears or compacts the list when its stale
    /// references outgrow its live ones.
    fn forget(&mut self, list: usize) {
        let target = &mut self.lists[list];
        target.live -= 1;
        if target.live == 0 {
            target.refs.clear();
            if list < OVERDUE {
                self.occupied[list / SLOTS] &= !(1 << (list % SLOTS));
            }
        } else if target.refs.len() > 2 * target.live as usize + STALE_SLACK {
            let slab = &self.slab;
            target.refs.retain(|&r| is_live(slab, r));
        }
    }
}

/// Whether a list's reference names a pending entry (not one removed or
/// fired since, nor a later one in the same slab slot).
fn is_live<T>(slab: &[Entry<T>], r: Ref) -> bool {
    let key = Key::from_bits(r);
    slab.get(key.index as usize)
        .is_some_and(|e| e.generation == key.generation && e.value.is_some())
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
