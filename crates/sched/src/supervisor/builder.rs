//! The restart strategy and the builder of a supervisor.

use std::time::Duration;

use super::feed::Restarts;
use super::spec::ChildSpec;
use super::Supervisor;

/// Which children a supervisor restarts when one of them ends and its
/// [`Restart`](crate::Restart) policy asks for a restart.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use sched::Strategy;
/// let builder = Supervisor::builder().strategy(Strategy::OneForAll);
/// # let _ = builder;
/// assert_eq!(Strategy::default(), Strategy::OneForOne);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Strategy {
    /// Restart only the child that ended; its siblings keep running, under
    /// the same PIDs (the default).
    #[default]
    OneForOne,
    /// Stop every other running child (hard `terminate`, in reverse start
    /// order, each ended before the next is stopped), then start them all
    /// again in start order: for children that only make sense together.
    OneForAll,
}

/// Configures a [`Supervisor`]: its strategy, its restart intensity, how
/// long its children get to finish when it is cancelled, and its children.
///
/// Defaults: [`Strategy::OneForOne`], at most 3 restarts within 5
/// seconds, a shutdown timeout of 5 seconds, no children.
///
/// The builder is `Clone` and [`build`](SupervisorBuilder::build) borrows
/// it, so the factory of a nested supervisor can be a closure over one.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use sched::Strategy;
/// use std::time::Duration;
///
/// struct Worker;
/// impl Process for Worker {
///     type Done = ();
///     fn step(&mut self, _: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
///         Ok(())
///     }
/// }
///
/// let pool = Supervisor::builder()
///     .strategy(Strategy::OneForOne)
///     .child(ChildSpec::new("w1", || Worker))
///     .child(ChildSpec::new("w2", || Worker));
/// let root = Supervisor::builder()
///     .strategy(Strategy::OneForAll)
///     .intensity(5, Duration::from_secs(10))
///     .shutdown_timeout(Duration::from_millis(500))
///     .child(ChildSpec::new("pool", move || pool.build()))
///     .build();
/// # let _ = root;
/// ```
#[derive(Debug, Clone)]
pub struct SupervisorBuilder {
    pub(super) strategy: Strategy,
    pub(super) max_restarts: u32,
    pub(super) within: Duration,
    pub(super) shutdown_timeout: Duration,
    pub(super) children: Vec<ChildSpec>,
    pub(super) restarts: Option<Restarts>,
}

impl Default for SupervisorBuilder {
    fn default() -> Self {
        SupervisorBuilder {
            strategy: Strategy::default(),
            max_restarts: 3,
            within: Duration::from_secs(5),
            shutdown_timeout: Duration::from_secs(5),
            children: Vec::new(),
            restarts: None,
        }
    }
}

impl SupervisorBuilder {
    /// The restart strategy.
    ///
    /// # Examples
    ///
    /// See [`SupervisorBuilder`].
    pub fn strategy(mut self, strategy: Strategy) -> Self {
        self.strategy = strategy;
        self
    }

    /// The restart intensity: if more than `max_restarts` restarts happen
    /// within `within`, the supervisor stops all its children and ends
    /// with [`SupervisorError::IntensityExceeded`](crate::supervisor::SupervisorError::IntensityExceeded).
    /// `max_restarts == 0` means the first restart is already too many.
    ///
    /// # Examples
    ///
    /// See [`SupervisorBuilder`].
    pub fn intensity(mut self, max_restarts: u32, within: Duration) -> Self {
        self.max_restarts = max_restarts;
        self.within = within;
        self
    }

    /// How long children get, after the supervisor is cancelled, to end
    /// their own way before the supervisor terminates the rest.
    ///
    /// # Examples
    ///
    /// See [`SupervisorBuilder`].
    pub fn shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.shutdown_timeout = timeout;
        self
    }

    /// Adds a child; children start in the order they are added.
    ///
    /// # Examples
    ///
    /// See [`SupervisorBuilder`].
    pub fn child(mut self, spec: ChildSpec) -> Self {
        self.children.push(spec);
        self
    }

    /// Adds several children, in order.
    ///
    /// # Examples
    ///
    /// ```
    /// # use sched::{BoxError, ChildSpec, Events, Output, Process, Supervisor};
    /// # struct Shard(u32);
    /// # impl Process for Shard {
    /// #     type Done = ();
    /// #     fn step(&mut self, _: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> { Ok(()) }
    /// # }
    /// let shards = (0..4).map(|i| ChildSpec::new(format!("shard-{i}"), move || Shard(i)));
    /// let supervisor = Supervisor::builder().children(shards).build();
    /// # let _ = supervisor;
    /// ```
    pub fn children(mut self, specs: impl IntoIterator<Item = ChildSpec>) -> Self {
        self.children.extend(specs);
        self
    }

    /// Tells `feed` of every restart of a child (in place or under a new
    /// PID), as a typed [`RestartNotice`](crate::supervisor::RestartNotice)
    /// read from outside any process. A later call replaces the feed;
    /// every supervisor this builder builds tells the same one.
    ///
    /// # Examples
    ///
    /// See [`Restarts`].
    pub fn restarts_to(mut self, feed: &Restarts) -> Self {
        self.restarts = Some(feed.clone());
        self
    }

    /// A supervisor with this configuration, ready to be spawned (entry
    /// method [`DEFAULT_METHOD`](crate::process::DEFAULT_METHOD)).
    ///
    /// # Examples
    ///
    /// See [`SupervisorBuilder`].
    pub fn build(&self) -> Supervisor {
        Supervisor::new(self.clone())
    }
}
