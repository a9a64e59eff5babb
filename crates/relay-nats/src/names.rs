//! Names that hold across the cluster: a process registered under a name
//! on one node is found by it from every node.
//!
//! The names live in a NATS JetStream key-value bucket (one key per name,
//! its value the holder's PID and the incarnation of its node's run), so
//! they survive any one node and need no store of ours. Registration is
//! the bucket's atomic create: of two nodes registering one name at once,
//! exactly one wins and the other gets [`ClusterNameError::Taken`].
//!
//! A name is released when:
//! - its process ends: a small keeper process on the holder's node
//!   monitors every process it registered, and deletes the name when the
//!   process's down arrives;
//! - its node is lost: every node's transport, when its failure detector
//!   declares a node down, hears that it left, or sees it restarted,
//!   deletes the names held by that run of the node (each delete names
//!   the revision it read, so a name registered again meanwhile is kept);
//! - its node's transport closes: it deletes its own names first.
//!
//! A name whose node is known to be down is not reported by
//! [`whereis`](ClusterNames::whereis) even before it is deleted, and may
//! be taken over by [`register`](ClusterNames::register).

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::kv::{self, CreateErrorKind, Operation, Store};
use futures_util::StreamExt;
use sched::actor::MonitorId;
use sched::prelude::*;

use crate::io::Command;
use crate::transport::{Inner, NatsTransport};

/// How long a call waits for the bucket to answer.
const TIMEOUT: Duration = Duration::from_secs(5);

/// Why a cluster name operation failed.
///
/// # Examples
///
/// ```
/// use relay_nats::ClusterNameError;
/// use sched::Pid;
/// let e = ClusterNameError::Taken { name: "db".into(), by: Pid::new(2, 7) };
/// assert_eq!(e.to_string(), "the name \"db\" is taken by <2.7>");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClusterNameError {
    /// A live process holds the name.
    Taken {
        /// The name.
        name: String,
        /// Its holder.
        by: Pid,
    },
    /// A name is 1 to 255 characters of `A-Z a-z 0-9 - _ = / .`, not
    /// starting or ending with `.` (what a bucket key may be).
    InvalidName(String),
    /// Names are registered by the node of their process: this PID is
    /// another node's.
    NotLocal(Pid),
    /// The transport was built without
    /// [`NatsConfig::cluster_names`](crate::NatsConfig::cluster_names),
    /// or could not open the bucket (JetStream is off on the server).
    NotEnabled,
    /// The bucket did not answer in time, or refused.
    Unavailable(String),
}

impl fmt::Display for ClusterNameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClusterNameError::Taken { name, by } => write!(f, "the name {name:?} is taken by {by}"),
            ClusterNameError::InvalidName(name) => write!(f, "{name:?} cannot be a cluster name"),
            ClusterNameError::NotLocal(pid) => {
                write!(f, "{pid} is another node's process: register it there")
            }
            ClusterNameError::NotEnabled => {
                f.write_str("cluster names are not enabled on this transport")
            }
            ClusterNameError::Unavailable(why) => {
                write!(f, "the cluster names are unavailable: {why}")
            }
        }
    }
}

impl std::error::Error for ClusterNameError {}

/// Who holds a name: a PID and the incarnation of its node's run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Holder {
    pub(crate) pid: Pid,
    pub(crate) incarnation: u64,
}

impl Holder {
    /// `<node>.<id>@<incarnation in hex>`: readable with `nats kv get`.
    fn encode(self) -> Vec<u8> {
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

fn check(name: &str) -> Result<(), ClusterNameError> {
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

fn unavailable(error: impl fmt::Display) -> ClusterNameError {
    ClusterNameError::Unavailable(error.to_string())
}

/// Opens (or makes) the bucket.
pub(crate) async fn open(client: &async_nats::Client, bucket: &str) -> Result<Store, String> {
    let jetstream = async_nats::jetstream::new(client.clone());
    if let Ok(store) = jetstream.get_key_value(bucket).await {
        return Ok(store);
    }
    jetstream
        .create_key_value(kv::Config {
            bucket: bucket.to_owned(),
            history: 1,
            description: "sched: process names across the cluster".to_owned(),
            ..Default::default()
        })
        .await
        .map_err(|e| format!("cannot open the key-value bucket {bucket:?}: {e}"))
}

/// The current holder of `key` and the revision it was read at.
async fn holder(store: &Store, key: &str) -> Result<Option<(Holder, u64)>, ClusterNameError> {
    let entry = store.entry(key).await.map_err(unavailable)?;
    Ok(entry
        .filter(|e| e.operation == Operation::Put)
        .and_then(|e| Holder::decode(&e.value).map(|h| (h, e.revision))))
}

/// Deletes `key` if `gone` says its holder is gone, naming the revision
/// read so that a newer registration is kept.
async fn delete_if(store: &Store, key: &str, gone: impl Fn(Holder) -> bool) -> bool {
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

impl Inner {
    /// Whether `holder`'s run of its node is known to be gone: the node
    /// is down or left, or has restarted since.
    pub(crate) fn holder_gone(&self, holder: Holder) -> bool {
        let node = holder.pid.node();
        if node == self.engine.get().map_or(0, |a| a.0) {
            return holder.incarnation != self.incarnation;
        }
        self.members.unreachable(node).is_some() || self.members.is_stale(node, holder.incarnation)
    }

    /// Deletes, in the background, the names held by the lost `node`.
    pub(crate) fn sweep_lost(self: &Arc<Inner>, node: u32) {
        let Some(store) = self.names.get().cloned() else {
            return;
        };
        let inner = Arc::clone(self);
        tokio::spawn(async move {
            let deleted = sweep(&store, |h| h.pid.node() == node && inner.holder_gone(h)).await;
            if deleted > 0 {
                tracing::info!(node, deleted, "released the names of a lost node");
            }
        });
    }
}

impl NatsTransport {
    /// Runs `op` against the bucket on the transport's thread and waits
    /// for its result.
    fn with_names<T: Send + 'static>(
        &self,
        op: impl FnOnce(
            Store,
            Arc<Inner>,
        ) -> Pin<Box<dyn Future<Output = Result<T, ClusterNameError>> + Send>>,
    ) -> Result<T, ClusterNameError> {
        let inner = self.inner();
        let store = inner
            .names
            .get()
            .cloned()
            .ok_or(ClusterNameError::NotEnabled)?;
        let (done, result) = std::sync::mpsc::channel();
        let work = op(store, Arc::clone(inner));
        let task: Pin<Box<dyn Future<Output = ()> + Send>> = Box::pin(async move {
            let outcome = match tokio::time::timeout(TIMEOUT, work).await {
                Ok(outcome) => outcome,
                Err(_) => Err(ClusterNameError::Unavailable("timed out".into())),
            };
            let _ = done.send(outcome);
        });
        self.run(Command::Run(task))
            .map_err(|_| ClusterNameError::Unavailable("the transport is closed".into()))?;
        result
            .recv_timeout(TIMEOUT + Duration::from_secs(1))
            .map_err(|_| ClusterNameError::Unavailable("timed out".into()))?
    }

    /// Deletes `name` in the background if `holder` still holds it.
    pub(crate) fn release(&self, name: String, holder: Pid) {
        let inner = self.inner();
        let Some(store) = inner.names.get().cloned() else {
            return;
        };
        let task: Pin<Box<dyn Future<Output = ()> + Send>> = Box::pin(async move {
            if delete_if(&store, &name, |h| h.pid == holder).await {
                tracing::debug!(%name, %holder, "released a cluster name");
            }
        });
        let _ = self.run(Command::Run(task));
    }
}

/// What the keeper is told.
enum Keep {
    /// Release `name` when `pid` ends.
    Watch(String, Pid),
    /// `name` was unregistered: stop watching for it.
    Forget(String),
}

/// Monitors the processes whose names this node registered, and releases
/// each name when its process ends.
struct Keeper {
    transport: Arc<NatsTransport>,
    watching: HashMap<MonitorId, String>,
}

impl Process for Keeper {
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            match event {
                Event::Message(message) => match message.downcast::<Keep>() {
                    Ok(Keep::Watch(name, pid)) => {
                        let monitor = out.monitor(pid);
                        self.watching.insert(monitor, name);
                    }
                    Ok(Keep::Forget(name)) => {
                        let found = self.watching.iter().find(|(_, n)| **n == name);
                        if let Some((&monitor, _)) = found {
                            self.watching.remove(&monitor);
                            out.demonitor(monitor);
                        }
                    }
                    Err(_) => {}
                },
                Event::Down(down) => {
                    if let Some(name) = self.watching.remove(&down.monitor) {
                        self.transport.release(name, down.pid);
                    }
                }
                Event::Cancel => out.done(Box::new(())),
                _ => {}
            }
        }
        Ok(())
    }
}

/// Names that hold across the cluster (see the module's documentation):
/// register a process of this node under a name, find any node's process
/// by name.
///
/// Every call waits for the bucket's answer (a round trip to the server,
/// at most five seconds): call it from outside the engine, or from a
/// command handler, not from a step.
///
/// # Examples
///
/// ```no_run
/// use relay_nats::{ClusterNames, Codec, NatsConfig, NatsTransport};
/// use sched::prelude::*;
/// use std::sync::Arc;
///
/// struct Db;
/// impl Process for Db {
///     fn step(&mut self, _: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
///         Ok(())
///     }
/// }
///
/// let config = NatsConfig::new("nats://127.0.0.1:4222").cluster_names("names");
/// let transport = Arc::new(NatsTransport::connect(config)?);
/// let node = Scheduler::builder().node(1).remote(transport.clone()).build();
/// node.start();
/// let names = ClusterNames::new(&node, Arc::clone(&transport))?;
/// let db = node.spawn(Db)?.pid();
/// names.register("db", db)?;
/// assert_eq!(names.whereis("db")?, Some(db));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct ClusterNames {
    transport: Arc<NatsTransport>,
    keeper: Pid,
}

impl fmt::Debug for ClusterNames {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClusterNames")
            .field("node", &self.transport.node())
            .field("keeper", &self.keeper)
            .finish()
    }
}

impl ClusterNames {
    /// Cluster names for the processes of `context`'s engine, whose
    /// transport is `transport` (built with
    /// [`NatsConfig::cluster_names`](crate::NatsConfig::cluster_names)).
    /// Starts the keeper process that releases names when their processes
    /// end.
    ///
    /// # Errors
    ///
    /// [`ClusterNameError::NotEnabled`] without a bucket;
    /// [`ClusterNameError::Unavailable`] if the keeper cannot start.
    ///
    /// # Examples
    ///
    /// See [`ClusterNames`].
    pub fn new(
        context: &sched::Context,
        transport: Arc<NatsTransport>,
    ) -> Result<ClusterNames, ClusterNameError> {
        if transport.inner().names.get().is_none() {
            return Err(ClusterNameError::NotEnabled);
        }
        let keeper = Keeper {
            transport: Arc::clone(&transport),
            watching: HashMap::new(),
        };
        let keeper = context.spawn(keeper).map_err(unavailable)?.pid();
        Ok(ClusterNames { transport, keeper })
    }

    /// Registers `pid`, a process of this node, under `name` in the whole
    /// cluster, until the process ends, its node is lost, or
    /// [`unregister`](ClusterNames::unregister). Registering a name the
    /// same process holds succeeds. A name held by a run of a node known
    /// to be gone is taken over.
    ///
    /// # Errors
    ///
    /// [`ClusterNameError::Taken`] with the holder;
    /// [`ClusterNameError::InvalidName`]; [`ClusterNameError::NotLocal`];
    /// [`ClusterNameError::Unavailable`].
    ///
    /// # Examples
    ///
    /// See [`ClusterNames`].
    pub fn register(&self, name: &str, pid: Pid) -> Result<(), ClusterNameError> {
        check(name)?;
        if Some(pid.node()) != self.transport.node() {
            return Err(ClusterNameError::NotLocal(pid));
        }
        let key = name.to_owned();
        self.transport.with_names(move |store, inner| {
            Box::pin(async move {
                let mine = Holder {
                    pid,
                    incarnation: inner.incarnation,
                };
                // Twice at most: a holder found gone is deleted, then the
                // name is created again (or someone else won it).
                for _ in 0..2 {
                    match store.create(&key, mine.encode().into()).await {
                        Ok(_) => return Ok(()),
                        Err(e) if e.kind() == CreateErrorKind::AlreadyExists => {}
                        Err(e) => return Err(unavailable(e)),
                    }
                    match holder(&store, &key).await? {
                        Some((held, _)) if held == mine => return Ok(()),
                        Some((held, revision)) if inner.holder_gone(held) => {
                            let _ = store.delete_expect_revision(&key, Some(revision)).await;
                        }
                        Some((held, _)) => {
                            return Err(ClusterNameError::Taken {
                                name: key,
                                by: held.pid,
                            })
                        }
                        // Deleted between the two calls: try again.
                        None => {}
                    }
                }
                match holder(&store, &key).await? {
                    Some((held, _)) if held == mine => Ok(()),
                    Some((held, _)) => Err(ClusterNameError::Taken {
                        name: key,
                        by: held.pid,
                    }),
                    None => Err(ClusterNameError::Unavailable(
                        "the name kept changing".into(),
                    )),
                }
            })
        })?;
        // The keeper releases the name when the process ends (at once if
        // it has already ended).
        let watch = Keep::Watch(name.to_owned(), pid);
        if self.transport_post(watch).is_err() {
            self.transport.release(name.to_owned(), pid);
            return Err(ClusterNameError::Unavailable("the keeper has ended".into()));
        }
        Ok(())
    }

    /// The process registered under `name`, on any node; `None` if there
    /// is none, or its node is known to be lost.
    ///
    /// # Errors
    ///
    /// [`ClusterNameError::InvalidName`]; [`ClusterNameError::Unavailable`].
    ///
    /// # Examples
    ///
    /// See [`ClusterNames`].
    pub fn whereis(&self, name: &str) -> Result<Option<Pid>, ClusterNameError> {
        check(name)?;
        let key = name.to_owned();
        self.transport.with_names(move |store, inner| {
            Box::pin(async move {
                Ok(holder(&store, &key)
                    .await?
                    .filter(|(h, _)| !inner.holder_gone(*h))
                    .map(|(h, _)| h.pid))
            })
        })
    }

    /// Releases `name` if `pid` holds it; whether it did.
    ///
    /// # Errors
    ///
    /// [`ClusterNameError::InvalidName`]; [`ClusterNameError::Unavailable`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn f(names: &relay_nats::ClusterNames, db: sched::Pid) -> Result<(), relay_nats::ClusterNameError> {
    /// assert!(names.unregister("db", db)?);
    /// assert_eq!(names.whereis("db")?, None);
    /// # Ok(()) }
    /// ```
    pub fn unregister(&self, name: &str, pid: Pid) -> Result<bool, ClusterNameError> {
        check(name)?;
        let key = name.to_owned();
        let released = self.transport.with_names(move |store, _| {
            Box::pin(async move { Ok(delete_if(&store, &key, |h| h.pid == pid).await) })
        })?;
        if released {
            let _ = self.transport_post(Keep::Forget(name.to_owned()));
        }
        Ok(released)
    }

    fn transport_post(&self, keep: Keep) -> Result<(), ()> {
        self.transport.post_local(self.keeper, keep)
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
}
