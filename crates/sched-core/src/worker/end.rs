//! A process's end: its queue closed (what is left is offered to its
//! `unread`, and what it does not take are dead letters), its `close`, its
//! PID unregistered and its outcome reported.

use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::contract::event::Event;
use crate::contract::outcome::{ExitError, Outcome};
use crate::contract::pending::drop_unwanted;
use crate::contract::process::{close_guarded, unread_guarded};
use crate::engine::stats::bump;
use crate::panic_guard::{drop_payload, drop_user_value};
use crate::record::state::FORCE;
use crate::record::{Body, RecordRef};

use super::Worker;

impl Worker {
    /// Ends the processes whose kill tickets are waiting (see
    /// `Shared::end_soon`): each one this worker can take out of its turn
    /// (`claim_killed`), at once. A ticket whose process a worker took
    /// first is dropped: that worker ends it.
    #[cold]
    #[inline(never)]
    pub(super) fn reap_killed(&mut self) {
        while let Some((record, queued)) = self.shared.kills.pop() {
            if let Some(flags) = record.state.claim_killed(queued) {
                // SAFETY: `claim_killed` made this worker the process's
                // owner (`READY -> RUNNING`, as `start_step` does); the
                // queue entry still holding it is stale and its pop only
                // clears the mark, never touching the body.
                unsafe {
                    record.with_body(|body| self.end_killed(&record, body, flags));
                }
            } else {
                // A ticket for a waiting process carries the schedule's
                // reference, and nothing else can take a ready process
                // that no run queue holds: its claim cannot fail.
                debug_assert!(queued, "a ticket without a queue entry lost its claim");
            }
        }
    }

    /// Ends a process that was terminated, or forced at shutdown (which
    /// names it, with its type, in a warning).
    pub(super) fn end_killed(&mut self, record: &RecordRef, body: &mut Body, flags: u32) {
        if flags & FORCE != 0 {
            if let Some(process) = body.process.get() {
                // `type_name` is the user's to override: guarded.
                let type_name = catch_unwind(AssertUnwindSafe(|| process.type_name()))
                    .unwrap_or_else(|panic| {
                        drop_payload(panic);
                        "(its type_name panicked)"
                    });
                self.shared.control.name_forced(record, type_name);
            }
        }
        self.end(record, body, Err(kill_error(flags)));
    }

    /// Ends the process: closes its queue (what is left are dead letters),
    /// calls `close`, unregisters its PID and reports its outcome.
    pub(super) fn end(&mut self, record: &RecordRef, body: &mut Body, mut outcome: Outcome) {
        // A terminate that came from a linked process's end says so.
        if matches!(outcome, Err(ExitError::Terminated)) {
            if let Some((pid, reason)) = record.relations.linked_exit() {
                outcome = Err(ExitError::Linked { pid, reason });
            }
        }
        record.state.complete();
        let mut dead = body
            .extras
            .as_mut()
            .and_then(|x| x.existing_others())
            .map(|others| others.unread.take_all())
            .unwrap_or_default();
        // SAFETY: `end` runs with the body borrowed, so we own the process.
        let closed = unsafe { record.close_events() };
        dead.extend(closed);
        // What a step would never have seen is no dead letter either: a
        // cancelled timer's event, a removed monitor's down, an answer
        // after its ask's timeout.
        if body.filters_events {
            drop_unwanted(&mut dead, &mut body.extras, &self.shared.timers, record.pid);
        }
        // The process's own timers end with it (their memory too).
        let extras = body.extras.take();
        if let Some(extras) = &extras {
            if !extras.timers.is_empty() {
                let cancelled = extras
                    .timers
                    .iter()
                    .filter_map(|id| self.shared.timers.cancel(id))
                    .collect();
                self.shared.timers.drop_timers(cancelled);
            }
        }
        // Most processes end with nothing left unread: no call for them.
        if !dead.is_empty() {
            offer_unread(record, body, &mut dead, &mut outcome);
            if !dead.is_empty() {
                self.shared.dead_letters(record.pid, dead);
            }
        }
        if let Some(process) = record.take_process(body) {
            if let Err(message) = close_guarded(process) {
                tracing::debug!(pid = %record.pid, %message, "close panicked");
                if outcome.is_ok() {
                    outcome = Err(ExitError::Panicked { message });
                }
            }
        }
        // Its PID leaves the table, then its monitors fire and its names are
        // freed: a watcher that reacts (a supervisor restarting it under
        // the same name) finds the name available.
        let reason = crate::contract::down::ExitReason::of(&outcome);
        self.shared.retire(
            record,
            reason,
            crate::contract::outcome::detail_of(&outcome),
        );
        // The monitors it held on others go, and with them the references
        // to this record they kept.
        let others = extras.as_ref().and_then(|x| x.others_ref());
        for monitor in others.iter().flat_map(|others| others.monitoring.iter()) {
            self.shared.monitors.remove(&self.shared, *monitor);
        }
        drop(extras);
        // This worker's cache no longer keeps the ended record alive (other
        // workers' caches drop it when they next send to the PID or reuse
        // the entry; either way it holds no process and no result).
        self.local.forget_route(record.pid);
        bump(&self.counters().completed, 1);
        tracing::debug!(pid = %record.pid, %reason, "ended");
        if let Some(observer) = &mut self.observer {
            observer.ended(record.pid, reason);
        }
        // The slot is free before the hook runs, so a hook may start a
        // replacement even at the process limit. A shutdown that returns
        // has still seen every hook call: it joins the workers, and this
        // worker runs the hook before it looks for work (or exits) again.
        self.shared.live.release_live(&self.shared);
        self.shared.hooks.completed(
            crate::engine::Context::of(&self.shared),
            record.pid,
            &outcome,
        );
        if let Some(unwanted) = record.slot.set(outcome, RecordRef::spare(record)) {
            drop_user_value(unwanted, record.pid, "a result nobody waits for");
        }
    }
}

/// Offers what the process left unread to it (`Process::unread`): its
/// queue is closed, so nothing can join what it is given, and a send from
/// now on fails with its message back. A panic there ends it `Panicked`.
#[cold]
#[inline(never)]
fn offer_unread(record: &RecordRef, body: &mut Body, dead: &mut Vec<Event>, outcome: &mut Outcome) {
    let Some(process) = body.process.get_mut() else {
        return;
    };
    if let Err(message) = unread_guarded(process, dead) {
        tracing::debug!(pid = %record.pid, %message, "unread panicked");
        if outcome.is_ok() {
            *outcome = Err(ExitError::Panicked { message });
        }
    }
}

pub(super) fn kill_error(flags: u32) -> ExitError {
    if flags & FORCE != 0 {
        ExitError::Cancelled
    } else {
        ExitError::Terminated
    }
}
