//! The engine's clock: what its timers, asks' timeouts, delayed messages
//! and delayed completions measure time with.
//!
//! A running engine reads the machine's monotonic clock. A simulation
//! (`runtime/simulation/`) gives the engine a virtual clock instead: it
//! stands still while processes step, and moves only when the simulation
//! moves it (to the next deadline, once nothing can run). A one-hour
//! timeout then fires as soon as nothing else is left to do, and the
//! same run gives the same instants every time.
//!
//! Only the simulation's one thread moves a virtual clock, and every
//! reader of it runs on that thread too: the atomic is there because the
//! engine's state is shared (`Sync`), not for ordering, so its accesses
//! are relaxed.

use std::time::{Duration, Instant};

use crate::sync::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;

/// The engine's clock (see the module's documentation).
#[derive(Debug, Default)]
pub(crate) struct Clock {
    /// Shared by the nodes of one simulation: they live in one time.
    virtual_time: Option<std::sync::Arc<VirtualTime>>,
}

/// A clock that moves only when told to.
#[derive(Debug)]
struct VirtualTime {
    /// The instant virtual time started at (a real instant, so that
    /// virtual instants are `Instant`s like any other).
    origin: Instant,
    /// Nanoseconds since `origin`.
    elapsed: AtomicU64,
}

impl Clock {
    /// The machine's monotonic clock.
    pub(crate) fn real() -> Clock {
        Clock::default()
    }

    /// A virtual clock that starts at the current instant and stands still
    /// until [`advance_to`](Clock::advance_to) moves it.
    pub(crate) fn virtual_from_now() -> Clock {
        Clock {
            virtual_time: Some(std::sync::Arc::new(VirtualTime {
                origin: Instant::now(),
                elapsed: AtomicU64::new(0),
            })),
        }
    }

    /// The same clock, for another engine (another node of a simulation):
    /// moving one moves both.
    pub(crate) fn share(&self) -> Clock {
        Clock {
            virtual_time: self.virtual_time.clone(),
        }
    }

    /// Now, by this clock. One branch on a running engine.
    #[inline]
    pub(crate) fn now(&self) -> Instant {
        match &self.virtual_time {
            None => Instant::now(),
            Some(v) => v.origin + Duration::from_nanos(v.elapsed.load(Relaxed)),
        }
    }

    /// Whether this is a simulation's virtual clock.
    #[cfg_attr(loom, allow(dead_code))] // Read by `request_shutdown`, not modelled.
    pub(crate) fn is_virtual(&self) -> bool {
        self.virtual_time.is_some()
    }

    /// How far a virtual clock has moved since it started (zero for the
    /// real one).
    pub(crate) fn elapsed(&self) -> Duration {
        self.virtual_time.as_ref().map_or(Duration::ZERO, |v| {
            Duration::from_nanos(v.elapsed.load(Relaxed))
        })
    }

    /// Moves a virtual clock forward to `at` (never back: an instant in
    /// its past leaves it where it is). Does nothing to the real clock.
    pub(crate) fn advance_to(&self, at: Instant) {
        if let Some(v) = &self.virtual_time {
            let nanos = at.saturating_duration_since(v.origin).as_nanos();
            let nanos = u64::try_from(nanos).unwrap_or(u64::MAX);
            if nanos > v.elapsed.load(Relaxed) {
                v.elapsed.store(nanos, Relaxed);
            }
        }
    }

    /// `now + delay`, or an instant too far away to matter when that
    /// overflows (a delay of `Duration::MAX`).
    pub(crate) fn after(&self, delay: Duration) -> Instant {
        let now = self.now();
        now.checked_add(delay)
            .unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 24 * 3600))
    }

    /// Makes this (virtual) clock the one [`spend`] moves on this thread
    /// until the guard drops: a simulated worker's turn, whose step may
    /// say how long it takes. Does nothing for the real clock.
    pub(crate) fn enter_turn(&self) -> TurnGuard {
        let previous = TURN.with(|turn| turn.replace(self.virtual_time.clone()));
        TurnGuard { previous }
    }
}

thread_local! {
    /// The virtual clock of the simulated worker whose turn runs on this
    /// thread, if any (`Clock::enter_turn`).
    static TURN: std::cell::RefCell<Option<std::sync::Arc<VirtualTime>>> =
        const { std::cell::RefCell::new(None) };
}

/// Restores the thread's previous turn clock (see `Clock::enter_turn`).
pub(crate) struct TurnGuard {
    previous: Option<std::sync::Arc<VirtualTime>>,
}

impl Drop for TurnGuard {
    fn drop(&mut self) {
        TURN.with(|turn| *turn.borrow_mut() = self.previous.take());
    }
}

/// Moves the virtual clock of the simulated turn under way on this thread
/// by `time`: the step running takes that long, as its worker measures
/// it. Returns whether a turn was under way (outside one, nothing moves).
pub(crate) fn spend(time: Duration) -> bool {
    TURN.with(|turn| match &*turn.borrow() {
        Some(v) => {
            let nanos = u64::try_from(time.as_nanos()).unwrap_or(u64::MAX);
            let now = v.elapsed.load(Relaxed);
            v.elapsed.store(now.saturating_add(nanos), Relaxed);
            true
        }
        None => false,
    })
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_virtual_clock_stands_still_until_moved_and_never_goes_back() {
        let clock = Clock::virtual_from_now();
        let start = clock.now();
        std::thread::sleep(Duration::from_millis(2));
        assert_eq!(clock.now(), start, "virtual time moved by itself");
        clock.advance_to(start + Duration::from_secs(3600));
        assert_eq!(clock.elapsed(), Duration::from_secs(3600));
        clock.advance_to(start + Duration::from_secs(1));
        assert_eq!(clock.elapsed(), Duration::from_secs(3600), "it went back");
        assert!(clock.is_virtual());
        let other = clock.share();
        clock.advance_to(start + Duration::from_secs(7200));
        assert_eq!(
            other.elapsed(),
            Duration::from_secs(7200),
            "a shared clock moves too"
        );
    }

    #[test]
    fn spending_moves_only_the_clock_of_the_turn_under_way() {
        let clock = Clock::virtual_from_now();
        assert!(!spend(Duration::from_secs(1)), "no turn under way");
        assert_eq!(clock.elapsed(), Duration::ZERO);
        {
            let _turn = clock.enter_turn();
            assert!(spend(Duration::from_micros(20)));
            assert!(spend(Duration::from_micros(5)));
        }
        assert_eq!(clock.elapsed(), Duration::from_micros(25));
        assert!(!spend(Duration::from_secs(1)), "the turn ended");
        let _real = Clock::real().enter_turn();
        assert!(
            !spend(Duration::from_secs(1)),
            "the real clock is not moved"
        );
        assert_eq!(clock.elapsed(), Duration::from_micros(25));
    }

    #[test]
    fn the_real_clock_moves_and_cannot_be_moved() {
        let clock = Clock::real();
        let start = clock.now();
        clock.advance_to(start + Duration::from_secs(3600));
        assert!(clock.now() < start + Duration::from_secs(60));
        assert_eq!(clock.elapsed(), Duration::ZERO);
        assert!(clock.after(Duration::MAX) > start);
    }
}
