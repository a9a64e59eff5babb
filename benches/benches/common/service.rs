//! A slow outside service as a new user writes one: a few OS threads (an
//! HTTP client's pool, a database driver's) that each take requests from a
//! channel, answer each after its delay, and hand the answer back through
//! whatever the caller gave them (our `Completer`, tokio's `oneshot`).
//!
//! Both sides of a bench share this code, so they pay the same for the
//! threads, the channels and the waits; only the hand-back differs.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How a service thread hands an answer back to its caller.
pub(crate) trait Reply: Send + 'static {
    /// Delivers `value`; a caller that is gone is ignored.
    fn reply(self, value: u64);
}

/// One request: answer `value` to `reply` at `due`.
struct Request<R> {
    due: Instant,
    value: u64,
    reply: R,
}

/// A request waiting in a thread's heap, earliest due first (ties in
/// arrival order).
struct Waiting<R>(Reverse<(Instant, u64)>, Request<R>);

impl<R> PartialEq for Waiting<R> {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}
impl<R> Eq for Waiting<R> {}
impl<R> PartialOrd for Waiting<R> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl<R> Ord for Waiting<R> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.cmp(&other.0)
    }
}

/// The service: `threads` threads, requests spread over them in turn.
pub(crate) struct Service<R: Reply> {
    senders: Vec<mpsc::Sender<Request<R>>>,
    next: AtomicUsize,
    threads: Vec<JoinHandle<()>>,
}

impl<R: Reply> Service<R> {
    pub(crate) fn new(threads: usize) -> Self {
        let (senders, threads) = (0..threads)
            .map(|i| {
                let (tx, rx) = mpsc::channel();
                let thread = std::thread::Builder::new()
                    .name(format!("service-{i}"))
                    .spawn(move || serve(rx))
                    .expect("a service thread");
                (tx, thread)
            })
            .unzip();
        Service {
            senders,
            next: AtomicUsize::new(0),
            threads,
        }
    }

    /// Answers `value` to `reply` after `delay`.
    pub(crate) fn call(&self, delay: Duration, value: u64, reply: R) {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.senders.len();
        let request = Request {
            due: Instant::now() + delay,
            value,
            reply,
        };
        self.senders[i]
            .send(request)
            .expect("the service threads run until the service is dropped");
    }
}

impl<R: Reply> Drop for Service<R> {
    fn drop(&mut self) {
        self.senders.clear();
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// One service thread: takes requests, answers each when it is due, ends
/// when every sender is gone and nothing waits.
fn serve<R: Reply>(requests: mpsc::Receiver<Request<R>>) {
    let mut waiting: BinaryHeap<Waiting<R>> = BinaryHeap::new();
    let mut arrived = 0u64;
    let mut open = true;
    while open || !waiting.is_empty() {
        let next = match waiting.peek() {
            None => requests
                .recv()
                .map_err(|_| mpsc::RecvTimeoutError::Disconnected),
            Some(first) => {
                let due = (first.0).0 .0;
                requests.recv_timeout(due.saturating_duration_since(Instant::now()))
            }
        };
        match next {
            Ok(request) => {
                arrived += 1;
                waiting.push(Waiting(Reverse((request.due, arrived)), request));
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => open = false,
        }
        let now = Instant::now();
        while waiting.peek().is_some_and(|first| (first.0).0 .0 <= now) {
            let Waiting(_, request) = waiting.pop().expect("peeked");
            request.reply.reply(request.value);
        }
        if !open && !waiting.is_empty() {
            let due = (waiting.peek().expect("not empty").0).0 .0;
            std::thread::sleep(due.saturating_duration_since(Instant::now()));
        }
    }
}
