//! `process_info` and `processes` agree, name registered names, and
//! forget ended processes.

use std::time::Duration;

use sched::prelude::*;

const WAIT: Duration = Duration::from_secs(10);

/// Waits; finishes on any message.
struct Waits;

impl Process for Waits {
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            if matches!(event, Event::Message(_) | Event::Cancel) {
                out.done(Box::new(()));
            }
        }
        Ok(())
    }
}

#[test]
fn one_process_info_matches_the_list_and_ends_with_the_process() {
    let scheduler = Scheduler::builder().workers(2).build();
    scheduler.start();
    let handles: Vec<Completion> = (0..3).map(|_| scheduler.spawn(Waits).unwrap()).collect();
    let named = handles[1].pid();
    scheduler.register_name("middle", named).unwrap();
    scheduler.register_name("also-middle", named).unwrap();

    let list = scheduler.processes();
    assert_eq!(list.len(), 3);
    for handle in &handles {
        let one = scheduler.process_info(handle.pid()).expect("live");
        let listed = list.iter().find(|p| p.pid == handle.pid()).expect("listed");
        assert_eq!(
            (one.pid, one.names.clone()),
            (listed.pid, listed.names.clone())
        );
    }
    let mut names: Vec<String> = scheduler
        .process_info(named)
        .unwrap()
        .names
        .iter()
        .map(|n| n.to_string())
        .collect();
    names.sort();
    assert_eq!(names, ["also-middle", "middle"]);

    scheduler.post(named, "finish").unwrap();
    let mut handles = handles;
    handles.remove(1).wait().unwrap();
    assert!(
        scheduler.process_info(named).is_none(),
        "an ended process is gone"
    );
    assert_eq!(scheduler.processes().len(), 2);
    scheduler.shutdown(WAIT);
}
