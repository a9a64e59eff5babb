//! What can go wrong with durable processes, as one error type.

use std::fmt;

/// Why a durable operation failed.
///
/// # Examples
///
/// ```
/// use sched_durable::DurableError;
///
/// let error = DurableError::KeyTaken("order-1".into());
/// assert_eq!(error.to_string(), "a durable process with key \"order-1\" already exists");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DurableError {
    /// The store failed (its error's text): nothing of the failed write
    /// is assumed durable.
    Store(String),
    /// Bytes in the store are not what the journal wrote.
    Corrupt(String),
    /// A value could not be encoded or decoded with its serde type.
    Codec(String),
    /// A durable process with this key exists already (running, or ended
    /// and not yet forgotten).
    KeyTaken(String),
    /// The journal names a process type this `Durability` was not told
    /// about with [`register`](crate::Durability::register).
    UnknownKind {
        /// The process's key.
        key: String,
        /// The type name the journal recorded.
        kind: String,
    },
    /// Replaying a journal, a step asked for other effects than the ones
    /// it released when it ran: the process is not deterministic (it read
    /// the wall clock, a random number, a global, or its code changed).
    /// The process is not resumed.
    NonDeterminism {
        /// The process's key.
        key: String,
        /// The journal record whose replay differed (from 0).
        record: u64,
        /// What the journal says the step did.
        expected: String,
        /// What the replayed step did.
        found: String,
    },
    /// The scheduler refused the process (its error's text).
    Submit(String),
    /// No running durable process has this key.
    NoSuchKey(String),
    /// The tag is reserved for the journal's own command.
    ReservedTag,
    /// The journal's writer has stopped (its `Durability` was dropped).
    Stopped,
    /// Waited for longer than the given time (the wait can be made
    /// again; see [`DurableError::is_timeout`]).
    TimedOut,
    /// The process failed: a step returned this error or panicked, or its
    /// journal could not be written.
    Failed(String),
    /// The scheduler shut down before the process finished: it resumes on
    /// the next [`recover`](crate::Durability::recover).
    Suspended,
    /// Another incarnation of the process (on another node sharing the
    /// store) wrote its journal since this one last did: this one must
    /// stop, and its write was refused, so nothing of it is released.
    Fenced(String),
    /// The process (this key) was suspended by a shutdown while the
    /// record holding the input was being written: the input may or may
    /// not be durable (a recovery applies it if it is). Sending it again
    /// may deliver it twice.
    InDoubt(String),
    /// The input never reached the journal of the process (this key): the
    /// process ended, or a shutdown suspended it, before it wrote the
    /// input. It was not kept; after a shutdown, send it again once the
    /// process is recovered.
    NotKept(String),
    /// A resumed handle was typed ([`Spawned::of`](crate::Spawned::of))
    /// as another kind than its process's.
    WrongKind {
        /// The process's key.
        key: String,
        /// Its kind.
        kind: String,
        /// The kind it was asked to be.
        asked: &'static str,
    },
}

impl DurableError {
    /// Whether this is [`DurableError::TimedOut`]: the wait gave up, the
    /// process or the input goes on (as `ExitError::is_timeout` for a
    /// plain process).
    ///
    /// # Examples
    ///
    /// ```
    /// use sched_durable::DurableError;
    /// assert!(DurableError::TimedOut.is_timeout());
    /// assert!(!DurableError::Suspended.is_timeout());
    /// ```
    pub fn is_timeout(&self) -> bool {
        matches!(self, DurableError::TimedOut)
    }
}

impl fmt::Display for DurableError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DurableError::Store(e) => write!(f, "the journal's store failed: {e}"),
            DurableError::Corrupt(e) => write!(f, "the journal holds bytes it did not write: {e}"),
            DurableError::Codec(e) => write!(f, "a value did not encode or decode: {e}"),
            DurableError::KeyTaken(key) => {
                write!(f, "a durable process with key {key:?} already exists")
            }
            DurableError::UnknownKind { key, kind } => write!(
                f,
                "durable process {key:?} is of type {kind:?}, which was not registered"
            ),
            DurableError::NonDeterminism {
                key,
                record,
                expected,
                found,
            } => write!(
                f,
                "durable process {key:?} is not deterministic: replaying record {record}, \
                 the journal says {expected}, the step did {found}"
            ),
            DurableError::Submit(e) => write!(f, "the scheduler refused the process: {e}"),
            DurableError::NoSuchKey(key) => write!(f, "no running durable process has key {key:?}"),
            DurableError::InDoubt(key) => write!(
                f,
                "{key:?} was suspended while the input's record was being written: it may or may not be durable"
            ),
            DurableError::NotKept(key) => write!(
                f,
                "{key:?} ended or was suspended before it wrote the input: it was not kept"
            ),
            DurableError::ReservedTag => {
                write!(f, "tag u64::MAX is reserved for the journal's own command")
            }
            DurableError::Stopped => write!(f, "the journal's writer has stopped"),
            DurableError::TimedOut => write!(f, "timed out"),
            DurableError::Failed(e) => write!(f, "the durable process failed: {e}"),
            DurableError::Fenced(key) => write!(
                f,
                "durable process {key:?} runs elsewhere now: this incarnation was fenced off"
            ),
            DurableError::Suspended => write!(
                f,
                "the scheduler shut down before the durable process finished; it resumes on recovery"
            ),
            DurableError::WrongKind { key, kind, asked } => write!(
                f,
                "durable process {key:?} is a {kind:?}, not a {asked:?}"
            ),
        }
    }
}

impl std::error::Error for DurableError {}

pub(crate) fn codec(e: postcard::Error) -> DurableError {
    DurableError::Codec(e.to_string())
}

/// A caught panic's message; the payload (user data, whose drop may
/// panic too) is dropped under a guard.
pub(crate) fn panic_text(panic: Box<dyn std::any::Any + Send>) -> String {
    let text = panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned());
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(panic)));
    text
}
