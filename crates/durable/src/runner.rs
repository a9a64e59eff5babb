//! The engine process that runs one durable process: write-ahead, then
//! release.
//!
//! Protocol, per batch:
//! 1. Inputs (messages, timers, command answers, the start) are queued as
//!    they arrive; a message from a durable process goes through the
//!    channel's admission first (`channel.rs`: the sender's next number is
//!    taken, a copy dropped, a later number held until the gap fills).
//! 2. When no record is in flight, the queued inputs are stepped (through
//!    `state::step_batch`) at one recorded time, and the effects the steps
//!    ask for are *held*. The record (inputs, time, effects) is yielded as
//!    the journal's command (`commit.rs`), and the process waits.
//! 3. When the command completes (the record is durable), the held effects
//!    are released in order: sends, timers, commands, the outcome; and the
//!    receipts of the messages from outside in that record are signalled.
//!    If the write failed, nothing is released and the process ends with
//!    the error: its last durable record is where a recovery resumes.
//!
//! Inputs that arrive while a record is in flight wait for the next one;
//! under load a record holds many inputs, so there are fewer records than
//! inputs.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Instant;

use dashmap::DashMap;
use sched::command::{CommandError, CommandId};
use sched::timer::TimerId;
use sched::{BoxError, Event, Events, Output, Pid, Process, Tag};

use crate::channel::Inbound;
use crate::clock::Clock;
use crate::commit::{Latency, Writer};
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

/// A message from a durable process.
pub(crate) struct Envelope {
    pub(crate) from: Arc<str>,
    pub(crate) seq: u64,
    pub(crate) body: Vec<u8>,
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
    held: Vec<Held>,
    acks: Vec<Ack>,
    since: Instant,
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
    in_flight: Option<InFlight>,
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
        Runner {
            key,
            created: start.created,
            process,
            state,
            shared,
            queued: start.queued,
            inbound: Inbound::default(),
            in_flight: None,
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

    /// Steps the queued inputs into a record and yields it, if none is in
    /// flight.
    fn pump(&mut self, out: &mut Output<'_>) {
        if self.in_flight.is_some() || self.queued.is_empty() || self.finished {
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
        let sent = record
            .effects
            .iter()
            .filter_map(|effect| match effect {
                RecordedEffect::Send { to, seq, body } => Some(Outgoing {
                    from: self.key.to_string(),
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
        out.yield_command(self.shared.command, JOURNAL_TAG, Box::new(append));
        self.in_flight = Some(InFlight {
            held,
            acks: acks.into_iter().flatten().collect(),
            since: Instant::now(),
        });
    }

    fn committed(
        &mut self,
        result: Result<(), DurableError>,
        out: &mut Output<'_>,
    ) -> Result<(), BoxError> {
        let Some(flight) = self.in_flight.take() else {
            return Ok(());
        };
        if let Err(e) = result {
            self.finished = true;
            for ack in flight.acks {
                ack.settle(Err(e.clone()));
            }
            return Err(
                format!("the journal write failed, nothing of the step was released: {e}").into(),
            );
        }
        self.shared.durable.record(flight.since.elapsed());
        for ack in flight.acks {
            ack.settle(Ok(()));
        }
        self.release(flight.held, out)
    }

    fn release(&mut self, held: Vec<Held>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for mut h in held {
            match h.effect {
                RecordedEffect::Command { id, tag, .. } => {
                    if let Some(encode) = h.answer {
                        self.answers.insert(tag, encode);
                    }
                    let data = h.data.take().unwrap_or_else(|| Box::new(()));
                    out.yield_command(CommandId(id), Tag(tag), data);
                }
                effect => self.release_effect(effect, out)?,
            }
        }
        Ok(())
    }

    fn release_effect(
        &mut self,
        effect: RecordedEffect,
        out: &mut Output<'_>,
    ) -> Result<(), BoxError> {
        match effect {
            RecordedEffect::Send { to, seq, body } => {
                let delivered = self.shared.running_pid(&to).is_some_and(|pid| {
                    let envelope = Envelope {
                        from: self.key.clone(),
                        seq,
                        body,
                    };
                    out.send(pid, envelope).is_ok()
                });
                if !delivered {
                    // The outbox keeps it: the receiver is handed it when
                    // it starts (spawned or recovered), or by a recovery.
                    self.shared.undelivered.fetch_add(1, Relaxed);
                    tracing::debug!(
                        from = &*self.key,
                        to,
                        seq,
                        "a send's receiver does not run here; the outbox keeps it"
                    );
                }
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
                let result = result.map(drop).map_err(|e| match e {
                    // The writer fails a record with the store's typed
                    // error; anything else is the engine's.
                    CommandError::Failed(e) => match e.downcast::<DurableError>() {
                        Ok(e) => *e,
                        Err(e) => DurableError::Store(e.to_string()),
                    },
                    other => DurableError::Store(other.to_string()),
                });
                self.committed(result, out)?;
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
                        "a durable process takes messages only through Durability::tell or Effects::send; one was dropped"
                    ),
                },
            },
            Event::Timer { id, tag } if self.live_timers.get(&tag.0) == Some(&id) => {
                self.live_timers.remove(&tag.0);
                self.queued.push((RecordedInput::Timer(tag.0), None));
            }
            Event::Cancel => {
                // The scheduler shuts down: the journal holds everything
                // released, so the process resumes on recovery. The
                // receipts of what it had not written say so: the record
                // in flight may still be written (the writer writes what
                // is queued before it stops), the queued inputs never are.
                if let Some(flight) = self.in_flight.take() {
                    for ack in flight.acks {
                        ack.settle(Err(DurableError::InDoubt(self.key.to_string())));
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
        let held = self.inbound.len() as u64;
        if held > 0 {
            // Their senders' outbox entries keep them for the next run.
            self.shared.held.fetch_sub(held, Relaxed);
        }
        if let Some(pid) = self.pid {
            self.shared.closed.fetch_add(1, SeqCst);
            self.shared
                .directory
                .remove_if(&*self.key, |_, p| *p == pid);
        }
    }
}
