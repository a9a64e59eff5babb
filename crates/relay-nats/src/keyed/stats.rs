//! What a node's keyed processes count, and what it reads of each kind's
//! shards: `ShardingStats`, `ShardStats`.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use sched::prelude::*;

use super::shard::{Child, Kind, Route};

/// What a node's keyed processes count (see [`Sharding::stats`](super::Sharding::stats)).
#[derive(Debug, Default)]
pub(crate) struct ShardingCounters {
    pub(crate) started: AtomicU64,
    pub(crate) passivated: AtomicU64,
    pub(crate) claims: AtomicU64,
    pub(crate) hand_offs: AtomicU64,
    pub(crate) shards_lost: AtomicU64,
    pub(crate) forwarded: AtomicU64,
    pub(crate) refused: AtomicU64,
    pub(crate) fenced: AtomicU64,
    pub(crate) fenced_processes: AtomicU64,
    pub(crate) handed_back: AtomicU64,
    /// Messages waiting now, in buffers and behind stopping processes.
    pub(crate) buffered: AtomicU64,
}

impl ShardingCounters {
    /// Takes one of `max` places for a waiting message, if one is free.
    pub(crate) fn take_buffer_slot(&self, max: u64) -> bool {
        self.buffered
            .fetch_update(Relaxed, Relaxed, |now| (now < max).then_some(now + 1))
            .is_ok()
    }

    /// Gives back a waiting message's place.
    pub(crate) fn give_buffer_slot(&self) {
        let _ = self
            .buffered
            .fetch_update(Relaxed, Relaxed, |now| Some(now.saturating_sub(1)));
    }
}

/// A snapshot of a node's keyed processes, from [`Sharding::stats`](super::Sharding::stats).
///
/// # Examples
///
/// ```
/// let stats = relay_nats::ShardingStats::default();
/// assert_eq!(stats.keys_live, 0);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShardingStats {
    /// Shards this node holds now, in all kinds.
    pub shards_held: u64,
    /// Keys with a process on this node now.
    pub keys_live: u64,
    /// Keyed processes started here (first use, or after passivation or
    /// a move).
    pub started: u64,
    /// Keyed processes cancelled here for being idle.
    pub passivated: u64,
    /// Shards this node claimed.
    pub claims: u64,
    /// Shards this node handed off (their processes ended, their names
    /// released).
    pub hand_offs: u64,
    /// Shards whose lease this node lost (it could not renew for a whole
    /// lease).
    pub shards_lost: u64,
    /// Messages sent from here to the node holding their shard.
    pub forwarded: u64,
    /// Keyed sends refused (the buffer or a mailbox full, a process that
    /// could not start, a message the codec cannot carry), including
    /// buffered messages refused later (each logged).
    pub refused: u64,
    /// Messages (and questions) dropped because their shard's lease ran
    /// out on this node: those a keyed process had not read when it found
    /// its lease run out (the rest of its mailbox is counted in the
    /// engine's dead letters), and those that waited here for the shard
    /// when this node learned it had lost it. Never stepped on, never
    /// passed on.
    pub fenced: u64,
    /// Keyed processes that found their lease run out, and ended without
    /// stepping.
    pub fenced_processes: u64,
    /// Messages that reached a keyed process after its last step, when
    /// this node had stopped it (passivated or handed off), and that it
    /// handed back to its key's next process instead of leaving them as
    /// dead letters (sent on an [`Entity`](super::Entity)'s cached route
    /// just as the process stopped).
    pub handed_back: u64,
    /// Messages waiting now for their shard's holder or for their key's
    /// stopping process.
    pub buffered: u64,
}

/// One shard of one kind as this node sees it now, from
/// [`Sharding::shard_stats`](super::Sharding::shard_stats).
///
/// # Examples
///
/// ```no_run
/// # fn show(sharding: &relay_nats::Sharding) {
/// for shard in sharding.shard_stats() {
///     println!("{}/{}: {} keys, {} waiting", shard.kind, shard.shard, shard.keys_live, shard.buffered);
/// }
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShardStats {
    /// The kind's name.
    pub kind: String,
    /// The shard's number, below [`ShardingConfig::shard_count`](super::ShardingConfig::shard_count).
    pub shard: u32,
    /// This node holds the shard: its keys' processes run here.
    pub held: bool,
    /// Keys of the shard with a running process here.
    pub keys_live: u64,
    /// Keys of the shard whose process here is stopping (passivated or
    /// handed off, not yet ended).
    pub keys_stopping: u64,
    /// The shard's messages waiting here: for a holder to be known, or
    /// behind a stopping process.
    pub buffered: u64,
}

impl ShardingStats {
    /// Every counter (not the gauges `shards_held`, `keys_live` and
    /// `buffered`) with its name, in the order above: what the `metrics`
    /// and `live` features publish.
    #[cfg_attr(not(any(feature = "metrics", feature = "live")), allow(dead_code))]
    pub(crate) fn counters(&self) -> [(&'static str, u64); 10] {
        [
            ("started", self.started),
            ("passivated", self.passivated),
            ("claims", self.claims),
            ("hand_offs", self.hand_offs),
            ("shards_lost", self.shards_lost),
            ("forwarded", self.forwarded),
            ("refused", self.refused),
            ("fenced", self.fenced),
            ("fenced_processes", self.fenced_processes),
            ("handed_back", self.handed_back),
        ]
    }
}

/// What [`Sharding::stats`](super::Sharding::stats) reads of each kind, whatever its types.
pub(super) trait KindStats: Send + Sync {
    /// Every shard of the kind, as this node sees it.
    fn shards(&self, into: &mut Vec<ShardStats>);
}

impl<P: Process, M: Send + 'static> KindStats for Kind<P, M> {
    fn shards(&self, into: &mut Vec<ShardStats>) {
        for index in 0..self.shard_count() {
            let shard = self.lock(index);
            let (mut live, mut stopping, mut behind) = (0, 0, 0);
            for child in shard.children.values() {
                match child {
                    Child::Live { .. } => live += 1,
                    Child::Stopping { queued, .. } => {
                        stopping += 1;
                        behind += queued.len() as u64;
                    }
                }
            }
            into.push(ShardStats {
                kind: self.name.clone(),
                shard: index,
                held: shard.route == Route::Here,
                keys_live: live,
                keys_stopping: stopping,
                buffered: shard.buffer.len() as u64 + behind,
            });
        }
    }
}
