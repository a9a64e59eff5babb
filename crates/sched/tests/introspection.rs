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

/// Under churn (processes starting and ending on both workers while the
/// list is taken), every listing holds each stable process once, no PID
/// twice, and no process whose end was observed before the call.
#[test]
fn the_list_is_exact_under_churn() {
    use std::collections::HashSet;
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
    use std::sync::{Arc, Mutex};

    let scheduler = Arc::new(Scheduler::builder().workers(2).build());
    scheduler.start();
    let stable: Vec<Completion> = (0..100).map(|_| scheduler.spawn(Waits).unwrap()).collect();
    let stable_pids: HashSet<Pid> = stable.iter().map(Completion::pid).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let ended = Arc::new(Mutex::new(Vec::new()));
    let churn = {
        let (scheduler, stop, ended) = (scheduler.clone(), stop.clone(), ended.clone());
        std::thread::spawn(move || {
            while !stop.load(SeqCst) {
                let batch: Vec<Completion> =
                    (0..50).map(|_| scheduler.spawn(Waits).unwrap()).collect();
                for done in batch {
                    scheduler.post(done.pid(), ()).unwrap();
                    let pid = done.pid();
                    done.wait().unwrap();
                    ended.lock().unwrap().push(pid);
                }
            }
        })
    };
    for _ in 0..200 {
        let gone: HashSet<Pid> = ended.lock().unwrap().iter().copied().collect();
        let list = scheduler.processes();
        let pids: Vec<Pid> = list.iter().map(|p| p.pid).collect();
        let unique: HashSet<Pid> = pids.iter().copied().collect();
        assert_eq!(unique.len(), pids.len(), "a PID listed twice");
        assert!(pids.windows(2).all(|w| w[0] < w[1]), "sorted by PID");
        assert!(stable_pids.is_subset(&unique), "a stable process missing");
        assert!(unique.is_disjoint(&gone), "an ended process listed");
    }
    stop.store(true, SeqCst);
    churn.join().unwrap();
    for done in stable {
        scheduler.post(done.pid(), ()).unwrap();
        done.wait().unwrap();
    }
    assert!(scheduler.processes().is_empty());
    scheduler.shutdown(WAIT);
}

/// Links itself to `peer` and traps exits at start, then waits.
struct Linker {
    peer: Pid,
}

impl Process for Linker {
    fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        out.trap_exits(true);
        out.link(self.peer);
        Ok(())
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            if matches!(event, Event::Message(_) | Event::Cancel) {
                out.finish(());
            }
        }
        Ok(())
    }
}

#[test]
fn process_info_counts_monitors_and_links() {
    let scheduler = Scheduler::builder().workers(2).build();
    scheduler.start();
    let peer = scheduler.spawn(Waits).unwrap();
    let first = scheduler.monitor(peer.pid());
    let second = scheduler.monitor(peer.pid());
    let linker = scheduler.spawn(Linker { peer: peer.pid() }).unwrap();
    let deadline = std::time::Instant::now() + WAIT;
    let info = loop {
        let info = scheduler.process_info(peer.pid()).unwrap();
        if info.links > 0 {
            break info;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the link never showed"
        );
        std::thread::sleep(Duration::from_millis(1));
    };
    assert_eq!(info.monitored_by, 2);
    assert_eq!(info.links, 1);
    assert!(!info.traps_exits);
    let other = scheduler.process_info(linker.pid()).unwrap();
    assert_eq!(other.links, 1);
    assert!(other.traps_exits);
    assert_eq!(other.monitored_by, 0);
    drop(first);
    assert_eq!(scheduler.process_info(peer.pid()).unwrap().monitored_by, 1);
    drop(second);
    // The list says the same.
    let listed = scheduler.processes();
    let peer_info = listed.iter().find(|p| p.pid == peer.pid()).unwrap();
    assert_eq!(peer_info.monitored_by, 0);
    assert_eq!(peer_info.links, 1);
    scheduler.post(linker.pid(), ()).unwrap();
    linker.wait().unwrap();
    scheduler.post(peer.pid(), ()).unwrap();
    peer.wait().unwrap();
    scheduler.shutdown(WAIT);
}
