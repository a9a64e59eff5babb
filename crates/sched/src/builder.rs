//! Configuring a [`Scheduler`]: workers, limits, handlers, hooks.

use std::fmt;

use relay::Pid;
use sched_core::{
    BoxError, Command, CommandHandler, CommandId, Completer, Context, Event, Outcome, Rejected,
};

use crate::scheduler::Scheduler;

/// Configures a [`Scheduler`].
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use sched::command::CommandId;
///
/// let scheduler = Scheduler::builder()
///     .workers(2)
///     .max_processes(100_000)
///     .mailbox_capacity(1_024)
///     .thread_name("app-worker")
///     .handler(CommandId(1), |cmd: sched::command::Command, done: sched::command::Completer| -> Result<(), sched::command::Rejected> {
///         let _ = done.complete(cmd.data);
///         Ok(())
///     })
///     .on_complete(|_cx, pid, outcome| {
///         if let Err(e) = outcome {
///             eprintln!("{pid} failed: {e}");
///         }
///     })
///     .build();
/// assert_eq!(scheduler.workers(), 2);
/// ```
pub struct SchedulerBuilder {
    inner: sched_core::Builder,
}

impl fmt::Debug for SchedulerBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("SchedulerBuilder")
            .field(&self.inner)
            .finish()
    }
}

/// The engine's builder under the facade's: what
/// [`Simulation::cluster`](crate::sim::Simulation::cluster) takes.
///
/// # Examples
///
/// ```
/// let engine_builder: sched::engine::Builder = sched::Scheduler::builder().workers(2).into();
/// # drop(engine_builder);
/// ```
impl From<SchedulerBuilder> for sched_core::Builder {
    fn from(builder: SchedulerBuilder) -> sched_core::Builder {
        builder.inner
    }
}

impl SchedulerBuilder {
    /// The engine's defaults (for [`Scheduler::builder`]).
    pub(crate) fn new() -> Self {
        SchedulerBuilder {
            inner: sched_core::Engine::builder(),
        }
    }

    /// Number of worker threads (default: available parallelism).
    ///
    /// # Examples
    ///
    /// ```
    /// let s = sched::Scheduler::builder().workers(3).build();
    /// assert_eq!(s.workers(), 3);
    /// ```
    pub fn workers(self, workers: usize) -> Self {
        SchedulerBuilder {
            inner: self.inner.workers(workers),
        }
    }

    /// Most live processes at once (default: unlimited). Submissions past
    /// it fail with [`SubmitError::TooManyProcesses`](crate::process::SubmitError::TooManyProcesses); the limit holds under
    /// any number of concurrent submitters.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::process::SubmitError;
    /// # struct Idle;
    /// # impl sched::Process for Idle {
    /// #     fn init(&mut self, _: &sched::InitContext, _: &str, _: sched::Payload) -> Result<(), sched::InitError> { Ok(()) }
    /// #     fn step(&mut self, _: &mut sched::Events<'_>, out: &mut sched::Output<'_>) -> Result<(), sched::BoxError> { out.idle(); Ok(()) }
    /// #     fn close(&mut self) {}
    /// # }
    /// let s = sched::Scheduler::builder().workers(1).max_processes(1).build();
    /// let _first = s.spawn(Spawn::new(Idle).method("run")).unwrap();
    /// let second = s.spawn(Spawn::new(Idle).method("run"));
    /// assert!(matches!(second, Err(SubmitError::TooManyProcesses { max: 1 })));
    /// ```
    pub fn max_processes(self, max: usize) -> Self {
        SchedulerBuilder {
            inner: self.inner.max_processes(max),
        }
    }

    /// Most messages queued for one process (default: unlimited). A send to
    /// a full mailbox fails with [`SendErrorKind::Full`](crate::message::SendErrorKind::Full)
    /// and hands the message back.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::message::SendErrorKind;
    /// # struct Idle;
    /// # impl sched::Process for Idle {
    /// #     fn init(&mut self, _: &sched::InitContext, _: &str, _: sched::Payload) -> Result<(), sched::InitError> { Ok(()) }
    /// #     fn step(&mut self, _: &mut sched::Events<'_>, out: &mut sched::Output<'_>) -> Result<(), sched::BoxError> { out.idle(); Ok(()) }
    /// #     fn close(&mut self) {}
    /// # }
    /// // Not started, so nothing drains the mailbox.
    /// let s = sched::Scheduler::builder().workers(1).mailbox_capacity(1).build();
    /// let p = s.spawn(Spawn::new(Idle).method("run")).unwrap();
    /// s.send(p.pid(), 1u8).unwrap();
    /// let full = s.send(p.pid(), 2u8).unwrap_err();
    /// assert_eq!(full.kind(), SendErrorKind::Full);
    /// assert_eq!(full.into_package().downcast::<u8>().ok(), Some(2));
    /// ```
    pub fn mailbox_capacity(self, capacity: usize) -> Self {
        SchedulerBuilder {
            inner: self.inner.mailbox_capacity(capacity),
        }
    }

    /// Reports a step that has run for `threshold` while it still runs: a
    /// `tracing` warning and [`Stats::long_steps`](crate::stats::Stats::long_steps);
    /// see [`Builder::long_step_threshold`](crate::engine::Builder::long_step_threshold).
    /// Default: 10 ms; `None` starts no watcher.
    ///
    /// # Examples
    ///
    /// ```
    /// let scheduler = sched::Scheduler::builder()
    ///     .long_step_threshold(Some(std::time::Duration::from_millis(50)))
    ///     .build();
    /// # drop(scheduler);
    /// ```
    pub fn long_step_threshold(self, threshold: Option<std::time::Duration>) -> Self {
        SchedulerBuilder {
            inner: self.inner.long_step_threshold(threshold),
        }
    }

    /// The longest an idle worker keeps looking for work before it parks,
    /// when its recent idle spells were short (work that comes back within
    /// a few hundred microseconds then finds it awake, without a wake-up);
    /// see [`Builder::idle_linger`](crate::engine::Builder::idle_linger).
    /// Default: 300 µs; `Duration::ZERO` parks at once.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// let scheduler = sched::Scheduler::builder()
    ///     .idle_linger(Duration::from_millis(1))
    ///     .build();
    /// # drop(scheduler);
    /// ```
    pub fn idle_linger(self, linger: std::time::Duration) -> Self {
        SchedulerBuilder {
            inner: self.inner.idle_linger(linger),
        }
    }

    /// Declares a group of processes (a tenant) with a weight: when the
    /// workers are saturated, groups with work ready at one priority level
    /// share the step time by their weights. A process joins one at spawn
    /// ([`InitContext::set_group`](crate::InitContext::set_group)), or its
    /// spawner's group when a step spawns it; every other process is in
    /// the `"default"` group (weight 1; declaring `"default"` sets it). See
    /// [`Builder::group`](crate::engine::Builder::group).
    ///
    /// # Panics
    ///
    /// If `weight` is not in `1..=10 000`, or past 64 groups.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::process::Group;
    ///
    /// let scheduler = Scheduler::builder().group("batch", 1).group("web", 3).build();
    /// let web: Group = scheduler.context().group("web").expect("declared");
    /// assert_eq!(scheduler.context().groups().into_iter().find(|g| g.group == web).map(|g| g.weight), Some(3));
    /// ```
    pub fn group(self, name: impl Into<String>, weight: u32) -> Self {
        SchedulerBuilder {
            inner: self.inner.group(name, weight),
        }
    }

    /// Worker threads are named `PREFIX-0`, `PREFIX-1`, ...
    ///
    /// # Examples
    ///
    /// ```
    /// let s = sched::Scheduler::builder().workers(1).thread_name("sim").build();
    /// s.start(); // the worker thread is named "sim-0"
    /// s.shutdown(std::time::Duration::from_secs(1));
    /// ```
    pub fn thread_name(self, prefix: impl Into<String>) -> Self {
        SchedulerBuilder {
            inner: self.inner.thread_name(prefix),
        }
    }

    /// The node number of the PIDs [`spawn`](crate::Context::spawn) allocates.
    ///
    /// # Examples
    ///
    /// ```
    /// let s = sched::Scheduler::builder().workers(1).node(7).build();
    /// assert_eq!(s.context().allocate_pid().unwrap().node(), 7);
    /// ```
    pub fn node(self, node: u32) -> Self {
        SchedulerBuilder {
            inner: self.inner.node(node),
        }
    }

    /// Connects the scheduler to other nodes through `transport`: a send to
    /// a PID of another node (from a step or from outside) goes there, and
    /// packages from other nodes reach local processes like local sends.
    /// Without a transport such a send fails with
    /// [`SendErrorKind::UnknownTarget`](crate::message::SendErrorKind::UnknownTarget).
    /// The `relay-nats` crate provides a transport over NATS (and a
    /// `nats(url)` shorthand for this call).
    ///
    /// # Examples
    ///
    /// See [`RemoteTransport`](crate::remote::RemoteTransport).
    pub fn remote(self, transport: std::sync::Arc<dyn crate::remote::RemoteTransport>) -> Self {
        SchedulerBuilder {
            inner: self.inner.remote(transport),
        }
    }

    /// Registers a closure as the handler of command `id`; its parameter
    /// types (`Command`, `Completer`) and return type are inferred. A type
    /// implementing [`CommandHandler`] goes through
    /// [`handler_impl`](SchedulerBuilder::handler_impl).
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::command::CommandId;
    /// let s = sched::Scheduler::builder()
    ///     .workers(1)
    ///     .handler(CommandId(1), |cmd, done| {
    ///         let _ = done.complete(cmd.data); // echo
    ///         Ok(())
    ///     })
    ///     .build();
    /// # drop(s);
    /// ```
    pub fn handler<F>(self, id: CommandId, handler: F) -> Self
    where
        F: Fn(Command, Completer) -> Result<(), Rejected> + Send + Sync + 'static,
    {
        SchedulerBuilder {
            inner: self.inner.handler(id, handler),
        }
    }

    /// Records the latency histograms (step durations, timer lateness,
    /// schedule latency, yield waits), read with
    /// [`histograms`](crate::Context::histograms). Off by default.
    ///
    /// # Examples
    ///
    /// See [`Context::histograms`](crate::Context::histograms).
    pub fn histograms(self, on: bool) -> Self {
        SchedulerBuilder {
            inner: self.inner.histograms(on),
        }
    }

    /// Counts each process's queued messages, so that
    /// [`ProcessInfo::mailbox_depth`](crate::process::ProcessInfo::mailbox_depth)
    /// reports it. Off by default (an atomic add per message sent, and one
    /// per step that takes messages).
    ///
    /// # Examples
    ///
    /// ```
    /// let scheduler = sched::Scheduler::builder().count_mailboxes(true).build();
    /// assert!(scheduler.processes().is_empty());
    /// ```
    pub fn count_mailboxes(self, on: bool) -> Self {
        SchedulerBuilder {
            inner: self.inner.count_mailboxes(on),
        }
    }

    /// Registers the handler of a typed command: it receives the yield's
    /// data as a `D` and completes with an `R` (see
    /// [`TypedCommand`](crate::command::TypedCommand)).
    ///
    /// # Examples
    ///
    /// See [`TypedCommand`](crate::command::TypedCommand).
    pub fn typed_handler<D, R, F>(self, command: sched_core::TypedCommand<D, R>, handler: F) -> Self
    where
        D: std::any::Any + Send,
        R: std::any::Any + Send,
        F: Fn(D, sched_core::Completer<R>) -> Result<(), Rejected> + Send + Sync + 'static,
    {
        SchedulerBuilder {
            inner: self.inner.typed_handler(command, handler),
        }
    }

    /// Registers a value implementing [`CommandHandler`] as the handler of
    /// `id`: for handlers that are types of their own rather than closures.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::command::{Command, CommandHandler, CommandId, Completer, Rejected};
    ///
    /// struct Echo;
    /// impl CommandHandler for Echo {
    ///     fn handle(&self, cmd: Command, done: Completer) -> Result<(), Rejected> {
    ///         let _ = done.complete(cmd.data);
    ///         Ok(())
    ///     }
    /// }
    /// let s = sched::Scheduler::builder().handler_impl(CommandId(1), Echo).build();
    /// # drop(s);
    /// ```
    pub fn handler_impl(self, id: CommandId, handler: impl CommandHandler) -> Self {
        SchedulerBuilder {
            inner: self.inner.handler_impl(id, handler),
        }
    }

    /// Observes each successful submission (after `init`); an `Err` or a
    /// panic rejects it with [`SubmitError::Rejected`](crate::process::SubmitError::Rejected).
    ///
    /// # Examples
    ///
    /// ```
    /// let s = sched::Scheduler::builder().workers(1).on_start(|_cx, _pid| Ok(())).build();
    /// # drop(s);
    /// ```
    pub fn on_start(
        self,
        hook: impl Fn(&Context, Pid) -> Result<(), BoxError> + Send + Sync + 'static,
    ) -> Self {
        SchedulerBuilder {
            inner: self.inner.on_start(hook),
        }
    }

    /// Observes every process's end, with its outcome (exactly once per
    /// process). The ended process no longer counts against
    /// [`max_processes`](SchedulerBuilder::max_processes) when the hook
    /// runs, so a hook may restart it even at the limit. A panic in the
    /// hook is caught and logged.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    /// let ended = Arc::new(AtomicUsize::new(0));
    /// let seen = ended.clone();
    /// let s = sched::Scheduler::builder()
    ///     .workers(1)
    ///     .on_complete(move |_cx, _pid, _outcome| { seen.fetch_add(1, Ordering::SeqCst); })
    ///     .build();
    /// s.shutdown(std::time::Duration::from_millis(10));
    /// assert_eq!(ended.load(Ordering::SeqCst), 0); // nothing was submitted
    /// ```
    pub fn on_complete(
        self,
        hook: impl Fn(&Context, Pid, &Outcome) + Send + Sync + 'static,
    ) -> Self {
        SchedulerBuilder {
            inner: self.inner.on_complete(hook),
        }
    }

    /// Receives every message or completion still queued when its process
    /// ended.
    ///
    /// # Examples
    ///
    /// ```
    /// let s = sched::Scheduler::builder()
    ///     .workers(1)
    ///     .on_dead_letter(|_cx, pid, event| eprintln!("{pid}: undelivered {event:?}"))
    ///     .build();
    /// # drop(s);
    /// ```
    pub fn on_dead_letter(
        self,
        hook: impl Fn(&Context, Pid, Event) + Send + Sync + 'static,
    ) -> Self {
        SchedulerBuilder {
            inner: self.inner.on_dead_letter(hook),
        }
    }

    /// Called for each step reported as long while it runs; see
    /// [`Builder::on_long_step`](crate::engine::Builder::on_long_step).
    ///
    /// # Examples
    ///
    /// ```
    /// let s = sched::Scheduler::builder()
    ///     .on_long_step(|_cx, pid, worker, running| {
    ///         eprintln!("{pid} has held worker {worker} for {running:?}")
    ///     })
    ///     .build();
    /// # drop(s);
    /// ```
    pub fn on_long_step(
        self,
        hook: impl Fn(&Context, Pid, usize, std::time::Duration) + Send + Sync + 'static,
    ) -> Self {
        SchedulerBuilder {
            inner: self.inner.on_long_step(hook),
        }
    }

    /// Builds the scheduler, not started: call [`Scheduler::start`].
    /// Processes submitted before that wait in the global queue.
    ///
    /// # Examples
    ///
    /// ```
    /// let s = sched::Scheduler::builder().workers(2).build();
    /// assert_eq!(s.stats().live_processes, 0);
    /// ```
    pub fn build(self) -> Scheduler {
        Scheduler::from_engine(self.inner.build())
    }

    /// Builds the scheduler as a deterministic [`Simulation`](crate::sim::Simulation):
    /// the same handlers and hooks, its workers run one round at a time on
    /// the calling thread in the order `config`'s source decides, on a
    /// virtual clock, with `config`'s faults.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::sim::Config;
    ///
    /// /// Reads its messages.
    /// struct Sink;
    /// impl Process for Sink {
    ///     fn step(&mut self, events: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
    ///         for _ in events {}
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let mut sim = Scheduler::builder().simulation(Config::seed(7).workers(2));
    /// let sink = sim.context().spawn(Sink)?;
    /// sim.run()?; // its first step
    /// sim.context().send(sink.pid(), 3u32)?;
    /// sim.run()?; // the message
    /// assert_eq!(sim.trace().steps(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn simulation(self, config: crate::sim::Config) -> crate::sim::Simulation {
        self.inner.simulation(config)
    }
}
