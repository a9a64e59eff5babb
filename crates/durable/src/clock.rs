//! The journal's clock: milliseconds since the Unix epoch, read through
//! the engine's clock, so that a simulation's virtual time is the time
//! its durable processes record and their timers are set by.
//!
//! The clock is anchored once per `Durability`, at its first `spawn` or
//! `recover`: an anchor is a (milliseconds since the epoch, engine
//! instant) pair, and a reading is the anchor's milliseconds plus the
//! engine time since the anchor's instant. On a running scheduler the
//! anchor's milliseconds are the wall clock's at that moment (the clock
//! then runs with the monotonic clock, unmoved by wall-clock steps); in a
//! simulation they are the latest time the recovered journals recorded
//! (or a fixed epoch for an empty store), so that a seed decides every
//! reading and time never runs backwards across a simulated restart.

use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime};

use crate::process::unix_ms;

/// The fixed start of a simulation's clock on an empty store:
/// 2026-01-01T00:00:00Z.
pub(crate) const SIMULATION_EPOCH_MS: u64 = 1_767_225_600_000;

/// How a `Durability` reads the time.
pub(crate) struct Clock {
    simulated: bool,
    anchor: OnceLock<(u64, Instant)>,
}

impl Clock {
    pub(crate) fn new(simulated: bool) -> Clock {
        Clock {
            simulated,
            anchor: OnceLock::new(),
        }
    }

    /// Anchors the clock at the engine instant `now`, if it is not yet:
    /// at the wall clock on a running scheduler, at `latest_ms` (the
    /// latest time a journal recorded, if known) in a simulation.
    pub(crate) fn anchor(&self, now: Instant, latest_ms: Option<u64>) {
        self.anchor.get_or_init(|| {
            let ms = if self.simulated {
                latest_ms.map_or(SIMULATION_EPOCH_MS, |ms| ms + 1)
            } else {
                unix_ms(SystemTime::now())
            };
            (ms, now)
        });
    }

    /// Milliseconds since the epoch at the engine instant `now`.
    pub(crate) fn ms_at(&self, now: Instant) -> u64 {
        let (ms, at) = *self.anchor.get_or_init(|| {
            // Not anchored (a runner stepped before any spawn or recover
            // of this `Durability` returned): anchor here.
            let ms = if self.simulated {
                SIMULATION_EPOCH_MS
            } else {
                unix_ms(SystemTime::now())
            };
            (ms, now)
        });
        let since = now.saturating_duration_since(at);
        ms + u64::try_from(since.as_millis()).unwrap_or(u64::MAX - ms)
    }

    /// The engine instant at which the clock reads `deadline_ms`, given
    /// that it reads `now_ms` at `now` (at once if that has passed).
    pub(crate) fn instant_of(now: Instant, now_ms: u64, deadline_ms: u64) -> Instant {
        now + Duration::from_millis(deadline_ms.saturating_sub(now_ms))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_simulated_clock_starts_after_the_latest_recorded_time_and_follows_the_engine() {
        let clock = Clock::new(true);
        let start = Instant::now();
        clock.anchor(start, Some(5_000));
        clock.anchor(start + Duration::from_secs(9), Some(1)); // anchored once
        assert_eq!(clock.ms_at(start), 5_001);
        assert_eq!(clock.ms_at(start + Duration::from_millis(250)), 5_251);
        let empty = Clock::new(true);
        empty.anchor(start, None);
        assert_eq!(empty.ms_at(start), SIMULATION_EPOCH_MS);
        assert_eq!(
            Clock::instant_of(start, 1_000, 1_500),
            start + Duration::from_millis(500)
        );
        assert_eq!(Clock::instant_of(start, 1_000, 10), start, "past: at once");
    }
}
