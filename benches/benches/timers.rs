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
//!   `set_timer_at`, which is how processes use timeouts) and from outside
//!   (`post_after` / `cancel_timer` on the scheduler, delayed messages to
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

use sched::{BoxError, Completion, Event, Events, Output, Pid, Process, Scheduler, Tag, TimerId};

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

fn main() {
    if another_bench_asked_for("timers") {
        return;
    }
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

// ----------------------------------------------------------------- accuracy

/// Sets a 50 ms timer in its first step and reports how late it fired.
struct Sampler {
    deadline: Option<Instant>,
    samples: mpsc::Sender<Duration>,
}

impl Process for Sampler {
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        let now = Instant::now();
        if self.deadline.is_none() {
            self.deadline = Some(now + DELAY);
            out.set_timer(DELAY, Tag(1));
        }
        for event in events {
            if let Event::Timer { tag: Tag(1), .. } = event {
                let deadline = self.deadline.expect("set in the first step");
                let _ = self.samples.send(now.saturating_duration_since(deadline));
                out.done(Box::new(()));
            }
        }
        Ok(())
    }
}

/// Does a little work and asks to run again, until told to stop; finishes
/// with how many steps it took.
struct Busy {
    stop: Arc<AtomicBool>,
    started: Arc<AtomicUsize>,
    steps: u64,
    state: u64,
}

impl Process for Busy {
    fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        if self.steps == 0 {
            self.started.fetch_add(1, Ordering::Release);
        }
        if self.stop.load(Ordering::Relaxed) {
            out.done(Box::new(self.steps));
            return Ok(());
        }
        self.steps += 1;
        work(&mut self.state);
        out.continue_();
        Ok(())
    }
}

/// Lateness samples, and how long one round of the busy processes took
/// while they were taken (zero when idle).
struct Accuracy {
    lateness: Vec<Duration>,
    round: Duration,
}

fn ours_accuracy(config: &Config, busy: usize) -> Accuracy {
    let scheduler = scheduler();
    let stop = Arc::new(AtomicBool::new(false));
    let started = Arc::new(AtomicUsize::new(0));
    let busy: Vec<Completion> = (0..busy)
        .map(|i| {
            let process = Busy {
                stop: stop.clone(),
                started: started.clone(),
                steps: 0,
                state: i as u64,
            };
            scheduler.spawn(process, "run", ()).expect("spawned")
        })
        .collect();
    wait_for(&started, busy.len());
    let since = Instant::now();
    let (tx, rx) = mpsc::channel();
    for _ in 0..config.samples {
        thread::sleep(config.stagger);
        let sampler = Sampler {
            deadline: None,
            samples: tx.clone(),
        };
        drop(scheduler.spawn(sampler, "run", ()).expect("spawned"));
    }
    let lateness: Vec<Duration> = rx.iter().take(config.samples).collect();
    stop.store(true, Ordering::Relaxed);
    let window = since.elapsed();
    let mut steps = 0u64;
    let processes = busy.len() as u64;
    for done in busy {
        let value = done.wait().expect("a busy process finishes");
        steps += *value.downcast_ref::<u64>().expect("its step count");
    }
    let report = scheduler.shutdown(Duration::from_secs(5));
    assert_eq!(report.forced, 0);
    Accuracy {
        lateness,
        round: round(window, steps, processes),
    }
}

/// How long one round of every busy process took, on average.
fn round(window: Duration, steps: u64, processes: u64) -> Duration {
    if steps == 0 {
        return Duration::ZERO;
    }
    window.mul_f64(processes as f64 / steps as f64)
}

fn tokio_accuracy(config: &Config, busy: usize) -> Accuracy {
    let rt = runtime();
    let stop = Arc::new(AtomicBool::new(false));
    let started = Arc::new(AtomicUsize::new(0));
    let busy: Vec<_> = (0..busy)
        .map(|i| {
            let stop = stop.clone();
            let started = started.clone();
            rt.spawn(async move {
                started.fetch_add(1, Ordering::Release);
                let mut state = i as u64;
                let mut steps = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    steps += 1;
                    work(&mut state);
                    tokio::task::yield_now().await;
                }
                steps
            })
        })
        .collect();
    wait_for(&started, busy.len());
    let since = Instant::now();
    let (tx, rx) = mpsc::channel();
    for _ in 0..config.samples {
        thread::sleep(config.stagger);
        let tx = tx.clone();
        rt.spawn(async move {
            let deadline = Instant::now() + DELAY;
            tokio::time::sleep(DELAY).await;
            let _ = tx.send(Instant::now().saturating_duration_since(deadline));
        });
    }
    let lateness: Vec<Duration> = rx.iter().take(config.samples).collect();
    stop.store(true, Ordering::Relaxed);
    let window = since.elapsed();
    let processes = busy.len() as u64;
    let steps: u64 = rt.block_on(async {
        let mut steps = 0;
        for task in busy {
            steps += task.await.expect("a busy task finishes");
        }
        steps
    });
    drop(rt);
    Accuracy {
        lateness,
        round: round(window, steps, processes),
    }
}

fn accuracy(config: &Config) {
    println!(
        "lateness of a {DELAY:?} timer (fire instant - deadline), {} timers {:?} apart, \
         {WORKERS} workers:",
        config.samples, config.stagger
    );
    println!("| side | load | median | p99 | max | one round of the busy ones |");
    println!("|---|---|---|---|---|---|");
    type Measure = fn(&Config, usize) -> Accuracy;
    let runs: [(&str, &str, Measure, usize); 4] = [
        ("ours (set_timer)", "idle", ours_accuracy, 0),
        (
            "ours (set_timer)",
            "50 000 busy processes",
            ours_accuracy,
            BUSY,
        ),
        ("tokio (sleep)", "idle", tokio_accuracy, 0),
        ("tokio (sleep)", "50 000 busy tasks", tokio_accuracy, BUSY),
    ];
    for (side, load, run, busy) in runs {
        let Accuracy {
            mut lateness,
            round,
        } = run(config, busy);
        lateness.sort();
        let round = if busy == 0 {
            "-".to_string()
        } else {
            format!("{round:.2?}")
        };
        println!(
            "| {side} | {load} | {:.2?} | {:.2?} | {:.2?} | {round} |",
            percentile(&lateness, 50),
            percentile(&lateness, 99),
            lateness[lateness.len() - 1],
        );
    }
    println!();
}

// --------------------------------------------------------- a million timers

/// What the main thread tells a timer owner.
enum Order {
    /// Set this many timers, all due at this instant.
    Set(usize, Instant),
    /// Cancel every pending timer, then finish.
    Cancel,
}

/// Sets its share of the timers from a step, then cancels them or waits
/// for them all to fire; finishes then.
struct Owner {
    ids: Vec<TimerId>,
    fired: usize,
    set: Arc<AtomicUsize>,
}

impl Process for Owner {
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            match event {
                Event::Message(package) => match package.downcast::<Order>() {
                    Ok(Order::Set(n, at)) => {
                        for _ in 0..n {
                            self.ids.push(out.set_timer_at(at, Tag(0)));
                        }
                        self.set.fetch_add(1, Ordering::Release);
                    }
                    Ok(Order::Cancel) => {
                        for id in self.ids.drain(..) {
                            assert!(out.cancel_timer(id), "pending until cancelled");
                        }
                        out.done(Box::new(()));
                    }
                    Err(_) => {} // the warm-up message
                },
                Event::Timer { .. } => {
                    self.fired += 1;
                    if self.fired == self.ids.len() {
                        out.done(Box::new(()));
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// Counts delayed messages; finishes once it has `expected`.
struct Sink {
    expected: usize,
    got: usize,
}

impl Process for Sink {
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            match event {
                Event::Message(_) => self.got += 1,
                Event::Cancel => out.done(Box::new(())),
                _ => {}
            }
        }
        if self.got == self.expected {
            out.done(Box::new(()));
        }
        Ok(())
    }
}

/// One measurement of a million timers: per-timer costs and memory.
#[derive(Default)]
struct PerTimer {
    set: Duration,
    cancel: Duration,
    /// From the instant every timer was due to the last one handled.
    fire: Duration,
    bytes: f64,
}

fn per(total: Duration, n: usize) -> Duration {
    total / u32::try_from(n).expect("fewer than 2^32 timers")
}

/// For the fired round: a deadline far enough away that setting `n`
/// timers, which took `set` each in the cancelled round (whose deadline is
/// a minute away), is over before it.
fn deadline_after(set: Duration) -> Instant {
    Instant::now() + (set * 3).max(Duration::from_millis(200))
}

/// Ours, from steps: `OWNERS` processes set `n / OWNERS` timers each.
fn ours_from_steps(n: usize) -> PerTimer {
    let each = n / OWNERS;
    let mut result = PerTimer::default();
    for fire in [false, true] {
        let scheduler = scheduler();
        let set = Arc::new(AtomicUsize::new(0));
        let owners: Vec<(Pid, Completion)> = (0..OWNERS)
            .map(|_| {
                let owner = Owner {
                    ids: Vec::with_capacity(each),
                    fired: 0,
                    set: set.clone(),
                };
                let done = scheduler.spawn(owner, "run", ()).expect("spawned");
                // A first message, so each mailbox's first block is not
                // counted as timer memory.
                scheduler.post(done.pid(), ()).expect("alive");
                (done.pid(), done)
            })
            .collect();
        while scheduler.stats().live_processes < OWNERS {
            thread::sleep(Duration::from_millis(1));
        }
        thread::sleep(Duration::from_millis(50));
        let at = if fire {
            deadline_after(result.set * u32::try_from(n).expect("small"))
        } else {
            Instant::now() + Duration::from_secs(60)
        };
        let before = live();
        let start = Instant::now();
        for (pid, _) in &owners {
            scheduler.post(*pid, Order::Set(each, at)).expect("alive");
        }
        wait_for(&set, OWNERS);
        let set_took = start.elapsed();
        assert_eq!(scheduler.stats().pending_timers, each * OWNERS);
        if fire {
            for (_, done) in owners {
                done.wait().expect("every timer fired");
            }
            result.fire = per(at.elapsed(), n);
        } else {
            result.set = per(set_took, n);
            result.bytes = live().saturating_sub(before) as f64 / n as f64;
            let start = Instant::now();
            for (pid, _) in &owners {
                scheduler.post(*pid, Order::Cancel).expect("alive");
            }
            for (_, done) in owners {
                done.wait().expect("cancelled every timer");
            }
            result.cancel = per(start.elapsed(), n);
            assert_eq!(scheduler.stats().pending_timers, 0);
        }
        let report = scheduler.shutdown(Duration::from_secs(5));
        assert_eq!(report.forced, 0);
    }
    result
}

/// Ours, from outside: `post_after` and `cancel_timer` on the scheduler.
fn ours_from_outside(n: usize) -> PerTimer {
    let mut result = PerTimer::default();
    for fire in [false, true] {
        let scheduler = scheduler();
        let sink = scheduler
            .spawn(
                Sink {
                    expected: if fire { n } else { usize::MAX },
                    got: 0,
                },
                "run",
                (),
            )
            .expect("spawned");
        let target = sink.pid();
        let mut ids = Vec::with_capacity(n);
        let at = if fire {
            deadline_after(result.set * u32::try_from(n).expect("small"))
        } else {
            Instant::now() + Duration::from_secs(60)
        };
        let before = live();
        let start = Instant::now();
        for _ in 0..n {
            let delay = at.saturating_duration_since(Instant::now());
            ids.push(scheduler.post_after(delay, target, ()).expect("alive"));
        }
        let set_took = start.elapsed();
        if fire {
            sink.wait().expect("every message arrived");
            result.fire = per(at.elapsed(), n);
        } else {
            assert_eq!(scheduler.stats().pending_timers, n);
            result.set = per(set_took, n);
            result.bytes = live().saturating_sub(before) as f64 / n as f64;
            let start = Instant::now();
            for id in ids.drain(..) {
                assert!(scheduler.cancel_timer(id), "pending until cancelled");
            }
            result.cancel = per(start.elapsed(), n);
            assert_eq!(scheduler.stats().pending_timers, 0);
        }
        let report = scheduler.shutdown(Duration::from_secs(5));
        assert_eq!(report.forced, 0);
    }
    result
}

type Sleeps = Vec<Pin<Box<tokio::time::Sleep>>>;

/// tokio: `OWNERS` tasks create `n / OWNERS` boxed sleeps each and poll
/// them once (registering them with the driver); then drop them, or await
/// them all.
fn tokio_from_tasks(n: usize) -> PerTimer {
    let each = n / OWNERS;
    let mut result = PerTimer::default();
    for fire in [false, true] {
        let rt = runtime();
        let set = Arc::new(AtomicUsize::new(0));
        let ready = Arc::new(AtomicUsize::new(0));
        let mut orders = Vec::with_capacity(OWNERS);
        let tasks: Vec<_> = (0..OWNERS)
            .map(|_| {
                let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Order>();
                orders.push(tx);
                let set = set.clone();
                let ready = ready.clone();
                rt.spawn(async move {
                    let mut sleeps: Sleeps = Vec::with_capacity(each);
                    ready.fetch_add(1, Ordering::Release);
                    while let Some(order) = rx.recv().await {
                        match order {
                            Order::Set(n, at) => {
                                let at = tokio::time::Instant::from_std(at);
                                for _ in 0..n {
                                    sleeps.push(Box::pin(tokio::time::sleep_until(at)));
                                }
                                std::future::poll_fn(|cx| {
                                    for sleep in &mut sleeps {
                                        let _ = sleep.as_mut().poll(cx);
                                    }
                                    Poll::Ready(())
                                })
                                .await;
                                set.fetch_add(1, Ordering::Release);
                                if fire {
                                    for sleep in &mut sleeps {
                                        sleep.await;
                                    }
                                    return;
                                }
                            }
                            Order::Cancel => {
                                sleeps.clear();
                                return;
                            }
                        }
                    }
                })
            })
            .collect();
        wait_for(&ready, OWNERS);
        thread::sleep(Duration::from_millis(50));
        let at = if fire {
            deadline_after(result.set * u32::try_from(n).expect("small"))
        } else {
            Instant::now() + Duration::from_secs(60)
        };
        let before = live();
        let start = Instant::now();
        for tx in &orders {
            tx.send(Order::Set(each, at)).expect("alive");
        }
        wait_for(&set, OWNERS);
        let set_took = start.elapsed();
        if fire {
            rt.block_on(async {
                for task in tasks {
                    task.await.expect("every sleep fired");
                }
            });
            result.fire = per(at.elapsed(), n);
        } else {
            result.set = per(set_took, n);
            result.bytes = live().saturating_sub(before) as f64 / n as f64;
            let start = Instant::now();
            for tx in &orders {
                tx.send(Order::Cancel).expect("alive");
            }
            rt.block_on(async {
                for task in tasks {
                    task.await.expect("every sleep dropped");
                }
            });
            result.cancel = per(start.elapsed(), n);
        }
        drop(rt);
    }
    result
}

fn million(config: &Config) {
    let n = config.timers;
    println!(
        "{n} timers, {WORKERS} workers: per timer, set then cancelled, and set then fired \
         (all due at one instant; fire = from that instant to the last one handled); \
         heap bytes per pending timer"
    );
    println!("| side | set | cancel | fire | bytes per pending timer |");
    println!("|---|---|---|---|---|");
    type Measure = fn(usize) -> PerTimer;
    let runs: [(&str, Measure); 3] = [
        (
            "ours, from steps (1 000 processes x set_timer_at / cancel_timer)",
            ours_from_steps,
        ),
        (
            "ours, from outside (scheduler.post_after / cancel_timer, one target)",
            ours_from_outside,
        ),
        (
            "tokio (1 000 tasks x boxed sleep_until, polled once / dropped)",
            tokio_from_tasks,
        ),
    ];
    for (side, run) in runs {
        let r = run(n);
        println!(
            "| {side} | {:.0?} | {:.0?} | {:.0?} | {:.0} |",
            r.set, r.cancel, r.fire, r.bytes
        );
    }
}
