//! Sequential and concurrent behaviour of the deque, including the
//! conformance checklist of the original implementation's deque tests.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;

use deque::{Steal, Worker, MAX_STEAL_BATCH};

/// Scales iteration counts down under miri, which is ~1000x slower.
fn scaled(n: usize) -> usize {
    if cfg!(miri) {
        (n / 100).max(8)
    } else {
        n
    }
}

fn steal_retrying<T>(s: &deque::Stealer<T>) -> Option<T> {
    loop {
        match s.steal() {
            Steal::Success(x) => return Some(x),
            Steal::Empty => return None,
            Steal::Retry => std::hint::spin_loop(),
        }
    }
}

#[test]
fn capacity_rounds_up_to_a_power_of_two() {
    for (asked, got) in [(0, 1), (1, 1), (2, 2), (3, 4), (5, 8), (16, 16), (17, 32)] {
        assert_eq!(
            Worker::<u8>::with_capacity(asked).capacity(),
            got,
            "asked {asked}"
        );
    }
}

#[test]
#[should_panic(expected = "more than the maximum")]
fn capacity_above_the_maximum_is_refused() {
    let _ = Worker::<u8>::with_capacity((1 << 30) + 1);
}

#[test]
fn owner_pops_lifo() {
    let w = Worker::new();
    for i in 0..5 {
        w.push(i);
    }
    let popped: Vec<_> = (0..5).map(|_| w.pop().unwrap()).collect();
    assert_eq!(popped, [4, 3, 2, 1, 0]);
    assert_eq!(w.len(), 0);
    assert_eq!(w.pop(), None);
}

#[test]
fn stealers_take_fifo() {
    let w = Worker::new();
    for i in 0..5 {
        w.push(i);
    }
    let s = w.stealer();
    assert_eq!(s.steal(), Steal::Success(0));
    assert_eq!(s.steal(), Steal::Success(1));
    assert_eq!(w.len(), 3);
    assert_eq!(s.len(), 3);
}

#[test]
fn steal_half_takes_the_oldest_half_in_order() {
    let w = Worker::with_capacity(16);
    for i in 0..8 {
        w.push(i);
    }
    let thief = Worker::new();
    assert_eq!(w.stealer().steal_half_into(&thief), Steal::Success(0));
    // Items 1, 2, 3 went to the thief, oldest first: it pops them LIFO.
    assert_eq!(thief.len(), 3);
    let thief_items: Vec<_> = std::iter::from_fn(|| thief.stealer().steal().success()).collect();
    assert_eq!(thief_items, [1, 2, 3]);
    assert_eq!(w.len(), 4);
    let rest: Vec<_> = std::iter::from_fn(|| w.pop()).collect();
    assert_eq!(rest, [7, 6, 5, 4]);
}

#[test]
fn steal_half_rounds_up_and_takes_a_single_item() {
    let w = Worker::new();
    w.push(1);
    let thief = Worker::new();
    assert_eq!(w.stealer().steal_half_into(&thief), Steal::Success(1));
    assert!(thief.is_empty());
    assert_eq!(w.stealer().steal_half_into(&thief), Steal::Empty);

    for i in 0..3 {
        w.push(i);
    }
    // ceil(3 / 2) = 2: one returned, one moved.
    assert_eq!(w.stealer().steal_half_into(&thief), Steal::Success(0));
    assert_eq!(thief.pop(), Some(1));
    assert_eq!(w.pop(), Some(2));
}

#[test]
fn steal_half_takes_at_most_the_batch_limit() {
    let w = Worker::new();
    for i in 0..1000 {
        w.push(i);
    }
    let thief = Worker::with_capacity(1024);
    assert_eq!(w.stealer().steal_half_into(&thief), Steal::Success(0));
    assert_eq!(thief.len(), MAX_STEAL_BATCH - 1);
    assert_eq!(w.len(), 1000 - MAX_STEAL_BATCH);
}

#[test]
fn steal_half_never_grows_the_destination() {
    let w = Worker::new();
    for i in 0..20 {
        w.push(i);
    }
    let thief = Worker::with_capacity(4);
    thief.push(100);
    thief.push(101);
    // Room for 2 more in the thief, plus the one returned.
    assert_eq!(w.stealer().steal_half_into(&thief), Steal::Success(0));
    assert_eq!(thief.capacity(), 4);
    assert_eq!(thief.len(), 4);
    assert_eq!(w.len(), 17);
}

#[test]
fn steal_half_into_the_same_deque_steals_one() {
    let w = Worker::new();
    for i in 0..4 {
        w.push(i);
    }
    assert_eq!(w.stealer().steal_half_into(&w), Steal::Success(0));
    assert_eq!(w.len(), 3);
}

#[test]
fn growth_keeps_order() {
    let w = Worker::with_capacity(4);
    for i in 0..20 {
        w.push(i);
    }
    assert_eq!(w.len(), 20);
    assert!(w.capacity() >= 20);
    let popped: Vec<_> = std::iter::from_fn(|| w.pop()).collect();
    assert_eq!(popped, (0..20).rev().collect::<Vec<_>>());
}

#[test]
fn growth_after_steals_keeps_fifo_for_stealers() {
    let w = Worker::with_capacity(2);
    let s = w.stealer();
    let mut expected = std::collections::VecDeque::new();
    for i in 0..100 {
        w.push(i);
        expected.push_back(i);
        if i % 3 == 0 {
            assert_eq!(s.steal().success(), expected.pop_front());
        }
    }
    let stolen: Vec<_> = std::iter::from_fn(|| s.steal().success()).collect();
    assert_eq!(stolen, Vec::from(expected));
}

#[test]
fn mixed_pop_and_steal() {
    let w = Worker::new();
    for i in 1..=3 {
        w.push(i);
    }
    assert_eq!(w.pop(), Some(3));
    assert_eq!(w.stealer().steal(), Steal::Success(1));
    w.push(4);
    w.push(5);
    assert_eq!(w.len(), 3);
}

#[test]
fn a_small_ring_reused_many_times_keeps_order() {
    let w = Worker::with_capacity(4);
    let s = w.stealer();
    for round in 0..scaled(10_000) {
        w.push(round);
        w.push(round + 1);
        assert_eq!(s.steal(), Steal::Success(round));
        assert_eq!(w.pop(), Some(round + 1));
    }
    assert!(w.is_empty());
}

/// Counts drops so tests can check that every item is dropped exactly once.
#[derive(Debug)]
struct DropCounter(Arc<AtomicUsize>);

impl Drop for DropCounter {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

#[test]
fn items_left_behind_are_dropped_exactly_once() {
    let drops = Arc::new(AtomicUsize::new(0));
    let w = Worker::with_capacity(2);
    let s = w.stealer();
    for _ in 0..10 {
        w.push(DropCounter(drops.clone()));
    }
    drop(w.pop());
    drop(s.steal());
    assert_eq!(drops.load(Ordering::Relaxed), 2);
    drop(w);
    assert_eq!(
        drops.load(Ordering::Relaxed),
        2,
        "the stealer keeps the deque alive"
    );
    drop(s);
    assert_eq!(drops.load(Ordering::Relaxed), 10);
}

#[test]
fn concurrent_thieves_take_everything_exactly_once() {
    let n = scaled(1000);
    let w = Worker::new();
    for i in 0..n {
        w.push(i);
    }
    let handles: Vec<_> = (0..4)
        .map(|t| {
            let s = w.stealer();
            thread::spawn(move || {
                let mine = Worker::new();
                let mut got = Vec::new();
                loop {
                    let r = if t % 2 == 0 {
                        s.steal()
                    } else {
                        s.steal_half_into(&mine)
                    };
                    match r {
                        Steal::Success(x) => got.push(x),
                        Steal::Retry => continue,
                        Steal::Empty => break,
                    }
                    while let Some(x) = mine.pop() {
                        got.push(x);
                    }
                }
                got
            })
        })
        .collect();
    let mut all: Vec<_> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    all.sort_unstable();
    assert_eq!(all, (0..n).collect::<Vec<_>>());
}

#[test]
fn owner_and_thieves_conserve_items() {
    let n = scaled(10_000);
    let w = Worker::with_capacity(4);
    let start = Arc::new(Barrier::new(4));
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let thieves: Vec<_> = (0..3)
        .map(|t| {
            let s = w.stealer();
            let start = start.clone();
            let done = done.clone();
            thread::spawn(move || {
                let mine = Worker::new();
                let mut got = Vec::new();
                start.wait();
                loop {
                    let finished = done.load(Ordering::Acquire);
                    let r = if t == 0 {
                        s.steal()
                    } else {
                        s.steal_half_into(&mine)
                    };
                    match r {
                        Steal::Success(x) => got.push(x),
                        Steal::Retry => {}
                        Steal::Empty if finished => break,
                        Steal::Empty => thread::yield_now(),
                    }
                    while let Some(x) = mine.pop() {
                        got.push(x);
                    }
                }
                got
            })
        })
        .collect();
    start.wait();
    let mut taken = Vec::new();
    for i in 0..n {
        w.push(i);
        if i % 3 == 0 {
            taken.extend(w.pop());
        }
    }
    done.store(true, Ordering::Release);
    for h in thieves {
        taken.extend(h.join().unwrap());
    }
    taken.extend(std::iter::from_fn(|| w.pop()));
    taken.sort_unstable();
    assert_eq!(taken, (0..n).collect::<Vec<_>>());
}

#[test]
fn concurrent_steals_drop_nothing_twice() {
    let n = scaled(2000);
    let drops = Arc::new(AtomicUsize::new(0));
    let w = Worker::with_capacity(2);
    for _ in 0..n {
        w.push(DropCounter(drops.clone()));
    }
    let s = w.stealer();
    let thief = thread::spawn(move || {
        let mine = Worker::new();
        let mut got = 0;
        for _ in 0..n / 4 {
            if let Steal::Success(x) = s.steal_half_into(&mine) {
                drop(x);
                got += 1;
            }
            while mine.pop().is_some() {
                got += 1;
            }
        }
        got
    });
    let mut popped = 0;
    for _ in 0..n / 4 {
        if w.pop().is_some() {
            popped += 1;
        }
    }
    let stolen = thief.join().unwrap();
    assert_eq!(drops.load(Ordering::Relaxed), popped + stolen);
    drop(w);
    assert_eq!(drops.load(Ordering::Relaxed), n);
}

#[test]
fn works_with_zero_sized_and_boxed_items() {
    let w = Worker::with_capacity(1);
    for _ in 0..10 {
        w.push(());
    }
    assert_eq!(w.len(), 10);
    assert_eq!(steal_retrying(&w.stealer()), Some(()));

    let b = Worker::new();
    b.push(Box::new(String::from("heap")));
    assert_eq!(b.pop().as_deref().map(String::as_str), Some("heap"));
}

#[test]
fn len_is_never_absurd_under_concurrency() {
    let w = Worker::with_capacity(2);
    let s = w.stealer();
    let observer = {
        let s = s.clone();
        thread::spawn(move || {
            for _ in 0..scaled(5000) {
                assert!(s.len() <= 100_000, "len {} is absurd", s.len());
            }
        })
    };
    for i in 0..scaled(5000) {
        w.push(i);
        if i % 2 == 0 {
            let _ = s.steal();
        } else {
            w.pop();
        }
    }
    observer.join().unwrap();
}
