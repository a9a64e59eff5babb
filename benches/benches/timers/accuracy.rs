//! Accuracy: how late a 50 ms timer fires, idle and beside busy
//! processes (tasks).

use super::*;

/// Sets a 50 ms timer in its first step and reports how late it fired.
struct Sampler {
    deadline: Option<Instant>,
    samples: mpsc::Sender<Duration>,
}

impl Process for Sampler {
    type Done = Payload;
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
                out.finish(());
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
    type Done = Payload;
    fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        if self.steps == 0 {
            self.started.fetch_add(1, Ordering::Release);
        }
        if self.stop.load(Ordering::Relaxed) {
            out.finish(self.steps);
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
            scheduler.spawn(process).expect("spawned")
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
        drop(scheduler.spawn(sampler).expect("spawned"));
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

pub(crate) fn accuracy(config: &Config) {
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
