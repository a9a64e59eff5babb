//! What the journal rebuilds besides the user's state: the bookkeeping a
//! durable process carries between records (numbers, marks, pending
//! timers and commands), and the one function that steps a batch.
//!
//! The live runner and the replay both step through [`step_batch`] and
//! account through [`State::apply_input`] and [`State::apply_effect`], so
//! a replayed process ends up with exactly the bookkeeping the live one
//! had when its last record was written.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::process::{Effects, Erased, Held};
use crate::record::{RecordedEffect, RecordedInput};

/// A durable process's bookkeeping.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct State {
    /// The number of the next record.
    pub(crate) next_record: u64,
    /// The number of the last send.
    pub(crate) send_seq: u64,
    /// Per sending durable process: the number of its last send taken.
    pub(crate) marks: HashMap<String, u64>,
    /// Pending timers: tag → deadline (ms since the epoch).
    pub(crate) timers: HashMap<u64, u64>,
    /// Commands in flight, by tag (their handler's id).
    pub(crate) commands: HashMap<u64, u32>,
    /// The process ended.
    pub(crate) ended: bool,
}

impl State {
    /// Whether a message from `from` numbered `seq` is new; if so, it is
    /// marked seen.
    pub(crate) fn admit(&mut self, from: &str, seq: u64) -> bool {
        let mark = self.marks.entry(from.to_owned()).or_insert(0);
        if seq <= *mark {
            false
        } else {
            *mark = seq;
            true
        }
    }

    /// Accounts for an input stepped (or skipped) in a record.
    pub(crate) fn apply_input(&mut self, input: &RecordedInput) {
        match input {
            RecordedInput::Start => {}
            RecordedInput::Message { from, .. } => {
                if let Some((key, seq)) = from {
                    let mark = self.marks.entry(key.clone()).or_insert(0);
                    *mark = (*mark).max(*seq);
                }
            }
            RecordedInput::Timer(tag) => {
                self.timers.remove(tag);
            }
            RecordedInput::Completion { tag, .. } => {
                self.commands.remove(tag);
            }
        }
    }

    /// Accounts for an effect a step asked for.
    pub(crate) fn apply_effect(&mut self, effect: &RecordedEffect) {
        match effect {
            RecordedEffect::Send { seq, .. } => self.send_seq = self.send_seq.max(*seq),
            RecordedEffect::Timer { tag, deadline_ms } => {
                self.timers.insert(*tag, *deadline_ms);
            }
            RecordedEffect::CancelTimer(tag) => {
                self.timers.remove(tag);
            }
            RecordedEffect::Command { id, tag, .. } => {
                self.commands.insert(*tag, *id);
            }
            RecordedEffect::Done(_) | RecordedEffect::Failed(_) => self.ended = true,
        }
    }
}

/// A snapshot as the store keeps it: the bookkeeping and the user's
/// state after a record (postcard).
#[derive(Serialize, Deserialize)]
pub(crate) struct Snapshot {
    pub(crate) state: State,
    pub(crate) user: Vec<u8>,
}

/// Steps `inputs` in order at time `at_ms`, until the process ends.
/// Returns the effects asked for, and how many inputs were stepped (the
/// rest came after the end: they belong to no record).
pub(crate) fn step_batch(
    process: &mut dyn Erased,
    state: &mut State,
    key: &str,
    at_ms: u64,
    inputs: &[RecordedInput],
) -> (Vec<Held>, usize) {
    let mut held = Vec::new();
    let mut taken = 0;
    for input in inputs {
        if state.ended {
            break;
        }
        taken += 1;
        // A timer cancelled, or a command answered, by an earlier input of
        // the batch is not handed over (the same on replay).
        let expected = match input {
            RecordedInput::Timer(tag) => state.timers.contains_key(tag),
            RecordedInput::Completion { tag, .. } => state.commands.contains_key(tag),
            _ => true,
        };
        state.apply_input(input);
        if !expected {
            continue;
        }
        let before = held.len();
        let mut send_seq = state.send_seq;
        process.step(
            input,
            &mut Effects::new(key, at_ms, &mut held, &mut send_seq),
        );
        for h in &held[before..] {
            state.apply_effect(&h.effect);
        }
    }
    (held, taken)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_send_at_or_below_its_senders_mark_is_a_copy() {
        let mut state = State::default();
        assert!(state.admit("a", 1));
        assert!(state.admit("a", 2));
        assert!(!state.admit("a", 2), "the same send again");
        assert!(!state.admit("a", 1), "an older send");
        assert!(state.admit("b", 1), "marks are per sender");
        // A replayed input raises the mark as the live admission did.
        let mut replayed = State::default();
        replayed.apply_input(&RecordedInput::Message {
            from: Some(("a".into(), 2)),
            body: vec![],
        });
        assert!(!replayed.admit("a", 2));
        assert!(replayed.admit("a", 3));
    }
}
