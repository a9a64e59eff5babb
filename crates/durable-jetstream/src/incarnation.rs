//! This incarnation of the node: its connection, the journals it owns
//! (with the last sequence it wrote or read on each: what its next
//! append expects), its lease's revision; publishing a message and
//! reading the stream.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Mutex;

use async_nats::jetstream::consumer::{pull, DeliverPolicy};
use async_nats::jetstream::message::PublishMessage;
use async_nats::jetstream::stream;
use async_nats::jetstream::{kv, Context};
use futures_util::StreamExt;
use sched_durable::DurableError;

use crate::error::{corrupt, store_error};
use crate::message::{token, Entry, JournalWriter};
use crate::scan::Scan;

/// Who owns what, in this incarnation's view, and how to reach the
/// server.
pub(crate) struct Inner {
    pub(crate) js: Context,
    pub(crate) stream: stream::Stream,
    pub(crate) leases: kv::Store,
    pub(crate) prefix: String,
    pub(crate) me: JournalWriter,
    /// Journal key → the stream sequence of the last message this
    /// incarnation wrote or read on its subject, for the journals it owns.
    pub(crate) owned: Mutex<HashMap<String, u64>>,
    /// The revision of this incarnation's lease.
    pub(crate) lease_revision: AtomicU64,
    /// Whether the lease is renewed.
    pub(crate) renewing: AtomicBool,
}

impl Inner {
    pub(crate) fn subject(&self, key: &str) -> String {
        format!("{}.journal.{}", self.prefix, token(key))
    }

    pub(crate) fn lease_key(node: u32) -> String {
        format!("node-{node}")
    }

    pub(crate) fn owned(&self) -> std::sync::MutexGuard<'_, HashMap<String, u64>> {
        self.owned.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Notes that this incarnation owns `key` as of `stream_seq`.
    pub(crate) fn own(&self, key: &str, stream_seq: u64) {
        let mut owned = self.owned();
        let last = owned.entry(key.to_owned()).or_default();
        *last = (*last).max(stream_seq);
    }

    pub(crate) async fn publish(
        &self,
        subject: String,
        entry: &Entry,
        expected: Option<u64>,
    ) -> Publishing {
        let payload = match postcard::to_stdvec(entry) {
            Ok(bytes) => bytes,
            Err(e) => return Publishing::Failed(store_error("encoding a journal message", e)),
        };
        let mut message = PublishMessage::build().payload(payload.into());
        if let Some(expected) = expected {
            message = message.expected_last_subject_sequence(expected);
        }
        match self.js.send_publish(subject, message).await {
            Ok(ack) => Publishing::Sent(ack),
            Err(e) => Publishing::Failed(store_error("publishing to the journal stream", e)),
        }
    }

    /// Reads the messages of `filter` (a subject, or the whole stream),
    /// with an ordered consumer deleted once read: a scan per key (a
    /// keyed process resumed on each move) would otherwise leave a
    /// consumer per call until the server's inactivity threshold, and
    /// reach its limit of consumers.
    pub(crate) async fn scan(&self, filter: Option<String>) -> Result<Scan, DurableError> {
        let consumer = self
            .stream
            .create_consumer(pull::OrderedConfig {
                filter_subject: filter.unwrap_or_default(),
                deliver_policy: DeliverPolicy::All,
                ..Default::default()
            })
            .await
            .map_err(|e| store_error("reading the journal stream", e))?;
        let name = consumer.cached_info().name.clone();
        let scan = read(consumer).await;
        // Best effort: one left behind expires on the server's own.
        if let Err(error) = self.stream.delete_consumer(&name).await {
            tracing::debug!(%error, "a scan's consumer was not deleted");
        }
        scan
    }

    pub(crate) async fn scan_journals(&self) -> Result<Scan, DurableError> {
        self.scan(Some(format!("{}.journal.>", self.prefix))).await
    }
}

pub(crate) enum Publishing {
    Sent(async_nats::jetstream::context::PublishAckFuture),
    Failed(DurableError),
}

/// Every message an ordered consumer made for a scan holds now.
async fn read(
    consumer: async_nats::jetstream::consumer::Consumer<pull::OrderedConfig>,
) -> Result<Scan, DurableError> {
    let mut scan = Scan::default();
    if consumer.cached_info().num_pending == 0 {
        return Ok(scan);
    }
    let mut messages = consumer
        .messages()
        .await
        .map_err(|e| store_error("reading the journal stream", e))?;
    while let Some(message) = messages.next().await {
        let message = message.map_err(|e| store_error("reading the journal stream", e))?;
        let info = message
            .info()
            .map_err(|e| store_error("reading the journal stream", e))?;
        let (stream_seq, pending) = (info.stream_sequence, info.pending);
        let entry: Entry = postcard::from_bytes(&message.payload).map_err(|e| {
            corrupt(format!(
                "message {stream_seq} of the journal stream is not a journal message: {e}"
            ))
        })?;
        scan.add(stream_seq, entry)?;
        if pending == 0 {
            break;
        }
    }
    Ok(scan)
}
