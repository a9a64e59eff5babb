//! The engine's side of the process registry: which free-id cache a
//! thread uses, allocating a PID, and taking a process out of the registry
//! when it ends.
//!
//! The feature owns its state: the process table
//! ([`Registry<Record>`](crate::table::registry::Registry), the shared
//! state's `processes`), and its free ids, of which each worker keeps a
//! cache in its own `Local`. Its operations here are methods of that
//! table; they take the engine (`&Shared`) only to find this thread's
//! worker of that engine, whose cache they use.

use relay::{Pid, PidsExhausted};

use super::shared::Shared;
use crate::record::{Record, RecordRef};
use crate::runqueue::local;
use crate::table::registry::Registry;
use crate::table::{Counted, IdCache, Keyed};

impl Keyed for Record {
    type Ref = RecordRef;

    fn pid(&self) -> Pid {
        self.pid
    }
}

impl Counted<Record> for RecordRef {
    fn into_raw(this: Self) -> *const Record {
        RecordRef::into_raw(this)
    }

    unsafe fn from_raw(ptr: *const Record) -> Self {
        // SAFETY: forwarded from the caller.
        unsafe { RecordRef::from_raw(ptr) }
    }

    fn as_ptr(this: &Self) -> *const Record {
        RecordRef::as_ptr(this)
    }

    unsafe fn increment(ptr: *const Record) {
        // SAFETY: forwarded from the caller.
        unsafe { RecordRef::increment(ptr) }
    }
}

impl Registry<Record> {
    /// Runs `f` with this thread's free-id cache: its worker's (a worker
    /// of `engine`), or none on a thread that is not a worker of this
    /// engine (the registry's shared pool serves those).
    pub(crate) fn with_ids<R>(
        &self,
        engine: &Shared,
        f: impl FnOnce(Option<&mut IdCache>) -> R,
    ) -> R {
        let mut f = Some(f);
        let on_worker = local::with_local(engine, |local| {
            let f = f.take().expect("called once");
            f(Some(&mut local.ids.borrow_mut()))
        });
        match on_worker {
            Some(result) => result,
            None => f.take().expect("not called on a worker")(None),
        }
    }

    /// A fresh PID, reserved for a later `submit`.
    pub(crate) fn allocate_pid(&self, engine: &Shared) -> Result<Pid, PidsExhausted> {
        self.with_ids(engine, |ids| self.allocate(ids))
    }

    /// Takes `record`, whose process ended, out of the registry: its PID
    /// finds nothing from now on, and its table slot is free for the next
    /// generation.
    pub(crate) fn unregister_ended(&self, engine: &Shared, record: &RecordRef) {
        let removed = self.with_ids(engine, |ids| self.unregister(record.pid, record, ids));
        // Dropped outside the cache's borrow (it is not the last count: the
        // caller holds one).
        drop(removed);
    }
}
