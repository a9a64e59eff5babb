//! Tooling: a journal decoded, exported, and replayed offline.
//!
//! An [`Inspection`] is one process's journal as values: what it was
//! created from, and each record's time, inputs and released effects. It
//! exports to JSON and back, so that a journal taken from a production
//! store can be kept beside the code and replayed in a test with
//! [`Inspection::replay`]: the same check a recovery makes, without a
//! scheduler or a store, which tells whether a change of the process's
//! code keeps it deterministic for the journals already written.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::error::DurableError;
use crate::process::{factory, Durable};
use crate::record::Record;
use crate::recovery::replay;
use crate::state::State;
use crate::store::{Created, Journal};

/// One durable process's journal, decoded ([`Durability::inspect`](crate::Durability::inspect)).
///
/// # Examples
///
/// ```
/// # use sched_durable::Inspection;
/// fn steps(journal: &Inspection) -> usize {
///     journal.records.iter().map(|r| r.inputs.len()).sum()
/// }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Inspection {
    /// The process's key.
    pub key: String,
    /// Its registered type.
    pub kind: String,
    /// Its arguments, as postcard bytes.
    pub args: Vec<u8>,
    /// Whether it has ended.
    pub ended: bool,
    /// The number of its first record here: 0, or the record after its
    /// latest snapshot once the store dropped those the snapshot covers.
    pub first: u64,
    /// Its records, in order, numbered from `first`.
    pub records: Vec<Record>,
}

/// What replaying a journal offline rebuilt ([`Inspection::replay`]).
///
/// # Examples
///
/// ```
/// # use sched_durable::Replay;
/// fn waiting(replay: &Replay) -> bool { !replay.ended && !replay.timers.is_empty() }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replay {
    /// Records replayed.
    pub records: u64,
    /// Inputs handed to `step`.
    pub inputs: u64,
    /// Whether the process ended.
    pub ended: bool,
    /// Pending timers: tag and deadline.
    pub timers: Vec<(u64, SystemTime)>,
    /// Commands in flight, by tag.
    pub commands: Vec<u64>,
}

impl Inspection {
    /// Decodes a store's journal.
    ///
    /// # Errors
    ///
    /// [`DurableError::Corrupt`] when a record does not decode.
    ///
    /// # Examples
    ///
    /// See [`Durability::inspect`](crate::Durability::inspect).
    pub fn from_journal(journal: &Journal) -> Result<Inspection, DurableError> {
        Ok(Inspection {
            key: journal.key.clone(),
            kind: journal.created.kind.clone(),
            args: journal.created.args.clone(),
            ended: journal.ended,
            first: journal.first,
            records: journal
                .records
                .iter()
                .map(|bytes| Record::decode(bytes))
                .collect::<Result<_, _>>()?,
        })
    }

    /// The journal as JSON.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched_durable::{Inspection, Record, RecordedInput};
    ///
    /// let journal = Inspection {
    ///     key: "k".into(), kind: "tally".into(), args: vec![], ended: false, first: 0,
    ///     records: vec![Record { at_ms: 1, inputs: vec![RecordedInput::Start], effects: vec![] }],
    /// };
    /// assert_eq!(Inspection::from_json(&journal.to_json())?, journal);
    /// # Ok::<(), sched_durable::DurableError>(())
    /// ```
    pub fn to_json(&self) -> String {
        // Strings, integers and byte vectors only: it always serializes.
        serde_json::to_string_pretty(self).expect("a journal always serializes")
    }

    /// Reads a journal exported with [`to_json`](Inspection::to_json).
    ///
    /// # Errors
    ///
    /// [`DurableError::Codec`] when the text is not one.
    ///
    /// # Examples
    ///
    /// See [`to_json`](Inspection::to_json).
    pub fn from_json(text: &str) -> Result<Inspection, DurableError> {
        serde_json::from_str(text).map_err(|e| DurableError::Codec(e.to_string()))
    }

    /// Replays the journal through a fresh `D`, as a recovery would, and
    /// says what it rebuilt.
    ///
    /// # Errors
    ///
    /// [`DurableError::NonDeterminism`] when a step now asks for other
    /// effects than the journal says it released;
    /// [`DurableError::UnknownKind`] when the journal is of another type
    /// than `D`; [`DurableError::Codec`] when its arguments are not a
    /// `D::Args`.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched_durable::prelude::*;
    /// use sched_durable::{Inspection, Record, RecordedInput};
    ///
    /// struct Idle;
    /// impl Durable for Idle {
    ///     const KIND: &'static str = "idle";
    ///     type Args = ();
    ///     type Message = ();
    ///     type Done = ();
    ///     fn create(_: ()) -> Self { Idle }
    ///     fn step(&mut self, _: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> { Ok(()) }
    /// }
    ///
    /// let journal = Inspection {
    ///     key: "i".into(), kind: "idle".into(), args: vec![], ended: false, first: 0,
    ///     records: vec![Record { at_ms: 1, inputs: vec![RecordedInput::Start], effects: vec![] }],
    /// };
    /// let replay = journal.replay::<Idle>()?;
    /// assert_eq!((replay.records, replay.inputs, replay.ended), (1, 1, false));
    /// # Ok::<(), DurableError>(())
    /// ```
    pub fn replay<D: Durable>(&self) -> Result<Replay, DurableError> {
        if self.first != 0 {
            return Err(DurableError::Corrupt(format!(
                "the journal of {:?} starts at record {}: a snapshot covers the ones before, \
                 and an offline replay needs them all",
                self.key, self.first
            )));
        }
        if self.kind != D::KIND {
            return Err(DurableError::UnknownKind {
                key: self.key.clone(),
                kind: self.kind.clone(),
            });
        }
        let journal = Journal {
            key: self.key.clone(),
            created: Created {
                kind: self.kind.clone(),
                args: self.args.clone(),
            },
            ended: self.ended,
            snapshot: None,
            first: 0,
            records: self.records.iter().map(Record::encode).collect(),
        };
        let replayed = replay(&journal, factory::<D>(&self.args)?, State::default())?;
        let mut timers: Vec<_> = replayed
            .state
            .timers
            .iter()
            .map(|(&tag, &ms)| (tag, UNIX_EPOCH + Duration::from_millis(ms)))
            .collect();
        timers.sort();
        let mut commands: Vec<_> = replayed.state.commands.keys().copied().collect();
        commands.sort_unstable();
        Ok(Replay {
            records: self.records.len() as u64,
            inputs: self.records.iter().map(|r| r.inputs.len() as u64).sum(),
            ended: replayed.state.ended,
            timers,
            commands,
        })
    }
}
