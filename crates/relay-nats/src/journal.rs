//! Durable processes' journals in JetStream, for clusters: a
//! [`Store`] of `sched-durable` that several nodes share, so that the
//! durable processes of a node that died are resumed by another, with at
//! most one running incarnation of each (feature `durable`).
//!
//! # Design
//!
//! Everything lives in one JetStream stream, `<prefix>-journals` (file
//! storage), and one key-value bucket, `<prefix>-journal-leases`:
//!
//! - **Journals.** A process's journal is the subject
//!   `<prefix>.journal.k<hex of its key>` (keys may hold any character;
//!   hex keeps the subject valid). Each message is one [`Store::append`]
//!   batch's records of that process (one, in practice: a process has one
//!   record in flight), and carries everything the record changes: the
//!   record and its number, what the process was created from (on record
//!   0), whether it ended, the sends it released and the sends it took,
//!   and its writer (node and incarnation). So a record, its outbox
//!   entries and its metadata are one message: written together or not at
//!   all.
//! - **Outbox.** Derived, not stored apart: a send is in the outbox from
//!   the message that released it until a later message of its receiver
//!   takes it, or a later `<prefix>.discard` message discards it ("later"
//!   by stream sequence, so that a key used again after
//!   [`forget`](Store::forget) starts clean). [`forget`](Store::forget)
//!   copies the journal's untaken sends to `<prefix>.outbox` before it
//!   purges the journal. A node's [`outbox`](Store::outbox) lists the sends
//!   whose receiver it owns, or which no running process will take (they
//!   are the ones `Durability::recover` may discard): never those of a
//!   receiver another node runs.
//! - **Leases.** Each store handle is an *incarnation* of its node (a
//!   `u32`, like the scheduler's node number, unique among live nodes;
//!   the incarnation is new on every [`open`](JetStreamStoreBuilder::open)).
//!   It writes its lease, key `node-<n>` = its incarnation, in the bucket,
//!   whose `max_age` is the lease ([`DEFAULT_JOURNAL_LEASE`]); it renews
//!   it every third of the lease, each renewal naming the revision it last
//!   wrote. A lease is alive while the bucket holds `node-<n>` with that
//!   incarnation: the server drops it a lease after its last renewal, and
//!   a node restarted with the same number replaces it at once.
//!
//! # The fence
//!
//! A journal's owner is the writer of the last message on its subject.
//! Every append publishes with `Nats-Expected-Last-Subject-Sequence`: the
//! stream sequence of the last message this incarnation wrote or read on
//! that subject (0 for record 0: the subject must be empty). The server
//! refuses the message if anything else was written on the subject since:
//! `append` names the journal among the fenced keys it returns, and
//! nothing of that journal is written. An incarnation that neither created the journal nor
//! took it over is refused before publishing anything.
//!
//! [`running`](Store::running) reads every journal. It returns those whose
//! last writer is this incarnation, and takes over those whose writer's
//! lease is gone: it publishes a *takeover* message on the journal's
//! subject, expecting the sequence it read. Exactly one of a takeover and
//! the old owner's next append wins the subject: if the takeover does, the
//! old owner's append is refused from then on; if the append does, the
//! takeover fails and the journal is left to a later `running`. Two nodes
//! taking over one journal at once: one wins. So at most one incarnation
//! writes a journal at any moment, and an incarnation that lost one cannot
//! release any effect of a step it made after losing it (the journal's
//! write-ahead: its record is refused, so its effects are never released).
//!
//! # The lease bound
//!
//! A node that dies (or hangs, or is cut off from the server) stops
//! renewing; its lease lapses at most one lease after its last renewal,
//! and the first [`running`](Store::running) of another node after that
//! takes its journals over. A node that only hangs for longer than the
//! lease and comes back finds its appends fenced for every journal taken
//! over meanwhile, and keeps the others. A node dropped cleanly deletes its
//! lease (its journals can be taken over at once); a node restarted with
//! the same number takes over its predecessor's journals at once.
//!
//! # Batches, and a crash in the middle of one
//!
//! An append publishes one message per process of the batch, all at once
//! (pipelined, at most 256 acknowledgements outstanding), then waits for
//! every acknowledgement: one round trip per batch, not per record. It
//! returns `Ok` once every message is acknowledged (stored by the
//! stream's replicas, see below).
//!
//! JetStream has no transaction across subjects. Atomic batch publish
//! (ADR-50) exists from nats-server 2.12 on, but `async-nats` 0.51 has no
//! call for it, and the server caps an atomic batch at 1 000 messages by
//! default, while a batch may hold 8 192 records: so a batch is not
//! atomic across processes. Each process's part of it is one message,
//! hence atomic. A crash (or a failed acknowledgement) in the middle of a
//! batch leaves some processes' records durable and others' not; records
//! carry their numbers, so this is exactly as if the durable ones had been
//! written in one batch and the rest never: the records that were not
//! written are lost as a whole (their effects were never released, since
//! `append` did not return `Ok`), and recovery replays each journal to its
//! own last record. No journal is ever left with a hole, since a
//! process's records are written one batch after another.
//!
//! The same holds for a fenced batch: the messages of the other processes
//! of the batch are written independently, and `append` returns `Ok` with
//! the fenced keys (each is logged). `sched-durable`'s writer fails the
//! records of those keys with [`DurableError::Fenced`] (their processes
//! stop: another node runs them now) and completes the others.
//!
//! # Snapshots
//!
//! A record may carry its process's snapshot (the state after it); a read
//! of the journal gives the latest one with every record (the stream keeps
//! them all: the snapshot spares a recovery their replay, not their
//! reading). A message must fit the server's `max_payload` (1 MiB by
//! default), snapshot included.
//!
//! # fsync
//!
//! An acknowledged message is in the stream's file storage on every
//! replica the stream has (1 by default, [`replicas`](JetStreamStoreBuilder::replicas)),
//! but whether it is on disk depends on the server's `sync_interval`:
//!
//! - `jetstream { sync_interval: always }`: the server syncs every message
//!   before acknowledging it. Then an `Ok` append survives the server's
//!   machine losing power: the promise of the embedded store.
//! - the default (a sync every two minutes): an `Ok` append survives a
//!   crash of the server process (the data is in the operating system's
//!   cache), but the last interval of writes may be lost if the machine
//!   loses power — unless the stream has 3 replicas on separate machines,
//!   where an acknowledgement means a majority stored it.
//!
//! The server syncs per message, not per batch: group commit saves round
//! trips here, not syncs.
//!
//! # Costs
//!
//! [`running`](Store::running) and [`outbox`](Store::outbox) read the
//! whole stream (an ordered consumer): they are meant for recovery, not
//! for every step. A journal's messages stay until it is
//! [`forget`](Store::forget)ten; discard markers stay. A message must fit
//! the server's `max_payload` (1 MiB by default).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_nats::jetstream::consumer::{pull, DeliverPolicy};
use async_nats::jetstream::context::PublishErrorKind;
use async_nats::jetstream::kv::{self, CreateErrorKind, UpdateErrorKind};
use async_nats::jetstream::message::PublishMessage;
use async_nats::jetstream::stream::{self, LastRawMessageErrorKind, StorageType};
use async_nats::jetstream::{self, Context};
use async_nats::ConnectOptions;
use futures_util::StreamExt;
use sched_durable::store::{Append, Created, Journal, Outgoing, Store};
use sched_durable::DurableError;
use serde::{Deserialize, Serialize};

/// How long a node's journal lease lasts unless
/// [`lease`](JetStreamStoreBuilder::lease) says otherwise: a dead node's
/// journals are taken over at most this long after its last renewal.
///
/// # Examples
///
/// ```
/// assert_eq!(relay_nats::DEFAULT_JOURNAL_LEASE.as_secs(), 6);
/// ```
pub const DEFAULT_JOURNAL_LEASE: Duration = Duration::from_secs(6);

/// How long one store call waits for the server.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// The most acknowledgements an append waits for at once.
const WINDOW: usize = 256;

/// The most discarded entries one discard message holds.
const DISCARDS_PER_MESSAGE: usize = 1_000;

/// An incarnation of a node: the writer of a journal's message.
///
/// # Examples
///
/// ```
/// use relay_nats::JournalWriter;
///
/// let writer = JournalWriter { node: 2, incarnation: 0x1234 };
/// assert_eq!(writer.to_string(), "2@1234");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct JournalWriter {
    /// The node's number.
    pub node: u32,
    /// The store handle's incarnation (new on every open).
    pub incarnation: u64,
}

impl std::fmt::Display for JournalWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}@{:x}", self.node, self.incarnation)
    }
}

/// One message of a journal, as [`JetStreamStore::history`] lists it.
///
/// # Examples
///
/// ```no_run
/// use relay_nats::JetStreamStore;
///
/// let store = JetStreamStore::builder("nats://127.0.0.1:4222", 1).open()?;
/// for written in store.history("order-1")? {
///     println!("{} by {}: records {:?}", written.stream_seq, written.writer, written.records);
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// The message's sequence in the stream.
    pub stream_seq: u64,
    /// Who wrote it.
    pub writer: JournalWriter,
    /// The record numbers it holds; empty for a takeover.
    pub records: Vec<u64>,
}

/// One record inside a journal message.
#[derive(Debug, Serialize, Deserialize)]
struct Rec {
    seq: u64,
    created: Option<(String, Vec<u8>)>,
    ended: bool,
    record: Vec<u8>,
    /// (receiver, number, body).
    sent: Vec<(String, u64, Vec<u8>)>,
    /// (sender, number).
    taken: Vec<(String, u64)>,
    /// The process's state after this record, if a snapshot was taken.
    snapshot: Option<Vec<u8>>,
}

/// A message of the stream.
#[derive(Debug, Serialize, Deserialize)]
enum Entry {
    /// Records of one journal (on its subject).
    Records {
        key: String,
        writer: JournalWriter,
        records: Vec<Rec>,
    },
    /// `writer` owns the journal from here on (on its subject).
    Takeover { key: String, writer: JournalWriter },
    /// A send of a forgotten journal, not yet taken (on `<prefix>.outbox`):
    /// `origin` is the stream sequence of the message that released it.
    Carried { origin: u64, send: Mail },
    /// Sends discarded, as (receiver, sender, number) (on
    /// `<prefix>.discard`).
    Discarded { entries: Vec<(String, String, u64)> },
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Mail {
    from: String,
    to: String,
    seq: u64,
    body: Vec<u8>,
}

fn store_error(what: &str, e: impl std::fmt::Display) -> DurableError {
    DurableError::Store(format!("{what}: {e}"))
}

fn corrupt(what: impl std::fmt::Display) -> DurableError {
    DurableError::Corrupt(what.to_string())
}

/// The subject token of `key`: `k` and its bytes in hex.
fn token(key: &str) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(1 + 2 * key.len());
    out.push('k');
    for b in key.bytes() {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// A journal as a read of the stream assembles it.
#[derive(Debug)]
struct Assembled {
    created: Option<Created>,
    ended: bool,
    /// The latest snapshot: the record it follows, and its bytes.
    snapshot: Option<(u64, Vec<u8>)>,
    records: Vec<Vec<u8>>,
    /// The last message's writer and stream sequence.
    writer: JournalWriter,
    last: u64,
    /// (stream sequence, record numbers, writer) of each message.
    history: Vec<Written>,
    /// Sends released, with the sequence of the message that did.
    sent: Vec<(u64, Mail)>,
}

impl Assembled {
    fn journal(&self, key: &str) -> Result<Journal, DurableError> {
        let created = self
            .created
            .clone()
            .ok_or_else(|| corrupt(format!("the journal of {key:?} has no record 0")))?;
        Ok(Journal {
            key: key.to_owned(),
            created,
            ended: self.ended,
            // The stream keeps every record: the snapshot only spares the
            // recovery their replay.
            snapshot: self.snapshot.clone(),
            first: 0,
            records: self.records.clone(),
        })
    }
}

/// Everything a read of the stream found.
#[derive(Debug, Default)]
struct Scan {
    journals: BTreeMap<String, Assembled>,
    carried: Vec<(u64, Mail)>,
    /// (receiver, sender, number) → the latest stream sequence that took
    /// or discarded it.
    settled: HashMap<(String, String, u64), u64>,
}

impl Scan {
    fn add(&mut self, stream_seq: u64, entry: Entry) -> Result<(), DurableError> {
        match entry {
            Entry::Records {
                key,
                writer,
                records,
            } => {
                let journal = self.journals.entry(key.clone()).or_insert(Assembled {
                    created: None,
                    ended: false,
                    snapshot: None,
                    records: Vec::new(),
                    writer,
                    last: 0,
                    history: Vec::new(),
                    sent: Vec::new(),
                });
                let mut numbers = Vec::with_capacity(records.len());
                for rec in records {
                    if rec.seq != journal.records.len() as u64 {
                        return Err(corrupt(format!(
                            "the journal of {key:?} skips from record {} to {}",
                            journal.records.len(),
                            rec.seq
                        )));
                    }
                    if let Some((kind, args)) = rec.created {
                        journal.created = Some(Created { kind, args });
                    }
                    journal.ended |= rec.ended;
                    if let Some(snapshot) = rec.snapshot {
                        journal.snapshot = Some((rec.seq, snapshot));
                    }
                    for (to, seq, body) in rec.sent {
                        let send = Mail {
                            from: key.clone(),
                            to,
                            seq,
                            body,
                        };
                        journal.sent.push((stream_seq, send));
                    }
                    for (from, seq) in rec.taken {
                        let at = self.settled.entry((key.clone(), from, seq)).or_default();
                        *at = (*at).max(stream_seq);
                    }
                    journal.records.push(rec.record);
                    numbers.push(rec.seq);
                }
                journal.writer = writer;
                journal.last = stream_seq;
                journal.history.push(Written {
                    stream_seq,
                    writer,
                    records: numbers,
                });
            }
            Entry::Takeover { key, writer } => {
                let journal = self.journals.get_mut(&key).ok_or_else(|| {
                    corrupt(format!("a takeover of {key:?}, which has no records"))
                })?;
                journal.writer = writer;
                journal.last = stream_seq;
                journal.history.push(Written {
                    stream_seq,
                    writer,
                    records: Vec::new(),
                });
            }
            Entry::Carried { origin, send } => self.carried.push((origin, send)),
            Entry::Discarded { entries } => {
                for entry in entries {
                    let at = self.settled.entry(entry).or_default();
                    *at = (*at).max(stream_seq);
                }
            }
        }
        Ok(())
    }

    /// Whether the send released at `origin` is still in the outbox.
    fn untaken(&self, origin: u64, send: &Mail) -> bool {
        let id = (send.to.clone(), send.from.clone(), send.seq);
        self.settled.get(&id).is_none_or(|&at| at < origin)
    }
}

/// Who owns what, in this incarnation's view, and how to reach the
/// server.
struct Inner {
    js: Context,
    stream: stream::Stream,
    leases: kv::Store,
    prefix: String,
    me: JournalWriter,
    /// Journal key → the stream sequence of the last message this
    /// incarnation wrote or read on its subject, for the journals it owns.
    owned: Mutex<HashMap<String, u64>>,
    /// The revision of this incarnation's lease.
    lease_revision: AtomicU64,
    /// Whether the lease is renewed.
    renewing: AtomicBool,
}

impl Inner {
    fn subject(&self, key: &str) -> String {
        format!("{}.journal.{}", self.prefix, token(key))
    }

    fn lease_key(node: u32) -> String {
        format!("node-{node}")
    }

    fn owned(&self) -> std::sync::MutexGuard<'_, HashMap<String, u64>> {
        self.owned.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Notes that this incarnation owns `key` as of `stream_seq`.
    fn own(&self, key: &str, stream_seq: u64) {
        let mut owned = self.owned();
        let last = owned.entry(key.to_owned()).or_default();
        *last = (*last).max(stream_seq);
    }

    async fn publish(&self, subject: String, entry: &Entry, expected: Option<u64>) -> Publishing {
        let payload = match postcard::to_stdvec(entry) {
            Ok(bytes) => bytes,
            Err(e) => return Publishing::Failed(store_error("encoding a journal message", e)),
        };
        let mut message = PublishMessage::build().payload(payload.into());
        if let Some(expected) = expected {
            message = message.expected_last_subject_sequence(expected);
        }
        match self.js.send_publish(subject, message).await {
            Ok(ack) => Publishing::Sent(ack),
            Err(e) => Publishing::Failed(store_error("publishing to the journal stream", e)),
        }
    }

    /// Reads the messages of `filter` (a subject, or the whole stream).
    async fn scan(&self, filter: Option<String>) -> Result<Scan, DurableError> {
        let consumer = self
            .stream
            .create_consumer(pull::OrderedConfig {
                filter_subject: filter.unwrap_or_default(),
                deliver_policy: DeliverPolicy::All,
                ..Default::default()
            })
            .await
            .map_err(|e| store_error("reading the journal stream", e))?;
        let mut scan = Scan::default();
        if consumer.cached_info().num_pending == 0 {
            return Ok(scan);
        }
        let mut messages = consumer
            .messages()
            .await
            .map_err(|e| store_error("reading the journal stream", e))?;
        while let Some(message) = messages.next().await {
            let message = message.map_err(|e| store_error("reading the journal stream", e))?;
            let info = message
                .info()
                .map_err(|e| store_error("reading the journal stream", e))?;
            let (stream_seq, pending) = (info.stream_sequence, info.pending);
            let entry: Entry = postcard::from_bytes(&message.payload).map_err(|e| {
                corrupt(format!(
                    "message {stream_seq} of the journal stream is not a journal message: {e}"
                ))
            })?;
            scan.add(stream_seq, entry)?;
            if pending == 0 {
                break;
            }
        }
        Ok(scan)
    }

    async fn scan_journals(&self) -> Result<Scan, DurableError> {
        self.scan(Some(format!("{}.journal.>", self.prefix))).await
    }

    /// The incarnation whose lease on `node` is alive, if any.
    async fn lease_of(&self, node: u32) -> Result<Option<u64>, DurableError> {
        let entry = self
            .leases
            .entry(Inner::lease_key(node))
            .await
            .map_err(|e| store_error("reading a lease", e))?;
        Ok(entry
            .filter(|e| e.operation == kv::Operation::Put)
            .and_then(|e| std::str::from_utf8(&e.value).ok().map(str::to_owned))
            .and_then(|text| u64::from_str_radix(&text, 16).ok()))
    }

    async fn append(&self, batch: &[Append]) -> Result<Vec<String>, DurableError> {
        // One message per process, its records in order.
        let mut order: Vec<&str> = Vec::new();
        let mut by_key: HashMap<&str, Vec<&Append>> = HashMap::new();
        for append in batch {
            by_key
                .entry(append.key.as_str())
                .or_insert_with(|| {
                    order.push(append.key.as_str());
                    Vec::new()
                })
                .push(append);
        }
        let mut fenced: Vec<String> = Vec::new();
        let mut failed: Vec<DurableError> = Vec::new();
        let mut pending: VecDeque<(String, async_nats::jetstream::context::PublishAckFuture)> =
            VecDeque::new();
        for key in order {
            let appends = &by_key[key];
            let first = appends[0];
            let expected = if first.seq == 0 {
                // A new journal: its subject must be empty.
                Some(0)
            } else {
                self.owned().get(key).copied()
            };
            let Some(expected) = expected else {
                tracing::warn!(
                    key,
                    writer = %self.me,
                    "an append to a journal this incarnation neither created nor took over was refused"
                );
                fenced.push(key.to_owned());
                continue;
            };
            let entry = Entry::Records {
                key: key.to_owned(),
                writer: self.me,
                records: appends
                    .iter()
                    .map(|a| Rec {
                        seq: a.seq,
                        created: a.created.clone().map(|c| (c.kind, c.args)),
                        ended: a.ended,
                        record: a.record.clone(),
                        sent: a
                            .sent
                            .iter()
                            .map(|s| (s.to.clone(), s.seq, s.body.clone()))
                            .collect(),
                        taken: a.taken.clone(),
                        snapshot: a.snapshot.clone(),
                    })
                    .collect(),
            };
            if pending.len() == WINDOW {
                let (key, ack) = pending.pop_front().expect("the window is full");
                self.settle(key, ack.await, &mut fenced, &mut failed);
            }
            match self
                .publish(self.subject(key), &entry, Some(expected))
                .await
            {
                Publishing::Sent(ack) => pending.push_back((key.to_owned(), ack)),
                Publishing::Failed(e) => failed.push(e),
            }
        }
        while let Some((key, ack)) = pending.pop_front() {
            self.settle(key, ack.await, &mut fenced, &mut failed);
        }
        if !fenced.is_empty() {
            tracing::warn!(
                writer = %self.me,
                keys = ?fenced,
                "journal appends were fenced: another incarnation owns these journals now"
            );
        }
        if let Some(e) = failed.into_iter().next() {
            return Err(e);
        }
        Ok(fenced)
    }

    fn settle(
        &self,
        key: String,
        ack: Result<jetstream::publish::PublishAck, jetstream::context::PublishError>,
        fenced: &mut Vec<String>,
        failed: &mut Vec<DurableError>,
    ) {
        match ack {
            Ok(ack) => self.own(&key, ack.sequence),
            Err(e) if e.kind() == PublishErrorKind::WrongLastSequence => {
                self.owned().remove(&key);
                fenced.push(key);
            }
            Err(e) => failed.push(store_error(
                &format!("appending to the journal of {key:?}"),
                e,
            )),
        }
    }

    async fn running(&self) -> Result<Vec<Journal>, DurableError> {
        let scan = self.scan_journals().await?;
        let mut leases: HashMap<u32, Option<u64>> = HashMap::new();
        let mut out = Vec::new();
        for (key, assembled) in &scan.journals {
            if assembled.ended {
                continue;
            }
            if assembled.writer == self.me {
                self.own(key, assembled.last);
                out.push(assembled.journal(key)?);
                continue;
            }
            let owner = assembled.writer;
            let alive = match leases.get(&owner.node) {
                Some(lease) => *lease,
                None => {
                    let lease = self.lease_of(owner.node).await?;
                    leases.insert(owner.node, lease);
                    lease
                }
            };
            if alive == Some(owner.incarnation) {
                continue;
            }
            let takeover = Entry::Takeover {
                key: key.clone(),
                writer: self.me,
            };
            let ack = match self
                .publish(self.subject(key), &takeover, Some(assembled.last))
                .await
            {
                Publishing::Sent(ack) => ack.await,
                Publishing::Failed(e) => return Err(e),
            };
            match ack {
                Ok(ack) => {
                    tracing::info!(
                        key,
                        from = %owner,
                        to = %self.me,
                        "took over a durable process's journal: its owner's lease lapsed"
                    );
                    self.own(key, ack.sequence);
                    out.push(assembled.journal(key)?);
                }
                Err(e) if e.kind() == PublishErrorKind::WrongLastSequence => {
                    tracing::debug!(key, "a journal was written meanwhile: not taken over");
                }
                Err(e) => return Err(store_error("taking over a journal", e)),
            }
        }
        Ok(out)
    }

    async fn keys(&self) -> Result<Vec<(String, bool)>, DurableError> {
        let scan = self.scan_journals().await?;
        Ok(scan
            .journals
            .iter()
            .map(|(key, journal)| (key.clone(), journal.ended))
            .collect())
    }

    async fn outbox(&self) -> Result<Vec<Outgoing>, DurableError> {
        let scan = self.scan(None).await?;
        let sends = scan
            .journals
            .values()
            .flat_map(|j| j.sent.iter())
            .chain(scan.carried.iter());
        let mut out = Vec::new();
        for (origin, send) in sends {
            if !scan.untaken(*origin, send) {
                continue;
            }
            // A receiver another node runs (or will take over) gets its
            // sends from that node's recovery.
            let ours = match scan.journals.get(&send.to) {
                None => true,
                Some(receiver) => receiver.ended || receiver.writer == self.me,
            };
            if ours {
                out.push(Outgoing {
                    from: send.from.clone(),
                    to: send.to.clone(),
                    seq: send.seq,
                    body: send.body.clone(),
                });
            }
        }
        Ok(out)
    }

    async fn forget(&self, key: &str) -> Result<bool, DurableError> {
        let subject = self.subject(key);
        let scan = self.scan(Some(subject.clone())).await?;
        let Some(journal) = scan.journals.get(key) else {
            return Ok(false);
        };
        if !journal.ended {
            return Ok(false);
        }
        // Its sends nobody took yet outlive it.
        let sent = journal.sent.clone();
        let last = journal.last;
        if !sent.is_empty() {
            let everything = self.scan(None).await?;
            let outbox = format!("{}.outbox", self.prefix);
            for (origin, send) in sent {
                if everything.untaken(origin, &send) {
                    let entry = Entry::Carried { origin, send };
                    let ack = match self.publish(outbox.clone(), &entry, None).await {
                        Publishing::Sent(ack) => ack.await,
                        Publishing::Failed(e) => return Err(e),
                    };
                    ack.map_err(|e| store_error("keeping a forgotten journal's sends", e))?;
                }
            }
        }
        // Up to its last message only: a journal made again under the key
        // meanwhile is kept.
        self.stream
            .purge()
            .filter(subject)
            .sequence(last + 1)
            .await
            .map_err(|e| store_error("purging a journal", e))?;
        self.owned().remove(key);
        Ok(true)
    }

    async fn discard(&self, entries: &[(String, String, u64)]) -> Result<(), DurableError> {
        let subject = format!("{}.discard", self.prefix);
        for chunk in entries.chunks(DISCARDS_PER_MESSAGE) {
            let entry = Entry::Discarded {
                entries: chunk.to_vec(),
            };
            let ack = match self.publish(subject.clone(), &entry, None).await {
                Publishing::Sent(ack) => ack.await,
                Publishing::Failed(e) => return Err(e),
            };
            ack.map_err(|e| store_error("discarding outbox entries", e))?;
        }
        Ok(())
    }

    /// Renews this incarnation's lease: the revision it last wrote, or, if
    /// it lapsed, made again (unless another incarnation of this node
    /// holds it: then it stops). Returns whether to go on.
    async fn renew(&self) -> bool {
        let key = Inner::lease_key(self.me.node);
        let value = format!("{:x}", self.me.incarnation);
        let revision = self.lease_revision.load(Ordering::Acquire);
        match self
            .leases
            .update(&key, value.clone().into(), revision)
            .await
        {
            Ok(revision) => {
                self.lease_revision.store(revision, Ordering::Release);
                true
            }
            Err(e) if e.kind() == UpdateErrorKind::WrongLastRevision => {
                match self.leases.create(&key, value.into()).await {
                    Ok(revision) => {
                        tracing::warn!(
                            writer = %self.me,
                            "this node's journal lease had lapsed, and is renewed: journals taken over meanwhile are fenced"
                        );
                        self.lease_revision.store(revision, Ordering::Release);
                        true
                    }
                    Err(e) if e.kind() == CreateErrorKind::AlreadyExists => {
                        tracing::error!(
                            writer = %self.me,
                            "another incarnation of this node holds its journal lease: this one stops renewing, its journals will be taken over"
                        );
                        false
                    }
                    Err(e) => {
                        tracing::warn!(writer = %self.me, "the journal lease was not renewed: {e}");
                        true
                    }
                }
            }
            Err(e) => {
                tracing::warn!(writer = %self.me, "the journal lease was not renewed: {e}");
                true
            }
        }
    }

    /// Deletes this incarnation's lease, if it is still the one written.
    async fn release(&self) {
        let revision = self.lease_revision.load(Ordering::Acquire);
        let key = Inner::lease_key(self.me.node);
        match self
            .leases
            .delete_expect_revision(&key, Some(revision))
            .await
        {
            Ok(()) => tracing::debug!(writer = %self.me, "released the journal lease"),
            Err(e) => tracing::debug!(writer = %self.me, "the journal lease was not released: {e}"),
        }
    }
}

enum Publishing {
    Sent(async_nats::jetstream::context::PublishAckFuture),
    Failed(DurableError),
}

/// How to open a [`JetStreamStore`]: the server, the node, and the
/// options.
///
/// # Examples
///
/// ```no_run
/// use relay_nats::JetStreamStore;
/// use std::time::Duration;
///
/// let store = JetStreamStore::builder("nats://127.0.0.1:4222", 3)
///     .prefix("orders")
///     .lease(Duration::from_secs(10))
///     .replicas(3)
///     .open()?;
/// assert_eq!(store.writer().node, 3);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct JetStreamStoreBuilder {
    url: String,
    node: u32,
    prefix: String,
    lease: Duration,
    replicas: usize,
    timeout: Duration,
    options: Option<ConnectOptions>,
}

impl JetStreamStoreBuilder {
    /// The prefix of the stream's subjects and of the stream's and the
    /// lease bucket's names (`sched` unless set): letters, digits, `-` and
    /// `_`. Nodes sharing journals use the same prefix.
    ///
    /// # Examples
    ///
    /// See [`JetStreamStoreBuilder`].
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// The lease ([`DEFAULT_JOURNAL_LEASE`] unless set): the bucket's
    /// `max_age` when this store makes the bucket. An existing bucket keeps
    /// its own, and this node renews at a third of that.
    ///
    /// # Examples
    ///
    /// See [`JetStreamStoreBuilder`].
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// How many replicas the stream and the bucket get when this store
    /// makes them (1 unless set).
    ///
    /// # Examples
    ///
    /// See [`JetStreamStoreBuilder`].
    pub fn replicas(mut self, replicas: usize) -> Self {
        self.replicas = replicas.max(1);
        self
    }

    /// How long one store call waits for the server (10 s unless set);
    /// past it, the call fails with [`DurableError::Store`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use relay_nats::JetStreamStore;
    /// use std::time::Duration;
    ///
    /// let store = JetStreamStore::builder("nats://127.0.0.1:4222", 1)
    ///     .timeout(Duration::from_secs(2))
    ///     .open()?;
    /// # drop(store);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The client's connection options (credentials, TLS, a name).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use relay_nats::async_nats::ConnectOptions;
    /// use relay_nats::JetStreamStore;
    ///
    /// let options = ConnectOptions::with_user_and_password("node".into(), "secret".into());
    /// let store = JetStreamStore::builder("nats://127.0.0.1:4222", 1)
    ///     .options(options)
    ///     .open()?;
    /// # drop(store);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn options(mut self, options: ConnectOptions) -> Self {
        self.options = Some(options);
        self
    }

    /// Connects, makes the stream and the lease bucket if they do not
    /// exist, and writes this node's lease with a new incarnation (which
    /// replaces a lease of an earlier run of this node: its journals can be
    /// taken over at once).
    ///
    /// # Errors
    ///
    /// [`DurableError::Store`] when the prefix is not valid, the server
    /// cannot be reached, or it refused the stream, the bucket or the
    /// lease.
    ///
    /// # Examples
    ///
    /// See [`JetStreamStoreBuilder`].
    pub fn open(self) -> Result<JetStreamStore, DurableError> {
        let valid = !self.prefix.is_empty()
            && self
                .prefix
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !valid {
            return Err(DurableError::Store(format!(
                "the journal prefix {:?} is not letters, digits, '-' and '_'",
                self.prefix
            )));
        }
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| store_error("starting the journal store's runtime", e))?;
        let handle = runtime.handle().clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("relay-nats-journal".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let _ = stopped.await;
                });
            })
            .map_err(|e| store_error("starting the journal store's thread", e))?;
        let mut store = JetStreamStore {
            inner: None,
            handle,
            timeout: self.timeout,
            stop: Some(stop),
            thread: Some(thread),
        };
        let me = JournalWriter {
            node: self.node,
            incarnation: new_incarnation(),
        };
        let inner = store.block(connect(self, me))?;
        let inner = Arc::new(inner);
        store.inner = Some(inner.clone());
        let interval = store.block({
            let inner = inner.clone();
            async move {
                let status = inner
                    .leases
                    .status()
                    .await
                    .map_err(|e| store_error("reading the lease bucket", e))?;
                let lease = status.max_age();
                if lease.is_zero() {
                    return Err(DurableError::Store(
                        "the journal lease bucket has no max_age: leases would never lapse".into(),
                    ));
                }
                Ok(lease / 3)
            }
        })?;
        store.handle.spawn(async move {
            loop {
                tokio::time::sleep(interval).await;
                if !inner.renewing.load(Ordering::Acquire) || !inner.renew().await {
                    break;
                }
            }
        });
        tracing::info!(writer = %me, "the JetStream journal store is open");
        Ok(store)
    }
}

fn new_incarnation() -> u64 {
    static COUNT: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    nanos
        ^ (u64::from(std::process::id()) << 40)
        ^ COUNT
            .fetch_add(1, Ordering::Relaxed)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

async fn connect(config: JetStreamStoreBuilder, me: JournalWriter) -> Result<Inner, DurableError> {
    let options = config.options.unwrap_or_default();
    let client = options
        .connect(config.url.as_str())
        .await
        .map_err(|e| store_error("connecting to the NATS server", e))?;
    let js = jetstream::new(client);
    let prefix = config.prefix;
    let stream = js
        .get_or_create_stream(stream::Config {
            name: format!("{prefix}-journals"),
            description: Some("sched-durable: durable processes' journals".to_owned()),
            subjects: vec![
                format!("{prefix}.journal.>"),
                format!("{prefix}.outbox"),
                format!("{prefix}.discard"),
            ],
            storage: StorageType::File,
            num_replicas: config.replicas,
            ..Default::default()
        })
        .await
        .map_err(|e| store_error("opening the journal stream", e))?;
    let bucket = format!("{prefix}-journal-leases");
    let leases = match js.get_key_value(&bucket).await {
        Ok(leases) => leases,
        Err(_) => js
            .create_key_value(kv::Config {
                bucket: bucket.clone(),
                history: 1,
                max_age: config.lease,
                storage: StorageType::File,
                num_replicas: config.replicas,
                description: "sched-durable: which node incarnations are alive".to_owned(),
                ..Default::default()
            })
            .await
            .map_err(|e| store_error("opening the journal lease bucket", e))?,
    };
    let revision = leases
        .put(
            Inner::lease_key(me.node),
            format!("{:x}", me.incarnation).into(),
        )
        .await
        .map_err(|e| store_error("writing this node's journal lease", e))?;
    Ok(Inner {
        js,
        stream,
        leases,
        prefix,
        me,
        owned: Mutex::new(HashMap::new()),
        lease_revision: AtomicU64::new(revision),
        renewing: AtomicBool::new(true),
    })
}

/// Journals of durable processes in a JetStream stream, shared by the
/// nodes of a cluster: `sched-durable`'s [`Store`] for clusters (see the
/// [module documentation](self) for the design, the fence, the lease and
/// what is synced when).
///
/// Each node opens its own with its node number; a node's
/// `Durability::recover`, called at start and then periodically (every
/// lease or so), resumes the durable processes of nodes that died.
///
/// # Examples
///
/// ```no_run
/// use relay_nats::JetStreamStore;
/// use sched_durable::prelude::*;
///
/// let store = JetStreamStore::builder("nats://127.0.0.1:4222", 1).open()?;
/// let durability = Durability::open(store);
/// // register the durable types, install, start the scheduler, then:
/// // durability.recover(&scheduler)?;
/// # drop(durability);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct JetStreamStore {
    /// Set once connected.
    inner: Option<Arc<Inner>>,
    handle: tokio::runtime::Handle,
    timeout: Duration,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for JetStreamStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("JetStreamStore");
        if let Some(inner) = &self.inner {
            d.field("writer", &inner.me).field("prefix", &inner.prefix);
        }
        d.finish_non_exhaustive()
    }
}

impl JetStreamStore {
    /// A builder for the store of node `node` on the server at `url`.
    ///
    /// # Examples
    ///
    /// See [`JetStreamStoreBuilder`].
    pub fn builder(url: impl Into<String>, node: u32) -> JetStreamStoreBuilder {
        JetStreamStoreBuilder {
            url: url.into(),
            node,
            prefix: "sched".to_owned(),
            lease: DEFAULT_JOURNAL_LEASE,
            replicas: 1,
            timeout: DEFAULT_TIMEOUT,
            options: None,
        }
    }

    fn inner(&self) -> Arc<Inner> {
        self.inner
            .clone()
            .expect("a JetStreamStore is connected once opened")
    }

    /// Runs `work` on the store's thread and waits for it, for at most
    /// the store's timeout.
    fn block<T: Send + 'static>(
        &self,
        work: impl Future<Output = Result<T, DurableError>> + Send + 'static,
    ) -> Result<T, DurableError> {
        let (done, result) = std::sync::mpsc::channel();
        let timeout = self.timeout;
        self.handle.spawn(async move {
            let outcome = match tokio::time::timeout(timeout, work).await {
                Ok(outcome) => outcome,
                Err(_) => Err(DurableError::Store(format!(
                    "the NATS server did not answer within {timeout:?}"
                ))),
            };
            let _ = done.send(outcome);
        });
        result
            .recv()
            .map_err(|_| DurableError::Store("the journal store's thread has stopped".into()))?
    }

    /// This incarnation: the node number and the incarnation its messages
    /// carry.
    ///
    /// # Examples
    ///
    /// See [`JetStreamStoreBuilder`].
    pub fn writer(&self) -> JournalWriter {
        self.inner().me
    }

    /// Every message of `key`'s journal: who wrote it, and which records
    /// (a takeover holds none). Empty when the key is unknown.
    ///
    /// # Errors
    ///
    /// [`DurableError::Store`] or [`DurableError::Corrupt`].
    ///
    /// # Examples
    ///
    /// See [`Written`].
    pub fn history(&self, key: &str) -> Result<Vec<Written>, DurableError> {
        let inner = self.inner();
        let key = key.to_owned();
        self.block(async move {
            let mut scan = inner.scan(Some(inner.subject(&key))).await?;
            Ok(scan
                .journals
                .remove(&key)
                .map(|j| j.history)
                .unwrap_or_default())
        })
    }

    /// Stops renewing this node's lease, without deleting it: it lapses a
    /// lease from its last renewal, as if the node had hung, and other
    /// nodes' [`running`](Store::running) then take its journals over. The
    /// store still works; its appends to journals taken over are fenced.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use relay_nats::JetStreamStore;
    ///
    /// let store = JetStreamStore::builder("nats://127.0.0.1:4222", 1).open()?;
    /// store.stop_renewing();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn stop_renewing(&self) {
        self.inner().renewing.store(false, Ordering::Release);
        tracing::info!(writer = %self.writer(), "the journal lease is no longer renewed");
    }

    /// Stops renewing this node's lease and deletes it: other nodes'
    /// [`running`](Store::running) take its journals over at once. Dropping
    /// the store does the same.
    ///
    /// # Errors
    ///
    /// [`DurableError::Store`] when the server did not answer.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use relay_nats::JetStreamStore;
    ///
    /// let store = JetStreamStore::builder("nats://127.0.0.1:4222", 1).open()?;
    /// store.release_lease()?; // hand this node's processes over now
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn release_lease(&self) -> Result<(), DurableError> {
        let inner = self.inner();
        inner.renewing.store(false, Ordering::Release);
        self.block(async move {
            inner.release().await;
            Ok(())
        })
    }
}

impl Store for JetStreamStore {
    fn append(&self, batch: &[Append]) -> Result<Vec<String>, DurableError> {
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        let inner = self.inner();
        let batch = batch.to_vec();
        self.block(async move { inner.append(&batch).await })
    }

    fn running(&self) -> Result<Vec<Journal>, DurableError> {
        let inner = self.inner();
        self.block(async move { inner.running().await })
    }

    fn journal(&self, key: &str) -> Result<Option<Journal>, DurableError> {
        let inner = self.inner();
        let key = key.to_owned();
        self.block(async move {
            let scan = inner.scan(Some(inner.subject(&key))).await?;
            scan.journals.get(&key).map(|j| j.journal(&key)).transpose()
        })
    }

    fn contains(&self, key: &str) -> Result<bool, DurableError> {
        let inner = self.inner();
        let subject = inner.subject(key);
        self.block(async move {
            match inner.stream.get_last_raw_message_by_subject(&subject).await {
                Ok(_) => Ok(true),
                Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => Ok(false),
                Err(e) => Err(store_error("reading the journal stream", e)),
            }
        })
    }

    fn forget(&self, key: &str) -> Result<bool, DurableError> {
        let inner = self.inner();
        let key = key.to_owned();
        self.block(async move { inner.forget(&key).await })
    }

    fn outbox(&self) -> Result<Vec<Outgoing>, DurableError> {
        let inner = self.inner();
        self.block(async move { inner.outbox().await })
    }

    fn keys(&self) -> Result<Vec<(String, bool)>, DurableError> {
        let inner = self.inner();
        self.block(async move { inner.keys().await })
    }

    fn discard(&self, entries: &[(String, String, u64)]) -> Result<(), DurableError> {
        if entries.is_empty() {
            return Ok(());
        }
        let inner = self.inner();
        let entries = entries.to_vec();
        self.block(async move { inner.discard(&entries).await })
    }

    fn size(&self) -> Result<u64, DurableError> {
        let inner = self.inner();
        self.block(async move {
            let info = inner
                .stream
                .get_info()
                .await
                .map_err(|e| store_error("reading the journal stream's size", e))?;
            Ok(info.state.bytes)
        })
    }
}

impl Drop for JetStreamStore {
    fn drop(&mut self) {
        if let Some(inner) = self.inner.take() {
            inner.renewing.store(false, Ordering::Release);
            let (done, finished) = std::sync::mpsc::channel();
            self.handle.spawn(async move {
                let _ = tokio::time::timeout(Duration::from_secs(2), inner.release()).await;
                let _ = done.send(());
            });
            let _ = finished.recv_timeout(Duration::from_secs(3));
        }
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_become_valid_subject_tokens() {
        assert_eq!(token(""), "k");
        assert_eq!(token("a.b c"), "k612e622063");
        assert_eq!(token("ü>"), "kc3bc3e");
    }

    #[test]
    fn a_send_leaves_the_outbox_only_when_settled_after_it() {
        let mut scan = Scan::default();
        let send = Mail {
            from: "a".into(),
            to: "c".into(),
            seq: 1,
            body: vec![],
        };
        assert!(scan.untaken(5, &send));
        scan.settled.insert(("c".into(), "a".into(), 1), 7);
        assert!(!scan.untaken(5, &send), "taken after it was sent");
        assert!(scan.untaken(9, &send), "a send made again after a forget");
    }

    #[test]
    fn a_journal_with_a_hole_is_corrupt() {
        let writer = JournalWriter {
            node: 1,
            incarnation: 1,
        };
        let rec = |seq| Rec {
            seq,
            created: (seq == 0).then(|| ("k".to_owned(), vec![])),
            ended: false,
            record: vec![],
            sent: vec![],
            taken: vec![],
            snapshot: None,
        };
        let mut scan = Scan::default();
        let records = |r| Entry::Records {
            key: "x".into(),
            writer,
            records: vec![r],
        };
        scan.add(1, records(rec(0))).unwrap();
        assert!(matches!(
            scan.add(2, records(rec(2))),
            Err(DurableError::Corrupt(_))
        ));
    }
}
