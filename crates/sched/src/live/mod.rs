//! A live view of a running scheduler over a local TCP endpoint (feature
//! `live`), for `sched-top` and other tools.
//!
//! [`serve`] starts a thread that listens on the address it is given and
//! answers each request with a [`Snapshot`]: the engine's counters per
//! worker, its queues, its groups (their weights, step time and ready
//! processes), its histograms (when the builder turned them on) and the
//! top processes by recent steps, by mailbox depth and by long steps.
//! Nothing runs on the step path: a snapshot costs one
//! [`stats`](crate::Context::stats), one
//! [`groups`](crate::Context::groups), one
//! [`histograms`](crate::Context::histograms) and one
//! [`processes`](crate::Context::processes) call (about 5 ms for 100 000
//! processes), made on the endpoint's threads when a client asks.
//!
//! **Bind it to loopback** (`127.0.0.1:<port>`, [`DEFAULT_ADDR`]): the
//! endpoint has no authentication and no encryption, and a snapshot shows
//! process names. To watch a remote machine, reach its loopback through
//! an SSH tunnel (`ssh -L 7207:127.0.0.1:7207 host`).
//!
//! # Protocol
//!
//! Newline-delimited JSON over one TCP connection. The client writes a
//! [`Request`] line (`{"top":10}`; an empty line or `{}` asks for the
//! defaults) and the server answers with one [`Snapshot`] line, as often as
//! the client asks on the same connection (at most one snapshot every
//! [`MIN_SPACING`] per connection). A request it cannot read, or a
//! connection beyond [`MAX_CONNECTIONS`], gets one [`ErrorReply`] line
//! (`{"error":"..."}`) and is closed. [`Client`] speaks it.
//!
//! # Figures of other libraries
//!
//! A library built on `sched` (a journal, a transport) has figures of its
//! own that belong beside the engine's: [`serve_with`] takes a callback
//! that returns them as [`Figure`]s (a source, a name, a value, a
//! [`Unit`] and whether it is a [`Kind::Counter`] or a [`Kind::Gauge`]),
//! called for each snapshot, and every snapshot carries them in
//! [`Snapshot::figures`]. `sched` knows nothing of the libraries: the
//! application wires their figures in. A callback that panics costs its
//! figures, not the endpoint: the snapshot is served without them and the
//! panic is logged through `tracing`.
//!
//! Rates (steps per second, busy percentages, groups' shares of step
//! time) are not in a snapshot: a
//! client computes them from two successive snapshots, dividing the
//! counters' differences by the difference of their
//! [`elapsed_ns`](Snapshot::elapsed_ns).
//!
//! A client that stops reading cannot hold up the engine or the other
//! clients: each connection has a thread of its own, a write that cannot
//! proceed for [`WRITE_TIMEOUT`] closes it, and so does a connection that
//! sends no request for [`IDLE_TIMEOUT`] or a request line longer than
//! [`MAX_REQUEST_LEN`] bytes.
//!
//! # Examples
//!
//! ```
//! use sched::prelude::*;
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! let scheduler = Arc::new(Scheduler::builder().workers(1).histograms(true).build());
//! scheduler.start();
//! let endpoint = sched::live::serve(Arc::clone(&scheduler), "127.0.0.1:0")?;
//!
//! let mut client = sched::live::Client::connect(endpoint.local_addr(), Duration::from_secs(5))?;
//! let snapshot = client.snapshot(10)?;
//! assert_eq!(snapshot.version, sched::live::VERSION);
//! assert_eq!(snapshot.workers.len(), 1);
//! assert!(snapshot.histograms.is_some());
//!
//! endpoint.stop(); // or drop it
//! scheduler.shutdown(Duration::from_secs(1));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

// One file per concept: what travels on the wire (`protocol`: the
// request, the refusal and the limits; `snapshot`: the engine at one
// moment; `figure`: other libraries' figures), how a snapshot is taken
// (`sampler`), the endpoint that serves them (`server`) and the client
// that reads them (`client`).
mod client;
mod figure;
mod protocol;
mod sampler;
mod server;
mod snapshot;

pub use client::Client;
pub use figure::{Figure, Kind, Unit};
pub use protocol::{
    ErrorReply, Request, DEFAULT_ADDR, DEFAULT_TOP, IDLE_TIMEOUT, MAX_CONNECTIONS, MAX_FIGURES,
    MAX_REQUEST_LEN, MAX_TOP, MIN_SPACING, VERSION, WRITE_TIMEOUT,
};
pub use sampler::Sampler;
pub use server::{serve, serve_with, LiveEndpoint};
pub use snapshot::{GroupSnapshot, HistogramSummary, ProcessEntry, Snapshot, WorkerSnapshot};
