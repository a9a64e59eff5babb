//! Carrying out a step's upgrade: close the old process, initialise the
//! new one, and give it the record.
//!
//! Everything here runs while the worker owns the process (inside
//! `with_body`, the state word RUNNING), exactly like the step that asked
//! for it: the state word gains no transition. A successful upgrade asks
//! for READY, as a step that continues does, so `finish_step` still
//! decides (a kill flag set meanwhile ends the *new* process, which is then
//! closed like any other); a failed one ends the process through `end`.

use crate::contract::error::UpgradeError;
use crate::contract::outcome::ExitError;
use crate::contract::process::{close_guarded, init_guarded};
use crate::contract::upgrade::Upgrade;
use crate::engine::stats::bump;
use crate::engine::upgrade::UpgradeOrder;
use crate::panic_guard::drop_user_value;
use crate::record::state::{KILL, READY};
use crate::record::{Body, RecordRef};

use super::end::kill_error;
use super::Worker;

impl Worker {
    /// Replaces the process in `body` with the one `request` carries.
    /// Returns the state to ask `finish_step` for, or `None` if the
    /// process has ended.
    ///
    /// The order is the contract's: the old `close` runs first, exactly
    /// once, whatever happens next; the new process's `close` becomes due
    /// only once its `init` has succeeded (it is then in `body`, where
    /// `end` finds it). Before closing anything, the cheap refusals:
    /// yields in the same step, a kill flag, a shutdown under way. Those
    /// end the old process as any ending does, and the new one is only
    /// dropped.
    pub(super) fn upgrade(
        &mut self,
        record: &RecordRef,
        body: &mut Body,
        request: Upgrade,
    ) -> Option<u32> {
        let pid = record.pid;
        let Upgrade {
            process: mut new,
            method,
            input,
        } = request;
        let refused = if !self.yields.is_empty() {
            let count = self.yields.len();
            bump(&self.counters().discarded_yields, count as u64);
            self.discard_yields(pid);
            Some(ExitError::Upgrade(UpgradeError::Yielded { count }))
        } else if let kill @ 1.. = record.state.load() & KILL {
            // A terminate (or shutdown's force) came during the step: the
            // process ends now; initialising a process only to close it
            // would run user code for nothing. (A flag set after this load
            // is caught by `finish_step` and ends the new process.)
            Some(kill_error(kill))
        } else if self.shared.is_stopping() {
            // Like a spawn during shutdown: no new process starts.
            Some(ExitError::Cancelled)
        } else {
            None
        };
        if let Some(error) = refused {
            tracing::debug!(%pid, method = %method, %error, "upgrade refused");
            drop_user_value(new, pid, "a process an upgrade did not start");
            drop_user_value(input, pid, "the input of an upgrade that did not start");
            self.end(record, body, Err(error));
            return None;
        }

        let old = record
            .take_process(body)
            .expect("a live record has its process");
        if let Err(message) = close_guarded(old) {
            // The old process is gone (its `close` ran, once); the new one
            // is not started on top of a failed cleanup.
            tracing::debug!(%pid, %message, "close panicked during an upgrade");
            drop_user_value(new, pid, "a process an upgrade did not start");
            drop_user_value(input, pid, "the input of an upgrade that did not start");
            self.end(record, body, Err(ExitError::Panicked { message }));
            return None;
        }

        if let Err(error) = init_guarded(&mut *new, pid, &method, input) {
            tracing::debug!(%pid, method = %method, %error, "upgrade failed: init of the new process");
            // Its `init` failed, so its `close` is not called.
            drop_user_value(new, pid, "a process whose upgrade init failed");
            self.end(
                record,
                body,
                Err(ExitError::Upgrade(UpgradeError::Init(error))),
            );
            return None;
        }

        let none = record.replace_process(body, new);
        debug_assert!(none.is_none(), "the old instance was taken above");
        // The new process is stepped next even if nothing is pending: it
        // has not run yet, so there is no earlier wait to keep.
        body.waiting = false;
        body.blocked = false;
        body.fresh = true;
        bump(&self.counters().upgrades, 1);
        tracing::debug!(%pid, method = %method, "upgraded");
        Some(READY)
    }
}

impl Worker {
    /// Carries out an upgrade ordered from outside (`engine/upgrade.rs`):
    /// the new process is initialised already, so what is left is closing
    /// the old one and installing the new. Returns `false` if the process
    /// ended instead (the old `close` panicked; the new one is then closed
    /// with the end).
    pub(super) fn take_over(
        &mut self,
        record: &RecordRef,
        body: &mut Body,
        order: UpgradeOrder,
    ) -> bool {
        let pid = record.pid;
        let (new, method) = order.into_parts();
        let old = record
            .replace_process(body, new)
            .expect("a live record has its process");
        if let Err(message) = close_guarded(old) {
            tracing::debug!(%pid, %message, "close panicked during an upgrade ordered from outside");
            // The new process is in the body: the end closes it.
            self.end(record, body, Err(ExitError::Panicked { message }));
            return false;
        }
        // Stepped next even if nothing else is pending: it has not run.
        body.waiting = false;
        body.blocked = false;
        body.fresh = true;
        bump(&self.counters().upgrades, 1);
        tracing::debug!(%pid, method = %method, "upgraded from outside");
        true
    }
}
