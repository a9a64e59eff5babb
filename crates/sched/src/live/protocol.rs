//! What a client and the endpoint say to each other besides a snapshot:
//! the request, the refusal, and the limits both sides keep.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The version of the [`Snapshot`](super::Snapshot) format this crate writes and reads.
/// It changes when a field changes meaning or is removed; new fields are
/// added without a change (readers ignore fields they do not know and give
/// missing ones their default: a snapshot from an endpoint that predates
/// [`Snapshot::groups`](super::Snapshot::groups) reads with no groups).
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
///
/// assert_eq!(sched::live::VERSION, 1);
/// ```
pub const VERSION: u32 = 1;

/// The address `sched-top` attaches to when given none, and the one to
/// serve on unless the application has a reason to choose another: port
/// 7207 on loopback.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
///
/// let addr: std::net::SocketAddr = sched::live::DEFAULT_ADDR.parse()?;
/// assert!(addr.ip().is_loopback());
/// # Ok::<(), std::net::AddrParseError>(())
/// ```
pub const DEFAULT_ADDR: &str = "127.0.0.1:7207";

/// How many processes each top list holds when the request does not say.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
///
/// assert_eq!(sched::live::Request::default().top(), sched::live::DEFAULT_TOP);
/// ```
pub const DEFAULT_TOP: usize = 10;

/// The most processes a top list holds, whatever the request asks.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
///
/// let greedy = sched::live::Request { top: Some(1_000_000) };
/// assert_eq!(greedy.top(), sched::live::MAX_TOP);
/// ```
pub const MAX_TOP: usize = 1000;

/// The most connections an endpoint serves at once; one more is answered
/// with an [`ErrorReply`] and closed.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
///
/// assert_eq!(sched::live::MAX_CONNECTIONS, 8);
/// ```
pub const MAX_CONNECTIONS: usize = 8;

/// The longest request line the endpoint reads, in bytes (newline
/// included); a longer one closes the connection.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
///
/// assert!(br#"{"top":10}"#.len() < sched::live::MAX_REQUEST_LEN);
/// ```
pub const MAX_REQUEST_LEN: usize = 4096;

/// How long the endpoint waits for a client to take a snapshot it writes
/// before closing the connection.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
///
/// assert_eq!(sched::live::WRITE_TIMEOUT.as_secs(), 2);
/// ```
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(2);

/// How long a connection may go without a request before the endpoint
/// closes it (so that silent clients do not hold the
/// [`MAX_CONNECTIONS`] slots).
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
///
/// assert_eq!(sched::live::IDLE_TIMEOUT.as_secs(), 120);
/// ```
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(120);

/// The least time between two snapshots on one connection: a client
/// asking faster waits (a snapshot walks the process table).
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
///
/// assert_eq!(sched::live::MIN_SPACING.as_millis(), 50);
/// ```
pub const MIN_SPACING: Duration = Duration::from_millis(50);

/// The most [`Figure`](super::Figure)s a snapshot carries: a callback that returns more
/// has the rest dropped (and a `tracing` debug line says so).
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
///
/// assert_eq!(sched::live::MAX_FIGURES, 256);
/// ```
pub const MAX_FIGURES: usize = 256;

/// What a client asks for: one JSON line (`{"top":10}`). Every field is
/// optional; an empty line asks for the defaults.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use sched::live::Request;
///
/// let request = Request { top: Some(3) };
/// assert_eq!(request.top(), 3);
/// assert_eq!(Request::default().top(), sched::live::DEFAULT_TOP);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Request {
    /// How many processes each top list holds ([`DEFAULT_TOP`] when
    /// absent, at most [`MAX_TOP`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top: Option<usize>,
}

impl Request {
    /// The length of the top lists this request gets.
    ///
    /// # Examples
    ///
    /// See [`Request`].
    pub fn top(&self) -> usize {
        self.top.unwrap_or(DEFAULT_TOP).min(MAX_TOP)
    }
}

/// The line the endpoint writes instead of a snapshot when it refuses a
/// request or a connection, before closing it.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
///
/// let refused = sched::live::ErrorReply { error: "too many connections".into() };
/// assert!(refused.error.contains("too many"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorReply {
    /// What went wrong.
    pub error: String,
}
