//! Leaving without losing what is in flight: a node that says goodbye
//! reads on until every node that was up has answered it.
//!
//! A frame another node published to a leaving node is counted at the
//! sender as `published`, and at the receiver as delivered, a dead letter,
//! lost or fenced: only if the receiver reads it. A node that stopped
//! reading as soon as it had said goodbye missed what the others sent
//! between its last read and their hearing the goodbye, and that was
//! counted nowhere. So the goodbye is answered:
//!
//! ```text
//!  L (leaving)                              P (up)
//!  ── goodbye (announcement, Down) ───────▶ marks L left: sends to L are
//!     keeps reading its subject                refused from here on (or,
//!     (delivers, or counts as any frame)       already queued, not published
//!                                              and counted `abandoned`)
//!                                        ◀── Farewell(L's run), queued
//!                                            behind every frame P queued
//!                                            for L before it heard
//!  ── every node that was up answered
//!     (or 2 s passed): stops reading
//! ```
//!
//! The farewell travels on L's subject from P's connection, like P's
//! frames to L, so L reads it after all of them: when every farewell is
//! in, nothing more is on its way. It is queued after P marked L left, and
//! P's publishing loop checks that mark before publishing each frame, so
//! no frame of P's to L can follow it. It carries the number of the last
//! frame P published to L: what L has not seen by then (dropped by L's
//! client as a slow consumer, or lost in transit, at the end of the
//! stream where no later frame shows the gap) never comes, and is counted
//! `lost`.
//!
//! P also publishes the farewell on its announcement subject, with the
//! same number: under a flood, L's client may drop the frame (a slow
//! consumer drops whatever arrives while its subscription is full), and
//! the announcement, on a quiet subscription, still says P answered and
//! what L must have seen.
//!
//! A node that left before L closes said goodbye the same way, and its
//! goodbye says the last number it published to each node. Goodbyes come
//! on another subscription than frames, so L may hear one before reading
//! the frames published ahead of it: L's close also reads on until it has
//! seen, from each node that left, the last frame that node said it
//! published here.
//!
//! A node that closes less than a heartbeat and a half after it joined
//! may not have heard yet of every node that heard it: it waits until then
//! (within the bound), and a farewell from a node it did not know counts
//! as well.
//!
//! A node that does not answer within the wait (stopped, cut off, or
//! declared down meanwhile) is not waited for longer: what it published
//! after L stopped reading is the one case still counted nowhere, and L
//! logs which nodes did not answer. A frame still missing at the end of
//! the wait from a node that left is counted `lost` when L saw an earlier
//! frame of that node's run; if it saw none, it logs a warning.

use std::time::Duration;

use crate::shared::{lock, Inner};
use crate::stats::Counters;

/// How often closing looks whether the farewells are in.
const LOOK: Duration = Duration::from_millis(5);

impl Inner {
    /// `from` answered this run's goodbye; `last` is the number of the
    /// last frame it published here. The farewell follows every such
    /// frame: one not seen yet will not come, and is counted lost.
    pub(crate) fn farewell_heard(&self, from: u32, last: u64) {
        let run = self.members.incarnation_of(from);
        let missing = lock(&self.gaps).close_up_to(from, run, last);
        if missing > 0 {
            Counters::add(&self.counters.lost, missing);
            tracing::warn!(
                node = from,
                missing,
                "frames from a node never arrived before its farewell"
            );
        }
        self.answered(from, run, last);
    }

    /// `from` (its run `run`) answered this run's goodbye on its
    /// announcement subject, as well as on this node's: the frame may be
    /// dropped by this node's client under a flood, the announcement
    /// hardly. Not in order with its frames: a close reads on until it has
    /// seen `last`.
    pub(crate) fn answered(&self, from: u32, run: u64, last: u64) {
        let mut farewells = lock(&self.farewells);
        farewells.answer(from);
        farewells.expect(from, run, last);
    }

    /// `from` (its run `run`) left, and its goodbye says `last` was the
    /// last frame it published here: a close of this node reads on until
    /// it has seen it.
    pub(crate) fn left_having_sent(&self, from: u32, run: u64, last: u64) {
        lock(&self.farewells).expect(from, run, last);
    }
}

/// Reads on (the receiving task runs while this waits) until every node
/// of `up` has answered the goodbye or is no longer up, and the last frame
/// of every node that left has been seen, or until `bound` passed. Then
/// counts lost what the nodes that left said they published and did not
/// arrive.
pub(crate) async fn await_farewells(inner: &Inner, up: Vec<u32>, bound: Duration) {
    let deadline = tokio::time::Instant::now() + bound;
    // A node that closes right after it joined may not have heard every
    // node that heard it (and may have published to it): their farewells
    // come all the same, and the wait lasts until it has surely heard them.
    let heard_all = inner
        .announced_at
        .get()
        .map(|at| *at + inner.heartbeat * 3 / 2);
    loop {
        let (silent, behind) = pending(inner, &up);
        let settled = heard_all.is_none_or(|at| tokio::time::Instant::now() >= at);
        if silent.is_empty() && behind.is_empty() && settled {
            return;
        }
        if tokio::time::Instant::now() >= deadline {
            give_up(inner, &silent, &behind);
            return;
        }
        tokio::time::sleep(LOOK).await;
    }
}

/// The nodes of `up` that neither answered nor stopped counting as up,
/// and the nodes that left or answered whose last frame here was not seen
/// yet: `(node, run, last)`.
fn pending(inner: &Inner, up: &[u32]) -> (Vec<u32>, Vec<(u32, u64, u64)>) {
    let farewells = lock(&inner.farewells);
    let still_up = inner.members.up();
    let silent = up
        .iter()
        .copied()
        .filter(|&node| !farewells.answered(node) && still_up.contains(&node))
        .collect();
    let gaps = lock(&inner.gaps);
    let behind = farewells
        .expected()
        // A later run of the node retired this one's numbers: its frames
        // are stale here, and not waited for.
        .filter(|&(node, run, last)| {
            inner.members.incarnation_of(node) == run && gaps.last(node, run).unwrap_or(0) < last
        })
        .collect();
    (silent, behind)
}

/// At the end of the wait: counts lost what nodes that left or answered
/// said they published here and did not arrive (when an earlier frame of
/// theirs did), and says who did not answer.
fn give_up(inner: &Inner, silent: &[u32], behind: &[(u32, u64, u64)]) {
    for &(node, run, last) in behind {
        let missing = lock(&inner.gaps).close_up_to(node, run, last);
        if missing > 0 {
            Counters::add(&inner.counters.lost, missing);
            tracing::warn!(
                node,
                missing,
                "frames a node said it published here never arrived"
            );
        } else {
            tracing::warn!(
                node,
                last,
                "left without any frame of a node that said it published here: not counted"
            );
        }
    }
    if !silent.is_empty() {
        tracing::warn!(
            node = inner.node(),
            ?silent,
            "left without every node's farewell: what they sent after this node stopped \
             reading is counted nowhere"
        );
    }
}
