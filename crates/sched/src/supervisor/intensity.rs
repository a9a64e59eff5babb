//! The restart-intensity window: at most `max` restarts within `within`.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// The times of the recent restarts, oldest first, none older than the
/// period.
#[derive(Debug)]
pub(super) struct Intensity {
    max: u32,
    within: Duration,
    recent: VecDeque<Instant>,
}

impl Intensity {
    pub(super) fn new(max: u32, within: Duration) -> Self {
        Intensity {
            max,
            within,
            recent: VecDeque::new(),
        }
    }

    pub(super) fn within(&self) -> Duration {
        self.within
    }

    /// Takes back the restart counted last (it was not attempted).
    pub(super) fn forget_last(&mut self) {
        self.recent.pop_back();
    }

    /// Counts a restart at `now`. Returns `Err(count)` (the restarts within
    /// the period, this one included) if that is more than the limit.
    pub(super) fn record(&mut self, now: Instant) -> Result<(), u32> {
        while let Some(&oldest) = self.recent.front() {
            if now.saturating_duration_since(oldest) > self.within {
                self.recent.pop_front();
            } else {
                break;
            }
        }
        self.recent.push_back(now);
        let count = u32::try_from(self.recent.len()).unwrap_or(u32::MAX);
        if count > self.max {
            Err(count)
        } else {
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn more_than_max_within_the_period_is_refused() {
        let start = Instant::now();
        let mut window = Intensity::new(2, Duration::from_secs(10));
        assert_eq!(window.record(start), Ok(()));
        assert_eq!(window.record(start + Duration::from_secs(1)), Ok(()));
        assert_eq!(window.record(start + Duration::from_secs(2)), Err(3));
    }

    #[test]
    fn restarts_older_than_the_period_are_forgotten() {
        let start = Instant::now();
        let mut window = Intensity::new(1, Duration::from_secs(1));
        assert_eq!(window.record(start), Ok(()));
        assert_eq!(window.record(start + Duration::from_secs(2)), Ok(()));
        assert_eq!(window.record(start + Duration::from_millis(2500)), Err(2));
    }

    #[test]
    fn a_zero_limit_refuses_the_first_restart() {
        let mut window = Intensity::new(0, Duration::from_secs(1));
        assert_eq!(window.record(Instant::now()), Err(1));
    }
}
