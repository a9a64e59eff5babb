//! Models of the link protocol (`record/links.rs`): a link call racing the
//! peer's end sends the exit signal exactly once, whether the link is new
//! or repeats one already made; an unlink racing the end stops every
//! signal not yet acted on.

use loom::thread;
use relay::Pid;

use super::harness::Inert;
use crate::contract::down::ExitReason;
use crate::record::links;
use crate::record::RecordRef;
use crate::sync::Arc;

fn record(id: u64) -> RecordRef {
    RecordRef::new(Pid::local(id), Inert)
}

/// `me` links `peer` while `peer` ends with an error; returns the signals
/// `me` got (from the link call and from the end).
fn link_races_end(me: &RecordRef, peer: &RecordRef) -> Vec<ExitReason> {
    let ender = {
        let peer = peer.clone();
        thread::spawn(move || {
            let reason = ExitReason::Error;
            let related = peer.relations.end(reason).expect("peer has relations");
            let told: Vec<Pid> = links::still_linked(&peer, related.links)
                .map(|linked| linked.pid)
                .collect();
            told.into_iter().map(|_| reason).collect::<Vec<_>>()
        })
    };
    let mut got: Vec<ExitReason> = links::link(me, peer).into_iter().collect();
    got.extend(ender.join().unwrap());
    got
}

/// A first link racing the end: the end's reason, once.
#[test]
fn a_new_link_racing_the_end_signals_once() {
    loom::model(|| {
        let (me, peer) = (record(1), record(2));
        // The peer has relations of its own (as any process that has
        // linked or been monitored), so its end takes a list.
        peer.relations.with_live(|_| ()).unwrap();
        let got = link_races_end(&me, &peer);
        assert_eq!(got, [ExitReason::Error], "one signal with the real reason");
    });
}

/// A second link to a process already linked, racing its end: the end's
/// reason exactly once; a `NoProcess` besides only when the second link
/// came after the end had told the first.
#[test]
fn a_repeated_link_racing_the_end_signals_the_end_once() {
    loom::model(|| {
        let (me, peer) = (record(1), record(2));
        assert_eq!(links::link(&me, &peer), None, "both live: no signal");
        let got = link_races_end(&me, &peer);
        let real = got.iter().filter(|r| **r == ExitReason::Error).count();
        assert_eq!(real, 1, "the real reason once: {got:?}");
        assert!(
            got.iter()
                .all(|r| matches!(r, ExitReason::Error | ExitReason::NoProcess)),
            "{got:?}"
        );
        // Whoever sent it removed the entry: nothing is left to leak.
        assert_eq!(me.relations.with_existing(|r| r.links.len()), Some(0));
    });
}

/// An unlink racing the end: at most one signal, and none once the unlink
/// removed its entry before the end got to it.
#[test]
fn an_unlink_racing_the_end_signals_at_most_once() {
    loom::model(|| {
        let (me, peer) = (record(1), record(2));
        assert_eq!(links::link(&me, &peer), None);
        let ender = {
            let peer = peer.clone();
            thread::spawn(move || {
                let related = peer.relations.end(ExitReason::Error).unwrap();
                links::still_linked(&peer, related.links).count()
            })
        };
        let unlinked = me.relations.remove_link(&peer);
        peer.relations.remove_link(&me);
        let signals = ender.join().unwrap();
        assert_eq!(signals + usize::from(unlinked), 1, "the entry went once");
    });
}

/// An unlink racing the peer's end, through the engine's own functions:
/// the end closes the peer's relations, then (as `Links::end` does)
/// acts on each signal it owes inside `end_signal`; the unlinker calls
/// `links::unlink`, which finds the peer in its own list (no table lookup:
/// the ending peer may have left the table already). No signal may be
/// acted on after `unlink` returned.
#[test]
fn no_exit_signal_is_acted_on_after_unlink_returns() {
    use crate::sync::AtomicBool;
    use std::sync::atomic::Ordering::SeqCst;

    loom::model(|| {
        let (me, peer) = (record(1), record(2));
        assert_eq!(links::link(&me, &peer), None);
        let returned = Arc::new(AtomicBool::new(false));
        let ender = {
            let (peer, returned) = (peer.clone(), returned.clone());
            thread::spawn(move || {
                let related = peer.relations.end(ExitReason::Error).unwrap();
                let mut acted = 0;
                for linked in related.links {
                    let signalled = links::end_signal(&peer, &linked, |_| {
                        assert!(
                            !returned.load(SeqCst),
                            "an exit signal acted on after unlink returned"
                        );
                    });
                    acted += usize::from(signalled.is_some());
                }
                acted
            })
        };
        links::unlink(&me, peer.pid);
        returned.store(true, SeqCst);
        let acted = ender.join().unwrap();
        assert!(acted <= 1);
        assert_eq!(me.relations.with_existing(|r| r.links.len()), Some(0));
    });
}
