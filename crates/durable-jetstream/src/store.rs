//! The store handle: its thread and runtime, calls that wait for the
//! server at most the store's timeout, and `sched-durable`'s `Store` over
//! this incarnation.

use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use async_nats::jetstream::stream::LastRawMessageErrorKind;
use sched_durable::store::{Append, Journal, Outgoing, SendWatcher, Store};
use sched_durable::DurableError;

use crate::error::store_error;
use crate::incarnation::Inner;
use crate::message::{JournalWriter, Written};

/// Journals of durable processes in a JetStream stream, shared by the
/// nodes of a cluster: `sched-durable`'s [`Store`] for clusters (see the
/// [crate documentation](crate) for the design, the fence, the lease and
/// what is synced when).
///
/// Each node opens its own with its node number; a node's
/// `Durability::recover`, called at start and then periodically (every
/// lease or so), resumes the durable processes of nodes that died.
///
/// # Examples
///
/// ```no_run
/// use sched_durable_jetstream::JetStreamStore;
/// use sched_durable::prelude::*;
///
/// let store = JetStreamStore::builder("nats://127.0.0.1:4222", 1).open()?;
/// let durability = Durability::open(store);
/// // register the durable types, install, start the scheduler, then:
/// // durability.recover(&scheduler)?;
/// # drop(durability);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct JetStreamStore {
    /// Set once connected.
    pub(crate) inner: Option<Arc<Inner>>,
    pub(crate) handle: tokio::runtime::Handle,
    pub(crate) timeout: Duration,
    pub(crate) stop: Option<tokio::sync::oneshot::Sender<()>>,
    pub(crate) thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for JetStreamStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("JetStreamStore");
        if let Some(inner) = &self.inner {
            d.field("writer", &inner.me).field("prefix", &inner.prefix);
        }
        d.finish_non_exhaustive()
    }
}

impl JetStreamStore {
    fn inner(&self) -> Arc<Inner> {
        self.inner
            .clone()
            .expect("a JetStreamStore is connected once opened")
    }

    /// Runs `work` on the store's thread and waits for it, for at most
    /// the store's timeout.
    pub(crate) fn block<T: Send + 'static>(
        &self,
        work: impl Future<Output = Result<T, DurableError>> + Send + 'static,
    ) -> Result<T, DurableError> {
        let (done, result) = std::sync::mpsc::channel();
        let timeout = self.timeout;
        self.handle.spawn(async move {
            let outcome = match tokio::time::timeout(timeout, work).await {
                Ok(outcome) => outcome,
                Err(_) => Err(DurableError::Store(format!(
                    "the NATS server did not answer within {timeout:?}"
                ))),
            };
            let _ = done.send(outcome);
        });
        result
            .recv()
            .map_err(|_| DurableError::Store("the journal store's thread has stopped".into()))?
    }

    /// This incarnation: the node number and the incarnation its messages
    /// carry.
    ///
    /// # Examples
    ///
    /// See [`JetStreamStoreBuilder`](crate::JetStreamStoreBuilder).
    pub fn writer(&self) -> JournalWriter {
        self.inner().me
    }

    /// Every message of `key`'s journal: who wrote it, and which records
    /// (a takeover holds none). Empty when the key is unknown.
    ///
    /// # Errors
    ///
    /// [`DurableError::Store`] or [`DurableError::Corrupt`].
    ///
    /// # Examples
    ///
    /// See [`Written`].
    pub fn history(&self, key: &str) -> Result<Vec<Written>, DurableError> {
        let inner = self.inner();
        let key = key.to_owned();
        self.block(async move {
            let mut scan = inner.scan(Some(inner.subject(&key))).await?;
            Ok(scan
                .journals
                .remove(&key)
                .map(|j| j.history)
                .unwrap_or_default())
        })
    }

    /// Stops renewing this node's lease, without deleting it: it lapses a
    /// lease from its last renewal, as if the node had hung, and other
    /// nodes' [`running`](Store::running) then take its journals over. The
    /// store still works; its appends to journals taken over are fenced.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use sched_durable_jetstream::JetStreamStore;
    ///
    /// let store = JetStreamStore::builder("nats://127.0.0.1:4222", 1).open()?;
    /// store.stop_renewing();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn stop_renewing(&self) {
        self.inner().renewing.store(false, Ordering::Release);
        tracing::info!(writer = %self.writer(), "the journal lease is no longer renewed");
    }

    /// Stops renewing this node's lease and deletes it: other nodes'
    /// [`running`](Store::running) take its journals over at once. Dropping
    /// the store does the same.
    ///
    /// # Errors
    ///
    /// [`DurableError::Store`] when the server did not answer.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use sched_durable_jetstream::JetStreamStore;
    ///
    /// let store = JetStreamStore::builder("nats://127.0.0.1:4222", 1).open()?;
    /// store.release_lease()?; // hand this node's processes over now
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn release_lease(&self) -> Result<(), DurableError> {
        let inner = self.inner();
        inner.renewing.store(false, Ordering::Release);
        self.block(async move {
            inner.release().await;
            Ok(())
        })
    }
}

impl Store for JetStreamStore {
    fn append(&self, batch: &[Append]) -> Result<Vec<String>, DurableError> {
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        let inner = self.inner();
        let batch = batch.to_vec();
        self.block(async move { inner.append(&batch).await })
    }

    fn watch_sends(&self, sends: SendWatcher) -> Result<bool, DurableError> {
        let inner = self.inner();
        self.block(async move { inner.watch_sends(sends).await })?;
        Ok(true)
    }

    fn running(&self) -> Result<Vec<Journal>, DurableError> {
        let inner = self.inner();
        self.block(async move { inner.running().await })
    }

    fn take_over(&self, key: &str) -> Result<Option<Journal>, DurableError> {
        let inner = self.inner();
        let key = key.to_owned();
        self.block(async move { inner.take_over(&key).await })
    }

    fn journal(&self, key: &str) -> Result<Option<Journal>, DurableError> {
        let inner = self.inner();
        let key = key.to_owned();
        self.block(async move {
            let scan = inner.scan(Some(inner.subject(&key))).await?;
            scan.journals.get(&key).map(|j| j.journal(&key)).transpose()
        })
    }

    fn contains(&self, key: &str) -> Result<bool, DurableError> {
        let inner = self.inner();
        let subject = inner.subject(key);
        self.block(async move {
            match inner.stream.get_last_raw_message_by_subject(&subject).await {
                Ok(_) => Ok(true),
                Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => Ok(false),
                Err(e) => Err(store_error("reading the journal stream", e)),
            }
        })
    }

    fn forget(&self, key: &str) -> Result<bool, DurableError> {
        let inner = self.inner();
        let key = key.to_owned();
        self.block(async move { inner.forget(&key).await })
    }

    fn outbox(&self) -> Result<Vec<Outgoing>, DurableError> {
        let inner = self.inner();
        self.block(async move { inner.outbox().await })
    }

    fn keys(&self) -> Result<Vec<(String, bool)>, DurableError> {
        let inner = self.inner();
        self.block(async move { inner.keys().await })
    }

    fn discard(&self, entries: &[(String, String, u64)]) -> Result<(), DurableError> {
        if entries.is_empty() {
            return Ok(());
        }
        let inner = self.inner();
        let entries = entries.to_vec();
        self.block(async move { inner.discard(&entries).await })
    }

    fn size(&self) -> Result<u64, DurableError> {
        let inner = self.inner();
        self.block(async move {
            let info = inner
                .stream
                .get_info()
                .await
                .map_err(|e| store_error("reading the journal stream's size", e))?;
            Ok(info.state.bytes)
        })
    }
}

impl Drop for JetStreamStore {
    fn drop(&mut self) {
        if let Some(inner) = self.inner.take() {
            inner.renewing.store(false, Ordering::Release);
            let (done, finished) = std::sync::mpsc::channel();
            self.handle.spawn(async move {
                let _ = tokio::time::timeout(Duration::from_secs(2), inner.release()).await;
                let _ = done.send(());
            });
            let _ = finished.recv_timeout(Duration::from_secs(3));
        }
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
