//! Where journals are kept: the [`Store`] trait, and the embedded store.
//!
//! A store keeps, per durable process (by its key), what it was created
//! from (its registered type and arguments), its records in order, and
//! whether it has ended. The journal's writer hands it batches: one
//! [`Store::append`] call is one sync, and the whole batch is durable when
//! it returns `Ok`. A store is used by one writer thread at a time;
//! readers (recovery, inspection) may run beside it.
//!
//! [`RedbStore`] is the embedded default: one file, no server. Any other
//! store passes the same suite, [`conformance::check`].

pub mod conformance;
mod memory;
mod redb;

pub use self::memory::MemoryStore;
pub use self::redb::RedbStore;

use crate::error::DurableError;

/// One record to append to a process's journal.
///
/// # Examples
///
/// ```
/// use sched_durable::store::{Append, Created};
///
/// let first = Append {
///     key: "order-1".into(),
///     seq: 0,
///     record: vec![1, 2, 3],
///     created: Some(Created { kind: "Order".into(), args: vec![] }),
///     ended: false,
///     sent: vec![],
///     taken: vec![],
///     snapshot: None,
/// };
/// assert_eq!(first.seq, 0);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Append {
    /// The process's key.
    pub key: String,
    /// The record's number in the process's journal, from 0, without gaps.
    pub seq: u64,
    /// The encoded [`Record`](crate::Record).
    pub record: Vec<u8>,
    /// Set on the process's first record: what it was created from.
    pub created: Option<Created>,
    /// The process ended with this record.
    pub ended: bool,
    /// The sends this record released, for the outbox (their `from` is
    /// `key`). A store may drop those addressed to a process whose
    /// journal has ended, and those an ending record leaves untaken (the
    /// embedded and memory stores do; a recovery discards the rest).
    pub sent: Vec<Outgoing>,
    /// The sends this record took, as (sender, number): their outbox
    /// entries are removed.
    pub taken: Vec<(String, u64)>,
    /// The process's state after this record, when the durable layer
    /// took a snapshot: the store keeps the latest one, and may then drop
    /// the records it covers (this one and those before it).
    pub snapshot: Option<Vec<u8>>,
}

/// What [`Store::watch_sends`] hands the sends of other writers to.
///
/// # Examples
///
/// ```
/// use sched_durable::store::{Outgoing, SendWatcher};
///
/// let watcher: SendWatcher = Box::new(|sends: Vec<Outgoing>| {
///     for send in sends {
///         tracing::debug!(from = %send.from, to = %send.to, "a send from another node");
///     }
/// });
/// # drop(watcher);
/// ```
pub type SendWatcher = Box<dyn Fn(Vec<Outgoing>) + Send + Sync>;

/// A send between durable processes that its receiver has not journaled
/// yet: the outbox keeps it, so that a recovery can deliver it again even
/// when its sender has ended.
///
/// # Examples
///
/// ```
/// use sched_durable::store::Outgoing;
///
/// let send = Outgoing { from: "a".into(), to: "b".into(), seq: 1, body: vec![] };
/// assert_eq!(send.seq, 1);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outgoing {
    /// The sender's key.
    pub from: String,
    /// The receiver's key.
    pub to: String,
    /// The send's number (per sender).
    pub seq: u64,
    /// The message's bytes.
    pub body: Vec<u8>,
}

/// What a durable process was created from: enough to build it again.
///
/// # Examples
///
/// See [`Append`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Created {
    /// Its registered type's name ([`Durable::KIND`](crate::Durable::KIND)).
    pub kind: String,
    /// Its arguments, as postcard bytes.
    pub args: Vec<u8>,
}

/// One process's journal, as a store gives it back.
///
/// # Examples
///
/// ```
/// use sched_durable::store::{Journal, Store, RedbStore};
///
/// let dir = tempfile::tempdir()?;
/// let store = RedbStore::create(dir.path().join("journal.redb"))?;
/// let none: Option<Journal> = store.journal("nobody")?;
/// assert!(none.is_none());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Journal {
    /// The process's key.
    pub key: String,
    /// What it was created from.
    pub created: Created,
    /// Whether it has ended.
    pub ended: bool,
    /// The latest snapshot: the number of the record it follows, and its
    /// bytes. `None` if none was taken.
    pub snapshot: Option<(u64, Vec<u8>)>,
    /// The number of the first record in `records`: 0, or at most the
    /// record after the snapshot (a store may drop the records a snapshot
    /// covers).
    pub first: u64,
    /// Its records, in order, numbered from `first`.
    pub records: Vec<Vec<u8>>,
}

/// A place journals are kept. Implementations must make a whole
/// [`append`](Store::append) batch durable before returning `Ok` (a crash
/// after `Ok` loses none of it, except what `Ok` names as fenced), and
/// must never expose part of one process's records of a batch after a
/// crash during it (all of them or none; a batch may be cut between
/// processes, as if it were two batches: records carry their numbers, so
/// no journal gets a hole).
///
/// A store shared by several nodes (a cluster store) must also fence: a
/// journal has at most one writer, the incarnation that created it or
/// last took it over through [`running`](Store::running) (or
/// [`take_over`](Store::take_over)); an append from any other writes
/// nothing of that journal, and [`append`](Store::append) names its key
/// among the fenced ones it returns (the process whose records they were
/// then sees [`DurableError::Fenced`]). A store of one node (the embedded one) has one writer
/// by construction.
///
/// # Examples
///
/// ```
/// use sched_durable::store::{Append, Created, RedbStore, Store};
///
/// let dir = tempfile::tempdir()?;
/// let store = RedbStore::create(dir.path().join("journal.redb"))?;
/// store.append(&[Append {
///     key: "a".into(), seq: 0, record: vec![7],
///     created: Some(Created { kind: "K".into(), args: vec![] }), ended: false,
///     sent: vec![], taken: vec![], snapshot: None,
/// }])?;
/// assert_eq!(store.running()?.len(), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait Store: Send + Sync + 'static {
    /// Writes the whole batch durably, with one sync (or one round trip),
    /// and returns the keys whose records the fence refused (always none
    /// for a store of one node): every other record is durable.
    ///
    /// # Errors
    ///
    /// [`DurableError::Store`]: then nothing of the batch may be assumed
    /// durable.
    fn append(&self, batch: &[Append]) -> Result<Vec<String>, DurableError>;

    /// Every process whose journal has not ended and that this node is to
    /// run, records included. For a store of one node, every such
    /// process; for a cluster store, those this node owns and those whose
    /// owner is gone, which it takes over (fencing the old owner).
    ///
    /// # Errors
    ///
    /// [`DurableError::Store`] or [`DurableError::Corrupt`].
    fn running(&self) -> Result<Vec<Journal>, DurableError>;

    /// The journal of `key` if it has not ended, made this node's to
    /// write whoever wrote it last: the caller knows its last writer no
    /// longer runs it (a keyed process handed from node to node; see
    /// [`Durability::resume`](crate::Durability::resume)). `None` if there
    /// is no journal under `key` or it has ended. A cluster store fences
    /// the last writer as [`running`](Store::running) does: an append it
    /// makes after this is refused. The default, for a store of one node
    /// (one writer), reads the journal.
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
    /// assert!(store.take_over("nobody")?.is_none());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn take_over(&self, key: &str) -> Result<Option<Journal>, DurableError> {
        Ok(self.journal(key)?.filter(|journal| !journal.ended))
    }

    /// One process's journal, ended or not; `None` if the key is unknown.
    ///
    /// # Errors
    ///
    /// [`DurableError::Store`] or [`DurableError::Corrupt`].
    fn journal(&self, key: &str) -> Result<Option<Journal>, DurableError>;

    /// Every key the store holds a journal for (running or ended, not
    /// forgotten), in order, each with whether its journal has ended.
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
    /// assert!(store.keys()?.is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn keys(&self) -> Result<Vec<(String, bool)>, DurableError>;

    /// Whether a process with this key has a journal (ended or not).
    ///
    /// # Errors
    ///
    /// [`DurableError::Store`].
    fn contains(&self, key: &str) -> Result<bool, DurableError>;

    /// Deletes an ended process's journal, so that its key can be used
    /// again. Returns whether there was one; a running process's journal
    /// is left alone (`Ok(false)`).
    ///
    /// # Errors
    ///
    /// [`DurableError::Store`].
    fn forget(&self, key: &str) -> Result<bool, DurableError>;

    /// Every send in the outbox: released by its sender's record, not
    /// yet taken by a record of its receiver. A cluster store lists only
    /// the sends this node is to deliver (those to processes it runs or
    /// may take over): a recovery discards listed sends whose receiver
    /// does not run here.
    ///
    /// # Errors
    ///
    /// [`DurableError::Store`].
    fn outbox(&self) -> Result<Vec<Outgoing>, DurableError>;

    /// The sends in the outbox addressed to `key` (those of
    /// [`outbox`](Store::outbox) whose `to` is `key`). The default reads
    /// the whole outbox; a store that can look them up by receiver should.
    ///
    /// # Errors
    ///
    /// [`DurableError::Store`].
    ///
    /// # Examples
    ///
    /// ```
    /// use sched_durable::store::{RedbStore, Store};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let store = RedbStore::create(dir.path().join("journal.redb"))?;
    /// assert!(store.outbox_to("nobody")?.is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn outbox_to(&self, key: &str) -> Result<Vec<Outgoing>, DurableError> {
        let mut sends = self.outbox()?;
        sends.retain(|send| send.to == key);
        Ok(sends)
    }

    /// Whether the outbox holds a send from `from` to `to` numbered below
    /// `seq`: what a receiver asks when a sender's message reaches it
    /// before the sends that came before it (after a restart, the first
    /// message of each sender). The default reads
    /// [`outbox_to`](Store::outbox_to); a store that keeps the outbox in
    /// order by receiver, sender and number should look up that range
    /// alone: a receiver with many senders asks once per sender, and
    /// reading all its sends each time kept a recovery of 10 000 senders to
    /// one receiver reading for more than ten minutes.
    ///
    /// # Errors
    ///
    /// [`DurableError::Store`].
    ///
    /// # Examples
    ///
    /// ```
    /// use sched_durable::store::{RedbStore, Store};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let store = RedbStore::create(dir.path().join("journal.redb"))?;
    /// assert!(!store.outbox_holds_earlier("counter", "w1", 5)?);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn outbox_holds_earlier(&self, to: &str, from: &str, seq: u64) -> Result<bool, DurableError> {
        Ok(self
            .outbox_to(to)?
            .iter()
            .any(|send| send.from == from && send.seq < seq))
    }

    /// Whether the journal of `key` has ended: `None` if the store holds
    /// no journal under `key`. The default reads the journal.
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
    /// assert_eq!(store.ended("nobody")?, None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn ended(&self, key: &str) -> Result<Option<bool>, DurableError> {
        Ok(self.journal(key)?.map(|journal| journal.ended))
    }

    /// Removes outbox entries, as (receiver, sender, number): sends whose
    /// receiver will never take them.
    ///
    /// # Errors
    ///
    /// [`DurableError::Store`].
    fn discard(&self, entries: &[(String, String, u64)]) -> Result<(), DurableError>;

    /// Whether every [`append`](Store::append) is all or nothing across
    /// the whole batch: after it returns `Ok`, every record of it is
    /// durable (none fenced); after a crash or an error, either every
    /// record of it is or none is. Then the journal's writer may put a
    /// record in the same batch as a record of another process whose send
    /// it stepped on before that one was durable (a chain of durable sends
    /// on one node shares one sync). The default, `false`, is always safe:
    /// such a record then waits for the next batch.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched_durable::store::{MemoryStore, RedbStore, Store};
    ///
    /// let dir = tempfile::tempdir()?;
    /// assert!(RedbStore::create(dir.path().join("journal.redb"))?.atomic_batches());
    /// assert!(MemoryStore::new().atomic_batches());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn atomic_batches(&self) -> bool {
        false
    }

    /// Starts handing `sends` the sends that records of *other writers*
    /// release (the other nodes of a store a cluster shares), in the
    /// order they were written, as the store learns of them, for as long
    /// as the store lives. A node's own sends are not handed over (its
    /// own processes deliver them). `Durability::listen` uses it to
    /// deliver a send from another node to a receiver running here at
    /// once, instead of at the receiver's next `recover`. Every send
    /// stored after this returns is handed over. `sends` may run on a
    /// thread of the store's: the store must not wait for it (a caller of
    /// the store may hold a lock `sends` waits for), and it must not call
    /// the store.
    ///
    /// Returns `Ok(false)` when nobody else writes to the store (the
    /// default, for a store of one node): there is nothing to hand over.
    ///
    /// # Errors
    ///
    /// [`DurableError::Store`] if the watch could not start.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched_durable::store::{MemoryStore, Store};
    ///
    /// // One node's store: nobody else writes to it.
    /// assert!(!MemoryStore::new().watch_sends(Box::new(|_sends| {}))?);
    /// # Ok::<(), sched_durable::DurableError>(())
    /// ```
    fn watch_sends(&self, sends: SendWatcher) -> Result<bool, DurableError> {
        drop(sends);
        Ok(false)
    }

    /// How many bytes the store holds on disk (or in use), for the
    /// metrics.
    ///
    /// # Errors
    ///
    /// [`DurableError::Store`].
    fn size(&self) -> Result<u64, DurableError>;
}
