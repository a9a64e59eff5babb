//! The endpoint: a thread that accepts connections, and one thread per
//! connection that answers its requests with snapshots.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use sched_core::{AsContext, Context};

use super::figure::{Figure, FigureFn};
use super::protocol::{
    ErrorReply, Request, IDLE_TIMEOUT, MAX_CONNECTIONS, MAX_REQUEST_LEN, MIN_SPACING, WRITE_TIMEOUT,
};
use super::sampler::Sampler;

/// How often the endpoint's threads look at their stop flag.
const POLL: Duration = Duration::from_millis(50);

/// A running endpoint ([`serve`], [`serve_with`]): its listener and
/// connection threads stop (joined, sockets closed) on
/// [`stop`](LiveEndpoint::stop) or drop. It holds the scheduler's `Arc`
/// (and the figures callback) until then.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use std::sync::Arc;
///
/// let scheduler = Arc::new(Scheduler::builder().workers(1).build());
/// let endpoint = sched::live::serve(Arc::clone(&scheduler), "127.0.0.1:0")?;
/// let addr = endpoint.local_addr();
/// drop(endpoint); // stops and joins its threads
/// assert!(std::net::TcpStream::connect(addr).is_err());
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct LiveEndpoint {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl LiveEndpoint {
    /// The address it listens on (with the port the system chose when
    /// asked for port 0).
    ///
    /// # Examples
    ///
    /// See [`LiveEndpoint`].
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops listening, closes every connection and joins the threads.
    ///
    /// # Examples
    ///
    /// See the [module](super)'s example.
    pub fn stop(mut self) {
        self.shut();
    }

    fn shut(&mut self) {
        self.stop.store(true, SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for LiveEndpoint {
    fn drop(&mut self) {
        self.shut();
    }
}

/// Serves [`Snapshot`](super::Snapshot)s of `scheduler` on `addr` (see the
/// [module](super)'s protocol) from a thread of its own, until the returned
/// [`LiveEndpoint`] is stopped or dropped. Bind it to loopback: it has no
/// authentication.
///
/// `scheduler` is an `Arc` of anything that hands out its [`Context`]
/// ([`AsContext`]): a [`Scheduler`](crate::Scheduler), an
/// [`Engine`](crate::engine::Engine) or a simulation. An `Arc`, because
/// the endpoint's thread outlives the call: it holds the engine, so the
/// engine cannot be dropped while the thread reads it (a `Context` is
/// only ever borrowed, and a borrow cannot cross into that thread).
///
/// # Errors
///
/// What binding `addr` returns (the address in use, a bad address).
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use std::sync::Arc;
///
/// let scheduler = Arc::new(Scheduler::builder().workers(2).histograms(true).build());
/// scheduler.start();
/// // An application would serve on sched::live::DEFAULT_ADDR; a test, on any free port.
/// let endpoint = sched::live::serve(Arc::clone(&scheduler), "127.0.0.1:0")?;
/// println!("attach with: sched-top {}", endpoint.local_addr());
/// # drop(endpoint);
/// # scheduler.shutdown(std::time::Duration::from_secs(1));
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn serve<S>(scheduler: Arc<S>, addr: impl ToSocketAddrs) -> io::Result<LiveEndpoint>
where
    S: AsContext + Send + Sync + 'static,
{
    start(scheduler, addr, None)
}

/// Serves [`Snapshot`](super::Snapshot)s of `scheduler` on `addr` as [`serve`] does, each
/// with the [`Figure`]s that `figures` returns for it: how an application
/// shows the figures of the libraries it uses (a journal's records and
/// sync latency, a transport's queues) beside the engine's, in
/// [`Snapshot::figures`](super::Snapshot::figures) and in `sched-top`'s panels.
///
/// `figures` is called on the endpoint's connection threads, once per
/// snapshot (so at most once per [`MIN_SPACING`] per connection), and
/// from several at once when several clients are attached: make it read
/// counters, not compute. If it panics, the endpoint goes on serving: that
/// snapshot is served without figures, and the panic is logged through
/// `tracing` (a warning the first time on each connection, at debug
/// level after). Of a longer list, the first [`MAX_FIGURES`](super::MAX_FIGURES) are served.
///
/// # Errors
///
/// What binding `addr` returns (the address in use, a bad address).
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use sched::live::{Figure, Unit};
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// // Figures a library keeps; here, a counter of its own.
/// let records = Arc::new(AtomicU64::new(0));
/// let scheduler = Arc::new(Scheduler::builder().workers(1).build());
/// let counted = Arc::clone(&records);
/// let endpoint = sched::live::serve_with(Arc::clone(&scheduler), "127.0.0.1:0", move || {
///     vec![
///         Figure::counter("journal", "records", counted.load(Ordering::Relaxed) as f64, Unit::Count),
///         Figure::gauge("journal", "store size", 4096.0, Unit::Bytes),
///     ]
/// })?;
/// records.store(12, Ordering::Relaxed);
///
/// let mut client = sched::live::Client::connect(endpoint.local_addr(), Duration::from_secs(5))?;
/// let snapshot = client.snapshot(10)?;
/// assert_eq!(snapshot.figures.len(), 2);
/// assert_eq!(snapshot.figures[0].source, "journal");
/// assert_eq!(snapshot.figures[0].value, 12.0);
/// assert_eq!(snapshot.figures[1].unit, Unit::Bytes);
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn serve_with<S, F>(
    scheduler: Arc<S>,
    addr: impl ToSocketAddrs,
    figures: F,
) -> io::Result<LiveEndpoint>
where
    S: AsContext + Send + Sync + 'static,
    F: Fn() -> Vec<Figure> + Send + Sync + 'static,
{
    start(scheduler, addr, Some(Arc::new(figures)))
}

fn start<S>(
    scheduler: Arc<S>,
    addr: impl ToSocketAddrs,
    figures: Option<Arc<FigureFn>>,
) -> io::Result<LiveEndpoint>
where
    S: AsContext + Send + Sync + 'static,
{
    let listener = TcpListener::bind(addr)?;
    listener.set_nonblocking(true)?;
    let addr = listener.local_addr()?;
    if !addr.ip().is_loopback() {
        tracing::warn!(%addr, "the live endpoint listens beyond loopback; it has no authentication");
    }
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    let thread = std::thread::Builder::new()
        .name("sched-live".into())
        .spawn(move || accept_loop(listener, scheduler, figures, flag))?;
    tracing::info!(%addr, "live endpoint listening");
    Ok(LiveEndpoint {
        addr,
        stop,
        thread: Some(thread),
    })
}

/// A connection being served: its thread, and a handle on its socket to
/// close it from the accepting thread when the endpoint stops.
struct Connection {
    thread: JoinHandle<()>,
    socket: Arc<Mutex<Option<TcpStream>>>,
}

fn accept_loop<S>(
    listener: TcpListener,
    scheduler: Arc<S>,
    figures: Option<Arc<FigureFn>>,
    stop: Arc<AtomicBool>,
) where
    S: AsContext + Send + Sync + 'static,
{
    let origin = Instant::now();
    let mut connections: Vec<Connection> = Vec::new();
    while !stop.load(SeqCst) {
        match listener.accept() {
            Ok((stream, peer)) => {
                connections.retain(|c| !c.thread.is_finished());
                if connections.len() >= MAX_CONNECTIONS {
                    tracing::warn!(%peer, max = MAX_CONNECTIONS, "live endpoint: connection refused, too many");
                    refuse(stream, "too many connections");
                    continue;
                }
                match open(
                    stream,
                    peer,
                    Arc::clone(&scheduler),
                    figures.clone(),
                    Arc::clone(&stop),
                    origin,
                ) {
                    Ok(connection) => connections.push(connection),
                    Err(e) => {
                        tracing::debug!(%peer, error = %e, "live endpoint: connection dropped")
                    }
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::sleep(POLL),
            Err(e) => {
                tracing::debug!(error = %e, "live endpoint: accept failed");
                std::thread::sleep(POLL);
            }
        }
    }
    drop(listener);
    for connection in &connections {
        if let Some(socket) = connection
            .socket
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
        {
            let _ = socket.shutdown(Shutdown::Both);
        }
    }
    for connection in connections {
        let _ = connection.thread.join();
    }
    tracing::info!("live endpoint stopped");
}

/// Tells a client why it is closed, without waiting on it.
fn refuse(mut stream: TcpStream, why: &str) {
    let _ = stream.set_nonblocking(true);
    let reply = ErrorReply { error: why.into() };
    let mut line = serde_json::to_string(&reply).expect("an error reply serializes");
    line.push('\n');
    let _ = stream.write_all(line.as_bytes());
    let _ = stream.shutdown(Shutdown::Both);
}

fn open<S>(
    stream: TcpStream,
    peer: SocketAddr,
    scheduler: Arc<S>,
    figures: Option<Arc<FigureFn>>,
    stop: Arc<AtomicBool>,
    origin: Instant,
) -> io::Result<Connection>
where
    S: AsContext + Send + Sync + 'static,
{
    // Accepted sockets may inherit the listener's non-blocking mode.
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(POLL))?;
    stream.set_write_timeout(Some(WRITE_TIMEOUT))?;
    let _ = stream.set_nodelay(true);
    let socket = Arc::new(Mutex::new(Some(stream.try_clone()?)));
    let held = Arc::clone(&socket);
    let thread = std::thread::Builder::new()
        .name("sched-live-conn".into())
        .spawn(move || {
            tracing::debug!(%peer, "live endpoint: client connected");
            let sampler = Sampler::since(origin).with_shared_figures(figures);
            let why = converse(stream, scheduler.context(), sampler, &stop);
            tracing::debug!(%peer, why, "live endpoint: client disconnected");
            held.lock().unwrap_or_else(|e| e.into_inner()).take();
        })?;
    Ok(Connection { thread, socket })
}

/// Answers one client's requests until it leaves, misbehaves or the
/// endpoint stops; returns why it ended.
fn converse(
    stream: TcpStream,
    cx: &Context,
    mut sampler: Sampler,
    stop: &AtomicBool,
) -> &'static str {
    let mut writer = match stream.try_clone() {
        Ok(writer) => writer,
        Err(_) => return "could not clone the socket",
    };
    let mut reader = BufReader::new(stream);
    let mut line = Vec::new();
    let mut last_request = Instant::now();
    let mut last_sample: Option<Instant> = None;
    loop {
        if stop.load(SeqCst) {
            return "endpoint stopped";
        }
        let room = (MAX_REQUEST_LEN - line.len()) as u64;
        match (&mut reader).take(room).read_until(b'\n', &mut line) {
            Ok(0) if line.is_empty() => return "closed by the client",
            Ok(_) if line.last() == Some(&b'\n') => {}
            Ok(_) if line.len() >= MAX_REQUEST_LEN => {
                refuse_on(&mut writer, "request line too long");
                return "request line too long";
            }
            Ok(_) => return "closed by the client mid-request",
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                if last_request.elapsed() >= IDLE_TIMEOUT {
                    return "idle";
                }
                continue;
            }
            Err(_) => return "read failed",
        }
        last_request = Instant::now();
        let request = match parse_request(&line) {
            Ok(request) => request,
            Err(why) => {
                refuse_on(&mut writer, &why);
                return "bad request";
            }
        };
        line.clear();
        if let Some(last) = last_sample {
            std::thread::sleep(MIN_SPACING.saturating_sub(last.elapsed()));
        }
        last_sample = Some(Instant::now());
        let snapshot = sampler.sample(cx, request.top());
        if writer
            .write_all(snapshot.to_json_line().as_bytes())
            .and_then(|()| writer.flush())
            .is_err()
        {
            return "write failed or timed out";
        }
    }
}

fn refuse_on(writer: &mut TcpStream, why: &str) {
    let reply = ErrorReply { error: why.into() };
    let mut line = serde_json::to_string(&reply).expect("an error reply serializes");
    line.push('\n');
    let _ = writer.write_all(line.as_bytes());
}

fn parse_request(line: &[u8]) -> Result<Request, String> {
    let text = std::str::from_utf8(line).map_err(|_| "request is not UTF-8".to_string())?;
    let text = text.trim();
    if text.is_empty() {
        return Ok(Request::default());
    }
    serde_json::from_str(text).map_err(|e| format!("bad request: {e}"))
}
