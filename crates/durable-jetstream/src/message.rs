//! What the stream holds: a message's writer, and the messages
//! themselves (a journal's records, a takeover, a forgotten journal's
//! sends, discarded sends), as postcard encodes them.

use serde::{Deserialize, Serialize};

/// An incarnation of a node: the writer of a journal's message.
///
/// # Examples
///
/// ```
/// use sched_durable_jetstream::JournalWriter;
///
/// let writer = JournalWriter { node: 2, incarnation: 0x1234 };
/// assert_eq!(writer.to_string(), "2@1234");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct JournalWriter {
    /// The node's number.
    pub node: u32,
    /// The store handle's incarnation (new on every open).
    pub incarnation: u64,
}

impl std::fmt::Display for JournalWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}@{:x}", self.node, self.incarnation)
    }
}

/// One message of a journal, as [`JetStreamStore::history`](crate::JetStreamStore::history) lists it.
///
/// # Examples
///
/// ```no_run
/// use sched_durable_jetstream::JetStreamStore;
///
/// let store = JetStreamStore::builder("nats://127.0.0.1:4222", 1).open()?;
/// for written in store.history("order-1")? {
///     println!("{} by {}: records {:?}", written.stream_seq, written.writer, written.records);
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// The message's sequence in the stream.
    pub stream_seq: u64,
    /// Who wrote it.
    pub writer: JournalWriter,
    /// The record numbers it holds; empty for a takeover.
    pub records: Vec<u64>,
}

/// One record inside a journal message.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Rec {
    pub(crate) seq: u64,
    pub(crate) created: Option<(String, Vec<u8>)>,
    pub(crate) ended: bool,
    pub(crate) record: Vec<u8>,
    /// (receiver, number, body).
    pub(crate) sent: Vec<(String, u64, Vec<u8>)>,
    /// (sender, number).
    pub(crate) taken: Vec<(String, u64)>,
    /// The process's state after this record, if a snapshot was taken.
    pub(crate) snapshot: Option<Vec<u8>>,
}

/// A message of the stream.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum Entry {
    /// Records of one journal (on its subject).
    Records {
        key: String,
        writer: JournalWriter,
        records: Vec<Rec>,
    },
    /// `writer` owns the journal from here on (on its subject).
    Takeover { key: String, writer: JournalWriter },
    /// A send of a forgotten journal, not yet taken (on `<prefix>.outbox`):
    /// `origin` is the stream sequence of the message that released it.
    Carried { origin: u64, send: Mail },
    /// Sends discarded, as (receiver, sender, number) (on
    /// `<prefix>.discard`).
    Discarded { entries: Vec<(String, String, u64)> },
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Mail {
    pub(crate) from: String,
    pub(crate) to: String,
    pub(crate) seq: u64,
    pub(crate) body: Vec<u8>,
}

/// The subject token of `key`: `k` and its bytes in hex.
pub(crate) fn token(key: &str) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(1 + 2 * key.len());
    out.push('k');
    for b in key.bytes() {
        let _ = write!(out, "{b:02x}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_become_valid_subject_tokens() {
        assert_eq!(token(""), "k");
        assert_eq!(token("a.b c"), "k612e622063");
        assert_eq!(token("ü>"), "kc3bc3e");
    }
}
