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
use crate::inspect::Inspection;
use crate::process::{
    factory, factory_saving, restore, save_serde, Durable, Erased, Factory, Save, Typed,
};
use crate::receipt::Receipt;
use crate::record::{RecordedEffect, RecordedFailure, RecordedInput};
use crate::recovery::{replay, Replayed};
use crate::runner::{Ending, Runner, Shared, Start, Tell, CLAIMED};
use crate::state::{Snapshot, State};
use crate::status::{self, Status};
use crate::store::{Created, Journal, Store};

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
///     fn create(_: ()) -> Self { Tally::default() }
///     fn step(&mut self, input: Input<u64>, out: &mut Effects<'_>) -> Result<(), BoxError> {
///         if let Input::Message { message, .. } = input {
///             if message == 0 { out.finish(&self.total)?; } else { self.total += message; }
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
///     durability.tell::<Tally>(&scheduler, "tally-1", &n)?.wait(Duration::from_secs(5))?;
/// }
/// durability.tell::<Tally>(&scheduler, "tally-1", &0)?;
/// assert_eq!(tally.wait::<u64>()?, 6);
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
    /// (`sched::sim`): no writer thread; each record is written by the
    /// journal's command handler itself, on the thread that runs the
    /// step (the simulation's), with one append per record. Everything
    /// else is as with [`open`](Durability::open): install it on the
    /// builder the simulation is made from, and pass the simulation where
    /// a scheduler is asked for.
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
    ///     fn create(_: ()) -> Self { Once }
    ///     fn step(&mut self, _: Input<()>, out: &mut Effects<'_>) -> Result<(), BoxError> {
    ///         out.finish(&7_u64)?;
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
        let writer = Writer::inline(store.clone());
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
    ///     fn create(_: ()) -> Self { Tally::default() }
    ///     fn step(&mut self, input: Input<u64>, _: &mut Effects<'_>) -> Result<(), BoxError> {
    ///         if let Input::Message { message, .. } = input { self.total += message; }
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
    ) -> Result<Spawned, DurableError> {
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
        let process = Box::new(Typed {
            process: D::create(args),
            save,
        });
        let key: Arc<str> = key.into();
        let (ack, receipt) = Receipt::pair(key.clone());
        let pid = match self.shared.directory.entry(key.to_string()) {
            dashmap::Entry::Occupied(_) => return Err(DurableError::KeyTaken(key.to_string())),
            dashmap::Entry::Vacant(vacant) => {
                if self.store.contains(&key)? {
                    return Err(DurableError::KeyTaken(key.to_string()));
                }
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
                Ok(Spawned {
                    key,
                    completion,
                    receipt,
                })
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
    pub fn tell<D: Durable>(
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

    /// The PID of the running durable process `key`.
    ///
    /// # Examples
    ///
    /// ```
    /// # use sched_durable::prelude::*;
    /// # let dir = tempfile::tempdir()?;
    /// # let durability = Durability::open(RedbStore::create(dir.path().join("j.redb"))?);
    /// assert_eq!(durability.pid("nobody"), None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn pid(&self, key: &str) -> Option<Pid> {
        self.shared.running_pid(key)
    }

    /// Rebuilds every durable process the store holds that has not ended
    /// and is not running here, and resumes it: its journal is replayed
    /// through `step` with every effect suppressed, then sends the
    /// receiver had not journaled are sent again, pending timers are armed
    /// at their absolute deadlines (at once if past), and commands that
    /// were in flight complete with
    /// [`Failure::Interrupted`](crate::Failure::Interrupted).
    ///
    /// A process that cannot be resumed (its type is not registered, its
    /// replay differs from its journal) is listed in
    /// [`Recovery::failed`] and left in the store; the others resume.
    ///
    /// # Errors
    ///
    /// [`DurableError::Store`] or [`DurableError::Corrupt`] when the store
    /// cannot be read.
    ///
    /// # Examples
    ///
    /// See [`Durability`].
    pub fn recover(&self, cx: &impl AsContext) -> Result<Recovery, DurableError> {
        let cx = cx.context();
        let started = Instant::now();
        let mut report = Recovery::default();
        let mut replayed: Vec<(Replayed, Option<u64>, Pid)> = Vec::new();
        {
            let kinds = self.kinds.read();
            for journal in self.claim()? {
                let rebuilt = match kinds.get(journal.created.kind.as_str()) {
                    None => Err(DurableError::UnknownKind {
                        key: journal.key.clone(),
                        kind: journal.created.kind.clone(),
                    }),
                    Some(kind) => rebuild(kind, &journal)
                        .and_then(|(p, state)| replay(&journal, p, state))
                        .map(|r| (r, kind.snapshots.as_ref().map(|(_, every, _)| *every))),
                };
                match rebuilt {
                    Ok((r, every)) => {
                        if r.snapshotted {
                            report.from_snapshots += 1;
                        }
                        // Its PID only now: one reserved for a journal
                        // that fails would stay reserved for good.
                        let pid = match cx.allocate_pid() {
                            Ok(pid) => pid,
                            Err(e) => {
                                self.shared.directory.remove(&journal.key);
                                report.failed.push(DurableError::Submit(e.to_string()));
                                continue;
                            }
                        };
                        self.shared.directory.insert(journal.key.clone(), pid);
                        replayed.push((r, every, pid));
                    }
                    Err(e) => {
                        // Not resumed: the key is free for a later recovery.
                        self.shared.directory.remove(&journal.key);
                        report.failed.push(e);
                    }
                }
            }
        }
        // The clock starts here (in a simulation, after the latest time the
        // journals recorded), before any process steps.
        let latest = replayed.iter().filter_map(|(r, _, _)| r.last_at_ms).max();
        self.shared.clock.anchor(cx.now(), latest);
        // What each process must be handed again, decided from its rebuilt
        // state: its pending timers, and as its first inputs the commands
        // that were in flight (interrupted).
        let mut plans = Vec::with_capacity(replayed.len());
        for (r, _, _) in &replayed {
            let mut resume = Vec::new();
            let mut timers: Vec<_> = r.state.timers.iter().collect();
            timers.sort();
            for (&tag, &deadline_ms) in timers {
                resume.push(RecordedEffect::Timer { tag, deadline_ms });
                report.timers += 1;
            }
            let mut commands: Vec<_> = r.state.commands.keys().copied().collect();
            commands.sort_unstable();
            let queued: Vec<_> = commands
                .into_iter()
                .map(|tag| {
                    report.interrupted += 1;
                    (
                        RecordedInput::Completion {
                            tag,
                            result: Err(RecordedFailure::Interrupted),
                        },
                        None,
                    )
                })
                .collect();
            plans.push((resume, queued));
        }
        // Marks of the rebuilt processes: outbox entries at or below them
        // were taken already (an entry that outlived the record that took
        // it) and are removed instead of sent.
        let marks: HashMap<String, HashMap<String, u64>> = replayed
            .iter()
            .map(|(r, _, _)| (r.key.to_string(), r.state.marks.clone()))
            .collect();
        for ((r, every, pid), (resume, queued)) in replayed.into_iter().zip(plans) {
            let key = r.key.clone();
            let runner = Runner::new(
                r.key,
                r.process,
                r.state,
                self.shared.clone(),
                Start {
                    created: None,
                    queued,
                    resume,
                    snapshot_every: every,
                },
            );
            match cx.spawn(Spawn::new(runner).method(DEFAULT_METHOD_NAME).at(pid)) {
                Ok(completion) => {
                    report.resumed.push(Spawned {
                        key: key.clone(),
                        completion,
                        receipt: Receipt::settled(key),
                    });
                }
                Err(e) => {
                    self.shared.directory.remove(&*key);
                    report.failed.push(DurableError::Submit(e.to_string()));
                }
            }
        }
        // Only now, with every resumed process registered, the outbox: a
        // send released while its receiver was not yet reachable was
        // committed before that release, so it is in what is read here
        // (`channel.rs`). Receivers take each sender's sends in order
        // whatever path brings them first.
        let mut sends = self.store.outbox()?;
        let mut taken = Vec::new();
        sends.retain(|send| {
            let mark = marks.get(&send.to).and_then(|m| m.get(&send.from));
            if mark.is_some_and(|&mark| send.seq <= mark) {
                taken.push((send.to.clone(), send.from.clone(), send.seq));
                false
            } else {
                true
            }
        });
        if !taken.is_empty() {
            self.store.discard(&taken)?;
        }
        sends.sort_by(|a, b| (&a.to, &a.from, a.seq).cmp(&(&b.to, &b.from, b.seq)));
        let delivery = channel::deliver(&self.shared, cx, sends)?;
        report.resent = delivery.sent;
        report.waiting = delivery.waiting;
        self.recovered
            .fetch_add(report.resumed.len() as u64, Relaxed);
        report.took = started.elapsed();
        Ok(report)
    }

    /// The journals a recovery is to resume, each claimed in the
    /// directory (as `CLAIMED`): those the store lists as running that
    /// no process runs here. A process that ended after the store was
    /// read and before its key was claimed would otherwise be resumed from
    /// its journal as it was, and run twice: when any process ended
    /// meanwhile (`Shared::closed` moved), the claimed journals are read
    /// again and those that ended are let go. A process runs under its
    /// key from its claim (or spawn) to its `close`, so a key claimed here
    /// has no process writing its journal.
    fn claim(&self) -> Result<Vec<Journal>, DurableError> {
        let closed = self.shared.closed.load(SeqCst);
        let mut claimed = Vec::new();
        for journal in self.store.running()? {
            if let dashmap::Entry::Vacant(vacant) = self.shared.directory.entry(journal.key.clone())
            {
                vacant.insert(CLAIMED);
                claimed.push(journal);
            }
        }
        if claimed.is_empty() || self.shared.closed.load(SeqCst) == closed {
            return Ok(claimed);
        }
        let mut fresh: HashMap<String, Journal> = self
            .store
            .running()?
            .into_iter()
            .map(|journal| (journal.key.clone(), journal))
            .collect();
        Ok(claimed
            .into_iter()
            .filter_map(|journal| match fresh.remove(&journal.key) {
                Some(journal) => Some(journal),
                None => {
                    self.shared.directory.remove(&journal.key);
                    None
                }
            })
            .collect())
    }

    /// What became of the durable process `key`: running here, pending
    /// (suspended, not resumed, or on another node), done with its
    /// outcome, or failed; `None` if the store holds no journal under
    /// `key` (never spawned, or forgotten). Works after a restart, before
    /// or without a recovery. It reads the journal: with the embedded
    /// store, a scan of the store's log.
    ///
    /// # Errors
    ///
    /// [`DurableError::Store`] or [`DurableError::Corrupt`].
    ///
    /// # Examples
    ///
    /// ```
    /// use sched_durable::prelude::*;
    /// use sched_durable::Status;
    /// use std::time::Duration;
    ///
    /// struct Once;
    /// impl Durable for Once {
    ///     const KIND: &'static str = "once";
    ///     type Args = ();
    ///     type Message = ();
    ///     fn create(_: ()) -> Self { Once }
    ///     fn step(&mut self, _: Input<()>, out: &mut Effects<'_>) -> Result<(), BoxError> {
    ///         out.finish(&"done")?;
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("j.redb");
    /// {
    ///     let durability = Durability::open(RedbStore::create(&path)?);
    ///     durability.register::<Once>();
    ///     let scheduler = durability.install(Scheduler::builder().workers(1)).build();
    ///     scheduler.start();
    ///     durability.spawn::<Once>(&scheduler, "once-1", ())?.wait::<String>()?;
    ///     scheduler.shutdown(Duration::from_secs(1));
    /// }
    /// // After a restart, without a scheduler:
    /// let durability = Durability::open(RedbStore::create(&path)?);
    /// let status = durability.status("once-1")?.expect("a journal");
    /// assert_eq!(status.outcome::<String>().transpose()?.as_deref(), Some("done"));
    /// assert_eq!(durability.keys()?, vec![("once-1".to_owned(), true)]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn status(&self, key: &str) -> Result<Option<Status>, DurableError> {
        if let Some(pid) = self.pid(key) {
            return Ok(Some(Status::Running(pid)));
        }
        match self.store.journal(key)? {
            None => Ok(None),
            Some(journal) => status::of_journal(&journal).map(Some),
        }
    }

    /// Every key the store holds a journal for (running or ended, not
    /// forgotten), in order, each with whether it has ended.
    ///
    /// # Errors
    ///
    /// [`DurableError::Store`] or [`DurableError::Corrupt`].
    ///
    /// # Examples
    ///
    /// See [`status`](Durability::status).
    pub fn keys(&self) -> Result<Vec<(String, bool)>, DurableError> {
        self.store.keys()
    }

    /// The journal of `key`, decoded: what it was created from, and each
    /// record's time, inputs and released effects.
    ///
    /// # Errors
    ///
    /// [`DurableError::Store`] or [`DurableError::Corrupt`].
    ///
    /// # Examples
    ///
    /// ```
    /// # use sched_durable::prelude::*;
    /// # let dir = tempfile::tempdir()?;
    /// # let durability = Durability::open(RedbStore::create(dir.path().join("j.redb"))?);
    /// assert!(durability.inspect("nobody")?.is_none());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn inspect(&self, key: &str) -> Result<Option<Inspection>, DurableError> {
        match self.store.journal(key)? {
            None => Ok(None),
            Some(journal) => Inspection::from_journal(&journal).map(Some),
        }
    }

    /// Deletes the journal of the ended process `key`, so that the key can
    /// be used again; a running process's journal is kept (`Ok(false)`).
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
    /// assert!(!durability.forget("nobody")?);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn forget(&self, key: &str) -> Result<bool, DurableError> {
        if self.shared.directory.contains_key(key) || self.store.ended(key)? != Some(true) {
            return Ok(false);
        }
        // Sends the ended process never took are not for a later process
        // of the same key (`channel.rs`, first contact).
        let stale: Vec<_> = self
            .store
            .outbox_to(key)?
            .into_iter()
            .map(|send| (send.to, send.from, send.seq))
            .collect();
        if !stale.is_empty() {
            self.store.discard(&stale)?;
        }
        self.store.forget(key)
    }

    /// The journal's figures: records, bytes and syncs written, the sync
    /// latency and the step-to-durable latency, copies dropped, sends no
    /// running process took.
    ///
    /// # Examples
    ///
    /// ```
    /// # use sched_durable::prelude::*;
    /// # let dir = tempfile::tempdir()?;
    /// # let durability = Durability::open(RedbStore::create(dir.path().join("j.redb"))?);
    /// let stats = durability.stats();
    /// assert_eq!(stats.records, 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn stats(&self) -> DurableStats {
        let c = &self.shared.writer.counters;
        DurableStats {
            records: c.records.load(Relaxed),
            bytes: c.bytes.load(Relaxed),
            syncs: c.syncs.load(Relaxed),
            failed_syncs: c.failed_syncs.load(Relaxed),
            largest_batch: c.largest_batch.load(Relaxed),
            sync_p50: c.sync.quantile(0.5),
            sync_p99: c.sync.quantile(0.99),
            sync_max: c.sync.max(),
            durable_p50: self.shared.durable.quantile(0.5),
            durable_p99: self.shared.durable.quantile(0.99),
            durable_max: self.shared.durable.max(),
            duplicates: self.shared.duplicates.load(Relaxed),
            undelivered: self.shared.undelivered.load(Relaxed),
            held: self.shared.held.load(Relaxed),
            running: self.shared.directory.len() as u64,
            recovered: self.recovered.load(Relaxed),
            store_bytes: self.store.size().unwrap_or(0),
        }
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

/// A durable process started by [`Durability::spawn`] or resumed by
/// [`Durability::recover`].
///
/// # Examples
///
/// See [`Durability`].
#[derive(Debug)]
pub struct Spawned {
    key: Arc<str>,
    completion: Completion,
    receipt: Receipt,
}

impl Spawned {
    /// The process's key.
    ///
    /// # Examples
    ///
    /// See [`Durability`].
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Its PID in this run.
    ///
    /// # Examples
    ///
    /// See [`Durability`].
    pub fn pid(&self) -> Pid {
        self.completion.pid()
    }

    /// Says when the process is durable (its first record written): from
    /// then on, a crash does not lose it. Settled at once for a resumed
    /// process.
    ///
    /// # Examples
    ///
    /// See [`Durability`].
    pub fn durable(&self) -> &Receipt {
        &self.receipt
    }

    /// Waits for the process to finish, and decodes its outcome as a `T`.
    ///
    /// # Errors
    ///
    /// [`DurableError::Failed`] if a step failed or panicked;
    /// [`DurableError::Suspended`] if the scheduler shut down first (it
    /// resumes on recovery); [`DurableError::Codec`] if the outcome is not
    /// a `T`.
    ///
    /// # Examples
    ///
    /// See [`Durability`].
    pub fn wait<T: DeserializeOwned>(self) -> Result<T, DurableError> {
        decode_ending(self.completion.wait())
    }

    /// As [`wait`](Spawned::wait), for at most `timeout`.
    ///
    /// # Errors
    ///
    /// As [`wait`](Spawned::wait), and [`DurableError::Timeout`].
    ///
    /// # Examples
    ///
    /// ```
    /// # use sched_durable::Spawned;
    /// # use std::time::Duration;
    /// fn within_a_second(mut spawned: Spawned) -> Option<u64> {
    ///     spawned.wait_timeout::<u64>(Duration::from_secs(1)).ok()
    /// }
    /// ```
    pub fn wait_timeout<T: DeserializeOwned>(
        &mut self,
        timeout: Duration,
    ) -> Result<T, DurableError> {
        match self.completion.wait_timeout(timeout) {
            None => Err(DurableError::Timeout),
            Some(result) => decode_ending(result),
        }
    }
}

fn decode_ending<T: DeserializeOwned>(
    result: Result<Payload, ExitError>,
) -> Result<T, DurableError> {
    match result {
        Ok(payload) => match payload.downcast::<Ending>() {
            Ok(ending) => match *ending {
                Ending::Done(bytes) => postcard::from_bytes(&bytes).map_err(codec),
                Ending::Suspended => Err(DurableError::Suspended),
            },
            Err(_) => Err(DurableError::Codec("not a durable outcome".into())),
        },
        Err(ExitError::Cancelled) => Err(DurableError::Suspended),
        Err(e) => Err(DurableError::Failed(e.to_string())),
    }
}

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
    pub resumed: Vec<Spawned>,
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

/// The journal's figures ([`Durability::stats`]).
///
/// # Examples
///
/// See [`Durability::stats`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DurableStats {
    /// Records written.
    pub records: u64,
    /// Record bytes written.
    pub bytes: u64,
    /// Batches written (one sync each).
    pub syncs: u64,
    /// Batches the store refused.
    pub failed_syncs: u64,
    /// The most records one sync wrote.
    pub largest_batch: u64,
    /// Sync latency, median (the upper bound of its bucket, within an
    /// eighth of the value).
    pub sync_p50: Duration,
    /// Sync latency, 99th percentile (same).
    pub sync_p99: Duration,
    /// The longest sync.
    pub sync_max: Duration,
    /// From a record's yield to its commit, median (same buckets).
    pub durable_p50: Duration,
    /// The same, 99th percentile.
    pub durable_p99: Duration,
    /// The same, longest.
    pub durable_max: Duration,
    /// Copies of sends a receiver had already taken, dropped.
    pub duplicates: u64,
    /// Sends released while their receiver did not run here: the outbox
    /// keeps each, and hands it over when the receiver is spawned or
    /// recovered.
    pub undelivered: u64,
    /// Sends a receiver holds now because an earlier send of the same
    /// sender has not reached it yet (taken, in order, once it does).
    pub held: u64,
    /// Durable processes running now.
    pub running: u64,
    /// Durable processes resumed by `recover`.
    pub recovered: u64,
    /// The store's size.
    pub store_bytes: u64,
}
