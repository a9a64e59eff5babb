//! Recovery: rebuilding a durable process from its journal.
//!
//! Each record's inputs are stepped again, at the record's time, through
//! the same `state::step_batch` the live runner used, with every effect
//! held and none released. The effects each record's replay asks for must
//! be the ones the record says were released, in the same order: the
//! first difference is a [`DurableError::NonDeterminism`] naming the
//! record and both effects, and the process is not resumed.
//!
//! What the replay cannot bring back is what lived only in memory when
//! the node stopped, and the resume decides it from the rebuilt state
//! (see `Durability::recover`): sends the receiver had not journaled are
//! delivered again from the store's outbox (the receiver's marks drop a
//! copy it took), pending timers are armed at
//! their absolute deadlines, and commands in flight complete with
//! `Failure::Interrupted`.

use std::sync::Arc;

use crate::error::DurableError;
use crate::process::Erased;
use crate::record::{Record, RecordedEffect};
use crate::state::{step_batch, State};
use crate::store::Journal;

/// A durable process rebuilt from its journal, not yet running.
pub(crate) struct Replayed {
    pub(crate) key: Arc<str>,
    /// Its kind, as its journal was created.
    pub(crate) kind: Arc<str>,
    pub(crate) process: Box<dyn Erased>,
    pub(crate) state: State,
    /// It started from a snapshot.
    pub(crate) snapshotted: bool,
    /// The time its last replayed record was stepped at.
    pub(crate) last_at_ms: Option<u64>,
}

/// A value's bytes, shortened for a message.
fn short(bytes: &[u8]) -> String {
    if bytes.len() <= 8 {
        format!("{bytes:02x?}")
    } else {
        format!("{:02x?}.. ({} bytes)", &bytes[..8], bytes.len())
    }
}

fn summary(effect: Option<&RecordedEffect>) -> String {
    match effect {
        None => "nothing more".to_owned(),
        Some(RecordedEffect::Send { to, seq, body }) => {
            format!("send #{seq} to {to:?} of {}", short(body))
        }
        Some(RecordedEffect::Timer { tag, deadline_ms }) => {
            format!("timer {tag} due at {deadline_ms} ms")
        }
        Some(RecordedEffect::CancelTimer(tag)) => format!("cancel timer {tag}"),
        Some(RecordedEffect::Command { id, tag, data }) => {
            format!("command {id} tagged {tag} with {}", short(data))
        }
        Some(RecordedEffect::Done(bytes)) => format!("done with {}", short(bytes)),
        Some(RecordedEffect::Failed(why)) => format!("failed ({why})"),
    }
}

/// Replays the records of `journal` that `state` has not seen into
/// `process` (a fresh one with a default state, or one restored from a
/// snapshot with the snapshot's state).
pub(crate) fn replay(
    journal: &Journal,
    mut process: Box<dyn Erased>,
    mut state: State,
) -> Result<Replayed, DurableError> {
    let key: Arc<str> = journal.key.as_str().into();
    let snapshotted = state.next_record > 0;
    let mut last_at_ms = None;
    for (i, bytes) in journal.records.iter().enumerate() {
        let number = journal.first + i as u64;
        if number < state.next_record {
            continue; // the snapshot covers it
        }
        if number != state.next_record {
            return Err(DurableError::Corrupt(format!(
                "the journal of {key:?} lacks records {} to {}",
                state.next_record,
                number - 1
            )));
        }
        let record = Record::decode(bytes).map_err(|e| {
            DurableError::Corrupt(format!("the journal of {key:?}, record {number}: {e}"))
        })?;
        let (held, taken) = step_batch(
            &mut *process,
            &mut state,
            &key,
            record.at_ms,
            &record.inputs,
        );
        let differs = |expected: Option<&RecordedEffect>, found: Option<&RecordedEffect>| {
            DurableError::NonDeterminism {
                key: key.to_string(),
                record: number,
                expected: summary(expected),
                found: summary(found),
            }
        };
        let found: Vec<&RecordedEffect> = held.iter().map(|h| &h.effect).collect();
        for i in 0..found.len().max(record.effects.len()) {
            let (expected, got) = (record.effects.get(i), found.get(i).copied());
            if expected != got {
                return Err(differs(expected, got));
            }
        }
        if taken != record.inputs.len() {
            return Err(DurableError::NonDeterminism {
                key: key.to_string(),
                record: number,
                expected: format!("{} inputs stepped", record.inputs.len()),
                found: format!("the process ended after {taken}"),
            });
        }
        state.next_record = number + 1;
        last_at_ms = Some(record.at_ms);
    }
    Ok(Replayed {
        key,
        kind: journal.created.kind.as_str().into(),
        process,
        state,
        snapshotted,
        last_at_ms,
    })
}
