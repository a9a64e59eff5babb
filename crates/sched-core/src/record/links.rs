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
use crate::record::RecordRef;

/// Lists `me` and `peer` in each other's links. Returns the reason of the
/// exit signal this call must send to `me`, if the peer has ended and its
/// end does not cover this link.
pub(crate) fn link(me: &RecordRef, peer: &RecordRef) -> Option<ExitReason> {
    let Ok(newly) = me.related().add_link(peer) else {
        // `me` has ended: nothing to link.
        return None;
    };
    let Err(refused) = peer.related().add_link(me) else {
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
        // This call tells `me` the real end: noted at the peer, so that a
        // later link from `me` (say, a second `link` in the same step)
        // reports `NoProcess` and the real end is told once. Only `me`'s
        // owner links from `me`, one call at a time, so no other link of
        // `me` runs between the refusal and the note.
        peer.relations.note_signalled(me.pid);
        refused.reason
    };
    me.relations.remove_link(peer).then_some(reason)
}

/// Removes `me`'s links to the process under `pid`, both ways. Works from
/// `me`'s own list, which holds the peers' records, never through the
/// process table: a peer that is ending has left the table before its end
/// signals its links, and `me`'s entry is what that end would signal. Our
/// entry first: once it is gone, the peer's end no longer owes us a
/// signal; and the end removes our entry and acts on the signal under our
/// lock ([`end_signal`]), so no signal is acted on after this returns.
pub(crate) fn unlink(me: &RecordRef, pid: relay::Pid) {
    for peer in me.relations.remove_links_to(pid) {
        peer.relations.remove_link(me);
    }
}

/// `ended`'s end owes `linked` its exit signal if `linked` still lists it:
/// removes the entry and runs `act` (which queues the signal or flags the
/// kill) under `linked`'s lock, so an [`unlink`] by `linked` either came
/// first (no signal) or returns after the signal is acted on.
pub(crate) fn end_signal<R>(
    ended: &RecordRef,
    linked: &RecordRef,
    act: impl FnOnce(&mut crate::record::relations::Related) -> R,
) -> Option<R> {
    linked.relations.remove_link_then(ended, act)
}

/// Of the processes `ended`'s end took from its links, those still linked
/// to it (they did not unlink, and have not ended): each is owed the exit
/// signal. (The engine's end calls [`end_signal`] for each, acting on the
/// signal inside; the loom models count the signals through this.)
#[cfg(all(test, loom))]
pub(crate) fn still_linked(
    ended: &RecordRef,
    links: Vec<RecordRef>,
) -> impl Iterator<Item = RecordRef> + '_ {
    links
        .into_iter()
        .filter(move |linked| end_signal(ended, linked, |_| ()).is_some())
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::contract::output::{Events, Output};
    use crate::contract::process::Process;

    struct Idle;

    impl Process for Idle {
        type Done = relay::Payload;
        fn step(
            &mut self,
            _: &mut Events<'_>,
            _: &mut Output<'_>,
        ) -> Result<(), crate::contract::error::BoxError> {
            Ok(())
        }
    }

    /// The peer ended before either link: the first link tells the real
    /// end, and a second link from the same process (two `link` calls in
    /// one step racing the peer's end) reports `NoProcess`, so the real
    /// end reaches it once.
    #[test]
    fn a_second_link_to_a_process_that_ended_unlinked_reports_no_process() {
        let me = RecordRef::new(relay::Pid::local(1), Idle);
        let peer = RecordRef::new(relay::Pid::local(2), Idle);
        assert!(peer.relations.end(ExitReason::Error).is_none(), "no links");
        assert_eq!(link(&me, &peer), Some(ExitReason::Error));
        assert_eq!(link(&me, &peer), Some(ExitReason::NoProcess));
        // Another process linking later is still told the real end.
        let other = RecordRef::new(relay::Pid::local(3), Idle);
        assert_eq!(link(&other, &peer), Some(ExitReason::Error));
    }
}
