//! Keyed processes: a process per key (a user, an order, a device),
//! addressed by its kind and key from any node, started on first use on
//! the node that holds the key's shard, and moved when nodes join or
//! leave.
//!
//! # How it works
//!
//! - **Shards.** A kind's keys fall into a fixed number of shards
//!   ([`ShardingConfig::shards`]) by a hash every node computes alike
//!   (`placement.rs`).
//! - **Placement.** Every node places each shard by rendezvous hashing
//!   over the members it sees live, itself included: a joining node takes
//!   about `1/(n+1)` of the shards, a leaving one gives up only its own.
//! - **Holding.** The node a shard is placed on claims the shard's
//!   cluster name (`shard.<kind>.<n>`, see [`ClusterNames`]) for its host
//!   process of the kind. The name's lease, not placement, decides who
//!   holds a shard: a claim succeeds only once no other node's lease on
//!   it lives. Senders route by the name's holder.
//! - **One live process per key.** A key's process runs only on the node
//!   holding its shard, and steps only while that node's lease is surely
//!   its own by its own clock (a quarter of the lease kept back): a node
//!   stopped or cut off past its lease finds its keyed processes fenced
//!   when it wakes, before anything else can tell it: they do not step,
//!   their messages unread, until a renewal makes the lease sure again
//!   (they read on) or the lease is surely lost (they end, what they had
//!   not read counted fenced). A node hands a shard off by cancelling its keys'
//!   processes, waiting for them to end, and only then releasing the
//!   name.
//! - **A lost lease keeps nothing for later.** What reached a holder
//!   after its lease ran out waits there until it knows: renewed after
//!   all, it is delivered; lost, it is counted fenced
//!   (`Kind::fence_waiting`). Passed on instead, it would reach the next
//!   holder behind later messages of the same sender.
//! - **Waiting, bounded.** While a shard has no known holder (being
//!   claimed, handed off, its node lost), its messages wait in a buffer
//!   on the sending node, in order, up to
//!   [`ShardingConfig::max_buffered`] messages in all; beyond it a send is
//!   refused with the message back ([`RefusedReason::BufferFull`]).
//! - **Passivation.** A key's process that has had no message for
//!   [`ShardingConfig::passivate_after`] is cancelled; its next message
//!   starts a new one.
//!
//! - **Cached routes.** An [`Entity`] keeps its key's route, and each
//!   thread keeps the routes its [`Sharded::send`]s found (`routes.rs`):
//!   while the key's process runs here, those sends are sends by PID. A
//!   stop can overtake such a send; the stopped process hands what
//!   reached it after its last step back to its key's next process
//!   (`Process::unread`, see `entity.rs`).
//!
//! - **Asks.** A question to a key ([`Sharded::ask`]) is routed as a
//!   message is, carrying its right to answer ([`ReplyTo::forward`]);
//!   between nodes it travels encoded in a `KeyedValue` envelope every
//!   codec carries, so the shard's holder reads the key without knowing
//!   the question's type.
//!
//! A keyed process is stopped (passivated or handed off) by a cancel,
//! which joins its mailbox behind every message sent to it before, and
//! which a step reads first among its events (the system lane): it should
//! finish in the step that brings
//! [`Event::Cancel`](sched::prelude::Event::Cancel), after reading the
//! rest of that step's events. Until it ends, messages for its key wait,
//! and no second process of the key starts.

mod config;
mod entity;
mod error;
mod host;
mod placement;
mod routes;
mod shard;
mod stats;

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};

use sched::actor::{Question, Reply, ReplyTo};
use sched::engine::AsContext;
use sched::prelude::*;
use sched::ReplyId;

pub use config::{ShardingConfig, DEFAULT_MAX_BUFFERED, DEFAULT_PASSIVATE_AFTER, DEFAULT_SHARDS};
pub use entity::Entity;
pub use error::{Refused, RefusedReason, ShardingError};
pub use shard::Keyed;
use stats::KindStats;
pub(crate) use stats::ShardingCounters;
pub use stats::{ShardStats, ShardingStats};

use crate::names::ClusterNames;
use crate::transport::NatsTransport;
use host::{Host, TICK};
use shard::{Kind, Waiting};

/// Keyed processes on this node: register each kind, then send to
/// `(kind, key)` from any node (see the module documentation of
/// `relay_nats::keyed`, and the guide's "Keyed processes").
///
/// Needs the transport's cluster names
/// ([`NatsConfig::cluster_names`](crate::NatsConfig::cluster_names)), and
/// `Keyed<M>` registered in every node's codec for each kind's message
/// type `M`.
///
/// # Examples
///
/// ```no_run
/// use relay_nats::{Codec, Keyed, NatsConfig, NatsTransport, Sharding, ShardingConfig};
/// use sched::prelude::*;
/// use std::sync::Arc;
///
/// #[derive(serde::Serialize, serde::Deserialize)]
/// struct Add(u64);
///
/// /// One per key: its running total.
/// struct Counter { total: u64 }
/// impl Process for Counter {
///     type Done = u64;
///     fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
///         let mut cancelled = false;
///         for event in events {
///             match event {
///                 Event::Message(m) => self.total += m.downcast::<Add>().map_or(0, |a| a.0),
///                 // Read first in its step: finish after the rest.
///                 Event::Cancel => cancelled = true,
///                 _ => {}
///             }
///         }
///         if cancelled {
///             out.finish(self.total);
///         }
///         Ok(())
///     }
/// }
///
/// let codec = Codec::new().register::<Keyed<Add>>("counter");
/// let config = NatsConfig::new("nats://127.0.0.1:4222")
///     .codec(codec)
///     .cluster_names("names");
/// let transport = Arc::new(NatsTransport::connect(config)?);
/// let node = Scheduler::builder().node(1).remote(transport.clone()).build();
/// node.start();
/// let sharding = Sharding::new(&node, transport, ShardingConfig::new())?;
/// let counters = sharding.register(&node, "counter", |_key: &str| Counter { total: 0 })?;
/// counters.send(&node, "user-42", Add(5))?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Sharding {
    names: Arc<ClusterNames>,
    transport: Arc<NatsTransport>,
    config: ShardingConfig,
    counters: Arc<ShardingCounters>,
    kinds: Mutex<HashMap<String, Arc<dyn KindStats>>>,
}

impl fmt::Debug for Sharding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sharding")
            .field("node", &self.transport.node())
            .field("config", &self.config)
            .finish()
    }
}

impl Sharding {
    /// Keyed processes for `context`'s engine, whose transport is
    /// `transport` (with cluster names on).
    ///
    /// # Errors
    ///
    /// [`ShardingError::Names`] if the transport has no cluster names, or
    /// their keeper cannot start.
    ///
    /// # Examples
    ///
    /// See [`Sharding`].
    pub fn new(
        context: &impl AsContext,
        transport: Arc<NatsTransport>,
        config: ShardingConfig,
    ) -> Result<Sharding, ShardingError> {
        let names = Arc::new(ClusterNames::new(context, Arc::clone(&transport))?);
        Ok(Sharding {
            names,
            transport,
            config,
            counters: Arc::default(),
            kinds: Mutex::new(HashMap::new()),
        })
    }

    /// Registers kind `kind`, whose process for a key `factory` makes,
    /// and starts this node's host of it. Every node of the cluster
    /// registers every kind, with the same name: shards are placed over
    /// all live nodes, and a shard placed on a node without the kind has
    /// no holder (its messages wait until the buffer refuses them).
    ///
    /// `factory` runs under the lock of the key's shard, on the thread
    /// that sends the key's first message: it must not send to keys of
    /// its own kind (make the process, and let it send from its steps). A
    /// factory that panics refuses that message
    /// ([`RefusedReason::NotStarted`]); the kind keeps running.
    ///
    /// # Errors
    ///
    /// [`ShardingError::InvalidKind`] for a name other than 1-64 ASCII
    /// letters, digits, `-` or `_`; [`ShardingError::AlreadyRegistered`];
    /// [`ShardingError::Names`] if the host process cannot start.
    ///
    /// # Examples
    ///
    /// See [`Sharding`].
    pub fn register<P, M, F>(
        &self,
        context: &impl AsContext,
        kind: &str,
        factory: F,
    ) -> Result<Sharded<M>, ShardingError>
    where
        P: Process,
        M: Send + 'static,
        F: Fn(&str) -> P + Send + Sync + 'static,
    {
        let valid = !kind.is_empty()
            && kind.len() <= 64
            && kind
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !valid {
            return Err(ShardingError::InvalidKind(kind.to_owned()));
        }
        let mut kinds = self.kinds.lock().unwrap_or_else(|e| e.into_inner());
        if kinds.contains_key(kind) {
            return Err(ShardingError::AlreadyRegistered(kind.to_owned()));
        }
        let shared: Arc<Kind<P, M>> = Arc::new(Kind::new(
            kind.to_owned(),
            self.config.shards,
            Box::new(factory),
            Arc::clone(&self.counters),
            self.config.max_buffered,
            Arc::clone(&self.transport),
        ));
        let idle_ticks = (self.config.passivate_after.as_millis() / TICK.as_millis()).max(1);
        let host = Host {
            kind: Arc::clone(&shared),
            names: Arc::clone(&self.names),
            idle_ticks: u64::try_from(idle_ticks).unwrap_or(u64::MAX),
            seen: Vec::new(),
        };
        let host = context
            .context()
            .spawn(host)
            .map_err(|e| ShardingError::Names(crate::kv::unavailable(e)))?
            .pid();
        let _ = shared.host.set(host);
        kinds.insert(kind.to_owned(), shared.clone() as Arc<dyn KindStats>);
        Ok(Sharded { kind: shared })
    }

    /// What this node's keyed processes count now.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn show(sharding: &relay_nats::Sharding) {
    /// let stats = sharding.stats();
    /// println!("{} shards, {} keys here", stats.shards_held, stats.keys_live);
    /// # }
    /// ```
    pub fn stats(&self) -> ShardingStats {
        let shards = self.shard_stats();
        let c = &self.counters;
        ShardingStats {
            shards_held: shards.iter().filter(|s| s.held).count() as u64,
            keys_live: shards.iter().map(|s| s.keys_live).sum(),
            started: c.started.load(Relaxed),
            passivated: c.passivated.load(Relaxed),
            claims: c.claims.load(Relaxed),
            hand_offs: c.hand_offs.load(Relaxed),
            shards_lost: c.shards_lost.load(Relaxed),
            forwarded: c.forwarded.load(Relaxed),
            refused: c.refused.load(Relaxed),
            fenced: c.fenced.load(Relaxed),
            fenced_processes: c.fenced_processes.load(Relaxed),
            handed_back: c.handed_back.load(Relaxed),
            buffered: c.buffered.load(Relaxed),
        }
    }

    /// Every shard of every kind registered here, by kind name and number:
    /// whether this node holds it, how many keys it runs here and how many
    /// of its messages wait here.
    /// Each shard is read under its lock, one after the other (a
    /// snapshot per shard, not of the whole node at one instant).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn show(sharding: &relay_nats::Sharding) {
    /// let hottest = sharding.shard_stats().into_iter().max_by_key(|s| s.keys_live);
    /// if let Some(shard) = hottest {
    ///     println!("shard {} of `{}` runs {} keys here", shard.shard, shard.kind, shard.keys_live);
    /// }
    /// # }
    /// ```
    pub fn shard_stats(&self) -> Vec<ShardStats> {
        let mut kinds: Vec<(String, Arc<dyn KindStats>)> = self
            .kinds
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(name, kind)| (name.clone(), Arc::clone(kind)))
            .collect();
        kinds.sort_by(|a, b| a.0.cmp(&b.0));
        let mut shards = Vec::new();
        for (_, kind) in kinds {
            kind.shards(&mut shards);
        }
        shards
    }
}

/// What a [`Sharded`] handle needs of its kind, whatever its process type.
trait KindSend<M>: Send + Sync {
    fn send(&self, cx: &sched::engine::Context, key: &str, message: M) -> Result<(), Refused<M>>;
    /// On refusal: why, the question, and the right to answer it.
    #[allow(clippy::type_complexity)]
    fn ask(
        &self,
        cx: &sched::engine::Context,
        key: &str,
        question: Payload,
        reply: ReplyTo,
    ) -> Result<(), (RefusedReason, Payload, ReplyTo)>;
    fn name(&self) -> &str;
    fn shard_count(&self) -> u32;
    fn live(&self) -> Vec<u32>;
    /// A send to `key` of shard `shard`, and the route an [`Entity`] may
    /// keep after it.
    fn send_caching(
        &self,
        cx: &sched::engine::Context,
        shard: u32,
        key: &str,
        message: M,
    ) -> (Result<(), Refused<M>>, Option<shard::CachedRoute>);
    /// Whether `shard` is held here with nothing waiting.
    fn is_open(&self, shard: u32) -> bool;
}

impl<P: Process, M: Send + 'static> KindSend<M> for Kind<P, M> {
    fn send(&self, cx: &sched::engine::Context, key: &str, message: M) -> Result<(), Refused<M>> {
        Kind::send(self, cx, key, message)
    }
    fn ask(
        &self,
        cx: &sched::engine::Context,
        key: &str,
        question: Payload,
        reply: ReplyTo,
    ) -> Result<(), (RefusedReason, Payload, ReplyTo)> {
        Kind::ask(self, cx, key, question, reply).map_err(|refused| match refused.message {
            Waiting::Ask { question, reply } => (refused.reason, question, reply),
            Waiting::Message(_) | Waiting::Carried(_) => {
                unreachable!("a question is refused as it went")
            }
        })
    }
    fn name(&self) -> &str {
        &self.name
    }
    fn shard_count(&self) -> u32 {
        Kind::shard_count(self)
    }
    fn live(&self) -> Vec<u32> {
        self.live_nodes()
    }
    fn send_caching(
        &self,
        cx: &sched::engine::Context,
        shard: u32,
        key: &str,
        message: M,
    ) -> (Result<(), Refused<M>>, Option<shard::CachedRoute>) {
        Kind::send_caching(self, cx, shard, key, message)
    }
    fn is_open(&self, shard: u32) -> bool {
        Kind::is_open(self, shard)
    }
}

/// The handle of one kind: send to a key's process, from outside or from
/// a step, on any node. Cheap to clone.
///
/// # Examples
///
/// See [`Sharding`].
pub struct Sharded<M> {
    kind: Arc<dyn KindSend<M>>,
}

impl<M> Clone for Sharded<M> {
    fn clone(&self) -> Self {
        Sharded {
            kind: Arc::clone(&self.kind),
        }
    }
}

impl<M> fmt::Debug for Sharded<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sharded")
            .field("kind", &self.kind.name())
            .finish()
    }
}

impl<M: Send + 'static> Sharded<M> {
    /// Sends `message` to the process of `key`: here, it goes to the
    /// key's process (started now if it has none); for a shard another
    /// node holds, to that node; while the shard has no known holder, it
    /// waits in order. Per sender and key, messages arrive in the order
    /// sent, except across a hand-off (see the guide). The calling
    /// thread keeps the route of a key whose process runs here (up to
    /// 4 096 keys): while it holds, the next send to the key is a send by
    /// PID, as through an [`Entity`].
    ///
    /// # Errors
    ///
    /// [`Refused`], with the message back: the buffer or the key's
    /// mailbox is full, its process could not start, or the codec cannot
    /// carry `Keyed<M>` to the shard's node.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn go(node: &sched::Scheduler, counters: &relay_nats::Sharded<u64>) {
    /// if let Err(refused) = counters.send(node, "user-42", 5) {
    ///     eprintln!("not sent ({}): {}", refused.reason, refused.message);
    /// }
    /// # }
    /// ```
    pub fn send(&self, context: &impl AsContext, key: &str, message: M) -> Result<(), Refused<M>> {
        self.kind.send(context.context(), key, message)
    }

    /// A handle on the process of `key` that keeps its route: while the
    /// key's process runs here, its sends are sends by PID, without the
    /// shard's lock or a lookup of the key (see [`Entity`]). Creating one
    /// looks nothing up; its first send does.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn go(node: &sched::Scheduler, counters: &relay_nats::Sharded<u64>) {
    /// let mut user = counters.entity("user-42");
    /// user.send(node, 5).expect("sent");
    /// # }
    /// ```
    pub fn entity(&self, key: &str) -> Entity<M> {
        Entity::new(Arc::clone(&self.kind), key.to_owned(), self.shard_of(key))
    }

    /// Asks the process of `key` `question`, from outside a step: routed
    /// as [`send`](Sharded::send) routes a message (started on first use,
    /// forwarded to the shard's holder, waiting while it has none), and
    /// answered through the returned [`Reply`]. The key's process receives
    /// an ordinary [`Event::Request`](sched::prelude::Event::Request) and
    /// answers with `request.take::<Q>()`. Across nodes, `Q` and
    /// `Q::Answer` must be registered in every node's codec (the key's
    /// holder may be any node). A question that waited and was then
    /// refused (its shard's holder could not take it), or that its
    /// process dropped unanswered, is answered
    /// [`AskError::NoReply`](sched::actor::AskError::NoReply); one whose
    /// process ended before reading it, `AskError::Unread`.
    ///
    /// # Errors
    ///
    /// [`Refused`], with the question back: as for a send, except that a
    /// question is not held to the key's mailbox capacity (never
    /// [`RefusedReason::MailboxFull`]).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use sched::prelude::*;
    /// use std::time::Duration;
    ///
    /// #[derive(serde::Serialize, serde::Deserialize)]
    /// struct Balance;
    /// impl Question for Balance {
    ///     type Answer = u64;
    /// }
    ///
    /// # fn go(node: &sched::Scheduler, accounts: &relay_nats::Sharded<u64>) -> Result<(), Box<dyn std::error::Error>> {
    /// let mut reply = accounts.ask(node, "user-42", Balance)?;
    /// let balance: u64 = reply.wait_timeout(Duration::from_secs(5))?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn ask<Q: Question>(
        &self,
        context: &impl AsContext,
        key: &str,
        question: Q,
    ) -> Result<Reply<Q::Answer>, Refused<Q>> {
        let cx = context.context();
        let (reply, answer_to) = cx.reply_pair::<Q>();
        self.kind
            .ask(cx, key, relay::into_payload(question), answer_to)
            .map_err(|(reason, question, answer_to)| {
                drop(answer_to);
                Refused {
                    message: question_back::<Q>(question),
                    reason,
                }
            })?;
        Ok(reply)
    }

    /// Asks the process of `key` `question` from a step, as
    /// [`ask`](Sharded::ask) does from outside: the answer arrives as
    /// [`Event::Reply`](sched::prelude::Event::Reply) with the returned
    /// [`ReplyId`], or `AskError::TimedOut` once `timeout` has passed.
    ///
    /// # Errors
    ///
    /// [`Refused`], with the question back, as for
    /// [`ask`](Sharded::ask); no `Event::Reply` comes for it.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use sched::prelude::*;
    /// use sched::actor::Replied;
    /// use sched::ReplyId;
    /// use std::time::Duration;
    ///
    /// #[derive(serde::Serialize, serde::Deserialize)]
    /// struct Balance;
    /// impl Question for Balance {
    ///     type Answer = u64;
    /// }
    ///
    /// /// Asks an account's balance, and finishes with it.
    /// struct Auditor { accounts: relay_nats::Sharded<u64>, asked: Option<ReplyId<u64>> }
    /// impl Process for Auditor {
    ///     type Done = u64;
    ///     fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
    ///         let asked = self.accounts.ask_from_step(out, "user-42", Balance, Duration::from_secs(5));
    ///         self.asked = Some(asked.map_err(|refused| refused.reason.to_string())?);
    ///         Ok(())
    ///     }
    ///     fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
    ///         let Some(asked) = self.asked else { return Ok(()) };
    ///         for event in events {
    ///             match asked.answer(event) {
    ///                 Replied::Answered(balance) => out.finish(balance),
    ///                 Replied::Failed(why) => return Err(why.into()),
    ///                 Replied::Other(_) => {}
    ///             }
    ///         }
    ///         Ok(())
    ///     }
    /// }
    /// ```
    pub fn ask_from_step<Q: Question>(
        &self,
        out: &mut Output<'_>,
        key: &str,
        question: Q,
        timeout: std::time::Duration,
    ) -> Result<ReplyId<Q::Answer>, Refused<Q>> {
        let (id, answer_to) = out.reply_pair::<Q>(timeout);
        match self
            .kind
            .ask(out.context(), key, relay::into_payload(question), answer_to)
        {
            Ok(()) => Ok(id),
            Err((reason, question, answer_to)) => {
                // Never asked: no `Event::Reply` comes for it.
                out.withdraw_reply(id, answer_to);
                Err(Refused {
                    message: question_back::<Q>(question),
                    reason,
                })
            }
        }
    }

    /// The kind's name.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn go(counters: &relay_nats::Sharded<u64>) {
    /// assert_eq!(counters.kind(), "counter");
    /// # }
    /// ```
    pub fn kind(&self) -> &str {
        self.kind.name()
    }

    /// The shard `key` falls in (the same on every node).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn go(counters: &relay_nats::Sharded<u64>) {
    /// assert_eq!(counters.shard_of("user-42"), counters.shard_of("user-42"));
    /// # }
    /// ```
    pub fn shard_of(&self, key: &str) -> u32 {
        placement::shard_of(key, self.kind.shard_count())
    }

    /// The node this node would place `key`'s shard on, by the members
    /// it sees live now. Where the key's process runs is decided by who
    /// holds the shard, which follows placement after a moment.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn go(counters: &relay_nats::Sharded<u64>) {
    /// println!("user-42 lives on node {:?}", counters.placed_on("user-42"));
    /// # }
    /// ```
    pub fn placed_on(&self, key: &str) -> Option<u32> {
        self.placed_among(key, &self.kind.live())
    }

    /// The node `key`'s shard is placed on when the nodes in `live` are
    /// the live ones: every node computes the same. `None` if `live` is
    /// empty.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn go(counters: &relay_nats::Sharded<u64>) {
    /// let now = counters.placed_among("user-42", &[1, 2, 3]);
    /// let after_a_join = counters.placed_among("user-42", &[1, 2, 3, 4]);
    /// // It moves only if it moves to the new node.
    /// assert!(after_a_join == now || after_a_join == Some(4));
    /// # }
    /// ```
    pub fn placed_among(&self, key: &str, live: &[u32]) -> Option<u32> {
        placement::owner(self.kind.name(), self.shard_of(key), live)
    }
}

/// A refused question, as the type it was asked as.
fn question_back<Q: Question>(question: Payload) -> Q {
    match question.downcast::<Q>() {
        Ok(question) => *question,
        // The untyped question: `Q` is `Payload` itself.
        Err(question) => match (Box::new(question) as Box<dyn std::any::Any>).downcast::<Q>() {
            Ok(question) => *question,
            Err(_) => unreachable!("a refused question comes back as it went"),
        },
    }
}
