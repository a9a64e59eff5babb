//! Packages from other nodes: the receiver an engine hands its remote
//! transport, which delivers to local processes only.

#[cfg(not(loom))]
use relay::{Package, Receiver, SendError};

use super::shared::Shared;
use crate::sync::Arc;

/// Delivers packages from other nodes to this engine's processes. It holds
/// the engine weakly: the transport, which the engine owns, must not keep
/// the engine alive. Once the engine is gone, every package is refused as
/// [`Closed`](relay::SendErrorKind::Closed).
#[cfg(not(loom))]
#[derive(Debug)]
struct Inbox(std::sync::Weak<Shared>);

#[cfg(not(loom))]
impl Receiver for Inbox {
    fn send(&self, package: Package) -> Result<(), SendError> {
        match self.0.upgrade() {
            Some(shared) => shared.send_local(package),
            None => Err(SendError::closed(package)),
        }
    }
}

/// Attaches the engine to its remote transport, if it has one.
#[cfg(not(loom))]
pub(crate) fn attach(shared: &Arc<Shared>) {
    if let Some(remote) = &shared.remote {
        let node = shared.processes.node();
        tracing::debug!(node, "attaching the remote transport");
        remote.attach(node, std::sync::Arc::new(Inbox(Arc::downgrade(shared))));
    }
}

/// loom's `Arc` has no weak references, and the models use no transport.
#[cfg(loom)]
pub(crate) fn attach(_shared: &Arc<Shared>) {}
