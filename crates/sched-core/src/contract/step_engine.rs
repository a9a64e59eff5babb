//! What a step may ask of the engine it runs on: one interface.
//!
//! [`Output`](crate::Output) is defined here, below the engine, because
//! the [`Process`](crate::Process) trait names it and the engine stores
//! processes. It reaches the engine only through [`StepEngine`], whose
//! methods are the whole list of what a step does to the engine, in this
//! folder's own types. The engine implements it once, on its view of the
//! running step (the engine's shared state and the stepped process's
//! record: `Stepping`, in `engine/stepping.rs`), each method a call into
//! the feature it belongs to. Nothing in this folder names a type of the
//! engine, a record or a timer wheel.
//!
//! One method leads back to a concrete engine type: [`context`]
//! (`StepEngine::context`), the engine's inside handle that
//! [`Output::context`](crate::Output::context) returns. `Context` is the
//! engine's shared state itself, so this folder cannot name it without
//! standing on the engine; it crosses as `&dyn Any` and only
//! `engine/context.rs` turns it back (a checked downcast, never a cast).
//!
//! [`context`]: StepEngine::context

use std::any::Any;
use std::time::{Duration, Instant};

use relay::{Package, Payload, Pid, SendError};

use crate::contract::command::Tag;
use crate::contract::down::{MonitorId, NameError};
use crate::contract::pending::Extras;
use crate::contract::reply::{AskId, ReplyTo};
use crate::contract::timer_id::TimerId;

/// The engine as a running step sees it. Called on the worker thread
/// that runs the step, for the length of the step; "the stepped process"
/// is the process whose step it is.
pub(crate) trait StepEngine {
    // Messages.

    /// Delivers `package` to its target process.
    fn send(&self, package: Package) -> Result<(), SendError>;

    /// Delivers `package` to the process that has its target PID then,
    /// after `delay`.
    fn send_after(&self, delay: Duration, package: Package) -> Result<TimerId, SendError>;

    /// Sends a request to `to` on behalf of the stepped process, whose
    /// answer (or `AskError::TimedOut` at `timeout_at`) comes back as
    /// `Event::Reply`; returns the ask's id and its timeout's timer.
    /// `question_type` names the question's type, for
    /// `AskError::UnexpectedQuestion`.
    fn ask(
        &self,
        to: Pid,
        question: Payload,
        question_type: &'static str,
        timeout_at: Instant,
    ) -> Result<(AskId, TimerId), SendError>;

    /// A right to answer whose answer (or `AskError::TimedOut` at
    /// `timeout_at`) comes back to the stepped process as `Event::Reply`,
    /// for a question that goes on its way later or by other means;
    /// returns the ask's id, its timeout's timer and the right.
    fn answer_later(
        &self,
        question_type: &'static str,
        timeout_at: Instant,
    ) -> (AskId, TimerId, ReplyTo);

    // Time.

    /// Now, by the engine's clock (virtual in a simulation).
    fn now(&self) -> Instant;

    /// Sets a wake-up for the stepped process: an `Event::Timer` with
    /// `tag` at `at`. `list` is the process's pending lists, which the
    /// timer is listed in; the engine keeps their address as a prefetch
    /// hint only, and never reads through it.
    fn set_timer(&self, at: Instant, tag: Tag, list: &Extras) -> TimerId;

    /// Takes a wake-up out of its wheel (whether or not it had fired).
    fn cancel_timer(&self, id: TimerId);

    /// Cancels a delayed message; `true` if it had not been delivered.
    fn cancel_message_timer(&self, id: TimerId) -> bool;

    // Relations.

    /// Monitors `target` for the stepped process.
    fn monitor(&self, target: Pid) -> MonitorId;

    /// Removes a monitor of the stepped process.
    fn demonitor(&self, monitor: MonitorId);

    /// Links the stepped process with `target`.
    fn link(&self, target: Pid);

    /// Removes the link between the stepped process and `target`.
    fn unlink(&self, target: Pid);

    /// Whether exit signals reach the stepped process as events.
    fn trap_exits(&self, trap: bool);

    /// Registers `name` for the stepped process.
    fn register_name(&self, name: &str) -> Result<(), NameError>;

    // The stepped process itself.

    /// Its priority (`runqueue/order.rs`).
    fn priority(&self) -> crate::Priority;

    /// Sets its priority, from its next queueing on.
    fn set_priority(&self, priority: crate::Priority);

    /// Sets its published figure `key` to `value` (introspection).
    fn publish(&self, key: &'static str, value: i64);

    /// The engine's inside handle (`Context`), for
    /// [`Output::context`](crate::Output::context) and the operations that
    /// return the engine's own handles (spawn's `Completion`): see the
    /// module's documentation.
    fn context(&self) -> &dyn Any;
}
