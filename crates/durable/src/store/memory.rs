//! A store in memory: for tests and simulations, where a "restart" is a
//! new `Durability` on the same store.

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::Mutex;

use super::{Append, Created, Journal, Outgoing, Store};
use crate::error::DurableError;

/// One process's journal as the memory store keeps it.
#[derive(Clone)]
struct Kept {
    created: Created,
    ended: bool,
    snapshot: Option<(u64, Vec<u8>)>,
    records: Vec<Vec<u8>>,
}

#[derive(Default)]
struct Inner {
    journals: BTreeMap<String, Kept>,
    /// (receiver, sender, number) → body.
    outbox: BTreeMap<(String, String, u64), Vec<u8>>,
    /// Bytes appended, for `size`.
    bytes: u64,
}

/// Journals in memory. Clones share the same journals, so a test can
/// drop a `Durability` (its node "stops") and open another on a clone of
/// the store (the node "restarts"): what was appended is there, as on a
/// disk. An append is all or nothing, like a batch that synced.
///
/// # Examples
///
/// ```
/// use sched_durable::store::{MemoryStore, Store};
///
/// let store = MemoryStore::new();
/// let after_a_restart = store.clone();
/// assert!(after_a_restart.running()?.is_empty());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Default)]
pub struct MemoryStore {
    inner: Arc<Mutex<Inner>>,
}

impl std::fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryStore")
            .field("journals", &self.inner.lock().journals.len())
            .finish_non_exhaustive()
    }
}

impl MemoryStore {
    /// An empty store.
    ///
    /// # Examples
    ///
    /// See [`MemoryStore`].
    pub fn new() -> MemoryStore {
        MemoryStore::default()
    }
}

fn journal(key: &str, kept: &Kept) -> Journal {
    Journal {
        key: key.to_owned(),
        created: kept.created.clone(),
        ended: kept.ended,
        snapshot: kept.snapshot.clone(),
        first: 0,
        records: kept.records.clone(),
    }
}

impl Store for MemoryStore {
    fn append(&self, batch: &[Append]) -> Result<Vec<String>, DurableError> {
        let mut inner = self.inner.lock();
        // Checked first, so that a refused batch changes nothing: each
        // record follows its journal (or the batch's record before it).
        let mut next: std::collections::HashMap<&str, u64> = std::collections::HashMap::new();
        for append in batch {
            let expected = match (append.created.is_some(), next.get(append.key.as_str())) {
                (true, _) => 0,
                (false, Some(&n)) => n,
                (false, None) => match inner.journals.get(&append.key) {
                    Some(kept) => kept.records.len() as u64,
                    None => {
                        return Err(DurableError::Corrupt(format!(
                            "record {} of {:?}, which was never created",
                            append.seq, append.key
                        )))
                    }
                },
            };
            if append.seq != expected {
                return Err(DurableError::Corrupt(format!(
                    "record {} of {:?} where record {expected} was due",
                    append.seq, append.key
                )));
            }
            next.insert(&append.key, expected + 1);
        }
        for append in batch {
            inner.bytes += append.record.len() as u64;
            if let Some(created) = &append.created {
                inner.journals.insert(
                    append.key.clone(),
                    Kept {
                        created: created.clone(),
                        ended: false,
                        snapshot: None,
                        records: Vec::new(),
                    },
                );
            }
            let kept = inner.journals.get_mut(&append.key).expect("checked above");
            kept.records.push(append.record.clone());
            kept.ended |= append.ended;
            if let Some(snapshot) = &append.snapshot {
                kept.snapshot = Some((append.seq, snapshot.clone()));
            }
            for send in &append.sent {
                // A send to a process whose journal has ended is dropped.
                if inner.journals.get(&send.to).is_some_and(|k| k.ended) {
                    continue;
                }
                inner.outbox.insert(
                    (send.to.clone(), send.from.clone(), send.seq),
                    send.body.clone(),
                );
            }
            for (from, seq) in &append.taken {
                inner
                    .outbox
                    .remove(&(append.key.clone(), from.clone(), *seq));
            }
            if append.ended {
                // And so are those it never took.
                let key = append.key.clone();
                inner.outbox.retain(|(to, _, _), _| *to != key);
            }
        }
        Ok(Vec::new())
    }

    fn running(&self) -> Result<Vec<Journal>, DurableError> {
        let inner = self.inner.lock();
        Ok(inner
            .journals
            .iter()
            .filter(|(_, kept)| !kept.ended)
            .map(|(key, kept)| journal(key, kept))
            .collect())
    }

    fn journal(&self, key: &str) -> Result<Option<Journal>, DurableError> {
        Ok(self
            .inner
            .lock()
            .journals
            .get(key)
            .map(|kept| journal(key, kept)))
    }

    fn keys(&self) -> Result<Vec<(String, bool)>, DurableError> {
        Ok(self
            .inner
            .lock()
            .journals
            .iter()
            .map(|(key, kept)| (key.clone(), kept.ended))
            .collect())
    }

    fn contains(&self, key: &str) -> Result<bool, DurableError> {
        Ok(self.inner.lock().journals.contains_key(key))
    }

    fn forget(&self, key: &str) -> Result<bool, DurableError> {
        let mut inner = self.inner.lock();
        match inner.journals.get(key) {
            Some(kept) if kept.ended => {
                inner.journals.remove(key);
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    fn outbox(&self) -> Result<Vec<Outgoing>, DurableError> {
        Ok(self
            .inner
            .lock()
            .outbox
            .iter()
            .map(|((to, from, seq), body)| Outgoing {
                from: from.clone(),
                to: to.clone(),
                seq: *seq,
                body: body.clone(),
            })
            .collect())
    }

    fn outbox_holds_earlier(&self, to: &str, from: &str, seq: u64) -> Result<bool, DurableError> {
        let inner = self.inner.lock();
        let first = (to.to_owned(), from.to_owned(), 0);
        let end = (to.to_owned(), from.to_owned(), seq);
        Ok(inner.outbox.range(first..end).next().is_some())
    }

    fn outbox_to(&self, key: &str) -> Result<Vec<Outgoing>, DurableError> {
        let inner = self.inner.lock();
        let from = (key.to_owned(), String::new(), 0);
        Ok(inner
            .outbox
            .range(from..)
            .take_while(|((to, _, _), _)| to == key)
            .map(|((to, from, seq), body)| Outgoing {
                from: from.clone(),
                to: to.clone(),
                seq: *seq,
                body: body.clone(),
            })
            .collect())
    }

    fn ended(&self, key: &str) -> Result<Option<bool>, DurableError> {
        Ok(self.inner.lock().journals.get(key).map(|kept| kept.ended))
    }

    fn discard(&self, entries: &[(String, String, u64)]) -> Result<(), DurableError> {
        let mut inner = self.inner.lock();
        for (to, from, seq) in entries {
            inner.outbox.remove(&(to.clone(), from.clone(), *seq));
        }
        Ok(())
    }

    fn size(&self) -> Result<u64, DurableError> {
        Ok(self.inner.lock().bytes)
    }

    /// An append is checked whole, then applied under one lock.
    fn atomic_batches(&self) -> bool {
        true
    }
}
