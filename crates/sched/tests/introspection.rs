//! `process_info` and `processes` agree, name registered names, and
//! forget ended processes.

use std::time::Duration;

use sched::prelude::*;

const WAIT: Duration = Duration::from_secs(10);

/// Waits; finishes on any message.
struct Waits;

impl Process for Waits {
    type Done = Payload;
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
fn one_process_info_matches_the_list_and_ends_with_the_process() {
    let scheduler = Scheduler::builder().workers(2).build();
    scheduler.start();
    let handles: Vec<Completion> = (0..3).map(|_| scheduler.spawn(Waits).unwrap()).collect();
    let named = handles[1].pid();
    scheduler.context().register_name("middle", named).unwrap();
    scheduler
        .context()
        .register_name("also-middle", named)
        .unwrap();

    let list = scheduler.processes();
    assert_eq!(list.len(), 3);
    for handle in &handles {
        let one = scheduler
            .context()
            .process_info(handle.pid())
            .expect("live");
        let listed = list.iter().find(|p| p.pid == handle.pid()).expect("listed");
        assert_eq!(
            (one.pid, one.names.clone()),
            (listed.pid, listed.names.clone())
        );
    }
    let mut names: Vec<String> = scheduler
        .context()
        .process_info(named)
        .unwrap()
        .names
        .iter()
        .map(|n| n.to_string())
        .collect();
    names.sort();
    assert_eq!(names, ["also-middle", "middle"]);

    scheduler.send(named, "finish").unwrap();
    let mut handles = handles;
    handles.remove(1).wait().unwrap();
    assert!(
        scheduler.context().process_info(named).is_none(),
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
                    scheduler.send(done.pid(), ()).unwrap();
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
        scheduler.send(done.pid(), ()).unwrap();
        done.wait().unwrap();
    }
    assert!(scheduler.processes().is_empty());
    scheduler.shutdown(WAIT);
}

/// At the process limit, with the oldest processes (low slots of the
/// table, which a walk reads first) ending and new ones taking their place
/// (in fresh slots, read last) on two threads while the list is taken, no
/// listing holds more processes than can be live at once, nor a PID twice.
#[test]
fn a_listing_never_holds_more_processes_than_the_limit() {
    use std::collections::{HashSet, VecDeque};
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
    use std::sync::{Arc, Mutex};
    use std::time::Instant;

    const LIMIT: usize = 2_000;
    let scheduler = Arc::new(Scheduler::builder().workers(2).max_processes(LIMIT).build());
    scheduler.start();
    let live: VecDeque<Completion> = (0..LIMIT)
        .map(|_| scheduler.spawn(Waits).unwrap())
        .collect();
    let live = Arc::new(Mutex::new(live));
    let stop = Arc::new(AtomicBool::new(false));
    let churners: Vec<_> = (0..2)
        .map(|_| {
            let (scheduler, stop, live) = (scheduler.clone(), stop.clone(), live.clone());
            std::thread::spawn(move || {
                let mut replaced = 0u64;
                while !stop.load(SeqCst) {
                    let oldest = live.lock().unwrap().pop_front().expect("one per slot");
                    scheduler.send(oldest.pid(), ()).unwrap();
                    let new = loop {
                        match scheduler.spawn(Waits) {
                            Ok(new) => break new,
                            Err(sched::process::SubmitError::TooManyProcesses { .. }) => {
                                std::thread::yield_now()
                            }
                            Err(e) => panic!("{e}"),
                        }
                    };
                    live.lock().unwrap().push_back(new);
                    replaced += 1;
                }
                replaced
            })
        })
        .collect();
    let deadline = Instant::now() + Duration::from_millis(1_000);
    let mut walks = 0;
    while walks < 200 || Instant::now() < deadline {
        let list = scheduler.processes();
        assert!(
            list.len() <= LIMIT,
            "walk {walks}: {} listed, at most {LIMIT} can be live",
            list.len()
        );
        let unique: HashSet<Pid> = list.iter().map(|p| p.pid).collect();
        assert_eq!(unique.len(), list.len(), "a PID listed twice");
        walks += 1;
    }
    stop.store(true, SeqCst);
    let replaced: u64 = churners.into_iter().map(|c| c.join().unwrap()).sum();
    assert!(replaced > 50, "the churn ran ({replaced} replaced)");
    let live = std::mem::take(&mut *live.lock().unwrap());
    for done in live {
        scheduler.send(done.pid(), ()).unwrap();
        done.wait().unwrap();
    }
    scheduler.shutdown(WAIT);
}

/// Spins for about `spin` on every step, and asks to run again.
struct Busy {
    spin: Duration,
}

impl Process for Busy {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            if matches!(event, Event::Cancel) {
                out.finish(());
                return Ok(());
            }
        }
        let until = std::time::Instant::now() + self.spin;
        while std::time::Instant::now() < until {
            std::hint::spin_loop();
        }
        out.continue_();
        Ok(())
    }
}

/// Processes stepping all the time (and a watcher ticking the coarse
/// clock every 2 ms): a step stamped after the reader read its clock reads
/// as "just now", never as the clock's wrap (about 49.7 days) ago.
#[test]
fn a_busy_process_is_never_reported_silent_for_longer_than_the_engine_ran() {
    use std::time::Instant;

    // Before the engine's clock starts: no age it reports can be longer
    // than the time since, whatever the load.
    let began = Instant::now();
    let scheduler = Scheduler::builder()
        .workers(2)
        .long_step_threshold(Some(Duration::from_millis(2)))
        .build();
    scheduler.start();
    let busy: Vec<Completion> = (0..64)
        .map(|_| {
            scheduler
                .spawn(Busy {
                    spin: Duration::from_micros(300),
                })
                .unwrap()
        })
        .collect();
    let deadline = Instant::now() + Duration::from_millis(800);
    let (mut read, mut ever_stamped) = (0, 0);
    while read < 200 || Instant::now() < deadline {
        let list = scheduler.processes();
        // Read after the call: its clock reading came before.
        let bound = began.elapsed() + Duration::from_millis(1);
        let mut stamped = 0;
        for info in list {
            // `None` only before a process's first step.
            if let Some(since) = info.since_last_step {
                assert!(since <= bound, "{}: silent for {since:?}", info.pid);
                stamped += 1;
            }
        }
        let one = busy[read % busy.len()].pid();
        let info = scheduler.context().process_info(one);
        let bound = began.elapsed() + Duration::from_millis(1);
        if let Some(since) = info.and_then(|i| i.since_last_step) {
            assert!(since <= bound, "{one}: silent for {since:?}");
        }
        ever_stamped += stamped;
        read += 1;
    }
    assert!(
        ever_stamped > 1_000,
        "the processes stepped ({ever_stamped} stamps read)"
    );
    for done in &busy {
        scheduler.context().cancel(done.pid()).unwrap();
    }
    for done in busy {
        done.wait().unwrap();
    }
    scheduler.shutdown(WAIT);
}

/// Links itself to `peer` and traps exits at start, then waits.
struct Linker {
    peer: Pid,
}

impl Process for Linker {
    type Done = Payload;
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
    let first = scheduler.context().monitor(peer.pid());
    let second = scheduler.context().monitor(peer.pid());
    let linker = scheduler.spawn(Linker { peer: peer.pid() }).unwrap();
    let deadline = std::time::Instant::now() + WAIT;
    let info = loop {
        let info = scheduler.context().process_info(peer.pid()).unwrap();
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
    let other = scheduler.context().process_info(linker.pid()).unwrap();
    assert_eq!(other.links, 1);
    assert!(other.traps_exits);
    assert_eq!(other.monitored_by, 0);
    drop(first);
    assert_eq!(
        scheduler
            .context()
            .process_info(peer.pid())
            .unwrap()
            .monitored_by,
        1
    );
    drop(second);
    // The list says the same.
    let listed = scheduler.processes();
    let peer_info = listed.iter().find(|p| p.pid == peer.pid()).unwrap();
    assert_eq!(peer_info.monitored_by, 0);
    assert_eq!(peer_info.links, 1);
    scheduler.send(linker.pid(), ()).unwrap();
    linker.wait().unwrap();
    scheduler.send(peer.pid(), ()).unwrap();
    peer.wait().unwrap();
    scheduler.shutdown(WAIT);
}
