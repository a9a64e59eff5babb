//! Property tests: sequential equivalence with a `VecDeque` model, and
//! conservation and per-producer order across threads (with and without a
//! concurrent close). Scaled down under miri.

use std::collections::VecDeque;
use std::thread;

use mpsc::{Consumer, Producer, PushError};
use proptest::prelude::*;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: if cfg!(miri) { 4 } else { 256 },
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

#[derive(Debug, Clone)]
enum Op {
    Push {
        producer: usize,
        value: u32,
    },
    Drain,
    Close,
    Reset,
    /// Replace producer `0..3` with a fresh one from the consumer.
    Refresh(usize),
    IsEmpty,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        24 => (0..3usize, any::<u32>()).prop_map(|(producer, value)| Op::Push { producer, value }),
        3 => Just(Op::Drain),
        1 => Just(Op::Close),
        1 => Just(Op::Reset),
        1 => (0..3usize).prop_map(Op::Refresh),
        1 => Just(Op::IsEmpty),
    ]
}

/// The reference: a `VecDeque`, a closed flag and generations.
struct Model {
    items: VecDeque<u32>,
    closed: bool,
    generation: u64,
    producers: [u64; 3],
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn behaves_like_a_vecdeque(ops in prop::collection::vec(op(), 0..if cfg!(miri) { 60 } else { 400 })) {
        let mut rx = Consumer::<u32>::new();
        let mut txs: Vec<Producer<u32>> = (0..3).map(|_| rx.producer()).collect();
        let mut model = Model { items: VecDeque::new(), closed: false, generation: 0, producers: [0; 3] };
        let mut buf = Vec::new();
        for op in ops {
            match op {
                Op::Push { producer, value } => {
                    let got = txs[producer].push(value);
                    if model.producers[producer] != model.generation {
                        prop_assert_eq!(got, Err(PushError::Stale(value)));
                    } else if model.closed {
                        prop_assert_eq!(got, Err(PushError::Closed(value)));
                    } else {
                        prop_assert_eq!(got, Ok(()));
                        model.items.push_back(value);
                    }
                }
                Op::Drain => {
                    buf.clear();
                    let n = rx.drain_into(&mut buf);
                    prop_assert_eq!(n, model.items.len());
                    prop_assert_eq!(&buf, &model.items.drain(..).collect::<Vec<_>>());
                }
                Op::Close => {
                    prop_assert_eq!(rx.close(), model.items.drain(..).collect::<Vec<_>>());
                    model.closed = true;
                }
                Op::Reset => {
                    prop_assert_eq!(rx.reset(), model.items.drain(..).collect::<Vec<_>>());
                    model.closed = false;
                    model.generation += 1;
                }
                Op::Refresh(p) => {
                    txs[p] = rx.producer();
                    model.producers[p] = model.generation;
                }
                Op::IsEmpty => prop_assert_eq!(rx.is_empty(), model.items.is_empty()),
            }
            prop_assert_eq!(rx.is_closed(), model.closed);
            prop_assert_eq!(rx.generation(), model.generation);
            for (tx, &generation) in txs.iter().zip(&model.producers) {
                prop_assert_eq!(tx.is_closed(), model.closed || generation != model.generation);
            }
        }
    }

    #[test]
    fn threads_conserve_items_and_per_producer_order(
        counts in prop::collection::vec(0..if cfg!(miri) { 12usize } else { 400 }, 1..=3),
        close_after in prop::option::of(0..if cfg!(miri) { 24usize } else { 800 }),
    ) {
        let mut rx = Consumer::<(usize, usize)>::new();
        let handles: Vec<_> = counts
            .iter()
            .enumerate()
            .map(|(p, &count)| {
                let tx = rx.producer();
                thread::spawn(move || {
                    let mut refused = Vec::new();
                    for seq in 0..count {
                        match tx.push((p, seq)) {
                            Ok(()) => assert!(refused.is_empty(), "a push succeeded after one failed"),
                            Err(e) => {
                                assert!(e.is_closed());
                                refused.push(e.into_inner());
                            }
                        }
                    }
                    refused
                })
            })
            .collect();
        let total: usize = counts.iter().sum();
        let mut seen = Vec::new();
        loop {
            rx.drain_into(&mut seen);
            if close_after.is_some_and(|k| seen.len() >= k) || seen.len() == total {
                break;
            }
            thread::yield_now();
        }
        if close_after.is_some() {
            seen.extend(rx.close());
        }
        let mut refused = Vec::new();
        for h in handles {
            refused.extend(h.join().unwrap());
        }
        rx.drain_into(&mut seen);
        prop_assert_eq!(seen.len() + refused.len(), total);
        for (p, &count) in counts.iter().enumerate() {
            let mut mine: Vec<usize> = seen.iter().filter(|i| i.0 == p).map(|i| i.1).collect();
            mine.extend(refused.iter().filter(|i| i.0 == p).map(|i| i.1));
            prop_assert_eq!(mine, (0..count).collect::<Vec<_>>());
        }
    }
}
