//! What recovery reads and does: the journals this incarnation runs
//! (taking over those whose writer's lease lapsed), the keys, the outbox,
//! forgetting an ended journal and discarding sends.

use std::collections::HashMap;

use async_nats::jetstream::context::PublishErrorKind;
use sched_durable::store::{Journal, Outgoing};
use sched_durable::DurableError;

use crate::error::store_error;
use crate::incarnation::{Inner, Publishing};
use crate::message::Entry;

/// How many times a takeover on demand reads a journal that another
/// incarnation keeps writing before it gives up.
const TAKEOVER_TRIES: usize = 5;

/// The most discarded entries one discard message holds.
const DISCARDS_PER_MESSAGE: usize = 1_000;

impl Inner {
    pub(crate) async fn running(&self) -> Result<Vec<Journal>, DurableError> {
        let scan = self.scan_journals().await?;
        let mut leases: HashMap<u32, Option<u64>> = HashMap::new();
        let mut out = Vec::new();
        for (key, assembled) in &scan.journals {
            if assembled.ended {
                continue;
            }
            if assembled.writer == self.me {
                self.own(key, assembled.last);
                out.push(assembled.journal(key)?);
                continue;
            }
            let owner = assembled.writer;
            let alive = match leases.get(&owner.node) {
                Some(lease) => *lease,
                None => {
                    let lease = self.lease_of(owner.node).await?;
                    leases.insert(owner.node, lease);
                    lease
                }
            };
            if alive == Some(owner.incarnation) {
                continue;
            }
            if self.publish_takeover(key, assembled.last).await? {
                tracing::info!(
                    key,
                    from = %owner,
                    to = %self.me,
                    "took over a durable process's journal: its owner's lease lapsed"
                );
                out.push(assembled.journal(key)?);
            } else {
                tracing::debug!(key, "a journal was written meanwhile: not taken over");
            }
        }
        Ok(out)
    }

    /// The running journal of `key`, made this incarnation's whoever
    /// wrote it last (the caller knows its writer stopped running it):
    /// a takeover published expecting the sequence read, retried while
    /// the journal moves under it.
    pub(crate) async fn take_over(&self, key: &str) -> Result<Option<Journal>, DurableError> {
        for _ in 0..TAKEOVER_TRIES {
            let scan = self.scan(Some(self.subject(key))).await?;
            let Some(assembled) = scan.journals.get(key) else {
                return Ok(None);
            };
            if assembled.ended {
                return Ok(None);
            }
            if assembled.writer == self.me {
                self.own(key, assembled.last);
                return Ok(Some(assembled.journal(key)?));
            }
            if self.publish_takeover(key, assembled.last).await? {
                tracing::info!(key, from = %assembled.writer, to = %self.me, "took over a durable process's journal on demand");
                return Ok(Some(assembled.journal(key)?));
            }
            tracing::debug!(
                key,
                "a journal was written while being taken over: read again"
            );
        }
        Err(DurableError::Store(format!(
            "the journal of {key:?} kept being written while it was taken over ({TAKEOVER_TRIES} tries)"
        )))
    }

    /// Publishes this incarnation's takeover of `key`'s journal, expecting
    /// its last record to be `last` (the fence): `true` if it landed (the
    /// journal is this incarnation's from its sequence on), `false` if the
    /// journal was written meanwhile.
    async fn publish_takeover(&self, key: &str, last: u64) -> Result<bool, DurableError> {
        let takeover = Entry::Takeover {
            key: key.to_owned(),
            writer: self.me,
        };
        let ack = match self.publish(self.subject(key), &takeover, Some(last)).await {
            Publishing::Sent(ack) => ack.await,
            Publishing::Failed(e) => return Err(e),
        };
        match ack {
            Ok(ack) => {
                self.own(key, ack.sequence);
                Ok(true)
            }
            Err(e) if e.kind() == PublishErrorKind::WrongLastSequence => Ok(false),
            Err(e) => Err(store_error("taking over a journal", e)),
        }
    }

    pub(crate) async fn keys(&self) -> Result<Vec<(String, bool)>, DurableError> {
        let scan = self.scan_journals().await?;
        Ok(scan
            .journals
            .iter()
            .map(|(key, journal)| (key.clone(), journal.ended))
            .collect())
    }

    pub(crate) async fn outbox(&self) -> Result<Vec<Outgoing>, DurableError> {
        let scan = self.scan(None).await?;
        let sends = scan
            .journals
            .values()
            .flat_map(|j| j.sent.iter())
            .chain(scan.carried.iter());
        let mut out = Vec::new();
        for (origin, send) in sends {
            if !scan.untaken(*origin, send) {
                continue;
            }
            // A receiver another node runs (or will take over) gets its
            // sends from that node's recovery.
            let ours = match scan.journals.get(&send.to) {
                None => true,
                Some(receiver) => receiver.ended || receiver.writer == self.me,
            };
            if ours {
                out.push(Outgoing {
                    from: send.from.clone(),
                    to: send.to.clone(),
                    seq: send.seq,
                    body: send.body.clone(),
                });
            }
        }
        Ok(out)
    }

    pub(crate) async fn forget(&self, key: &str) -> Result<bool, DurableError> {
        let subject = self.subject(key);
        let scan = self.scan(Some(subject.clone())).await?;
        let Some(journal) = scan.journals.get(key) else {
            return Ok(false);
        };
        if !journal.ended {
            return Ok(false);
        }
        // Its sends nobody took yet outlive it.
        let sent = journal.sent.clone();
        let last = journal.last;
        if !sent.is_empty() {
            let everything = self.scan(None).await?;
            let outbox = format!("{}.outbox", self.prefix);
            for (origin, send) in sent {
                if everything.untaken(origin, &send) {
                    let entry = Entry::Carried { origin, send };
                    let ack = match self.publish(outbox.clone(), &entry, None).await {
                        Publishing::Sent(ack) => ack.await,
                        Publishing::Failed(e) => return Err(e),
                    };
                    ack.map_err(|e| store_error("keeping a forgotten journal's sends", e))?;
                }
            }
        }
        // Up to its last message only: a journal made again under the key
        // meanwhile is kept.
        self.stream
            .purge()
            .filter(subject)
            .sequence(last + 1)
            .await
            .map_err(|e| store_error("purging a journal", e))?;
        self.owned().remove(key);
        Ok(true)
    }

    pub(crate) async fn discard(
        &self,
        entries: &[(String, String, u64)],
    ) -> Result<(), DurableError> {
        let subject = format!("{}.discard", self.prefix);
        for chunk in entries.chunks(DISCARDS_PER_MESSAGE) {
            let entry = Entry::Discarded {
                entries: chunk.to_vec(),
            };
            let ack = match self.publish(subject.clone(), &entry, None).await {
                Publishing::Sent(ack) => ack.await,
                Publishing::Failed(e) => return Err(e),
            };
            ack.map_err(|e| store_error("discarding outbox entries", e))?;
        }
        Ok(())
    }
}
