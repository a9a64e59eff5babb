//! A supervision tree: a top supervisor (one-for-one) over a pool
//! supervisor (one-for-all) and a registered cache. Workers crash at
//! random; supervisors restart them; the restart intensity bounds how hard
//! they try. Prints what happened and checks that nothing was left behind.
//!
//! `cargo run -p sched --example supervisor`

use sched::prelude::*;
use sched::supervisor::{SupervisorReport, WhichChildren};
use sched::Strategy;
use std::time::Duration;

/// Does a little work every millisecond and crashes after `lifetime`
/// ticks (a permanent worker: it is always restarted).
struct Worker {
    ticks: u32,
    lifetime: u32,
}

impl Process for Worker {
    type Done = u32;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        if self.ticks == 0 {
            out.set_timer(Duration::from_millis(1), Tag(0));
        }
        for event in events {
            match event {
                Event::Timer { .. } => {
                    self.ticks += 1;
                    if self.ticks >= self.lifetime {
                        return Err(format!("worker gave up after {} ticks", self.ticks).into());
                    }
                    out.set_timer(Duration::from_millis(1), Tag(0));
                }
                Event::Cancel => out.finish(self.ticks),
                _ => {}
            }
        }
        Ok(())
    }
}

/// A cache that never crashes by itself; found by name.
struct Cache;

impl Process for Cache {
    type Done = ();
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            match event {
                Event::Request(request) => request.reply("cached value"),
                Event::Cancel => out.finish(()),
                _ => {}
            }
        }
        Ok(())
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let scheduler = Scheduler::builder().workers(2).build();
    scheduler.start();

    let pool = Supervisor::builder()
        .strategy(Strategy::OneForAll)
        .intensity(50, Duration::from_secs(1))
        .child(ChildSpec::new("worker-a", || Worker {
            ticks: 0,
            lifetime: 20,
        }))
        .child(ChildSpec::new("worker-b", || Worker {
            ticks: 0,
            lifetime: 35,
        }));
    let top = Supervisor::builder()
        .strategy(Strategy::OneForOne)
        .child(ChildSpec::new("pool", move || pool.build()).restart(Restart::Permanent))
        .child(ChildSpec::new("cache", || Cache).register_as("cache"))
        .build();
    let handle = scheduler.spawn(top)?;

    // Let the workers crash and come back for a while.
    std::thread::sleep(Duration::from_millis(300));
    let cache = scheduler
        .context()
        .whereis("cache")
        .ok_or("the cache is registered")?;
    let answer = scheduler
        .ask(cache, Box::new("key") as Payload)?
        .wait_timeout(Duration::from_secs(5))?;
    println!("cache answered: {:?}", answer.downcast_ref::<&str>());

    let pool_pid = {
        let mut reply = scheduler.ask(handle.pid(), WhichChildren)?;
        let report: SupervisorReport = reply.wait_timeout(Duration::from_secs(5))?;
        report
            .child("pool")
            .and_then(|c| c.pid)
            .ok_or("the pool runs")?
    };
    let mut reply = scheduler.ask(pool_pid, WhichChildren)?;
    let pool_report: SupervisorReport = reply.wait_timeout(Duration::from_secs(5))?;
    println!(
        "the pool restarted its workers {} times in 300 ms",
        pool_report.total_restarts()
    );
    assert!(
        pool_report.total_restarts() >= 5,
        "the workers crashed and came back"
    );

    let report = scheduler.shutdown(Duration::from_secs(5));
    println!(
        "shutdown: {} ended gracefully, {} forced",
        report.ended_gracefully, report.forced
    );
    assert_eq!(report.forced, 0);
    let top_report = handle.wait()?;
    println!("top supervisor restarts: {}", top_report.total_restarts());
    assert_eq!(scheduler.stats().live_processes, 0);
    Ok(())
}
