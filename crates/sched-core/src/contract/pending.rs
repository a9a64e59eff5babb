//! What a process still waits for (its timers, monitors and asks), and the
//! check that hands such an event to a step only if it still waits for it.
//!
//! # Protocol
//!
//! The lists live in the process's [`Extras`] (in its record's body) and only the process's owner
//! touches them. An id is listed when the step sets the timer, the monitor
//! or the ask, and leaves the list exactly once, by whichever comes first:
//!
//! - the step cancels it (`cancel_timer`, `demonitor`): its event is then
//!   never handed to a step, even if it had already fallen due and sits in
//!   the batch the step is reading;
//! - its event is handed to a step ([`Events::next`](crate::Events)): that
//!   is the one time the process sees it;
//! - the process ends: the pending ones are cancelled.
//!
//! The check is made when the event is handed out, not when the batch is
//! drained before the step: a reply and the timeout of the same ask, or
//! a message and a timer the step cancels on reading it, can both be in one
//! batch, and the step must not see the one it cancelled after the other.
//! An ask is settled by its first `Reply` (an answer or the timeout): its
//! timer is cancelled and a later `Reply` is dropped.
//!
//! Events dropped here are dropped through the panic guard: a late reply's
//! payload is the user's, and its `Drop` may panic.

use std::cell::{Cell, RefCell};

use relay::Pid;
use smallvec::SmallVec;

use crate::contract::down::MonitorId;
use crate::contract::event::Event;
use crate::contract::reply::AskId;
use crate::contract::timer_id::TimerId;
use crate::panic_guard::drop_user_value;

/// The parts of a process's body that most processes never use: what a
/// step left unread, and the lists of what it still waits for.
#[derive(Default)]
pub(crate) struct Extras {
    /// Events a step returned without reading: they are the first events
    /// of the next step (or dead letters if the process ends).
    pub(crate) unread: Vec<Event>,
    /// The timers this process set that have not reached it yet: cancelled
    /// when it ends. A timer event whose id is not here was cancelled and
    /// is dropped before the step sees it.
    ///
    /// The first two are kept in place: most processes that set timers
    /// wait on one or two at a time, and a list of their own was a second
    /// allocation per such process (64 bytes, with `Vec`'s first growth to
    /// four entries), a tenth of a waiting process's memory.
    pub(crate) timers: TimerList,
    /// The monitors this process set that have not fired for it yet:
    /// removed when it ends. A down event whose monitor is not here was
    /// demonitored and is dropped before the step sees it.
    pub(crate) monitoring: Vec<MonitorId>,
    /// The asks this process made that have not been answered, with their
    /// timeout timers. A reply whose ask is not here came after the
    /// timeout (or twice) and is dropped before the step sees it.
    pub(crate) asks: Vec<(AskId, TimerId)>,
}

/// A process's pending timers (see [`Extras::timers`]).
pub(crate) type TimerList = SmallVec<[TimerId; 2]>;

/// Allocates the extras on first use.
pub(crate) fn extras(extras: &mut Option<Box<Extras>>) -> &mut Extras {
    extras.get_or_insert_with(Box::default)
}

/// Gives back a list's spare room once its capacity is more than four
/// times what it holds (counting at least 16 entries), keeping twice that:
/// a process that once had a million pending timers, monitors or delayed
/// messages does not keep room for them, and a short list that shrinks and
/// grows is not reallocated each time (amortised O(1)).
pub(crate) fn give_back_spare<T>(list: &mut Vec<T>) {
    let keep = list.len().max(16);
    if list.capacity() > 4 * keep {
        list.shrink_to(2 * keep);
    }
}

/// [`give_back_spare`] for the timer list: past the same bound it keeps
/// exactly what it holds (in place again once that fits).
pub(crate) fn give_back_spare_timers(list: &mut TimerList) {
    let keep = list.len().max(16);
    if list.capacity() > 4 * keep {
        list.shrink_to_fit();
    }
}

/// Cancelling a timer the process no longer waits for (an ask's timeout,
/// once its reply came): what the lists need of the engine's timers.
pub(crate) trait CancelTimer {
    /// Cancels timer `id` if it is pending; a fired one is left alone.
    fn cancel_timer(&self, id: TimerId);
}

/// The process's lists during one step, shared by the step's
/// [`Events`](crate::Events) (which consume them) and its
/// [`Output`](crate::Output) (which adds and cancels).
pub(crate) struct StepLists<'a> {
    /// The record's extras, lent for the step.
    pub(crate) extras: &'a RefCell<Option<Box<Extras>>>,
    /// Whether the process has ever set a timer, monitor or ask: only then
    /// are its events checked.
    pub(crate) filters: &'a Cell<bool>,
    pub(crate) timers: &'a dyn CancelTimer,
    pub(crate) pid: Pid,
}

impl StepLists<'_> {
    /// Whether `event` may be handed to the step now; if it may and it is
    /// a timer, down or reply, it leaves its list (it is seen once).
    pub(crate) fn hand_out(&self, event: &Event) -> bool {
        if !self.filters.get() {
            return true;
        }
        take(&mut self.extras.borrow_mut(), event, self.timers)
    }
}

/// Whether the process still waits for `event` (a timer, down or reply
/// whose id is listed; every other event is always wanted); a wanted
/// timer, down or reply leaves its list.
pub(crate) fn take(
    extras: &mut Option<Box<Extras>>,
    event: &Event,
    timers: &dyn CancelTimer,
) -> bool {
    let Some(extras) = extras else {
        return !is_awaited_kind(event);
    };
    /// Removes `item` from a list of pending ids (a `Vec` or the timer
    /// list); whether it was there.
    macro_rules! remove {
        ($pending:expr, $item:expr) => {
            match $pending.iter().position(|p| p == $item) {
                Some(at) => {
                    $pending.swap_remove(at);
                    true
                }
                None => false,
            }
        };
    }
    match event {
        Event::Timer { id, .. } => remove!(extras.timers, id),
        Event::Down(down) => remove!(extras.monitoring, &down.monitor),
        Event::Reply { id, .. } => match extras.asks.iter().position(|(ask, _)| ask == id) {
            Some(at) => {
                // The first answer (or the timeout) settles the ask: its
                // timer goes (it may be the one that fired).
                let (_, timer) = extras.asks.swap_remove(at);
                remove!(extras.timers, &timer);
                timers.cancel_timer(timer);
                true
            }
            None => false,
        },
        _ => true,
    }
}

fn is_awaited_kind(event: &Event) -> bool {
    matches!(
        event,
        Event::Timer { .. } | Event::Down(_) | Event::Reply { .. }
    )
}

/// Drops (guarded) the events of `batch` the process no longer waits for,
/// keeping the order of the rest, which leave their lists (the process is
/// ending and they become dead letters).
pub(crate) fn drop_unwanted(
    batch: &mut Vec<Event>,
    extras: &mut Option<Box<Extras>>,
    timers: &dyn CancelTimer,
    pid: Pid,
) {
    let mut kept = 0;
    for at in 0..batch.len() {
        if take(extras, &batch[at], timers) {
            batch.swap(kept, at);
            kept += 1;
        }
    }
    for event in batch.drain(kept..) {
        drop_user_value(event, pid, "an event the process no longer waits for");
    }
}
