//! The handle an application holds: a store, its writer, the registered
//! process types, and the running durable processes.

use std::any::Any;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use dashmap::DashMap;
use parking_lot::RwLock;
use sched::command::{Command, CommandId, Completer, Rejected};
use sched::engine::AsContext;
use sched::prelude::*;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::channel;
use crate::clock::Clock;
use crate::commit::{Latency, Submission, Writer};
use crate::error::{codec, DurableError};
use crate::process::{
    factory, factory_saving, restore, save_serde, Durable, Erased, Factory, Instance, Save,
};
use crate::receipt::Receipt;
use crate::record::{RecordedEffect, RecordedFailure, RecordedInput};
use crate::recovery::{replay, Replayed};
use crate::runner::{Ending, Runner, Shared, Start, Tell, CLAIMED};
use crate::state::{Snapshot, State};
use crate::store::{Created, Journal, Store};

mod query;
mod recover;
mod spawned;

pub use query::DurableStats;
pub use spawned::{AnyKind, Spawned};

/// The command id the journal's writer answers, unless
/// [`Durability::with_command`] chose another.
pub const JOURNAL_COMMAND: CommandId = CommandId(0xD0_7A_B1_E0);

/// A registered durable type.
struct Kind {
    create: Factory,
    /// Registered with snapshots: how to rebuild it from one, how often
    /// to take one, and its typed `Save<D>` (for `spawn`).
    snapshots: Option<(Factory, u64, Box<dyn Any + Send + Sync>)>,
}

/// Durable processes on one store: spawn them, tell them, and after a
/// restart, [`recover`](Durability::recover) them.
///
/// Set-up, in order: open it on a store, [`register`](Durability::register)
/// every durable type, [`install`](Durability::install) its journal on the
/// scheduler's builder, start the scheduler, then `recover` (which resumes
/// what the store holds) before spawning new ones. Drop it after the
/// scheduler's shutdown: its writer writes what is queued, then stops.
///
/// # Examples
///
/// ```
/// use sched_durable::prelude::*;
/// use std::time::Duration;
///
/// #[derive(Default)]
/// struct Tally { total: u64 }
///
/// impl Durable for Tally {
///     const KIND: &'static str = "tally";
///     type Args = ();
///     type Message = u64;
///     type Done = u64;
///     fn create(_: ()) -> Self { Tally::default() }
///     fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
///         for event in events.typed::<Self>() {
///             match event {
///                 Event::Message(0) => out.finish(self.total),
///                 Event::Message(n) => self.total += n,
///                 _ => {}
///             }
///         }
///         Ok(())
///     }
/// }
///
/// let dir = tempfile::tempdir()?;
/// let durability = Durability::open(RedbStore::create(dir.path().join("journal.redb"))?);
/// durability.register::<Tally>();
/// let scheduler = durability.install(Scheduler::builder().workers(2)).build();
/// scheduler.start();
/// durability.recover(&scheduler)?;
///
/// let tally = durability.spawn::<Tally>(&scheduler, "tally-1", ())?;
/// for n in [1, 2, 3] {
///     durability.send::<Tally>(&scheduler, "tally-1", &n)?.wait_timeout(Duration::from_secs(5))?;
/// }
/// durability.send::<Tally>(&scheduler, "tally-1", &0)?;
/// assert_eq!(tally.wait()?, 6);
/// scheduler.shutdown(Duration::from_secs(1));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Durability {
    store: Arc<dyn Store>,
    shared: Arc<Shared>,
    kinds: RwLock<HashMap<&'static str, Kind>>,
    writer: Option<JoinHandle<()>>,
    recovered: AtomicU64,
}

impl std::fmt::Debug for Durability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Durability")
            .field("running", &self.shared.directory.len())
            .field("kinds", &self.kinds.read().len())
            .finish_non_exhaustive()
    }
}

impl Durability {
    /// Opens durable processes on `store`, with the journal's command at
    /// [`JOURNAL_COMMAND`], and starts the writer thread.
    ///
    /// # Examples
    ///
    /// See [`Durability`].
    pub fn open(store: impl Store) -> Durability {
        Durability::with_command(store, JOURNAL_COMMAND)
    }

    /// As [`open`](Durability::open), with the journal's command at
    /// `command` (when the application's own handlers use
    /// [`JOURNAL_COMMAND`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use sched_durable::prelude::*;
    /// use sched::command::CommandId;
    ///
    /// let dir = tempfile::tempdir()?;
    /// let store = RedbStore::create(dir.path().join("journal.redb"))?;
    /// let durability = Durability::with_command(store, CommandId(9_000));
    /// # drop(durability);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_command(store: impl Store, command: CommandId) -> Durability {
        let store: Arc<dyn Store> = Arc::new(store);
        let (writer, thread) = Writer::start(store.clone());
        Durability::with_writer(store, writer, Some(thread), command)
    }

    /// Opens durable processes on `store` for a deterministic simulation
    /// (`sched::sim`): no writer thread; records queue as on a running
    /// node, and a process of the simulation writes everything queued
    /// when it steps, in the batches the writer thread would make. So the
    /// simulation decides when each record is written, and a node stopped
    /// between two steps can leave records queued and never written.
    /// Everything else is as with [`open`](Durability::open): install it
    /// on the builder the simulation is made from, and pass the
    /// simulation where a scheduler is asked for.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched_durable::prelude::*;
    /// use sched_durable::store::MemoryStore;
    /// use sched::sim::Config;
    ///
    /// struct Once;
    /// impl Durable for Once {
    ///     const KIND: &'static str = "once";
    ///     type Args = ();
    ///     type Message = ();
    ///     type Done = u64;
    ///     fn create(_: ()) -> Self { Once }
    ///     fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
    ///         out.finish(7_u64);
    ///         Ok(())
    ///     }
    ///     fn step(&mut self, _: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let store = MemoryStore::new();
    /// let durability = Durability::for_simulation(store.clone());
    /// durability.register::<Once>();
    /// let mut sim = durability
    ///     .install(Scheduler::builder())
    ///     .simulation(Config::seed(1).workers(2));
    /// durability.recover(&sim)?;
    /// durability.spawn::<Once>(&sim, "once", ())?;
    /// sim.run()?;
    /// let status = durability.status("once")?.expect("a journal");
    /// assert_eq!(status.outcome::<u64>().transpose()?, Some(7));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn for_simulation(store: impl Store) -> Durability {
        let store: Arc<dyn Store> = Arc::new(store);
        let writer = Writer::simulated(store.clone());
        Durability::with_writer(store, writer, None, JOURNAL_COMMAND)
    }

    fn with_writer(
        store: Arc<dyn Store>,
        writer: Arc<Writer>,
        thread: Option<JoinHandle<()>>,
        command: CommandId,
    ) -> Durability {
        let simulated = thread.is_none();
        Durability {
            store: store.clone(),
            shared: Arc::new(Shared {
                directory: DashMap::new(),
                command,
                writer,
                durable: Latency::default(),
                duplicates: AtomicU64::new(0),
                undelivered: AtomicU64::new(0),
                stand_in_dropped: AtomicU64::new(0),
                held: AtomicU64::new(0),
                closed: AtomicU64::new(0),
                store,
                clock: Clock::new(simulated),
                incarnations: AtomicU64::new(0),
            }),
            kinds: RwLock::new(HashMap::new()),
            writer: thread,
            recovered: AtomicU64::new(0),
        }
    }

    /// Registers the durable type `D`, so that its journals can be
    /// recovered. Register every type before [`recover`](Durability::recover).
    ///
    /// # Examples
    ///
    /// See [`Durability`].
    pub fn register<D: Durable>(&self) -> &Self {
        self.kinds.write().insert(
            D::KIND,
            Kind {
                create: factory::<D>,
                snapshots: None,
            },
        );
        self
    }

    /// Registers the durable type `D`, whose state is snapshotted (with
    /// serde) after every `every` records of each of its processes: a
    /// recovery then restores the latest snapshot and replays only the
    /// records after it, and the store may drop the records it covers.
    /// Only the records after the snapshot are checked for determinism.
    ///
    /// # Panics
    ///
    /// If `every` is 0.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched_durable::prelude::*;
    ///
    /// #[derive(Default, serde::Serialize, serde::Deserialize)]
    /// struct Tally { total: u64 }
    ///
    /// impl Durable for Tally {
    ///     const KIND: &'static str = "tally";
    ///     type Args = ();
    ///     type Message = u64;
    ///     type Done = ();
    ///     fn create(_: ()) -> Self { Tally::default() }
    ///     fn step(&mut self, events: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
    ///         for event in events.typed::<Self>() {
    ///             if let Event::Message(n) = event { self.total += n; }
    ///         }
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let dir = tempfile::tempdir()?;
    /// let durability = Durability::open(RedbStore::create(dir.path().join("j.redb"))?);
    /// durability.register_with_snapshots::<Tally>(100);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn register_with_snapshots<D>(&self, every: u64) -> &Self
    where
        D: Durable + Serialize + DeserializeOwned,
    {
        assert!(every > 0, "a snapshot every 0 records");
        let save: Save<D> = save_serde::<D>;
        self.kinds.write().insert(
            D::KIND,
            Kind {
                create: factory_saving::<D>,
                snapshots: Some((restore::<D>, every, Box::new(save))),
            },
        );
        self
    }

    /// Registers the journal's command handler on a scheduler's builder.
    ///
    /// # Examples
    ///
    /// See [`Durability`].
    pub fn install(&self, builder: sched::SchedulerBuilder) -> sched::SchedulerBuilder {
        let writer = self.shared.writer.clone();
        builder.handler(
            self.shared.command,
            move |cmd: Command, done: Completer| -> Result<(), Rejected> {
                match cmd.data.downcast::<Submission>() {
                    Ok(submission) => writer.submit(*submission, done),
                    Err(_) => {
                        let _ = done.fail("the journal's command takes only journal records");
                    }
                }
                Ok(())
            },
        )
    }

    /// Starts a new durable process of type `D` under `key`, created from
    /// `args`. Its first step runs at once; it is durable once the
    /// handle's [`durable`](Spawned::durable) receipt says so.
    ///
    /// # Errors
    ///
    /// [`DurableError::KeyTaken`] if a process with this key runs or has
    /// a journal; [`DurableError::Codec`] if the arguments do not
    /// serialize; [`DurableError::Submit`] if the scheduler refused it.
    ///
    /// # Examples
    ///
    /// See [`Durability`].
    pub fn spawn<D: Durable>(
        &self,
        cx: &impl AsContext,
        key: &str,
        args: D::Args,
    ) -> Result<Spawned<D::Done>, DurableError> {
        let cx = cx.context();
        self.shared.clock.anchor(cx.now(), None);
        let bytes = postcard::to_stdvec(&args).map_err(codec)?;
        let (save, every) = match self.kinds.read().get(D::KIND) {
            Some(Kind {
                snapshots: Some((_, every, save)),
                ..
            }) => (save.downcast_ref::<Save<D>>().copied(), Some(*every)),
            _ => (None, None),
        };
        let process = Box::new(Instance {
            process: D::create(args),
            save,
        });
        let key: Arc<str> = key.into();
        let (ack, receipt) = Receipt::pair(key.clone());
        // The store is asked before the directory's entry is taken: the
        // entry locks its shard, and a store call may wait for the store's
        // own thread, which may be handing a send to a key of that shard
        // (`listen`): asking under the lock deadlocked. A key the store
        // does not hold yet and that a concurrent spawn or recovery takes
        // first is `Occupied` below.
        if self.store.contains(&key)? {
            return Err(DurableError::KeyTaken(key.to_string()));
        }
        let pid = match self.shared.directory.entry(key.to_string()) {
            dashmap::Entry::Occupied(_) => return Err(DurableError::KeyTaken(key.to_string())),
            dashmap::Entry::Vacant(vacant) => {
                let pid = cx
                    .allocate_pid()
                    .map_err(|e| DurableError::Submit(e.to_string()))?;
                vacant.insert(pid);
                pid
            }
        };
        let runner = Runner::new(
            key.clone(),
            process,
            State::default(),
            self.shared.clone(),
            Start {
                created: Some(Created {
                    kind: D::KIND.to_owned(),
                    args: bytes,
                }),
                queued: vec![(RecordedInput::Start, Some(ack))],
                resume: Vec::new(),
                snapshot_every: every,
            },
        );
        match cx.spawn(Spawn::new(runner).method(DEFAULT_METHOD_NAME).at(pid)) {
            Ok(completion) => {
                // Sends made to this key before it ran (their senders'
                // outbox keeps them), read now that the process is
                // registered: any send released while it was not yet
                // reachable is among them (`channel.rs`).
                let waiting = self
                    .store
                    .outbox_to(&key)
                    .and_then(|sends| channel::deliver(&self.shared, cx, sends));
                if let Err(e) = waiting {
                    tracing::error!(
                        key = &*key,
                        "the sends waiting for this process could not be read; a recovery delivers them: {e}"
                    );
                }
                Ok(Spawned::new(key, D::KIND, completion, receipt))
            }
            Err(e) => {
                self.shared.directory.remove(&*key);
                Err(DurableError::Submit(e.to_string()))
            }
        }
    }

    /// Sends `message` from outside to the durable process `key` of type
    /// `D`. The receipt says when it is durable: after that, a crash no
    /// longer loses it. A message whose receipt did not settle `Ok` may
    /// have been lost; sending it again may deliver it twice.
    ///
    /// # Errors
    ///
    /// [`DurableError::NoSuchKey`] if no durable process with this key
    /// runs; [`DurableError::Codec`] if the message does not serialize.
    ///
    /// # Examples
    ///
    /// See [`Durability`].
    pub fn send<D: Durable>(
        &self,
        cx: &impl AsContext,
        key: &str,
        message: &D::Message,
    ) -> Result<Receipt, DurableError> {
        let cx = cx.context();
        let body = postcard::to_stdvec(message).map_err(codec)?;
        let pid = self
            .pid(key)
            .ok_or_else(|| DurableError::NoSuchKey(key.to_owned()))?;
        let (ack, receipt) = Receipt::pair(key.into());
        cx.send(pid, Tell { body, ack })
            .map_err(|_| DurableError::NoSuchKey(key.to_owned()))?;
        Ok(receipt)
    }

    /// Whether the store holds a journal under `key`, running or ended
    /// (and not forgotten): a spawn with that key would be refused.
    ///
    /// # Errors
    ///
    /// [`DurableError::Store`].
    ///
    /// # Examples
    ///
    /// ```
    /// # use sched_durable::prelude::*;
    /// # let dir = tempfile::tempdir()?;
    /// # let durability = Durability::open(RedbStore::create(dir.path().join("j.redb"))?);
    /// assert!(!durability.contains("nobody")?);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn contains(&self, key: &str) -> Result<bool, DurableError> {
        Ok(self.shared.directory.contains_key(key) || self.store.contains(key)?)
    }

    /// Delivers at once the sends that durable processes on other nodes
    /// make to the processes running here, for as long as this
    /// `Durability` lives: for a store the nodes of a cluster share (the
    /// JetStream store). Without it, such a send waits in the outbox
    /// until its receiver's node runs `recover` (or spawns the receiver).
    /// Either way it is taken exactly once, in its sender's order.
    ///
    /// Call it once per node, before its first `recover` and `spawn`,
    /// with the scheduler the durable processes run on (an `Arc` of it:
    /// the deliveries come from a thread of the store's; they stop when
    /// the scheduler is dropped). The watch sees every send stored after
    /// `listen` returns; a send stored before waits in the outbox for its
    /// receiver's `spawn` or `recover`, so a node that listens after
    /// recovering leaves the sends of that gap to its next `recover`. A
    /// second call starts a second watch: each send then comes twice,
    /// and the receiver drops the copy. Returns `Ok(true)` for a store
    /// the nodes of a cluster share (the JetStream store), `Ok(false)` for
    /// a store of one node, where there is nothing to listen to.
    ///
    /// # Errors
    ///
    /// [`DurableError::Store`] if the store could not start watching.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use sched_durable::prelude::*;
    ///
    /// let dir = tempfile::tempdir()?;
    /// let durability = Durability::open(RedbStore::create(dir.path().join("j.redb"))?);
    /// let scheduler = Arc::new(durability.install(Scheduler::builder()).build());
    /// scheduler.start();
    /// // Before the first recovery. One node's store: every send is
    /// // delivered by this node already.
    /// assert!(!durability.listen(&scheduler)?);
    /// durability.recover(&*scheduler)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn listen<C: AsContext + Send + Sync + 'static>(
        &self,
        cx: &Arc<C>,
    ) -> Result<bool, DurableError> {
        // Weak both: the store holds the watcher, and the shared state
        // holds the store; the scheduler is the caller's to drop.
        let shared = Arc::downgrade(&self.shared);
        let cx = Arc::downgrade(cx);
        self.store.watch_sends(Box::new(move |sends| {
            if let (Some(shared), Some(cx)) = (shared.upgrade(), cx.upgrade()) {
                channel::deliver_running(&shared, cx.context(), sends);
            }
        }))
    }
}

impl Drop for Durability {
    fn drop(&mut self) {
        self.shared.writer.stop();
        if let Some(thread) = self.writer.take() {
            let _ = thread.join();
        }
    }
}

const DEFAULT_METHOD_NAME: &str = sched::process::DEFAULT_METHOD;

/// The process and its bookkeeping a journal's replay starts from: its
/// latest snapshot, or a fresh process.
fn rebuild(kind: &Kind, journal: &Journal) -> Result<(Box<dyn Erased>, State), DurableError> {
    match (&journal.snapshot, &kind.snapshots) {
        (Some((after, bytes)), Some((restore, _, _))) => {
            let snapshot: Snapshot =
                postcard::from_bytes(bytes).map_err(|e| DurableError::Corrupt(e.to_string()))?;
            if snapshot.state.next_record != after + 1 {
                return Err(DurableError::Corrupt(format!(
                    "the snapshot of {:?} says it follows record {}, the store says {after}",
                    journal.key,
                    snapshot.state.next_record.wrapping_sub(1)
                )));
            }
            Ok((restore(&snapshot.user)?, snapshot.state))
        }
        _ if journal.first == 0 => Ok(((kind.create)(&journal.created.args)?, State::default())),
        _ => Err(DurableError::Corrupt(format!(
            "the journal of {:?} starts at record {}, after a snapshot, and its type {:?} \
             was registered without snapshots",
            journal.key, journal.first, journal.created.kind
        ))),
    }
}

/// What [`Durability::recover`] did.
///
/// # Examples
///
/// See [`Durability`].
#[derive(Debug, Default)]
pub struct Recovery {
    /// The processes resumed.
    pub resumed: Vec<Spawned<AnyKind>>,
    /// The processes that could not be (left in the store).
    pub failed: Vec<DurableError>,
    /// Sends from the outbox handed to their running receivers (their
    /// receivers had not journaled them; a receiver drops a copy of what
    /// it took).
    pub resent: u64,
    /// Sends in the outbox whose receiver does not run here and has not
    /// ended (not spawned yet, on another node, or not resumed): kept,
    /// and handed over when it runs.
    pub waiting: u64,
    /// Timers armed again.
    pub timers: u64,
    /// Commands handed back as interrupted.
    pub interrupted: u64,
    /// Processes restored from a snapshot (the others replayed their
    /// whole journal).
    pub from_snapshots: u64,
    /// How long reading, replaying and resuming took.
    pub took: Duration,
}
