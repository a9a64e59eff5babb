//! [`NatsTransport`]: the handle the engine sends through.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::AcqRel, Ordering::Acquire};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;

use relay::{Package, Pid, Receiver, RemoteTransport, SendError, SendErrorKind};
use tokio::sync::mpsc;

use crate::config::NatsConfig;
use crate::error::{ConnectError, LinkError};
use crate::io;
use crate::membership::Members;
use crate::shared::{Attached, Command, Inner};
use crate::stats::{Counters, TransportStats};

/// A [`RemoteTransport`] over NATS: each node subscribes to one subject of
/// its own (`<prefix>.node.<n>`), and a package for a PID of node `n` is
/// encoded by the [`Codec`](crate::Codec) and published there.
///
/// The NATS client runs on a single-threaded tokio runtime on a thread of
/// the transport's own, so the scheduler stays free of any async runtime.
/// Sends are queued to that thread in order and published in that order,
/// so two processes' messages keep their order (core NATS keeps a
/// publisher's order on a subject). When the connection drops, the client
/// reconnects and queued messages follow; what was lost in between is
/// counted by the receiver ([`TransportStats::lost`]).
///
/// Dropping the transport (the scheduler owns it once attached) announces
/// that the node leaves, flushes, and stops the thread.
///
/// # Examples
///
/// ```no_run
/// use relay_nats::{Codec, NatsConfig, NatsTransport};
/// use sched::Scheduler;
/// use std::sync::Arc;
///
/// let config = NatsConfig::new("nats://127.0.0.1:4222").codec(Codec::new().register::<String>("text"));
/// let transport = Arc::new(NatsTransport::connect(config)?);
/// let scheduler = Scheduler::builder().node(1).remote(transport.clone()).build();
/// scheduler.start();
/// // ... sends to PIDs of other nodes now travel over NATS.
/// println!("{:?}", transport.stats());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct NatsTransport {
    inner: Arc<Inner>,
    commands: mpsc::UnboundedSender<Command>,
    closed: AtomicBool,
    node: OnceLock<u32>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl NatsTransport {
    /// Connects to the server (blocking until connected or refused) and
    /// starts the transport's thread. The transport subscribes when a
    /// scheduler attaches it.
    ///
    /// # Errors
    ///
    /// [`ConnectError`] when the client cannot connect (with the client's
    /// options as given: `retry_on_initial_connect` makes it wait instead)
    /// or the thread cannot start.
    ///
    /// # Examples
    ///
    /// See [`NatsTransport`].
    pub fn connect(config: NatsConfig) -> Result<NatsTransport, ConnectError> {
        let inner = Arc::new(Inner {
            codec: config.codec,
            prefix: config.prefix,
            counters: Counters::default(),
            members: Members::default(),
            heartbeat: config.heartbeat,
            down_after: config.down_after,
            connected: AtomicBool::new(true),
            pending: AtomicUsize::new(0),
            max_pending: config.max_pending,
            incarnation: incarnation(),
            engine: OnceLock::new(),
            names: OnceLock::new(),
            names_bucket: config.names_bucket,
            name_lease: config.name_lease,
            held: Mutex::new(std::collections::HashMap::new()),
            lease_clocks: Mutex::default(),
            numbers: Mutex::default(),
            gaps: Mutex::default(),
            commands: OnceLock::new(),
            farewells: Mutex::default(),
            announced_at: OnceLock::new(),
        });
        let (commands, queue) = mpsc::unbounded_channel();
        // The loop stops on `Command::Close` (sent on close and on drop),
        // not when the senders are gone: this one lives as long as `inner`.
        let _ = inner.commands.set(commands.clone());
        let (connected, outcome) = std::sync::mpsc::channel();
        let thread_inner = Arc::clone(&inner);
        let options = counting_events(config.options, &inner);
        let url = config.url;
        let thread = std::thread::Builder::new()
            .name("relay-nats".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => runtime,
                    Err(e) => {
                        let _ = connected.send(Err(ConnectError::Runtime(e)));
                        return;
                    }
                };
                runtime.block_on(async move {
                    let client = match options.connect(url.as_str()).await {
                        Ok(client) => client,
                        Err(e) => {
                            let _ = connected.send(Err(ConnectError::Nats(e)));
                            return;
                        }
                    };
                    let _ = connected.send(Ok(()));
                    io::run(client, thread_inner, queue).await;
                });
            })
            .map_err(ConnectError::Runtime)?;
        match outcome.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                let _ = thread.join();
                return Err(e);
            }
            Err(_) => {
                let _ = thread.join();
                let gone = std::io::Error::other("the transport thread ended while connecting");
                return Err(ConnectError::Runtime(gone));
            }
        }
        Ok(NatsTransport {
            inner,
            commands,
            closed: AtomicBool::new(false),
            node: OnceLock::new(),
            thread: Mutex::new(Some(thread)),
        })
    }

    /// The counters so far.
    ///
    /// # Examples
    ///
    /// See [`NatsTransport`].
    pub fn stats(&self) -> TransportStats {
        self.inner.counters.snapshot()
    }

    /// The node this transport was attached as, once a scheduler attached
    /// it.
    ///
    /// # Examples
    ///
    /// See [`NatsTransport`].
    pub fn node(&self) -> Option<u32> {
        self.node.get().copied()
    }

    /// Releases this node's names, announces that the node leaves, waits
    /// for the other nodes' farewells, flushes what is queued, and stops
    /// the transport's thread: each of the three waits gives up after two
    /// seconds, so a node whose server cannot be reached takes up to six
    /// seconds to close (one that can, as long as the slowest farewell).
    /// Later sends are
    /// refused as [`Unreachable`](SendErrorKind::Unreachable)
    /// ([`LinkError::Closed`]). Dropping the transport does the same.
    ///
    /// # Examples
    ///
    /// See [`NatsTransport`].
    pub fn close(&self) {
        if self.closed.swap(true, AcqRel) {
            return;
        }
        let _ = self.commands.send(Command::Close);
        let thread = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(thread) = thread {
            // The last handle may go on the transport's own thread (an
            // engine whose last reference was the one delivering a frame
            // there): it ends by itself after `Close`, and cannot wait for
            // itself.
            if thread.thread().id() == std::thread::current().id() {
                tracing::debug!("the NATS transport closed from its own thread");
                return;
            }
            if thread.join().is_err() {
                tracing::error!("the NATS transport thread panicked");
            }
        }
    }

    pub(crate) fn inner(&self) -> &Arc<Inner> {
        &self.inner
    }

    /// Whether [`close`](NatsTransport::close) was called (or the last
    /// handle dropped).
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Acquire)
    }

    /// Runs `task` on the transport's thread.
    pub(crate) fn spawn_task(
        &self,
        task: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>,
    ) -> Result<(), ()> {
        self.commands.send(Command::Run(task)).map_err(|_| ())
    }

    /// Delivers `value` to a process of this transport's own engine.
    pub(crate) fn post_local<T: std::any::Any + Send>(&self, to: Pid, value: T) -> Result<(), ()> {
        let Some(Attached(me, local)) = self.inner.engine.get() else {
            return Err(());
        };
        local
            .send(Package::new(Pid::new(*me, 0), to, value))
            .map_err(|_| ())
    }

    fn refuse(
        &self,
        kind: SendErrorKind,
        package: Package,
        cause: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> SendError {
        Counters::add(&self.inner.counters.refused, 1);
        SendError::new(kind, package).with_cause(cause)
    }
}

impl RemoteTransport for NatsTransport {
    fn attach(&self, node: u32, local: Arc<dyn Receiver + Send + Sync>) {
        if self.node.set(node).is_err() {
            tracing::error!(
                node,
                "a NATS transport serves one scheduler: second attach ignored"
            );
            return;
        }
        let (done, result) = std::sync::mpsc::channel();
        if self
            .commands
            .send(Command::Attach { node, local, done })
            .is_err()
        {
            tracing::error!(node, "the NATS transport is closed: not attached");
            return;
        }
        match result.recv() {
            Ok(Ok(())) => {}
            Ok(Err(error)) => tracing::error!(node, %error, "the NATS transport could not attach"),
            Err(_) => tracing::error!(node, "the NATS transport thread ended while attaching"),
        }
    }

    fn send(&self, package: Package) -> Result<(), SendError> {
        let node = package.target().node();
        if self.closed.load(Acquire) {
            return Err(self.refuse(SendErrorKind::Unreachable, package, LinkError::Closed));
        }
        let (addressed, gone) = self.inner.members.route(node);
        if let Some(gone) = gone {
            return Err(self.refuse(SendErrorKind::Unreachable, package, gone));
        }
        let frame = match self.inner.codec.encode(&package) {
            Ok(frame) => frame,
            Err(error) => {
                tracing::debug!(%error, target = %package.target(), "refused a message that cannot be encoded");
                return Err(self.refuse(SendErrorKind::Unencodable, package, error));
            }
        };
        let max = self.inner.max_pending;
        if self.inner.pending.fetch_add(1, AcqRel) >= max {
            self.inner.pending.fetch_sub(1, AcqRel);
            return Err(self.refuse(SendErrorKind::Full, package, LinkError::Backlog { max }));
        }
        // A package passed on from another node keeps that node's frame
        // unconfirmed until the next node confirms this one.
        let mut package = package;
        let receipt = package.take_receipt();
        if let Err(unsent) = self.commands.send(Command::Publish {
            node,
            frame,
            addressed,
            receipt,
        }) {
            self.inner.pending.fetch_sub(1, AcqRel);
            if let Command::Publish {
                receipt: Some(receipt),
                ..
            } = unsent.0
            {
                package = package.with_receipt(receipt);
            }
            return Err(self.refuse(SendErrorKind::Unreachable, package, LinkError::Closed));
        }
        // The bytes are on their way; the value itself ends here.
        drop(package);
        Ok(())
    }
}

impl Drop for NatsTransport {
    fn drop(&mut self) {
        self.close();
    }
}

/// Counts reconnections and logs connection events (this replaces any
/// event callback set on the options).
fn counting_events(
    options: async_nats::ConnectOptions,
    inner: &Arc<Inner>,
) -> async_nats::ConnectOptions {
    let inner = Arc::downgrade(inner);
    let disconnected = Arc::new(AtomicBool::new(false));
    options.event_callback(move |event| {
        let inner = inner.clone();
        let disconnected = Arc::clone(&disconnected);
        async move {
            match event {
                async_nats::Event::Connected => {
                    if disconnected.swap(false, AcqRel) {
                        if let Some(inner) = inner.upgrade() {
                            Counters::add(&inner.counters.reconnects, 1);
                            // Silence while we were away says nothing.
                            inner.members.heard_all(std::time::Instant::now());
                            inner
                                .connected
                                .store(true, std::sync::atomic::Ordering::Release);
                            // What was sent while the connection was down
                            // may be lost either way: relations set up
                            // meanwhile end too, on both sides.
                            inner.lose_all();
                        }
                        tracing::info!("reconnected to NATS");
                    }
                }
                async_nats::Event::Disconnected => {
                    disconnected.store(true, std::sync::atomic::Ordering::Release);
                    if let Some(inner) = inner.upgrade() {
                        inner
                            .connected
                            .store(false, std::sync::atomic::Ordering::Release);
                        inner.lose_all();
                    }
                    tracing::warn!("disconnected from NATS");
                }
                async_nats::Event::SlowConsumer(subscription) => {
                    if let Some(inner) = inner.upgrade() {
                        Counters::add(&inner.counters.slow_consumer, 1);
                    }
                    tracing::warn!(
                        subscription,
                        "the NATS client dropped messages: a subscription is too slow"
                    );
                }
                other => tracing::info!(event = %other, "NATS client event"),
            }
        }
    })
}

/// A number unlikely to repeat across transports and runs of a node.
fn incarnation() -> u64 {
    static MADE: AtomicUsize = AtomicUsize::new(0);
    let made = MADE.fetch_add(1, AcqRel) as u64;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    nanos ^ (u64::from(std::process::id()) << 32) ^ made.wrapping_mul(0x9E37_79B9_7F4A_7C15)
}
