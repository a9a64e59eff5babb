//! The error that says why a package was not delivered and hands it back.

use crate::{Package, Pid};
use std::error::Error;
use std::fmt;
use std::sync::{Mutex, PoisonError};

/// Why a package was not delivered.
///
/// # Examples
///
/// ```
/// use sched::message::SendErrorKind;
///
/// assert_eq!(SendErrorKind::UnknownTarget.to_string(), "unknown target");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SendErrorKind {
    /// No process with the target PID is registered, and the receiver
    /// knows of none that had it: a PID never handed out there, or one a
    /// caller chose whose process ended (a chosen PID leaves no trace).
    UnknownTarget,
    /// The target process has ended (or is ending: its last step has run
    /// and it accepts nothing more). A PID the scheduler handed out is
    /// never reused, so a send to it will never succeed again.
    Ended,
    /// The target's mailbox is bounded and full; a later retry may succeed.
    Full,
    /// The target is on another node and the payload cannot be turned into
    /// bytes for it (its type is not registered with the transport's codec,
    /// or encoding failed); [`SendError::cause`] says which.
    Unencodable,
    /// The target is on another node that cannot be reached: the transport
    /// is closed, or the node is known to have left.
    Unreachable,
}

impl fmt::Display for SendErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SendErrorKind::UnknownTarget => "unknown target",
            SendErrorKind::Ended => "target ended",
            SendErrorKind::Full => "target mailbox full",
            SendErrorKind::Unencodable => "payload cannot be encoded",
            SendErrorKind::Unreachable => "target node unreachable",
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
/// use sched::prelude::*;
/// use sched::Package;
/// use sched::message::{Router, SendErrorKind};
/// use std::sync::Arc;
///
/// struct Sink;
/// impl sched::message::Receiver for Sink {
///     fn send(&self, _: Package) -> Result<(), sched::message::SendError> {
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
    /// Boxed: a send's `Result<(), SendError>` is then one word, returned
    /// in a register through every layer of the send path, where the
    /// fields inline made it about 130 bytes copied through the stack at
    /// each layer (store-forwarding stalls in `perf annotate` of the
    /// engine's send; see `the_result_of_a_send_is_one_word`). A refusal
    /// pays one allocation instead.
    inner: Box<Inner>,
}

/// What a [`SendError`] holds.
struct Inner {
    kind: SendErrorKind,
    source: Pid,
    target: Pid,
    /// In a mutex only so that `SendError` is `Sync` without `unsafe`
    /// (`Mutex<T>` is `Sync` for any `T: Send`). It is never locked: the
    /// package is reached through `&mut self` (`get_mut`) or by value
    /// (`into_inner`), neither of which takes the lock, and `&self` methods
    /// read the copies of its PIDs beside it.
    package: Mutex<Package>,
    /// What went wrong underneath, when a transport knows more than the
    /// kind says (an encoding error, a closed connection).
    cause: Option<Box<dyn Error + Send + Sync>>,
}

impl SendError {
    /// A refusal of `package` for reason `kind`.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::Package;
    /// use sched::message::{SendError, SendErrorKind};
    ///
    /// let err = SendError::new(SendErrorKind::Full, Package::new(Pid::local(1), Pid::local(2), ()));
    /// assert_eq!(err.kind(), SendErrorKind::Full);
    /// ```
    pub fn new(kind: SendErrorKind, package: Package) -> Self {
        SendError {
            inner: Box::new(Inner {
                kind,
                source: package.source(),
                target: package.target(),
                package: Mutex::new(package),
                cause: None,
            }),
        }
    }

    /// The same error with `cause` attached: what went wrong underneath
    /// (a transport's encoding error, say). It is reached again through
    /// [`cause`](SendError::cause) or [`Error::source`].
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::Package;
    /// use sched::message::{SendError, SendErrorKind};
    ///
    /// let package = Package::new(Pid::local(1), Pid::new(2, 7), 5_u8);
    /// let err = SendError::new(SendErrorKind::Unencodable, package).with_cause("u8 is not registered");
    /// assert_eq!(err.cause().unwrap().to_string(), "u8 is not registered");
    /// assert_eq!(err.to_string(), "cannot encode the message for <2.7>: u8 is not registered");
    /// ```
    pub fn with_cause(mut self, cause: impl Into<Box<dyn Error + Send + Sync>>) -> Self {
        self.inner.cause = Some(cause.into());
        self
    }

    /// What went wrong underneath, if the refusing receiver said (see
    /// [`with_cause`](SendError::with_cause)). Downcast it to the
    /// transport's own error type for the details.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::Package;
    /// use sched::message::SendError;
    ///
    /// let err = SendError::ended(Package::new(Pid::local(1), Pid::local(2), ()));
    /// assert!(err.cause().is_none());
    /// ```
    pub fn cause(&self) -> Option<&(dyn Error + Send + Sync + 'static)> {
        self.inner.cause.as_deref()
    }

    /// Shorthand for `SendError::new(SendErrorKind::UnknownTarget, package)`.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::Package;
    /// use sched::message::{SendError, SendErrorKind};
    ///
    /// let err = SendError::unknown_target(Package::new(Pid::local(1), Pid::local(2), ()));
    /// assert_eq!(err.kind(), SendErrorKind::UnknownTarget);
    /// ```
    pub fn unknown_target(package: Package) -> Self {
        SendError::new(SendErrorKind::UnknownTarget, package)
    }

    /// Shorthand for `SendError::new(SendErrorKind::Ended, package)`.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::Package;
    /// use sched::message::{SendError, SendErrorKind};
    ///
    /// let err = SendError::ended(Package::new(Pid::local(1), Pid::local(2), ()));
    /// assert_eq!(err.kind(), SendErrorKind::Ended);
    /// ```
    pub fn ended(package: Package) -> Self {
        SendError::new(SendErrorKind::Ended, package)
    }

    /// Shorthand for `SendError::new(SendErrorKind::Full, package)`.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::Package;
    /// use sched::message::{SendError, SendErrorKind};
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
    /// use sched::prelude::*;
    /// use sched::Package;
    /// use sched::message::{SendError, SendErrorKind};
    ///
    /// let err = SendError::ended(Package::new(Pid::local(1), Pid::local(2), ()));
    /// assert!(matches!(err.kind(), SendErrorKind::Ended));
    /// ```
    pub fn kind(&self) -> SendErrorKind {
        self.inner.kind
    }

    /// The PID the package was addressed to.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::Package;
    /// use sched::message::SendError;
    ///
    /// let err = SendError::ended(Package::new(Pid::local(1), Pid::local(2), ()));
    /// assert_eq!(err.target(), Pid::local(2));
    /// ```
    pub fn target(&self) -> Pid {
        self.inner.target
    }

    /// The PID the package was sent from.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::Package;
    /// use sched::message::SendError;
    ///
    /// let err = SendError::ended(Package::new(Pid::local(1), Pid::local(2), ()));
    /// assert_eq!(err.source(), Pid::local(1));
    /// ```
    pub fn source(&self) -> Pid {
        self.inner.source
    }

    /// The undelivered package, borrowed mutably (the payload is reached
    /// only through `&mut self` or by value, which is what keeps
    /// `SendError` `Sync`).
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::Package;
    /// use sched::message::SendError;
    ///
    /// let mut err = SendError::ended(Package::new(Pid::local(1), Pid::local(2), 8_u8));
    /// assert_eq!(err.package_mut().payload::<u8>(), Some(&8));
    /// ```
    pub fn package_mut(&mut self) -> &mut Package {
        self.inner
            .package
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The undelivered package, handed back unchanged.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::Package;
    /// use sched::message::SendError;
    ///
    /// let err = SendError::full(Package::new(Pid::local(1), Pid::local(2), 8_u8));
    /// assert_eq!(err.into_package().downcast::<u8>().ok(), Some(8));
    /// ```
    pub fn into_package(self) -> Package {
        self.inner
            .package
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The reason and the package, separately.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::Package;
    /// use sched::message::{SendError, SendErrorKind};
    ///
    /// let err = SendError::full(Package::new(Pid::local(1), Pid::local(2), ()));
    /// let (kind, package) = err.into_parts();
    /// assert_eq!(kind, SendErrorKind::Full);
    /// assert_eq!(package.target(), Pid::local(2));
    /// ```
    pub fn into_parts(self) -> (SendErrorKind, Package) {
        let kind = self.inner.kind;
        (kind, self.into_package())
    }
}

impl fmt::Display for SendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let target = self.target();
        match self.inner.kind {
            SendErrorKind::UnknownTarget => write!(f, "no process with PID {target}"),
            SendErrorKind::Ended => write!(f, "process {target} has ended"),
            SendErrorKind::Full => write!(f, "mailbox of process {target} is full"),
            SendErrorKind::Unencodable => write!(f, "cannot encode the message for {target}"),
            SendErrorKind::Unreachable => write!(f, "the node of {target} is unreachable"),
        }?;
        match &self.inner.cause {
            Some(cause) => write!(f, ": {cause}"),
            None => Ok(()),
        }
    }
}

impl fmt::Debug for SendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SendError")
            .field("kind", &self.inner.kind)
            .field("source", &self.inner.source)
            .field("target", &self.inner.target)
            .finish_non_exhaustive()
    }
}

impl Error for SendError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.inner
            .cause
            .as_deref()
            .map(|cause| cause as &(dyn Error + 'static))
    }
}

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
                SendError::ended(package()),
                SendErrorKind::Ended,
                "process <3.9> has ended",
            ),
            (
                SendError::full(package()),
                SendErrorKind::Full,
                "mailbox of process <3.9> is full",
            ),
            (
                SendError::new(SendErrorKind::Unencodable, package()),
                SendErrorKind::Unencodable,
                "cannot encode the message for <3.9>",
            ),
            (
                SendError::new(SendErrorKind::Unreachable, package()).with_cause("gone"),
                SendErrorKind::Unreachable,
                "the node of <3.9> is unreachable: gone",
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

    /// A send's result is one word, returned in a register: the fields
    /// inline made it about 130 bytes, copied through the stack at every
    /// layer of the engine's send path.
    #[test]
    fn the_result_of_a_send_is_one_word() {
        assert_eq!(
            std::mem::size_of::<Result<(), SendError>>(),
            std::mem::size_of::<usize>()
        );
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
            SendErrorKind::Ended.to_string(),
            SendErrorKind::Full.to_string(),
            SendErrorKind::Unencodable.to_string(),
            SendErrorKind::Unreachable.to_string(),
        ];
        assert_eq!(
            texts,
            [
                "unknown target",
                "target ended",
                "target mailbox full",
                "payload cannot be encoded",
                "target node unreachable"
            ]
        );
    }

    #[test]
    fn the_cause_is_the_error_source() {
        let err = SendError::new(SendErrorKind::Unreachable, package()).with_cause("link down");
        let source = Error::source(&err).expect("a source");
        assert_eq!(source.to_string(), "link down");
        assert!(Error::source(&SendError::ended(package())).is_none());
    }

    #[test]
    fn debug_shows_kind_and_addresses() {
        let err = SendError::ended(package());
        assert_eq!(
            format!("{err:?}"),
            "SendError { kind: Ended, source: <0.1>, target: <3.9>, .. }"
        );
    }
}
