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
    ///
    /// `list_lo` and `list_hi` are the address of the process's
    /// pending-timer list when the timer was set, in 48 bits (0: unknown).
    /// Firing only prefetches it: the step that takes the timer's event
    /// checks that list, a separate allocation that a wait of a few
    /// milliseconds leaves out of cache. Never dereferenced, so a stale
    /// value costs nothing. Two fields rather than a pointer so that they
    /// fit beside the variant's tag and the entry does not grow (an offset
    /// from the record did not fit in 32 bits: records and lists come from
    /// different allocator arenas).
    Wake {
        tag: Tag,
        list_lo: u32,
        list_hi: u16,
    },
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

// A wake-up's hint fits beside its tag: every wheel entry stays 40 bytes.
const _: () = assert!(std::mem::size_of::<What>() <= 16);

/// Splits an address into [`What::Wake`]'s hint fields; 0 (no hint) for an
/// address beyond 48 bits.
pub(crate) fn list_hint(list: *const u8) -> (u32, u16) {
    let address = list as usize as u64;
    if address >> 48 != 0 {
        return (0, 0);
    }
    (address as u32, (address >> 32) as u16)
}

/// The address [`list_hint`] split, if any.
pub(crate) fn hinted_list(lo: u32, hi: u16) -> Option<*const u8> {
    let address = u64::from(hi) << 32 | u64::from(lo);
    (address != 0).then_some(std::ptr::without_provenance(address as usize))
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_list_hint_round_trips_in_48_bits_and_is_absent_beyond() {
        let list = Box::new(0u64);
        let address = std::ptr::from_ref(&*list).cast::<u8>();
        let (lo, hi) = list_hint(address);
        assert_eq!(
            hinted_list(lo, hi).map(|p| p as usize),
            Some(address as usize)
        );
        // No hint for a null address, nor for one past 48 bits.
        assert_eq!(hinted_list(0, 0), None);
        let far = std::ptr::without_provenance::<u8>(1 << 50);
        assert_eq!(list_hint(far), (0, 0));
    }
}
