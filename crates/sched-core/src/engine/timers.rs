//! The engine's side of timers: setting one in the right wheel (waking
//! its worker when it is now the earliest), firing the due ones, cancelling,
//! and the delayed sends of [`Context`].
//!
//! The feature owns its state: the wheels, one per worker
//! ([`Timers`](crate::timer::registry::Timers), the shared state's
//! `timers`). Its operations here are methods of that registry: each reads
//! the wheels through `self`, and takes the engine (`&Shared`) only for
//! what other features do when a timer is set or fires: the calling
//! worker and waking another, the clock, the histograms, delivering an
//! event or a message, scheduling the woken process, dead letters.

use std::any::Any;
use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::time::{Duration, Instant};

use relay::{Addr, Package, Pid, SendError};

use super::routing::{Sender, Target};
use super::shared::{Runnable, Shared};
use super::Context;
use crate::contract::command::Tag;
use crate::contract::event::Event;
use crate::contract::output::Output;
use crate::contract::reply::AskError;
use crate::contract::timer_id::TimerId;
use crate::panic_guard::drop_user_value;
use crate::record::state::Wake;
use crate::record::{Record, RecordRef};
use crate::runqueue::local;
use crate::sync::fence;
use crate::timer::registry::Timers;
use crate::timer::{Action, What};

/// How many due timers a worker fires at a time. It takes every due timer
/// out of its wheel at once but delivers them in chunks, each just before
/// the processes it wakes run: a tick with thousands of due timers would
/// otherwise touch thousands of records and event blocks before stepping
/// the first, and find none of them in cache by the time it steps them.
const FIRE_CHUNK: usize = 32;

/// How far ahead of the timer being fired its chunk's records are
/// prefetched.
const PREFETCH_AHEAD: usize = 4;

/// The due timers a worker took out of its wheel and has not fired yet,
/// latest deadline first (see [`FIRE_CHUNK`]).
#[derive(Default)]
pub(crate) struct DueTimers(Vec<crate::timer::registry::Due>);

impl DueTimers {
    /// Whether due timers wait to be fired.
    pub(crate) fn any(&self) -> bool {
        !self.0.is_empty()
    }
}

impl Timers {
    /// Sets a timer due at `at`, in this worker's wheel when called on one
    /// of the engine's workers, in the wheel its process's PID selects
    /// otherwise (waking that wheel's worker if this timer is now its
    /// earliest).
    pub(crate) fn set_timer(&self, engine: &Shared, at: Instant, action: Action) -> TimerId {
        self.set_timer_on(engine, None, at, action)
    }

    /// Sets a timer due at `at` in wheel `shard` (or, for `None`, as
    /// [`set_timer`](Timers::set_timer) chooses), waking that wheel's
    /// worker if it is not the calling one and this timer is now its
    /// earliest.
    pub(crate) fn set_timer_on(
        &self,
        engine: &Shared,
        shard: Option<usize>,
        at: Instant,
        action: Action,
    ) -> TimerId {
        let own = local::with_local(engine, |local| local.index);
        // Away from the engine's workers, the wheel the timer's process
        // selects, as for a delayed message: timers of many processes
        // spread over the wheels with no shared counter, and the choice
        // depends on nothing of the calling thread (a per-thread counter
        // made a simulation's second run of a seed choose other wheels).
        let shard_index = shard
            .or(own)
            .unwrap_or_else(|| self.shard_of_target(action.record.pid));
        let (id, earlier) = self.insert(shard_index, at, action);
        if earlier && own != Some(shard_index) && shard_index < engine.remotes.len() {
            // Pairs with the fence in `Sleepers::park`: either that worker
            // reads the new `next` after announcing its sleep, or we find it
            // on the idle list here and wake it.
            fence(SeqCst);
            engine.sleepers.wake(shard_index);
        }
        id
    }

    /// Sets a timer due at `at` in the wheel of `worker`, for a step running
    /// on that worker: no other worker needs waking, since this one
    /// computes its next deadline again before it parks.
    pub(crate) fn set_timer_here(&self, worker: usize, at: Instant, action: Action) -> TimerId {
        self.insert(worker, at, action).0
    }

    /// Fires up to [`FIRE_CHUNK`] of worker `worker`'s due timers, taking
    /// the due ones out of its wheel first when none are left from the
    /// last take. Each delivers its event or message to its record (a
    /// process that has ended makes it a dead letter).
    /// Fires due timers of wheel `worker`: the next chunk, or (`all`)
    /// every one due.
    pub(crate) fn fire_timers(
        &self,
        engine: &Shared,
        worker: usize,
        due: &mut DueTimers,
        all: bool,
    ) {
        // The worker's turn at its wheel, not the watcher's (see `rescue`).
        if !self.worker_take_turn(worker) {
            return;
        }
        self.fire_in_turn(engine, worker, due, all);
        self.worker_end_turn(worker, due.any());
    }

    /// [`fire_timers`](Timers::fire_timers), in the worker's turn.
    fn fire_in_turn(&self, engine: &Shared, worker: usize, due: &mut DueTimers, all: bool) {
        if due.0.is_empty() {
            // A burst of due timers does not keep its buffer.
            if due.0.capacity() > 1024 {
                due.0.shrink_to(64);
            }
            self.poll(worker, engine.clock.now(), &mut due.0);
            // Fired from the back, so in deadline order.
            due.0.reverse();
        }
        // Only this worker fires its wheel: the histogram's single writer.
        let histograms = engine.remotes[worker].histograms.as_deref();
        let now = histograms.map(|_| Instant::now());
        let last = if all {
            0
        } else {
            due.0.len().saturating_sub(FIRE_CHUNK)
        };
        while due.0.len() > last {
            // The records a chunk delivers to were last touched when their
            // timers were set: start loading the one a few entries ahead
            // while this one is delivered.
            if let Some(ahead) = due.0.len().checked_sub(PREFETCH_AHEAD + 1) {
                if ahead >= last {
                    let Action { record, what } = &due.0[ahead].1;
                    record.prefetch();
                    if let What::Wake {
                        list_lo, list_hi, ..
                    } = *what
                    {
                        if let Some(list) = crate::timer::hinted_list(list_lo, list_hi) {
                            crate::sync::prefetch(
                                list,
                                std::mem::size_of::<crate::contract::pending::Extras>(),
                            );
                        }
                    }
                }
            }
            let Some((id, action, tick)) = due.0.pop() else {
                break;
            };
            if let (Some(histograms), Some(now)) = (histograms, now) {
                let deadline = self.instant_of(tick);
                histograms
                    .timer_lateness
                    .record(now.saturating_duration_since(deadline));
            }
            self.fire(engine, id, action);
        }
    }

    /// Fires the due timers of wheel `worker` for it, while it is held in
    /// one step: called by the long-step watcher (`long_steps.rs`) when it
    /// sees the step `step` of process `pid` on two samples in a row.
    ///
    /// A step may block or never return; its worker's timers would wait
    /// with it, and the processes they wake with them, though other
    /// workers idle. The watcher takes the wheel's turn (one word both
    /// sides set a bit in, `timer/registry.rs`: never both at once) only
    /// while the worker is still in that step, and leaves the wheel alone
    /// while the worker holds due timers taken out and not fired
    /// (`held_out`), so that timers fire in deadline order, as the worker
    /// would fire them. Those held timers (a chunk at most) wait for
    /// their worker. Returns how many it fired.
    pub(crate) fn rescue(&self, engine: &Shared, worker: usize, pid: u64, step: u64) -> usize {
        let counters = &engine.remotes[worker].counters;
        let in_the_step =
            || counters.in_step.load(Relaxed) == pid && counters.steps.load(Relaxed) == step;
        if !self.begin_rescue(worker, in_the_step) {
            return 0;
        }
        let mut due = Vec::new();
        self.poll(worker, engine.clock.now(), &mut due);
        let fired = due.len();
        // In deadline order, as `poll` gives them.
        for (id, action, _) in due {
            self.fire(engine, id, action);
        }
        self.end_rescue(worker);
        fired
    }

    fn fire(&self, engine: &Shared, id: TimerId, action: Action) {
        let Action { record, what } = action;
        let undelivered = match what {
            What::Wake { tag, .. } => match record.deliver(Event::Timer { id, tag }) {
                Ok(wake) => {
                    after_timer(engine, &record, wake);
                    None
                }
                Err(event) => Some(event),
            },
            What::AskTimeout(id) => {
                let event = Event::Reply {
                    id,
                    result: Err(AskError::TimedOut),
                    question: None,
                };
                match record.deliver(event) {
                    Ok(wake) => {
                        after_timer(engine, &record, wake);
                        None
                    }
                    // The asker has ended: nobody is waiting.
                    Err(_) => None,
                }
            }
            What::Complete(completion) => {
                let (tag, data) = *completion;
                // A delayed completion passes a simulation's faults too.
                let Some(result) = engine.intercept_completion(&record, tag, Ok(data)) else {
                    return;
                };
                match record.deliver(Event::Completion { tag, result }) {
                    Ok(wake) => {
                        after_timer(engine, &record, wake);
                        None
                    }
                    Err(event) => Some(event),
                }
            }
            What::NameSweep(name) => {
                engine.names.sweep_parked(engine, &name);
                None
            }
            What::Message(package) => {
                self.delayed_gone(&record);
                engine
                    .deliver_message(&record, *package)
                    .err()
                    .map(|error| Event::Message(error.into_package()))
            }
        };
        if let Some(event) = undelivered {
            engine.dead_letters(record.pid, vec![event]);
        }
    }

    /// Cancels a timer; `true` if it was pending (it never fires). Its
    /// action is dropped under the panic guard (a delayed message's
    /// payload is the user's), where `CancelTimer::cancel_timer`, for an
    /// ask's timeout, just drops it.
    pub(crate) fn withdraw(&self, id: TimerId) -> bool {
        match self.cancel(id) {
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
    pub(crate) fn withdraw_message(&self, id: TimerId) -> bool {
        match self.cancel_message(id) {
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
        target
            .relations
            .with_existing(|related| related.delayed_gone(|id| self.is_pending(id)));
    }

    /// Delayed messages to an ended process that were still pending: each
    /// is a dead letter (counted, and passed to the dead-letter hook).
    pub(crate) fn delayed_to_ended(&self, engine: &Shared, ended: relay::Pid, ids: Vec<TimerId>) {
        let mut dead = Vec::new();
        for id in ids {
            if let Some(Action {
                what: What::Message(package),
                record,
            }) = self.cancel_message(id)
            {
                // The record is the ended one; its last counts go here.
                drop(record);
                dead.push(Event::Message(*package));
            }
        }
        if !dead.is_empty() {
            engine.dead_letters(ended, dead);
        }
    }

    /// Drops the actions of cancelled timers (the wheels' own, or taken
    /// out of them all at shutdown); a message's payload is the
    /// user's and its `Drop` may panic.
    pub(crate) fn drop_timers(&self, actions: Vec<Action>) {
        for action in actions {
            let pid = action.record.pid;
            drop_user_value(action, pid, "a cancelled timer");
        }
    }
}

impl Context {
    /// Now, by the engine's clock: the machine's monotonic clock on a
    /// running engine, the virtual clock in a
    /// [`Simulation`](crate::sim::Simulation). Timers, timeouts and delays
    /// are measured against it.
    ///
    /// # Examples
    ///
    /// ```
    /// let engine = sched::engine::Engine::builder().workers(1).build();
    /// let before = std::time::Instant::now();
    /// assert!(engine.context().now() >= before);
    /// ```
    pub fn now(&self) -> Instant {
        self.shared().clock.now()
    }

    /// Cancels a delayed send set through a context. Returns `true` if it
    /// was pending: it will never fire. (A process cancels its own timers
    /// with [`Output::cancel_timer`](crate::Output::cancel_timer).)
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::After;
    /// use std::time::Duration;
    ///
    /// struct Idle;
    /// impl Process for Idle {
    ///     type Done = ();
    ///     fn step(&mut self, _: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let scheduler = Scheduler::builder().workers(1).build();
    /// scheduler.start();
    /// let idle = scheduler.spawn(Idle)?;
    /// let timer = scheduler.send(After(Duration::from_secs(60), idle.pid()), "never")?;
    /// assert!(scheduler.context().cancel_timer(timer));
    /// assert!(!scheduler.context().cancel_timer(timer), "cancelled once");
    /// assert_eq!(scheduler.stats().pending_timers, 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn cancel_timer(&self, id: TimerId) -> bool {
        self.shared().timers.withdraw(id)
    }
}

impl Output<'_> {
    /// Now, by the engine's clock (as [`Context::now`]): what a process
    /// should read instead of `Instant::now()` when it measures time its
    /// timers measure too, so that it reads virtual time in a simulation.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use std::time::{Duration, Instant};
    ///
    /// /// Sets a deadline a minute from now.
    /// fn deadline(out: &mut Output<'_>) -> Instant {
    ///     let at = out.now() + Duration::from_secs(60);
    ///     out.set_timer(at, Tag(1));
    ///     at
    /// }
    /// ```
    pub fn now(&self) -> Instant {
        self.engine.now()
    }

    /// Adds a timer to this process's list. Every timer listed here (a
    /// wake-up or an ask's timeout) comes back to this process, so each
    /// leaves the list when its event is handed out or it is cancelled.
    fn own(&mut self, id: TimerId) -> TimerId {
        self.with_extras(|x| x.timers.push(id));
        id
    }

    /// Wakes this process with [`Event::Timer`](crate::Event::Timer)
    /// carrying `tag` after `delay`, counted from the engine's clock when
    /// this is called (at once, at the next step, for a zero delay), or at
    /// an [`Instant`](std::time::Instant). It never fires before its
    /// deadline, and falls due within a 100 µs tick after it. The timer
    /// belongs to this process: it is cancelled when the process ends.
    ///
    /// Receive-with-timeout is this plus a tag: set a timer when you start
    /// waiting, cancel it when the awaited event comes first.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use std::time::{Duration, Instant};
    ///
    /// /// Sleeps 20 ms, then finishes with how long it slept.
    /// struct Nap { since: Option<Instant> }
    /// impl Process for Nap {
    ///     type Done = Duration;
    ///     fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
    ///         let since = *self.since.get_or_insert_with(|| {
    ///             out.set_timer(Duration::from_millis(20), Tag(1));
    ///             Instant::now()
    ///         });
    ///         for event in events {
    ///             if let Event::Timer { tag: Tag(1), .. } = event {
    ///                 out.finish(since.elapsed());
    ///             }
    ///         }
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let scheduler = Scheduler::builder().workers(1).build();
    /// scheduler.start();
    /// let slept = scheduler.spawn(Nap { since: None })?.wait()?;
    /// assert!(slept >= Duration::from_millis(20));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_timer(&mut self, when: impl Into<Deadline>, tag: Tag) -> TimerId {
        let at = match when.into() {
            Deadline::After(delay) => {
                let now = self.engine.now();
                now.checked_add(delay).unwrap_or_else(|| far_future(now))
            }
            Deadline::At(at) => at,
        };

        // The list the timer goes into exists before the timer, so that
        // the timer can carry where it is (see `What::Wake`).
        let id = self.with_extras(|list| self.engine.set_timer(at, tag, list));
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
    /// use sched::prelude::*;
    /// fn got_the_reply(out: &mut Output<'_>, timeout: TimerId) {
    ///     out.cancel_timer(timeout);
    /// }
    /// ```
    pub fn cancel_timer(&mut self, id: TimerId) -> bool {
        let listed = self.with_existing(|x| x.timers.remove(&id));
        if listed == Some(true) {
            // Listed means its event has not been handed out: whether it
            // is still in the wheel or already among the events, the
            // process will not see it.
            self.engine.cancel_timer(id);
            return true;
        }
        // Not one of its wake-ups: a delayed message it sent, which
        // belongs to its message (and may be cancelled by whoever holds
        // its id).
        self.engine.cancel_message_timer(id)
    }
}

impl Timers {
    /// Sets a timer that delivers `package` to the process that has its
    /// target PID now. The timer belongs to the message: the target lists
    /// it, and cancels it (a dead letter) if it ends before the deadline.
    pub(crate) fn send_after(
        &self,
        engine: &Shared,
        delay: Duration,
        package: Package,
    ) -> Result<TimerId, SendError> {
        let Some(record) = engine.processes.get(package.target()) else {
            return Err(engine.missing(package));
        };
        let at = engine.clock.after(delay);
        let shard = self.shard_of_target(record.pid);
        let target = RecordRef::clone(&record);
        let action = Action {
            record,
            what: What::Message(Box::new(package)),
        };
        let id = self.set_timer_on(engine, Some(shard), at, action);
        let listed = target
            .related()
            .with_live(|related| related.list_delayed(id, |id| self.is_pending(id)));
        if listed.is_err() {
            // The target ended while this was set: its end did not see the
            // timer, so it is cancelled here (unless it fired already, and
            // the firing made it a dead letter).
            self.delayed_to_ended(engine, target.pid, vec![id]);
        }
        Ok(id)
    }
}

/// Queues a process its timer woke (see `Runnable::Timed`).
fn after_timer(engine: &Shared, record: &RecordRef, wake: Wake) {
    if wake == Wake::Schedule {
        // SAFETY: `Schedule` says this timer's wake moved the process out
        // of BLOCKED or IDLE, so the parked reference is ours (see
        // `Shared::after_wake`).
        engine.schedule(unsafe { RecordRef::unpark(record) }, Runnable::Timed);
    }
}

/// An instant too far away to matter (a delay of `Duration::MAX`).
fn far_future(now: Instant) -> Instant {
    now + Duration::from_secs(100 * 365 * 24 * 3600)
}

/// A send that happens later: `After(delay, to)`, where `to` is a [`Pid`]
/// or an [`Addr<M>`](Addr), sends the message after `delay` and returns
/// the [`TimerId`] that cancels it ([`Context::cancel_timer`], or
/// [`Output::cancel_timer`] from a step).
///
/// The target is resolved now, and the message reaches that process or
/// nobody: if it ends first, the message is cancelled at that end and
/// counted as a dead letter (even if another process has taken its PID
/// since). As in Erlang, the timer belongs to the message, not to its
/// sender: it fires whatever became of the sender meanwhile. Delayed
/// messages from one sender to one target with non-decreasing deadlines
/// arrive in the order they were sent. Shutdown cancels a timer still
/// pending once every process has ended.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use sched::After;
/// use std::time::{Duration, Instant};
///
/// struct Waiter;
/// impl Process for Waiter {
///     type Done = &'static str;
///     fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
///         for event in events {
///             if let Event::Message(m) = event {
///                 out.finish(m.into_payload()); // the `&str` sent, not boxed again
///             }
///         }
///         Ok(())
///     }
/// }
///
/// let scheduler = Scheduler::builder().workers(1).build();
/// scheduler.start();
/// let waiter = scheduler.spawn(Waiter)?;
/// let sent = Instant::now();
/// let _timer: TimerId = scheduler.send(After(Duration::from_millis(20), waiter.pid()), "late")?;
/// assert_eq!(waiter.wait()?, "late");
/// assert!(sent.elapsed() >= Duration::from_millis(20));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct After<T>(pub Duration, pub T);

impl<T> crate::engine::routing::sealed::Sealed for After<T> {}

impl<T> After<T> {
    /// Sets the timer for a package built for `sender`.
    fn set(self, sender: &Sender<'_>, package: Package) -> Result<TimerId, SendError> {
        match sender.step_engine() {
            Some(engine) => engine.send_after(self.0, package),
            None => {
                let shared = sender.cx().shared();
                shared.timers.send_after(shared, self.0, package)
            }
        }
    }
}

/// Any message, to the process that has the PID now.
impl<M: Any + Send> Target<M> for After<Pid> {
    type Receipt = TimerId;

    fn send_from(self, sender: Sender<'_>, message: M) -> Result<TimerId, SendError> {
        let package = Package::new(sender.from(), self.1, message);
        self.set(&sender, package)
    }
}

/// Only the address's message type.
impl<M: Any + Send> Target<M> for After<Addr<M>> {
    type Receipt = TimerId;

    fn send_from(self, sender: Sender<'_>, message: M) -> Result<TimerId, SendError> {
        let package = self.1.package(sender.from(), message);
        self.set(&sender, package)
    }
}

/// When a timer set with [`Output::set_timer`] fires: after a
/// [`Duration`] from the step's [`now`](Output::now), or at an [`Instant`]
/// (one in the past fires at once). Both convert into it, so a call takes
/// either.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use std::time::{Duration, Instant};
/// fn both(out: &mut Output<'_>, deadline: Instant) -> (TimerId, TimerId) {
///     (out.set_timer(Duration::from_millis(5), Tag(1)), out.set_timer(deadline, Tag(2)))
/// }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deadline {
    /// After this long.
    After(Duration),
    /// At this instant.
    At(Instant),
}

impl From<Duration> for Deadline {
    fn from(delay: Duration) -> Self {
        Deadline::After(delay)
    }
}

impl From<Instant> for Deadline {
    fn from(at: Instant) -> Self {
        Deadline::At(at)
    }
}
