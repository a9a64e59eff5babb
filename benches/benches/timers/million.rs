//! A million timers: the cost of setting, cancelling and firing each, and
//! the heap bytes per pending timer.

use super::*;
use sched::After;

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
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            match event {
                Event::Message(package) => match package.downcast::<Order>() {
                    Ok(Order::Set(n, at)) => {
                        for _ in 0..n {
                            self.ids.push(out.set_timer(at, Tag(0)));
                        }
                        self.set.fetch_add(1, Ordering::Release);
                    }
                    Ok(Order::Cancel) => {
                        for id in self.ids.drain(..) {
                            assert!(out.cancel_timer(id), "pending until cancelled");
                        }
                        out.finish(());
                    }
                    Err(_) => {} // the warm-up message
                },
                Event::Timer { .. } => {
                    self.fired += 1;
                    if self.fired == self.ids.len() {
                        out.finish(());
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
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            match event {
                Event::Message(_) => self.got += 1,
                Event::Cancel => out.finish(()),
                _ => {}
            }
        }
        if self.got == self.expected {
            out.finish(());
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
                let done = scheduler.spawn(owner).expect("spawned");
                // A first message, so each mailbox's first block is not
                // counted as timer memory.
                scheduler.send(done.pid(), ()).expect("alive");
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
            scheduler.send(*pid, Order::Set(each, at)).expect("alive");
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
                scheduler.send(*pid, Order::Cancel).expect("alive");
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

/// Ours, from outside: `send(After(..))` and `cancel_timer` on the scheduler.
fn ours_from_outside(n: usize) -> PerTimer {
    let mut result = PerTimer::default();
    for fire in [false, true] {
        let scheduler = scheduler();
        let sink = scheduler
            .spawn(Sink {
                expected: if fire { n } else { usize::MAX },
                got: 0,
            })
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
            ids.push(scheduler.send(After(delay, target), ()).expect("alive"));
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
                assert!(
                    scheduler.context().cancel_timer(id),
                    "pending until cancelled"
                );
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

pub(crate) fn million(config: &Config) {
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
            "ours, from steps (1 000 processes x set_timer(instant) / cancel_timer)",
            ours_from_steps,
        ),
        (
            "ours, from outside (scheduler.send(After) / cancel_timer, one target)",
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
