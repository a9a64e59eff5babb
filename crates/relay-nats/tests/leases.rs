//! Cluster names with leases, over a real `nats-server` with JetStream: a
//! name whose node stops renewing lapses within its lease with nobody else
//! watching, its old holder learns it lost it, and a false alarm never
//! makes two holders.

mod support;

use std::time::{Duration, Instant};

use relay_nats::{ClusterNameError, ClusterNames};
use sched::prelude::*;
use support::*;

const WAIT: Duration = Duration::from_secs(30);

/// Waits for cancel.
struct Idle;
impl Process for Idle {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        if events.any(|e| matches!(e, Event::Cancel)) {
            out.finish(());
        }
        Ok(())
    }
}

#[test]
fn a_name_lapses_within_its_lease_when_its_node_stops_renewing() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let lease = Duration::from_millis(1500);
    let proxy = FaultyProxy::start(server.port);
    let (two, t2) = node_configured(&proxy.url(), 2, |c| c.name_lease(lease));
    let names_two = ClusterNames::new(&two, t2.clone()).unwrap();
    let held = two.spawn(Idle).unwrap().pid();
    names_two.register("lonely", held).unwrap();
    // Renewed: still there after several leases.
    std::thread::sleep(lease * 3);
    assert_eq!(names_two.whereis("lonely").unwrap(), Some(held));

    // Node 2 can no longer reach the server; no other node is up.
    proxy.stall(Duration::from_secs(3600));
    let cut_off = Instant::now();
    // A node started afterwards, that never heard of node 2, finds the
    // name free once the lease has lapsed.
    let (three, t3) = node_configured(&server.url(), 3, |c| c.name_lease(lease));
    let names_three = ClusterNames::new(&three, t3.clone()).unwrap();
    let taker = three.spawn(Idle).unwrap().pid();
    wait_until("the name to lapse", WAIT, || {
        names_three.register("lonely", taker).is_ok()
    });
    let lapsed_after = cut_off.elapsed();
    // Within the lease, plus the renewal interval it may have just missed
    // and the server's own expiry sweep (and a loaded machine's slack).
    assert!(
        lapsed_after < lease * 2 + Duration::from_secs(3),
        "{lapsed_after:?}"
    );
    eprintln!("a name lapsed {lapsed_after:?} after its node was cut off (lease {lease:?})");

    // Node 2 is back: its next renewal finds the name taken, and it stops
    // holding it. One holder.
    proxy.stall(Duration::ZERO);
    wait_until("node 2 to learn it lost the name", WAIT, || {
        t2.stats().names_lost == 1
    });
    assert_eq!(names_three.whereis("lonely").unwrap(), Some(taker));
    wait_until("node 2 to see the new holder", WAIT, || {
        names_two.whereis("lonely").ok() == Some(Some(taker))
    });
    std::thread::sleep(lease);
    assert_eq!(names_three.whereis("lonely").unwrap(), Some(taker), "kept");
    assert_eq!(t3.stats().names_lost, 0);
    two.shutdown(Duration::from_millis(200));
    three.shutdown(Duration::from_millis(200));
}

#[test]
fn a_false_alarm_never_makes_two_holders() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let lease = Duration::from_secs(4);
    let proxy = FaultyProxy::start(server.port);
    // Node 1 gives up on a silent node after 600 ms.
    let (one, t1) = node_configured(&server.url(), 1, |c| {
        c.name_lease(lease)
            .failure_detector(Duration::from_millis(100), Duration::from_millis(600))
    });
    let (two, t2) = node_configured(&proxy.url(), 2, |c| {
        c.name_lease(lease)
            .failure_detector(Duration::from_millis(100), DOWN_AFTER)
    });
    let names_one = ClusterNames::new(&one, t1.clone()).unwrap();
    let names_two = ClusterNames::new(&two, t2.clone()).unwrap();
    let db = two.spawn(Idle).unwrap().pid();
    names_two.register("db", db).unwrap();
    wait_until("node 1 sees the name", WAIT, || {
        names_one.whereis("db").ok() == Some(Some(db))
    });

    // Node 2 goes silent for 2 s (under the lease): node 1 declares it
    // down, but may not take its name.
    proxy.stall(Duration::from_secs(2));
    wait_until("node 1 to declare node 2 down", WAIT, || {
        t1.stats().nodes_down >= 1
    });
    let usurper = one.spawn(Idle).unwrap().pid();
    assert_eq!(
        names_one.register("db", usurper),
        Err(ClusterNameError::Taken {
            name: "db".into(),
            by: db
        })
    );
    // Back: node 2 still holds it, renewed all along, and never lost it.
    wait_until("node 1 sees node 2's name again", WAIT, || {
        names_one.whereis("db").ok() == Some(Some(db))
    });
    std::thread::sleep(lease);
    assert_eq!(names_two.whereis("db").unwrap(), Some(db));
    assert_eq!(names_one.whereis("db").unwrap(), Some(db));
    assert_eq!(t2.stats().names_lost, 0);
    one.shutdown(Duration::from_millis(200));
    two.shutdown(Duration::from_millis(200));
}
