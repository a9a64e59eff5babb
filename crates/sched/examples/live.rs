//! Something to watch with `sched-top`: a busy mix of processes, served on
//! the live endpoint (feature `live`).
//!
//! - `hot-1`, `hot-2`, `hot-3`: bursts of short busy steps (they continue
//!   themselves), with a pause on a timer between bursts;
//! - `ticker-0` .. `ticker-15`: a step every 5 ms, on engine timers;
//! - a thread posts 5 000 messages a second to `backlog` (requests from
//!   outside), which spends 240 µs of blocking work on each (4 200 a
//!   second at most): each step takes what arrived during the previous
//!   one, so its mailbox, its batches and its steps grow (to steps of a
//!   second, holding a worker) until a batch reaches 5 000 messages, which
//!   it sheds, and it starts over;
//! - `fetcher-0`, `fetcher-1`: each yields a command to a slow service (a
//!   thread answering one request every 2 ms) and waits for its answer;
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

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use sched::command::{Command, CommandId, Completer, Rejected};
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
    type Done = ();
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
    type Done = ();
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

/// Posts `per_second` numbers a second to `to` from outside the
/// scheduler (requests arriving from the network, say), in a batch every
/// 2 ms or so, until `stop` is set or the target is gone.
fn produce(scheduler: &Scheduler, to: Pid, per_second: u64, stop: &AtomicBool) {
    let started = Instant::now();
    let mut sent = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let due = (started.elapsed().as_secs_f64() * per_second as f64) as u64;
        while sent < due {
            sent += 1;
            if scheduler.send(to, sent).is_err() {
                return;
            }
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Asks a slow service for something (a command its handler passes to the
/// service's thread), waits for the answer, and asks again.
struct Fetcher;

const FETCH: CommandId = CommandId(1);

impl Process for Fetcher {
    type Done = ();
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            if let Event::Cancel = event {
                out.finish(());
                return Ok(());
            }
        }
        out.yield_command(FETCH, Tag(0), Box::new(()));
        Ok(())
    }
}

/// The slow service: answers each request 2 ms after the previous one,
/// on a thread of its own, until the scheduler (and so the handler that
/// feeds it) is gone.
fn service() -> impl Fn(Command, Completer) -> Result<(), Rejected> + Send + Sync + 'static {
    let (requests, queue) = mpsc::channel::<Completer>();
    std::thread::spawn(move || {
        for done in queue {
            std::thread::sleep(Duration::from_millis(2));
            let _ = done.complete(Box::new(()));
        }
    });
    let requests = Mutex::new(requests);
    move |_: Command, done: Completer| {
        let _ = requests.lock().expect("the request queue").send(done);
        Ok(())
    }
}

/// A consumer slower than its producer: each message costs it
/// `per_message` of blocking work (a slow disk, say), and messages arrive
/// faster than that. Each step takes every message that arrived during
/// the previous one, so the batches, the steps and the mailbox grow until
/// a batch reaches `shed_at`, which it drops unprocessed (load shedding),
/// and it starts over.
struct Backlog {
    per_message: Duration,
    shed_at: usize,
    read: u64,
    shed: u64,
}

impl Process for Backlog {
    type Done = u64;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        let mut batch = 0u32;
        for event in events {
            match event {
                Event::Cancel => {
                    out.finish(self.read);
                    return Ok(());
                }
                Event::Message(_) => batch += 1,
                _ => {}
            }
        }
        if batch as usize >= self.shed_at {
            self.shed += u64::from(batch);
        } else {
            std::thread::sleep(self.per_message * batch);
            self.read += u64::from(batch);
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

    let scheduler = Arc::new(
        Scheduler::builder()
            .workers(2)
            .histograms(true)
            .count_mailboxes(true)
            .handler(FETCH, service())
            .build(),
    );
    scheduler.start();

    for (i, spin_us) in [(1, 20u64), (2, 60), (3, 150)] {
        let hot = Hot {
            spin: Duration::from_micros(spin_us),
            burst: 200,
            pause: Duration::from_millis(20),
            left: 200,
        };
        let pid = scheduler.spawn(hot)?.pid();
        scheduler
            .context()
            .register_name(&format!("hot-{i}"), pid)?;
    }
    for i in 0..16 {
        let ticker = Ticker {
            every: Duration::from_millis(5),
            nap: Duration::ZERO,
        };
        let pid = scheduler.spawn(ticker)?.pid();
        scheduler
            .context()
            .register_name(&format!("ticker-{i}"), pid)?;
    }
    for i in 0..2 {
        let pid = scheduler.spawn(Fetcher)?.pid();
        scheduler
            .context()
            .register_name(&format!("fetcher-{i}"), pid)?;
    }
    let backlog = Backlog {
        per_message: Duration::from_micros(240),
        shed_at: 5_000,
        read: 0,
        shed: 0,
    };
    let backlog = scheduler.spawn(backlog)?.pid();
    scheduler.context().register_name("backlog", backlog)?;
    let stop = Arc::new(AtomicBool::new(false));
    let producer = {
        let (scheduler, stop) = (Arc::clone(&scheduler), Arc::clone(&stop));
        std::thread::spawn(move || produce(&scheduler, backlog, 5_000, &stop))
    };
    let slowpoke = Ticker {
        every: Duration::from_secs(1),
        nap: Duration::from_millis(40),
    };
    let pid = scheduler.spawn(slowpoke)?.pid();
    scheduler.context().register_name("slowpoke", pid)?;

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
    stop.store(true, Ordering::Relaxed);
    producer.join().expect("the producer thread");
    let report = scheduler.shutdown(Duration::from_secs(2));
    println!("shut down: {report:?}");
    Ok(())
}
