//! The tooling: a journal exported as JSON and replayed offline, and the
//! `sched-journal` program on a real store.

mod support;

use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use sched_durable::prelude::*;
use sched_durable::{Inspection, RecordedInput};
use support::*;

#[test]
fn an_exported_journal_replays_offline_and_a_changed_step_is_caught() {
    let dir = tempfile::tempdir().unwrap();
    let durability = Durability::open(RedbStore::create(dir.path().join("j.redb")).unwrap());
    durability.register::<Tally>();
    let scheduler = scheduler(&durability, Arc::default());
    let tally = durability.spawn::<Tally>(&scheduler, "t", ()).unwrap();
    for n in [3u64, 4] {
        durability
            .send::<Tally>(&scheduler, "t", &n)
            .unwrap()
            .wait_timeout(WAIT)
            .unwrap();
    }
    durability.send::<Tally>(&scheduler, "t", &0).unwrap();
    assert_eq!(tally.wait().unwrap(), 7);
    let json = durability.inspect("t").unwrap().unwrap().to_json();
    scheduler.shutdown(Duration::from_secs(5));

    let journal = Inspection::from_json(&json).unwrap();
    let replay = journal.replay::<Tally>().unwrap();
    assert!(replay.ended);
    assert_eq!(replay.inputs, 4, "the start, 3, 4 and 0");

    /// The tally's code, changed: it finishes with twice the total.
    struct Doubled(u64);
    impl Durable for Doubled {
        const KIND: &'static str = "tally";
        type Args = ();
        type Message = u64;
        type Done = u64;
        fn create(_: ()) -> Self {
            Doubled(0)
        }
        fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
            for event in events.typed::<Self>() {
                if let Event::Message(message) = event {
                    if message == 0 {
                        out.finish(2 * self.0);
                    } else {
                        self.0 += message;
                    }
                }
            }
            Ok(())
        }
    }
    match journal.replay::<Doubled>() {
        Err(DurableError::NonDeterminism {
            expected, found, ..
        }) => {
            assert_eq!(
                (expected.as_str(), found.as_str()),
                ("done with [07]", "done with [0e]")
            );
        }
        other => panic!("expected NonDeterminism, got {other:?}"),
    }
    let mut tampered = journal.clone();
    tampered.records[0].inputs = vec![RecordedInput::Timer(9)];
    assert!(
        tampered.replay::<Tally>().is_ok(),
        "a timer nobody set is skipped, as live"
    );
}

#[test]
fn sched_journal_lists_shows_exports_and_compacts_a_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.redb");
    {
        let durability = Durability::open(RedbStore::create(&path).unwrap());
        durability.register::<Tally>();
        let scheduler = scheduler(&durability, Arc::default());
        let a = durability.spawn::<Tally>(&scheduler, "a", ()).unwrap();
        durability
            .send::<Tally>(&scheduler, "a", &5)
            .unwrap()
            .wait_timeout(WAIT)
            .unwrap();
        durability.send::<Tally>(&scheduler, "a", &0).unwrap();
        assert_eq!(a.wait().unwrap(), 5);
        let b = durability.spawn::<Tally>(&scheduler, "b", ()).unwrap();
        b.durable().wait_timeout(WAIT).unwrap();
        scheduler.shutdown(Duration::from_secs(5));
    }
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_sched-journal"))
            .arg(&path)
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    assert_eq!(run(&["list"]), "a\ttally\tended\nb\ttally\trunning\n");
    let shown = run(&["show", "a"]);
    assert!(shown.starts_with("a (tally, ended, "), "{shown}");
    assert!(
        shown.contains("<- start") && shown.contains("<- message from outside"),
        "{shown}"
    );
    assert!(shown.contains("-> done"), "{shown}");
    let exported = Inspection::from_json(&run(&["export", "a"])).unwrap();
    assert!(exported.ended && exported.replay::<Tally>().unwrap().ended);
    assert_eq!(run(&["outbox"]), "");
    assert!(run(&["compact"]).starts_with("dropped "));

    let missing = Command::new(env!("CARGO_BIN_EXE_sched-journal"))
        .arg(&path)
        .args(["show", "nobody"])
        .output()
        .unwrap();
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no journal has key \"nobody\""));
}
