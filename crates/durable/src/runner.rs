//! The engine process that runs one durable process: write-ahead, then
//! release.
//!
//! Protocol, per record:
//! 1. Inputs (messages, timers, command answers, the start) are queued as
//!    they arrive; a message from a durable process goes through the
//!    channel's admission first (`channel.rs`: the sender's next number is
//!    taken, a copy dropped, a later number held until the gap fills).
//! 2. The queued inputs are stepped (through `state::step_batch`) at one
//!    recorded time, and the effects the steps ask for are *held*. The
//!    record (inputs, time, effects) is yielded as the journal's command
//!    (`commit.rs`). Up to [`MAX_IN_FLIGHT`] records of one process may be
//!    in flight: the next one is stepped without waiting for the sync of
//!    the one before (they are written in order).
//! 3. Sends to durable processes running here go *early*: with the record,
//!    as the writer queues it, before it is durable (`commit.rs`). Their
//!    receiver steps on them at once, and holds its own effects until its
//!    own record is durable, which is never before the sender's (the
//!    writer's rule). So a chain of durable sends on one node shares syncs
//!    instead of paying one per hop in a row. A send goes early only if
//!    every earlier send to the same receiver went early to the same
//!    running process or is durable already (`prior_settled` says which);
//!    otherwise it waits for its record's sync, as do the sends after it.
//! 4. When the command completes (the record is durable), the held effects
//!    are released in order: sends that did not go early (live to a
//!    running receiver, else left to the outbox), or went early to a
//!    process that no longer has the key (sent again to the one that has
//!    it now), timers, commands, the outcome; and the receipts of the
//!    messages from outside in that record are signalled. If the write
//!    failed, nothing is released and the process ends with the error
//!    (and the records after it, and those that stepped on their early
//!    sends, fail unwritten): its last durable record is where a recovery
//!    resumes.
//!
//! Under load a record holds many inputs, so there are fewer records than
//! inputs.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Instant;

use dashmap::DashMap;
use sched::command::{CommandError, CommandId};
use sched::engine::Context;
use sched::timer::TimerId;
use sched::{BoxError, Event, Events, Output, Pid, Process, Tag};

use crate::channel::Inbound;
use crate::clock::Clock;
use crate::commit::{HandOver, Latency, Submission, Unwritten, Writer};
use crate::error::DurableError;
use crate::process::{AnswerEncoder, Erased, Held, JOURNAL_TAG};
use crate::receipt::Ack;
use crate::record::{Record, RecordedEffect, RecordedFailure, RecordedInput};
use crate::state::{step_batch, Snapshot, State};
use crate::store::{Append, Created, Outgoing, Store};

/// What every runner of one `Durability` shares.
pub(crate) struct Shared {
    /// Running durable processes: key → PID. Sharded, so that sends do
    /// not meet on one lock.
    pub(crate) directory: DashMap<String, Pid>,
    /// The journal's command id.
    pub(crate) command: CommandId,
    pub(crate) writer: Arc<Writer>,
    /// From yielding a record to its commit.
    pub(crate) durable: Latency,
    pub(crate) duplicates: AtomicU64,
    pub(crate) undelivered: AtomicU64,
    /// Messages `StandIn`s took and dropped without a journal taking
    /// them (`DurableStats::stand_in_dropped`).
    pub(crate) stand_in_dropped: AtomicU64,
    /// Sends held by their receivers until an earlier one arrives.
    pub(crate) held: AtomicU64,
    /// Runners closed so far: moved before a runner leaves the directory,
    /// so that a recovery can tell whether one ended while it read the
    /// store (`Durability::claim`).
    pub(crate) closed: AtomicU64,
    /// The store, for a receiver's first-contact question
    /// (`channel.rs`) and the outbox deliveries.
    pub(crate) store: Arc<dyn Store>,
    /// The time records are stepped at and timers set by (`clock.rs`).
    pub(crate) clock: Clock,
    /// The number the next runner is told apart by (its incarnation).
    pub(crate) incarnations: AtomicU64,
}

impl Shared {
    /// The PID of the durable process `key` running here; `None` also
    /// while a recovery has claimed the key and not yet started it.
    pub(crate) fn running_pid(&self, key: &str) -> Option<Pid> {
        self.directory
            .get(key)
            .map(|pid| *pid)
            .filter(|pid| *pid != CLAIMED)
    }
}

/// What a recovery puts in the directory for a key it claimed, until the
/// key's process is replayed and gets its PID (`Durability::claim`).
pub(crate) const CLAIMED: Pid = Pid::OUTSIDE;

/// The most records one durable process has in flight (stepped, not yet
/// durable).
pub(crate) const MAX_IN_FLIGHT: usize = 8;

/// A message from a durable process.
pub(crate) struct Envelope {
    pub(crate) from: Arc<str>,
    pub(crate) seq: u64,
    pub(crate) body: Vec<u8>,
    /// Sent early: the sender's (incarnation, record) that holds it, not
    /// yet durable when it was sent. `None`: durable.
    pub(crate) after: Option<(u64, u64)>,
    /// Every earlier send of this sender to this receiver was durable when
    /// this one left (or this is the first): if the receiver has taken
    /// nothing from the sender, the store's outbox tells whether an
    /// earlier one is on its way. `false`: the one before went early to
    /// the same process, and is on its way.
    pub(crate) prior_settled: bool,
}

impl Envelope {
    /// A send that is durable (its record committed), for any path.
    pub(crate) fn durable(from: Arc<str>, seq: u64, body: Vec<u8>) -> Envelope {
        Envelope {
            from,
            seq,
            body,
            after: None,
            prior_settled: true,
        }
    }
}

/// A message from outside, with the receipt to signal once it is durable.
pub(crate) struct Tell {
    pub(crate) body: Vec<u8>,
    pub(crate) ack: Ack,
}

/// How a durable process ended, as its engine completion carries it.
pub(crate) enum Ending {
    /// Done, with its outcome's bytes.
    Done(Vec<u8>),
    /// The scheduler shut down first: the process resumes on recovery.
    Suspended,
}

struct InFlight {
    /// The record's number.
    seq: u64,
    /// The effects to release once it is durable, each send with the
    /// process it went to early, if it did.
    held: Vec<(Held, Option<Pid>)>,
    /// Set when an early send of it was refused by the engine: its early
    /// sends are sent again once it is durable.
    missed: Arc<AtomicBool>,
    acks: Vec<Ack>,
    since: Instant,
    /// Its completion, once it came (completions are taken in order).
    result: Option<Result<(), DurableError>>,
}

pub(crate) struct Runner {
    key: Arc<str>,
    /// What the process was created from, until its first record is
    /// written.
    created: Option<Created>,
    process: Box<dyn Erased>,
    state: State,
    shared: Arc<Shared>,
    queued: Vec<(RecordedInput, Option<Ack>)>,
    /// Sends from other durable processes that wait for an earlier one.
    inbound: Inbound,
    /// Records stepped and not yet durable, in order.
    in_flight: VecDeque<InFlight>,
    /// This runner's number among every runner of its `Durability`.
    incarnation: u64,
    /// The records whose early sends the queued inputs came from: per
    /// incarnation, the latest record.
    after: HashMap<u64, u64>,
    /// Per receiver with early sends not yet durable: the process they
    /// went to, and the record of the latest.
    tentative: HashMap<String, (Pid, u64)>,
    /// Per receiver: how many sends wait for their record's sync (while
    /// any does, the later ones wait too).
    deferred: HashMap<String, usize>,
    /// On recovery: the effects to release before anything else (timers
    /// to arm again).
    resume: Vec<RecordedEffect>,
    live_timers: HashMap<u64, TimerId>,
    answers: HashMap<u64, AnswerEncoder>,
    pid: Option<Pid>,
    /// The engine process has finished (done, failed or suspended).
    finished: bool,
    /// Snapshot after every this many records (registered with
    /// snapshots).
    snapshot_every: Option<u64>,
}

/// How a runner starts: a new process, or one rebuilt by a recovery.
pub(crate) struct Start {
    /// What a new process was created from (`None` when resumed).
    pub(crate) created: Option<Created>,
    /// Its first inputs.
    pub(crate) queued: Vec<(RecordedInput, Option<Ack>)>,
    /// Effects to release before anything else (timers armed again).
    pub(crate) resume: Vec<RecordedEffect>,
    /// Snapshot after every this many records.
    pub(crate) snapshot_every: Option<u64>,
}

impl Runner {
    pub(crate) fn new(
        key: Arc<str>,
        process: Box<dyn Erased>,
        state: State,
        shared: Arc<Shared>,
        start: Start,
    ) -> Runner {
        let incarnation = shared.incarnations.fetch_add(1, Relaxed);
        Runner {
            key,
            created: start.created,
            process,
            state,
            shared,
            queued: start.queued,
            inbound: Inbound::default(),
            in_flight: VecDeque::new(),
            incarnation,
            after: HashMap::new(),
            tentative: HashMap::new(),
            deferred: HashMap::new(),
            resume: start.resume,
            live_timers: HashMap::new(),
            answers: HashMap::new(),
            pid: None,
            finished: false,
            snapshot_every: start.snapshot_every,
        }
    }

    /// A snapshot of the state after the record just stepped, if one is
    /// due.
    fn snapshot(&self) -> Option<Vec<u8>> {
        let every = self.snapshot_every?;
        if self.state.ended || !self.state.next_record.is_multiple_of(every) {
            return None;
        }
        match self.process.save()? {
            Ok(user) => {
                let snapshot = Snapshot {
                    state: self.state.clone(),
                    user,
                };
                postcard::to_stdvec(&snapshot).ok()
            }
            Err(e) => {
                tracing::warn!(
                    key = &*self.key,
                    "no snapshot: the state did not serialize: {e}"
                );
                None
            }
        }
    }

    /// Steps the queued inputs into a record and yields it, unless
    /// [`MAX_IN_FLIGHT`] are in flight.
    fn pump(&mut self, out: &mut Output<'_>) {
        if self.in_flight.len() >= MAX_IN_FLIGHT
            || self.queued.is_empty()
            || self.finished
            || self.state.ended
        {
            return;
        }
        let at_ms = self.shared.clock.ms_at(out.now());
        let (inputs, mut acks): (Vec<_>, Vec<_>) =
            std::mem::take(&mut self.queued).into_iter().unzip();
        let (held, taken) = step_batch(
            &mut *self.process,
            &mut self.state,
            &self.key,
            at_ms,
            &inputs,
        );
        // Inputs after the end belong to no record: their receipts fail
        // when dropped here.
        acks.truncate(taken);
        let mut inputs = inputs;
        inputs.truncate(taken);
        let record = Record {
            at_ms,
            inputs,
            effects: held.iter().map(|h| h.effect.clone()).collect(),
        };
        let (sent, taken) = outbox_of(&self.key, &record);
        let seq = self.state.next_record;
        self.state.next_record += 1;
        let append = Append {
            key: self.key.to_string(),
            seq,
            record: record.encode(),
            created: self.created.take(),
            ended: self.state.ended,
            sent,
            taken,
            snapshot: self.snapshot(),
        };
        let mut early = Vec::new();
        let held = held
            .into_iter()
            .map(|h| {
                let went = match &h.effect {
                    RecordedEffect::Send { to, seq: n, body } => {
                        self.go_early(to, *n, body, seq, &mut early)
                    }
                    _ => None,
                };
                (h, went)
            })
            .collect();
        let missed = Arc::new(AtomicBool::new(false));
        let early = (!early.is_empty()).then(|| {
            let missed = missed.clone();
            Box::new(move |cx: &Context| {
                for (pid, envelope) in early {
                    // One the engine refused (its receiver ended, or is
                    // not started yet) is sent again once the record is
                    // durable (`release`).
                    if cx.send(pid, envelope).is_err() {
                        missed.store(true, Relaxed);
                    }
                }
            }) as HandOver
        });
        let submission = Submission {
            append,
            incarnation: self.incarnation,
            after: self.after.drain().collect(),
            early,
        };
        out.yield_command(self.shared.command, JOURNAL_TAG, Box::new(submission));
        self.in_flight.push_back(InFlight {
            seq,
            held,
            missed,
            acks: acks.into_iter().flatten().collect(),
            since: Instant::now(),
            result: None,
        });
    }

    /// Decides whether the send numbered `n` to `to`, of record `record`,
    /// goes early (added to `early`: the PID it goes to) or waits for the
    /// record's sync (`None`).
    fn go_early(
        &mut self,
        to: &str,
        n: u64,
        body: &[u8],
        record: u64,
        early: &mut Vec<(Pid, Envelope)>,
    ) -> Option<Pid> {
        let pid = self
            .shared
            .running_pid(to)
            .filter(|_| !self.deferred.contains_key(to));
        let prior_settled = match (pid, self.tentative.get(to)) {
            (Some(pid), Some(&(earlier, _))) if earlier == pid => Some(false),
            (Some(_), None) => Some(true),
            _ => None,
        };
        let (Some(pid), Some(prior_settled)) = (pid, prior_settled) else {
            *self.deferred.entry(to.to_owned()).or_insert(0) += 1;
            return None;
        };
        self.tentative.insert(to.to_owned(), (pid, record));
        early.push((
            pid,
            Envelope {
                from: self.key.clone(),
                seq: n,
                body: body.to_vec(),
                after: Some((self.incarnation, record)),
                prior_settled,
            },
        ));
        Some(pid)
    }

    /// The completion of record `seq`: records are released in order, each
    /// once it and those before it are durable.
    fn committed(
        &mut self,
        seq: Option<u64>,
        result: Result<(), DurableError>,
        out: &mut Output<'_>,
    ) -> Result<(), BoxError> {
        let flight = match seq {
            Some(seq) => self.in_flight.iter_mut().find(|f| f.seq == seq),
            None => self.in_flight.iter_mut().find(|f| f.result.is_none()),
        };
        let Some(flight) = flight else {
            return Ok(());
        };
        flight.result = Some(result);
        while self.in_flight.front().is_some_and(|f| f.result.is_some()) {
            let flight = self.in_flight.pop_front().expect("a front record");
            if let Some(Err(e)) = flight.result {
                // The records after it are not written either (`commit.rs`).
                self.shared.writer.abandon(self.incarnation, flight.seq);
                self.finished = true;
                for ack in flight.acks {
                    ack.settle(Err(e.clone()));
                }
                for later in self.in_flight.drain(..) {
                    for ack in later.acks {
                        ack.settle(Err(e.clone()));
                    }
                }
                return Err(format!(
                    "the journal write failed, nothing of the step was released: {e}"
                )
                .into());
            }
            self.shared.durable.record(flight.since.elapsed());
            for ack in flight.acks {
                ack.settle(Ok(()));
            }
            let missed = flight.missed.load(Relaxed);
            self.release(flight.seq, flight.held, missed, out)?;
            if self.finished {
                break;
            }
        }
        Ok(())
    }

    fn release(
        &mut self,
        record: u64,
        held: Vec<(Held, Option<Pid>)>,
        missed: bool,
        out: &mut Output<'_>,
    ) -> Result<(), BoxError> {
        for (mut h, went) in held {
            match h.effect {
                RecordedEffect::Command { id, tag, .. } => {
                    if let Some(encode) = h.answer {
                        self.answers.insert(tag, encode);
                    }
                    let data = h.data.take().unwrap_or_else(|| Box::new(()));
                    out.yield_command(CommandId(id), Tag(tag), data);
                }
                RecordedEffect::Send { to, seq, body } => {
                    match went {
                        Some(pid) => {
                            if self.tentative.get(&to).is_some_and(|&(_, r)| r == record) {
                                self.tentative.remove(&to);
                            }
                            // The process it went to still has the key and
                            // took it: it has it (or its journal has).
                            // (It reached a running receiver: not counted
                            // undelivered if none runs now.)
                            if missed || self.shared.running_pid(&to) != Some(pid) {
                                self.send_durable(to, seq, body, missed, out);
                            }
                        }
                        None => {
                            if let Some(waiting) = self.deferred.get_mut(&to) {
                                *waiting -= 1;
                                if *waiting == 0 {
                                    self.deferred.remove(&to);
                                }
                            }
                            self.send_durable(to, seq, body, true, out);
                        }
                    }
                }
                effect => self.release_effect(effect, out)?,
            }
        }
        Ok(())
    }

    /// Sends a durable send to its receiver if it runs here; else the
    /// outbox keeps it (counted `undelivered` if `count`).
    fn send_durable(&self, to: String, seq: u64, body: Vec<u8>, count: bool, out: &mut Output<'_>) {
        let delivered = self.shared.running_pid(&to).is_some_and(|pid| {
            out.send(pid, Envelope::durable(self.key.clone(), seq, body))
                .is_ok()
        });
        if !delivered && count {
            // The outbox keeps it: the receiver is handed it when it
            // starts (spawned or recovered), or by a recovery.
            self.shared.undelivered.fetch_add(1, Relaxed);
            tracing::debug!(
                from = &*self.key,
                to,
                seq,
                "a send's receiver does not run here; the outbox keeps it"
            );
        }
    }

    fn release_effect(
        &mut self,
        effect: RecordedEffect,
        out: &mut Output<'_>,
    ) -> Result<(), BoxError> {
        match effect {
            RecordedEffect::Send { to, seq, body } => {
                self.send_durable(to, seq, body, true, out);
            }
            RecordedEffect::Timer { tag, deadline_ms } => {
                if let Some(old) = self.live_timers.remove(&tag) {
                    out.cancel_timer(old);
                }
                let now = out.now();
                let at = Clock::instant_of(now, self.shared.clock.ms_at(now), deadline_ms);
                let id = out.set_timer(at, Tag(tag));
                self.live_timers.insert(tag, id);
            }
            RecordedEffect::CancelTimer(tag) => {
                if let Some(id) = self.live_timers.remove(&tag) {
                    out.cancel_timer(id);
                }
            }
            RecordedEffect::Command { id, tag, .. } => {
                // Only a recovered command reaches here, and those are
                // handed back as interrupted instead: never yielded again.
                tracing::debug!(
                    key = &*self.key,
                    id,
                    tag,
                    "a recovered command is not yielded again"
                );
            }
            RecordedEffect::Done(bytes) => {
                self.finished = true;
                out.finish(Ending::Done(bytes));
            }
            RecordedEffect::Failed(why) => {
                self.finished = true;
                return Err(why.into());
            }
        }
        Ok(())
    }

    fn take_event(&mut self, event: Event, out: &mut Output<'_>) -> Result<(), BoxError> {
        match event {
            Event::Completion { tag, result } if tag == JOURNAL_TAG => {
                // The writer completes a record with its number, and fails
                // it with its number and the store's typed error; anything
                // else is the engine's (for the oldest record waiting).
                let (seq, result) = match result {
                    Ok(payload) => (payload.downcast::<u64>().ok().map(|s| *s), Ok(())),
                    Err(CommandError::Failed(e)) => match e.downcast::<Unwritten>() {
                        Ok(e) => (Some(e.seq), Err(e.error)),
                        Err(e) => (None, Err(DurableError::Store(e.to_string()))),
                    },
                    Err(other) => (None, Err(DurableError::Store(other.to_string()))),
                };
                self.committed(seq, result, out)?;
            }
            Event::Completion { tag, result } => {
                let Some(encode) = self.answers.remove(&tag.0) else {
                    return Ok(());
                };
                let result = match result {
                    Ok(payload) => encode(&payload).map_err(RecordedFailure::Failed),
                    Err(e) => Err(RecordedFailure::Failed(e.to_string())),
                };
                self.queued.push((RecordedInput::Completion { tag: tag.0, result }, None));
            }
            Event::Message(package) => match package.downcast::<Envelope>() {
                Ok(envelope) => {
                    let admitted =
                        self.inbound
                            .receive(&mut self.state, &self.shared, &self.key, envelope);
                    for send in admitted {
                        if let Some((incarnation, record)) = send.after {
                            let latest = self.after.entry(incarnation).or_insert(record);
                            *latest = (*latest).max(record);
                        }
                        let from = Some((send.from.to_string(), send.seq));
                        self.queued.push((
                            RecordedInput::Message {
                                from,
                                body: send.body,
                            },
                            None,
                        ));
                    }
                }
                Err(package) => match package.downcast::<Tell>() {
                    Ok(tell) => self.queued.push((
                        RecordedInput::Message {
                            from: None,
                            body: tell.body,
                        },
                        Some(tell.ack),
                    )),
                    Err(_) => tracing::warn!(
                        key = &*self.key,
                        "a durable process takes messages only through Durability::send or Output::send; one was dropped"
                    ),
                },
            },
            Event::Timer { id, tag } if self.live_timers.get(&tag.0) == Some(&id) => {
                self.live_timers.remove(&tag.0);
                self.queued.push((RecordedInput::Timer(tag.0), None));
            }
            Event::Cancel => {
                // Records in flight the writer has not taken yet are not
                // written (nor those that stepped on their early sends):
                // a recovery resumes from what is durable, and nothing
                // writes this journal behind it.
                let not_written = self.in_flight.front().and_then(|first| {
                    self.shared.writer.abandon(self.incarnation, first.seq)
                });
                // The scheduler shuts down: the journal holds everything
                // released, so the process resumes on recovery. The
                // receipts of what it had not written say so: the record
                // in flight may still be written (the writer writes what
                // is queued before it stops), the queued inputs never are.
                for flight in self.in_flight.drain(..) {
                    let key = self.key.to_string();
                    let error = if not_written.is_some_and(|first| flight.seq >= first) {
                        DurableError::NotKept(key)
                    } else {
                        DurableError::InDoubt(key)
                    };
                    for ack in flight.acks {
                        ack.settle(Err(error.clone()));
                    }
                }
                for (_, ack) in self.queued.drain(..) {
                    if let Some(ack) = ack {
                        ack.settle(Err(DurableError::NotKept(self.key.to_string())));
                    }
                }
                self.finished = true;
                out.finish(Ending::Suspended);
            }
            _ => {}
        }
        Ok(())
    }
}

impl Process for Runner {
    type Done = Ending;
    fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        self.pid = Some(out.pid());
        for effect in std::mem::take(&mut self.resume) {
            self.release_effect(effect, out)?;
        }
        self.pump(out);
        if !self.finished {
            out.idle();
        }
        Ok(())
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            if self.finished {
                break;
            }
            self.take_event(event, out)?;
        }
        if !self.finished {
            self.pump(out);
            out.idle();
        }
        Ok(())
    }

    fn close(&mut self) {
        // Records still in flight (the process failed) are not written.
        if let Some(first) = self.in_flight.front() {
            self.shared.writer.abandon(self.incarnation, first.seq);
        }
        let held = self.inbound.len() as u64;
        if held > 0 {
            // Their senders' outbox entries keep them for the next run.
            self.shared.held.fetch_sub(held, Relaxed);
        }
        if let Some(pid) = self.pid {
            // The key stays this process's (`Durability::pid` names it)
            // until no record of it can still land in the journal: a
            // write already under way when it was abandoned lands first,
            // and only then may the key's next process here read the
            // journal and number its own records after it
            // (`Writer::after_written`).
            let (shared, key) = (Arc::clone(&self.shared), Arc::clone(&self.key));
            self.shared.writer.after_written(
                self.incarnation,
                Box::new(move || {
                    shared.closed.fetch_add(1, SeqCst);
                    shared.directory.remove_if(&*key, |_, p| *p == pid);
                }),
            );
        }
    }
}

/// What a record changes in the outbox: the sends it makes (entries in),
/// and the senders of the messages it takes (their entries out).
fn outbox_of(key: &str, record: &Record) -> (Vec<Outgoing>, Vec<(String, u64)>) {
    let sent = record
        .effects
        .iter()
        .filter_map(|effect| match effect {
            RecordedEffect::Send { to, seq, body } => Some(Outgoing {
                from: key.to_string(),
                to: to.clone(),
                seq: *seq,
                body: body.clone(),
            }),
            _ => None,
        })
        .collect();
    let taken = record
        .inputs
        .iter()
        .filter_map(|input| match input {
            RecordedInput::Message { from, .. } => from.clone(),
            _ => None,
        })
        .collect();
    (sent, taken)
}
