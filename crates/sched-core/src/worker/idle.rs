//! The worker's idle spells: what a worker that found nothing to run does
//! before it looks again. It spins a few rounds, yields its thread a few
//! more, lingers (keeps looking, yielding between looks) for as long as its
//! recent spells suggest work comes back soon, then parks until a producer
//! wakes it. A spell holds the searching token (at most a few workers
//! search at once, so a producer wakes a parked one only when none does)
//! until it lingers or parks.

use std::sync::atomic::Ordering::{Acquire, SeqCst};

use crate::engine::stats::bump;
use crate::runqueue::sleep::Sleepers;
use crate::sync::{fence, spin_hint, thread};

use super::{Worker, HIDDEN_RECHECK, NEXT_SLOT_PATIENCE};

/// Idle rounds spent spinning, then yielding, before parking. Under loom a
/// worker parks at its first idle round: spinning adds nothing a model can
/// check (every spin is a yield there) but multiplies the paths to explore.
const SPIN_ROUNDS: u32 = if cfg!(loom) { 0 } else { 4 };
const YIELD_ROUNDS: u32 = if cfg!(loom) { 1 } else { 16 };

/// One worker's idle state, kept across its loop's rounds.
pub(super) struct Idle {
    /// Rounds since the spell began (0: not idle).
    rounds: u32,
    /// Whether this worker holds a searching token.
    pub(super) searching: bool,
    /// How long this worker keeps looking before it parks, learnt from
    /// its recent idle spells (see `linger_after`).
    linger: std::time::Duration,
    /// When the spell began (with lingering allowed at all).
    since: Option<std::time::Instant>,
    /// The most this spell may linger, decided as it begins (see
    /// `linger_cap`), and whether it has.
    cap: std::time::Duration,
    lingered: bool,
}

impl Idle {
    pub(super) fn new() -> Idle {
        Idle {
            rounds: 0,
            searching: false,
            linger: std::time::Duration::ZERO,
            since: None,
            cap: std::time::Duration::ZERO,
            lingered: false,
        }
    }
}

impl Worker {
    /// The loop found work: a spell that searched hands the token on (and
    /// wakes another searcher if it was the last).
    #[inline(always)] // On the step path: see `next_work`.
    pub(super) fn found_work(&mut self, idle: &mut Idle) {
        if idle.searching {
            idle.searching = false;
            if self.shared.sleepers.stop_searching() {
                self.shared.sleepers.notify_one();
            }
        }
        idle.rounds = 0;
    }

    /// One round with nothing to run: spin, yield, linger or park, by how
    /// long the spell has lasted.
    pub(super) fn idle_round(&mut self, idle: &mut Idle) {
        if idle.rounds == 0 {
            self.begin_spell(idle);
        }
        if !idle.searching && idle.rounds < YIELD_ROUNDS {
            if self.shared.sleepers.try_start_searching() {
                idle.searching = true;
            } else {
                // Enough workers search already: park at once.
                idle.rounds = YIELD_ROUNDS;
                idle.cap = std::time::Duration::ZERO;
            }
        }
        idle.rounds += 1;
        if idle.rounds < SPIN_ROUNDS {
            for _ in 0..(1 << idle.rounds) {
                spin_hint();
            }
        } else if idle.rounds < YIELD_ROUNDS {
            thread::yield_now();
        } else if !idle.linger.is_zero()
            && idle
                .since
                .is_some_and(|since| since.elapsed() < idle.linger.min(idle.cap))
        {
            self.linger(idle);
        } else {
            self.park(idle);
        }
    }

    /// A new idle spell: how long it may linger.
    fn begin_spell(&self, idle: &mut Idle) {
        // Read, not cleared: a spell that a spurious wake-up ends still
        // awaits the same answer.
        let expects_answer = self.local.expects_answer.get();
        idle.lingered = false;
        idle.cap = std::time::Duration::ZERO;
        let max = self.shared.linger;
        if !max.is_zero() {
            idle.since = Some(std::time::Instant::now());
            let others_busy = self.shared.others_busy(self.local.index);
            idle.cap = linger_cap(expects_answer, others_busy, max);
        }
    }

    /// Lingers one round: looks again after yielding the thread, no longer
    /// searching.
    pub(super) fn linger(&self, idle: &mut Idle) {
        if !idle.lingered {
            idle.lingered = true;
            bump(&self.counters().lingers, 1);
        }
        // Lingering, but no longer searching: producers wake a parked
        // worker as if this one slept. A lingering thread that the OS has
        // put behind a busy one (it yields) must not hold work back: with
        // the search token kept, a burst left messages waiting a time slice
        // (26 ms at p99). What producers queued while it searched without
        // waking anyone, it finds itself at its next look.
        if idle.searching {
            idle.searching = false;
            leave_the_searchers_to_linger(&self.shared.sleepers);
        }
        thread::yield_now();
    }

    /// Parks until a producer, a due timer or the watcher's recheck wakes
    /// the worker; the spell ends, and what it lasted sets the next
    /// spell's linger.
    pub(super) fn park(&mut self, idle: &mut Idle) {
        let shared = &*self.shared;
        let me = self.local.index;
        // Not searching any more: from here on producers must wake us
        // (`park` re-checks for work after announcing itself).
        if idle.searching {
            idle.searching = false;
            shared.sleepers.stop_searching();
        }
        tracing::trace!("park");
        // Work waiting in another worker's `next` slot wakes nobody (its
        // owner runs it after its step). If we saw some, and we are the one
        // parked worker that watches, look again once it has waited long
        // enough to be taken.
        let recheck = if self.hidden.iter().any(Option::is_some) {
            NEXT_SLOT_PATIENCE
        } else {
            HIDDEN_RECHECK
        };
        let slept = shared.sleepers.park(
            me,
            || shared.has_work() || shared.control.exit.load(Acquire),
            || shared.timers.park_until(me),
            recheck,
        );
        // Counted when the thread slept: a worker that the OS held off its
        // CPU past its linger finds the work at the park's own look and
        // never sleeps.
        if slept {
            bump(&self.counters().parks, 1);
        }
        // The long-step watcher dozes while every worker is parked: wake
        // it, with the coarse clock brought up to date for the steps this
        // worker is about to stamp.
        if shared.sleepers.ring_dozer() {
            shared.introspect.tick();
        }
        if let Some(since) = idle.since.take() {
            // Learnt against this spell's cap: a spell longer than the cap
            // ends lingering (for unbidden work, a trickle slower than a
            // park costs no linger at all).
            idle.linger = linger_after(since.elapsed(), idle.cap);
        }
        idle.rounds = 0;
    }
}

/// A searching worker starts to linger: it leaves `searching`, then
/// fences, and only then looks again (its next round of `run_loop`). The
/// fence pairs with a producer's fence before it reads `searching` (see
/// `runqueue/PROTOCOL.md`, lingering): either the producer sees this worker
/// gone and wakes a parked one, or this worker's next look sees the work.
/// Without it the look could miss work whose producer skipped its wakeup
/// because it still counted this worker, which then found the work only
/// at its park, up to a whole linger later. Apart from the loop so that the
/// loom model `a_lingering_look_sees_work_whose_producer_counted_it` runs
/// this very code; inlined, so the loop is what it was.
#[inline(always)]
pub(crate) fn leave_the_searchers_to_linger(sleepers: &Sleepers) {
    sleepers.stop_searching();
    fence(SeqCst);
}

/// The most an idle spell that begins now may linger before the worker
/// parks (for as long as `linger_after` allows within it). Lingering costs
/// CPU for as long as it lasts; parking costs a system call on the waker's
/// side and a wake-up on this one. So a worker lingers up to `max` (the
/// builder's `idle_linger`) only when work is likely to come back soon:
/// when a step here started something whose answer comes from outside the
/// workers (`expects_answer`: a send or an ask to another node, a command),
/// or when another worker is running a step and may hand work over (a
/// message, a steal). Otherwise work can only come unbidden from outside
/// (messages or spawns from other threads), and the worker lingers at most
/// [`UNBIDDEN_LINGER`], about what a park and its wake-up cost: a producer
/// faster than that finds it awake, a trickle slower than that parks it at
/// once in every gap. Lingering up to `max` for such a trickle spent 4 to
/// 7 times tokio's CPU per message (`trickle` bench, gaps of 100 to 250
/// µs). (Counting merely awake workers as a reason was not enough: two
/// idle workers, each lingering because the other was awake, still spent
/// 1.6 to 2.2 times tokio's.)
fn linger_cap(
    expects_answer: bool,
    others_busy: bool,
    max: std::time::Duration,
) -> std::time::Duration {
    if expects_answer || others_busy {
        max
    } else {
        max.min(UNBIDDEN_LINGER)
    }
}

/// The most an idle worker lingers for work that nothing on it awaits
/// (see `linger_cap`): about the CPU a park and its wake-up cost on the
/// machines measured (a trickle that parks the worker in every gap spends
/// 30 to 45 µs of CPU per message, the step and the poster included).
const UNBIDDEN_LINGER: std::time::Duration = std::time::Duration::from_micros(25);

/// How long a worker lingers (keeps looking, yielding its thread between
/// looks) before it parks next, after an idle spell of `waited` that ended
/// in a park. Waking a parked thread costs a system call on the waker's
/// side and, on the sleeper's, the time for the kernel (or a hypervisor) to
/// bring its CPU back; when work comes back within a few hundred
/// microseconds, as answers over a network do, that cost is a large part
/// of the wait. So a worker whose spells are short lingers a little longer
/// than the last one (and is then found by the work, unparked); one whose
/// spell outlasted `max` goes back to parking at once, so that an idle
/// engine does not poll.
fn linger_after(waited: std::time::Duration, max: std::time::Duration) -> std::time::Duration {
    if waited > max {
        std::time::Duration::ZERO
    } else {
        (waited + waited / 2).min(max)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::{linger_after, linger_cap, UNBIDDEN_LINGER};
    use std::time::Duration;

    const MAX: Duration = Duration::from_micros(300);

    #[test]
    fn only_awaited_work_or_a_busy_neighbour_earns_the_full_linger() {
        assert_eq!(linger_cap(true, false, MAX), MAX);
        assert_eq!(linger_cap(false, true, MAX), MAX);
        assert_eq!(linger_cap(false, false, MAX), UNBIDDEN_LINGER);
        // Never above the builder's limit, and none when it is zero.
        let low = UNBIDDEN_LINGER / 2;
        assert_eq!(linger_cap(false, false, low), low);
        assert_eq!(linger_cap(true, true, Duration::ZERO), Duration::ZERO);
        // A trickle slower than the unbidden cap stops lingering at the
        // first park; a producer faster than it keeps the worker awake.
        let slow = UNBIDDEN_LINGER * 4;
        assert_eq!(
            linger_after(slow, linger_cap(false, false, MAX)),
            Duration::ZERO
        );
        let fast = UNBIDDEN_LINGER / 4;
        assert!(linger_after(fast, linger_cap(false, false, MAX)) > fast);
    }

    #[test]
    fn a_short_spell_lingers_half_again_as_long_up_to_the_limit() {
        assert_eq!(
            linger_after(Duration::from_micros(100), MAX),
            Duration::from_micros(150)
        );
        assert_eq!(linger_after(Duration::from_micros(250), MAX), MAX);
        assert_eq!(linger_after(MAX, MAX), MAX);
    }

    #[test]
    fn a_spell_past_the_limit_parks_at_once_next_time() {
        assert_eq!(
            linger_after(MAX + Duration::from_nanos(1), MAX),
            Duration::ZERO
        );
        assert_eq!(linger_after(Duration::from_secs(5), MAX), Duration::ZERO);
        assert_eq!(
            linger_after(Duration::from_micros(1), Duration::ZERO),
            Duration::ZERO
        );
    }
}
