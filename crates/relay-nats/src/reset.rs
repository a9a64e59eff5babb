//! Symmetric loss: when one node ends its relations with another, the
//! other ends its relations with it too, before traffic between them
//! resumes.
//!
//! A transport *loses* a node when it can no longer vouch for what passed
//! between them: its failure detector declared the node down, frames from
//! it went missing (a gap), or this node's own connection to the server
//! dropped. Losing tells the local engine, which ends every monitor, link
//! and ask with that node's processes (`ExitReason::NodeDown`,
//! `AskError::NodeDown`). The other node may have noticed nothing (a
//! false alarm here, a 50 ms blip there): left alone, its engine would keep
//! watches and links whose other half is gone, and its monitors would
//! never fire. Erlang avoids this by tearing the connection down on both
//! sides; over NATS there is no connection between two nodes, so the
//! transports say it:
//!
//! ```text
//!  A (loses B)                         B
//!  ── B is *fenced* (episode e):
//!     sends to B refused (LinkError::Resetting),
//!     frames from B dropped (counted in `fenced`)
//!  ── engine ends relations with B (what
//!     that makes A's processes send to B
//!     is refused by the fence)
//!  ── Reset(e) ───────────────────────▶ ends its relations with A, once per
//!     (again every heartbeat while      episode of A's (a repeated Reset(e)
//!      B is heard and still fenced)     is only acknowledged again)
//!                                      ◀── Acknowledged(e) (a frame in B's
//!  ── B is no longer fenced:               numbered stream to A, after
//!     traffic resumes                      every frame B queued before it)
//! ```
//!
//! Both control frames travel on the receiving node's own subject, like
//! every frame (not numbered: a lost one is repeated, and is no lost
//! message), so each is read in order with the frames its sender published
//! before it. The acknowledgement is queued after
//! B's engine has ended its relations (that happens on the calling
//! thread), so what A accepts after it was sent after the sweep, and every
//! signal A drops while B is fenced was sent before it: nothing that was
//! swept on one side survives on the other.
//!
//! The episode number keeps both ends exact. B sweeps once per episode:
//! a Reset repeated because the acknowledgement crossed it must not end
//! relations B set up, and A accepted, after the first one. A lifts the
//! fence only on the acknowledgement of the current episode: one that was
//! on its way from an earlier loss must not open a later fence. If both
//! sides lose each other at once, each fences the other, and each
//! acknowledges the other's Reset without sweeping again (it swept when it
//! fenced, and has accepted nothing from the other since).
//!
//! A node that restarted or said goodbye is not fenced: its old run has no
//! relations left to end, and its new run starts with none.
//!
//! What this costs: while a node is fenced, messages between the two are
//! refused on the sending side (the sender gets them back) or dropped and
//! counted on the receiving side; the fence lasts one round trip after
//! the two hear each other again.

use crate::shared::{Command, Inner};
use crate::stats::Counters;
use crate::wire::Control;

impl Inner {
    /// This transport can no longer vouch for `node`: its engine ends every
    /// relation with that node's processes, the node is fenced until it
    /// acknowledges, and it is told to do the same.
    pub(crate) fn lose(&self, node: u32) {
        // Fenced before the engine hears of it: what the sweep makes the
        // local processes send to the node (a held request dropped by a
        // process its link ended answers "no reply") is refused, instead
        // of reaching the node ahead of the Reset and answering its ask
        // before the Reset ends it with NodeDown.
        let episode = self.members.fence(node);
        self.tell_lost(node);
        if let Some(episode) = episode {
            self.send_control(node, Control::Reset(episode));
        }
    }

    /// [`lose`](Inner::lose) every node this transport knows: this node
    /// lost the server, and what passed meanwhile is unknown.
    pub(crate) fn lose_all(&self) {
        for node in self.members.known() {
            self.lose(node);
        }
    }

    /// Tells again every fenced node that is heard from that it must
    /// reset: a Reset sent while it was unreachable, or lost, is not the
    /// end of it. Called every heartbeat.
    pub(crate) fn repeat_resets(&self) {
        for (node, episode) in self.members.fenced_and_heard() {
            self.send_control(node, Control::Reset(episode));
        }
    }

    /// Acts on a control frame from `from`'s transport.
    pub(crate) fn on_control(&self, from: u32, control: Control) {
        match control {
            Control::Reset(episode) => {
                // Fenced here means this side swept `from` and has accepted
                // nothing from it since: sweeping again would end nothing
                // more. A repeated Reset of an episode already swept for
                // would end relations set up since, which `from` accepted.
                let first = self.members.reset_heard(from, episode);
                if first {
                    // Counted before the relations end: whoever sees them
                    // end sees the count.
                    Counters::add(&self.counters.resets, 1);
                }
                if first && !self.members.is_fenced(from) {
                    tracing::info!(
                        node = from,
                        "a node lost this one: ending the relations with it here too"
                    );
                    self.tell_lost(from);
                }
                self.send_control(from, Control::Acknowledged(episode));
            }
            Control::Acknowledged(episode) => {
                if self.members.unfence(from, episode) {
                    tracing::info!(
                        node = from,
                        "a lost node ended its relations with this one: traffic resumes"
                    );
                }
            }
            Control::Farewell(last) => self.farewell_heard(from, last),
        }
    }

    /// Queues a control frame for `node`, published in order with the
    /// frames queued before it.
    pub(crate) fn send_control(&self, node: u32, control: Control) {
        let Some(me) = self.engine.get().map(|attached| attached.0) else {
            return;
        };
        let frame = crate::wire::control(me, node, control.bytes());
        if let Some(commands) = self.commands.get() {
            let _ = commands.send(Command::Control { node, frame });
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, AtomicUsize};
    use std::sync::{Arc, Mutex, OnceLock, Weak};
    use std::time::{Duration, Instant};

    use relay::{NodeDown, Package, Receiver, SendError};

    use crate::error::LinkError;
    use crate::membership::{Kind, Members};
    use crate::shared::{Attached, Inner};
    use crate::stats::Counters;

    /// The engine, as far as the order matters: when it hears that a node
    /// is lost (the moment it would start ending relations, and its
    /// processes answering held asks of that node with "no reply"), it
    /// notes what a send to that node would meet.
    struct Probe {
        inner: OnceLock<Weak<Inner>>,
        met: Mutex<Vec<Option<LinkError>>>,
    }

    impl Receiver for Probe {
        fn send(&self, package: Package) -> Result<(), SendError> {
            if let Some(down) = package.payload::<NodeDown>() {
                let inner = self.inner.get().and_then(Weak::upgrade).expect("attached");
                let met = inner.members.unreachable(down.node);
                self.met.lock().unwrap().push(met);
            }
            Ok(())
        }
    }

    fn detached(probe: Arc<Probe>) -> Arc<Inner> {
        let inner = Arc::new(Inner {
            codec: crate::Codec::new(),
            prefix: "test".into(),
            counters: Counters::default(),
            members: Members::default(),
            heartbeat: Duration::from_millis(100),
            down_after: Duration::from_secs(1),
            connected: AtomicBool::new(true),
            pending: AtomicUsize::new(0),
            max_pending: 16,
            incarnation: 7,
            engine: OnceLock::new(),
            names: OnceLock::new(),
            names_bucket: None,
            name_lease: Duration::from_secs(1),
            held: Mutex::default(),
            lease_clocks: Mutex::default(),
            numbers: Mutex::default(),
            gaps: Mutex::default(),
            commands: OnceLock::new(),
            farewells: Mutex::default(),
            announced_at: OnceLock::new(),
        });
        assert!(probe.inner.set(Arc::downgrade(&inner)).is_ok(), "set once");
        let engine: Arc<dyn Receiver + Send + Sync> = probe;
        assert!(inner.engine.set(Attached(1, engine)).is_ok(), "set once");
        inner
    }

    /// Whatever the engine's sweep sends to a lost node is refused: the
    /// fence goes up before the engine hears of the loss (deterministic:
    /// the probe engine looks at once, from inside the telling).
    #[test]
    fn a_lost_node_is_fenced_before_the_engine_hears_of_the_loss() {
        let probe = Arc::new(Probe {
            inner: OnceLock::new(),
            met: Mutex::default(),
        });
        let inner = detached(probe.clone());
        let now = Instant::now();
        inner.members.hear(2, Kind::Up, 42, now);
        inner.members.hear(3, Kind::Up, 43, now);
        // This node lost the server: every node it knows, at once.
        inner.lose_all();
        // The failure detector's path: one node, still up to the members.
        inner.lose(2);
        let met = probe.met.lock().unwrap().clone();
        assert_eq!(met.len(), 3, "{met:?}");
        for met in met {
            assert!(
                matches!(met, Some(LinkError::Resetting(_))),
                "a send from the engine's sweep would be accepted: {met:?}"
            );
        }
    }
}
