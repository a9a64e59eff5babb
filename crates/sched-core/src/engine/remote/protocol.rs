//! The bytes of a [`Signal`](relay::Signal): what one engine tells another
//! about their processes. Integers are big-endian.
//!
//! ```text
//! offset  size  field
//!      0     1  version (1)
//!      1     1  operation
//!      2     …  its fields:
//!               monitor, demonitor   id u64
//!               down                 id u64, reason u8, detail
//!               link, unlink         (none)
//!               exit                 reason u8, detail
//!               ask                  key u64            (payload: the question)
//!               answer               key u64, result u8 (payload: the answer or
//!                                                        the unread question)
//!               terminate, cancel    (none)
//! detail: u32 length (u32::MAX for none), then that many bytes of UTF-8
//! ```
//!
//! The package around a signal carries the two PIDs: the watcher and the
//! watched for `monitor` and `demonitor` (and the other way round for
//! `down`), the two linked processes, the asker and the asked; for
//! `terminate` and `cancel`, the asking node's outside (PID 0 of that node)
//! and the process to end.

use std::sync::Arc as StdArc;

use crate::contract::down::ExitReason;
use crate::contract::reply::{AskError, ON_ANOTHER_NODE};

const VERSION: u8 = 1;
const NO_DETAIL: u32 = u32::MAX;

/// One signal between engines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Op {
    /// The source watches the target: `down` with this id when it ends.
    Monitor { id: u64 },
    /// The source no longer watches the target under this id.
    Demonitor { id: u64 },
    /// The source, which the target watched under `id`, has ended.
    Down {
        id: u64,
        reason: ExitReason,
        detail: Option<StdArc<str>>,
    },
    /// The source links itself with the target.
    Link,
    /// The source removes its link with the target.
    Unlink,
    /// The source, linked with the target, has ended.
    Exit {
        reason: ExitReason,
        detail: Option<StdArc<str>>,
    },
    /// The source asks the target; the answer comes back under `key`.
    Ask { key: u64 },
    /// The answer to the ask under `key`: `Ok` with the answer as payload,
    /// or why there is none (`Unread` with the question as payload).
    Answer {
        key: u64,
        result: Result<(), AskError>,
    },
    /// End the target now, as a local `terminate`.
    Terminate,
    /// Hand the target `Event::Cancel`, as a local `cancel`.
    Cancel,
}

/// Why signal bytes could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Malformed;

impl Op {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = vec![VERSION];
        match self {
            Op::Monitor { id } => {
                out.push(1);
                out.extend_from_slice(&id.to_be_bytes());
            }
            Op::Demonitor { id } => {
                out.push(2);
                out.extend_from_slice(&id.to_be_bytes());
            }
            Op::Down { id, reason, detail } => {
                out.push(3);
                out.extend_from_slice(&id.to_be_bytes());
                out.push(reason_code(*reason));
                put_detail(&mut out, detail.as_deref());
            }
            Op::Link => out.push(4),
            Op::Unlink => out.push(5),
            Op::Exit { reason, detail } => {
                out.push(6);
                out.push(reason_code(*reason));
                put_detail(&mut out, detail.as_deref());
            }
            Op::Ask { key } => {
                out.push(7);
                out.extend_from_slice(&key.to_be_bytes());
            }
            Op::Answer { key, result } => {
                out.push(8);
                out.extend_from_slice(&key.to_be_bytes());
                out.push(match result {
                    Ok(()) => 0,
                    Err(error) => ask_error_code(*error),
                });
            }
            Op::Terminate => out.push(9),
            Op::Cancel => out.push(10),
        }
        out
    }

    pub(crate) fn decode(bytes: &[u8]) -> Result<Op, Malformed> {
        let mut reader = Reader(bytes);
        if reader.u8()? != VERSION {
            return Err(Malformed);
        }
        let op = match reader.u8()? {
            1 => Op::Monitor { id: reader.u64()? },
            2 => Op::Demonitor { id: reader.u64()? },
            3 => Op::Down {
                id: reader.u64()?,
                reason: reason_of(reader.u8()?),
                detail: reader.detail()?,
            },
            4 => Op::Link,
            5 => Op::Unlink,
            6 => Op::Exit {
                reason: reason_of(reader.u8()?),
                detail: reader.detail()?,
            },
            7 => Op::Ask { key: reader.u64()? },
            8 => Op::Answer {
                key: reader.u64()?,
                result: match reader.u8()? {
                    0 => Ok(()),
                    code => Err(ask_error_of(code)),
                },
            },
            9 => Op::Terminate,
            10 => Op::Cancel,
            _ => return Err(Malformed),
        };
        if reader.0.is_empty() {
            Ok(op)
        } else {
            Err(Malformed)
        }
    }
}

fn put_detail(out: &mut Vec<u8>, detail: Option<&str>) {
    match detail {
        // A detail too long for the field is cut at a character boundary.
        Some(text) => {
            let mut end = text.len().min(64 * 1024);
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            out.extend_from_slice(&(end as u32).to_be_bytes());
            out.extend_from_slice(&text.as_bytes()[..end]);
        }
        None => out.extend_from_slice(&NO_DETAIL.to_be_bytes()),
    }
}

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], Malformed> {
        if self.0.len() < n {
            return Err(Malformed);
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn u8(&mut self) -> Result<u8, Malformed> {
        Ok(self.take(1)?[0])
    }

    fn u64(&mut self) -> Result<u64, Malformed> {
        Ok(u64::from_be_bytes(
            self.take(8)?.try_into().map_err(|_| Malformed)?,
        ))
    }

    fn detail(&mut self) -> Result<Option<StdArc<str>>, Malformed> {
        let len = u32::from_be_bytes(self.take(4)?.try_into().map_err(|_| Malformed)?);
        if len == NO_DETAIL {
            return Ok(None);
        }
        let bytes = self.take(len as usize)?;
        let text = std::str::from_utf8(bytes).map_err(|_| Malformed)?;
        Ok(Some(StdArc::from(text)))
    }
}

fn reason_code(reason: ExitReason) -> u8 {
    match reason {
        ExitReason::Normal => 0,
        ExitReason::Error => 1,
        ExitReason::Panicked => 2,
        ExitReason::Terminated => 3,
        ExitReason::Cancelled => 4,
        ExitReason::Linked => 5,
        ExitReason::NoProcess => 6,
        ExitReason::NodeDown => 7,
    }
}

/// A reason this version does not know (a newer node's) reads as an
/// abnormal end.
fn reason_of(code: u8) -> ExitReason {
    match code {
        0 => ExitReason::Normal,
        2 => ExitReason::Panicked,
        3 => ExitReason::Terminated,
        4 => ExitReason::Cancelled,
        5 => ExitReason::Linked,
        6 => ExitReason::NoProcess,
        7 => ExitReason::NodeDown,
        _ => ExitReason::Error,
    }
}

fn ask_error_code(error: AskError) -> u8 {
    match error {
        AskError::TimedOut => 1,
        AskError::NoReply => 2,
        AskError::AlreadyTaken => 3,
        AskError::UnexpectedType => 4,
        AskError::Unread => 5,
        AskError::NodeDown => 6,
        AskError::Unencodable => 7,
        // The names stay on the asked node: they are `&'static str`s of its
        // binary, and a peer's strings must not grow ours.
        AskError::UnexpectedQuestion { .. } => 8,
    }
}

/// An error this version does not know reads as no reply.
fn ask_error_of(code: u8) -> AskError {
    match code {
        1 => AskError::TimedOut,
        3 => AskError::AlreadyTaken,
        4 => AskError::UnexpectedType,
        5 => AskError::Unread,
        6 => AskError::NodeDown,
        7 => AskError::Unencodable,
        8 => AskError::UnexpectedQuestion {
            asked: ON_ANOTHER_NODE,
            expected: ON_ANOTHER_NODE,
        },
        _ => AskError::NoReply,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn every_op() -> Vec<Op> {
        let detail = Some(StdArc::from("boom: ünïcode"));
        vec![
            Op::Monitor { id: 7 },
            Op::Demonitor { id: u64::MAX },
            Op::Down {
                id: 3,
                reason: ExitReason::Panicked,
                detail: detail.clone(),
            },
            Op::Down {
                id: 3,
                reason: ExitReason::NodeDown,
                detail: None,
            },
            Op::Link,
            Op::Unlink,
            Op::Exit {
                reason: ExitReason::Error,
                detail,
            },
            Op::Ask { key: 99 },
            Op::Answer {
                key: 99,
                result: Ok(()),
            },
            Op::Answer {
                key: 1,
                result: Err(AskError::Unread),
            },
            Op::Terminate,
            Op::Cancel,
        ]
    }

    #[test]
    fn every_operation_round_trips() {
        for op in every_op() {
            assert_eq!(Op::decode(&op.encode()), Ok(op.clone()), "{op:?}");
        }
    }

    #[test]
    fn every_reason_and_ask_error_round_trips() {
        for reason in [
            ExitReason::Normal,
            ExitReason::Error,
            ExitReason::Panicked,
            ExitReason::Terminated,
            ExitReason::Cancelled,
            ExitReason::Linked,
            ExitReason::NoProcess,
            ExitReason::NodeDown,
        ] {
            assert_eq!(reason_of(reason_code(reason)), reason);
        }
        for error in [
            AskError::TimedOut,
            AskError::NoReply,
            AskError::AlreadyTaken,
            AskError::UnexpectedType,
            AskError::Unread,
            AskError::NodeDown,
            AskError::Unencodable,
            AskError::UnexpectedQuestion {
                asked: ON_ANOTHER_NODE,
                expected: ON_ANOTHER_NODE,
            },
        ] {
            assert_eq!(ask_error_of(ask_error_code(error)), error);
        }
    }

    #[test]
    fn truncated_padded_and_foreign_bytes_are_malformed() {
        for op in every_op() {
            let bytes = op.encode();
            for cut in 0..bytes.len() {
                assert_eq!(
                    Op::decode(&bytes[..cut]),
                    Err(Malformed),
                    "{op:?} cut at {cut}"
                );
            }
            let mut padded = bytes.clone();
            padded.push(0);
            assert_eq!(Op::decode(&padded), Err(Malformed));
        }
        assert_eq!(Op::decode(&[2, 1, 0, 0, 0, 0, 0, 0, 0, 0]), Err(Malformed));
        assert_eq!(Op::decode(&[1, 200]), Err(Malformed));
    }
}
