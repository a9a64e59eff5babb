//! A real `nats-server` on a free loopback port, two-node setups, and the
//! processes the tests run.

#![allow(dead_code, unreachable_pub)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use relay_nats::async_nats::ConnectOptions;
use relay_nats::{Codec, Format, NatsConfig, NatsTransport};
use sched::prelude::*;
use serde::{Deserialize, Serialize};

#[path = "server.rs"]
mod server;
pub use server::NatsServer;

/// What the tests of this crate do with a server beyond starting it.
impl NatsServer {
    /// A node connecting with `user` and `password`.
    pub fn node_as(
        &self,
        node: u32,
        user: &str,
        password: &str,
    ) -> (Scheduler, Arc<NatsTransport>) {
        let options = ConnectOptions::with_user_and_password(user.into(), password.into())
            .reconnect_delay_callback(|_| Duration::from_millis(50))
            .name(format!("test-node-{node}"));
        let config = NatsConfig::new(self.url())
            .codec(codec())
            .options(options)
            .failure_detector(HEARTBEAT, DOWN_AFTER)
            .cluster_names(NAMES);
        started_node(config, node)
    }

    /// Publishes `payload` on `subject` over a raw protocol connection
    /// (what a foreign or broken client could send).
    pub fn publish_raw(&self, subject: &str, payload: &[u8]) {
        let errors = self.publish_raw_as(None, subject, payload);
        assert!(errors.is_empty(), "{errors:?}");
    }

    /// [`publish_raw`](NatsServer::publish_raw) with `user` and password
    /// `(user, password)`; returns the server's error lines (a permission
    /// violation, say).
    pub fn publish_raw_as(
        &self,
        credentials: Option<(&str, &str)>,
        subject: &str,
        payload: &[u8],
    ) -> Vec<String> {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut out = Vec::new();
        let login = credentials.map_or(String::new(), |(user, pass)| {
            format!(",\"user\":\"{user}\",\"pass\":\"{pass}\"")
        });
        out.extend_from_slice(
            format!("CONNECT {{\"verbose\":false,\"pedantic\":false{login}}}\r\n").as_bytes(),
        );
        out.extend_from_slice(format!("PUB {subject} {}\r\n", payload.len()).as_bytes());
        out.extend_from_slice(payload);
        out.extend_from_slice(b"\r\nPING\r\n");
        stream.write_all(&out).unwrap();
        let mut seen = Vec::new();
        let mut buf = [0u8; 1024];
        while !String::from_utf8_lossy(&seen).contains("PONG") {
            let n = match stream.read(&mut buf) {
                Ok(n) => n,
                Err(_) => break,
            };
            if n == 0 {
                break; // closed: an authorization failure does that
            }
            seen.extend_from_slice(&buf[..n]);
        }
        String::from_utf8_lossy(&seen)
            .lines()
            .filter(|line| line.starts_with("-ERR"))
            .map(str::to_owned)
            .collect()
    }
}

/// A loopback TCP proxy in front of a server that holds back every byte a
/// client sends for `delay` (in order), and passes the server's bytes on at
/// once: a client whose operations reach the server late, as on a loaded
/// machine where the server reads that connection last.
pub struct SlowProxy {
    pub port: u16,
}

impl SlowProxy {
    pub fn start(server_port: u16, delay: Duration) -> SlowProxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
        let port = listener.local_addr().expect("bound").port();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let Ok(server) = TcpStream::connect(("127.0.0.1", server_port)) else {
                    return;
                };
                let (mut client_in, mut server_in) = (
                    client.try_clone().expect("clone"),
                    server.try_clone().expect("clone"),
                );
                let (mut client_out, mut server_out) = (client, server);
                // Server to client: at once.
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut server_in, &mut client_out);
                    let _ = client_out.shutdown(std::net::Shutdown::Both);
                });
                // Client to server: each chunk `delay` after it was read.
                let (chunks, held) = std::sync::mpsc::channel::<(Instant, Vec<u8>)>();
                std::thread::spawn(move || {
                    let mut buf = [0u8; 16 * 1024];
                    loop {
                        match client_in.read(&mut buf) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => {
                                if chunks.send((Instant::now(), buf[..n].to_vec())).is_err() {
                                    return;
                                }
                            }
                        }
                    }
                });
                std::thread::spawn(move || {
                    for (read_at, chunk) in held {
                        let due = read_at + delay;
                        let now = Instant::now();
                        if due > now {
                            std::thread::sleep(due - now);
                        }
                        if server_out.write_all(&chunk).is_err() {
                            return;
                        }
                    }
                    let _ = server_out.shutdown(std::net::Shutdown::Both);
                });
            }
        });
        SlowProxy { port }
    }

    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }
}

/// A loopback proxy between one node and the server that the test can
/// stall (the node's bytes to the server are held, while the server's
/// reach it: the others stop hearing it, it notices nothing) or cut (every
/// connection through it closes; the node reconnects through it).
pub struct FaultyProxy {
    pub port: u16,
    /// Bytes to the server are held until then.
    stalled_until: Arc<Mutex<Instant>>,
    /// The sockets of the connections through the proxy, to cut them.
    open: Arc<Mutex<Vec<TcpStream>>>,
    /// Set: every connection is cut and no new one is let through.
    dead: Arc<std::sync::atomic::AtomicBool>,
}

impl FaultyProxy {
    pub fn start(server_port: u16) -> FaultyProxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
        let port = listener.local_addr().expect("bound").port();
        let stalled_until = Arc::new(Mutex::new(Instant::now()));
        let open = Arc::new(Mutex::new(Vec::new()));
        let (stall, sockets) = (Arc::clone(&stalled_until), Arc::clone(&open));
        let dead = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let refuse = Arc::clone(&dead);
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                if refuse.load(std::sync::atomic::Ordering::SeqCst) {
                    continue; // dropped: closed at once
                }
                let Ok(server) = TcpStream::connect(("127.0.0.1", server_port)) else {
                    return;
                };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                {
                    let mut sockets = sockets.lock().unwrap();
                    sockets.push(client.try_clone().expect("clone"));
                    sockets.push(server.try_clone().expect("clone"));
                }
                let (mut server_in, mut client_out) = (
                    server.try_clone().expect("clone"),
                    client.try_clone().expect("clone"),
                );
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut server_in, &mut client_out);
                    let _ = client_out.shutdown(std::net::Shutdown::Both);
                });
                let (mut client_in, mut server_out) = (client, server);
                let stall = Arc::clone(&stall);
                std::thread::spawn(move || {
                    let mut buf = [0u8; 16 * 1024];
                    loop {
                        let n = match client_in.read(&mut buf) {
                            Ok(0) | Err(_) => break,
                            Ok(n) => n,
                        };
                        loop {
                            let until = *stall.lock().unwrap();
                            let now = Instant::now();
                            if until <= now {
                                break;
                            }
                            // In steps: the stall may be lifted early.
                            std::thread::sleep((until - now).min(Duration::from_millis(10)));
                        }
                        if server_out.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                    let _ = server_out.shutdown(std::net::Shutdown::Both);
                });
            }
        });
        FaultyProxy {
            port,
            stalled_until,
            open,
            dead,
        }
    }

    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Holds the node's bytes to the server for `how_long`, from now.
    pub fn stall(&self, how_long: Duration) {
        *self.stalled_until.lock().unwrap() = Instant::now() + how_long;
    }

    /// Cuts every connection and lets none through again: to the server
    /// and the other nodes, the node behind the proxy is dead.
    pub fn kill(&self) {
        self.dead.store(true, std::sync::atomic::Ordering::SeqCst);
        self.cut();
    }

    /// Closes every connection through the proxy.
    pub fn cut(&self) {
        for socket in self.open.lock().unwrap().drain(..) {
            let _ = socket.shutdown(std::net::Shutdown::Both);
        }
    }
}

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ping(pub u64);

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pong(pub u64);

/// Asked, a `Ping(n)` is answered with a `Pong(n)` (see [`Server`]).
impl Question for Ping {
    type Answer = Pong;
}

/// A numbered message from sender `from`.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seq {
    pub from: u64,
    pub n: u64,
}

pub fn codec() -> Codec {
    Codec::new()
        .register::<Ping>("ping")
        .register::<Pong>("pong")
        // Binary: the tests that stream `Seq` (order, restarts, processes)
        // carry postcard, the ping-pong ones JSON, side by side.
        .register_as::<Seq>("seq", Format::Postcard)
        .max_message_bytes(4096)
}

/// The tests' failure detector: a heartbeat every 250 ms, down after 4 s
/// of silence (longer than the default 2 s: a server restart on a loaded
/// machine must not look like a dead node when the two clients reconnect
/// at different times).
pub const HEARTBEAT: Duration = Duration::from_millis(250);
pub const DOWN_AFTER: Duration = Duration::from_secs(4);
/// The heartbeat of a node whose test must act before its first claims:
/// a keyed host waits two heartbeats before it places and claims
/// anything, 2 s with this one, where `HEARTBEAT`'s 500 ms is a stall a
/// loaded machine can give the test's thread.
pub const SLOW_BEAT: Duration = Duration::from_secs(1);

/// A scheduler as node `node`, with its transport (reconnecting quickly).
pub fn node(server: &NatsServer, node: u32) -> (Scheduler, Arc<NatsTransport>) {
    node_at(&server.url(), node)
}

/// The cluster names' bucket of every test node.
pub const NAMES: &str = "test-names";

/// [`node`], given the server's URL (in a process that did not start it).
pub fn node_at(url: &str, node: u32) -> (Scheduler, Arc<NatsTransport>) {
    node_detecting(url, node, HEARTBEAT, DOWN_AFTER)
}

/// [`node_at`], with this failure detector.
pub fn node_detecting(
    url: &str,
    node: u32,
    heartbeat: Duration,
    down_after: Duration,
) -> (Scheduler, Arc<NatsTransport>) {
    node_configured(url, node, |config| {
        config.failure_detector(heartbeat, down_after)
    })
}

/// [`node_at`], its configuration changed by `configure`.
pub fn node_configured(
    url: &str,
    node: u32,
    configure: impl FnOnce(NatsConfig) -> NatsConfig,
) -> (Scheduler, Arc<NatsTransport>) {
    let options = ConnectOptions::new()
        .reconnect_delay_callback(|_| Duration::from_millis(50))
        .name(format!("test-node-{node}"));
    let config = configure(
        NatsConfig::new(url)
            .codec(codec())
            .options(options)
            .failure_detector(HEARTBEAT, DOWN_AFTER)
            .cluster_names(NAMES),
    );
    started_node(config, node)
}

/// A started scheduler and its transport.
pub type Node = (Scheduler, Arc<NatsTransport>);

/// A started two-worker scheduler as node `node`, over a transport
/// connected with `config`.
fn started_node(config: NatsConfig, node: u32) -> (Scheduler, Arc<NatsTransport>) {
    let transport = Arc::new(NatsTransport::connect(config).expect("connected"));
    let scheduler = Scheduler::builder()
        .workers(2)
        .node(node)
        .remote(transport.clone())
        .build();
    scheduler.start();
    (scheduler, transport)
}

/// Node 1, on the server directly, declares a node down after 600 ms of
/// silence; node 2, behind the returned proxy (to stall, cut or kill),
/// keeps the tests' patient detector. Both beat every 100 ms.
pub fn watchful_and_proxied(server: &NatsServer) -> (FaultyProxy, Node, Node) {
    let proxy = FaultyProxy::start(server.port);
    let beat = Duration::from_millis(100);
    let one = node_detecting(&server.url(), 1, beat, Duration::from_millis(600));
    let two = node_detecting(&proxy.url(), 2, beat, DOWN_AFTER);
    (proxy, one, two)
}

/// Whether `sharding` holds exactly the shards of kind `name` that `kind`
/// places on `node` by the members it sees now. A `settled` wait needs it
/// beside the nodes' agreement on placement: when a node starts to see a
/// newcomer, it still holds the newcomer's shards until its host's next
/// tick hands them off, and meanwhile the shards held add up and every
/// node places every key alike, but a key placed on the newcomer still
/// runs on the old holder.
pub fn holds_its_own<M: Send + 'static>(
    node: u32,
    name: &str,
    kind: &relay_nats::Sharded<M>,
    sharding: &relay_nats::Sharding,
) -> bool {
    sharding
        .shard_stats()
        .iter()
        .filter(|s| s.kind == name)
        .all(|s| {
            let probe = (0..)
                .map(|i| format!("probe-{i}"))
                .find(|k| kind.shard_of(k) == s.shard)
                .expect("a key for every shard");
            s.held == (kind.placed_on(&probe) == Some(node))
        })
}

pub fn wait_until(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Answers every `Ping(n)` with `Pong(n)` to its sender.
pub struct Echo;

impl sched::Process for Echo {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            if let Event::Message(package) = event {
                let from = package.source();
                let Ping(n) = package.downcast::<Ping>().map_err(|_| "not a ping")?;
                out.send(from, Pong(n))?;
            }
        }
        Ok(())
    }
}

/// Plays `rounds` of ping-pong with `peer`, then finishes with the count.
pub struct Player {
    pub peer: Pid,
    pub rounds: u64,
    pub started: bool,
}

impl sched::Process for Player {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        if !self.started {
            self.started = true;
            out.send(self.peer, Ping(1))?;
        }
        for event in events {
            if let Event::Message(package) = event {
                let Pong(n) = package.downcast::<Pong>().map_err(|_| "not a pong")?;
                if n == self.rounds {
                    out.finish(n);
                    return Ok(());
                }
                out.send(self.peer, Ping(n + 1))?;
            }
        }
        Ok(())
    }
}

/// Records every `Seq` it receives.
pub struct Recorder(pub Arc<Mutex<Vec<Seq>>>);

impl sched::Process for Recorder {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
        let mut seen = self.0.lock().unwrap();
        for event in events {
            if let Event::Message(package) = event {
                seen.push(package.downcast::<Seq>().map_err(|_| "not a seq")?);
            }
        }
        Ok(())
    }
}

/// Sends `count` numbered messages to `to` in its first step, as sender
/// `from`.
pub struct Burst {
    pub to: Pid,
    pub from: u64,
    pub count: u64,
}

impl sched::Process for Burst {
    type Done = Payload;
    fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for n in 1..=self.count {
            out.send(self.to, Seq { from: self.from, n })?;
        }
        out.finish(());
        Ok(())
    }
}

/// Whether each sender's numbers arrived in increasing order.
pub fn in_order_per_sender(seen: &[Seq]) -> bool {
    let mut last = std::collections::HashMap::new();
    seen.iter().all(|s| {
        let prev = last.insert(s.from, s.n).unwrap_or(0);
        s.n > prev
    })
}

/// Answers every request `Ping(n)` with `Pong(n)`; fails on the message
/// `Ping(0)`, holds a request `Ping(u64::MAX)` without answering.
pub struct Server {
    pub held: Vec<sched::actor::ReplyTo>,
}

impl sched::Process for Server {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            match event {
                Event::Message(package) if package.payload::<Ping>() == Some(&Ping(0)) => {
                    return Err("told to fail".into());
                }
                Event::Request(request) => match request.payload::<Ping>().copied() {
                    Some(Ping(u64::MAX)) => self.held.push(request.into_parts().1),
                    Some(Ping(n)) => request.reply(Pong(n)),
                    None => {}
                },
                _ => {}
            }
        }
        Ok(())
    }
}

/// What a [`Watcher`] sets up when it starts.
#[derive(Debug, Clone, Copy)]
pub enum Watch {
    Monitor(Pid),
    /// Links without trapping exits: an abnormal end ends the watcher.
    Link(Pid),
    /// Traps exits and links: exit signals arrive as events.
    TrapLink(Pid),
}

/// Sets up its watches when it starts, and reports every down and exit
/// signal as `(pid, reason)`.
pub struct Watcher {
    pub watches: Vec<Watch>,
    pub seen: std::sync::mpsc::Sender<(Pid, ExitReason, &'static str)>,
}

impl sched::Process for Watcher {
    type Done = Payload;
    fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        for watch in &self.watches {
            match *watch {
                Watch::Monitor(pid) => {
                    out.monitor(pid);
                }
                Watch::Link(pid) => out.link(pid),
                Watch::TrapLink(pid) => {
                    out.trap_exits(true);
                    out.link(pid);
                }
            }
        }
        Ok(())
    }

    fn step(&mut self, events: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            let _ = match event {
                Event::Down(down) => self.seen.send((down.pid, down.reason, "down")),
                Event::Exit { pid, reason, .. } => self.seen.send((pid, reason, "exit")),
                _ => Ok(()),
            };
        }
        Ok(())
    }
}
