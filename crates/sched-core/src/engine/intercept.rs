//! A simulation's hand in delivery: the one place messages, requests (the
//! questions of asks) and command completions pass on their way to a
//! process, where a simulation may hold one back (to deliver it later, out
//! of order with other senders'), lose it, or deliver a copy.
//!
//! A running engine has no interceptor: the check is one branch on a
//! field that is always `None`. The simulation (`runtime/simulation/`)
//! implements [`Intercept`]; what it holds it delivers later through
//! `Shared::release_message` and `Shared::release_completion`
//! (`routing.rs`), `Asks::release_request` (`ask.rs`) and
//! `Shared::release_cancel` (`monitors.rs`), which skip the interceptor.

use relay::{Package, Payload};

use crate::contract::command::Tag;
use crate::contract::event::CommandError;
use crate::contract::reply::Request;
use crate::record::RecordRef;

/// What a simulation does to events on their way to a process.
pub(crate) trait Intercept: Send + Sync + std::fmt::Debug {
    /// A message for `record`. `Some` delivers it now; `None` means the
    /// interceptor kept it (it delivers it later, or loses it). The
    /// sender's `send` succeeds either way, as a send over a network
    /// would.
    fn message(&self, record: &RecordRef, package: Package) -> Option<Package>;

    /// A request for `record`: `Some` delivers it now; `None` means the
    /// interceptor kept it (it delivers it later) or lost it (then the
    /// asker is never told: it learns by its timeout, as over a network).
    /// The asker's `ask` succeeds either way.
    fn request(&self, record: &RecordRef, request: Request) -> Option<Request>;

    /// A cancel for `record` (`Context::cancel`): `true` delivers it now;
    /// `false` means the interceptor kept it, to deliver after the
    /// messages and requests it holds for `record`. A cancel comes after
    /// every message sent to its process before it, as on a running
    /// engine (where it joins the mailbox behind them); the cancel does
    /// not say who sent it, so it waits for every sender's.
    fn cancel(&self, record: &RecordRef) -> bool;

    /// `pid`, of `level`, became ready: on worker `worker` (or, for
    /// `None`, in a global queue) behind `ahead` processes of its queue
    /// there (of its level's light queue, if `light`), with `share` how
    /// its lane's weight stands against the others' (`Groups::stretch`),
    /// which stretches the bound. Called
    /// again when it moves: displaced from the `next` slot to its queue,
    /// or taken from a global queue into a worker's. For the simulation's
    /// check of the scheduling bound (`runqueue/order.rs`); it cannot
    /// change where the process goes.
    fn ready(
        &self,
        pid: relay::Pid,
        level: crate::Priority,
        worker: Option<usize>,
        ahead: usize,
        share: crate::runqueue::order::Stretch,
        light: bool,
    );

    /// `pid` moved to the nursery of `worker` (`runqueue/local.rs`): it
    /// is stepped from there, or moved to the back of its level's queue,
    /// within `order::NURSERY_FLUSH_INTERVAL` ticks of that worker. For the
    /// same check as `ready`.
    fn nursery(
        &self,
        pid: relay::Pid,
        level: crate::Priority,
        worker: usize,
        share: crate::runqueue::order::Stretch,
    );

    /// A command's completion for `record`: `Some` delivers it now (the
    /// interceptor may have changed it), `None` means it was kept.
    fn completion(
        &self,
        record: &RecordRef,
        tag: Tag,
        result: Result<Payload, CommandError>,
    ) -> Option<Result<Payload, CommandError>>;
}
