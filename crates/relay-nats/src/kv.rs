//! The bucket the cluster names live in: who holds a name (the value of
//! its key), and the reads and conditional deletes every node makes. It
//! knows nothing of transports or engines; `names.rs` and the transport's
//! thread use it.

use async_nats::jetstream::kv::{self, Operation, Store};
use futures_util::StreamExt;
use sched::Pid;

use crate::error::ClusterNameError;

/// A name this node holds: its holder, and the revision it last wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Held {
    pub(crate) holder: Holder,
    pub(crate) revision: u64,
}

/// Who holds a name: a PID and the incarnation of its node's run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Holder {
    pub(crate) pid: Pid,
    pub(crate) incarnation: u64,
}

impl Holder {
    /// `<node>.<id>@<incarnation in hex>`: readable with `nats kv get`.
    pub(crate) fn encode(self) -> Vec<u8> {
        format!(
            "{}.{}@{:x}",
            self.pid.node(),
            self.pid.id(),
            self.incarnation
        )
        .into_bytes()
    }

    fn decode(bytes: &[u8]) -> Option<Holder> {
        let text = std::str::from_utf8(bytes).ok()?;
        let (pid, incarnation) = text.split_once('@')?;
        let (node, id) = pid.split_once('.')?;
        Some(Holder {
            pid: Pid::new(node.parse().ok()?, id.parse().ok()?),
            incarnation: u64::from_str_radix(incarnation, 16).ok()?,
        })
    }
}

pub(crate) fn check(name: &str) -> Result<(), ClusterNameError> {
    let valid = !name.is_empty()
        && name.len() <= 255
        && !name.starts_with('.')
        && !name.ends_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_=/.".contains(&b));
    if valid {
        Ok(())
    } else {
        Err(ClusterNameError::InvalidName(name.to_owned()))
    }
}

pub(crate) fn unavailable(error: impl std::fmt::Display) -> ClusterNameError {
    ClusterNameError::Unavailable(error.to_string())
}

/// Opens (or makes, with `lease` as the age at which an entry lapses) the
/// bucket.
pub(crate) async fn open(
    client: &async_nats::Client,
    bucket: &str,
    lease: std::time::Duration,
) -> Result<Store, String> {
    let jetstream = async_nats::jetstream::new(client.clone());
    if let Ok(store) = jetstream.get_key_value(bucket).await {
        return Ok(store);
    }
    jetstream
        .create_key_value(kv::Config {
            bucket: bucket.to_owned(),
            history: 1,
            max_age: lease,
            description: "sched: process names across the cluster".to_owned(),
            ..Default::default()
        })
        .await
        .map_err(|e| format!("cannot open the key-value bucket {bucket:?}: {e}"))
}

/// What renewing a name found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Renewal {
    /// Renewed: the new revision.
    Renewed(u64),
    /// Someone else wrote or deleted the name since (or it lapsed): this
    /// node no longer holds it.
    Lost,
    /// The bucket did not answer: try again at the next renewal.
    Unknown,
}

/// Writes `held` again, if the name is still at the revision this node
/// last wrote (the revision is the fence: a later holder's write, or the
/// name's lapse, makes it fail).
pub(crate) async fn renew(store: &Store, key: &str, held: Held) -> Renewal {
    match store
        .update(key, held.holder.encode().into(), held.revision)
        .await
    {
        Ok(revision) => Renewal::Renewed(revision),
        Err(e) if e.kind() == kv::UpdateErrorKind::WrongLastRevision => Renewal::Lost,
        Err(_) => Renewal::Unknown,
    }
}

/// The current holder of `key` and the revision it was read at.
pub(crate) async fn holder(
    store: &Store,
    key: &str,
) -> Result<Option<(Holder, u64)>, ClusterNameError> {
    let entry = store.entry(key).await.map_err(unavailable)?;
    Ok(entry
        .filter(|e| e.operation == Operation::Put)
        .and_then(|e| Holder::decode(&e.value).map(|h| (h, e.revision))))
}

/// Deletes `key` if `gone` says its holder is gone, naming the revision
/// read so that a newer registration is kept.
pub(crate) async fn delete_if(store: &Store, key: &str, gone: impl Fn(Holder) -> bool) -> bool {
    match holder(store, key).await {
        Ok(Some((holder, revision))) if gone(holder) => store
            .delete_expect_revision(key, Some(revision))
            .await
            .is_ok(),
        _ => false,
    }
}

/// Deletes every name whose holder `gone` picks; returns how many.
pub(crate) async fn sweep(store: &Store, gone: impl Fn(Holder) -> bool) -> usize {
    let Ok(mut keys) = store.keys().await else {
        return 0;
    };
    let mut deleted = 0;
    while let Some(key) = keys.next().await {
        if let Ok(key) = key {
            if delete_if(store, &key, &gone).await {
                deleted += 1;
            }
        }
    }
    deleted
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holders_round_trip_and_junk_is_none() {
        let holder = Holder {
            pid: Pid::new(3, 99),
            incarnation: 0xABCD_EF01_2345_6789,
        };
        assert_eq!(Holder::decode(&holder.encode()), Some(holder));
        assert_eq!(
            String::from_utf8(holder.encode()).unwrap(),
            "3.99@abcdef0123456789"
        );
        for junk in [&b"3.99"[..], b"x.1@1", b"3.99@zz", b"", b"\xff"] {
            assert_eq!(Holder::decode(junk), None);
        }
    }

    #[test]
    fn names_are_what_a_bucket_key_may_be() {
        for good in ["db", "a.b", "jobs/queue-1", "A_Z=09"] {
            assert_eq!(check(good), Ok(()));
        }
        for bad in ["", ".db", "db.", "has space", "ünï", &"x".repeat(256)] {
            assert!(matches!(check(bad), Err(ClusterNameError::InvalidName(_))));
        }
    }
}
