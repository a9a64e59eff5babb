//! One side of a ping-pong pair: the scheduler suite's `ping-pong` and
//! `examples/ping_pong_probe.rs` step the same process.

use std::sync::Arc;

use relay::{Payload, Pid};
use sched_core::{BoxError, Event, Events, InitContext, InitError, Output, Process, Resolved};

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
    /// Sends through a handle resolved once ([`Resolved`]) rather than
    /// by PID (which looks the peer up in the process table each time).
    pub(crate) resolving: bool,
    route: Option<Resolved>,
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
            resolving: false,
            route: None,
        }
    }

    /// The same player, sending to its peer through a handle it resolves
    /// at its first send, as a user who keeps a handle on a peer would.
    #[allow(dead_code)] // The probe example does not use it.
    pub(crate) fn resolving(mut self) -> Player {
        self.resolving = true;
        self
    }

    /// Sends `ball` to the peer.
    fn send(&mut self, out: &mut Output<'_>, ball: u32) -> Result<(), BoxError> {
        if !self.resolving {
            return Ok(out.send(self.peer, ball)?);
        }
        if self.route.is_none() {
            self.route = out.context().resolve(self.peer);
        }
        match &self.route {
            Some(route) => Ok(out.send(route, ball)?),
            None => Err("the peer has ended".into()),
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
            self.send(out, 0)?;
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
                self.send(out, n + 1)?;
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
