//! The journal's figures over the real live endpoint.

mod support;

use std::sync::Arc;
use std::time::Duration;

use sched::live::{Client, Kind, Unit};
use sched_durable::prelude::*;
use support::*;

#[test]
fn the_journals_figures_are_served_beside_the_engines() {
    let dir = tempfile::tempdir().unwrap();
    let durability = Arc::new(Durability::open(
        RedbStore::create(dir.path().join("j.redb")).unwrap(),
    ));
    durability.register::<Tally>();
    let scheduler = Arc::new(scheduler(&durability, Arc::default()));
    let endpoint = sched::live::serve_with(
        Arc::clone(&scheduler),
        "127.0.0.1:0",
        sched_durable::live::figures(&durability),
    )
    .unwrap();
    let tally = durability.spawn::<Tally>(&scheduler, "t", ()).unwrap();
    durability
        .send::<Tally>(&*scheduler, "t", &2)
        .unwrap()
        .wait_timeout(WAIT)
        .unwrap();

    let mut client = Client::connect(endpoint.local_addr(), WAIT).unwrap();
    let snapshot = client.snapshot(10).unwrap();
    let figure = |name: &str| {
        snapshot
            .figures
            .iter()
            .find(|f| f.source == "journal" && f.name == name)
            .unwrap_or_else(|| panic!("no {name} in {:?}", snapshot.figures))
            .clone()
    };
    let stats = durability.stats();
    let records = figure("records");
    assert_eq!((records.kind, records.unit), (Kind::Counter, Unit::Count));
    assert!(records.value >= 2.0 && records.value <= stats.records as f64);
    assert_eq!(figure("running").value, 1.0);
    assert_eq!(figure("store size").unit, Unit::Bytes);
    assert!(figure("step to durable p99").value > 0.0);

    durability.send::<Tally>(&*scheduler, "t", &0).unwrap();
    assert_eq!(tally.wait().unwrap(), 2);
    scheduler.shutdown(Duration::from_secs(5));
    endpoint.stop();
}
