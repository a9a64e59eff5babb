//! What a process's `step` receives.

use std::error::Error;
use std::fmt;

use relay::{Package, Payload};

use crate::contract::command::{CommandId, Tag};
use crate::contract::down::{Down, ExitReason};
use crate::contract::error::BoxError;
use crate::contract::reply::{AskError, AskId, Request};
use crate::contract::timer_id::TimerId;

/// One event delivered to a process's `step`.
///
/// Non-exhaustive: new kinds of events may be added, so a `match` needs a
/// catch-all arm (usually: ignore what you do not expect).
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// let e: Event = Event::Completion { tag: Tag(1), result: Ok(Box::new(42u32)) };
/// assert!(matches!(e, Event::Completion { tag: Tag(1), .. }));
/// ```
#[non_exhaustive]
pub enum Event<M = Package> {
    /// A yielded command completed, successfully or not.
    Completion {
        /// The tag the process gave the yield.
        tag: Tag,
        /// The handler's result data, or why the command failed.
        result: Result<Payload, CommandError>,
    },
    /// A message from another process or from outside: a [`Package`]
    /// to downcast, or, read through
    /// [`Events::typed`](crate::Events::typed) by a process that
    /// [`Accepts`](crate::Accepts) one type, that type's value.
    Message(M),
    /// A timer this process set (with
    /// [`Output::set_timer`](crate::Output::set_timer)) fell due.
    /// A timer the process cancelled before it fell due never arrives.
    Timer {
        /// The timer, as `set_timer` returned it.
        id: TimerId,
        /// The tag the process gave it.
        tag: Tag,
    },
    /// A process this one monitors has ended (or did not exist): see
    /// [`Output::monitor`](crate::Output::monitor). Exactly one per
    /// monitor, never for a monitor removed before.
    Down(Down),
    /// A process linked to this one ended, and this one traps exits (see
    /// [`Output::trap_exits`](crate::Output::trap_exits)): without
    /// trapping, an abnormal end of a linked process ends this one too,
    /// and a normal one is not reported.
    Exit {
        /// The linked process that ended (or did not exist).
        pid: relay::Pid,
        /// How it ended.
        reason: ExitReason,
        /// What the end said beyond its reason (the panic message, the
        /// error's text), as in [`Down::detail`](crate::Down::detail).
        detail: Option<std::sync::Arc<str>>,
    },
    /// Another process, or code outside, asks something and waits for the
    /// answer: reply through `reply` (dropping it unanswered tells the
    /// asker there will be no answer).
    Request(Request),
    /// The answer to an [`Output::ask`](crate::Output::ask) this process
    /// made: exactly one per ask, the answer or why there is none.
    Reply {
        /// The ask, as `Output::ask` returned it.
        id: AskId,
        /// The answer, or [`AskError::TimedOut`] / [`AskError::NoReply`] /
        /// [`AskError::Unread`].
        result: Result<Payload, AskError>,
        /// The question, handed back with [`AskError::Unread`]: the asked
        /// process ended before any step read it. `None` otherwise.
        question: Option<Payload>,
    },
    /// The scheduler asks the process to finish: it is shutting down. A
    /// process should wrap up and report done; one that does not is
    /// force-completed at the shutdown deadline.
    Cancel,
}

impl Event {
    /// Whether the event is a signal of the system lane: a monitor's
    /// down, a linked exit, the shutdown's cancel, the answer to an ask.
    /// These come before messages, requests, completions and timers in
    /// what a step is handed (see [`system_first`]).
    pub(crate) fn is_signal(&self) -> bool {
        matches!(
            self,
            Event::Down(_) | Event::Exit { .. } | Event::Cancel | Event::Reply { .. }
        )
    }
}

impl<M> Event<M> {
    /// The tag, for a completion or a timer.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// let cancel: Event = Event::Cancel;
    /// assert_eq!(cancel.tag(), None);
    /// ```
    pub fn tag(&self) -> Option<Tag> {
        match self {
            Event::Completion { tag, .. } | Event::Timer { tag, .. } => Some(*tag),
            Event::Message(_)
            | Event::Down(_)
            | Event::Exit { .. }
            | Event::Request(_)
            | Event::Reply { .. }
            | Event::Cancel => None,
        }
    }
}

impl Event {
    /// This event with its message read as an `M`: `Err` hands back a
    /// message of another type; every other event converts as it is.
    pub(crate) fn decode<M: std::any::Any>(self) -> Result<Event<M>, Package> {
        Ok(match self {
            Event::Message(package) => Event::Message(package.downcast::<M>()?),
            Event::Completion { tag, result } => Event::Completion { tag, result },
            Event::Timer { id, tag } => Event::Timer { id, tag },
            Event::Down(down) => Event::Down(down),
            Event::Exit {
                pid,
                reason,
                detail,
            } => Event::Exit {
                pid,
                reason,
                detail,
            },
            Event::Request(request) => Event::Request(request),
            Event::Reply {
                id,
                result,
                question,
            } => Event::Reply {
                id,
                result,
                question,
            },
            Event::Cancel => Event::Cancel,
        })
    }
}

impl<M: fmt::Debug> fmt::Debug for Event<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Event::Completion { tag, result } => f
                .debug_struct("Completion")
                .field("tag", tag)
                .field("ok", &result.is_ok())
                .finish(),
            Event::Message(p) => f.debug_tuple("Message").field(p).finish(),
            Event::Timer { id, tag } => f
                .debug_struct("Timer")
                .field("id", id)
                .field("tag", tag)
                .finish(),
            Event::Down(down) => f.debug_tuple("Down").field(down).finish(),
            Event::Exit {
                pid,
                reason,
                detail,
            } => f
                .debug_struct("Exit")
                .field("pid", pid)
                .field("reason", reason)
                .field("detail", detail)
                .finish(),
            Event::Request(request) => f.debug_tuple("Request").field(request).finish(),
            Event::Reply {
                id,
                result,
                question,
            } => f
                .debug_struct("Reply")
                .field("id", id)
                .field("ok", &result.is_ok())
                .field("question_back", &question.is_some())
                .finish(),
            Event::Cancel => f.write_str("Cancel"),
        }
    }
}

/// Why a yielded command produced no result.
///
/// # Examples
///
/// ```
/// use sched::command::{CommandError, CommandId};
/// let e = CommandError::NoHandler { command: CommandId(999) };
/// assert_eq!(e.to_string(), "no handler is registered for command 999");
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum CommandError {
    /// No handler is registered for the command id.
    NoHandler {
        /// The id that had no handler.
        command: CommandId,
    },
    /// The handler refused the command when it was dispatched.
    Rejected(BoxError),
    /// The handler completed the command with an error.
    Failed(BoxError),
    /// The handler panicked while handling the command.
    HandlerPanicked {
        /// The panic message.
        message: String,
    },
    /// The completer was dropped without completing the command.
    Dropped,
    /// The result is not of the type a typed yield
    /// ([`Yielded::result`](crate::Yielded::result)) reads: the handler
    /// completed through the untyped [`Completer`](crate::Completer) with
    /// another type, handed back as the handler gave it.
    UnexpectedType(crate::contract::error::UnexpectedValue),
}

impl fmt::Display for CommandError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CommandError::NoHandler { command } => {
                write!(f, "no handler is registered for {command}")
            }
            CommandError::Rejected(e) => write!(f, "the handler rejected the command: {e}"),
            CommandError::Failed(e) => write!(f, "the command failed: {e}"),
            CommandError::HandlerPanicked { message } => {
                write!(f, "the handler panicked: {message}")
            }
            CommandError::Dropped => {
                f.write_str("the completer was dropped without completing the command")
            }
            CommandError::UnexpectedType(value) => {
                write!(f, "the command's result is {value}")
            }
        }
    }
}

impl Error for CommandError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            CommandError::Rejected(e) | CommandError::Failed(e) => Some(&**e),
            _ => None,
        }
    }
}

/// Puts the system lane first: the signals among `events` (downs, exits,
/// cancel, answers to asks; [`Event::is_signal`]) move ahead of the other
/// events, each group keeping its order. So a process with a backlog of
/// messages (one that reads a few per step and leaves the rest for later)
/// sees that a monitored process ended, that it must shut down, or the
/// answer it waits for, at its next step, not after the backlog. An
/// upgrade ordered from outside is taken out before any step
/// (`engine/upgrade.rs`), ahead of all of these.
///
/// The price is Erlang's signal order between one pair of processes: a
/// message a process sent just before it ended can reach a step after
/// (in the same step as) the down that reports its end.
///
/// Costs one pass over the events when there are two or more, and a
/// stable sort only when a signal sits behind another event.
pub(crate) fn system_first(events: &mut [Event]) {
    if events.len() < 2 {
        return;
    }
    let Some(first_other) = events.iter().position(|e| !e.is_signal()) else {
        return;
    };
    if events[first_other..].iter().any(Event::is_signal) {
        events[first_other..].sort_by_key(|e| !e.is_signal());
    }
}

#[cfg(test)]
mod lane_tests {
    use super::*;
    use relay::Pid;

    fn message(n: u32) -> Event {
        Event::Message(Package::new(Pid::local(1), Pid::local(2), n))
    }

    fn names(events: &[Event]) -> Vec<String> {
        events
            .iter()
            .map(|e| match e {
                Event::Message(p) => format!("m{}", p.payload::<u32>().copied().unwrap_or(0)),
                Event::Cancel => "cancel".into(),
                Event::Timer { tag, .. } => format!("t{}", tag.0),
                other => format!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn signals_move_ahead_of_a_backlog_keeping_each_lanes_order() {
        let mut events = vec![
            message(1),
            Event::Timer {
                id: TimerId { shard: 0, key: 1 },
                tag: Tag(7),
            },
            message(2),
            Event::Cancel,
            message(3),
        ];
        system_first(&mut events);
        assert_eq!(names(&events), ["cancel", "m1", "t7", "m2", "m3"]);
    }

    #[test]
    fn events_already_in_lane_order_are_left_alone() {
        let mut events = vec![Event::Cancel, message(1), message(2)];
        system_first(&mut events);
        assert_eq!(names(&events), ["cancel", "m1", "m2"]);
        let mut one = vec![message(5)];
        system_first(&mut one);
        assert_eq!(names(&one), ["m5"]);
    }
}
