//! The table alone: encoding, growth across segments, reuse with
//! generations, stale lookups, the free-id caches, and the registry's two
//! sides.

use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use relay::Pid;

use super::free::BLOCK;
use super::registry::Registry;
use super::*;
use crate::sync::Arc;

/// A record as the table sees one; counts its drops.
#[derive(Debug)]
struct Entry {
    pid: Pid,
    drops: std::sync::Arc<AtomicUsize>,
}

impl Keyed for Entry {
    type Ref = crate::sync::Arc<Entry>;

    fn pid(&self) -> Pid {
        self.pid
    }
}

impl Drop for Entry {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Relaxed);
    }
}

fn entry(pid: Pid, drops: &std::sync::Arc<AtomicUsize>) -> Arc<Entry> {
    Arc::new(Entry {
        pid,
        drops: drops.clone(),
    })
}

#[test]
fn ids_encode_index_and_generation() {
    assert_eq!(encode(0, 0), 1);
    assert_eq!(encode(41, 0), 42);
    assert_eq!(encode(0, 1), (1 << 32) + 1);
    assert_eq!(decode(42), Some((41, 0)));
    assert_eq!(decode((3 << 32) + 7), Some((6, 3)));
    assert_eq!(decode(0), None, "id 0 is the outside's");
    assert_eq!(decode(1 << 32), None, "a low half of 0 is no slot");
    assert_eq!(successor(42), Some(encode(41, 1)));
    assert_eq!(successor(encode(5, GENERATIONS - 1)), None);
}

#[test]
fn first_pids_are_small_and_sequential_on_one_thread() {
    let table: ProcessTable<Entry> = ProcessTable::<Entry>::new(0);
    let pids: Vec<u64> = (0..5).map(|_| table.allocate(None).unwrap().id()).collect();
    assert_eq!(pids, [1, 2, 3, 4, 5]);
    let mut cache = IdCache::new();
    // A worker's cache takes its own fresh block.
    let first = table.allocate(Some(&mut cache)).unwrap().id();
    assert_eq!(first, BLOCK as u64 + 1);
}

#[test]
fn register_lookup_unregister_across_segments() {
    let drops = std::sync::Arc::new(AtomicUsize::new(0));
    let table = ProcessTable::<Entry>::new(3);
    let mut cache = IdCache::new();
    // Enough to fill the first three segments (64 + 128 + 256) and start
    // the fourth.
    let records: Vec<Arc<Entry>> = (0..500)
        .map(|_| {
            let pid = table.allocate(Some(&mut cache)).unwrap();
            assert_eq!(pid.node(), 3);
            let record = entry(pid, &drops);
            assert!(registered(table.register(pid, record.clone())));
            record
        })
        .collect();
    for record in &records {
        let found = table.get(record.pid).expect("registered");
        assert!(Arc::ptr_eq(&found, record));
        assert!(table.holds(record.pid));
    }
    assert_eq!(table.pids().len(), 500);
    for record in &records {
        let removed = table.unregister(record.pid, record, Some(&mut cache));
        assert!(Arc::ptr_eq(&removed.unwrap(), record));
        assert!(table.get(record.pid).is_none());
        assert!(table
            .unregister(record.pid, record, Some(&mut cache))
            .is_none());
    }
    assert!(table.pids().is_empty());
    drop(records);
    assert_eq!(drops.load(Relaxed), 500, "the table kept no count");
}

#[test]
fn a_reused_slot_has_a_new_generation_and_stale_pids_miss() {
    let drops = std::sync::Arc::new(AtomicUsize::new(0));
    let table = ProcessTable::<Entry>::new(0);
    let mut cache = IdCache::new();
    let old = table.allocate(Some(&mut cache)).unwrap();
    let old_record = entry(old, &drops);
    assert!(registered(table.register(old, old_record.clone())));
    table.unregister(old, &old_record, Some(&mut cache));
    let new = table.allocate(Some(&mut cache)).unwrap();
    assert_eq!(decode(new.id()).unwrap().0, decode(old.id()).unwrap().0);
    assert_eq!(new.id(), successor(old.id()).unwrap());
    let new_record = entry(new, &drops);
    assert!(registered(table.register(new, new_record.clone())));
    assert!(
        table.get(old).is_none(),
        "a stale PID never finds the next occupant"
    );
    assert!(!table.holds(old));
    // Registering or removing under the stale PID touches nothing.
    assert!(!registered(table.register(old, entry(old, &drops))));
    assert!(table.unregister(old, &old_record, None).is_none());
    assert!(Arc::ptr_eq(&table.get(new).unwrap(), &new_record));
}

#[test]
fn a_pid_that_ended_is_told_from_one_never_handed_out() {
    let drops = std::sync::Arc::new(AtomicUsize::new(0));
    let table = ProcessTable::<Entry>::new(0);
    let mut cache = IdCache::new();
    let first = table.allocate(Some(&mut cache)).unwrap();
    let record = entry(first, &drops);
    assert!(!table.ended(first), "reserved is not ended");
    assert!(registered(table.register(first, record.clone())));
    assert!(!table.ended(first), "live is not ended");
    table.unregister(first, &record, Some(&mut cache));
    assert!(table.ended(first), "vacant after its end");

    // The slot's next generation: reserved, then live; the first PID stays
    // ended through both, and the next one is not ended until it ends.
    let second = table.allocate(Some(&mut cache)).unwrap();
    assert_eq!(second.id(), successor(first.id()).unwrap());
    assert!(table.ended(first) && !table.ended(second));
    let record = entry(second, &drops);
    assert!(registered(table.register(second, record.clone())));
    assert!(table.ended(first) && !table.ended(second));
    // A generation the slot has not reached was never handed out.
    assert!(!table.ended(successor(second.id()).map(|id| Pid::new(0, id)).unwrap()));

    // A refused start ends its PID too.
    let refused = table.allocate(Some(&mut cache)).unwrap();
    table.cancel(refused, Some(&mut cache));
    assert!(table.ended(refused));

    // Never allocated (a fresh index, one past every segment), another
    // node, not a table id.
    let untouched = table.allocate(Some(&mut cache)).unwrap();
    for pid in [
        Pid::new(0, successor(untouched.id()).unwrap()),
        Pid::local(900),
        Pid::new(1, first.id()),
        Pid::local(u64::MAX),
        Pid::OUTSIDE,
    ] {
        assert!(!table.ended(pid), "{pid} was never handed out");
    }
}

#[test]
fn only_a_reserved_pid_registers_and_only_once() {
    let drops = std::sync::Arc::new(AtomicUsize::new(0));
    let table = ProcessTable::<Entry>::new(0);
    let pid = table.allocate(None).unwrap();
    assert!(table.get(pid).is_none(), "reserved is not registered");
    assert!(registered(table.register(pid, entry(pid, &drops))));
    assert!(!registered(table.register(pid, entry(pid, &drops))));
    // Never allocated, another node, beyond every segment.
    for pid in [Pid::local(900), Pid::new(1, pid.id()), Pid::local(u64::MAX)] {
        assert!(!registered(table.register(pid, entry(pid, &drops))));
        assert!(table.get(pid).is_none());
    }
}

#[test]
fn a_cancelled_reservation_frees_the_slot_once() {
    let drops = std::sync::Arc::new(AtomicUsize::new(0));
    let table = ProcessTable::<Entry>::new(0);
    let mut cache = IdCache::new();
    let pid = table.allocate(Some(&mut cache)).unwrap();
    table.cancel(pid, Some(&mut cache));
    table.cancel(pid, Some(&mut cache));
    assert!(!registered(table.register(pid, entry(pid, &drops))));
    let next = table.allocate(Some(&mut cache)).unwrap();
    assert_eq!(next.id(), successor(pid.id()).unwrap());
    let after = table.allocate(Some(&mut cache)).unwrap();
    assert_ne!(after, next, "the slot was given back once");
}

#[test]
fn freed_ids_spill_to_the_pool_and_reach_other_threads() {
    let table: ProcessTable<Entry> = ProcessTable::<Entry>::new(0);
    let mut worker = IdCache::new();
    let pids: Vec<Pid> = (0..2 * BLOCK)
        .map(|_| table.allocate(Some(&mut worker)).unwrap())
        .collect();
    for &pid in &pids {
        table.cancel(pid, Some(&mut worker));
    }
    // The worker kept one block and spilled one; a thread without a cache
    // gets the spilled ones before any fresh index.
    let outside = table.allocate(None).unwrap();
    assert_eq!(decode(outside.id()).unwrap().1, 1, "a recycled slot");
    let mut other = IdCache::new();
    let recycled = table.allocate(Some(&mut other)).unwrap();
    assert_eq!(decode(recycled.id()).unwrap().1, 1, "a recycled slot");
}

#[test]
fn dropping_the_table_drops_what_it_holds() {
    let drops = std::sync::Arc::new(AtomicUsize::new(0));
    let table = ProcessTable::<Entry>::new(0);
    for _ in 0..70 {
        let pid = table.allocate(None).unwrap();
        assert!(registered(table.register(pid, entry(pid, &drops))));
    }
    table.allocate(None).unwrap(); // reserved only
    drop(table);
    assert_eq!(drops.load(Relaxed), 70);
}

#[test]
fn the_registry_keeps_user_and_table_pids_apart() {
    let drops = std::sync::Arc::new(AtomicUsize::new(0));
    let registry = Registry::<Entry>::new(0);
    let allocated = registry.allocate(None).unwrap();
    // A user takes the next table PID by hand before it is allocated.
    let guessed = Pid::local(allocated.id() + 1);
    let user = entry(guessed, &drops);
    assert!(registry.register(guessed, &user, None));
    assert!(!registry.register(guessed, &entry(guessed, &drops), None));
    // Allocating it now reserves the slot, but registering the table side
    // finds the user's process and burns the PID.
    let clash = registry.allocate(None).unwrap();
    assert_eq!(clash, guessed);
    assert!(!registry.register(clash, &entry(clash, &drops), None));
    assert!(Arc::ptr_eq(&registry.get(guessed).unwrap(), &user));
    // The reverse: a user submitting a live table PID by hand is refused.
    let table = entry(allocated, &drops);
    assert!(registry.register(allocated, &table, None));
    assert!(!registry.register(allocated, &entry(allocated, &drops), None));
    assert!(Arc::ptr_eq(&registry.get(allocated).unwrap(), &table));
    let mut pids = registry.pids();
    pids.sort();
    assert_eq!(pids, [allocated, guessed]);
    // Each side unregisters its own.
    assert!(registry.unregister(guessed, &user, None).is_some());
    assert!(registry.unregister(allocated, &table, None).is_some());
    assert!(registry.get(guessed).is_none() && registry.get(allocated).is_none());
    // An allocated PID submitted again after its process ended is the
    // user's to reuse: it goes to the router.
    let again = entry(allocated, &drops);
    assert!(registry.register(allocated, &again, None));
    assert!(Arc::ptr_eq(&registry.get(allocated).unwrap(), &again));
}

#[test]
fn concurrent_lookups_and_churn_never_see_a_freed_record() {
    let drops = std::sync::Arc::new(AtomicUsize::new(0));
    let table = std::sync::Arc::new(ProcessTable::<Entry>::new(0));
    let rounds = if cfg!(miri) { 20 } else { 2000 };
    let first = table.allocate(None).unwrap();
    assert!(registered(table.register(first, entry(first, &drops))));
    let current = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(first.id()));
    let reader = {
        let (table, current) = (table.clone(), current.clone());
        std::thread::spawn(move || {
            let mut found = 0;
            for _ in 0..rounds * 2 {
                let pid = Pid::local(current.load(Relaxed));
                if let Some(record) = table.get(pid) {
                    assert_eq!(record.pid, pid);
                    found += 1;
                }
            }
            found
        })
    };
    let mut cache = IdCache::new();
    let mut pid = first;
    for _ in 0..rounds {
        let record = table.get(pid).unwrap();
        drop(table.unregister(pid, &record, Some(&mut cache)));
        drop(record);
        pid = table.allocate(Some(&mut cache)).unwrap();
        assert!(registered(table.register(pid, entry(pid, &drops))));
        current.store(pid.id(), Relaxed);
    }
    reader.join().unwrap();
    assert_eq!(drops.load(Relaxed), rounds);
}

/// Whether a table registration went through.
fn registered<T: Keyed>(claim: Claim<T>) -> bool {
    matches!(claim, Claim::Registered)
}
