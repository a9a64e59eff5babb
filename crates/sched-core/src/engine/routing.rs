//! Routing: delivering messages and kill requests to a process by PID
//! (or to the remote transport, for a PID of another node), and what
//! happens to events no step will read.

use std::sync::atomic::Ordering::Relaxed;

use relay::{Package, Pid, SendError, SendErrorKind};

use super::shared::Shared;
use crate::contract::event::Event;
use crate::panic_guard::drop_user_value;
use crate::record::Record;
use crate::runqueue::local::{self};
use crate::sync::Arc;

impl Shared {
    /// Counts the events a process never saw (cancel requests are not
    /// letters) and passes them to the dead-letter hook.
    pub(crate) fn dead_letters(&self, pid: Pid, events: Vec<Event>) {
        let mut n = 0u64;
        for mut event in events {
            if matches!(event, Event::Cancel) {
                continue;
            }
            if let Event::Request(request) = event {
                // No step read it: the question goes back to its asker,
                // who may safely ask again. Not a dead letter.
                match request.hand_back(pid) {
                    Ok(()) => continue,
                    Err(request) => event = Event::Request(request),
                }
            }
            if super::upgrade::UpgradeOrder::is_order(&event) {
                // Not a letter: an upgrade that never took over. Dropping
                // it closes the process it carries.
                drop(event);
                continue;
            }
            n += 1;
            if self.hooks.has_dead_letter_hook() {
                self.hooks.dead_letter(super::Context::of(self), pid, event);
            } else {
                // A message's payload is the user's: its `Drop` may panic.
                drop_user_value(event, pid, "a dead letter");
            }
        }
        if n > 0 {
            self.dead_letters.fetch_add(n, Relaxed);
            tracing::debug!(%pid, count = n, "dead letters");
        }
    }

    /// Delivers `package` to its target: a PID of another node goes to the
    /// remote transport when there is one (one comparison for a local
    /// send); any other to the local process.
    pub(crate) fn send(&self, package: Package) -> Result<(), SendError> {
        if package.target().node() != self.processes.node() {
            if let Some(remote) = &self.remote {
                return remote.send(package);
            }
        }
        self.send_local(package)
    }

    /// Delivers `package` to a process of this engine (what a package from
    /// another node comes in through: never sent out again).
    #[inline]
    pub(crate) fn send_local(&self, package: Package) -> Result<(), SendError> {
        let target = package.target();
        // A step on a worker first tries the record this worker resolved for
        // the PID last time, skipping the process table: a lookup there
        // locks the slot for a reference-count increment, two
        // read-modify-writes on a line the target's other senders share.
        // The cached record is used borrowed (no count taken either). A
        // cached record that refuses the message has ended; the table then
        // says whether the PID is gone or taken anew.
        let mut package = Some(package);
        let cached = local::with_local(self, |local| {
            local.with_cached_route(target, |record| {
                self.deliver_message(record, package.take().expect("taken once"))
            })
        })
        .flatten();
        match cached {
            Some(Err(error)) if error.kind() == SendErrorKind::Closed => {
                local::with_local(self, |local| local.forget_route(target));
                package = Some(error.into_package());
            }
            Some(result) => return result,
            None => {}
        }
        let package = package.expect("not taken unless delivered");
        match self.processes.get(target) {
            Some(record) => {
                let result = self.deliver_message(&record, package);
                if result.is_ok() {
                    local::with_local(self, |local| local.remember_route(&record));
                }
                result
            }
            None => Err(self.missing(package)),
        }
    }

    /// The refusal of `package`, whose target no process holds: `Closed`
    /// when the engine handed the PID out and its process has ended,
    /// `UnknownTarget` when it never did (or the PID was one a caller
    /// chose, which leaves no trace).
    pub(crate) fn missing(&self, package: Package) -> SendError {
        if self.processes.ended(package.target()) {
            SendError::closed(package)
        } else {
            SendError::unknown_target(package)
        }
    }

    /// Delivers a message to `record`, counting it against the mailbox bound
    /// if there is one, and wakes the process.
    pub(crate) fn deliver_message(
        &self,
        record: &Arc<Record>,
        package: Package,
    ) -> Result<(), SendError> {
        let bounded = self.mailbox_capacity != usize::MAX;
        if bounded {
            if !record.mailbox.reserve(self.mailbox_capacity) {
                return Err(SendError::full(package));
            }
        } else if self.counts_messages {
            record.mailbox.count();
        }
        match record.deliver(Event::Message(package)) {
            Ok(wake) => {
                self.after_wake(record, wake);
                Ok(())
            }
            Err(event) => {
                if self.counts_messages {
                    record.mailbox.release(1);
                }
                match event {
                    Event::Message(p) => Err(SendError::closed(p)),
                    _ => unreachable!("a message comes back as a message"),
                }
            }
        }
    }

    pub(super) fn kill(&self, pid: Pid, flag: u32) -> bool {
        let Some(record) = self.processes.get(pid) else {
            return false;
        };
        let wake = record.state.kill(flag);
        self.after_wake_owned(record, wake);
        true
    }
}
