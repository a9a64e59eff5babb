//! The engine as a running step sees it: the engine's shared state and the
//! stepped process's record, behind the process contract's
//! [`StepEngine`] interface (`contract/step_engine.rs`).
//!
//! The worker builds one [`Stepping`] per step and lends it to the step's
//! `Output`. This file implements the operations every step has (send, a
//! fresh PID, the inside handle); each feature implements its own part of
//! the interface in its module (`timers`, `monitors`, `links`, `names`,
//! `ask`).

use std::any::Any;

use relay::{Package, SendError};

use super::shared::Shared;
use super::Context;
use crate::contract::output::Output;
use crate::contract::step_engine::StepEngine;
use crate::record::RecordRef;
use crate::sync::Arc;

/// One step's view of the engine: borrowed from the worker for the length
/// of the step.
pub(crate) struct Stepping<'a> {
    /// The engine, owned (an ask's answer path keeps it).
    pub(crate) shared: &'a Arc<Shared>,
    /// The process being stepped.
    pub(crate) record: &'a RecordRef,
    /// The index of the worker running the step (its timers go into that
    /// worker's wheel, without a thread-local lookup).
    pub(crate) worker: usize,
}

impl StepEngine for Stepping<'_> {
    fn send(&self, package: Package) -> Result<(), SendError> {
        self.shared.send(package)
    }

    fn priority(&self) -> crate::Priority {
        self.record.priority()
    }

    fn set_priority(&self, priority: crate::Priority) {
        // The worker owns the record for the step: the one writer.
        self.record.set_priority(priority);
    }

    fn context(&self) -> &dyn Any {
        Context::of(self.shared)
    }
}

impl Output<'_> {
    /// Cancels everything this process is still waiting for: its timers
    /// (wake-ups and the timeouts of its asks) are cancelled, its monitors
    /// removed, its asks forgotten. None of their events is handed to a
    /// step afterwards, even one already among this step's events. Delayed
    /// messages it sent are not touched (they belong to their message), nor
    /// are its links and names. For a process that starts over (a
    /// restart in place), so that nothing meant for its earlier state
    /// reaches the new one.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use std::time::Duration;
    ///
    /// fn start_over(out: &mut Output<'_>) {
    ///     out.cancel_pending();
    ///     out.set_timer(Duration::from_secs(1), Tag(1));
    /// }
    /// ```
    pub fn cancel_pending(&mut self) {
        let taken = self.with_existing(|x| {
            let timers: Vec<_> = x.timers.iter().collect();
            x.timers = Default::default();
            let monitors = x
                .existing_others()
                .map(|others| {
                    others.asks.clear();
                    std::mem::take(&mut others.monitoring)
                })
                .unwrap_or_default();
            (timers, monitors)
        });
        if let Some((timers, monitors)) = taken {
            for id in timers {
                self.engine.cancel_timer(id);
            }
            for monitor in monitors {
                self.engine.demonitor(monitor);
            }
        }
    }
}
