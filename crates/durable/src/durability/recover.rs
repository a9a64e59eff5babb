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
        let replayed = self.rebuild_claimed(cx, &mut report)?;
        // The clock starts here (in a simulation, after the latest time the
        // journals recorded), before any process steps.
        let latest = replayed.iter().filter_map(|(r, _, _)| r.last_at_ms).max();
        self.shared.clock.anchor(cx.now(), latest);
        let plans = resume_plans(&replayed, &mut report);
        // Marks of the rebuilt processes: outbox entries at or below them
        // were taken already (an entry that outlived the record that took
        // it) and are removed instead of sent.
        let marks: HashMap<String, HashMap<String, u64>> = replayed
            .iter()
            .map(|(r, _, _)| (r.key.to_string(), r.state.marks.clone()))
            .collect();
        self.spawn_resumed(cx, replayed, plans, &mut report);
        let delivery = self.send_outbox(cx, &marks)?;
        report.resent = delivery.sent;
        report.waiting = delivery.waiting;
        self.recovered
            .fetch_add(report.resumed.len() as u64, Relaxed);
        report.took = started.elapsed();
        Ok(report)
    }

    /// Rebuilds each journal this recovery claims (`claim`) by replaying
    /// it, and gives each a PID; one that cannot be rebuilt is listed in
    /// the report and its key let go.
    fn rebuild_claimed(
        &self,
        cx: &Context,
        report: &mut Recovery,
    ) -> Result<Vec<(Replayed, Option<u64>, Pid)>, DurableError> {
        let mut replayed: Vec<(Replayed, Option<u64>, Pid)> = Vec::new();

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
        Ok(replayed)
    }

    /// Spawns each rebuilt process under its PID, with what it must be
    /// handed again.
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
