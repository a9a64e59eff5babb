//! A handle on one key's process that keeps its route: the key's running
//! process on this node, resolved (`sched::message::Resolved`), used without the shard's lock for
//! as long as nothing about the key or its shard changed.
//!
//! # Why a cached route is safe
//!
//! A send on the cached route checks three things, then sends to the resolved process:
//! the shard is *open* (held here with nothing in its buffer at its
//! lock's last release, written on every release), the process is not
//! *stopping* (set by the host under the lock before it cancels the
//! process), and the process's lease clock is valid. A check that passes
//! can be overtaken by a stop, so a message may reach the process after
//! the cancel, even after its last step: the process's `unread` hook
//! ([`Process::unread`](sched::prelude::Process::unread)) then hands
//! those messages back with its end note, and the host puts them at the
//! front of what waits for the key's next process. A send after the
//! mailbox closed fails with its message back and takes the general path.
//! So a message sent on a cached route is read by the key's process it
//! reached, or by the next one, in the order its sender sent it; it is
//! never dropped for having raced a stop.

use std::fmt;
use std::sync::Arc;

use sched::engine::AsContext;
use sched::message::Resolved;

use super::error::Refused;
use super::shard::{message_back, CachedRoute};
use super::KindSend;

/// One key's process, as a handle that remembers where it runs: while
/// the key's shard is held here and its process runs, a send goes
/// straight to the process (as through a
/// [`Resolved`](sched::message::Resolved): without the shard's lock, a
/// lookup of the key, or the process table's). When that
/// changes (the process stopped or ended, the shard handed off, its
/// buffer holding anything), the next send takes the general path of
/// [`Sharded::send`](super::Sharded::send) and learns the route again.
///
/// Messages sent through one `Entity` keep the guarantees of
/// `Sharded::send`: in order, started on first use, forwarded to the
/// shard's holder or waiting while it has none. A message that reaches
/// the key's process after it was stopped (passivated or handed off) is
/// handed back and read by the key's next process, in order. Mixing
/// `Entity::send` and `Sharded::send` from one thread to one key keeps
/// their order too.
///
/// `send` takes `&mut self` (it updates the cached route): keep one
/// `Entity` per sending thread or process; clones are cheap.
///
/// # Examples
///
/// ```no_run
/// # fn go(node: &sched::Scheduler, counters: &relay_nats::Sharded<u64>) {
/// let mut user = counters.entity("user-42");
/// for amount in 1..=100 {
///     if let Err(refused) = user.send(node, amount) {
///         eprintln!("not sent ({}): {}", refused.reason, refused.message);
///     }
/// }
/// # }
/// ```
pub struct Entity<M> {
    kind: Arc<dyn KindSend<M>>,
    key: String,
    shard: u32,
    route: Option<CachedRoute>,
}

impl<M> Clone for Entity<M> {
    fn clone(&self) -> Self {
        Entity {
            kind: Arc::clone(&self.kind),
            key: self.key.clone(),
            shard: self.shard,
            route: self.route.clone(),
        }
    }
}

impl<M> fmt::Debug for Entity<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Entity")
            .field("kind", &self.kind.name())
            .field("key", &self.key)
            .field("cached", &self.route.as_ref().map(|(r, _)| r.pid()))
            .finish()
    }
}

impl<M: Send + 'static> Entity<M> {
    pub(super) fn new(kind: Arc<dyn KindSend<M>>, key: String, shard: u32) -> Entity<M> {
        Entity {
            kind,
            key,
            shard,
            route: None,
        }
    }

    /// Sends `message` to the key's process: on the cached route when it
    /// still holds, else as [`Sharded::send`](super::Sharded::send) does
    /// (and the route is learnt again).
    ///
    /// # Errors
    ///
    /// [`Refused`], with the message back, as for `Sharded::send`.
    ///
    /// # Examples
    ///
    /// See [`Entity`].
    pub fn send(&mut self, context: &impl AsContext, message: M) -> Result<(), Refused<M>> {
        let cx = context.context();
        // Sent on the route borrowed: no count taken on the process.
        let message = match self.usable() {
            Some(resolved) => match cx.send(resolved, message) {
                Ok(()) => return Ok(()),
                // Ended, or full: the general path starts its next
                // process, or refuses with the reason.
                Err(error) => {
                    self.route = None;
                    message_back::<M>(error)
                }
            },
            None => {
                self.route = None;
                message
            }
        };
        let (sent, route) = self.kind.send_caching(cx, self.shard, &self.key, message);
        self.route = route;
        sent
    }

    /// The cached PID, if every condition of a send by PID holds now
    /// (the route is forgotten otherwise).
    #[inline]
    fn usable(&self) -> Option<&Resolved> {
        let (resolved, link) = self.route.as_ref()?;
        // Acquire (both): a sender that sees the shard open or the process
        // not stopping sees what the lock's holder did before it wrote so.
        let holds = self.kind.is_open(self.shard)
            && !link.stopping.load(std::sync::atomic::Ordering::Acquire)
            && link.clock.valid_coarse();
        holds.then_some(resolved)
    }

    /// The key this handle sends to.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn go(counters: &relay_nats::Sharded<u64>) {
    /// assert_eq!(counters.entity("user-42").key(), "user-42");
    /// # }
    /// ```
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The kind's name.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn go(counters: &relay_nats::Sharded<u64>) {
    /// assert_eq!(counters.entity("user-42").kind(), counters.kind());
    /// # }
    /// ```
    pub fn kind(&self) -> &str {
        self.kind.name()
    }

    /// Whether a send now would take the cached route, as this node sees
    /// it: a send found the key's process running here, and since then
    /// that process was neither stopped nor ended, its shard is still held
    /// here with nothing waiting, and its lease is sure. (A send checks
    /// again, and a route can change between the two.)
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn go(node: &sched::Scheduler, counters: &relay_nats::Sharded<u64>) {
    /// let mut user = counters.entity("user-42");
    /// assert!(!user.is_cached(), "nothing learnt yet");
    /// user.send(node, 1).unwrap();
    /// println!("routed by PID next time: {}", user.is_cached());
    /// # }
    /// ```
    pub fn is_cached(&self) -> bool {
        self.usable().is_some()
    }
}
