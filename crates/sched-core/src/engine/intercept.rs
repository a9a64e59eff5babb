//! A simulation's hand in delivery: the one place messages and command
//! completions pass on their way to a process, where a simulation may
//! hold one back (to deliver it later, out of order with other senders'),
//! lose it, or deliver a copy.
//!
//! A running engine has no interceptor: the check is one branch on a
//! field that is always `None`. The simulation (`runtime/simulation/`)
//! implements [`Intercept`]; what it holds it delivers later through
//! [`Shared::release_message`] and [`Shared::release_completion`], which
//! skip the interceptor.

use relay::{Package, Payload};

use super::shared::Shared;
use crate::contract::command::Tag;
use crate::contract::event::{CommandError, Event};
use crate::record::RecordRef;

/// What a simulation does to events on their way to a process.
pub(crate) trait Intercept: Send + Sync + std::fmt::Debug {
    /// A message for `record`. `Some` delivers it now; `None` means the
    /// interceptor kept it (it delivers it later, or loses it). The
    /// sender's `send` succeeds either way, as a send over a network
    /// would.
    fn message(&self, record: &RecordRef, package: Package) -> Option<Package>;

    /// A command's completion for `record`: `Some` delivers it now (the
    /// interceptor may have changed it), `None` means it was kept.
    fn completion(
        &self,
        record: &RecordRef,
        tag: Tag,
        result: Result<Payload, CommandError>,
    ) -> Option<Result<Payload, CommandError>>;
}

impl Shared {
    /// Delivers a message an interceptor held. If its process has ended
    /// meanwhile, the message is a dead letter (as any message that
    /// arrives too late).
    pub(crate) fn release_message(&self, record: &RecordRef, package: Package) {
        if let Err(error) = self.deliver_now(record, package) {
            let package = error.into_package();
            self.dead_letters(package.source(), vec![Event::Message(package)]);
        }
    }

    /// Delivers a completion an interceptor held. If its process has ended
    /// meanwhile, the completion is dropped (as a late completer's is).
    pub(crate) fn release_completion(
        &self,
        record: &RecordRef,
        tag: Tag,
        result: Result<Payload, CommandError>,
    ) {
        match record.deliver(Event::Completion { tag, result }) {
            Ok(wake) => self.after_wake(record, wake),
            Err(event) => {
                crate::panic_guard::drop_user_value(event, record.pid, "a late completion")
            }
        }
    }

    /// A message for `record`, through the interceptor if there is one.
    #[inline]
    pub(crate) fn intercept_message(
        &self,
        record: &RecordRef,
        package: Package,
    ) -> Option<Package> {
        match &self.intercept {
            None => Some(package),
            Some(intercept) => intercept.message(record, package),
        }
    }
}
