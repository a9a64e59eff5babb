//! Ending a process of another node: `terminate` and `cancel` of a remote
//! PID.
//!
//! The request travels as a signal (`terminate` or `cancel`, no fields)
//! from the asking node's outside to the process; its node does what a
//! local call would, at once, and answers nothing. So the caller learns
//! only that the request left (`Ok`) or could not
//! ([`TerminateError::Unreachable`]): whether the process was still there,
//! and how it ended, is what a monitor of it says. A request to a process
//! that has already ended, or to a PID of an earlier run of its node
//! (which the transport drops as stale), does nothing, as Erlang's
//! `exit(Pid, kill)` to a dead process.

use relay::{Pid, SendErrorKind};

use super::protocol::Op;
use super::table::Across;
use crate::contract::error::TerminateError;
use crate::engine::shared::Shared;
use crate::engine::Context;

/// What a remote `terminate` or `cancel` asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EndRequest {
    /// End the process now ([`Context::terminate`]).
    Terminate,
    /// Hand the process `Event::Cancel` ([`Context::cancel`]).
    Cancel,
}

impl EndRequest {
    fn op(self) -> Op {
        match self {
            EndRequest::Terminate => Op::Terminate,
            EndRequest::Cancel => Op::Cancel,
        }
    }
}

impl Across {
    /// Sends `request` to `target`, a process of another node.
    pub(crate) fn end_remote(
        &self,
        target: Pid,
        request: EndRequest,
    ) -> Result<(), TerminateError> {
        if self.tell(Pid::new(self.node, 0), target, &request.op()) {
            Ok(())
        } else {
            Err(TerminateError::Unreachable(target))
        }
    }

    /// `from`'s node asks to end `target`, a process of this node. `Err`
    /// when it found no process: a dead letter, as a message to it would
    /// be.
    pub(super) fn ended_by_remote(
        &self,
        engine: &Shared,
        from: Pid,
        target: Pid,
        request: EndRequest,
    ) -> Result<(), SendErrorKind> {
        let context = Context::of(engine);
        let done = match request {
            EndRequest::Terminate => context.terminate(target),
            EndRequest::Cancel => context.cancel(target),
        };
        done.map_err(|error| {
            tracing::debug!(%from, %target, ?request, %error, "a request from another node found no process");
            match error {
                TerminateError::Ended(_) => SendErrorKind::Ended,
                _ => SendErrorKind::UnknownTarget,
            }
        })
    }
}
