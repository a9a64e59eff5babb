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
/// use sched::Package;
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
/// let err = one.context().forward(Package::new(Pid::OUTSIDE, Pid::new(2, 9), "hi")).unwrap_err();
/// assert_eq!(err.target(), Pid::new(2, 9));
/// ```
pub trait RemoteTransport: Send + Sync + fmt::Debug {
    /// Called once by the scheduler that uses this transport, when it is
    /// built: `node` is its node number, `local` delivers a package to one
    /// of its processes (and refuses it as a local send would). A
    /// [`Signal`] it refuses was not acted on: with
    /// [`Unencodable`](crate::SendErrorKind::Unencodable) if the engine
    /// could not read it, with a dead letter's kind if it named no process
    /// (a `terminate` that found nothing). The receiving side counts
    /// those; the sender is not told (over a real wire it could not be).
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

/// A message between the engines of two nodes about their processes: a
/// monitor set or removed, a process's end, a link or an exit signal, a
/// request across nodes or its answer.
///
/// The engine writes the [`bytes`](Signal::bytes) (their format is its
/// own) and reads them back on the other node; a transport carries them as
/// they are, from the package's source to its target like any package.
/// The [`payload`](Signal::payload), when there is one (a question or an
/// answer), is a user's value: the transport turns it into bytes the way
/// it does a message's, and refuses the signal as
/// [`Unencodable`](crate::SendErrorKind::Unencodable) if it cannot.
///
/// # Examples
///
/// A transport that serialises packages tells signals from messages:
///
/// ```
/// use sched::prelude::*;
/// use sched::Package;
/// use sched::remote::Signal;
///
/// fn describe(package: &Package) -> String {
///     match package.payload::<Signal>() {
///         Some(signal) => format!("signal of {} bytes", signal.bytes().len()),
///         None => "a message".to_owned(),
///     }
/// }
///
/// let signal = Signal::new(vec![1, 2, 3], None);
/// let package = Package::new(Pid::new(1, 4), Pid::new(2, 9), signal);
/// assert_eq!(describe(&package), "signal of 3 bytes");
/// ```
pub struct Signal {
    bytes: Box<[u8]>,
    payload: Option<crate::Payload>,
}

impl Signal {
    /// A signal made of the engine's `bytes` and, for a question or an
    /// answer, the user's value.
    ///
    /// # Panics
    ///
    /// If `bytes` is empty: every signal says what it is.
    ///
    /// # Examples
    ///
    /// See [`Signal`].
    pub fn new(bytes: impl Into<Box<[u8]>>, payload: Option<crate::Payload>) -> Signal {
        let bytes = bytes.into();
        assert!(!bytes.is_empty(), "a signal has at least one byte");
        Signal { bytes, payload }
    }

    /// The engine's bytes.
    ///
    /// # Examples
    ///
    /// See [`Signal`].
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The user's value the signal carries, if any.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::remote::Signal;
    /// let signal = Signal::new(vec![7], Some(Box::new(42u32)));
    /// assert_eq!(signal.payload().and_then(|p| p.downcast_ref::<u32>()), Some(&42));
    /// ```
    pub fn payload(&self) -> Option<&crate::Payload> {
        self.payload.as_ref()
    }

    /// The bytes and the value, taken apart.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::remote::Signal;
    /// let (bytes, payload) = Signal::new(vec![7], None).into_parts();
    /// assert_eq!((&*bytes, payload.is_none()), (&[7u8][..], true));
    /// ```
    pub fn into_parts(self) -> (Box<[u8]>, Option<crate::Payload>) {
        (self.bytes, self.payload)
    }
}

impl fmt::Debug for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Signal")
            .field("bytes", &self.bytes)
            .field("payload", &self.payload.is_some())
            .finish()
    }
}

/// What a transport tells its engine when it can no longer vouch for the
/// traffic between their node and `node`: the node was declared down by a
/// failure detector, left, came back as a new run, or packages between
/// the two were lost. The transport sends it through the engine's
/// [`Receiver`] as a package from and to `Pid::new(own node, 0)`.
///
/// The engine then ends every relation with that node's processes as
/// Erlang does on a lost connection: monitors of them fire, links to them
/// signal, and asks to them fail, each with the node-down reason.
///
/// # What a transport must do around it
///
/// A loss must be symmetric, and the engine cannot make it so: it only
/// ends the relations on its own side. A transport that sends `NodeDown`
/// must also:
///
/// 1. **Refuse traffic to the node before it tells the engine**, and
///    until step 2 is done. Ending the relations makes processes send
///    (a held request dropped answers "no reply", a supervisor restarts a
///    child); if those sends reached the lost node before it heard of the
///    loss, it would act on them (an ask answered by the reply, not ended
///    by the loss) while this side counts the relation ended.
/// 2. **Make the other node end its relations with this one too** (tell
///    it, and wait for its answer), and drop what arrives from it until it
///    has: otherwise a monitor or link of the other side's processes on
///    this one stays set with nothing left to fire it.
///
/// The NATS transport does both (a *fence* per lost node, and a reset
/// exchange); its unit test of step 1's order needs no server.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use sched::Package;
/// use sched::remote::NodeDown;
///
/// let own = 1;
/// let notice = Package::new(Pid::new(own, 0), Pid::new(own, 0), NodeDown::new(2));
/// assert_eq!(notice.payload::<NodeDown>().map(|n| n.node), Some(2));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct NodeDown {
    /// The node whose traffic is lost.
    pub node: u32,
}

impl NodeDown {
    /// The notice for `node`.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::remote::NodeDown;
    /// assert_eq!(NodeDown::new(3).node, 3);
    /// ```
    pub fn new(node: u32) -> NodeDown {
        NodeDown { node }
    }
}
