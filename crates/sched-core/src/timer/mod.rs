//! Timers owned by the engine: one timing wheel per worker.
//!
//! A timer set from a step (a wake-up, an ask's timeout) goes into the
//! wheel of the worker running the step, so the common case touches only
//! that worker's lock (uncontended) and its own cache lines. A delayed
//! message goes into the wheel its target's PID selects, whoever sends it
//! from wherever: one wheel fires equal deadlines in insertion order, which
//! is what keeps delayed messages from one sender to one target in order.
//! Any other timer set from outside a worker goes into a wheel chosen round
//! robin per thread. If a timer is now its wheel's earliest and the wheel
//! is another worker's, that worker is woken in case it parks past it.
//!
//! A delayed message belongs to its message, not to its sender: its target
//! lists it (`record/relations.rs`) and cancels it, as a dead letter, if it
//! ends first. Each worker fires
//! its own wheel's due timers between steps, and parks no longer than its
//! earliest deadline; with no timer pending it parks without a timeout, so
//! an idle engine does not poll.
//!
//! A timer holds the record it will deliver to, never a PID to look up:
//! a timer can therefore not reach a later process that took the same PID.
//! The timers a process sets are listed in its record and cancelled when it
//! ends, which frees them at once.

pub(crate) mod registry;
pub(crate) mod wheel;

use relay::Package;

use crate::contract::command::Tag;
use crate::contract::timer_id::TimerId;
use crate::record::RecordRef;

/// What a due timer does.
pub(crate) struct Action {
    /// The record it delivers to (the owner itself for a wake-up).
    pub(crate) record: RecordRef,
    pub(crate) what: What,
}

pub(crate) enum What {
    /// Wake the process with [`Event::Timer`](crate::Event::Timer). Its id
    /// is not kept here: the wheel hands each due timer out with its key,
    /// which makes the id (24 bytes less in every wheel entry).
    Wake { tag: Tag },
    /// Deliver a message. Boxed: a package is 56 bytes, and in place it
    /// made every wheel entry (most of them wake-ups) 32 bytes larger.
    Message(Box<Package>),
    /// Tell an asking process its ask timed out.
    AskTimeout(crate::contract::reply::AskId),
    /// Sweep the sends parked for a name that are past their deadline
    /// (`engine/names/`); the record is the sender's, and is not told.
    /// Boxed: a name is a wide pointer, and every entry would grow.
    NameSweep(Box<std::sync::Arc<str>>),
    /// Complete a yield of the record's process with this tag and data
    /// (`Completer::complete_after`). Boxed, as a message is.
    Complete(Box<(crate::contract::command::Tag, relay::Payload)>),
}
