//! Typed addresses: a PID that only accepts one message type.

use std::any::Any;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::marker::PhantomData;

use crate::{Package, Pid};

/// The address of a process that accepts messages of type `M`.
///
/// An `Addr<M>` is a [`Pid`] with the message type attached at compile
/// time: sending through it takes an `M` and nothing else, so a `String`
/// sent where a `&str` was expected is a compile error rather than a failed
/// downcast at run time. It is `Copy`, as small as a `Pid`, and sending
/// through it costs exactly what an untyped send does (the same package,
/// the same route).
///
/// The scheduler hands out typed addresses when it starts a process that
/// declares its message type; [`from_pid`](Addr::from_pid) builds one from a
/// PID learnt elsewhere. Typing is a promise about the receiver, not a
/// check on it: a package with another payload type can still reach the
/// same PID through the untyped path, so receivers downcast as usual.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use sched::message::Addr;
///
/// #[derive(Debug, PartialEq)]
/// enum Count { Add(u64), Reset }
///
/// let counter: Addr<Count> = Addr::from_pid(Pid::local(7));
/// let package = counter.package(Pid::local(1), Count::Add(2));
/// assert_eq!(package.target(), Pid::local(7));
/// assert_eq!(package.downcast::<Count>().ok(), Some(Count::Add(2)));
/// // counter.package(Pid::local(1), 2u64); // does not compile: not a `Count`
/// ```
pub struct Addr<M> {
    pid: Pid,
    // `fn(M)`: an address neither owns nor produces an `M`, so it is `Send`,
    // `Sync` and `Copy` whatever `M` is.
    _message: PhantomData<fn(M)>,
}

impl<M> Addr<M> {
    /// The typed address of `pid`, trusting that the process there accepts
    /// `M`. Sending to a process that expects something else is not
    /// undefined: the message arrives and its downcast fails.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::message::Addr;
    /// let addr: Addr<String> = Addr::from_pid(Pid::local(3));
    /// assert_eq!(addr.pid(), Pid::local(3));
    /// ```
    pub const fn from_pid(pid: Pid) -> Self {
        Addr {
            pid,
            _message: PhantomData,
        }
    }

    /// The PID behind the address.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::message::Addr;
    /// assert_eq!(Addr::<u8>::from_pid(Pid::local(4)).pid(), Pid::local(4));
    /// ```
    pub const fn pid(&self) -> Pid {
        self.pid
    }

    /// A package carrying `message` from `source` to this address.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::message::Addr;
    /// let addr: Addr<u32> = Addr::from_pid(Pid::local(2));
    /// let package = addr.package(Pid::local(1), 5);
    /// assert_eq!(package.payload::<u32>(), Some(&5));
    /// ```
    pub fn package(&self, source: Pid, message: M) -> Package
    where
        M: Any + Send,
    {
        Package::new(source, self.pid, message)
    }
}

impl<M> Clone for Addr<M> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<M> Copy for Addr<M> {}

impl<M> PartialEq for Addr<M> {
    fn eq(&self, other: &Self) -> bool {
        self.pid == other.pid
    }
}

impl<M> Eq for Addr<M> {}

impl<M> Hash for Addr<M> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.pid.hash(state);
    }
}

/// Shows the PID and the message type.
impl<M> fmt::Debug for Addr<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Addr<{}>({})", std::any::type_name::<M>(), self.pid)
    }
}

/// Shows the PID, as `<node.id>`.
impl<M> fmt::Display for Addr<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.pid, f)
    }
}

/// Forgets the message type.
impl<M> From<Addr<M>> for Pid {
    fn from(addr: Addr<M>) -> Pid {
        addr.pid
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn addresses_compare_and_hash_by_pid() {
        let a: Addr<String> = Addr::from_pid(Pid::local(1));
        let b = a;
        let set: HashSet<_> = [a, b, Addr::from_pid(Pid::local(2))].into_iter().collect();
        assert_eq!(set.len(), 2);
        assert_eq!(Pid::from(a), Pid::local(1));
        assert_eq!(a.to_string(), "<0.1>");
        assert_eq!(format!("{a:?}"), "Addr<alloc::string::String>(<0.1>)");
    }

    #[test]
    fn an_address_is_send_sync_and_copy_for_any_message() {
        fn check<T: Send + Sync + Copy>() {}
        check::<Addr<std::rc::Rc<u8>>>();
        assert_eq!(
            std::mem::size_of::<Addr<[u8; 1024]>>(),
            std::mem::size_of::<Pid>()
        );
    }
}
