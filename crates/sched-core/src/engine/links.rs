//! Links: two processes that end together unless one traps exits.
//!
//! A link is listed in both processes' relations. When one ends, each
//! linked process gets an exit signal: if it traps exits, an
//! [`Event::Exit`](crate::Event::Exit); if not, an abnormal end ends it too
//! (with [`ExitError::Linked`](crate::ExitError::Linked)), and a normal end
//! is ignored. Linking to a PID that has no live process sends the signal
//! at once, with [`ExitReason::NoProcess`]. Which side sends a signal, so
//! it goes exactly once, is `record/links.rs`'s protocol.
//!
//! A link lives in the records of its two ends (their link lists): the
//! feature has no engine-wide state of its own. Its operations are
//! methods of [`Links`] (`in_records.rs`, the shared state's `links`), the
//! home of its operations on records; they take the records and the
//! engine (`&Shared`) for the process table, a remote peer and waking the
//! process signalled.

use relay::Pid;

use super::in_records::Links;
use super::shared::Shared;
use crate::contract::down::ExitReason;
use crate::contract::event::Event;
use crate::contract::output::Output;
use crate::record::links;
use crate::record::relations::Related;
use crate::record::state::TERMINATE;
use crate::record::RecordRef;

/// What an exit signal does to its receiver.
enum Signal {
    Deliver,
    Kill,
    Ignore,
}

/// What an exit signal from `from` does to a process with these
/// relations; a kill records why.
fn decide(related: &mut Related, from: Pid, reason: ExitReason) -> Signal {
    if related.trap_exits {
        Signal::Deliver
    } else if reason.is_normal() {
        Signal::Ignore
    } else {
        related.linked_exit.get_or_insert((from, reason));
        Signal::Kill
    }
}

/// Acts on the exit signal of `from` at `linked`, whose relations are
/// `related` (locked by the caller, who has just removed the link's
/// entry): queues the event, or flags the kill. The wake to act on, if
/// any.
pub(crate) fn act_on_exit(
    linked: &RecordRef,
    related: &mut Related,
    from: Pid,
    reason: ExitReason,
    detail: Option<std::sync::Arc<str>>,
) -> Option<crate::record::state::Wake> {
    let signal = decide(related, from, reason);
    tracing::debug!(%from, to = %linked.pid, %reason, "exit signal");
    match signal {
        Signal::Deliver => linked
            .deliver(Event::Exit {
                pid: from,
                reason,
                detail,
            })
            .ok(),
        Signal::Kill => Some(linked.state.kill(TERMINATE)),
        Signal::Ignore => None,
    }
}

impl Links {
    /// Links `me` and `other` (both ways); see `record/links.rs` for
    /// which side sends the exit signal.
    pub(super) fn link(&self, engine: &Shared, me: &RecordRef, other: Pid) {
        if engine.is_remote(other) {
            engine.across().link_remote(engine, me, other);
            return;
        }
        let Some(peer) = engine.processes.get(other) else {
            self.exit_signal(engine, me, other, ExitReason::NoProcess);
            return;
        };
        if RecordRef::ptr_eq(me, &peer) {
            return;
        }
        if let Some(reason) = links::link(me, &peer) {
            self.exit_signal(engine, me, peer.pid, reason);
        }
    }

    /// `ended` has ended with `reason`: each process still linked to it
    /// gets the exit signal.
    pub(crate) fn end(
        &self,
        engine: &Shared,
        ended: &RecordRef,
        links: Vec<RecordRef>,
        reason: ExitReason,
        detail: Option<std::sync::Arc<str>>,
    ) {
        for linked in links {
            // Removing our entry from its list and acting on the signal are
            // one step under its lock: an `unlink` racing this either
            // removed the entry first (no signal) or returns after the
            // signal is queued or the kill flagged.
            let acted = links::end_signal(ended, &linked, |related| {
                act_on_exit(&linked, related, ended.pid, reason, detail.clone())
            });
            if let Some(Some(wake)) = acted {
                engine.after_wake(&linked, wake);
            }
        }
    }

    /// Sends `target` the exit signal of `from`.
    fn exit_signal(&self, engine: &Shared, target: &RecordRef, from: Pid, reason: ExitReason) {
        let signal = target
            .related()
            .with_live(|related| decide(related, from, reason));
        tracing::debug!(%from, to = %target.pid, %reason, "exit signal");
        match signal {
            Ok(Signal::Deliver) => {
                if let Ok(wake) = target.deliver(Event::Exit {
                    pid: from,
                    reason,
                    detail: None,
                }) {
                    engine.after_wake(target, wake);
                }
            }
            Ok(Signal::Kill) => engine.end_soon(target.clone(), TERMINATE),
            Ok(Signal::Ignore) | Err(_) => {}
        }
    }
}

impl Output<'_> {
    /// Links this process with `pid`, both ways: when either ends, the
    /// other gets its exit signal. A process that does not
    /// [trap exits](Output::trap_exits) ends too when a linked process ends
    /// abnormally (anything but `done`), with
    /// [`ExitError::Linked`](crate::ExitError::Linked); one that traps them
    /// receives [`Event::Exit`](crate::Event::Exit) instead, for every end,
    /// normal or not. Linking twice is linking once: one end, one signal,
    /// even when the second link races that end. If `pid`'s process has
    /// already ended, the signal comes at once: with how it ended if this
    /// link is the first it would tell, otherwise (no process under `pid`,
    /// or its end already signalled this process for an earlier link) with
    /// [`ExitReason::NoProcess`](crate::ExitReason::NoProcess). A PID of
    /// another node links through the remote transport the same way; if
    /// that node is lost first, the signal says
    /// [`ExitReason::NodeDown`](crate::ExitReason::NodeDown) (an abnormal
    /// end).
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    ///
    /// /// Works with a partner; if the partner crashes, cleans up and
    /// /// reports it rather than dying with it.
    /// struct Careful { partner: Pid, linked: bool }
    /// impl Process for Careful {
    ///     type Done = ExitReason;
    ///     fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
    ///         if !self.linked {
    ///             self.linked = true;
    ///             out.trap_exits(true);
    ///             out.link(self.partner);
    ///         }
    ///         for event in events {
    ///             if let Event::Exit { reason, .. } = event {
    ///                 out.finish(reason);
    ///             }
    ///         }
    ///         Ok(())
    ///     }
    /// }
    /// ```
    pub fn link(&mut self, pid: Pid) {
        self.engine.link(pid);
    }

    /// Removes the link with `pid` (both ways). No exit signal from that
    /// link comes after this returns, even if `pid`'s process is ending
    /// at that very moment; one already delivered stays delivered.
    ///
    /// # Examples
    ///
    /// ```
    /// fn part(out: &mut sched::Output<'_>, partner: sched::Pid) { out.unlink(partner) }
    /// ```
    pub fn unlink(&mut self, pid: Pid) {
        self.engine.unlink(pid);
    }

    /// Whether exit signals from linked processes arrive as
    /// [`Event::Exit`](crate::Event::Exit) (`true`) or end this process
    /// when abnormal (`false`, the default). See [`link`](Output::link).
    ///
    /// # Examples
    ///
    /// See [`link`](Output::link).
    pub fn trap_exits(&mut self, trap: bool) {
        self.engine.trap_exits(trap);
    }
}
