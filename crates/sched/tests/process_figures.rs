//! What introspection reports of each process beyond its state: mailbox
//! depth, pending timers, time since its last step, type name, long
//! steps and the figures it published. With the default `introspection`
//! feature (CI runs these with every feature on).

use std::sync::mpsc;
use std::time::{Duration, Instant};

use sched::prelude::*;
use sched::process::ProcessState;

const WAIT: Duration = Duration::from_secs(10);

fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !check() {
        assert!(Instant::now() < deadline, "never: {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Blocks the first step that reads a message until told, so messages
/// pile up behind it; then counts what it reads. It says when it has
/// taken that first message: its very first step may run before anything
/// was posted, so "a step is running" alone does not mean it.
struct Gate {
    took: Option<mpsc::Sender<()>>,
    open: Option<mpsc::Receiver<()>>,
    read: usize,
}

impl Process for Gate {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        self.read += events.count();
        if self.read > 0 {
            if let (Some(took), Some(open)) = (self.took.take(), self.open.take()) {
                took.send(())?;
                open.recv()?;
            }
        }
        out.publish("read", self.read as i64);
        Ok(())
    }
}

#[test]
fn the_mailbox_depth_counts_what_no_step_took_yet() {
    let scheduler = Scheduler::builder()
        .workers(1)
        .count_mailboxes(true)
        .long_step_threshold(None)
        .build();
    scheduler.start();
    let (open, gate) = mpsc::channel();
    let (took, taken) = mpsc::channel();
    let pid = scheduler
        .spawn(Gate {
            took: Some(took),
            open: Some(gate),
            read: 0,
        })
        .unwrap()
        .pid();
    scheduler.send(pid, 0u32).unwrap();
    // A step took the first message and now waits on the gate.
    taken
        .recv_timeout(WAIT)
        .expect("a step took the first message");
    assert_eq!(
        scheduler.context().process_info(pid).unwrap().state,
        ProcessState::Running
    );
    for i in 1..=5u32 {
        scheduler.send(pid, i).unwrap();
    }
    assert_eq!(
        scheduler.context().process_info(pid).unwrap().mailbox_depth,
        Some(5)
    );
    let listed = scheduler.processes();
    assert_eq!(listed[0].mailbox_depth, Some(5));
    open.send(()).unwrap();
    eventually("the five were read", || {
        scheduler.context().process_info(pid).unwrap().published == [("read", 6)]
    });
    assert_eq!(
        scheduler.context().process_info(pid).unwrap().mailbox_depth,
        Some(0)
    );
    scheduler.shutdown(Duration::from_millis(50));
}

/// Sets `n` long timers on its first step, cancels one on its second.
struct Timers {
    n: u32,
    ids: Vec<TimerId>,
}

impl Process for Timers {
    type Done = Payload;
    fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        if self.ids.is_empty() {
            for i in 0..self.n {
                self.ids
                    .push(out.set_timer(Duration::from_secs(3600), Tag(u64::from(i))));
            }
        } else if let Some(id) = self.ids.pop() {
            out.cancel_timer(id);
        }
        Ok(())
    }
}

#[test]
fn pending_timers_type_and_last_step_are_reported() {
    let scheduler = Scheduler::builder().workers(1).build();
    let pid = scheduler
        .spawn(Timers {
            n: 3,
            ids: Vec::new(),
        })
        .unwrap()
        .pid();
    let before = scheduler.context().process_info(pid).unwrap();
    assert_eq!(before.since_last_step, None, "not stepped yet");
    assert_eq!(before.type_name, None, "known from its first step");
    scheduler.start();
    eventually("its first step", || {
        scheduler
            .context()
            .process_info(pid)
            .unwrap()
            .pending_timers
            == 3
    });
    let info = scheduler.context().process_info(pid).unwrap();
    assert_eq!(info.mailbox_depth, None, "not counted unless asked");
    assert!(
        info.type_name.unwrap().ends_with("process_figures::Timers"),
        "{:?}",
        info.type_name
    );
    // It stepped once and has waited since: the time grows while it idles.
    std::thread::sleep(Duration::from_millis(60));
    let idle = scheduler
        .context()
        .process_info(pid)
        .unwrap()
        .since_last_step
        .unwrap();
    assert!(idle >= Duration::from_millis(40), "{idle:?}");
    assert!(idle < WAIT, "{idle:?}");
    scheduler.send(pid, ()).unwrap();
    eventually("one cancelled", || {
        scheduler
            .context()
            .process_info(pid)
            .unwrap()
            .pending_timers
            == 2
    });
    let after = scheduler
        .context()
        .process_info(pid)
        .unwrap()
        .since_last_step
        .unwrap();
    assert!(after < idle, "a new step: {after:?} after {idle:?}");
    scheduler.shutdown(Duration::from_millis(50));
}

/// Sleeps through its step when asked.
struct Sleeper;

impl Process for Sleeper {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            if let Event::Message(m) = event {
                if let Ok(ms) = m.into_payload().downcast::<u64>() {
                    std::thread::sleep(Duration::from_millis(*ms));
                }
            }
        }
        Ok(())
    }
}

#[test]
fn long_steps_are_counted_per_process() {
    let scheduler = Scheduler::builder()
        .workers(1)
        .long_step_threshold(Some(Duration::from_millis(20)))
        .build();
    scheduler.start();
    let slow = scheduler.spawn(Sleeper).unwrap().pid();
    let quick = scheduler.spawn(Sleeper).unwrap().pid();
    scheduler.send(slow, 150u64).unwrap();
    scheduler.send(quick, 0u64).unwrap();
    eventually("reported", || scheduler.stats().long_steps == 1);
    eventually("counted on the process", || {
        scheduler.context().process_info(slow).unwrap().long_steps == 1
    });
    assert_eq!(
        scheduler.context().process_info(quick).unwrap().long_steps,
        0
    );
    let listed = scheduler.processes();
    let slow_info = listed.iter().find(|p| p.pid == slow).unwrap();
    assert_eq!(slow_info.long_steps, 1);
    scheduler.shutdown(Duration::from_millis(50));
}

/// Finishes at once; its `type_name` panics.
struct Nameless;

impl Process for Nameless {
    type Done = Payload;
    fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        out.finish(7u32);
        Ok(())
    }
    fn type_name(&self) -> &'static str {
        panic!("no name")
    }
}

#[test]
fn a_panicking_type_name_leaves_the_process_unnamed_and_its_worker_alive() {
    let scheduler = Scheduler::builder().workers(1).build();
    scheduler.start();
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let done = scheduler.spawn(Nameless).unwrap().typed::<u32>().wait();
    std::panic::set_hook(hook);
    assert_eq!(done.unwrap(), 7);
    // The worker still runs processes, and names those it can.
    let pid = scheduler
        .spawn(Timers {
            n: 1,
            ids: Vec::new(),
        })
        .unwrap()
        .pid();
    eventually("named", || {
        scheduler
            .context()
            .process_info(pid)
            .unwrap()
            .type_name
            .is_some()
    });
    scheduler.shutdown(Duration::from_millis(50));
}
