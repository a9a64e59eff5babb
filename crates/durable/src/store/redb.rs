//! The embedded store, on `redb`.
//!
//! Why redb: it is pure Rust (no C toolchain, unlike SQLite), keeps one
//! file, and is ACID with copy-on-write B-trees: a write transaction
//! committed with `Durability::Immediate` (its default) is on disk when
//! `commit` returns, because the commit ends with an `fsync` of the file
//! (redb writes the new pages, then the header with a checksum of the new
//! root, in one sync: a crash in the middle leaves the previous commit,
//! whose checksum still holds). One `append` batch is one write
//! transaction, hence one sync however many records it holds: that is
//! what group commit needs. An LSM store (fjall) would write as fast, but
//! syncs its own journal beside its trees and compacts in the background;
//! for a write-ahead journal that is read back whole only at recovery, one
//! file with one commit protocol is the simpler contract.
//!
//! Layout: the journal is a log. Each batch is one row, keyed by the
//! batch's number, holding every record of the batch: a batch costs one
//! insert at the log's end, not one insert per record scattered across a
//! tree keyed by process (measured: that layout spent most of the writer's
//! time copying B-tree pages). Beside it, one row per process (what it was
//! created from, the batch it was created in, whether it ended), written
//! when it is created and when it ends, and the outbox. Reading a journal
//! scans the log ([`running`](Store::running) reads it once for every
//! process); records of forgotten processes stay in the log until
//! [`RedbStore::compact`] rewrites it.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};
use serde::{Deserialize, Serialize};

use super::{Append, Created, Journal, Outgoing, Store};
use crate::error::DurableError;

/// The mark of a journal store: "format" → its version. A redb file
/// without it is not a journal store.
const FORMAT: TableDefinition<&str, u64> = TableDefinition::new("sched-durable");
/// The version of the layout below (2: sends numbered per receiver).
const FORMAT_VERSION: u64 = 2;
/// Key → what the process was created from, and whether it ended.
const PROCESSES: TableDefinition<&str, &[u8]> = TableDefinition::new("processes");
/// Batch number → the batch's records (`Vec<Entry>`).
const LOG: TableDefinition<u64, &[u8]> = TableDefinition::new("log");
/// Key → its latest snapshot: (the record it follows, its bytes).
const SNAPSHOTS: TableDefinition<&str, (u64, &[u8])> = TableDefinition::new("snapshots");
/// (receiver, sender, number) → body: sends not yet taken.
const OUTBOX: TableDefinition<(&str, &str, u64), &[u8]> = TableDefinition::new("outbox");

#[derive(Serialize, Deserialize)]
struct Meta {
    kind: String,
    args: Vec<u8>,
    ended: bool,
    /// The batch it was created in: records of the key in earlier
    /// batches belong to a forgotten process of the same key.
    since: u64,
}

/// One record in a batch row.
#[derive(Serialize, Deserialize)]
struct Entry<'a> {
    key: &'a str,
    seq: u64,
    #[serde(with = "serde_bytes_compat")]
    record: &'a [u8],
}

/// Borrowed bytes as postcard's byte strings.
mod serde_bytes_compat {
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(bytes: &&[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(bytes)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<&'de [u8], D::Error> {
        <&[u8]>::deserialize(d)
    }
}

fn corrupt(e: impl std::fmt::Display) -> DurableError {
    DurableError::Corrupt(e.to_string())
}

fn store(e: impl std::fmt::Display) -> DurableError {
    DurableError::Store(e.to_string())
}

/// Runs `f`, turning a panic inside redb (its answer to some damaged
/// pages) into a `Corrupt` error naming the file.
fn guarded<T>(file: &str, f: impl FnOnce() -> Result<T, DurableError>) -> Result<T, DurableError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|panic| {
        Err(DurableError::Corrupt(format!(
            "{file}: reading it failed ({})",
            crate::error::panic_text(panic)
        )))
    })
}

/// An error of opening `file`: damage is `Corrupt`, the rest `Store`.
fn opening(file: &str, e: redb::DatabaseError) -> DurableError {
    match e {
        redb::DatabaseError::Storage(redb::StorageError::Corrupted(why)) => {
            DurableError::Corrupt(format!("{file}: {why}"))
        }
        redb::DatabaseError::Storage(redb::StorageError::Io(io))
            if matches!(
                io.kind(),
                std::io::ErrorKind::InvalidData | std::io::ErrorKind::UnexpectedEof
            ) =>
        {
            DurableError::Corrupt(format!("{file}: not a journal store ({io})"))
        }
        other => DurableError::Store(format!("{file}: {other}")),
    }
}

/// Whether the journal of `key` has ended, as the processes table says.
fn has_ended(processes: &redb::Table<'_, &str, &[u8]>, key: &str) -> Result<bool, DurableError> {
    match processes.get(key).map_err(store)? {
        None => Ok(false),
        Some(meta) => {
            let meta: Meta = postcard::from_bytes(meta.value())
                .map_err(|e| corrupt(format!("the entry of {key:?}: {e}")))?;
            Ok(meta.ended)
        }
    }
}

/// Every table of a journal store, and its format mark, in one
/// transaction.
fn initialise(db: &Database) -> Result<(), DurableError> {
    let txn = db.begin_write().map_err(store)?;
    txn.open_table(PROCESSES).map_err(store)?;
    txn.open_table(LOG).map_err(store)?;
    txn.open_table(OUTBOX).map_err(store)?;
    txn.open_table(SNAPSHOTS).map_err(store)?;
    txn.open_table(FORMAT)
        .map_err(store)?
        .insert("format", FORMAT_VERSION)
        .map_err(store)?;
    txn.commit().map_err(store)
}

/// Checks the format mark of an opened store; returns the next batch's
/// number.
fn check_format(db: &Database, file: &str) -> Result<u64, DurableError> {
    let txn = db.begin_read().map_err(store)?;
    let version = match txn.open_table(FORMAT) {
        Ok(table) => table.get("format").map_err(store)?.map(|v| v.value()),
        Err(redb::TableError::TableDoesNotExist(_)) => None,
        Err(e) => return Err(DurableError::Corrupt(format!("{file}: {e}"))),
    };
    match version {
        Some(FORMAT_VERSION) => {}
        Some(other) => {
            return Err(DurableError::Corrupt(format!(
            "{file}: a journal store of format {other}; this version reads format {FORMAT_VERSION}"
        )))
        }
        None => {
            return Err(DurableError::Corrupt(format!(
                "{file}: a redb file, but not a journal store"
            )))
        }
    }
    let log = txn
        .open_table(LOG)
        .map_err(|e| DurableError::Corrupt(format!("{file}: {e}")))?;
    let last = log.last().map_err(store)?;
    Ok(last.map_or(0, |(k, _)| k.value() + 1))
}

/// Creates an empty journal store at `path`, atomically: whole under a
/// temporary name, synced, then linked to `path` (which fails if another
/// creation got there first: then that one's store is used).
fn create_atomically(path: &Path) -> Result<(), DurableError> {
    let shown = path.display().to_string();
    let failed = |e: std::io::Error| DurableError::Store(format!("{shown}: {e}"));
    let name = path
        .file_name()
        .ok_or_else(|| DurableError::Store(format!("{shown}: not a file name")))?;
    let temporary = path.with_file_name(format!(
        ".{}.creating-{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    // Left by a creation of an earlier process with the same id.
    let _ = std::fs::remove_file(&temporary);
    {
        let db = Database::create(&temporary).map_err(|e| opening(&shown, e))?;
        initialise(&db)?;
    }
    std::fs::File::open(&temporary)
        .and_then(|file| file.sync_all())
        .map_err(failed)?;
    let linked = std::fs::hard_link(&temporary, path);
    let _ = std::fs::remove_file(&temporary);
    match linked {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(failed(e)),
    }
    // The new name is durable once its directory is synced.
    let parent = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    std::fs::File::open(parent)
        .and_then(|dir| dir.sync_all())
        .map_err(failed)
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
    /// The next batch's number (the writer is the only one to append).
    next_batch: AtomicU64,
    /// The file, for errors.
    path: String,
}

impl std::fmt::Debug for RedbStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedbStore").finish_non_exhaustive()
    }
}

impl RedbStore {
    /// Opens the store at `path`, creating it if no file is there.
    ///
    /// Creating is atomic: the store is made beside `path` under a
    /// temporary name, synced, and linked to `path` only when whole, so a
    /// crash during it leaves no file at `path` (only, at worst, a
    /// `.<name>.creating-<pid>` file beside it, removed by the next
    /// creation from the same process id) or a complete, empty store.
    /// Opening an existing file checks every page's checksum (it reads the
    /// whole file once); see [`open`](RedbStore::open) for what is refused.
    ///
    /// # Errors
    ///
    /// As [`open`](RedbStore::open), and [`DurableError::Store`] when the
    /// file cannot be created.
    ///
    /// # Examples
    ///
    /// See [`RedbStore`].
    pub fn create(path: impl AsRef<Path>) -> Result<RedbStore, DurableError> {
        let path = path.as_ref();
        match std::fs::symlink_metadata(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => create_atomically(path)?,
            Err(e) => return Err(DurableError::Store(format!("{}: {e}", path.display()))),
            Ok(_) => {}
        }
        RedbStore::open(path)
    }

    /// Opens the existing store at `path`, checking every page's checksum
    /// (it reads the whole file once).
    ///
    /// # Errors
    ///
    /// [`DurableError::Corrupt`], naming the file, when it is empty, is
    /// not a redb file, is a redb file that is not a journal store (or one
    /// of another format version), or was altered since it was written
    /// (a failed checksum); [`DurableError::Store`], naming the file, when
    /// it does not exist, another process holds it, or the disk refused.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched_durable::store::RedbStore;
    /// use sched_durable::DurableError;
    ///
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("journal.redb");
    /// assert!(matches!(RedbStore::open(&path), Err(DurableError::Store(_))));
    /// std::fs::write(&path, b"")?;
    /// assert!(matches!(RedbStore::open(&path), Err(DurableError::Corrupt(_))));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open(path: impl AsRef<Path>) -> Result<RedbStore, DurableError> {
        let path = path.as_ref();
        let shown = path.display().to_string();
        let len = std::fs::metadata(path)
            .map_err(|e| DurableError::Store(format!("{shown}: {e}")))?
            .len();
        if len == 0 {
            // redb would take an empty file for a new store: a store
            // truncated by accident would silently come back empty.
            return Err(DurableError::Corrupt(format!(
                "{shown}: the file is empty, and a journal store never is \
                 (restore it, or remove it to start with no journals)"
            )));
        }
        let opened = guarded(&shown, || {
            redb::Builder::new()
                .set_check_integrity_on_open(true)
                .open(path)
                .map_err(|e| opening(&shown, e))
        })?;
        let next_batch = guarded(&shown, || check_format(&opened, &shown))?;
        Ok(RedbStore {
            db: opened,
            next_batch: AtomicU64::new(next_batch),
            path: shown,
        })
    }

    /// Reads the journals of the processes `wanted` picks, scanning the
    /// log once.
    fn read(&self, wanted: impl Fn(&str, &Meta) -> bool) -> Result<Vec<Journal>, DurableError> {
        guarded(&self.path, || self.read_unguarded(wanted))
    }

    fn read_unguarded(
        &self,
        wanted: impl Fn(&str, &Meta) -> bool,
    ) -> Result<Vec<Journal>, DurableError> {
        let file = &self.path;
        let txn = self.db.begin_read().map_err(store)?;
        let processes = txn.open_table(PROCESSES).map_err(store)?;
        let snapshots = txn.open_table(SNAPSHOTS).map_err(store)?;
        let log = txn.open_table(LOG).map_err(store)?;
        // Per key: the batch it was created in, the next record number the
        // log must hold, and the journal.
        let mut journals: HashMap<String, (u64, u64, Journal)> = HashMap::new();
        for entry in processes.iter().map_err(store)? {
            let (k, v) = entry.map_err(store)?;
            let meta: Meta = postcard::from_bytes(v.value())
                .map_err(|e| corrupt(format!("{file}: the entry of {:?}: {e}", k.value())))?;
            if wanted(k.value(), &meta) {
                let snapshot = snapshots.get(k.value()).map_err(store)?.map(|s| {
                    let (after, bytes) = s.value();
                    (after, bytes.to_vec())
                });
                let first = snapshot.as_ref().map_or(0, |(after, _)| after + 1);
                let journal = Journal {
                    key: k.value().to_owned(),
                    created: Created {
                        kind: meta.kind,
                        args: meta.args,
                    },
                    ended: meta.ended,
                    snapshot,
                    first,
                    records: Vec::new(),
                };
                journals.insert(k.value().to_owned(), (meta.since, u64::MAX, journal));
            }
        }
        if journals.is_empty() {
            return Ok(Vec::new());
        }
        for row in log.iter().map_err(store)? {
            let (batch, bytes) = row.map_err(store)?;
            let batch = batch.value();
            let entries: Vec<Entry<'_>> = postcard::from_bytes(bytes.value())
                .map_err(|e| corrupt(format!("{file}: batch {batch} of the log: {e}")))?;
            for entry in entries {
                let Some((since, next, journal)) = journals.get_mut(entry.key) else {
                    continue;
                };
                if batch < *since {
                    continue;
                }
                // The log holds a journal's records from 0, or from after
                // its snapshot once compacted; without gaps either way.
                if *next != u64::MAX && entry.seq != *next {
                    return Err(DurableError::Corrupt(format!(
                        "{file}: the journal of {:?} skips from record {next} to {}",
                        entry.key, entry.seq
                    )));
                }
                *next = entry.seq + 1;
                if entry.seq >= journal.first {
                    if journal.records.is_empty() && entry.seq != journal.first {
                        return Err(DurableError::Corrupt(format!(
                            "{file}: the journal of {:?} starts at record {} after its snapshot, not {}",
                            entry.key, entry.seq, journal.first
                        )));
                    }
                    journal.records.push(entry.record.to_vec());
                }
            }
        }
        let mut out: Vec<Journal> = journals.into_values().map(|(_, _, j)| j).collect();
        out.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(out)
    }

    /// Every journal the store holds, running or ended, read in one scan
    /// of the log (for tools and checks; [`Store::journal`] scans it once
    /// per call).
    ///
    /// # Errors
    ///
    /// [`DurableError::Store`] or [`DurableError::Corrupt`].
    ///
    /// # Examples
    ///
    /// ```
    /// use sched_durable::store::RedbStore;
    ///
    /// let dir = tempfile::tempdir()?;
    /// let store = RedbStore::create(dir.path().join("journal.redb"))?;
    /// assert!(store.journals()?.is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn journals(&self) -> Result<Vec<Journal>, DurableError> {
        self.read(|_, _| true)
    }

    /// Every process the store holds, running or ended, by key: its type
    /// and whether it ended (for listing; `journal` reads one).
    ///
    /// # Errors
    ///
    /// [`DurableError::Store`] or [`DurableError::Corrupt`].
    ///
    /// # Examples
    ///
    /// ```
    /// use sched_durable::store::RedbStore;
    ///
    /// let dir = tempfile::tempdir()?;
    /// let store = RedbStore::create(dir.path().join("journal.redb"))?;
    /// assert!(store.processes()?.is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn processes(&self) -> Result<Vec<(String, String, bool)>, DurableError> {
        let txn = self.db.begin_read().map_err(store)?;
        let processes = txn.open_table(PROCESSES).map_err(store)?;
        let mut out = Vec::new();
        for entry in processes.iter().map_err(store)? {
            let (k, v) = entry.map_err(store)?;
            let meta: Meta = postcard::from_bytes(v.value()).map_err(corrupt)?;
            out.push((k.value().to_owned(), meta.kind, meta.ended));
        }
        Ok(out)
    }

    /// Rewrites the log with only the records of processes the store still
    /// holds (running or ended, not forgotten) that their latest snapshot
    /// does not cover, one row per process, and returns how many bytes of
    /// log rows it dropped. Run it when nothing
    /// appends (before recovery, or with the scheduler stopped).
    ///
    /// # Errors
    ///
    /// [`DurableError::Store`] or [`DurableError::Corrupt`].
    ///
    /// # Examples
    ///
    /// ```
    /// use sched_durable::store::{RedbStore, Store};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let store = RedbStore::create(dir.path().join("journal.redb"))?;
    /// assert_eq!(store.compact()?, 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn compact(&self) -> Result<u64, DurableError> {
        let kept = self.read(|_, _| true)?;
        let txn = self.db.begin_write().map_err(store)?;
        let dropped = {
            let mut log = txn.open_table(LOG).map_err(store)?;
            let mut processes = txn.open_table(PROCESSES).map_err(store)?;
            let mut before = 0u64;
            for row in log.iter().map_err(store)? {
                before += row.map_err(store)?.1.value().len() as u64;
            }
            log.retain(|_, _| false).map_err(store)?;
            let mut after = 0u64;
            for (batch, journal) in kept.iter().enumerate() {
                let batch = batch as u64;
                let entries: Vec<Entry<'_>> = journal
                    .records
                    .iter()
                    .enumerate()
                    .map(|(i, record)| Entry {
                        key: &journal.key,
                        seq: journal.first + i as u64,
                        record,
                    })
                    .collect();
                let bytes = postcard::to_stdvec(&entries).map_err(store)?;
                after += bytes.len() as u64;
                log.insert(batch, bytes.as_slice()).map_err(store)?;
                let meta = Meta {
                    kind: journal.created.kind.clone(),
                    args: journal.created.args.clone(),
                    ended: journal.ended,
                    since: batch,
                };
                let meta = postcard::to_stdvec(&meta).map_err(store)?;
                processes
                    .insert(journal.key.as_str(), meta.as_slice())
                    .map_err(store)?;
            }
            self.next_batch.store(kept.len() as u64, Relaxed);
            before.saturating_sub(after)
        };
        txn.commit().map_err(store)?;
        Ok(dropped)
    }
}

impl Store for RedbStore {
    fn append(&self, batch: &[Append]) -> Result<Vec<String>, DurableError> {
        let number = self.next_batch.load(Relaxed);
        let txn = self.db.begin_write().map_err(store)?;
        {
            let mut processes = txn.open_table(PROCESSES).map_err(store)?;
            let mut log = txn.open_table(LOG).map_err(store)?;
            let mut outbox = txn.open_table(OUTBOX).map_err(store)?;
            let mut snapshots = txn.open_table(SNAPSHOTS).map_err(store)?;
            let entries: Vec<Entry<'_>> = batch
                .iter()
                .map(|a| Entry {
                    key: &a.key,
                    seq: a.seq,
                    record: &a.record,
                })
                .collect();
            let bytes = postcard::to_stdvec(&entries).map_err(store)?;
            log.insert(number, bytes.as_slice()).map_err(store)?;
            for append in batch {
                if let Some(snapshot) = &append.snapshot {
                    snapshots
                        .insert(append.key.as_str(), (append.seq, snapshot.as_slice()))
                        .map_err(store)?;
                }
                for send in &append.sent {
                    // A send to a process whose journal has ended is
                    // dropped: nothing will ever take it.
                    if has_ended(&processes, &send.to)? {
                        continue;
                    }
                    outbox
                        .insert(
                            (send.to.as_str(), send.from.as_str(), send.seq),
                            send.body.as_slice(),
                        )
                        .map_err(store)?;
                }
                if append.ended {
                    // And so are those it never took.
                    let untaken: Vec<(String, u64)> = outbox
                        .range((append.key.as_str(), "", 0)..)
                        .map_err(store)?
                        .map_while(|entry| {
                            let (k, _) = entry.ok()?;
                            let (to, from, seq) = k.value();
                            (to == append.key).then(|| (from.to_owned(), seq))
                        })
                        .collect();
                    for (from, seq) in untaken {
                        outbox
                            .remove((append.key.as_str(), from.as_str(), seq))
                            .map_err(store)?;
                    }
                }
                for (from, seq) in &append.taken {
                    outbox
                        .remove((append.key.as_str(), from.as_str(), *seq))
                        .map_err(store)?;
                }
                let meta = match &append.created {
                    Some(created) => Some(Meta {
                        kind: created.kind.clone(),
                        args: created.args.clone(),
                        ended: append.ended,
                        since: number,
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
                        let mut meta: Meta = postcard::from_bytes(old.value()).map_err(corrupt)?;
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
        txn.commit().map_err(store)?;
        self.next_batch.store(number + 1, Relaxed);
        // One node writes this file: nothing is ever fenced.
        Ok(Vec::new())
    }

    fn running(&self) -> Result<Vec<Journal>, DurableError> {
        self.read(|_, meta| !meta.ended)
    }

    fn journal(&self, key: &str) -> Result<Option<Journal>, DurableError> {
        Ok(self.read(|k, _| k == key)?.pop())
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
            let ended = match processes.get(key).map_err(store)? {
                None => false,
                Some(meta) => {
                    let meta: Meta = postcard::from_bytes(meta.value()).map_err(corrupt)?;
                    meta.ended
                }
            };
            if ended {
                // Its records stay in the log, behind the `since` of any
                // later process of the same key, until `compact`.
                processes.remove(key).map_err(store)?;
                txn.open_table(SNAPSHOTS)
                    .map_err(store)?
                    .remove(key)
                    .map_err(store)?;
            }
            ended
        };
        txn.commit().map_err(store)?;
        Ok(forgotten)
    }

    fn outbox(&self) -> Result<Vec<Outgoing>, DurableError> {
        guarded(&self.path, || self.outbox_unguarded())
    }

    fn keys(&self) -> Result<Vec<(String, bool)>, DurableError> {
        let processes = guarded(&self.path, || self.processes())?;
        Ok(processes
            .into_iter()
            .map(|(key, _, ended)| (key, ended))
            .collect())
    }

    fn outbox_to(&self, key: &str) -> Result<Vec<Outgoing>, DurableError> {
        guarded(&self.path, || self.outbox_to_unguarded(key))
    }

    fn outbox_holds_earlier(&self, to: &str, from: &str, seq: u64) -> Result<bool, DurableError> {
        guarded(&self.path, || {
            self.outbox_holds_earlier_unguarded(to, from, seq)
        })
    }

    fn ended(&self, key: &str) -> Result<Option<bool>, DurableError> {
        guarded(&self.path, || self.ended_unguarded(key))
    }

    fn discard(&self, entries: &[(String, String, u64)]) -> Result<(), DurableError> {
        guarded(&self.path, || self.discard_unguarded(entries))
    }

    fn size(&self) -> Result<u64, DurableError> {
        guarded(&self.path, || self.size_unguarded())
    }

    /// One batch is one write transaction: all of it or none of it.
    fn atomic_batches(&self) -> bool {
        true
    }
}

impl RedbStore {
    fn outbox_unguarded(&self) -> Result<Vec<Outgoing>, DurableError> {
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

    fn outbox_to_unguarded(&self, key: &str) -> Result<Vec<Outgoing>, DurableError> {
        let txn = self.db.begin_read().map_err(store)?;
        let outbox = txn.open_table(OUTBOX).map_err(store)?;
        let mut out = Vec::new();
        // Keys sort by receiver first: its entries are one range.
        for entry in outbox.range((key, "", 0)..).map_err(store)? {
            let (k, v) = entry.map_err(store)?;
            let (to, from, seq) = k.value();
            if to != key {
                break;
            }
            out.push(Outgoing {
                from: from.to_owned(),
                to: to.to_owned(),
                seq,
                body: v.value().to_vec(),
            });
        }
        Ok(out)
    }

    fn outbox_holds_earlier_unguarded(
        &self,
        to: &str,
        from: &str,
        seq: u64,
    ) -> Result<bool, DurableError> {
        let txn = self.db.begin_read().map_err(store)?;
        let outbox = txn.open_table(OUTBOX).map_err(store)?;
        // Keys sort by receiver, sender, number: the earlier sends of
        // `from` to `to` are one range, looked up without reading it.
        let mut earlier = outbox
            .range((to, from, 0)..(to, from, seq))
            .map_err(store)?;
        Ok(earlier.next().transpose().map_err(store)?.is_some())
    }

    fn ended_unguarded(&self, key: &str) -> Result<Option<bool>, DurableError> {
        let txn = self.db.begin_read().map_err(store)?;
        let processes = txn.open_table(PROCESSES).map_err(store)?;
        let Some(meta) = processes.get(key).map_err(store)? else {
            return Ok(None);
        };
        let meta: Meta = postcard::from_bytes(meta.value())
            .map_err(|e| corrupt(format!("the entry of {key:?}: {e}")))?;
        Ok(Some(meta.ended))
    }

    fn discard_unguarded(&self, entries: &[(String, String, u64)]) -> Result<(), DurableError> {
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

    fn size_unguarded(&self) -> Result<u64, DurableError> {
        let txn = self.db.begin_write().map_err(store)?;
        let stats = txn.stats().map_err(store)?;
        txn.abort().map_err(store)?;
        Ok(stats.allocated_pages() * stats.page_size() as u64)
    }
}
