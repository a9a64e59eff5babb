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

use rustc_hash::FxHashSet;
use std::cell::{Cell, RefCell};

use relay::Pid;

use crate::contract::down::MonitorId;
use crate::contract::event::Event;
use crate::contract::reply::AskId;
use crate::contract::timer_id::TimerId;
use crate::panic_guard::drop_user_value;

/// The parts of a process's body that most processes never use: the
/// timers it waits for, and (boxed apart, see [`Others`]) what a step left
/// unread and the monitors and asks it waits for.
///
/// The timers are in place because a process waiting on a timer is the
/// common case (a workflow between calls, a retry's back-off): such a
/// process allocates 24 bytes here (glibc's 32-byte chunk), where one box
/// of all four lists was 120 (a fifth of a waiting process's memory).
#[derive(Default)]
pub(crate) struct Extras {
    /// The timers this process set that have not reached it yet: cancelled
    /// when it ends. A timer event whose id is not here was cancelled and
    /// is dropped before the step sees it.
    ///
    /// See [`TimerList`] for its shape.
    pub(crate) timers: TimerList,
    /// Allocated the first time one of its lists is used.
    others: Option<Box<Others>>,
}

/// The rarer lists of a process's [`Extras`].
#[derive(Default)]
pub(crate) struct Others {
    /// Events a step returned without reading, in their lanes: they are
    /// the first events of the next step (or dead letters if the process
    /// ends).
    pub(crate) unread: super::backlog::Backlog,
    /// The monitors this process set that have not fired for it yet:
    /// removed when it ends. A down event whose monitor is not here was
    /// demonitored and is dropped before the step sees it.
    pub(crate) monitoring: Vec<MonitorId>,
    /// The asks this process made that have not been answered, with their
    /// timeout timers. A reply whose ask is not here came after the
    /// timeout (or twice) and is dropped before the step sees it.
    pub(crate) asks: Vec<(AskId, TimerId)>,
}

impl Extras {
    /// The rarer lists, allocated on first use.
    pub(crate) fn others(&mut self) -> &mut Others {
        self.others.get_or_insert_with(Box::default)
    }

    /// The rarer lists if they were ever used.
    pub(crate) fn existing_others(&mut self) -> Option<&mut Others> {
        self.others.as_deref_mut()
    }

    /// The rarer lists if they were ever used, to read.
    pub(crate) fn others_ref(&self) -> Option<&Others> {
        self.others.as_deref()
    }
}

/// A process's pending timers (see [`Extras::timers`]): every timer event
/// is checked against it, and `cancel_timer` removes from it, so both must
/// stay cheap however many timers a process has pending.
///
/// A process's pending timers: none, one kept in place, or a list of
/// their own (a short list up to [`TimerList::FEW`] entries, past that a
/// hash set).
///
/// Most processes that set timers wait on one at a time, and a list of
/// their own was a second allocation per such process (64 bytes, with
/// `Vec`'s first growth to four entries), a tenth of a waiting process's
/// memory. The one kept in place is stored as its two parts, so that the
/// enum's tag fits beside them and the whole is 16 bytes: the extras are
/// then 24, glibc's 32-byte chunk (one `TimerId` in place made them 40, a
/// 48-byte chunk, and two in place 56). A process with two pending keeps
/// its own list until it has none (not until it is down to one: a process
/// going between one and two would allocate each time). The set: with a
/// list alone, a process with `n` timers pending paid `O(n)` for each
/// cancel and each timer event, so `O(n²)` to see them all fire.
#[derive(Default)]
pub(crate) enum TimerList {
    #[default]
    None,
    One {
        shard: u32,
        key: u64,
    },
    Spilled(Box<Spill>),
}

/// The pending timers of a process with more than one (see [`TimerList`]).
pub(crate) enum Spill {
    Few(Vec<TimerId>),
    /// Fx hashing: the ids are the engine's own, not chosen by anyone who
    /// could aim at collisions, so SipHash's protection would buy nothing
    /// for its cost on every timer set, fired or cancelled.
    Many(FxHashSet<TimerId>),
}

impl TimerList {
    /// The most entries kept as a list: a search of 16 ids (two cache
    /// lines) costs about what hashing one does.
    pub(crate) const FEW: usize = 16;

    /// Adds a pending timer (ids are unique: the wheel hands each out once).
    pub(crate) fn push(&mut self, id: TimerId) {
        match self {
            TimerList::None => {
                *self = TimerList::One {
                    shard: id.shard,
                    key: id.key,
                }
            }
            TimerList::One { shard, key } => {
                let first = TimerId {
                    shard: *shard,
                    key: *key,
                };
                *self = TimerList::Spilled(Box::new(Spill::Few(vec![first, id])));
            }
            TimerList::Spilled(spill) => match &mut **spill {
                Spill::Few(list) if list.len() < Self::FEW => list.push(id),
                Spill::Few(list) => {
                    let mut set: FxHashSet<_> = list.drain(..).collect();
                    set.insert(id);
                    **spill = Spill::Many(set);
                }
                Spill::Many(set) => {
                    set.insert(id);
                }
            },
        }
    }

    /// Removes `id`; whether it was pending.
    pub(crate) fn remove(&mut self, id: &TimerId) -> bool {
        let removed = match self {
            TimerList::None => false,
            TimerList::One { shard, key } => {
                if *shard == id.shard && *key == id.key {
                    *self = TimerList::None;
                    return true;
                }
                false
            }
            TimerList::Spilled(spill) => match &mut **spill {
                Spill::Few(list) => match list.iter().position(|t| t == id) {
                    Some(at) => {
                        list.swap_remove(at);
                        true
                    }
                    None => false,
                },
                Spill::Many(set) => set.remove(id),
            },
        };
        if removed {
            self.give_back_spare();
        }
        removed
    }

    /// Whether no timer is pending.
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many timers are pending.
    pub(crate) fn len(&self) -> usize {
        match self {
            TimerList::None => 0,
            TimerList::One { .. } => 1,
            TimerList::Spilled(spill) => match &**spill {
                Spill::Few(list) => list.len(),
                Spill::Many(set) => set.len(),
            },
        }
    }

    /// The pending timers, in no particular order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = TimerId> + '_ {
        let one = match self {
            TimerList::One { shard, key } => Some(TimerId {
                shard: *shard,
                key: *key,
            }),
            _ => None,
        };
        let (few, many) = match self {
            TimerList::Spilled(spill) => match &**spill {
                Spill::Few(list) => (Some(list.iter()), None),
                Spill::Many(set) => (None, Some(set.iter())),
            },
            _ => (None, None),
        };
        one.into_iter().chain(
            few.into_iter()
                .flatten()
                .chain(many.into_iter().flatten())
                .copied(),
        )
    }

    /// Gives back spare room, as [`give_back_spare`] does for a `Vec`: a
    /// list of its own freed once empty, a set back to a short list once
    /// it holds a quarter of `FEW` (so a count hovering at the bound does
    /// not convert each time), a list or set shrunk once its room is more
    /// than four times what it holds.
    fn give_back_spare(&mut self) {
        let TimerList::Spilled(spill) = self else {
            return;
        };
        match &mut **spill {
            Spill::Few(list) if list.is_empty() => *self = TimerList::None,
            Spill::Few(list) => {
                if list.capacity() > 4 * list.len().max(Self::FEW) {
                    list.shrink_to_fit();
                }
            }
            Spill::Many(set) => {
                if set.len() <= Self::FEW / 4 {
                    **spill = Spill::Few(set.drain().collect());
                } else if set.capacity() > 4 * set.len().max(Self::FEW) {
                    set.shrink_to(2 * set.len());
                }
            }
        }
    }
}

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
    /// Unwanted events that must not be dropped silently (see
    /// [`must_not_vanish`]): the worker dead-letters them after the step.
    pub(crate) returned: &'a RefCell<Vec<Event>>,
}

/// Whether an event the process no longer waits for still carries
/// something nobody else has: a question handed back unread, after its
/// ask timed out. Such an event is a dead letter, not dropped.
pub(crate) fn must_not_vanish(event: &Event) -> bool {
    matches!(
        event,
        Event::Reply {
            question: Some(_),
            ..
        }
    )
}

impl StepLists<'_> {
    /// Whether `event` may be handed to the step now; if it may and it is
    /// a timer, down or reply, it leaves its list (it is seen once).
    #[inline]
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
    fn remove<T: PartialEq>(pending: &mut Vec<T>, item: &T) -> bool {
        match pending.iter().position(|p| p == item) {
            Some(at) => {
                pending.swap_remove(at);
                true
            }
            None => false,
        }
    }
    match event {
        Event::Timer { id, .. } => extras.timers.remove(id),
        Event::Down(down) => extras
            .existing_others()
            .is_some_and(|others| remove(&mut others.monitoring, &down.monitor)),
        Event::Reply { id, .. } => match extras
            .existing_others()
            .and_then(|others| Some((others.asks.iter().position(|(ask, _)| ask == id)?, others)))
        {
            Some((at, others)) => {
                // The first answer (or the timeout) settles the ask: its
                // timer goes (it may be the one that fired).
                let (_, timer) = others.asks.swap_remove(at);
                extras.timers.remove(&timer);
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
        if take(extras, &batch[at], timers) || must_not_vanish(&batch[at]) {
            batch.swap(kept, at);
            kept += 1;
        }
    }
    for event in batch.drain(kept..) {
        drop_user_value(event, pid, "an event the process no longer waits for");
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn id(n: u64) -> TimerId {
        TimerId { shard: 0, key: n }
    }

    fn sorted(list: &TimerList) -> Vec<u64> {
        let mut keys: Vec<u64> = list.iter().map(|t| t.key).collect();
        keys.sort_unstable();
        keys
    }

    #[test]
    fn the_timer_list_is_a_list_then_a_set_then_a_list_again() {
        let mut list = TimerList::default();
        for n in 0..TimerList::FEW as u64 {
            list.push(id(n));
        }
        assert!(is_few(&list));
        list.push(id(100));
        assert!(is_many(&list), "past FEW: a set");
        assert_eq!(list.len(), TimerList::FEW + 1);
        let mut expected: Vec<u64> = (0..TimerList::FEW as u64).collect();
        expected.push(100);
        assert_eq!(sorted(&list), expected);
        assert!(list.remove(&id(100)));
        assert!(!list.remove(&id(100)), "removed once");
        assert!(!list.remove(&id(999)), "never there");
        // Down to a quarter of FEW: a short list again, with what is left.
        for n in 0..(TimerList::FEW - TimerList::FEW / 4) as u64 {
            assert!(list.remove(&id(n)));
        }
        assert!(is_few(&list));
        let left: Vec<u64> =
            ((TimerList::FEW - TimerList::FEW / 4) as u64..TimerList::FEW as u64).collect();
        assert_eq!(sorted(&list), left);
        for n in left {
            assert!(list.remove(&id(n)));
        }
        assert!(list.is_empty());
        assert_eq!(list.iter().count(), 0);
    }

    #[test]
    fn a_large_timer_list_gives_its_room_back() {
        let mut list = TimerList::default();
        for n in 0..10_000 {
            list.push(id(n));
        }
        for n in 0..9_900 {
            assert!(list.remove(&id(n)));
        }
        match &list {
            TimerList::Spilled(spill) => match &**spill {
                Spill::Many(set) => assert!(set.capacity() <= 4 * 100, "{}", set.capacity()),
                Spill::Few(_) => panic!("100 left: still a set"),
            },
            _ => panic!("100 left: spilled"),
        }
        assert_eq!(sorted(&list), (9_900..10_000).collect::<Vec<_>>());
    }

    #[test]
    fn one_pending_timer_is_kept_in_place_and_a_spilled_list_is_freed_once_empty() {
        // A timer-waiting process's extras stay in glibc's 32-byte chunk.
        assert_eq!(std::mem::size_of::<TimerList>(), 16);
        assert!(std::mem::size_of::<Extras>() <= 24);
        let mut list = TimerList::default();
        list.push(id(1));
        assert!(matches!(list, TimerList::One { .. }));
        assert_eq!(list.iter().collect::<Vec<_>>(), [id(1)]);
        list.push(id(2));
        assert!(is_few(&list));
        // Down to one: the list keeps its own room (no allocation per swing).
        assert!(list.remove(&id(1)));
        assert!(is_few(&list));
        list.push(id(3));
        assert!(list.remove(&id(2)));
        assert!(!list.remove(&id(2)));
        assert!(list.remove(&id(3)));
        assert!(matches!(list, TimerList::None), "freed once empty");
        // In place again, and only the right id removes it.
        list.push(id(4));
        assert!(!list.remove(&TimerId { shard: 1, key: 4 }));
        assert!(list.remove(&id(4)));
        assert!(list.is_empty());
    }

    fn is_few(list: &TimerList) -> bool {
        matches!(list, TimerList::Spilled(spill) if matches!(**spill, Spill::Few(_)))
    }

    fn is_many(list: &TimerList) -> bool {
        matches!(list, TimerList::Spilled(spill) if matches!(**spill, Spill::Many(_)))
    }
}
