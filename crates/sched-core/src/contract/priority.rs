//! A process's priority: which of its worker's ready queues it waits in.
//!
//! The scheduling contract (how often each level is served, and the bound
//! on a ready process's wait) is in `runqueue/order.rs`, beside the code
//! that keeps it; this is the type a process author names.

/// How urgently a process is stepped when more processes are ready than
/// workers can run.
///
/// Each worker keeps one first-in-first-out queue of ready processes per
/// level and serves the levels by weight: `High` 12, `Normal` 3, `Low` 1.
/// Under saturation each level with work ready gets its weight's share of
/// the worker's time (of its steps, when every step is short), against
/// the weights of the levels that have work; a level with nothing ready
/// gives its share to the others. So `High` is weighted, not strict:
/// under a flood of `High` work, `Normal` still gets at least 3/16 of a
/// worker's time and `Low` at least 1/16 on every worker where they have
/// work ready (1/13 with `Normal` idle); and with only one level ready, it
/// gets all of it. With groups, a group's weight multiplies its level's.
///
/// A process spawned by a step starts at its spawner's level (as it
/// joins its spawner's group); any other starts at `Normal`. Its `init`
/// may choose another level
/// ([`InitContext::set_priority`](crate::InitContext::set_priority)), and
/// a step may change it ([`Output::set_priority`](crate::Output::set_priority)).
/// Work stealing and the queues of work from outside the workers keep the
/// levels: a thief takes `High` work first, and a worker takes outside
/// wake-ups by the same weights as its own (processes spawned from
/// outside are taken in the order they were spawned, one queue per group
/// for `Normal` and `Low`, then served by weight).
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use sched::Priority;
///
/// /// Answers health checks: put ahead of the bulk work.
/// struct Health;
///
/// impl Process for Health {
///     type Done = &'static str;
///     fn init(&mut self, cx: &InitContext, _: &str, _: Payload) -> Result<(), InitError> {
///         cx.set_priority(Priority::High);
///         Ok(())
///     }
///     fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
///         out.finish("healthy");
///         Ok(())
///     }
/// }
///
/// let scheduler = Scheduler::builder().workers(1).build();
/// scheduler.start();
/// let health = scheduler.spawn(Health)?;
/// let info = scheduler.context().process_info(health.pid());
/// assert!(info.is_none_or(|info| info.priority == Priority::High));
/// assert_eq!(health.wait()?, "healthy");
/// # scheduler.shutdown(std::time::Duration::from_secs(1));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum Priority {
    /// Served first: weight 12.
    High,
    /// The default: weight 3.
    #[default]
    Normal,
    /// Background work: weight 1, so never less than 1/16 of a worker's
    /// time while it has work ready (checked by
    /// `each_level_gets_its_weight_s_share_under_saturation` in
    /// `crates/sched/tests/fairness.rs`).
    Low,
}

impl Priority {
    /// The levels, highest first.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::Priority;
    /// assert_eq!(Priority::ALL[0], Priority::High);
    /// assert_eq!(Priority::ALL.len(), 3);
    /// ```
    pub const ALL: [Priority; 3] = [Priority::High, Priority::Normal, Priority::Low];

    /// Its index among [`ALL`](Priority::ALL): 0 for `High`.
    pub(crate) const fn index(self) -> usize {
        self as usize
    }

    /// The level of index `index` (as stored in a record's word); an
    /// index out of range is `Low`.
    pub(crate) const fn from_index(index: usize) -> Priority {
        match index {
            0 => Priority::High,
            1 => Priority::Normal,
            _ => Priority::Low,
        }
    }

    /// Its name, as introspection and the metrics print it.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(sched::process::Priority::Low.name(), "low");
    /// ```
    pub const fn name(self) -> &'static str {
        match self {
            Priority::High => "high",
            Priority::Normal => "normal",
            Priority::Low => "low",
        }
    }
}

impl std::fmt::Display for Priority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl crate::Output<'_> {
    /// Changes this process's priority (Erlang's
    /// `process_flag(priority, Level)`): from the next time it is queued,
    /// it waits in that level's ready queue. It keeps the level until it
    /// changes it again, across upgrades and restarts in place.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::Priority;
    ///
    /// /// Catches up at `Low` priority, then serves at `Normal`.
    /// struct Indexer { backlog: u32 }
    ///
    /// impl Process for Indexer {
    ///     type Done = Priority;
    ///     fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
    ///         if self.backlog > 0 {
    ///             out.set_priority(Priority::Low);
    ///             self.backlog -= 1;
    ///             out.continue_();
    ///         } else {
    ///             out.set_priority(Priority::Normal);
    ///             out.finish(out.priority());
    ///         }
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let scheduler = Scheduler::builder().workers(1).build();
    /// scheduler.start();
    /// let done = scheduler.spawn(Indexer { backlog: 3 })?;
    /// assert_eq!(done.wait()?, Priority::Normal);
    /// # scheduler.shutdown(std::time::Duration::from_secs(1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_priority(&mut self, priority: Priority) {
        self.engine.set_priority(priority);
    }

    /// This process's priority.
    ///
    /// # Examples
    ///
    /// See [`set_priority`](crate::Output::set_priority).
    pub fn priority(&self) -> Priority {
        self.engine.priority()
    }
}
