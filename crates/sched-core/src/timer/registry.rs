//! The engine's timers: one wheel per worker, what sets and cancels them,
//! and firing the due ones.

use std::cell::Cell;
use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;

use super::wheel::{Key, Wheel};
use super::{Action, TimerId, What};
use crate::contract::event::Event;
use crate::engine::shared::Shared;
use crate::panic_guard::drop_user_value;
use crate::sync::{fence, AtomicU64, Mutex};
use crate::worker::local;

/// One tick of the wheels.
const TICK: Duration = Duration::from_millis(1);
/// `next` when a wheel is empty.
const NONE: u64 = u64::MAX;

/// Every worker's wheel, and the instant tick 0 stands for.
#[derive(Debug)]
pub(crate) struct Timers {
    epoch: Instant,
    shards: Box<[CachePadded<Shard>]>,
}

struct Shard {
    wheel: Mutex<Wheel<Action>>,
    /// A lower bound of the wheel's earliest deadline (`NONE` if empty),
    /// readable without the lock: the worker checks it between steps, and
    /// before parking.
    next: AtomicU64,
}

thread_local! {
    /// Where this (non-worker) thread puts its next timer: successive
    /// timers from one thread spread over the wheels without any shared
    /// counter.
    static ROUND_ROBIN: Cell<usize> = const { Cell::new(0) };
}

impl Timers {
    pub(crate) fn new(workers: usize) -> Self {
        Timers {
            epoch: Instant::now(),
            shards: (0..workers.max(1))
                .map(|_| {
                    CachePadded::new(Shard {
                        wheel: Mutex::new(Wheel::new()),
                        next: AtomicU64::new(NONE),
                    })
                })
                .collect(),
        }
    }

    /// The tick an instant falls due at: rounded up, so a timer never
    /// fires before its instant.
    fn tick_of(&self, at: Instant) -> u64 {
        let since = at.saturating_duration_since(self.epoch);
        let ticks = since.as_nanos().div_ceil(TICK.as_nanos());
        u64::try_from(ticks).unwrap_or(NONE - 1)
    }

    /// The current tick, rounded down.
    fn now_tick(&self, now: Instant) -> u64 {
        let since = now.saturating_duration_since(self.epoch);
        u64::try_from(since.as_nanos() / TICK.as_nanos()).unwrap_or(NONE - 1)
    }

    fn instant_of(&self, tick: u64) -> Instant {
        let nanos = u64::try_from(TICK.as_nanos()).unwrap_or(u64::MAX);
        let since = Duration::from_nanos(tick.saturating_mul(nanos));
        self.epoch
            .checked_add(since)
            .unwrap_or_else(|| self.epoch + Duration::from_secs(100 * 365 * 24 * 3600))
    }

    /// When worker `worker` should wake for its earliest timer, if any.
    pub(crate) fn due_at(&self, worker: usize) -> Option<Instant> {
        match self.shards[worker].next.load(SeqCst) {
            NONE => None,
            tick => Some(self.instant_of(tick)),
        }
    }

    /// Whether worker `worker` has a timer due at `now`: one load unless it
    /// has pending timers.
    pub(crate) fn any_due(&self, worker: usize, now: impl FnOnce() -> Instant) -> bool {
        match self.shards[worker].next.load(Relaxed) {
            NONE => false,
            tick => self.now_tick(now()) >= tick,
        }
    }

    /// Puts `action` in wheel `shard`, due at `at`. Returns its id, and
    /// whether it is now that wheel's earliest timer (its worker may have
    /// to be woken).
    pub(crate) fn insert(
        &self,
        shard_index: usize,
        at: Instant,
        action: Action,
    ) -> (TimerId, bool) {
        let shard = &self.shards[shard_index];
        let deadline = self.tick_of(at);
        let mut wheel = shard.wheel.lock();
        let key = wheel.insert(deadline, action);
        let id = TimerId {
            shard: shard_index as u32,
            key: key.to_bits(),
        };
        // The id travels with the event, for the process to tell its
        // timers apart and for cancelled ones to be filtered out; it is
        // known only now, and set before the lock lets the owner fire it.
        if let Some(action) = wheel.get_mut(key) {
            if let What::Wake {
                id: ref mut slot, ..
            } = action.what
            {
                *slot = Some(id);
            }
        }
        let next = wheel.next_deadline().unwrap_or(deadline);
        let earlier = shard.next.fetch_min(next, SeqCst) > next;
        (id, earlier)
    }

    /// Takes wheel `shard`'s timers due at `now` into `due`.
    pub(crate) fn poll(&self, shard_index: usize, now: Instant, due: &mut Vec<Action>) {
        let shard = &self.shards[shard_index];
        let mut wheel = shard.wheel.lock();
        wheel.poll(self.now_tick(now), due);
        shard
            .next
            .store(wheel.next_deadline().unwrap_or(NONE), SeqCst);
    }

    /// Removes a pending timer. Returns its action, or `None` if it has
    /// fired or was cancelled already.
    pub(crate) fn cancel(&self, id: TimerId) -> Option<Action> {
        let shard = self.shards.get(id.shard as usize)?;
        // The next deadline stays as it was: a lower bound that is early
        // costs one spurious wakeup, never a missed timer.
        let removed = shard.wheel.lock().remove(Key::from_bits(id.key));
        removed
    }

    /// Removes a pending delayed message (not a process's wake-up or ask
    /// timeout, which only their process cancels). `None` if `id` names no
    /// pending delayed message.
    pub(crate) fn cancel_message(&self, id: TimerId) -> Option<Action> {
        let shard = self.shards.get(id.shard as usize)?;
        let mut wheel = shard.wheel.lock();
        let key = Key::from_bits(id.key);
        if !matches!(
            wheel.get_mut(key),
            Some(Action {
                what: What::Message(_),
                ..
            })
        ) {
            return None;
        }
        wheel.remove(key)
    }

    /// The wheel every delayed message to `target` goes into, whoever
    /// sends it from wherever: one wheel fires equal deadlines in insertion
    /// order, so messages from one sender to one target with
    /// non-decreasing deadlines arrive in the order they were sent.
    pub(crate) fn shard_of_target(&self, target: relay::Pid) -> usize {
        (target.id() % self.shards.len() as u64) as usize
    }

    /// Whether `id` is still pending.
    pub(crate) fn is_pending(&self, id: TimerId) -> bool {
        self.shards
            .get(id.shard as usize)
            .is_some_and(|s| s.wheel.lock().get_mut(Key::from_bits(id.key)).is_some())
    }

    /// Timers pending in all the wheels.
    pub(crate) fn pending(&self) -> usize {
        self.shards.iter().map(|s| s.wheel.lock().len()).sum()
    }

    /// Removes every pending timer (shutdown).
    pub(crate) fn clear(&self) -> Vec<Action> {
        let mut all = Vec::new();
        for shard in self.shards.iter() {
            all.extend(shard.wheel.lock().drain());
            shard.next.store(NONE, SeqCst);
        }
        all
    }
}

impl Shared {
    /// Sets a timer due at `at`, in this worker's wheel when called on one
    /// of the engine's workers, in another's otherwise (waking it if this
    /// timer is now its earliest).
    pub(crate) fn set_timer(&self, at: Instant, action: Action) -> TimerId {
        self.set_timer_on(None, at, action)
    }

    /// Sets a timer due at `at` in wheel `shard` (or, for `None`, as
    /// [`set_timer`](Shared::set_timer) chooses), waking that wheel's
    /// worker if it is not the calling one and this timer is now its
    /// earliest.
    pub(crate) fn set_timer_on(
        &self,
        shard: Option<usize>,
        at: Instant,
        action: Action,
    ) -> TimerId {
        let timers = &self.timers;
        let own = local::with_local(self, |local| local.index);
        let shard_index = shard.or(own).unwrap_or_else(|| {
            ROUND_ROBIN.with(|next| {
                let i = next.get();
                next.set(i.wrapping_add(1));
                i % timers.shards.len()
            })
        });
        let (id, earlier) = timers.insert(shard_index, at, action);
        if earlier && own != Some(shard_index) && shard_index < self.remotes.len() {
            // Pairs with the fence in `Sleepers::park`: either that worker
            // reads the new `next` after announcing its sleep, or we find it
            // on the idle list here and wake it.
            fence(SeqCst);
            self.sleepers.wake(shard_index);
        }
        id
    }

    /// Fires worker `worker`'s due timers: each delivers its event or
    /// message to its record (a process that has ended makes it a dead
    /// letter).
    pub(crate) fn fire_timers(&self, worker: usize, due: &mut Vec<Action>) {
        self.timers.poll(worker, Instant::now(), due);
        for action in due.drain(..) {
            self.fire(action);
        }
        // A burst of due timers does not keep its buffer.
        if due.capacity() > 1024 {
            due.shrink_to(64);
        }
    }

    fn fire(&self, action: Action) {
        let Action { record, what } = action;
        let undelivered = match what {
            What::Wake { tag, id } => {
                let id = id.expect("set at insertion, under the wheel's lock");
                match record.deliver(Event::Timer { id, tag }) {
                    Ok(wake) => {
                        self.after_wake(&record, wake);
                        None
                    }
                    Err(event) => Some(event),
                }
            }
            What::AskTimeout(id) => {
                let event = Event::Reply {
                    id,
                    result: Err(crate::contract::reply::AskError::Timeout),
                };
                match record.deliver(event) {
                    Ok(wake) => {
                        self.after_wake(&record, wake);
                        None
                    }
                    // The asker has ended: nobody is waiting.
                    Err(_) => None,
                }
            }
            What::Message(package) => {
                self.delayed_gone(&record);
                self.deliver_message(&record, package)
                    .err()
                    .map(|error| Event::Message(error.into_package()))
            }
        };
        if let Some(event) = undelivered {
            self.dead_letters(record.pid, vec![event]);
        }
    }

    /// Cancels a timer; `true` if it was pending (it never fires).
    pub(crate) fn cancel_timer(&self, id: TimerId) -> bool {
        match self.timers.cancel(id) {
            Some(action) => {
                if matches!(action.what, What::Message(_)) {
                    self.delayed_gone(&action.record);
                }
                self.drop_timers(vec![action]);
                true
            }
            None => false,
        }
    }

    /// Cancels a delayed message (see [`Timers::cancel_message`]); `true`
    /// if it was pending (it is never delivered).
    pub(crate) fn cancel_message_timer(&self, id: TimerId) -> bool {
        match self.timers.cancel_message(id) {
            Some(action) => {
                self.delayed_gone(&action.record);
                self.drop_timers(vec![action]);
                true
            }
            None => false,
        }
    }

    /// A delayed message to `target` has fired or been cancelled: its
    /// entry in the target's list may be pruned.
    fn delayed_gone(&self, target: &crate::record::Record) {
        let timers = &self.timers;
        target
            .relations
            .with_existing(|related| related.delayed_gone(|id| timers.is_pending(id)));
    }

    /// Delayed messages to an ended process that were still pending: each
    /// is a dead letter (counted, and passed to the dead-letter hook).
    pub(crate) fn delayed_to_ended(&self, ended: relay::Pid, ids: Vec<TimerId>) {
        let mut dead = Vec::new();
        for id in ids {
            if let Some(Action {
                what: What::Message(package),
                record,
            }) = self.timers.cancel_message(id)
            {
                // The record is the ended one; its last counts go here.
                drop(record);
                dead.push(Event::Message(package));
            }
        }
        if !dead.is_empty() {
            self.dead_letters(ended, dead);
        }
    }

    /// Drops the actions of cancelled timers; a message's payload is the
    /// user's and its `Drop` may panic.
    pub(crate) fn drop_timers(&self, actions: Vec<Action>) {
        for action in actions {
            let pid = action.record.pid;
            drop_user_value(action, pid, "a cancelled timer");
        }
    }
}

impl std::fmt::Debug for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shard")
            .field("next", &self.next.load(Relaxed))
            .finish_non_exhaustive()
    }
}
