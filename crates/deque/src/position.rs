//! Positions in the deque and the packed word that stealers and the owner
//! race on.
//!
//! Positions are `u32` counters that wrap around; the slot of position `p`
//! in a buffer of capacity `c` (a power of two) is `p & (c - 1)`. Because the
//! capacity never exceeds [`MAX_CAPACITY`] (2^30), the distance between any
//! two live positions is below 2^31 and wrapping subtraction gives it
//! exactly.

/// The largest capacity a buffer may grow to.
pub(crate) const MAX_CAPACITY: u32 = 1 << 30;

/// The word `pop_count << 32 | claimed_head`.
///
/// - `pop_count` counts the owner's successful pops; with the push count it
///   gives the bottom (`tail = push_count - pop_count`).
/// - `claimed_head` is the first position no stealer has claimed yet.
///
/// Packing both into one atomic is what makes the deque sound with
/// steal-half: a pop and a steal both change this word with a single
/// read-modify-write, so a stealer that computed how many items to take from
/// a stale bottom fails its CAS instead of taking items the owner popped in
/// the meantime.
///
/// # The width of `pop_count`
///
/// `pop_count` wraps at 2^32, so the CAS above is only *almost* ABA-free: a
/// stealer that loads the word and is then descheduled, while the owner
/// makes a multiple of 2^32 pops (and as many pushes) and no steal moves
/// `claimed_head`, finds the word equal again and its CAS succeeds with a
/// count computed from the old bottom. If the deque then holds fewer items
/// than that count, the stealer claims positions past the bottom. All of
/// these must hold at once:
///
/// - the stealer stalls between two adjacent steps of `Inner::claim_top`
///   (its load of the word and its CAS: three loads and some arithmetic, no
///   loop, lock or allocation) for as long as 2^32 pops and 2^32 pushes
///   take: over ten seconds for an owner that does nothing else (each is an
///   uncontended CAS or store), minutes in a scheduler, where every pop runs
///   a task;
/// - its CAS lands in the window where the pop count is equal modulo 2^32,
///   between two pops, with `claimed_head` unchanged;
/// - the deque then holds fewer items than the stealer computed.
///
/// A thread preempted in the middle of those steps for that long (a
/// stopped process, a suspended virtual machine) is possible in principle,
/// so this is a bound, not a proof. The word cannot simply be widened:
/// 64 bits is the widest compare-and-swap stable Rust offers on every
/// target, and `claimed_head` needs its 32 bits, since positions are `u32`
/// everywhere and two live positions may lie up to 2^30 apart
/// ([`MAX_CAPACITY`]). Taking bits from it would mean storing positions
/// modulo a smaller power of two and lowering the maximum capacity to match.
#[inline]
pub(crate) const fn pack(pop_count: u32, claimed_head: u32) -> u64 {
    ((pop_count as u64) << 32) | claimed_head as u64
}

/// Splits a word made by [`pack`] into `(pop_count, claimed_head)`.
#[inline]
pub(crate) const fn unpack(word: u64) -> (u32, u32) {
    ((word >> 32) as u32, word as u32)
}

/// The number of items between `head` and `tail`, or 0 if a torn read of
/// the counters put `tail` behind `head`.
#[inline]
pub(crate) const fn distance(head: u32, tail: u32) -> u32 {
    let d = tail.wrapping_sub(head);
    if d > i32::MAX as u32 {
        0
    } else {
        d
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn pack_round_trips() {
        for &(p, h) in &[
            (0, 0),
            (1, 2),
            (u32::MAX, 0),
            (0, u32::MAX),
            (u32::MAX, u32::MAX),
        ] {
            assert_eq!(unpack(pack(p, h)), (p, h));
        }
    }

    #[test]
    fn distance_wraps_and_clamps() {
        assert_eq!(distance(5, 9), 4);
        assert_eq!(distance(u32::MAX - 1, 2), 4);
        assert_eq!(distance(9, 5), 0, "a tail behind the head reads as empty");
    }
}
