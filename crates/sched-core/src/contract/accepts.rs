//! Processes that declare the one message type they accept.

use std::any::Any;

use crate::contract::process::Process;

/// A [`Process`] that accepts messages of one type, [`Message`](Accepts::Message).
///
/// The [`Completion`](crate::Completion) of such a process hands out its
/// typed address, [`addr::<Self>()`](crate::Completion::addr), an
/// [`Addr<Self::Message>`](relay::Addr): a `send` through that address only
/// compiles with a `Self::Message`. The message reaches the process as an
/// ordinary [`Event::Message`](crate::Event::Message), stored inline when
/// it is small (no heap allocation), and the step reads it typed through
/// [`Events::typed`](crate::Events::typed): each message is a
/// `Self::Message`, with no downcast.
///
/// A process that needs to accept many unrelated types (an interpreter's
/// mailbox, a router) simply does not implement `Accepts`, and is sent to
/// by [`Pid`](relay::Pid); both kinds share one scheduler.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use sched::process::Accepts;
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
/// // scheduler.send(counter, 2u64)?; // does not compile: `counter` takes a `Count`
/// scheduler.send(counter, Count::Finish)?;
/// assert_eq!(done.wait()?, 42);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// A send of another type through the typed address does not compile:
///
/// ```compile_fail,E0277
/// use sched::prelude::*;
///
/// struct Counter;
/// impl Accepts for Counter {
///     type Message = u64;
/// }
/// impl Process for Counter {
///     type Done = ();
///     fn step(&mut self, _: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
///         Ok(())
///     }
/// }
///
/// let scheduler = Scheduler::builder().workers(1).build();
/// let counter = scheduler.spawn(Counter)?.addr::<Counter>();
/// scheduler.send(counter, "two")?; // `counter` takes a `u64`
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// Nor does reading typed events in a process that declares no message
/// type:
///
/// ```compile_fail,E0277
/// use sched::prelude::*;
///
/// struct Anything;
/// impl Process for Anything {
///     type Done = ();
///     fn step(&mut self, events: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
///         for _ in events.typed::<Self>() {} // `Anything` does not implement `Accepts`
///         Ok(())
///     }
/// }
/// ```
pub trait Accepts: Process {
    /// The type of the messages this process accepts.
    type Message: Any + Send;
}
