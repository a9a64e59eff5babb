//! The frame a package travels in: a fixed header, the payload's tag and
//! the payload's bytes. All integers are big-endian.
//!
//! ```text
//! offset  size  field
//!      0     1  version (1)
//!      1     4  source node
//!      5     8  source id
//!     13     4  target node
//!     17     8  target id
//!     25     8  incarnation of the sending transport
//!     33     8  sequence number from that transport to the target node
//!     41     2  tag length n
//!     43     n  tag (UTF-8)
//!   43+n     …  payload bytes (the codec's encoding of the message)
//! ```
//!
//! The incarnation and sequence number are stamped just before publishing,
//! by the one task that publishes, so they follow the order of the wire.

use relay::Pid;

use crate::error::DecodeError;

const VERSION: u8 = 1;
const STAMP: usize = 25;
const TAG_LEN: usize = 41;
pub(crate) const HEADER: usize = 43;

/// A frame read back from bytes, borrowing them.
#[derive(Debug)]
pub(crate) struct Frame<'a> {
    pub(crate) source: Pid,
    pub(crate) target: Pid,
    pub(crate) incarnation: u64,
    pub(crate) seq: u64,
    pub(crate) tag: &'a str,
    pub(crate) body: &'a [u8],
}

/// A frame with no stamp yet (see [`stamp`]).
pub(crate) fn write(source: Pid, target: Pid, tag: &str, body: &[u8]) -> Vec<u8> {
    let tag_len = u16::try_from(tag.len()).expect("tags are checked at registration");
    let mut out = Vec::with_capacity(HEADER + tag.len() + body.len());
    out.push(VERSION);
    out.extend_from_slice(&source.node().to_be_bytes());
    out.extend_from_slice(&source.id().to_be_bytes());
    out.extend_from_slice(&target.node().to_be_bytes());
    out.extend_from_slice(&target.id().to_be_bytes());
    out.extend_from_slice(&[0; 16]);
    out.extend_from_slice(&tag_len.to_be_bytes());
    out.extend_from_slice(tag.as_bytes());
    out.extend_from_slice(body);
    out
}

/// Writes the sender's incarnation and the frame's sequence number.
pub(crate) fn stamp(frame: &mut [u8], incarnation: u64, seq: u64) {
    frame[STAMP..STAMP + 8].copy_from_slice(&incarnation.to_be_bytes());
    frame[STAMP + 8..STAMP + 16].copy_from_slice(&seq.to_be_bytes());
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
    let u32_at = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
    let u64_at = |at: usize| u64::from_be_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
    let tag_len = usize::from(u16::from_be_bytes([bytes[TAG_LEN], bytes[TAG_LEN + 1]]));
    let Some(tag) = bytes.get(HEADER..HEADER + tag_len) else {
        return Err(DecodeError::Truncated { len: bytes.len() });
    };
    let tag = std::str::from_utf8(tag).map_err(|_| DecodeError::BadTag)?;
    Ok(Frame {
        source: Pid::new(u32_at(1), u64_at(5)),
        target: Pid::new(u32_at(13), u64_at(17)),
        incarnation: u64_at(STAMP),
        seq: u64_at(STAMP + 8),
        tag,
        body: &bytes[HEADER + tag_len..],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_round_trips() {
        let mut bytes = write(Pid::new(1, 7), Pid::new(2, 9), "ping", b"{}");
        stamp(&mut bytes, 42, 3);
        let frame = read(&bytes, 1 << 20).unwrap();
        assert_eq!(frame.source, Pid::new(1, 7));
        assert_eq!(frame.target, Pid::new(2, 9));
        assert_eq!((frame.incarnation, frame.seq), (42, 3));
        assert_eq!(frame.tag, "ping");
        assert_eq!(frame.body, b"{}");
    }

    #[test]
    fn short_long_and_foreign_frames_are_refused() {
        let bytes = write(Pid::new(1, 7), Pid::new(2, 9), "ping", b"{}");
        assert!(matches!(
            read(&bytes[..10], 1 << 20),
            Err(DecodeError::Truncated { len: 10 })
        ));
        assert!(matches!(
            read(&bytes[..HEADER + 2], 1 << 20),
            Err(DecodeError::Truncated { .. })
        ));
        assert!(matches!(
            read(&bytes, 8),
            Err(DecodeError::TooLarge { max: 8, .. })
        ));
        let mut other = bytes.clone();
        other[0] = 9;
        assert!(matches!(
            read(&other, 1 << 20),
            Err(DecodeError::UnsupportedVersion(9))
        ));
    }
}
