//! The engine's timers: one wheel per worker, each behind its lock, with
//! its earliest deadline readable without it. What sets, cancels and fires
//! them on the engine's behalf is in `engine/timers.rs`.

use std::sync::atomic::Ordering::{Acquire, Relaxed, Release, SeqCst};
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;

use super::wheel::{Key, Wheel};
use super::{Action, TimerId, What};
use crate::sync::{AtomicBool, AtomicU32, AtomicU64, Mutex};

/// One tick of the wheels: a deadline is rounded up to it, so a timer
/// fires up to one tick after its instant by itself.
///
/// Why not 1 ms, as tokio's wheel: a process that re-arms its timer from
/// the step its last timer woke runs just after a tick boundary, so its
/// next deadline, rounded up, cost it nearly a whole tick every time (the
/// overload bench's probes were late by 1.00 ms at the median with
/// nothing ahead of them). At 100 µs that is at most 0.1 ms. The wheels
/// cost the same per timer, except that one set 6.4 ms to 410 ms ahead
/// moves down a level once (a list append) before it fires. A parked
/// worker does not wake per tick: see [`PARK_GRAIN`].
const TICK: Duration = Duration::from_micros(100);
/// How many ticks a parked worker's sleep is rounded up to (1 ms): it
/// sleeps until the first whole millisecond, counted from the engine's
/// start, at or after its earliest deadline, so that the timers due
/// within one millisecond share one wake-up. A busy worker looks at its
/// timers between steps and fires them at the tick; an idle one wakes as
/// often as it did with a 1 ms tick. Parked until each deadline's own
/// tick, a light load of timers cost up to four times the CPU, in
/// context switches (`benches/examples/timer_wakeups.rs`: 1 000
/// processes re-arming 5-50 ms timers, 100 and 410 ms of CPU a second).
const PARK_GRAIN: u64 = 10;
/// `next` when a wheel is empty.
const NONE: u64 = u64::MAX;
/// `Shard::turn`'s bits.
const WORKER: u32 = 1;
const WATCHER: u32 = 2;

/// A timer that fell due: its id, its action, and its deadline's tick
/// (turned into an instant by [`Timers::instant_of`] only when someone
/// records it).
pub(crate) type Due = (TimerId, Action, u64);

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
    /// before parking. Written only while holding `wheel`'s lock.
    next: AtomicU64,
    /// Who polls and fires this wheel now: its worker (`WORKER`), or the
    /// long-step watcher for a worker held in one step (`WATCHER`,
    /// `Timers::rescue` in `engine/timers.rs`); never both.
    turn: AtomicU32,
    /// Set while the worker holds due timers it took out of this wheel
    /// and has not fired yet: the watcher never fires later ones first.
    /// Written by the worker in its turn, read by the watcher in its.
    held_out: AtomicBool,
}

impl Timers {
    /// One wheel per worker, counting ticks from `epoch` (the engine's
    /// clock's now: a simulation's virtual clock starts where its wheels
    /// do, so the same run gives the same ticks).
    pub(crate) fn new(workers: usize, epoch: Instant) -> Self {
        Timers {
            epoch,
            shards: (0..workers.max(1))
                .map(|_| {
                    CachePadded::new(Shard {
                        wheel: Mutex::new(Wheel::new()),
                        next: AtomicU64::new(NONE),
                        turn: AtomicU32::new(0),
                        held_out: AtomicBool::new(false),
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

    /// The instant `tick` stands for (for a due timer, its deadline
    /// rounded up to the tick).
    pub(crate) fn instant_of(&self, tick: u64) -> Instant {
        let nanos = u64::try_from(TICK.as_nanos()).unwrap_or(u64::MAX);
        let since = Duration::from_nanos(tick.saturating_mul(nanos));
        self.epoch
            .checked_add(since)
            .unwrap_or_else(|| self.epoch + Duration::from_secs(100 * 365 * 24 * 3600))
    }

    /// When worker `worker`'s earliest timer falls due, if it has one
    /// (what a simulation moves its virtual clock to).
    pub(crate) fn due_at(&self, worker: usize) -> Option<Instant> {
        match self.shards[worker].next.load(SeqCst) {
            NONE => None,
            tick => Some(self.instant_of(tick)),
        }
    }

    /// When worker `worker`, parked, should wake for its earliest timer,
    /// if it has one: its deadline rounded up to [`PARK_GRAIN`].
    pub(crate) fn park_until(&self, worker: usize) -> Option<Instant> {
        match self.shards[worker].next.load(SeqCst) {
            NONE => None,
            tick => Some(self.instant_of(park_tick(tick))),
        }
    }

    /// The worker takes its turn at wheel `worker` to poll and fire it
    /// (see `Timers::rescue` in `engine/timers.rs`); `false` while the
    /// watcher has it. The turn is one word that each side sets its bit
    /// in with one read-modify-write, so of two takers the second always
    /// sees the first: never both at once. Two atomic operations when
    /// timers are due, none per step.
    pub(crate) fn worker_take_turn(&self, worker: usize) -> bool {
        let turn = &self.shards[worker].turn;
        if turn.fetch_or(WORKER, Acquire) & WATCHER == 0 {
            return true;
        }
        turn.fetch_and(!WORKER, Release);
        false
    }

    /// The worker ends its turn, noting whether it holds due timers taken
    /// out and not fired (the watcher then leaves the wheel alone).
    pub(crate) fn worker_end_turn(&self, worker: usize, holding: bool) {
        let shard = &self.shards[worker];
        if shard.held_out.load(Relaxed) != holding {
            shard.held_out.store(holding, Relaxed);
        }
        shard.turn.fetch_and(!WORKER, Release);
    }

    /// The watcher takes wheel `worker`'s turn, if the worker does not
    /// have it, holds no due timers taken out and not fired, and is still
    /// `in_the_step` the watcher saw. `true`: fire, then
    /// [`end_rescue`](Timers::end_rescue).
    pub(crate) fn begin_rescue(&self, worker: usize, in_the_step: impl FnOnce() -> bool) -> bool {
        let shard = &self.shards[worker];
        if shard.turn.fetch_or(WATCHER, Acquire) & WORKER == 0
            && !shard.held_out.load(Relaxed)
            && in_the_step()
        {
            return true;
        }
        shard.turn.fetch_and(!WATCHER, Release);
        false
    }

    /// The watcher gives wheel `worker` back to its worker.
    pub(crate) fn end_rescue(&self, worker: usize) {
        self.shards[worker].turn.fetch_and(!WATCHER, Release);
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
        let next = wheel.next_deadline().unwrap_or(deadline);
        // Every writer of `next` holds the wheel's lock, so a load and a
        // store (only when it moves earlier, which most inserts do not) do
        // what a `fetch_min` did, without its locked read-modify-write on
        // every insert.
        let old = shard.next.load(Relaxed);
        let earlier = next < old;
        if earlier {
            shard.next.store(next, SeqCst);
        }
        (id, earlier)
    }

    /// Takes wheel `shard`'s timers due at `now` into `due`, each with its
    /// id.
    pub(crate) fn poll(&self, shard_index: usize, now: Instant, due: &mut Vec<Due>) {
        let shard = &self.shards[shard_index];
        let mut wheel = shard.wheel.lock();
        wheel.poll(self.now_tick(now), &mut |key, deadline, action| {
            let id = TimerId {
                shard: shard_index as u32,
                key: key.to_bits(),
            };
            due.push((id, action, deadline));
        });
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
            // `next` is written under the wheel's lock only (see `insert`).
            let mut wheel = shard.wheel.lock();
            all.extend(wheel.drain());
            shard.next.store(NONE, SeqCst);
        }
        all
    }
}

impl crate::contract::pending::CancelTimer for Timers {
    fn cancel_timer(&self, id: TimerId) {
        // An ask's timeout carries no user value: its action drops here.
        drop(self.cancel(id));
    }
}

impl std::fmt::Debug for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shard")
            .field("next", &self.next.load(Relaxed))
            .finish_non_exhaustive()
    }
}

/// The tick a parked worker waiting for `tick` wakes at: the first whole
/// [`PARK_GRAIN`] at or after it.
fn park_tick(tick: u64) -> u64 {
    tick.div_ceil(PARK_GRAIN).saturating_mul(PARK_GRAIN)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_parked_worker_wakes_at_the_first_whole_grain_at_or_after_its_deadline() {
        assert_eq!(park_tick(0), 0);
        assert_eq!(park_tick(1), PARK_GRAIN);
        assert_eq!(park_tick(PARK_GRAIN), PARK_GRAIN);
        assert_eq!(park_tick(PARK_GRAIN + 3), 2 * PARK_GRAIN);
        assert_eq!(park_tick(NONE - 1), NONE);
    }

    #[test]
    fn the_deadline_keeps_its_tick_and_the_park_its_grain() {
        let epoch = Instant::now();
        let timers = Timers::new(1, epoch);
        assert_eq!(timers.due_at(0), None);
        assert_eq!(timers.park_until(0), None);
        // A deadline 1.25 ms after the start: due at its tick (1.3 ms), a
        // parked worker wakes at 2 ms.
        let tick = timers.tick_of(epoch + Duration::from_micros(1_250));
        assert_eq!(tick, 13);
        timers.shards[0].next.store(tick, SeqCst);
        assert_eq!(timers.due_at(0), Some(epoch + Duration::from_micros(1_300)));
        assert_eq!(timers.park_until(0), Some(epoch + Duration::from_millis(2)));
    }
}
