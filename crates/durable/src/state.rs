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

use crate::process::{Erased, Held, Output};
use crate::record::{RecordedEffect, RecordedInput};

/// A durable process's bookkeeping.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct State {
    /// The number of the next record.
    pub(crate) next_record: u64,
    /// Per receiver: the number of the last send to it (sends are
    /// numbered per sender and receiver, from 1, without gaps).
    pub(crate) sends: HashMap<String, u64>,
    /// Per sending durable process: the number of its last send taken
    /// (every number up to it was taken, in order).
    pub(crate) marks: HashMap<String, u64>,
    /// Pending timers: tag → deadline (ms since the epoch).
    pub(crate) timers: HashMap<u64, u64>,
    /// Commands in flight, by tag (their handler's id).
    pub(crate) commands: HashMap<u64, u32>,
    /// The process ended.
    pub(crate) ended: bool,
}

/// What a receiver does with a send from another durable process
/// (`channel.rs` holds the protocol).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admission {
    /// The sender's next number: take it.
    Next,
    /// At or below the sender's mark: a copy of a send taken already.
    Copy,
    /// Past the next number: an earlier send is still on its way.
    Early {
        /// Nothing was ever taken from this sender.
        first_contact: bool,
    },
}

impl State {
    /// Where a send from `from` numbered `seq` stands against the
    /// sender's mark.
    pub(crate) fn admission(&self, from: &str, seq: u64) -> Admission {
        match self.marks.get(from) {
            Some(&mark) if seq <= mark => Admission::Copy,
            Some(&mark) if seq == mark + 1 => Admission::Next,
            Some(_) => Admission::Early {
                first_contact: false,
            },
            None if seq == 1 => Admission::Next,
            None => Admission::Early {
                first_contact: true,
            },
        }
    }

    /// Marks the send from `from` numbered `seq` taken.
    pub(crate) fn take(&mut self, from: &str, seq: u64) {
        match self.marks.get_mut(from) {
            Some(mark) => *mark = seq,
            None => {
                self.marks.insert(from.to_owned(), seq);
            }
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
            RecordedEffect::Send { to, seq, .. } => match self.sends.get_mut(to) {
                Some(last) => *last = (*last).max(*seq),
                None => {
                    self.sends.insert(to.clone(), *seq);
                }
            },
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
        process.step(
            input,
            &mut Output::new(key, at_ms, &mut held, &mut state.sends),
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
    fn a_receiver_takes_exactly_the_next_number_of_each_sender() {
        let mut state = State::default();
        assert_eq!(state.admission("a", 1), Admission::Next);
        assert_eq!(
            state.admission("a", 2),
            Admission::Early {
                first_contact: true
            }
        );
        state.take("a", 1);
        assert_eq!(
            state.admission("a", 1),
            Admission::Copy,
            "the same send again"
        );
        assert_eq!(state.admission("a", 2), Admission::Next);
        assert_eq!(
            state.admission("a", 3),
            Admission::Early {
                first_contact: false
            },
            "a later send waits for the gap to fill"
        );
        assert_eq!(
            state.admission("b", 1),
            Admission::Next,
            "marks are per sender"
        );
        // A replayed input raises the mark as the live admission did.
        let mut replayed = State::default();
        replayed.apply_input(&RecordedInput::Message {
            from: Some(("a".into(), 2)),
            body: vec![],
        });
        assert_eq!(replayed.admission("a", 2), Admission::Copy);
        assert_eq!(replayed.admission("a", 3), Admission::Next);
    }

    #[test]
    fn sends_are_numbered_per_receiver() {
        let mut state = State::default();
        for (to, seq) in [("x", 1), ("y", 1), ("x", 2)] {
            state.apply_effect(&RecordedEffect::Send {
                to: to.into(),
                seq,
                body: vec![],
            });
        }
        assert_eq!(state.sends.get("x"), Some(&2));
        assert_eq!(state.sends.get("y"), Some(&1));
    }
}
