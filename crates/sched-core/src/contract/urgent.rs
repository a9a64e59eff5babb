//! Urgent messages: a sender marks a message so that its receiver reads it
//! before the backlog of ordinary messages (the idea of Erlang's priority
//! messages, EEP 76).
//!
//! # Protocol
//!
//! - The sender wraps the message: `Urgent::new(message)` as the payload
//!   of any send (`Output::send`, `Context::send` or `post`). There is no
//!   other verb.
//! - On delivery (`engine/routing.rs`, `deliver_now`) the engine sees the
//!   wrapper (one type check per local send) and sets the receiver's
//!   sticky *urgent* bit in its mailbox word (`record/mailbox.rs`) before
//!   queueing the message. The bit is never cleared: a process that has
//!   been sent an urgent message once has every later batch looked at.
//! - Before a step, the owner reorders what it drained (`order_events`):
//!   system-lane signals first (`event::system_first`), then, when the bit
//!   is set, urgent messages, unwrapped (the step reads the message it was
//!   sent, never the wrapper), then everything else; each group keeps its
//!   arrival order. The bit is set before the push the drain acquires, so
//!   a drain that holds an urgent message always sees the bit.
//! - A bounded mailbox (`Builder::mailbox_capacity(n)`) keeps a reserve
//!   for urgent messages: an ordinary send fails with `Full` at `n`
//!   queued messages, an urgent one only at `n + max(1, n / 8)`. So a
//!   full mailbox still takes a few urgent messages (a stop, a
//!   reconfiguration), and a flood of urgent ones is still bounded.
//! - Across nodes a message is sent as its inner message: the wrapper is
//!   taken off before it leaves, and the receiving node reads it in the
//!   ordinary order.
//!
//! A process that never receives an urgent message pays one load of its
//! mailbox word per step for this (a word already in cache); a sender
//! pays one type check per local send.

use std::any::Any;

use relay::{Package, Payload};

use super::backlog::Ranks;
use super::event::Event;

/// A message its receiver reads before its backlog of ordinary messages:
/// wrap any message in it and send it as usual. The receiving step gets
/// the message itself (the wrapper is taken off), after the system lane's
/// signals (downs, exits, cancel, replies) and before every other event,
/// urgent messages in the order they arrived. A bounded mailbox keeps an
/// eighth of its capacity (at least one) in reserve for urgent messages.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use sched::Urgent;
///
/// /// Reads one message per step, leaving the rest for later; finishes
/// /// with what it read once it reads "stop".
/// struct Reader { read: Vec<String> }
///
/// impl Process for Reader {
///     type Done = Vec<String>;
///     fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
///         if let Some(Event::Message(m)) = events.next() {
///             let text = *m.payload::<&str>().ok_or("text")?;
///             self.read.push(text.to_owned());
///             if text == "stop" {
///                 out.finish(std::mem::take(&mut self.read));
///                 return Ok(());
///             }
///         }
///         if !events.is_empty() {
///             out.continue_();
///         }
///         Ok(())
///     }
/// }
///
/// let scheduler = Scheduler::builder().workers(1).build();
/// let reader = scheduler.spawn(Reader { read: Vec::new() })?;
/// for _ in 0..3 {
///     scheduler.send(reader.pid(), "work")?;
/// }
/// scheduler.send(reader.pid(), Urgent::new("stop"))?;
/// scheduler.start();
/// // Read first, ahead of the backlog.
/// assert_eq!(reader.wait()?, ["stop"]);
/// # scheduler.shutdown(std::time::Duration::from_secs(1));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Urgent(Payload);

impl Urgent {
    /// Marks `message` urgent.
    ///
    /// # Examples
    ///
    /// ```
    /// let urgent = sched::message::Urgent::new(42u32);
    /// assert_eq!(urgent.into_inner().downcast_ref::<u32>(), Some(&42));
    /// ```
    pub fn new(message: impl Any + Send) -> Urgent {
        Urgent(relay::into_payload(message))
    }

    /// The message it marks.
    ///
    /// # Examples
    ///
    /// See [`new`](Urgent::new).
    pub fn into_inner(self) -> Payload {
        self.0
    }
}

impl std::fmt::Debug for Urgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Urgent(..)")
    }
}

/// Whether `package` carries an urgent message.
#[inline]
pub(crate) fn is_urgent(package: &Package) -> bool {
    package.is::<Urgent>()
}

/// `package` with the wrapper taken off, if it is urgent: the message
/// itself, from the same sender to the same target, with the receipt the
/// package carried (taking the wrapper off is not reading the message:
/// the receipt is told when a step takes the message).
pub(crate) fn unwrap(mut package: Package) -> Package {
    if !is_urgent(&package) {
        return package;
    }
    // Every receipt, outermost first (no allocation without one).
    let mut receipts = Vec::new();
    while let Some(receipt) = package.take_receipt() {
        receipts.push(receipt);
    }
    let (source, target, payload) = package.into_parts();
    let inner = match payload.downcast::<Urgent>() {
        Ok(urgent) => urgent.0,
        Err(payload) => payload,
    };
    let unwrapped = Package::from_payload(source, target, inner);
    receipts
        .into_iter()
        .rev()
        .fold(unwrapped, |package, receipt| package.with_receipt(receipt))
}

/// The most messages a mailbox bounded at `capacity` takes when the one
/// being sent is urgent (`urgent`): its reserve is an eighth of the
/// capacity, at least one.
#[inline]
pub(crate) fn capacity_for(capacity: usize, urgent: bool) -> usize {
    if urgent {
        capacity.saturating_add((capacity / 8).max(1))
    } else {
        capacity
    }
}

/// Orders what a step is handed: the system lane's signals first
/// (`event::system_first`), then, when the process has been sent urgent
/// messages (`urgent`), those, unwrapped; each group in arrival order.
/// Without urgent messages this is `system_first` alone; with them, one
/// pass and a stable sort of the batch. Returns where the urgent lane
/// ends, for what the step leaves unread (`backlog.rs`; the system lane's
/// events tell themselves apart).
pub(crate) fn order_events(events: &mut Vec<Event>, urgent: bool) -> Ranks {
    if !urgent {
        super::event::system_first(events);
        return Ranks::default();
    }
    let mut ranked: Vec<(u8, Event)> = events
        .drain(..)
        .map(|event| match event {
            Event::Message(package) if is_urgent(&package) => (1, Event::Message(unwrap(package))),
            event if event.is_signal() => (0, event),
            event => (2, event),
        })
        .collect();
    ranked.sort_by_key(|&(rank, _)| rank);
    let ranks = Ranks {
        urgent_end: ranked.iter().filter(|(rank, _)| *rank < 2).count(),
    };
    events.extend(ranked.into_iter().map(|(_, event)| event));
    ranks
}

#[cfg(test)]
mod tests {
    use super::*;
    use relay::Pid;

    fn message(payload: impl Any + Send) -> Event {
        Event::Message(Package::new(Pid::local(1), Pid::local(2), payload))
    }

    fn names(events: &[Event]) -> Vec<String> {
        events
            .iter()
            .map(|e| match e {
                Event::Message(p) => match p.payload::<u32>() {
                    Some(n) => format!("m{n}"),
                    None => "wrapped".into(),
                },
                Event::Cancel => "cancel".into(),
                other => format!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn urgent_messages_come_after_signals_and_before_the_rest_unwrapped() {
        let mut events = vec![
            message(1u32),
            message(Urgent::new(2u32)),
            Event::Cancel,
            message(3u32),
            message(Urgent::new(4u32)),
        ];
        order_events(&mut events, true);
        assert_eq!(names(&events), ["cancel", "m2", "m4", "m1", "m3"]);
        let Event::Message(first) = &events[1] else {
            panic!("a message");
        };
        assert_eq!(
            (first.source(), first.target()),
            (Pid::local(1), Pid::local(2))
        );
    }

    #[test]
    fn without_the_bit_only_the_system_lane_moves() {
        let mut events = vec![message(1u32), Event::Cancel, message(3u32)];
        order_events(&mut events, false);
        assert_eq!(names(&events), ["cancel", "m1", "m3"]);
    }

    #[test]
    fn the_reserve_is_an_eighth_and_at_least_one() {
        assert_eq!(capacity_for(64, false), 64);
        assert_eq!(capacity_for(64, true), 72);
        assert_eq!(capacity_for(4, true), 5);
        assert_eq!(capacity_for(usize::MAX, true), usize::MAX);
    }
}
