//! An append, fenced: one message per process of the batch, each
//! expecting the last sequence this incarnation wrote or read on its
//! journal's subject, pipelined and then acknowledged.

use std::collections::{HashMap, VecDeque};

use async_nats::jetstream;
use async_nats::jetstream::context::PublishErrorKind;
use sched_durable::store::Append;
use sched_durable::DurableError;

use crate::error::store_error;
use crate::incarnation::{Inner, Publishing};
use crate::message::{Entry, Rec};

/// The most acknowledgements an append waits for at once.
const WINDOW: usize = 256;

impl Inner {
    pub(crate) async fn append(&self, batch: &[Append]) -> Result<Vec<String>, DurableError> {
        // One message per process, its records in order.
        let mut order: Vec<&str> = Vec::new();
        let mut by_key: HashMap<&str, Vec<&Append>> = HashMap::new();
        for append in batch {
            by_key
                .entry(append.key.as_str())
                .or_insert_with(|| {
                    order.push(append.key.as_str());
                    Vec::new()
                })
                .push(append);
        }
        let mut fenced: Vec<String> = Vec::new();
        let mut failed: Vec<DurableError> = Vec::new();
        let mut pending: VecDeque<(String, async_nats::jetstream::context::PublishAckFuture)> =
            VecDeque::new();
        for key in order {
            let appends = &by_key[key];
            let first = appends[0];
            let expected = if first.seq == 0 {
                // A new journal: its subject must be empty.
                Some(0)
            } else {
                self.owned().get(key).copied()
            };
            let Some(expected) = expected else {
                tracing::warn!(
                    key,
                    writer = %self.me,
                    "an append to a journal this incarnation neither created nor took over was refused"
                );
                fenced.push(key.to_owned());
                continue;
            };
            let entry = Entry::Records {
                key: key.to_owned(),
                writer: self.me,
                records: appends
                    .iter()
                    .map(|a| Rec {
                        seq: a.seq,
                        created: a.created.clone().map(|c| (c.kind, c.args)),
                        ended: a.ended,
                        record: a.record.clone(),
                        sent: a
                            .sent
                            .iter()
                            .map(|s| (s.to.clone(), s.seq, s.body.clone()))
                            .collect(),
                        taken: a.taken.clone(),
                        snapshot: a.snapshot.clone(),
                    })
                    .collect(),
            };
            if pending.len() == WINDOW {
                let (key, ack) = pending.pop_front().expect("the window is full");
                self.settle(key, ack.await, &mut fenced, &mut failed);
            }
            match self
                .publish(self.subject(key), &entry, Some(expected))
                .await
            {
                Publishing::Sent(ack) => pending.push_back((key.to_owned(), ack)),
                Publishing::Failed(e) => failed.push(e),
            }
        }
        while let Some((key, ack)) = pending.pop_front() {
            self.settle(key, ack.await, &mut fenced, &mut failed);
        }
        if !fenced.is_empty() {
            tracing::warn!(
                writer = %self.me,
                keys = ?fenced,
                "journal appends were fenced: another incarnation owns these journals now"
            );
        }
        if let Some(e) = failed.into_iter().next() {
            return Err(e);
        }
        Ok(fenced)
    }

    fn settle(
        &self,
        key: String,
        ack: Result<jetstream::publish::PublishAck, jetstream::context::PublishError>,
        fenced: &mut Vec<String>,
        failed: &mut Vec<DurableError>,
    ) {
        match ack {
            Ok(ack) => self.own(&key, ack.sequence),
            Err(e) if e.kind() == PublishErrorKind::WrongLastSequence => {
                self.owned().remove(&key);
                fenced.push(key);
            }
            Err(e) => failed.push(store_error(
                &format!("appending to the journal of {key:?}"),
                e,
            )),
        }
    }
}
