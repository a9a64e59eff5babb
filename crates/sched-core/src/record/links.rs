//! The link protocol between two records: which side sends the exit signal
//! a link stands for, so that it goes exactly once however a link races
//! the peer's end.
//!
//! Each side lists the other. The entry in the linker's list stands for
//! the one exit signal it may get from this link, and whoever removes that
//! entry sends the signal: the peer's end (for every process its end took
//! from its list), a link call that finds the peer already ended, or
//! nobody, when the linker unlinks first.

use crate::contract::down::ExitReason;
use crate::record::Record;
use crate::sync::Arc;

/// Lists `me` and `peer` in each other's links. Returns the reason of the
/// exit signal this call must send to `me`, if the peer has ended and its
/// end does not cover this link.
pub(crate) fn link(me: &Arc<Record>, peer: &Arc<Record>) -> Option<ExitReason> {
    let Ok(newly) = me.relations.add_link(peer) else {
        // `me` has ended: nothing to link.
        return None;
    };
    let Err(refused) = peer.relations.add_link(me) else {
        return None;
    };
    // The peer has ended. An entry listed before this call is the end's to
    // remove and signal; one that this call added is ours. A new link to a
    // process whose end already signalled `me` (for an earlier link)
    // reports `NoProcess`: its real end was told once.
    if refused.signalled && !newly {
        return None;
    }
    let reason = if refused.signalled {
        ExitReason::NoProcess
    } else {
        refused.reason
    };
    me.relations.remove_link(peer).then_some(reason)
}

/// Of the processes `ended`'s end took from its links, those still linked
/// to it (they did not unlink, and have not ended): each is owed the exit
/// signal. The engine's end does the same removal with
/// `Relations::remove_link_then`, acting on the signal under the linked
/// process's lock (so an `unlink` cannot return between the two); the
/// loom models check the removal protocol through this function.
#[cfg(all(test, loom))]
pub(crate) fn still_linked(
    ended: &Arc<Record>,
    links: Vec<Arc<Record>>,
) -> impl Iterator<Item = Arc<Record>> + '_ {
    links
        .into_iter()
        .filter(move |linked| linked.relations.remove_link_then(ended, |_| ()).is_some())
}
