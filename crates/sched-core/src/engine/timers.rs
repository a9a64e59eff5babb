//! The engine's side of timers: setting one in the right wheel (waking
//! its worker when it is now the earliest), firing the due ones, cancelling,
//! and the delayed sends of [`Context`].

use std::any::Any;
use std::cell::Cell;
use std::sync::atomic::Ordering::SeqCst;
use std::time::{Duration, Instant};

use relay::{Addr, Package, Pid, SendError};

use super::shared::{Runnable, Shared};
use super::Context;
use crate::contract::event::Event;
use crate::contract::reply::AskError;
use crate::contract::timer_id::TimerId;
use crate::panic_guard::drop_user_value;
use crate::record::state::Wake;
use crate::record::Record;
use crate::runqueue::local;
use crate::sync::{fence, Arc};
use crate::timer::{Action, What};

thread_local! {
    /// Where this (non-worker) thread puts its next timer: successive
    /// timers from one thread spread over the wheels without any shared
    /// counter.
    static ROUND_ROBIN: Cell<usize> = const { Cell::new(0) };
}

impl Shared {
    /// Sets a timer due at `at`, in this worker's wheel when called on one
    /// of the engine's workers, in another's otherwise (waking it if this
    /// timer is now its earliest).
    pub(crate) fn set_timer(&self, at: Instant, action: Action) -> TimerId {
        self.set_timer_on(None, at, action)
    }

    /// Sets a timer due at `at` in wheel `shard` (or, for `None`, as
    /// [`set_timer`](Shared::set_timer) chooses), waking that wheel's
    /// worker if it is not the calling one and this timer is now its
    /// earliest.
    pub(crate) fn set_timer_on(
        &self,
        shard: Option<usize>,
        at: Instant,
        action: Action,
    ) -> TimerId {
        let timers = &self.timers;
        let own = local::with_local(self, |local| local.index);
        let shard_index = shard.or(own).unwrap_or_else(|| {
            ROUND_ROBIN.with(|next| {
                let i = next.get();
                next.set(i.wrapping_add(1));
                i % timers.shard_count()
            })
        });
        let (id, earlier) = timers.insert(shard_index, at, action);
        if earlier && own != Some(shard_index) && shard_index < self.remotes.len() {
            // Pairs with the fence in `Sleepers::park`: either that worker
            // reads the new `next` after announcing its sleep, or we find it
            // on the idle list here and wake it.
            fence(SeqCst);
            self.sleepers.wake(shard_index);
        }
        id
    }

    /// Fires worker `worker`'s due timers: each delivers its event or
    /// message to its record (a process that has ended makes it a dead
    /// letter).
    pub(crate) fn fire_timers(&self, worker: usize, due: &mut Vec<Action>) {
        self.timers.poll(worker, Instant::now(), due);
        for action in due.drain(..) {
            self.fire(action);
        }
        // A burst of due timers does not keep its buffer.
        if due.capacity() > 1024 {
            due.shrink_to(64);
        }
    }

    fn fire(&self, action: Action) {
        let Action { record, what } = action;
        let undelivered = match what {
            What::Wake { tag, id } => {
                let id = id.expect("set at insertion, under the wheel's lock");
                match record.deliver(Event::Timer { id, tag }) {
                    Ok(wake) => {
                        self.after_timer(&record, wake);
                        None
                    }
                    Err(event) => Some(event),
                }
            }
            What::AskTimeout(id) => {
                let event = Event::Reply {
                    id,
                    result: Err(AskError::Timeout),
                };
                match record.deliver(event) {
                    Ok(wake) => {
                        self.after_timer(&record, wake);
                        None
                    }
                    // The asker has ended: nobody is waiting.
                    Err(_) => None,
                }
            }
            What::Message(package) => {
                self.delayed_gone(&record);
                self.deliver_message(&record, *package)
                    .err()
                    .map(|error| Event::Message(error.into_package()))
            }
        };
        if let Some(event) = undelivered {
            self.dead_letters(record.pid, vec![event]);
        }
    }

    /// Queues a process its timer woke (see `Runnable::Timed`).
    fn after_timer(&self, record: &Arc<Record>, wake: Wake) {
        if wake == Wake::Schedule {
            self.schedule(record.clone(), Runnable::Timed);
        }
    }

    /// Cancels a timer; `true` if it was pending (it never fires).
    pub(crate) fn cancel_timer(&self, id: TimerId) -> bool {
        match self.timers.cancel(id) {
            Some(action) => {
                if matches!(action.what, What::Message(_)) {
                    self.delayed_gone(&action.record);
                }
                self.drop_timers(vec![action]);
                true
            }
            None => false,
        }
    }

    /// Cancels a delayed message (see [`Timers::cancel_message`]); `true`
    /// if it was pending (it is never delivered).
    pub(crate) fn cancel_message_timer(&self, id: TimerId) -> bool {
        match self.timers.cancel_message(id) {
            Some(action) => {
                self.delayed_gone(&action.record);
                self.drop_timers(vec![action]);
                true
            }
            None => false,
        }
    }

    /// A delayed message to `target` has fired or been cancelled: its
    /// entry in the target's list may be pruned.
    fn delayed_gone(&self, target: &Record) {
        let timers = &self.timers;
        target
            .relations
            .with_existing(|related| related.delayed_gone(|id| timers.is_pending(id)));
    }

    /// Delayed messages to an ended process that were still pending: each
    /// is a dead letter (counted, and passed to the dead-letter hook).
    pub(crate) fn delayed_to_ended(&self, ended: relay::Pid, ids: Vec<TimerId>) {
        let mut dead = Vec::new();
        for id in ids {
            if let Some(Action {
                what: What::Message(package),
                record,
            }) = self.timers.cancel_message(id)
            {
                // The record is the ended one; its last counts go here.
                drop(record);
                dead.push(Event::Message(*package));
            }
        }
        if !dead.is_empty() {
            self.dead_letters(ended, dead);
        }
    }

    /// Drops the actions of cancelled timers; a message's payload is the
    /// user's and its `Drop` may panic.
    pub(crate) fn drop_timers(&self, actions: Vec<Action>) {
        for action in actions {
            let pid = action.record.pid;
            drop_user_value(action, pid, "a cancelled timer");
        }
    }
}

impl Context {
    /// Delivers `package` to its target after `delay`. The target is
    /// resolved now, and the message reaches that process or nobody: if it
    /// has ended by then, the message is a dead letter (even if another
    /// process has taken its PID since). The timer belongs to no process
    /// (unlike [`Output::send_after`](crate::Output::send_after)): it fires
    /// or is cancelled with [`cancel_timer`](Context::cancel_timer), and
    /// shutdown cancels it if it is still pending once every process has
    /// ended.
    ///
    /// # Errors
    ///
    /// No process has the package's target PID now; the error hands the
    /// package back.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::{BoxError, Event, Events, Output, Package, Pid, Process, Scheduler};
    /// use std::time::{Duration, Instant};
    ///
    /// struct Waiter;
    /// impl Process for Waiter {
    ///     fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
    ///         for event in events {
    ///             if let Event::Message(m) = event {
    ///                 out.done(m.into_payload());
    ///             }
    ///         }
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let scheduler = Scheduler::builder().workers(1).build();
    /// scheduler.start();
    /// let waiter = scheduler.spawn(Waiter, "run", ())?;
    /// let sent = Instant::now();
    /// scheduler.post_after(Duration::from_millis(20), waiter.pid(), "late")?;
    /// assert_eq!(waiter.wait()?.downcast_ref::<&str>(), Some(&"late"));
    /// assert!(sent.elapsed() >= Duration::from_millis(20));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn send_after(&self, delay: Duration, package: Package) -> Result<TimerId, SendError> {
        self.shared().send_after(delay, package)
    }

    /// [`send_after`](Context::send_after) from [`Pid::OUTSIDE`].
    ///
    /// # Errors
    ///
    /// As for [`send_after`](Context::send_after).
    ///
    /// # Examples
    ///
    /// See [`send_after`](Context::send_after).
    pub fn post_after(
        &self,
        delay: Duration,
        to: Pid,
        payload: impl Any + Send,
    ) -> Result<TimerId, SendError> {
        self.send_after(delay, Package::new(Pid::OUTSIDE, to, payload))
    }

    /// [`send_after`](Context::send_after) for a typed message, from
    /// [`Pid::OUTSIDE`].
    ///
    /// # Errors
    ///
    /// As for [`send_after`](Context::send_after).
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::{Addr, Pid};
    /// use std::time::Duration;
    /// let engine = sched::Engine::builder().workers(1).build();
    /// let nobody: Addr<u8> = Addr::from_pid(Pid::local(9));
    /// assert!(engine.tell_after(Duration::from_secs(1), nobody, 1).is_err());
    /// ```
    pub fn tell_after<M: Any + Send>(
        &self,
        delay: Duration,
        to: Addr<M>,
        message: M,
    ) -> Result<TimerId, SendError> {
        self.send_after(delay, to.package(Pid::OUTSIDE, message))
    }

    /// Cancels a delayed send set through a context. Returns `true` if it
    /// was pending: it will never fire. (A process cancels its own timers
    /// with [`Output::cancel_timer`](crate::Output::cancel_timer).)
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::{BoxError, Events, Output, Process, Scheduler};
    /// use std::time::Duration;
    ///
    /// struct Idle;
    /// impl Process for Idle {
    ///     fn step(&mut self, _: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let scheduler = Scheduler::builder().workers(1).build();
    /// scheduler.start();
    /// let idle = scheduler.spawn(Idle, "run", ())?;
    /// let timer = scheduler.post_after(Duration::from_secs(60), idle.pid(), "never")?;
    /// assert!(scheduler.cancel_timer(timer));
    /// assert!(!scheduler.cancel_timer(timer), "cancelled once");
    /// assert_eq!(scheduler.stats().pending_timers, 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn cancel_timer(&self, id: TimerId) -> bool {
        self.shared().cancel_timer(id)
    }
}
