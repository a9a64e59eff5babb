//! The process of the yield fan-out workload: it yields `YIELDS` commands
//! one after the other, each completed by one outside thread, then counts
//! the latch down and ends.

use std::sync::Arc;

use relay::Payload;
use sched_core::{
    BoxError, CommandId, Event, Events, InitContext, InitError, Output, Process, Tag,
};

use super::latch::Latch;

/// Commands each process waits for, one after the other.
pub(crate) const YIELDS: usize = 10;
/// The command the outside thread completes.
pub(crate) const REMOTE: CommandId = CommandId(1);

/// One process of the workload.
pub(crate) struct FanOut {
    completed: usize,
    latch: Arc<Latch>,
}

impl FanOut {
    pub(crate) fn new(latch: Arc<Latch>) -> Self {
        FanOut {
            completed: 0,
            latch,
        }
    }
}

impl Process for FanOut {
    type Done = Payload;
    fn init(&mut self, _: &InitContext, _: &str, _: Payload) -> Result<(), InitError> {
        Ok(())
    }
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            if let Event::Completion { result, .. } = event {
                result?;
                self.completed += 1;
            }
        }
        if self.completed == YIELDS {
            self.latch.count_down();
            out.finish(());
        } else {
            out.yield_command(REMOTE, Tag(self.completed as u64), Box::new(()));
        }
        Ok(())
    }
    fn close(&mut self) {}
}
