//! The headline example: many processes talking at once.
//!
//! 20 000 processes run in 10 000 pairs. In each pair a "pinger" sends 50
//! pings and its "ponger" answers each one; every 10th ping the pinger also
//! yields a command (a checksum, completed synchronously by its handler)
//! before going on. Pairs are spawned from outside onto the global queue,
//! so the workers have to share them out by stealing. At the end the
//! example prints what ran, how many messages flowed, steps per second, and
//! what each worker did.
//!
//! Run it with `cargo run --release -p sched-examples --example showcase`.

use std::time::{Duration, Instant};

use sched::command::{Command, CommandId, Completer, Rejected};
use sched::prelude::*;

const PAIRS: u64 = 10_000;
const ROUND_TRIPS: u64 = 50;
const CHECKSUM: CommandId = CommandId(1);

enum Role {
    Pinger { peer: Pid, started: bool },
    Ponger,
}

struct Player {
    role: Role,
    messages: u64,
}

impl Process for Player {
    type Done = u64;
    fn init(&mut self, _: &InitContext, method: &str, _: Payload) -> Result<(), InitError> {
        match method {
            "play" => Ok(()),
            other => Err(InitError::unknown_method(other)),
        }
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        if let Role::Pinger {
            peer,
            started: started @ false,
        } = &mut self.role
        {
            *started = true;
            out.send(*peer, 1u64)?;
            return Ok(());
        }
        for event in events {
            match (&self.role, event) {
                (Role::Ponger, Event::Message(ping)) => {
                    self.messages += 1;
                    let from = ping.source();
                    let n = ping.downcast::<u64>().map_err(|_| "a ping carries a u64")?;
                    out.send(from, n)?;
                    if n == ROUND_TRIPS {
                        out.finish(self.messages);
                        return Ok(());
                    }
                }
                (Role::Pinger { peer, .. }, Event::Message(pong)) => {
                    self.messages += 1;
                    let n = pong.downcast::<u64>().map_err(|_| "a pong carries a u64")?;
                    if n == ROUND_TRIPS {
                        out.finish(self.messages);
                        return Ok(());
                    }
                    if n % 10 == 0 {
                        // Every 10th answer: a command first, then go on.
                        out.yield_command(CHECKSUM, Tag(n), Box::new(n));
                    } else {
                        out.send(*peer, n + 1)?;
                    }
                }
                (Role::Pinger { peer, .. }, Event::Completion { tag, result }) => {
                    result?;
                    out.send(*peer, tag.0 + 1)?;
                }
                (_, Event::Cancel) => {
                    out.finish(self.messages);
                    return Ok(());
                }
                _ => {}
            }
        }
        out.idle();
        Ok(())
    }

    fn close(&mut self) {}
}

fn main() {
    let scheduler = Scheduler::builder()
        .handler(
            CHECKSUM,
            |cmd: Command, done: Completer| -> Result<(), Rejected> {
                let seed = *cmd.data::<u64>().unwrap_or(&0);
                let sum = (0..200u64).fold(seed, |h, x| h.rotate_left(7) ^ x);
                let _ = done.complete(Box::new(sum));
                Ok(())
            },
        )
        .build();
    scheduler.start();
    let workers = scheduler.workers();

    let started = Instant::now();
    let mut handles = Vec::with_capacity(2 * PAIRS as usize);
    for _ in 0..PAIRS {
        let ponger = scheduler
            .spawn(
                Spawn::new(Player {
                    role: Role::Ponger,
                    messages: 0,
                })
                .method("play")
                .input(()),
            )
            .expect("spawn ponger");
        let peer = ponger.pid();
        let pinger = Player {
            role: Role::Pinger {
                peer,
                started: false,
            },
            messages: 0,
        };
        handles.push(ponger);
        handles.push(
            scheduler
                .spawn(Spawn::new(pinger).method("play").input(()))
                .expect("spawn pinger"),
        );
    }
    let mut received = 0u64;
    for h in handles {
        received += h.wait().expect("done");
    }
    let elapsed = started.elapsed();
    let stats = scheduler.stats();
    let report = scheduler.shutdown(Duration::from_secs(1));
    let totals = stats.totals();

    println!(
        "sched showcase: {} processes in {PAIRS} ping-pong pairs on {workers} workers",
        2 * PAIRS
    );
    println!("  processes run      {}", totals.completed);
    println!("  messages received  {received}");
    println!("  steps              {}", totals.steps);
    println!("  elapsed            {elapsed:.2?}");
    println!(
        "  steps per second   {:.0}",
        totals.steps as f64 / elapsed.as_secs_f64()
    );
    println!("  per worker:");
    println!("    worker      steps     stolen  global pops  parks");
    for (i, w) in stats.workers.iter().enumerate() {
        println!(
            "    {i:>6} {:>10} {:>10} {:>12} {:>6}",
            w.steps, w.stolen, w.global_pops, w.parks
        );
    }
    println!(
        "  shutdown: {} ended gracefully, {} forced, in {:.2?}",
        report.ended_gracefully, report.forced, report.elapsed
    );
    assert_eq!(totals.completed, 2 * PAIRS);
    assert_eq!(received, PAIRS * 2 * ROUND_TRIPS);
}
