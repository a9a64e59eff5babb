//! A read of the stream, assembled: each journal's records, owner and
//! last sequence, and which sends are still in the outbox.

use std::collections::{BTreeMap, HashMap};

use sched_durable::store::{Created, Journal};
use sched_durable::DurableError;

use crate::error::corrupt;
use crate::message::{Entry, JournalWriter, Mail, Written};

/// A journal as a read of the stream assembles it.
#[derive(Debug)]
pub(crate) struct Assembled {
    pub(crate) created: Option<Created>,
    pub(crate) ended: bool,
    /// The latest snapshot: the record it follows, and its bytes.
    pub(crate) snapshot: Option<(u64, Vec<u8>)>,
    pub(crate) records: Vec<Vec<u8>>,
    /// The last message's writer and stream sequence.
    pub(crate) writer: JournalWriter,
    pub(crate) last: u64,
    /// (stream sequence, record numbers, writer) of each message.
    pub(crate) history: Vec<Written>,
    /// Sends released, with the sequence of the message that did.
    pub(crate) sent: Vec<(u64, Mail)>,
}

impl Assembled {
    /// A journal with nothing read yet, its first message by `writer`.
    fn fresh(writer: JournalWriter) -> Assembled {
        Assembled {
            created: None,
            ended: false,
            snapshot: None,
            records: Vec::new(),
            writer,
            last: 0,
            history: Vec::new(),
            sent: Vec::new(),
        }
    }

    pub(crate) fn journal(&self, key: &str) -> Result<Journal, DurableError> {
        let created = self
            .created
            .clone()
            .ok_or_else(|| corrupt(format!("the journal of {key:?} has no record 0")))?;
        Ok(Journal {
            key: key.to_owned(),
            created,
            ended: self.ended,
            // The stream keeps every record: the snapshot only spares the
            // recovery their replay.
            snapshot: self.snapshot.clone(),
            first: 0,
            records: self.records.clone(),
        })
    }
}

/// Everything a read of the stream found.
#[derive(Debug, Default)]
pub(crate) struct Scan {
    pub(crate) journals: BTreeMap<String, Assembled>,
    pub(crate) carried: Vec<(u64, Mail)>,
    /// (receiver, sender, number) → the latest stream sequence that took
    /// or discarded it.
    pub(crate) settled: HashMap<(String, String, u64), u64>,
}

impl Scan {
    pub(crate) fn add(&mut self, stream_seq: u64, entry: Entry) -> Result<(), DurableError> {
        match entry {
            Entry::Records {
                key,
                writer,
                records,
            } => {
                let journal = self
                    .journals
                    .entry(key.clone())
                    .or_insert_with(|| Assembled::fresh(writer));
                // Record 0 behind an ended journal: the key was forgotten
                // and used again, and this scan read the old journal
                // before the purge took it away. The key starts clean
                // ("later" by stream sequence); the old journal's untaken
                // sends were carried to the outbox before the purge.
                let reused = records.first().is_some_and(|r| r.seq == 0);
                if reused && journal.ended && !journal.records.is_empty() {
                    *journal = Assembled::fresh(writer);
                }
                let mut numbers = Vec::with_capacity(records.len());
                for rec in records {
                    if rec.seq != journal.records.len() as u64 {
                        return Err(corrupt(format!(
                            "the journal of {key:?} skips from record {} to {}",
                            journal.records.len(),
                            rec.seq
                        )));
                    }
                    if let Some((kind, args)) = rec.created {
                        journal.created = Some(Created { kind, args });
                    }
                    journal.ended |= rec.ended;
                    if let Some(snapshot) = rec.snapshot {
                        journal.snapshot = Some((rec.seq, snapshot));
                    }
                    for (to, seq, body) in rec.sent {
                        let send = Mail {
                            from: key.clone(),
                            to,
                            seq,
                            body,
                        };
                        journal.sent.push((stream_seq, send));
                    }
                    for (from, seq) in rec.taken {
                        let at = self.settled.entry((key.clone(), from, seq)).or_default();
                        *at = (*at).max(stream_seq);
                    }
                    journal.records.push(rec.record);
                    numbers.push(rec.seq);
                }
                journal.writer = writer;
                journal.last = stream_seq;
                journal.history.push(Written {
                    stream_seq,
                    writer,
                    records: numbers,
                });
            }
            Entry::Takeover { key, writer } => {
                let journal = self.journals.get_mut(&key).ok_or_else(|| {
                    corrupt(format!("a takeover of {key:?}, which has no records"))
                })?;
                journal.writer = writer;
                journal.last = stream_seq;
                journal.history.push(Written {
                    stream_seq,
                    writer,
                    records: Vec::new(),
                });
            }
            Entry::Carried { origin, send } => self.carried.push((origin, send)),
            Entry::Discarded { entries } => {
                for entry in entries {
                    let at = self.settled.entry(entry).or_default();
                    *at = (*at).max(stream_seq);
                }
            }
        }
        Ok(())
    }

    /// Whether the send released at `origin` is still in the outbox.
    pub(crate) fn untaken(&self, origin: u64, send: &Mail) -> bool {
        let id = (send.to.clone(), send.from.clone(), send.seq);
        self.settled.get(&id).is_none_or(|&at| at < origin)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Rec;

    #[test]
    fn a_send_leaves_the_outbox_only_when_settled_after_it() {
        let mut scan = Scan::default();
        let send = Mail {
            from: "a".into(),
            to: "c".into(),
            seq: 1,
            body: vec![],
        };
        assert!(scan.untaken(5, &send));
        scan.settled.insert(("c".into(), "a".into(), 1), 7);
        assert!(!scan.untaken(5, &send), "taken after it was sent");
        assert!(scan.untaken(9, &send), "a send made again after a forget");
    }

    #[test]
    fn a_journal_with_a_hole_is_corrupt() {
        let writer = JournalWriter {
            node: 1,
            incarnation: 1,
        };
        let rec = |seq| Rec {
            seq,
            created: (seq == 0).then(|| ("k".to_owned(), vec![])),
            ended: false,
            record: vec![],
            sent: vec![],
            taken: vec![],
            snapshot: None,
        };
        let mut scan = Scan::default();
        let records = |r| Entry::Records {
            key: "x".into(),
            writer,
            records: vec![r],
        };
        scan.add(1, records(rec(0))).unwrap();
        assert!(matches!(
            scan.add(2, records(rec(2))),
            Err(DurableError::Corrupt(_))
        ));
    }

    /// A scan that read an ended journal before its purge, then the key's
    /// new record 0: the key starts clean, as if the purge had come first.
    #[test]
    fn record_0_behind_an_ended_journal_starts_the_key_clean() {
        let writer = JournalWriter {
            node: 1,
            incarnation: 1,
        };
        let rec = |seq, ended| Rec {
            seq,
            created: (seq == 0).then(|| ("k".to_owned(), vec![seq as u8])),
            ended,
            record: vec![seq as u8],
            sent: vec![],
            taken: vec![],
            snapshot: None,
        };
        let records = |r| Entry::Records {
            key: "x".into(),
            writer,
            records: vec![r],
        };
        let mut scan = Scan::default();
        scan.add(1, records(rec(0, false))).unwrap();
        scan.add(2, records(rec(1, true))).unwrap();
        scan.add(9, records(rec(0, false))).unwrap();
        let journal = &scan.journals["x"];
        assert!(!journal.ended);
        assert_eq!(journal.records, vec![vec![0]]);
        assert_eq!(journal.last, 9);
        // Record 0 again behind a journal that has not ended is corrupt.
        assert!(matches!(
            scan.add(10, records(rec(0, false))),
            Err(DurableError::Corrupt(_))
        ));
    }
}
