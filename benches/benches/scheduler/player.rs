//! One side of a ping-pong pair: the scheduler suite's `ping-pong` and
//! `examples/ping_pong_probe.rs` step the same process.

use std::sync::Arc;

use relay::{Payload, Pid};
use sched_core::{BoxError, Event, Events, InitContext, InitError, Output, Process};

use super::latch::Latch;

/// The server sends first; both sides end after `rounds` balls, the
/// server keeping its last one.
pub(crate) struct Player {
    pub(crate) peer: Pid,
    pub(crate) serves: bool,
    pub(crate) rounds: u32,
    pub(crate) started: bool,
    pub(crate) received: u32,
    pub(crate) latch: Arc<Latch>,
}

impl Player {
    /// A player of `rounds` balls against `peer`, counting `latch` down
    /// when it ends.
    pub(crate) fn new(peer: Pid, serves: bool, rounds: u32, latch: Arc<Latch>) -> Player {
        Player {
            peer,
            serves,
            rounds,
            started: false,
            received: 0,
            latch,
        }
    }
}

impl Process for Player {
    type Done = Payload;
    fn init(&mut self, _: &InitContext, method: &str, _: Payload) -> Result<(), InitError> {
        if method == "run" {
            Ok(())
        } else {
            Err(InitError::unknown_method(method))
        }
    }
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        if self.serves && !self.started {
            self.started = true;
            out.send(self.peer, 0u32)?;
        }
        for event in events {
            let Event::Message(package) = event else {
                continue;
            };
            let n = *package.payload::<u32>().ok_or("a u32 ball")?;
            self.received += 1;
            // The server gets its last ball back without returning it; the
            // other side returns every ball it gets.
            if !(self.serves && self.received == self.rounds) {
                out.send(self.peer, n + 1)?;
            }
            if self.received == self.rounds {
                self.latch.count_down();
                out.finish(());
                return Ok(());
            }
        }
        out.idle();
        Ok(())
    }
    fn close(&mut self) {}
}
