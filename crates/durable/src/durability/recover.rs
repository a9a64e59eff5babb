//! Recovery: the journals no process runs are claimed, rebuilt by replay,
//! resumed under new PIDs, and only then is the outbox sent (see
//! `channel.rs` for why that order).

use super::*;
use crate::receipt::Ack;
use sched::Context;

impl Durability {
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
        let claimed = self.claim()?;
        let replayed = self.rebuild(cx, claimed, &mut report);
        let marks = self.start_rebuilt(cx, replayed, &mut report);
        let delivery = self.send_outbox(cx, &marks)?;
        report.resent = delivery.sent;
        report.waiting = delivery.waiting;
        self.recovered
            .fetch_add(report.resumed.len() as u64, Relaxed);
        report.took = started.elapsed();
        Ok(report)
    }

    /// Resumes the one durable process `key` here and now, from its
    /// journal, whichever node wrote it last: the store fences that node
    /// (an append it makes after this is refused, so an effect of a step
    /// it made after is never released). For a process that moves from
    /// node to node on purpose, as a keyed process does when its shard
    /// moves: the node that ran it has stopped it (a cancel suspends a
    /// durable process), and the next one resumes it where it was, with
    /// its waiting sends. [`recover`](Durability::recover) instead resumes
    /// every journal whose node is gone.
    ///
    /// `Ok(None)` if the store holds no running journal under `key`
    /// (never spawned, ended, or forgotten): spawn it instead.
    ///
    /// # Errors
    ///
    /// [`DurableError::KeyTaken`] if the process runs here already, or
    /// ended here and a write of its journal is still under way (see
    /// [`pid`](Durability::pid)); [`DurableError::UnknownKind`] or
    /// [`DurableError::NonDeterminism`] if it cannot be rebuilt;
    /// [`DurableError::Store`] or [`DurableError::Corrupt`];
    /// [`DurableError::Submit`] if the scheduler refused it.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched_durable::prelude::*;
    /// use std::time::Duration;
    ///
    /// struct Sum(u64);
    /// impl Durable for Sum {
    ///     const KIND: &'static str = "sum";
    ///     type Args = ();
    ///     type Message = u64;
    ///     type Done = u64;
    ///     fn create(_: ()) -> Self { Sum(0) }
    ///     fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
    ///         for event in events.typed::<Self>() {
    ///             match event {
    ///                 Event::Message(0) => out.finish(self.0),
    ///                 Event::Message(n) => self.0 += n,
    ///                 _ => {}
    ///             }
    ///         }
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let dir = tempfile::tempdir()?;
    /// let durability = Durability::open(RedbStore::create(dir.path().join("j.redb"))?);
    /// durability.register::<Sum>();
    /// let scheduler = durability.install(Scheduler::builder().workers(1)).build();
    /// scheduler.start();
    /// assert!(durability.resume(&scheduler, "sum-1")?.is_none()); // nothing to resume
    ///
    /// let sum = durability.spawn::<Sum>(&scheduler, "sum-1", ())?;
    /// durability.send::<Sum>(&scheduler, "sum-1", &5)?.wait_timeout(Duration::from_secs(5))?;
    /// scheduler.context().cancel(sum.pid())?; // suspended, its journal kept
    /// while durability.pid("sum-1").is_some() {
    ///     std::thread::sleep(Duration::from_millis(1));
    /// }
    /// let again = durability.resume(&scheduler, "sum-1")?.expect("a running journal");
    /// durability.send::<Sum>(&scheduler, "sum-1", &0)?;
    /// assert_eq!(again.of::<Sum>()?.wait()?, 5);
    /// scheduler.shutdown(Duration::from_secs(1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn resume(&self, cx: &impl AsContext, key: &str) -> Result<Option<Spawned>, DurableError> {
        let cx = cx.context();
        // Claimed before the store is read (and the entry let go before
        // the store is asked, as `spawn` does): no process of this node
        // writes the journal from here on.
        match self.shared.directory.entry(key.to_owned()) {
            dashmap::Entry::Occupied(_) => return Err(DurableError::KeyTaken(key.to_owned())),
            dashmap::Entry::Vacant(vacant) => {
                vacant.insert(CLAIMED);
            }
        }
        let journal = match self.store.take_over(key) {
            Ok(Some(journal)) => journal,
            outcome => {
                self.shared.directory.remove(key);
                return outcome.map(|_| None);
            }
        };
        let mut report = Recovery::default();
        let replayed = self.rebuild(cx, vec![journal], &mut report);
        if let Some(error) = report.failed.pop() {
            return Err(error);
        }
        let marks = self.start_rebuilt(cx, replayed, &mut report);
        if let Some(error) = report.failed.pop() {
            return Err(error);
        }
        // Its sends waiting in the outbox, now that it is registered.
        let sends = self.store.outbox_to(key)?;
        self.deliver_untaken(cx, sends, &marks)?;
        self.recovered.fetch_add(1, Relaxed);
        Ok(report.resumed.pop())
    }

    /// Rebuilds each journal claimed (in the directory, as `CLAIMED`) by
    /// replaying it, and gives each a PID; one that cannot be rebuilt is
    /// listed in the report and its key let go.
    fn rebuild(
        &self,
        cx: &Context,
        claimed: Vec<Journal>,
        report: &mut Recovery,
    ) -> Vec<(Replayed, Option<u64>, Pid)> {
        let mut replayed: Vec<(Replayed, Option<u64>, Pid)> = Vec::new();

        let kinds = self.kinds.read();
        for journal in claimed {
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
        replayed
    }

    /// Spawns each rebuilt process under its PID, with what it must be
    /// handed again.
    /// Starts the clock, then spawns the rebuilt processes with what each
    /// must be handed again; the marks of each (by key): outbox entries at
    /// or below them were taken already (an entry that outlived the
    /// record that took it) and are removed instead of sent.
    fn start_rebuilt(
        &self,
        cx: &Context,
        replayed: Vec<(Replayed, Option<u64>, Pid)>,
        report: &mut Recovery,
    ) -> HashMap<String, HashMap<String, u64>> {
        // The clock starts here (in a simulation, after the latest time the
        // journals recorded), before any process steps.
        let latest = replayed.iter().filter_map(|(r, _, _)| r.last_at_ms).max();
        self.shared.clock.anchor(cx.now(), latest);
        let plans = resume_plans(&replayed, report);
        let marks = replayed
            .iter()
            .map(|(r, _, _)| (r.key.to_string(), r.state.marks.clone()))
            .collect();
        self.spawn_resumed(cx, replayed, plans, report);
        marks
    }

    fn spawn_resumed(
        &self,
        cx: &Context,
        replayed: Vec<(Replayed, Option<u64>, Pid)>,
        plans: Vec<Plan>,
        report: &mut Recovery,
    ) {
        for ((r, every, pid), (resume, queued)) in replayed.into_iter().zip(plans) {
            let key = r.key.clone();
            let kind = r.kind.clone();
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
                    let receipt = Receipt::settled(key.clone());
                    report
                        .resumed
                        .push(Spawned::new(key, &kind, completion, receipt));
                }
                Err(e) => {
                    self.shared.directory.remove(&*key);
                    report.failed.push(DurableError::Submit(e.to_string()));
                }
            }
        }
    }

    /// The outbox, once every resumed process is registered: entries the
    /// rebuilt processes took already are removed, the rest sent in order.
    fn send_outbox(
        &self,
        cx: &Context,
        marks: &HashMap<String, HashMap<String, u64>>,
    ) -> Result<channel::Delivery, DurableError> {
        // Only now, with every resumed process registered, the outbox: a
        // send released while its receiver was not yet reachable was
        // committed before that release, so it is in what is read here
        // (`channel.rs`). Receivers take each sender's sends in order
        // whatever path brings them first.
        let sends = self.store.outbox()?;
        self.deliver_untaken(cx, sends, marks)
    }

    /// Sends `sends` in order, but those the rebuilt processes took
    /// already (at or below their marks), which are removed instead.
    fn deliver_untaken(
        &self,
        cx: &Context,
        mut sends: Vec<crate::store::Outgoing>,
        marks: &HashMap<String, HashMap<String, u64>>,
    ) -> Result<channel::Delivery, DurableError> {
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
        channel::deliver(&self.shared, cx, sends)
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
}

/// What one resumed process is handed again: its pending timers, and as
/// its first inputs the commands that were in flight (interrupted).
type Plan = (Vec<RecordedEffect>, Vec<(RecordedInput, Option<Ack>)>);

/// The plan of each rebuilt process, decided from its rebuilt state.
fn resume_plans(replayed: &[(Replayed, Option<u64>, Pid)], report: &mut Recovery) -> Vec<Plan> {
    // What each process must be handed again, decided from its rebuilt
    // state: its pending timers, and as its first inputs the commands
    // that were in flight (interrupted).
    let mut plans = Vec::with_capacity(replayed.len());
    for (r, _, _) in replayed {
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
    plans
}
