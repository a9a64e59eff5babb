//! Timers from a step: wake this process later, or send a message later.
//!
//! Timers set through [`Output`] belong to the process: they are cancelled
//! (and freed) when it ends, whatever way it ends.

use std::any::Any;
use std::time::{Duration, Instant};

use relay::{Addr, Package, SendError};

use crate::contract::command::Tag;
use crate::contract::output::Output;
use crate::engine::shared::Shared;
use crate::record::{extras, Extras, Record};
use crate::sync::Arc;
use crate::timer::{Action, TimerId, What};

/// The stepped record and its lists of pending timers and monitors, lent
/// to [`Output`].
pub(crate) struct StepOwned<'a> {
    pub(crate) record: &'a Arc<Record>,
    /// The process's timers, monitors and asks (allocated on first use).
    pub(crate) extras: &'a mut Option<Box<Extras>>,
    /// The engine, owned (an ask's answer path keeps it).
    pub(crate) shared: &'a Arc<Shared>,
    pub(crate) filters_events: &'a mut bool,
}

/// Past this many timers in a process's list, the ones that fired (sends
/// whose message went elsewhere) are pruned; the list then grows to twice
/// what is left before the next pruning.
const PRUNE_FROM: usize = 16;

impl Output<'_> {
    fn shared(&self) -> &Shared {
        self.engine.context().shared()
    }

    /// Adds a timer to this process's list, pruning fired ones now and
    /// then so the list stays as long as the timers actually pending.
    fn own(&mut self, id: TimerId) -> TimerId {
        *self.timers.filters_events = true;
        let owned = &mut extras(self.timers.extras).timers;
        if owned.len() >= PRUNE_FROM && owned.len().is_power_of_two() {
            let timers = &self.engine.context().shared().timers;
            owned.retain(|id| timers.is_pending(*id));
        }
        owned.push(id);
        id
    }

    /// Wakes this process with [`Event::Timer`](crate::Event::Timer)
    /// carrying `tag` after `delay` (at once, at the next step, for a zero
    /// delay). The timer belongs to this process: it is cancelled when the
    /// process ends.
    ///
    /// Receive-with-timeout is this plus a tag: set a timer when you start
    /// waiting, cancel it when the awaited event comes first.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::{BoxError, Event, Events, Output, Process, Scheduler, Tag};
    /// use std::time::{Duration, Instant};
    ///
    /// /// Sleeps 20 ms, then finishes with how long it slept.
    /// struct Nap { since: Option<Instant> }
    /// impl Process for Nap {
    ///     fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
    ///         let since = *self.since.get_or_insert_with(|| {
    ///             out.set_timer(Duration::from_millis(20), Tag(1));
    ///             Instant::now()
    ///         });
    ///         for event in events {
    ///             if let Event::Timer { tag: Tag(1), .. } = event {
    ///                 out.done(Box::new(since.elapsed()));
    ///             }
    ///         }
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let scheduler = Scheduler::builder().workers(1).build();
    /// scheduler.start();
    /// let slept = scheduler.spawn(Nap { since: None }, "run", ())?.wait()?;
    /// assert!(*slept.downcast_ref::<Duration>().unwrap() >= Duration::from_millis(20));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_timer(&mut self, delay: Duration, tag: Tag) -> TimerId {
        let at = Instant::now().checked_add(delay).unwrap_or_else(far_future);
        self.set_timer_at(at, tag)
    }

    /// [`set_timer`](Output::set_timer) at an instant rather than after a
    /// delay (an instant in the past fires at once).
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::{Output, Tag, TimerId};
    /// use std::time::Instant;
    /// fn at(out: &mut Output<'_>, deadline: Instant) -> TimerId {
    ///     out.set_timer_at(deadline, Tag(7))
    /// }
    /// ```
    pub fn set_timer_at(&mut self, at: Instant, tag: Tag) -> TimerId {
        let action = Action {
            record: Arc::clone(self.timers.record),
            what: What::Wake { tag, id: None },
        };
        let id = self.shared().set_timer(at, action);
        self.own(id)
    }

    /// Cancels a timer this process set (a wake-up or a delayed send).
    /// Returns `true` if it was pending: it will never fire. `false` means
    /// it has fired already (a wake-up then is among this step's events or
    /// was seen before; a message was delivered) or was cancelled before.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::{Output, TimerId};
    /// fn got_the_reply(out: &mut Output<'_>, timeout: TimerId) {
    ///     out.cancel_timer(timeout);
    /// }
    /// ```
    pub fn cancel_timer(&mut self, id: TimerId) -> bool {
        let Some(owned) = self.timers.extras.as_mut().map(|x| &mut x.timers) else {
            return false;
        };
        let Some(at) = owned.iter().position(|t| *t == id) else {
            return false;
        };
        owned.swap_remove(at);
        self.shared().cancel_timer(id)
    }

    /// Delivers `package` to its target after `delay`. The target is
    /// resolved now, and the message reaches that process or nobody: if it
    /// has ended by then, the message is a dead letter (even if another
    /// process has taken its PID since). The timer belongs to this process:
    /// it is cancelled if this process ends first.
    ///
    /// # Errors
    ///
    /// No process has the package's target PID now; the error hands the
    /// package back.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::{Output, Package, TimerId};
    /// use std::time::Duration;
    /// fn remind_myself(out: &mut Output<'_>) -> Option<TimerId> {
    ///     let reminder = Package::new(out.pid(), out.pid(), "tick");
    ///     out.send_after(Duration::from_secs(1), reminder).ok()
    /// }
    /// ```
    pub fn send_after(&mut self, delay: Duration, package: Package) -> Result<TimerId, SendError> {
        let id = self.shared().send_after(delay, package)?;
        Ok(self.own(id))
    }

    /// [`send_after`](Output::send_after) for a typed message.
    ///
    /// # Errors
    ///
    /// As for [`send_after`](Output::send_after).
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::{Addr, Output};
    /// use std::time::Duration;
    /// fn retry_later(out: &mut Output<'_>, worker: Addr<u32>, attempt: u32) {
    ///     let backoff = Duration::from_millis(10 << attempt.min(10));
    ///     let _ = out.tell_after(backoff, worker, attempt + 1);
    /// }
    /// ```
    pub fn tell_after<M: Any + Send>(
        &mut self,
        delay: Duration,
        to: Addr<M>,
        message: M,
    ) -> Result<TimerId, SendError> {
        let package = to.package(self.pid, message);
        self.send_after(delay, package)
    }
}

impl Shared {
    /// Sets a timer that delivers `package` to the process that has its
    /// target PID now.
    pub(crate) fn send_after(
        &self,
        delay: Duration,
        package: Package,
    ) -> Result<TimerId, SendError> {
        let Some(record) = self.processes.get(package.target()) else {
            return Err(SendError::unknown_target(package));
        };
        let at = Instant::now().checked_add(delay).unwrap_or_else(far_future);
        let action = Action {
            record,
            what: What::Message(package),
        };
        Ok(self.set_timer(at, action))
    }
}

/// An instant too far away to matter (a delay of `Duration::MAX`).
fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(100 * 365 * 24 * 3600)
}
