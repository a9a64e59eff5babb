//! What became of a durable process, read by key: running here, waiting
//! for a recovery, or ended with its outcome.

use sched::Pid;
use serde::de::DeserializeOwned;

use crate::error::{codec, DurableError};
use crate::record::{Record, RecordedEffect};
use crate::store::Journal;

/// What became of a durable process ([`Durability::status`]).
///
/// [`Durability::status`]: crate::Durability::status
///
/// # Examples
///
/// ```
/// use sched_durable::Status;
///
/// let done = Status::Done(postcard::to_stdvec(&42_u64)?);
/// assert_eq!(done.outcome::<u64>().transpose()?, Some(42));
/// assert!(Status::Pending.outcome::<u64>().is_none());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// It runs on this node, under this PID.
    Running(Pid),
    /// Its journal has not ended and it does not run on this node: it was
    /// suspended and waits for a recovery, a recovery could not resume it
    /// (see [`Recovery::failed`](crate::Recovery::failed)), or it runs on
    /// another node of a cluster store.
    Pending,
    /// It finished, with its outcome's bytes (read them with
    /// [`outcome`](Status::outcome)).
    Done(Vec<u8>),
    /// It failed: its step returned this error, or panicked.
    Failed(String),
}

impl Status {
    /// The outcome of a finished process, decoded as a `T`; `None` for
    /// any other status.
    ///
    /// # Errors
    ///
    /// [`DurableError::Codec`] if the outcome is not a `T`.
    ///
    /// # Examples
    ///
    /// See [`Status`].
    pub fn outcome<T: DeserializeOwned>(&self) -> Option<Result<T, DurableError>> {
        match self {
            Status::Done(bytes) => Some(postcard::from_bytes(bytes).map_err(codec)),
            _ => None,
        }
    }
}

/// The status a journal that does not run here says.
pub(crate) fn of_journal(journal: &Journal) -> Result<Status, DurableError> {
    if !journal.ended {
        return Ok(Status::Pending);
    }
    let last = journal.records.last().ok_or_else(|| {
        DurableError::Corrupt(format!(
            "the journal of {:?} has ended but holds no record",
            journal.key
        ))
    })?;
    let number = journal.first + journal.records.len() as u64 - 1;
    let record = Record::decode(last).map_err(|e| {
        DurableError::Corrupt(format!(
            "the journal of {:?}, record {number}: {e}",
            journal.key
        ))
    })?;
    record
        .effects
        .into_iter()
        .rev()
        .find_map(|effect| match effect {
            RecordedEffect::Done(bytes) => Some(Status::Done(bytes)),
            RecordedEffect::Failed(why) => Some(Status::Failed(why)),
            _ => None,
        })
        .ok_or_else(|| {
            DurableError::Corrupt(format!(
                "the journal of {:?} has ended, and its last record {number} says neither done nor failed",
                journal.key
            ))
        })
}
