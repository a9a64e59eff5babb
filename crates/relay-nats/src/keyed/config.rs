//! How a node runs its keyed processes: the number of shards, the idle
//! time before passivation, the bound on waiting messages.

use std::time::Duration;

/// Default number of shards per kind.
pub const DEFAULT_SHARDS: u32 = 64;
/// Default time after which a key's idle process is passivated.
pub const DEFAULT_PASSIVATE_AFTER: Duration = Duration::from_secs(120);
/// Default bound on messages waiting for their shard's holder.
pub const DEFAULT_MAX_BUFFERED: u64 = 100_000;

/// How a node runs its keyed processes. Every node of the cluster must
/// use the same number of shards.
///
/// # Examples
///
/// ```
/// use relay_nats::ShardingConfig;
/// use std::time::Duration;
///
/// let config = ShardingConfig::new()
///     .shards(128)
///     .passivate_after(Duration::from_secs(30))
///     .max_buffered(10_000);
/// assert_eq!(config.shard_count(), 128);
/// ```
#[derive(Debug, Clone)]
pub struct ShardingConfig {
    pub(super) shards: u32,
    pub(super) passivate_after: Duration,
    pub(super) max_buffered: u64,
}

impl Default for ShardingConfig {
    fn default() -> Self {
        ShardingConfig {
            shards: DEFAULT_SHARDS,
            passivate_after: DEFAULT_PASSIVATE_AFTER,
            max_buffered: DEFAULT_MAX_BUFFERED,
        }
    }
}

impl ShardingConfig {
    /// The defaults: [`DEFAULT_SHARDS`], [`DEFAULT_PASSIVATE_AFTER`],
    /// [`DEFAULT_MAX_BUFFERED`].
    ///
    /// # Examples
    ///
    /// ```
    /// let config = relay_nats::ShardingConfig::new();
    /// assert_eq!(config.shard_count(), relay_nats::DEFAULT_SHARDS);
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// Shards per kind (at least 1; the same on every node). More shards
    /// spread keys more evenly and move in smaller pieces; each held
    /// shard is one cluster name, renewed every third of the lease.
    ///
    /// # Examples
    ///
    /// ```
    /// let config = relay_nats::ShardingConfig::new().shards(0);
    /// assert_eq!(config.shard_count(), 1);
    /// ```
    pub fn shards(mut self, shards: u32) -> Self {
        self.shards = shards.max(1);
        self
    }

    /// The number of shards per kind.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(relay_nats::ShardingConfig::new().shards(8).shard_count(), 8);
    /// ```
    pub fn shard_count(&self) -> u32 {
        self.shards
    }

    /// How long a key's process may go without a message before it is
    /// passivated (checked every 100 ms).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// let config = relay_nats::ShardingConfig::new().passivate_after(Duration::from_secs(5));
    /// # drop(config);
    /// ```
    pub fn passivate_after(mut self, idle: Duration) -> Self {
        self.passivate_after = idle;
        self
    }

    /// How many messages, in all kinds of this node, may wait for their
    /// shard's holder before sends are refused.
    ///
    /// # Examples
    ///
    /// ```
    /// let config = relay_nats::ShardingConfig::new().max_buffered(1_000);
    /// # drop(config);
    /// ```
    pub fn max_buffered(mut self, max: u64) -> Self {
        self.max_buffered = max;
        self
    }
}
