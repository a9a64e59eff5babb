//! Timers from a step: wake this process later, or send a message later.
//!
//! Timers set through [`Output`] belong to the process: they are cancelled
//! (and freed) when it ends, whatever way it ends.

use std::any::Any;
use std::time::{Duration, Instant};

use relay::{Addr, Package, SendError};

use crate::contract::command::Tag;
use crate::contract::output::Output;
use crate::contract::pending::StepLists;
use crate::contract::pending::{extras, Extras};
use crate::contract::timer_id::TimerId;
use crate::engine::shared::Shared;
use crate::record::Record;
use crate::sync::Arc;
use crate::timer::{Action, What};

/// The stepped record and its lists of pending timers, monitors and asks,
/// lent to [`Output`].
pub(crate) struct StepOwned<'a> {
    pub(crate) record: &'a Arc<Record>,
    /// The engine, owned (an ask's answer path keeps it).
    pub(crate) shared: &'a Arc<Shared>,
    /// The process's timers, monitors and asks (allocated on first use),
    /// shared with the step's events (see `contract/pending.rs`).
    pub(crate) lists: &'a StepLists<'a>,
}

impl StepOwned<'_> {
    /// Runs `f` on the process's extras, allocating them on first use, and
    /// marks the process's events as needing the pending check.
    pub(crate) fn with_extras<R>(&self, f: impl FnOnce(&mut Extras) -> R) -> R {
        self.lists.filters.set(true);
        f(extras(&mut self.lists.extras.borrow_mut()))
    }

    /// Runs `f` on the process's extras if it has any.
    pub(crate) fn with_existing<R>(&self, f: impl FnOnce(&mut Extras) -> R) -> Option<R> {
        self.lists.extras.borrow_mut().as_deref_mut().map(f)
    }
}

impl Output<'_> {
    fn shared(&self) -> &Shared {
        self.engine.context().shared()
    }

    /// Adds a timer to this process's list. Every timer listed here (a
    /// wake-up or an ask's timeout) comes back to this process, so each
    /// leaves the list when its event is handed out or it is cancelled.
    fn own(&mut self, id: TimerId) -> TimerId {
        self.timers.with_extras(|x| x.timers.push(id));
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
    /// Returns `true` if it had not reached its end: a wake-up's
    /// [`Event::Timer`](crate::Event::Timer) is then never handed to a step,
    /// even if it fell due already and is further on among this step's
    /// events; a delayed message is never delivered. `false` means a
    /// wake-up was handed to a step before, a message was delivered (or
    /// became a dead letter), or it was cancelled before.
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
        let listed = self.timers.with_existing(|x| x.timers.remove(&id));
        if listed == Some(true) {
            // Listed means its event has not been handed out: whether it
            // is still in the wheel or already among the events, the
            // process will not see it.
            let _ = self.shared().cancel_timer(id);
            return true;
        }
        // Not one of its wake-ups: a delayed message it sent, which
        // belongs to its message (and may be cancelled by whoever holds
        // its id).
        self.shared().cancel_message_timer(id)
    }

    /// Delivers `package` to its target after `delay`. The target is
    /// resolved now, and the message reaches that process or nobody. As in
    /// Erlang, the delayed message belongs to its message, not to its
    /// sender: it is delivered if the target is alive at the deadline,
    /// whatever became of this process meanwhile. If the target ends
    /// first, the message is cancelled at that end and counted as a dead
    /// letter (it is not kept until its deadline). Delayed messages from
    /// one sender to one target with non-decreasing deadlines arrive in the
    /// order they were sent.
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
        self.shared().send_after(delay, package)
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
    /// target PID now. The timer belongs to the message: the target lists
    /// it, and cancels it (a dead letter) if it ends before the deadline.
    pub(crate) fn send_after(
        &self,
        delay: Duration,
        package: Package,
    ) -> Result<TimerId, SendError> {
        let Some(record) = self.processes.get(package.target()) else {
            return Err(SendError::unknown_target(package));
        };
        let at = Instant::now().checked_add(delay).unwrap_or_else(far_future);
        let shard = self.timers.shard_of_target(record.pid);
        let target = Arc::clone(&record);
        let action = Action {
            record,
            what: What::Message(Box::new(package)),
        };
        let id = self.set_timer_on(Some(shard), at, action);
        let timers = &self.timers;
        let listed = target
            .relations
            .with_live(|related| related.list_delayed(id, |id| timers.is_pending(id)));
        if listed.is_err() {
            // The target ended while this was set: its end did not see the
            // timer, so it is cancelled here (unless it fired already, and
            // the firing made it a dead letter).
            self.delayed_to_ended(target.pid, vec![id]);
        }
        Ok(id)
    }
}

/// An instant too far away to matter (a delay of `Duration::MAX`).
fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(100 * 365 * 24 * 3600)
}
