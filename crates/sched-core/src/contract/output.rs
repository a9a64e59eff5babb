//! What a step receives and writes: its events and its output buffer.

use std::any::Any;
use std::fmt;
use std::marker::PhantomData;

use relay::{Payload, Pid};

use crate::contract::accepts::Accepts;
use crate::contract::backlog::Backlog;
use crate::contract::command::{CommandId, Tag};
use crate::contract::event::Event;
use crate::contract::pending::{extras, Extras, StepLists};
use crate::contract::step_engine::StepEngine;
use crate::contract::typed_command::{CommandRef, Yielded};
use crate::contract::upgrade::Upgrade;
use crate::panic_guard::drop_user_value;

/// The events delivered to one step, in arrival order (per producer).
/// Events the step does not consume are kept: they come first in the
/// process's next step (or are dead letters if the process ends).
///
/// A timer, monitor or ask the step cancels while reading is never handed
/// out afterwards, even when its event is further on in this same batch:
/// the check is made as each event is taken. So the length is an upper
/// bound of what the iterator yields.
///
/// # Examples
///
/// ```
/// # use sched::{Event, Events};
/// fn count_messages(events: &mut Events<'_>) -> usize {
///     events.filter(|e| matches!(e, Event::Message(_))).count()
/// }
/// ```
pub struct Events<'a> {
    /// The batch that just arrived, sorted into its lanes: the common
    /// case, when the last step left nothing unread (empty otherwise).
    batch: std::vec::Drain<'a, Event>,
    /// The process's backlog, read in place, when the last step left one
    /// (`backlog.rs`): what just arrived was added to it.
    backlog: Option<&'a mut Backlog>,
    /// The process's pending timers, monitors and asks: each event is
    /// checked against them as it is handed out (`contract/pending.rs`).
    lists: Option<&'a StepLists<'a>>,
}

impl<'a> Events<'a> {
    pub(crate) fn new(batch: std::vec::Drain<'a, Event>, lists: Option<&'a StepLists<'a>>) -> Self {
        Events {
            batch,
            backlog: None,
            lists,
        }
    }

    /// A step's events read from `backlog` in place: what the step does
    /// not read stays there. `empty` is an empty batch.
    pub(crate) fn from_backlog(
        backlog: &'a mut Backlog,
        empty: std::vec::Drain<'a, Event>,
        lists: Option<&'a StepLists<'a>>,
    ) -> Self {
        debug_assert_eq!(empty.len(), 0);
        Events {
            batch: empty,
            backlog: Some(backlog),
            lists,
        }
    }

    /// What the step has not taken of a batch (nothing for a backlog,
    /// which keeps it in place), without the pending check: it has not
    /// been handed out, and is kept for the next step.
    pub(crate) fn unread_batch(&mut self) -> Option<&mut std::vec::Drain<'a, Event>> {
        (self.batch.len() > 0).then_some(&mut self.batch)
    }

    /// `next` for a step that reads its backlog: apart from the batch's
    /// path, which then compiles as it did alone (one shared path moved
    /// each 64-byte event through an `Option` whose stores the next load
    /// could not forward from: a tenth of ping-pong's time).
    #[inline(never)]
    fn next_from_backlog(&mut self) -> Option<Event> {
        loop {
            let event = self.backlog.as_deref_mut()?.pop_front()?;
            if let Some(event) = self.checked(event) {
                return Some(event);
            }
        }
    }

    /// `event` if the step still waits for it; otherwise it is dropped
    /// (or kept aside, if it carries what nobody else has).
    #[inline(always)]
    fn checked(&self, event: Event) -> Option<Event> {
        let Some(lists) = self.lists else {
            return Some(event);
        };
        if lists.hand_out(&event) {
            return Some(event);
        }
        if crate::contract::pending::must_not_vanish(&event) {
            lists.returned.borrow_mut().push(event);
        } else {
            drop_user_value(event, lists.pid, "an event cancelled during its step");
        }
        None
    }

    fn left(&self) -> usize {
        match &self.backlog {
            None => self.batch.len(),
            Some(backlog) => backlog.len(),
        }
    }

    /// How many events are left in this batch: an upper bound of what the
    /// iterator still yields (an event of a timer, monitor or ask the step
    /// cancels meanwhile is skipped).
    ///
    /// # Examples
    ///
    /// ```
    /// # use sched::Events;
    /// fn nothing_came(events: &Events<'_>) -> bool { events.len() == 0 }
    /// ```
    pub fn len(&self) -> usize {
        self.left()
    }

    /// Whether this batch has no event left.
    ///
    /// # Examples
    ///
    /// ```
    /// # use sched::Events;
    /// fn nothing_came(events: &Events<'_>) -> bool { events.is_empty() }
    /// ```
    pub fn is_empty(&self) -> bool {
        self.left() == 0
    }

    /// These events as a process `P` that [`Accepts`] one message type
    /// reads them: each message is a `P::Message`, taken out for you, and
    /// every other event is as it is.
    ///
    /// A message of another type (which only a send by bare PID can
    /// deliver: a typed address takes only `P::Message`) is dropped with a
    /// warning naming the process: read the events untyped, without this
    /// call, to see such messages.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    ///
    /// enum Count { Add(u64), Finish }
    ///
    /// #[derive(Default)]
    /// struct Counter { total: u64 }
    ///
    /// impl Accepts for Counter {
    ///     type Message = Count;
    /// }
    ///
    /// impl Process for Counter {
    ///     type Done = u64;
    ///     fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
    ///         for event in events.typed::<Self>() {
    ///             match event {
    ///                 Event::Message(Count::Add(n)) => self.total += n,
    ///                 Event::Message(Count::Finish) => out.finish(self.total),
    ///                 _ => {}
    ///             }
    ///         }
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let scheduler = Scheduler::builder().workers(1).build();
    /// scheduler.start();
    /// let done = scheduler.spawn(Counter::default())?;
    /// let counter = done.addr::<Counter>();
    /// scheduler.send(counter, Count::Add(40))?;
    /// scheduler.send(counter, Count::Add(2))?;
    /// scheduler.send(counter, Count::Finish)?;
    /// assert_eq!(done.wait()?, 42);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn typed<P: Accepts>(&mut self) -> Typed<'_, 'a, P::Message> {
        Typed {
            events: self,
            message: PhantomData,
        }
    }
}

/// A step's [`Events`] with each message read as an `M`: see
/// [`Events::typed`].
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use sched::process::Typed;
///
/// struct Adder(u64);
/// impl Accepts for Adder {
///     type Message = u64;
/// }
///
/// fn add_all(adder: &mut Adder, messages: Typed<'_, '_, u64>) {
///     for event in messages {
///         if let Event::Message(n) = event {
///             adder.0 += n;
///         }
///     }
/// }
/// # impl Process for Adder {
/// #     type Done = ();
/// #     fn step(&mut self, events: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
/// #         add_all(self, events.typed::<Self>());
/// #         Ok(())
/// #     }
/// # }
/// ```
pub struct Typed<'e, 'a, M> {
    events: &'e mut Events<'a>,
    // `fn() -> M`: the iterator hands `M`s out, it does not hold one.
    message: PhantomData<fn() -> M>,
}

impl<M: Any + Send> Iterator for Typed<'_, '_, M> {
    type Item = Event<M>;

    fn next(&mut self) -> Option<Event<M>> {
        loop {
            match self.events.next()?.decode::<M>() {
                Ok(event) => return Some(event),
                Err(stranger) => {
                    // A step always reads with its lists; `OUTSIDE` only
                    // names the process in a unit test's events.
                    let pid = self.events.lists.map_or(Pid::OUTSIDE, |lists| lists.pid);
                    tracing::warn!(
                        %pid,
                        expected = std::any::type_name::<M>(),
                        "a message of another type was dropped: the process reads its events typed"
                    );
                    drop_user_value(stranger, pid, "a message of another type");
                }
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, self.events.size_hint().1)
    }
}

impl<M> fmt::Debug for Typed<'_, '_, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Typed")
            .field("message", &std::any::type_name::<M>())
            .field("left", &self.events.len())
            .finish()
    }
}

impl Iterator for Events<'_> {
    type Item = Event;

    /// Inlined into the step that reads (another crate's, most often):
    /// out of line, the call and the event's copies through it were about
    /// 60 instructions a message in a ping-pong (callgrind,
    /// `benches/examples/step_cost.rs`).
    #[inline]
    fn next(&mut self) -> Option<Event> {
        if self.backlog.is_some() {
            return self.next_from_backlog();
        }
        loop {
            let event = self.batch.next()?;
            match self.lists {
                Some(lists) if !lists.hand_out(&event) => set_aside(lists, event),
                _ => return Some(event),
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.left();
        match self.lists {
            Some(lists) if lists.filters.get() => (0, Some(left)),
            _ => (left, Some(left)),
        }
    }
}

/// An event cancelled during its step (its timer cancelled, its monitor
/// dropped): returned as a dead letter if it must not vanish, dropped
/// otherwise.
#[cold]
#[inline(never)]
fn set_aside(lists: &StepLists<'_>, event: Event) {
    if crate::contract::pending::must_not_vanish(&event) {
        lists.returned.borrow_mut().push(event);
    } else {
        drop_user_value(event, lists.pid, "an event cancelled during its step");
    }
}

impl fmt::Debug for Events<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Events")
            .field("remaining", &self.len())
            .finish()
    }
}

/// What a step asked for.
#[derive(Debug)]
pub(crate) enum Status {
    /// Run again (after the yields of this step complete, if it yielded).
    Continue,
    /// Wait for messages (or for the completions of yields in flight).
    Idle,
    /// Finished with a result.
    Done(Payload),
    /// Replace the process (see `contract/upgrade.rs`).
    Upgrade(Box<Upgrade>),
}

/// A command yielded by a step, waiting to be dispatched.
pub(crate) struct Yield {
    pub(crate) command: CommandId,
    pub(crate) tag: Tag,
    pub(crate) data: Payload,
}

/// The scheduler-owned output buffer of one step.
///
/// A step says what it wants next with [`continue_`](Output::continue_),
/// [`idle`](Output::idle), [`finish`](Output::finish) or
/// [`upgrade`](Output::upgrade) (the last call wins; `idle` is the
/// default), and yields commands with
/// [`yield_command`](Output::yield_command). The rules:
///
/// - a step that yielded commands waits for their completions whatever
///   status it set (continue or idle); each completion wakes it;
/// - a step that says done ends the process; commands it yielded in the same
///   step are **not dispatched** (they are dropped and counted in the
///   worker stats as `discarded_yields`);
/// - a step that asks for an upgrade must not yield: if it did, its yields
///   are discarded the same way and the process ends with
///   [`UpgradeError::Yielded`](crate::UpgradeError::Yielded);
/// - the buffer is reused from step to step: its steady state allocates
///   nothing in the scheduler.
///
/// It also lets the step talk to other processes:
/// [`send`](Output::send) and [`spawn`](Output::spawn) act at once.
///
/// # Examples
///
/// ```
/// # use sched::{Output, Tag, command::CommandId};
/// fn fetch_two(out: &mut Output<'_>) {
///     out.yield_command(CommandId(1), Tag(1), Box::new("a"));
///     out.yield_command(CommandId(1), Tag(2), Box::new("b"));
///     out.idle(); // wait; each completion wakes the process
/// }
/// ```
pub struct Output<'a> {
    pub(crate) status: Status,
    pub(crate) yields: &'a mut Vec<Yield>,
    pub(crate) engine: &'a dyn StepEngine,
    pub(crate) pid: Pid,
    /// The process's timers, monitors and asks (allocated on first use),
    /// shared with the step's events (see `contract/pending.rs`).
    pub(crate) lists: &'a StepLists<'a>,
}

impl<'a> Output<'a> {
    pub(crate) fn new(
        yields: &'a mut Vec<Yield>,
        engine: &'a dyn StepEngine,
        pid: Pid,
        lists: &'a StepLists<'a>,
    ) -> Self {
        debug_assert!(yields.is_empty());
        Output {
            status: Status::Idle,
            yields,
            engine,
            pid,
            lists,
        }
    }

    /// Runs `f` on the process's pending lists, allocating them on first
    /// use, and marks the process's events as needing the pending check.
    pub(crate) fn with_extras<R>(&self, f: impl FnOnce(&mut Extras) -> R) -> R {
        self.lists.filters.set(true);
        f(extras(&mut self.lists.extras.borrow_mut()))
    }

    /// Runs `f` on the process's pending lists if it has any.
    pub(crate) fn with_existing<R>(&self, f: impl FnOnce(&mut Extras) -> R) -> Option<R> {
        self.lists.extras.borrow_mut().as_deref_mut().map(f)
    }

    /// The PID of the process being stepped.
    ///
    /// # Examples
    ///
    /// ```
    /// # use sched::Output;
    /// fn me(out: &Output<'_>) -> sched::Pid { out.pid() }
    /// ```
    pub fn pid(&self) -> relay::Pid {
        self.pid
    }

    /// Asks to run again: the process goes back to a run queue (behind the
    /// others waiting there, so it cannot monopolise a worker).
    ///
    /// # Examples
    ///
    /// ```
    /// # use sched::Output;
    /// fn again(out: &mut Output<'_>) { out.continue_() }
    /// ```
    pub fn continue_(&mut self) {
        self.status = Status::Continue;
    }

    /// Asks to wait for messages (the default).
    ///
    /// # Examples
    ///
    /// ```
    /// # use sched::Output;
    /// fn wait(out: &mut Output<'_>) { out.idle() }
    /// ```
    pub fn idle(&mut self) {
        self.status = Status::Idle;
    }

    /// Finishes the process with `value`: the outcome is `Ok(value)`.
    /// `value` should be the process's [`Done`](crate::Process::Done): its
    /// [`Completion`](crate::Completion) gives the waiter a `Done`, and a
    /// value of another type reaches the waiter as
    /// [`ExitError::UnexpectedType`](crate::ExitError::UnexpectedType). A
    /// value that is already a [`Payload`] is not boxed twice (pass a
    /// `Box<T>` as `*boxed`, or it is the box that is the outcome).
    ///
    /// # Examples
    ///
    /// ```
    /// # use sched::Output;
    /// fn finish(out: &mut Output<'_>, total: u64) { out.finish(total) }
    /// ```
    pub fn finish(&mut self, value: impl std::any::Any + Send) {
        self.status = Status::Done(relay::into_payload(value));
    }

    /// Yields `data` to the handler of `command`; its completion comes back
    /// as an [`Event::Completion`] carrying `tag`.
    ///
    /// # Examples
    ///
    /// ```
    /// # use sched::{Output, Tag, command::CommandId};
    /// fn sleep(out: &mut Output<'_>) {
    ///     out.yield_command(CommandId(7), Tag(1), Box::new(std::time::Duration::from_millis(5)));
    /// }
    /// ```
    pub fn yield_command<C: CommandRef>(
        &mut self,
        command: C,
        tag: Tag,
        data: C::Data,
    ) -> Yielded<C::Result> {
        self.yields.push(Yield {
            command: command.command_id(),
            tag,
            data: relay::into_payload(data),
        });
        Yielded::new(tag)
    }

    /// Forgets what this step has asked for so far: the commands it
    /// yielded are dropped (never dispatched) and its status is back to
    /// [`idle`](Output::idle). For a step that starts over, or hands the
    /// turn to a process that replaces a failed one.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::command::CommandId;
    ///
    /// fn change_of_mind(out: &mut Output<'_>) {
    ///     out.yield_command(CommandId(1), Tag(1), Box::new(()) as Payload);
    ///     out.reset(); // nothing is dispatched
    /// }
    /// ```
    pub fn reset(&mut self) {
        self.status = Status::Idle;
        for dropped in self.yields.drain(..) {
            drop_user_value(dropped.data, self.pid, "a command yielded before a reset");
        }
    }
}

impl fmt::Debug for Output<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Output")
            .field("pid", &self.pid)
            .field("status", &self.status)
            .field("yields", &self.yields.len())
            .finish()
    }
}
