//! Wake latency: from `send` on an outside thread to the start of the
//! receiver's step (ours) or poll (tokio), or a plain thread's return from
//! a blocking receive. Measured twice: on an otherwise idle machine, and
//! with one CPU-bound thread (a busy loop) running beside, which competes
//! with the woken worker for a core.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use relay::Payload;
use sched_core::{BoxError, Event, Events, InitContext, InitError, Output, Process, Spawn};

use super::{engine, runtime, WORKERS};

const LATENCY_SAMPLES: usize = 1_000;
/// Pause between latency samples, long enough for workers to park.
const LATENCY_PAUSE: Duration = Duration::from_millis(2);

/// Reports, for every message, the time from its `Instant` to the start of
/// the step that receives it.
struct Echo {
    samples: mpsc::Sender<Duration>,
}

impl Process for Echo {
    type Done = Payload;
    fn init(&mut self, _: &InitContext, _: &str, _: Payload) -> Result<(), InitError> {
        Ok(())
    }
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        let now = Instant::now();
        for event in events {
            match event {
                Event::Message(package) => {
                    let sent = *package.payload::<Instant>().expect("an Instant");
                    let _ = self.samples.send(now - sent);
                }
                Event::Cancel => {
                    out.finish(());
                    return Ok(());
                }
                _ => {}
            }
        }
        out.idle();
        Ok(())
    }
    fn close(&mut self) {}
}

fn percentiles(mut samples: Vec<Duration>) -> (Duration, Duration) {
    samples.sort();
    let median = samples[samples.len() / 2];
    let p99 = samples[(samples.len() * 99 / 100).min(samples.len() - 1)];
    (median, p99)
}

/// A thread spinning on the CPU until dropped.
struct BusyLoop {
    stop: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<()>>,
}

impl BusyLoop {
    fn start() -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = thread::spawn(move || {
            let mut x = 0u64;
            while !flag.load(Ordering::Relaxed) {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
            }
        });
        BusyLoop {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for BusyLoop {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            thread.join().expect("busy loop");
        }
    }
}

/// Both variants: on an idle machine, then beside a busy loop.
pub(crate) fn wake_latency() {
    for busy in [false, true] {
        let _busy = busy.then(BusyLoop::start);
        let (ours, not_parked) = ours();
        let tokio = tokio();
        let plain = plain_thread();
        let beside = if busy {
            "beside one busy-loop thread"
        } else {
            "idle machine"
        };
        println!(
            "wake latency ({beside}), send -> start of the receiver's step/poll, \
             {LATENCY_SAMPLES} samples, {LATENCY_PAUSE:?} apart:"
        );
        let (om, op) = percentiles(ours);
        println!(
            "  ours (all workers parked; {not_parked} samples sent before both had parked): \
             median {om:?}, p99 {op:?}"
        );
        let (tm, tp) = percentiles(tokio);
        println!("  tokio mpsc:          median {tm:?}, p99 {tp:?}");
        let (m, p) = percentiles(plain);
        println!("  thread on std mpsc:  median {m:?}, p99 {p:?}");
        println!(
            "  ours / tokio:        median {:.2}, p99 {:.2}",
            om.as_secs_f64() / tm.as_secs_f64(),
            op.as_secs_f64() / tp.as_secs_f64()
        );
    }
}

fn ours() -> (Vec<Duration>, usize) {
    let engine = engine();
    let (tx, rx) = mpsc::channel();
    let target = engine.context().allocate_pid().expect("pid");
    drop(
        engine
            .context()
            .spawn(
                Spawn::new(Box::new(Echo { samples: tx }))
                    .method("run")
                    .at(target),
            )
            .expect("submitted"),
    );
    let mut samples = Vec::with_capacity(LATENCY_SAMPLES);
    let mut not_parked = 0;
    for _ in 0..LATENCY_SAMPLES {
        thread::sleep(LATENCY_PAUSE);
        let mut tries = 0;
        while engine.context().stats().parked_workers < WORKERS && tries < 100 {
            thread::sleep(Duration::from_micros(200));
            tries += 1;
        }
        if engine.context().stats().parked_workers < WORKERS {
            not_parked += 1;
        }
        engine
            .context()
            .send(target, Instant::now())
            .expect("target alive");
        samples.push(rx.recv().expect("a sample"));
    }
    engine.shutdown(Duration::from_secs(1));
    (samples, not_parked)
}

/// A task awaiting an unbounded tokio mpsc receiver.
fn tokio() -> Vec<Duration> {
    let rt = runtime();
    let (to_task, mut from_outside) = tokio::sync::mpsc::unbounded_channel::<Instant>();
    let (tx, rx) = mpsc::channel();
    rt.spawn(async move {
        while let Some(sent) = from_outside.recv().await {
            let _ = tx.send(sent.elapsed());
        }
    });
    let mut samples = Vec::with_capacity(LATENCY_SAMPLES);
    for _ in 0..LATENCY_SAMPLES {
        thread::sleep(LATENCY_PAUSE);
        to_task.send(Instant::now()).expect("task alive");
        samples.push(rx.recv().expect("a sample"));
    }
    drop(to_task);
    drop(rt);
    samples
}

/// A plain thread blocked on a std channel.
fn plain_thread() -> Vec<Duration> {
    let (to_thread, from_outside) = mpsc::channel::<Instant>();
    let (tx, rx) = mpsc::channel();
    let blocked = thread::spawn(move || {
        for sent in from_outside {
            let _ = tx.send(sent.elapsed());
        }
    });
    let mut samples = Vec::with_capacity(LATENCY_SAMPLES);
    for _ in 0..LATENCY_SAMPLES {
        thread::sleep(LATENCY_PAUSE);
        to_thread.send(Instant::now()).expect("thread alive");
        samples.push(rx.recv().expect("a sample"));
    }
    drop(to_thread);
    blocked.join().expect("thread");
    samples
}
