//! Restart notices read from outside: a bounded queue the supervisor's
//! step pushes to (never blocking: a full feed counts the notice as
//! missed) and any thread reads, typed, with the handles' one wait shape.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use relay::Pid;
use sched_core::{ExitReason, TimedOut};

/// One restart of a supervised child, as a [`Restarts`] feed tells it.
///
/// # Examples
///
/// See [`Restarts`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RestartNotice {
    /// The child's name in its spec.
    pub child: String,
    /// The PID of the instance that ended.
    pub previous: Pid,
    /// The PID of the new instance: the same as `previous` for a restart
    /// in place (same mailbox, same name), a new one otherwise.
    pub pid: Pid,
    /// How the instance that ended ended.
    pub reason: ExitReason,
    /// What it said (an error's text, a panic's message), when the
    /// supervisor knew it at the restart.
    pub message: Option<String>,
}

impl RestartNotice {
    /// Whether the child was restarted in place (under the same PID).
    ///
    /// # Examples
    ///
    /// See [`Restarts`].
    pub fn in_place(&self) -> bool {
        self.previous == self.pid
    }
}

/// A feed of restart notices, read from outside any process: give it to
/// a supervisor with
/// [`SupervisorBuilder::restarts_to`](crate::supervisor::SupervisorBuilder::restarts_to),
/// and each restart of one of its children (in place or under a new PID)
/// arrives as a typed [`RestartNotice`], in the order the supervisor made
/// them. Clones read the same feed (each notice is read once, by one of
/// them).
///
/// The feed holds at most `capacity` unread notices: the supervisor never
/// waits for a reader, so a notice that finds the feed full is dropped
/// and counted in [`missed`](Restarts::missed).
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use sched::supervisor::Restarts;
/// use std::time::Duration;
///
/// /// Fails on its first message.
/// struct Fragile;
/// impl Process for Fragile {
///     type Done = ();
///     fn step(&mut self, events: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
///         if events.next().is_some() {
///             return Err("lost the connection".into());
///         }
///         Ok(())
///     }
/// }
///
/// let scheduler = Scheduler::builder().workers(1).build();
/// scheduler.start();
/// let restarts = Restarts::new(16);
/// let supervisor = Supervisor::builder()
///     .child(ChildSpec::new("db", || Fragile).register_as("db"))
///     .restarts_to(&restarts)
///     .build();
/// let _supervisor = scheduler.spawn(supervisor)?;
/// # let db = loop {
/// #     if let Some(pid) = scheduler.context().whereis("db") { break pid; }
/// #     std::thread::yield_now();
/// # };
/// scheduler.send(db, "boom")?;
///
/// let notice = restarts.wait_timeout(Duration::from_secs(5))?;
/// assert_eq!(notice.child, "db");
/// assert_eq!(notice.reason, ExitReason::Error);
/// assert!(notice.in_place()); // the same PID, the same mailbox
/// assert_eq!(notice.message.as_deref(), Some("lost the connection"));
/// # scheduler.shutdown(Duration::from_secs(1));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct Restarts {
    feed: Arc<Feed>,
}

#[derive(Debug)]
struct Feed {
    queue: Mutex<VecDeque<RestartNotice>>,
    ready: Condvar,
    capacity: usize,
    missed: AtomicU64,
}

impl Restarts {
    /// A feed that keeps up to `capacity` unread notices (at least one).
    ///
    /// # Examples
    ///
    /// ```
    /// let restarts = sched::supervisor::Restarts::new(8);
    /// assert!(restarts.try_next().is_none());
    /// ```
    pub fn new(capacity: usize) -> Restarts {
        Restarts {
            feed: Arc::new(Feed {
                queue: Mutex::new(VecDeque::new()),
                ready: Condvar::new(),
                capacity: capacity.max(1),
                missed: AtomicU64::new(0),
            }),
        }
    }

    /// The oldest unread notice, if any, without waiting.
    ///
    /// # Examples
    ///
    /// See [`Restarts::new`].
    pub fn try_next(&self) -> Option<RestartNotice> {
        self.feed.lock().pop_front()
    }

    /// Waits up to `timeout` for the next notice: `Err(TimedOut)` if none
    /// came (the feed can be waited on again).
    ///
    /// # Errors
    ///
    /// [`TimedOut`] when no notice came within `timeout`.
    ///
    /// # Examples
    ///
    /// See [`Restarts`].
    pub fn wait_timeout(&self, timeout: Duration) -> Result<RestartNotice, TimedOut> {
        // A timeout too long to add waits as long as it takes.
        let deadline = Instant::now().checked_add(timeout);
        let mut queue = self.feed.lock();
        loop {
            if let Some(notice) = queue.pop_front() {
                return Ok(notice);
            }
            let left = deadline.map_or(Duration::MAX, |d| {
                d.saturating_duration_since(Instant::now())
            });
            if left.is_zero() {
                return Err(TimedOut);
            }
            queue = match self.feed.ready.wait_timeout(queue, left) {
                Ok((queue, _)) => queue,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
    }

    /// How many notices were dropped because the feed was full.
    ///
    /// # Examples
    ///
    /// ```
    /// let restarts = sched::supervisor::Restarts::new(8);
    /// assert_eq!(restarts.missed(), 0);
    /// ```
    pub fn missed(&self) -> u64 {
        self.feed.missed.load(Relaxed)
    }

    /// Queues `notice` (from the supervisor's step): never waits; a full
    /// feed drops it and counts it.
    pub(super) fn push(&self, notice: RestartNotice) {
        let mut queue = self.feed.lock();
        if queue.len() >= self.feed.capacity {
            drop(queue);
            self.feed.missed.fetch_add(1, Relaxed);
            return;
        }
        queue.push_back(notice);
        drop(queue);
        self.feed.ready.notify_one();
    }
}

impl Feed {
    /// The queue; a reader that panicked while holding it (it cannot: no
    /// user code runs under the lock) would not stop the supervisor.
    fn lock(&self) -> MutexGuard<'_, VecDeque<RestartNotice>> {
        self.queue
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn notice(n: u64) -> RestartNotice {
        RestartNotice {
            child: format!("c{n}"),
            previous: Pid::local(n),
            pid: Pid::local(n + 100),
            reason: ExitReason::Error,
            message: None,
        }
    }

    #[test]
    fn a_full_feed_drops_and_counts_and_keeps_the_order_of_the_rest() {
        let feed = Restarts::new(2);
        for n in 0..5 {
            feed.push(notice(n));
        }
        assert_eq!(feed.missed(), 3);
        assert_eq!(feed.try_next(), Some(notice(0)));
        assert_eq!(feed.try_next(), Some(notice(1)));
        assert_eq!(feed.try_next(), None);
        assert!(!notice(0).in_place());
    }

    #[test]
    fn a_waiting_reader_wakes_for_a_notice_pushed_from_another_thread() {
        let feed = Restarts::new(4);
        let pusher = {
            let feed = feed.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(20));
                feed.push(notice(7));
            })
        };
        assert_eq!(feed.wait_timeout(Duration::from_secs(10)), Ok(notice(7)));
        pusher.join().unwrap();
        assert_eq!(feed.wait_timeout(Duration::from_millis(5)), Err(TimedOut));
    }
}
