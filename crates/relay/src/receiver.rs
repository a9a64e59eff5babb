//! The `Receiver` trait: something packages can be sent to.

use crate::{Package, SendError};
use std::sync::Arc;

/// Something that packages can be sent to: a process's mailbox, a scheduler,
/// or a [`Router`](crate::Router) that forwards by target PID.
///
/// # Contract
///
/// `send` either accepts the package (it now owns it, and delivers it to its
/// target) and returns `Ok(())`, or refuses it and returns a [`SendError`]
/// that carries the very same package back. A package is never silently
/// dropped, so a caller can always retry, reroute or report.
///
/// The trait has no `Send`/`Sync` supertraits; add the bounds where a
/// receiver is shared across threads (`Arc<dyn Receiver + Send + Sync>`).
/// It is implemented for `&R`, `Box<R>` and `Arc<R>` wherever `R` is a
/// receiver.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use sched::Package;
/// use sched::message::{Receiver, SendError, SendErrorKind};
/// use std::sync::Mutex;
///
/// /// A mailbox holding at most two packages.
/// struct Mailbox(Mutex<Vec<Package>>);
///
/// impl Receiver for Mailbox {
///     fn send(&self, package: Package) -> Result<(), SendError> {
///         let mut inbox = self.0.lock().unwrap();
///         if inbox.len() == 2 {
///             return Err(SendError::new(SendErrorKind::Full, package));
///         }
///         inbox.push(package);
///         Ok(())
///     }
/// }
///
/// let mailbox = Mailbox(Mutex::new(Vec::new()));
/// let (from, to) = (Pid::local(1), Pid::local(2));
/// mailbox.send(Package::new(from, to, 1))?;
/// mailbox.send(Package::new(from, to, 2))?;
/// let err = mailbox.send(Package::new(from, to, 3)).unwrap_err();
/// assert_eq!(err.kind(), SendErrorKind::Full);
/// assert_eq!(err.into_package().downcast::<i32>().ok(), Some(3));
/// # Ok::<(), SendError>(())
/// ```
pub trait Receiver {
    /// Delivers `package` to its target.
    ///
    /// # Errors
    ///
    /// A [`SendError`] saying why the package was not accepted and handing it
    /// back: [`UnknownTarget`](crate::SendErrorKind::UnknownTarget) when no such
    /// process exists, [`Ended`](crate::SendErrorKind::Ended) when it has finished,
    /// [`Full`](crate::SendErrorKind::Full) when its mailbox is bounded and full.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::Package;
    /// use sched::message::{Receiver, SendError, SendErrorKind};
    ///
    /// /// A receiver that refuses everything, as a finished process would.
    /// struct Finished;
    ///
    /// impl Receiver for Finished {
    ///     fn send(&self, package: Package) -> Result<(), SendError> {
    ///         Err(SendError::new(SendErrorKind::Ended, package))
    ///     }
    /// }
    ///
    /// let err = Finished.send(Package::new(Pid::local(1), Pid::local(2), ())).unwrap_err();
    /// assert_eq!(err.to_string(), "process <0.2> has ended");
    /// ```
    fn send(&self, package: Package) -> Result<(), SendError>;
}

impl<R: Receiver + ?Sized> Receiver for &R {
    fn send(&self, package: Package) -> Result<(), SendError> {
        (**self).send(package)
    }
}

impl<R: Receiver + ?Sized> Receiver for Box<R> {
    fn send(&self, package: Package) -> Result<(), SendError> {
        (**self).send(package)
    }
}

impl<R: Receiver + ?Sized> Receiver for Arc<R> {
    fn send(&self, package: Package) -> Result<(), SendError> {
        (**self).send(package)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::{Pid, SendErrorKind};

    fn package() -> Package {
        Package::new(Pid::local(1), Pid::new(3, 9), String::from("payload"))
    }
    struct Refuse;

    impl Receiver for Refuse {
        fn send(&self, package: Package) -> Result<(), SendError> {
            Err(SendError::full(package))
        }
    }

    #[test]
    fn forwarding_impls_reach_the_inner_receiver() {
        let by_ref: &Refuse = &Refuse;
        let boxed: Box<dyn Receiver> = Box::new(Refuse);
        let shared: Arc<dyn Receiver + Send + Sync> = Arc::new(Refuse);
        for result in [
            by_ref.send(package()),
            boxed.send(package()),
            shared.send(package()),
        ] {
            assert_eq!(result.unwrap_err().kind(), SendErrorKind::Full);
        }
    }
}
