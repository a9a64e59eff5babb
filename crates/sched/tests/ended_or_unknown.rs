//! A PID whose process ended is told apart from one that never existed:
//! sends, asks, delayed sends, `terminate`, `cancel`, `upgrade`,
//! `register_name` and `pid_status` each say which, the same way, where the
//! scheduler knows (PIDs it handed out).

use std::time::Duration;

use sched::actor::{NameError, PidStatus, Question};
use sched::message::SendErrorKind;
use sched::prelude::*;
use sched::process::{TerminateError, UpgradeRequestError};
use sched::After;

const WAIT: Duration = Duration::from_secs(10);

/// Finishes at its first step.
struct Quick;

impl Process for Quick {
    type Done = Payload;
    fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        out.finish(());
        Ok(())
    }
}

/// Waits for a message and finishes with it.
struct Waiter;

impl Process for Waiter {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            if let Event::Message(package) = event {
                out.finish(package.into_payload());
            }
        }
        Ok(())
    }
}

struct Ping;

impl Question for Ping {
    type Answer = ();
}

/// Every way of reaching `pid` fails with `ended` (or its error's form).
fn every_door_says(scheduler: &Scheduler, pid: Pid, ended: bool) {
    let (kind, status) = if ended {
        (SendErrorKind::Ended, PidStatus::Ended)
    } else {
        (SendErrorKind::UnknownTarget, PidStatus::Unknown)
    };
    assert_eq!(scheduler.context().pid_status(pid), status, "{pid}");
    let refused = scheduler.send(pid, 1u8).unwrap_err();
    assert_eq!(refused.kind(), kind, "post to {pid}");
    assert_eq!(refused.into_package().downcast::<u8>().ok(), Some(1));
    assert_eq!(
        scheduler
            .ask(pid, Box::new(2u8) as Payload)
            .unwrap_err()
            .kind(),
        kind,
        "ask {pid}"
    );
    assert_eq!(
        scheduler.ask(pid, Ping).unwrap_err().kind(),
        kind,
        "query {pid}"
    );
    assert_eq!(
        scheduler
            .send(After(Duration::from_millis(1), pid), 3u8)
            .unwrap_err()
            .kind(),
        kind,
        "send_after to {pid}"
    );
    let terminated = scheduler.terminate(pid).unwrap_err();
    let cancelled = scheduler.context().cancel(pid).unwrap_err();
    let upgraded = scheduler
        .context()
        .upgrade(pid, Quick, "run", ())
        .unwrap_err();
    let named = scheduler.context().register_name("door", pid).unwrap_err();
    if ended {
        assert_eq!(terminated, TerminateError::Ended(pid));
        assert_eq!(cancelled, TerminateError::Ended(pid));
        assert!(matches!(upgraded, UpgradeRequestError::Ended(p) if p == pid));
        assert_eq!(named, NameError::Ended(pid));
    } else {
        assert_eq!(terminated, TerminateError::NotFound(pid));
        assert_eq!(cancelled, TerminateError::NotFound(pid));
        assert!(matches!(upgraded, UpgradeRequestError::NoProcess(p) if p == pid));
        assert_eq!(named, NameError::NoProcess(pid));
    }
    // A monitor and a link cannot tell: both say `NoProcess`, as a
    // reason for an end rather than an error (as Erlang's `noproc`).
    let down = scheduler
        .context()
        .monitor(pid)
        .wait_timeout(WAIT)
        .expect("told at once");
    assert_eq!(down.reason, ExitReason::NoProcess, "monitor {pid}");
    assert!(
        scheduler.context().process_info(pid).is_none(),
        "process_info {pid}"
    );
}

#[test]
fn an_ended_process_is_not_one_that_never_existed() {
    let scheduler = Scheduler::builder().workers(2).build();
    scheduler.start();

    let quick = scheduler.spawn(Quick).unwrap();
    let ended = quick.pid();
    quick.wait().unwrap();
    every_door_says(&scheduler, ended, true);

    // Never handed out: an index nobody used, a later generation of a
    // used slot, another node's PID, the outside.
    let later_generation = Pid::new(ended.node(), ended.id() + (1 << 33));
    for never in [
        Pid::local(999_999),
        later_generation,
        Pid::new(7, ended.id()),
    ] {
        every_door_says(&scheduler, never, false);
    }

    // Reserved and not submitted yet: not ended.
    let reserved = scheduler.context().allocate_pid().unwrap();
    assert_eq!(scheduler.context().pid_status(reserved), PidStatus::Unknown);
    scheduler.shutdown(WAIT);
}

#[test]
fn a_reused_slot_keeps_its_old_pids_ended() {
    let scheduler = Scheduler::builder().workers(1).build();
    scheduler.start();
    // Many short processes, so that slots are reused by later ones.
    let mut ended = Vec::new();
    for _ in 0..2_000 {
        let done = scheduler.spawn(Quick).unwrap();
        ended.push(done.pid());
        done.wait().unwrap();
    }
    let live = scheduler.spawn(Waiter).unwrap();
    assert_eq!(scheduler.context().pid_status(live.pid()), PidStatus::Live);
    assert!(
        ended.iter().any(|pid| pid.id() >> 32 != 0),
        "some slot was reused (a later generation was handed out)"
    );
    for &pid in &ended {
        assert_eq!(
            scheduler.context().pid_status(pid),
            PidStatus::Ended,
            "{pid}"
        );
        assert_eq!(
            scheduler.send(pid, ()).unwrap_err().kind(),
            SendErrorKind::Ended
        );
    }
    scheduler.send(live.pid(), "still here").unwrap();
    assert!(live.wait().is_ok());
    scheduler.shutdown(WAIT);
}

#[test]
fn a_pid_a_caller_chose_leaves_no_trace_when_its_process_ends() {
    let scheduler = Scheduler::builder().workers(1).build();
    scheduler.start();
    let chosen = Pid::local(1 << 40);
    let done = scheduler
        .spawn(Spawn::new(Quick).method("run").at(chosen))
        .unwrap();
    done.wait().unwrap();
    // What the documentation says: a chosen PID is not remembered.
    assert_eq!(scheduler.context().pid_status(chosen), PidStatus::Unknown);
    assert_eq!(
        scheduler.send(chosen, ()).unwrap_err().kind(),
        SendErrorKind::UnknownTarget
    );
    scheduler.shutdown(WAIT);
}
