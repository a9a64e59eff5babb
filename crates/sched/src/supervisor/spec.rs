//! How a child is declared: a factory, an entry point, a restart policy.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use relay::Payload;
use sched_core::{AnyProcess, Process, DEFAULT_METHOD};

/// Makes a fresh instance of a child process, for each start.
type Factory = Arc<dyn Fn() -> AnyProcess + Send + Sync>;
/// Makes a fresh input for each start (a payload is moved into `init`).
type InputFactory = Arc<dyn Fn() -> Payload + Send + Sync>;

/// When a child that ended is started again.
///
/// A restart also needs the strategy's say: under
/// [`Strategy::OneForAll`](crate::Strategy::OneForAll) the policy of the
/// child that ended decides whether the whole group restarts.
///
/// # Examples
///
/// ```
/// use sched::Restart;
/// use sched::ExitReason;
/// assert!(Restart::Permanent.restarts_after(ExitReason::Normal));
/// assert!(Restart::Transient.restarts_after(ExitReason::Panicked));
/// assert!(!Restart::Transient.restarts_after(ExitReason::Normal));
/// assert!(!Restart::Temporary.restarts_after(ExitReason::Error));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Restart {
    /// Always restarted, however it ended (the default).
    #[default]
    Permanent,
    /// Restarted only when it ended abnormally: any reason but
    /// [`ExitReason::Normal`](crate::ExitReason::Normal) (a step error, a
    /// panic, a `terminate` from someone other than its supervisor).
    Transient,
    /// Never restarted: once it ends, the supervisor forgets it.
    Temporary,
}

impl Restart {
    /// Whether a child with this policy that ended with `reason` is
    /// restarted.
    ///
    /// # Examples
    ///
    /// See [`Restart`].
    pub fn restarts_after(self, reason: sched_core::ExitReason) -> bool {
        match self {
            Restart::Permanent => true,
            Restart::Transient => !reason.is_normal(),
            Restart::Temporary => false,
        }
    }
}

/// The declaration of one child of a [`Supervisor`](crate::Supervisor): a
/// name, a factory that makes a fresh process for each start, the entry
/// method and input given to its `init`, a [`Restart`] policy, and
/// optionally a registered name that follows the current incarnation.
///
/// A spec is cheap to clone (the factories are shared), so a
/// [`SupervisorBuilder`](crate::supervisor::SupervisorBuilder) can build many
/// supervisors, for instance as the factory of a nested one.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
///
/// struct Worker { id: u32 }
/// impl Process for Worker {
///     type Done = ();
///     fn step(&mut self, _: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
///         Ok(())
///     }
/// }
///
/// let spec = ChildSpec::new("worker-1", || Worker { id: 1 })
///     .restart(Restart::Transient)
///     .register_as("worker-1");
/// assert_eq!(spec.name(), "worker-1");
/// assert_eq!(spec.restart_policy(), Restart::Transient);
/// ```
#[derive(Clone)]
pub struct ChildSpec {
    pub(super) name: Arc<str>,
    pub(super) factory: Factory,
    pub(super) method: Arc<str>,
    pub(super) input: InputFactory,
    pub(super) restart: Restart,
    pub(super) register_as: Option<Arc<str>>,
    /// `None`: the supervisor decides (in place where it is safe, see
    /// `restart_in_place`).
    pub(super) in_place: Option<bool>,
}

impl ChildSpec {
    /// A [`Restart::Permanent`] child named `name` (the name identifies it
    /// in reports and errors), started with `factory()` under the method
    /// [`DEFAULT_METHOD`] and the input `()`.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    ///
    /// struct Cache;
    /// impl Process for Cache {
    ///     type Done = ();
    ///     fn step(&mut self, _: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
    ///         Ok(())
    ///     }
    /// }
    /// let spec = ChildSpec::new("cache", || Cache);
    /// assert_eq!(spec.method_name(), "run");
    /// ```
    ///
    /// A factory that chooses the process's type at run time returns an
    /// [`AnyProcess`](sched_core::AnyProcess):
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::process::AnyProcess;
    ///
    /// struct Fast;
    /// struct Safe;
    /// impl Process for Fast {
    ///     type Done = ();
    ///     fn step(&mut self, _: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> { Ok(()) }
    /// }
    /// impl Process for Safe {
    ///     type Done = ();
    ///     fn step(&mut self, _: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> { Ok(()) }
    /// }
    /// let fast = std::env::var("FAST").is_ok();
    /// let spec = ChildSpec::new("engine", move || {
    ///     if fast { AnyProcess::new(Fast) } else { AnyProcess::new(Safe) }
    /// });
    /// assert_eq!(spec.name(), "engine");
    /// ```
    pub fn new<P, F>(name: impl Into<Arc<str>>, factory: F) -> Self
    where
        P: Process,
        F: Fn() -> P + Send + Sync + 'static,
    {
        ChildSpec {
            name: name.into(),
            factory: Arc::new(move || AnyProcess::new(factory())),
            method: Arc::from(DEFAULT_METHOD),
            input: Arc::new(|| Box::new(())),
            restart: Restart::default(),
            register_as: None,
            in_place: None,
        }
    }

    /// The entry method given to the child's `init` at each start.
    ///
    /// # Examples
    ///
    /// ```
    /// # use sched::{BoxError, ChildSpec, Events, Output, Process};
    /// # struct Db;
    /// # impl Process for Db {
    /// #     type Done = ();
    /// #     fn step(&mut self, _: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> { Ok(()) }
    /// # }
    /// let spec = ChildSpec::new("db", || Db).method("serve");
    /// assert_eq!(spec.method_name(), "serve");
    /// ```
    pub fn method(mut self, method: &str) -> Self {
        self.method = Arc::from(method);
        self
    }

    /// The input given to the child's `init` at each start: a clone of
    /// `input` every time.
    ///
    /// # Examples
    ///
    /// ```
    /// # use sched::{BoxError, ChildSpec, Events, Output, Process};
    /// # struct Listener;
    /// # impl Process for Listener {
    /// #     type Done = ();
    /// #     fn step(&mut self, _: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> { Ok(()) }
    /// # }
    /// let spec = ChildSpec::new("listener", || Listener).input(String::from("0.0.0.0:8080"));
    /// # let _ = spec;
    /// ```
    pub fn input<T: Any + Clone + Send + Sync>(mut self, input: T) -> Self {
        self.input = Arc::new(move || Box::new(input.clone()));
        self
    }

    /// The [`Restart`] policy (by default [`Restart::Permanent`]).
    ///
    /// # Examples
    ///
    /// See [`ChildSpec`].
    pub fn restart(mut self, restart: Restart) -> Self {
        self.restart = restart;
        self
    }

    /// Restarts the child **in place** when its step fails or panics: a
    /// fresh process from the factory takes over under the same PID, with
    /// the same mailbox, so everything queued after the message it was
    /// handling reaches the new instance (the message it was handling is
    /// lost; a request among them is answered `AskError::NoReply`). Its
    /// name, the monitors and links others hold on it and its
    /// `Completion` stay; what the failed instance was waiting for (its
    /// timers, monitors, asks) is cancelled. Completions of commands it
    /// yielded in earlier steps cannot be recalled: they reach the new
    /// instance, which should ignore completions it does not expect (as
    /// after an upgrade). Each such restart counts
    /// against the supervisor's intensity like any other. An end that is
    /// not a failure (`done`, a terminate, a cancel, a linked process's
    /// end) is handled as for any child, and so is a new instance that
    /// cannot start: those restarts take a new PID.
    ///
    /// **The default is in place where it is safe**: for a child of a
    /// [`Strategy::OneForOne`](crate::Strategy::OneForOne) supervisor that
    /// is not [`Restart::Temporary`] (a temporary child is never
    /// restarted). Under `OneForAll` the default is a new PID, because
    /// restarting one child in place would not restart its siblings with
    /// it.
    ///
    /// Choose a new PID (`restart_in_place(false)`) when callers must
    /// notice the crash: a monitor's `Down`, a link's exit signal, pending
    /// requests failing at once, as in OTP. Keep in place when the child's
    /// callers hold its PID and its queue is worth more than its state: a
    /// service whose requests should outlive one bad request.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    ///
    /// struct Parser;
    /// impl Process for Parser {
    ///     type Done = ();
    ///     fn step(&mut self, _: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let spec = ChildSpec::new("parser", || Parser).restart_in_place(true);
    /// # drop(spec);
    /// ```
    pub fn restart_in_place(mut self, in_place: bool) -> Self {
        self.in_place = Some(in_place);
        self
    }

    /// Registers each incarnation of the child under `name` as it starts,
    /// so peers find the current one with `whereis(name)` (or send to it
    /// with `post_named`) after a restart. The engine releases the name when
    /// an incarnation ends. If another live process holds the name, the
    /// start fails (see [`Supervisor`](crate::Supervisor)).
    ///
    /// # Examples
    ///
    /// See [`ChildSpec`].
    pub fn register_as(mut self, name: impl Into<Arc<str>>) -> Self {
        self.register_as = Some(name.into());
        self
    }

    /// The child's name.
    ///
    /// # Examples
    ///
    /// See [`ChildSpec`].
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The entry method.
    ///
    /// # Examples
    ///
    /// See [`ChildSpec::method`].
    pub fn method_name(&self) -> &str {
        &self.method
    }

    /// The restart policy.
    ///
    /// # Examples
    ///
    /// See [`ChildSpec`].
    pub fn restart_policy(&self) -> Restart {
        self.restart
    }
}

impl fmt::Debug for ChildSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChildSpec")
            .field("name", &self.name)
            .field("method", &self.method)
            .field("restart", &self.restart)
            .field("register_as", &self.register_as)
            .finish_non_exhaustive()
    }
}
