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
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use relay::Pid;
use rustc_hash::FxHashMap;
use sched::engine::Context;
use sched::message::SendErrorKind;
use sched::prelude::*;
use serde::{Deserialize, Serialize};

use super::error::{Refused, RefusedReason};
use super::placement::shard_of;
use super::ShardingCounters;
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

/// A key's process on this node.
pub(crate) enum Child<M> {
    /// Running; `touched` is the host's tick of its last message.
    Live { pid: Pid, touched: u64 },
    /// Cancelled (passivated or handed off), not yet ended: messages for
    /// the key wait here, to go to its next process, never beside this
    /// one.
    Stopping { pid: Pid, queued: VecDeque<M> },
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
    pub(crate) buffer: VecDeque<(String, M)>,
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

/// One kind of keyed process on this node: its shards, its factory and
/// its host process.
pub(crate) struct Kind<P, M> {
    pub(crate) name: String,
    pub(crate) shards: Box<[Mutex<Shard<M>>]>,
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
            name,
            shards: (0..shards).map(|_| Mutex::new(Shard::new())).collect(),
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

    pub(crate) fn lock(&self, index: u32) -> MutexGuard<'_, Shard<M>> {
        self.shards[index as usize]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Sends `message` to the process of `key`, wherever it lives.
    pub(crate) fn send(&self, cx: &Context, key: &str, message: M) -> Result<(), Refused<M>> {
        let index = shard_of(key, self.shard_count());
        let mut shard = self.lock(index);
        self.route(cx, index, &mut shard, key, message)
    }

    /// Delivers, forwards or buffers, with the shard locked.
    pub(crate) fn route(
        &self,
        cx: &Context,
        index: u32,
        shard: &mut Shard<M>,
        key: &str,
        message: M,
    ) -> Result<(), Refused<M>> {
        if shard.buffer.is_empty() {
            match shard.route {
                Route::Here if shard.clock.valid() => {
                    return self.deliver_here(cx, index, shard, key, message)
                }
                Route::There(host) => match self.forward(cx, host, key.to_owned(), message) {
                    Ok(()) => return Ok(()),
                    Err(Forward::Refused(refused)) => return Err(refused),
                    Err(Forward::Unreachable(key, message)) => {
                        shard.route = Route::Unknown;
                        return self.buffer(shard, key, message);
                    }
                },
                _ => {}
            }
        }
        self.buffer(shard, key.to_owned(), message)
    }

    /// Sends to the host of the node that holds the shard.
    fn forward(&self, cx: &Context, host: Pid, key: String, message: M) -> Result<(), Forward<M>> {
        let Err(error) = cx.send(host, Keyed { key, message }) else {
            Counters::add(&self.counters.forwarded, 1);
            return Ok(());
        };
        let kind = error.kind();
        let Ok(Keyed { key, message }) = error.into_package().downcast::<Keyed<M>>() else {
            unreachable!("a send error hands back the package it was given");
        };
        Err(match kind {
            SendErrorKind::Unencodable => {
                Forward::Refused(self.refuse(message, RefusedReason::Unencodable))
            }
            SendErrorKind::Full => {
                Forward::Refused(self.refuse(message, RefusedReason::MailboxFull))
            }
            _ => Forward::Unreachable(key, message),
        })
    }

    /// Keeps `message` for later, if the bound allows.
    pub(crate) fn buffer(
        &self,
        shard: &mut Shard<M>,
        key: String,
        message: M,
    ) -> Result<(), Refused<M>> {
        if !self.counters.take_buffer_slot(self.max_buffered) {
            return Err(self.refuse(message, RefusedReason::BufferFull));
        }
        shard.buffer.push_back((key, message));
        Ok(())
    }

    fn refuse(&self, message: M, reason: RefusedReason) -> Refused<M> {
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
        mut message: M,
    ) -> Result<(), Refused<M>> {
        let epoch = self.epoch.load(Relaxed);
        match shard.children.get_mut(key) {
            Some(Child::Live { pid, touched }) => {
                *touched = epoch;
                match cx.send(*pid, message) {
                    Ok(()) => return Ok(()),
                    Err(error) => {
                        let full = error.kind() == SendErrorKind::Full;
                        let Ok(back) = error.into_package().downcast::<M>() else {
                            unreachable!("a send error hands back the package it was given");
                        };
                        if full {
                            return Err(self.refuse(back, RefusedReason::MailboxFull));
                        }
                        // It ended on its own: the key gets a new process.
                        message = back;
                        shard.children.remove(key);
                    }
                }
            }
            Some(Child::Stopping { queued, .. }) => {
                if !self.counters.take_buffer_slot(self.max_buffered) {
                    return Err(self.refuse(message, RefusedReason::BufferFull));
                }
                queued.push_back(message);
                return Ok(());
            }
            None => {}
        }
        let pid = match self.start(cx, index, shard, key) {
            Ok(pid) => pid,
            Err(why) => return Err(self.refuse(message, RefusedReason::NotStarted(why))),
        };
        shard.children.insert(
            key.to_owned(),
            Child::Live {
                pid,
                touched: epoch,
            },
        );
        cx.send(pid, message).map_err(|error| {
            let Ok(back) = error.into_package().downcast::<M>() else {
                unreachable!("a send error hands back the package it was given");
            };
            self.refuse(back, RefusedReason::MailboxFull)
        })
    }

    /// Starts the process of `key`, fenced by the shard's lease.
    fn start(&self, cx: &Context, index: u32, shard: &Shard<M>, key: &str) -> Result<Pid, String> {
        let host = *self.host.get().ok_or("the kind's host has not started")?;
        // The factory is the user's: a panic refuses this message, and
        // leaves the kind (and the host, when it delivers) running.
        let made = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (self.factory)(key)));
        let made = made.map_err(|_| format!("the factory of `{}` panicked", self.name))?;
        let process = super::host::Fenced {
            inner: made,
            clock: Arc::clone(&shard.clock),
            counters: Arc::clone(&self.counters),
            end: Some(EndNote {
                transport: Arc::clone(&self.transport),
                host,
                shard: index,
                key: key.to_owned(),
            }),
            pid: None,
        };
        let pid = cx.spawn(process).map_err(|e| e.to_string())?.pid();
        Counters::add(&self.counters.started, 1);
        Ok(pid)
    }

    /// Empties the shard's buffer, front first, as far as its route
    /// allows now.
    pub(crate) fn flush(&self, cx: &Context, index: u32, shard: &mut Shard<M>) {
        while let Some((key, message)) = shard.buffer.pop_front() {
            self.counters.give_buffer_slot();
            let outcome = match shard.route {
                Route::Here if shard.clock.valid() => {
                    self.deliver_here(cx, index, shard, &key, message)
                }
                Route::There(host) => match self.forward(cx, host, key, message) {
                    Ok(()) => Ok(()),
                    Err(Forward::Refused(refused)) => Err(refused),
                    Err(Forward::Unreachable(key, message)) => {
                        shard.route = Route::Unknown;
                        self.put_back(shard, key, message);
                        return;
                    }
                },
                _ => {
                    self.put_back(shard, key, message);
                    return;
                }
            };
            if let Err(refused) = outcome {
                // Nobody to hand it back to: the sender's call returned
                // long ago. Counted in `refused`, and logged.
                tracing::warn!(
                    kind = %self.name,
                    reason = %refused.reason,
                    "a buffered keyed message was refused"
                );
            }
        }
    }

    /// Puts a message taken from the front of the buffer back there.
    pub(crate) fn put_back(&self, shard: &mut Shard<M>, key: String, message: M) {
        // The slot it had is taken again: the bound counts it once.
        self.counters.buffered.fetch_add(1, Relaxed);
        shard.buffer.push_front((key, message));
    }
}

use crate::stats::Counters;

/// Why a forward did not go.
enum Forward<M> {
    /// Refused for good: handed back to the caller.
    Refused(Refused<M>),
    /// The holder cannot be reached: the message waits for the next one.
    Unreachable(String, M),
}
