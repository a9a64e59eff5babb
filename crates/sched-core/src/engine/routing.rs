//! Routing: messages and kill requests from any handle (`send`, to any
//! [`Target`], `forward`, `terminate`), delivered to a process by PID (or to the
//! remote transport, for a PID of another node), completions through a
//! simulation's interceptor, and what happens to events no step will read.
//!
//! With `shared.rs`, the one file that writes methods of `Shared`: the
//! delivery every feature calls. Its state is the shared state's own
//! fields: the transport, the mailbox bound, the dead-letter count.

use std::sync::atomic::Ordering::Relaxed;

use std::any::Any;

use relay::{Addr, Package, Payload, Pid, SendError, SendErrorKind};

use crate::contract::output::Output;
use crate::contract::step_engine::StepEngine;

use super::remote::control::EndRequest;
use super::shared::Shared;
use super::Context;
use crate::contract::command::Tag;
use crate::contract::error::TerminateError;
use crate::contract::event::{CommandError, Event};
use crate::contract::urgent;
use crate::panic_guard::drop_user_value;
use crate::record::state::{Killed, TERMINATE};
use crate::record::RecordRef;
use crate::runqueue::local::{self};

impl Shared {
    /// Counts the events a process never saw (cancel requests are not
    /// letters) and passes them to the dead-letter hook.
    pub(crate) fn dead_letters(&self, pid: Pid, events: Vec<Event>) {
        let mut n = 0u64;
        for mut event in events {
            if matches!(event, Event::Cancel) {
                continue;
            }
            if let Event::Request(request) = event {
                // No step read it: the question goes back to its asker,
                // who may safely ask again. Not a dead letter.
                match request.hand_back(pid) {
                    Ok(()) => continue,
                    Err(request) => event = Event::Request(request),
                }
            }
            if super::upgrade::UpgradeOrder::is_order(&event) {
                // Not a letter: an upgrade that never took over. Dropping
                // it closes the process it carries.
                drop(event);
                continue;
            }
            n += 1;
            if self.hooks.has_dead_letter_hook() {
                self.hooks.dead_letter(super::Context::of(self), pid, event);
            } else {
                // A message's payload is the user's: its `Drop` may panic.
                drop_user_value(event, pid, "a dead letter");
            }
        }
        if n > 0 {
            self.dead_letters.fetch_add(n, Relaxed);
            tracing::debug!(%pid, count = n, "dead letters");
        }
    }

    /// Delivers `package` to its target: a PID of another node goes to the
    /// remote transport when there is one (one comparison for a local
    /// send); any other to the local process.
    pub(crate) fn send(&self, package: Package) -> Result<(), SendError> {
        if package.target().node() != self.processes.node() {
            if let Some(remote) = &self.remote {
                // An answer over the network is likely: see `expect_answer`.
                self.expect_answer();
                // Urgency is this node's ordering: the message itself goes.
                return remote.send(urgent::unwrap(package));
            }
        }
        self.send_local(package)
    }

    /// Delivers `package` to a process of this engine (what a package from
    /// another node comes in through: never sent out again).
    #[inline]
    pub(crate) fn send_local(&self, package: Package) -> Result<(), SendError> {
        let target = package.target();
        // A step on a worker first tries the record this worker resolved for
        // the PID last time, skipping the process table: a lookup there
        // locks the slot for a reference-count increment, two
        // read-modify-writes on a line the target's other senders share.
        // The cached record is used borrowed (no count taken either). A
        // cached record that refuses the message has ended; the table then
        // says whether the PID is gone or taken anew.
        let mut package = Some(package);
        let cached = local::with_local(self, |local| {
            local.with_cached_route(target, |record| {
                self.deliver_message(record, package.take().expect("taken once"))
            })
        })
        .flatten();
        match cached {
            Some(Err(error)) if error.kind() == SendErrorKind::Ended => {
                local::with_local(self, |local| local.forget_route(target));
                package = Some(error.into_package());
            }
            Some(result) => return result,
            None => {}
        }
        let package = package.expect("not taken unless delivered");
        match self.processes.get(target) {
            Some(record) => {
                let result = self.deliver_message(&record, package);
                if result.is_ok() {
                    local::with_local(self, move |local| local.remember_route(record));
                }
                result
            }
            None => Err(self.missing(package)),
        }
    }

    /// The refusal of `package`, whose target no process holds: `Closed`
    /// when the engine handed the PID out and its process has ended,
    /// `UnknownTarget` when it never did (or the PID was one a caller
    /// chose, which leaves no trace).
    pub(crate) fn missing(&self, package: Package) -> SendError {
        if self.processes.ended(package.target()) {
            SendError::ended(package)
        } else {
            SendError::unknown_target(package)
        }
    }

    /// Delivers a message to `record`, counting it against the mailbox bound
    /// if there is one, and wakes the process.
    #[inline]
    pub(crate) fn deliver_message(
        &self,
        record: &RecordRef,
        package: Package,
    ) -> Result<(), SendError> {
        if let Some(intercept) = &self.intercept {
            return self.deliver_intercepted(&**intercept, record, package);
        }
        self.deliver_now(record, package)
    }

    /// A message for `record` through a simulation's interceptor (out of
    /// line: a running engine has none, and its send path stays as it
    /// was).
    #[cold]
    #[inline(never)]
    fn deliver_intercepted(
        &self,
        intercept: &dyn super::intercept::Intercept,
        record: &RecordRef,
        package: Package,
    ) -> Result<(), SendError> {
        match intercept.message(record, package) {
            Some(package) => self.deliver_now(record, package),
            // Held: sent, as far as the sender knows (as over a network).
            None => Ok(()),
        }
    }

    /// Delivers a message an interceptor held. If its process has ended
    /// meanwhile, the message is a dead letter (as any message that
    /// arrives too late).
    pub(crate) fn release_message(&self, record: &RecordRef, package: Package) {
        if let Err(error) = self.deliver_now(record, package) {
            let package = error.into_package();
            self.dead_letters(package.source(), vec![Event::Message(package)]);
        }
    }

    /// [`deliver_message`](Shared::deliver_message) past any interceptor.
    pub(crate) fn deliver_now(
        &self,
        record: &RecordRef,
        package: Package,
    ) -> Result<(), SendError> {
        // See `contract/urgent.rs`: an urgent message has a reserve in a
        // bounded mailbox, and marks its receiver before it is queued.
        let urgent = urgent::is_urgent(&package);
        let bounded = self.mailbox_capacity != usize::MAX;
        if bounded {
            let capacity = urgent::capacity_for(self.mailbox_capacity, urgent);
            if !record.mailbox.reserve(capacity) {
                return Err(SendError::full(package));
            }
        } else if self.counts_messages {
            record.mailbox.count();
        }
        if urgent {
            record.mailbox.mark_urgent();
        }
        match record.deliver(Event::Message(package)) {
            Ok(wake) => {
                self.after_wake(record, wake);
                Ok(())
            }
            Err(event) => {
                if self.counts_messages {
                    record.mailbox.release(1);
                }
                match event {
                    Event::Message(p) => Err(SendError::ended(p)),
                    _ => unreachable!("a message comes back as a message"),
                }
            }
        }
    }

    /// A completion for `record`, through a simulation's interceptor if
    /// there is one: `None` when the interceptor held it. Every completion
    /// passes here, whether a completer delivers it or a timer
    /// (`complete_after`).
    #[inline]
    pub(crate) fn intercept_completion(
        &self,
        record: &RecordRef,
        tag: Tag,
        result: Result<Payload, CommandError>,
    ) -> Option<Result<Payload, CommandError>> {
        match &self.intercept {
            None => Some(result),
            Some(intercept) => intercept.completion(record, tag, result),
        }
    }

    /// Delivers a completion an interceptor held. If its process has ended
    /// meanwhile, the completion is dropped (as a late completer's is).
    pub(crate) fn release_completion(
        &self,
        record: &RecordRef,
        tag: Tag,
        result: Result<Payload, CommandError>,
    ) {
        match record.deliver(Event::Completion { tag, result }) {
            Ok(wake) => self.after_wake(record, wake),
            Err(event) => {
                crate::panic_guard::drop_user_value(event, record.pid, "a late completion")
            }
        }
    }

    pub(super) fn kill(&self, pid: Pid, flag: u32) -> bool {
        let Some(record) = self.processes.get(pid) else {
            return false;
        };
        self.end_soon(record, flag);
        true
    }

    /// Sets `flag` on `record` so that it ends. A terminated process that
    /// waits, in a run queue behind others or for events, is handed to the
    /// workers as a kill ticket, which the next worker to pick work ends
    /// before anything else (`reap_killed`); a running one ends after its
    /// step.
    ///
    /// Not with histograms on, where whoever queues a process stamps its
    /// body after making it ready, which a ticket's taker could then
    /// borrow at the same time; nor under loom, whose engine models are
    /// at their branch limit (the ticket's protocol has models of its own
    /// in `loom_models/events.rs`). Then the process ends at its turn.
    pub(crate) fn end_soon(&self, record: RecordRef, flag: u32) {
        if flag != TERMINATE || self.histograms || cfg!(loom) {
            let wake = record.state.kill(flag);
            self.after_wake(&record, wake);
            return;
        }
        let killed = record.state.kill_queued(flag);
        match killed {
            Killed::Nothing => {}
            // An entry of it waits in a run queue (holding the schedule's
            // reference), which the ticket's claim makes stale.
            Killed::Queued => self.push_ticket(record, true),
            // It waited for events, and no entry holds it: the ticket
            // carries the reference its state word held.
            // SAFETY: `Schedule` says this kill's wake moved the process
            // out of BLOCKED or IDLE, so the parked reference is ours.
            Killed::Schedule => self.push_ticket(unsafe { RecordRef::unpark(&record) }, false),
        }
    }

    /// Hands a kill ticket to the workers (`Worker::reap_killed`).
    fn push_ticket(&self, record: RecordRef, queued: bool) {
        self.kills.push((record, queued));
        self.sleepers.notify_one();
    }
}

/// What a send names: a process by [`Pid`], a typed [`Addr`], a name
/// (`&str`), a name that may be registered soon ([`Within`](crate::Within)),
/// or any of those later ([`After`](crate::After)). Every send, from
/// outside ([`Context::send`]) or from a step ([`Output::send`]), takes one.
///
/// [`Receipt`](Target::Receipt) is what a send that went through returns:
/// `()`, or the [`TimerId`](crate::TimerId) of a delayed send, which
/// cancels it.
///
/// The trait is sealed: the engine routes each kind of target itself.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use sched::Context;
/// use sched::message::{SendError, Target};
///
/// /// Any target, any message: the caller's `send` checks the pair.
/// fn notify<T: Target<&'static str>>(cx: &Context, to: T) -> Result<T::Receipt, SendError> {
///     cx.send(to, "ready")
/// }
/// let scheduler = Scheduler::builder().workers(1).build();
/// let nobody = Pid::local(9);
/// assert!(notify(scheduler.context(), nobody).is_err());
/// assert!(notify(scheduler.context(), "nobody").is_err());
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not something a `{M}` can be sent to",
    label = "not a target for a `{M}`",
    note = "a send takes a target and a message: `send(pid, message)`, `send(addr, message)` (an `Addr<M>` takes only an `M`), `send(\"name\", message)`, `send(Within(name, wait), message)`, `send(After(delay, pid), message)`",
    note = "to deliver a `Package` as it is, its source kept, use `forward(package)`"
)]
pub trait Target<M>: sealed::Sealed {
    /// What a send that went through returns.
    type Receipt;

    /// Sends `message` to this target on behalf of `sender`.
    #[doc(hidden)]
    fn send_from(self, sender: Sender<'_>, message: M) -> Result<Self::Receipt, SendError>;
}

pub(crate) mod sealed {
    /// Keeps [`Target`](super::Target) to the engine's own kinds of target.
    pub trait Sealed {}
}

/// Who is sending, for a [`Target`]: code outside the engine, or the
/// process whose step is running (its PID is the package's source, and
/// the step's own route is used).
#[doc(hidden)]
pub struct Sender<'a> {
    origin: Origin<'a>,
}

/// The two kinds of [`Sender`].
#[derive(Clone, Copy)]
enum Origin<'a> {
    Outside(&'a Context),
    /// The step's engine only: its [`Context`] is looked up when a target
    /// needs it (a name, a delay), not for a send by PID (a downcast
    /// through the step's engine, about 2% of a ping-pong message's
    /// instructions).
    Step(Pid, &'a dyn StepEngine),
}

impl std::fmt::Debug for Sender<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sender")
            .field("from", &self.from())
            .finish()
    }
}

impl<'a> Sender<'a> {
    pub(crate) fn outside(cx: &'a Context) -> Self {
        Sender {
            origin: Origin::Outside(cx),
        }
    }

    /// The process whose step `engine` runs.
    pub(crate) fn step(pid: Pid, engine: &'a dyn StepEngine) -> Self {
        Sender {
            origin: Origin::Step(pid, engine),
        }
    }

    /// The package's source: the stepped process, or [`Pid::OUTSIDE`].
    pub(crate) fn from(&self) -> Pid {
        match self.origin {
            Origin::Outside(_) => Pid::OUTSIDE,
            Origin::Step(pid, _) => pid,
        }
    }

    /// The step's engine, when a step sends.
    pub(crate) fn step_engine(&self) -> Option<&'a dyn StepEngine> {
        match self.origin {
            Origin::Outside(_) => None,
            Origin::Step(_, engine) => Some(engine),
        }
    }

    /// The engine's handle.
    pub(crate) fn cx(&self) -> &'a Context {
        match self.origin {
            Origin::Outside(cx) => cx,
            Origin::Step(_, engine) => Context::of_step(engine),
        }
    }

    /// Delivers a package built for this sender.
    pub(crate) fn deliver(&self, package: Package) -> Result<(), SendError> {
        match self.origin {
            Origin::Step(_, engine) => engine.send(package),
            Origin::Outside(cx) => cx.shared().send(package),
        }
    }
}

impl sealed::Sealed for Pid {}

/// Any message, to whatever process has the PID now.
impl<M: Any + Send> Target<M> for Pid {
    type Receipt = ();

    fn send_from(self, sender: Sender<'_>, message: M) -> Result<(), SendError> {
        sender.deliver(Package::new(sender.from(), self, message))
    }
}

impl<M> sealed::Sealed for Addr<M> {}

/// Only the message type the address was made for: another type does not
/// compile.
impl<M: Any + Send> Target<M> for Addr<M> {
    type Receipt = ();

    fn send_from(self, sender: Sender<'_>, message: M) -> Result<(), SendError> {
        sender.deliver(self.package(sender.from(), message))
    }
}

/// Sends: one verb for every target.
impl Context {
    /// Sends `message` from outside the engine ([`Pid::OUTSIDE`], no
    /// sender to reply to) to `to`: a [`Pid`], an [`Addr<M>`](Addr) (which
    /// takes only its own message type), a name (`&str`), a
    /// [`Within`](crate::Within) (a name that may be registered soon: the
    /// call waits for it) or an [`After`](crate::After) (the same, later;
    /// returns the [`TimerId`](crate::TimerId)). Wrap the message in
    /// [`Urgent`](crate::Urgent) to have it read before the backlog.
    ///
    /// # Errors
    ///
    /// The target is unknown (no such PID, or nobody holds the name), has
    /// ended, or its mailbox is full; the error hands the message back
    /// (`err.into_package().downcast::<M>()`).
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::message::SendErrorKind;
    ///
    /// let scheduler = Scheduler::builder().workers(1).build();
    /// let cx = scheduler.context();
    /// let err = cx.send(Pid::local(9), "hello").unwrap_err();
    /// assert_eq!(err.kind(), SendErrorKind::UnknownTarget);
    /// let counter: Addr<u64> = Addr::from_pid(Pid::local(9));
    /// assert!(cx.send(counter, 5).is_err()); // nobody there
    /// ```
    ///
    /// A message of another type to a typed address is a compile error,
    /// not a failed downcast in the receiver:
    ///
    /// ```compile_fail,E0277
    /// use sched::prelude::*;
    /// let scheduler = Scheduler::builder().workers(1).build();
    /// let counter: Addr<u64> = Addr::from_pid(Pid::local(9));
    /// let _ = scheduler.send(counter, "five"); // a `&str` where a `u64` goes
    /// ```
    pub fn send<M, T: Target<M>>(&self, to: T, message: M) -> Result<T::Receipt, SendError> {
        to.send_from(Sender::outside(self), message)
    }

    /// Delivers `package` as it is: its source, target and payload kept.
    /// What a router or relay does with a package it did not make; to send
    /// a message, use [`send`](Context::send).
    ///
    /// # Errors
    ///
    /// The target is unknown, has ended, or its mailbox is full; the
    /// error hands the package back.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::Package;
    /// use sched::message::SendErrorKind;
    /// let scheduler = Scheduler::builder().workers(1).build();
    /// let package = Package::new(Pid::local(3), Pid::local(9), 1u8);
    /// let err = scheduler.context().forward(package).unwrap_err();
    /// assert_eq!(err.kind(), SendErrorKind::UnknownTarget);
    /// ```
    pub fn forward(&self, package: Package) -> Result<(), SendError> {
        self.shared().send(package)
    }

    /// Ends the process `pid` with
    /// [`ExitError::Terminated`](crate::ExitError::Terminated), without
    /// another step, and its `close` runs as usual:
    ///
    /// - if it waits, for events or in a run queue behind others, at the
    ///   next pick of any worker, not at its turn; except a process that
    ///   continues while fewer than 256 processes are queued in its lane
    ///   on its worker (it waits at most for those), and any queued
    ///   process with latency histograms on (it ends at its turn);
    /// - if it is running, after its current step; a step that ends the
    ///   process itself (`finish`, an error, a panic) keeps that outcome.
    ///
    /// A PID of another node (with a remote transport) is sent the request:
    /// `Ok` means it left, and its node ends the process if it is still
    /// there (monitor it to learn when it has ended, and how).
    ///
    /// # Errors
    ///
    /// [`TerminateError::Ended`] if the process that had that PID has
    /// ended, [`TerminateError::NotFound`] if the engine knows of no
    /// process that had it, [`TerminateError::Unreachable`] if it is of
    /// another node the request cannot reach.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::process::TerminateError;
    ///
    /// struct Quick;
    /// impl Process for Quick {
    ///     type Done = ();
    ///     fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
    ///         out.finish(());
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let scheduler = Scheduler::builder().workers(1).build();
    /// scheduler.start();
    /// let quick = scheduler.spawn(Quick)?;
    /// let pid = quick.pid();
    /// quick.wait()?;
    /// assert_eq!(scheduler.terminate(pid), Err(TerminateError::Ended(pid)));
    /// let never = Pid::local(404);
    /// assert_eq!(scheduler.terminate(never), Err(TerminateError::NotFound(never)));
    /// # scheduler.shutdown(std::time::Duration::from_secs(1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn terminate(&self, pid: Pid) -> Result<(), TerminateError> {
        if self.shared().is_remote(pid) {
            return self
                .shared()
                .across()
                .end_remote(pid, EndRequest::Terminate);
        }
        if self.shared().kill(pid, TERMINATE) {
            Ok(())
        } else if self.shared().processes.handed_out(pid) {
            // Ended, or ending (still registered, refusing the kill).
            Err(TerminateError::Ended(pid))
        } else {
            Err(TerminateError::NotFound(pid))
        }
    }
}

/// Sends from a step: the same targets as [`Context::send`], with this
/// process as the source.
impl Output<'_> {
    /// Sends `message` from this process to `to` (see [`Target`]: a
    /// [`Pid`], an [`Addr<M>`](Addr), a name, a [`Within`](crate::Within) or
    /// an [`After`](crate::After)). The step never waits: a send
    /// [`Within`](crate::Within) a name nobody holds yet is parked until
    /// the name is registered or the wait has passed.
    ///
    /// # Errors
    ///
    /// As for [`Context::send`].
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::{After, Within};
    /// use std::time::Duration;
    ///
    /// fn report(out: &mut Output<'_>, parent: Pid, total: Addr<u64>) -> Result<(), BoxError> {
    ///     out.send(parent, "done")?;
    ///     out.send(total, 42)?;
    ///     // The aggregator may be restarting: give it a second to come back.
    ///     out.send(Within("aggregator", Duration::from_secs(1)), 42u64)?;
    ///     let _retry: TimerId = out.send(After(Duration::from_millis(10), parent), "again")?;
    ///     Ok(())
    /// }
    /// ```
    pub fn send<M, T: Target<M>>(&mut self, to: T, message: M) -> Result<T::Receipt, SendError> {
        to.send_from(Sender::step(self.pid(), self.engine), message)
    }

    /// Delivers `package` as it is (see [`Context::forward`]), on this
    /// step's route. A package that came from another node may carry its
    /// transport's receipt ([`Package::take_receipt`](relay::Package::take_receipt)):
    /// taking its payload out tells it (the message counts as taken
    /// here), while a receipt put back on the package passed on is told
    /// only when the package's next reader takes it (across nodes, once
    /// the next node confirms it).
    ///
    /// # Errors
    ///
    /// As for [`Context::forward`].
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::Package;
    /// /// Passes a package on, its source kept, so the target answers the
    /// /// original sender; its receipt, if it came from another node,
    /// /// goes with it, so that node counts it unread until `to` takes it.
    /// fn relay_on(out: &mut Output<'_>, mut package: Package, to: Pid) {
    ///     let receipt = package.take_receipt();
    ///     let (source, _, payload) = package.into_parts();
    ///     let mut onward = Package::from_payload(source, to, payload);
    ///     if let Some(receipt) = receipt {
    ///         onward = onward.with_receipt(receipt);
    ///     }
    ///     let _ = out.forward(onward);
    /// }
    /// ```
    pub fn forward(&mut self, package: Package) -> Result<(), SendError> {
        self.engine.send(package)
    }
}
