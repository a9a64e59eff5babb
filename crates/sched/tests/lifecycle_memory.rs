//! Memory stays flat over many process lifecycles: submit a short process,
//! let it finish, take its result, over and over on one running scheduler.
//! Every lifecycle allocates a process record, a routing-table entry, an
//! event queue, completers and messages; if any of them outlived its
//! process, resident memory would grow with the number of lifecycles.
//!
//! `SCHED_LIFECYCLES` sets how many lifecycles run (default 20 000, a
//! fraction of a second in a debug build); `cargo xtask leak` runs 1 000 000
//! in release, and a short run under valgrind to catch definite leaks.
//! Resident memory (`VmRSS`, Linux only) is read once the first tenth of the
//! lifecycles has run and again at the end; the end may exceed the first
//! reading by at most 10% plus `RSS_SLACK_KIB`. `SCHED_LIFECYCLE_RSS=skip`
//! turns that check off, for runs under valgrind, whose own bookkeeping is
//! what resident memory would measure there.
//! `SCHED_LIFECYCLE_ALLOCATOR=global` puts the processes in the global
//! allocator (`sched::engine::use_global_allocator`), where valgrind sees
//! each of them; by default they come from mimalloc, whose pages it does not
//! track block by block.

use std::time::Instant;

use sched::command::{Command, CommandId, Completer, Rejected};
use sched::prelude::*;

/// Answers each command with its own data, at once, on the worker.
const ECHO: CommandId = CommandId(1);

/// Live processes at most: a batch is submitted, then all of it is waited
/// for, so the scheduler's tables never hold more than this many.
const BATCH: u64 = 1_000;

/// Lifecycles when `SCHED_LIFECYCLES` is not set.
const DEFAULT_LIFECYCLES: u64 = 20_000;

/// Growth allowed on top of 10%. Resident memory moves by a few hundred
/// KiB for reasons that have nothing to do with leaks: how many records
/// are alive at the peak of a batch depends on timing, the allocator's
/// per-thread arenas settle at that peak, and crossbeam-epoch's garbage
/// bags fill and empty in steps. Over 1 000 000 lifecycles in release the
/// reading after the first tenth varied between 4.4 and 5.4 MiB from run to
/// run and the final one between 4.8 and 5.5 MiB, so 10% of the first
/// reading alone is too tight. A leak of one allocation per lifecycle (at
/// least 32 bytes with glibc's malloc) is 27 MiB over the last 900 000,
/// far above this.
const RSS_SLACK_KIB: u64 = 2_048;

/// Finishes with its input, by one of three paths so that each lifecycle
/// exercises a different part of the scheduler: at once, through a yielded
/// command, or through a message it sends itself.
struct Short {
    n: u64,
    started: bool,
}

impl Process for Short {
    type Done = Payload;
    fn init(&mut self, _: &InitContext, method: &str, input: Payload) -> Result<(), InitError> {
        if method != "run" {
            return Err(InitError::unknown_method(method));
        }
        let n = input
            .downcast::<u64>()
            .map_err(|_| InitError::failed("run takes a u64"))?;
        self.n = *n;
        Ok(())
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        // Each path brings back exactly one event, which ends the process.
        match events.next() {
            Some(Event::Completion { result, .. }) => {
                out.finish(result?);
                return Ok(());
            }
            Some(Event::Message(package)) => {
                out.finish(package.into_payload());
                return Ok(());
            }
            Some(Event::Cancel) => return Err("cancelled before finishing".into()),
            Some(other) => return Err(format!("unexpected {other:?}").into()),
            None => {}
        }
        if self.started {
            return Err("woken with no event".into());
        }
        self.started = true;
        let n = self.n;
        match n % 3 {
            0 => out.finish(n),
            1 => {
                out.yield_command(ECHO, Tag(n), Box::new(n));
            }
            _ => {
                let me = out.pid();
                out.send(me, n)?;
                out.idle();
            }
        }
        Ok(())
    }

    fn close(&mut self) {}
}

/// Resident memory of this process, in KiB.
#[cfg(target_os = "linux")]
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/self/status")
}

fn env_lifecycles() -> u64 {
    match std::env::var("SCHED_LIFECYCLES") {
        Ok(text) => text
            .replace('_', "")
            .parse()
            .unwrap_or_else(|_| panic!("SCHED_LIFECYCLES={text:?} is not a number")),
        Err(_) => DEFAULT_LIFECYCLES,
    }
}

/// Runs lifecycles `first..first + count` in batches of at most `BATCH`,
/// checking each result.
fn run_lifecycles(scheduler: &Scheduler, first: u64, count: u64) {
    let end = first + count;
    let mut next = first;
    let mut handles = Vec::with_capacity(BATCH as usize);
    while next < end {
        let batch_end = end.min(next + BATCH);
        handles.extend((next..batch_end).map(|n| {
            let handle = scheduler
                .spawn(
                    Spawn::new(Short {
                        n: 0,
                        started: false,
                    })
                    .method("run")
                    .input(n),
                )
                .expect("spawn");
            (n, handle)
        }));
        for (n, handle) in handles.drain(..) {
            let value = handle
                .wait()
                .unwrap_or_else(|e| panic!("lifecycle {n} failed: {e}"));
            assert_eq!(value.downcast_ref::<u64>(), Some(&n), "lifecycle {n}");
        }
        next = batch_end;
    }
}

#[test]
fn resident_memory_stays_flat_over_many_lifecycles() {
    let total = env_lifecycles();
    let warm_up = total / 10;
    let check_rss = std::env::var("SCHED_LIFECYCLE_RSS").as_deref() != Ok("skip");
    if std::env::var("SCHED_LIFECYCLE_ALLOCATOR").as_deref() == Ok("global") {
        sched::engine::use_global_allocator().expect("before the first process");
    }

    let scheduler = Scheduler::builder()
        .workers(2)
        .handler(
            ECHO,
            |cmd: Command, done: Completer| -> Result<(), Rejected> {
                let _ = done.complete(cmd.data);
                Ok(())
            },
        )
        .build();
    scheduler.start();

    let started = Instant::now();
    run_lifecycles(&scheduler, 0, warm_up);
    #[cfg(target_os = "linux")]
    let rss_warm = rss_kib();
    run_lifecycles(&scheduler, warm_up, total - warm_up);
    let took = started.elapsed();
    #[cfg(target_os = "linux")]
    let rss_end = rss_kib();

    let stats = scheduler.stats();
    assert_eq!(stats.live_processes, 0);
    let report = scheduler.shutdown(std::time::Duration::from_secs(5));
    assert_eq!((report.forced, report.still_running), (0, 0));

    eprintln!("{total} lifecycles in {took:?}");
    #[cfg(target_os = "linux")]
    {
        eprintln!("VmRSS after {warm_up} lifecycles: {rss_warm} KiB; after {total}: {rss_end} KiB");
        if check_rss {
            let allowed = rss_warm + rss_warm / 10 + RSS_SLACK_KIB;
            assert!(
                rss_end <= allowed,
                "resident memory grew from {rss_warm} KiB after {warm_up} lifecycles to \
                 {rss_end} KiB after {total} (allowed: {allowed} KiB)"
            );
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = check_rss;
}
