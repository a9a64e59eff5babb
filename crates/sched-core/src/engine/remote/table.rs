//! The state of an engine's relations with processes of other nodes (see
//! `relations.rs` for what is done with it, and the protocol): the table
//! of monitors, watches, links and asks, and the transport they travel
//! through. It names no engine state, so the engine's shared state can hold
//! it.

use std::collections::HashMap;
use std::sync::Arc as StdArc;

use relay::{Package, Payload, Pid, RemoteTransport, SendError, Signal};

use super::protocol::Op;
use crate::contract::down::MonitorId;
use crate::contract::reply::Answer;
use crate::record::relations::Watcher;
use crate::record::RecordRef;
use crate::sync::Mutex;

/// An engine's relations with processes of other nodes, and the transport
/// they travel through.
pub(crate) struct Across {
    pub(crate) node: u32,
    pub(crate) remote: StdArc<dyn RemoteTransport>,
    pub(crate) table: Mutex<Table>,
}

impl std::fmt::Debug for Across {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let table = self.table.lock();
        f.debug_struct("Across")
            .field("node", &self.node)
            .field("watching", &table.watching.len())
            .field("watched", &table.watched.len())
            .field("links", &table.links.len())
            .field("asks", &table.asks.len())
            .finish()
    }
}

#[derive(Default)]
pub(crate) struct Table {
    /// Monitors set here on processes of other nodes: id → (the watched
    /// PID, who is told).
    pub(super) watching: HashMap<u64, (Pid, Watcher)>,
    /// Monitors other nodes set on processes here: (their node, their id)
    /// → (the watched record, the watch's id here).
    pub(super) watched: HashMap<(u32, u64), (RecordRef, u64)>,
    /// Links between processes here and processes of other nodes:
    /// (remote PID, local PID) → the local record.
    pub(super) links: HashMap<(Pid, Pid), RecordRef>,
    /// Asks to processes of other nodes not answered yet: key → (the
    /// asked node, who is told).
    pub(super) asks: HashMap<u64, (u32, StdArc<dyn Answer>)>,
}

/// Takes out of `map` the entries `names` picks (those of a lost node).
pub(super) fn take_where<K: Copy + Eq + std::hash::Hash, V>(
    map: &mut HashMap<K, V>,
    names: impl Fn(&K, &V) -> bool,
) -> Vec<(K, V)> {
    let keys: Vec<K> = map
        .iter()
        .filter(|(k, v)| names(k, v))
        .map(|(k, _)| *k)
        .collect();
    keys.into_iter()
        .filter_map(|k| map.remove(&k).map(|v| (k, v)))
        .collect()
}

/// Whom a signal about a watcher comes from: its process, or this node's
/// outside.
pub(super) fn watcher_pid(watcher: &Watcher, node: u32) -> Pid {
    match watcher {
        Watcher::Process(record) => record.pid,
        Watcher::Outside(_) | Watcher::Remote { .. } => Pid::new(node, 0),
    }
}

impl Across {
    pub(crate) fn new(node: u32, remote: StdArc<dyn RemoteTransport>) -> Across {
        Across {
            node,
            remote,
            table: Mutex::new(Table::default()),
        }
    }

    /// Sends `op` from `from` to `to`, with `payload` (a question or an
    /// answer).
    pub(super) fn signal(
        &self,
        from: Pid,
        to: Pid,
        op: &Op,
        payload: Option<Payload>,
    ) -> Result<(), SendError> {
        let signal = Signal::new(op.encode(), payload);
        self.remote.send(Package::new(from, to, signal))
    }

    /// Removes a monitor set here on a remote process; `true` if it had
    /// not fired (it never will).
    pub(crate) fn demonitor(&self, monitor: MonitorId) -> bool {
        let entry = self.table.lock().watching.remove(&monitor.id);
        let Some((target, watcher)) = entry else {
            return false;
        };
        let from = watcher_pid(&watcher, self.node);
        drop(watcher);
        // Lost, the watch stays on the other node until its process ends
        // or it hears this node is down; it fires into no entry here.
        self.tell(from, target, &Op::Demonitor { id: monitor.id });
        true
    }

    /// Sends `op`, with no payload; `false` if it could not leave (logged:
    /// the relation's other end learns of the loss from its own
    /// transport, and this end acts on the `false`).
    pub(super) fn tell(&self, from: Pid, to: Pid, op: &Op) -> bool {
        match self.signal(from, to, op, None) {
            Ok(()) => true,
            Err(error) => {
                tracing::debug!(%from, %to, ?op, %error, "a signal did not reach its node");
                false
            }
        }
    }

    /// The local record listed for the link of `remote` with `local`.
    pub(super) fn listed_link(&self, remote: Pid, local: Pid) -> Option<RecordRef> {
        self.table.lock().links.get(&(remote, local)).cloned()
    }

    /// Removes the table's entry for the link (remote, local) if it is
    /// `record`'s.
    pub(super) fn forget_link(&self, remote: Pid, record: &RecordRef) {
        let mut table = self.table.lock();
        let key = (remote, record.pid);
        let gone = match table.links.get(&key) {
            Some(listed) if RecordRef::ptr_eq(listed, record) => table.links.remove(&key),
            _ => None,
        };
        drop(table);
        drop(gone);
    }
}
