//! Names that hold across the cluster: a process registered under a name
//! on one node is found by it from every node.
//!
//! The names live in a NATS JetStream stream laid out as a key-value
//! bucket (`kv.rs` has the layout), so they survive any one node and need
//! no store of ours. They are only their owner's to write: a node claims
//! a name under a key that carries its own number, and the server's
//! permissions
//! ([`NatsConfig::permissions`](crate::NatsConfig::permissions)) let node
//! `m`'s credentials publish only keys of node `m`. So no node can
//! overwrite, delete or forge another node's claim, and none can delete
//! or purge the bucket (no node may use those APIs, and the stream denies
//! them).
//!
//! **Who holds a name.** A claim is written with a proof the server
//! checks: that no node holds a lease on the name at that moment. The
//! holder is the latest proven claim, while its node's lease entry names
//! it. Since a proof needs every lease of the name gone, a later proven
//! claim exists only once the earlier holder's lease has lapsed or was
//! withdrawn, and it voids every earlier claim for good. A claim whose
//! PID is not of the node in its key, or that carries no proof, is never
//! an honest node's: readers ignore it and count it in
//! [`TransportStats::names_forged`](crate::TransportStats::names_forged).
//! A registration writes its claim, then its lease, then reads the name
//! again: if a later proven claim came in between (two nodes registering
//! at once), it withdraws its own and reports the name
//! [`Taken`](ClusterNameError::Taken).
//!
//! Every name has a **lease**
//! ([`NatsConfig::name_lease`](crate::NatsConfig::name_lease), 6 s by
//! default, rounded up to whole seconds): its node writes the lease entry
//! again every third of the lease, each write naming the entry it last
//! wrote, and the server drops an entry not written for a whole lease (a
//! per-message time to live). So a name is released when:
//! - its process ends: a small keeper process on the holder's node
//!   monitors every process it registered, and withdraws the name when
//!   the process's down arrives;
//! - its node's transport closes: it withdraws its own names first;
//! - its node restarts: the new run withdraws the old run's names when it
//!   attaches;
//! - its node stops renewing (killed, hung, cut off from the server): the
//!   lease lapses, whether or not any other node is alive to notice.
//!
//! No node withdraws another's names: it cannot. A name whose node is
//! known to be down, or whose run is over, is not reported by
//! [`whereis`](ClusterNames::whereis); [`register`](ClusterNames::register)
//! takes it over once its lease has lapsed. A withdrawn name can be
//! claimed again about a second later (the markers of its withdrawal
//! carry a one-second time to live); `register` waits for that. A holder
//! whose renewal finds its lease entry gone (it was cut off for longer
//! than the lease) has lost the name, whether or not someone claimed it
//! since: it stops renewing it, logs it, and counts it in
//! [`TransportStats::names_lost`](crate::TransportStats::names_lost).

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use sched::actor::MonitorId;
use sched::prelude::*;

use crate::error::ClusterNameError;
use crate::kv::{check, token, unavailable, Bucket, Held, Holder, Reading};
use crate::leases::{forget_held, hold};
use crate::shared::Inner;
use crate::transport::NatsTransport;

/// How long a call waits for the bucket to answer.
const TIMEOUT: Duration = Duration::from_secs(5);

/// An operation on the bucket, run on the transport's thread.
type NamesOp<T> = Box<
    dyn FnOnce(
            Bucket,
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
        let bucket = inner
            .names
            .get()
            .cloned()
            .ok_or(ClusterNameError::NotEnabled)?;
        let work = op(bucket, Arc::clone(inner));
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

    /// Withdraws this node's claim of `name` in the background if it is
    /// `holder`'s.
    pub(crate) fn release(&self, name: String, holder: Pid) {
        let inner = self.inner();
        let Some(bucket) = inner.names.get().cloned() else {
            return;
        };
        let inner = Arc::clone(inner);
        let task: Pin<Box<dyn Future<Output = ()> + Send>> = Box::pin(async move {
            if let Ok(true) = withdraw_if(&bucket, &inner, &name, holder).await {
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
    type Done = Payload;
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
///     type Done = ();
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

    /// Makes the names bucket of `config`
    /// ([`NatsConfig::cluster_names`](crate::NatsConfig::cluster_names)),
    /// connecting with `config`'s options: an administrator's one-time
    /// setup, with credentials allowed
    /// [`NatsConfig::admin_permissions`](crate::NatsConfig::admin_permissions)
    /// (nodes run with [`NatsConfig::permissions`](crate::NatsConfig::permissions),
    /// which cannot make, change or delete the bucket). `Ok` if the bucket
    /// exists already, laid out as this version needs. Blocks until the
    /// server answers (ten seconds at most).
    ///
    /// # Errors
    ///
    /// [`ClusterNameError::NotEnabled`] if `config` names no bucket;
    /// [`ClusterNameError::Unavailable`] if the server cannot be reached
    /// or refuses (no JetStream, a server older than 2.11, credentials
    /// without the permissions, or a bucket of an older version under
    /// that name: delete its stream `KV_<bucket>` first).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use relay_nats::{async_nats::ConnectOptions, ClusterNames, NatsConfig};
    ///
    /// let admin = NatsConfig::new("nats://127.0.0.1:4222")
    ///     .cluster_names("names")
    ///     .options(ConnectOptions::with_user_and_password("admin".into(), "secret".into()));
    /// ClusterNames::create_bucket(admin)?;
    /// # Ok::<(), relay_nats::ClusterNameError>(())
    /// ```
    pub fn create_bucket(config: crate::NatsConfig) -> Result<(), ClusterNameError> {
        let bucket = config
            .names_bucket
            .clone()
            .ok_or(ClusterNameError::NotEnabled)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(unavailable)?;
        runtime.block_on(async move {
            let made = async {
                let client = async_nats::connect_with_options(config.url.as_str(), config.options)
                    .await
                    .map_err(|e| e.to_string())?;
                crate::kv::create(&client, &bucket).await?;
                client.flush().await.map_err(|e| e.to_string())
            };
            match tokio::time::timeout(2 * TIMEOUT, made).await {
                Ok(Ok(())) => {
                    tracing::info!(%bucket, "the cluster names bucket is ready");
                    Ok(())
                }
                Ok(Err(e)) => Err(ClusterNameError::Unavailable(e)),
                Err(_) => Err(ClusterNameError::Unavailable("timed out".into())),
            }
        })
    }

    /// Registers `pid`, a process of this node, under `name` in the whole
    /// cluster, until the process ends, its node is lost, or
    /// [`unregister`](ClusterNames::unregister). Registering a name the
    /// same process holds succeeds. A name whose holder's lease has lapsed
    /// is taken over; one just withdrawn is claimed once its markers have
    /// expired (about a second: the call waits, within its time limit).
    /// Blocks until the bucket answers; async
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
    /// Registers `pid` under `name` in the background: `answer` gets the
    /// outcome, as [`register`](ClusterNames::register) would return it,
    /// on the transport's thread. For code that must not block (keyed
    /// processes' shard hosts claim shards from their steps).
    ///
    /// # Errors
    ///
    /// As for `register`, when the call cannot even start (then `answer`
    /// is dropped unanswered).
    pub(crate) fn register_then(
        &self,
        name: String,
        pid: Pid,
        answer: impl FnOnce(Result<(), ClusterNameError>) + Send + 'static,
    ) -> Result<(), ClusterNameError> {
        self.check_local(&name, pid)?;
        let transport = Arc::clone(&self.transport);
        let keeper = self.keeper;
        let kept = name.clone();
        self.transport
            .start_names_op(register_op(name, pid), move |outcome| {
                let outcome = outcome.and_then(|()| {
                    let watch = Keep::Watch(kept.clone(), pid);
                    transport.post_local(keeper, watch).map_err(|()| {
                        transport.release(kept, pid);
                        ClusterNameError::Unavailable("the keeper has ended".into())
                    })
                });
                answer(outcome);
            })
    }

    /// [`whereis`](ClusterNames::whereis) in the background: `answer` gets
    /// the outcome on the transport's thread.
    ///
    /// # Errors
    ///
    /// As for `whereis`, when the call cannot even start.
    pub(crate) fn whereis_then(
        &self,
        name: String,
        answer: impl FnOnce(Result<Option<Pid>, ClusterNameError>) + Send + 'static,
    ) -> Result<(), ClusterNameError> {
        check(&name)?;
        self.transport.start_names_op(whereis_op(name), answer)
    }

    /// [`unregister`](ClusterNames::unregister) in the background:
    /// `answer` gets the outcome on the transport's thread.
    ///
    /// # Errors
    ///
    /// As for `unregister`, when the call cannot even start.
    pub(crate) fn unregister_then(
        &self,
        name: String,
        pid: Pid,
        answer: impl FnOnce(Result<bool, ClusterNameError>) + Send + 'static,
    ) -> Result<(), ClusterNameError> {
        check(&name)?;
        let transport = Arc::clone(&self.transport);
        let keeper = self.keeper;
        let kept = name.clone();
        self.transport
            .start_names_op(unregister_op(name, pid), move |outcome| {
                if let Ok(true) = outcome {
                    let _ = transport.post_local(keeper, Keep::Forget(kept));
                }
                answer(outcome);
            })
    }

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

/// How long a registration waits between reads while the name is
/// blocked by entries that have not yet expired (a withdrawal's markers, a
/// lapsing lease).
const RETRY: Duration = Duration::from_millis(200);

/// Reads `name`, counting the forged claims met.
async fn read(bucket: &Bucket, inner: &Inner, name: &str) -> Result<Reading, ClusterNameError> {
    let reading = bucket.read(&token(name)).await?;
    if reading.forged > 0 {
        crate::stats::Counters::add(&inner.counters.names_forged, reading.forged);
        tracing::warn!(
            %name,
            forged = reading.forged,
            "ignored claims of a cluster name that no honest node writes (another node's PID, or no proof)"
        );
    }
    Ok(reading)
}

/// Withdraws this node's claim of `name` if it is `pid`'s; whether `pid`
/// held the name.
async fn withdraw_if(
    bucket: &Bucket,
    inner: &Inner,
    name: &str,
    pid: Pid,
) -> Result<bool, ClusterNameError> {
    forget_held(inner, name, pid);
    let reading = read(bucket, inner, name).await?;
    let held = reading.holder().is_some_and(|c| c.holder.pid == pid);
    let mine = reading
        .claims
        .get(&pid.node())
        .is_some_and(|(h, _)| h.pid == pid);
    if mine {
        bucket.withdraw(&token(name), pid.node()).await?;
    }
    Ok(held)
}

/// Claims `name` for `pid`; takes it over once the holder's lease is gone.
fn register_op(name: String, pid: Pid) -> NamesOp<()> {
    Box::new(move |bucket, inner| {
        Box::pin(async move {
            let mine = Holder {
                pid,
                incarnation: inner.incarnation,
            };
            let key = token(&name);
            let deadline = tokio::time::Instant::now() + TIMEOUT - Duration::from_secs(1);
            loop {
                let reading = read(&bucket, &inner, &name).await?;
                let holder = reading.holder();
                match holder {
                    Some(held) if held.holder == mine => {
                        let (claim, revision) = (held.seq, held.lease.unwrap_or(0));
                        hold(
                            &inner,
                            &name,
                            Held {
                                holder: mine,
                                claim,
                                revision,
                            },
                        );
                        return Ok(());
                    }
                    // A live holder: a node merely silent may still hold
                    // it (its lease will tell), and a run known to be over
                    // keeps it until its lease lapses (nobody else may
                    // withdraw it).
                    Some(held) if !inner.holder_dead(held.holder) => {
                        return Err(ClusterNameError::Taken {
                            name,
                            by: held.holder.pid,
                        })
                    }
                    _ => {}
                }
                if reading.blockers == 0 {
                    if let Some(claim) = bucket.claim(&key, mine).await? {
                        return settle(&bucket, &inner, &name, mine, claim).await;
                    }
                    // A lease came in meanwhile: read again.
                    continue;
                }
                if tokio::time::Instant::now() >= deadline {
                    return Err(match holder {
                        Some(held) => ClusterNameError::Taken {
                            name,
                            by: held.holder.pid,
                        },
                        None => ClusterNameError::Unavailable(
                            "the name's last entries have not expired yet".into(),
                        ),
                    });
                }
                tokio::time::sleep(RETRY).await;
            }
        })
    })
}

/// After this node's claim `claim` of `name` was written: leases it, and
/// holds the name if the claim is still the latest proven one; otherwise
/// withdraws it (another node's claim came in before the lease).
async fn settle(
    bucket: &Bucket,
    inner: &Inner,
    name: &str,
    mine: Holder,
    claim: u64,
) -> Result<(), ClusterNameError> {
    let key = token(name);
    let node = mine.pid.node();
    let revision = match bucket.lease(&key, node, claim, None).await {
        Ok(revision) => revision,
        Err(e) => {
            let _ = bucket.withdraw(&key, node).await;
            return Err(unavailable(e));
        }
    };
    let reading = read(bucket, inner, name).await?;
    match reading.latest {
        Some(latest) if latest.seq == claim => {
            hold(
                inner,
                name,
                Held {
                    holder: mine,
                    claim,
                    revision,
                },
            );
            Ok(())
        }
        other => {
            bucket.withdraw(&key, node).await?;
            Err(match other {
                Some(latest) => ClusterNameError::Taken {
                    name: name.to_owned(),
                    by: latest.holder.pid,
                },
                None => ClusterNameError::Unavailable("the claim was not kept".into()),
            })
        }
    }
}

/// The live holder of `name`.
fn whereis_op(name: String) -> NamesOp<Option<Pid>> {
    Box::new(move |bucket, inner| {
        Box::pin(async move {
            Ok(read(&bucket, &inner, &name)
                .await?
                .holder()
                .filter(|c| !inner.holder_gone(c.holder))
                .map(|c| c.holder.pid))
        })
    })
}

/// Withdraws `name` if `pid` holds it.
fn unregister_op(name: String, pid: Pid) -> NamesOp<bool> {
    Box::new(move |bucket, inner| {
        Box::pin(async move { withdraw_if(&bucket, &inner, &name, pid).await })
    })
}
