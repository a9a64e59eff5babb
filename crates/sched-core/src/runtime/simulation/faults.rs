//! The faults a simulation injects, and where it injects them: the
//! interceptor on the engine's delivery path (messages, requests,
//! completions) and the observer of each step (crashes, failing handlers).
//!
//! Each fault has a probability; whether it happens, and how long a delay
//! lasts, is a draw from the simulation's source like any other decision,
//! so a script replays its faults, and shrinking a script removes them.
//!
//! The rules faults keep (the engine's own promises that still hold in a
//! faulty simulation):
//! - a request (the question of an ask or a query) travels as a message
//!   does, under the same probabilities: it may be held back, lost (the
//!   asker is never told, and learns by its timeout, as over a network) or
//!   delivered twice (the copy's answer goes nowhere: the asker gets one
//!   answer);
//! - messages and requests from one sender to one process arrive in the
//!   order sent: one behind a delayed one waits for it (delays reorder
//!   those of different senders only);
//! - the simulated network keeps the order of everything one node sends
//!   another (`Held::pair`), as the NATS transport does;
//! - a cancel (`Context::cancel`) waits behind the messages and requests
//!   held for its process (of every sender: a cancel does not say who
//!   sent it), and what is sent to the process after it waits behind it
//!   (`Intercept::cancel`): on a running engine it joins the mailbox
//!   behind what was sent before it;
//! - a completion is delivered at most once: a lost completion arrives as
//!   [`CommandError::Dropped`](crate::CommandError::Dropped) (what a
//!   handler that drops its completer causes), never as silence, and none
//!   is duplicated;
//! - a command has one fault at most: the error of a failed or panicked
//!   handler reaches the process as it is, neither delayed nor lost;
//! - timers, monitors' downs, links' exits, asks' replies (the answers)
//!   and the shutdown's cancel are never touched.

use std::any::Any;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fmt;
use std::sync::Arc as StdArc;
use std::time::{Duration, Instant};

use relay::{Package, Payload, Pid};
use rustc_hash::FxHashMap;

use super::source::Choices;
use super::trace::{Fault, Trace};
use crate::contract::command::Tag;
use crate::contract::event::CommandError;
use crate::contract::reply::{Answer, AskError, ReplyTo, Request};
use crate::engine::intercept::Intercept;
use crate::record::RecordRef;
use crate::sync::Mutex;

/// Makes a copy of a message whose payload is a type registered with
/// [`Faults::duplicate_messages`].
type Duplicator = fn(&Package) -> Option<Package>;

/// The faults a simulation injects (none by default).
///
/// # Examples
///
/// ```
/// use sched::sim::Faults;
/// use std::time::Duration;
///
/// let faults = Faults::none()
///     .delay_messages(0.1, Duration::from_millis(50))
///     .lose_messages(0.01)
///     .duplicate_messages::<u64>(0.01)
///     .delay_completions(0.2, Duration::from_millis(100))
///     .fail_handlers(0.05)
///     .crash_steps(0.001);
/// assert!(format!("{faults:?}").contains("message_loss: 0.01"));
/// ```
#[derive(Clone, Default)]
pub struct Faults {
    message_delay: f64,
    max_message_delay: Duration,
    message_loss: f64,
    message_duplicate: f64,
    duplicators: Vec<Duplicator>,
    completion_delay: f64,
    max_completion_delay: Duration,
    completion_loss: f64,
    handler_failure: f64,
    handler_panic: f64,
    crash: f64,
    crash_at: Vec<(Pid, u64)>,
}

impl fmt::Debug for Faults {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Faults")
            .field("message_delay", &self.message_delay)
            .field("max_message_delay", &self.max_message_delay)
            .field("message_loss", &self.message_loss)
            .field("message_duplicate", &self.message_duplicate)
            .field("duplicable_types", &self.duplicators.len())
            .field("completion_delay", &self.completion_delay)
            .field("max_completion_delay", &self.max_completion_delay)
            .field("completion_loss", &self.completion_loss)
            .field("handler_failure", &self.handler_failure)
            .field("handler_panic", &self.handler_panic)
            .field("crash", &self.crash)
            .field("crash_at", &self.crash_at)
            .finish()
    }
}

fn duplicate<T: Any + Clone + Send>(package: &Package) -> Option<Package> {
    let copy = package.payload::<T>()?.clone();
    Some(Package::new(package.source(), package.target(), copy))
}

impl Faults {
    /// No faults: the simulation only explores orderings.
    ///
    /// # Examples
    ///
    /// See [`Faults`].
    pub fn none() -> Faults {
        Faults::default()
    }

    /// Holds back a message with probability `p`, for up to `max` of
    /// virtual time. Messages from one sender to one process keep their
    /// order: one behind a held message waits for it. Requests (the
    /// questions of asks) are held back the same way, in the same order
    /// as the sender's messages.
    ///
    /// # Examples
    ///
    /// See [`Faults`].
    pub fn delay_messages(mut self, p: f64, max: Duration) -> Faults {
        self.message_delay = p;
        self.max_message_delay = max;
        self
    }

    /// Loses a message with probability `p` (its sender's `send`
    /// succeeded, as over a network). A request is lost the same way: its
    /// `ask` succeeded, and the asker hears nothing (its timeout fires).
    ///
    /// # Examples
    ///
    /// See [`Faults`].
    pub fn lose_messages(mut self, p: f64) -> Faults {
        self.message_loss = p;
        self
    }

    /// Delivers a message whose payload is a `T` twice, with probability
    /// `p` (the copy right behind the original). Messages of other types
    /// are never duplicated: a payload is the user's, and only a type that
    /// is `Clone` can be copied. Call once per type; the last `p` applies
    /// to all of them. A request whose question is a `T` is delivered
    /// twice too; the copy's answer goes nowhere (the asker gets one).
    ///
    /// # Examples
    ///
    /// See [`Faults`].
    pub fn duplicate_messages<T: Any + Clone + Send>(mut self, p: f64) -> Faults {
        self.message_duplicate = p;
        self.duplicators.push(duplicate::<T>);
        self
    }

    /// Holds back a command's completion with probability `p`, for up to
    /// `max` of virtual time.
    ///
    /// # Examples
    ///
    /// See [`Faults`].
    pub fn delay_completions(mut self, p: f64, max: Duration) -> Faults {
        self.completion_delay = p;
        self.max_completion_delay = max;
        self
    }

    /// Loses a command's completion with probability `p`: the process gets
    /// [`CommandError::Dropped`](crate::CommandError::Dropped) instead.
    ///
    /// # Examples
    ///
    /// ```
    /// let faults = sched::sim::Faults::none().lose_completions(0.5);
    /// # drop(faults);
    /// ```
    pub fn lose_completions(mut self, p: f64) -> Faults {
        self.completion_loss = p;
        self
    }

    /// Fails a yielded command with probability `p` instead of handing it
    /// to its handler ([`CommandError::Failed`](crate::CommandError::Failed)).
    ///
    /// # Examples
    ///
    /// See [`Faults`].
    pub fn fail_handlers(mut self, p: f64) -> Faults {
        self.handler_failure = p;
        self
    }

    /// Makes a command's handler panic with probability `p` instead of
    /// running ([`CommandError::HandlerPanicked`](crate::CommandError::HandlerPanicked)).
    ///
    /// # Examples
    ///
    /// ```
    /// let faults = sched::sim::Faults::none().panic_handlers(0.1);
    /// # drop(faults);
    /// ```
    pub fn panic_handlers(mut self, p: f64) -> Faults {
        self.handler_panic = p;
        self
    }

    /// Crashes a step with probability `p`: it panics instead of running,
    /// and the process ends as
    /// [`ExitError::Panicked`](crate::ExitError::Panicked) (its links,
    /// monitors and supervisor react as to any panic).
    ///
    /// # Examples
    ///
    /// See [`Faults`].
    pub fn crash_steps(mut self, p: f64) -> Faults {
        self.crash = p;
        self
    }

    /// Crashes step `step` of `pid` (its first step is 1).
    ///
    /// # Examples
    ///
    /// ```
    /// let faults = sched::sim::Faults::none().crash_at(sched::Pid::local(1), 3);
    /// # drop(faults);
    /// ```
    pub fn crash_at(mut self, pid: Pid, step: u64) -> Faults {
        self.crash_at.push((pid, step));
        self
    }

    pub(crate) fn crashes(&self, choices: &mut Choices, pid: Pid, step: u64) -> bool {
        self.crash_at.contains(&(pid, step)) || choices.chance(self.crash)
    }

    /// What happens to a command, as the worker's `CommandFault`.
    pub(crate) fn command(&self, choices: &mut Choices) -> crate::worker::CommandFault {
        if choices.chance(self.handler_failure) {
            crate::worker::CommandFault::Fail
        } else if choices.chance(self.handler_panic) {
            crate::worker::CommandFault::Panic
        } else {
            crate::worker::CommandFault::None
        }
    }
}

/// A delay of up to `max`, drawn in microseconds (at least one).
pub(crate) fn draw_delay(choices: &mut Choices, max: Duration) -> Duration {
    let max_us = u32::try_from(max.as_micros()).unwrap_or(u32::MAX).max(1);
    Duration::from_micros(1 + u64::from(choices.draw(max_us)))
}

/// What a simulation holds back, to deliver later.
pub(crate) enum Held {
    /// A message for a process of the same node.
    Message(RecordRef, Package),
    /// A request for a process of the same node.
    Request(RecordRef, Request),
    Completion(RecordRef, Tag, Result<Payload, CommandError>),
    /// A cancel for a process of the same node, held behind the messages
    /// and requests held for it when it was sent.
    Cancel(RecordRef),
    /// A package on the simulated network, for its target's node, and
    /// the node that sent it.
    Remote(Package, u32),
    /// The end of a partition set for a while: these cuts heal.
    Heal(Vec<(u32, u32)>),
}

impl Held {
    /// The (sender, target) whose order a held package keeps: for a
    /// package on the network, the two nodes (`<node.0>`, no process's
    /// PID): the network keeps the order of everything one node sends
    /// another, as the NATS transport publishes it on one connection and
    /// one subject per pair of nodes.
    fn pair(&self) -> Option<(Pid, Pid)> {
        match self {
            Held::Message(record, package) => Some((package.source(), record.pid)),
            Held::Request(record, request) => Some((request.package().source(), record.pid)),
            Held::Remote(package, from) => {
                Some((Pid::new(*from, 0), Pid::new(package.target().node(), 0)))
            }
            Held::Completion(..) | Held::Cancel(_) | Held::Heal(_) => None,
        }
    }
}

/// Everything the simulation decides and records, shared by its driver,
/// its workers' observers and its interceptor (all on the simulation's
/// one thread; the lock is never contended and never held across user
/// code).
pub(crate) struct State {
    pub(crate) choices: Choices,
    pub(crate) trace: Trace,
    pub(crate) faults: Faults,
    /// Virtual now (the driver moves it with the engine's clock).
    pub(crate) now: Instant,
    /// Held deliveries by due instant, then by the order they were held.
    agenda: BinaryHeap<Reverse<(Instant, u64)>>,
    held: FxHashMap<u64, Held>,
    next_seq: u64,
    /// Per (sender, target) with messages held: how many, and the latest
    /// due instant, so that a later message of the pair waits behind them.
    pairs: FxHashMap<(Pid, Pid), (usize, Instant)>,
    /// Per process with a cancel held: when it is due, so that what is
    /// sent to the process after the cancel waits behind it.
    cancels: FxHashMap<Pid, Instant>,
    /// The command whose handler a fault just replaced: its completion
    /// (the fault's error, delivered at once) is not faulted again.
    pub(crate) handler_fault: Option<(Pid, Tag)>,
    /// Steps per live process, for the trace's step numbers (and
    /// `Faults::crash_at`).
    pub(crate) steps_of: FxHashMap<Pid, u64>,
    /// Each node's inbox (what its engine attached to its network end).
    pub(crate) inboxes: std::collections::BTreeMap<u32, StdArc<dyn relay::Receiver + Send + Sync>>,
    /// Node pairs cut off from each other (both directions listed).
    pub(crate) cut: std::collections::BTreeSet<(u32, u32)>,
    /// The node-down notices held, not delivered yet: (the node told,
    /// the node it lost).
    notices: std::collections::BTreeSet<(u32, u32)>,
    /// Most latency of the simulated network (none: a package is due at
    /// once, and still waits for the simulation to deliver it).
    pub(crate) latency: Duration,
    /// The check of the scheduling bound.
    pub(crate) fairness: super::fairness::Check,
}

impl State {
    pub(crate) fn new(choices: Choices, trace: Trace, faults: Faults, now: Instant) -> State {
        State {
            choices,
            trace,
            faults,
            now,
            agenda: BinaryHeap::new(),
            held: FxHashMap::default(),
            next_seq: 0,
            pairs: FxHashMap::default(),
            cancels: FxHashMap::default(),
            handler_fault: None,
            steps_of: FxHashMap::default(),
            inboxes: Default::default(),
            cut: Default::default(),
            notices: Default::default(),
            latency: Duration::ZERO,
            fairness: super::fairness::Check::default(),
        }
    }

    /// Whether `from` cannot reach `to`.
    pub(crate) fn is_cut(&self, from: u32, to: u32) -> bool {
        self.cut.contains(&(from, to))
    }

    /// Tells node `me`, at once in virtual time, that it has lost node
    /// `lost` (a [`relay::NodeDown`] notice through its inbox), as a
    /// failure detector would; nothing if such a notice is held already
    /// (it has not been delivered: it will tell the same).
    pub(crate) fn notify(&mut self, me: u32, lost: u32) {
        if !self.inboxes.contains_key(&me) || !self.notices.insert((me, lost)) {
            return;
        }
        let at = Pid::new(me, 0);
        let notice = relay::Package::new(at, at, relay::NodeDown::new(lost));
        self.hold(self.now, Held::Remote(notice, me));
    }

    /// A held node-down notice is being delivered: a later loss holds
    /// another.
    pub(crate) fn notified(&mut self, held: &Held) {
        if let Held::Remote(package, _) = held {
            if let Some(notice) = package.payload::<relay::NodeDown>() {
                self.notices.remove(&(package.target().node(), notice.node));
            }
        }
    }

    pub(crate) fn hold(&mut self, mut due: Instant, item: Held) {
        if let Some(pair) = item.pair() {
            let (count, latest) = self.pairs.entry(pair).or_insert((0, due));
            // Behind a held package of the same pair, it waits its turn.
            due = due.max(*latest);
            *count += 1;
            *latest = due;
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        self.agenda.push(Reverse((due, seq)));
        self.held.insert(seq, item);
    }

    /// When the next held delivery is due.
    pub(crate) fn next_due(&self) -> Option<Instant> {
        self.agenda.peek().map(|Reverse((due, _))| *due)
    }

    /// Whether a held delivery is due now.
    pub(crate) fn any_due(&self) -> bool {
        self.next_due().is_some_and(|due| due <= self.now)
    }

    /// Takes the earliest held delivery that is due.
    pub(crate) fn take_due(&mut self) -> Option<Held> {
        if !self.any_due() {
            return None;
        }
        let Reverse((due, seq)) = self.agenda.pop()?;
        let held = self.held.remove(&seq)?;
        if let Held::Cancel(record) = &held {
            if self.cancels.get(&record.pid) == Some(&due) {
                self.cancels.remove(&record.pid);
            }
        }
        if let Some(key) = held.pair() {
            if let Some((count, _)) = self.pairs.get_mut(&key) {
                *count -= 1;
                if *count == 0 {
                    self.pairs.remove(&key);
                }
            }
        }
        Some(held)
    }

    /// Everything still held (the simulation is ending).
    pub(crate) fn take_all(&mut self) -> Vec<Held> {
        self.agenda.clear();
        self.pairs.clear();
        self.cancels.clear();
        let mut all: Vec<(u64, Held)> = self.held.drain().collect();
        all.sort_by_key(|(seq, _)| *seq);
        all.into_iter().map(|(_, held)| held).collect()
    }
}

/// The simulation's interceptor on the engine's delivery path.
pub(crate) struct Interceptor(pub(crate) StdArc<Mutex<State>>);

impl fmt::Debug for Interceptor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Interceptor")
    }
}

/// What travels like a message: a message, or a request.
#[derive(Clone, Copy)]
enum Traveller {
    Message,
    Request,
}

impl State {
    /// Draws what the message faults do to `package` (a message's, or a
    /// request's question) on its way to `to`, and traces it: `None` if it
    /// is lost; else when it is due (`None`: now) and its copy, if it is
    /// duplicated. The draws come in one order for both kinds.
    fn fate(
        &mut self,
        to: Pid,
        package: &Package,
        kind: Traveller,
    ) -> Option<(Option<Instant>, Option<Package>)> {
        let faults = &self.faults;
        let (lost, delayed, duplicated) = match kind {
            Traveller::Message => (
                Fault::MessageLost { to },
                (|to, by| Fault::MessageDelayed { to, by }) as fn(Pid, Duration) -> Fault,
                Fault::MessageDuplicated { to },
            ),
            Traveller::Request => (
                Fault::RequestLost { to },
                (|to, by| Fault::RequestDelayed { to, by }) as fn(Pid, Duration) -> Fault,
                Fault::RequestDuplicated { to },
            ),
        };
        if self.choices.chance(faults.message_loss) {
            self.trace.push(super::trace::Entry::Fault(lost));
            return None;
        }
        let mut due = None;
        if self.choices.chance(faults.message_delay) {
            let by = draw_delay(&mut self.choices, faults.max_message_delay);
            self.trace.push(super::trace::Entry::Fault(delayed(to, by)));
            due = Some(self.now + by);
        }
        // Behind a held message or request of the same pair, it waits its
        // turn (`hold` puts it after the pair's latest); behind a held
        // cancel of its process, after the cancel.
        if self.pairs.contains_key(&(package.source(), to)) && due.is_none() {
            due = Some(self.now);
        }
        if let Some(&cancel) = self.cancels.get(&to) {
            due = Some(due.unwrap_or(self.now).max(cancel));
        }
        let copy = match faults.duplicators.is_empty() {
            true => None,
            false => match self.choices.chance(faults.message_duplicate) {
                true => faults.duplicators.iter().find_map(|dup| dup(package)),
                false => None,
            },
        };
        if copy.is_some() {
            self.trace.push(super::trace::Entry::Fault(duplicated));
        }
        Some((due, copy))
    }

    /// Delivers `item` now (`Some`), or holds it and its copy as `fate`
    /// says. `held` makes the held entry of one.
    fn route<T>(
        &mut self,
        item: T,
        due: Option<Instant>,
        copy: Option<T>,
        held: impl Fn(T) -> Held,
    ) -> Option<T> {
        match (due, copy) {
            (None, None) => Some(item),
            (None, Some(copy)) => {
                // The original now, the copy right behind it (due now, so
                // the driver delivers it at a next release; the pair's
                // later ones wait behind it).
                let now = self.now;
                self.hold(now, held(copy));
                Some(item)
            }
            (Some(due), copy) => {
                self.hold(due, held(item));
                if let Some(copy) = copy {
                    self.hold(due, held(copy));
                }
                None
            }
        }
    }
}

/// Where the answer to a duplicated request's copy goes: nowhere. The
/// asker has one right to an answer, held by the original.
struct Nobody {
    asker: Pid,
}

impl Answer for Nobody {
    fn asker(&self) -> Pid {
        self.asker
    }

    fn answer(&self, result: Result<Payload, AskError>) {
        if let Ok(answer) = result {
            crate::panic_guard::drop_user_value(answer, self.asker, "the answer to a copy");
        }
    }

    fn unread(&self, question: Payload) -> Result<(), Payload> {
        Err(question)
    }
}

impl Intercept for Interceptor {
    fn ready(
        &self,
        pid: Pid,
        level: crate::Priority,
        worker: Option<usize>,
        ahead: usize,
        share: crate::runqueue::order::Stretch,
        light: bool,
    ) {
        let mut state = self.0.lock();
        if let Some(wait) = state
            .fairness
            .ready(pid, level, worker, ahead, share, light)
        {
            state.trace.push(super::trace::Entry::Unfair(wait));
        }
    }

    fn nursery(
        &self,
        pid: Pid,
        level: crate::Priority,
        worker: usize,
        share: crate::runqueue::order::Stretch,
    ) {
        let mut state = self.0.lock();
        if let Some(wait) = state.fairness.nursery(pid, level, worker, share) {
            state.trace.push(super::trace::Entry::Unfair(wait));
        }
    }

    fn message(&self, record: &RecordRef, package: Package) -> Option<Package> {
        let mut guard = self.0.lock();
        let state = &mut *guard;
        let to = record.pid;
        let Some((due, copy)) = state.fate(to, &package, Traveller::Message) else {
            // Dropped after the lock: a payload's `Drop` is the user's.
            drop(guard);
            crate::panic_guard::drop_user_value(package, to, "a message the simulation lost");
            return None;
        };
        state.route(package, due, copy, |p| Held::Message(record.clone(), p))
    }

    fn request(&self, record: &RecordRef, request: Request) -> Option<Request> {
        let mut guard = self.0.lock();
        let state = &mut *guard;
        let to = record.pid;
        let Some((due, copy)) = state.fate(to, request.package(), Traveller::Request) else {
            drop(guard);
            // Lost on the way: the asker is not told (it learns by its
            // timeout), and the question is dropped with no answer.
            let (question, reply) = request.into_parts();
            reply.forget();
            crate::panic_guard::drop_user_value(question, to, "a request the simulation lost");
            return None;
        };
        let asker = request.package().source();
        let copy = copy.map(|question| {
            let reply = ReplyTo::new(StdArc::new(Nobody { asker }), "(a duplicated question)");
            Request::new(question, reply)
        });
        state.route(request, due, copy, |r| Held::Request(record.clone(), r))
    }

    fn cancel(&self, record: &RecordRef) -> bool {
        let mut state = self.0.lock();
        let to = record.pid;
        let behind = state
            .pairs
            .iter()
            .filter(|((_, target), _)| *target == to)
            .map(|(_, &(_, latest))| latest)
            .max();
        let Some(due) = behind else {
            return true;
        };
        let due = state.cancels.get(&to).map_or(due, |&other| other.max(due));
        state.cancels.insert(to, due);
        state.hold(due, Held::Cancel(record.clone()));
        false
    }

    fn completion(
        &self,
        record: &RecordRef,
        tag: Tag,
        result: Result<Payload, CommandError>,
    ) -> Option<Result<Payload, CommandError>> {
        let mut guard = self.0.lock();
        let state = &mut *guard;
        let to = record.pid;
        if state.handler_fault.take() == Some((to, tag)) {
            return Some(result);
        }
        let faults = &state.faults;
        if state.choices.chance(faults.completion_loss) {
            state
                .trace
                .push(super::trace::Entry::Fault(Fault::CompletionLost { to }));
            drop(guard);
            crate::panic_guard::drop_user_value(result, to, "a completion the simulation lost");
            return Some(Err(CommandError::Dropped));
        }
        if state.choices.chance(faults.completion_delay) {
            let by = draw_delay(&mut state.choices, faults.max_completion_delay);
            state
                .trace
                .push(super::trace::Entry::Fault(Fault::CompletionDelayed {
                    to,
                    by,
                }));
            let due = state.now + by;
            state.hold(due, Held::Completion(record.clone(), tag, result));
            return None;
        }
        Some(result)
    }
}
