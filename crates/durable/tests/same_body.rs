//! One process body, compiled as a plain process and, with serde derives
//! and a durable declaration, as a durable one: the `body!` macro pastes
//! the same text into both impls, so the two cannot drift apart. It
//! starts a timer, reads typed messages, sends to a peer, cancels its
//! timer and finishes; both run here, with the same messages, and end
//! with the same results.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// What the counter is told (serde for the durable one; the plain one
/// ignores the derives).
#[derive(Debug, Clone, Serialize, Deserialize)]
enum Count {
    Add(u64),
    Stop,
}

/// The counter's body: the same text in both impls.
macro_rules! counter_body {
    () => {
        fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
            // A deadline: finish with what it has if not stopped in an hour.
            self.deadline = Some(out.set_timer(Duration::from_secs(3600), Tag(1)));
            Ok(())
        }

        fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
            for event in events.typed::<Self>() {
                match event {
                    Event::Message(Count::Add(n)) => {
                        self.total += n;
                        out.send(self.peer(), self.total)?;
                    }
                    Event::Message(Count::Stop) => {
                        if let Some(deadline) = self.deadline.take() {
                            out.cancel_timer(deadline);
                        }
                        out.finish(self.total);
                    }
                    Event::Timer { .. } => out.finish(self.total),
                    _ => {}
                }
            }
            Ok(())
        }
    };
}

/// The collector's body: keeps each running total, finishes after three.
macro_rules! collector_body {
    () => {
        fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
            for event in events.typed::<Self>() {
                if let Event::Message(total) = event {
                    self.seen.push(total);
                    if self.seen.len() == 3 {
                        out.finish(self.seen.clone());
                    }
                }
            }
            Ok(())
        }
    };
}

/// The plain declarations.
mod plain {
    use super::*;
    use sched::prelude::*;

    pub(crate) struct Counter {
        pub(crate) total: u64,
        pub(crate) deadline: Option<TimerId>,
        pub(crate) collector: Addr<u64>,
    }

    impl Counter {
        fn peer(&self) -> Addr<u64> {
            self.collector
        }
    }

    impl Accepts for Counter {
        type Message = Count;
    }

    impl Process for Counter {
        type Done = u64;
        counter_body!();
    }

    #[derive(Default)]
    pub(crate) struct Collector {
        pub(crate) seen: Vec<u64>,
    }

    impl Accepts for Collector {
        type Message = u64;
    }

    impl Process for Collector {
        type Done = Vec<u64>;
        collector_body!();
    }
}

/// The durable declarations: a kind, arguments, `create`.
mod durable {
    use super::*;
    use sched_durable::prelude::*;

    pub(crate) struct Counter {
        total: u64,
        deadline: Option<TimerId>,
        collector: String,
    }

    impl Counter {
        fn peer(&self) -> Key<Collector> {
            Key::new(self.collector.as_str())
        }
    }

    impl Durable for Counter {
        const KIND: &'static str = "same-body-counter";
        type Args = String;
        type Message = Count;
        type Done = u64;
        fn create(collector: String) -> Self {
            Counter {
                total: 0,
                deadline: None,
                collector,
            }
        }
        counter_body!();
    }

    pub(crate) struct Collector {
        seen: Vec<u64>,
    }

    impl Durable for Collector {
        const KIND: &'static str = "same-body-collector";
        type Args = ();
        type Message = u64;
        type Done = Vec<u64>;
        fn create((): ()) -> Self {
            Collector { seen: Vec::new() }
        }
        collector_body!();
    }
}

const TOLD: [Count; 4] = [Count::Add(1), Count::Add(2), Count::Add(3), Count::Stop];
const WAIT: Duration = Duration::from_secs(10);

#[test]
fn the_same_body_runs_as_a_plain_process() {
    use sched::prelude::*;

    let scheduler = Scheduler::builder().workers(2).build();
    scheduler.start();
    let mut collector = scheduler
        .spawn(plain::Collector::default())
        .expect("spawned");
    let mut counter = scheduler
        .spawn(plain::Counter {
            total: 0,
            deadline: None,
            collector: collector.addr::<plain::Collector>(),
        })
        .expect("spawned");
    let to = counter.addr::<plain::Counter>();
    for count in TOLD {
        scheduler.send(to, count).expect("sent");
    }
    assert_eq!(counter.wait_timeout(WAIT).expect("the counter ends"), 6);
    assert_eq!(
        collector.wait_timeout(WAIT).expect("the collector ends"),
        [1, 3, 6]
    );
}

#[test]
fn the_same_body_runs_as_a_durable_process_and_survives_a_restart() {
    use sched_durable::prelude::*;

    let dir = tempfile::tempdir().expect("a directory");
    let path = dir.path().join("same-body.redb");
    let start = |path: &std::path::Path| {
        let durability = Durability::open(RedbStore::create(path).expect("the store"));
        durability
            .register::<durable::Counter>()
            .register::<durable::Collector>();
        let scheduler = durability.install(Scheduler::builder().workers(2)).build();
        scheduler.start();
        (durability, scheduler)
    };
    // The first node: both spawned, the counter told half of it.
    {
        let (durability, scheduler) = start(&path);
        durability.recover(&scheduler).expect("nothing to recover");
        durability
            .spawn::<durable::Collector>(&scheduler, "collector", ())
            .expect("spawned");
        durability
            .spawn::<durable::Counter>(&scheduler, "counter", "collector".into())
            .expect("spawned");
        for count in &TOLD[..2] {
            durability
                .send::<durable::Counter>(&scheduler, "counter", count)
                .expect("sent")
                .wait_timeout(WAIT)
                .expect("journaled");
        }
        scheduler.shutdown(Duration::from_secs(1));
    }
    // A restart: both resumed from their journals, the rest told.
    let (durability, scheduler) = start(&path);
    let recovery = durability.recover(&scheduler).expect("recovered");
    let mut resumed = recovery.resumed;
    assert_eq!(resumed.len(), 2, "both resumed");
    for count in &TOLD[2..] {
        durability
            .send::<durable::Counter>(&scheduler, "counter", count)
            .expect("sent")
            .wait_timeout(WAIT)
            .expect("journaled");
    }
    let (mut counter, mut collector) = (None, None);
    for spawned in resumed.drain(..) {
        match spawned.key() {
            "counter" => counter = Some(spawned.of::<durable::Counter>().expect("a counter")),
            _ => collector = Some(spawned.of::<durable::Collector>().expect("a collector")),
        }
    }
    assert_eq!(
        counter.expect("resumed").wait_timeout(WAIT).expect("ends"),
        6
    );
    assert_eq!(
        collector
            .expect("resumed")
            .wait_timeout(WAIT)
            .expect("ends"),
        [1, 3, 6]
    );
}
