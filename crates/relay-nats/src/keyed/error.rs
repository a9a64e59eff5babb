//! What keyed processes refuse, and why.

use std::fmt;

use crate::ClusterNameError;

/// Why [`Sharding::register`](crate::Sharding::register) failed.
///
/// # Examples
///
/// ```
/// use relay_nats::ShardingError;
/// let error = ShardingError::InvalidKind("no spaces".into());
/// assert!(error.to_string().contains("no spaces"));
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum ShardingError {
    /// A kind's name must be 1-64 ASCII letters, digits, `-` or `_`.
    InvalidKind(String),
    /// This `Sharding` already has a kind of that name.
    AlreadyRegistered(String),
    /// The cluster names a sharding needs are not on, or their keeper or
    /// the kind's host process could not start.
    Names(ClusterNameError),
}

impl fmt::Display for ShardingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ShardingError::InvalidKind(kind) => write!(
                f,
                "invalid kind `{kind}`: use 1-64 ASCII letters, digits, `-` or `_`"
            ),
            ShardingError::AlreadyRegistered(kind) => {
                write!(f, "a kind named `{kind}` is registered already")
            }
            ShardingError::Names(error) => write!(f, "cluster names: {error}"),
        }
    }
}

impl std::error::Error for ShardingError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ShardingError::Names(error) => Some(error),
            _ => None,
        }
    }
}

impl From<ClusterNameError> for ShardingError {
    fn from(error: ClusterNameError) -> Self {
        ShardingError::Names(error)
    }
}

/// Why a keyed send was refused; [`Refused`] carries it with the message.
///
/// # Examples
///
/// ```
/// use relay_nats::RefusedReason;
/// assert_eq!(RefusedReason::BufferFull.to_string(), "the keyed buffer is full");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RefusedReason {
    /// The key's shard has no known holder yet (it is being placed or
    /// handed off) and the messages waiting for one have reached
    /// [`ShardingConfig::max_buffered`](crate::ShardingConfig::max_buffered).
    BufferFull,
    /// The key's process has as many messages waiting as its mailbox holds.
    MailboxFull,
    /// The key's process could not be started (the engine is shutting
    /// down, or refused it): the text says why.
    NotStarted(String),
    /// The message cannot cross to the node that holds the key's shard:
    /// the codec has no tag for `Keyed<M>`.
    Unencodable,
}

impl fmt::Display for RefusedReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RefusedReason::BufferFull => f.write_str("the keyed buffer is full"),
            RefusedReason::MailboxFull => f.write_str("the key's mailbox is full"),
            RefusedReason::NotStarted(why) => write!(f, "the key's process did not start: {why}"),
            RefusedReason::Unencodable => {
                f.write_str("the codec cannot encode `Keyed<M>`: register it on every node")
            }
        }
    }
}

/// A keyed send that was refused: the message, handed back, and why.
///
/// # Examples
///
/// ```
/// use relay_nats::{Refused, RefusedReason};
/// let refused = Refused { message: 7u32, reason: RefusedReason::BufferFull };
/// assert_eq!(refused.message, 7);
/// ```
pub struct Refused<M> {
    /// The message, untouched.
    pub message: M,
    /// Why it was refused.
    pub reason: RefusedReason,
}

impl<M> fmt::Display for Refused<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "keyed send refused: {}", self.reason)
    }
}

/// Shows the reason and the message's type, not the message: a message
/// type need not be `Debug` for `?` to carry its refusal.
impl<M> fmt::Debug for Refused<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Refused")
            .field("message", &std::any::type_name::<M>())
            .field("reason", &self.reason)
            .finish()
    }
}

impl<M> std::error::Error for Refused<M> {}
