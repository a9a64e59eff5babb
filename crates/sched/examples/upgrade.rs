//! Upgrade: a counter process replaced by its next version mid-stream,
//! under the same PID, without losing a message.
//!
//! A feeder thread posts 20 000 `Add(1)` messages to one counter process.
//! Halfway through, the main thread posts `Upgrade`. Version 1 hands its
//! count to version 2 with `Output::upgrade`: the scheduler closes version
//! 1, initialises version 2 with the count, and gives it the same PID and
//! the same mailbox, with every message still queued behind `Upgrade`. The
//! feeder never notices and keeps posting to the same PID. When it is done,
//! `Finish` makes version 2 report what each version counted.
//!
//! Run it with `cargo run -p sched --example upgrade`.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use sched::prelude::*;

const MESSAGES: u64 = 20_000;
const COUNTER: Pid = Pid::local(1);

enum Msg {
    Add(u64),
    Upgrade,
    Finish,
}

/// The first version: counts.
struct CounterV1 {
    count: u64,
}

impl Process for CounterV1 {
    /// Never finishes itself: its PID finishes as version 2, which takes
    /// it over, does.
    type Done = (u64, u64);
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            let Event::Message(package) = event else {
                continue;
            };
            match package.payload::<Msg>() {
                Some(Msg::Add(n)) => self.count += n,
                Some(Msg::Upgrade) => {
                    // What is left of `events` stays queued for version 2.
                    out.upgrade(CounterV2::default(), "resume", self.count);
                    return Ok(());
                }
                Some(Msg::Finish) => return Err("version 1 cannot report".into()),
                None => return Err("not a counter message".into()),
            }
        }
        Ok(())
    }

    fn close(&mut self) {
        println!("version 1 closed at {}", self.count);
    }
}

/// The second version: counts what it inherited and what it added apart,
/// and can report.
#[derive(Default)]
struct CounterV2 {
    inherited: u64,
    added: u64,
}

impl Process for CounterV2 {
    type Done = (u64, u64);
    fn init(&mut self, cx: &InitContext, method: &str, input: Payload) -> Result<(), InitError> {
        if method != "resume" {
            return Err(InitError::unknown_method(method));
        }
        self.inherited = *input
            .downcast::<u64>()
            .map_err(|_| InitError::failed("resume takes the count"))?;
        println!(
            "version 2 took over {} with a count of {}",
            cx.pid(),
            self.inherited
        );
        Ok(())
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            let Event::Message(package) = event else {
                continue;
            };
            match package.payload::<Msg>() {
                Some(Msg::Add(n)) => self.added += n,
                Some(Msg::Finish) => {
                    out.finish((self.inherited, self.added));
                    return Ok(());
                }
                Some(Msg::Upgrade) | None => return Err("unexpected message".into()),
            }
        }
        Ok(())
    }
}

fn main() {
    let scheduler = Arc::new(Scheduler::builder().workers(2).build());
    scheduler.start();
    let handle = scheduler
        .spawn(
            Spawn::new(CounterV1 { count: 0 })
                .method("run")
                .input(())
                .at(COUNTER),
        )
        .expect("submit");

    let posted = Arc::new(AtomicU64::new(0));
    let feeder = {
        let (scheduler, posted) = (scheduler.clone(), posted.clone());
        std::thread::spawn(move || {
            for i in 0..MESSAGES {
                scheduler
                    .send(COUNTER, Msg::Add(1))
                    .expect("the PID routes");
                posted.store(i + 1, Relaxed);
                if i % 64 == 0 {
                    // Let the counter keep up a little, so the upgrade
                    // lands mid-stream.
                    std::thread::yield_now();
                }
            }
        })
    };
    while posted.load(Relaxed) < MESSAGES / 2 {
        std::thread::yield_now();
    }
    scheduler
        .send(COUNTER, Msg::Upgrade)
        .expect("the PID routes");
    feeder.join().expect("feeder");
    scheduler
        .send(COUNTER, Msg::Finish)
        .expect("the PID still routes, now to version 2");

    let pid = handle.pid();
    let (inherited, added) = handle.wait().expect("version 2 finished");
    let upgrades = scheduler.stats().totals().upgrades;
    scheduler.shutdown(Duration::from_secs(1));
    println!(
        "{pid}: version 1 counted {inherited}, version 2 counted {added}; \
         final count {} of {MESSAGES} messages ({upgrades} upgrade)",
        inherited + added
    );
    assert_eq!(inherited + added, MESSAGES, "a message was lost");
    assert_eq!(upgrades, 1);
}
