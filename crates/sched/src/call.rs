//! One command call with a timeout and retries, driven from a step: the
//! shape every workflow step writes by hand (yield, set a timer, cancel it
//! on the completion, yield again on the timeout).

use std::any::Any;
use std::error::Error;
use std::fmt;
use std::time::Duration;

use relay::Payload;
use sched_core::{CommandError, CommandRef, Event, Output, Tag, TimerId, TypedCommand, Yielded};

/// A command call with a timeout per attempt and a number of retries.
///
/// [`issue`](Call::issue) yields the command and sets the attempt's timer;
/// hand every event to [`on_event`](Call::on_event), which takes the ones
/// that are this call's: a completion ends the call (the timer is
/// cancelled), a timeout or a failed completion starts the next attempt,
/// until the retries are spent. The first completion of any attempt wins:
/// a retry is another try of the same command, so a late answer to an
/// earlier attempt is as good as the last one's, and the ones after it are
/// swallowed. Keep the `Call` until the process ends (or let its step
/// ignore completions it does not know) so that late completions of a
/// finished call are swallowed too.
///
/// Each call needs its own [`Tag`]: the commands of all its attempts carry
/// it.
///
/// The call is typed by its command: a [`TypedCommand<D, R>`] makes a
/// `Call<D, R>`, which only starts with a `D` and is answered with an `R`
/// (an answer of another type fails the attempt with
/// [`CommandError::UnexpectedType`]); a plain
/// [`CommandId`](sched_core::CommandId) makes a `Call` (`Call<Payload,
/// Payload>`). Every attempt sends the same data
/// ([`issue`](Call::issue)), or data made for that attempt
/// ([`issue_with`](Call::issue_with)).
///
/// # Examples
///
/// ```
/// use sched::command::{Call, CallError, CommandId, TypedCommand};
/// use sched::prelude::*;
/// use std::time::Duration;
///
/// const FETCH: TypedCommand<&str, String> = TypedCommand::new(CommandId(1));
///
/// /// Fetches a page with a 15 ms timeout and one retry; finishes with the
/// /// page or the error.
/// struct Fetch {
///     call: Call<&'static str, String>,
/// }
///
/// impl Process for Fetch {
///     type Done = Result<String, CallError>;
///
///     fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
///         self.call.issue(out, "/index.html");
///         Ok(())
///     }
///
///     fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
///         for event in events {
///             // The page or why there is none, once the call ended.
///             if let Some(page) = self.call.on_event(event, out).ended() {
///                 out.finish(page);
///             }
///         }
///         Ok(())
///     }
/// }
///
/// let scheduler = Scheduler::builder()
///     .workers(1)
///     .handler(FETCH, |path: &str, done| {
///         let _ = done.complete(format!("page {path}"));
///         Ok(())
///     })
///     .build();
/// scheduler.start();
/// let fetch = Fetch { call: Call::new(FETCH, Tag(1), Duration::from_millis(15)).retries(1) };
/// let page = scheduler.spawn(fetch)?.wait()??;
/// assert_eq!(page, "page /index.html");
/// # scheduler.shutdown(Duration::from_secs(1));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// A call only starts with its command's data type:
///
/// ```compile_fail,E0308
/// use sched::command::{Call, CommandId, TypedCommand};
/// use sched::prelude::*;
/// use std::time::Duration;
///
/// const DOUBLE: TypedCommand<u64, u64> = TypedCommand::new(CommandId(1));
///
/// fn begin(out: &mut Output<'_>) -> Call<u64, u64> {
///     let mut call = Call::new(DOUBLE, Tag(1), Duration::from_millis(15));
///     call.issue(out, "twelve"); // `DOUBLE` takes a `u64`
///     call
/// }
/// ```
pub struct Call<D = Payload, R = Payload> {
    /// The command, with the types of its data and result.
    command: TypedCommand<D, R>,
    tag: Tag,
    timeout: Duration,
    retries: u32,
    /// Makes each attempt's data, from the attempt's number (1 for the
    /// first).
    data: Option<Box<dyn FnMut(u32) -> D + Send>>,
    /// Attempts made so far.
    attempts: u32,
    /// The running attempt's timer; `None` once the call has ended.
    timer: Option<TimerId>,
    /// The call has ended (answered or given up): later completions are
    /// swallowed.
    ended: bool,
    /// How its completions are read (every attempt has the same tag).
    yielded: Option<Yielded<R>>,
}

impl<D: Any + Send, R: Any + Send> Call<D, R> {
    /// A call of `command` with completions tagged `tag`, `timeout` per
    /// attempt, and no retry.
    ///
    /// # Examples
    ///
    /// See [`Call`].
    pub fn new<C: CommandRef<Data = D, Result = R>>(
        command: C,
        tag: Tag,
        timeout: Duration,
    ) -> Self {
        Call {
            command: TypedCommand::new(command.command_id()),
            tag,
            timeout,
            retries: 0,
            data: None,
            attempts: 0,
            timer: None,
            ended: false,
            yielded: None,
        }
    }

    /// Tries up to `retries` more times after the first attempt times out
    /// or fails.
    ///
    /// # Examples
    ///
    /// See [`Call`].
    pub fn retries(mut self, retries: u32) -> Self {
        self.retries = retries;
        self
    }

    /// Issues the call (again, if it had ended): yields the command with
    /// `data` (a clone of it for each attempt) and sets the attempt's
    /// timer.
    ///
    /// # Examples
    ///
    /// See [`Call`].
    pub fn issue(&mut self, out: &mut Output<'_>, data: D)
    where
        D: Clone + 'static,
    {
        self.issue_with(out, move |_| data.clone());
    }

    /// Issues the call (again, if it had ended) with data made for each
    /// attempt: `data(n)` for the `n`th attempt (1 for the first). For a
    /// retry that asks differently (another replica, a smaller page), and
    /// for an untyped command, whose data (a [`Payload`]) is not `Clone`.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::command::{Call, CallEvent, CommandId, TypedCommand};
    /// use sched::prelude::*;
    /// use std::time::Duration;
    ///
    /// /// Reads a key from replica `n`.
    /// const READ: TypedCommand<u32, String> = TypedCommand::new(CommandId(1));
    ///
    /// struct Read(Call<u32, String>);
    ///
    /// impl Process for Read {
    ///     type Done = String;
    ///
    ///     fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
    ///         // Attempt 1 asks replica 1, a retry asks replica 2, and so on.
    ///         self.0.issue_with(out, |attempt| attempt);
    ///         Ok(())
    ///     }
    ///
    ///     fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
    ///         for event in events {
    ///             match self.0.on_event(event, out) {
    ///                 CallEvent::Answered(value) => out.finish(value),
    ///                 CallEvent::Failed(why) => return Err(why.into()),
    ///                 _ => {}
    ///             }
    ///         }
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let scheduler = Scheduler::builder()
    ///     .workers(1)
    ///     .handler(READ, |replica: u32, done| {
    ///         // Replica 1 is down: it never answers.
    ///         if replica > 1 {
    ///             let _ = done.complete(format!("from replica {replica}"));
    ///         }
    ///         Ok(())
    ///     })
    ///     .build();
    /// scheduler.start();
    /// let read = Read(Call::new(READ, Tag(1), Duration::from_millis(10)).retries(2));
    /// assert_eq!(scheduler.spawn(read)?.wait()?, "from replica 2");
    /// # scheduler.shutdown(Duration::from_secs(1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn issue_with(
        &mut self,
        out: &mut Output<'_>,
        data: impl FnMut(u32) -> D + Send + 'static,
    ) {
        self.data = Some(Box::new(data));
        self.attempts = 0;
        self.ended = false;
        self.attempt(out);
    }

    /// How many attempts were made so far.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::command::{Call, CommandId};
    /// use sched::prelude::*;
    /// let call = Call::new(CommandId(1), Tag(1), std::time::Duration::from_millis(5));
    /// assert_eq!(call.attempts(), 0);
    /// ```
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// Whether the call is still waiting for an answer.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::command::{Call, CommandId};
    /// use sched::prelude::*;
    /// let call = Call::new(CommandId(1), Tag(1), std::time::Duration::from_millis(5));
    /// assert!(!call.is_pending());
    /// ```
    pub fn is_pending(&self) -> bool {
        self.timer.is_some()
    }

    fn attempt(&mut self, out: &mut Output<'_>) {
        let data = self.data.as_mut().expect("started");
        self.attempts += 1;
        let data = data(self.attempts);
        self.yielded = Some(out.yield_command(self.command, self.tag, data));
        self.timer = Some(out.set_timer(self.timeout, self.tag));
    }

    /// Takes `event` if it is this call's, and says what became of the
    /// call, in one flat [`CallEvent`]: it ended with the command's
    /// answer ([`Answered`](CallEvent::Answered)), or without one once
    /// the retries are spent ([`Failed`](CallEvent::Failed)); the event
    /// was this call's and there is nothing to do
    /// ([`Taken`](CallEvent::Taken)); or it is not this call's
    /// ([`Other`](CallEvent::Other)), to handle yourself.
    ///
    /// # Examples
    ///
    /// See [`Call`].
    pub fn on_event(&mut self, event: Event, out: &mut Output<'_>) -> CallEvent<R> {
        let Some(yielded) = self.yielded else {
            return CallEvent::Other(event);
        };
        match yielded.result(event) {
            Ok(_) if self.ended => CallEvent::Taken,
            Ok(Ok(value)) => {
                self.finish(out);
                CallEvent::Answered(value)
            }
            Ok(Err(error)) => self.retry_or_fail(out, Some(error)),
            Err(Event::Timer { id, .. }) if Some(id) == self.timer => self.retry_or_fail(out, None),
            Err(other) => CallEvent::Other(other),
        }
    }

    fn finish(&mut self, out: &mut Output<'_>) {
        if let Some(timer) = self.timer.take() {
            out.cancel_timer(timer);
        }
        self.ended = true;
    }

    fn retry_or_fail(
        &mut self,
        out: &mut Output<'_>,
        failed: Option<CommandError>,
    ) -> CallEvent<R> {
        if let Some(timer) = self.timer.take() {
            out.cancel_timer(timer);
        }
        if self.attempts <= self.retries {
            self.attempt(out);
            return CallEvent::Taken;
        }
        self.ended = true;
        let attempts = self.attempts;
        CallEvent::Failed(match failed {
            Some(error) => CallError::Failed { attempts, error },
            None => CallError::TimedOut { attempts },
        })
    }
}

/// What became of an event handed to [`Call::on_event`]: one flat enum,
/// so that a step matches the call's end and the events that are not the
/// call's in one `match`.
///
/// # Examples
///
/// ```
/// use sched::command::{Call, CallError, CallEvent};
/// use sched::prelude::*;
///
/// /// Finishes with the call's answer, or with why there is none.
/// fn on_event(call: &mut Call<u32, u32>, event: Event, out: &mut Output<'_>) -> Option<Event> {
///     match call.on_event(event, out) {
///         CallEvent::Answered(n) => out.finish(Ok::<u32, CallError>(n)),
///         CallEvent::Failed(why) => out.finish(Err::<u32, CallError>(why)),
///         CallEvent::Taken => {}
///         CallEvent::Other(event) => return Some(event),
///     }
///     None
/// }
/// ```
#[derive(Debug)]
#[must_use = "an event that is not the call's comes back in `CallEvent::Other`"]
pub enum CallEvent<R> {
    /// The call ended with the command's answer.
    Answered(R),
    /// The call ended without an answer: every attempt timed out, or the
    /// last one failed.
    Failed(CallError),
    /// The event was this call's, and there is nothing to do: a retry
    /// started, or a late completion of an ended call was swallowed.
    Taken,
    /// The event is not this call's: handle it yourself.
    Other(Event),
}

impl<R> CallEvent<R> {
    /// How the call ended, if this event ended it: its answer or why
    /// there is none; `None` for [`Taken`](CallEvent::Taken) and
    /// [`Other`](CallEvent::Other) (whose event is dropped).
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::command::{CallError, CallEvent};
    ///
    /// let ended: CallEvent<u32> = CallEvent::Answered(7);
    /// assert_eq!(ended.ended().map(|r| r.ok()), Some(Some(7)));
    /// let failed: CallEvent<u32> = CallEvent::Failed(CallError::TimedOut { attempts: 2 });
    /// assert!(matches!(failed.ended(), Some(Err(CallError::TimedOut { attempts: 2 }))));
    /// assert!(CallEvent::<u32>::Taken.ended().is_none());
    /// ```
    pub fn ended(self) -> Option<Result<R, CallError>> {
        match self {
            CallEvent::Answered(answer) => Some(Ok(answer)),
            CallEvent::Failed(why) => Some(Err(why)),
            CallEvent::Taken | CallEvent::Other(_) => None,
        }
    }
}

impl<D, R> fmt::Debug for Call<D, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Call")
            .field("command", &self.command.id())
            .field("tag", &self.tag)
            .field("timeout", &self.timeout)
            .field("retries", &self.retries)
            .field("attempts", &self.attempts)
            .field("pending", &self.timer.is_some())
            .finish()
    }
}

/// Why a [`Call`] ended without a result.
///
/// # Examples
///
/// ```
/// use sched::command::CallError;
/// let e = CallError::TimedOut { attempts: 2 };
/// assert_eq!(e.to_string(), "no answer after 2 attempt(s)");
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum CallError {
    /// Every attempt timed out.
    TimedOut {
        /// Attempts made.
        attempts: u32,
    },
    /// The last attempt's command failed (the earlier ones failed or timed
    /// out).
    Failed {
        /// Attempts made.
        attempts: u32,
        /// The last attempt's error.
        error: CommandError,
    },
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallError::TimedOut { attempts } => write!(f, "no answer after {attempts} attempt(s)"),
            CallError::Failed { attempts, error } => {
                write!(f, "the command failed after {attempts} attempt(s): {error}")
            }
        }
    }
}

impl Error for CallError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            CallError::Failed { error, .. } => Some(error),
            CallError::TimedOut { .. } => None,
        }
    }
}
