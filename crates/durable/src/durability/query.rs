//! What a `Durability` answers about its processes without changing
//! them: where one runs, what became of it, its journal's contents, and
//! the journal's figures; and `forget`, which drops a finished journal.

use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use sched::prelude::*;

use super::Durability;
use crate::error::DurableError;
use crate::inspect::Inspection;
use crate::status::{self, Status};

impl Durability {
    /// Counts a message a `StandIn` dropped (`DurableStats::stand_in_dropped`).
    pub(crate) fn count_stand_in_drop(&self) {
        self.shared.stand_in_dropped.fetch_add(1, Relaxed);
    }

    /// The PID of the running durable process `key`. A process that
    /// ended here (suspended, failed, killed with a write of its journal
    /// under way) keeps its key, and is still named here, until its last
    /// write has landed or failed: only then may the key's next process
    /// here ([`resume`](Durability::resume), [`spawn`](Durability::spawn))
    /// read the journal, so it never numbers a record as one still on its
    /// way. Wait for `None` before resuming a key you suspended.
    ///
    /// # Examples
    ///
    /// ```
    /// # use sched_durable::prelude::*;
    /// # let dir = tempfile::tempdir()?;
    /// # let durability = Durability::open(RedbStore::create(dir.path().join("j.redb"))?);
    /// assert_eq!(durability.pid("nobody"), None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn pid(&self, key: &str) -> Option<Pid> {
        self.shared.running_pid(key)
    }

    /// What became of the durable process `key`: running here, pending
    /// (suspended, not resumed, or on another node), done with its
    /// outcome, or failed; `None` if the store holds no journal under
    /// `key` (never spawned, or forgotten). Works after a restart, before
    /// or without a recovery. It reads the journal: with the embedded
    /// store, a scan of the store's log.
    ///
    /// # Errors
    ///
    /// [`DurableError::Store`] or [`DurableError::Corrupt`].
    ///
    /// # Examples
    ///
    /// ```
    /// use sched_durable::prelude::*;
    /// use sched_durable::Status;
    /// use std::time::Duration;
    ///
    /// struct Once;
    /// impl Durable for Once {
    ///     const KIND: &'static str = "once";
    ///     type Args = ();
    ///     type Message = ();
    ///     type Done = String;
    ///     fn create(_: ()) -> Self { Once }
    ///     fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
    ///         out.finish("done");
    ///         Ok(())
    ///     }
    ///     fn step(&mut self, _: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("j.redb");
    /// {
    ///     let durability = Durability::open(RedbStore::create(&path)?);
    ///     durability.register::<Once>();
    ///     let scheduler = durability.install(Scheduler::builder().workers(1)).build();
    ///     scheduler.start();
    ///     durability.spawn::<Once>(&scheduler, "once-1", ())?.wait()?;
    ///     scheduler.shutdown(Duration::from_secs(1));
    /// }
    /// // After a restart, without a scheduler:
    /// let durability = Durability::open(RedbStore::create(&path)?);
    /// let status = durability.status("once-1")?.expect("a journal");
    /// assert_eq!(status.outcome::<String>().transpose()?.as_deref(), Some("done"));
    /// assert_eq!(durability.keys()?, vec![("once-1".to_owned(), true)]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn status(&self, key: &str) -> Result<Option<Status>, DurableError> {
        if let Some(pid) = self.pid(key) {
            return Ok(Some(Status::Running(pid)));
        }
        match self.store.journal(key)? {
            None => Ok(None),
            Some(journal) => status::of_journal(&journal).map(Some),
        }
    }

    /// Every key the store holds a journal for (running or ended, not
    /// forgotten), in order, each with whether it has ended.
    ///
    /// # Errors
    ///
    /// [`DurableError::Store`] or [`DurableError::Corrupt`].
    ///
    /// # Examples
    ///
    /// See [`status`](Durability::status).
    pub fn keys(&self) -> Result<Vec<(String, bool)>, DurableError> {
        self.store.keys()
    }

    /// The journal of `key`, decoded: what it was created from, and each
    /// record's time, inputs and released effects.
    ///
    /// # Errors
    ///
    /// [`DurableError::Store`] or [`DurableError::Corrupt`].
    ///
    /// # Examples
    ///
    /// ```
    /// # use sched_durable::prelude::*;
    /// # let dir = tempfile::tempdir()?;
    /// # let durability = Durability::open(RedbStore::create(dir.path().join("j.redb"))?);
    /// assert!(durability.inspect("nobody")?.is_none());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn inspect(&self, key: &str) -> Result<Option<Inspection>, DurableError> {
        match self.store.journal(key)? {
            None => Ok(None),
            Some(journal) => Inspection::from_journal(&journal).map(Some),
        }
    }

    /// Deletes the journal of the ended process `key`, so that the key can
    /// be used again; a running process's journal is kept (`Ok(false)`).
    ///
    /// # Errors
    ///
    /// [`DurableError::Store`].
    ///
    /// # Examples
    ///
    /// ```
    /// # use sched_durable::prelude::*;
    /// # let dir = tempfile::tempdir()?;
    /// # let durability = Durability::open(RedbStore::create(dir.path().join("j.redb"))?);
    /// assert!(!durability.forget("nobody")?);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn forget(&self, key: &str) -> Result<bool, DurableError> {
        if self.shared.directory.contains_key(key) || self.store.ended(key)? != Some(true) {
            return Ok(false);
        }
        // Sends the ended process never took are not for a later process
        // of the same key (`channel.rs`, first contact).
        let stale: Vec<_> = self
            .store
            .outbox_to(key)?
            .into_iter()
            .map(|send| (send.to, send.from, send.seq))
            .collect();
        if !stale.is_empty() {
            self.store.discard(&stale)?;
        }
        self.store.forget(key)
    }

    /// The journal's figures: records, bytes and syncs written, the sync
    /// latency and the step-to-durable latency, copies dropped, sends no
    /// running process took.
    ///
    /// # Examples
    ///
    /// ```
    /// # use sched_durable::prelude::*;
    /// # let dir = tempfile::tempdir()?;
    /// # let durability = Durability::open(RedbStore::create(dir.path().join("j.redb"))?);
    /// let stats = durability.stats();
    /// assert_eq!(stats.records, 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn stats(&self) -> DurableStats {
        let c = &self.shared.writer.counters;
        DurableStats {
            records: c.records.load(Relaxed),
            bytes: c.bytes.load(Relaxed),
            syncs: c.syncs.load(Relaxed),
            failed_syncs: c.failed_syncs.load(Relaxed),
            largest_batch: c.largest_batch.load(Relaxed),
            sync_p50: c.sync.quantile(0.5),
            sync_p99: c.sync.quantile(0.99),
            sync_max: c.sync.max(),
            durable_p50: self.shared.durable.quantile(0.5),
            durable_p99: self.shared.durable.quantile(0.99),
            durable_max: self.shared.durable.max(),
            duplicates: self.shared.duplicates.load(Relaxed),
            undelivered: self.shared.undelivered.load(Relaxed),
            stand_in_dropped: self.shared.stand_in_dropped.load(Relaxed),
            held: self.shared.held.load(Relaxed),
            running: self.shared.directory.len() as u64,
            recovered: self.recovered.load(Relaxed),
            store_bytes: self.store.size().unwrap_or(0),
        }
    }
}

/// The journal's figures ([`Durability::stats`]).
///
/// # Examples
///
/// See [`Durability::stats`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DurableStats {
    /// Records written.
    pub records: u64,
    /// Record bytes written.
    pub bytes: u64,
    /// Batches written (one sync each).
    pub syncs: u64,
    /// Batches the store refused.
    pub failed_syncs: u64,
    /// The most records one sync wrote.
    pub largest_batch: u64,
    /// Sync latency, median (the upper bound of its bucket, within an
    /// eighth of the value).
    pub sync_p50: Duration,
    /// Sync latency, 99th percentile (same).
    pub sync_p99: Duration,
    /// The longest sync.
    pub sync_max: Duration,
    /// From a record's yield to its commit, median (same buckets).
    pub durable_p50: Duration,
    /// The same, 99th percentile.
    pub durable_p99: Duration,
    /// The same, longest.
    pub durable_max: Duration,
    /// Copies of sends a receiver had already taken, dropped.
    pub duplicates: u64,
    /// Sends released while their receiver did not run here: the outbox
    /// keeps each, and hands it over when the receiver is spawned or
    /// recovered.
    pub undelivered: u64,
    /// Messages [`StandIn`](crate::StandIn)s took and dropped, each with a
    /// warning in the log: of another type than their durable process
    /// takes, not encodable, or passed on and refused by the store for
    /// good (a write that failed, or one a shutdown left in doubt), and
    /// those a stand-in held when it ended abnormally (a router fencing
    /// it): taken, and not seen journaled (a write then in flight may
    /// still land, and its message be read by the key's next process as
    /// well). A message the fence refused, or whose process ended first,
    /// is passed on again, not counted here.
    pub stand_in_dropped: u64,
    /// Sends a receiver holds now because an earlier send of the same
    /// sender has not reached it yet (taken, in order, once it does).
    pub held: u64,
    /// Durable processes running now.
    pub running: u64,
    /// Durable processes resumed by `recover`.
    pub recovered: u64,
    /// The store's size.
    pub store_bytes: u64,
}
