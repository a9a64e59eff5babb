//! The process contract: what a step receives and what it writes.
//!
//! Everything a process author touches lives here: the [`Process`] trait
//! and its [`InitContext`], the [`Event`]s a step reads, the [`Output`] it
//! writes (commands to yield, messages to send, what to do next), the
//! commands' ids and tags, how a process ends ([`Outcome`], [`ExitError`])
//! and the errors of the engine's operations. Nothing here knows how the
//! engine is built: a step reaches the engine only through the narrow
//! `step_engine::StepEngine` interface.

pub(crate) mod accepts;
pub(crate) mod backlog;
pub(crate) mod command;
pub(crate) mod down;
pub(crate) mod error;
pub(crate) mod event;
pub(crate) mod group;
pub(crate) mod outcome;
pub(crate) mod output;
pub(crate) mod pending;
pub(crate) mod priority;
pub(crate) mod process;
pub(crate) mod reply;
pub(crate) mod step_engine;
pub(crate) mod timer_id;
pub(crate) mod typed_command;
pub(crate) mod upgrade;
pub(crate) mod urgent;

/// `payload` as an `A`, or the payload back. The untyped case, `A =
/// Payload`, is the payload itself, as it came: that is how every typed
/// handle (`Reply<A>`, `ReplyId<A>`, `Yielded<R>`) has its untyped form as
/// its `Payload` case.
pub(crate) fn downcast<A: std::any::Any>(payload: relay::Payload) -> Result<A, relay::Payload> {
    if std::any::TypeId::of::<A>() == std::any::TypeId::of::<relay::Payload>() {
        let mut slot = Some(payload);
        let any: &mut dyn std::any::Any = &mut slot;
        return Ok(any
            .downcast_mut::<Option<A>>()
            .and_then(Option::take)
            .expect("`A` is `Payload`"));
    }
    payload.downcast::<A>().map(|value| *value)
}
