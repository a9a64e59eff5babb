//! Durable processes' journals in JetStream, for clusters: a
//! [`Store`](sched_durable::store::Store) of `sched-durable` that several nodes share, so that the
//! durable processes of a node that died are resumed by another, with at
//! most one running incarnation of each.
//!
//! ```no_run
//! use sched_durable::prelude::*;
//! use sched_durable_jetstream::JetStreamStore;
//!
//! // Node 1 of the cluster; every node opens its own with its number.
//! let store = JetStreamStore::builder("nats://127.0.0.1:4222", 1).open()?;
//! let durability = Durability::open(store);
//! // register the durable types, install, start the scheduler, then
//! // recover at start and every lease or so:
//! // durability.recover(&scheduler)?;
//! # drop(durability);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Why a crate of its own
//!
//! The store needs an async client (`async-nats`, re-exported as
//! [`async_nats`] for its `ConnectOptions`), a tokio runtime and a TLS
//! stack: a crate keeps them out of the dependency graph of anyone who
//! journals on one machine (`sched-durable`'s embedded store), and it
//! names nothing of the NATS transport (`relay-nats`): a cluster may use
//! either without the other. The store runs its client on a thread of its
//! own, with a single-threaded runtime.
//!
//! # Design
//!
//! Everything lives in one JetStream stream, `<prefix>-journals` (file
//! storage), and one key-value bucket, `<prefix>-journal-leases`:
//!
//! - **Journals.** A process's journal is the subject
//!   `<prefix>.journal.k<hex of its key>` (keys may hold any character;
//!   hex keeps the subject valid). Each message is one [`Store::append`](sched_durable::store::Store::append)
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
//!   [`forget`](sched_durable::store::Store::forget) starts clean). [`forget`](sched_durable::store::Store::forget)
//!   copies the journal's untaken sends to `<prefix>.outbox` before it
//!   purges the journal. A node's [`outbox`](sched_durable::store::Store::outbox) lists the sends
//!   whose receiver it owns, or which no running process will take (they
//!   are the ones `Durability::recover` may discard): never those of a
//!   receiver another node runs.
//! - **Live sends between nodes.** [`Store::watch_sends`](sched_durable::store::Store::watch_sends)
//!   (what `Durability::listen` calls) makes an ordered consumer of the
//!   journal subjects from the stream's end, before it returns, and hands
//!   over the sends of every message another incarnation writes, in
//!   stream order; a consumer that fails is made again from the sequence
//!   after the last one read. A receiver running on the listening node
//!   takes them at once; a send stored before the watch began waits in
//!   the outbox for its receiver's `spawn` or `recover`.
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
//! [`running`](sched_durable::store::Store::running) reads every journal. It returns those whose
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
//! and the first [`running`](sched_durable::store::Store::running) of another node after that
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
//! records of those keys with [`DurableError::Fenced`](sched_durable::DurableError::Fenced) (their processes
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
//! [`running`](sched_durable::store::Store::running) and [`outbox`](sched_durable::store::Store::outbox) read the
//! whole stream (an ordered consumer): they are meant for recovery, not
//! for every step. A journal's messages stay until it is
//! [`forget`](sched_durable::store::Store::forget)ten; discard markers stay. A message must fit
//! the server's `max_payload` (1 MiB by default).

mod append;
mod builder;
mod error;
mod incarnation;
mod lease;
mod message;
mod recovery;
mod scan;
mod store;
mod watch;

pub use async_nats;
pub use builder::{JetStreamStoreBuilder, DEFAULT_JOURNAL_LEASE};
pub use message::{JournalWriter, Written};
pub use store::JetStreamStore;
