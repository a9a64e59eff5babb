//! Where a process's outcome is delivered, exactly once, and taken once;
//! and where async code waiting on that moment registers its wakers.
//!
//! Wakers are never dropped or woken with the lock held: dropping a waker
//! can drop a task, whose future may hold a `Completion` or an
//! `Abandoned` that locks this slot again.

use std::task::Waker;

use std::fmt;
use std::ptr;
use std::sync::atomic::Ordering::{AcqRel, Acquire};

use crate::contract::outcome::{ExitError, Outcome};
use crate::sync::{AtomicPtr, Condvar, Mutex};

/// Where a process's outcome is delivered, exactly once.
///
/// Most handles are dropped unawaited and most processes are never watched:
/// for them neither the handle's drop nor the end takes the lock. The flag
/// bits of `word` say who is or was there (`ENDED`, `ABANDONED`, `POLLED`,
/// `WATCHED`), each side sets its bit with one read-modify-write, and the
/// one that comes second in that word's order sees the other's bit and
/// does the rest: the end hands the outcome back when the handle was
/// already gone, the handle's drop takes the stored outcome when the end
/// came first. The lock is taken only where a waker or a stored outcome is
/// involved, and it is allocated only then: an idle process whose handle
/// was dropped carries one word here instead of a lock, a condition
/// variable and what they guard (80 bytes).
pub(crate) struct ResultSlot {
    /// The address of the locked part (null until a path needs it; then
    /// set once by [`ResultSlot::locked`] and freed with the slot), with
    /// the flags in its low bits, which `Locked`'s alignment leaves free.
    /// One word, so that a record is small enough for the allocator's next
    /// size class down.
    word: AtomicPtr<Locked>,
}

/// The lock and the condition variable of a slot, and what they guard.
/// Aligned so that the low four bits of its address are free for flags.
#[derive(Debug, Default)]
#[repr(align(16))]
pub(crate) struct Locked {
    pub(super) inner: Mutex<Inner>,
    pub(super) ready: Condvar,
}

/// The flag bits of a slot's word.
const FLAGS: usize = 0b1111;

impl Default for ResultSlot {
    fn default() -> Self {
        ResultSlot {
            word: AtomicPtr::new(ptr::null_mut()),
        }
    }
}

impl fmt::Debug for ResultSlot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let word = self.word.load(Acquire);
        f.debug_struct("ResultSlot")
            .field("flags", &(word.addr() & FLAGS))
            .field("locked_part", &!address_of(word).is_null())
            .finish()
    }
}

impl Drop for ResultSlot {
    fn drop(&mut self) {
        let locked = address_of(self.word.load(Acquire));
        if !locked.is_null() {
            // SAFETY: a non-null address came from `Box::into_raw` in
            // `install`, was installed once, and `&mut self` means no
            // reference to it is left.
            drop(unsafe { Box::from_raw(locked) });
        }
    }
}

/// The locked part's address in a slot's word, without the flags (the
/// pointer keeps its provenance: only its address changes).
fn address_of(word: *mut Locked) -> *mut Locked {
    word.map_addr(|a| a & !FLAGS)
}

/// `set` ran: the process has ended.
pub(super) const ENDED: usize = 1;
/// The `Completion` was dropped.
pub(super) const ABANDONED: usize = 2;
/// The `Completion` registered a waker (it was awaited) at some point.
pub(super) const POLLED: usize = 4;
/// An `Abandoned` future registered a waker at some point.
pub(super) const WATCHED: usize = 8;

/// What the slot's lock guards.
#[derive(Debug, Default)]
pub(crate) struct Inner {
    pub(super) state: SlotState,
    /// The task awaiting the `Completion`, if it is awaited.
    pub(super) waiter: Option<Waker>,
    /// The tasks awaiting the end of the process through a completer, by
    /// key. Each future removes its own entry when dropped, so a handler
    /// that re-creates the future in a loop does not grow this list.
    /// Boxed on first use: most processes are never watched, and an idle
    /// process then carries one pointer instead of a vector and a counter.
    watchers: Option<Box<Watchers>>,
}

/// The wakers of `Abandoned` futures watching a slot, by key.
#[derive(Debug, Default)]
struct Watchers {
    list: Vec<(u64, Waker)>,
    next_key: u64,
}

#[derive(Debug, Default)]
pub(super) enum SlotState {
    #[default]
    Pending,
    Ready(Outcome),
    Taken,
    /// The `Completion` was dropped before the outcome arrived: nobody can
    /// take it, so it is not kept.
    Abandoned,
}

/// What a poll registered or replaced: dropped by the caller once the
/// slot's lock is released.
pub(crate) type Displaced = Option<Waker>;

impl ResultSlot {
    /// Sets `flag` in one read-modify-write and returns the flags as they
    /// were (a CAS loop: `AtomicPtr` has no `fetch_or` on stable Rust).
    fn raise(&self, flag: usize) -> usize {
        let mut current = self.word.load(Acquire);
        loop {
            let next = current.map_addr(|a| a | flag);
            match self
                .word
                .compare_exchange_weak(current, next, AcqRel, Acquire)
            {
                Ok(_) => return current.addr() & FLAGS,
                Err(seen) => current = seen,
            }
        }
    }

    /// The flags as they are now (for tests).
    #[cfg(test)]
    pub(super) fn flags(&self) -> usize {
        self.word.load(Acquire).addr() & FLAGS
    }

    /// Whether the locked part was allocated (for tests).
    #[cfg(all(test, not(loom)))]
    pub(super) fn has_locked_part(&self) -> bool {
        !address_of(self.word.load(Acquire)).is_null()
    }

    /// The locked part, allocated by the first caller that needs it. Two
    /// racing callers may both allocate; the one whose CAS loses frees its
    /// copy and uses the winner's, so every caller sees the same lock.
    pub(super) fn locked(&self) -> &Locked {
        let current = self.word.load(Acquire);
        let installed = address_of(current);
        if installed.is_null() {
            return self.install(current);
        }
        // SAFETY: a non-null address is the installed box, freed only by
        // `Drop`, which `&self` rules out; the Acquire load synchronised
        // with its installation.
        unsafe { &*installed }
    }

    #[cold]
    fn install(&self, mut current: *mut Locked) -> &Locked {
        let fresh = Box::into_raw(Box::<Locked>::default());
        loop {
            let installed = address_of(current);
            if !installed.is_null() {
                // SAFETY: `fresh` was never shared; `installed` is the
                // installed box, freed only by `Drop`.
                unsafe {
                    drop(Box::from_raw(fresh));
                    return &*installed;
                }
            }
            // Keeps whatever flags are set: they may change under us, and
            // then the CAS fails and we look again.
            let next = fresh.map_addr(|a| a | (current.addr() & FLAGS));
            match self
                .word
                .compare_exchange_weak(current, next, AcqRel, Acquire)
            {
                // SAFETY: installed just now; freed only by `Drop`.
                Ok(_) => return unsafe { &*fresh },
                Err(seen) => current = seen,
            }
        }
    }

    /// Stores the outcome and wakes waiters, blocking and async alike.
    /// Called once per process, when it ends.
    /// Hands the outcome back when its handle is gone: nobody will take it,
    /// and the caller drops it (a record can outlive its process in caches,
    /// and must not keep a result nobody can read).
    pub(crate) fn set(&self, outcome: Outcome) -> Option<Outcome> {
        let before = self.raise(ENDED);
        debug_assert!(before & ENDED == 0, "a process ends once");
        if before & (ABANDONED | POLLED | WATCHED) == ABANDONED {
            // The handle is gone, it never registered a waker, and nobody
            // watches: nobody can take the outcome or needs a wakeup.
            return Some(outcome);
        }
        let parts = self.locked();
        let mut locked = parts.inner.lock();
        debug_assert!(
            matches!(locked.state, SlotState::Pending | SlotState::Abandoned),
            "outcome reported twice"
        );
        // A watcher registered after `ENDED` was set sees it and does not
        // wait; one registered before is in the list.
        let watchers = locked.watchers.take().map(|w| w.list).unwrap_or_default();
        let waiter = locked.waiter.take();
        let unwanted = if before & ABANDONED != 0 || matches!(locked.state, SlotState::Abandoned) {
            Some(outcome)
        } else {
            locked.state = SlotState::Ready(outcome);
            None
        };
        drop(locked);
        parts.ready.notify_all();
        // Wakers are user code: a panicking one must not stop the others,
        // lose the outcome or unwind into the worker.
        if let Some(waiter) = waiter {
            crate::panic_guard::wake_user_waker(waiter, "a completion's waker");
        }
        for (_, watcher) in watchers {
            crate::panic_guard::wake_user_waker(watcher, "a completion watcher's waker");
        }
        unwanted
    }

    /// The handle is being dropped: an outcome already there is handed
    /// back to be dropped, one still to come will not be kept. The handle's
    /// waker is handed back too, to be dropped outside the lock.
    pub(super) fn abandon(&self) -> (Option<Outcome>, Displaced) {
        let before = self.raise(ABANDONED);
        if before & (ENDED | POLLED) == 0 {
            // No outcome yet and no waker of ours: the end sees `ABANDONED`
            // and keeps nothing.
            return (None, None);
        }
        let mut locked = self.locked().inner.lock();
        let waiter = locked.waiter.take();
        let outcome = match std::mem::replace(&mut locked.state, SlotState::Abandoned) {
            SlotState::Ready(outcome) => Some(outcome),
            SlotState::Pending | SlotState::Abandoned => None,
            SlotState::Taken => {
                locked.state = SlotState::Taken;
                None
            }
        };
        (outcome, waiter)
    }

    pub(super) fn take(state: &mut SlotState) -> Option<Outcome> {
        match std::mem::replace(state, SlotState::Taken) {
            SlotState::Ready(outcome) => Some(outcome),
            other => {
                *state = other;
                None
            }
        }
    }

    /// For the `Completion` future: the outcome if it is there (or
    /// `Err(AlreadyTaken)` if it was taken), else `None` with `waker`
    /// registered, replacing the one a previous poll left unless it would
    /// wake the same task.
    pub(super) fn poll_take(&self, waker: &Waker) -> Option<Outcome> {
        let mut locked = self.locked().inner.lock();
        if let Some(outcome) = Self::take(&mut locked.state) {
            let stale = locked.waiter.take();
            drop(locked);
            drop(stale);
            return Some(outcome);
        }
        if matches!(locked.state, SlotState::Taken) {
            return Some(Err(ExitError::AlreadyTaken));
        }
        // So that the handle's drop takes the lock, and the waker with it.
        self.raise(POLLED);
        let stale = match &mut locked.waiter {
            Some(registered) if registered.will_wake(waker) => None,
            slot => slot.replace(waker.clone()),
        };
        drop(locked);
        drop(stale);
        None
    }

    pub(super) fn is_ready(&self) -> bool {
        // The end sets `ENDED` before it stores the outcome.
        if self.word.load(Acquire).addr() & ENDED == 0 {
            return false;
        }
        matches!(self.locked().inner.lock().state, SlotState::Ready(_))
    }

    /// For an `Abandoned` future: `true` if the process has ended;
    /// otherwise registers (or refreshes) `waker` under `key`, allocating a
    /// key on the first poll. The displaced waker is the caller's to drop
    /// once the lock is released.
    pub(crate) fn watch(&self, key: &mut Option<u64>, waker: &Waker) -> (bool, Displaced) {
        let mut locked = self.locked().inner.lock();
        // Set under the lock, before the waker is listed: an end that does
        // not see `WATCHED` has set `ENDED`, seen here.
        if self.raise(WATCHED) & ENDED != 0 {
            return (true, None);
        }
        let watchers = locked.watchers.get_or_insert_with(Box::default);
        let known = key.and_then(|k| watchers.list.iter_mut().find(|(at, _)| *at == k));
        if let Some((_, registered)) = known {
            if registered.will_wake(waker) {
                return (false, None);
            }
            let old = std::mem::replace(registered, waker.clone());
            return (false, Some(old));
        }
        let k = watchers.next_key;
        watchers.next_key += 1;
        watchers.list.push((k, waker.clone()));
        *key = Some(k);
        (false, None)
    }

    /// An `Abandoned` future is dropped: its waker leaves the list (and is
    /// handed back, to be dropped outside the lock).
    pub(crate) fn unwatch(&self, key: u64) -> Displaced {
        let mut locked = self.locked().inner.lock();
        let watchers = locked.watchers.as_mut()?;
        let at = watchers.list.iter().position(|(k, _)| *k == key)?;
        Some(watchers.list.swap_remove(at).1)
    }

    /// How many `Abandoned` futures are registered (for tests).
    #[cfg(all(test, not(loom)))]
    pub(crate) fn watchers(&self) -> usize {
        self.locked()
            .inner
            .lock()
            .watchers
            .as_ref()
            .map_or(0, |w| w.list.len())
    }
}
