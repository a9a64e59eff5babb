//! Names that hold across the cluster: a process registered under a name
//! on one node is found by it from every node.
//!
//! The names live in a NATS JetStream key-value bucket (one key per name,
//! its value the holder's PID and the incarnation of its node's run), so
//! they survive any one node and need no store of ours. Registration is
//! the bucket's atomic create: of two nodes registering one name at once,
//! exactly one wins and the other gets [`ClusterNameError::Taken`].
//!
//! Every name has a **lease**
//! ([`NatsConfig::name_lease`](crate::NatsConfig::name_lease), 6 s by
//! default): its node writes it again every third of the lease, each
//! write naming the revision it last wrote, and the bucket drops an entry
//! not written for a whole lease. So a name is released when:
//! - its process ends: a small keeper process on the holder's node
//!   monitors every process it registered, and deletes the name when the
//!   process's down arrives;
//! - its node's run is known to be over: every node's transport, when it
//!   hears the node say goodbye or sees it restarted, deletes the names
//!   held by the old run (each delete names the revision it read, so a
//!   name registered again meanwhile is kept);
//! - its node's transport closes: it deletes its own names first;
//! - its node stops renewing (killed, hung, cut off from the server): the
//!   lease lapses, whether or not any other node is alive to notice.
//!
//! A node only declared *down* by another's failure detector keeps its
//! names: the silence may be a false alarm. Another node's
//! [`register`](ClusterNames::register) takes a name over only from a run
//! known to be over, and only through the revision it read, so a false
//! alarm never makes two holders. A holder whose renewal finds the name
//! rewritten or lapsed (it was cut off for longer than the lease, and
//! someone took the name) has lost it: it stops renewing it, logs it, and
//! counts it in
//! [`TransportStats::names_lost`](crate::TransportStats::names_lost).
//!
//! A name whose node is down is not reported by
//! [`whereis`](ClusterNames::whereis) meanwhile.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::kv::{CreateErrorKind, Store};
use sched::actor::MonitorId;
use sched::prelude::*;

use crate::error::ClusterNameError;
use crate::kv::{check, delete_if, holder, unavailable, Holder};
use crate::leases::{forget_held, hold};
use crate::shared::Inner;
use crate::transport::NatsTransport;

/// How long a call waits for the bucket to answer.
const TIMEOUT: Duration = Duration::from_secs(5);

/// An operation on the bucket, run on the transport's thread.
type NamesOp<T> = Box<
    dyn FnOnce(
            Store,
            Arc<Inner>,
        ) -> Pin<Box<dyn Future<Output = Result<T, ClusterNameError>> + Send>>
        + Send,
>;

impl NatsTransport {
    /// Starts `op` against the bucket on the transport's thread, with the
    /// calls' time limit; `answer` gets its result.
    fn start_names_op<T: Send + 'static>(
        &self,
        op: NamesOp<T>,
        answer: impl FnOnce(Result<T, ClusterNameError>) + Send + 'static,
    ) -> Result<(), ClusterNameError> {
        let inner = self.inner();
        let store = inner
            .names
            .get()
            .cloned()
            .ok_or(ClusterNameError::NotEnabled)?;
        let work = op(store, Arc::clone(inner));
        let task: Pin<Box<dyn Future<Output = ()> + Send>> = Box::pin(async move {
            let outcome = match tokio::time::timeout(TIMEOUT, work).await {
                Ok(outcome) => outcome,
                Err(_) => Err(ClusterNameError::Unavailable("timed out".into())),
            };
            answer(outcome);
        });
        self.spawn_task(task)
            .map_err(|_| ClusterNameError::Unavailable("the transport is closed".into()))
    }

    /// Runs `op` against the bucket and blocks this thread for its result.
    fn with_names<T: Send + 'static>(&self, op: NamesOp<T>) -> Result<T, ClusterNameError> {
        let (done, result) = std::sync::mpsc::channel();
        self.start_names_op(op, move |outcome| {
            let _ = done.send(outcome);
        })?;
        result
            .recv_timeout(TIMEOUT + Duration::from_secs(1))
            .map_err(|_| ClusterNameError::Unavailable("timed out".into()))?
    }

    /// Runs `op` against the bucket; the future, which needs no runtime
    /// of its own, resolves to its result.
    async fn with_names_async<T: Send + 'static>(
        &self,
        op: NamesOp<T>,
    ) -> Result<T, ClusterNameError> {
        let (done, result) = tokio::sync::oneshot::channel();
        self.start_names_op(op, move |outcome| {
            let _ = done.send(outcome);
        })?;
        // The task always answers (its own time limit ends it); a dropped
        // sender means the transport's thread ended first.
        result
            .await
            .map_err(|_| ClusterNameError::Unavailable("the transport is closed".into()))?
    }

    /// Deletes `name` in the background if `holder` still holds it.
    pub(crate) fn release(&self, name: String, holder: Pid) {
        let inner = self.inner();
        let Some(store) = inner.names.get().cloned() else {
            return;
        };
        let inner = Arc::clone(inner);
        let task: Pin<Box<dyn Future<Output = ()> + Send>> = Box::pin(async move {
            forget_held(&inner, &name, holder);
            if delete_if(&store, &name, |h| h.pid == holder).await {
                tracing::debug!(%name, %holder, "released a cluster name");
            }
        });
        let _ = self.spawn_task(task);
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
                Event::Cancel => out.finish(()),
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
/// The plain calls block until the bucket answers (a round trip to the
/// server, at most five seconds): call them from outside the engine, or
/// from a command handler, not from a step. Async code has the `_async`
/// calls, whose futures run on any executor.
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
        context: &impl sched::engine::AsContext,
        transport: Arc<NatsTransport>,
    ) -> Result<ClusterNames, ClusterNameError> {
        let context = context.context();
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
    /// to be gone is taken over. Blocks until the bucket answers; async
    /// code has [`register_async`](ClusterNames::register_async).
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
        self.check_local(name, pid)?;
        self.transport
            .with_names(register_op(name.to_owned(), pid))?;
        self.keep(name, pid)
    }

    /// [`register`](ClusterNames::register) without blocking: the future
    /// runs on any executor (the bucket is reached through the transport's
    /// own thread).
    ///
    /// # Errors
    ///
    /// As for [`register`](ClusterNames::register).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn f(names: &relay_nats::ClusterNames, db: sched::Pid) -> Result<(), relay_nats::ClusterNameError> {
    /// names.register_async("db", db).await?;
    /// assert_eq!(names.whereis_async("db").await?, Some(db));
    /// # Ok(()) }
    /// ```
    pub async fn register_async(&self, name: &str, pid: Pid) -> Result<(), ClusterNameError> {
        self.check_local(name, pid)?;
        self.transport
            .with_names_async(register_op(name.to_owned(), pid))
            .await?;
        self.keep(name, pid)
    }

    /// The process registered under `name`, on any node; `None` if there
    /// is none, or its node is known to be lost. Blocks until the bucket
    /// answers; async code has [`whereis_async`](ClusterNames::whereis_async).
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
        self.transport.with_names(whereis_op(name.to_owned()))
    }

    /// [`whereis`](ClusterNames::whereis) without blocking.
    ///
    /// # Errors
    ///
    /// As for [`whereis`](ClusterNames::whereis).
    ///
    /// # Examples
    ///
    /// See [`register_async`](ClusterNames::register_async).
    pub async fn whereis_async(&self, name: &str) -> Result<Option<Pid>, ClusterNameError> {
        check(name)?;
        self.transport
            .with_names_async(whereis_op(name.to_owned()))
            .await
    }

    /// Releases `name` if `pid` holds it; whether it did. Blocks until the
    /// bucket answers; async code has
    /// [`unregister_async`](ClusterNames::unregister_async).
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
        let released = self
            .transport
            .with_names(unregister_op(name.to_owned(), pid))?;
        self.forget(name, released);
        Ok(released)
    }

    /// [`unregister`](ClusterNames::unregister) without blocking.
    ///
    /// # Errors
    ///
    /// As for [`unregister`](ClusterNames::unregister).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn f(names: &relay_nats::ClusterNames, db: sched::Pid) -> Result<(), relay_nats::ClusterNameError> {
    /// assert!(names.unregister_async("db", db).await?);
    /// # Ok(()) }
    /// ```
    pub async fn unregister_async(&self, name: &str, pid: Pid) -> Result<bool, ClusterNameError> {
        check(name)?;
        let released = self
            .transport
            .with_names_async(unregister_op(name.to_owned(), pid))
            .await?;
        self.forget(name, released);
        Ok(released)
    }

    /// A valid name, for a process of this node.
    fn check_local(&self, name: &str, pid: Pid) -> Result<(), ClusterNameError> {
        check(name)?;
        if Some(pid.node()) != self.transport.node() {
            return Err(ClusterNameError::NotLocal(pid));
        }
        Ok(())
    }

    /// Has the keeper release `name` when `pid` ends (at once if it has
    /// already ended).
    fn keep(&self, name: &str, pid: Pid) -> Result<(), ClusterNameError> {
        let watch = Keep::Watch(name.to_owned(), pid);
        if self.transport_post(watch).is_err() {
            self.transport.release(name.to_owned(), pid);
            return Err(ClusterNameError::Unavailable("the keeper has ended".into()));
        }
        Ok(())
    }

    /// Stops the keeper watching for `name` once it was released.
    fn forget(&self, name: &str, released: bool) {
        if released {
            let _ = self.transport_post(Keep::Forget(name.to_owned()));
        }
    }

    fn transport_post(&self, keep: Keep) -> Result<(), ()> {
        self.transport.post_local(self.keeper, keep)
    }
}

/// Creates `key` for `pid`; takes it over from a holder known gone.
fn register_op(key: String, pid: Pid) -> NamesOp<()> {
    Box::new(move |store, inner| {
        Box::pin(async move {
            let mine = Holder {
                pid,
                incarnation: inner.incarnation,
            };
            // Twice at most: a holder found gone is deleted, then the
            // name is created again (or someone else won it).
            for _ in 0..2 {
                match store.create(&key, mine.encode().into()).await {
                    Ok(revision) => {
                        hold(&inner, &key, mine, revision);
                        return Ok(());
                    }
                    Err(e) if e.kind() == CreateErrorKind::AlreadyExists => {}
                    Err(e) => return Err(unavailable(e)),
                }
                match holder(&store, &key).await? {
                    Some((held, revision)) if held == mine => {
                        hold(&inner, &key, mine, revision);
                        return Ok(());
                    }
                    // Only a run known to be over: a node merely silent may
                    // still hold it (its lease will tell).
                    Some((held, revision)) if inner.holder_dead(held) => {
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
                Some((held, revision)) if held == mine => {
                    hold(&inner, &key, mine, revision);
                    Ok(())
                }
                Some((held, _)) => Err(ClusterNameError::Taken {
                    name: key,
                    by: held.pid,
                }),
                None => Err(ClusterNameError::Unavailable(
                    "the name kept changing".into(),
                )),
            }
        })
    })
}

/// The live holder of `key`.
fn whereis_op(key: String) -> NamesOp<Option<Pid>> {
    Box::new(move |store, inner| {
        Box::pin(async move {
            Ok(holder(&store, &key)
                .await?
                .filter(|(h, _)| !inner.holder_gone(*h))
                .map(|(h, _)| h.pid))
        })
    })
}

/// Deletes `key` if `pid` holds it.
fn unregister_op(key: String, pid: Pid) -> NamesOp<bool> {
    Box::new(move |store, inner| {
        Box::pin(async move {
            forget_held(&inner, &key, pid);
            Ok(delete_if(&store, &key, |h| h.pid == pid).await)
        })
    })
}
