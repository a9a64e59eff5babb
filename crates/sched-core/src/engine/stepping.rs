//! The engine as a running step sees it: the engine's shared state and the
//! stepped process's record, behind the process contract's
//! [`StepEngine`] interface (`contract/step_engine.rs`).
//!
//! The worker builds one [`Stepping`] per step and lends it to the step's
//! `Output`. This file is the interface's one implementation: each method
//! is a call into the feature it belongs to (`timers`, `monitors`,
//! `links`, `names`, `ask`, the record's relations), so the whole list of
//! what a step does to the engine reads on one page. The `Output` methods
//! that call these live beside their features.

use std::any::Any;
use std::sync::Arc as StdArc;
use std::time::{Duration, Instant};

use relay::{Package, Payload, Pid, SendError};

use super::ask::ProcessAsker;
use super::shared::Shared;
use super::Context;
use crate::contract::command::Tag;
use crate::contract::down::{MonitorId, NameError};
use crate::contract::output::Output;
use crate::contract::pending::Extras;
use crate::contract::reply::{AskId, ReplyTo};
use crate::contract::step_engine::StepEngine;
use crate::contract::timer_id::TimerId;
use crate::record::links;
use crate::record::relations::Watcher;
use crate::record::RecordRef;
use crate::sync::Arc;
use crate::timer::{Action, What};

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

    fn send_after(&self, delay: Duration, package: Package) -> Result<TimerId, SendError> {
        self.shared.timers.send_after(self.shared, delay, package)
    }

    fn ask(
        &self,
        to: Pid,
        question: Payload,
        question_type: &'static str,
        timeout_at: Instant,
    ) -> Result<(AskId, TimerId), SendError> {
        let id = AskId(self.shared.ids.next());
        let asker = StdArc::new(ProcessAsker {
            shared: Arc::clone(self.shared),
            record: RecordRef::clone(self.record),
            id,
        });
        let from = self.record.pid;
        let asks = &self.shared.asks;
        asks.ask(self.shared, from, to, question, question_type, asker)?;
        let timeout = What::AskTimeout(id);
        Ok((id, self.timer_here(timeout_at, timeout)))
    }

    fn answer_later(
        &self,
        question_type: &'static str,
        timeout_at: Instant,
    ) -> (AskId, TimerId, ReplyTo) {
        let id = AskId(self.shared.ids.next());
        let asker = StdArc::new(ProcessAsker {
            shared: Arc::clone(self.shared),
            record: RecordRef::clone(self.record),
            id,
        });
        let timer = self.timer_here(timeout_at, What::AskTimeout(id));
        (id, timer, ReplyTo::new(asker, question_type))
    }

    fn now(&self) -> Instant {
        self.shared.clock.now()
    }

    fn set_timer(&self, at: Instant, tag: Tag, list: &Extras) -> TimerId {
        let (list_lo, list_hi) = crate::timer::list_hint(std::ptr::from_ref(list).cast());
        let wake = What::Wake {
            tag,
            list_lo,
            list_hi,
        };
        self.timer_here(at, wake)
    }

    fn cancel_timer(&self, id: TimerId) {
        let _ = self.shared.timers.withdraw(id);
    }

    fn cancel_message_timer(&self, id: TimerId) -> bool {
        self.shared.timers.withdraw_message(id)
    }

    fn monitor(&self, target: Pid) -> MonitorId {
        let watcher = Watcher::Process(RecordRef::clone(self.record));
        self.shared.monitors.add(self.shared, target, watcher)
    }

    fn demonitor(&self, monitor: MonitorId) {
        let _ = self.shared.monitors.remove(self.shared, monitor);
    }

    fn link(&self, target: Pid) {
        self.shared.links.link(self.shared, self.record, target);
    }

    fn unlink(&self, target: Pid) {
        if self.shared.is_remote(target) {
            self.shared.across().unlink_remote(self.record, target);
            return;
        }
        // From our own list, not through the process table (see
        // `record/links.rs`).
        links::unlink(self.record, target);
    }

    fn trap_exits(&self, trap: bool) {
        let related = self.record.related();
        let _ = related.with_live(|related| related.trap_exits = trap);
    }

    fn register_name(&self, name: &str) -> Result<(), NameError> {
        Context::of(self.shared).register_name(name, self.record.pid)
    }

    fn priority(&self) -> crate::Priority {
        self.record.priority()
    }

    fn set_priority(&self, priority: crate::Priority) {
        // The worker owns the record for the step: the one writer.
        self.record.set_priority(priority);
    }

    fn publish(&self, key: &'static str, value: i64) {
        // An ended process's figures are of no one's interest: ignored.
        let _ = self.record.related().with_live(|related| {
            match related.published.iter_mut().find(|(k, _)| *k == key) {
                Some(entry) => entry.1 = value,
                None => related.published.push((key, value)),
            }
        });
    }

    fn context(&self) -> &dyn Any {
        Context::of(self.shared)
    }
}

impl Stepping<'_> {
    /// A timer for the stepped process in the wheel of the worker running
    /// the step.
    fn timer_here(&self, at: Instant, what: What) -> TimerId {
        let record = RecordRef::clone(self.record);
        let action = Action { record, what };
        self.shared.timers.set_timer_here(self.worker, at, action)
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
