//! The name table: which record holds each name, and the sends parked
//! for a name nobody holds, sharded by the name's hash. What registering,
//! looking up and parking mean is in the module above (`names/mod.rs`).

use std::collections::hash_map::{HashMap, RandomState};
use std::collections::VecDeque;
use std::hash::BuildHasher;
use std::sync::atomic::Ordering::{Acquire, SeqCst};
use std::sync::Arc as StdArc;
use std::time::Instant;

use crossbeam_utils::CachePadded;
use relay::Package;

use crate::record::state::{state_of, COMPLETE};
use crate::record::{Record, RecordRef};
use crate::sync::{AtomicBool, AtomicUsize, Condvar, Mutex};

/// Shards of the name table: registrations and lookups of different names
/// rarely meet on one lock.
const SHARDS: usize = 64;

/// One shard of the table.
#[derive(Debug, Default)]
pub(super) struct ShardMaps {
    /// Name to the record holding it.
    pub(super) holders: HashMap<StdArc<str>, RecordRef>,
    /// Packages sent from steps to a name nobody holds, waiting for it, in
    /// the order they were sent.
    pub(super) parked: HashMap<StdArc<str>, VecDeque<Parked>>,
}

/// A package waiting for a name, until `deadline`.
#[derive(Debug)]
pub(super) struct Parked {
    pub(super) package: Package,
    pub(super) deadline: Instant,
}

#[derive(Debug, Default)]
pub(super) struct Shard {
    pub(super) maps: Mutex<ShardMaps>,
    /// Notified by every registration in this shard, for outside threads
    /// waiting for a name.
    pub(super) registered: Condvar,
}

/// The name table, sharded by the name's hash.
#[derive(Debug)]
pub(crate) struct Names {
    pub(super) hasher: RandomState,
    pub(super) shards: Box<[CachePadded<Shard>]>,
    /// Outside threads waiting for a name now (written only by them), so
    /// that shutdown visits the shards only when one may be waiting.
    pub(super) outside_waiters: AtomicUsize,
    /// Whether a step ever parked a send here, so that shutdown visits the
    /// shards for what is left only then.
    pub(super) ever_parked: AtomicBool,
}

impl Default for Names {
    fn default() -> Self {
        Names {
            hasher: RandomState::new(),
            shards: (0..SHARDS)
                .map(|_| CachePadded::new(Shard::default()))
                .collect(),
            outside_waiters: AtomicUsize::new(0),
            ever_parked: AtomicBool::new(false),
        }
    }
}

pub(super) fn ended(record: &Record) -> bool {
    state_of(record.state.load()) == COMPLETE
}

/// The record holding `name` if it is live and not `refused` (one that
/// just refused a message because it is ending).
pub(super) fn live_holder(
    holders: &HashMap<StdArc<str>, RecordRef>,
    name: &str,
    refused: Option<&RecordRef>,
) -> Option<RecordRef> {
    let record = holders.get(name).filter(|r| !ended(r))?;
    if refused.is_some_and(|refused| RecordRef::ptr_eq(refused, record)) {
        return None;
    }
    Some(RecordRef::clone(record))
}

impl Names {
    pub(super) fn shard(&self, name: &str) -> &Shard {
        &self.shards[(self.hasher.hash_one(name) as usize) % SHARDS]
    }

    /// The live record holding `name`.
    pub(super) fn lookup(&self, name: &str) -> Option<RecordRef> {
        let shard = self.shard(name).maps.lock();
        shard.holders.get(name).filter(|r| !ended(r)).cloned()
    }

    /// Drops `name` if `record` still holds it (its process ended).
    pub(crate) fn release(&self, name: &str, record: &Record) {
        let removed = {
            let mut shard = self.shard(name).maps.lock();
            match shard.holders.get(name) {
                Some(holder) if std::ptr::eq(&**holder, record) => shard.holders.remove(name),
                _ => None,
            }
        };
        drop(removed);
    }

    /// Takes the packages parked for `name` whose deadline has passed at
    /// `now`; the rest stay, in order.
    pub(super) fn take_late(&self, name: &str, now: Instant) -> Vec<Package> {
        let mut shard = self.shard(name).maps.lock();
        let Some(queue) = shard.parked.get_mut(name) else {
            return Vec::new();
        };
        let (late, waiting): (Vec<_>, Vec<_>) = queue.drain(..).partition(|p| p.deadline <= now);
        queue.extend(waiting);
        if queue.is_empty() {
            shard.parked.remove(name);
        }
        late.into_iter().map(|p| p.package).collect()
    }

    /// Wakes every outside thread waiting for a name (shutdown: they see
    /// the stopping flag and give up).
    pub(crate) fn wake_all(&self) {
        // SeqCst, as the waiter's increment: a waiter that registered
        // before the stopping flag was set is counted here; one that
        // registers after reads the flag under its shard's lock.
        if self.outside_waiters.load(SeqCst) == 0 {
            return;
        }
        for shard in self.shards.iter() {
            // Under the lock: a waiter between its check of the flag and
            // its wait holds it, so it cannot miss this.
            let _maps = shard.maps.lock();
            shard.registered.notify_all();
        }
    }

    /// Every package still parked, for shutdown.
    pub(crate) fn take_all_parked(&self) -> Vec<Package> {
        let mut all = Vec::new();
        // Acquire: pairs with the parking step's store; shutdown calls this
        // after every process ended, so a park that happened is seen.
        if !self.ever_parked.load(Acquire) {
            return all;
        }
        let mut by_name = Vec::new();
        for shard in self.shards.iter() {
            let parked = std::mem::take(&mut shard.maps.lock().parked);
            by_name.extend(parked);
        }
        // By name, each name's in the order sent: the shards and the maps
        // are in a hashed order that differs from run to run, and a
        // simulation's shutdown must hand these back the same way each
        // time.
        by_name.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        all.extend(
            by_name
                .into_iter()
                .flat_map(|(_, queue)| queue)
                .map(|p| p.package),
        );
        all
    }
}
