//! An idle worker lingers before it parks when its idle spells are short
//! (`SchedulerBuilder::idle_linger`): work that comes back within the
//! linger finds it awake, so a steady trickle of messages costs no park
//! per message; with no linger, each gap parks the worker.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sched::prelude::*;

const MESSAGES: usize = 60;
const GAP: Duration = Duration::from_millis(1);

/// Counts the messages it gets.
struct Count(Arc<AtomicUsize>);

impl Process for Count {
    fn step(&mut self, events: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
        let n = events.count();
        self.0.fetch_add(n, Ordering::Release);
        Ok(())
    }
}

/// The parks of a one-worker scheduler with `linger`, over `MESSAGES`
/// messages sent from outside `GAP` apart, each taken before the next.
/// With `until_parked`, each gap lasts (beyond `GAP`) until the worker
/// has parked, or a second: on a loaded machine the worker's short spin
/// before it parks (a few yields, each of which may cost a time slice)
/// can outlast any fixed gap.
fn parks_with(linger: Duration, until_parked: bool) -> u64 {
    let scheduler = Scheduler::builder().workers(1).idle_linger(linger).build();
    scheduler.start();
    let seen = Arc::new(AtomicUsize::new(0));
    let pid = scheduler.spawn(Count(Arc::clone(&seen))).unwrap().pid();
    let before = scheduler.stats().totals().parks;
    for n in 0..MESSAGES {
        scheduler.send(pid, n).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while seen.load(Ordering::Acquire) <= n {
            assert!(Instant::now() < deadline, "message {n} not taken");
            std::thread::yield_now();
        }
        std::thread::sleep(GAP);
        if until_parked {
            let deadline = Instant::now() + Duration::from_secs(1);
            while scheduler.stats().parked_workers == 0 && Instant::now() < deadline {
                std::thread::sleep(Duration::from_micros(200));
            }
        }
    }
    let parks = scheduler.stats().totals().parks - before;
    scheduler.shutdown(Duration::from_secs(1));
    parks
}

#[test]
fn short_idle_spells_cost_no_park_once_the_worker_lingers() {
    // A limit far above the gaps, however slow the machine: after the
    // first spell or two the worker lingers through every gap.
    let lingering = parks_with(Duration::from_secs(1), false);
    let parking = parks_with(Duration::ZERO, true);
    eprintln!("parks for {MESSAGES} messages: {lingering} lingering, {parking} without");
    assert!(
        lingering <= 10,
        "{lingering} parks for {MESSAGES} messages while lingering"
    );
    assert!(
        parking >= MESSAGES as u64 / 2,
        "{parking} parks for {MESSAGES} messages without lingering"
    );
}
