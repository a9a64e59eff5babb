//! Monitors and links between a process of this node and a process of
//! another: the table each engine keeps of them, and what it does with the
//! signals of [`protocol`](super::protocol).
//!
//! # Monitors
//!
//! A monitor of a remote process is listed here, under its id, before the
//! `monitor` signal leaves; the other node attaches a watch to the process
//! (its own record, so never a later process under the same PID) and
//! answers `down` when it ends, at once if it has ended or never existed.
//! Whoever removes the entry from `watching` tells the watcher, so a
//! monitor fires once: a `down`, the node being lost (`NodeDown`), or a
//! `demonitor`, whichever comes first; a `down` arriving after its monitor
//! fired or was removed finds no entry and is dropped.
//!
//! # Links
//!
//! Each end lists the remote PID in its process's relations
//! (`Related::remote_links`) and in the table's `links`, by (remote,
//! local). The entry in the process's own list stands for the one exit
//! signal the link may bring: whoever removes it acts on the signal, under
//! the process's relations lock, as local links do. An `exit` that finds no
//! entry (the process unlinked first) is ignored, so nothing comes after
//! `unlink` returns. A `link` to a process that has ended or never existed
//! is answered with its `exit` at once.
//!
//! # A lost node
//!
//! When the transport says it can no longer vouch for a node
//! ([`NodeDown`](relay::NodeDown)), every entry naming that node goes: its
//! monitors fire and its links signal with [`ExitReason::NodeDown`], the
//! watches it held here are detached, its asks fail. What the node sends
//! later for those relations finds no entry.
//!
//! Lock order: a shard of the table (one at a time), then a process's
//! relations lock, never the other way; no signal is sent and no watcher
//! told with either held (a transport may deliver at once, back into this
//! table).

use std::sync::Arc as StdArc;

use relay::Pid;

use super::protocol::Op;
use super::table::{by_key, take_where, watcher_pid, Across};
use crate::contract::down::{Down, ExitReason, MonitorId};
use crate::contract::reply::AskError;
use crate::engine::in_records::Monitors;
use crate::engine::shared::Shared;
use crate::record::relations::{Watch, Watcher};
use crate::record::RecordRef;

/// The relations with other nodes' processes are the table's operations:
/// each reads the table through `self`, and takes the engine only for what
/// another feature does (the id source, the process table, telling a
/// watcher, waking a process).
impl Across {
    /// Monitors the remote process `target` for `watcher`.
    pub(crate) fn monitor_remote(
        &self,
        engine: &Shared,
        target: Pid,
        watcher: Watcher,
    ) -> MonitorId {
        let id = engine.ids.next();
        let from = watcher_pid(&watcher, self.node);
        self.shard(&id).watching.insert(id, (target, watcher));
        if !self.tell(from, target, &Op::Monitor { id }) {
            self.remote_down(engine, target, id, ExitReason::NodeDown, None);
        }
        MonitorId { target, id }
    }

    /// The remote process `from` that monitor `id` watches has ended, or
    /// its node is lost: tells the watcher, unless the monitor has fired or
    /// been removed.
    pub(super) fn remote_down(
        &self,
        engine: &Shared,
        from: Pid,
        id: u64,
        reason: ExitReason,
        detail: Option<StdArc<str>>,
    ) {
        let mut table = self.shard(&id);
        let entry = match table.watching.get(&id) {
            Some((target, _)) if *target == from => table.watching.remove(&id),
            _ => None,
        };
        drop(table);
        if let Some((target, watcher)) = entry {
            let down = Down {
                monitor: MonitorId { target, id },
                pid: target,
                reason,
                detail,
            };
            engine.monitors.tell_down(engine, watcher, down);
        }
    }

    /// A watcher on node `watcher.node()` monitors `target`, a process
    /// here, under its id `id`.
    pub(super) fn watched_by_remote(&self, engine: &Shared, watcher: Pid, target: Pid, id: u64) {
        let record = engine.processes.get(target);
        let local = engine.ids.next();
        let refused = match record {
            None => Some(ExitReason::NoProcess),
            Some(record) => {
                // Listed under the entry's shard's lock, so the end's
                // `down` (which removes the entry under it) comes after.
                let key = (watcher.node(), id);
                let mut table = self.shard(&key);
                let attached = record.related().with_live(|related| {
                    related.monitors.push(Watch {
                        id: local,
                        watcher: Watcher::Remote { watcher, id },
                    });
                });
                match attached {
                    Ok(()) => {
                        let old = table.watched.insert(key, (record, local));
                        drop(table);
                        drop(old);
                        None
                    }
                    Err(reason) => Some(reason),
                }
            }
        };
        if let Some(reason) = refused {
            let down = Op::Down {
                id,
                reason,
                detail: None,
            };
            self.tell(target, watcher, &down);
        }
    }

    /// Tells a watcher on another node that the process it watched ended.
    pub(crate) fn down_to_remote(&self, watcher: Pid, id: u64, down: Down) {
        let key = (watcher.node(), id);
        let gone = self.shard(&key).watched.remove(&key);
        drop(gone);
        let op = Op::Down {
            id,
            reason: down.reason,
            detail: down.detail,
        };
        self.tell(down.pid, watcher, &op);
    }

    /// The remote watcher's monitor `id` of `target` is removed.
    pub(super) fn unwatched_by_remote(&self, watcher: Pid, id: u64) {
        let key = (watcher.node(), id);
        let entry = self.shard(&key).watched.remove(&key);
        if let Some((record, local)) = entry {
            Monitors::detach(&record, local);
        }
    }

    /// Links `me` with the remote process `other`.
    pub(crate) fn link_remote(&self, engine: &Shared, me: &RecordRef, other: Pid) {
        let added = me.related().with_live(|related| {
            if related.remote_links.contains(&other) {
                return false;
            }
            related.remote_links.push(other);
            true
        });
        if added != Ok(true) {
            return;
        }
        let key = (other, me.pid);
        let old = self.shard(&key).links.insert(key, RecordRef::clone(me));
        drop(old);
        if !self.tell(me.pid, other, &Op::Link) {
            self.remote_exit(engine, me, other, ExitReason::NodeDown, None);
        }
    }

    /// Removes the link of `me` with the remote process `other`.
    pub(crate) fn unlink_remote(&self, me: &RecordRef, other: Pid) {
        let removed = me
            .relations
            .with_existing(|related| related.remove_remote_link(other));
        if removed != Some(true) {
            return;
        }
        self.forget_link(other, me);
        self.tell(me.pid, other, &Op::Unlink);
    }

    /// The remote process `from` links itself with `target`, here.
    pub(super) fn linked_by_remote(&self, engine: &Shared, from: Pid, target: Pid) {
        let refused = match engine.processes.get(target) {
            None => Some(ExitReason::NoProcess),
            Some(record) => {
                let key = (from, target);
                let mut table = self.shard(&key);
                let added = record.related().with_live(|related| {
                    if related.remote_links.contains(&from) {
                        return false;
                    }
                    related.remote_links.push(from);
                    true
                });
                match added {
                    Ok(true) => {
                        let old = table.links.insert(key, record);
                        drop(table);
                        drop(old);
                        None
                    }
                    Ok(false) => None,
                    Err(reason) => Some(reason),
                }
            }
        };
        if let Some(reason) = refused {
            let exit = Op::Exit {
                reason,
                detail: None,
            };
            self.tell(target, from, &exit);
        }
    }

    /// The remote process `from` unlinks itself from `target`, here.
    pub(super) fn unlinked_by_remote(&self, from: Pid, target: Pid) {
        let Some(record) = self.listed_link(from, target) else {
            return;
        };
        let removed = record
            .relations
            .with_existing(|related| related.remove_remote_link(from));
        if removed == Some(true) {
            self.forget_link(from, &record);
        }
    }

    /// The exit signal of the remote process `from` reaches `target`, if
    /// `target` still lists the link.
    fn remote_exit(
        &self,
        engine: &Shared,
        target: &RecordRef,
        from: Pid,
        reason: ExitReason,
        detail: Option<StdArc<str>>,
    ) {
        self.forget_link(from, target);
        let acted = target.relations.with_existing(|related| {
            related
                .remove_remote_link(from)
                .then(|| crate::engine::links::act_on_exit(target, related, from, reason, detail))
        });
        if let Some(Some(Some(wake))) = acted {
            engine.after_wake(target, wake);
        }
    }

    /// An exit signal from the remote process `from` for `target`, here.
    pub(super) fn exit_from_remote(
        &self,
        engine: &Shared,
        from: Pid,
        target: Pid,
        reason: ExitReason,
        detail: Option<StdArc<str>>,
    ) {
        if let Some(record) = self.listed_link(from, target) {
            self.remote_exit(engine, &record, from, reason, detail);
        }
    }

    /// `record`, which had links to remote processes, has ended: each gets
    /// its exit signal.
    pub(crate) fn remote_links_end(
        &self,
        record: &RecordRef,
        links: Vec<Pid>,
        reason: ExitReason,
        detail: Option<StdArc<str>>,
    ) {
        for other in links {
            self.forget_link(other, record);
            let exit = Op::Exit {
                reason,
                detail: detail.clone(),
            };
            self.tell(record.pid, other, &exit);
        }
    }

    /// The transport can no longer vouch for `node`: every relation with
    /// its processes ends, with [`ExitReason::NodeDown`] (see the module's
    /// doc).
    pub(crate) fn node_down(&self, engine: &Shared, node: u32) {
        if node == self.node {
            return;
        }
        let (mut watching, mut watched, mut links, mut asks) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for shard in self.shards() {
            let mut table = shard.lock();
            watching.extend(take_where(&mut table.watching, |_, (target, _)| {
                target.node() == node
            }));
            watched.extend(take_where(&mut table.watched, |(n, _), _| *n == node));
            links.extend(take_where(&mut table.links, |(remote, _), _| {
                remote.node() == node
            }));
            asks.extend(take_where(&mut table.asks, |_, (n, _)| *n == node));
        }
        // In key order, whatever shard each entry was in: the same sweep
        // tells the same watchers in the same order in every run.
        by_key(&mut watching);
        by_key(&mut watched);
        by_key(&mut links);
        by_key(&mut asks);
        tracing::info!(
            node,
            monitors = watching.len(),
            watches = watched.len(),
            links = links.len(),
            asks = asks.len(),
            "relations with a lost node end"
        );
        for (id, (target, watcher)) in watching {
            let down = Down {
                monitor: MonitorId { target, id },
                pid: target,
                reason: ExitReason::NodeDown,
                detail: None,
            };
            engine.monitors.tell_down(engine, watcher, down);
        }
        for (_, (record, local)) in watched {
            Monitors::detach(&record, local);
        }
        for ((remote, _), record) in links {
            self.remote_exit(engine, &record, remote, ExitReason::NodeDown, None);
        }
        for (_, (_, asker)) in asks {
            asker.answer(Err(AskError::NodeDown));
        }
    }
}
