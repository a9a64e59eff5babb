//! Links: linked processes end together unless they trap exits.

use sched::prelude::*;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(10);

/// Ends the way its first message says; until then waits.
struct Obedient;

impl Process for Obedient {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            if let Event::Message(m) = event {
                match *m.payload::<&str>().unwrap_or(&"") {
                    "finish" => out.finish(()),
                    "fail" => return Err("asked to fail".into()),
                    _ => {}
                }
            }
        }
        Ok(())
    }
}

/// Links to `peers` on its first step (trapping exits if asked), then
/// records every exit signal; finishes on "finish" with what it saw, or
/// 50 ms after its `expect`-th signal.
struct Linker {
    peers: Vec<Pid>,
    trap: bool,
    unlink: Vec<Pid>,
    expect: usize,
    exits: Vec<(Pid, ExitReason)>,
    started: bool,
}

impl Linker {
    fn new(peers: &[Pid], trap: bool) -> Self {
        Linker {
            peers: peers.to_vec(),
            trap,
            unlink: Vec::new(),
            expect: usize::MAX,
            exits: Vec::new(),
            started: false,
        }
    }
}

impl Process for Linker {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        if !self.started {
            self.started = true;
            out.trap_exits(self.trap);
            for peer in &self.peers {
                out.link(*peer);
            }
            for peer in &self.unlink {
                out.unlink(*peer);
            }
            out.send(out.pid(), "linked")?;
        }
        for event in events {
            match event {
                Event::Exit { pid, reason, .. } => {
                    self.exits.push((pid, reason));
                    if self.exits.len() == self.expect {
                        out.set_timer(Duration::from_millis(50), Tag(0));
                    }
                }
                Event::Message(m) if m.payload::<&str>() == Some(&"finish") => {
                    out.finish(std::mem::take(&mut self.exits))
                }
                Event::Message(m) if m.payload::<&str>() == Some(&"fail") => {
                    return Err("asked to fail".into())
                }
                Event::Timer { .. } => out.finish(std::mem::take(&mut self.exits)),
                _ => {}
            }
        }
        Ok(())
    }
}

fn started() -> Scheduler {
    let scheduler = Scheduler::builder().workers(2).build();
    scheduler.start();
    scheduler
}

/// Spawns a linker and waits until it has linked (its "linked" message
/// to itself is read after the links are made).
fn linked(scheduler: &Scheduler, linker: Linker) -> sched::Completion {
    let handle = scheduler.spawn(linker).unwrap();
    let monitor_free_wait = std::time::Instant::now() + WAIT;
    while scheduler
        .processes()
        .iter()
        .find(|p| p.pid == handle.pid())
        .is_some_and(|p| p.steps == 0)
        && std::time::Instant::now() < monitor_free_wait
    {
        std::thread::sleep(Duration::from_millis(1));
    }
    handle
}

#[test]
fn an_abnormal_end_ends_the_linked_process_and_a_normal_one_does_not() {
    let scheduler = started();
    let crasher = scheduler.spawn(Obedient).unwrap().pid();
    let partner = linked(&scheduler, Linker::new(&[crasher], false));
    scheduler.send(crasher, "fail").unwrap();
    match partner.wait() {
        Err(ExitError::Linked { pid, reason }) => {
            assert_eq!((pid, reason), (crasher, ExitReason::Error))
        }
        other => panic!("expected Linked, got {other:?}"),
    }

    let finisher = scheduler.spawn(Obedient).unwrap().pid();
    let partner = linked(&scheduler, Linker::new(&[finisher], false));
    scheduler.send(finisher, "finish").unwrap();
    std::thread::sleep(Duration::from_millis(30));
    scheduler.send(partner.pid(), "finish").unwrap();
    let exits = partner.wait().expect("a normal end is ignored");
    assert!(exits
        .downcast_ref::<Vec<(Pid, ExitReason)>>()
        .unwrap()
        .is_empty());
}

#[test]
fn a_process_that_traps_exits_gets_every_end_as_an_event() {
    let scheduler = started();
    let a = scheduler.spawn(Obedient).unwrap().pid();
    let b = scheduler.spawn(Obedient).unwrap().pid();
    let nobody = Pid::local(424_242);
    let mut trapper = Linker::new(&[a, b, nobody], true);
    trapper.expect = 3;
    let trapper = linked(&scheduler, trapper);
    scheduler.send(a, "finish").unwrap();
    scheduler.send(b, "fail").unwrap();
    let exits = trapper.wait().unwrap();
    let mut exits = exits
        .downcast_ref::<Vec<(Pid, ExitReason)>>()
        .unwrap()
        .clone();
    exits.sort_by_key(|(pid, _)| *pid);
    let mut expected = vec![
        (a, ExitReason::Normal),
        (b, ExitReason::Error),
        (nobody, ExitReason::NoProcess),
    ];
    expected.sort_by_key(|(pid, _)| *pid);
    assert_eq!(exits, expected);
}

#[test]
fn an_unlinked_process_is_not_told() {
    let scheduler = started();
    let crasher = scheduler.spawn(Obedient).unwrap().pid();
    let mut linker = Linker::new(&[crasher], false);
    linker.unlink = vec![crasher];
    let linker = linked(&scheduler, linker);
    scheduler.send(crasher, "fail").unwrap();
    std::thread::sleep(Duration::from_millis(30));
    scheduler.send(linker.pid(), "finish").unwrap();
    assert!(linker.wait().is_ok());
}

#[test]
fn an_abnormal_end_cascades_along_a_chain() {
    let scheduler = started();
    let c = scheduler.spawn(Obedient).unwrap().pid();
    let b = linked(&scheduler, Linker::new(&[c], false));
    let a = linked(&scheduler, Linker::new(&[b.pid()], false));
    scheduler.send(c, "fail").unwrap();
    assert!(matches!(
        b.wait(),
        Err(ExitError::Linked {
            reason: ExitReason::Error,
            ..
        })
    ));
    assert!(matches!(
        a.wait(),
        Err(ExitError::Linked {
            reason: ExitReason::Linked,
            ..
        })
    ));
    assert_eq!(scheduler.stats().live_processes, 0);
}

#[test]
fn a_link_racing_the_peers_end_signals_exactly_once() {
    let scheduler = started();
    for _ in 0..100 {
        let peer = scheduler.spawn(Obedient).unwrap().pid();
        scheduler.send(peer, "fail").unwrap();
        let mut trapper = Linker::new(&[peer], true);
        trapper.expect = 1;
        let exits = scheduler.spawn(trapper).unwrap().wait().unwrap();
        let exits = exits.downcast_ref::<Vec<(Pid, ExitReason)>>().unwrap();
        assert_eq!(exits.len(), 1, "{exits:?}");
        assert!(matches!(
            exits[0].1,
            ExitReason::Error | ExitReason::NoProcess
        ));
    }
}

#[test]
fn linking_twice_then_the_peers_end_signals_once() {
    let scheduler = started();
    let peer = scheduler.spawn(Obedient).unwrap().pid();
    let mut trapper = Linker::new(&[peer, peer], true);
    trapper.expect = 1;
    let trapper = linked(&scheduler, trapper);
    scheduler.send(peer, "fail").unwrap();
    let exits = trapper.wait().unwrap();
    let exits = exits.downcast_ref::<Vec<(Pid, ExitReason)>>().unwrap();
    assert_eq!(exits, &[(peer, ExitReason::Error)]);
}

#[test]
fn a_repeated_link_racing_the_peers_end_tells_the_real_end_once() {
    let scheduler = started();
    for _ in 0..50 {
        let peer = scheduler.spawn(Obedient).unwrap().pid();
        scheduler.send(peer, "fail").unwrap();
        // Two links in one step, racing the end: the end's reason reaches
        // the trapper at most once; a second signal, if any, is a later
        // link finding the end already told (`NoProcess`).
        let mut trapper = Linker::new(&[peer, peer], true);
        trapper.expect = 1;
        let exits = scheduler.spawn(trapper).unwrap().wait().unwrap();
        let exits = exits.downcast_ref::<Vec<(Pid, ExitReason)>>().unwrap();
        let real = exits.iter().filter(|e| e.1 == ExitReason::Error).count();
        assert!(real <= 1, "{exits:?}");
        assert!((1..=2).contains(&exits.len()), "{exits:?}");
        assert!(
            exits
                .iter()
                .all(|e| matches!(e.1, ExitReason::Error | ExitReason::NoProcess)),
            "{exits:?}"
        );
    }
}
