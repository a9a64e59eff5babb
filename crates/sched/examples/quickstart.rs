//! Quickstart: a ring of processes passing a token.
//!
//! Five processes form a ring. Process 0 starts a token that travels three
//! laps; each process counts the hops it saw and forwards the token to its
//! neighbour with `Output::send`. After the last lap process 0 tells
//! everyone to stop, and each finishes with its hop count.
//!
//! Run it with `cargo run -p sched --example quickstart`.

use std::time::{Duration, Instant};

use sched::prelude::*;
use sched::Package;

const RING: u64 = 5;
const LAPS: u64 = 3;

enum Msg {
    Token { hops: u64 },
    Stop,
}

struct Node {
    me: u64,
    seen: u64,
}

impl Node {
    fn pid(i: u64) -> Pid {
        Pid::local(100 + i)
    }
}

impl Process for Node {
    type Done = u64;
    fn init(&mut self, _: &InitContext, method: &str, _: Payload) -> Result<(), InitError> {
        match method {
            "ring" => Ok(()),
            other => Err(InitError::unknown_method(other)),
        }
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        let next = Node::pid((self.me + 1) % RING);
        for event in events {
            let Event::Message(package) = event else {
                continue;
            };
            match package
                .downcast::<Msg>()
                .map_err(|_| "unexpected message")?
            {
                Msg::Token { hops } => {
                    if self.me == 0 && hops == RING * LAPS {
                        // Three laps done: stop the ring, then stop.
                        for i in 1..RING {
                            out.send(Node::pid(i), Msg::Stop)?;
                        }
                        out.finish(self.seen);
                        return Ok(());
                    }
                    self.seen += 1;
                    out.send(next, Msg::Token { hops: hops + 1 })?;
                }
                Msg::Stop => {
                    out.finish(self.seen);
                    return Ok(());
                }
            }
        }
        out.idle();
        Ok(())
    }

    fn close(&mut self) {}
}

fn main() {
    let scheduler = Scheduler::builder().workers(2).build();
    scheduler.start();
    let started = Instant::now();

    let handles: Vec<_> = (0..RING)
        .map(|i| {
            scheduler
                .spawn(
                    Spawn::new(Node { me: i, seen: 0 })
                        .method("ring")
                        .input(())
                        .at(Node::pid(i)),
                )
                .expect("submit")
        })
        .collect();
    // Kick off the token at process 0, as if it came from the last one.
    scheduler
        .context()
        .forward(Package::new(
            Node::pid(RING - 1),
            Node::pid(0),
            Msg::Token { hops: 0 },
        ))
        .expect("process 0 is live");

    println!("a token went {LAPS} times around a ring of {RING} processes:");
    let mut total = 0;
    for h in handles {
        let pid = h.pid();
        let hops = h.wait().expect("done");
        total += hops;
        println!("  {pid} forwarded the token {hops} times");
    }
    let report = scheduler.shutdown(Duration::from_secs(1));
    println!(
        "{total} hops in {:.2?}; shutdown: {} ended gracefully, {} forced",
        started.elapsed(),
        report.ended_gracefully,
        report.forced
    );
    assert_eq!(total, RING * LAPS);
}
