//! Supervision: a process that starts children from factories, watches
//! them with monitors, and restarts them by a strategy, within a restart
//! intensity, as Erlang/OTP's `supervisor` does.
//!
//! The exact semantics are on [`Supervisor`].

mod builder;
mod child;
mod error;
mod feed;
mod in_place;
mod intensity;
mod report;
mod spec;
mod watch;

use std::sync::Arc;
use std::time::Instant;

use sched_core::{BoxError, Down, Event, Events, Output, Process, Tag, TimerId};

pub use builder::{Strategy, SupervisorBuilder};
pub use error::SupervisorError;
pub use feed::{RestartNotice, Restarts};
pub use report::{ChildReport, SupervisorReport, WhichChildren};
pub use spec::{ChildSpec, Restart};
pub use watch::{RestartedInPlace, WatchRestarts};

use child::{Child, StartError};
use intensity::Intensity;

/// The tag of the supervisor's shutdown timer.
const SHUTDOWN_TIMER: Tag = Tag(u64::MAX);

/// A process that supervises children. Build one with
/// [`Supervisor::builder`] and spawn it like any process.
///
/// # Semantics
///
/// - **Start.** At its first step the supervisor starts its children in
///   the order they were declared: for each, a fresh process from the
///   factory is spawned from the step with the spec's method and input,
///   registered under its `register_as` name if it has one, then
///   monitored. If one cannot start, the ones already started are
///   terminated and the supervisor ends with
///   [`SupervisorError::StartFailed`].
/// - **A child ends** (its monitor's down). Its [`Restart`] policy decides
///   whether it is restarted: `Permanent` always, `Transient` unless it
///   ended normally (`done`), `Temporary` never (it is then forgotten).
///   - [`Strategy::OneForOne`] starts a new incarnation of that child only;
///     the others keep running under the same PIDs.
///   - [`Strategy::OneForAll`] terminates every other running child (hard
///     `terminate`), in reverse start order, each one ended (its down
///     received) before the next is terminated, then starts all the
///     children again in start order: the `Temporary` ones are stopped and
///     not restarted, and a `Transient` one that had finished normally is
///     started again with the others. Downs during that regrouping (the
///     ones it caused, or a sibling crashing by itself meanwhile) cause no
///     further restart.
/// - **Restart intensity.** Each restart counts once at the time it is
///   attempted: one per child under one-for-one, one per regrouping under
///   one-for-all. If more than `max_restarts` restarts happen within the
///   period, the supervisor terminates all its children (in reverse start
///   order), waits for their downs, and ends with the step error
///   [`SupervisorError::IntensityExceeded`] (so its outcome is
///   [`ExitError::Step`](crate::ExitError::Step)).
/// - **A restart that fails** (`init` fails, the start hook refuses, the
///   registered name is held by another live process) counts as a restart,
///   and the child is tried again at the supervisor's next step (which it
///   asks for at once), until it starts or the intensity is exceeded. A
///   start refused because the scheduler is shutting down is not counted:
///   the child is left stopped, and the supervisor's own cancel follows.
/// - **Cancel** (the scheduler shuts down, or someone calls
///   `cancel(supervisor)`): the supervisor stops restarting, sends a
///   cancel to every running child, and waits for their downs for at most
///   the shutdown timeout; then it terminates the ones still running, waits
///   for their downs, and finishes `done` with a [`SupervisorReport`] (the
///   restarts of each child).
/// - **Introspection.** Asked [`WhichChildren`] (a typed question: `query`
///   answers a [`SupervisorReport`] without a downcast), it answers with
///   the current PIDs, each child's restarts, how it last ended and, for a
///   failure, its error's text or panic message. The first answer comes
///   after the children's first start: waiting for it is how to wait for
///   the children to be started (and their names registered), with no
///   polling. Other requests are dropped unanswered.
/// - **Restart notices.** A child restarted in place keeps its PID, so no
///   monitor fires. Sent [`WatchRestarts::to(pid)`](WatchRestarts::to),
///   the supervisor tells that process of each later restart in place
///   with a [`RestartedInPlace`] message (the child, how it failed and
///   what it said). Other messages are ignored.
/// - **Links.** The supervisor links itself to each child and traps exits:
///   a child's end reaches it as an [`Event::Exit`] (ignored: the monitor's
///   down drives restarts), and if the supervisor itself is *terminated*
///   (the hard stop) or panics, each child that does not trap exits ends
///   with it ([`ExitError::Linked`](crate::ExitError::Linked)). A graceful
///   stop is still `cancel`: it lets the children finish their own way.
///
/// When a supervisor's outcome is available, every child it started has
/// ended.
///
/// # Examples
///
/// A child that crashes on its first run and is restarted:
///
/// ```
/// use sched::prelude::*;
/// use sched::Strategy;
/// use sched::supervisor::SupervisorReport;
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use std::sync::Arc;
/// use std::time::{Duration, Instant};
///
/// /// Crashes the first time it runs, then waits.
/// struct Flaky { runs: Arc<AtomicUsize> }
/// impl Process for Flaky {
///    type Done = ();
///    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
///        if events.any(|e| matches!(e, Event::Cancel)) {
///            out.finish(());
///            return Ok(());
///        }
///        if self.runs.fetch_add(1, Ordering::SeqCst) == 0 {
///            return Err("first run fails".into());
///        }
///        Ok(())
///    }
/// }
///
/// let scheduler = Scheduler::builder().workers(2).build();
/// scheduler.start();
/// let runs = Arc::new(AtomicUsize::new(0));
/// let seen = Arc::clone(&runs);
/// let supervisor = Supervisor::builder()
///    .strategy(Strategy::OneForOne)
///    .intensity(3, Duration::from_secs(5))
///    .child(ChildSpec::new("flaky", move || Flaky { runs: Arc::clone(&seen) }))
///    .build();
/// let handle = scheduler.spawn(supervisor)?;
///
/// let deadline = Instant::now() + Duration::from_secs(10);
/// while runs.load(Ordering::SeqCst) < 2 && Instant::now() < deadline {
///    std::thread::sleep(Duration::from_millis(1));
/// }
/// scheduler.context().cancel(handle.pid())?;
/// let report: SupervisorReport = handle.wait()?;
/// assert_eq!(report.child("flaky").unwrap().restarts, 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Supervisor {
    strategy: Strategy,
    intensity: Intensity,
    shutdown_timeout: std::time::Duration,
    children: Vec<Child>,
    phase: Phase,
    /// One-for-all: the child whose end (or failed start) calls for the
    /// next regrouping, named if that goes over the intensity.
    cause: Option<Arc<str>>,
    /// Who is told of restarts in place (`WatchRestarts`).
    watchers: watch::Watchers,
    /// Where restart notices go, read from outside (none: not asked).
    feed: Option<Restarts>,
}

#[derive(Debug)]
enum Phase {
    /// The first step has not run.
    Init,
    /// Children run; ended ones are restarted by policy.
    Running,
    /// One-for-all: terminating the running children one by one, last
    /// started first, before starting them all again. `target` is the one
    /// terminated last, whose down is awaited.
    Regrouping { target: Option<usize> },
    /// Ending: waiting for the downs of the children still running.
    Stopping { cause: Stop, timer: Option<TimerId> },
    /// The outcome was given.
    Ended,
}

#[derive(Debug)]
enum Stop {
    Cancelled,
    Failed(SupervisorError),
}

impl Supervisor {
    /// A builder with the defaults (see [`SupervisorBuilder`]).
    ///
    /// # Examples
    ///
    /// See [`SupervisorBuilder`].
    pub fn builder() -> SupervisorBuilder {
        SupervisorBuilder::default()
    }

    fn new(config: SupervisorBuilder) -> Self {
        Supervisor {
            strategy: config.strategy,
            intensity: Intensity::new(config.max_restarts, config.within),
            shutdown_timeout: config.shutdown_timeout,
            children: config
                .children
                .into_iter()
                .map(|mut spec| {
                    // In place where it is safe (see `restart_in_place`).
                    spec.in_place.get_or_insert(
                        config.strategy == Strategy::OneForOne
                            && spec.restart != crate::Restart::Temporary,
                    );
                    Child::new(spec)
                })
                .collect(),
            phase: Phase::Init,
            cause: None,
            watchers: watch::Watchers::default(),
            feed: config.restarts,
        }
    }

    /// A snapshot of the children.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::Supervisor;
    /// assert!(Supervisor::builder().build().report().children.is_empty());
    /// ```
    pub fn report(&self) -> SupervisorReport {
        SupervisorReport {
            children: self.children.iter().map(Child::report).collect(),
        }
    }

    fn on_down(&mut self, down: &Down, out: &mut Output<'_>) {
        let Some(i) = self
            .children
            .iter()
            .position(|c| c.watched_by(down.monitor))
        else {
            return;
        };
        let reason = self.children[i].ended(down);
        match self.phase {
            Phase::Running => {
                let child = &mut self.children[i];
                if !child.spec.restart.restarts_after(reason) {
                    child.removed = child.is_temporary();
                    return;
                }
                match self.strategy {
                    Strategy::OneForOne => child.pending = true,
                    Strategy::OneForAll => {
                        self.cause = Some(child.spec.name.clone());
                        for sibling in &mut self.children {
                            if sibling.is_temporary() {
                                sibling.removed = true;
                            } else if !sibling.removed {
                                sibling.pending = true;
                            }
                        }
                        self.phase = Phase::Regrouping { target: None };
                        self.regroup(out);
                    }
                }
            }
            Phase::Regrouping { .. } => self.regroup(out),
            Phase::Init | Phase::Stopping { .. } | Phase::Ended => {}
        }
    }

    /// A child restarted itself in place: the restart counts against the
    /// intensity like any other; past it, the supervisor stops.
    fn on_restarted_in_place(
        &mut self,
        from: relay::Pid,
        why: &in_place::Restarted,
        out: &mut Output<'_>,
    ) {
        if !matches!(self.phase, Phase::Running) {
            return;
        }
        let Some(i) = self.children.iter().position(|c| c.pid() == Some(from)) else {
            return;
        };
        self.children[i].restarted_in_place(why.reason, why.message.clone());
        let notice = RestartedInPlace {
            child: self.children[i].spec.name.to_string(),
            pid: from,
            reason: why.reason,
            message: why.message.clone(),
        };
        self.watchers.tell(&notice, out);
        if let Some(feed) = &self.feed {
            feed.push(RestartNotice {
                child: notice.child,
                previous: from,
                pid: from,
                reason: why.reason,
                message: Some(why.message.clone()),
            });
        }
        if let Err(restarts) = self.intensity.record(Instant::now()) {
            let error = SupervisorError::IntensityExceeded {
                restarts,
                within: self.intensity.within(),
                child: self.children[i].spec.name.clone(),
            };
            self.stop(Stop::Failed(error), out);
        }
    }

    /// One-for-all: terminates the next running child (the last started),
    /// once the previous one has ended; back to running when none is left.
    fn regroup(&mut self, out: &mut Output<'_>) {
        let Phase::Regrouping { target } = &mut self.phase else {
            return;
        };
        if target.is_some_and(|t| self.children[t].is_running()) {
            return;
        }
        match self.children.iter().rposition(Child::is_running) {
            Some(last) => {
                *target = Some(last);
                self.children[last].terminate(out);
            }
            None => self.phase = Phase::Running,
        }
    }

    /// Starts the pending children in order. `first` is the supervisor's
    /// first start: not counted as restarts, and a failure ends it.
    fn start_pending(&mut self, out: &mut Output<'_>, first: bool) {
        let mut counted = false;
        let mut retry = false;
        for i in 0..self.children.len() {
            if !self.children[i].pending || self.children[i].removed {
                continue;
            }
            let count = !first && (self.strategy == Strategy::OneForOne || !counted);
            if count {
                if let Err(restarts) = self.intensity.record(Instant::now()) {
                    let error = SupervisorError::IntensityExceeded {
                        restarts,
                        within: self.intensity.within(),
                        child: match (self.strategy, &self.cause) {
                            (Strategy::OneForAll, Some(cause)) => cause.clone(),
                            _ => self.children[i].spec.name.clone(),
                        },
                    };
                    self.stop(Stop::Failed(error), out);
                    return;
                }
                counted = true;
            }
            match self.children[i].start(out) {
                Ok(notice) => {
                    if let (Some(feed), Some(notice)) = (&self.feed, notice) {
                        feed.push(notice);
                    }
                }
                Err(StartError::ShuttingDown) => {
                    if count {
                        self.intensity.forget_last();
                    }
                    return;
                }
                Err(StartError::Failed(error)) if first => {
                    let child = self.children[i].spec.name.clone();
                    self.stop(
                        Stop::Failed(SupervisorError::StartFailed { child, error }),
                        out,
                    );
                    return;
                }
                Err(StartError::Failed(_)) => {
                    if !retry {
                        self.cause = Some(self.children[i].spec.name.clone());
                    }
                    retry = true;
                }
            }
        }
        if retry {
            out.continue_();
        }
    }

    /// Stops restarting and asks the running children to end: a cancel and
    /// a timer when cancelled, a terminate when failed.
    fn stop(&mut self, cause: Stop, out: &mut Output<'_>) {
        for child in &mut self.children {
            child.pending = false;
        }
        let timer = match cause {
            Stop::Cancelled => {
                self.children.iter().rev().for_each(|c| c.cancel(out));
                let any = self.children.iter().any(Child::is_running);
                any.then(|| out.set_timer(self.shutdown_timeout, SHUTDOWN_TIMER))
            }
            Stop::Failed(_) => {
                self.children.iter().rev().for_each(|c| c.terminate(out));
                None
            }
        };
        self.phase = Phase::Stopping { cause, timer };
    }

    /// The shutdown timeout passed: terminates the children still running.
    fn on_timer(&mut self, id: TimerId, out: &mut Output<'_>) {
        if let Phase::Stopping { timer, .. } = &mut self.phase {
            if *timer == Some(id) {
                *timer = None;
                self.children.iter().rev().for_each(|c| c.terminate(out));
            }
        }
    }

    /// Ends the supervisor once it is stopping and no child runs.
    fn finish_if_stopped(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        if !matches!(self.phase, Phase::Stopping { .. })
            || self.children.iter().any(Child::is_running)
        {
            return Ok(());
        }
        let Phase::Stopping { cause, timer } = std::mem::replace(&mut self.phase, Phase::Ended)
        else {
            return Ok(());
        };
        if let Some(timer) = timer {
            out.cancel_timer(timer);
        }
        match cause {
            Stop::Cancelled => {
                out.finish(self.report());
                Ok(())
            }
            Stop::Failed(error) => Err(Box::new(error)),
        }
    }
}

impl Process for Supervisor {
    /// What the supervisor finishes with when it is cancelled: the
    /// report of its children.
    type Done = SupervisorReport;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        let mut questions = Vec::new();
        for event in events {
            match event {
                Event::Down(down) => self.on_down(&down, out),
                Event::Cancel if !matches!(self.phase, Phase::Stopping { .. } | Phase::Ended) => {
                    self.stop(Stop::Cancelled, out);
                }
                Event::Timer { id, .. } => self.on_timer(id, out),
                Event::Request(request) if request.payload::<WhichChildren>().is_some() => {
                    questions.push(request);
                }
                Event::Message(message) => {
                    if let Some(why) = message.payload::<in_place::Restarted>() {
                        self.on_restarted_in_place(message.source(), why, out);
                    } else if let Some(watch) = message.payload::<WatchRestarts>() {
                        self.watchers.add(watch);
                    }
                }
                // Other requests are dropped: their askers get no reply.
                _ => {}
            }
        }
        match self.phase {
            Phase::Init => {
                self.phase = Phase::Running;
                out.trap_exits(true);
                for child in &mut self.children {
                    child.pending = true;
                }
                self.start_pending(out, true);
            }
            Phase::Running => self.start_pending(out, false),
            Phase::Regrouping { .. } | Phase::Stopping { .. } | Phase::Ended => {}
        }
        // Answered after this step's restarts, so a snapshot never shows a
        // child between its down and its restart in one-for-one.
        if !questions.is_empty() {
            self.children.iter_mut().for_each(Child::refresh);
        }
        for question in questions {
            question.reply(self.report());
        }
        self.finish_if_stopped(out)
    }
}
