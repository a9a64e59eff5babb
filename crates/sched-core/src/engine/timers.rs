//! Timers through the [`Context`]: delayed sends from anywhere.

use std::any::Any;
use std::time::Duration;

use relay::{Addr, Package, Pid, SendError};

use super::Context;
use crate::timer::TimerId;

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
