//! Processes on different nodes message each other by PID over
//! [NATS](https://nats.io).
//!
//! A scheduler is one node; its node number (set with
//! `Scheduler::builder().node(n)`, unique in the cluster) is the first
//! half of every PID it allocates. With a [`NatsTransport`] attached, a
//! send to a PID of another node, from a step or from outside, is encoded
//! by the [`Codec`] and published on that node's subject
//! (`<prefix>.node.<n>`); each node subscribes to its own subject once, not
//! once per process, and delivers what arrives through its local routing
//! table, exactly like a local send. Local sends are untouched: they still
//! move the value, never bytes.
//!
//! # Why a crate of its own
//!
//! The transport needs an async client (`async-nats`), its tokio runtime and
//! a TLS stack. A cargo feature of `relay` would put them one flag away from
//! every user; a crate keeps them out of the dependency graph of anyone who
//! stays on one machine, and keeps `relay` and the engine free of any async
//! runtime (the client runs on a thread of the transport's own).
//!
//! # The codec boundary
//!
//! Only registered types cross nodes: [`Codec::register`] names a type
//! (serde, JSON on the wire) with a tag that every node uses. A payload of
//! another type is refused at the sender with
//! [`SendErrorKind::Unencodable`](sched::message::SendErrorKind::Unencodable), the
//! package handed back and an [`EncodeError`] as the cause; bytes that
//! cannot be decoded are rejected at the receiver with a [`DecodeError`],
//! logged and counted, and the receiver keeps running.
//!
//! # Example
//!
//! ```no_run
//! use relay_nats::{Codec, NatsConfig, NatsSchedulerExt};
//! use sched::prelude::*;
//!
//! #[derive(serde::Serialize, serde::Deserialize)]
//! struct Hello(String);
//!
//! let codec = Codec::new().register::<Hello>("hello");
//! let node = Scheduler::builder()
//!     .node(1)
//!     .nats(NatsConfig::new("nats://127.0.0.1:4222").codec(codec))?
//!     .build();
//! node.start();
//! // Process 42 of node 2 gets it, if node 2 is up and has it.
//! node.send(Pid::new(2, 42), Hello("from node 1".into()))?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Delivery is at most once, per-sender order is kept, and what is lost is
//! counted: see [`TransportStats`] and `docs/guide/distributed.md`.
//!
//! # Durable processes across nodes
//!
//! `JetStreamStore`, which keeps `sched-durable`'s journals in a JetStream
//! stream that the nodes share, is in its own crate,
//! `sched-durable-jetstream`: it names nothing of the transport.
//!
//! # Relations and names across nodes
//!
//! The transport carries the engines' signals too, so `monitor`, `link`
//! and `ask` work on PIDs of other nodes. It tells its engine when it
//! loses a node (its failure detector, a goodbye, a restart, frames lost,
//! its own connection dropped): every relation with that node then ends
//! with `ExitReason::NodeDown`. [`ClusterNames`] keeps names every node
//! finds, in a JetStream key-value bucket
//! ([`NatsConfig::cluster_names`]).
//!
//! ```no_run
//! use relay_nats::{ClusterNames, NatsConfig, NatsTransport};
//! use sched::prelude::*;
//! use std::sync::Arc;
//!
//! let config = NatsConfig::new("nats://127.0.0.1:4222").cluster_names("names");
//! let transport = Arc::new(NatsTransport::connect(config)?);
//! let node = Scheduler::builder().node(1).remote(transport.clone()).build();
//! node.start();
//! let names = ClusterNames::new(&node, transport)?;
//! if let Some(db) = names.whereis("db")? {
//!     // A process of any node: watch it, ask it.
//!     let monitor = node.context().monitor(db);
//!     println!("{:?}", monitor.try_take());
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod codec;
mod config;
mod error;
mod farewell;
mod io;
mod keyed;
mod kv;
mod lease_clock;
mod leases;
#[cfg(feature = "live")]
pub mod live;
mod membership;
#[cfg(feature = "metrics")]
pub mod metrics;
mod names;
mod reset;
mod scheduler_ext;
mod sequence;
mod shared;
mod stats;
mod transport;
mod wire;

pub use async_nats;
pub use codec::{Codec, Format, DEFAULT_MAX_MESSAGE_BYTES};
pub use config::{
    NatsConfig, Permissions, DEFAULT_DOWN_AFTER, DEFAULT_HEARTBEAT, DEFAULT_MAX_PENDING,
    DEFAULT_NAME_LEASE,
};
pub use error::{ClusterNameError, ConnectError, DecodeError, EncodeError, LinkError};
pub use keyed::{
    Entity, Keyed, Refused, RefusedReason, ShardStats, Sharded, Sharding, ShardingConfig,
    ShardingError, ShardingStats, DEFAULT_MAX_BUFFERED, DEFAULT_PASSIVATE_AFTER, DEFAULT_SHARDS,
};
pub use names::ClusterNames;
pub use scheduler_ext::NatsSchedulerExt;
pub use stats::TransportStats;
pub use transport::NatsTransport;

/// The guide's examples, run as doc tests (with the feature `live`, which
/// one of them serves figures with; CI tests with every feature).
#[cfg(all(doctest, feature = "live"))]
#[doc = include_str!("../../../docs/guide/distributed.md")]
struct DistributedDoctests;
