//! Where the ids of monitors and asks come from.
//!
//! A running engine takes them from blocks handed out per thread: unique
//! in the whole program, with one shared atomic write per block of
//! [`ID_BLOCK`], not one per id, so threads that monitor and ask a lot
//! never meet on a counter.
//!
//! A simulation counts its own, from one: the ids a run hands out, and so
//! the order of the tables keyed by them (a lost node's relations are
//! swept in id order), are then the same in every run of a seed, whatever
//! ran in the program before it. A program-wide counter would give the
//! second run of a seed other ids than the first. A simulation's engine
//! runs on one thread, so its counter is never contended.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64 as StdAtomicU64, Ordering::Relaxed};

/// How many ids a thread takes from the program-wide counter at once.
const ID_BLOCK: u64 = 1024;
static NEXT_BLOCK: StdAtomicU64 = StdAtomicU64::new(0);

thread_local! {
    static IDS: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
}

/// An engine's source of monitor and ask ids (see the module's doc).
#[derive(Debug, Default)]
pub(crate) struct Ids {
    /// A simulation's own count; `None` on a running engine.
    counted: Option<StdAtomicU64>,
}

impl Ids {
    /// Ids from the program-wide blocks (a running engine).
    pub(crate) fn shared() -> Ids {
        Ids { counted: None }
    }

    /// Ids counted by this engine alone, from one (a simulation).
    pub(crate) fn counted() -> Ids {
        Ids {
            counted: Some(StdAtomicU64::new(1)),
        }
    }

    /// Counted by the engine alone (`counted`: a simulation's, on its
    /// virtual clock), or from the program-wide blocks.
    pub(crate) fn new(counted: bool) -> Ids {
        match counted {
            true => Ids::counted(),
            false => Ids::shared(),
        }
    }

    /// The next id: never handed out before by this engine (nor, on a
    /// running engine, by any other in the program).
    #[inline]
    pub(crate) fn next(&self) -> u64 {
        match &self.counted {
            None => from_blocks(),
            Some(count) => count.fetch_add(1, Relaxed),
        }
    }
}

/// The next id of this thread's block, taking a new block when it ran out.
fn from_blocks() -> u64 {
    IDS.with(|ids| {
        let (mut next, mut end) = ids.get();
        if next == end {
            next = NEXT_BLOCK.fetch_add(1, Relaxed) * ID_BLOCK;
            end = next + ID_BLOCK;
        }
        ids.set((next + 1, end));
        next
    })
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::Ids;

    #[test]
    fn ids_are_unique_across_threads() {
        // More than one block per thread (1 024 ids), fewer under miri.
        let per_thread = if cfg!(miri) { 1100 } else { 3000 };
        let ids: Vec<u64> = (0..4)
            .map(|_| {
                std::thread::spawn(move || {
                    let ids = Ids::shared();
                    (0..per_thread).map(|_| ids.next()).collect::<Vec<_>>()
                })
            })
            .flat_map(|t| t.join().unwrap())
            .collect();
        let unique: std::collections::HashSet<_> = ids.iter().collect();
        assert_eq!(unique.len(), ids.len());
    }

    #[test]
    fn a_counted_source_gives_the_same_ids_whatever_ran_before() {
        // Ids taken from the program-wide blocks first change nothing.
        let shared = Ids::shared();
        for _ in 0..5000 {
            shared.next();
        }
        let first: Vec<u64> = {
            let ids = Ids::counted();
            (0..10).map(|_| ids.next()).collect()
        };
        let second: Vec<u64> = {
            let ids = Ids::counted();
            (0..10).map(|_| ids.next()).collect()
        };
        assert_eq!(first, (1..=10).collect::<Vec<_>>());
        assert_eq!(first, second);
    }
}
