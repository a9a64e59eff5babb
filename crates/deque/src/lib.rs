//! A Chase-Lev work-stealing deque with steal-half, for schedulers.
//!
//! One thread, the owner, pushes and pops items at the bottom of its deque
//! (LIFO, no locks, no read-modify-write on push). Any number of other
//! threads steal from the top (FIFO), either one item
//! ([`Stealer::steal`]) or about half of the items in one CAS
//! ([`Stealer::steal_half_into`], which moves them into the thief's own
//! deque and returns one to run at once).
//!
//! - Items are any `T: Send`; none is ever lost, duplicated or dropped
//!   twice, including the items still in the deque when the last handle
//!   goes away.
//! - The ring buffer grows when full; an old buffer is freed through
//!   crossbeam-epoch only once no stealer can still be reading it.
//! - No data race under Rust's memory model: a stealer claims positions
//!   *before* it reads their slots, and the owner never writes a slot that a
//!   stealer may still be reading (see `docs/internals/deque.md` for the argument).
//!   The tests run under miri with its race detector on, and loom explores
//!   the interleavings of the owner, stealers and growth.
//!
//! # Examples
//!
//! Work spreading from one thread to another:
//!
//! ```
//! use deque::{Steal, Worker};
//! use std::thread;
//!
//! let owner = Worker::new();
//! for job in 0..100 {
//!     owner.push(job);
//! }
//! let stealer = owner.stealer();
//! let thief = thread::spawn(move || {
//!     let mine = Worker::new();
//!     let mut done = Vec::new();
//!     loop {
//!         match stealer.steal_half_into(&mine) {
//!             Steal::Success(job) => done.push(job),
//!             Steal::Retry => continue,
//!             Steal::Empty => break,
//!         }
//!         while let Some(job) = mine.pop() {
//!             done.push(job);
//!         }
//!     }
//!     done
//! });
//! let mut done = Vec::new();
//! while let Some(job) = owner.pop() {
//!     done.push(job);
//! }
//! done.extend(thief.join().unwrap());
//! done.sort();
//! assert_eq!(done, (0..100).collect::<Vec<_>>());
//! ```

mod buffer;
mod inner;
mod position;
mod steal;
mod stealer;
mod sync;
mod worker;

pub use steal::Steal;
pub use stealer::{Stealer, MAX_STEAL_BATCH};
pub use worker::Worker;

#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
