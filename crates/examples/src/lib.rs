//! Examples of `sched` that build with nothing but `sched` (see
//! `examples/`): `cargo run --release -p sched-examples --example showcase`
//! builds only what the showcase needs.
//!
//! # Examples
//!
//! ```
//! use sched::prelude::*;
//! let scheduler = Scheduler::builder().workers(1).build();
//! assert_eq!(scheduler.workers(), 1);
//! ```
