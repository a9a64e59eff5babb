//! Registered names: find a process by a name instead of a PID.

use std::collections::hash_map::{Entry, HashMap, RandomState};
use std::hash::BuildHasher;
use std::sync::Arc as StdArc;

use crossbeam_utils::CachePadded;
use relay::{Package, Pid, SendError};

use super::stepping::Stepping;
use super::Context;
use crate::contract::down::NameError;
use crate::contract::output::Output;
use crate::contract::step_engine::StepNames;
use crate::record::state::{state_of, COMPLETE};
use crate::record::Record;
use crate::sync::{Arc, Mutex};

/// Shards of the name table: registrations and lookups of different names
/// rarely meet on one lock.
const SHARDS: usize = 64;

/// One shard of the table: name to the record holding it.
type Shard = Mutex<HashMap<StdArc<str>, Arc<Record>>>;

/// The name table, sharded by the name's hash.
#[derive(Debug)]
pub(crate) struct Names {
    hasher: RandomState,
    shards: Box<[CachePadded<Shard>]>,
}

impl Default for Names {
    fn default() -> Self {
        Names {
            hasher: RandomState::new(),
            shards: (0..SHARDS)
                .map(|_| CachePadded::new(Mutex::new(HashMap::new())))
                .collect(),
        }
    }
}

fn ended(record: &Record) -> bool {
    state_of(record.state.load()) == COMPLETE
}

impl Names {
    fn shard(&self, name: &str) -> &Shard {
        &self.shards[(self.hasher.hash_one(name) as usize) % SHARDS]
    }

    /// The live record holding `name`.
    fn lookup(&self, name: &str) -> Option<Arc<Record>> {
        let shard = self.shard(name).lock();
        shard.get(name).filter(|r| !ended(r)).cloned()
    }

    /// Drops `name` if `record` still holds it (its process ended).
    pub(crate) fn release(&self, name: &str, record: &Record) {
        let removed = {
            let mut shard = self.shard(name).lock();
            match shard.get(name) {
                Some(holder) if std::ptr::eq(&**holder, record) => shard.remove(name),
                _ => None,
            }
        };
        drop(removed);
    }
}

impl Context {
    /// Gives `pid` the name `name`, until it ends (or the name is
    /// unregistered): [`whereis`](Context::whereis) and
    /// [`post_named`](Context::post_named) then find it. A process may
    /// hold several names.
    ///
    /// # Errors
    ///
    /// [`NameError::Taken`] if a live process holds the name (a name whose
    /// process has ended is free), [`NameError::NoProcess`] if no live
    /// process has the PID.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::actor::NameError;
    ///
    /// struct Service;
    /// impl Process for Service {
    ///     fn step(&mut self, _: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let scheduler = Scheduler::builder().workers(1).build();
    /// let a = scheduler.spawn(Service)?;
    /// let b = scheduler.spawn(Service)?;
    /// scheduler.register_name("db", a.pid())?;
    /// assert_eq!(scheduler.whereis("db"), Some(a.pid()));
    /// assert!(matches!(scheduler.register_name("db", b.pid()), Err(NameError::Taken { .. })));
    /// scheduler.post_named("db", "hello")?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn register_name(&self, name: &str, pid: Pid) -> Result<(), NameError> {
        let shared = self.shared();
        let Some(record) = shared.processes.get(pid) else {
            return Err(NameError::NoProcess(pid));
        };
        let name: StdArc<str> = StdArc::from(name);
        // Lock order: the process's relations, then the table's shard (the
        // end of a process takes its names, then locks the shards).
        let registered = record.relations.with_live(|related| {
            let mut shard = shared.names.shard(&name).lock();
            match shard.entry(StdArc::clone(&name)) {
                Entry::Occupied(mut holder) => {
                    if ended(holder.get()) {
                        holder.insert(Arc::clone(&record));
                    } else if !std::ptr::eq(&**holder.get(), &*record) {
                        return Err(NameError::Taken {
                            name: StdArc::clone(&name),
                            by: holder.get().pid,
                        });
                    }
                }
                Entry::Vacant(slot) => {
                    slot.insert(Arc::clone(&record));
                }
            }
            related.names.push(StdArc::clone(&name));
            Ok(())
        });
        registered.unwrap_or(Err(NameError::NoProcess(pid)))
    }

    /// Removes `name`; returns the PID that held it.
    ///
    /// # Examples
    ///
    /// ```
    /// let engine = sched::Engine::builder().workers(1).build();
    /// assert_eq!(engine.unregister_name("nobody"), None);
    /// ```
    pub fn unregister_name(&self, name: &str) -> Option<Pid> {
        let removed = self.shared().names.shard(name).lock().remove(name);
        removed.filter(|r| !ended(r)).map(|r| r.pid)
    }

    /// The PID of the live process holding `name`.
    ///
    /// # Examples
    ///
    /// See [`register_name`](Context::register_name).
    pub fn whereis(&self, name: &str) -> Option<Pid> {
        self.shared().names.lookup(name).map(|r| r.pid)
    }

    /// Sends `payload` from [`Pid::OUTSIDE`] to the process holding
    /// `name`.
    ///
    /// # Errors
    ///
    /// No live process holds the name: the error (kind
    /// [`UnknownTarget`](relay::SendErrorKind::UnknownTarget), target
    /// [`Pid::OUTSIDE`]) hands the payload back; or the process refused it,
    /// as for [`send`](Context::send).
    ///
    /// # Examples
    ///
    /// See [`register_name`](Context::register_name).
    pub fn post_named(
        &self,
        name: &str,
        payload: impl std::any::Any + Send,
    ) -> Result<(), SendError> {
        let shared = self.shared();
        match shared.names.lookup(name) {
            Some(record) => {
                shared.deliver_message(&record, Package::new(Pid::OUTSIDE, record.pid, payload))
            }
            None => Err(SendError::unknown_target(Package::new(
                Pid::OUTSIDE,
                Pid::OUTSIDE,
                payload,
            ))),
        }
    }
}

impl Output<'_> {
    /// Gives this process the name `name` until it ends (see
    /// [`Context::register_name`](crate::Context::register_name)).
    ///
    /// # Errors
    ///
    /// [`NameError::Taken`] if another live process holds the name.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::Output;
    /// fn become_the_registry(out: &mut Output<'_>) -> Result<(), sched::NameError> {
    ///     out.register_name("registry")
    /// }
    /// ```
    pub fn register_name(&mut self, name: &str) -> Result<(), NameError> {
        self.engine.register_name(name)
    }
}

impl StepNames for Stepping<'_> {
    fn register_name(&self, name: &str) -> Result<(), NameError> {
        Context::of(self.shared).register_name(name, self.record.pid)
    }
}
