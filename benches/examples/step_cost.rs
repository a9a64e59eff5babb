//! A fixed amount of scheduler work on one worker, for counting its
//! instructions under `valgrind --tool=callgrind` (repeatable, unlike
//! times on a shared machine): compare builds, for example with and
//! without the `introspection` feature.
//!
//! ```text
//! cargo build --release -p benches --example step_cost [--no-default-features]
//! valgrind --tool=callgrind target/release/examples/step_cost yield 200 1000
//! valgrind --tool=callgrind target/release/examples/step_cost ping 1000 100
//! valgrind --tool=callgrind target/release/examples/step_cost chain 100 1000
//! ```
//!
//! `yield P N`: P processes each continue N times. `ping P R`: P pairs
//! exchange R round trips (`Output::forward`; `send`: `Output::send` by
//! PID, as the scheduler suite's ping-pong; `resolved`: `Output::send`
//! through a `Resolved` handle on the peer). `chain P N`: P chains of N processes, each
//! spawning the next from its step and finishing (spawn and end costs). Add `histograms` as a fourth argument to record
//! them.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use sched::message::Resolved;
use sched::prelude::*;
use sched::Package;

struct Yielder(u32);

impl Process for Yielder {
    type Done = Payload;
    fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        if self.0 == 0 {
            out.finish(());
        } else {
            self.0 -= 1;
            out.continue_();
        }
        Ok(())
    }
}

/// Spawns the next link of its chain, then finishes; the last one counts
/// its chain as done.
struct Link(u32, Arc<AtomicUsize>);

impl Process for Link {
    type Done = Payload;
    fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        if self.0 > 0 {
            drop(out.spawn(Link(self.0 - 1, self.1.clone()))?);
        } else {
            self.1.fetch_add(1, Ordering::Release);
        }
        out.finish(());
        Ok(())
    }
}

/// Answers each message with one to `peer`, `rounds` times, then ends.
struct Player {
    peer: Option<Pid>,
    rounds: u32,
    how: Via,
    route: Option<Resolved>,
}

/// How a [`Player`] sends its ball.
#[derive(Clone, Copy, PartialEq)]
enum Via {
    Forward,
    Pid,
    Resolved,
}

impl Player {
    fn new(rounds: u32, how: Via) -> Player {
        Player {
            peer: None,
            rounds,
            how,
            route: None,
        }
    }

    fn send(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        let peer = self.peer.expect("a peer");
        match self.how {
            Via::Forward => out.forward(Package::new(Pid::OUTSIDE, peer, ()))?,
            Via::Pid => out.send(peer, ())?,
            Via::Resolved => {
                if self.route.is_none() {
                    self.route = out.context().resolve(peer);
                }
                out.send(self.route.as_ref().ok_or("the peer has ended")?, ())?
            }
        }
        Ok(())
    }
}

impl Process for Player {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            if let Event::Message(m) = event {
                if let Ok(peer) = m.into_payload().downcast::<Pid>() {
                    self.peer = Some(*peer);
                    continue;
                }
                if self.rounds == 0 {
                    out.finish(());
                    return Ok(());
                }
                self.rounds -= 1;
                self.send(out)?;
            }
        }
        Ok(())
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let what = args.get(1).map_or("yield", String::as_str);
    let count: u32 = args.get(2).map_or(Ok(200), |a| a.parse())?;
    let each: u32 = args.get(3).map_or(Ok(1000), |a| a.parse())?;
    let histograms = args.get(4).is_some_and(|a| a == "histograms");
    let scheduler = Scheduler::builder()
        .workers(1)
        .histograms(histograms)
        .long_step_threshold(None)
        .build();
    scheduler.start();
    let mut running = Vec::new();
    match what {
        "yield" => {
            for _ in 0..count {
                running.push(scheduler.spawn(Yielder(each))?);
            }
        }
        "ping" | "send" | "resolved" => {
            let how = match what {
                "ping" => Via::Forward,
                "send" => Via::Pid,
                _ => Via::Resolved,
            };
            for _ in 0..count {
                let a = scheduler.spawn(Player::new(each, how))?;
                let b = scheduler.spawn(Player::new(each, how))?;
                scheduler.send(a.pid(), b.pid())?;
                scheduler.send(b.pid(), a.pid())?;
                scheduler.send(a.pid(), ())?;
                running.push(a);
                running.push(b);
            }
        }
        "chain" => {
            let chains = Arc::new(AtomicUsize::new(0));
            for _ in 0..count {
                drop(scheduler.spawn(Link(each, chains.clone()))?);
            }
            while chains.load(Ordering::Acquire) < count as usize {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        other => return Err(format!("unknown workload {other}").into()),
    }
    for mut done in running {
        // A pair ends when either side runs out; the other may be left
        // waiting, and shutdown ends it.
        let _ = done.wait_timeout(Duration::from_millis(1));
    }
    let steps = scheduler.stats().totals().steps;
    scheduler.shutdown(Duration::from_secs(5));
    println!("{what}: {steps} steps");
    Ok(())
}
