//! Property tests: the deque against a `VecDeque` model, step by step, and
//! conservation of items under concurrent owner/thief operation mixes.

use std::collections::VecDeque;
use std::thread;

use deque::{Steal, Worker, MAX_STEAL_BATCH};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Push,
    Pop,
    /// The owner takes its oldest item (`steal_own`).
    PopOldest,
    Steal,
    StealHalf,
    /// The thief pops from its own deque (filled by steal-half).
    ThiefPop,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => Just(Op::Push),
        2 => Just(Op::Pop),
        1 => Just(Op::PopOldest),
        1 => Just(Op::Steal),
        1 => Just(Op::StealHalf),
        1 => Just(Op::ThiefPop),
    ]
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: if cfg!(miri) { 4 } else { 256 },
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    /// Single-threaded, every operation matches a `VecDeque` model: the
    /// owner's end is the back, stealers take from the front.
    #[test]
    fn matches_a_vecdeque_model(
        ops in proptest::collection::vec(op(), 0..if cfg!(miri) { 40 } else { 400 }),
        initial_capacity in 1usize..8,
        thief_capacity in 1usize..8,
    ) {
        let w = Worker::with_capacity(initial_capacity);
        let s = w.stealer();
        let thief = Worker::with_capacity(thief_capacity);
        let mut model: VecDeque<u32> = VecDeque::new();
        let mut thief_model: VecDeque<u32> = VecDeque::new();
        // Items start at 1: a slot read without having been written (or
        // copied on growth) tends to hold 0, which must not pass for an item.
        let mut next = 1u32;
        for op in ops {
            match op {
                Op::Push => {
                    w.push(next);
                    model.push_back(next);
                    next += 1;
                }
                Op::Pop => prop_assert_eq!(w.pop(), model.pop_back()),
                Op::Steal => {
                    let expected = match model.pop_front() {
                        Some(x) => Steal::Success(x),
                        None => Steal::Empty,
                    };
                    prop_assert_eq!(s.steal(), expected);
                }
                Op::PopOldest => {
                    let expected = match model.pop_front() {
                        Some(x) => Steal::Success(x),
                        None => Steal::Empty,
                    };
                    prop_assert_eq!(w.steal_own(), expected);
                }
                Op::StealHalf => {
                    let room = thief.capacity() - thief.len();
                    let available = model.len();
                    let got = s.steal_half_into(&thief);
                    if available == 0 {
                        prop_assert_eq!(got, Steal::Empty);
                    } else {
                        let count = available.div_ceil(2).min(MAX_STEAL_BATCH).min(room + 1);
                        prop_assert_eq!(got, Steal::Success(model.pop_front().unwrap()));
                        for _ in 1..count {
                            thief_model.push_back(model.pop_front().unwrap());
                        }
                    }
                }
                Op::ThiefPop => prop_assert_eq!(thief.pop(), thief_model.pop_back()),
            }
            prop_assert_eq!(w.len(), model.len());
            prop_assert_eq!(s.len(), model.len());
            prop_assert_eq!(thief.len(), thief_model.len());
            prop_assert!(w.capacity() >= model.len());
        }
    }

    /// One owner and two thieves run random operation mixes at the same
    /// time; everything pushed is taken exactly once (the rest is drained at
    /// the end).
    #[test]
    fn concurrent_mixes_conserve_items(
        owner_ops in proptest::collection::vec(0u8..4, 1..if cfg!(miri) { 30 } else { 600 }),
        thief_ops in proptest::collection::vec(
            proptest::collection::vec(0u8..3, 1..if cfg!(miri) { 20 } else { 300 }),
            2,
        ),
    ) {
        let w = Worker::with_capacity(2);
        let thieves: Vec<_> = thief_ops
            .into_iter()
            .map(|ops| {
                let s = w.stealer();
                thread::spawn(move || {
                    let mine = Worker::with_capacity(2);
                    let mut got = Vec::new();
                    for op in ops {
                        match op {
                            0 => got.extend(s.steal().success()),
                            1 => got.extend(s.steal_half_into(&mine).success()),
                            _ => got.extend(mine.pop()),
                        }
                    }
                    got.extend(std::iter::from_fn(|| mine.pop()));
                    got
                })
            })
            .collect();
        let mut pushed = 0u32;
        let mut taken = Vec::new();
        for op in owner_ops {
            if op == 0 {
                taken.extend(w.pop());
            } else {
                // Items are 1..=pushed, never 0 (see the model test above).
                pushed += 1;
                w.push(pushed);
            }
        }
        for t in thieves {
            taken.extend(t.join().unwrap());
        }
        taken.extend(std::iter::from_fn(|| w.pop()));
        taken.sort_unstable();
        prop_assert_eq!(taken, (1..=pushed).collect::<Vec<_>>());
    }
}
