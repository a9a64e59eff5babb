//! Where a process's outcome is delivered, exactly once, and taken once;
//! and where async code waiting on that moment registers its wakers.
//!
//! Wakers are never dropped or woken with the lock held: dropping a waker
//! can drop a task, whose future may hold a `Completion` or an
//! `Abandoned` that locks this slot again.
//!
//! # The outcome kept without the lock
//!
//! A process that ends while its handle is alive but nobody waits yet (a
//! caller that collects its handles and waits on them later) would need
//! the locked part only to keep the outcome until the handle takes it. When
//! the ended process was stored inline in its record and its room is large
//! enough ([`Spare`]), the end writes the outcome there instead and marks
//! the word's address [`STORED`] in the same compare-and-swap that sets
//! `ENDED` (only from an empty word: no locked part, no flag). The handle
//! takes it with one compare-and-swap to [`TAKEN`]; any path that needs the
//! locked part later (a watcher, a poll after the outcome was taken) moves
//! what the word says into the locked part as it installs it. Exactly one
//! thread moves a stored outcome out of the room: the one whose CAS leaves
//! `STORED`. The loom models in `slot_loom.rs` check it against the
//! handle's take, poll and drop.

use std::task::Waker;

use std::fmt;
use std::ptr::{self, NonNull};
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed};

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

/// In a slot's word, instead of a locked part's address: the outcome is in
/// the record's spare room. (Below any allocation, and aligned as one.)
const STORED: usize = 1 << 4;
/// In a slot's word, instead of a locked part's address: the outcome kept
/// in the spare room was taken.
const TAKEN: usize = 2 << 4;

/// Room in a record where an outcome can be kept without the locked part:
/// the space of the ended process, when it was stored inline and is large
/// enough (see `cell.rs`). Valid for the record's life; written only by the
/// end, read only by the thread whose CAS left [`STORED`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Spare(pub(crate) NonNull<Outcome>);

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
            .field(
                "locked_part",
                &(!address_of(word).is_null() && !is_kept(address_of(word))),
            )
            .field("kept_in_room", &(address_of(word).addr() == STORED))
            .finish()
    }
}

impl Drop for ResultSlot {
    fn drop(&mut self) {
        let locked = address_of(self.word.load(Acquire));
        if !locked.is_null() && !is_kept(locked) {
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

/// Whether an address part says where a kept outcome is ([`STORED`] or
/// [`TAKEN`]) rather than pointing to a locked part.
fn is_kept(address: *mut Locked) -> bool {
    matches!(address.addr(), STORED | TAKEN)
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
        let address = address_of(self.word.load(Acquire));
        !address.is_null() && !is_kept(address)
    }

    /// The locked part, allocated by the first caller that needs it. Two
    /// racing callers may both allocate; the one whose CAS loses frees its
    /// copy and uses the winner's, so every caller sees the same lock. An
    /// outcome kept in `spare` moves into it (see the module docs).
    pub(super) fn locked(&self, spare: Option<Spare>) -> &Locked {
        let current = self.word.load(Acquire);
        let installed = address_of(current);
        if installed.is_null() || is_kept(installed) {
            return self.install(current, spare);
        }
        // SAFETY: a non-null address is the installed box, freed only by
        // `Drop`, which `&self` rules out; the Acquire load synchronised
        // with its installation.
        unsafe { &*installed }
    }

    #[cold]
    fn install(&self, mut current: *mut Locked, spare: Option<Spare>) -> &Locked {
        let fresh = Box::into_raw(Box::<Locked>::default());
        // SAFETY: `fresh` is ours until the CAS below publishes it, and
        // then freed only by `Drop`, which `&self` rules out.
        let parts = unsafe { &*fresh };
        loop {
            let installed = address_of(current);
            if !installed.is_null() && !is_kept(installed) {
                // SAFETY: `fresh` was never shared; `installed` is the
                // installed box, freed only by `Drop`.
                unsafe {
                    drop(Box::from_raw(fresh));
                    return &*installed;
                }
            }
            // Taking over a kept outcome: locked before it is published, so
            // whoever finds the new part waits until the outcome is in it.
            let adopting = is_kept(installed).then(|| parts.inner.lock());
            // Keeps whatever flags are set: they may change under us, and
            // then the CAS fails and we look again.
            let next = fresh.map_addr(|a| a | (current.addr() & FLAGS));
            match self
                .word
                .compare_exchange_weak(current, next, AcqRel, Acquire)
            {
                Ok(_) => {
                    if let Some(mut inner) = adopting {
                        inner.state = if installed.addr() == STORED {
                            let spare = spare.expect("a kept outcome's record has room");
                            // SAFETY: the CAS left `STORED`: the outcome the
                            // end wrote is ours alone to move out.
                            SlotState::Ready(unsafe { spare.0.as_ptr().read() })
                        } else {
                            SlotState::Taken
                        };
                    }
                    return parts;
                }
                Err(seen) => current = seen,
            }
        }
    }

    /// Takes the outcome kept in `spare` without the lock: `Some(Some(..))`
    /// with it, `Some(None)` if it was taken before, `None` if none was
    /// kept there (not ended yet, or kept in the locked part).
    pub(super) fn take_kept(&self, spare: Option<Spare>) -> Option<Option<Outcome>> {
        let mut current = self.word.load(Acquire);
        loop {
            match address_of(current).addr() {
                STORED => {
                    let next = current.map_addr(|a| (a & FLAGS) | TAKEN);
                    // Acquire: pairs with the end's release, which wrote
                    // the outcome before it published `STORED`.
                    match self
                        .word
                        .compare_exchange_weak(current, next, AcqRel, Acquire)
                    {
                        Ok(_) => {
                            let spare = spare.expect("a kept outcome's record has room");
                            // SAFETY: the CAS left `STORED`: ours alone.
                            return Some(Some(unsafe { spare.0.as_ptr().read() }));
                        }
                        Err(seen) => current = seen,
                    }
                }
                TAKEN => return Some(None),
                _ => return None,
            }
        }
    }

    /// Drops an outcome still kept in `spare` (the record is being freed).
    ///
    /// # Safety
    ///
    /// The caller has the last reference to the record `spare` is in.
    pub(crate) unsafe fn drop_kept(&self, spare: Option<Spare>) {
        if let Some(Some(outcome)) = self.take_kept(spare) {
            drop(outcome);
        }
    }

    /// Stores the outcome and wakes waiters, blocking and async alike.
    /// Called once per process, when it ends.
    /// Hands the outcome back when its handle is gone: nobody will take it,
    /// and the caller drops it (a record can outlive its process in caches,
    /// and must not keep a result nobody can read).
    pub(crate) fn set(&self, mut outcome: Outcome, spare: Option<Spare>) -> Option<Outcome> {
        if let Some(room) = spare {
            // Nobody has dropped the handle, waited, polled or watched:
            // keep the outcome in the room, with no lock (module docs).
            if self.word.load(Relaxed).addr() == 0 {
                // SAFETY: the room is the ended process's, unused until the
                // CAS below publishes what is written here.
                unsafe { room.0.as_ptr().write(outcome) };
                let kept = ptr::without_provenance_mut(STORED | ENDED);
                // Release: the outcome written above is seen by whoever
                // reads `STORED`.
                match self
                    .word
                    .compare_exchange(ptr::null_mut(), kept, AcqRel, Relaxed)
                {
                    Ok(_) => return None,
                    // SAFETY: not published: still ours.
                    Err(_) => outcome = unsafe { room.0.as_ptr().read() },
                }
            }
        }
        let before = self.raise(ENDED);
        debug_assert!(before & ENDED == 0, "a process ends once");
        if before & (ABANDONED | POLLED | WATCHED) == ABANDONED {
            // The handle is gone, it never registered a waker, and nobody
            // watches: nobody can take the outcome or needs a wakeup.
            return Some(outcome);
        }
        // No outcome is kept in the room yet: nothing to move.
        let parts = self.locked(None);
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
    pub(super) fn abandon(&self, spare: Option<Spare>) -> (Option<Outcome>, Displaced) {
        let before = self.raise(ABANDONED);
        if before & (ENDED | POLLED) == 0 {
            // No outcome yet and no waker of ours: the end sees `ABANDONED`
            // and keeps nothing.
            return (None, None);
        }
        if let Some(kept) = self.take_kept(spare) {
            // Kept in the room (and never polled, so no waker to drop).
            return (kept, None);
        }
        let mut locked = self.locked(spare).inner.lock();
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
    pub(super) fn poll_take(&self, waker: &Waker, spare: Option<Spare>) -> Option<Outcome> {
        if let Some(kept) = self.take_kept(spare) {
            return Some(kept.ok_or(ExitError::AlreadyTaken).and_then(|o| o));
        }
        let mut locked = self.locked(spare).inner.lock();
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

    pub(super) fn is_ready(&self, spare: Option<Spare>) -> bool {
        // The end sets `ENDED` before it stores the outcome.
        let word = self.word.load(Acquire);
        if word.addr() & ENDED == 0 {
            return false;
        }
        match address_of(word).addr() {
            STORED => true,
            TAKEN => false,
            _ => matches!(self.locked(spare).inner.lock().state, SlotState::Ready(_)),
        }
    }

    /// For an `Abandoned` future: `true` if the process has ended;
    /// otherwise registers (or refreshes) `waker` under `key`, allocating a
    /// key on the first poll. The displaced waker is the caller's to drop
    /// once the lock is released.
    pub(crate) fn watch(
        &self,
        key: &mut Option<u64>,
        waker: &Waker,
        spare: Option<Spare>,
    ) -> (bool, Displaced) {
        let mut locked = self.locked(spare).inner.lock();
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
    pub(crate) fn unwatch(&self, key: u64, spare: Option<Spare>) -> Displaced {
        let mut locked = self.locked(spare).inner.lock();
        let watchers = locked.watchers.as_mut()?;
        let at = watchers.list.iter().position(|(k, _)| *k == key)?;
        Some(watchers.list.swap_remove(at).1)
    }

    /// How many `Abandoned` futures are registered (for tests).
    #[cfg(all(test, not(loom)))]
    pub(crate) fn watchers(&self) -> usize {
        self.locked(None)
            .inner
            .lock()
            .watchers
            .as_ref()
            .map_or(0, |w| w.list.len())
    }
}
