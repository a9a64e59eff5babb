//! The feeder thread: sends, from outside the scheduler, the messages
//! waiting processes asked for and nobody else sent, plus stray messages
//! to random PIDs.

use std::sync::atomic::Ordering::SeqCst;
use std::thread;
use std::time::Duration;

use sched::message::SendErrorKind;
use sched::prelude::*;
use sched::Package;

use crate::process::Msg;
use crate::rng::Rng;
use crate::shared::Shared;

/// The PID the feeder sends from (no process has it).
const FEEDER: Pid = Pid::new(1, 0);

/// What the feeder sent.
#[derive(Debug, Default)]
pub(crate) struct FeederLog {
    pub(crate) sent: Vec<u64>,
    pub(crate) sent_solicited: u64,
    pub(crate) refused: Vec<(u64, SendErrorKind)>,
    /// Sends whose error did not hand back the message sent.
    pub(crate) violations: Vec<String>,
}

/// Feeds messages until `shared.stop` is set.
pub(crate) fn feed(scheduler: &Scheduler, shared: &Shared, mut rng: Rng) -> FeederLog {
    let mut log = FeederLog::default();
    loop {
        let stopping = shared.stop.load(SeqCst);
        for to in shared.feeder_tokens() {
            send(scheduler, shared, &mut log, to, true);
        }
        if rng.chance(1, 3) {
            let to = shared.stray_target(&mut rng);
            send(scheduler, shared, &mut log, to, false);
        }
        if stopping {
            return log;
        }
        if rng.chance(1, 4) {
            thread::yield_now();
        } else {
            thread::sleep(Duration::from_micros(rng.range(20, 200)));
        }
    }
}

fn send(scheduler: &Scheduler, shared: &Shared, log: &mut FeederLog, to: Pid, solicited: bool) {
    let id = shared.next_message_id();
    let msg = Msg::new(id, to, solicited);
    match scheduler.context().forward(Package::new(FEEDER, to, msg)) {
        Ok(()) => {
            log.sent.push(id);
            log.sent_solicited += u64::from(solicited);
        }
        Err(e) => {
            let kind = e.kind();
            if e.target() != to {
                log.violations.push(format!(
                    "send of message {id} to {to} failed naming {}",
                    e.target()
                ));
            }
            let back = e.into_package().payload::<Msg>().map(|m| m.id);
            if back != Some(id) {
                log.violations.push(format!(
                    "send of message {id} failed ({kind}) and handed back {back:?}"
                ));
            }
            log.refused.push((id, kind));
            if solicited && kind == SendErrorKind::Full {
                // Still wanted: a later pass (or a step) sends it again.
                shared.ask(to, 1);
            }
        }
    }
}
