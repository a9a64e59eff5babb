//! Remote ping-pong over loopback NATS: two scheduler nodes (threads of
//! this process, one NATS connection each) against raw `async-nats`
//! request-reply between two clients doing the same
//! (`cargo bench -p benches --bench remote`; `BENCH_QUICK=1` runs each side
//! once instead of three times, with fewer round trips).
//!
//! Both sides carry the same number of bytes per message (our frame's
//! size), one round trip at a time. Per side: round trips per second, and
//! the one-way latency of the request (stamped by the sender, read by the
//! receiver on the same clock), median and p99. The median of the runs,
//! and ours / raw.
//!
//! Then keyed processes: sends from outside to 1 000 keyed processes whose
//! shards this node holds, against sends by PID to 1 000 plain processes
//! of the same kind, on one node of 1 worker (a `nats-server` with
//! JetStream holds the shards' names), by key (`Sharded::send`) and
//! through an `Entity` per key (which keeps the key's route). Time per
//! message until every message is read, the median of the runs, and
//! keyed / PID and entity / PID.
//!
//! And a question to a keyed process whose shard the other node holds,
//! asked one at a time from a step (`Sharded::ask_from_step`) and from
//! a thread outside (`Sharded::ask`, waiting on each reply), against
//! raw `async-nats` request-reply of our frame's size: time per round
//! trip, and keyed / raw.
//!
//! Then the overloaded case of that ask: 8 threads each ask a key of
//! node 2 one question at a time, beside no other work and then beside
//! 2 000 busy processes on node 2's one worker, with each asker's p50,
//! p99 and worst.
//!
//! `REMOTE_KEYED_ONLY=1` runs the keyed parts alone;
//! `REMOTE_KEYED_SENDS=N` only the keyed sends, with `N` messages a pass
//! (for a profile of the send path).
//!
//! Starts its own `nats-server` on a free loopback port; without one on
//! `PATH` it says so and exits.

use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use relay_nats::async_nats;
use relay_nats::{Codec, Format, NatsConfig, NatsSchedulerExt};
use sched::prelude::*;
use sched::Package;
use serde::{Deserialize, Serialize};

#[path = "common/filter.rs"]
mod filter;

const WARM_UP: usize = 200;

/// Nanoseconds since the first call: one clock for both nodes.
fn now_ns() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

#[derive(Serialize, Deserialize)]
struct Ping {
    n: u64,
    sent_ns: u64,
}

#[derive(Serialize, Deserialize)]
struct Pong(u64);

/// One-way latencies seen by the receiving side, in nanoseconds.
type Latencies = Arc<Mutex<Vec<u64>>>;

struct Echo(Latencies);

impl Process for Echo {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            if let Event::Message(package) = event {
                let from = package.source();
                let ping = package.downcast::<Ping>().map_err(|_| "not a ping")?;
                self.0.lock().unwrap().push(now_ns() - ping.sent_ns);
                out.send(from, Pong(ping.n))?;
            }
        }
        Ok(())
    }
}

struct Player {
    peer: Pid,
    rounds: u64,
    started: bool,
}

impl Process for Player {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        let ping = |n| Ping {
            n,
            sent_ns: now_ns(),
        };
        if !self.started {
            self.started = true;
            out.send(self.peer, ping(1))?;
        }
        for event in events {
            if let Event::Message(package) = event {
                let Pong(n) = package.downcast::<Pong>().map_err(|_| "not a pong")?;
                if n == self.rounds {
                    out.finish(());
                    return Ok(());
                }
                out.send(self.peer, ping(n + 1))?;
            }
        }
        Ok(())
    }
}

/// The wire format of our side's messages: JSON, or postcard with
/// `REMOTE_FORMAT=postcard`.
fn format() -> Format {
    match std::env::var("REMOTE_FORMAT").as_deref() {
        Ok("postcard") => Format::Postcard,
        _ => Format::Json,
    }
}

fn codec() -> Codec {
    Codec::new()
        .register_as::<Ping>("ping", format())
        .register_as::<Pong>("pong", format())
}

/// The bytes one of our pings carries on the wire.
fn frame_size() -> usize {
    let ping = Ping {
        n: 1,
        sent_ns: now_ns(),
    };
    let package = Package::new(Pid::new(1, 1), Pid::new(2, 1), ping);
    codec().encode(&package).expect("encodable").len()
}

struct Run {
    round_trips_per_sec: f64,
    median_us: f64,
    p99_us: f64,
}

fn summarize(elapsed: Duration, rounds: usize, mut one_way: Vec<u64>) -> Run {
    one_way.sort_unstable();
    let at = |q: f64| one_way[((one_way.len() - 1) as f64 * q) as usize] as f64 / 1e3;
    Run {
        round_trips_per_sec: rounds as f64 / elapsed.as_secs_f64(),
        median_us: at(0.5),
        p99_us: at(0.99),
    }
}

fn node(url: &str, number: u32) -> Scheduler {
    let scheduler = Scheduler::builder()
        .workers(1)
        .node(number)
        .nats(NatsConfig::new(url).codec(codec()))
        .expect("connected")
        .build();
    scheduler.start();
    scheduler
}

fn ours(url: &str, rounds: usize) -> Run {
    let (one, two) = (node(url, 1), node(url, 2));
    let latencies = Latencies::default();
    let echo = two.spawn(Echo(latencies.clone())).unwrap().pid();
    let play = |rounds: usize| {
        let player = Player {
            peer: echo,
            rounds: rounds as u64,
            started: false,
        };
        let mut player = one.spawn(player).unwrap();
        let outcome = player.wait_timeout(Duration::from_secs(120));
        outcome.expect("the rounds finished");
    };
    play(WARM_UP);
    latencies.lock().unwrap().clear();
    let started = Instant::now();
    play(rounds);
    let elapsed = started.elapsed();
    let one_way = std::mem::take(&mut *latencies.lock().unwrap());
    one.shutdown(Duration::from_millis(100));
    two.shutdown(Duration::from_millis(100));
    summarize(elapsed, rounds, one_way)
}

/// A client on a single-threaded runtime of its own (as our transport's).
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
}

fn raw(url: &str, rounds: usize, size: usize) -> Run {
    let latencies = Latencies::default();
    let (ready_tx, ready) = std::sync::mpsc::channel();
    let responder = {
        let (url, latencies) = (url.to_owned(), latencies.clone());
        std::thread::spawn(move || {
            runtime().block_on(async move {
                let client = async_nats::connect(url).await.expect("connected");
                let mut requests = client.subscribe("raw.echo").await.expect("subscribed");
                client.flush().await.expect("flushed");
                ready_tx.send(()).unwrap();
                while let Some(request) = requests.next().await {
                    let sent = u64::from_be_bytes(request.payload[..8].try_into().unwrap());
                    latencies.lock().unwrap().push(now_ns() - sent);
                    let Some(reply) = request.reply else { break };
                    client.publish(reply, request.payload).await.unwrap();
                }
            });
        })
    };
    ready.recv().expect("the responder subscribed");
    let url = url.to_owned();
    let elapsed = std::thread::spawn(move || {
        runtime().block_on(async move {
            let client = async_nats::connect(url).await.expect("connected");
            let mut payload = vec![0u8; size];
            let ask = |payload: &mut Vec<u8>| {
                payload[..8].copy_from_slice(&now_ns().to_be_bytes());
                client.request("raw.echo", payload.clone().into())
            };
            for _ in 0..WARM_UP {
                ask(&mut payload).await.expect("a reply");
            }
            let started = Instant::now();
            for _ in 0..rounds {
                ask(&mut payload).await.expect("a reply");
            }
            let elapsed = started.elapsed();
            // An empty request with no reply subject stops the responder.
            client
                .publish("raw.echo", vec![0u8; 8].into())
                .await
                .unwrap();
            client.flush().await.unwrap();
            elapsed
        })
    })
    .join()
    .expect("the requester");
    responder.join().expect("the responder");
    let mut one_way = std::mem::take(&mut *latencies.lock().unwrap());
    one_way.drain(..WARM_UP);
    one_way.pop(); // the stop message
    summarize(elapsed, rounds, one_way)
}

/// `nats-server` on a free loopback port, stopped on drop.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn server() -> Option<(Server, String)> {
    server_with(&[])
}

fn server_with(extra: &[&str]) -> Option<(Server, String)> {
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .ok()?
        .port();
    let child = Command::new("nats-server")
        .args(["-a", "127.0.0.1", "-p", &port.to_string()])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let server = Server(child);
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Some((server, format!("nats://127.0.0.1:{port}")))
}

/// Counts what it reads; finishes on cancel.
struct Counter(Arc<std::sync::atomic::AtomicU64>);

impl Process for Counter {
    type Done = ();
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            match event {
                Event::Message(_) => {
                    self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                Event::Cancel => out.finish(()),
                _ => {}
            }
        }
        Ok(())
    }
}

#[derive(Serialize, Deserialize)]
struct Add(u64);

/// Nanoseconds per message: `messages` sends from outside, spread over
/// the keys (or PIDs) in turn, until every one is read.
fn per_message(
    messages: usize,
    read: &std::sync::atomic::AtomicU64,
    mut send: impl FnMut(usize),
) -> f64 {
    let before = read.load(std::sync::atomic::Ordering::Relaxed);
    let started = Instant::now();
    for i in 0..messages {
        send(i);
    }
    while read.load(std::sync::atomic::Ordering::Relaxed) < before + messages as u64 {
        std::thread::yield_now();
    }
    started.elapsed().as_nanos() as f64 / messages as f64
}

/// One run of keyed against PID sends: `(pid_ns, keyed_ns, entity_ns)`
/// per message (by key through `Sharded::send`, and through an `Entity`
/// per key, which keeps the key's route).
fn keyed_against_pid(url: &str, keys: usize, messages: usize) -> (f64, f64, f64) {
    use relay_nats::{Keyed, NatsTransport, Sharding, ShardingConfig};
    let config = NatsConfig::new(url)
        .codec(Codec::new().register::<Keyed<Add>>("counter"))
        .cluster_names("bench-names");
    let transport = Arc::new(NatsTransport::connect(config).expect("connected"));
    let node = Scheduler::builder()
        .workers(1)
        .node(1)
        .remote(transport.clone())
        .build();
    node.start();
    let read = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let sharding = Sharding::new(&node, transport, ShardingConfig::new()).expect("sharding");
    let counter = Arc::clone(&read);
    let keyed = sharding
        .register(&node, "counter", move |_: &str| {
            Counter(Arc::clone(&counter))
        })
        .expect("registered");
    let names: Vec<String> = (0..keys).map(|k| format!("key-{k}")).collect();
    // Every shard held here, every key's process started.
    let deadline = Instant::now() + Duration::from_secs(30);
    while sharding.stats().shards_held < u64::from(relay_nats::DEFAULT_SHARDS) {
        assert!(Instant::now() < deadline, "the shards were not claimed");
        std::thread::sleep(Duration::from_millis(20));
    }
    per_message(keys, &read, |i| {
        keyed.send(&node, &names[i], Add(1)).expect("sent")
    });
    let pids: Vec<Pid> = (0..keys)
        .map(|_| node.spawn(Counter(Arc::clone(&read))).unwrap().pid())
        .collect();
    // Alternated five times, each side's median: one pass takes tens of
    // milliseconds, which a single preemption of the sending thread on a
    // busy machine skews by a third.
    let mut entities: Vec<_> = names.iter().map(|k| keyed.entity(k)).collect();
    let (mut by_pid, mut by_key, mut by_entity) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..5 {
        by_pid.push(per_message(messages, &read, |i| {
            node.send(pids[i % keys], Add(1)).expect("sent")
        }));
        by_key.push(per_message(messages, &read, |i| {
            keyed.send(&node, &names[i % keys], Add(1)).expect("sent")
        }));
        by_entity.push(per_message(messages, &read, |i| {
            entities[i % keys].send(&node, Add(1)).expect("sent")
        }));
    }
    node.shutdown(Duration::from_millis(200));
    (median(by_pid), median(by_key), median(by_entity))
}

#[path = "common/tables.rs"]
mod tables;
use tables::median;

fn main() {
    if filter::another_bench_asked_for("remote") {
        return;
    }
    let quick = std::env::var_os("BENCH_QUICK").is_some();
    let (runs, rounds) = if quick { (1, 2_000) } else { (3, 20_000) };
    if std::env::var_os("REMOTE_KEYED_ONLY").is_some()
        || std::env::var_os("REMOTE_KEYED_SENDS").is_some()
    {
        keyed(runs, quick);
        return;
    }
    let Some((_server, url)) = server() else {
        println!("remote: SKIPPED, nats-server is not on PATH (apt-get install nats-server)");
        return;
    };
    let size = frame_size();
    println!(
        "remote: {rounds} round trips one at a time over loopback NATS ({url}), {size}-byte \
         requests ({:?}); ours: two nodes, 1 worker each; raw: async-nats request-reply; {runs} \
         run(s) per side, alternating",
        format()
    );
    println!("| run | side | round trips/s | one-way median | one-way p99 |");
    println!("|---|---|---|---|---|");
    let (mut ours_runs, mut raw_runs) = (Vec::new(), Vec::new());
    for i in 1..=runs {
        for (side, runs) in [("ours", &mut ours_runs), ("raw", &mut raw_runs)] {
            let r = if side == "ours" {
                ours(&url, rounds)
            } else {
                raw(&url, rounds, size)
            };
            println!(
                "| {i} | {side} | {:.0} | {:.1} µs | {:.1} µs |",
                r.round_trips_per_sec, r.median_us, r.p99_us
            );
            runs.push(r);
        }
    }
    println!();
    println!("| median of {runs} | ours | raw async-nats | ours / raw |");
    println!("|---|---|---|---|");
    type Metric = fn(&Run) -> f64;
    let metrics: [(&str, Metric, &str); 3] = [
        ("round-trip time", |r| 1e6 / r.round_trips_per_sec, "µs"),
        ("one-way median", |r| r.median_us, "µs"),
        ("one-way p99", |r| r.p99_us, "µs"),
    ];
    for (name, metric, unit) in metrics {
        let ours = median(ours_runs.iter().map(metric).collect());
        let raw = median(raw_runs.iter().map(metric).collect());
        println!(
            "| {name} | {ours:.1} {unit} | {raw:.1} {unit} | {:.2} |",
            ours / raw
        );
    }
    keyed(runs, quick);
}

fn keyed(runs: usize, quick: bool) {
    let store = std::env::temp_dir().join(format!("remote-bench-js-{}", std::process::id()));
    let store_arg = store.to_string_lossy().into_owned();
    let Some((_server, url)) = server_with(&["-js", "-sd", &store_arg]) else {
        println!("remote keyed: SKIPPED, nats-server with JetStream did not start");
        return;
    };
    let sends_only = std::env::var("REMOTE_KEYED_SENDS")
        .ok()
        .and_then(|n| n.parse::<usize>().ok());
    let (keys, messages) = match (sends_only, quick) {
        (Some(n), _) => (1_000, n),
        (None, true) => (1_000, 20_000),
        (None, false) => (1_000, 200_000),
    };
    println!();
    println!(
        "remote keyed: {messages} sends from outside to {keys} processes on one node of 1 worker, \
         by key (shards held here) and by PID, alternated 5 times per run (each side's median); \
         {runs} run(s)"
    );
    println!("| run | by PID | by key | by entity | key / PID | entity / PID |");
    println!("|---|---|---|---|---|---|");
    let (mut ratios, mut entity_ratios) = (Vec::new(), Vec::new());
    for i in 1..=runs {
        let (pid, key, entity) = keyed_against_pid(&url, keys, messages);
        println!(
            "| {i} | {pid:.0} ns | {key:.0} ns | {entity:.0} ns | {:.2} | {:.2} |",
            key / pid,
            entity / pid
        );
        ratios.push(key / pid);
        entity_ratios.push(entity / pid);
    }
    println!(
        "| median | | | | {:.2} | {:.2} |",
        median(ratios),
        median(entity_ratios)
    );
    if sends_only.is_some() {
        let _ = std::fs::remove_dir_all(&store);
        return;
    }
    let rounds = if quick { 2_000 } else { 20_000 };
    println!();
    println!(
        "remote keyed ask: {rounds} questions one at a time from a step on node 1 to a key \
         whose shard node 2 holds (1 worker each), against raw async-nats request-reply; \
         {runs} run(s) per side, alternating"
    );
    println!(
        "| run | keyed ask from a step | from outside | PID ask from a step | raw request-reply \
         | step / raw | outside / raw | PID / raw |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let (mut steps, mut outsides, mut pids) = (Vec::new(), Vec::new(), Vec::new());
    for i in 1..=runs {
        let (step, outside, pid) = keyed_ask_round_trip(&url, rounds);
        let raw = 1e6 / raw(&url, rounds, frame_size()).round_trips_per_sec;
        println!(
            "| {i} | {step:.1} µs | {outside:.1} µs | {pid:.1} µs | {raw:.1} µs | {:.2} | {:.2} | {:.2} |",
            step / raw,
            outside / raw,
            pid / raw
        );
        steps.push(step / raw);
        outsides.push(outside / raw);
        pids.push(pid / raw);
    }
    println!(
        "| median | | | | | {:.2} | {:.2} | {:.2} |",
        median(steps),
        median(outsides),
        median(pids)
    );
    keyed_ask_under_load(&url, quick);
    let _ = std::fs::remove_dir_all(&store);
}

/// A question to a keyed echo: the number, answered with its node.
#[derive(Serialize, Deserialize)]
struct Say(u64);

#[derive(Serialize, Deserialize)]
struct Echoed {
    n: u64,
    node: u32,
}

impl sched::actor::Question for Say {
    type Answer = Echoed;
}

/// The keyed echo: answers every `Say` with its number and its node.
struct KeyedEcho(u32);

impl Process for KeyedEcho {
    type Done = ();
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            match event {
                Event::Request(request) => {
                    let (Say(n), answer) = request.take::<Say>().map_err(|_| "not a Say")?;
                    answer.answer(Echoed { n, node: self.0 });
                }
                Event::Cancel => out.finish(()),
                _ => {}
            }
        }
        Ok(())
    }
}

/// Whom a [`KeyedAsker`] asks.
#[derive(Clone)]
enum Asked {
    Key(relay_nats::Sharded<()>, String),
    Pid(Pid),
}

/// Asks `rounds` questions one after the other from its steps, and
/// finishes with the node that answered the last.
struct KeyedAsker {
    asked_whom: Asked,
    rounds: u64,
    asked: Option<sched::ReplyId<Echoed>>,
}

impl KeyedAsker {
    fn ask(&mut self, out: &mut Output<'_>, n: u64) -> Result<(), BoxError> {
        let timeout = Duration::from_secs(30);
        let asked = match &self.asked_whom {
            Asked::Key(echoes, key) => echoes
                .ask_from_step(out, key, Say(n), timeout)
                .map_err(|refused| refused.reason.to_string())?,
            Asked::Pid(pid) => out.ask(*pid, Say(n), timeout)?,
        };
        self.asked = Some(asked);
        Ok(())
    }
}

impl Process for KeyedAsker {
    type Done = u32;
    fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        self.ask(out, 1)
    }
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            let Some(asked) = self.asked else { break };
            match asked.answer(event) {
                sched::actor::Replied::Answered(Echoed { n, node }) => {
                    if n == self.rounds {
                        out.finish(node);
                    } else {
                        self.ask(out, n + 1)?;
                    }
                }
                sched::actor::Replied::Failed(why) => return Err(why.into()),
                sched::actor::Replied::Other(_) => {}
            }
        }
        Ok(())
    }
}

/// Node `number` of 1 worker, with the keyed echo registered under its
/// cluster names `names`.
fn echo_node(
    url: &str,
    number: u32,
    names: &str,
) -> (Scheduler, relay_nats::Sharding, relay_nats::Sharded<()>) {
    use relay_nats::{NatsTransport, Sharding, ShardingConfig};
    let codec = Codec::new()
        .register_as::<Say>("say", format())
        .register_as::<Echoed>("echoed", format());
    let config = NatsConfig::new(url).codec(codec).cluster_names(names);
    let transport = Arc::new(NatsTransport::connect(config).expect("connected"));
    let node = Scheduler::builder()
        .workers(1)
        .node(number)
        .remote(transport.clone())
        .build();
    node.start();
    let sharding = Sharding::new(&node, transport, ShardingConfig::new()).expect("sharding");
    let echoes = sharding
        .register(&node, "echo", move |_: &str| KeyedEcho(number))
        .expect("registered");
    (node, sharding, echoes)
}

/// Spins 20 µs a step and continues until told to stop: node 2's flood.
struct Busy(Arc<std::sync::atomic::AtomicBool>);

impl Process for Busy {
    type Done = ();
    fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        if self.0.load(std::sync::atomic::Ordering::Relaxed) {
            out.finish(());
            return Ok(());
        }
        let until = Instant::now() + Duration::from_micros(20);
        while Instant::now() < until {
            std::hint::spin_loop();
        }
        out.continue_();
        Ok(())
    }
}

/// Askers from outside on node 1, one thread per key of node 2, each
/// asking its key one question at a time for `lasting`, beside `flood`
/// busy processes on node 2's one worker: each asker's round trips,
/// sorted (microseconds).
fn keyed_ask_overloaded(
    url: &str,
    askers: usize,
    flood: usize,
    lasting: Duration,
) -> Vec<Vec<f64>> {
    let names = format!("bench-overload-names-{flood}");
    let (one, _one_sharding, echoes) = echo_node(url, 1, &names);
    let (two, _two_sharding, _) = echo_node(url, 2, &names);
    let keys: Vec<String> = (0..)
        .map(|k| format!("key-{k}"))
        .filter(|k| echoes.placed_among(k, &[1, 2]) == Some(2))
        .take(askers)
        .collect();
    // Until node 2 holds the keys' shards and answers each.
    let deadline = Instant::now() + Duration::from_secs(30);
    for key in &keys {
        while echoes
            .ask(&one, key, Say(0))
            .ok()
            .and_then(|mut r| r.wait_timeout(Duration::from_secs(5)).ok())
            .is_none_or(|e| e.node != 2)
        {
            assert!(Instant::now() < deadline, "node 2 did not take its shards");
        }
    }
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    for _ in 0..flood {
        two.spawn(Busy(Arc::clone(&stop))).expect("spawned");
    }
    let per_asker: Vec<Vec<f64>> = std::thread::scope(|scope| {
        let threads: Vec<_> = keys
            .iter()
            .map(|key| {
                let (one, echoes) = (&one, &echoes);
                scope.spawn(move || {
                    let mut waits = Vec::new();
                    let end = Instant::now() + lasting;
                    let mut n = 0;
                    while Instant::now() < end {
                        n += 1;
                        let asked = Instant::now();
                        let mut reply = echoes.ask(one, key, Say(n)).expect("asked");
                        let echoed = reply
                            .wait_timeout(Duration::from_secs(60))
                            .expect("answered");
                        assert_eq!(echoed.n, n);
                        waits.push(asked.elapsed().as_secs_f64() * 1e6);
                    }
                    waits.sort_by(f64::total_cmp);
                    waits
                })
            })
            .collect();
        threads
            .into_iter()
            .map(|t| t.join().expect("an asker"))
            .collect()
    });
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    one.shutdown(Duration::from_millis(100));
    two.shutdown(Duration::from_secs(2));
    per_asker
}

/// The overloaded case of the keyed ask: askers beside nothing, then
/// beside a flood of busy processes on the answering node (far more ready
/// work than its worker), each asker's p50, p99 and worst.
fn keyed_ask_under_load(url: &str, quick: bool) {
    let (askers, lasting) = (8, Duration::from_secs(if quick { 2 } else { 4 }));
    println!();
    println!(
        "remote keyed ask, overloaded: {askers} threads on node 1 each ask a key of node 2 (1 \
         worker) one question at a time for {lasting:?}, beside no other work, then beside \
         2 000 processes that spin 20 µs a step and continue; per asker, the median of \
         askers' p50 and the worst asker's p99 and max"
    );
    println!("| node 2 | round trips | askers' p50 (median) | worst p99 | worst max |");
    println!("|---|---|---|---|---|");
    for (what, flood) in [("idle", 0), ("flooded", 2_000)] {
        let per_asker = keyed_ask_overloaded(url, askers, flood, lasting);
        let at = |w: &Vec<f64>, q: f64| w[((w.len() - 1) as f64 * q) as usize];
        let count: usize = per_asker.iter().map(Vec::len).sum();
        let p50 = median(per_asker.iter().map(|w| at(w, 0.5)).collect());
        let p99 = per_asker.iter().map(|w| at(w, 0.99)).fold(0.0, f64::max);
        let max = per_asker.iter().map(|w| at(w, 1.0)).fold(0.0, f64::max);
        println!("| {what} | {count} | {p50:.0} µs | {p99:.0} µs | {max:.0} µs |");
    }
}

/// One run of keyed asks across nodes: microseconds per round trip, from
/// a step and from outside, and by PID from a step.
fn keyed_ask_round_trip(url: &str, rounds: usize) -> (f64, f64, f64) {
    let node = |number: u32| echo_node(url, number, "bench-ask-names");
    let (one, _one_sharding, echoes) = node(1);
    let (two, _two_sharding, _) = node(2);
    let key = (0..)
        .map(|k| format!("key-{k}"))
        .find(|k| echoes.placed_among(k, &[1, 2]) == Some(2))
        .expect("a key of node 2");
    let run = |whom: &Asked, rounds: usize| {
        let asker = KeyedAsker {
            asked_whom: whom.clone(),
            rounds: rounds as u64,
            asked: None,
        };
        let mut asker = one.spawn(asker).expect("spawned");
        asker
            .wait_timeout(Duration::from_secs(120))
            .expect("answered")
    };
    let by_key = Asked::Key(echoes.clone(), key.clone());
    // Until node 2 holds the key's shard and answers.
    let deadline = Instant::now() + Duration::from_secs(30);
    while run(&by_key, WARM_UP) != 2 {
        assert!(Instant::now() < deadline, "node 2 did not take its shard");
    }
    let started = Instant::now();
    assert_eq!(run(&by_key, rounds), 2, "node 2 answered");
    let from_step = started.elapsed().as_secs_f64() * 1e6 / rounds as f64;
    // The same process type asked by PID, for what the key adds.
    let by_pid = Asked::Pid(two.spawn(KeyedEcho(2)).expect("spawned").pid());
    run(&by_pid, WARM_UP);
    let started = Instant::now();
    run(&by_pid, rounds);
    let pid_from_step = started.elapsed().as_secs_f64() * 1e6 / rounds as f64;
    // The same from outside: a thread asks and waits, one at a time.
    let started = Instant::now();
    for n in 1..=rounds as u64 {
        let mut reply = echoes.ask(&one, &key, Say(n)).expect("asked");
        let echoed = reply
            .wait_timeout(Duration::from_secs(30))
            .expect("answered");
        assert_eq!((echoed.n, echoed.node), (n, 2));
    }
    let from_outside = started.elapsed().as_secs_f64() * 1e6 / rounds as f64;
    one.shutdown(Duration::from_millis(100));
    two.shutdown(Duration::from_millis(100));
    (from_step, from_outside, pid_from_step)
}
