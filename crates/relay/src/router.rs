//! The routing table from PID to receiver.

use crate::sync::Map;
use crate::{Package, Pid, Receiver, RegisterError, SendError};
use std::fmt;

/// A concurrent routing table from [`Pid`] to a route `R`, usually a cheap
/// handle to a process's mailbox such as an `Arc`.
///
/// Built on a sharded `dashmap::DashMap` (a loom-visible `Mutex<HashMap>`
/// under `--cfg loom`). Every operation takes `&self` and may run from any
/// number of threads at once; each is linearizable: it takes effect at one
/// instant, under the lock of the one shard holding its PID.
///
/// * [`register`](Router::register) never overwrites: a PID already present
///   is a [`RegisterError`] that hands the new route back.
/// * [`unregister`](Router::unregister) returns the route it removed.
/// * [`route`](Router::route) looks the target up and delivers through
///   [`Receiver::send`]; a package is either accepted by the target's
///   receiver or comes back in a [`SendError`], never lost.
///
/// # Delivery happens outside the table's locks
///
/// `route` clones the route out while holding the shard's read lock, releases
/// the lock, and only then calls `send` on the clone. So a receiver may take
/// its time, block, or itself route, register or unregister on the same table
/// without deadlocking it, and a slow delivery never stalls registrations on
/// the same shard. The price is an `R: Clone` bound (a reference-count
/// increment for an `Arc`), and a weaker ordering with `unregister`: a
/// `route` that looked the PID up just before an `unregister` may call
/// `send` on the removed route just after the `unregister` returned. A
/// receiver that must refuse packages once its process is gone therefore
/// closes its own mailbox (and returns [`SendErrorKind::Ended`]) after
/// unregistering, as the scheduler's process queues do; the package then
/// still comes back to the sender rather than vanishing.
///
/// [`SendErrorKind::Ended`]: crate::SendErrorKind::Ended
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use sched::Package;
/// use sched::message::{Receiver, Router, SendError, SendErrorKind};
/// use std::sync::{mpsc, Arc, Mutex};
///
/// /// A process's mailbox: a channel sender.
/// struct Mailbox(Mutex<mpsc::Sender<Package>>);
///
/// impl Receiver for Mailbox {
///     fn send(&self, package: Package) -> Result<(), SendError> {
///         self.0
///             .lock()
///             .unwrap()
///             .send(package)
///             .map_err(|mpsc::SendError(package)| SendError::ended(package))
///     }
/// }
///
/// let router = Router::new();
/// let (tx, rx) = mpsc::channel();
/// let pid = Pid::local(1);
/// router.register(pid, Arc::new(Mailbox(Mutex::new(tx))))?;
///
/// router.route(Package::new(Pid::local(0), pid, "hello"))?;
/// assert_eq!(rx.recv()?.downcast::<&str>().ok(), Some("hello"));
///
/// drop(rx); // the process finished: its mailbox is closed
/// let err = router.route(Package::new(Pid::local(0), pid, "late")).unwrap_err();
/// assert_eq!(err.kind(), SendErrorKind::Ended);
///
/// router.unregister(pid);
/// let err = router.route(err.into_package()).unwrap_err();
/// assert_eq!(err.kind(), SendErrorKind::UnknownTarget);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Router<R> {
    routes: Map<R>,
}

impl<R> Router<R> {
    /// An empty table.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::message::Router;
    ///
    /// let router: Router<u32> = Router::new();
    /// assert!(router.is_empty());
    /// ```
    pub fn new() -> Self {
        Router { routes: Map::new() }
    }

    /// An empty table with room for at least `capacity` routes before it
    /// reallocates.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::message::Router;
    ///
    /// let router: Router<u32> = Router::with_capacity(100_000);
    /// assert_eq!(router.len(), 0);
    /// ```
    pub fn with_capacity(capacity: usize) -> Self {
        Router {
            routes: Map::with_capacity(capacity),
        }
    }

    /// Adds `route` under `pid`.
    ///
    /// Of several threads registering one PID at once, exactly one succeeds.
    ///
    /// # Errors
    ///
    /// [`RegisterError`] if `pid` is already registered; the existing route
    /// stays, and the error hands `route` back.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::message::Router;
    ///
    /// let router = Router::new();
    /// assert!(router.register(Pid::local(1), "first").is_ok());
    /// let err = router.register(Pid::local(1), "second").unwrap_err();
    /// assert_eq!(err.pid(), Pid::local(1));
    /// assert_eq!(err.into_route(), "second");
    /// assert_eq!(router.lookup(Pid::local(1)), Some("first"));
    /// ```
    pub fn register(&self, pid: Pid, route: R) -> Result<(), RegisterError<R>> {
        self.routes
            .insert_new(pid, route)
            .map_err(|route| RegisterError::new(pid, route))
    }

    /// Removes the route under `pid` and returns it, or `None` if there was
    /// none.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::message::Router;
    ///
    /// let router = Router::new();
    /// router.register(Pid::local(1), 'a').unwrap();
    /// assert_eq!(router.unregister(Pid::local(1)), Some('a'));
    /// assert_eq!(router.unregister(Pid::local(1)), None);
    /// ```
    pub fn unregister(&self, pid: Pid) -> Option<R> {
        self.routes.remove(pid)
    }

    /// Whether `pid` is registered.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::message::Router;
    ///
    /// let router = Router::new();
    /// router.register(Pid::local(1), ()).unwrap();
    /// assert!(router.contains(Pid::local(1)));
    /// assert!(!router.contains(Pid::local(2)));
    /// ```
    pub fn contains(&self, pid: Pid) -> bool {
        self.routes.contains(pid)
    }

    /// A clone of the route under `pid`, if any; the table's lock is released
    /// before this returns.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::message::Router;
    /// use std::sync::Arc;
    ///
    /// let router = Router::new();
    /// router.register(Pid::local(1), Arc::new("mailbox")).unwrap();
    /// assert_eq!(router.lookup(Pid::local(1)).as_deref(), Some(&"mailbox"));
    /// assert_eq!(router.lookup(Pid::local(2)), None);
    /// ```
    pub fn lookup(&self, pid: Pid) -> Option<R>
    where
        R: Clone,
    {
        self.routes.with(pid, R::clone)
    }

    /// Runs `f` on the route under `pid`, if any, and returns its result.
    ///
    /// This needs no `Clone`, but `f` runs while the read lock of the PID's
    /// shard is held: it must be short, and must not register or unregister
    /// on this table (that would deadlock on the shard lock).
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::message::Router;
    ///
    /// let router = Router::new();
    /// router.register(Pid::local(1), String::from("mailbox")).unwrap();
    /// assert_eq!(router.with(Pid::local(1), |route| route.len()), Some(7));
    /// assert_eq!(router.with(Pid::local(2), |route| route.len()), None);
    /// ```
    pub fn with<T>(&self, pid: Pid, f: impl FnOnce(&R) -> T) -> Option<T> {
        self.routes.with(pid, f)
    }

    /// Delivers `package` to the receiver registered under its target PID.
    ///
    /// The route is cloned out under the shard's read lock and `send` is
    /// called after the lock is released (see the type-level docs for why
    /// and what that means when racing [`unregister`](Router::unregister)).
    ///
    /// # Errors
    ///
    /// [`SendErrorKind::UnknownTarget`](crate::SendErrorKind::UnknownTarget)
    /// if the target is not registered, or whatever error the target's
    /// receiver returned; either way the error hands the package back.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::Package;
    /// use sched::message::{Receiver, Router, SendError, SendErrorKind};
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    ///
    /// #[derive(Default)]
    /// struct Counter(AtomicUsize);
    ///
    /// impl Receiver for Counter {
    ///     fn send(&self, _package: Package) -> Result<(), SendError> {
    ///         self.0.fetch_add(1, Ordering::Relaxed);
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let router = Router::new();
    /// let counter = Arc::new(Counter::default());
    /// router.register(Pid::local(1), Arc::clone(&counter))?;
    /// router.route(Package::new(Pid::local(0), Pid::local(1), ()))?;
    /// assert_eq!(counter.0.load(Ordering::Relaxed), 1);
    ///
    /// let err = router.route(Package::new(Pid::local(0), Pid::local(2), ())).unwrap_err();
    /// assert_eq!(err.kind(), SendErrorKind::UnknownTarget);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn route(&self, package: Package) -> Result<(), SendError>
    where
        R: Receiver + Clone,
    {
        match self.lookup(package.target()) {
            Some(route) => route.send(package),
            None => Err(SendError::unknown_target(package)),
        }
    }

    /// The number of registered PIDs. Under concurrent changes it is a
    /// snapshot that may already be stale.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::message::Router;
    ///
    /// let router = Router::new();
    /// router.register(Pid::local(1), ()).unwrap();
    /// router.register(Pid::local(2), ()).unwrap();
    /// assert_eq!(router.len(), 2);
    /// ```
    pub fn len(&self) -> usize {
        self.routes.len()
    }

    /// Whether no PID is registered.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::message::Router;
    ///
    /// let router = Router::new();
    /// assert!(router.is_empty());
    /// router.register(Pid::local(1), ()).unwrap();
    /// assert!(!router.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The registered PIDs, in no particular order: for shutdown, which
    /// cancels every live process. Under concurrent changes the list is
    /// weakly consistent (each shard is read at a different instant): a PID
    /// registered or unregistered meanwhile may or may not appear.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::message::Router;
    ///
    /// let router = Router::new();
    /// router.register(Pid::local(2), ()).unwrap();
    /// router.register(Pid::local(1), ()).unwrap();
    /// let mut pids = router.pids();
    /// pids.sort();
    /// assert_eq!(pids, [Pid::local(1), Pid::local(2)]);
    /// ```
    pub fn pids(&self) -> Vec<Pid> {
        self.routes.keys()
    }
}

impl<R> Default for Router<R> {
    fn default() -> Self {
        Router::new()
    }
}

/// Shows the number of routes; the routes themselves are not printed.
impl<R> fmt::Debug for Router<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Router")
            .field("len", &self.len())
            .finish_non_exhaustive()
    }
}

/// A router is itself a receiver: sending to it routes by target PID.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use sched::message::{Package, Receiver, Router, SendError, SendErrorKind};
/// use std::sync::Arc;
///
/// struct Refuse;
/// impl Receiver for Refuse {
///     fn send(&self, package: Package) -> Result<(), SendError> {
///         Err(SendError::full(package))
///     }
/// }
///
/// let router = Router::new();
/// router.register(Pid::local(1), Arc::new(Refuse))?;
/// let receiver: &dyn Receiver = &router;
/// let err = receiver.send(Package::new(Pid::local(0), Pid::local(1), ())).unwrap_err();
/// assert_eq!(err.kind(), SendErrorKind::Full);
/// let err = receiver.send(err.into_package().with_target(Pid::local(2))).unwrap_err();
/// assert_eq!(err.kind(), SendErrorKind::UnknownTarget);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
impl<R: Receiver + Clone> Receiver for Router<R> {
    fn send(&self, package: Package) -> Result<(), SendError> {
        self.route(package)
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
