//! The `Receiver` trait and the error that hands an undelivered package back.

use crate::{Package, Pid};
use std::error::Error;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

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
/// use sched::{Package, Pid, Receiver, SendError, SendErrorKind};
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
    /// back: [`UnknownTarget`](SendErrorKind::UnknownTarget) when no such
    /// process exists, [`Closed`](SendErrorKind::Closed) when it has finished,
    /// [`Full`](SendErrorKind::Full) when its mailbox is bounded and full.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::{Package, Pid, Receiver, SendError, SendErrorKind};
    ///
    /// /// A receiver that refuses everything, as a finished process would.
    /// struct Finished;
    ///
    /// impl Receiver for Finished {
    ///     fn send(&self, package: Package) -> Result<(), SendError> {
    ///         Err(SendError::new(SendErrorKind::Closed, package))
    ///     }
    /// }
    ///
    /// let err = Finished.send(Package::new(Pid::local(1), Pid::local(2), ())).unwrap_err();
    /// assert_eq!(err.to_string(), "process <0.2> is closed");
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

/// Why a package was not delivered.
///
/// # Examples
///
/// ```
/// use sched::SendErrorKind;
///
/// assert_eq!(SendErrorKind::UnknownTarget.to_string(), "unknown target");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SendErrorKind {
    /// No process with the target PID is registered.
    UnknownTarget,
    /// The target process exists (or existed) but no longer accepts
    /// messages: it finished or is shutting down.
    Closed,
    /// The target's mailbox is bounded and full; a later retry may succeed.
    Full,
}

impl fmt::Display for SendErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SendErrorKind::UnknownTarget => "unknown target",
            SendErrorKind::Closed => "target closed",
            SendErrorKind::Full => "target mailbox full",
        })
    }
}

/// A package that was not delivered, with the reason and the package itself.
///
/// Nothing is lost: [`into_package`](SendError::into_package) returns the
/// package exactly as it was sent. `Display` names the target PID.
///
/// `SendError` is `Send` and `Sync` (unlike [`Package`], whose payload need
/// not be `Sync`: through a shared `&SendError` only the kind and the two
/// PIDs can be reached), so `?` converts it into
/// `Box<dyn Error + Send + Sync>`, the error type of a process's step.
///
/// # Examples
///
/// ```
/// use sched::{Package, Pid, Router, SendErrorKind};
/// use std::sync::Arc;
///
/// struct Sink;
/// impl sched::Receiver for Sink {
///     fn send(&self, _: Package) -> Result<(), sched::SendError> {
///         Ok(())
///     }
/// }
///
/// let router: Router<Arc<Sink>> = Router::new();
/// let err = router
///     .route(Package::new(Pid::local(1), Pid::local(404), "hello"))
///     .unwrap_err();
/// assert_eq!(err.kind(), SendErrorKind::UnknownTarget);
/// assert_eq!(err.target(), Pid::local(404));
/// assert_eq!(err.to_string(), "no process with PID <0.404>");
/// let package = err.into_package();
/// assert_eq!(package.downcast::<&str>().ok(), Some("hello"));
/// ```
pub struct SendError {
    kind: SendErrorKind,
    source: Pid,
    target: Pid,
    /// In a mutex only so that `SendError` is `Sync` without `unsafe`
    /// (`Mutex<T>` is `Sync` for any `T: Send`). It is never locked: the
    /// package is reached through `&mut self` (`get_mut`) or by value
    /// (`into_inner`), neither of which takes the lock, and `&self` methods
    /// read the copies of its PIDs beside it.
    package: Mutex<Package>,
}

impl SendError {
    /// A refusal of `package` for reason `kind`.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::{Package, Pid, SendError, SendErrorKind};
    ///
    /// let err = SendError::new(SendErrorKind::Full, Package::new(Pid::local(1), Pid::local(2), ()));
    /// assert_eq!(err.kind(), SendErrorKind::Full);
    /// ```
    pub fn new(kind: SendErrorKind, package: Package) -> Self {
        SendError {
            kind,
            source: package.source(),
            target: package.target(),
            package: Mutex::new(package),
        }
    }

    /// Shorthand for `SendError::new(SendErrorKind::UnknownTarget, package)`.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::{Package, Pid, SendError, SendErrorKind};
    ///
    /// let err = SendError::unknown_target(Package::new(Pid::local(1), Pid::local(2), ()));
    /// assert_eq!(err.kind(), SendErrorKind::UnknownTarget);
    /// ```
    pub fn unknown_target(package: Package) -> Self {
        SendError::new(SendErrorKind::UnknownTarget, package)
    }

    /// Shorthand for `SendError::new(SendErrorKind::Closed, package)`.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::{Package, Pid, SendError, SendErrorKind};
    ///
    /// let err = SendError::closed(Package::new(Pid::local(1), Pid::local(2), ()));
    /// assert_eq!(err.kind(), SendErrorKind::Closed);
    /// ```
    pub fn closed(package: Package) -> Self {
        SendError::new(SendErrorKind::Closed, package)
    }

    /// Shorthand for `SendError::new(SendErrorKind::Full, package)`.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::{Package, Pid, SendError, SendErrorKind};
    ///
    /// let err = SendError::full(Package::new(Pid::local(1), Pid::local(2), ()));
    /// assert_eq!(err.kind(), SendErrorKind::Full);
    /// ```
    pub fn full(package: Package) -> Self {
        SendError::new(SendErrorKind::Full, package)
    }

    /// Why the package was not delivered.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::{Package, Pid, SendError, SendErrorKind};
    ///
    /// let err = SendError::closed(Package::new(Pid::local(1), Pid::local(2), ()));
    /// assert!(matches!(err.kind(), SendErrorKind::Closed));
    /// ```
    pub fn kind(&self) -> SendErrorKind {
        self.kind
    }

    /// The PID the package was addressed to.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::{Package, Pid, SendError};
    ///
    /// let err = SendError::closed(Package::new(Pid::local(1), Pid::local(2), ()));
    /// assert_eq!(err.target(), Pid::local(2));
    /// ```
    pub fn target(&self) -> Pid {
        self.target
    }

    /// The PID the package was sent from.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::{Package, Pid, SendError};
    ///
    /// let err = SendError::closed(Package::new(Pid::local(1), Pid::local(2), ()));
    /// assert_eq!(err.source(), Pid::local(1));
    /// ```
    pub fn source(&self) -> Pid {
        self.source
    }

    /// The undelivered package, borrowed mutably (the payload is reached
    /// only through `&mut self` or by value, which is what keeps
    /// `SendError` `Sync`).
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::{Package, Pid, SendError};
    ///
    /// let mut err = SendError::closed(Package::new(Pid::local(1), Pid::local(2), 8_u8));
    /// assert_eq!(err.package_mut().payload::<u8>(), Some(&8));
    /// ```
    pub fn package_mut(&mut self) -> &mut Package {
        self.package
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The undelivered package, handed back unchanged.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::{Package, Pid, SendError};
    ///
    /// let err = SendError::full(Package::new(Pid::local(1), Pid::local(2), 8_u8));
    /// assert_eq!(err.into_package().downcast::<u8>().ok(), Some(8));
    /// ```
    pub fn into_package(self) -> Package {
        self.package
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The reason and the package, separately.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::{Package, Pid, SendError, SendErrorKind};
    ///
    /// let err = SendError::full(Package::new(Pid::local(1), Pid::local(2), ()));
    /// let (kind, package) = err.into_parts();
    /// assert_eq!(kind, SendErrorKind::Full);
    /// assert_eq!(package.target(), Pid::local(2));
    /// ```
    pub fn into_parts(self) -> (SendErrorKind, Package) {
        let kind = self.kind;
        (kind, self.into_package())
    }
}

impl fmt::Display for SendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let target = self.target();
        match self.kind {
            SendErrorKind::UnknownTarget => write!(f, "no process with PID {target}"),
            SendErrorKind::Closed => write!(f, "process {target} is closed"),
            SendErrorKind::Full => write!(f, "mailbox of process {target} is full"),
        }
    }
}

impl fmt::Debug for SendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SendError")
            .field("kind", &self.kind)
            .field("source", &self.source)
            .field("target", &self.target)
            .finish_non_exhaustive()
    }
}

impl Error for SendError {}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn package() -> Package {
        Package::new(Pid::local(1), Pid::new(3, 9), String::from("payload"))
    }

    #[test]
    fn every_kind_names_the_target_and_hands_the_package_back() {
        let cases = [
            (
                SendError::unknown_target(package()),
                SendErrorKind::UnknownTarget,
                "no process with PID <3.9>",
            ),
            (
                SendError::closed(package()),
                SendErrorKind::Closed,
                "process <3.9> is closed",
            ),
            (
                SendError::full(package()),
                SendErrorKind::Full,
                "mailbox of process <3.9> is full",
            ),
        ];
        for (err, kind, text) in cases {
            assert_eq!(err.kind(), kind);
            assert_eq!(err.target(), Pid::new(3, 9));
            assert_eq!(err.to_string(), text);
            assert_eq!(err.source(), Pid::local(1));
            let package = err.into_package();
            assert_eq!(package.downcast::<String>().unwrap(), "payload");
        }
    }

    #[test]
    fn a_send_error_converts_into_a_boxed_error() {
        fn step() -> Result<(), Box<dyn Error + Send + Sync>> {
            Err(SendError::full(package()))?;
            Ok(())
        }
        let err = step().unwrap_err();
        assert_eq!(err.to_string(), "mailbox of process <3.9> is full");
        let back = err.downcast::<SendError>().expect("a SendError");
        assert_eq!(back.into_package().downcast::<String>().unwrap(), "payload");
    }

    #[test]
    fn kinds_display_distinctly() {
        let texts = [
            SendErrorKind::UnknownTarget.to_string(),
            SendErrorKind::Closed.to_string(),
            SendErrorKind::Full.to_string(),
        ];
        assert_eq!(
            texts,
            ["unknown target", "target closed", "target mailbox full"]
        );
    }

    #[test]
    fn debug_shows_kind_and_addresses() {
        let err = SendError::closed(package());
        assert_eq!(
            format!("{err:?}"),
            "SendError { kind: Closed, source: <0.1>, target: <3.9>, .. }"
        );
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
