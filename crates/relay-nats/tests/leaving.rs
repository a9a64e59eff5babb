//! A node that leaves while another floods it: every frame the sender
//! published is delivered, dead-lettered or counted by the leaving node,
//! exactly, because it reads on until the sender answered its goodbye.

mod support;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use relay_nats::TransportStats;
use sched::message::SendErrorKind;
use sched::prelude::*;
use support::*;

const WAIT: Duration = Duration::from_secs(30);

/// Counts the messages it reads.
struct Count(Arc<AtomicU64>);

impl sched::Process for Count {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            if let Event::Message(_) = event {
                self.0.fetch_add(1, Relaxed);
            }
        }
        Ok(())
    }
}

/// What the receiver accounted for: every frame it was sent is one of
/// these, once.
fn accounted(s: &TransportStats) -> u64 {
    s.delivered + s.dead_letters + s.lost + s.fenced
}

/// Node 1 sends to a process of node 2 as fast as its backlog takes the
/// messages, one in ten to a process that never existed, while node 2's
/// transport closes (its scheduler runs on). Node 1 stops at the first
/// refusal that is not a full backlog (node 2 left). What node 1
/// published is exactly what node 2 delivered, dead-lettered or counted;
/// what it accepted and did not publish is counted `abandoned`. Five
/// rounds: without the farewells, the frames published between node 2's
/// last read and node 1's hearing the goodbye (dozens at this rate) were
/// counted nowhere.
#[test]
fn a_leaving_node_accounts_for_every_frame_published_to_it() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    for round in 0..5 {
        let (one, t1) = node(&server, 1);
        let (two, t2) = node(&server, 2);
        let read = Arc::new(AtomicU64::new(0));
        let to = two.spawn(Count(Arc::clone(&read))).unwrap().pid();
        let nobody = Pid::new(2, 1_000_000);
        wait_until("node 1 to reach node 2", WAIT, || {
            let _ = one.send(to, Seq { from: 0, n: 0 });
            std::thread::sleep(Duration::from_millis(20));
            read.load(Relaxed) > 0
        });
        let stop = AtomicBool::new(false);
        let accepted = std::thread::scope(|s| {
            let sender = s.spawn(|| {
                let mut accepted = 0u64;
                let mut n = 0u64;
                while !stop.load(Relaxed) {
                    n += 1;
                    let target = if n.is_multiple_of(10) { nobody } else { to };
                    match one.send(target, Seq { from: 1, n }) {
                        Ok(()) => accepted += 1,
                        Err(e) if e.kind() == SendErrorKind::Full => {
                            std::thread::sleep(Duration::from_micros(100))
                        }
                        Err(_) => break,
                    }
                }
                accepted
            });
            std::thread::sleep(Duration::from_millis(300));
            t2.close();
            std::thread::sleep(Duration::from_millis(500));
            stop.store(true, Relaxed);
            sender.join().unwrap()
        });
        wait_until("node 1 to account for every send", WAIT, || {
            let s = t1.stats();
            // The probes are published too.
            s.published + s.abandoned + s.publish_failed >= accepted
        });
        std::thread::sleep(Duration::from_millis(100));
        let (s1, s2) = (t1.stats(), t2.stats());
        eprintln!(
            "round {round}: {accepted} accepted, {} published, {} abandoned; node 2: {} \
             delivered, {} dead letters, {} lost, {} fenced",
            s1.published, s1.abandoned, s2.delivered, s2.dead_letters, s2.lost, s2.fenced
        );
        assert_eq!(s1.publish_failed, 0, "{s1:?}");
        assert_eq!(
            accounted(&s2),
            s1.published,
            "round {round}: published by node 1 = delivered + dead letters + lost + fenced on \
             node 2: {s1:?} {s2:?}"
        );
        assert!(s2.dead_letters > 0, "{s2:?}");
        one.shutdown(Duration::from_millis(200));
        two.shutdown(Duration::from_millis(200));
    }
}
