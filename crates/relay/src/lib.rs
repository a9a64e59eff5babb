//! Process identity and message routing for the work-stealing scheduler.
//!
//! This crate knows nothing about scheduling. It defines:
//!
//! * [`Pid`], the `Copy` identity of a process (a node number and an id),
//!   with a canonical textual form `<node.id>` that round-trips through
//!   `Display` and `FromStr`, typed [`ParsePidError`]s, and a
//!   [`PidAllocator`] handing out fresh ids from any thread;
//! * [`Addr`], a PID typed with the one message type its process accepts;
//! * [`Package`], a message on its way: source PID, target PID and a
//!   type-erased `Send` [`Payload`] that the router never inspects;
//! * [`Receipt`]: attached to a package, tells its [`Acknowledge`] once
//!   when the package is taken or dropped (a transport confirms to the
//!   sender only what its node's processes took);
//! * the [`Receiver`] trait: deliver a package, or refuse it with a
//!   [`SendError`] that says why ([`SendErrorKind`]) and hands the package
//!   back, so nothing is lost;
//! * [`RemoteTransport`], the hook through which a scheduler reaches
//!   processes on other nodes (the `relay-nats` crate implements it over
//!   NATS);
//! * [`Router`], a concurrent routing table from PID to receiver built on
//!   dashmap: register (never overwrites, see [`RegisterError`]), unregister,
//!   look up and route.
//!
//! The scheduler (`sched-core`) registers a handle to each process's event
//! queue in a `Router` under the process's PID and implements `Receiver`
//! itself by routing, pushing the package onto the queue as a message event
//! and waking the process.
//!
//! # Examples
//!
//! ```
//! use relay::{Package, Pid, PidAllocator, Receiver, Router, SendError, SendErrorKind};
//! use std::sync::{Arc, Mutex};
//!
//! /// A process's mailbox, as simple as it gets.
//! #[derive(Default)]
//! struct Mailbox(Mutex<Vec<Package>>);
//!
//! impl Receiver for Mailbox {
//!     fn send(&self, package: Package) -> Result<(), SendError> {
//!         self.0.lock().unwrap().push(package);
//!         Ok(())
//!     }
//! }
//!
//! let pids = PidAllocator::new(Pid::LOCAL_NODE);
//! let router = Router::new();
//!
//! let (alice, bob) = (pids.allocate()?, pids.allocate()?);
//! let bobs_mailbox = Arc::new(Mailbox::default());
//! router.register(bob, Arc::clone(&bobs_mailbox))?;
//!
//! router.route(Package::new(alice, bob, String::from("hi bob")))?;
//! let received = bobs_mailbox.0.lock().unwrap().pop().unwrap();
//! assert_eq!(received.source(), alice);
//! assert_eq!(received.payload::<String>().map(String::as_str), Some("hi bob"));
//!
//! // Alice has no mailbox: the package comes back with the reason.
//! let err = router.route(Package::new(bob, alice, 42_u32)).unwrap_err();
//! assert_eq!(err.kind(), SendErrorKind::UnknownTarget);
//! assert_eq!(err.to_string(), format!("no process with PID {alice}"));
//! assert_eq!(err.into_package().downcast::<u32>().ok(), Some(42));
//!
//! // PIDs have a stable textual form.
//! assert_eq!(bob.to_string(), "<0.2>");
//! assert_eq!("<0.2>".parse::<Pid>()?, bob);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Verification
//!
//! Concurrency goes through the private `sync` shim: under `--cfg loom` the
//! dashmap becomes a loom-visible `Mutex<HashMap>` and the allocator's atomic
//! a loom atomic, and `tests/loom.rs` model-checks route racing unregister,
//! racing registrations of one PID and racing allocation. proptest checks the
//! PID text form and the router against a `HashMap` model. The only `unsafe`
//! code is the inline storage of small payloads, which miri checks.

#![deny(unsafe_code)]

mod addr;
mod allocator;
mod inline;
mod package;
mod pid;
mod receipt;
mod receiver;
mod register_error;
mod remote;
mod router;
mod send_error;
mod sync;

pub use addr::Addr;
pub use allocator::{PidAllocator, PidsExhausted};
pub use package::{into_payload, Package, Payload};
pub use pid::{NumberError, ParsePidError, Pid};
pub use receipt::{Acknowledge, Receipt};
pub use receiver::Receiver;
pub use register_error::RegisterError;
pub use remote::{NodeDown, RemoteTransport, Signal};
pub use router::Router;
pub use send_error::{SendError, SendErrorKind};

#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
