//! The foreign thread of the latency benches: it posts a message stamped
//! with the time at a fixed pace until told to stop.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

/// Calls `post(now)` every `every` until `stop`, on a thread of its own.
pub(crate) fn poster(
    every: Duration,
    post: impl Fn(Instant) + Send + 'static,
    stop: Arc<AtomicBool>,
) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            post(Instant::now());
            thread::sleep(every);
        }
    })
}
