//! Talking to the endpoint from a thread of its own, so that the screen
//! and the keys never wait on the network.

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sched::live::{Client, Snapshot};

/// How long a connection attempt or an answer may take.
const TIMEOUT: Duration = Duration::from_secs(2);

/// What the fetching thread reports.
///
/// # Examples
///
/// ```
/// use sched_top::fetch::Update;
///
/// let update = Update::Disconnected("connection refused".into());
/// assert!(matches!(update, Update::Disconnected(_)));
/// ```
#[derive(Debug, Clone)]
pub enum Update {
    /// A snapshot arrived.
    Snapshot(Box<Snapshot>),
    /// The connection could not be made or was lost (why); the thread
    /// retries, and the next snapshot comes from a new connection.
    Disconnected(String),
}

/// A thread that asks the endpoint at `addr` for a snapshot every
/// interval and sends what happens on [`updates`](Fetcher::updates),
/// reconnecting when the connection drops. Dropping it tells the thread to
/// stop (without waiting for a request in flight).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use sched_top::fetch::{Fetcher, Update};
///
/// // Nothing listens on port 9 of loopback (the discard port).
/// let fetcher = Fetcher::start("127.0.0.1:9".into(), Duration::from_millis(100), 10);
/// let update = fetcher.updates.recv_timeout(Duration::from_secs(10)).unwrap();
/// assert!(matches!(update, Update::Disconnected(_)));
/// ```
#[derive(Debug)]
pub struct Fetcher {
    /// Snapshots and disconnections, in order.
    pub updates: Receiver<Update>,
    stop: Arc<AtomicBool>,
}

impl Fetcher {
    /// Starts the thread: it connects at once, then asks for a snapshot
    /// with top lists of `top` processes every `interval`.
    ///
    /// # Examples
    ///
    /// See [`Fetcher`].
    pub fn start(addr: String, interval: Duration, top: usize) -> Fetcher {
        let (tx, updates) = channel();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        std::thread::Builder::new()
            .name("sched-top-fetch".into())
            .spawn(move || fetch_loop(&addr, interval, top, &tx, &flag))
            .expect("spawn the fetching thread");
        Fetcher { updates, stop }
    }
}

impl Drop for Fetcher {
    fn drop(&mut self) {
        self.stop.store(true, SeqCst);
    }
}

fn resolve(addr: &str) -> Result<SocketAddr, String> {
    addr.to_socket_addrs()
        .map_err(|e| format!("cannot resolve {addr}: {e}"))?
        .next()
        .ok_or_else(|| format!("{addr} resolves to no address"))
}

/// Sleeps `d` in short slices; false when told to stop meanwhile.
fn nap(d: Duration, stop: &AtomicBool) -> bool {
    let until = Instant::now() + d;
    while !stop.load(SeqCst) {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return true;
        }
        std::thread::sleep(left.min(Duration::from_millis(25)));
    }
    false
}

fn fetch_loop(addr: &str, interval: Duration, top: usize, tx: &Sender<Update>, stop: &AtomicBool) {
    let retry = interval.min(Duration::from_secs(1));
    while !stop.load(SeqCst) {
        let connected =
            resolve(addr).and_then(|a| Client::connect(a, TIMEOUT).map_err(|e| e.to_string()));
        let mut client = match connected {
            Ok(client) => client,
            Err(why) => {
                if tx.send(Update::Disconnected(why)).is_err() || !nap(retry, stop) {
                    return;
                }
                continue;
            }
        };
        loop {
            let asked = Instant::now();
            match client.snapshot(top) {
                Ok(snapshot) => {
                    if tx.send(Update::Snapshot(Box::new(snapshot))).is_err() {
                        return;
                    }
                }
                Err(e) => {
                    if tx.send(Update::Disconnected(e.to_string())).is_err() || !nap(retry, stop) {
                        return;
                    }
                    break;
                }
            }
            if !nap(interval.saturating_sub(asked.elapsed()), stop) {
                return;
            }
        }
    }
}
