//! One slot of the process table: a single word that is empty, reserved
//! for one generation, or owns one reference to a process's record.
//!
//! ```text
//! 0                       EMPTY     never used (its id is in a fresh range)
//! (generation << 2) | 11  VACANT    free since `generation` ended (its next
//!                                   id is held by a free-id cache)
//! (generation << 2) | 10  RESERVED  handed out as a PID, not registered yet
//! pointer                 OCCUPIED  owns one strong count of the record
//! pointer | 01            LOCKED    occupied, and a reader is taking a count
//! ```
//!
//! A record is at least 4-aligned, so the two low bits of a pointer are
//! zero and the tags cannot be mistaken for one. A vacant word remembers
//! the generation that ended so that a lookup that misses can tell a PID
//! that ended from one never handed out ([`Slot::used`]).
//!
//! Who writes the word, and how (see `table/PROTOCOL.md`):
//! - the holder of a free id: `EMPTY or VACANT -> RESERVED` (a store:
//!   nobody else writes a free word);
//! - a registration: `RESERVED(g) -> OCCUPIED` (CAS: of two submitters of
//!   the same PID exactly one wins);
//! - a refused spawn: `RESERVED(g) -> VACANT(g)` (CAS);
//! - unregistering: `OCCUPIED -> VACANT(g)` (CAS expecting the record's own,
//!   unlocked pointer);
//! - a reader: `OCCUPIED -> LOCKED -> OCCUPIED` around one reference-count
//!   increment.
//!
//! Why a reader never touches freed memory: it dereferences the pointer
//! only after its CAS to LOCKED succeeded, and that CAS expects the
//! unlocked pointer. So at that instant the slot still owned its count on
//! the record, and unregistering (which also expects the unlocked pointer)
//! cannot take that count away before the reader stores the word back. If
//! the pointer the reader first loaded was freed and the same address now
//! holds the slot's next record (ABA), the CAS succeeds on the *new*
//! record, which the slot owns just the same; the reader then compares the
//! record's PID with the one it looks for and finds a different generation.

use std::ptr;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};

use relay::Pid;

use super::Counted;
use super::Keyed;
use crate::sync::{spin_hint, AtomicPtr};

/// Set on an occupied word while a reader holds it.
const LOCKED: usize = 0b01;
/// The tag of a reserved word (its generation is in the bits above).
const RESERVED: usize = 0b10;
/// The tag of a vacant word (the generation that ended is above it).
const VACANT: usize = 0b11;
const TAGS: usize = 0b11;

/// What a slot's word says of one generation of its PID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Use {
    /// The slot has not reached this generation yet: the PID was never
    /// handed out.
    Unused,
    /// The slot is reserved for this generation: handed out, not started.
    Reserved,
    /// A record is registered under this generation.
    Live,
    /// The slot has moved past this generation: the PID was handed out and
    /// its process (or its refused start) is over.
    Ended,
}

/// One slot: see the module documentation for the states of its word.
pub(super) struct Slot<T: Keyed> {
    word: AtomicPtr<T>,
}

impl<T: Keyed> Slot<T> {
    pub(super) fn new() -> Self {
        const { assert!(align_of::<T>() >= 4, "the tags need two free low bits") };
        Slot {
            word: AtomicPtr::new(ptr::null_mut()),
        }
    }

    /// `EMPTY -> RESERVED(generation)`. Only the holder of the slot's free
    /// id calls this, and nobody else writes an empty word.
    pub(super) fn reserve(&self, generation: u32) {
        // Release: a submitter on another thread got the PID through some
        // synchronisation with this one, so it sees this store (or later).
        self.word.store(reserved(generation), Release);
    }

    /// `RESERVED(generation) -> OCCUPIED(record)`; hands `record` back if
    /// the word was anything else (registered already, cancelled, or never
    /// reserved for this generation).
    pub(super) fn claim(&self, generation: u32, record: T::Ref) -> Result<(), T::Ref> {
        let raw = T::Ref::into_raw(record).cast_mut();
        // Release: a reader that locks the word sees the record built.
        match self
            .word
            .compare_exchange(reserved(generation), raw, Release, Relaxed)
        {
            Ok(_) => Ok(()),
            // SAFETY: `raw` came from `into_raw` just above and was not
            // stored: the count it stands for is still ours.
            Err(_) => Err(unsafe { T::Ref::from_raw(raw) }),
        }
    }

    /// `RESERVED(generation) -> VACANT(generation)`; whether this call did
    /// it (the caller then holds the slot's next id).
    pub(super) fn cancel(&self, generation: u32) -> bool {
        self.word
            .compare_exchange(reserved(generation), vacant(generation), Relaxed, Relaxed)
            .is_ok()
    }

    /// `OCCUPIED(record) -> VACANT(generation)` when the word holds exactly
    /// `record`, registered for `generation`; returns the slot's reference.
    /// Waits out a reader holding the word.
    pub(super) fn remove(&self, record: &T::Ref, generation: u32) -> Option<T::Ref> {
        let expected = T::Ref::as_ptr(record).cast_mut();
        loop {
            // Acquire: every reader's increment happened before its
            // unlocking store, which this reads (or a later one): the count
            // handed back is never the last while a reader still counts.
            match self
                .word
                .compare_exchange(expected, vacant(generation), Acquire, Relaxed)
            {
                // SAFETY: the word owned one count on `expected` (stored by
                // `claim` from `into_raw`), and the successful CAS moved
                // that ownership to us: no reader holds the word (it was
                // unlocked) and no other remover can succeed.
                Ok(_) => return Some(unsafe { T::Ref::from_raw(expected) }),
                Err(now) if now == expected.map_addr(|a| a | LOCKED) => spin_hint(),
                Err(_) => return None,
            }
        }
    }

    /// Runs `f` on the occupant while holding the word locked, so that the
    /// occupant cannot be freed meanwhile. `f` must be short and must not
    /// panic (it is a comparison and a reference-count increment).
    fn read<R>(&self, f: impl FnOnce(*const T) -> R) -> Option<R> {
        let mut current = self.word.load(Relaxed);
        loop {
            let addr = current.addr();
            if addr == 0 || addr & RESERVED != 0 {
                return None;
            }
            if addr & LOCKED != 0 {
                spin_hint();
                current = self.word.load(Relaxed);
                continue;
            }
            let locked = current.map_addr(|a| a | LOCKED);
            // Acquire: pairs with `claim`'s release (the record is built)
            // and with the previous reader's unlocking store.
            match self
                .word
                .compare_exchange_weak(current, locked, Acquire, Relaxed)
            {
                Ok(_) => {
                    let result = f(current);
                    // Release: the increment `f` made happens before a
                    // remover's CAS reads this value.
                    self.word.store(current, Release);
                    return Some(result);
                }
                Err(now) => current = now,
            }
        }
    }
}

impl<T: Keyed> Slot<T> {
    /// The occupant's record if its PID is `pid`, with a count of its own.
    pub(super) fn get(&self, pid: Pid) -> Option<T::Ref> {
        self.read(|raw| {
            // SAFETY: `read` holds the word locked: the slot's count keeps
            // the record alive until the word is unlocked.
            let matches = unsafe { &*raw }.pid() == pid;
            matches.then(|| {
                // SAFETY: as above, and `raw` is the pointer the slot got
                // from `into_raw` (not one derived from a shared
                // reference, which may not write the count); the count
                // added here is the one the returned reference owns.
                unsafe {
                    T::Ref::increment(raw);
                    T::Ref::from_raw(raw)
                }
            })
        })
        .flatten()
    }

    /// Runs `f` on the occupant, if the slot is occupied, without taking a
    /// count of it: the word stays locked for the call, so `f` must be
    /// short, must not panic and must not take a lock (it reads a few of
    /// the record's atomics).
    pub(super) fn visit<R>(&self, f: impl FnOnce(&T) -> R) -> Option<R> {
        // SAFETY: as in `get`: the word is locked and the slot's count keeps
        // the record alive for the call.
        self.read(|raw| f(unsafe { &*raw }))
    }

    /// The occupant's PID, if the slot is occupied.
    pub(super) fn occupant_pid(&self) -> Option<Pid> {
        // SAFETY: as in `get`.
        self.read(|record| unsafe { &*record }.pid())
    }

    /// What the word says of `generation` (the generation of a PID whose
    /// index is this slot's). Only for telling a PID that ended from one
    /// never handed out after a lookup missed: the answer may be stale by
    /// the time it is read, but a slot never goes back to a generation, so
    /// `Ended` and `Unused`-then-`Ended` are the only changes it can miss.
    pub(super) fn used(&self, generation: u32) -> Use {
        let word = self.word.load(Acquire).addr();
        let compare = |other: u32, at: Use| match generation.cmp(&other) {
            std::cmp::Ordering::Less => Use::Ended,
            std::cmp::Ordering::Equal => at,
            std::cmp::Ordering::Greater => Use::Unused,
        };
        match word & TAGS {
            _ if word == 0 => Use::Unused,
            VACANT => compare(word_generation(word), Use::Ended),
            RESERVED => compare(word_generation(word), Use::Reserved),
            _ => match self.occupant_pid().and_then(|pid| super::decode(pid.id())) {
                Some((_, other)) => compare(other, Use::Live),
                // Vacated while we looked: it moved past the occupant we
                // saw, so ask again.
                None => self.used(generation),
            },
        }
    }

    /// Whether the occupant's PID is `pid` (no count taken).
    pub(super) fn holds(&self, pid: Pid) -> bool {
        // SAFETY: as in `get`.
        self.read(|record| unsafe { &*record }.pid() == pid)
            .unwrap_or(false)
    }
}

impl<T: Keyed> Drop for Slot<T> {
    fn drop(&mut self) {
        let word = self.word.load(Relaxed);
        let addr = word.addr();
        if addr != 0 && addr & RESERVED == 0 {
            // SAFETY: an occupied word owns one count on the record (no
            // reader can hold it: we have `&mut self`).
            drop(unsafe { T::Ref::from_raw(word.map_addr(|a| a & !LOCKED).cast_const()) });
        }
    }
}

/// The word of a slot whose `generation` ended.
fn vacant<T>(generation: u32) -> *mut T {
    ptr::without_provenance_mut(((generation as usize) << 2) | VACANT)
}

/// The generation in a reserved or vacant word.
fn word_generation(word: usize) -> u32 {
    (word >> 2) as u32
}

/// The word of a slot reserved for `generation`.
/// (`generation` is below `super::GENERATIONS`, so the shift loses no bit
/// on any target.)
fn reserved<T>(generation: u32) -> *mut T {
    ptr::without_provenance_mut(((generation as usize) << 2) | RESERVED)
}

impl<T: Keyed> std::fmt::Debug for Slot<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slot").finish_non_exhaustive()
    }
}
