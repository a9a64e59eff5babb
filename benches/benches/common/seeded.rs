//! Seeded pseudo-random numbers for the benches' loads, so ours and the
//! peer wait the same delays in the same order.

/// A splitmix64 generator starting at `seed`: each call returns the next
/// number.
pub(crate) fn splitmix64(seed: u64) -> impl FnMut() -> u64 {
    let mut state = seed;
    move || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}
