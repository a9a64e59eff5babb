//! Live sends from other writers (`Store::watch_sends`): a consumer of
//! the journal stream from its end on, handing the sends of every other
//! writer's records to the durable layer as the server stores them.

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::consumer::{pull, DeliverPolicy};
use futures_util::StreamExt;
use sched_durable::store::{Outgoing, SendWatcher};
use sched_durable::DurableError;

use crate::error::store_error;
use crate::incarnation::Inner;
use crate::message::Entry;

/// The messages of an ordered consumer of the journal subjects.
type Messages = pull::Ordered;

/// How long a watch that lost its consumer waits before making another.
const AGAIN_AFTER: Duration = Duration::from_millis(100);

impl Inner {
    /// Starts watching: the consumer exists when this returns, so every
    /// message stored after it is handed over (a receiver spawned later
    /// reads the earlier ones from the outbox). The watch then runs on
    /// the store's runtime until the store stops.
    pub(crate) async fn watch_sends(
        self: Arc<Self>,
        sends: SendWatcher,
    ) -> Result<(), DurableError> {
        let messages = self.follow(DeliverPolicy::New).await?;
        tokio::spawn(self.watch(messages, Arc::new(sends)));
        Ok(())
    }

    /// An ordered consumer of the journal subjects, from `policy` on.
    async fn follow(&self, policy: DeliverPolicy) -> Result<Messages, DurableError> {
        self.stream
            .create_consumer(pull::OrderedConfig {
                filter_subject: format!("{}.journal.>", self.prefix),
                deliver_policy: policy,
                ..Default::default()
            })
            .await
            .map_err(|e| store_error("watching the journal stream", e))?
            .messages()
            .await
            .map_err(|e| store_error("watching the journal stream", e))
    }

    /// Hands over the sends of each message, in stream order; a consumer
    /// that fails is made again from the message after the last one read,
    /// so none is skipped.
    async fn watch(self: Arc<Self>, mut messages: Messages, sends: Arc<SendWatcher>) {
        let mut next = None;
        loop {
            while let Some(message) = messages.next().await {
                let message = match message {
                    Ok(message) => message,
                    Err(e) => {
                        tracing::warn!("watching the journal stream: {e}");
                        break;
                    }
                };
                if let Ok(info) = message.info() {
                    next = Some(info.stream_sequence + 1);
                }
                if let Some(out) = self.others_sends(&message.payload) {
                    // Off the store's thread: whatever the watcher waits
                    // for (a lock a caller of the store holds) must not
                    // hold up the store's other calls. Awaited, so the
                    // sends are handed over in stream order.
                    let sends = Arc::clone(&sends);
                    if let Err(e) = tokio::task::spawn_blocking(move || sends(out)).await {
                        tracing::warn!("handing other nodes' sends over failed: {e}");
                    }
                }
            }
            // The consumer ended or failed: follow on from where it was.
            loop {
                tokio::time::sleep(AGAIN_AFTER).await;
                let policy = next.map_or(DeliverPolicy::New, |start_sequence| {
                    DeliverPolicy::ByStartSequence { start_sequence }
                });
                match self.follow(policy).await {
                    Ok(again) => {
                        messages = again;
                        break;
                    }
                    Err(e) => tracing::warn!("watching the journal stream again: {e}"),
                }
            }
        }
    }

    /// The sends a message releases, if another writer wrote it.
    fn others_sends(&self, payload: &[u8]) -> Option<Vec<Outgoing>> {
        let Ok(Entry::Records {
            key,
            writer,
            records,
        }) = postcard::from_bytes(payload)
        else {
            return None;
        };
        if writer == self.me {
            return None;
        }
        let out: Vec<Outgoing> = records
            .into_iter()
            .flat_map(|record| record.sent)
            .map(|(to, seq, body)| Outgoing {
                from: key.clone(),
                to,
                seq,
                body,
            })
            .collect();
        (!out.is_empty()).then_some(out)
    }
}
