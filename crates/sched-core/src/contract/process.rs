//! The process contract: `init`, `step`, `close`.

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};

use relay::{Payload, Pid};

use crate::contract::error::BoxError;
use crate::contract::error::InitError;
use crate::contract::event::Event;
use crate::contract::output::{Events, Output};
use crate::panic_guard::{drop_payload, panic_message};

/// A step-driven process: a state machine the scheduler advances.
///
/// - [`init`](Process::init) prepares the entry point `method` with its
///   input, on the submitting thread; an error fails the submission and
///   nothing is scheduled.
/// - [`step`](Process::step) advances the machine with the events that
///   arrived since the last step and writes what it wants next into
///   `output`: continue, yield commands, wait for messages (idle), or done.
///   Returning an error ends the process with that error.
/// - [`close`](Process::close) releases resources. It is called exactly once
///   for every process whose `init` succeeded, however it ended.
///
/// # Examples
///
/// A process that counts its steps and finishes after three:
///
/// ```
/// use sched::prelude::*;
/// use sched::Payload;
///
/// struct Counter { left: u32 }
///
/// impl Process for Counter {
///     type Done = &'static str;
///     fn init(&mut self, _cx: &InitContext, method: &str, _input: Payload) -> Result<(), InitError> {
///         match method {
///             "run" => Ok(()),
///             other => Err(InitError::unknown_method(other)),
///         }
///     }
///     fn step(&mut self, _events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
///         self.left -= 1;
///         if self.left == 0 { out.finish("finished") } else { out.continue_() }
///         Ok(())
///     }
///     fn close(&mut self) {}
/// }
/// ```
///
/// `init` and `close` have defaults: a process with one entry point and
/// nothing to release writes only `step`. The default `init` accepts
/// [`DEFAULT_METHOD`] (`"run"`) and ignores its input; any other method
/// fails with [`InitError::UnknownMethod`].
///
/// ```
/// use sched::prelude::*;
///
/// struct Hello;
///
/// impl Process for Hello {
///     type Done = &'static str;
///     fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
///         out.finish("hello");
///         Ok(())
///     }
/// }
/// ```
pub trait Process: Send + 'static {
    /// What the process finishes with: the value it hands
    /// [`finish`](Output::finish), which its [`Completion`](crate::Completion)
    /// gives the waiter as a `Done` (the engine spawns it as a
    /// `Completion<Self::Done>`, so waiting for another type does not
    /// compile). A process that finishes with `()` or does not care says
    /// `type Done = ();`. A process whose done value's type is chosen at
    /// run time says [`Payload`] and its waiter downcasts.
    ///
    /// `finish` itself takes any value: one of another type than `Done`
    /// reaches the waiter as [`ExitError::UnexpectedType`](crate::ExitError::UnexpectedType),
    /// which hands it back.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    ///
    /// struct Answer;
    ///
    /// impl Process for Answer {
    ///     type Done = u32;
    ///     fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
    ///         out.finish(42u32);
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let scheduler = Scheduler::builder().workers(1).build();
    /// scheduler.start();
    /// let answer: Completion<u32> = scheduler.spawn(Answer)?;
    /// assert_eq!(answer.wait()?, 42);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// Waiting for another type does not compile:
    ///
    /// ```compile_fail,E0308
    /// use sched::prelude::*;
    ///
    /// struct Answer;
    ///
    /// impl Process for Answer {
    ///     type Done = u32;
    ///     fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
    ///         out.finish(42u32);
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let scheduler = Scheduler::builder().workers(1).build();
    /// let answer: String = scheduler.spawn(Answer)?.wait()?; // `Answer` finishes with a `u32`
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    type Done: Any + Send;

    /// Prepares the entry point `method` with `input`. By default: accepts
    /// [`DEFAULT_METHOD`] and nothing else, and ignores the input.
    fn init(&mut self, cx: &InitContext, method: &str, input: Payload) -> Result<(), InitError> {
        let _ = (cx, input);
        if method == DEFAULT_METHOD {
            Ok(())
        } else {
            Err(InitError::unknown_method(method))
        }
    }

    /// Starts the work, with the first step's output: called once per
    /// process instance, right before its first `step` (after `init`, and
    /// for the new process of an upgrade). Yield the first commands, set
    /// the first timers, monitor or link to peers here, instead of keeping
    /// a "first step" flag. The first `step` follows in the same turn
    /// (with whatever events are pending, possibly none) unless `start`
    /// finished the process ([`finish`](Output::finish)) or asked for an
    /// upgrade. An error or a panic here ends the process as one from
    /// `step` does. By default it does nothing.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::command::CommandId;
    /// use std::time::Duration;
    ///
    /// const FETCH: CommandId = CommandId(1);
    ///
    /// /// Fetches once, with a timeout; finishes with the answer or `None`.
    /// struct FetchOnce;
    ///
    /// impl Process for FetchOnce {
    ///     type Done = Option<Payload>;
    ///     fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
    ///         out.yield_command(FETCH, Tag(1), Box::new("/status"));
    ///         out.set_timer(Duration::from_millis(50), Tag(2));
    ///         Ok(())
    ///     }
    ///
    ///     fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
    ///         for event in events {
    ///             match event {
    ///                 Event::Completion { result, .. } => out.finish(Some(result?)),
    ///                 Event::Timer { .. } => out.finish(None::<Payload>),
    ///                 _ => {}
    ///             }
    ///         }
    ///         Ok(())
    ///     }
    /// }
    /// ```
    fn start(&mut self, output: &mut Output<'_>) -> Result<(), BoxError> {
        let _ = output;
        Ok(())
    }

    /// Advances the state machine. Events not consumed from `events` are
    /// kept: they are the first events of the next step.
    fn step(&mut self, events: &mut Events<'_>, output: &mut Output<'_>) -> Result<(), BoxError>;

    /// Releases resources; called exactly once after a successful `init`.
    /// By default it does nothing.
    fn close(&mut self) {}

    /// What reached the process and was never read, offered to it once
    /// at its end, before [`close`](Process::close): the events its last
    /// step left, and those that came after that step, up to the moment
    /// its mailbox closed (a send after that moment fails with
    /// [`SendErrorKind::Ended`](relay::SendErrorKind::Ended) and its
    /// message back). Called only when there is something unread, and
    /// only after a successful `init`. The process takes out of `unread`
    /// what it hands on (a router passing a stopped process's messages to
    /// its next incarnation, say); what stays is counted in
    /// [`Stats::dead_letters`](crate::Stats::dead_letters) and goes to the
    /// dead-letter hook, as it does by default. A panic here leaves what
    /// is still in `unread` as dead letters.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use sched::prelude::*;
    ///
    /// /// Reads nothing: ends at its first step, and keeps what it left.
    /// struct Quitter(Arc<Mutex<Vec<u32>>>);
    ///
    /// impl Process for Quitter {
    ///     type Done = ();
    ///     fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
    ///         out.finish(());
    ///         Ok(())
    ///     }
    ///     fn unread(&mut self, unread: &mut Vec<Event>) {
    ///         unread.retain(|event| match event {
    ///             Event::Message(m) => match m.payload::<u32>() {
    ///                 Some(n) => {
    ///                     self.0.lock().unwrap().push(*n);
    ///                     false
    ///                 }
    ///                 None => true,
    ///             },
    ///             _ => true,
    ///         });
    ///     }
    /// }
    ///
    /// let scheduler = Scheduler::builder().workers(1).build();
    /// let kept = Arc::new(Mutex::new(Vec::new()));
    /// let quitter = scheduler.spawn(Quitter(Arc::clone(&kept)))?;
    /// scheduler.send(quitter.pid(), 7u32)?;
    /// scheduler.send(quitter.pid(), 8u32)?;
    /// scheduler.start();
    /// quitter.wait()?;
    /// assert_eq!(*kept.lock().unwrap(), [7, 8]);
    /// assert_eq!(scheduler.stats().dead_letters, 0);
    /// # scheduler.shutdown(std::time::Duration::from_secs(1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn unread(&mut self, unread: &mut Vec<Event>) {
        let _ = unread;
    }

    /// The process's type, for diagnostics: a process that ignored its
    /// [`Event::Cancel`](crate::Event::Cancel) and had to be forced at
    /// shutdown is named in a `tracing` warning with it. By default, the
    /// implementing type's name; there is no reason to override it.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    ///
    /// struct Ticker;
    ///
    /// impl Process for Ticker {
    ///     type Done = ();
    ///     fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
    ///         out.finish(());
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let boxed: Box<dyn Process<Done = ()>> = Box::new(Ticker);
    /// assert!(boxed.type_name().ends_with("Ticker"));
    /// ```
    fn type_name(&self) -> &'static str {
        std::any::type_name::<Self>()
    }
}

/// A boxed process is a process, with the boxed one's [`Done`](Process::Done)
/// (a `Box<dyn Process<Done = u64>>` holds any process that finishes
/// with a `u64`). Every method forwards to the boxed one, including those
/// with a default (a method added to [`Process`] must be forwarded here
/// too; the test `a_boxed_process_forwards_every_method` checks each).
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
///
/// struct Hello;
/// impl Process for Hello {
///     type Done = &'static str;
///     fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
///         out.finish("hello");
///         Ok(())
///     }
/// }
///
/// let scheduler = Scheduler::builder().workers(1).build();
/// scheduler.start();
/// let chosen: Box<dyn Process<Done = &str>> = Box::new(Hello);
/// let done = scheduler.spawn(chosen)?;
/// assert_eq!(done.wait()?, "hello");
/// # scheduler.shutdown(std::time::Duration::from_secs(1));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
impl<P: Process + ?Sized> Process for Box<P> {
    type Done = P::Done;

    fn init(&mut self, cx: &InitContext, method: &str, input: Payload) -> Result<(), InitError> {
        (**self).init(cx, method, input)
    }

    fn start(&mut self, output: &mut Output<'_>) -> Result<(), BoxError> {
        (**self).start(output)
    }

    fn step(&mut self, events: &mut Events<'_>, output: &mut Output<'_>) -> Result<(), BoxError> {
        (**self).step(events, output)
    }

    fn close(&mut self) {
        (**self).close()
    }

    fn unread(&mut self, unread: &mut Vec<Event>) {
        (**self).unread(unread)
    }

    fn type_name(&self) -> &'static str {
        (**self).type_name()
    }
}

/// A process whose type, and whose done value's type, are chosen at run
/// time: any [`Process`], with its [`Done`](Process::Done) forgotten (its
/// waiter reads a [`Payload`] and downcasts). What a supervisor's child
/// factory, a plugin loader or an interpreter that picks the process to
/// start holds; a process whose type is known is spawned as itself.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use sched::process::AnyProcess;
///
/// struct Hello;
/// impl Process for Hello {
///     type Done = &'static str;
///     fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
///         out.finish("hello");
///         Ok(())
///     }
/// }
///
/// struct Count;
/// impl Process for Count {
///     type Done = u32;
///     fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
///         out.finish(3u32);
///         Ok(())
///     }
/// }
///
/// let scheduler = Scheduler::builder().workers(1).build();
/// scheduler.start();
/// for chosen in [AnyProcess::new(Hello), AnyProcess::new(Count)] {
///     let done: Payload = scheduler.spawn(chosen)?.wait()?;
///     assert!(done.is::<&str>() || done.is::<u32>());
/// }
/// # scheduler.shutdown(std::time::Duration::from_secs(1));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct AnyProcess(Box<dyn Run>);

impl AnyProcess {
    /// `process`, with its done type forgotten (an `AnyProcess` is not
    /// boxed again).
    ///
    /// # Examples
    ///
    /// See [`AnyProcess`].
    pub fn new<P: Process>(process: P) -> AnyProcess {
        AnyProcess(boxed(process))
    }
}

impl std::fmt::Debug for AnyProcess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("AnyProcess")
            .field(&self.0.type_name())
            .finish()
    }
}

impl Process for AnyProcess {
    type Done = Payload;

    fn init(&mut self, cx: &InitContext, method: &str, input: Payload) -> Result<(), InitError> {
        self.0.init(cx, method, input)
    }

    fn start(&mut self, output: &mut Output<'_>) -> Result<(), BoxError> {
        self.0.start(output)
    }

    fn step(&mut self, events: &mut Events<'_>, output: &mut Output<'_>) -> Result<(), BoxError> {
        self.0.step(events, output)
    }

    fn close(&mut self) {
        self.0.close()
    }

    fn unread(&mut self, unread: &mut Vec<Event>) {
        self.0.unread(unread)
    }

    fn type_name(&self) -> &'static str {
        self.0.type_name()
    }
}

/// A process as the engine holds it: [`Process`] without its `Done`
/// type, so processes of every done type share one record layout and
/// one vtable shape. Every process is one (the blanket impl forwards).
pub(crate) trait Run: Send + 'static {
    fn init(&mut self, cx: &InitContext, method: &str, input: Payload) -> Result<(), InitError>;
    fn start(&mut self, output: &mut Output<'_>) -> Result<(), BoxError>;
    fn step(&mut self, events: &mut Events<'_>, output: &mut Output<'_>) -> Result<(), BoxError>;
    fn close(&mut self);
    fn unread(&mut self, unread: &mut Vec<Event>);
    fn type_name(&self) -> &'static str;
}

impl<P: Process> Run for P {
    fn init(&mut self, cx: &InitContext, method: &str, input: Payload) -> Result<(), InitError> {
        Process::init(self, cx, method, input)
    }

    fn start(&mut self, output: &mut Output<'_>) -> Result<(), BoxError> {
        Process::start(self, output)
    }

    fn step(&mut self, events: &mut Events<'_>, output: &mut Output<'_>) -> Result<(), BoxError> {
        Process::step(self, events, output)
    }

    fn close(&mut self) {
        Process::close(self)
    }

    fn unread(&mut self, unread: &mut Vec<Event>) {
        Process::unread(self, unread)
    }

    fn type_name(&self) -> &'static str {
        Process::type_name(self)
    }
}

/// `process` as the engine's `Box<dyn Run>`, without boxing it again when
/// it is an [`AnyProcess`] already (a type chosen at run time).
pub(crate) fn boxed<P: Process>(process: P) -> Box<dyn Run> {
    let mut slot = Some(process);
    let any: &mut dyn Any = &mut slot;
    match any.downcast_mut::<Option<AnyProcess>>() {
        Some(already) => already.take().expect("just filled").0,
        None => Box::new(slot.take().expect("just filled")),
    }
}

/// The entry method the default [`Process::init`] accepts: `"run"`.
///
/// # Examples
///
/// ```
/// assert_eq!(sched::process::DEFAULT_METHOD, "run");
/// ```
pub const DEFAULT_METHOD: &str = "run";

/// What `init` is told about the process being initialised.
///
/// # Examples
///
/// ```
/// use sched::InitContext;
/// use sched::Pid;
/// let cx = InitContext::new(Pid::local(3));
/// assert_eq!(cx.pid(), Pid::local(3));
/// ```
#[derive(Debug, Clone)]
pub struct InitContext {
    pid: Pid,
    priority: std::cell::Cell<Option<crate::Priority>>,
    group: std::cell::Cell<Option<crate::Group>>,
}

impl InitContext {
    /// A context for the process `pid`.
    ///
    /// # Examples
    ///
    /// ```
    /// let cx = sched::InitContext::new(sched::Pid::local(1));
    /// assert_eq!(cx.pid().id(), 1);
    /// ```
    pub fn new(pid: Pid) -> Self {
        InitContext {
            pid,
            priority: std::cell::Cell::new(None),
            group: std::cell::Cell::new(None),
        }
    }

    /// The PID the process runs under.
    ///
    /// # Examples
    ///
    /// ```
    /// let cx = sched::InitContext::new(sched::Pid::local(8));
    /// assert_eq!(cx.pid(), sched::Pid::local(8));
    /// ```
    pub fn pid(&self) -> Pid {
        self.pid
    }

    /// Chooses the priority the process starts at (default
    /// [`Priority::Normal`](crate::Priority::Normal)): which of its
    /// worker's ready queues it waits in, and so how soon it is stepped
    /// when more processes are ready than workers. For a spawn; an upgrade
    /// keeps the process's priority (a step changes it with
    /// [`Output::set_priority`](crate::Output::set_priority)). The last
    /// call wins.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::Priority;
    ///
    /// let cx = InitContext::new(Pid::local(1));
    /// assert_eq!(cx.priority(), None);
    /// cx.set_priority(Priority::Low);
    /// assert_eq!(cx.priority(), Some(Priority::Low));
    /// ```
    pub fn set_priority(&self, priority: crate::Priority) {
        self.priority.set(Some(priority));
    }

    /// The priority `init` chose, if it chose one.
    ///
    /// # Examples
    ///
    /// See [`set_priority`](InitContext::set_priority).
    pub fn priority(&self) -> Option<crate::Priority> {
        self.priority.get()
    }

    /// Puts the process in `group` (see [`Group`](crate::Group)) for its
    /// whole life, instead of its spawner's group (a process spawned by a
    /// step) or the default group (any other). For a spawn; an upgrade
    /// keeps the process's group. A group the engine does not have fails
    /// the spawn with [`SubmitError::UnknownGroup`](crate::SubmitError::UnknownGroup).
    /// The last call wins.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    ///
    /// let engine = sched::engine::Engine::builder().workers(1).group("batch", 1).build();
    /// let batch = engine.context().group("batch").expect("declared");
    /// let cx = InitContext::new(Pid::local(1));
    /// assert_eq!(cx.group(), None);
    /// cx.set_group(batch);
    /// assert_eq!(cx.group(), Some(batch));
    /// ```
    pub fn set_group(&self, group: crate::Group) {
        self.group.set(Some(group));
    }

    /// The group `init` chose, if it chose one.
    ///
    /// # Examples
    ///
    /// See [`set_group`](InitContext::set_group).
    pub fn group(&self) -> Option<crate::Group> {
        self.group.get()
    }
}

/// Runs `process.init` for `pid`; a panic becomes
/// [`InitError::Panicked`] with its message (the payload dropped under the
/// guard). What submission and both kinds of upgrade run; `Ok` carries
/// the context, with the priority and group `init` chose, if any (which
/// only a submission applies).
pub(crate) fn init_guarded(
    process: &mut dyn Run,
    pid: Pid,
    method: &str,
    input: Payload,
) -> Result<InitContext, InitError> {
    let cx = InitContext::new(pid);
    match catch_unwind(AssertUnwindSafe(|| process.init(&cx, method, input))) {
        Ok(result) => result.map(|()| cx),
        Err(panic) => {
            let message = panic_message(&*panic);
            drop_payload(panic);
            Err(InitError::Panicked { message })
        }
    }
}

/// Calls `process.close` and drops it; a panic in either becomes its
/// message (the payload dropped under the guard). Every path that ends an
/// initialised instance goes through here, so `close` runs once.
pub(crate) fn close_guarded<P>(process: P) -> Result<(), String>
where
    P: std::ops::DerefMut<Target = dyn Run>,
{
    let closed = catch_unwind(AssertUnwindSafe(move || {
        let mut process = process;
        process.close();
        drop(process);
    }));
    closed.map_err(|panic| {
        let message = panic_message(&*panic);
        drop_payload(panic);
        message
    })
}

/// Offers `unread` to `process` (see [`Process::unread`]); a panic is
/// caught and named, and leaves what is still in `unread` to the caller.
pub(crate) fn unread_guarded(process: &mut dyn Run, unread: &mut Vec<Event>) -> Result<(), String> {
    catch_unwind(AssertUnwindSafe(|| process.unread(unread))).map_err(|panic| {
        let message = panic_message(&*panic);
        drop_payload(panic);
        message
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Not zero-sized: its box is a real allocation.
    struct Plain(#[allow(dead_code)] u64);

    impl Process for Plain {
        type Done = ();
        fn step(&mut self, _: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
            Ok(())
        }
    }

    /// The address of the process a box holds.
    fn address(process: &dyn Run) -> *const u8 {
        (process as *const dyn Run).cast()
    }

    #[test]
    fn a_process_boxed_already_is_not_boxed_again() {
        // What `Output::upgrade` and the engine's upgrade take an
        // `AnyProcess` through: the same allocation comes out (boxed
        // again, the outer box would hold the inner one at a new address).
        let chosen_at_run_time = AnyProcess::new(Plain(7));
        let before = address(&*chosen_at_run_time.0);
        let boxed = boxed(chosen_at_run_time);
        assert_eq!(address(&*boxed), before);
    }
}
