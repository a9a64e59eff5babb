//! The error of a registration refused because its PID is taken.

use crate::Pid;
use std::error::Error;
use std::fmt;

/// A registration refused because the PID is already registered; it hands
/// the route back.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use sched::message::Router;
///
/// let router = Router::new();
/// router.register(Pid::local(5), 1).unwrap();
/// let err = router.register(Pid::local(5), 2).unwrap_err();
/// assert_eq!(err.to_string(), "PID <0.5> is already registered");
/// assert_eq!(err.route(), &2);
/// ```
pub struct RegisterError<R> {
    pid: Pid,
    route: R,
}

impl<R> RegisterError<R> {
    pub(crate) fn new(pid: Pid, route: R) -> Self {
        RegisterError { pid, route }
    }

    /// The PID that was already registered.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::message::Router;
    ///
    /// let router = Router::new();
    /// router.register(Pid::local(5), ()).unwrap();
    /// assert_eq!(router.register(Pid::local(5), ()).unwrap_err().pid(), Pid::local(5));
    /// ```
    pub fn pid(&self) -> Pid {
        self.pid
    }

    /// The route that was not registered, borrowed.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::message::Router;
    ///
    /// let router = Router::new();
    /// router.register(Pid::local(5), "old").unwrap();
    /// assert_eq!(router.register(Pid::local(5), "new").unwrap_err().route(), &"new");
    /// ```
    pub fn route(&self) -> &R {
        &self.route
    }

    /// The route that was not registered, handed back.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::message::Router;
    ///
    /// let router = Router::new();
    /// router.register(Pid::local(5), vec![1]).unwrap();
    /// assert_eq!(router.register(Pid::local(5), vec![2]).unwrap_err().into_route(), [2]);
    /// ```
    pub fn into_route(self) -> R {
        self.route
    }
}

impl<R> fmt::Display for RegisterError<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PID {} is already registered", self.pid)
    }
}

/// Shows the PID; the route is not printed, so no `R: Debug` is needed.
impl<R> fmt::Debug for RegisterError<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegisterError")
            .field("pid", &self.pid)
            .finish_non_exhaustive()
    }
}

impl<R> Error for RegisterError<R> {}
