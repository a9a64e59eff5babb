//! The journal's record: what one write-ahead entry of a durable process
//! holds, as the store keeps it.
//!
//! A record is written for every batch of inputs a durable process steps
//! through: the inputs (so that a replay can hand them to `step` again),
//! the time the batch was stepped at (the only clock a durable step reads,
//! so that a replay sees the same one), and the effects the steps asked
//! for (so that a replay can tell whether the process still does what it
//! did: any difference is a `NonDeterminism`). Records are encoded with
//! `postcard`; user values inside them (message bodies, command data and
//! answers, outcomes) are postcard bytes of the user's serde types.

use serde::{Deserialize, Serialize};

use crate::error::DurableError;

/// One journal entry: a batch of inputs, stepped at one moment, and the
/// effects it released.
///
/// # Examples
///
/// ```
/// use sched_durable::{Record, RecordedEffect, RecordedInput};
///
/// let record = Record { at_ms: 1_000, inputs: vec![RecordedInput::Start], effects: vec![RecordedEffect::Done(vec![])] };
/// let bytes = record.encode();
/// assert_eq!(Record::decode(&bytes).unwrap(), record);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// When the batch was stepped, in milliseconds since the Unix epoch:
    /// what [`Output::now`](crate::Output::now) returned to its steps.
    pub at_ms: u64,
    /// The inputs, in the order the steps received them.
    pub inputs: Vec<RecordedInput>,
    /// The effects the steps asked for, in order.
    pub effects: Vec<RecordedEffect>,
}

impl Record {
    /// The record's bytes, as the store keeps them.
    ///
    /// # Examples
    ///
    /// See [`Record`].
    pub fn encode(&self) -> Vec<u8> {
        // A record holds only vectors, integers and strings: encoding
        // into a vector cannot fail.
        postcard::to_stdvec(self).expect("a journal record always encodes")
    }

    /// Reads a record from its bytes.
    ///
    /// # Errors
    ///
    /// [`DurableError::Corrupt`] when the bytes are not a record.
    ///
    /// # Examples
    ///
    /// See [`Record`].
    pub fn decode(bytes: &[u8]) -> Result<Record, DurableError> {
        postcard::from_bytes(bytes).map_err(|e| DurableError::Corrupt(e.to_string()))
    }
}

/// An input as the journal keeps it.
///
/// # Examples
///
/// ```
/// use sched_durable::RecordedInput;
///
/// let timer = RecordedInput::Timer(7);
/// assert_eq!(format!("{timer:?}"), "Timer(7)");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum RecordedInput {
    /// The process's first step.
    Start,
    /// A message: from another durable process (its key and the number
    /// of its send, which is how a duplicate is recognised), or from
    /// outside (`None`).
    Message {
        /// The sending durable process and its send's number.
        from: Option<(String, u64)>,
        /// The message, as postcard bytes of the receiver's message type.
        body: Vec<u8>,
    },
    /// A timer fell due (its tag).
    Timer(u64),
    /// A command completed: its answer's bytes, or why it failed.
    Completion {
        /// The tag the step gave the command.
        tag: u64,
        /// The answer's bytes, or the failure.
        result: Result<Vec<u8>, RecordedFailure>,
    },
}

/// Why a command brought no answer, as the journal keeps it.
///
/// # Examples
///
/// ```
/// use sched_durable::RecordedFailure;
///
/// assert_ne!(RecordedFailure::Interrupted, RecordedFailure::Failed("refused".into()));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum RecordedFailure {
    /// The command failed (the error's text).
    Failed(String),
    /// The command was in flight when its node stopped.
    Interrupted,
}

/// An effect as the journal keeps it.
///
/// # Examples
///
/// ```
/// use sched_durable::RecordedEffect;
///
/// let effect = RecordedEffect::CancelTimer(3);
/// assert_eq!(effect.kind(), "cancel timer");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum RecordedEffect {
    /// A message to another durable process: its key, the send's number
    /// (per sender, from 1), and the body.
    Send {
        /// The receiver's key.
        to: String,
        /// The send's number.
        seq: u64,
        /// The message's bytes.
        body: Vec<u8>,
    },
    /// A timer set to fall due at an absolute time.
    Timer {
        /// Its tag.
        tag: u64,
        /// When it falls due, in milliseconds since the Unix epoch.
        deadline_ms: u64,
    },
    /// A timer cancelled (its tag).
    CancelTimer(u64),
    /// A command yielded.
    Command {
        /// The handler's id.
        id: u32,
        /// Its tag.
        tag: u64,
        /// Its data's bytes.
        data: Vec<u8>,
    },
    /// The process finished, with its outcome's bytes.
    Done(Vec<u8>),
    /// The process failed: its step returned this error (or panicked).
    Failed(String),
}

impl RecordedEffect {
    /// The effect's kind, for messages and inspection.
    ///
    /// # Examples
    ///
    /// See [`RecordedEffect`].
    pub fn kind(&self) -> &'static str {
        match self {
            RecordedEffect::Send { .. } => "send",
            RecordedEffect::Timer { .. } => "timer",
            RecordedEffect::CancelTimer(_) => "cancel timer",
            RecordedEffect::Command { .. } => "command",
            RecordedEffect::Done(_) => "done",
            RecordedEffect::Failed(_) => "failed",
        }
    }
}
