//! Every registered process: those under PIDs the engine allocated (the
//! [`ProcessTable`]) and those under PIDs users chose (a
//! [`relay::Router`]), kept so that no PID is live in both at once.
//!
//! # Which side a registration takes
//!
//! A PID whose slot is reserved for it (it came from `allocate`) is claimed
//! in the table. Any other PID goes to the router: a PID the user made up,
//! one of another node, or an allocated PID submitted again after its
//! process ended (the user's choice to reuse it, as with any PID they
//! pick).
//!
//! # Why one PID is never live on both sides
//!
//! A user may submit, by hand, a PID the table is about to hand out or has
//! just registered. Each side publishes first and checks the other after a
//! `SeqCst` fence:
//!
//! ```text
//! table side T                          user side U
//! T1 CAS slot RESERVED -> record        U1 users += 1
//! T2 fence(SeqCst)                      U2 router insert (fails on a duplicate)
//! T3 if users != 0: router has PID?     U3 fence(SeqCst)
//!    yes: undo T1, refused              U4 table holds PID? yes: undo U2, U1, refused
//! ```
//!
//! The two fences are ordered one way or the other in the single total
//! order of `SeqCst` operations. If U3 comes first, T3 reads U1's increment
//! (or a later value) and U2's insert: T is refused. If T2 comes first, U4
//! reads T1's record (or a later state of the slot, which means T's
//! process has ended already): U is refused. So at most one succeeds; both
//! may be refused, which is right for U (the PID was registered in the
//! table when it looked) and harmless for T when it is a spawn (it takes
//! another PID). U only reaches the router for a PID whose slot was not
//! reserved for it, so this race needs a user to pick by hand the very PID
//! being allocated; two submitters of one allocated PID meet in the slot's
//! CAS instead, and exactly one of them registers.
//! The loom model `user_and_table_register_the_same_pid` explores it.
//!
//! The counter keeps the table side off the router while no user PID is
//! registered: then a table registration, a table lookup that misses, and
//! an unregistration touch nothing shared.

use std::sync::atomic::Ordering::{Acquire, SeqCst};

use relay::{Pid, PidsExhausted, Router};

use super::{Claim, IdCache, Keyed, ProcessTable};
use crate::sync::{fence, AtomicUsize};

/// The table for allocated PIDs and the router for chosen ones.
pub(crate) struct Registry<T: Keyed> {
    table: ProcessTable<T>,
    users: Router<T::Ref>,
    /// Registrations in `users`, plus those under way (an upper bound).
    user_count: AtomicUsize,
}

impl<T: Keyed> Registry<T> {
    pub(crate) fn new(node: u32) -> Self {
        Registry {
            table: ProcessTable::new(node),
            users: Router::new(),
            user_count: AtomicUsize::new(0),
        }
    }

    /// The node of this engine's PIDs.
    pub(crate) fn node(&self) -> u32 {
        self.table.node()
    }

    /// A fresh PID, reserved in the table (see [`ProcessTable::allocate`]).
    pub(crate) fn allocate(&self, cache: Option<&mut IdCache>) -> Result<Pid, PidsExhausted> {
        self.table.allocate(cache)
    }

    /// Gives up `pid`'s reservation if it still stands.
    pub(crate) fn cancel(&self, pid: Pid, cache: Option<&mut IdCache>) {
        self.table.cancel(pid, cache);
    }

    /// Registers `record` under `pid`; `false` if `pid` is live already
    /// (on either side). A reserved PID that turns out to be a user's is
    /// burnt: its slot moves on to the next generation.
    ///
    /// A successful registration is followed by a `SeqCst` fence before
    /// this returns: a caller that then reads a flag (shutdown's) needs no
    /// fence of its own.
    pub(crate) fn register(&self, pid: Pid, record: &T::Ref, cache: Option<&mut IdCache>) -> bool {
        let unreserved = match self.table.register(pid, record.clone()) {
            Claim::Registered => {
                fence(SeqCst);
                if self.user_count.load(SeqCst) != 0 && self.users.contains(pid) {
                    tracing::debug!(%pid, "an allocated PID was taken by hand");
                    drop(self.table.unregister(pid, record, cache));
                    return false;
                }
                return true;
            }
            // A second submission of a PID the table holds never reaches
            // the router: of two submitters of one allocated PID, exactly
            // one registers.
            Claim::Live(record) => {
                drop(record);
                return false;
            }
            Claim::Unreserved(record) => record,
        };
        self.user_count.fetch_add(1, SeqCst);
        if self.users.register(pid, unreserved).is_err() {
            self.user_count.fetch_sub(1, SeqCst);
            return false;
        }
        fence(SeqCst);
        if self.table.holds(pid) {
            drop(self.users.unregister(pid));
            self.user_count.fetch_sub(1, SeqCst);
            return false;
        }
        true
    }

    /// Removes `record`, registered under `pid`, from whichever side holds
    /// it; returns the reference that side held (to be dropped by the
    /// caller, outside any borrow of `cache`).
    pub(crate) fn unregister(
        &self,
        pid: Pid,
        record: &T::Ref,
        cache: Option<&mut IdCache>,
    ) -> Option<T::Ref> {
        if let Some(removed) = self.table.unregister(pid, record, cache) {
            return Some(removed);
        }
        let removed = self.users.unregister(pid)?;
        self.user_count.fetch_sub(1, SeqCst);
        Some(removed)
    }

    /// The record registered under `pid`, if any.
    #[inline]
    pub(crate) fn get(&self, pid: Pid) -> Option<T::Ref> {
        match self.table.get(pid) {
            Some(record) => Some(record),
            // Acquire is enough: a lookup ordered after a registration by
            // happens-before reads its increment (or a later value).
            None if self.user_count.load(Acquire) != 0 => self.users.lookup(pid),
            None => None,
        }
    }

    /// Whether a record is registered under `pid`, on either side; for a
    /// PID of the table, one read of its slot (no count taken).
    pub(crate) fn holds(&self, pid: Pid) -> bool {
        self.table.holds(pid)
            || (self.user_count.load(Acquire) != 0 && self.users.lookup(pid).is_some())
    }

    /// Whether `pid` was handed out by the table to a process that has
    /// ended or is ending (its record still registered, but refusing):
    /// what a caller that found no live process under `pid` reports as
    /// "ended" rather than "never existed". `false` for a PID users chose.
    pub(crate) fn handed_out(&self, pid: Pid) -> bool {
        self.table.holds(pid) || self.table.ended(pid)
    }

    /// Whether `pid` was handed out by the table and no process holds it
    /// any more, on either side (see [`ProcessTable::ended`]). A PID users
    /// chose leaves no trace when its process ends: `false` for it.
    pub(crate) fn ended(&self, pid: Pid) -> bool {
        self.table.ended(pid) && self.get(pid).is_none()
    }

    /// Runs `f` on every registered record, on both sides: the table's
    /// under its slots' locks, with no count taken (see
    /// [`ProcessTable::visit`]; the same rules for `f`), the chosen PIDs'
    /// looked up one by one.
    pub(crate) fn visit(&self, mut f: impl FnMut(&T)) {
        self.table.visit(&mut f);
        if self.user_count.load(Acquire) != 0 {
            for record in self
                .users
                .pids()
                .into_iter()
                .filter_map(|pid| self.users.lookup(pid))
            {
                f(&record);
            }
        }
    }

    /// Every registered PID, on both sides. A registration that completed
    /// before a `SeqCst` fence that precedes this call is in the list.
    pub(crate) fn pids(&self) -> Vec<Pid> {
        let mut pids = self.table.pids();
        pids.extend(self.users.pids());
        pids
    }
}

impl<T: Keyed> std::fmt::Debug for Registry<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("table", &self.table)
            .field("users", &self.users)
            .finish()
    }
}
