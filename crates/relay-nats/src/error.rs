//! Typed errors: encoding a message, decoding one, connecting, why a node
//! cannot be reached, and why a cluster name operation failed.

use std::error::Error;
use std::fmt;

use relay::Pid;

/// Why a message could not be turned into bytes for another node. It is
/// the [`cause`](relay::SendError::cause) of a send refused with
/// [`SendErrorKind::Unencodable`](relay::SendErrorKind::Unencodable); the
/// package comes back in that `SendError`.
///
/// # Examples
///
/// ```
/// use relay_nats::{Codec, EncodeError};
/// use sched::prelude::*;
/// use sched::Package;
///
/// let codec = Codec::new();
/// let package = Package::new(Pid::new(1, 1), Pid::new(2, 1), 5_u32);
/// let err = codec.encode(&package).unwrap_err();
/// assert!(matches!(err, EncodeError::NotRegistered));
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum EncodeError {
    /// The payload's type is not registered with the codec.
    NotRegistered,
    /// The payload's serializer failed.
    Serialize {
        /// The tag of the payload's type.
        tag: String,
        /// The serializer's error (`serde_json`'s or `postcard`'s, after
        /// the type's [`Format`](crate::Format)).
        source: Box<dyn Error + Send + Sync>,
    },
    /// The encoded message is longer than the transport allows.
    TooLarge {
        /// Its length in bytes.
        size: usize,
        /// The limit.
        max: usize,
    },
}

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EncodeError::NotRegistered => {
                f.write_str("the payload's type is not registered with the codec")
            }
            EncodeError::Serialize { tag, source } => {
                write!(f, "cannot serialize a `{tag}` message: {source}")
            }
            EncodeError::TooLarge { size, max } => {
                write!(f, "the encoded message has {size} bytes, more than {max}")
            }
        }
    }
}

impl Error for EncodeError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            EncodeError::Serialize { source, .. } => Some(&**source),
            _ => None,
        }
    }
}

/// Why bytes that arrived from another node were rejected. The receiving
/// transport logs it, counts it
/// ([`TransportStats::rejected`](crate::TransportStats::rejected)) and
/// keeps running.
///
/// # Examples
///
/// ```
/// use relay_nats::{Codec, DecodeError};
///
/// let err = Codec::new().decode(b"junk", 2).unwrap_err();
/// assert!(matches!(err, DecodeError::Truncated { len: 4 }));
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum DecodeError {
    /// Shorter than its header says.
    Truncated {
        /// How many bytes there were.
        len: usize,
    },
    /// Longer than the transport accepts.
    TooLarge {
        /// Its length in bytes.
        size: usize,
        /// The limit.
        max: usize,
    },
    /// A frame version this build does not know.
    UnsupportedVersion(u8),
    /// The payload tag is not UTF-8.
    BadTag,
    /// No type is registered under the tag.
    UnknownTag(String),
    /// The target PID belongs to another node than the receiving one.
    WrongNode {
        /// The target named in the frame.
        target: Pid,
        /// The receiving node.
        node: u32,
    },
    /// A control frame between two transports, not a package.
    Control,
    /// The payload's deserializer failed.
    Deserialize {
        /// The payload's tag.
        tag: String,
        /// The deserializer's error (`serde_json`'s or `postcard`'s, after
        /// the type's [`Format`](crate::Format)).
        source: Box<dyn Error + Send + Sync>,
    },
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Truncated { len } => write!(f, "truncated frame ({len} bytes)"),
            DecodeError::TooLarge { size, max } => {
                write!(f, "frame of {size} bytes exceeds the limit of {max}")
            }
            DecodeError::UnsupportedVersion(v) => write!(f, "unsupported frame version {v}"),
            DecodeError::BadTag => f.write_str("the payload tag is not UTF-8"),
            DecodeError::UnknownTag(tag) => write!(f, "no type is registered as `{tag}`"),
            DecodeError::WrongNode { target, node } => {
                write!(f, "a message for {target} arrived at node {node}")
            }
            DecodeError::Control => f.write_str("a control frame between transports"),
            DecodeError::Deserialize { tag, source } => {
                write!(f, "cannot deserialize a `{tag}` message: {source}")
            }
        }
    }
}

impl Error for DecodeError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            DecodeError::Deserialize { source, .. } => Some(&**source),
            _ => None,
        }
    }
}

/// Why a node could not be reached. It is the
/// [`cause`](relay::SendError::cause) of a send refused with
/// [`Unreachable`](relay::SendErrorKind::Unreachable) or
/// [`Full`](relay::SendErrorKind::Full).
///
/// # Examples
///
/// ```
/// use relay_nats::LinkError;
///
/// assert_eq!(LinkError::NodeLeft(3).to_string(), "node 3 has left the cluster");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LinkError {
    /// The target's node announced that it left.
    NodeLeft(u32),
    /// The target's node has not been heard from for the failure
    /// detector's bound (see
    /// [`NatsConfig::failure_detector`](crate::NatsConfig::failure_detector)):
    /// it crashed, hangs or is cut off. Sends to it are refused until it
    /// is heard from again.
    NodeDown(u32),
    /// This transport lost the target's node (its failure detector
    /// declared it down, frames from it went missing, or this node's own
    /// connection dropped) and ended every relation with it; the node is
    /// heard again but has not yet confirmed that it ended its relations
    /// with this node in turn. Sends to it are refused until it does (one
    /// round trip once the two hear each other).
    Resetting(u32),
    /// This transport was closed.
    Closed,
    /// Too many messages wait to be published (the connection to the
    /// server is down, or slower than the senders).
    Backlog {
        /// The limit on waiting messages.
        max: usize,
    },
}

impl fmt::Display for LinkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LinkError::NodeLeft(node) => write!(f, "node {node} has left the cluster"),
            LinkError::NodeDown(node) => {
                write!(
                    f,
                    "node {node} is down: not heard from within the failure detector's bound"
                )
            }
            LinkError::Resetting(node) => write!(
                f,
                "node {node} was lost and has not yet ended its relations with this node"
            ),
            LinkError::Closed => f.write_str("the NATS transport is closed"),
            LinkError::Backlog { max } => {
                write!(f, "{max} messages already wait to be published")
            }
        }
    }
}

impl Error for LinkError {}

/// Why connecting to NATS failed.
///
/// # Examples
///
/// ```
/// use relay_nats::{NatsConfig, NatsTransport};
///
/// // Nothing listens on port 1; with no retries the connection fails.
/// let config = NatsConfig::new("nats://127.0.0.1:1")
///     .options(relay_nats::async_nats::ConnectOptions::new().connection_timeout(std::time::Duration::from_millis(200)));
/// let err = NatsTransport::connect(config).unwrap_err();
/// assert!(err.to_string().starts_with("cannot connect to NATS"));
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum ConnectError {
    /// The client could not connect.
    Nats(async_nats::ConnectError),
    /// The transport's thread or runtime could not be started.
    Runtime(std::io::Error),
}

impl fmt::Display for ConnectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConnectError::Nats(e) => write!(f, "cannot connect to NATS: {e}"),
            ConnectError::Runtime(e) => write!(f, "cannot start the NATS transport thread: {e}"),
        }
    }
}

impl Error for ConnectError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            ConnectError::Nats(e) => Some(e),
            ConnectError::Runtime(e) => Some(e),
        }
    }
}

/// Why a cluster name operation failed.
///
/// # Examples
///
/// ```
/// use relay_nats::ClusterNameError;
/// use sched::Pid;
/// let e = ClusterNameError::Taken { name: "db".into(), by: Pid::new(2, 7) };
/// assert_eq!(e.to_string(), "the name \"db\" is taken by <2.7>");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClusterNameError {
    /// A live process holds the name.
    Taken {
        /// The name.
        name: String,
        /// Its holder.
        by: Pid,
    },
    /// A name is 1 to 255 characters of `A-Z a-z 0-9 - _ = / .`, not
    /// starting or ending with `.` (what a bucket key may be).
    InvalidName(String),
    /// Names are registered by the node of their process: this PID is
    /// another node's.
    NotLocal(Pid),
    /// The transport was built without
    /// [`NatsConfig::cluster_names`](crate::NatsConfig::cluster_names),
    /// or could not open the bucket (JetStream is off on the server).
    NotEnabled,
    /// The bucket did not answer in time, or refused.
    Unavailable(String),
}

impl fmt::Display for ClusterNameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClusterNameError::Taken { name, by } => write!(f, "the name {name:?} is taken by {by}"),
            ClusterNameError::InvalidName(name) => write!(f, "{name:?} cannot be a cluster name"),
            ClusterNameError::NotLocal(pid) => {
                write!(f, "{pid} is another node's process: register it there")
            }
            ClusterNameError::NotEnabled => {
                f.write_str("cluster names are not enabled on this transport")
            }
            ClusterNameError::Unavailable(why) => {
                write!(f, "the cluster names are unavailable: {why}")
            }
        }
    }
}

impl std::error::Error for ClusterNameError {}
