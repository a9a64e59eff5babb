//! What a step may ask of the engine it runs on.
//!
//! [`Output`](crate::Output) is defined here, below the engine, because
//! the [`Process`](crate::Process) trait names it and the engine stores
//! processes. It reaches the engine only through [`StepEngine`]: the
//! operations a step performs, in this folder's own types. The engine
//! implements the trait on its view of the running step (the engine's
//! shared state and the stepped process's record, `engine/stepping.rs`);
//! each feature implements its part beside the rest of that feature
//! (`engine/timers.rs`, `engine/monitors.rs`, `engine/links.rs`,
//! `engine/names/`, `engine/ask.rs`), and so do `Output`'s public
//! methods for it. Nothing in this folder names a type of the engine, a
//! record or a timer wheel.

use std::any::Any;
use std::time::{Duration, Instant};

use relay::{Package, Payload, Pid, SendError};

use crate::contract::command::Tag;
use crate::contract::down::{MonitorId, NameError};
use crate::contract::reply::AskId;
use crate::contract::timer_id::TimerId;

/// The engine as a running step sees it. Called on the worker thread
/// that runs the step, for the length of the step.
pub(crate) trait StepEngine:
    StepTimers + StepMonitors + StepLinks + StepNames + StepAsk + StepIntrospect
{
    /// Delivers `package` to its target process.
    fn send(&self, package: Package) -> Result<(), SendError>;

    /// The stepped process's priority (`runqueue/order.rs`).
    fn priority(&self) -> crate::Priority;

    /// Sets the stepped process's priority, from its next queueing on.
    fn set_priority(&self, priority: crate::Priority);

    /// The engine's inside handle (`Context`), for
    /// [`Output::context`](crate::Output::context) and the operations that
    /// return the engine's own handles (spawn's `Completion`). It is the
    /// only way back from this interface to a concrete engine type, and
    /// only `engine/context.rs` takes it.
    fn context(&self) -> &dyn Any;
}

/// Timers a step sets (`engine/timers.rs`).
pub(crate) trait StepTimers {
    /// Now, by the engine's clock (virtual in a simulation).
    fn now(&self) -> Instant;

    /// Sets a wake-up for the stepped process: an `Event::Timer` with
    /// `tag` at `at`. `list` is the address of the process's pending-timer
    /// list, which the timer carries as a prefetch hint only.
    fn set_timer(&self, at: Instant, tag: Tag, list: *const u8) -> TimerId;

    /// Takes a wake-up out of its wheel (whether or not it had fired).
    fn cancel_timer(&self, id: TimerId);

    /// Cancels a delayed message; `true` if it had not been delivered.
    fn cancel_message_timer(&self, id: TimerId) -> bool;

    /// Delivers `package` to the process that has its target PID now,
    /// after `delay`.
    fn send_after(&self, delay: Duration, package: Package) -> Result<TimerId, SendError>;
}

/// Monitors a step sets and removes (`engine/monitors.rs`).
pub(crate) trait StepMonitors {
    /// Monitors `target` for the stepped process.
    fn monitor(&self, target: Pid) -> MonitorId;

    /// Removes a monitor of the stepped process.
    fn demonitor(&self, monitor: MonitorId);
}

/// Links of the stepped process (`engine/links.rs`).
pub(crate) trait StepLinks {
    /// Links the stepped process with `target`.
    fn link(&self, target: Pid);

    /// Removes the link between the stepped process and `target`.
    fn unlink(&self, target: Pid);

    /// Whether exit signals reach the stepped process as events.
    fn trap_exits(&self, trap: bool);
}

/// Names (`engine/names/`).
pub(crate) trait StepNames {
    /// Registers `name` for the stepped process.
    fn register_name(&self, name: &str) -> Result<(), NameError>;
}

/// Request-reply from a step (`engine/ask.rs`).
pub(crate) trait StepAsk {
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
}

/// What a step publishes of its process for introspection
/// (`engine/introspect.rs`).
pub(crate) trait StepIntrospect {
    /// Sets the stepped process's published figure `key` to `value`.
    fn publish(&self, key: &'static str, value: i64);
}
