//! Who watches a process and which names it holds: registered from any
//! thread, taken exactly once when it ends.
//!
//! One small lock per process. Registration and the end are serialised by
//! it: a monitor set before the end is in the list the end takes (and
//! fires); one set after finds the end's reason and fires at once. So every
//! monitor fires exactly once, and never for a later process under the
//! same PID (it is attached to this record, not to the PID).

use std::sync::Arc as StdArc;

use crate::contract::down::{Down, ExitReason};
use crate::contract::timer_id::TimerId;
use crate::record::RecordRef;
use crate::sync::{Condvar, Mutex};

/// The relations of one process.
#[derive(Debug, Default)]
pub(crate) struct Relations {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
enum State {
    /// Live, nothing registered (no allocation).
    #[default]
    Fresh,
    Live(Box<Related>),
    /// Ended: how, for monitors set from now on.
    Ended(ExitReason),
    /// Ended with links: how, and which processes its end signals (so a
    /// link racing the end can tell whether the end's signal covers it).
    EndedLinked(Box<EndedLinks>),
}

#[derive(Debug)]
struct EndedLinks {
    reason: ExitReason,
    signalled: Vec<relay::Pid>,
}

/// Why a link could not be listed at a process: it has ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LinkRefused {
    /// How it ended.
    pub(crate) reason: ExitReason,
    /// The process that asked was among the links its end signals.
    pub(crate) signalled: bool,
}

#[derive(Debug, Default)]
pub(crate) struct Related {
    pub(crate) monitors: Vec<Watch>,
    pub(crate) names: Vec<StdArc<str>>,
    /// Linked processes (each lists this one too).
    pub(crate) links: Vec<RecordRef>,
    /// Linked processes of other nodes (see `engine/remote/relations.rs`).
    pub(crate) remote_links: Vec<relay::Pid>,
    /// Exit signals from linked processes arrive as events instead of
    /// ending this process.
    pub(crate) trap_exits: bool,
    /// The linked process whose abnormal end is ending this one.
    pub(crate) linked_exit: Option<(relay::Pid, ExitReason)>,
    /// Delayed messages aimed at this process (some may have fired or been
    /// cancelled): the pending ones are cancelled when it ends, as dead
    /// letters.
    pub(crate) delayed: Vec<TimerId>,
    /// How many listed in `delayed` have fired or been cancelled since the
    /// list was last pruned.
    delayed_gone: usize,
    /// Figures the process published of itself (`Output::publish`), by
    /// key, for introspection.
    pub(crate) published: Vec<(&'static str, i64)>,
}

/// Past this many delayed messages listed, the ones that fired are pruned;
/// the list then grows to twice what is left before the next pruning.
const PRUNE_FROM: usize = 16;

impl Related {
    /// Lists a delayed message aimed at this process, pruning now and then
    /// the ones that fired (`pending` tells), so the list stays as long as
    /// the messages actually pending (amortised O(1) per message).
    pub(crate) fn list_delayed(&mut self, id: TimerId, pending: impl Fn(TimerId) -> bool) {
        let list = &mut self.delayed;
        if list.len() >= PRUNE_FROM && list.len().is_power_of_two() {
            list.retain(|id| pending(*id));
            crate::contract::pending::give_back_spare(list);
        }
        list.push(id);
    }

    /// Removes `pid` from the linked processes of other nodes; whether it
    /// was there (whoever removes it acts on the link's one exit signal).
    pub(crate) fn remove_remote_link(&mut self, pid: relay::Pid) -> bool {
        let Some(at) = self.remote_links.iter().position(|p| *p == pid) else {
            return false;
        };
        self.remote_links.swap_remove(at);
        true
    }

    /// One listed delayed message has fired or been cancelled. Once half
    /// the list is such, it is pruned (`pending` tells which are left) and
    /// its spare capacity given back: amortised O(1) per message, and an
    /// idle process that received a million delayed messages keeps no
    /// list of them.
    pub(crate) fn delayed_gone(&mut self, pending: impl Fn(TimerId) -> bool) {
        self.delayed_gone += 1;
        if self.delayed_gone * 2 < self.delayed.len() {
            return;
        }
        self.delayed_gone = 0;
        self.delayed.retain(|id| pending(*id));
        crate::contract::pending::give_back_spare(&mut self.delayed);
    }
}

/// One monitor: whom to tell, under which id.
#[derive(Debug)]
pub(crate) struct Watch {
    pub(crate) id: u64,
    pub(crate) watcher: Watcher,
}

/// Who is told.
#[derive(Debug)]
pub(crate) enum Watcher {
    /// A process, by its record (never a PID: a later process under the
    /// same PID must not be told).
    Process(RecordRef),
    /// Code outside the engine, through a handle's slot.
    Outside(StdArc<DownSlot>),
    /// A process (or outside code) of another node, told with a signal
    /// naming its monitor `id` there.
    Remote {
        /// Who watches ([`Pid::new(node, 0)`](relay::Pid::new) for outside
        /// code).
        watcher: relay::Pid,
        /// The monitor's id on the watcher's node.
        id: u64,
    },
}

/// Where an outside monitor's notification waits to be read: by a thread
/// (`ready`) or a task (`waker`).
#[derive(Debug, Default)]
pub(crate) struct DownSlot {
    pub(crate) down: Mutex<Option<Down>>,
    pub(crate) ready: Condvar,
    pub(crate) waker: Mutex<Option<std::task::Waker>>,
}

impl DownSlot {
    /// Stores the notification and wakes whoever waits for it. The task's
    /// waker is the user's: it is woken outside the locks, and a panic in
    /// it is caught.
    pub(crate) fn set(&self, down: Down) {
        *self.down.lock() = Some(down);
        self.ready.notify_all();
        let waker = self.waker.lock().take();
        if let Some(waker) = waker {
            crate::panic_guard::wake_user_waker(waker, "a monitor's waker");
        }
    }
}

/// The relations of a live process (made on first use); once it has
/// ended, how, and which processes its end signals.
fn live(state: &mut State) -> Result<&mut Related, (ExitReason, &[relay::Pid])> {
    if matches!(state, State::Fresh) {
        *state = State::Live(Box::default());
    }
    match state {
        State::Live(related) => Ok(related),
        State::Ended(reason) => Err((*reason, &[])),
        State::EndedLinked(ended) => Err((ended.reason, &ended.signalled)),
        State::Fresh => unreachable!("made live above"),
    }
}

impl Relations {
    /// Runs `f` on the relations of a live process; `Err` with how it
    /// ended if it has.
    pub(crate) fn with_live<R>(&self, f: impl FnOnce(&mut Related) -> R) -> Result<R, ExitReason> {
        let mut state = self.state.lock();
        live(&mut state).map(f).map_err(|(reason, _)| reason)
    }

    /// Runs `f` on the relations if there are any (a live process with
    /// something registered).
    pub(crate) fn with_existing<R>(&self, f: impl FnOnce(&mut Related) -> R) -> Option<R> {
        match &mut *self.state.lock() {
            State::Live(related) => Some(f(related)),
            State::Fresh | State::Ended(_) | State::EndedLinked(_) => None,
        }
    }

    /// Lists `peer` among the links of this process, unless it is there
    /// already; `Ok(true)` if this added it.
    pub(crate) fn add_link(&self, peer: &RecordRef) -> Result<bool, LinkRefused> {
        let mut state = self.state.lock();
        let related = live(&mut state).map_err(|(reason, signalled)| LinkRefused {
            reason,
            signalled: signalled.contains(&peer.pid),
        })?;
        if related.links.iter().any(|l| RecordRef::ptr_eq(l, peer)) {
            return Ok(false);
        }
        related.links.push(RecordRef::clone(peer));
        Ok(true)
    }

    /// Notes that `pid` has been told this ended process's real end by a
    /// link that found it ended (see `links::link`), so that a later link
    /// from `pid` is refused as signalled and reports `NoProcess`. Does
    /// nothing while the process is live.
    pub(crate) fn note_signalled(&self, pid: relay::Pid) {
        let mut state = self.state.lock();
        match &mut *state {
            State::EndedLinked(ended) => ended.signalled.push(pid),
            State::Ended(reason) => {
                let reason = *reason;
                *state = State::EndedLinked(Box::new(EndedLinks {
                    reason,
                    signalled: vec![pid],
                }));
            }
            State::Fresh | State::Live(_) => {}
        }
    }

    /// Removes `peer` from the links of this process; whether it was
    /// there. Whoever removes it sends the exit signal it stands for, so
    /// the signal goes once.
    pub(crate) fn remove_link(&self, peer: &RecordRef) -> bool {
        let removed = self.with_existing(|related| {
            let at = related
                .links
                .iter()
                .position(|l| RecordRef::ptr_eq(l, peer))?;
            Some(related.links.swap_remove(at))
        });
        // Dropped outside the lock: it may be the last reference.
        removed.flatten().is_some()
    }

    /// Removes `peer` from the links of this process and, if it was there,
    /// runs `then` under the same lock: what the removal decides (an exit
    /// signal) is done before a racing `unlink` of this process can return.
    pub(crate) fn remove_link_then<R>(
        &self,
        peer: &RecordRef,
        then: impl FnOnce(&mut Related) -> R,
    ) -> Option<R> {
        let mut removed = None;
        let done = self.with_existing(|related| {
            let at = related
                .links
                .iter()
                .position(|l| RecordRef::ptr_eq(l, peer))?;
            removed = Some(related.links.swap_remove(at));
            Some(then(related))
        });
        // Dropped outside the lock: it may be the last reference.
        drop(removed);
        done.flatten()
    }

    /// Removes every link of this process to a process under `pid`, and
    /// returns those processes. Works from this process's own list, which
    /// holds the peers' records: a peer whose PID has already left the
    /// table (it is ending) is still found here.
    pub(crate) fn remove_links_to(&self, pid: relay::Pid) -> Vec<RecordRef> {
        let removed = self.with_existing(|related| {
            let mut removed = Vec::new();
            let mut at = 0;
            while at < related.links.len() {
                if related.links[at].pid == pid {
                    removed.push(related.links.swap_remove(at));
                } else {
                    at += 1;
                }
            }
            removed
        });
        removed.unwrap_or_default()
    }

    /// Marks the process ended with `reason` and takes what was
    /// registered. Called once, by the worker that ends it.
    pub(crate) fn end(&self, reason: ExitReason) -> Option<Box<Related>> {
        let mut state = self.state.lock();
        let related = match std::mem::replace(&mut *state, State::Ended(reason)) {
            State::Live(related) => related,
            State::Fresh | State::Ended(_) | State::EndedLinked(_) => return None,
        };
        if !related.links.is_empty() {
            *state = State::EndedLinked(Box::new(EndedLinks {
                reason,
                signalled: related.links.iter().map(|l| l.pid).collect(),
            }));
        }
        Some(related)
    }
}

impl Relations {
    /// Why a linked process's end is ending this one, if it is.
    pub(crate) fn linked_exit(&self) -> Option<(relay::Pid, ExitReason)> {
        self.with_existing(|related| related.linked_exit).flatten()
    }
}
