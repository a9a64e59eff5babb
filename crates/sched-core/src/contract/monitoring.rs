//! Monitors and names from a step.
//!
//! A monitor set through [`Output`] belongs to the process: it is removed
//! when the process ends.

use relay::Pid;

use crate::contract::down::{MonitorId, NameError};
use crate::contract::output::Output;
use crate::record::relations::Watcher;
use crate::sync::Arc;

impl Output<'_> {
    /// Watches `pid`: this process receives one
    /// [`Event::Down`](crate::Event::Down) when it ends, with how it ended
    /// (at once if it has ended already or never existed). Monitors stack:
    /// two calls give two notifications.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::{BoxError, Down, Event, Events, ExitReason, Output, Process, Scheduler};
    ///
    /// struct Child;
    /// impl Process for Child {
    ///     fn step(&mut self, _: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
    ///         Err("crashed".into())
    ///     }
    /// }
    ///
    /// /// Starts a child and reports how it ended.
    /// struct Parent { started: bool }
    /// impl Process for Parent {
    ///     fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
    ///         if !self.started {
    ///             self.started = true;
    ///             let child = out.spawn(Child, "run", ())?;
    ///             out.monitor(child.pid());
    ///         }
    ///         for event in events {
    ///             if let Event::Down(Down { reason, .. }) = event {
    ///                 out.done(Box::new(reason));
    ///             }
    ///         }
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let scheduler = Scheduler::builder().workers(2).build();
    /// scheduler.start();
    /// let reason = scheduler.spawn(Parent { started: false }, "run", ())?.wait()?;
    /// assert_eq!(reason.downcast_ref::<ExitReason>(), Some(&ExitReason::Error));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn monitor(&mut self, pid: Pid) -> MonitorId {
        let watcher = Watcher::Process(Arc::clone(self.timers.record));
        let shared = self.engine.context().shared();
        // A down delivered at once (no such process) waits in the queue
        // until the next step, which finds the monitor listed.
        let monitor = shared.add_monitor(pid, watcher);
        self.timers.with_extras(|x| x.monitoring.push(monitor));
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
    /// use sched::{MonitorId, Output};
    /// fn forget(out: &mut Output<'_>, monitor: MonitorId) -> bool {
    ///     out.demonitor(monitor)
    /// }
    /// ```
    pub fn demonitor(&mut self, monitor: MonitorId) -> bool {
        let listed = self.timers.with_existing(|x| {
            let at = x.monitoring.iter().position(|m| *m == monitor)?;
            x.monitoring.swap_remove(at);
            crate::contract::pending::give_back_spare(&mut x.monitoring);
            Some(())
        });
        if listed.flatten().is_none() {
            return false;
        }
        // Unlisted, its down is never handed to a step, even if the target
        // has ended and the down is on its way: whatever the target's side
        // says, it has not fired for this process.
        let _ = self.engine.context().shared().remove_monitor(monitor);
        true
    }

    /// Gives this process the name `name` until it ends (see
    /// [`Context::register_name`](crate::Context::register_name)).
    ///
    /// # Errors
    ///
    /// [`NameError::Taken`] if another live process holds the name.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::Output;
    /// fn become_the_registry(out: &mut Output<'_>) -> Result<(), sched::NameError> {
    ///     out.register_name("registry")
    /// }
    /// ```
    pub fn register_name(&mut self, name: &str) -> Result<(), NameError> {
        self.engine.context().register_name(name, self.pid)
    }
}
