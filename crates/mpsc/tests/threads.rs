//! Multi-threaded scenarios on real threads: contention at block boundaries,
//! resets racing stale producers, and dropping the consumer while producers
//! push. Scaled down under miri.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;

use mpsc::{queue, Consumer};

const PRODUCERS: usize = 3;

fn per_producer() -> usize {
    if cfg!(miri) {
        40
    } else {
        20_000
    }
}

#[test]
fn contended_pushes_arrive_once_in_producer_order() {
    let (tx, mut rx) = queue::<(usize, usize)>();
    let n = per_producer();
    let handles: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            let tx = tx.clone();
            thread::spawn(move || (0..n).for_each(|i| tx.push((p, i)).unwrap()))
        })
        .collect();
    let mut next = [0usize; PRODUCERS];
    let mut batch = Vec::with_capacity(256);
    let mut seen = 0;
    while seen < PRODUCERS * n {
        batch.clear();
        seen += rx.drain_into(&mut batch);
        for &(p, i) in &batch {
            assert_eq!(i, next[p], "producer {p} out of order");
            next[p] += 1;
        }
        thread::yield_now();
    }
    for h in handles {
        h.join().unwrap();
    }
    assert!(rx.is_empty());
    assert_eq!(next, [n; PRODUCERS]);
}

#[test]
fn resets_never_let_a_stale_producer_deliver() {
    let rounds = if cfg!(miri) { 3 } else { 200 };
    let mut rx = Consumer::<(u64, usize)>::new();
    for _ in 0..rounds {
        let generation = rx.generation();
        let stop = Arc::new(AtomicBool::new(false));
        let tx = rx.producer();
        let flag = stop.clone();
        // Pushes items tagged with its generation until it is refused.
        let h = thread::spawn(move || {
            let mut sent = 0;
            while !flag.load(Ordering::Relaxed) {
                match tx.push((generation, sent)) {
                    Ok(()) => sent += 1,
                    Err(e) => {
                        assert!(e.is_stale() || e.is_closed());
                        return (sent, Some(e.into_inner()));
                    }
                }
                if cfg!(miri) && sent == 10 {
                    thread::yield_now();
                }
            }
            (sent, None)
        });
        let mut seen = Vec::new();
        for _ in 0..3 {
            rx.drain_into(&mut seen);
            thread::yield_now();
        }
        seen.extend(rx.reset());
        stop.store(true, Ordering::Relaxed);
        let (sent, refused) = h.join().unwrap();
        // Everything the producer sent before the reset came out, in order.
        assert_eq!(seen.len(), sent);
        assert!(seen
            .iter()
            .enumerate()
            .all(|(i, &(g, s))| g == generation && s == i));
        if let Some(item) = refused {
            assert_eq!(item, (generation, sent));
        }
        // The stale producer never delivered into the new generation.
        let mut after = Vec::new();
        assert_eq!(rx.drain_into(&mut after), 0);
    }
}

#[test]
fn dropping_the_consumer_while_producers_push() {
    let (tx, rx) = queue::<Box<usize>>();
    let n = per_producer();
    let handles: Vec<_> = (0..2)
        .map(|_| {
            let tx = tx.clone();
            thread::spawn(move || {
                let mut refused = 0;
                for i in 0..n {
                    if let Err(e) = tx.push(Box::new(i)) {
                        assert!(e.is_closed());
                        refused += 1;
                    }
                }
                refused
            })
        })
        .collect();
    thread::yield_now();
    drop(rx);
    for h in handles {
        h.join().unwrap();
    }
    assert!(tx.is_closed());
}
