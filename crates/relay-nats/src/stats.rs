//! What a transport counts: messages out and in, and every way one was
//! refused, rejected or lost.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// A snapshot of a transport's counters, from
/// [`NatsTransport::stats`](crate::NatsTransport::stats).
///
/// # Examples
///
/// ```
/// let stats = relay_nats::TransportStats::default();
/// assert_eq!(stats.published, 0);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TransportStats {
    /// Messages handed to the NATS client.
    pub published: u64,
    /// Messages the NATS client refused to publish (each also logged).
    pub publish_failed: u64,
    /// Sends refused before publishing: not encodable, node gone, backlog
    /// full, transport closed (the sender got the package back).
    pub refused: u64,
    /// Messages that arrived and were delivered to a local process.
    pub delivered: u64,
    /// Messages that arrived for a local process that does not exist or
    /// has ended, and `terminate` or `cancel` requests that found no
    /// process: dead letters on the receiving side (each logged).
    pub dead_letters: u64,
    /// Frames that arrived malformed, too large, with an unknown tag or for
    /// another node, and signals between engines the engine could not
    /// read: rejected, logged, and the receiver kept running.
    pub rejected: u64,
    /// Messages missing from a sender's sequence (lost in transit, as when
    /// the server restarts): the gaps the receiver saw.
    pub lost: u64,
    /// Times the connection to the server was re-established.
    pub reconnects: u64,
    /// Times another node was declared down by the failure detector.
    pub nodes_down: u64,
    /// Frames and announcements that came from an incarnation their node
    /// has left behind (a run before its restart): ignored.
    pub stale: u64,
    /// Frames dropped because their node was fenced: this transport had
    /// lost it, and it had not yet confirmed ending its relations with
    /// this node (they were sent before it did).
    pub fenced: u64,
    /// Times another node lost this one and told it so: this transport
    /// then ended its relations with that node in turn (or had already,
    /// having lost it too). Once per loss, however often it was told.
    pub resets: u64,
    /// Frames and announcements that claimed another node's identity: a
    /// source PID, an incarnation or a node number other than that of the
    /// node whose subject they came on. Dropped.
    pub forged: u64,
    /// Frames that arrived again with a number already seen from their
    /// sender (core NATS never repeats one: a replay). Dropped.
    pub duplicates: u64,
    /// Cluster names this node held and lost: its renewal found the name
    /// lapsed or rewritten (this node could not renew it for a whole
    /// lease, and another took it).
    pub names_lost: u64,
    /// Claims of a cluster name that no honest node writes, met by this
    /// node's reads and ignored: a claim whose PID is not of the node in
    /// its key, or written without the server-checked proof (see
    /// [`ClusterNames`](crate::ClusterNames)). Counted at every read that
    /// meets one.
    pub names_forged: u64,
    /// Times the NATS client reported this node's subscription too slow:
    /// it dropped frames its buffer could not hold. Those frames show as
    /// gaps (`lost`) once a later frame from the same sender arrives.
    pub slow_consumer: u64,
    /// Frames sent to a node that was then declared down (or restarted),
    /// and that it had not confirmed: nodes confirm, in every heartbeat,
    /// what their processes took of each sender's frames (the last frame
    /// seen, less those still unread in a mailbox). So these were lost on
    /// the way, received and never read, or read just before the node
    /// went silent: a frame to a node that dies is read there, counted
    /// there (a dead letter, lost), or counted here, never nothing.
    pub unconfirmed: u64,
    /// Messages accepted for another node (the send returned `Ok`) that
    /// this transport did not publish: the node was declared down or had
    /// left by the time their turn came, or had restarted since (they were
    /// for its earlier run), or the transport closed. Never delivered. Every accepted message is counted once, in `published`,
    /// `publish_failed` or here.
    pub abandoned: u64,
}

impl TransportStats {
    /// Every counter with its name (words joined by `_`), in the order
    /// above: what the `metrics` and `live` features publish.
    #[cfg_attr(not(any(feature = "metrics", feature = "live")), allow(dead_code))]
    pub(crate) fn named(&self) -> [(&'static str, u64); 19] {
        [
            ("published", self.published),
            ("publish_failed", self.publish_failed),
            ("refused", self.refused),
            ("delivered", self.delivered),
            ("dead_letters", self.dead_letters),
            ("rejected", self.rejected),
            ("lost", self.lost),
            ("reconnects", self.reconnects),
            ("nodes_down", self.nodes_down),
            ("stale", self.stale),
            ("fenced", self.fenced),
            ("resets", self.resets),
            ("forged", self.forged),
            ("duplicates", self.duplicates),
            ("names_lost", self.names_lost),
            ("names_forged", self.names_forged),
            ("slow_consumer", self.slow_consumer),
            ("unconfirmed", self.unconfirmed),
            ("abandoned", self.abandoned),
        ]
    }
}

#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) published: AtomicU64,
    pub(crate) publish_failed: AtomicU64,
    pub(crate) refused: AtomicU64,
    pub(crate) delivered: AtomicU64,
    pub(crate) dead_letters: AtomicU64,
    pub(crate) rejected: AtomicU64,
    pub(crate) lost: AtomicU64,
    pub(crate) reconnects: AtomicU64,
    pub(crate) nodes_down: AtomicU64,
    pub(crate) stale: AtomicU64,
    pub(crate) fenced: AtomicU64,
    pub(crate) resets: AtomicU64,
    pub(crate) forged: AtomicU64,
    pub(crate) duplicates: AtomicU64,
    pub(crate) names_lost: AtomicU64,
    pub(crate) names_forged: AtomicU64,
    pub(crate) slow_consumer: AtomicU64,
    pub(crate) unconfirmed: AtomicU64,
    pub(crate) abandoned: AtomicU64,
}

impl Counters {
    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Relaxed);
    }

    pub(crate) fn snapshot(&self) -> TransportStats {
        TransportStats {
            published: self.published.load(Relaxed),
            publish_failed: self.publish_failed.load(Relaxed),
            refused: self.refused.load(Relaxed),
            delivered: self.delivered.load(Relaxed),
            dead_letters: self.dead_letters.load(Relaxed),
            rejected: self.rejected.load(Relaxed),
            lost: self.lost.load(Relaxed),
            reconnects: self.reconnects.load(Relaxed),
            nodes_down: self.nodes_down.load(Relaxed),
            stale: self.stale.load(Relaxed),
            fenced: self.fenced.load(Relaxed),
            resets: self.resets.load(Relaxed),
            forged: self.forged.load(Relaxed),
            duplicates: self.duplicates.load(Relaxed),
            names_lost: self.names_lost.load(Relaxed),
            names_forged: self.names_forged.load(Relaxed),
            slow_consumer: self.slow_consumer.load(Relaxed),
            unconfirmed: self.unconfirmed.load(Relaxed),
            abandoned: self.abandoned.load(Relaxed),
        }
    }
}
