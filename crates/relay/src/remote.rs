//! The hook between a scheduler and other nodes: where packages for PIDs
//! of another node go, and where packages from other nodes come in.

use crate::{Package, Receiver, SendError};
use std::fmt;
use std::sync::Arc;

/// Carries packages to processes on other nodes, and brings theirs in.
///
/// A scheduler built with a transport hands it every package whose target
/// PID names a node other than its own; without one such a send fails with
/// [`UnknownTarget`](crate::SendErrorKind::UnknownTarget). When the
/// scheduler is built it calls [`attach`](RemoteTransport::attach) once,
/// with its node number and a [`Receiver`] that delivers to its local
/// processes: packages that arrive from other nodes go there, through the
/// local routing table, exactly like a local send.
///
/// # Contract
///
/// As for [`Receiver::send`]: a package is accepted (`Ok`) or handed back
/// in the [`SendError`], never dropped silently. A transport that turns
/// messages into bytes refuses a payload it cannot encode with
/// [`Unencodable`](crate::SendErrorKind::Unencodable), and a node it knows
/// to be gone with [`Unreachable`](crate::SendErrorKind::Unreachable),
/// attaching its own error as the [`cause`](SendError::cause).
///
/// # Examples
///
/// A loopback "transport" joining two engines in one process:
///
/// ```
/// use sched::prelude::*;
/// use sched::engine::Engine;
/// use sched::message::{Receiver, SendError};
/// use sched::remote::RemoteTransport;
/// use std::sync::{Arc, Mutex};
///
/// /// Hands packages to whichever engine attached as their target's node.
/// #[derive(Default)]
/// struct Loopback(Mutex<Vec<(u32, Arc<dyn Receiver + Send + Sync>)>>);
///
/// impl std::fmt::Debug for Loopback {
///     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
///         f.write_str("Loopback")
///     }
/// }
///
/// impl RemoteTransport for Loopback {
///     fn attach(&self, node: u32, local: Arc<dyn Receiver + Send + Sync>) {
///         self.0.lock().unwrap().push((node, local));
///     }
///     fn send(&self, package: Package) -> Result<(), SendError> {
///         let nodes = self.0.lock().unwrap();
///         match nodes.iter().find(|(n, _)| *n == package.target().node()) {
///             Some((_, local)) => local.send(package),
///             None => Err(SendError::unknown_target(package)),
///         }
///     }
/// }
///
/// let wire: Arc<Loopback> = Arc::default();
/// let one = Engine::builder().workers(1).node(1).remote(wire.clone()).build();
/// let _two = Engine::builder().workers(1).node(2).remote(wire.clone()).build();
/// // Node 2 has no process 9: the refusal comes back through the transport.
/// let err = one.send(Package::new(Pid::OUTSIDE, Pid::new(2, 9), "hi")).unwrap_err();
/// assert_eq!(err.target(), Pid::new(2, 9));
/// ```
pub trait RemoteTransport: Send + Sync + fmt::Debug {
    /// Called once by the scheduler that uses this transport, when it is
    /// built: `node` is its node number, `local` delivers a package to one
    /// of its processes (and refuses it as a local send would).
    ///
    /// # Examples
    ///
    /// See [`RemoteTransport`].
    fn attach(&self, node: u32, local: Arc<dyn Receiver + Send + Sync>);

    /// Sends `package` towards its target's node.
    ///
    /// # Errors
    ///
    /// A [`SendError`] handing the package back: it cannot be encoded, the
    /// node is unreachable, or the transport knows the target is gone.
    ///
    /// # Examples
    ///
    /// See [`RemoteTransport`].
    fn send(&self, package: Package) -> Result<(), SendError>;
}

impl<T: RemoteTransport + ?Sized> RemoteTransport for Arc<T> {
    fn attach(&self, node: u32, local: Arc<dyn Receiver + Send + Sync>) {
        (**self).attach(node, local)
    }

    fn send(&self, package: Package) -> Result<(), SendError> {
        (**self).send(package)
    }
}
