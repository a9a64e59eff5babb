//! Two scheduler nodes in one process, talking over NATS: a process on
//! node 1 pings a process on node 2 by its PID and prints the round trips.
//!
//! ```sh
//! cargo run -p relay-nats --example two_nodes
//! ```
//!
//! It uses the NATS server at `nats://127.0.0.1:4222` (override with
//! `NATS_URL`). If nothing listens there and `nats-server` is on `PATH`
//! (`apt-get install nats-server`), it starts one on that port for the
//! run and stops it at the end; otherwise it says what to do and exits.
//! The two nodes could as well be two processes on two machines: only the
//! URL changes.

use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use relay_nats::{Codec, NatsConfig, NatsSchedulerExt};
use sched::prelude::*;
use serde::{Deserialize, Serialize};

const ROUNDS: u32 = 10;

#[derive(Serialize, Deserialize)]
struct Ping(u32);

#[derive(Serialize, Deserialize)]
struct Pong(u32);

/// On node 2: answers every ping to its sender, wherever it runs.
struct Echo;

impl Process for Echo {
    type Done = ();
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

/// On node 1: pings `peer` `ROUNDS` times, one at a time, and finishes
/// with the round-trip times.
struct Player {
    peer: Pid,
    sent_at: Instant,
    round_trips: Vec<Duration>,
}

impl Process for Player {
    type Done = Vec<Duration>;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        if self.round_trips.is_empty() && events.is_empty() {
            self.sent_at = Instant::now();
            out.send(self.peer, Ping(1))?;
        }
        for event in events {
            if let Event::Message(package) = event {
                let Pong(n) = package.downcast::<Pong>().map_err(|_| "not a pong")?;
                let round_trip = self.sent_at.elapsed();
                println!("pong {n:>2} from {}: {round_trip:?}", self.peer);
                self.round_trips.push(round_trip);
                if n == ROUNDS {
                    out.finish(std::mem::take(&mut self.round_trips));
                    return Ok(());
                }
                self.sent_at = Instant::now();
                out.send(self.peer, Ping(n + 1))?;
            }
        }
        Ok(())
    }
}

/// A node: a scheduler joined to NATS with node number `number`.
fn node(url: &str, number: u32) -> Result<Scheduler, relay_nats::ConnectError> {
    // Every node registers the same types under the same tags.
    let codec = Codec::new()
        .register::<Ping>("ping")
        .register::<Pong>("pong");
    let scheduler = Scheduler::builder()
        .workers(1)
        .node(number)
        .nats(NatsConfig::new(url).codec(codec))?
        .build();
    scheduler.start();
    Ok(scheduler)
}

/// A `nats-server` this example started, stopped on drop.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `nats-server` on port 4222 if nothing listens there and the
/// URL is the default one.
fn server_if_needed(url: &str) -> Result<Option<Server>, Box<dyn std::error::Error>> {
    if url != "nats://127.0.0.1:4222" || TcpStream::connect("127.0.0.1:4222").is_ok() {
        return Ok(None);
    }
    let child = Command::new("nats-server")
        .args(["-a", "127.0.0.1", "-p", "4222"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| {
            format!("nothing listens on {url} and nats-server cannot start ({e}): install it (apt-get install nats-server) or set NATS_URL")
        })?;
    let server = Server(child);
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect("127.0.0.1:4222").is_err() {
        if Instant::now() > deadline {
            return Err("nats-server did not start listening".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    println!("started nats-server on {url}");
    Ok(Some(server))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".into());
    let _server = server_if_needed(&url)?;

    let one = node(&url, 1)?;
    let two = node(&url, 2)?;
    let echo = two.spawn(Echo)?.pid();
    println!("echo runs on node 2 as {echo}");

    let player = Player {
        peer: echo,
        sent_at: Instant::now(),
        round_trips: Vec::new(),
    };
    let mut player = one.spawn(player)?;
    println!("player runs on node 1 as {}", player.pid());
    // An error says why: no answer within 10 s, or how the player failed.
    let mut round_trips = player.wait_timeout(Duration::from_secs(10))?;
    round_trips.sort();
    println!(
        "{} round trips over NATS: fastest {:?}, median {:?}, slowest {:?}",
        round_trips.len(),
        round_trips[0],
        round_trips[round_trips.len() / 2],
        round_trips[round_trips.len() - 1]
    );

    one.shutdown(Duration::from_millis(200));
    two.shutdown(Duration::from_millis(200));
    Ok(())
}
