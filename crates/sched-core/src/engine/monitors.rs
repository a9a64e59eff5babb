//! Monitors: one down notification when a watched process ends, and
//! graceful cancellation of one process.
//!
//! A monitor lives in its target's record (its watchers, `Related::monitors`),
//! and its id comes from the engine's id source, which asks share: the
//! feature has no engine-wide state of its own. Its operations are methods
//! of [`Monitors`] (`in_records.rs`, the shared state's `monitors`), the
//! home of its operations on records; they take the engine (`&Shared`)
//! for the id source, the process table, a remote target and waking the
//! watcher.

use std::sync::Arc as StdArc;
use std::time::{Duration, Instant};

use relay::Pid;

use super::in_records::Monitors;
use super::remote::control::EndRequest;
use super::shared::Shared;
use super::Context;
use crate::contract::down::{Down, ExitReason, MonitorId};
use crate::contract::error::{TerminateError, TimedOut};
use crate::contract::event::Event;
use crate::contract::output::Output;
use crate::record::relations::{DownSlot, Watch, Watcher};
use crate::record::{Record, RecordRef};

/// A monitor set from outside the engine: wait for the watched process to
/// end.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use std::time::Duration;
///
/// struct Crashes;
/// impl Process for Crashes {
///     type Done = ();
///     fn step(&mut self, _: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
///         Err("boom".into())
///     }
/// }
///
/// let scheduler = Scheduler::builder().workers(1).build();
/// let pid = scheduler.spawn(Crashes)?.pid();
/// let monitor = scheduler.context().monitor(pid);
/// scheduler.start();
/// let down = monitor.wait_timeout(Duration::from_secs(5)).expect("it ended");
/// assert_eq!((down.pid, down.reason), (pid, ExitReason::Error));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// Dropping the handle removes the monitor: a health checker that monitors
/// a long-lived service and forgets the handle leaves nothing behind on
/// the service.
///
/// It is also a `Future` of the [`Down`], for async code (the names are
/// those of [`Completion`](crate::Completion): `wait`, `wait_timeout`,
/// `try_take`, `.await`):
///
/// ```
/// use sched::prelude::*;
///
/// # struct Crashes;
/// # impl Process for Crashes {
/// #     type Done = ();
/// #     fn step(&mut self, _: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
/// #         Err("boom".into())
/// #     }
/// # }
/// let scheduler = Scheduler::builder().workers(1).build();
/// scheduler.start();
/// let pid = scheduler.spawn(Crashes)?.pid();
/// let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
/// let down = runtime.block_on(scheduler.context().monitor(pid));
/// assert_eq!(down.pid, pid);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Monitor {
    id: MonitorId,
    slot: StdArc<DownSlot>,
    /// The watched process, while the monitor is attached to it (the
    /// handle's drop detaches it without looking the PID up).
    target: Option<RecordRef>,
    /// For a process of another node: the relations the monitor is listed
    /// in (held weakly: a handle does not keep the engine's transport).
    across: Option<std::sync::Weak<super::remote::table::Across>>,
}

impl std::fmt::Debug for Monitor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Monitor")
            .field("id", &self.id)
            .field("down", &self.try_take())
            .finish()
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        if let Some(target) = self.target.take() {
            Monitors::detach(&target, self.id.id);
        }
        if let Some(across) = self.across.take().and_then(|a| a.upgrade()) {
            across.demonitor(self.id);
        }
    }
}

impl Monitor {
    /// The monitor's id (for [`Context::demonitor`]).
    ///
    /// # Examples
    ///
    /// See [`Monitor`].
    pub fn id(&self) -> MonitorId {
        self.id
    }

    /// Waits until the watched process ends (at once if it had ended, or
    /// never existed).
    ///
    /// # Examples
    ///
    /// See [`Monitor`].
    pub fn wait(&self) -> Down {
        let mut down = self.slot.down.lock();
        loop {
            if let Some(down) = &*down {
                return down.clone();
            }
            down = self.slot.ready.wait(down);
        }
    }

    /// As [`wait`](Monitor::wait), giving up after `timeout`:
    /// `Err(TimedOut)` if the process is still running then (the monitor
    /// can wait again).
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::actor::TimedOut;
    /// use std::time::Duration;
    ///
    /// struct Forever;
    /// impl Process for Forever {
    ///     type Done = ();
    ///     fn step(&mut self, _: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let scheduler = Scheduler::builder().workers(1).build();
    /// scheduler.start();
    /// let pid = scheduler.spawn(Forever)?.pid();
    /// let monitor = scheduler.context().monitor(pid);
    /// assert_eq!(monitor.wait_timeout(Duration::from_millis(5)), Err(TimedOut));
    /// scheduler.terminate(pid)?;
    /// let down = monitor.wait_timeout(Duration::from_secs(5))?;
    /// assert_eq!(down.reason, ExitReason::Terminated);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn wait_timeout(&self, timeout: Duration) -> Result<Down, TimedOut> {
        let deadline = crate::sync::deadline_after(timeout);
        let mut down = self.slot.down.lock();
        loop {
            if let Some(down) = &*down {
                return Ok(down.clone());
            }
            if Instant::now() >= deadline {
                return Err(TimedOut);
            }
            down = self.slot.ready.wait_until(down, deadline).0;
        }
    }

    /// The notification, if the process has ended (the same each time:
    /// a `Down` is cloned, not used up).
    ///
    /// # Examples
    ///
    /// See [`Monitor`].
    pub fn try_take(&self) -> Option<Down> {
        self.slot.down.lock().clone()
    }
}

/// Resolves to the notification, as [`Monitor::wait`] returns it.
impl std::future::Future for Monitor {
    type Output = Down;

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Down> {
        // The waker is stored before the notification is looked at, so a
        // `set` between the two wakes it: no notification is missed.
        {
            let mut waker = self.slot.waker.lock();
            match &*waker {
                Some(stored) if stored.will_wake(cx.waker()) => {}
                _ => *waker = Some(cx.waker().clone()),
            }
        }
        match self.slot.down.lock().clone() {
            Some(down) => std::task::Poll::Ready(down),
            None => std::task::Poll::Pending,
        }
    }
}

impl Monitors {
    /// Attaches a monitor of `target` for `watcher`; tells it at once if
    /// `target` has ended or does not exist.
    pub(crate) fn add(&self, engine: &Shared, target: Pid, watcher: Watcher) -> MonitorId {
        if engine.is_remote(target) {
            return engine.across().monitor_remote(engine, target, watcher);
        }
        self.attach(engine, target, watcher).0
    }

    /// [`add`](Monitors::add), also returning the watched record when the
    /// monitor was attached to it.
    fn attach(
        &self,
        engine: &Shared,
        target: Pid,
        watcher: Watcher,
    ) -> (MonitorId, Option<RecordRef>) {
        let monitor = MonitorId {
            target,
            id: engine.ids.next(),
        };
        let record = engine.processes.get(target);
        let mut attached_to = None;
        let refused = match record {
            None => Some((ExitReason::NoProcess, watcher)),
            Some(record) => {
                let mut watcher = Some(watcher);
                let attached = record.related().with_live(|related| {
                    related.monitors.push(Watch {
                        id: monitor.id,
                        watcher: watcher.take().expect("taken once"),
                    });
                });
                let refused = attached
                    .err()
                    .map(|reason| (reason, watcher.take().expect("not attached")));
                if refused.is_none() {
                    attached_to = Some(record);
                }
                refused
            }
        };
        if let Some((reason, watcher)) = refused {
            self.tell_down(
                engine,
                watcher,
                Down {
                    monitor,
                    pid: target,
                    reason,
                    detail: None,
                },
            );
        }
        (monitor, attached_to)
    }

    /// Detaches a monitor; `true` if it had not fired. A target that has
    /// ended has its relations closed before its PID leaves the table (see
    /// [`retire`](Shared::retire)), so `false` here means its down has been
    /// or is being sent.
    pub(crate) fn remove(&self, engine: &Shared, monitor: MonitorId) -> bool {
        if engine.is_remote(monitor.target) {
            return engine
                .across
                .as_deref()
                .is_some_and(|a| a.demonitor(monitor));
        }
        let Some(record) = engine.processes.get(monitor.target) else {
            return false;
        };
        Monitors::detach(&record, monitor.id)
    }

    /// Tells `watcher` its monitor fired.
    pub(crate) fn tell_down(&self, engine: &Shared, watcher: Watcher, down: Down) {
        match watcher {
            Watcher::Process(record) => {
                if let Ok(wake) = record.deliver(Event::Down(down)) {
                    engine.after_wake(&record, wake);
                }
            }
            Watcher::Outside(slot) => slot.set(down),
            Watcher::Remote { watcher, id } => {
                if let Some(across) = engine.across.as_deref() {
                    across.down_to_remote(watcher, id, down);
                }
            }
        }
    }

    /// `record` has ended with `reason`: each of its watchers (`watches`,
    /// taken from its closed relations) is told (see
    /// [`retire`](Shared::retire)).
    pub(crate) fn fire(
        &self,
        engine: &Shared,
        record: &RecordRef,
        watches: Vec<Watch>,
        reason: ExitReason,
        detail: &Option<StdArc<str>>,
    ) {
        for watch in watches {
            let down = Down {
                monitor: MonitorId {
                    target: record.pid,
                    id: watch.id,
                },
                pid: record.pid,
                reason,
                detail: detail.clone(),
            };
            self.tell_down(engine, watch.watcher, down);
        }
    }

    /// Removes monitor `id` from `record`'s watchers; `true` if it was
    /// there (it had not fired).
    pub(crate) fn detach(record: &Record, id: u64) -> bool {
        let removed = record.relations.with_existing(|related| {
            let at = related.monitors.iter().position(|w| w.id == id)?;
            let watch = related.monitors.swap_remove(at);
            crate::contract::pending::give_back_spare(&mut related.monitors);
            Some(watch)
        });
        // The watch holds its watcher's record: dropped outside the lock.
        removed.flatten().is_some()
    }
}

impl Context {
    /// Watches `pid` from outside the engine: the returned [`Monitor`]
    /// receives one [`Down`] when it ends (at once if it has ended or never
    /// existed). Dropping the [`Monitor`] removes the monitor.
    ///
    /// # Examples
    ///
    /// See [`Monitor`].
    pub fn monitor(&self, pid: Pid) -> Monitor {
        let slot = StdArc::new(DownSlot::default());
        let shared = self.shared();
        let watcher = Watcher::Outside(StdArc::clone(&slot));
        if shared.is_remote(pid) {
            let id = shared.across().monitor_remote(shared, pid, watcher);
            let across = shared.across.as_ref().map(StdArc::downgrade);
            return Monitor {
                id,
                slot,
                target: None,
                across,
            };
        }
        let (id, target) = shared.monitors.attach(shared, pid, watcher);
        Monitor {
            id,
            slot,
            target,
            across: None,
        }
    }

    /// Removes a monitor (set from outside or by a step). Returns `true`
    /// if it had not fired: it never will.
    ///
    /// # Examples
    ///
    /// ```
    /// let engine = sched::engine::Engine::builder().workers(1).build();
    /// let monitor = engine.context().monitor(sched::Pid::local(99));
    /// assert!(!engine.context().demonitor(monitor.id()), "already fired: no such process");
    /// ```
    pub fn demonitor(&self, monitor: MonitorId) -> bool {
        let shared = self.shared();
        shared.monitors.remove(shared, monitor)
    }

    /// Asks process `pid` to finish: it receives
    /// [`Event::Cancel`](crate::Event::Cancel), as at shutdown, and ends its
    /// own way (a compensation step, a final message, `done`). Unlike
    /// [`terminate`](Context::terminate), nothing is forced: a process that
    /// ignores the cancel keeps running. A process gets at most one cancel,
    /// from this or from shutdown.
    ///
    /// A PID of another node (with a remote transport) is sent the request:
    /// `Ok` means it left, and its node hands the process the cancel if it
    /// is still there.
    ///
    /// # Errors
    ///
    /// [`TerminateError::Ended`] if the process that had the PID has
    /// ended; [`TerminateError::NotFound`] if the engine knows of no
    /// process that had it (never handed out, or a chosen PID whose
    /// process ended); [`TerminateError::Unreachable`] if it is of another
    /// node the request cannot reach. The same answers as
    /// [`terminate`](Context::terminate).
    ///
    /// # Examples
    ///
    /// ```
    /// let engine = sched::engine::Engine::builder().workers(1).build();
    /// assert!(engine.context().cancel(sched::Pid::local(404)).is_err());
    /// ```
    pub fn cancel(&self, pid: Pid) -> Result<(), TerminateError> {
        let shared = self.shared();
        if shared.is_remote(pid) {
            return shared.across().end_remote(pid, EndRequest::Cancel);
        }
        let Some(record) = shared.processes.get(pid) else {
            return Err(match shared.processes.handed_out(pid) {
                true => TerminateError::Ended(pid),
                false => TerminateError::NotFound(pid),
            });
        };
        if let Some(intercept) = &shared.intercept {
            if !intercept.cancel(&record) {
                return Ok(());
            }
        }
        shared.release_cancel(record);
        Ok(())
    }
}

impl Shared {
    /// Delivers a cancel to `record`, past any interceptor: what
    /// `Context::cancel` does, and what a simulation does with a cancel it
    /// held behind the messages before it.
    pub(crate) fn release_cancel(&self, record: RecordRef) {
        if let Some(wake) = record.deliver_cancel() {
            self.after_wake(&record, wake);
        }
    }
}

impl Output<'_> {
    /// Watches `pid`: this process receives one
    /// [`Event::Down`](crate::Event::Down) when it ends, with how it ended
    /// (at once if it has ended already or never existed). Monitors stack:
    /// two calls give two notifications. A PID of another node is watched
    /// through the remote transport the same way; if that node is lost
    /// first, the notification says
    /// [`ExitReason::NodeDown`](crate::ExitReason::NodeDown).
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    ///
    /// struct Child;
    /// impl Process for Child {
    ///     type Done = ();
    ///     fn step(&mut self, _: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
    ///         Err("crashed".into())
    ///     }
    /// }
    ///
    /// /// Starts a child and reports how it ended.
    /// struct Parent { started: bool }
    /// impl Process for Parent {
    ///     type Done = ExitReason;
    ///     fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
    ///         if !self.started {
    ///             self.started = true;
    ///             let child = out.spawn(Child)?;
    ///             out.monitor(child.pid());
    ///         }
    ///         for event in events {
    ///             if let Event::Down(Down { reason, .. }) = event {
    ///                 out.finish(reason);
    ///             }
    ///         }
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let scheduler = Scheduler::builder().workers(2).build();
    /// scheduler.start();
    /// let reason = scheduler.spawn(Parent { started: false })?.wait()?;
    /// assert_eq!(reason, ExitReason::Error);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn monitor(&mut self, pid: Pid) -> MonitorId {
        // A down delivered at once (no such process) waits in the queue
        // until the next step, which finds the monitor listed.
        let monitor = self.engine.monitor(pid);
        self.with_extras(|x| x.others().monitoring.push(monitor));
        monitor
    }

    /// Removes a monitor this process set. Returns `true` if its down had
    /// not reached this process: it then never does, even if the target
    /// has ended meanwhile and the down is on its way or further on among
    /// this step's events. `false` if the down was handed to a step before
    /// (or the monitor was removed before).
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::actor::MonitorId;
    /// fn forget(out: &mut Output<'_>, monitor: MonitorId) -> bool {
    ///     out.demonitor(monitor)
    /// }
    /// ```
    pub fn demonitor(&mut self, monitor: MonitorId) -> bool {
        let listed = self.with_existing(|x| {
            let monitoring = &mut x.existing_others()?.monitoring;
            let at = monitoring.iter().position(|m| *m == monitor)?;
            monitoring.swap_remove(at);
            crate::contract::pending::give_back_spare(monitoring);
            Some(())
        });
        if listed.flatten().is_none() {
            return false;
        }
        // Unlisted, its down is never handed to a step, even if the target
        // has ended and the down is on its way: whatever the target's side
        // says, it has not fired for this process.
        self.engine.demonitor(monitor);
        true
    }
}
