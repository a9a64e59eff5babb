//! The engine's timers next to `tokio::time`, in one run, printed as tables
//! (`cargo bench -p benches --bench timers`; `BENCH_QUICK=1` shrinks it):
//!
//! - accuracy: how late a 50 ms timer fires (the instant the process's step
//!   or the task's poll starts, minus the deadline), median, p99 and max
//!   over 200 timers started 10 ms apart, on 2 workers; once on an idle
//!   scheduler, once beside 50 000 busy processes (tasks) that run a little
//!   work and ask to run again (`continue_()`, `yield_now`). A timer that
//!   falls due wakes its process, which then waits its turn behind the busy
//!   ones: under load the lateness is the time a woken process waits in the
//!   run queue, so the table also gives how long one round of all the busy
//!   processes takes;
//! - 1 000 000 timers: set then cancelled, and set then fired (all due at
//!   the same instant), time per timer, and live heap bytes per pending
//!   timer (a counting global allocator: live bytes with every timer
//!   pending minus before, divided by the count). Ours is measured two
//!   ways: from steps (1 000 processes set 1 000 timers each with
//!   `set_timer` at an instant, which is how processes use timeouts) and
//!   from outside (`send(After(..))` / `cancel_timer` on the scheduler, delayed messages to
//!   one process). tokio: 1 000 tasks hold 1 000 boxed `sleep_until` each,
//!   polled once to register them, then dropped (cancelled) or awaited
//!   (fired).
//!
//! Only Linux is supported.

use std::alloc::{GlobalAlloc, Layout, System};
use std::future::Future;
use std::hint::black_box;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::task::Poll;
use std::thread;
use std::time::{Duration, Instant};

use sched::prelude::*;

const WORKERS: usize = 2;
const DELAY: Duration = Duration::from_millis(50);
const BUSY: usize = 50_000;
/// Iterations of an LCG per busy step (a few hundred nanoseconds).
const WORK: u32 = 100;
/// Processes (tasks) that own the timers of the million-timer runs.
const OWNERS: usize = 1_000;

/// Counts live heap bytes, so memory per timer is measured exactly.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded to `System` with the caller's arguments;
// the counter is only bookkeeping.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's layout.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's layout.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: `ptr` came from this allocator with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded with the caller's arguments.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            LIVE.fetch_add(new_size, Ordering::Relaxed);
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        new
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn live() -> usize {
    LIVE.load(Ordering::Relaxed)
}

struct Config {
    samples: usize,
    stagger: Duration,
    timers: usize,
}

#[path = "common/filter.rs"]
mod filter;
use filter::another_bench_asked_for;
#[path = "timers/accuracy.rs"]
mod accuracy;
use accuracy::accuracy;
#[path = "timers/million.rs"]
mod million;
use million::million;

fn main() {
    if another_bench_asked_for("timers") {
        return;
    }
    // Processes in the counting allocator too (by default they come from
    // mimalloc, which it does not see), so both sides' memory is counted.
    sched::engine::use_global_allocator().expect("before the first process");
    // `cargo xtask bench --quick` sets BENCH_QUICK so the suite stays short.
    let config = if std::env::var_os("BENCH_QUICK").is_some() {
        Config {
            samples: 50,
            stagger: Duration::from_millis(10),
            timers: 100_000,
        }
    } else {
        Config {
            samples: 200,
            stagger: Duration::from_millis(10),
            timers: 1_000_000,
        }
    };
    accuracy(&config);
    million(&config);
}

fn scheduler() -> Scheduler {
    let scheduler = Scheduler::builder().workers(WORKERS).build();
    scheduler.start();
    scheduler
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKERS)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

fn work(state: &mut u64) {
    for _ in 0..WORK {
        *state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
    }
    black_box(*state);
}

fn percentile(sorted: &[Duration], p: usize) -> Duration {
    sorted[(sorted.len() * p / 100).min(sorted.len() - 1)]
}

fn wait_for(counter: &AtomicUsize, n: usize) {
    while counter.load(Ordering::Acquire) < n {
        thread::sleep(Duration::from_millis(1));
    }
}
