//! Unit tests at the level boundaries, keys and slot reuse, and a property
//! test against a `BTreeMap` model.

use std::collections::{BTreeSet, HashSet};

use proptest::prelude::*;

use super::*;

/// Polls at `now` and returns what fired.
fn poll(wheel: &mut Wheel<u64>, now: u64) -> Vec<u64> {
    let mut out = Vec::new();
    wheel.poll(now, &mut |_, _, value| out.push(value));
    out
}

/// The slab index a key names.
fn index(key: Key) -> u64 {
    key.to_bits() & u64::from(u32::MAX)
}

#[test]
fn an_entry_stays_small() {
    // deadline (or free link), generation, list and the `Option` tag: 16
    // bytes next to a 56-byte value.
    assert!(mem::size_of::<Entry<[u8; 56]>>() <= 72);
    // A list's reference to it is one word.
    assert_eq!(mem::size_of::<Ref>(), 8);
}

/// References held by all the lists, stale ones included.
fn refs_held(wheel: &Wheel<u64>) -> usize {
    wheel.lists.iter().map(|l| l.refs.len()).sum()
}

#[test]
fn removing_leaves_stale_references_that_never_outgrow_the_live_ones() {
    let mut wheel = Wheel::new();
    // One long-lived timer in slot 40, and many set and removed beside it:
    // each removal leaves a stale reference, until the list is compacted.
    wheel.insert(40, 0);
    let rounds = if cfg!(miri) { 200 } else { 10_000 };
    for i in 1..rounds {
        let key = wheel.insert(40, i);
        assert_eq!(wheel.remove(key), Some(i));
        assert!(
            refs_held(&wheel) <= 2 + STALE_SLACK + 1,
            "{} references for one live timer",
            refs_held(&wheel)
        );
    }
    // A removed entry's slab slot is reused by the next timer, in the same
    // list as its stale reference: each fires once.
    let a = wheel.insert(40, 100);
    assert_eq!(wheel.remove(a), Some(100));
    let b = wheel.insert(40, 101);
    assert_eq!(index(a), index(b));
    assert_eq!(poll(&mut wheel, 40), [0, 101]);
    assert!(wheel.is_empty());
    assert_eq!(refs_held(&wheel), 0);
}

#[test]
fn a_list_whose_last_live_entry_leaves_is_cleared_and_unmarked() {
    let mut wheel = Wheel::new();
    let keys: Vec<Key> = (0..5).map(|i| wheel.insert(200, i)).collect();
    let early = wheel.insert(100, 9);
    for key in keys {
        wheel.remove(key);
    }
    assert_eq!(refs_held(&wheel), 1, "only the live timer's reference");
    wheel.remove(early);
    assert_eq!(wheel.next_deadline(), None, "no slot is marked occupied");
    assert_eq!(poll(&mut wheel, 1_000), []);
}

#[test]
fn fires_exactly_at_level_boundaries() {
    let deadlines = [
        1,
        63,
        64,
        65,
        4095,
        4096,
        4097,
        64u64.pow(3),
        64u64.pow(5) - 1,
        RANGE - 1,
        RANGE,
        RANGE + 1,
        3 * RANGE + 7,
        u64::MAX,
    ];
    for start in [0, 1, 63, 100, 4095] {
        for &offset in &deadlines {
            let mut wheel = Wheel::new();
            poll(&mut wheel, start);
            let deadline = start.saturating_add(offset);
            wheel.insert(deadline, deadline);
            let next = wheel.next_deadline().unwrap();
            assert!(next <= deadline, "{start} + {offset}: next {next}");
            assert!(next > start, "{start} + {offset}: next {next}");
            assert_eq!(poll(&mut wheel, deadline - 1), [], "{start} + {offset}");
            assert_eq!(wheel.elapsed(), deadline - 1);
            assert_eq!(wheel.next_deadline(), Some(deadline), "level 0 is exact");
            assert_eq!(poll(&mut wheel, deadline), [deadline]);
            assert!(wheel.is_empty());
            assert_eq!(wheel.next_deadline(), None);
        }
    }
}

#[test]
fn ticking_one_by_one_fires_each_timer_at_its_tick() {
    let mut wheel = Wheel::new();
    let deadlines = [1, 2, 63, 64, 65, 127, 128, 4095, 4096, 4097, 5000, 8191];
    for &d in deadlines.iter().rev() {
        wheel.insert(d, d);
    }
    let mut fired = Vec::new();
    for now in 1..=8200 {
        let next = wheel.next_deadline();
        let out = poll(&mut wheel, now);
        if let Some(&d) = out.first() {
            assert!(next.unwrap() <= d, "a late next_deadline at {now}");
        }
        for d in out {
            assert_eq!(d, now);
            fired.push(d);
        }
    }
    assert_eq!(fired, deadlines);
}

#[test]
fn polling_in_steps_crosses_the_top_level_turn() {
    // Steps below the wheel's span take the incremental path, so a clamped
    // deadline is re-placed as its top-level slot comes round.
    let mut wheel = Wheel::new();
    let far = 2 * RANGE + 3 * (1 << 30) + 7;
    wheel.insert(far, far);
    wheel.insert(RANGE + 5, RANGE + 5);
    let step = 1 << 33;
    let mut now = 0;
    let mut fired = Vec::new();
    while now < far {
        let next = wheel.next_deadline().unwrap();
        assert!(next <= RANGE + 5 || fired.len() == 1 && next <= far);
        let before = now;
        now = (now + step).min(far);
        for d in poll(&mut wheel, now) {
            assert!(d <= now && d > before, "{d} fired at {now}");
            fired.push(d);
        }
    }
    assert_eq!(fired, [RANGE + 5, far]);
}

#[test]
fn equal_deadlines_fire_in_insertion_order() {
    let mut wheel = Wheel::new();
    // The first two start in level 1 and cascade; the others go straight to
    // level 0 once elapsed is in the same block.
    wheel.insert(130, 1);
    wheel.insert(130, 2);
    assert_eq!(poll(&mut wheel, 129), []);
    wheel.insert(130, 3);
    wheel.insert(129, 0);
    assert_eq!(poll(&mut wheel, 130), [0, 1, 2, 3]);
}

#[test]
fn remove_pending_fired_and_stale_keys() {
    let mut wheel = Wheel::new();
    let a = wheel.insert(10, 1);
    let b = wheel.insert(5000, 2);
    let c = wheel.insert(20, 3);
    assert_eq!(wheel.len(), 3);
    assert_eq!(wheel.remove(a), Some(1));
    assert_eq!(wheel.remove(a), None, "removed twice");
    assert_eq!(wheel.remove(Key::from_bits(b.to_bits())), Some(2));
    assert_eq!(poll(&mut wheel, 10_000), [3]);
    assert_eq!(wheel.remove(c), None, "already fired");
    assert_eq!(wheel.remove(Key::from_bits(u64::from(u32::MAX - 1))), None);
    assert!(wheel.is_empty());
}

#[test]
fn remove_keeps_the_rest_of_a_slot() {
    let mut wheel = Wheel::new();
    let keys: Vec<Key> = (0..5).map(|i| wheel.insert(40, i)).collect();
    // Head, middle, tail.
    assert_eq!(wheel.remove(keys[0]), Some(0));
    assert_eq!(wheel.remove(keys[2]), Some(2));
    assert_eq!(wheel.remove(keys[4]), Some(4));
    assert_eq!(poll(&mut wheel, 40), [1, 3]);
}

#[test]
fn a_freed_slot_is_reused_with_a_new_generation() {
    let mut wheel = Wheel::new();
    let a = wheel.insert(100, 1);
    assert_eq!(wheel.remove(a), Some(1));
    let b = wheel.insert(100, 2);
    assert_eq!(index(b), index(a), "the slot is reused at once");
    assert_ne!(b, a);
    assert_eq!(
        wheel.remove(a),
        None,
        "a stale key does not reach the new timer"
    );
    assert_eq!(wheel.get_mut(a), None);
    *wheel.get_mut(b).unwrap() = 3;
    assert_eq!(poll(&mut wheel, 100), [3]);
    // A fired timer's slot is reused too.
    let c = wheel.insert(200, 4);
    assert_eq!(index(c), index(a));
    assert_eq!(wheel.remove(b), None);
    assert_eq!(wheel.remove(c), Some(4));
}

#[test]
fn next_deadline_is_a_lower_bound_and_exact_in_level_0() {
    let mut wheel = Wheel::new();
    assert_eq!(wheel.next_deadline(), None);
    let late = wheel.insert(100_000, 1);
    assert!(wheel.next_deadline().unwrap() <= 100_000);
    wheel.insert(70, 2);
    // 70 is in level 1: the answer is its slot's start.
    assert_eq!(wheel.next_deadline(), Some(64));
    wheel.insert(50, 3);
    assert_eq!(wheel.next_deadline(), Some(50), "level 0 is exact");
    assert_eq!(poll(&mut wheel, 64), [3]);
    assert_eq!(wheel.next_deadline(), Some(70), "exact after the cascade");
    assert_eq!(poll(&mut wheel, 70), [2]);
    assert!(wheel.next_deadline().unwrap() <= 100_000);
    assert_eq!(wheel.remove(late), Some(1));
    assert_eq!(wheel.next_deadline(), None);
}

#[test]
fn overdue_inserts_fire_at_the_next_poll_in_deadline_order() {
    let mut wheel = Wheel::new();
    poll(&mut wheel, 100);
    wheel.insert(101, 101);
    wheel.insert(50, 50);
    let removed = wheel.insert(20, 20);
    wheel.insert(100, 100);
    wheel.insert(30, 30);
    assert_eq!(wheel.next_deadline(), Some(20));
    wheel.remove(removed);
    assert!(wheel.next_deadline().unwrap() <= 30);
    // Even a poll that does not advance time fires them.
    assert_eq!(poll(&mut wheel, 100), [30, 50, 100]);
    assert_eq!(wheel.next_deadline(), Some(101));
    assert_eq!(poll(&mut wheel, 101), [101]);
}

#[test]
fn polling_backwards_changes_nothing() {
    let mut wheel = Wheel::new();
    poll(&mut wheel, 1000);
    wheel.insert(1500, 1);
    assert_eq!(poll(&mut wheel, 10), []);
    assert_eq!(wheel.elapsed(), 1000);
    assert_eq!(wheel.len(), 1);
    assert_eq!(poll(&mut wheel, 1500), [1]);
}

#[test]
fn drain_returns_everything_and_stales_the_keys() {
    let mut wheel = Wheel::new();
    poll(&mut wheel, 10);
    let keys = [
        wheel.insert(5, 1),
        wheel.insert(11, 2),
        wheel.insert(5000, 3),
        wheel.insert(u64::MAX, 4),
    ];
    wheel.remove(keys[1]);
    let mut all = wheel.drain();
    all.sort_unstable();
    assert_eq!(all, [1, 3, 4]);
    assert!(wheel.is_empty());
    assert_eq!(wheel.next_deadline(), None);
    assert!(keys.iter().all(|&key| wheel.remove(key).is_none()));
    // Still usable.
    wheel.insert(20, 5);
    assert_eq!(poll(&mut wheel, 20), [5]);
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: if cfg!(miri) { 4 } else { 256 },
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Ticks from `elapsed`: from none, through each level, to huge.
fn offset() -> impl Strategy<Value = u64> {
    prop_oneof![
        1 => Just(0u64),
        4 => 0..64u64,
        4 => 0..5000u64,
        2 => 0..1u64 << 30,
        2 => 0..1u64 << 40,
        1 => any::<u64>(),
    ]
}

#[derive(Debug, Clone)]
enum Op {
    /// At `elapsed + offset`, or `elapsed - offset` if `past`.
    Insert {
        offset: u64,
        past: bool,
    },
    /// One of the keys handed out so far, live or stale.
    Remove(prop::sample::Index),
    /// At `elapsed + step`, or `elapsed - step` if `back`.
    Poll {
        step: u64,
        back: bool,
    },
    Drain,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (offset(), prop::bool::weighted(0.1))
            .prop_map(|(offset, past)| Op::Insert { offset, past }),
        3 => any::<prop::sample::Index>().prop_map(Op::Remove),
        5 => (offset(), prop::bool::weighted(0.05)).prop_map(|(step, back)| Op::Poll { step, back }),
        1 => Just(Op::Drain),
    ]
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn behaves_like_a_btreemap(ops in prop::collection::vec(op(), 0..200)) {
        let mut wheel = Wheel::new();
        // The model: (deadline, insertion number) of each pending timer,
        // whose value is its insertion number. Its order is the order in
        // which the wheel must fire them.
        let mut model = BTreeSet::<(u64, u64)>::new();
        let mut elapsed = 0u64;
        let mut keys = Vec::<(Key, (u64, u64))>::new();
        let mut seen = HashSet::<u64>::new();
        for op in ops {
            match op {
                Op::Insert { offset, past } => {
                    let deadline = if past {
                        elapsed.saturating_sub(offset)
                    } else {
                        elapsed.saturating_add(offset)
                    };
                    let n = keys.len() as u64;
                    let key = wheel.insert(deadline, n);
                    prop_assert!(seen.insert(key.to_bits()), "a key was handed out twice");
                    keys.push((key, (deadline, n)));
                    model.insert((deadline, n));
                }
                Op::Remove(pick) => {
                    if keys.is_empty() {
                        continue;
                    }
                    let (key, entry) = keys[pick.index(keys.len())];
                    let expected = model.remove(&entry).then_some(entry.1);
                    prop_assert_eq!(wheel.remove(key), expected);
                }
                Op::Poll { step, back } => {
                    let now = if back {
                        elapsed.saturating_sub(step)
                    } else {
                        elapsed.saturating_add(step)
                    };
                    let mut out = Vec::new();
                    let mut fired_keys = Vec::new();
                    wheel.poll(now, &mut |key, _, value| {
                        fired_keys.push(key);
                        out.push(value);
                    });
                    // Each fires with the key its insert handed out (the
                    // engine's timer events carry it as their id).
                    for (key, value) in fired_keys.iter().zip(&out) {
                        prop_assert_eq!(keys[*value as usize].0, *key);
                    }
                    elapsed = elapsed.max(now);
                    // Overdue inserts fire even on a backward poll, and they
                    // are all at or before `elapsed`.
                    let later = match elapsed.checked_add(1) {
                        Some(after) => model.split_off(&(after, 0)),
                        None => BTreeSet::new(),
                    };
                    let due: Vec<u64> =
                        mem::replace(&mut model, later).into_iter().map(|(_, n)| n).collect();
                    prop_assert_eq!(out, due);
                    prop_assert_eq!(wheel.elapsed(), elapsed);
                }
                Op::Drain => {
                    let mut got = wheel.drain();
                    got.sort_unstable();
                    let mut expected: Vec<u64> = model.iter().map(|&(_, n)| n).collect();
                    expected.sort_unstable();
                    prop_assert_eq!(got, expected);
                    model.clear();
                }
            }
            prop_assert_eq!(wheel.len(), model.len());
            match (wheel.next_deadline(), model.first()) {
                (None, None) => {}
                (Some(next), Some(&(first, _))) => {
                    prop_assert!(next <= first, "next_deadline {} after {}", next, first);
                    if first > elapsed && first >> SLOT_BITS == elapsed >> SLOT_BITS {
                        prop_assert_eq!(next, first, "not exact in level 0");
                    }
                }
                (got, first) => prop_assert!(false, "next_deadline {:?}, model {:?}", got, first),
            }
        }
    }
}

#[test]
#[cfg_attr(
    miri,
    ignore = "safe code only; past the shrink threshold this takes many minutes under miri"
)]
fn the_slab_shrinks_once_most_timers_have_left() {
    let mut wheel = Wheel::new();
    let n: u64 = 100_000;
    let keys: Vec<Key> = (0..n).map(|i| wheel.insert(10 + i % 500, i)).collect();
    let grown = wheel.slab.capacity();
    assert!(grown >= n as usize);
    // One long-lived timer in the lowest slot; everything else goes, in a
    // scrambled order.
    let mut order: Vec<usize> = (1..keys.len()).collect();
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    for i in (1..order.len()).rev() {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        order.swap(i, (seed % (i as u64 + 1)) as usize);
    }
    for at in order {
        assert!(wheel.remove(keys[at]).is_some());
    }
    assert_eq!(wheel.len(), 1);
    assert!(
        wheel.slab.capacity() < grown / 16,
        "the slab kept {} of {grown} slots for one timer",
        wheel.slab.capacity()
    );
    // The survivor is still found, and fires on time.
    assert_eq!(poll(&mut wheel, 10), vec![0]);
}

#[test]
#[cfg_attr(
    miri,
    ignore = "safe code only; past the shrink threshold this takes many minutes under miri"
)]
fn a_key_from_before_a_shrink_never_names_a_later_timer() {
    let mut wheel = Wheel::new();
    let n: u64 = 10_000;
    let keys: Vec<Key> = (0..n).map(|i| wheel.insert(5, i)).collect();
    for key in &keys {
        wheel.remove(*key);
    }
    // The slab was cut back; new timers reuse the same indices.
    let fresh: Vec<Key> = (0..n).map(|i| wheel.insert(5, 100_000 + i)).collect();
    for key in &keys {
        assert!(
            wheel.remove(*key).is_none(),
            "a stale key removed a new timer"
        );
        assert!(wheel.get_mut(*key).is_none());
    }
    assert_eq!(wheel.len(), fresh.len());
}

#[test]
#[cfg_attr(
    miri,
    ignore = "safe code only; past the shrink threshold this takes many minutes under miri"
)]
fn an_emptied_wheel_keeps_nothing() {
    let mut wheel = Wheel::new();
    let n: u64 = 50_000;
    let keys: Vec<Key> = (0..n).map(|i| wheel.insert(3, i)).collect();
    for key in &keys {
        wheel.remove(*key);
    }
    assert!(
        wheel.slab.capacity() <= SHRINK_FROM,
        "{}",
        wheel.slab.capacity()
    );
    // And after firing rather than cancelling.
    for i in 0..n {
        wheel.insert(4, i);
    }
    assert_eq!(poll(&mut wheel, 4).len(), n as usize);
    assert!(
        wheel.slab.capacity() <= SHRINK_FROM,
        "{}",
        wheel.slab.capacity()
    );
    // Nor do its lists keep the burst's references.
    let kept: usize = wheel.lists.iter().map(|l| l.refs.capacity()).sum();
    assert!(
        kept <= SHRINK_FROM,
        "the lists kept room for {kept} references"
    );
}
