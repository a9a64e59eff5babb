//! A process's group: which tenant's share of step time it runs in.
//!
//! How a worker divides a level's step time between groups is in
//! `runqueue/shares.rs`, beside the code that does it; this is the handle a
//! process author names, and what the engine reports of each group.

use std::time::Duration;

/// A group of processes sharing a weight (a tenant): when the workers are
/// saturated, the groups with work ready at one priority level share the
/// step time by their weights. Groups are declared on the builder
/// ([`Builder::group`](crate::Builder::group)) and looked up by name
/// ([`Context::group`](crate::Context::group)); a process joins one at
/// spawn ([`InitContext::set_group`](crate::InitContext::set_group)), or
/// its spawner's when a step spawns it, and stays in it.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use sched::process::Group;
///
/// /// A tenant's job, in that tenant's group.
/// struct Job { tenant: Group }
///
/// impl Process for Job {
///     type Done = ();
///     fn init(&mut self, cx: &InitContext, _: &str, _: Payload) -> Result<(), InitError> {
///         cx.set_group(self.tenant);
///         Ok(())
///     }
///     fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
///         out.finish(());
///         Ok(())
///     }
/// }
///
/// let scheduler = Scheduler::builder()
///     .workers(2)
///     .group("reports", 1)
///     .group("checkout", 4)
///     .build();
/// scheduler.start();
/// let reports = scheduler.context().group("reports").expect("declared");
/// let job = scheduler.spawn(Job { tenant: reports })?;
/// assert!(scheduler.context().process_info(job.pid()).is_none_or(|info| info.group == reports));
/// job.wait()?;
/// # scheduler.shutdown(std::time::Duration::from_secs(1));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Group(u8);

impl Group {
    /// The group every process is in unless it joins another: named
    /// `"default"`, of weight 1 unless the builder declares it.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::process::Group;
    /// assert_eq!(Group::DEFAULT, Group::default());
    /// assert_eq!(Group::DEFAULT.index(), 0);
    /// ```
    pub const DEFAULT: Group = Group(0);

    /// Its index among the engine's groups, in the order the builder
    /// declared them (the default group is 0).
    ///
    /// # Examples
    ///
    /// ```
    /// let engine = sched::engine::Engine::builder().workers(1).group("a", 1).group("b", 2).build();
    /// assert_eq!(engine.context().group("b").map(|g| g.index()), Some(2));
    /// ```
    pub const fn index(self) -> usize {
        self.0 as usize
    }

    /// The group of index `index` (below 64).
    pub(crate) const fn from_index(index: usize) -> Group {
        Group(index as u8)
    }
}

impl std::fmt::Display for Group {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "group {}", self.0)
    }
}

/// What the engine reports of one group: [`Context::groups`](crate::Context::groups).
///
/// # Examples
///
/// ```
/// let engine = sched::engine::Engine::builder().workers(1).group("web", 3).build();
/// let web = engine.context().group("web").expect("declared");
/// let info = engine.context().groups().into_iter().find(|g| g.group == web).expect("a group of this engine");
/// assert_eq!((info.name.as_str(), info.weight, info.ready), ("web", 3, 0));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GroupInfo {
    /// Its handle.
    pub group: Group,
    /// The name it was declared with (`"default"` for the default group).
    pub name: String,
    /// Its weight now.
    pub weight: u32,
    /// Step time its processes have had, over all workers, since the
    /// engine started (measured on an engine with declared groups only:
    /// zero on one without, which reads no clock per step).
    pub busy: Duration,
    /// Its processes queued to run now, on every worker and in the global
    /// queues (a process in a worker's `next` slot is not counted).
    pub ready: usize,
}
