//! The simulated network between a simulation's nodes: each node's remote
//! transport is a [`Network`] endpoint that hands packages for another
//! node to the simulation, which delivers them after a latency it draws
//! (or never, across a partition), on its own thread, in its own order.
//!
//! What it keeps of the real transport's promises: delivery at most once,
//! in the order one node sent packages to another, whichever of its
//! processes sent them (one connection and one subject per pair of nodes
//! on NATS: a package behind a held one waits for it); a
//! package to a node that does not exist is refused at once, as an
//! unknown target; a package to a node cut off by a partition is lost
//! (the send succeeds, as a publish over NATS does), and the trace says
//! so. The message faults (`Faults`) apply once, where a package arrives.

use std::sync::Arc as StdArc;
use std::time::Duration;

use relay::{Package, Receiver, RemoteTransport, SendError};

use super::faults::{Held, State};
use super::trace::{Entry, Fault};
use crate::sync::Mutex;

/// One node's end of the simulated network.
pub(crate) struct Network {
    pub(crate) node: u32,
    pub(crate) state: StdArc<Mutex<State>>,
}

impl std::fmt::Debug for Network {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Network").field("node", &self.node).finish()
    }
}

impl RemoteTransport for Network {
    fn attach(&self, node: u32, local: StdArc<dyn Receiver + Send + Sync>) {
        self.state.lock().inboxes.insert(node, local);
    }

    fn send(&self, package: Package) -> Result<(), SendError> {
        let to_node = package.target().node();
        let mut guard = self.state.lock();
        let state = &mut *guard;
        if !state.inboxes.contains_key(&to_node) {
            return Err(SendError::unknown_target(package));
        }
        let to = package.target();
        if state.is_cut(self.node, to_node) {
            state.trace.push(Entry::Fault(Fault::Unreachable { to }));
            // The transport can no longer vouch for the traffic to that
            // node: it says so again, as a real one refuses a send to a
            // node it has declared down. A monitor, link or ask set up
            // across the cut after the first notice ends with the node
            // down, as one set up before it did, instead of waiting for
            // an answer that was lost.
            state.notify(self.node, to_node);
            drop(guard);
            crate::panic_guard::drop_user_value(package, to, "a package lost to a partition");
            return Ok(());
        }
        // The message faults (loss, delay, copies) apply where the package
        // arrives, on the target node's delivery path, as to any message:
        // once.
        let latency = state.latency;
        let by = match latency.is_zero() {
            true => Duration::ZERO,
            false => super::faults::draw_delay(&mut state.choices, latency),
        };
        let due = state.now + by;
        state.hold(due, Held::Remote(package, self.node));
        Ok(())
    }
}
