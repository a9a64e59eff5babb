//! A work-stealing scheduler for step-driven processes.
//!
//! `sched` runs many lightweight **processes** on a small pool of OS
//! threads. A process is a state machine, not a future and not a thread:
//! the scheduler calls its [`step`](Process::step) with the [`Event`]s that
//! arrived since its last step, and the process writes into a reused
//! [`Output`] buffer what it wants next:
//!
//! | it calls | meaning |
//! |---|---|
//! | [`out.continue_()`](Output::continue_) | run me again (behind the others waiting) |
//! | [`out.yield_command(id, tag, data)`](Output::yield_command) | dispatch this command to the handler of `id`; wake me with its completion, tagged `tag` |
//! | [`out.idle()`](Output::idle) (the default) | wait for messages |
//! | [`out.finish(result)`](Output::finish) | finished, with this result |
//! | [`out.upgrade(process, method, input)`](Output::upgrade) | replace me with this new process, under the same PID, keeping my pending messages |
//!
//! and it can [`send`](Output::send) messages to other processes and
//! [`spawn`](Output::spawn) new ones from inside a step.
//!
//! Command handlers (closures registered with the builder's
//! [`handler`](SchedulerBuilder::handler)) receive each yielded command (for
//! a [`TypedCommand`](command::TypedCommand), its data itself) with a
//! [`Completer`]: a `Send + Sync + 'static` handle that completes the yield
//! from any thread, at any later time, at most once.
//!
//! # The contract, in short
//!
//! - `init` runs on the submitting thread; its error fails the submission,
//!   and nothing is scheduled.
//! - A process is never stepped by two workers at once; events that arrive
//!   while it runs are never lost (they wake it again).
//! - Every process reports exactly one [`Outcome`](process::Outcome): its done value, its step
//!   error, [`ExitError::Terminated`], [`ExitError::Cancelled`] (shutdown)
//!   or [`ExitError::Panicked`] (or [`ExitError::Upgrade`] when an upgrade
//!   fails). `close` runs exactly once for every process whose `init`
//!   succeeded, each instance of an upgraded one included.
//! - Bad input gets a typed error that names the culprit and hands back
//!   what it was given: [`SubmitError`](process::SubmitError),
//!   [`SendError`](message::SendError),
//!   [`TerminateError`](process::TerminateError),
//!   [`CommandError`](command::CommandError),
//!   [`CompleteError`](command::CompleteError).
//!
//! # Example
//!
//! ```
//! use sched::command::{TypedCommand, Yielded};
//! use sched::prelude::*;
//! use std::time::Duration;
//!
//! /// A fetch: its data is a `u64` key, its result a `u64` value.
//! const FETCH: TypedCommand<u64, u64> = TypedCommand::new(CommandId(1));
//!
//! /// Fetches three things concurrently and finishes with their total.
//! #[derive(Default)]
//! struct Fetcher { fetches: Option<Yielded<u64>>, pending: usize, total: u64 }
//!
//! impl Process for Fetcher {
//!     type Done = u64;
//!
//!     fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
//!         for key in 1..=3 {
//!             // One tag for the three: their completions are read alike.
//!             self.fetches = Some(out.yield_command(FETCH, Tag(1), key * 10));
//!         }
//!         self.pending = 3;
//!         Ok(()) // waits for the completions
//!     }
//!
//!     fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
//!         let Some(fetches) = self.fetches else { return Ok(()) };
//!         for event in events {
//!             if let Ok(fetched) = fetches.result(event) {
//!                 self.total += fetched?;
//!                 self.pending -= 1;
//!             }
//!         }
//!         if self.pending == 0 {
//!             out.finish(self.total);
//!         }
//!         Ok(())
//!     }
//! }
//!
//! let scheduler = Scheduler::builder()
//!     .workers(2)
//!     .handler(FETCH, |key, done| {
//!         // Complete later, on another thread.
//!         std::thread::spawn(move || {
//!             let _ = done.complete(key + 1);
//!         });
//!         Ok(())
//!     })
//!     .build();
//! scheduler.start();
//! let fetcher = scheduler.spawn(Fetcher::default())?;
//! assert_eq!(fetcher.wait()?, 63);
//! scheduler.shutdown(Duration::from_secs(1));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The `deque` crate (re-exported as [`deque`]) is usable on its own.

mod builder;
mod call;
#[cfg(feature = "live")]
pub mod live;
#[cfg(feature = "metrics")]
pub mod metrics;
mod scheduler;
pub mod supervisor;

pub use builder::SchedulerBuilder;
pub use scheduler::Scheduler;

// The root shows what most programs need (the prelude's names, and a few
// more a program names often: send options, monitors, replies); every
// other name lives in its concept's module, and only there.
pub use relay::{Addr, Package, Payload, Pid};
pub use sched_core::{
    Accepts, After, BoxError, Command, CommandId, Completer, Completion, Context, Down, Event,
    Events, ExitError, ExitReason, InitContext, InitError, Monitor, Output, Priority, Process,
    Question, Rejected, Reply, ReplyId, Spawn, Tag, TimerId, Urgent, Within,
};
pub use supervisor::{ChildSpec, Restart, Strategy, Supervisor};

pub use deque;
pub use sched_core::sim;

/// The names a first program uses, for `use sched::prelude::*;`: the
/// scheduler, the process contract and its typed outcome, PIDs and typed
/// addresses, typed questions, commands and their handlers, timers, and
/// supervision. The rest is at the crate root and in its concept's module
/// (send options such as `Urgent` in [`message`], monitors and replies in
/// [`actor`], priorities in [`process`], strategies in [`supervisor`]), so
/// a glob import of the prelude shadows few of a program's own names.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
///
/// struct Greeter;
///
/// impl Process for Greeter {
///     type Done = &'static str;
///     fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
///         for event in events {
///             match event {
///                 Event::Message(m) if m.payload::<&str>().is_some() => out.finish("hello"),
///                 Event::Cancel => out.finish("cancelled"),
///                 _ => {}
///             }
///         }
///         Ok(())
///     }
/// }
///
/// let scheduler = Scheduler::builder().workers(1).build();
/// scheduler.start();
/// let mut greeter: Completion<&str> = scheduler.spawn(Greeter)?;
/// scheduler.send(greeter.pid(), "hi")?;
/// let done = greeter.wait_timeout(std::time::Duration::from_secs(5)).expect("it answered");
/// assert_eq!(done, "hello");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub mod prelude {
    pub use crate::{ChildSpec, Restart, Scheduler, Supervisor};
    pub use relay::{Addr, Payload, Pid};
    pub use sched_core::{
        Accepts, BoxError, Command, CommandId, Completer, Completion, Down, Event, Events,
        ExitError, ExitReason, InitContext, InitError, Output, Process, Question, Rejected, Spawn,
        Tag, TimerId,
    };
}

/// Processes: the contract a process implements, what a step reads and
/// writes, and how a process ends.
///
/// # Examples
///
/// ```
/// use sched::process::{Events, Output, Process};
/// use sched::BoxError;
///
/// struct Once;
/// impl Process for Once {
///     type Done = ();
///     fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
///         out.finish(());
///         Ok(())
///     }
/// }
/// ```
pub mod process {
    pub use sched_core::{
        Accepts, AnyProcess, BoxError, Completion, Event, Events, ExitError, Group, GroupInfo,
        InitContext, InitError, IntoSpawn, Outcome, Output, Priority, Process, ProcessInfo,
        ProcessState, Spawn, SubmitError, TerminateError, Typed, UnexpectedValue, UpgradeError,
        UpgradeRequestError, DEFAULT_METHOD,
    };
}

/// Commands a step yields and the handlers that complete them, from any
/// thread.
///
/// # Examples
///
/// ```
/// use sched::command::{Command, CommandId, Completer, Rejected};
///
/// let handler = |cmd: Command, done: Completer| -> Result<(), Rejected> {
///     let _ = done.complete(cmd.data);
///     Ok(())
/// };
/// let scheduler = sched::Scheduler::builder().handler(CommandId(1), handler).build();
/// # drop(scheduler);
/// ```
pub mod command {
    pub use crate::call::{Call, CallError, CallEvent};
    pub use sched_core::{
        Abandoned, Command, CommandError, CommandId, CommandRef, CompleteError, Completer,
        Rejected, Tag, TypedCommand, Yielded,
    };
}

/// Messages and addresses: PIDs, packages and their payloads, and sending.
///
/// # Examples
///
/// ```
/// use sched::message::{Package, Pid};
///
/// let package = Package::new(Pid::local(1), Pid::local(2), 42u32);
/// assert_eq!(package.payload::<u32>(), Some(&42));
/// ```
pub mod message {
    pub use relay::{
        into_payload, Acknowledge, Addr, Package, ParsePidError, Payload, Pid, Receipt, Receiver,
        RegisterError, Router, SendError, SendErrorKind,
    };
    pub use sched_core::{After, Resolved, Target, Urgent, Within};
}

/// Timers: what cancels one, and what its event carries.
///
/// # Examples
///
/// ```
/// use sched::timer::TimerId;
/// use sched::prelude::*;
/// use std::time::Duration;
///
/// fn arm(out: &mut Output<'_>) -> TimerId {
///     out.set_timer(Duration::from_millis(10), Tag(1))
/// }
/// ```
pub mod timer {
    pub use sched_core::{Deadline, TimerId};
}

/// Relations between processes, as in Erlang: monitors, links, names, and
/// asking a process for a reply.
///
/// # Examples
///
/// ```
/// use sched::actor::{Down, ExitReason};
///
/// fn crashed(down: &Down) -> bool {
///     down.reason == ExitReason::Error
/// }
/// ```
pub mod actor {
    pub use sched_core::{
        AskError, AskId, AskTarget, Down, ExitReason, Monitor, MonitorId, NameError, PidStatus,
        Question, Replied, Reply, ReplyId, ReplyTo, Request, Responder, TimedOut,
    };
}

/// Other nodes: the transport a scheduler routes remote PIDs through, and
/// PID allocation.
///
/// # Examples
///
/// ```
/// use sched::remote::PidAllocator;
///
/// let pids = PidAllocator::new(3);
/// assert_eq!(pids.allocate()?.node(), 3);
/// # Ok::<(), sched::remote::PidsExhausted>(())
/// ```
pub mod remote {
    pub use relay::{NodeDown, NumberError, PidAllocator, PidsExhausted, RemoteTransport, Signal};
}

/// Counters and reports: the engine's statistics and what a shutdown did.
///
/// # Examples
///
/// ```
/// let scheduler = sched::Scheduler::builder().workers(1).build();
/// let stats: sched::stats::Stats = scheduler.stats();
/// assert_eq!(stats.live_processes, 0);
/// ```
pub mod stats {
    pub use sched_core::{Histogram, Histograms, ShutdownReport, Stats, WorkerStats};
}

/// The engine without the facade's sugar: its handle, its builder and the
/// context running code sees.
///
/// # Examples
///
/// ```
/// let engine: sched::engine::Engine = sched::engine::Engine::builder().workers(1).build();
/// let _builder: sched::engine::Builder = sched::engine::Engine::builder();
/// engine.shutdown(std::time::Duration::from_millis(10));
/// ```
pub mod engine {
    pub use sched_core::{
        use_global_allocator, AllocatorChosen, AsContext, Builder, Context, Engine,
    };
}

#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

#[cfg(doctest)]
#[doc = include_str!("../../../docs/guide/coming-from-tokio.md")]
struct ComingFromTokioDoctests;

#[cfg(doctest)]
#[doc = include_str!("../../../docs/guide/cookbook.md")]
struct CookbookDoctests;

#[cfg(doctest)]
#[doc = include_str!("../../../docs/guide/actors.md")]
struct ActorsDoctests;
#[cfg(doctest)]
#[doc = include_str!("../../../docs/guide/workflow.md")]
struct WorkflowDoctests;

#[cfg(doctest)]
#[doc = include_str!("../../../docs/guide/simulation.md")]
struct SimulationDoctests;

#[cfg(doctest)]
#[doc = include_str!("../../../docs/guide/scheduling.md")]
struct SchedulingDoctests;

#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
struct ProjectReadmeDoctests;

#[cfg(all(doctest, feature = "live"))]
#[doc = include_str!("../../../docs/guide/live-view.md")]
struct LiveViewDoctests;

#[cfg(doctest)]
#[doc = include_str!("../../../docs/guide/migrating.md")]
struct MigratingDoctests;

#[cfg(doctest)]
#[doc = include_str!("../../../docs/guide/observability.md")]
struct ObservabilityDoctests;

#[cfg(doctest)]
#[doc = include_str!("../../../docs/reference/process-contract.md")]
struct ProcessContractDoctests;
