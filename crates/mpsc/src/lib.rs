//! A multi-producer, single-consumer event queue: one per process.
//!
//! Producers (completers of yields, message senders, the scheduler's cancel)
//! push from any thread; the single consumer (the worker running the
//! process) takes everything pending in one call before `step`, into a
//! buffer it reuses, so a step allocates nothing.
//!
//! - [`Producer::push`] is lock-free (a claim CAS on one word, then a write
//!   into a slot of a block) and allocation-free in steady state: a thread
//!   keeps the blocks it finished (up to 32 KiB of each of the two block
//!   sizes) for the next blocks allocated on it. A queue's
//!   first block is small (1 item, later ones 14), and a consumer that
//!   empties its block while no next block is coming reopens it for the
//!   next items, so a queue drained as it fills keeps one small block.
//! - [`Consumer::shrink_to_fit`] frees the blocks of an empty queue, for a
//!   consumer about to wait: the queue then holds no more than a new one.
//!   The freed blocks are kept by the freeing thread as above (freed when
//!   the thread exits), so a thread that empties and refills many queues in
//!   turn does not go to the allocator for each.
//! - [`Consumer::drain_into`] moves every ready item into a `Vec` in one call
//!   and never blocks. Items from one producer come out in push order.
//! - [`Consumer::close`] makes every later push fail with
//!   [`PushError::Closed`], which hands the item back, and returns the items
//!   still pending, so nothing is dropped unseen.
//! - [`Consumer::reset`] reuses the queue for a new process under a new
//!   generation: producers of the earlier use get [`PushError::Stale`] and
//!   can never deliver into the new one.
//! - [`Consumer::is_empty`] asks whether anything is pending without
//!   draining.
//! - [`Queue`] is the same queue for embedding in a structure of one's own
//!   (one allocation less), with `unsafe` consumer methods for code that
//!   guarantees a single consumer by other means, as the scheduler does.
//!
//! # Examples
//!
//! ```
//! use std::thread;
//!
//! let (tx, mut rx) = mpsc::queue();
//! let handles: Vec<_> = (0..2)
//!     .map(|p| {
//!         let tx = tx.clone();
//!         thread::spawn(move || {
//!             for i in 0..100 {
//!                 tx.push((p, i)).unwrap();
//!             }
//!         })
//!     })
//!     .collect();
//! for h in handles {
//!     h.join().unwrap();
//! }
//!
//! let mut batch = Vec::new();
//! rx.drain_into(&mut batch);
//! assert_eq!(batch.len(), 200);
//! // Per-producer order is kept.
//! for p in 0..2 {
//!     let mine: Vec<_> = batch.iter().filter(|e| e.0 == p).map(|e| e.1).collect();
//!     assert_eq!(mine, (0..100).collect::<Vec<_>>());
//! }
//!
//! // Finishing the process: close, and report what was left as dead letters.
//! tx.push((9, 9)).unwrap();
//! assert_eq!(rx.close(), [(9, 9)]);
//! let err = tx.push((9, 10)).unwrap_err();
//! assert!(err.is_closed());
//! assert_eq!(err.into_inner(), (9, 10));
//! ```
//!
//! # Verification
//!
//! Loom models (`tests/loom.rs`, run with `--cfg loom`) cover two producers
//! with a draining consumer, push racing close, drain racing push, a reset
//! racing a stale producer, producers racing across the end of the small
//! first block, a drained block reopened while a push claims its install
//! position, a close and a reset, and `shrink_to_fit` racing pushes; proptest checks sequential equivalence with
//! a `VecDeque` model and conservation and per-producer order across
//! threads; everything also runs under miri with its data-race detector.
//! See `docs/internals/mpsc.md` in the workspace for the design and the soundness
//! argument.

mod error;
mod queue;
mod sync;

pub use error::PushError;
pub use queue::{queue, Consumer, Producer, Queue};

#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
