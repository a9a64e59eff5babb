//! Registered names: find a process by a name instead of a PID.
//!
//! # Sends that wait for a name
//!
//! A name lapses while its process restarts under a new PID (between the
//! end of the old one and the registration by the new one). A send that
//! may wait parks there instead of failing:
//!
//! - from outside, a send [`Within`] a name blocks its thread on the
//!   name's shard's condition variable, which every registration in that
//!   shard notifies; the holder is looked up under the shard's lock, so a
//!   registration cannot slip between the look and the wait;
//! - from a step, a send [`Within`] a name parks the package in the
//!   shard, in order, with its deadline. The registration of the name
//!   delivers every parked package still in time, in parking order, under
//!   the shard's lock: a later send, which finds the holder under the same
//!   lock, cannot overtake them. A timer set at the deadline (on the
//!   sender's record, not listed among its timers, so that it fires even
//!   after the sender ended) sweeps what is still parked and late into the
//!   dead letters. A registration that finds late packages dead-letters
//!   them too. Nothing parked is lost: each package is delivered or
//!   dead-lettered exactly once (`tests/waiting_for_a_name.rs`).
//!
//! A holder that is ending counts as none. A process's end marks it
//! complete, then closes its mailbox, then frees its names; a send that
//! found the holder live just before may reach a closed mailbox. Both
//! sends then go on as if nobody held the name (park, or wait for the
//! next registration) instead of failing with `Closed`; the ending record
//! is passed over until it is released
//! (`a_holder_ending_under_racing_sends_never_makes_them_fail`).
//!
//! # State
//!
//! The feature owns its state: the name table
//! ([`Names`](table::Names), the shared state's `names`: holders, parked
//! sends, the outside waiters' count). Its operations on the engine's
//! side are methods of that table, written here; they take the engine
//! (`&Shared`) only for what other features do: delivering a message,
//! the process table, the clock and the sweep's timer, dead letters.

pub(crate) mod table;

use std::collections::hash_map::Entry;
use std::sync::Arc as StdArc;
use std::time::{Duration, Instant};

use relay::{Package, Pid, SendError, SendErrorKind};

use super::routing::{Sender, Target};
use super::shared::Shared;
use super::Context;
use crate::contract::down::NameError;
use crate::contract::event::Event;
use crate::contract::output::Output;
use crate::record::RecordRef;
use std::sync::atomic::Ordering::{Relaxed, Release, SeqCst};

use crate::timer::{Action, What};
use table::{ended, live_holder, Names, Parked};

impl Names {
    /// Sends `payload` from the process `from` to the holder of `name`; if
    /// nobody holds it, parks it there until `wait` has passed (see the
    /// module documentation).
    fn send_named_within(
        &self,
        engine: &Shared,
        from: Pid,
        name: &str,
        payload: relay::Payload,
        wait: Duration,
    ) -> Result<(), SendError> {
        let shard = self.shard(name);
        let mut payload = payload;
        // A holder whose mailbox closed (it is ending, its name not yet
        // released) counts as none: the send parks for the next holder
        // instead of failing in the instant between the end and the
        // release.
        let mut refused: Option<RecordRef> = None;
        let mut maps = loop {
            let maps = shard.maps.lock();
            let Some(record) = live_holder(&maps.holders, name, refused.as_ref()) else {
                break maps;
            };
            // Nothing is parked for a held name (its registration took
            // it, under this lock), so delivering after the unlock keeps
            // the order.
            drop(maps);
            let package = Package::from_payload(from, record.pid, payload);
            match engine.deliver_message(&record, package) {
                Err(error) if error.kind() == SendErrorKind::Ended => {
                    payload = error.into_package().into_payload();
                    refused = Some(record);
                }
                sent => return sent,
            }
        };
        let package = Package::from_payload(from, Pid::OUTSIDE, payload);
        let sender = engine.processes.get(from);
        let (Some(sender), false) = (sender, engine.is_stopping()) else {
            drop(maps);
            return Err(SendError::unknown_target(package));
        };
        let deadline = engine.clock.after(wait);
        let name: StdArc<str> = StdArc::from(name);
        maps.parked
            .entry(StdArc::clone(&name))
            .or_default()
            .push_back(Parked { package, deadline });
        drop(maps);
        if !self.ever_parked.load(Relaxed) {
            self.ever_parked.store(true, Release);
        }
        // Not one of the sender's own timers: it sweeps even after the
        // sender ended.
        let sweep = Action {
            record: sender,
            what: What::NameSweep(Box::new(name)),
        };
        engine.timers.set_timer(engine, deadline, sweep);
        Ok(())
    }

    /// Sweeps the packages parked for `name` that are past their deadline
    /// into the dead letters (a parking timer fell due).
    pub(crate) fn sweep_parked(&self, engine: &Shared, name: &str) {
        let late = self.take_late(name, engine.clock.now());
        if !late.is_empty() {
            tracing::debug!(
                name,
                count = late.len(),
                "sends that waited for a name timed out"
            );
            let letters = late.into_iter().map(Event::Message).collect();
            engine.dead_letters(Pid::OUTSIDE, letters);
        }
    }
}

impl Context {
    /// Gives `pid` the name `name`, until it ends (or the name is
    /// unregistered): [`whereis`](Context::whereis) and
    /// a [`send`](Context::send) to the name then finds it. A process may
    /// hold several names.
    ///
    /// # Errors
    ///
    /// [`NameError::Taken`] if a live process holds the name (a name whose
    /// process has ended is free), [`NameError::Ended`] if the process
    /// that had the PID has ended, [`NameError::NoProcess`] if the engine
    /// knows of no process that had it.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::actor::NameError;
    ///
    /// struct Service;
    /// impl Process for Service {
    ///     type Done = ();
    ///     fn step(&mut self, _: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let scheduler = Scheduler::builder().workers(1).build();
    /// let a = scheduler.spawn(Service)?;
    /// let b = scheduler.spawn(Service)?;
    /// scheduler.context().register_name("db", a.pid())?;
    /// assert_eq!(scheduler.context().whereis("db"), Some(a.pid()));
    /// assert!(matches!(scheduler.context().register_name("db", b.pid()), Err(NameError::Taken { .. })));
    /// scheduler.send("db", "hello")?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn register_name(&self, name: &str, pid: Pid) -> Result<(), NameError> {
        let shared = self.shared();
        // No live process under `pid` (none in the table, or one ending).
        let missing = || match shared.processes.handed_out(pid) {
            true => NameError::Ended(pid),
            false => NameError::NoProcess(pid),
        };
        let Some(record) = shared.processes.get(pid) else {
            return Err(missing());
        };
        let name: StdArc<str> = StdArc::from(name);
        // Lock order: the process's relations, then the table's shard (the
        // end of a process takes its names, then locks the shards).
        let mut refused = Vec::new();
        let registered = record.related().with_live(|related| {
            let shard = shared.names.shard(&name);
            let mut maps = shard.maps.lock();
            match maps.holders.entry(StdArc::clone(&name)) {
                Entry::Occupied(mut holder) => {
                    if ended(holder.get()) {
                        holder.insert(RecordRef::clone(&record));
                    } else if !std::ptr::eq(&**holder.get(), &*record) {
                        return Err(NameError::Taken {
                            name: StdArc::clone(&name),
                            by: holder.get().pid,
                        });
                    }
                }
                Entry::Vacant(slot) => {
                    slot.insert(RecordRef::clone(&record));
                }
            }
            related.names.push(StdArc::clone(&name));
            // What waited for the name goes to its new holder now, under
            // the shard's lock, so that no later send overtakes it.
            if let Some(parked) = maps.parked.remove(&*name) {
                let now = shared.clock.now();
                for Parked { package, deadline } in parked {
                    // Readdressed as it is: its payload stays where it
                    // was, and a receipt on it stays untold.
                    let package = package.with_target(pid);
                    if deadline <= now {
                        refused.push(package);
                    } else if let Err(error) = shared.deliver_message(&record, package) {
                        refused.push(error.into_package());
                    }
                }
            }
            shard.registered.notify_all();
            Ok(())
        });
        if !refused.is_empty() {
            // Dead letters run the user's hook: outside every lock.
            shared.dead_letters(pid, refused.into_iter().map(Event::Message).collect());
        }
        registered.unwrap_or_else(|_| Err(missing()))
    }

    /// Removes `name`; returns the PID that held it.
    ///
    /// # Examples
    ///
    /// ```
    /// let engine = sched::engine::Engine::builder().workers(1).build();
    /// assert_eq!(engine.context().unregister_name("nobody"), None);
    /// ```
    pub fn unregister_name(&self, name: &str) -> Option<Pid> {
        let removed = self
            .shared()
            .names
            .shard(name)
            .maps
            .lock()
            .holders
            .remove(name);
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

    /// A send from outside to `name`, waiting up to `wait` for a holder
    /// (see [`Within`]): blocks this thread on the name's shard.
    fn send_within_outside(
        &self,
        name: &str,
        payload: relay::Payload,
        wait: Duration,
    ) -> Result<(), SendError> {
        let shared = self.shared();
        let deadline = Instant::now().checked_add(wait);
        shared.names.outside_waiters.fetch_add(1, SeqCst);
        let mut payload = payload;
        // As for a send from a step: a holder that refuses because it is
        // ending counts as none, and the wait goes on for the next one.
        let mut refused: Option<RecordRef> = None;
        let sent = loop {
            let holder = self.wait_for_holder(name, deadline, refused.as_ref());
            let Some(record) = holder else {
                break shared.names.post_to_holder(shared, None, payload);
            };
            match shared
                .names
                .post_to_holder(shared, Some(RecordRef::clone(&record)), payload)
            {
                Err(error) if error.kind() == SendErrorKind::Ended => {
                    payload = error.into_package().into_payload();
                    refused = Some(record);
                }
                sent => break sent,
            }
        };
        shared.names.outside_waiters.fetch_sub(1, SeqCst);
        sent
    }

    /// The live holder of `name` other than `refused`, waiting for a
    /// registration until `deadline` (none: no limit) or shutdown.
    fn wait_for_holder(
        &self,
        name: &str,
        deadline: Option<Instant>,
        refused: Option<&RecordRef>,
    ) -> Option<RecordRef> {
        let shared = self.shared();
        let shard = shared.names.shard(name);
        let mut maps = shard.maps.lock();
        loop {
            if let Some(record) = live_holder(&maps.holders, name, refused) {
                break Some(record);
            }
            if shared.is_stopping() {
                break None;
            }
            match deadline {
                Some(deadline) => {
                    if Instant::now() >= deadline {
                        break None;
                    }
                    maps = shard.registered.wait_until(maps, deadline).0;
                }
                None => maps = shard.registered.wait(maps),
            }
        }
    }
}

impl Names {
    /// Delivers `payload` from outside to the holder of a name, or refuses
    /// it (unknown target, [`Pid::OUTSIDE`]) when there is none.
    fn post_to_holder(
        &self,
        engine: &Shared,
        holder: Option<RecordRef>,
        payload: impl std::any::Any + Send,
    ) -> Result<(), SendError> {
        match holder {
            Some(record) => {
                engine.deliver_message(&record, Package::new(Pid::OUTSIDE, record.pid, payload))
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
    /// fn become_the_registry(out: &mut Output<'_>) -> Result<(), sched::actor::NameError> {
    ///     out.register_name("registry")
    /// }
    /// ```
    pub fn register_name(&mut self, name: &str) -> Result<(), NameError> {
        self.engine.register_name(name)
    }
}

impl crate::engine::routing::sealed::Sealed for &str {}

/// Any message, to the live process holding the name now.
impl<M: std::any::Any + Send> Target<M> for &str {
    type Receipt = ();

    fn send_from(self, sender: Sender<'_>, message: M) -> Result<(), SendError> {
        let shared = sender.cx().shared();
        match sender.step_engine() {
            None => shared
                .names
                .post_to_holder(shared, shared.names.lookup(self), message),
            Some(engine) => match shared.names.lookup(self) {
                Some(record) => engine.send(Package::new(sender.from(), record.pid, message)),
                None => Err(SendError::unknown_target(Package::new(
                    sender.from(),
                    Pid::OUTSIDE,
                    message,
                ))),
            },
        }
    }
}

impl crate::engine::routing::sealed::Sealed for &String {}

/// As `&str`.
impl<M: std::any::Any + Send> Target<M> for &String {
    type Receipt = ();

    fn send_from(self, sender: Sender<'_>, message: M) -> Result<(), SendError> {
        self.as_str().send_from(sender, message)
    }
}

/// A name that may have no holder yet: a send to it waits up to the
/// [`Duration`] for a process to register the name (a child restarting
/// under a new PID registers it again).
///
/// - From outside ([`Context::send`]), the call blocks its thread until
///   the name is registered, the wait has passed, or shutdown begins. Not
///   for async code (call it through `spawn_blocking`).
/// - From a step ([`Output::send`]), the step never waits: the message is
///   parked, and reaches the next holder in the order the sends were
///   made, before any later send to the name; one still parked at its
///   deadline (or at shutdown) is a dead letter, so each is delivered or
///   dead-lettered exactly once (`tests/waiting_for_a_name.rs`). A parked
///   send is `Ok`.
///
/// A holder that is ending (its mailbox already closed) counts as none:
/// the wait goes on for the next one.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use sched::Within;
/// use std::time::Duration;
///
/// /// Finishes with the first message it gets.
/// struct Service;
/// impl Process for Service {
///     type Done = u8;
///     fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
///         if let Some(Event::Message(package)) = events.next() {
///             out.finish(package.into_payload()); // the `u8` sent, not boxed again
///         }
///         Ok(())
///     }
/// }
///
/// let scheduler = Scheduler::builder().workers(1).build();
/// scheduler.start();
/// let cx = scheduler.context();
/// std::thread::scope(|s| {
///     let sender = s.spawn(|| cx.send(Within("late", Duration::from_secs(5)), 7u8));
///     std::thread::sleep(Duration::from_millis(20));
///     let service = cx.spawn(Service)?;
///     cx.register_name("late", service.pid())?;
///     sender.join().unwrap()?;
///     assert_eq!(service.wait()?, 7);
///     Ok::<(), Box<dyn std::error::Error>>(())
/// })?;
/// let nobody = cx.send(Within("nobody", Duration::from_millis(5)), 1u8);
/// assert!(nobody.is_err());
/// # scheduler.shutdown(Duration::from_secs(1));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Within<'a>(pub &'a str, pub Duration);

impl crate::engine::routing::sealed::Sealed for Within<'_> {}

impl<M: std::any::Any + Send> Target<M> for Within<'_> {
    type Receipt = ();

    fn send_from(self, sender: Sender<'_>, message: M) -> Result<(), SendError> {
        let Within(name, wait) = self;
        let payload = relay::into_payload(message);
        match sender.step_engine() {
            None => sender.cx().send_within_outside(name, payload, wait),
            Some(_) => {
                let shared = sender.cx().shared();
                shared
                    .names
                    .send_named_within(shared, sender.from(), name, payload, wait)
            }
        }
    }
}
