//! The bucket the cluster names live in, laid out so that a node's
//! credentials can write only its own entries (`names.rs` says why that
//! makes a name only its owner's). It knows nothing of transports or
//! engines; `names.rs`, `leases.rs` and the transport's thread use it.
//!
//! The bucket is a JetStream stream `KV_<bucket>` on the subjects
//! `$KV.<bucket>.>`, one message kept per subject. A name `n` (encoded
//! into one subject token, [`token`]) has, for every node `m` that claims
//! it, two entries:
//!
//! - its **claim**, `$KV.<bucket>.<token>.n<m>`: the holder
//!   (`<node>.<id>@<incarnation>`), written once per registration, with no
//!   age limit, and **proven**: published with the headers
//!   `Nats-Expected-Last-Subject-Sequence: 0` and
//!   `Nats-Expected-Last-Subject-Sequence-Subject:
//!   $KV.<bucket>.<token>.*.l`, which the server checks (it refuses the
//!   write if any node has a lease entry for the name) and stores with the
//!   message, so every reader sees the check was made;
//! - its **lease**, `$KV.<bucket>.<token>.n<m>.l`: the sequence of the
//!   claim it keeps alive, with a per-message time to live (`Nats-TTL`,
//!   the lease rounded up to whole seconds), written again every third of
//!   the lease, each write naming the sequence of the last.
//!
//! The holder of a name is the **latest proven claim**, if its node's
//! lease entry names it. A proof is made only while no lease entry of the
//! name exists, so it makes every earlier claim void for good: an old
//! claim whose lease comes back (a run cut off past its lease, or an
//! intruder) is not the latest proven one any more.

use std::collections::HashMap;
use std::time::Duration;

use async_nats::jetstream::{self, context::PublishErrorKind, stream};
use async_nats::HeaderMap;
use sched::Pid;

use crate::error::ClusterNameError;

/// A name this node holds: its holder, the sequence of its claim, and the
/// sequence of the lease entry it last wrote (the fence).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Held {
    pub(crate) holder: Holder,
    pub(crate) claim: u64,
    pub(crate) revision: u64,
}

/// Who holds a name: a PID and the incarnation of its node's run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Holder {
    pub(crate) pid: Pid,
    pub(crate) incarnation: u64,
}

impl Holder {
    /// `<node>.<id>@<incarnation in hex>`: readable with `nats stream get`.
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

/// A valid name as one subject token: `=` becomes `=3D` and `.` becomes
/// `=2E` (so `jobs.a` is `jobs=2Ea`); nothing else changes.
pub(crate) fn token(name: &str) -> String {
    name.replace('=', "=3D").replace('.', "=2E")
}

pub(crate) fn unavailable(error: impl std::fmt::Display) -> ClusterNameError {
    ClusterNameError::Unavailable(error.to_string())
}

/// The stream behind bucket `bucket`.
pub(crate) fn stream_name(bucket: &str) -> String {
    format!("KV_{bucket}")
}

/// The stream's configuration: one message per subject, no age limit
/// (claims stay until withdrawn; leases carry their own time to live), no
/// message delete, no purge and no roll-up (a `Nats-Rollup: all` header
/// would otherwise let any writer wipe the stream).
pub(crate) fn stream_config(bucket: &str) -> stream::Config {
    stream::Config {
        name: stream_name(bucket),
        description: Some("sched: process names across the cluster (claims and leases)".into()),
        subjects: vec![format!("$KV.{bucket}.>")],
        max_messages_per_subject: 1,
        discard: stream::DiscardPolicy::Old,
        allow_message_ttl: true,
        deny_delete: true,
        deny_purge: true,
        allow_rollup: false,
        allow_direct: false,
        ..Default::default()
    }
}

/// Whether an existing stream is laid out as this version needs.
fn laid_out(config: &stream::Config) -> bool {
    config.max_messages_per_subject == 1
        && config.allow_message_ttl
        && config.deny_delete
        && config.deny_purge
        && !config.allow_rollup
        && config.max_age.is_zero()
}

/// The bucket of cluster names, opened.
#[derive(Debug, Clone)]
pub(crate) struct Bucket {
    jetstream: jetstream::Context,
    stream: stream::Stream,
    bucket: String,
    /// The lease entries' time to live, in whole seconds.
    ttl: u64,
}

/// Opens the bucket (making it if missing, where the credentials allow).
/// An existing stream laid out otherwise (a bucket of an older version)
/// is refused: the names stay off until an operator replaces it.
pub(crate) async fn open(
    client: &async_nats::Client,
    bucket: &str,
    lease: Duration,
) -> Result<Bucket, String> {
    let jetstream = async_nats::jetstream::new(client.clone());
    let name = stream_name(bucket);
    let stream = match jetstream.get_stream(&name).await {
        Ok(stream) => stream,
        Err(missing) => jetstream
            .create_stream(stream_config(bucket))
            .await
            .map_err(|e| {
                format!(
                    "cannot open the names bucket {bucket:?} ({missing}) nor make it ({e}): \
                 with least-privilege credentials an administrator makes it once, \
                 with ClusterNames::create_bucket"
                )
            })?,
    };
    if !laid_out(&stream.cached_info().config) {
        return Err(format!(
            "the names bucket {bucket:?} was made by an older version (one key per name, \
             which any node could overwrite): delete its stream {name} and make it again \
             with ClusterNames::create_bucket"
        ));
    }
    Ok(Bucket {
        jetstream,
        stream,
        bucket: bucket.to_owned(),
        ttl: lease.as_millis().div_ceil(1000).max(1) as u64,
    })
}

/// Makes the bucket (an administrator's one-time setup): `Ok` if it
/// exists already with this layout.
pub(crate) async fn create(client: &async_nats::Client, bucket: &str) -> Result<(), String> {
    let jetstream = async_nats::jetstream::new(client.clone());
    let stream = jetstream
        .get_or_create_stream(stream_config(bucket))
        .await
        .map_err(|e| format!("cannot make the names bucket {bucket:?}: {e}"))?;
    if laid_out(&stream.cached_info().config) {
        Ok(())
    } else {
        Err(format!(
            "the names bucket {bucket:?} exists with an older layout: delete its stream {} first",
            stream_name(bucket)
        ))
    }
}

const EXPECTED_SEQ: &str = "Nats-Expected-Last-Subject-Sequence";
const EXPECTED_SUBJECT: &str = "Nats-Expected-Last-Subject-Sequence-Subject";
const OPERATION: &str = "KV-Operation";
const TTL: &str = "Nats-TTL";

/// A claim read from the bucket: valid (its PID is of the node in its
/// key) and proven.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Claim {
    pub(crate) holder: Holder,
    pub(crate) seq: u64,
    /// The node's lease entry naming this claim: its sequence.
    pub(crate) lease: Option<u64>,
}

/// What a name's entries say.
#[derive(Debug, Default)]
pub(crate) struct Reading {
    /// The latest proven claim; it holds the name if it has a lease.
    pub(crate) latest: Option<Claim>,
    /// Every node's claim, proven or not, with a PID of its node.
    pub(crate) claims: HashMap<u32, (Holder, u64)>,
    /// Lease entries present (deletion markers too): while any is, no
    /// claim can be proven.
    pub(crate) blockers: usize,
    /// Claims whose PID is not of the node in their key, or that were
    /// written without the proof: never an honest node's. Ignored.
    pub(crate) forged: u64,
}

impl Reading {
    /// The holder, if its claim is the latest proven one and is leased.
    pub(crate) fn holder(&self) -> Option<Claim> {
        self.latest.filter(|c| c.lease.is_some())
    }
}

/// The single value of header `name`, if exactly one.
fn only<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    let mut values = headers.get_all(name);
    let first = values.next()?;
    values.next().is_none().then(|| first.as_str())
}

impl Bucket {
    fn subject(&self, token: &str, node: u32) -> String {
        format!("$KV.{}.{token}.n{node}", self.bucket)
    }

    fn lease_subject(&self, token: &str, node: u32) -> String {
        format!("$KV.{}.{token}.n{node}.l", self.bucket)
    }

    /// The subject a proof is checked on: every node's lease of the name.
    fn leases_of(&self, token: &str) -> String {
        format!("$KV.{}.{token}.*.l", self.bucket)
    }

    /// Every message on `filter`, in stream order (a bounded number: one
    /// per subject, and each node has at most two per name).
    async fn scan(
        &self,
        filter: &str,
    ) -> Result<Vec<async_nats::jetstream::message::StreamMessage>, ClusterNameError> {
        let mut out = Vec::new();
        let mut from = 1;
        loop {
            match self
                .stream
                .get_first_raw_message_by_subject(filter, from)
                .await
            {
                Ok(message) => {
                    from = message.sequence + 1;
                    out.push(message);
                }
                Err(e) if e.kind() == stream::LastRawMessageErrorKind::NoMessageFound => {
                    return Ok(out)
                }
                Err(e) => return Err(unavailable(e)),
            }
        }
    }

    /// Reads name `token`'s entries.
    pub(crate) async fn read(&self, token: &str) -> Result<Reading, ClusterNameError> {
        let prefix = format!("$KV.{}.{token}.n", self.bucket);
        let proof = self.leases_of(token);
        let mut reading = Reading::default();
        let mut leases: HashMap<u32, (u64, u64)> = HashMap::new();
        for message in self.scan(&format!("$KV.{}.{token}.>", self.bucket)).await? {
            let Some(rest) = message.subject.as_str().strip_prefix(&prefix) else {
                continue;
            };
            let deleted = only(&message.headers, OPERATION).is_some();
            let (node, is_lease) = match rest.strip_suffix(".l") {
                Some(node) => (node, true),
                None => (rest, false),
            };
            let Ok(node) = node.parse::<u32>() else {
                continue;
            };
            if is_lease {
                reading.blockers += 1;
                let claim = std::str::from_utf8(&message.payload)
                    .ok()
                    .and_then(|s| s.parse::<u64>().ok());
                if let (false, Some(claim)) = (deleted, claim) {
                    leases.insert(node, (claim, message.sequence));
                }
                continue;
            }
            if deleted {
                continue;
            }
            let holder = Holder::decode(&message.payload).filter(|h| h.pid.node() == node);
            let Some(holder) = holder else {
                reading.forged += 1;
                continue;
            };
            reading.claims.insert(node, (holder, message.sequence));
            let proven = only(&message.headers, EXPECTED_SEQ) == Some("0")
                && only(&message.headers, EXPECTED_SUBJECT) == Some(proof.as_str());
            if !proven {
                reading.forged += 1;
                continue;
            }
            if reading.latest.is_none_or(|c| c.seq < message.sequence) {
                reading.latest = Some(Claim {
                    holder,
                    seq: message.sequence,
                    lease: None,
                });
            }
        }
        if let Some(latest) = &mut reading.latest {
            latest.lease = leases
                .get(&latest.holder.pid.node())
                .filter(|(claim, _)| *claim == latest.seq)
                .map(|(_, seq)| *seq);
        }
        Ok(reading)
    }

    /// Writes `holder`'s proven claim of name `token`: its sequence, or
    /// `None` if a lease entry of the name exists (the server refused).
    pub(crate) async fn claim(
        &self,
        token: &str,
        holder: Holder,
    ) -> Result<Option<u64>, ClusterNameError> {
        let mut headers = HeaderMap::new();
        headers.insert(EXPECTED_SEQ, "0");
        headers.insert(EXPECTED_SUBJECT, self.leases_of(token).as_str());
        let subject = self.subject(token, holder.pid.node());
        match self.publish(subject, headers, holder.encode()).await {
            Ok(seq) => Ok(Some(seq)),
            Err(PublishErrorKind::WrongLastSequence) => Ok(None),
            Err(e) => Err(unavailable(e)),
        }
    }

    /// Writes node `node`'s lease of its claim `claim` of name `token`;
    /// `after`, the sequence of the lease entry it last wrote, if any
    /// (the write fails if the entry is not that one any more).
    pub(crate) async fn lease(
        &self,
        token: &str,
        node: u32,
        claim: u64,
        after: Option<u64>,
    ) -> Result<u64, PublishErrorKind> {
        let mut headers = HeaderMap::new();
        headers.insert(TTL, format!("{}s", self.ttl).as_str());
        if let Some(after) = after {
            headers.insert(EXPECTED_SEQ, after.to_string().as_str());
        }
        let subject = self.lease_subject(token, node);
        self.publish(subject, headers, claim.to_string().into_bytes())
            .await
    }

    /// Withdraws node `node`'s claim of name `token` and its lease: a
    /// deletion marker on each, itself gone after a second.
    pub(crate) async fn withdraw(&self, token: &str, node: u32) -> Result<(), ClusterNameError> {
        for subject in [self.lease_subject(token, node), self.subject(token, node)] {
            let mut headers = HeaderMap::new();
            headers.insert(OPERATION, "DEL");
            headers.insert(TTL, "1s");
            self.publish(subject, headers, Vec::new())
                .await
                .map_err(unavailable)?;
        }
        Ok(())
    }

    async fn publish(
        &self,
        subject: String,
        headers: HeaderMap,
        payload: Vec<u8>,
    ) -> Result<u64, PublishErrorKind> {
        let ack = self
            .jetstream
            .publish_with_headers(subject, headers, payload.into())
            .await
            .map_err(|e| e.kind())?;
        ack.await.map(|ack| ack.sequence).map_err(|e| e.kind())
    }

    /// Withdraws every claim of node `node` whose holder `gone` picks;
    /// returns how many.
    pub(crate) async fn sweep(&self, node: u32, gone: impl Fn(Holder) -> bool) -> usize {
        let filter = format!("$KV.{}.*.n{node}", self.bucket);
        let Ok(messages) = self.scan(&filter).await else {
            return 0;
        };
        let mut withdrawn = 0;
        for message in messages {
            if only(&message.headers, OPERATION).is_some() {
                continue;
            }
            let token = message
                .subject
                .as_str()
                .strip_prefix(&format!("$KV.{}.", self.bucket))
                .and_then(|rest| rest.strip_suffix(&format!(".n{node}")));
            let holder = Holder::decode(&message.payload);
            if let (Some(token), Some(holder)) = (token, holder) {
                if gone(holder) && self.withdraw(token, node).await.is_ok() {
                    withdrawn += 1;
                }
            }
        }
        withdrawn
    }
}

/// What renewing a name found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Renewal {
    /// Renewed: the new lease entry's sequence.
    Renewed(u64),
    /// The lease entry is not the one this node last wrote (it lapsed, or
    /// was withdrawn): this node no longer holds the name.
    Lost,
    /// The bucket did not answer: try again at the next renewal.
    Unknown,
}

/// Writes the lease of `held` again, if its entry is still the one this
/// node last wrote.
pub(crate) async fn renew(bucket: &Bucket, name: &str, held: Held) -> Renewal {
    let node = held.holder.pid.node();
    match bucket
        .lease(&token(name), node, held.claim, Some(held.revision))
        .await
    {
        Ok(revision) => Renewal::Renewed(revision),
        Err(PublishErrorKind::WrongLastSequence) => Renewal::Lost,
        Err(_) => Renewal::Unknown,
    }
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

    #[test]
    fn a_name_is_one_token_and_no_two_names_share_one() {
        assert_eq!(token("jobs/queue-1"), "jobs/queue-1");
        assert_eq!(token("a.b"), "a=2Eb");
        assert_eq!(token("a=2Eb"), "a=3D2Eb");
        let names = ["a.b", "a=2Eb", "a=b", "a=3Db", "a..b", "a=2E=2Eb"];
        let tokens: std::collections::HashSet<String> = names.iter().map(|n| token(n)).collect();
        assert_eq!(tokens.len(), names.len());
        assert!(tokens.iter().all(|t| !t.contains('.')));
    }
}
