//! The checks of a round whose processes have all ended: each process
//! against its script, the scheduler's counters against what the
//! processes saw, and the ledgers of messages, completions and notices.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering::SeqCst;

use sched::message::SendErrorKind;
use sched::prelude::*;
use sched::process::Outcome;

use crate::check::{check_process, Ended};
use crate::delayed_order::{check_delayed_order, DelayedSent};
use crate::feeder::FeederLog;
use crate::ledger::{check_completions, check_messages, Completions, Issued, Messages};
use crate::notices::{check_notices, Notices, OutsideRec, Party};
use crate::process::{Log, TERMINATE_ACCEPTED, TERMINATE_TOO_LATE};
use crate::round::Refused;
use crate::shared::{lock, DeadLetter, Shared, Tracked};
use crate::tally::Tally;
use crate::violations::Violations;

/// What a round recorded outside [`Shared`].
pub(crate) struct Records<'a> {
    /// Every admitted process, with its outcome.
    pub(crate) ended: &'a [(Tracked, Option<Outcome>)],
    /// Their logs, in the same order.
    pub(crate) logs: &'a [Log],
    pub(crate) refused: &'a [Refused],
    pub(crate) feeder: &'a FeederLog,
    /// The mailboxes were bounded (so `Full` refusals are expected).
    pub(crate) bounded: bool,
}

/// Every check of a round whose processes have all ended.
pub(crate) fn check_all(
    scheduler: &Scheduler,
    shared: &Shared,
    records: &Records<'_>,
    tally: &mut Tally,
    violations: &mut Violations,
) {
    let Records {
        ended,
        logs,
        refused,
        feeder,
        bounded,
    } = *records;
    let hooked = std::mem::take(&mut *lock(&shared.ended));
    // Ended otherwise than by its script: terminated, or finished on a
    // cancel.
    let mut loose = HashMap::new();
    let mut steps = 0;
    let mut upgrades = 0;
    for ((tracked, outcome), log) in ended.iter().zip(logs) {
        let outcome = outcome
            .as_ref()
            .expect("no hang: every process has an outcome");
        let how = check_process(
            tracked,
            outcome,
            log,
            hooked.get(&tracked.pid.id()),
            violations,
        );
        loose.insert(
            tracked.pid,
            matches!(how, Ended::Terminated | Ended::OnCancel),
        );
        tally.ended(how);
        steps += tracked.observed.steps.load(SeqCst);
        upgrades += u64::from(tracked.observed.upgrades.load(SeqCst));
        match tracked.observed.terminate.load(SeqCst) {
            TERMINATE_ACCEPTED => tally.terminations_accepted += 1,
            TERMINATE_TOO_LATE => tally.terminations_too_late += 1,
            _ => {}
        }
        if tracked.parent.is_some() {
            tally.spawned += 1;
        } else {
            tally.submitted += 1;
        }
    }
    for r in refused {
        let o = &r.observed;
        let (inits, closes, steps) = (
            o.inits.load(SeqCst),
            o.closes.load(SeqCst),
            o.steps.load(SeqCst),
        );
        if (inits, closes, steps) != (1, 0, 0) || hooked.contains_key(&r.pid.id()) {
            violations.push(format!(
                "{}: refused by init, yet init ran {inits} times, close {closes} times, \
                 step {steps} times, on_complete saw {:?}",
                r.pid,
                hooked.get(&r.pid.id())
            ));
        }
        tally.refused_submissions += 1;
    }
    for pid in shared.leftover_tokens() {
        if loose.get(&pid) != Some(&true) {
            violations.push(format!(
                "{pid} asked for a message nobody sent, and ended by its script"
            ));
        }
    }
    violations.extend(std::mem::take(&mut *lock(&shared.violations)));
    violations.extend(feeder.violations.iter().cloned());

    let stats = scheduler.stats();
    let totals = stats.totals();
    let dead = std::mem::take(&mut *lock(&shared.dead));
    let discarded: u64 = logs.iter().map(|l| l.discarded.len() as u64).sum();
    let expected = (
        steps,
        ended.len() as u64,
        dead.len() as u64,
        discarded,
        upgrades,
        0,
    );
    let counted = (
        totals.steps,
        totals.completed,
        stats.dead_letters,
        totals.discarded_yields,
        totals.upgrades,
        stats.live_processes,
    );
    if counted != expected {
        violations.push(format!(
            "the scheduler's stats (steps, completed, dead letters, discarded yields, \
             upgrades, live) are {counted:?}, the processes saw {expected:?}"
        ));
    }
    tally.steps += steps;
    tally.upgrades += upgrades;

    let mut messages = Messages::default();
    let mut completions = Completions::default();
    let mut delayed_sent: Vec<DelayedSent> = Vec::new();
    let mut delayed_received = Vec::new();
    for ((tracked, _), log) in ended.iter().zip(logs) {
        messages.sent.extend(&log.sent);
        messages.cancelled.extend(&log.cancelled);
        delayed_sent.extend(&log.delayed);
        delayed_received.push((tracked.pid, log.delayed_received.clone()));
        let d = &mut tally.delayed;
        d.refused += log.delayed_refused;
        d.after_sender_ended += log.after_sender_ended;
        d.bombs_sent += log.bombs_sent;
        d.bombs_cancelled += log.bombs_cancelled;
        messages
            .refused
            .extend(log.refused.iter().map(|(id, _)| *id));
        messages.received.extend(&log.received);
        tally.sent_by_steps += log.sent.len() as u64;
        tally.sent_by_steps_solicited += log.sent_solicited;
        for (_, kind) in &log.refused {
            tally.refused_send(*kind);
        }
        let was_loose = loose[&tracked.pid];
        for &(tag, kind) in &log.issued {
            completions.issued.push(Issued {
                tag,
                issuer: tracked.pid,
                kind,
                terminated: was_loose,
            });
            *tally.issued.entry(kind).or_default() += 1;
        }
        completions.discarded.extend(&log.discarded);
        completions.seen.extend(&log.seen);
    }
    messages.sent.extend(&feeder.sent);
    messages
        .refused
        .extend(feeder.refused.iter().map(|(id, _)| *id));
    tally.sent_by_feeder += feeder.sent.len() as u64;
    tally.sent_by_feeder_solicited += feeder.sent_solicited;
    for (_, kind) in &feeder.refused {
        tally.refused_send(*kind);
    }
    let mut notices = gather_notices(ended, logs, &loose);
    for letter in dead {
        match letter {
            DeadLetter::Message { pid, id, to } => {
                if pid != to {
                    violations.push(format!("message {id} to {to} was dead-lettered at {pid}"));
                }
                messages.dead.push(id);
            }
            DeadLetter::Completion { pid, tag } => completions.dead.push((tag, pid)),
            DeadLetter::Down(down) => notices.downs.push(down),
            DeadLetter::Exit(exit) => notices.exits.push(exit),
            DeadLetter::Request(request) => notices.requests.push(request),
            DeadLetter::Timer { .. } => tally.timers_dead += 1,
            DeadLetter::Reply(reply) => notices.replies.push(reply),
        }
    }
    completions.stale = std::mem::take(&mut *lock(&shared.stale));
    if !bounded {
        let full = messages_refused_full(logs, feeder);
        if full != 0 {
            violations.push(format!(
                "{full} sends refused as full with unbounded mailboxes"
            ));
        }
    }
    let delayed_ids: HashSet<u64> = delayed_sent.iter().map(|d| d.id).collect();
    let d = &mut tally.delayed;
    d.sent += delayed_ids.len() as u64;
    d.cancelled += messages.cancelled.len() as u64;
    d.received += delayed_received
        .iter()
        .map(|(_, r)| r.len() as u64)
        .sum::<u64>();
    d.dead += messages
        .dead
        .iter()
        .filter(|id| delayed_ids.contains(id))
        .count() as u64;
    d.bombs_dead += shared.bombs_dead.load(SeqCst);
    d.ordered_pairs += check_delayed_order(&delayed_sent, &delayed_received, violations);
    tally.add_messages(check_messages(&messages, violations));
    tally.add_completions(check_completions(&completions, violations));
    tally.notices.add(check_notices(&notices, violations));
}

/// The notices the processes logged, and each process's part in them.
fn gather_notices(
    ended: &[(Tracked, Option<Outcome>)],
    logs: &[Log],
    loose: &HashMap<sched::Pid, bool>,
) -> Notices {
    let mut n = Notices::default();
    for ((tracked, outcome), log) in ended.iter().zip(logs) {
        let p = &log.peers;
        let reason = outcome.as_ref().map_or(ExitReason::NoProcess, reason_of);
        n.parties.push(Party {
            pid: tracked.pid,
            reason,
            loose: loose[&tracked.pid],
            cancels_seen: p.cancels_seen,
            replied: p.replied.clone(),
        });
        n.monitors.extend(&p.monitors);
        n.demonitors.extend(&p.demonitors);
        n.downs.extend(&p.downs);
        n.links.extend(&p.links);
        n.exits.extend(&p.exits);
        n.cancels.extend(&p.cancels);
        n.asks.extend(&p.asks);
        n.replies.extend(p.replies.iter().cloned());
        n.requests.extend(&p.requests);
        n.late_exits.extend(&p.late_exits);
        n.unlinks += p.unlinks;
        n.unlinks_racing += p.unlinks_racing;
        n.markers_seen += p.markers_seen;
        n.mid_batch_demonitors += p.mid_batch_demonitors;
        n.timers_seen += p.timers_seen;
        n.timers_cancelled += p.timers_cancelled;
        if let Some((monitor, live)) = &tracked.outside {
            n.outside.push(OutsideRec {
                target: tracked.pid,
                live: *live,
                got: monitor.try_take().map(|d| (d.pid, d.reason)),
            });
        }
    }
    n
}

/// How a process ended, as its monitors must report it.
fn reason_of(outcome: &Outcome) -> ExitReason {
    match outcome {
        Ok(_) => ExitReason::Normal,
        Err(ExitError::Terminated) => ExitReason::Terminated,
        Err(ExitError::Cancelled) => ExitReason::Cancelled,
        Err(ExitError::Panicked { .. }) => ExitReason::Panicked,
        Err(ExitError::Linked { .. }) => ExitReason::Linked,
        Err(_) => ExitReason::Error,
    }
}

fn messages_refused_full(logs: &[Log], feeder: &FeederLog) -> usize {
    logs.iter()
        .flat_map(|l| &l.refused)
        .chain(&feeder.refused)
        .filter(|(_, kind)| *kind == SendErrorKind::Full)
        .count()
}
