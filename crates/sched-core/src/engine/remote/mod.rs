//! Other nodes: the receiver an engine hands its remote transport, and the
//! relations between processes of different nodes (monitors, links, asks).
//!
//! A transport carries two kinds of package: messages, delivered to local
//! processes exactly like a local send, and [`Signal`]s, which the engines
//! exchange about their processes (`protocol.rs` has their bytes,
//! `relations.rs` the monitors and links and their protocol, `ask.rs` the
//! asks, `control.rs` the remote `terminate` and `cancel`, `table.rs` the
//! state they keep). The transport also tells its engine when it has lost
//! a node ([`NodeDown`]): every relation with that node's processes then
//! ends.
//!
//! The feature owns its state: [`Across`](table::Across), the shared
//! state's `across` (the table of remote monitors, watches, links and
//! asks, and the transport), and every operation of this folder is a
//! method of it, written in the file of its concern. A method reads the
//! table through `self` and takes the engine (`&Shared`) only for what
//! other features do: the id source, the process table, telling a watcher
//! its down, waking a process, a local ask.

pub(crate) mod ask;
pub(crate) mod control;
pub(crate) mod protocol;
pub(crate) mod relations;
pub(crate) mod table;

#[cfg(not(loom))]
use relay::{NodeDown, Package, Receiver, SendError, SendErrorKind, Signal};

use super::shared::Shared;
use crate::sync::Arc;

/// Delivers packages from other nodes to this engine's processes. It holds
/// the engine weakly: the transport, which the engine owns, must not keep
/// the engine alive. Once the engine is gone, every package is refused as
/// [`Ended`](relay::SendErrorKind::Ended).
#[cfg(not(loom))]
#[derive(Debug)]
struct Inbox(std::sync::Weak<Shared>);

#[cfg(not(loom))]
impl Receiver for Inbox {
    fn send(&self, package: Package) -> Result<(), SendError> {
        let Some(shared) = self.0.upgrade() else {
            return Err(SendError::ended(package));
        };
        // An inbox is attached only with a transport, and the table of
        // relations (`across`) is built with it.
        if package.is::<Signal>() {
            let (from, to) = (package.source(), package.target());
            // The signal is spent either way; a refusal names its kind,
            // for the transport's count, with an empty package.
            return shared
                .across()
                .on_signal(&shared, package)
                .map_err(|kind| SendError::new(kind, Package::new(from, to, ())));
        }
        if let Some(notice) = package.payload::<NodeDown>() {
            shared.across().node_down(&shared, notice.node);
            return Ok(());
        }
        shared.send_local(package)
    }
}

#[cfg(not(loom))]
impl table::Across {
    /// Acts on a signal from another node's engine. A signal that cannot
    /// be read is logged and dropped: nothing from the wire stops the
    /// engine. `Err` says why it was not acted on, for the transport's
    /// counts: [`Unencodable`](SendErrorKind::Unencodable) for one that
    /// cannot be read (or is not for this node), a dead letter's kind for
    /// a `terminate` or `cancel` that found no process.
    fn on_signal(&self, engine: &Shared, package: Package) -> Result<(), SendErrorKind> {
        use protocol::Op;
        let (from, to, payload) = package.into_parts();
        let Ok(signal) = payload.downcast::<Signal>() else {
            return Err(SendErrorKind::Unencodable);
        };
        let (bytes, payload) = signal.into_parts();
        let op = match Op::decode(&bytes) {
            Ok(op) if to.node() == engine.processes.node() => op,
            _ => {
                tracing::warn!(%from, %to, "ignored a malformed or misdirected signal from another node");
                if let Some(payload) = payload {
                    crate::panic_guard::drop_user_value(payload, to, "a malformed signal's value");
                }
                return Err(SendErrorKind::Unencodable);
            }
        };
        tracing::trace!(%from, %to, ?op, "signal from another node");
        match op {
            Op::Monitor { id } => self.watched_by_remote(engine, from, to, id),
            Op::Demonitor { id } => self.unwatched_by_remote(from, id),
            Op::Down { id, reason, detail } => self.remote_down(engine, from, id, reason, detail),
            Op::Link => self.linked_by_remote(engine, from, to),
            Op::Unlink => self.unlinked_by_remote(from, to),
            Op::Exit { reason, detail } => self.exit_from_remote(engine, from, to, reason, detail),
            Op::Ask { key } => match payload {
                Some(question) => self.asked_by_remote(engine, from, to, key, question),
                None => {
                    tracing::warn!(%from, %to, "ignored an ask without a question");
                    return Err(SendErrorKind::Unencodable);
                }
            },
            Op::Answer { key, result } => self.answered_by_remote(from, key, result, payload),
            Op::Terminate => {
                return self.ended_by_remote(engine, from, to, control::EndRequest::Terminate)
            }
            Op::Cancel => {
                return self.ended_by_remote(engine, from, to, control::EndRequest::Cancel)
            }
        }
        Ok(())
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
