//! A node's lease in the key-value bucket: whose lease is alive, renewing
//! this incarnation's, releasing it.

use std::sync::atomic::Ordering;

use async_nats::jetstream::kv::{self, CreateErrorKind, UpdateErrorKind};
use sched_durable::DurableError;

use crate::error::store_error;
use crate::incarnation::Inner;

impl Inner {
    /// The incarnation whose lease on `node` is alive, if any.
    pub(crate) async fn lease_of(&self, node: u32) -> Result<Option<u64>, DurableError> {
        let entry = self
            .leases
            .entry(Inner::lease_key(node))
            .await
            .map_err(|e| store_error("reading a lease", e))?;
        Ok(entry
            .filter(|e| e.operation == kv::Operation::Put)
            .and_then(|e| std::str::from_utf8(&e.value).ok().map(str::to_owned))
            .and_then(|text| u64::from_str_radix(&text, 16).ok()))
    }

    /// Renews this incarnation's lease: the revision it last wrote, or, if
    /// it lapsed, made again (unless another incarnation of this node
    /// holds it: then it stops). Returns whether to go on.
    pub(crate) async fn renew(&self) -> bool {
        let key = Inner::lease_key(self.me.node);
        let value = format!("{:x}", self.me.incarnation);
        let revision = self.lease_revision.load(Ordering::Acquire);
        match self
            .leases
            .update(&key, value.clone().into(), revision)
            .await
        {
            Ok(revision) => {
                self.lease_revision.store(revision, Ordering::Release);
                true
            }
            Err(e) if e.kind() == UpdateErrorKind::WrongLastRevision => {
                match self.leases.create(&key, value.into()).await {
                    Ok(revision) => {
                        tracing::warn!(
                            writer = %self.me,
                            "this node's journal lease had lapsed, and is renewed: journals taken over meanwhile are fenced"
                        );
                        self.lease_revision.store(revision, Ordering::Release);
                        true
                    }
                    Err(e) if e.kind() == CreateErrorKind::AlreadyExists => {
                        tracing::error!(
                            writer = %self.me,
                            "another incarnation of this node holds its journal lease: this one stops renewing, its journals will be taken over"
                        );
                        false
                    }
                    Err(e) => {
                        tracing::warn!(writer = %self.me, "the journal lease was not renewed: {e}");
                        true
                    }
                }
            }
            Err(e) => {
                tracing::warn!(writer = %self.me, "the journal lease was not renewed: {e}");
                true
            }
        }
    }

    /// Deletes this incarnation's lease, if it is still the one written.
    pub(crate) async fn release(&self) {
        let revision = self.lease_revision.load(Ordering::Acquire);
        let key = Inner::lease_key(self.me.node);
        match self
            .leases
            .delete_expect_revision(&key, Some(revision))
            .await
        {
            Ok(()) => tracing::debug!(writer = %self.me, "released the journal lease"),
            Err(e) => tracing::debug!(writer = %self.me, "the journal lease was not released: {e}"),
        }
    }
}
