//! The process state word: state and wakeup flag in one atomic.
//!
//! See `record/PROTOCOL.md` for the state machine, its invariants and why no
//! event and no wakeup is lost.

use std::fmt;
use std::sync::atomic::Ordering::{AcqRel, Acquire};

use crate::sync::AtomicU32;

/// Queued (or about to be) and not running.
pub(crate) const READY: u32 = 0;
/// A worker owns the process and is stepping it.
pub(crate) const RUNNING: u32 = 1;
/// Waiting for completions of yielded commands.
pub(crate) const BLOCKED: u32 = 2;
/// Waiting for messages.
pub(crate) const IDLE: u32 = 3;
/// Ended; nothing will run it again.
pub(crate) const COMPLETE: u32 = 4;

const STATE_MASK: u32 = 0b111;
/// Something arrived while the process was running.
pub(crate) const WAKE: u32 = 1 << 3;
/// `terminate(pid)` was called.
pub(crate) const TERMINATE: u32 = 1 << 4;
/// Shutdown passed its deadline: end with a cancelled result.
pub(crate) const FORCE: u32 = 1 << 5;
/// Flags that end the process the next time a worker holds it.
pub(crate) const KILL: u32 = TERMINATE | FORCE;
/// A kill ticket took the process while a run-queue entry of it was still
/// queued (see [`StateWord::claim_killed`]): whoever pops that entry drops
/// it. Cleared by that pop.
pub(crate) const STALE: u32 = 1 << 6;

/// The state part of a word.
#[inline]
pub(crate) const fn state_of(word: u32) -> u32 {
    word & STATE_MASK
}

/// A state's name, with the flags masked off.
pub(crate) fn name(word: u32) -> &'static str {
    match state_of(word) {
        READY => "ready",
        RUNNING => "running",
        BLOCKED => "blocked",
        IDLE => "idle",
        COMPLETE => "complete",
        _ => "unknown",
    }
}

/// A process's state, as introspection reports it.
///
/// # Examples
///
/// ```
/// use sched::process::ProcessState;
/// assert_eq!(ProcessState::Idle.to_string(), "idle");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProcessState {
    /// In a run queue: submitted, or woken from a wait.
    Ready,
    /// Being stepped by a worker, or in a run queue to be stepped again
    /// after a step that asked to continue (its worker keeps it).
    Running,
    /// Waiting for yielded commands to complete.
    Blocked,
    /// Waiting for messages.
    Idle,
    /// Ended.
    Complete,
}

impl ProcessState {
    pub(crate) fn from_word(word: u32) -> Self {
        match state_of(word) {
            READY => ProcessState::Ready,
            RUNNING => ProcessState::Running,
            BLOCKED => ProcessState::Blocked,
            IDLE => ProcessState::Idle,
            _ => ProcessState::Complete,
        }
    }
}

impl fmt::Display for ProcessState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ProcessState::Ready => "ready",
            ProcessState::Running => "running",
            ProcessState::Blocked => "blocked",
            ProcessState::Idle => "idle",
            ProcessState::Complete => "complete",
        })
    }
}

/// The state word of one process.
#[derive(Debug)]
pub(crate) struct StateWord(AtomicU32);

/// What the caller of [`StateWord::wake`] must do.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Wake {
    /// The process went from waiting to ready: the caller queues it.
    Schedule,
    /// Nothing: it is running (the flag is set), already ready, or complete.
    Nothing,
}

/// What [`StateWord::kill_queued`] found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Killed {
    /// The process was waiting: now READY, and the caller queues it (as
    /// for [`Wake::Schedule`]).
    Schedule,
    /// The process was READY with no kill flag before: it sits in a run
    /// queue (or is about to), and whoever holds a ticket for it may take
    /// it out of its turn with [`StateWord::claim_killed`].
    Queued,
    /// Nothing to do: it is running (its worker sees the flag), was killed
    /// already, or has ended.
    Nothing,
}

/// What a worker does after a step, decided by [`StateWord::finish_step`].
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum AfterStep {
    /// The process is parked in the requested waiting state.
    Parked,
    /// The process is ready again: the worker queues it. `woken` says
    /// whether that is because events arrived during the step.
    Requeue { woken: bool },
    /// A kill flag is set: the worker ends the process.
    Kill(u32),
}

impl StateWord {
    /// A word in `READY`, as for a process being submitted (not queued yet).
    pub(crate) fn new() -> Self {
        StateWord(AtomicU32::new(READY))
    }

    pub(crate) fn load(&self) -> u32 {
        self.0.load(Acquire)
    }

    /// Called after an event was pushed onto the process's queue (or a
    /// kill flag set): makes a waiting process ready, or flags a running
    /// one so its worker requeues it.
    pub(crate) fn wake(&self) -> Wake {
        let mut word = self.0.load(Acquire);
        loop {
            let next = match state_of(word) {
                BLOCKED | IDLE => (word & !STATE_MASK) | READY,
                RUNNING => word | WAKE,
                // Already ready (or running with the flag set): a step is
                // coming. We still write the word (unchanged) so that our
                // push is released into the word's chain of read-modify-
                // writes, which that step's `start_step` acquires; a plain
                // load here would leave no happens-before edge from our push
                // to its drain.
                READY => word,
                _ => return Wake::Nothing,
            };
            // AcqRel: the release publishes the event pushed before this
            // call to whoever acquires the word next (the worker that runs
            // the process); the acquire orders us after its transitions.
            match self.0.compare_exchange_weak(word, next, AcqRel, Acquire) {
                Ok(_) if matches!(state_of(word), BLOCKED | IDLE) => return Wake::Schedule,
                Ok(_) => return Wake::Nothing,
                Err(current) => word = current,
            }
        }
    }

    /// Sets a kill flag, then wakes the process so a worker ends it.
    pub(crate) fn kill(&self, flag: u32) -> Wake {
        debug_assert!(flag & !KILL == 0);
        let previous = self.0.fetch_or(flag, AcqRel);
        if state_of(previous) == COMPLETE {
            return Wake::Nothing;
        }
        self.wake()
    }

    /// [`kill`](StateWord::kill), also telling whether the process is
    /// queued: then a ticket may end it before its turn.
    pub(crate) fn kill_queued(&self, flag: u32) -> Killed {
        debug_assert!(flag & !KILL == 0);
        let previous = self.0.fetch_or(flag, AcqRel);
        match state_of(previous) {
            COMPLETE => Killed::Nothing,
            // The fetch-or is a read-modify-write in the word's chain: the
            // `start_step` or `claim_killed` that takes the process
            // acquires it. No wake is needed.
            READY if previous & KILL == 0 => Killed::Queued,
            READY => Killed::Nothing,
            _ => match self.wake() {
                Wake::Schedule => Killed::Schedule,
                Wake::Nothing => Killed::Nothing,
            },
        }
    }

    /// A kill ticket's holder takes the process out of its turn:
    /// `READY` (with a kill flag) `-> RUNNING | STALE`. On success it owns
    /// the process, as a worker that dequeued it would, and returns the
    /// kill flags; the run-queue entry that still holds the process is now
    /// stale, and the [`start_step`](StateWord::start_step) that pops it
    /// clears `STALE` and drops it. `None` if the process is not ready (a
    /// worker took it first, or it ended): then that worker ends it.
    ///
    /// `queued` says whether a run-queue entry holds the process (a ticket
    /// of [`Killed::Queued`]); for one of [`Killed::Schedule`] no entry
    /// does, and nothing is marked.
    pub(crate) fn claim_killed(&self, queued: bool) -> Option<u32> {
        let mut word = self.0.load(Acquire);
        loop {
            if state_of(word) != READY || word & KILL == 0 || word & STALE != 0 {
                return None;
            }
            let stale = if queued { STALE } else { 0 };
            let next = (word & KILL) | RUNNING | stale;
            // AcqRel: the acquire takes the body from the previous owner's
            // release (as `start_step`'s does); the release orders the
            // claim before the pop that finds `STALE`.
            match self.0.compare_exchange_weak(word, next, AcqRel, Acquire) {
                Ok(_) => return Some(word & KILL),
                Err(current) => word = current,
            }
        }
    }

    /// A worker that dequeued the process takes it: `READY -> RUNNING`.
    /// A process its owner queued to continue is still `RUNNING` (see
    /// [`finish_step`](StateWord::finish_step)), and then nothing is
    /// written unless a wakeup flag is set, which the drain that follows
    /// makes stale. Returns the kill flags that were set, if any.
    ///
    /// `None` if the entry was stale: a kill ticket took the process out
    /// of its turn (`claim_killed`); the caller drops the entry.
    pub(crate) fn start_step(&self) -> Option<u32> {
        let mut word = self.0.load(Acquire);
        loop {
            if word & STALE != 0 {
                // The only other entry: the claim ended (or is ending) the
                // process, which is never queued again.
                self.0.fetch_and(!STALE, AcqRel);
                return None;
            }
            let next = match state_of(word) {
                RUNNING if word & WAKE == 0 => return Some(word & KILL),
                RUNNING => word & !WAKE,
                _ => {
                    debug_assert_eq!(
                        state_of(word),
                        READY,
                        "dequeued a process that is not ready"
                    );
                    (word & KILL) | RUNNING
                }
            };
            match self.0.compare_exchange_weak(word, next, AcqRel, Acquire) {
                Ok(_) => return Some(word & KILL),
                Err(current) => word = current,
            }
        }
    }

    /// A worker finished a step wanting `desired` (`READY`, `BLOCKED` or
    /// `IDLE`). Events that arrived during the step (the wakeup flag) turn a
    /// wait into a requeue; a kill flag wins over everything.
    ///
    /// With `publish`, a step that continues makes the process `READY`
    /// (one read-modify-write here and one in the next `start_step`), so
    /// that a kill ticket can take it out of its turn; its worker passes
    /// it when it has a long queue, where a turn is long to wait.
    pub(crate) fn finish_step(&self, desired: u32, publish: bool) -> AfterStep {
        let mut word = self.0.load(Acquire);
        loop {
            debug_assert_eq!(state_of(word), RUNNING);
            if word & KILL != 0 {
                return AfterStep::Kill(word & KILL);
            }
            let woken = word & WAKE != 0;
            if desired == READY && !woken && !publish {
                // Continuing, and nothing arrived: the process stays
                // `RUNNING`, owned by the run-queue entry the caller pushes
                // next (the queue hands it and the body on to whoever pops
                // it). No write, so no read-modify-write per continued step
                // here nor in the next `start_step`. A wakeup or a kill this
                // load missed is in the word for that `start_step` (or the
                // next `finish_step`) to see, and the process runs again
                // anyway.
                return AfterStep::Requeue { woken: false };
            }
            let target = if woken { READY } else { desired };
            match self.0.compare_exchange_weak(word, target, AcqRel, Acquire) {
                Ok(_) if target == READY => return AfterStep::Requeue { woken },
                Ok(_) => return AfterStep::Parked,
                Err(current) => word = current,
            }
        }
    }

    /// The worker ends the process: no transition happens after this.
    /// A stale run-queue entry's mark (`STALE`) is kept for the pop that
    /// drops it.
    pub(crate) fn complete(&self) {
        let mut word = self.0.load(Acquire);
        loop {
            let next = COMPLETE | (word & STALE);
            match self.0.compare_exchange_weak(word, next, AcqRel, Acquire) {
                Ok(_) => return,
                Err(current) => word = current,
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn names_mask_the_flags() {
        assert_eq!(name(READY), "ready");
        assert_eq!(name(RUNNING | WAKE), "running");
        assert_eq!(name(READY | WAKE), "ready");
        assert_eq!(name(BLOCKED), "blocked");
        assert_eq!(name(IDLE | TERMINATE), "idle");
        assert_eq!(name(COMPLETE), "complete");
        assert_eq!(name(5), "unknown");
    }

    #[test]
    fn a_wake_while_running_sets_the_flag_and_requeues_after_the_step() {
        let s = StateWord::new();
        assert_eq!(s.start_step(), Some(0));
        assert_eq!(s.wake(), Wake::Nothing);
        assert_eq!(s.load(), RUNNING | WAKE);
        assert_eq!(s.wake(), Wake::Nothing, "a second wake changes nothing");
        assert_eq!(
            s.finish_step(IDLE, false),
            AfterStep::Requeue { woken: true }
        );
        assert_eq!(s.load(), READY);
    }

    #[test]
    fn a_wake_of_a_waiting_process_schedules_it_once() {
        let s = StateWord::new();
        s.start_step();
        assert_eq!(s.finish_step(BLOCKED, false), AfterStep::Parked);
        assert_eq!(s.wake(), Wake::Schedule);
        assert_eq!(s.wake(), Wake::Nothing, "already ready");
        assert_eq!(ProcessState::from_word(s.load()), ProcessState::Ready);
    }

    #[test]
    fn kill_flags_survive_and_win() {
        let s = StateWord::new();
        s.start_step();
        assert_eq!(s.finish_step(IDLE, false), AfterStep::Parked);
        assert_eq!(s.kill(TERMINATE), Wake::Schedule);
        assert_eq!(s.start_step(), Some(TERMINATE));
        assert_eq!(s.finish_step(READY, false), AfterStep::Kill(TERMINATE));
        s.complete();
        assert_eq!(s.kill(FORCE), Wake::Nothing);
        assert_eq!(s.wake(), Wake::Nothing);
    }

    #[test]
    fn continue_requeues_without_the_woken_mark() {
        let s = StateWord::new();
        s.start_step();
        assert_eq!(
            s.finish_step(READY, false),
            AfterStep::Requeue { woken: false }
        );
    }

    #[test]
    fn a_continuing_process_stays_running_while_queued() {
        let s = StateWord::new();
        s.start_step();
        assert_eq!(
            s.finish_step(READY, false),
            AfterStep::Requeue { woken: false }
        );
        assert_eq!(s.load(), RUNNING, "no transition, no write");
        assert_eq!(s.start_step(), Some(0));
        assert_eq!(s.load(), RUNNING);

        // Woken while queued: the flag is set (no second queueing) and the
        // next start clears it, as its drain will take what arrived.
        assert_eq!(
            s.finish_step(READY, false),
            AfterStep::Requeue { woken: false }
        );
        assert_eq!(s.wake(), Wake::Nothing, "queued already");
        assert_eq!(s.load(), RUNNING | WAKE);
        assert_eq!(s.start_step(), Some(0));
        assert_eq!(s.load(), RUNNING);

        // Killed while queued: the next start reports it.
        assert_eq!(
            s.finish_step(READY, false),
            AfterStep::Requeue { woken: false }
        );
        assert_eq!(s.kill(TERMINATE), Wake::Nothing, "queued already");
        assert_eq!(s.start_step(), Some(TERMINATE));
        assert_eq!(s.finish_step(IDLE, false), AfterStep::Kill(TERMINATE));
    }

    #[test]
    fn a_ticket_takes_a_queued_process_and_its_entry_is_dropped() {
        let s = StateWord::new();
        assert_eq!(s.kill_queued(TERMINATE), Killed::Queued);
        assert_eq!(s.kill_queued(TERMINATE), Killed::Nothing, "one ticket");
        assert_eq!(s.claim_killed(true), Some(TERMINATE));
        assert_eq!(s.claim_killed(true), None, "claimed once");
        s.complete();
        assert_eq!(s.load(), COMPLETE | STALE, "the mark outlives the end");
        assert_eq!(s.start_step(), None, "the entry is stale");
        assert_eq!(s.load(), COMPLETE);
    }

    #[test]
    fn a_worker_that_takes_the_process_first_leaves_the_ticket_nothing() {
        let s = StateWord::new();
        assert_eq!(s.kill_queued(TERMINATE), Killed::Queued);
        assert_eq!(s.start_step(), Some(TERMINATE));
        assert_eq!(s.claim_killed(true), None);
        assert_eq!(s.load() & STALE, 0);
    }

    #[test]
    fn a_published_continue_is_ready_and_can_be_claimed() {
        let s = StateWord::new();
        s.start_step();
        assert_eq!(
            s.finish_step(READY, true),
            AfterStep::Requeue { woken: false }
        );
        assert_eq!(s.load(), READY);
        assert_eq!(s.kill_queued(TERMINATE), Killed::Queued);
        assert_eq!(s.claim_killed(true), Some(TERMINATE));
        // Unpublished, the queued process stays RUNNING: no ticket.
        let s = StateWord::new();
        s.start_step();
        assert_eq!(
            s.finish_step(READY, false),
            AfterStep::Requeue { woken: false }
        );
        assert_eq!(s.kill_queued(TERMINATE), Killed::Nothing);
        assert_eq!(s.claim_killed(true), None);
        // A waiting process is scheduled by the kill, as by `kill`.
        let s = StateWord::new();
        s.start_step();
        assert_eq!(s.finish_step(IDLE, false), AfterStep::Parked);
        assert_eq!(s.kill_queued(TERMINATE), Killed::Schedule);
        assert_eq!(s.claim_killed(false), Some(TERMINATE));
        assert_eq!(s.load() & STALE, 0, "no entry to mark stale");
    }

    #[test]
    fn a_woken_continue_goes_through_ready() {
        let s = StateWord::new();
        s.start_step();
        s.wake();
        assert_eq!(
            s.finish_step(READY, false),
            AfterStep::Requeue { woken: true }
        );
        assert_eq!(s.load(), READY);
        assert_eq!(s.start_step(), Some(0));
        assert_eq!(s.load(), RUNNING);
    }
}
