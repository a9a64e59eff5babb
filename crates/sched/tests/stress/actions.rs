//! What a stress process does to others when its script says so: send a
//! message, spawn a process.

use std::sync::Arc;

use sched::message::SendErrorKind;
use sched::prelude::*;

use crate::message::{defuse, Bomb};
use crate::process::{Msg, Observed, Stress};
use crate::script::Script;
use crate::shared::Tracked;

impl Stress {
    /// Sends one message: to a process that asked for one if any did,
    /// otherwise to a random PID.
    pub(crate) fn send(&mut self, out: &mut Output<'_>) {
        let (to, solicited) = match self.shared.take_token() {
            Some(pid) => (pid, true),
            None => (self.shared.stray_target(&mut self.rng), false),
        };
        let id = self.shared.next_message_id();
        let mut msg = Msg::new(id, to, solicited);
        // Now and then a payload whose drop panics: dead-lettered, it goes
        // off inside the scheduler.
        msg.bomb = Bomb::new(self.rng.chance(1, 8));
        let armed = msg.bomb.armed();
        if self.send_msg(out, msg) {
            self.log.bombs_sent += u64::from(armed);
        }
    }

    /// Sends `msg` at once to its `to`, logging it as sent or refused;
    /// returns whether `send` accepted it.
    pub(crate) fn send_msg(&mut self, out: &mut Output<'_>, msg: Msg) -> bool {
        let (id, to, solicited) = (msg.id, msg.to, msg.solicited);
        match out.send(to, msg) {
            Ok(()) => {
                self.log.sent.push(id);
                self.log.sent_solicited += u64::from(solicited);
                true
            }
            Err(e) => {
                let kind = e.kind();
                let back = defuse(e.into_package());
                if back != Some(id) {
                    self.violation(format!(
                        "send of message {id} failed ({kind}) and handed back {back:?}"
                    ));
                }
                self.log.refused.push((id, kind));
                if solicited && kind == SendErrorKind::Full {
                    // The receiver still waits for it: someone sends it later.
                    self.shared.ask(to, 1);
                }
                false
            }
        }
    }

    /// Spawns a child with a random script; the harness waits for it too.
    pub(crate) fn spawn(&mut self, out: &mut Output<'_>) {
        let depth = self.script.as_ref().map_or(0, |s| s.depth);
        let script = Script::random(&mut self.rng, depth + 1);
        let pid = match out.context().allocate_pid() {
            Ok(pid) => pid,
            Err(e) => return self.violation(format!("allocate_pid failed: {e}")),
        };
        let observed = Arc::new(Observed::default());
        let child = Stress::new(observed.clone(), self.shared.clone());
        match out.spawn(
            Spawn::new(child)
                .method("run")
                .input(script.clone())
                .at(pid),
        ) {
            Ok(completion) => {
                self.log.spawned += 1;
                if completion.pid() != pid {
                    self.violation(format!(
                        "spawned {pid}, the handle says {}",
                        completion.pid()
                    ));
                }
                let tracked = Tracked {
                    pid,
                    script,
                    observed,
                    completion,
                    parent: Some(self.pid),
                    outside: None,
                };
                self.shared.admit(tracked, &mut self.rng);
            }
            Err(e) => self.violation(format!("spawning {pid} from a step failed: {e}")),
        }
    }
}
