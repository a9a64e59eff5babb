//! Loom models of the process table's slot protocol and of the registry's
//! two-sided check. Run with `cargo xtask loom sched-core`.
//!
//! loom cannot see a read of freed memory as such, so each record counts
//! its own drop in a flag that outlives it: a lookup that took a count on
//! a record whose last count was already dropped would find the flag set.

use std::sync::atomic::Ordering::SeqCst;

use loom::thread;
use relay::Pid;

use super::registry::Registry;
use super::{Claim, IdCache, Keyed, ProcessTable};
use crate::sync::{fence, Arc, AtomicBool};

#[derive(Debug)]
struct Entry {
    pid: Pid,
    dropped: Arc<AtomicBool>,
}

impl Keyed for Entry {
    type Ref = crate::sync::Arc<Entry>;

    fn pid(&self) -> Pid {
        self.pid
    }
}

impl Drop for Entry {
    fn drop(&mut self) {
        assert!(!self.dropped.swap(true, SeqCst), "dropped twice");
    }
}

/// A record and the flag its drop sets.
fn entry(pid: Pid) -> (Arc<Entry>, Arc<AtomicBool>) {
    let dropped = Arc::new(AtomicBool::new(false));
    let record = Arc::new(Entry {
        pid,
        dropped: dropped.clone(),
    });
    (record, dropped)
}

/// A lookup races the unregistration of its target and the reuse of the
/// slot by the next generation: it finds the old record alive or nothing,
/// never the new occupant; afterwards the old PID finds nothing.
#[test]
fn lookup_racing_unregister_and_reuse() {
    loom::model(|| {
        let table = Arc::new(ProcessTable::<Entry>::new(0));
        let old = table.allocate(None).unwrap();
        let (record, old_dropped) = entry(old);
        assert!(registered(table.register(old, record.clone())));

        let reader = {
            let table = table.clone();
            thread::spawn(move || {
                let found = table.get(old);
                if let Some(found) = &found {
                    assert_eq!(found.pid, old, "a stale PID reached the next occupant");
                    assert!(!found.dropped.load(SeqCst), "a count on a freed record");
                } else {
                    // A miss comes after the end: whatever state the slot
                    // has reached since (vacant, reserved, the next
                    // occupant), it says the old PID ended.
                    assert!(table.ended(old), "a PID that ended reads as never used");
                }
                found.is_some()
            })
        };

        let mut cache = IdCache::new();
        let removed = table.unregister(old, &record, Some(&mut cache));
        assert!(removed.is_some());
        drop(removed);
        drop(record);
        let new = table.allocate(Some(&mut cache)).unwrap();
        let (next, _) = entry(new);
        assert!(registered(table.register(new, next.clone())));

        reader.join().unwrap();
        assert!(old_dropped.load(SeqCst), "the old record was freed");
        assert!(
            table.get(old).is_none(),
            "a lookup after unregister finds nothing"
        );
        assert!(Arc::ptr_eq(&table.get(new).unwrap(), &next));
    });
}

/// A lookup races the registration: it finds nothing or the whole record,
/// and two lookups holding the slot in turn both get a count.
#[test]
fn lookups_racing_register() {
    loom::model(|| {
        let table = Arc::new(ProcessTable::<Entry>::new(0));
        let pid = table.allocate(None).unwrap();
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let table = table.clone();
                thread::spawn(move || table.get(pid).map(|r| r.pid))
            })
            .collect();
        let (record, dropped) = entry(pid);
        assert!(registered(table.register(pid, record.clone())));
        for reader in readers {
            let found = reader.join().unwrap();
            assert!(found.is_none() || found == Some(pid));
        }
        let removed = table.unregister(pid, &record, None).unwrap();
        drop((removed, record));
        assert!(dropped.load(SeqCst), "no count was left behind");
    });
}

/// Two submitters of one allocated PID: exactly one registers.
#[test]
fn two_registrations_of_one_allocated_pid() {
    loom::model(|| {
        let registry = Arc::new(Registry::<Entry>::new(0));
        let pid = registry.allocate(None).unwrap();
        let others: Vec<_> = (0..2)
            .map(|_| {
                let registry = registry.clone();
                thread::spawn(move || registry.register(pid, &entry(pid).0, None))
            })
            .collect();
        let wins = others
            .into_iter()
            .map(|t| t.join().unwrap())
            .filter(|&won| won)
            .count();
        assert_eq!(wins, 1);
        assert!(registry.get(pid).is_some());
    });
}

/// A user submits by hand the PID the table is handing out at the same
/// moment: never both registered.
#[test]
fn user_and_table_register_the_same_pid() {
    loom::model(|| {
        let registry = Arc::new(Registry::<Entry>::new(0));
        let table_side = {
            let registry = registry.clone();
            thread::spawn(move || {
                let pid = registry.allocate(None).unwrap();
                let (record, _) = entry(pid);
                (pid, registry.register(pid, &record, None).then_some(record))
            })
        };
        // The first PID the table hands out.
        let guessed = Pid::local(1);
        let (user, _) = entry(guessed);
        let user_won = registry.register(guessed, &user, None);
        let (pid, table_won) = table_side.join().unwrap();
        assert_eq!(pid, guessed);
        assert!(!(user_won && table_won.is_some()), "one PID live twice");
        let live = registry.get(guessed);
        match (&table_won, user_won) {
            (Some(record), _) => assert!(Arc::ptr_eq(live.as_ref().unwrap(), record)),
            (None, true) => assert!(Arc::ptr_eq(live.as_ref().unwrap(), &user)),
            (None, false) => assert!(live.is_none()),
        }
        drop(live);
        if let Some(record) = &table_won {
            assert!(registry.unregister(guessed, record, None).is_some());
        }
        if user_won {
            assert!(registry.unregister(guessed, &user, None).is_some());
        }
        assert!(registry.get(guessed).is_none());
    });
}

/// Shutdown's sweep against a registration, as the engine runs them
/// (`engine/shutdown.rs`, `engine/admission.rs`): the sweeper sets a flag,
/// fences and lists the registry; the submitter allocates (publishing the
/// slot's segment), registers (which fences) and reads the flag. Either the
/// sweep lists the PID or the submitter sees the flag.
#[test]
fn a_sweep_sees_a_registration_or_the_registrant_sees_the_flag() {
    loom::model(|| {
        let registry = Arc::new(Registry::<Entry>::new(0));
        let stopping = Arc::new(AtomicBool::new(false));
        let sweeper = {
            let (registry, stopping) = (registry.clone(), stopping.clone());
            thread::spawn(move || {
                stopping.store(true, SeqCst);
                fence(SeqCst);
                registry.pids()
            })
        };
        let pid = registry.allocate(None).unwrap();
        let (record, _) = entry(pid);
        assert!(registry.register(pid, &record, None));
        let saw_flag = stopping.load(SeqCst);
        let swept = sweeper.join().unwrap();
        assert!(
            saw_flag || swept.contains(&pid),
            "the process escaped shutdown"
        );
        assert!(registry.unregister(pid, &record, None).is_some());
    });
}

/// Whether a table registration went through.
fn registered<T: Keyed>(claim: Claim<T>) -> bool {
    matches!(claim, Claim::Registered)
}
