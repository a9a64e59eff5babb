use std::sync::atomic::Ordering::Relaxed;

use super::*;
use crate::steal::Steal;

/// A deque whose counters start just below `u32::MAX`, so that the
/// positions wrap within a few operations.
fn near_wrap(capacity: usize) -> Worker<usize> {
    let w = Worker::with_capacity(capacity);
    let start = u32::MAX - 3;
    w.inner.push_count.store(start, Relaxed);
    w.inner.pop_and_claimed.store(pack(0, start), Relaxed);
    w.inner.head.store(start, Relaxed);
    w.push_count.set(start);
    w.head_bound.set(start);
    w
}

#[test]
fn positions_wrap_around_u32() {
    let w = near_wrap(4);
    let s = w.stealer();
    for i in 0..10 {
        w.push(i);
    }
    assert_eq!(w.len(), 10);
    assert_eq!(s.steal(), Steal::Success(0));
    let thief = Worker::new();
    assert_eq!(s.steal_half_into(&thief), Steal::Success(1));
    assert_eq!(thief.len(), 4);
    assert_eq!(w.pop(), Some(9));
    let rest: Vec<_> = std::iter::from_fn(|| w.pop()).collect();
    assert_eq!(rest, [8, 7, 6]);
    assert!(w.is_empty());
    assert_eq!(s.steal(), Steal::Empty);
}
