//! Something to watch with `sched-top`: a busy mix of processes, served on
//! the live endpoint (feature `live`).
//!
//! - `hot-1`, `hot-2`, `hot-3`: bursts of short busy steps (they continue
//!   themselves), with a pause on a timer between bursts;
//! - `ticker-0` .. `ticker-15`: a step every 5 ms, on engine timers;
//! - `producer` sends 10 messages to `backlog` every 2 ms, and `backlog`
//!   reads one per step: its mailbox grows (until it holds 50 000, when it
//!   reads them all at once and starts over);
//! - `slowpoke` takes a 40 ms step every second: a long step.
//!
//! Histograms are on. The endpoint listens on the address given as the
//! first argument, else `SCHED_LIVE_ADDR`, else `127.0.0.1:7207`
//! (`sched::live::DEFAULT_ADDR`). It runs until killed, or for
//! `--seconds N`:
//!
//! ```text
//! cargo run -p sched --features live --example live -- 127.0.0.1:7207 --seconds 600
//! cargo run -p sched-top -- 127.0.0.1:7207
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use sched::prelude::*;

/// Bursts of busy steps: `burst` steps of about `spin` each, continuing
/// itself, then a pause of `pause` on a timer.
struct Hot {
    spin: Duration,
    burst: u32,
    pause: Duration,
    left: u32,
}

impl Process for Hot {
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            if let Event::Cancel = event {
                out.finish(());
                return Ok(());
            }
        }
        let started = Instant::now();
        while started.elapsed() < self.spin {
            std::hint::spin_loop();
        }
        if self.left == 0 {
            self.left = self.burst;
            out.set_timer(self.pause, Tag(0));
        } else {
            self.left -= 1;
            out.continue_();
        }
        Ok(())
    }
}

/// A step every `every`, on a timer; `nap` makes each step sleep that long
/// (a long step when it exceeds the long-step threshold, 10 ms).
struct Ticker {
    every: Duration,
    nap: Duration,
}

impl Process for Ticker {
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            if let Event::Cancel = event {
                out.finish(());
                return Ok(());
            }
        }
        std::thread::sleep(self.nap);
        out.set_timer(self.every, Tag(0));
        Ok(())
    }
}

/// Sends `batch` numbers to `to` every 2 ms.
struct Producer {
    to: Pid,
    batch: u64,
    sent: u64,
}

impl Process for Producer {
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            if let Event::Cancel = event {
                out.finish(self.sent);
                return Ok(());
            }
        }
        for _ in 0..self.batch {
            self.sent += 1;
            // The backlog may have ended at shutdown: not an error here.
            let _ = out.send(Package::new(out.pid(), self.to, self.sent));
        }
        out.set_timer(Duration::from_millis(2), Tag(0));
        Ok(())
    }
}

/// Reads one message per step, so its mailbox grows while the producer
/// runs; once 50 000 wait, it reads them all.
struct Backlog {
    read: u64,
}

const BACKLOG_LIMIT: usize = 50_000;

impl Process for Backlog {
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        let all = events.len() >= BACKLOG_LIMIT;
        for event in events.by_ref() {
            match event {
                Event::Cancel => {
                    out.finish(self.read);
                    return Ok(());
                }
                Event::Message(_) => {
                    self.read += 1;
                    if !all {
                        break; // leave the rest for later steps
                    }
                }
                _ => {}
            }
        }
        out.idle();
        Ok(())
    }
}

fn usage() -> ! {
    eprintln!("usage: live [ADDR] [--seconds N]   (ADDR also from SCHED_LIVE_ADDR)");
    std::process::exit(2)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut addr =
        std::env::var("SCHED_LIVE_ADDR").unwrap_or_else(|_| sched::live::DEFAULT_ADDR.into());
    let mut seconds: Option<u64> = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--seconds" => {
                seconds = Some(
                    args.next()
                        .and_then(|s| s.parse().ok())
                        .unwrap_or_else(|| usage()),
                )
            }
            "-h" | "--help" => usage(),
            _ if arg.starts_with('-') => usage(),
            _ => addr = arg,
        }
    }

    let scheduler = Arc::new(Scheduler::builder().workers(2).histograms(true).build());
    scheduler.start();

    for (i, spin_us) in [(1, 20u64), (2, 60), (3, 150)] {
        let hot = Hot {
            spin: Duration::from_micros(spin_us),
            burst: 200,
            pause: Duration::from_millis(20),
            left: 200,
        };
        let pid = scheduler.spawn(hot)?.pid();
        scheduler.register_name(&format!("hot-{i}"), pid)?;
    }
    for i in 0..16 {
        let ticker = Ticker {
            every: Duration::from_millis(5),
            nap: Duration::ZERO,
        };
        let pid = scheduler.spawn(ticker)?.pid();
        scheduler.register_name(&format!("ticker-{i}"), pid)?;
    }
    let backlog = scheduler.spawn(Backlog { read: 0 })?.pid();
    scheduler.register_name("backlog", backlog)?;
    let producer = Producer {
        to: backlog,
        batch: 10,
        sent: 0,
    };
    let pid = scheduler.spawn(producer)?.pid();
    scheduler.register_name("producer", pid)?;
    let slowpoke = Ticker {
        every: Duration::from_secs(1),
        nap: Duration::from_millis(40),
    };
    let pid = scheduler.spawn(slowpoke)?.pid();
    scheduler.register_name("slowpoke", pid)?;

    let endpoint = sched::live::serve(Arc::clone(&scheduler), addr.as_str())?;
    println!("live endpoint on {}", endpoint.local_addr());
    println!(
        "attach with: cargo run -p sched-top -- {}",
        endpoint.local_addr()
    );

    match seconds {
        Some(n) => std::thread::sleep(Duration::from_secs(n)),
        None => loop {
            std::thread::sleep(Duration::from_secs(3600));
        },
    }
    endpoint.stop();
    let report = scheduler.shutdown(Duration::from_secs(2));
    println!("shut down: {report:?}");
    Ok(())
}
