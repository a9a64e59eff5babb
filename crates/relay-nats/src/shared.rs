//! What the sending side ([`NatsTransport`](crate::NatsTransport)) and the
//! transport's thread (`io.rs`) share: [`Inner`], the engine it is
//! [`Attached`] to, and the [`Command`]s queued to the thread.
//!
//! It stands below both, so that neither names the other for it: the
//! handle queues commands and the thread runs them, each holding `Inner`.
//! Symmetric loss (`reset.rs`) adds methods to `Inner` from a floor above.

use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::{Arc, Mutex, OnceLock};

use relay::{NodeDown, Package, Pid, Receipt, Receiver};
use tokio::sync::mpsc;

use crate::codec::Codec;
use crate::error::LinkError;
use crate::membership::Members;
use crate::stats::Counters;

/// What the sending side and the transport's thread share.
#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) codec: Codec,
    pub(crate) prefix: String,
    pub(crate) counters: Counters,
    /// The other nodes: up, left or down (the failure detector).
    pub(crate) members: Members,
    pub(crate) heartbeat: std::time::Duration,
    pub(crate) down_after: std::time::Duration,
    /// Whether the client is connected to the server: while it is not,
    /// this node hears nobody, and the failure detector does not count
    /// the others' silence.
    pub(crate) connected: AtomicBool,
    /// Frames queued and not yet handed to the client.
    pub(crate) pending: AtomicUsize,
    pub(crate) max_pending: usize,
    /// Tells this transport's frames from those of an earlier run of the
    /// same node (for gap detection).
    pub(crate) incarnation: u64,
    /// The engine this transport serves, once attached: its node and the
    /// receiver it delivers to.
    pub(crate) engine: OnceLock<Attached>,
    /// The bucket of cluster names, when they are on and it opened.
    pub(crate) names: OnceLock<crate::kv::Bucket>,
    pub(crate) names_bucket: Option<String>,
    /// How long a name outlives its last renewal (`names.rs`, `leases.rs`).
    pub(crate) name_lease: std::time::Duration,
    /// The names this node holds, and the revision of each it last wrote:
    /// renewed every third of the lease (`leases.rs`).
    pub(crate) held: Mutex<std::collections::HashMap<String, crate::kv::Held>>,
    /// Until when each name some local code must not outlive is surely
    /// this node's (`leases.rs`): extended by every renewal, voided when
    /// the name is lost. Keyed processes step only while their shard's is
    /// valid.
    pub(crate) lease_clocks:
        Mutex<std::collections::HashMap<String, Arc<crate::lease_clock::LeaseClock>>>,
    /// The frames numbered for each node (the publishing loop's), and the
    /// last number seen from each sender (the receiving task's): shared
    /// with the failure detector and the heartbeat, for confirmations.
    pub(crate) numbers: Mutex<crate::sequence::Numbers>,
    pub(crate) gaps: Mutex<crate::sequence::Gaps>,
    /// The transport thread's command queue, for the control frames the
    /// transport's own tasks send (`reset.rs`).
    pub(crate) commands: OnceLock<mpsc::UnboundedSender<Command>>,
    /// What this run expects to read from nodes that left or answered
    /// its goodbye (`farewell.rs`).
    pub(crate) farewells: Mutex<crate::sequence::Farewells>,
    /// When this node announced itself: by a heartbeat and a half later it
    /// has heard every node that is up (`farewell.rs`).
    pub(crate) announced_at: OnceLock<tokio::time::Instant>,
}

/// The engine a transport serves: its node and the receiver it delivers
/// to.
pub(crate) struct Attached(pub(crate) u32, pub(crate) Arc<dyn Receiver + Send + Sync>);

impl std::fmt::Debug for Attached {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Attached").field(&self.0).finish()
    }
}

impl Inner {
    /// This transport's node, once attached (0 before).
    pub(crate) fn node(&self) -> u32 {
        self.engine.get().map_or(0, |attached| attached.0)
    }

    /// Whether `holder`'s run of its node is known to be gone or out of
    /// reach: the node is down or left, or has restarted since. Such a
    /// holder is not reported by `whereis`.
    pub(crate) fn holder_gone(&self, holder: crate::kv::Holder) -> bool {
        self.holder_dead(holder) || self.members.unreachable(holder.pid.node()).is_some()
    }

    /// Whether `holder`'s run of its node has ended for certain: the node
    /// said goodbye, or a later run of it has been heard. A node that is
    /// only silent (down: maybe a false alarm) still holds its names until
    /// their lease lapses; only a dead holder's name may be taken over.
    pub(crate) fn holder_dead(&self, holder: crate::kv::Holder) -> bool {
        let node = holder.pid.node();
        if node == self.node() {
            return holder.incarnation != self.incarnation;
        }
        matches!(self.members.unreachable(node), Some(LinkError::NodeLeft(_)))
            || self.members.is_stale(node, holder.incarnation)
    }

    /// Tells the engine it has lost `node`: every relation between their
    /// processes ends (see [`NodeDown`]).
    pub(crate) fn tell_lost(&self, node: u32) {
        let Some(Attached(me, local)) = self.engine.get() else {
            return;
        };
        if node == *me {
            return;
        }
        let at = Pid::new(*me, 0);
        if let Err(error) = local.send(Package::new(at, at, NodeDown::new(node))) {
            tracing::debug!(node, %error, "the engine was not told of a lost node");
        }
    }
}

/// Work for the transport's thread, in the order it was queued.
pub(crate) enum Command {
    /// Publish a frame (not yet stamped) to `node`'s run `addressed` (the
    /// one known when the send was accepted; 0: none heard of yet).
    Publish {
        node: u32,
        frame: Vec<u8>,
        addressed: u64,
        /// The receipt the package carried (a frame another node sent
        /// here, passed on): held until `node` confirms this frame
        /// (`Members::hold`), so that its first sender counts it if
        /// this node dies before that.
        receipt: Option<Receipt>,
    },
    /// Publish a control frame (not yet stamped) to `node`'s transport
    /// (`reset.rs`): in order with the frames queued before it, but not
    /// numbered (a lost one is repeated, not a lost message) nor counted
    /// as a message.
    Control { node: u32, frame: Vec<u8> },
    /// Subscribe for `node` and deliver to `local`; reply when subscribed.
    Attach {
        node: u32,
        local: Arc<dyn Receiver + Send + Sync>,
        done: std::sync::mpsc::Sender<Result<(), String>>,
    },
    /// Run a piece of work on the transport's runtime (cluster names).
    Run(std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>),
    /// Say goodbye, flush, and stop.
    Close,
}

/// Locks one of the transport's shared tables (a panic elsewhere leaves
/// them usable: each update is one step).
pub(crate) fn lock<T>(table: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    table
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
