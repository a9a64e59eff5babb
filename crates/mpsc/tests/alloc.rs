//! Measures allocations in steady state with a counting global allocator.
//!
//! One test per file on purpose: the counter is per thread, and nothing else
//! in this binary allocates on the test's thread while it counts.
//!
//! Claim checked here: once warmed up, pushing and draining on one thread
//! allocates nothing: a drained block is reopened, and a block the consumer
//! finished is kept by its thread (up to 32 KiB of blocks of each size) for
//! the next block installed there. A consumer further behind than that
//! costs one allocation per block (14 pushes) at most.

use std::alloc::{GlobalAlloc, Layout, System};

/// Items per full block of the queue (positions per lap minus the install
/// position and the sentinel). The first blocks hold fewer; the steady
/// states measured by `measure` reach full blocks.
const BLOCK: usize = 14;
use std::cell::Cell;

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator unchanged; the counter is a
// thread-local `Cell` with a const initialiser, which never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: same contract as ours.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations() -> usize {
    ALLOCATIONS.with(Cell::get)
}

/// Pushes `burst` items and drains them, `rounds` times; returns the
/// allocations made during the measured rounds, after warming up.
fn measure(burst: usize, rounds: usize) -> usize {
    let (tx, mut rx) = mpsc::queue::<[u64; 4]>();
    let mut batch = Vec::with_capacity(burst);
    let mut round = |batch: &mut Vec<[u64; 4]>| {
        for i in 0..burst {
            tx.push([i as u64; 4]).unwrap();
        }
        batch.clear();
        assert_eq!(rx.drain_into(batch), burst);
    };
    // Warm up across a few block boundaries so the thread's spares fill.
    for _ in 0..=(3 * BLOCK / burst).max(3) {
        round(&mut batch);
    }
    let before = allocations();
    for _ in 0..rounds {
        round(&mut batch);
    }
    allocations() - before
}

#[test]
fn steady_state_allocates_nothing() {
    let rounds = if cfg!(miri) { 4 } else { 10_000 };
    // A typical step: a handful of events.
    assert_eq!(measure(8, rounds), 0);
    // A burst of two blocks' worth: from any starting offset it spans the
    // block in use plus at most two more, which the thread's spares hold
    // (the blocks the last round finished).
    assert_eq!(measure(2 * BLOCK, rounds), 0);
    // Ten blocks' worth: 576-byte blocks of these 32-byte items, and a
    // thread keeps 14 of them.
    assert_eq!(measure(10 * BLOCK, rounds.min(1_000)), 0);
    // A new queue allocates its shared part only; the first push allocates
    // the first block.
    let before = allocations();
    let mut rx = mpsc::Consumer::<u64>::new();
    assert_eq!(allocations() - before, 1, "a new queue owns no block");
    let mut batch = Vec::with_capacity(16);
    let before = allocations();
    rx.producer().push(0).unwrap();
    assert_eq!(
        allocations() - before,
        1,
        "the first push allocates a block"
    );
    rx.drain_into(&mut batch);
    assert!(rx.reset().is_empty());
    // Reuse across processes: reset keeps the block, a new producer is one
    // `Arc` clone (no allocation).
    let before = allocations();
    for round in 0..rounds as u64 {
        let tx = rx.producer();
        tx.push(round).unwrap();
        batch.clear();
        rx.drain_into(&mut batch);
        assert!(rx.reset().is_empty());
    }
    assert_eq!(allocations() - before, 0);
    // A queue drained after every push keeps its first block for good: the
    // consumer reopens the drained block and the next push lands in it.
    let (tx, mut rx) = mpsc::queue::<u64>();
    let before = allocations();
    for round in 0..rounds as u64 {
        tx.push(round).unwrap();
        batch.clear();
        assert_eq!(rx.drain_into(&mut batch), 1);
    }
    assert_eq!(
        allocations() - before,
        1,
        "one block, the first, for {rounds} pushes drained one by one"
    );
    // A consumer that falls further behind: bounded, amortised allocation.
    let per_round = measure(BLOCK * 40, rounds.min(100));
    assert!(
        per_round <= 40 * rounds.min(100),
        "{per_round} allocations for {} rounds",
        rounds.min(100)
    );
}
