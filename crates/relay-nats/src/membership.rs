//! Which nodes are up, which left, and which went silent: the failure
//! detector.
//!
//! Every transport listens on one cluster-wide subject (`<prefix>.nodes`)
//! where each node announces itself when it attaches, sends a heartbeat
//! every [`heartbeat`](crate::NatsConfig::failure_detector) while it runs,
//! and says goodbye when it closes. A node is then, to every other:
//! - **up** while it is heard from;
//! - **left** once it said goodbye: sends to it are refused
//!   ([`LinkError::NodeLeft`]);
//! - **down** once it has been silent for the detector's bound (it crashed,
//!   hangs, or cannot reach the server): sends to it are refused
//!   ([`LinkError::NodeDown`]) until it is heard from again.
//!
//! Every announcement carries the sender's incarnation (a number each run
//! of a transport draws). A node heard with a new incarnation restarted:
//! it is up again, and what still arrives from its old incarnation (a
//! heartbeat, a message frame) is stale, ignored and counted.
//!
//! Beside its state, a member may be *fenced*: this transport lost it and
//! waits for it to end its relations with this node in turn (see
//! `reset.rs`); meanwhile sends to it are refused
//! ([`LinkError::Resetting`]) and its frames are dropped.
//!
//! The bound is a trade-off: a node whose heartbeats stop for longer
//! (its transport's thread starved, or a partition between it and the
//! server) is declared down while it still runs, a false positive that
//! lasts until its next heartbeat arrives.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::error::LinkError;
use relay::Receipt;

/// What an announcement says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// The node attached.
    Up,
    /// The node says goodbye.
    Down,
    /// The node is alive.
    Beat,
    /// The node heard a goodbye and answers it (`farewell.rs`).
    Farewell,
}

/// An announcement: its kind (one byte), the node number and the sender's
/// incarnation.
pub(crate) fn announcement(node: u32, kind: Kind, incarnation: u64) -> Vec<u8> {
    let mut out = vec![match kind {
        Kind::Down => 0,
        Kind::Up => 1,
        Kind::Beat => 2,
        Kind::Farewell => 3,
    }];
    out.extend_from_slice(&node.to_be_bytes());
    out.extend_from_slice(&incarnation.to_be_bytes());
    out
}

/// A heartbeat that also confirms, for each sender this node hears, the
/// last number it saw from that sender's run: `(node, incarnation,
/// number)`, 20 bytes each after the announcement's 13.
pub(crate) fn beat(node: u32, incarnation: u64, confirmations: &[(u32, u64, u64)]) -> Vec<u8> {
    with_entries(announcement(node, Kind::Beat, incarnation), confirmations)
}

/// A goodbye that also says, for each node this run published to, the
/// last number it published there: `(node, this run's incarnation,
/// number)`, as a heartbeat's confirmations (`farewell.rs`).
pub(crate) fn goodbye(node: u32, incarnation: u64, sent: &[(u32, u64, u64)]) -> Vec<u8> {
    with_entries(announcement(node, Kind::Down, incarnation), sent)
}

/// An answer to the goodbye of the node `to`'s run `run`: the last frame
/// this node published there was `last` (`farewell.rs`).
pub(crate) fn farewell(node: u32, incarnation: u64, to: u32, run: u64, last: u64) -> Vec<u8> {
    with_entries(
        announcement(node, Kind::Farewell, incarnation),
        &[(to, run, last)],
    )
}

/// `entries` of 20 bytes each after an announcement.
fn with_entries(mut out: Vec<u8>, entries: &[(u32, u64, u64)]) -> Vec<u8> {
    for &(sender, run, seq) in entries {
        out.extend_from_slice(&sender.to_be_bytes());
        out.extend_from_slice(&run.to_be_bytes());
        out.extend_from_slice(&seq.to_be_bytes());
    }
    out
}

/// The confirmations a heartbeat carries, or what a goodbye says was
/// published to each node (none for other announcements, or if they are
/// malformed).
pub(crate) fn read_confirmations(bytes: &[u8]) -> Vec<(u32, u64, u64)> {
    let rest = bytes.get(13..).unwrap_or(&[]);
    if !matches!(bytes.first(), Some(0 | 2 | 3)) || !rest.len().is_multiple_of(20) {
        return Vec::new();
    }
    rest.chunks_exact(20)
        .map(|c| {
            let u32_at = |at: usize| u32::from_be_bytes(c[at..at + 4].try_into().expect("4"));
            let u64_at = |at: usize| u64::from_be_bytes(c[at..at + 8].try_into().expect("8"));
            (u32_at(0), u64_at(4), u64_at(12))
        })
        .collect()
}

/// Reads an announcement: `(node, kind, incarnation)`. A heartbeat or a
/// goodbye may carry entries after them ([`read_confirmations`]).
pub(crate) fn read_announcement(bytes: &[u8]) -> Option<(u32, Kind, u64)> {
    let with_entries =
        bytes.len() > 13 && matches!(bytes[0], 0 | 2 | 3) && (bytes.len() - 13).is_multiple_of(20);
    if bytes.len() != 13 && !with_entries {
        return None;
    }
    let kind = match bytes[0] {
        0 => Kind::Down,
        1 => Kind::Up,
        2 => Kind::Beat,
        3 => Kind::Farewell,
        _ => return None,
    };
    let node = u32::from_be_bytes(bytes[1..5].try_into().ok()?);
    let incarnation = u64::from_be_bytes(bytes[5..13].try_into().ok()?);
    Some((node, kind, incarnation))
}

/// One other node, as this transport knows it.
#[derive(Debug)]
struct Member {
    incarnation: u64,
    /// Incarnations it has left behind (the last few): what still comes
    /// from them is stale.
    retired: Vec<u64>,
    last_heard: Instant,
    state: State,
    /// The episode of the fence this transport holds against the member
    /// (see `reset.rs`), until it acknowledges that one.
    fence: Option<u64>,
    /// How many times this transport fenced the member's current run: the
    /// next fence's episode is one more.
    fences: u64,
    /// The last episode of the member's Resets this transport swept for:
    /// a repeated Reset of it is only acknowledged again.
    swept_for: u64,
    /// The last of this transport's frame numbers the member confirmed
    /// (in its heartbeats), or counted unconfirmed when it was declared
    /// down: what is above it, once it is declared down, is unconfirmed.
    confirmed: u64,
    /// Receipts of frames passed on to the member from other nodes, by
    /// frame number, in order ([`Members::hold`]).
    held: VecDeque<(u64, Receipt)>,
}

impl Member {
    /// The receipts held for frames up to number `seq`.
    fn release_up_to(&mut self, seq: u64) -> Vec<Receipt> {
        let upto = self.held.partition_point(|&(s, _)| s <= seq);
        self.held.drain(..upto).map(|(_, r)| r).collect()
    }
}

/// How many past incarnations of a node are remembered.
const RETIRED: usize = 8;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Up,
    Left,
    Down,
}

/// What hearing an announcement changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Change {
    /// Nothing worth telling.
    None,
    /// The node joined, or came back (a new incarnation, or heard again
    /// after it was declared down).
    Up,
    /// The node came back as a new run while its old run still counted
    /// as up: the old run is gone, with its processes.
    Restarted,
    /// The node said goodbye.
    Left,
    /// The announcement came from an incarnation the node has left behind.
    Stale,
}

/// The other nodes this transport has heard of.
#[derive(Debug, Default)]
pub(crate) struct Members {
    members: Mutex<HashMap<u32, Member>>,
    /// How many members are fenced: frames are checked against the fences
    /// only while some are, so the common case takes no lock for it.
    fenced: AtomicUsize,
}

impl Members {
    /// Why a send to `node` is refused, if it is.
    pub(crate) fn unreachable(&self, node: u32) -> Option<LinkError> {
        self.route(node).1
    }

    /// In one look: the incarnation of `node`'s run this transport knows
    /// (0 if it has not heard of the node), and why a send to it is
    /// refused, if it is (see [`unreachable`](Members::unreachable)).
    pub(crate) fn route(&self, node: u32) -> (u64, Option<LinkError>) {
        let members = self.lock();
        let Some(member) = members.get(&node) else {
            return (0, None);
        };
        let gone = match member.state {
            State::Up if member.fence.is_some() => Some(LinkError::Resetting(node)),
            State::Up => None,
            State::Left => Some(LinkError::NodeLeft(node)),
            State::Down => Some(LinkError::NodeDown(node)),
        };
        (member.incarnation, gone)
    }

    /// Whether a frame that came on node `sender`'s subject may claim
    /// `source` and `incarnation`: the source PID is the sender's (or
    /// [`Pid::OUTSIDE`](relay::Pid::OUTSIDE)'s node, 0) and the incarnation
    /// is not one another node is known by. `Err` names what was claimed.
    ///
    /// A sender not heard of yet is taken as heard at `now`: if it never
    /// announces itself, the failure detector declares it down after its
    /// bound, and what it set up here (watches, links) ends with it.
    pub(crate) fn vouch(
        &self,
        sender: u32,
        source: relay::Pid,
        incarnation: u64,
        now: Instant,
    ) -> Result<(), &'static str> {
        if source.node() != 0 && source.node() != sender {
            return Err("a source PID of another node");
        }
        let mut members = self.lock();
        if members
            .get(&sender)
            .is_some_and(|m| m.incarnation == incarnation)
        {
            return Ok(());
        }
        let theirs = members.iter().any(|(&node, m)| {
            node != sender && (m.incarnation == incarnation || m.retired.contains(&incarnation))
        });
        if theirs {
            return Err("another node's incarnation");
        }
        members.entry(sender).or_insert(Member {
            incarnation,
            retired: Vec::new(),
            last_heard: now,
            state: State::Up,
            fence: None,
            fences: 0,
            swept_for: 0,
            confirmed: 0,
            held: VecDeque::new(),
        });
        Ok(())
    }

    /// Holds `receipt`, the receipt of a package passed on from another
    /// node as this transport's frame `seq` to `node`, until `node`
    /// confirms the frame or is counted for it ([`Members::unconfirmed`]).
    /// So a frame passed on counts as taken on the node it came from only
    /// once the next node took it: if this node dies first, the first
    /// sender counts it. Handed back (to be told at once) if `node` is not
    /// known or confirmed `seq` already.
    pub(crate) fn hold(&self, node: u32, seq: u64, receipt: Receipt) -> Option<Receipt> {
        let mut members = self.lock();
        match members.get_mut(&node) {
            Some(member) if seq > member.confirmed => {
                member.held.push_back((seq, receipt));
                None
            }
            _ => Some(receipt),
        }
    }

    /// `node` confirmed this transport's frames up to number `seq`: the
    /// receipts held for them, to be told (dropped) by the caller, outside
    /// this lock.
    #[must_use = "the receipts are told when dropped"]
    pub(crate) fn confirm(&self, node: u32, seq: u64) -> Vec<Receipt> {
        let mut members = self.lock();
        let Some(member) = members.get_mut(&node) else {
            return Vec::new();
        };
        member.confirmed = member.confirmed.max(seq);
        member.release_up_to(seq)
    }

    /// `node` was declared down with `sent` frames numbered for it: how
    /// many it never confirmed (each counted once: they count as
    /// confirmed from now on), and the receipts held for frames passed on
    /// among them: counted here, so told to their first senders as taken.
    #[must_use = "the receipts are told when dropped"]
    pub(crate) fn unconfirmed(&self, node: u32, sent: u64) -> (u64, Vec<Receipt>) {
        let mut members = self.lock();
        let Some(member) = members.get_mut(&node) else {
            return (0, Vec::new());
        };
        let unconfirmed = sent.saturating_sub(member.confirmed);
        member.confirmed = member.confirmed.max(sent);
        (unconfirmed, member.release_up_to(sent))
    }

    /// Every receipt held for `node` (it left: it counts what it did not
    /// take itself).
    #[must_use = "the receipts are told when dropped"]
    pub(crate) fn release(&self, node: u32) -> Vec<Receipt> {
        self.lock()
            .get_mut(&node)
            .map(|member| member.held.drain(..).map(|(_, r)| r).collect())
            .unwrap_or_default()
    }

    /// Fences `node`'s current run: returns the new episode, or `None` if
    /// the node is unknown or left (its run has nothing left to end).
    pub(crate) fn fence(&self, node: u32) -> Option<u64> {
        let mut members = self.lock();
        let member = members.get_mut(&node)?;
        if member.state == State::Left {
            return None;
        }
        member.fences += 1;
        if member.fence.replace(member.fences).is_none() {
            self.fenced.fetch_add(1, Ordering::AcqRel);
        }
        Some(member.fences)
    }

    /// Whether this transport holds a fence against `node`.
    pub(crate) fn is_fenced(&self, node: u32) -> bool {
        self.any_fenced() && self.lock().get(&node).is_some_and(|m| m.fence.is_some())
    }

    /// Whether this transport holds any fence (a read, no lock).
    pub(crate) fn any_fenced(&self) -> bool {
        self.fenced.load(Ordering::Acquire) > 0
    }

    /// Lifts `member`'s fence, if it has one.
    fn lift(&self, member: &mut Member) {
        if member.fence.take().is_some() {
            self.fenced.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// Lifts the fence against `node` if `episode` is the current one;
    /// whether it did.
    pub(crate) fn unfence(&self, node: u32, episode: u64) -> bool {
        let mut members = self.lock();
        match members.get_mut(&node) {
            Some(member) if member.fence == Some(episode) => {
                self.lift(member);
                true
            }
            _ => false,
        }
    }

    /// The fenced nodes that are heard from, with their fence's episode.
    pub(crate) fn fenced_and_heard(&self) -> Vec<(u32, u64)> {
        let mut fenced: Vec<(u32, u64)> = self
            .lock()
            .iter()
            .filter(|(_, m)| m.state == State::Up)
            .filter_map(|(&node, m)| m.fence.map(|episode| (node, episode)))
            .collect();
        fenced.sort_unstable();
        fenced
    }

    /// Records that `node` sent a Reset of `episode`; whether it is the
    /// first of that episode (the one to sweep for). A node not heard of
    /// yet has nothing to remember it by: each of its Resets is a first.
    pub(crate) fn reset_heard(&self, node: u32, episode: u64) -> bool {
        let mut members = self.lock();
        let Some(member) = members.get_mut(&node) else {
            return true;
        };
        if episode <= member.swept_for {
            return false;
        }
        member.swept_for = episode;
        true
    }

    /// Whether frames from `incarnation` of `node` are stale: it is one
    /// the node has left behind. (An incarnation not heard of yet is
    /// taken: a restarted node's first frames may arrive before its
    /// announcement, which travels on another subject.)
    pub(crate) fn is_stale(&self, node: u32, incarnation: u64) -> bool {
        self.lock()
            .get(&node)
            .is_some_and(|m| m.retired.contains(&incarnation))
    }

    /// The incarnation of `node`'s run this transport knows, 0 if it has
    /// not heard of the node.
    pub(crate) fn incarnation_of(&self, node: u32) -> u64 {
        self.lock().get(&node).map_or(0, |m| m.incarnation)
    }

    /// The other nodes this transport counts as up and reachable (heard
    /// of, not declared down, not gone, not fenced), in order.
    pub(crate) fn live(&self) -> Vec<u32> {
        let mut live: Vec<u32> = self
            .lock()
            .iter()
            .filter(|(_, m)| m.state == State::Up && m.fence.is_none())
            .map(|(&node, _)| node)
            .collect();
        live.sort_unstable();
        live
    }

    /// The other nodes this transport counts as up (fenced or not), in
    /// order: those that may still publish to it.
    pub(crate) fn up(&self) -> Vec<u32> {
        let mut up: Vec<u32> = self
            .lock()
            .iter()
            .filter(|(_, m)| m.state == State::Up)
            .map(|(&node, _)| node)
            .collect();
        up.sort_unstable();
        up
    }

    /// Every node this transport has heard of.
    pub(crate) fn known(&self) -> Vec<u32> {
        let mut known: Vec<u32> = self.lock().keys().copied().collect();
        known.sort_unstable();
        known
    }

    /// Applies an announcement heard at `now`.
    pub(crate) fn hear(&self, node: u32, kind: Kind, incarnation: u64, now: Instant) -> Change {
        let mut members = self.lock();
        let Some(member) = members.get_mut(&node) else {
            let state = if kind == Kind::Down {
                State::Left
            } else {
                State::Up
            };
            members.insert(
                node,
                Member {
                    incarnation,
                    retired: Vec::new(),
                    last_heard: now,
                    state,
                    fence: None,
                    fences: 0,
                    swept_for: 0,
                    confirmed: 0,
                    held: VecDeque::new(),
                },
            );
            return if state == State::Up {
                Change::Up
            } else {
                Change::Left
            };
        };
        let mut restarted = false;
        if member.incarnation != incarnation {
            if member.retired.contains(&incarnation) {
                return Change::Stale;
            }
            // A new run: its attach says so, and so does a heartbeat once
            // the old run is known to be gone (its attach may have been
            // lost). While the old one still counts as up, a heartbeat
            // from another is not trusted over it: the old is declared
            // down after the bound, and the next heartbeat takes over.
            let takes_over = kind == Kind::Up || (kind == Kind::Beat && member.state != State::Up);
            if !takes_over {
                return Change::None;
            }
            member.retired.push(member.incarnation);
            if member.retired.len() > RETIRED {
                member.retired.remove(0);
            }
            member.incarnation = incarnation;
            // The new run has no relations to end, and counts its own
            // episodes.
            self.lift(member);
            member.fences = 0;
            member.swept_for = 0;
            restarted = member.state == State::Up;
        }
        // A goodbye is final for its run: a heartbeat that was on its way
        // (sent just before it) does not bring the node back; only a new
        // attach does.
        if member.state == State::Left && kind == Kind::Beat {
            return Change::None;
        }
        member.last_heard = now;
        let before = member.state;
        member.state = if kind == Kind::Down {
            // A run that left has nothing left to end.
            self.lift(member);
            State::Left
        } else {
            State::Up
        };
        match (before, member.state) {
            _ if restarted => Change::Restarted,
            (State::Up, State::Up) => Change::None,
            (_, State::Up) => Change::Up,
            (State::Left, State::Left) => Change::None,
            (_, _) => Change::Left,
        }
    }

    /// Counts every node as heard at `now`: after this node was cut off
    /// from the server itself, during which it could hear nobody (their
    /// silence then says nothing about them).
    pub(crate) fn heard_all(&self, now: Instant) {
        for member in self.lock().values_mut() {
            member.last_heard = member.last_heard.max(now);
        }
    }

    /// Declares down every node up but silent for `bound` at `now`;
    /// returns them.
    pub(crate) fn sweep(&self, now: Instant, bound: Duration) -> Vec<u32> {
        let mut members = self.lock();
        let mut down = Vec::new();
        for (&node, member) in members.iter_mut() {
            if member.state == State::Up && now.saturating_duration_since(member.last_heard) > bound
            {
                member.state = State::Down;
                down.push(node);
            }
        }
        down.sort_unstable();
        down
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u32, Member>> {
        self.members
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn announcements_round_trip_and_junk_is_ignored() {
        for kind in [Kind::Up, Kind::Down, Kind::Beat] {
            assert_eq!(
                read_announcement(&announcement(7, kind, 42)),
                Some((7, kind, 42))
            );
        }
        assert_eq!(read_announcement(b"hello"), None);
        assert_eq!(read_announcement(&[1, 0, 0, 0, 7]), None, "the old format");
        let mut bad = announcement(7, Kind::Up, 1);
        bad[0] = 9;
        assert_eq!(read_announcement(&bad), None);
    }

    #[test]
    fn a_silent_node_goes_down_and_comes_back_when_heard() {
        let members = Members::default();
        let t0 = Instant::now();
        let bound = Duration::from_secs(2);
        assert_eq!(members.hear(3, Kind::Up, 1, t0), Change::Up);
        assert_eq!(members.unreachable(3), None);
        assert_eq!(
            members.hear(3, Kind::Beat, 1, t0 + Duration::from_secs(1)),
            Change::None
        );
        assert!(members
            .sweep(t0 + Duration::from_millis(2900), bound)
            .is_empty());
        assert_eq!(
            members.sweep(t0 + Duration::from_millis(3100), bound),
            vec![3]
        );
        assert_eq!(members.unreachable(3), Some(LinkError::NodeDown(3)));
        assert!(
            members.sweep(t0 + Duration::from_secs(9), bound).is_empty(),
            "once"
        );
        // Heard again (a false positive ends, or it restarted).
        assert_eq!(
            members.hear(3, Kind::Beat, 1, t0 + Duration::from_secs(10)),
            Change::Up
        );
        assert_eq!(members.unreachable(3), None);
    }

    #[test]
    fn a_fence_refuses_sends_until_its_own_episode_is_acknowledged() {
        let members = Members::default();
        let t0 = Instant::now();
        assert_eq!(members.fence(3), None, "an unknown node is not fenced");
        members.hear(3, Kind::Up, 1, t0);
        assert_eq!(members.fence(3), Some(1));
        assert_eq!(members.unreachable(3), Some(LinkError::Resetting(3)));
        assert_eq!(members.fenced_and_heard(), vec![(3, 1)]);
        // Lost again before the acknowledgement: a new episode.
        assert_eq!(members.fence(3), Some(2));
        assert!(!members.unfence(3, 1), "an earlier episode's ack");
        assert!(members.is_fenced(3));
        assert!(members.unfence(3, 2));
        assert!(!members.is_fenced(3));
        assert_eq!(members.unreachable(3), None);
        assert!(!members.unfence(3, 2), "once");
        // Down and fenced: down says more; not repeated while unheard.
        members.fence(3);
        members.sweep(t0 + Duration::from_secs(10), Duration::from_secs(1));
        assert_eq!(members.unreachable(3), Some(LinkError::NodeDown(3)));
        assert!(members.fenced_and_heard().is_empty());
        // A restart clears the fence: the new run has nothing to end.
        members.hear(3, Kind::Up, 2, t0 + Duration::from_secs(11));
        assert!(!members.is_fenced(3));
        assert_eq!(members.fence(3), Some(1), "the new run counts afresh");
        // A goodbye clears it too, and a node that left is not fenced.
        members.hear(3, Kind::Down, 2, t0 + Duration::from_secs(12));
        assert!(!members.is_fenced(3));
        assert_eq!(members.fence(3), None);
        assert!(!members.any_fenced(), "every fence lifted is counted off");
    }

    #[test]
    fn a_frame_may_claim_only_its_senders_pids_and_runs() {
        let members = Members::default();
        let t0 = Instant::now();
        members.hear(1, Kind::Up, 11, t0);
        members.hear(3, Kind::Up, 33, t0);
        members.hear(3, Kind::Up, 34, t0); // node 3 restarted: 33 retired
        let pid = |node| relay::Pid::new(node, 5);
        let vouch = |sender, source, incarnation| members.vouch(sender, source, incarnation, t0);
        assert_eq!(vouch(1, pid(1), 11), Ok(()));
        assert_eq!(vouch(1, relay::Pid::OUTSIDE, 11), Ok(()), "from outside");
        assert!(vouch(3, pid(1), 34).is_err(), "node 1's PID from node 3");
        assert!(vouch(3, pid(3), 11).is_err(), "node 1's run from node 3");
        assert!(
            vouch(1, pid(1), 33).is_err(),
            "node 3's old run from node 1"
        );
        assert_eq!(vouch(1, pid(1), 12), Ok(()), "a new run of node 1");
        assert_eq!(vouch(4, pid(4), 44), Ok(()), "a node not heard yet");
        // Now heard of: if it stays silent, it is declared down, and what
        // it set up here ends with it.
        assert_eq!(members.incarnation_of(4), 44);
        assert_eq!(
            members.sweep(t0 + Duration::from_secs(5), Duration::from_secs(2)),
            vec![1, 3, 4]
        );
    }

    #[test]
    fn beats_carry_confirmations_and_the_unconfirmed_are_counted_once() {
        let bytes = beat(4, 40, &[(1, 10, 99), (2, 20, 7)]);
        assert_eq!(read_announcement(&bytes), Some((4, Kind::Beat, 40)));
        assert_eq!(read_confirmations(&bytes), vec![(1, 10, 99), (2, 20, 7)]);
        assert_eq!(read_confirmations(&announcement(4, Kind::Up, 40)), vec![]);
        let bye = goodbye(4, 40, &[(1, 40, 12)]);
        assert_eq!(read_announcement(&bye), Some((4, Kind::Down, 40)));
        assert_eq!(read_confirmations(&bye), vec![(1, 40, 12)]);
        let answer = farewell(5, 50, 4, 40, 9);
        assert_eq!(read_announcement(&answer), Some((5, Kind::Farewell, 50)));
        assert_eq!(read_confirmations(&answer), vec![(4, 40, 9)]);
        assert_eq!(read_announcement(&bytes[..20]), None, "a broken list");
        let members = Members::default();
        members.hear(4, Kind::Up, 40, Instant::now());
        assert!(members.confirm(4, 90).is_empty());
        assert!(members.confirm(4, 80).is_empty()); // an older beat, late
        assert_eq!(members.unconfirmed(4, 100).0, 10);
        assert_eq!(members.unconfirmed(4, 100).0, 0, "once");
        assert_eq!(members.unconfirmed(4, 103).0, 3);
        assert_eq!(members.unconfirmed(9, 5).0, 0, "never heard of");
    }

    /// Counts the tokens of the receipts told.
    #[derive(Default)]
    struct Told(Mutex<Vec<u64>>);

    impl relay::Acknowledge for Told {
        fn taken(&self, token: u64) {
            self.0.lock().unwrap().push(token);
        }
    }

    #[test]
    fn a_receipt_held_for_a_frame_passed_on_is_told_when_the_next_node_confirms_it() {
        let told = std::sync::Arc::new(Told::default());
        let receipt = |token| Receipt::new(told.clone(), token);
        let members = Members::default();
        members.hear(4, Kind::Up, 40, Instant::now());
        assert!(members.hold(4, 1, receipt(1)).is_none());
        assert!(members.hold(4, 2, receipt(2)).is_none());
        assert!(members.hold(4, 3, receipt(3)).is_none());
        assert!(told.0.lock().unwrap().is_empty(), "held, not told");
        drop(members.confirm(4, 2));
        assert_eq!(*told.0.lock().unwrap(), vec![1, 2], "confirmed: told");
        // Unknown, or confirmed already: handed back to be told at once.
        assert_eq!(members.hold(9, 1, receipt(9)).map(|r| r.token()), Some(9));
        assert_eq!(members.hold(4, 2, receipt(8)).map(|r| r.token()), Some(8));
        told.0.lock().unwrap().clear();
        // Declared down: counted here, so told (taken as far as the first
        // sender is concerned).
        assert!(members.hold(4, 4, receipt(4)).is_none());
        let (unconfirmed, released) = members.unconfirmed(4, 4);
        assert_eq!(unconfirmed, 2, "frames 3 and 4");
        assert!(told.0.lock().unwrap().is_empty(), "told by the caller");
        drop(released);
        assert_eq!(*told.0.lock().unwrap(), vec![3, 4]);
        // A node that left: everything held is released.
        assert!(members.hold(4, 5, receipt(5)).is_none());
        drop(members.release(4));
        assert_eq!(*told.0.lock().unwrap(), vec![3, 4, 5]);
    }

    #[test]
    fn a_reset_is_swept_for_once_per_episode() {
        let members = Members::default();
        let t0 = Instant::now();
        assert!(members.reset_heard(4, 1), "unknown: always a first");
        assert!(members.reset_heard(4, 1));
        members.hear(4, Kind::Up, 1, t0);
        assert!(members.reset_heard(4, 1));
        assert!(!members.reset_heard(4, 1), "repeated");
        assert!(members.reset_heard(4, 2));
        assert!(!members.reset_heard(4, 1), "late");
        // Its restart counts episodes afresh.
        members.hear(4, Kind::Up, 2, t0);
        assert!(members.reset_heard(4, 1));
    }

    #[test]
    fn a_goodbye_is_left_and_a_new_incarnation_makes_the_old_one_stale() {
        let members = Members::default();
        let t0 = Instant::now();
        members.hear(3, Kind::Up, 1, t0);
        assert_eq!(members.hear(3, Kind::Down, 1, t0), Change::Left);
        assert_eq!(members.unreachable(3), Some(LinkError::NodeLeft(3)));
        assert!(
            members
                .sweep(t0 + Duration::from_secs(60), Duration::from_secs(1))
                .is_empty(),
            "a node that left is not declared down"
        );
        // A heartbeat sent just before the goodbye, arriving after it.
        assert_eq!(members.hear(3, Kind::Beat, 1, t0), Change::None);
        assert_eq!(members.unreachable(3), Some(LinkError::NodeLeft(3)));
        // It restarts: a new incarnation attaches.
        assert_eq!(members.hear(3, Kind::Up, 2, t0), Change::Up);
        assert!(members.is_stale(3, 1));
        assert!(!members.is_stale(3, 2));
        assert!(
            !members.is_stale(4, 7),
            "an unknown node is not known to be stale"
        );
        // The old run's heartbeat does not speak for the new one.
        assert_eq!(members.hear(3, Kind::Beat, 1, t0), Change::Stale);
        assert_eq!(members.hear(3, Kind::Down, 1, t0), Change::Stale);
        assert_eq!(members.unreachable(3), None);
    }

    #[test]
    fn silence_while_this_node_was_cut_off_does_not_count() {
        let members = Members::default();
        let t0 = Instant::now();
        let bound = Duration::from_secs(2);
        members.hear(4, Kind::Up, 1, t0);
        // Disconnected for 5 s, then reconnected at t0 + 5 s.
        members.heard_all(t0 + Duration::from_secs(5));
        assert!(members.sweep(t0 + Duration::from_secs(6), bound).is_empty());
        assert_eq!(
            members.sweep(t0 + Duration::from_millis(7100), bound),
            vec![4]
        );
    }

    #[test]
    fn a_restart_whose_attach_was_lost_takes_over_once_the_old_run_is_down() {
        let members = Members::default();
        let t0 = Instant::now();
        let bound = Duration::from_secs(2);
        members.hear(5, Kind::Up, 1, t0);
        // Run 2's heartbeat, while run 1 still counts as up: not trusted.
        assert_eq!(
            members.hear(5, Kind::Beat, 2, t0 + Duration::from_secs(1)),
            Change::None
        );
        assert!(!members.is_stale(5, 2), "its frames are taken meanwhile");
        assert_eq!(members.sweep(t0 + Duration::from_secs(3), bound), vec![5]);
        assert_eq!(
            members.hear(5, Kind::Beat, 2, t0 + Duration::from_secs(4)),
            Change::Up
        );
        assert!(members.is_stale(5, 1));
        assert_eq!(members.unreachable(5), None);
    }

    #[test]
    fn a_run_replaced_while_up_is_a_restart_and_its_incarnation_is_known() {
        let members = Members::default();
        let t0 = Instant::now();
        assert_eq!(members.incarnation_of(6), 0, "unknown");
        members.hear(6, Kind::Up, 1, t0);
        assert_eq!(members.incarnation_of(6), 1);
        // Run 2 attaches before run 1 was declared down: run 1 is gone.
        assert_eq!(members.hear(6, Kind::Up, 2, t0), Change::Restarted);
        assert_eq!(members.incarnation_of(6), 2);
        assert_eq!(members.hear(6, Kind::Beat, 2, t0), Change::None);
        // After a goodbye, a new run is an ordinary comeback.
        assert_eq!(members.hear(6, Kind::Down, 2, t0), Change::Left);
        assert_eq!(members.hear(6, Kind::Up, 3, t0), Change::Up);
        assert_eq!(members.known(), vec![6]);
    }
}
