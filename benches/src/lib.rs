//! Side-by-side benchmarks of the scheduler's crates against their peers.
//!
//! Each file under `benches/` runs one workload for our implementation and
//! for its peers in the same criterion run, so the ratios between them are
//! measured on the same machine at the same time. Run one with
//! `cargo bench -p benches --bench NAME`.

/// Sizes of the owner push-then-pop batches the deque benchmark measures.
pub const DEQUE_BATCHES: [usize; 2] = [64, 1024];

/// Items one owner hands to one thief in the deque steal benchmarks.
pub const DEQUE_STEAL_ITEMS: usize = 10_000;
