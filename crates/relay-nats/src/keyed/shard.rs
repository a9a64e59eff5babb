//! One kind's shards on this node, and how a message for a key is
//! delivered: to the key's process here, to the node that holds its
//! shard, or into the shard's buffer until one of those is known.
//!
//! Each shard is behind its own lock, taken by every sender of a key of
//! it (from outside or from a step, with their own engine context) and by
//! the kind's host process (`host.rs`), which places, claims, hands off
//! and passivates. Under the lock a sender either delivers or buffers:
//! so while a shard's buffer holds anything, every later message of the
//! shard joins it, behind, and a buffer is emptied front first. That is
//! what keeps each sender's order per key through a claim or a hand-off.

use std::collections::VecDeque;
use std::sync::atomic::{
    AtomicBool, AtomicU64, Ordering::Acquire, Ordering::Relaxed, Ordering::Release,
};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use relay::{Package, Payload, Pid, Receipt};
use rustc_hash::FxHashMap;
use sched::actor::ReplyTo;
use sched::engine::Context;
use sched::message::{Resolved, SendError, SendErrorKind};
use sched::prelude::*;
use serde::{Deserialize, Serialize};

use super::error::{Refused, RefusedReason};
use super::placement::shard_of;
use super::routes;
use super::ShardingCounters;
use crate::codec::KeyedValue;
use crate::leases::LeaseClock;
use crate::transport::NatsTransport;

/// A message for the process of `key`, as it crosses to the node that
/// holds the key's shard. Every node registers it in its codec, with one
/// tag per kind: `Codec::new().register::<Keyed<Add>>("counter")`.
///
/// # Examples
///
/// ```
/// use relay_nats::{Codec, Keyed};
///
/// #[derive(serde::Serialize, serde::Deserialize)]
/// struct Add(u64);
///
/// let codec = Codec::new().register::<Keyed<Add>>("counter");
/// # drop(codec);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Keyed<M> {
    /// The key whose process the message is for.
    pub key: String,
    /// The message.
    pub message: M,
}

/// What waits for, or goes to, a key's process: a message, or a question
/// with the right to answer it (an ask to the key).
pub(crate) enum Waiting<M> {
    Message(M),
    /// A message that came from another node, still in a package that
    /// carries the transport's receipt (an `M`, from the host): it goes
    /// on as that package, so that the node confirms it to its sender
    /// only once the key's process takes it (or it is dropped here).
    Carried(Package),
    Ask {
        question: Payload,
        reply: ReplyTo,
    },
}

/// Where a shard's messages go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route {
    /// Nobody known to hold it: messages wait in the buffer.
    Unknown,
    /// This node holds it: messages go to the keys' processes here, while
    /// the lease clock is valid.
    Here,
    /// This node is handing it off: its processes are stopping, then the
    /// name is released. Messages wait in the buffer.
    Leaving,
    /// The host process of the node that holds it.
    There(Pid),
}

/// What a key's running process shares with those who send to it
/// without the shard's lock (an [`Entity`](super::Entity)'s cached route)
/// and with its host.
pub(crate) struct Link {
    /// The lease clock the process steps under (its shard's, when it
    /// started).
    pub(crate) clock: Arc<LeaseClock>,
    /// Set by the host, under the shard's lock, before it cancels the
    /// process: a cached route is stale from then on, and what reaches
    /// the process after its last step is handed back to the shard. Also
    /// set when the process is dropped, however it ended, so that a
    /// cached route does not outlive it (`Process::unread` has run by
    /// then, and read the host's mark alone).
    pub(crate) stopping: AtomicBool,
    /// Set by the process at each step, cleared by the host's tick: a
    /// key whose messages come by a cached route is not idle.
    pub(crate) stepped: AtomicBool,
}

impl Link {
    pub(crate) fn new(clock: Arc<LeaseClock>) -> Link {
        Link {
            clock,
            stopping: AtomicBool::new(false),
            stepped: AtomicBool::new(false),
        }
    }
}

/// What an [`Entity`](super::Entity) keeps of a key's route: its running
/// process here, resolved (a send through it skips the process table),
/// and what that process shares.
pub(crate) type CachedRoute = (Resolved, Arc<Link>);

/// A key's process on this node.
pub(crate) enum Child<M> {
    /// Running; `touched` is the host's tick of its last message (or of
    /// its last step, for messages that came by a cached route).
    Live {
        pid: Pid,
        touched: u64,
        link: Arc<Link>,
    },
    /// Cancelled (passivated or handed off), not yet ended: messages for
    /// the key wait here, to go to its next process, never beside this
    /// one.
    Stopping {
        pid: Pid,
        queued: VecDeque<Waiting<M>>,
    },
}

impl<M> Child<M> {
    pub(crate) fn pid(&self) -> Pid {
        match self {
            Child::Live { pid, .. } | Child::Stopping { pid, .. } => *pid,
        }
    }
}

/// One shard of one kind on this node.
pub(crate) struct Shard<M> {
    pub(crate) route: Route,
    /// This node's lease on the shard's name; its processes step only
    /// while it is valid. A new clock for every claim.
    pub(crate) clock: Arc<LeaseClock>,
    /// By key; FxHash, as the keys are the user's and short (the shards
    /// already spread them by a hash of their own).
    pub(crate) children: FxHashMap<String, Child<M>>,
    pub(crate) buffer: VecDeque<(String, Waiting<M>)>,
    /// A claim, a lookup or a release of the shard's name is on its way.
    pub(crate) claiming: bool,
    pub(crate) resolving: bool,
    pub(crate) releasing: bool,
}

impl<M> Shard<M> {
    fn new() -> Shard<M> {
        Shard {
            route: Route::Unknown,
            clock: Arc::new(LeaseClock::new()),
            children: FxHashMap::default(),
            buffer: VecDeque::new(),
            claiming: false,
            resolving: false,
            releasing: false,
        }
    }
}

/// What a kind's process wrapper tells the host when it ends.
pub(crate) struct EndNote {
    pub(crate) transport: Arc<NatsTransport>,
    pub(crate) host: Pid,
    pub(crate) shard: u32,
    pub(crate) key: String,
}

/// One shard behind its lock, and whether a cached route may bypass the
/// lock: `open` is true exactly when, at the lock's last release, the
/// shard was held here with nothing in its buffer (it is written by
/// [`ShardGuard`]'s drop, so no path that changes either can forget it).
pub(crate) struct ShardCell<M> {
    lock: Mutex<Shard<M>>,
    pub(crate) open: AtomicBool,
}

/// The shard's lock, held; on release it writes the shard's `open`.
pub(crate) struct ShardGuard<'a, M> {
    shard: MutexGuard<'a, Shard<M>>,
    open: &'a AtomicBool,
}

impl<M> std::ops::Deref for ShardGuard<'_, M> {
    type Target = Shard<M>;
    fn deref(&self) -> &Shard<M> {
        &self.shard
    }
}

impl<M> std::ops::DerefMut for ShardGuard<'_, M> {
    fn deref_mut(&mut self) -> &mut Shard<M> {
        &mut self.shard
    }
}

impl<M> Drop for ShardGuard<'_, M> {
    fn drop(&mut self) {
        let open = self.shard.route == Route::Here && self.shard.buffer.is_empty();
        // Release, before the unlock: a sender that reads `open` false
        // after something was buffered sees the buffer's write (it then
        // takes the lock anyway); one that reads it true after a flush
        // sends behind what the flush delivered, as the flush's sends
        // happened before this store.
        if self.open.load(Relaxed) != open {
            self.open.store(open, Release);
        }
    }
}

/// One kind of keyed process on this node: its shards, its factory and
/// its host process.
pub(crate) struct Kind<P, M> {
    /// Its identity in the threads' route caches (`routes.rs`).
    pub(crate) id: u64,
    pub(crate) name: String,
    pub(crate) shards: Box<[ShardCell<M>]>,
    pub(crate) factory: Box<dyn Fn(&str) -> P + Send + Sync>,
    /// The host's tick count: what `Child::Live::touched` is measured in.
    pub(crate) epoch: AtomicU64,
    pub(crate) host: OnceLock<Pid>,
    pub(crate) counters: Arc<ShardingCounters>,
    pub(crate) max_buffered: u64,
    pub(crate) transport: Arc<NatsTransport>,
}

impl<P: Process, M: Send + 'static> Kind<P, M> {
    pub(crate) fn new(
        name: String,
        shards: u32,
        factory: Box<dyn Fn(&str) -> P + Send + Sync>,
        counters: Arc<ShardingCounters>,
        max_buffered: u64,
        transport: Arc<NatsTransport>,
    ) -> Kind<P, M> {
        Kind {
            id: routes::next_kind_id(),
            name,
            shards: (0..shards)
                .map(|_| ShardCell {
                    lock: Mutex::new(Shard::new()),
                    open: AtomicBool::new(false),
                })
                .collect(),
            factory,
            epoch: AtomicU64::new(0),
            host: OnceLock::new(),
            counters,
            max_buffered,
            transport,
        }
    }

    /// The nodes shards are placed over: the members this node sees
    /// live, and itself, in order.
    pub(crate) fn live_nodes(&self) -> Vec<u32> {
        let inner = self.transport.inner();
        let mut live = inner.members.live();
        live.push(inner.node());
        live.sort_unstable();
        live
    }

    pub(crate) fn shard_count(&self) -> u32 {
        u32::try_from(self.shards.len()).unwrap_or(u32::MAX)
    }

    /// The cluster name of shard `index`: its holder is the host process
    /// of the node that holds it.
    pub(crate) fn shard_name(&self, index: u32) -> String {
        format!("shard.{}.{index}", self.name)
    }

    pub(crate) fn lock(&self, index: u32) -> ShardGuard<'_, M> {
        let cell = &self.shards[index as usize];
        ShardGuard {
            shard: cell.lock.lock().unwrap_or_else(PoisonError::into_inner),
            open: &cell.open,
        }
    }

    /// Sends `message` to the process of `key`, wherever it lives: by
    /// PID on this thread's cached route to it while that holds
    /// (`routes.rs`), else under the shard's lock, learning the route.
    pub(crate) fn send(&self, cx: &Context, key: &str, message: M) -> Result<(), Refused<M>> {
        let hash = routes::hash(key);
        // Ended, or full, or no route: the general path starts the key's
        // next process, or refuses with the reason.
        let message = match routes::send_cached(
            self.id,
            key,
            hash,
            |shard| self.is_open(shard),
            message,
            |resolved, message| cx.send(resolved, message).map_err(message_back::<M>),
        ) {
            Ok(()) => return Ok(()),
            Err(message) => message,
        };
        let index = shard_of(key, self.shard_count());
        let (sent, route) = self.send_caching(cx, index, key, message);
        if let Some(route) = route {
            routes::remember(self.id, key, hash, index, route);
        }
        sent
    }

    /// Routes `package`, an `M` for `key` that came from another node
    /// with its transport's receipt, on as it is: to the key's process
    /// here, to the shard's holder, or into the buffer, as
    /// [`send`](Kind::send) routes a message (without the cached routes,
    /// which send values, not packages). Refused, the package back.
    pub(crate) fn send_carried(
        &self,
        cx: &Context,
        key: &str,
        package: Package,
    ) -> Result<(), Refused<Package>> {
        let index = shard_of(key, self.shard_count());
        let mut shard = self.lock(index);
        self.route(cx, index, &mut shard, key, Waiting::Carried(package))
            .map_err(|refused| match refused.message {
                Waiting::Carried(package) => Refused {
                    message: package,
                    reason: refused.reason,
                },
                Waiting::Message(_) | Waiting::Ask { .. } => {
                    unreachable!("a carried message is refused as it went")
                }
            })
    }

    /// [`send`](Kind::send) to `key` of shard `index`, and then, with the
    /// lock still held, the route an [`Entity`](super::Entity) may keep:
    /// the key's running process here, while the shard is held here with
    /// nothing waiting.
    pub(crate) fn send_caching(
        &self,
        cx: &Context,
        index: u32,
        key: &str,
        message: M,
    ) -> (Result<(), Refused<M>>, Option<CachedRoute>) {
        let mut shard = self.lock(index);
        let sent = self.send_locked(cx, index, &mut shard, key, message);
        let route = match shard.children.get(key) {
            Some(Child::Live { pid, link, .. })
                if shard.route == Route::Here && shard.buffer.is_empty() =>
            {
                // Ended meanwhile: no route (the next send learns anew).
                cx.resolve(*pid)
                    .map(|resolved| (resolved, Arc::clone(link)))
            }
            _ => None,
        };
        (sent, route)
    }

    /// Whether shard `index` was held here with nothing waiting at its
    /// lock's last release (see [`ShardCell`]).
    pub(crate) fn is_open(&self, index: u32) -> bool {
        self.shards[index as usize].open.load(Acquire)
    }

    fn send_locked(
        &self,
        cx: &Context,
        index: u32,
        shard: &mut Shard<M>,
        key: &str,
        message: M,
    ) -> Result<(), Refused<M>> {
        // The common case first, as `route` and `deliver_here` would take
        // it: held here, nothing waiting, the key's process running.
        let message = match self.send_to_live(cx, shard, key, message) {
            Ok(()) => return Ok(()),
            Err(message) => message,
        };
        self.route(cx, index, shard, key, Waiting::Message(message))
            .map_err(|refused| match refused.message {
                Waiting::Message(message) => Refused {
                    message,
                    reason: refused.reason,
                },
                Waiting::Carried(_) | Waiting::Ask { .. } => {
                    unreachable!("a message is refused as it went")
                }
            })
    }

    /// This node lost the shard's lease without handing the shard off:
    /// everything that waits here for its keys (in the buffer, or for a
    /// stopping process) came while the lease had run out, meant for a
    /// tenure that is over. Passed on, it could reach the next holder
    /// after a later message of the same sender that went there directly,
    /// so it is counted in `fenced` instead, as the unread messages of
    /// the shard's processes are. What comes for the shard after this is
    /// routed as usual: it may be a message the next holder passed back
    /// to this node, which must not be fenced.
    pub(crate) fn fence_waiting(&self, shard: &mut Shard<M>) {
        let mut fenced = 0;
        for _ in shard.buffer.drain(..) {
            self.counters.give_buffer_slot();
            fenced += 1;
        }
        for child in shard.children.values_mut() {
            if let Child::Stopping { queued, .. } = child {
                for _ in queued.drain(..) {
                    self.counters.give_buffer_slot();
                    fenced += 1;
                }
            }
        }
        Counters::add(&self.counters.fenced, fenced);
    }

    /// Sends to the key's running process here, if the shard is held
    /// here with nothing waiting; the message back otherwise, or if the
    /// process has ended (the general path then starts a new one). A full
    /// mailbox refuses it through the general path, which meets it again.
    #[inline]
    fn send_to_live(
        &self,
        cx: &Context,
        shard: &mut Shard<M>,
        key: &str,
        message: M,
    ) -> Result<(), M> {
        if !(shard.buffer.is_empty() && shard.route == Route::Here) {
            return Err(message);
        }
        let Some(Child::Live { pid, touched, .. }) = shard.children.get_mut(key) else {
            return Err(message);
        };
        if !shard.clock.valid_coarse() {
            return Err(message);
        }
        *touched = self.epoch.load(Relaxed);
        cx.send(*pid, message).map_err(message_back::<M>)
    }

    /// Asks the process of `key`, wherever it lives, `question`, whose
    /// answer goes through `reply`.
    pub(crate) fn ask(
        &self,
        cx: &Context,
        key: &str,
        question: Payload,
        reply: ReplyTo,
    ) -> Result<(), Refused<Waiting<M>>> {
        let index = shard_of(key, self.shard_count());
        let mut shard = self.lock(index);
        self.route(cx, index, &mut shard, key, Waiting::Ask { question, reply })
    }

    /// Delivers, forwards or buffers, with the shard locked.
    pub(crate) fn route(
        &self,
        cx: &Context,
        index: u32,
        shard: &mut Shard<M>,
        key: &str,
        item: Waiting<M>,
    ) -> Result<(), Refused<Waiting<M>>> {
        if shard.buffer.is_empty() {
            match shard.route {
                Route::Here if shard.clock.valid() => {
                    return self.deliver_here(cx, index, shard, key, item)
                }
                Route::There(host) => match self.forward(cx, host, key.to_owned(), item) {
                    Ok(()) => return Ok(()),
                    Err(Forward::Refused(refused)) => return Err(refused),
                    Err(Forward::Unreachable(key, item)) => {
                        shard.route = Route::Unknown;
                        return self.buffer(shard, key, item);
                    }
                },
                _ => {}
            }
        }
        self.buffer(shard, key.to_owned(), item)
    }

    /// Sends to the host of the node that holds the shard: a message as
    /// `Keyed<M>`, a question as a [`KeyedValue`] (the holder's host
    /// reads the key without knowing the question's type).
    fn forward(
        &self,
        cx: &Context,
        host: Pid,
        key: String,
        item: Waiting<M>,
    ) -> Result<(), Forward<M>> {
        match item {
            Waiting::Message(message) => {
                let Err(error) = cx.send(host, Keyed { key, message }) else {
                    Counters::add(&self.counters.forwarded, 1);
                    return Ok(());
                };
                let kind = error.kind();
                let Ok(Keyed { key, message }) = error.into_package().downcast::<Keyed<M>>() else {
                    unreachable!("a send error hands back the package it was given");
                };
                Err(self.not_forwarded(kind, key, Waiting::Message(message)))
            }
            Waiting::Carried(mut package) => {
                // Passed on with its receipt: confirmed to its first
                // sender once the next holder's node confirmed it to this
                // one (`Members::hold`).
                let receipt = package.take_receipt();
                // From this node's host, as a plain message forwarded
                // from one of its steps: a frame's source must be on the
                // node that publishes it.
                let source = self.host.get().copied().unwrap_or(package.source());
                let Ok(message) = package.downcast::<M>() else {
                    unreachable!("a carried package holds an M");
                };
                let onward = carrying(Package::new(source, host, Keyed { key, message }), receipt);
                let Err(error) = cx.forward(onward) else {
                    Counters::add(&self.counters.forwarded, 1);
                    return Ok(());
                };
                let kind = error.kind();
                let mut back = error.into_package();
                let receipt = back.take_receipt();
                let Ok(Keyed { key, message }) = back.downcast::<Keyed<M>>() else {
                    unreachable!("a send error hands back the package it was given");
                };
                let again = carrying(Package::new(source, host, message), receipt);
                Err(self.not_forwarded(kind, key, Waiting::Carried(again)))
            }
            Waiting::Ask { question, reply } => {
                let codec = &self.transport.inner().codec;
                let value = match codec.encode_value(&*question) {
                    Ok((tag, body)) => KeyedValue {
                        key,
                        tag: tag.to_owned(),
                        body,
                    },
                    Err(_) => {
                        let item = Waiting::Ask { question, reply };
                        return Err(Forward::Refused(
                            self.refuse(item, RefusedReason::Unencodable),
                        ));
                    }
                };
                match reply.forward(cx, host, value) {
                    Ok(()) => {
                        Counters::add(&self.counters.forwarded, 1);
                        Ok(())
                    }
                    Err((error, reply)) => {
                        let kind = error.kind();
                        let key = match error.into_package().downcast::<KeyedValue>() {
                            Ok(value) => value.key,
                            Err(_) => {
                                unreachable!("a send error hands back the package it was given")
                            }
                        };
                        Err(self.not_forwarded(kind, key, Waiting::Ask { question, reply }))
                    }
                }
            }
        }
    }

    /// What a forward that did not go becomes: refused for good, or
    /// waiting for the next holder.
    fn not_forwarded(&self, kind: SendErrorKind, key: String, item: Waiting<M>) -> Forward<M> {
        match kind {
            SendErrorKind::Unencodable => {
                Forward::Refused(self.refuse(item, RefusedReason::Unencodable))
            }
            SendErrorKind::Full => Forward::Refused(self.refuse(item, RefusedReason::MailboxFull)),
            _ => Forward::Unreachable(key, item),
        }
    }

    /// Keeps `item` for later, if the bound allows.
    pub(crate) fn buffer(
        &self,
        shard: &mut Shard<M>,
        key: String,
        item: Waiting<M>,
    ) -> Result<(), Refused<Waiting<M>>> {
        if !self.counters.take_buffer_slot(self.max_buffered) {
            return Err(self.refuse(item, RefusedReason::BufferFull));
        }
        shard.buffer.push_back((key, item));
        Ok(())
    }

    fn refuse<T>(&self, message: T, reason: RefusedReason) -> Refused<T> {
        Counters::add(&self.counters.refused, 1);
        Refused { message, reason }
    }

    /// Delivers to the process of `key` here, starting it if it has none.
    pub(crate) fn deliver_here(
        &self,
        cx: &Context,
        index: u32,
        shard: &mut Shard<M>,
        key: &str,
        mut item: Waiting<M>,
    ) -> Result<(), Refused<Waiting<M>>> {
        let epoch = self.epoch.load(Relaxed);
        match shard.children.get_mut(key) {
            Some(Child::Live { pid, touched, .. }) => {
                *touched = epoch;
                match hand_over(cx, *pid, item) {
                    Ok(()) => return Ok(()),
                    Err((full, back)) => {
                        if full {
                            return Err(self.refuse(back, RefusedReason::MailboxFull));
                        }
                        // It ended on its own: the key gets a new process.
                        item = back;
                        shard.children.remove(key);
                    }
                }
            }
            Some(Child::Stopping { queued, .. }) => {
                if !self.counters.take_buffer_slot(self.max_buffered) {
                    return Err(self.refuse(item, RefusedReason::BufferFull));
                }
                queued.push_back(item);
                return Ok(());
            }
            None => {}
        }
        let link = Arc::new(Link::new(Arc::clone(&shard.clock)));
        let pid = match self.start(cx, index, Arc::clone(&link), key) {
            Ok(pid) => pid,
            Err(why) => return Err(self.refuse(item, RefusedReason::NotStarted(why))),
        };
        shard.children.insert(
            key.to_owned(),
            Child::Live {
                pid,
                touched: epoch,
                link,
            },
        );
        hand_over(cx, pid, item).map_err(|(_, back)| self.refuse(back, RefusedReason::MailboxFull))
    }

    /// Starts the process of `key`, fenced by the shard's lease.
    fn start(&self, cx: &Context, index: u32, link: Arc<Link>, key: &str) -> Result<Pid, String> {
        let host = *self.host.get().ok_or("the kind's host has not started")?;
        // The factory is the user's: a panic refuses this message, and
        // leaves the kind (and the host, when it delivers) running.
        let made = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (self.factory)(key)));
        let made = made.map_err(|_| format!("the factory of `{}` panicked", self.name))?;
        let end = EndNote {
            transport: Arc::clone(&self.transport),
            host,
            shard: index,
            key: key.to_owned(),
        };
        let process = super::host::Fenced::new(made, link, Arc::clone(&self.counters), Some(end));
        let pid = cx.spawn(process).map_err(|e| e.to_string())?.pid();
        Counters::add(&self.counters.started, 1);
        Ok(pid)
    }

    /// Empties the shard's buffer, front first, as far as its route
    /// allows now.
    pub(crate) fn flush(&self, cx: &Context, index: u32, shard: &mut Shard<M>) {
        while let Some((key, item)) = shard.buffer.pop_front() {
            self.counters.give_buffer_slot();
            let outcome = match shard.route {
                Route::Here if shard.clock.valid() => {
                    self.deliver_here(cx, index, shard, &key, item)
                }
                Route::There(host) => match self.forward(cx, host, key, item) {
                    Ok(()) => Ok(()),
                    Err(Forward::Refused(refused)) => Err(refused),
                    Err(Forward::Unreachable(key, item)) => {
                        shard.route = Route::Unknown;
                        self.put_back(shard, key, item);
                        return;
                    }
                },
                _ => {
                    self.put_back(shard, key, item);
                    return;
                }
            };
            if let Err(refused) = outcome {
                // Nobody to hand it back to: the sender's call returned
                // long ago. Counted in `refused`, and logged; a
                // question's asker is answered `NoReply` (its right to
                // answer is dropped with it).
                tracing::warn!(
                    kind = %self.name,
                    reason = %refused.reason,
                    "a buffered keyed message was refused"
                );
            }
        }
    }

    /// Puts an item taken from the front of the buffer back there.
    pub(crate) fn put_back(&self, shard: &mut Shard<M>, key: String, item: Waiting<M>) {
        // The slot it had is taken again: the bound counts it once.
        self.counters.buffered.fetch_add(1, Relaxed);
        shard.buffer.push_front((key, item));
    }
}

/// Hands `item` to the key's process `pid`: a message sent, a question
/// asked with its right to answer. The item back if it could not go, and
/// whether because the mailbox was full (else the process has ended).
fn hand_over<M: Send + 'static>(
    cx: &Context,
    pid: Pid,
    item: Waiting<M>,
) -> Result<(), (bool, Waiting<M>)> {
    match item {
        Waiting::Message(message) => cx.send(pid, message).map_err(|error| {
            let full = error.kind() == SendErrorKind::Full;
            (full, Waiting::Message(message_back::<M>(error)))
        }),
        Waiting::Carried(package) => cx.forward(package.with_target(pid)).map_err(|error| {
            let full = error.kind() == SendErrorKind::Full;
            (full, Waiting::Carried(error.into_package()))
        }),
        Waiting::Ask { question, reply } => {
            reply.forward(cx, pid, question).map_err(|(error, reply)| {
                let full = error.kind() == SendErrorKind::Full;
                let question = error.into_package().into_payload();
                (full, Waiting::Ask { question, reply })
            })
        }
    }
}

/// The message a failed send hands back.
pub(crate) fn message_back<M: 'static>(error: SendError) -> M {
    match error.into_package().downcast::<M>() {
        Ok(message) => message,
        Err(_) => unreachable!("a send error hands back the package it was given"),
    }
}

use crate::stats::Counters;

/// Why a forward did not go.
enum Forward<M> {
    /// Refused for good: handed back to the caller.
    Refused(Refused<Waiting<M>>),
    /// The holder cannot be reached: the item waits for the next one.
    Unreachable(String, Waiting<M>),
}

/// `package` with `receipt` on it, if there is one: a carried message
/// repackaged keeps its first sender's receipt.
fn carrying(package: Package, receipt: Option<Receipt>) -> Package {
    match receipt {
        Some(receipt) => package.with_receipt(receipt),
        None => package,
    }
}
