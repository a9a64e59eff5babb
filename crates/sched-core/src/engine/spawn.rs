//! Spawn: the one door that starts a process, from outside
//! ([`Context::spawn`]) or from a step ([`Output::spawn`]), with its
//! options in a [`Spawn`] value.

use std::any::Any;

use relay::{Payload, Pid};

use super::Context;
use crate::contract::error::SubmitError;
use crate::contract::output::Output;
use crate::contract::process::{Process, DEFAULT_METHOD};
use crate::record::completion::Completion;
use crate::record::RecordRef;

/// A process and how to start it: which entry point (`method`), with what
/// `input`, under which PID. A bare process is a `Spawn` with the
/// defaults ([`DEFAULT_METHOD`], no input, a fresh PID), so
/// `spawn(process)` and `spawn(Spawn::new(process).input(x))` are the same
/// door.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
///
/// /// Finishes with its input, doubled; `"half"` halves it instead.
/// struct Double { n: u64, by: fn(u64) -> u64 }
/// impl Process for Double {
///     type Done = u64;
///     fn init(&mut self, _: &InitContext, method: &str, input: Payload) -> Result<(), InitError> {
///         self.n = *input.downcast::<u64>().map_err(|_| InitError::failed("not a u64"))?;
///         if method == "half" {
///             self.by = |n| n / 2;
///         }
///         Ok(())
///     }
///     fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
///         out.finish((self.by)(self.n));
///         Ok(())
///     }
/// }
///
/// let scheduler = Scheduler::builder().workers(1).build();
/// scheduler.start();
/// let double = Double { n: 0, by: |n| n * 2 };
/// assert_eq!(scheduler.spawn(Spawn::new(double).input(21u64))?.wait()?, 42);
/// let half = Double { n: 0, by: |n| n * 2 };
/// let halved = scheduler.spawn(Spawn::new(half).method("half").input(84u64))?;
/// assert_eq!(halved.wait()?, 42);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Spawn<'a, P> {
    process: P,
    method: &'a str,
    input: Payload,
    pid: Option<Pid>,
}

impl<P: Process> Spawn<'static, P> {
    /// `process` with the defaults: [`DEFAULT_METHOD`], no input (`()`), a
    /// fresh PID.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// struct Idle;
    /// impl Process for Idle {
    ///     type Done = ();
    ///     fn step(&mut self, _: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> { Ok(()) }
    /// }
    /// let options = Spawn::new(Idle).input(5u8);
    /// # let _ = options;
    /// ```
    pub fn new(process: P) -> Self {
        Spawn {
            process,
            method: DEFAULT_METHOD,
            input: relay::into_payload(()),
            pid: None,
        }
    }
}

impl<'a, P: Process> Spawn<'a, P> {
    /// Starts the process through its entry point `method` (its `init`
    /// gets it as its `method` argument).
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// fn resume<P: Process>(process: P) -> Spawn<'static, P> {
    ///     Spawn::new(process).method("resume")
    /// }
    /// ```
    pub fn method<'b>(self, method: &'b str) -> Spawn<'b, P> {
        Spawn {
            process: self.process,
            method,
            input: self.input,
            pid: self.pid,
        }
    }

    /// Hands `input` to the process's `init` (as its `input` argument, a
    /// [`Payload`]). The value is boxed here; a value that is already a
    /// `Payload` is not boxed again (but a `Box<T>` is a value like any
    /// other: pass the `T`).
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// fn with_limit<P: Process>(process: P) -> Spawn<'static, P> {
    ///     Spawn::new(process).input(100u32)
    /// }
    /// ```
    pub fn input(mut self, input: impl Any + Send) -> Self {
        self.input = relay::into_payload(input);
        self
    }

    /// Starts the process under `pid`, one taken with
    /// [`Context::allocate_pid`] and not used yet (a supervisor that
    /// names a child before it exists, a process restarted in its place).
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// struct Idle;
    /// impl Process for Idle {
    ///     type Done = ();
    ///     fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
    ///         out.finish(());
    ///         Ok(())
    ///     }
    /// }
    /// let scheduler = Scheduler::builder().workers(1).build();
    /// scheduler.start();
    /// let pid = scheduler.context().allocate_pid()?;
    /// let idle = scheduler.spawn(Spawn::new(Idle).at(pid))?;
    /// assert_eq!(idle.pid(), pid);
    /// # idle.wait()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn at(mut self, pid: Pid) -> Self {
        self.pid = Some(pid);
        self
    }
}

impl<P> std::fmt::Debug for Spawn<'_, P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Spawn")
            .field("process", &std::any::type_name::<P>())
            .field("method", &self.method)
            .field("pid", &self.pid)
            .finish_non_exhaustive()
    }
}

/// What [`spawn`](Context::spawn) takes: a process (started with the
/// defaults) or a [`Spawn`] with options.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use sched::Context;
/// use sched::process::{IntoSpawn, SubmitError};
///
/// fn start_all<S: IntoSpawn<'static>>(
///     cx: &Context,
///     all: Vec<S>,
/// ) -> Result<Vec<Completion<S::Done>>, SubmitError> {
///     all.into_iter().map(|s| cx.spawn(s)).collect()
/// }
/// ```
pub trait IntoSpawn<'a> {
    /// What the process finishes with (its [`Process::Done`]).
    type Done: Any + Send;
    /// The process started.
    type Process: Process<Done = Self::Done>;

    /// The options.
    fn into_spawn(self) -> Spawn<'a, Self::Process>;
}

impl<'a, P: Process> IntoSpawn<'a> for P {
    type Done = P::Done;
    type Process = P;

    fn into_spawn(self) -> Spawn<'a, P> {
        Spawn {
            process: self,
            method: DEFAULT_METHOD,
            input: relay::into_payload(()),
            pid: None,
        }
    }
}

impl<'a, P: Process> IntoSpawn<'a> for Spawn<'a, P> {
    type Done = P::Done;
    type Process = P;

    fn into_spawn(self) -> Spawn<'a, P> {
        self
    }
}

/// Spawning from any handle.
impl Context {
    /// Starts a process: `init` runs on this thread with the
    /// [`Spawn`]'s method and input (for a bare process,
    /// [`DEFAULT_METHOD`] and `()`), then the process is queued. The
    /// returned [`Completion`] has its PID, its typed address
    /// ([`Completion::addr`]) and its outcome.
    ///
    /// # Errors
    ///
    /// [`SubmitError`]: shutting down, too many live processes, `init`
    /// failed or the start hook refused, no PID left, or (with
    /// [`Spawn::at`]) the PID is in use.
    ///
    /// # Examples
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
    ///
    /// let scheduler = Scheduler::builder().workers(1).build();
    /// scheduler.start();
    /// let hello: Completion<&str> = scheduler.spawn(Hello)?;
    /// assert_eq!(hello.wait()?, "hello");
    /// # scheduler.shutdown(std::time::Duration::from_secs(1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn spawn<'a, S: IntoSpawn<'a>>(
        &self,
        spawn: S,
    ) -> Result<Completion<S::Done>, SubmitError> {
        let Spawn {
            process,
            method,
            input,
            pid,
        } = spawn.into_spawn();
        let shared = self.shared();
        let spawned = match pid {
            // Stored in its record's allocation: one allocation per process.
            None => shared
                .live
                .spawn(shared, RecordRef::new(Pid::OUTSIDE, process), method, input),
            Some(pid) => shared
                .live
                .submit(shared, RecordRef::new(pid, process), method, input),
        };
        spawned.map(Completion::retype)
    }
}

impl Output<'_> {
    /// Starts a process from this step, as [`Context::spawn`] does. It
    /// runs on its own: link to it or monitor it to learn of its end.
    ///
    /// # Errors
    ///
    /// As for [`Context::spawn`].
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::process::SubmitError;
    ///
    /// struct Worker;
    /// impl Process for Worker {
    ///     type Done = ();
    ///     fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
    ///         out.finish(());
    ///         Ok(())
    ///     }
    /// }
    ///
    /// fn start_worker(out: &mut Output<'_>, job: u32) -> Result<Pid, SubmitError> {
    ///     Ok(out.spawn(Spawn::new(Worker).input(job))?.pid())
    /// }
    /// ```
    pub fn spawn<'a, S: IntoSpawn<'a>>(
        &mut self,
        spawn: S,
    ) -> Result<Completion<S::Done>, SubmitError> {
        self.context().spawn(spawn)
    }
}
