//! The state of an engine's relations with processes of other nodes (see
//! `relations.rs` for what is done with it, and the protocol): the table
//! of monitors, watches, links and asks, and the transport they travel
//! through. It names no engine state, so the engine's shared state can hold
//! it.
//!
//! The table is split into shards, each entry in the one its key hashes
//! to, each shard behind its own lock on its own cache line: every remote
//! monitor, link or ask takes one shard's lock, so processes of many
//! workers relating to other nodes do not queue on one lock. Only a lost
//! node's sweep takes them all, one after the other.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc as StdArc;

use crossbeam_utils::CachePadded;
use rustc_hash::FxHasher;

use relay::{Package, Payload, Pid, RemoteTransport, SendError, Signal};

use super::protocol::Op;
use crate::contract::down::MonitorId;
use crate::contract::reply::Answer;
use crate::record::relations::Watcher;
use crate::record::RecordRef;
use crate::sync::{Mutex, MutexGuard};

/// Shards of the table (a power of two).
const SHARDS: usize = 32;

/// An engine's relations with processes of other nodes, and the transport
/// they travel through.
pub(crate) struct Across {
    pub(crate) node: u32,
    pub(crate) remote: StdArc<dyn RemoteTransport>,
    shards: Box<[CachePadded<Mutex<Table>>]>,
}

impl std::fmt::Debug for Across {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut counts = [0usize; 4];
        for shard in self.shards.iter() {
            let table = shard.lock();
            counts[0] += table.watching.len();
            counts[1] += table.watched.len();
            counts[2] += table.links.len();
            counts[3] += table.asks.len();
        }
        f.debug_struct("Across")
            .field("node", &self.node)
            .field("watching", &counts[0])
            .field("watched", &counts[1])
            .field("links", &counts[2])
            .field("asks", &counts[3])
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

/// Takes out of `map` the entries `names` picks (those of a lost node),
/// in the map's order: sort what is gathered with [`by_key`].
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

/// Sorts entries taken from the shards by key, not in the maps' order: a
/// hash map's order differs from run to run, and what a lost node's sweep
/// tells whom, in which order, must not (a simulation replays it; its
/// ids are counted, see `engine/ids.rs`).
pub(super) fn by_key<K: Ord, V>(entries: &mut [(K, V)]) {
    entries.sort_unstable_by(|a, b| a.0.cmp(&b.0));
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
            shards: (0..SHARDS)
                .map(|_| CachePadded::new(Mutex::new(Table::default())))
                .collect(),
        }
    }

    /// The shard that holds the entries keyed `key`, locked. Every entry
    /// is found under the same key it was put in with (same type, same
    /// value), so in the same shard.
    pub(super) fn shard<K: Hash>(&self, key: &K) -> MutexGuard<'_, Table> {
        let mut hasher = FxHasher::default();
        key.hash(&mut hasher);
        // The high bits: the multiply at the end of Fx mixes into them.
        let index = (hasher.finish() >> (64 - SHARDS.trailing_zeros())) as usize;
        self.shards[index].lock()
    }

    /// Every shard, for a lost node's sweep (locked one at a time).
    pub(super) fn shards(&self) -> impl Iterator<Item = &Mutex<Table>> {
        self.shards.iter().map(|shard| &**shard)
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
        let entry = self.shard(&monitor.id).watching.remove(&monitor.id);
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
        let key = (remote, local);
        self.shard(&key).links.get(&key).cloned()
    }

    /// Removes the table's entry for the link (remote, local) if it is
    /// `record`'s.
    pub(super) fn forget_link(&self, remote: Pid, record: &RecordRef) {
        let key = (remote, record.pid);
        let mut table = self.shard(&key);
        let gone = match table.links.get(&key) {
            Some(listed) if RecordRef::ptr_eq(listed, record) => table.links.remove(&key),
            _ => None,
        };
        drop(table);
        drop(gone);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[derive(Debug)]
    struct Nowhere;

    impl RemoteTransport for Nowhere {
        fn attach(&self, _: u32, _: StdArc<dyn relay::Receiver + Send + Sync>) {}
        fn send(&self, package: Package) -> Result<(), SendError> {
            Err(SendError::unknown_target(package))
        }
    }

    fn index_of<K: Hash>(across: &Across, key: &K) -> usize {
        let shard = across.shard(key);
        let at = across
            .shards()
            .position(|s| std::ptr::eq(MutexGuard::mutex(&shard), s))
            .unwrap();
        drop(shard);
        at
    }

    /// Consecutive ids (as `Ids::next` hands out) and the keys of one
    /// node's links spread over the shards, and a key always finds the
    /// shard it was put in.
    #[test]
    fn keys_spread_over_the_shards_and_find_their_own() {
        let across = Across::new(1, StdArc::new(Nowhere));
        let ids: HashSet<usize> = (1..=256u64).map(|id| index_of(&across, &id)).collect();
        assert!(ids.len() >= SHARDS / 2, "ids used {} shards", ids.len());
        let links: HashSet<usize> = (1..=256u64)
            .map(|n| index_of(&across, &(Pid::new(2, n), Pid::new(1, 7))))
            .collect();
        assert!(
            links.len() >= SHARDS / 2,
            "links used {} shards",
            links.len()
        );
        for id in 0..64u64 {
            across
                .shard(&id)
                .asks
                .insert(id, (2, StdArc::new(NoAnswer)));
        }
        for id in 0..64u64 {
            assert!(across.shard(&id).asks.remove(&id).is_some(), "ask {id}");
        }
    }

    struct NoAnswer;

    impl Answer for NoAnswer {
        fn asker(&self) -> Pid {
            Pid::OUTSIDE
        }
        fn answer(&self, _: Result<Payload, crate::contract::reply::AskError>) {}
        fn unread(&self, question: Payload) -> Result<(), Payload> {
            Err(question)
        }
    }
}
