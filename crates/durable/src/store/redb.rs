//! The embedded store, on `redb`.
//!
//! Why redb: it is pure Rust (no C toolchain, unlike SQLite), keeps one
//! file, and is ACID with copy-on-write B-trees: a write transaction
//! committed with `Durability::Immediate` (its default) is on disk when
//! `commit` returns, because the commit ends with an `fsync` of the file
//! (redb's default commit writes the new pages, then the header with a
//! checksum of the new root, in one sync: a crash in the middle leaves the
//! previous commit, whose checksum still holds). One `append` batch is one
//! write transaction, hence one sync however many records it holds: that
//! is what group commit needs. An LSM store (fjall) would write faster
//! under heavy load but syncs its own journal separately from its trees
//! and compacts in the background; for a write-ahead journal that is read
//! back whole only at recovery, one B-tree file is the simpler contract.

use std::path::Path;

use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};
use serde::{Deserialize, Serialize};

use super::{Append, Created, Journal, Outgoing, Store};
use crate::error::DurableError;

/// Key → what the process was created from, and whether it ended.
const PROCESSES: TableDefinition<&str, &[u8]> = TableDefinition::new("processes");
/// (key, record number) → record.
const RECORDS: TableDefinition<(&str, u64), &[u8]> = TableDefinition::new("records");
/// (receiver, sender, number) → body: sends not yet taken.
const OUTBOX: TableDefinition<(&str, &str, u64), &[u8]> = TableDefinition::new("outbox");

#[derive(Serialize, Deserialize)]
struct Meta {
    kind: String,
    args: Vec<u8>,
    ended: bool,
}

fn store(e: impl std::fmt::Display) -> DurableError {
    DurableError::Store(e.to_string())
}

/// Journals in one `redb` file: the embedded store, no server needed.
///
/// # Examples
///
/// ```
/// use sched_durable::store::RedbStore;
///
/// let dir = tempfile::tempdir()?;
/// let store = RedbStore::create(dir.path().join("journal.redb"))?;
/// # drop(store);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct RedbStore {
    db: Database,
}

impl std::fmt::Debug for RedbStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedbStore").finish_non_exhaustive()
    }
}

impl RedbStore {
    /// Opens the store at `path`, creating the file if it does not exist.
    ///
    /// # Errors
    ///
    /// [`DurableError::Store`] when the file cannot be opened (another
    /// process holds it, it is not a redb file, or the disk refused).
    ///
    /// # Examples
    ///
    /// See [`RedbStore`].
    pub fn create(path: impl AsRef<Path>) -> Result<RedbStore, DurableError> {
        let db = Database::create(path).map_err(store)?;
        // Both tables exist from the start, so that readers never meet a
        // missing table.
        let txn = db.begin_write().map_err(store)?;
        txn.open_table(PROCESSES).map_err(store)?;
        txn.open_table(RECORDS).map_err(store)?;
        txn.open_table(OUTBOX).map_err(store)?;
        txn.commit().map_err(store)?;
        Ok(RedbStore { db })
    }

    fn read_journal(
        records: &impl ReadableTable<(&'static str, u64), &'static [u8]>,
        key: &str,
        meta: &[u8],
    ) -> Result<Journal, DurableError> {
        let meta: Meta =
            postcard::from_bytes(meta).map_err(|e| DurableError::Corrupt(e.to_string()))?;
        let mut list = Vec::new();
        for entry in records
            .range((key, 0u64)..=(key, u64::MAX))
            .map_err(store)?
        {
            let (k, v) = entry.map_err(store)?;
            let (_, seq) = k.value();
            if seq != list.len() as u64 {
                return Err(DurableError::Corrupt(format!(
                    "the journal of {key:?} skips from record {} to {seq}",
                    list.len()
                )));
            }
            list.push(v.value().to_vec());
        }
        Ok(Journal {
            key: key.to_owned(),
            created: Created {
                kind: meta.kind,
                args: meta.args,
            },
            ended: meta.ended,
            records: list,
        })
    }
}

impl Store for RedbStore {
    fn append(&self, batch: &[Append]) -> Result<(), DurableError> {
        let txn = self.db.begin_write().map_err(store)?;
        {
            let mut processes = txn.open_table(PROCESSES).map_err(store)?;
            let mut records = txn.open_table(RECORDS).map_err(store)?;
            let mut outbox = txn.open_table(OUTBOX).map_err(store)?;
            for append in batch {
                for send in &append.sent {
                    outbox
                        .insert(
                            (send.to.as_str(), send.from.as_str(), send.seq),
                            send.body.as_slice(),
                        )
                        .map_err(store)?;
                }
                for (from, seq) in &append.taken {
                    outbox
                        .remove((append.key.as_str(), from.as_str(), *seq))
                        .map_err(store)?;
                }
                records
                    .insert((append.key.as_str(), append.seq), append.record.as_slice())
                    .map_err(store)?;
                let meta = match &append.created {
                    Some(created) => Some(Meta {
                        kind: created.kind.clone(),
                        args: created.args.clone(),
                        ended: append.ended,
                    }),
                    None if append.ended => {
                        let old = processes
                            .get(append.key.as_str())
                            .map_err(store)?
                            .ok_or_else(|| {
                                DurableError::Corrupt(format!(
                                    "{:?} ends without having been created",
                                    append.key
                                ))
                            })?;
                        let mut meta: Meta = postcard::from_bytes(old.value())
                            .map_err(|e| DurableError::Corrupt(e.to_string()))?;
                        meta.ended = true;
                        Some(meta)
                    }
                    None => None,
                };
                if let Some(meta) = meta {
                    let bytes = postcard::to_stdvec(&meta).map_err(store)?;
                    processes
                        .insert(append.key.as_str(), bytes.as_slice())
                        .map_err(store)?;
                }
            }
        }
        // Durability::Immediate is the default: commit returns after the
        // sync.
        txn.commit().map_err(store)
    }

    fn running(&self) -> Result<Vec<Journal>, DurableError> {
        let txn = self.db.begin_read().map_err(store)?;
        let processes = txn.open_table(PROCESSES).map_err(store)?;
        let records = txn.open_table(RECORDS).map_err(store)?;
        let mut out = Vec::new();
        for entry in processes.iter().map_err(store)? {
            let (k, v) = entry.map_err(store)?;
            let journal = Self::read_journal(&records, k.value(), v.value())?;
            if !journal.ended {
                out.push(journal);
            }
        }
        Ok(out)
    }

    fn journal(&self, key: &str) -> Result<Option<Journal>, DurableError> {
        let txn = self.db.begin_read().map_err(store)?;
        let processes = txn.open_table(PROCESSES).map_err(store)?;
        let records = txn.open_table(RECORDS).map_err(store)?;
        let Some(meta) = processes.get(key).map_err(store)? else {
            return Ok(None);
        };
        Self::read_journal(&records, key, meta.value()).map(Some)
    }

    fn contains(&self, key: &str) -> Result<bool, DurableError> {
        let txn = self.db.begin_read().map_err(store)?;
        let processes = txn.open_table(PROCESSES).map_err(store)?;
        Ok(processes.get(key).map_err(store)?.is_some())
    }

    fn forget(&self, key: &str) -> Result<bool, DurableError> {
        let txn = self.db.begin_write().map_err(store)?;
        let forgotten = {
            let mut processes = txn.open_table(PROCESSES).map_err(store)?;
            let mut records = txn.open_table(RECORDS).map_err(store)?;
            let ended = match processes.get(key).map_err(store)? {
                None => false,
                Some(meta) => {
                    let meta: Meta = postcard::from_bytes(meta.value())
                        .map_err(|e| DurableError::Corrupt(e.to_string()))?;
                    meta.ended
                }
            };
            if ended {
                processes.remove(key).map_err(store)?;
                records
                    .retain_in((key, 0u64)..=(key, u64::MAX), |_, _| false)
                    .map_err(store)?;
            }
            ended
        };
        txn.commit().map_err(store)?;
        Ok(forgotten)
    }

    fn outbox(&self) -> Result<Vec<Outgoing>, DurableError> {
        let txn = self.db.begin_read().map_err(store)?;
        let outbox = txn.open_table(OUTBOX).map_err(store)?;
        let mut out = Vec::new();
        for entry in outbox.iter().map_err(store)? {
            let (k, v) = entry.map_err(store)?;
            let (to, from, seq) = k.value();
            out.push(Outgoing {
                from: from.to_owned(),
                to: to.to_owned(),
                seq,
                body: v.value().to_vec(),
            });
        }
        Ok(out)
    }

    fn discard(&self, entries: &[(String, String, u64)]) -> Result<(), DurableError> {
        let txn = self.db.begin_write().map_err(store)?;
        {
            let mut outbox = txn.open_table(OUTBOX).map_err(store)?;
            for (to, from, seq) in entries {
                outbox
                    .remove((to.as_str(), from.as_str(), *seq))
                    .map_err(store)?;
            }
        }
        txn.commit().map_err(store)
    }

    fn size(&self) -> Result<u64, DurableError> {
        let txn = self.db.begin_write().map_err(store)?;
        let stats = txn.stats().map_err(store)?;
        txn.abort().map_err(store)?;
        Ok(stats.allocated_pages() * stats.page_size() as u64)
    }
}
