//! The small first block and the crossing into larger ones: pushes, close,
//! reset and drop on both sides of the boundaries.
use super::*;

/// Item counts around the block boundaries: inside the first block, filling
/// it, one past it, around the end of the first full block, and many.
fn counts() -> Vec<usize> {
    let mut counts = vec![1, FIRST_CAP.max(2) - 1, FIRST_CAP, FIRST_CAP + 1];
    let first_full_end = FIRST_CAP + BLOCK_CAP;
    counts.extend([first_full_end - 1, first_full_end, first_full_end + 1]);
    counts.extend([1, 3, 4, 18, 100]);
    counts.sort_unstable();
    counts.dedup();
    counts
}

/// The first offset the consumer's block serves (the first block's, while
/// it holds none).
fn held_first_offset<T>(rx: &Consumer<T>) -> u64 {
    if block(rx).is_null() {
        return FIRST_OFFSET;
    }
    // SAFETY: the consumer's block is live while the test holds `rx`.
    unsafe { Block::first_offset(block(rx)) as u64 }
}

#[test]
fn the_first_block_is_small_and_the_next_full() {
    let (tx, mut rx) = queue();
    tx.push(0).unwrap();
    let first = rx.queue.shared.first.load(Ordering::SeqCst);
    assert_eq!(cap_of(first), FIRST_CAP, "the consumer has not finished it");
    // SAFETY: as above.
    assert_eq!(unsafe { Block::first_offset(first) }, FIRST_OFFSET as usize);
    // Pushed all at once, with the consumer behind: the first block's
    // lap, then full ones.
    let caps = block_caps();
    let n: usize = caps.iter().sum::<usize>() + 1;
    for i in 1..n {
        tx.push(i).unwrap();
    }
    let mut seen = Vec::new();
    let mut out = Vec::new();
    for _ in 0..n {
        assert!(take_one(&mut rx, &mut out));
        let cap = cap_of(block(&rx));
        if seen.last() != Some(&cap) {
            seen.push(cap);
        }
    }
    assert_eq!(out, (0..n).collect::<Vec<_>>());
    assert_eq!(seen, caps, "a small first block, then full ones");
    assert_eq!(caps[caps.len() - 1], BLOCK_CAP);
}

#[test]
fn pushes_cross_the_boundary_in_order() {
    for n in counts() {
        // All at once.
        let (tx, mut rx) = queue();
        for i in 0..n {
            tx.push(i).unwrap();
        }
        let mut out = Vec::new();
        assert_eq!(rx.drain_into(&mut out), n, "{n} items");
        assert_eq!(out, (0..n).collect::<Vec<_>>());
        assert!(rx.is_empty());
        // Draining after every push, and after every other push.
        for every in [1, 2] {
            let (tx, mut rx) = queue();
            let mut out = Vec::new();
            for i in 0..n {
                tx.push(i).unwrap();
                if i % every == 0 {
                    rx.drain_into(&mut out);
                }
            }
            rx.drain_into(&mut out);
            assert_eq!(out, (0..n).collect::<Vec<_>>(), "{n} items");
        }
    }
}

#[test]
fn close_around_the_boundary_returns_everything_pending() {
    for n in counts() {
        for drained in [0, 1, FIRST_CAP, n] {
            let drained = drained.min(n);
            let (tx, mut rx) = queue();
            let mut out = Vec::new();
            // Drain exactly `drained` items: push the rest only afterwards.
            for i in 0..drained {
                tx.push(i).unwrap();
            }
            rx.drain_into(&mut out);
            assert_eq!(out, (0..drained).collect::<Vec<_>>());
            for i in drained..n {
                tx.push(i).unwrap();
            }
            assert_eq!(
                rx.close(),
                (drained..n).collect::<Vec<_>>(),
                "{n}, {drained}"
            );
            assert!(tx.push(0).unwrap_err().is_closed());
            assert!(rx.is_empty());
            assert!(rx.close().is_empty());
        }
    }
}

#[test]
fn reset_around_the_boundary_reopens_in_the_block_it_holds() {
    for n in counts() {
        for later in [1, FIRST_CAP, FIRST_CAP + 1, BLOCK_CAP + 3] {
            let (old, mut rx) = queue();
            let mut out = Vec::new();
            for i in 0..n {
                old.push(i).unwrap();
                if i == 0 {
                    rx.drain_into(&mut out);
                }
            }
            out.extend(rx.reset());
            assert_eq!(out, (0..n).collect::<Vec<_>>(), "{n} items");
            // The new use starts on the first offset the block serves:
            // the short lap's in a small block, 0 in a full one.
            assert_eq!(head(&rx) % LAP, held_first_offset(&rx), "{n} items");
            assert!(old.push(0).unwrap_err().is_stale());
            // Use it again, across the boundary once more, twice.
            for round in 0..2 {
                let tx = rx.producer();
                for i in 0..later {
                    tx.push(i).unwrap();
                }
                out.clear();
                assert_eq!(rx.drain_into(&mut out), later, "{n}, {later}");
                assert_eq!(out, (0..later).collect::<Vec<_>>());
                if round == 0 {
                    assert!(rx.reset().is_empty());
                } else {
                    tx.push(later).unwrap();
                    assert_eq!(rx.reset(), [later]);
                }
            }
        }
    }
}

#[test]
fn drop_frees_items_in_the_small_block_and_in_full_ones() {
    let counter = || StdArc::new(StdCounter::new(0));
    let dropped = |c: &StdArc<StdCounter>| c.load(std::sync::atomic::Ordering::SeqCst);
    // (pushed, drained first): items only in the small block; in the small
    // block and a full one; only in full ones after the small block was
    // drained and freed.
    let cases = [
        (1, 0),
        (FIRST_CAP, 0),
        (FIRST_CAP + 2, 0),
        (FIRST_CAP + BLOCK_CAP + 2, 1),
        (FIRST_CAP + 4, FIRST_CAP),
        (FIRST_CAP + 2 * BLOCK_CAP, FIRST_CAP + 1),
    ];
    for (pushed, drained) in cases {
        // A consumer and a producer that outlives it.
        let drops = counter();
        let (tx, mut rx) = queue();
        let mut out = Vec::new();
        for i in 0..pushed {
            tx.push(Tracked(drops.clone())).unwrap();
            if i + 1 == drained {
                rx.drain_into(&mut out);
            }
        }
        assert_eq!(out.len(), drained);
        drop(out);
        drop(rx);
        assert_eq!(dropped(&drops), pushed, "({pushed}, {drained})");
        drop(tx);
        // The embedded queue.
        let drops = counter();
        let q = Queue::new();
        let mut out = Vec::new();
        for i in 0..pushed {
            q.push(Tracked(drops.clone())).unwrap();
            if i + 1 == drained {
                // SAFETY: this thread is the only consumer.
                unsafe { q.drain_into(&mut out) };
            }
        }
        drop(out);
        drop(q);
        assert_eq!(dropped(&drops), pushed, "embedded ({pushed}, {drained})");
    }
}
