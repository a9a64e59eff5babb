//! Receipts: a package that says when it has been taken.
//!
//! A transport that hands a package to its node wants to know when the
//! package is *taken*, not only when it was handed over: a message still
//! waiting in a mailbox dies with its node, and a sender told only "it
//! arrived" cannot count it lost. A [`Receipt`] attached to a package
//! ([`Package::with_receipt`](crate::Package::with_receipt)) tells its
//! [`Acknowledge`] exactly once, when the package's payload is taken out
//! (a [`downcast`](crate::Package::downcast) that succeeds,
//! [`into_payload`](crate::Package::into_payload),
//! [`into_parts`](crate::Package::into_parts)) or the package is dropped
//! (a process ended with it unread, a dead letter): whatever became of it,
//! the node that held it is done with it. A receipt follows its package
//! through every move, readdressing and mailbox on the way; a hop that
//! takes the payload apart and sends it on can carry the receipt over
//! with [`Package::take_receipt`](crate::Package::take_receipt).
//!
//! The payload stays what it was: a package with a receipt downcasts,
//! borrows and reports its type exactly as it did without one.
//!
//! # Examples
//!
//! ```
//! use relay::{Acknowledge, Package, Pid, Receipt};
//! use std::sync::atomic::{AtomicU64, Ordering};
//! use std::sync::Arc;
//!
//! /// Counts the packages taken.
//! #[derive(Default)]
//! struct Taken(AtomicU64);
//!
//! impl Acknowledge for Taken {
//!     fn taken(&self, _token: u64) {
//!         self.0.fetch_add(1, Ordering::Relaxed);
//!     }
//! }
//!
//! let taken = Arc::new(Taken::default());
//! let package = Package::new(Pid::local(1), Pid::local(2), String::from("hi"))
//!     .with_receipt(Receipt::new(taken.clone(), 7));
//! assert!(package.is::<String>(), "the payload is unchanged");
//! assert_eq!(taken.0.load(Ordering::Relaxed), 0, "not taken yet");
//! assert_eq!(package.downcast::<String>().ok().as_deref(), Some("hi"));
//! assert_eq!(taken.0.load(Ordering::Relaxed), 1, "taken, once");
//! ```

use std::fmt;
use std::sync::Arc;

/// Told when a package carrying a [`Receipt`] is taken or dropped.
///
/// Called on whatever thread takes or drops the package (a worker in the
/// middle of a step, a transport's thread): it should only record, never
/// block or panic.
///
/// # Examples
///
/// ```
/// use relay::Acknowledge;
/// use std::sync::Mutex;
///
/// /// Remembers which tokens were taken.
/// #[derive(Default)]
/// struct Log(Mutex<Vec<u64>>);
///
/// impl Acknowledge for Log {
///     fn taken(&self, token: u64) {
///         self.0.lock().unwrap().push(token);
///     }
/// }
///
/// let log = Log::default();
/// log.taken(3);
/// assert_eq!(*log.0.lock().unwrap(), [3]);
/// ```
pub trait Acknowledge: Send + Sync {
    /// The package whose receipt carried `token` was taken (its payload
    /// taken out) or dropped.
    fn taken(&self, token: u64);
}

/// Tells its [`Acknowledge`] once, when dropped: attached to a package
/// ([`Package::with_receipt`](crate::Package::with_receipt)), when the
/// package is taken (a downcast that succeeds, `into_payload`,
/// `into_parts`) or dropped, wherever it went meanwhile; never on a missed
/// downcast, a readdressing or a move. A transport attaches one to each
/// message it delivers, to confirm to the sender only what the node's
/// processes took: a message unread in a mailbox dies with its node.
///
/// # Examples
///
/// ```
/// use relay::{Acknowledge, Receipt};
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use std::sync::Arc;
///
/// struct Last(AtomicU64);
/// impl Acknowledge for Last {
///     fn taken(&self, token: u64) {
///         self.0.store(token, Ordering::Relaxed);
///     }
/// }
///
/// let last = Arc::new(Last(AtomicU64::new(0)));
/// let receipt = Receipt::new(last.clone(), 42);
/// assert_eq!(receipt.token(), 42);
/// drop(receipt);
/// assert_eq!(last.0.load(Ordering::Relaxed), 42);
/// ```
pub struct Receipt {
    to: Arc<dyn Acknowledge>,
    token: u64,
}

impl Receipt {
    /// A receipt that tells `to` with `token` when it is dropped.
    ///
    /// # Examples
    ///
    /// ```
    /// use relay::{Acknowledge, Receipt};
    /// use std::sync::Arc;
    ///
    /// struct Ignore;
    /// impl Acknowledge for Ignore {
    ///     fn taken(&self, _: u64) {}
    /// }
    ///
    /// let receipt = Receipt::new(Arc::new(Ignore), 1);
    /// assert_eq!(receipt.token(), 1);
    /// ```
    pub fn new(to: Arc<dyn Acknowledge>, token: u64) -> Receipt {
        Receipt { to, token }
    }

    /// The token its [`Acknowledge`] will be told.
    ///
    /// # Examples
    ///
    /// See [`Receipt::new`].
    pub fn token(&self) -> u64 {
        self.token
    }
}

impl Drop for Receipt {
    fn drop(&mut self) {
        self.to.taken(self.token);
    }
}

impl fmt::Debug for Receipt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Receipt")
            .field("token", &self.token)
            .finish_non_exhaustive()
    }
}
