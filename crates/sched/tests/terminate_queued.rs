//! A terminate takes effect without waiting for the process's turn: a
//! process terminated while it waits in a run queue behind thousands of
//! others ends at the next pick of a worker, not after their steps.
//!
//! Measured in steps, not time: every busy process counts its steps in
//! one shared counter, and the terminated process reads it in `close`, so
//! "how many steps ran between the terminate and the end" does not depend
//! on how loaded the machine is.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sched::prelude::*;

/// How many busy processes stand in the one worker's queue.
const BUSY: usize = 2_000;
/// Steps allowed between the terminate's return and the victim's end:
/// the step under way, and the few a worker can start before it looks
/// at its tickets. Its turn would be `BUSY` steps.
const SLACK: u64 = 20;

/// Continues forever, counting its steps in `steps`, until `stop`.
struct Busy {
    steps: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
}

impl Process for Busy {
    type Done = Payload;
    fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        self.steps.fetch_add(1, SeqCst);
        // A little work, so that a turn of the queue is long.
        let until = Instant::now() + Duration::from_micros(2);
        while Instant::now() < until {
            std::hint::spin_loop();
        }
        if self.stop.load(SeqCst) {
            out.finish(());
        } else {
            out.continue_();
        }
        Ok(())
    }
}

/// A busy process that notes, when it is closed, how many steps had run.
struct Victim {
    busy: Busy,
    own_steps: Arc<AtomicU64>,
    ended_at: Arc<AtomicU64>,
}

impl Process for Victim {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        self.own_steps.fetch_add(1, SeqCst);
        self.busy.step(events, out)
    }

    fn close(&mut self) {
        self.ended_at
            .store(self.busy.steps.load(SeqCst) + 1, SeqCst);
    }
}

struct Flood {
    scheduler: Scheduler,
    steps: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
}

impl Flood {
    /// One worker, `BUSY` processes continuing without end.
    fn start() -> Flood {
        let scheduler = Scheduler::builder().workers(1).build();
        scheduler.start();
        let steps = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        for _ in 0..BUSY {
            scheduler
                .spawn(Busy {
                    steps: steps.clone(),
                    stop: stop.clone(),
                })
                .expect("spawned");
        }
        Flood {
            scheduler,
            steps,
            stop,
        }
    }

    fn busy(&self) -> Busy {
        Busy {
            steps: self.steps.clone(),
            stop: self.stop.clone(),
        }
    }

    /// Waits until `n` more steps of the flood have run.
    fn wait_steps(&self, n: u64) {
        let from = self.steps.load(SeqCst);
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.steps.load(SeqCst) < from + n {
            assert!(Instant::now() < deadline, "the flood stopped stepping");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    fn stop(self) {
        self.stop.store(true, SeqCst);
        self.scheduler.shutdown(Duration::from_secs(30));
    }
}

/// Terminates `victim` and returns how many steps of others ran from the
/// terminate's return to its end (0 if it had ended by then).
fn steps_to_end(flood: &Flood, mut victim: Completion, ended_at: &AtomicU64) -> u64 {
    let pid = victim.pid();
    flood.scheduler.terminate(pid).expect("still running");
    let after = flood.steps.load(SeqCst);
    let outcome = victim.wait_timeout(Duration::from_secs(60)).unwrap_err();
    assert!(
        matches!(outcome, ExitError::Terminated),
        "terminated, not {outcome:?}"
    );
    ended_at.load(SeqCst).saturating_sub(after)
}

#[test]
fn a_process_terminated_while_it_continues_behind_a_backlog_ends_before_its_turn() {
    let flood = Flood::start();
    flood.wait_steps(BUSY as u64);
    let own_steps = Arc::new(AtomicU64::new(0));
    let ended_at = Arc::new(AtomicU64::new(0));
    let victim = flood
        .scheduler
        .spawn(Victim {
            busy: flood.busy(),
            own_steps: own_steps.clone(),
            ended_at: ended_at.clone(),
        })
        .expect("spawned");
    // It has stepped and continued: it waits at the back of the queue,
    // `BUSY` steps from its next turn.
    let deadline = Instant::now() + Duration::from_secs(60);
    while own_steps.load(SeqCst) < 2 {
        assert!(Instant::now() < deadline, "the victim never stepped");
        std::thread::sleep(Duration::from_millis(1));
    }
    let waited = steps_to_end(&flood, victim, &ended_at);
    assert!(
        waited <= SLACK,
        "{waited} steps of others ran before the terminated process ended (its turn is {BUSY})"
    );
    flood.stop();
}

#[test]
fn a_process_terminated_before_its_first_step_ends_before_its_turn() {
    let flood = Flood::start();
    flood.wait_steps(BUSY as u64);
    let own_steps = Arc::new(AtomicU64::new(0));
    let ended_at = Arc::new(AtomicU64::new(0));
    // Spawned from outside, it waits in the queue of new processes; the
    // terminate comes before the worker takes it.
    let victim = flood
        .scheduler
        .spawn(Victim {
            busy: flood.busy(),
            own_steps: own_steps.clone(),
            ended_at: ended_at.clone(),
        })
        .expect("spawned");
    let waited = steps_to_end(&flood, victim, &ended_at);
    assert_eq!(own_steps.load(SeqCst), 0, "it never stepped");
    assert!(
        waited <= SLACK,
        "{waited} steps of others ran before the terminated process ended"
    );
    flood.stop();
}

#[test]
fn many_terminates_each_end_their_process_once_and_the_rest_keep_running() {
    let flood = Flood::start();
    flood.wait_steps(BUSY as u64);
    let mut victims = Vec::new();
    let closes = Arc::new(AtomicU64::new(0));
    for _ in 0..200 {
        let ended_at = Arc::new(AtomicU64::new(0));
        let victim = flood
            .scheduler
            .spawn(Victim {
                busy: flood.busy(),
                own_steps: Arc::new(AtomicU64::new(0)),
                ended_at: ended_at.clone(),
            })
            .expect("spawned");
        victims.push((victim, ended_at));
    }
    flood.wait_steps(BUSY as u64);
    for (victim, _) in &victims {
        flood.scheduler.terminate(victim.pid()).expect("running");
        // A second terminate of the same process changes nothing.
        let _ = flood.scheduler.terminate(victim.pid());
    }
    for (mut victim, ended_at) in victims {
        let outcome = victim.wait_timeout(Duration::from_secs(60));
        assert!(matches!(outcome, Err(ExitError::Terminated)), "{outcome:?}");
        assert!(ended_at.load(SeqCst) > 0, "close ran");
        closes.fetch_add(1, SeqCst);
    }
    assert_eq!(closes.load(SeqCst), 200);
    // The flood is untouched: it still steps, and every busy process is
    // still there.
    flood.wait_steps(BUSY as u64);
    assert_eq!(flood.scheduler.stats().live_processes, BUSY);
    flood.stop();
}
