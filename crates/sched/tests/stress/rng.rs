//! Cheap, seedable randomness: the stress run needs reproducible scripts,
//! not statistical quality, and no dependency for it.

/// xorshift64* (Vigna): one multiply and three shifts per number.
#[derive(Debug, Clone)]
pub(crate) struct Rng(u64);

impl Rng {
    /// A generator for `seed`; every seed (zero too) gives a usable stream.
    pub(crate) fn new(seed: u64) -> Self {
        // splitmix64 of the seed: neighbouring seeds give unrelated streams,
        // and the state is never zero (a zero state would stay zero).
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        Rng((z ^ (z >> 31)) | 1)
    }

    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number in `0..n` (`n > 0`).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// A number in `lo..=hi`.
    pub(crate) fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    /// True with probability `n / d`.
    pub(crate) fn chance(&mut self, n: u64, d: u64) -> bool {
        self.below(d) < n
    }

    /// A fresh generator split off this one (for a child process or a
    /// helper thread), so the parent's stream does not depend on how many
    /// numbers the child draws.
    pub(crate) fn split(&mut self) -> Rng {
        Rng::new(self.next())
    }
}
