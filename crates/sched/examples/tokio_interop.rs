//! Tokio interop: a handler completes yields from tokio tasks.
//!
//! Processes yield "sleep" commands; the handler spawns a tokio task on a
//! separate tokio runtime that awaits `tokio::time::sleep` and then
//! completes the yield. 50 processes each sleep three times for 20 ms: the
//! whole run takes about 60 ms because the sleeps overlap, and no worker of
//! the scheduler is ever blocked. The outcomes are awaited on the same
//! runtime: a `Completion` is a future.
//!
//! Run it with `cargo run -p sched --example tokio_interop`.

use std::time::{Duration, Instant};

use sched::command::{Command, CommandId, Completer, Rejected};
use sched::prelude::*;

const SLEEP: CommandId = CommandId(1);
const PROCESSES: usize = 50;
const NAPS: u64 = 3;
const NAP: Duration = Duration::from_millis(20);

struct Napper {
    naps: u64,
}

impl Process for Napper {
    type Done = u64;
    fn init(&mut self, _: &InitContext, _: &str, _: Payload) -> Result<(), InitError> {
        Ok(())
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            if let Event::Completion { result, .. } = event {
                result?;
                self.naps += 1;
            }
        }
        if self.naps == NAPS {
            out.finish(self.naps);
        } else {
            out.yield_command(SLEEP, Tag(self.naps), Box::new(NAP));
        }
        Ok(())
    }

    fn close(&mut self) {}
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_time()
        .build()
        .expect("a tokio runtime");
    let tokio_handle = runtime.handle().clone();

    let scheduler = Scheduler::builder()
        .workers(2)
        .handler(
            SLEEP,
            move |cmd: Command, mut completer: Completer| -> Result<(), Rejected> {
                let Some(&nap) = cmd.data::<Duration>() else {
                    return Err(completer.reject("sleep takes a Duration"));
                };
                tokio_handle.spawn(async move {
                    tokio::time::sleep(nap).await;
                    let _ = completer.complete(Box::new(()));
                });
                Ok(())
            },
        )
        .build();
    scheduler.start();

    let started = Instant::now();
    let handles: Vec<_> = (0..PROCESSES)
        .map(|_| scheduler.spawn(Napper { naps: 0 }).unwrap())
        .collect();
    let naps: u64 = runtime.block_on(async {
        let mut naps = 0;
        for handle in handles {
            naps += handle.await.unwrap();
        }
        naps
    });
    let elapsed = started.elapsed();
    scheduler.shutdown(Duration::from_secs(1));

    println!("{PROCESSES} processes took {naps} naps of {NAP:?} on tokio timers in {elapsed:.2?}");
    println!(
        "  (sequentially that would be {:.2?}; the naps overlapped)",
        NAP * naps as u32
    );
    assert_eq!(naps, PROCESSES as u64 * NAPS);
}
