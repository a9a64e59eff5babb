//! The terminator thread: terminates doomed processes from outside the
//! scheduler when their random moment comes, and records what
//! `terminate` answered.

use std::sync::atomic::Ordering::SeqCst;
use std::thread;
use std::time::{Duration, Instant};

use sched::prelude::*;
use sched::process::TerminateError;

use crate::shared::Shared;

/// Terminates due processes until `shared.stop` is set.
pub(crate) fn terminate_doomed(scheduler: &Scheduler, shared: &Shared) {
    loop {
        let stopping = shared.stop.load(SeqCst);
        for kill in shared.due_kills(Instant::now()) {
            match scheduler.terminate(kill.pid) {
                Ok(()) => kill.observed.terminate_result(true),
                // Every PID here was handed out by the scheduler: one that
                // is gone is `Ended`, never `NotFound`.
                Err(TerminateError::Ended(pid)) if pid == kill.pid => {
                    kill.observed.terminate_result(false)
                }
                Err(e) => shared.violation(format!("terminate({}) failed with {e:?}", kill.pid)),
            }
        }
        if stopping {
            return;
        }
        thread::sleep(Duration::from_micros(50));
    }
}
