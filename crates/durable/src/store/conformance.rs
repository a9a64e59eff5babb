//! The suite every [`Store`] passes: run it on an empty store in a test
//! of your own store.
//!
//! It checks what the journal relies on: a batch's records come back in
//! order and whole, across processes; the first record carries what the
//! process was created from; an ended process leaves `running` but its
//! journal stays readable until `forget`; `forget` leaves a running
//! process alone; the outbox keeps a send until its receiver's record
//! takes it or it is discarded, and answers which sends of a sender to a
//! receiver come before a number; the latest snapshot is kept with the
//! records after it; and a store reopened on the same place (`reopen`) gives
//! back everything an `Ok` append wrote.
//!
//! # Examples
//!
//! ```
//! use sched_durable::store::{conformance, RedbStore};
//!
//! let dir = tempfile::tempdir()?;
//! let path = dir.path().join("journal.redb");
//! conformance::check(RedbStore::create(&path)?, || RedbStore::create(&path).unwrap());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use super::{Append, Created, Outgoing, Store};

fn append(key: &str, seq: u64, record: &[u8], ended: bool) -> Append {
    Append {
        key: key.to_owned(),
        seq,
        record: record.to_vec(),
        created: (seq == 0).then(|| Created {
            kind: format!("kind-of-{key}"),
            args: key.as_bytes().to_vec(),
        }),
        ended,
        sent: Vec::new(),
        taken: Vec::new(),
        snapshot: None,
    }
}

fn send(from: &str, to: &str, seq: u64) -> Outgoing {
    Outgoing {
        from: from.to_owned(),
        to: to.to_owned(),
        seq,
        body: vec![seq as u8],
    }
}

/// Runs the suite on `store`, which must be empty, then on the store
/// `reopen` returns after `store` is dropped (the same file, bucket or
/// database). Panics, naming the broken promise, when one fails.
///
/// # Panics
///
/// When the store breaks a promise of [`Store`].
///
/// # Examples
///
/// See the [module](self).
pub fn check<S: Store>(store: S, reopen: impl FnOnce() -> S) {
    check_journals(&store);
    check_outbox(&store);
    check_snapshots(&store);
    drop(store);
    check_reopened(&reopen());
}

/// Batches across processes, ended journals, `running`, `forget`, a
/// forgotten key used again.
fn check_journals<S: Store>(store: &S) {
    assert!(
        store.running().unwrap().is_empty(),
        "the store must start empty"
    );
    assert!(!store.contains("a").unwrap());
    assert_eq!(store.journal("a").unwrap(), None);

    // One batch across three processes, records interleaved.
    store
        .append(&[
            append("a", 0, b"a0", false),
            append("b", 0, b"b0", false),
            append("a", 1, b"a1", false),
            append("c", 0, b"c0", false),
            append("b", 1, b"b1", true),
        ])
        .unwrap();
    let fenced = store
        .append(&[append("a", 2, b"a2", false), append("c", 1, b"c1", false)])
        .unwrap();
    assert!(
        fenced.is_empty(),
        "nothing is fenced in a store used by one writer"
    );

    let a = store.journal("a").unwrap().expect("a was written");
    assert_eq!(
        a.records,
        vec![b"a0".to_vec(), b"a1".to_vec(), b"a2".to_vec()]
    );
    assert_eq!(a.created.kind, "kind-of-a");
    assert_eq!(a.created.args, b"a".to_vec());
    assert!(!a.ended);

    let b = store.journal("b").unwrap().expect("an ended journal stays");
    assert!(b.ended, "the record that ends a process marks it ended");
    assert_eq!(b.records.len(), 2);

    let mut running: Vec<_> = store
        .running()
        .unwrap()
        .into_iter()
        .map(|j| j.key)
        .collect();
    running.sort();
    assert_eq!(running, ["a", "c"], "an ended process is not running");

    assert!(
        !store.forget("a").unwrap(),
        "forget leaves a running process"
    );
    assert!(store.contains("a").unwrap());
    assert!(store.forget("b").unwrap(), "forget deletes an ended one");
    assert!(!store.contains("b").unwrap());
    assert_eq!(store.journal("b").unwrap(), None);
    assert!(!store.forget("b").unwrap());

    // The key of a forgotten process can be used again, from record 0.
    store.append(&[append("b", 0, b"new", false)]).unwrap();
    assert_eq!(
        store.journal("b").unwrap().unwrap().records,
        vec![b"new".to_vec()]
    );
    assert!(store.size().unwrap() > 0);
}

/// The outbox: a record's sends go in, a receiver's record that takes
/// them takes them out, `discard` drops the rest; `ended` and `keys`.
fn check_outbox<S: Store>(store: &S) {
    // The outbox: a record's sends go in, a receiver's record that takes
    // them takes them out, `discard` drops the rest.
    assert!(store.outbox().unwrap().is_empty());
    let mut a3 = append("a", 3, b"a3", false);
    a3.sent = vec![send("a", "c", 1), send("a", "c", 2), send("a", "z", 3)];
    store.append(&[a3]).unwrap();
    let mut outbox = store.outbox().unwrap();
    outbox.sort_by_key(|o| o.seq);
    assert_eq!(
        outbox,
        vec![send("a", "c", 1), send("a", "c", 2), send("a", "z", 3)]
    );
    // Earlier sends of one sender to one receiver, by number.
    let earlier = |to, from, seq| store.outbox_holds_earlier(to, from, seq).unwrap();
    assert!(!earlier("c", "a", 1), "nothing of a to c below 1");
    assert!(earlier("c", "a", 2) && earlier("c", "a", 3) && earlier("c", "a", 9));
    assert!(!earlier("c", "b", 9), "another sender's");
    assert!(!earlier("z", "a", 3) && earlier("z", "a", 4));
    assert!(!earlier("a", "c", 9), "the other way");
    let mut c2 = append("c", 2, b"c2", false);
    c2.taken = vec![("a".to_owned(), 1)];
    store.append(&[c2]).unwrap();
    assert!(
        !store.outbox_holds_earlier("c", "a", 2).unwrap(),
        "a taken send is no longer earlier"
    );
    let mut outbox = store.outbox().unwrap();
    outbox.sort_by_key(|o| o.seq);
    assert_eq!(
        outbox,
        vec![send("a", "c", 2), send("a", "z", 3)],
        "a taken send leaves the outbox"
    );
    store
        .discard(&[("z".to_owned(), "a".to_owned(), 3)])
        .unwrap();
    assert_eq!(store.outbox().unwrap(), vec![send("a", "c", 2)]);
    assert_eq!(store.outbox_to("c").unwrap(), vec![send("a", "c", 2)]);
    assert!(store.outbox_to("a").unwrap().is_empty());
    assert_eq!(store.ended("a").unwrap(), Some(false));
    assert_eq!(store.ended("nobody").unwrap(), None);
    assert_eq!(
        store.keys().unwrap(),
        vec![
            ("a".to_owned(), false),
            ("b".to_owned(), false),
            ("c".to_owned(), false)
        ],
        "every key with a journal, in order"
    );
}

/// Snapshots: the latest one is kept with the number of the record it
/// follows, and the records from `first` on follow it.
fn check_snapshots<S: Store>(store: &S) {
    let mut k0 = append("k", 0, b"k0", false);
    k0.snapshot = Some(b"after k0".to_vec());
    store.append(&[k0]).unwrap();
    store.append(&[append("k", 1, b"k1", false)]).unwrap();
    let mut k2 = append("k", 2, b"k2", false);
    k2.snapshot = Some(b"after k2".to_vec());
    store.append(&[k2]).unwrap();
    store.append(&[append("k", 3, b"k3", false)]).unwrap();
    check_snapshot_kept(store);
}

/// The latest snapshot of `k` and the records after it.
fn check_snapshot_kept<S: Store>(store: &S) {
    let k = store.journal("k").unwrap().unwrap();
    assert_eq!(
        k.snapshot,
        Some((2, b"after k2".to_vec())),
        "the latest snapshot"
    );
    assert!(k.first <= 3, "the records after the snapshot are kept");
    let from_3: Vec<_> = k.records[(3 - k.first) as usize..].to_vec();
    assert_eq!(from_3, vec![b"k3".to_vec()]);
}

/// What survives a reopen: journals, snapshots, the outbox.
fn check_reopened<S: Store>(store: &S) {
    check_snapshot_kept(store);
    let c = store.journal("c").unwrap().expect("c survives a reopen");
    assert_eq!(
        c.records,
        vec![b"c0".to_vec(), b"c1".to_vec(), b"c2".to_vec()]
    );
    assert_eq!(store.running().unwrap().len(), 4);
    assert_eq!(
        store.outbox().unwrap(),
        vec![send("a", "c", 2)],
        "the outbox survives a reopen"
    );
}
