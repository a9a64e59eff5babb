//! The frame a package travels in: a fixed header, then for a signal
//! between engines its bytes, then the payload's tag and bytes. All
//! integers are big-endian.
//!
//! ```text
//! offset  size  field
//!      0     1  version (3)
//!      1     1  kind: 0 a message, 1 a signal between engines, 2 a
//!               transport's control (reset, reset acknowledged; see
//!               `reset.rs`): nine signal bytes, no tag, no payload
//!      2     4  source node
//!      6     8  source id
//!     14     4  target node
//!     18     8  target id
//!     26     8  the target node's incarnation, as the sender knows it
//!               (0: the sender has not heard of that node)
//!     34     8  incarnation of the sending transport
//!     42     8  sequence number from that transport to the target node
//!     50     8  the number of the first frame that transport numbered for
//!               the target's incarnation at offset 26 (0: not known)
//!     58     2  signal length s (0 for a message)
//!     60     s  signal bytes
//!   60+s     2  tag length n (0: a signal without a payload)
//!   62+s     n  tag (UTF-8)
//! 62+s+n     …  payload bytes (the codec's encoding of the value)
//! ```
//!
//! The incarnations and the numbers are stamped just before publishing, by
//! the one task that publishes, so they follow the order of the wire. The
//! first number tells a receiver where the sender's stream to its run
//! began: frames before the first one it sees were lost, even if it never
//! saw an earlier one (`sequence.rs`). A receiver drops a frame addressed to an incarnation other
//! than its own: it was meant for an earlier run of its node, and PIDs of
//! that run must never reach the processes of this one.

use relay::Pid;

use crate::error::DecodeError;

const VERSION: u8 = 3;
const STAMP: usize = 26;
const SIGNAL_LEN: usize = 58;
pub(crate) const HEADER: usize = 60;

/// What a frame carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Message,
    Signal,
    Control,
}

/// A frame read back from bytes, borrowing them.
#[derive(Debug)]
pub(crate) struct Frame<'a> {
    pub(crate) kind: Kind,
    pub(crate) source: Pid,
    pub(crate) target: Pid,
    /// The incarnation of the target node the sender addressed (0: any).
    pub(crate) addressed: u64,
    pub(crate) incarnation: u64,
    pub(crate) seq: u64,
    /// The sender's first number for the addressed run (0: not known).
    pub(crate) first: u64,
    pub(crate) signal: &'a [u8],
    pub(crate) tag: &'a str,
    pub(crate) body: &'a [u8],
}

/// How many bytes a frame with these parts takes.
pub(crate) fn size(signal: Option<&[u8]>, tag: &str, body: &[u8]) -> usize {
    HEADER + signal.map_or(0, <[u8]>::len) + 2 + tag.len() + body.len()
}

/// A frame with no stamp yet (see [`stamp`]): a message when `signal` is
/// `None`.
pub(crate) fn write(
    source: Pid,
    target: Pid,
    signal: Option<&[u8]>,
    tag: &str,
    body: &[u8],
) -> Vec<u8> {
    let tag_len = u16::try_from(tag.len()).expect("tags are checked at registration");
    let signal_bytes = signal.unwrap_or(&[]);
    let signal_len = u16::try_from(signal_bytes.len()).expect("signals are short");
    let mut out = Vec::with_capacity(size(signal, tag, body));
    out.push(VERSION);
    out.push(match signal {
        None => 0,
        Some(_) => 1,
    });
    out.extend_from_slice(&source.node().to_be_bytes());
    out.extend_from_slice(&source.id().to_be_bytes());
    out.extend_from_slice(&target.node().to_be_bytes());
    out.extend_from_slice(&target.id().to_be_bytes());
    out.extend_from_slice(&[0; 32]);
    out.extend_from_slice(&signal_len.to_be_bytes());
    out.extend_from_slice(signal_bytes);
    out.extend_from_slice(&tag_len.to_be_bytes());
    out.extend_from_slice(tag.as_bytes());
    out.extend_from_slice(body);
    out
}

/// A control frame between two transports, with the episode it is about
/// (the sender's count of its fences of the receiver, for a Reset; the
/// Reset's, for an acknowledgement).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Control {
    /// "I lost you and ended my relations with you: end yours with me."
    Reset(u64),
    /// "I have ended my relations with you for your Reset of this episode."
    Acknowledged(u64),
    /// "I heard your goodbye: nothing more from me follows, and the last
    /// frame I published to you was this number" (`farewell.rs`).
    Farewell(u64),
}

impl Control {
    /// The control frame's body: what it is (one byte), then the episode.
    pub(crate) fn bytes(self) -> [u8; CONTROL_LEN] {
        let (what, episode) = match self {
            Control::Reset(episode) => (0, episode),
            Control::Acknowledged(episode) => (1, episode),
            Control::Farewell(last) => (2, last),
        };
        let mut out = [0; CONTROL_LEN];
        out[0] = what;
        out[1..].copy_from_slice(&episode.to_be_bytes());
        out
    }

    /// The control a frame's body says, if it is one this build knows.
    pub(crate) fn read(body: &[u8]) -> Option<Control> {
        let episode = u64::from_be_bytes(body.get(1..9)?.try_into().ok()?);
        match body.first()? {
            0 => Some(Control::Reset(episode)),
            1 => Some(Control::Acknowledged(episode)),
            2 => Some(Control::Farewell(episode)),
            _ => None,
        }
    }
}

/// How many signal bytes a control frame carries.
pub(crate) const CONTROL_LEN: usize = 9;

/// A control frame from the transport of node `from` to that of node `to`
/// (no stamp yet), carrying `body` (see `reset.rs`).
pub(crate) fn control(from: u32, to: u32, body: [u8; CONTROL_LEN]) -> Vec<u8> {
    let mut out = write(Pid::new(from, 0), Pid::new(to, 0), Some(&body), "", b"");
    out[1] = 2;
    out
}

/// What a sender stamps on a frame just before publishing it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stamp {
    /// The target's incarnation as the sender knows it (0: not known).
    pub(crate) addressed: u64,
    /// The sender's incarnation.
    pub(crate) incarnation: u64,
    /// The frame's number (0: a control frame, not numbered).
    pub(crate) seq: u64,
    /// The sender's first number for the run `addressed` (0: not known).
    pub(crate) first: u64,
}

/// Writes `stamp` into `frame`.
pub(crate) fn stamp(frame: &mut [u8], stamp: Stamp) {
    frame[STAMP..STAMP + 8].copy_from_slice(&stamp.addressed.to_be_bytes());
    frame[STAMP + 8..STAMP + 16].copy_from_slice(&stamp.incarnation.to_be_bytes());
    frame[STAMP + 16..STAMP + 24].copy_from_slice(&stamp.seq.to_be_bytes());
    frame[STAMP + 24..STAMP + 32].copy_from_slice(&stamp.first.to_be_bytes());
}

/// Reads a frame, refusing one longer than `max` bytes.
pub(crate) fn read(bytes: &[u8], max: usize) -> Result<Frame<'_>, DecodeError> {
    if bytes.len() > max {
        return Err(DecodeError::TooLarge {
            size: bytes.len(),
            max,
        });
    }
    if bytes.len() < HEADER {
        return Err(DecodeError::Truncated { len: bytes.len() });
    }
    if bytes[0] != VERSION {
        return Err(DecodeError::UnsupportedVersion(bytes[0]));
    }
    let kind = match bytes[1] {
        0 => Kind::Message,
        1 => Kind::Signal,
        2 => Kind::Control,
        _ => return Err(DecodeError::UnsupportedVersion(bytes[0])),
    };
    let truncated = DecodeError::Truncated { len: bytes.len() };
    let u16_at = |at: usize| -> Result<usize, DecodeError> {
        let two = bytes
            .get(at..at + 2)
            .ok_or(DecodeError::Truncated { len: bytes.len() })?;
        Ok(usize::from(u16::from_be_bytes([two[0], two[1]])))
    };
    let u32_at = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
    let u64_at = |at: usize| u64::from_be_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
    let signal_len = u16_at(SIGNAL_LEN)?;
    let signal = bytes.get(HEADER..HEADER + signal_len).ok_or(truncated)?;
    let tag_at = HEADER + signal_len;
    let tag_len = u16_at(tag_at)?;
    let Some(tag) = bytes.get(tag_at + 2..tag_at + 2 + tag_len) else {
        return Err(DecodeError::Truncated { len: bytes.len() });
    };
    let tag = std::str::from_utf8(tag).map_err(|_| DecodeError::BadTag)?;
    if (kind == Kind::Message) != signal.is_empty() || (kind == Kind::Message && tag.is_empty()) {
        return Err(DecodeError::BadTag);
    }
    if kind == Kind::Control && (signal.len() != CONTROL_LEN || !tag.is_empty()) {
        return Err(DecodeError::BadTag);
    }
    Ok(Frame {
        kind,
        source: Pid::new(u32_at(2), u64_at(6)),
        target: Pid::new(u32_at(14), u64_at(18)),
        addressed: u64_at(STAMP),
        incarnation: u64_at(STAMP + 8),
        seq: u64_at(STAMP + 16),
        first: u64_at(STAMP + 24),
        signal,
        tag,
        body: &bytes[tag_at + 2 + tag_len..],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAMPED: Stamp = Stamp {
        addressed: 5,
        incarnation: 42,
        seq: 3,
        first: 2,
    };

    #[test]
    fn a_frame_round_trips() {
        let mut bytes = write(Pid::new(1, 7), Pid::new(2, 9), None, "ping", b"{}");
        assert_eq!(bytes.len(), size(None, "ping", b"{}"));
        stamp(&mut bytes, STAMPED);
        let frame = read(&bytes, 1 << 20).unwrap();
        assert_eq!(frame.kind, Kind::Message);
        assert_eq!(frame.source, Pid::new(1, 7));
        assert_eq!(frame.target, Pid::new(2, 9));
        let read_back = (frame.addressed, frame.incarnation, frame.seq, frame.first);
        assert_eq!(read_back, (5, 42, 3, 2));
        assert_eq!(frame.tag, "ping");
        assert_eq!(frame.body, b"{}");
        assert!(frame.signal.is_empty());
    }

    #[test]
    fn a_signal_round_trips_with_and_without_a_payload() {
        let bytes = write(Pid::new(1, 0), Pid::new(2, 9), Some(&[1, 3, 7]), "", b"");
        let frame = read(&bytes, 1 << 20).unwrap();
        assert_eq!(
            (frame.kind, frame.signal, frame.tag),
            (Kind::Signal, &[1u8, 3, 7][..], "")
        );
        let bytes = write(Pid::new(1, 0), Pid::new(2, 9), Some(&[1, 7]), "num", b"42");
        let frame = read(&bytes, 1 << 20).unwrap();
        assert_eq!(
            (frame.signal, frame.tag, frame.body),
            (&[1u8, 7][..], "num", &b"42"[..])
        );
    }

    #[test]
    fn a_control_frame_round_trips_and_a_malformed_one_is_refused() {
        let body = [7, 0, 0, 0, 0, 0, 0, 0, 9];
        let mut bytes = control(1, 2, body);
        stamp(&mut bytes, STAMPED);
        let frame = read(&bytes, 1 << 20).unwrap();
        assert_eq!(frame.kind, Kind::Control);
        assert_eq!(
            (frame.source, frame.target),
            (Pid::new(1, 0), Pid::new(2, 0))
        );
        assert_eq!((frame.signal, frame.tag), (&body[..], ""));
        let read_back = (frame.addressed, frame.incarnation, frame.seq, frame.first);
        assert_eq!(read_back, (5, 42, 3, 2));
        let mut tagged = write(Pid::new(1, 0), Pid::new(2, 0), Some(&body), "t", b"");
        tagged[1] = 2;
        assert!(matches!(read(&tagged, 1 << 20), Err(DecodeError::BadTag)));
        let mut short = write(Pid::new(1, 0), Pid::new(2, 0), Some(&[7, 8]), "", b"");
        short[1] = 2;
        assert!(matches!(read(&short, 1 << 20), Err(DecodeError::BadTag)));
    }

    #[test]
    fn short_long_and_foreign_frames_are_refused() {
        let bytes = write(Pid::new(1, 7), Pid::new(2, 9), None, "ping", b"{}");
        assert!(matches!(
            read(&bytes[..10], 1 << 20),
            Err(DecodeError::Truncated { len: 10 })
        ));
        assert!(matches!(
            read(&bytes[..HEADER + 3], 1 << 20),
            Err(DecodeError::Truncated { .. })
        ));
        assert!(matches!(
            read(&bytes, 8),
            Err(DecodeError::TooLarge { max: 8, .. })
        ));
        let mut other = bytes.clone();
        other[0] = 1;
        assert!(matches!(
            read(&other, 1 << 20),
            Err(DecodeError::UnsupportedVersion(1))
        ));
        // A message without a tag, a "message" carrying signal bytes.
        let untagged = write(Pid::new(1, 7), Pid::new(2, 9), None, "", b"{}");
        assert!(matches!(read(&untagged, 1 << 20), Err(DecodeError::BadTag)));
        let mut mixed = write(Pid::new(1, 7), Pid::new(2, 9), Some(&[1]), "t", b"");
        mixed[1] = 0;
        assert!(matches!(read(&mixed, 1 << 20), Err(DecodeError::BadTag)));
    }

    #[test]
    fn controls_round_trip_and_unknown_ones_are_refused() {
        for control in [
            Control::Reset(1),
            Control::Acknowledged(u64::MAX),
            Control::Reset(0),
            Control::Farewell(42),
        ] {
            assert_eq!(Control::read(&control.bytes()), Some(control));
        }
        let mut unknown = Control::Reset(3).bytes();
        unknown[0] = 9;
        assert_eq!(Control::read(&unknown), None);
        assert_eq!(Control::read(&[0, 1]), None);
    }
}
