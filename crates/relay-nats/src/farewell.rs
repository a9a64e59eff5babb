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
//! no frame of P's to L can follow it. A node that does not answer within
//! the wait (stopped, cut off, or declared down meanwhile) is not waited
//! for longer: what it published after L stopped reading is the one case
//! still counted nowhere, and L logs which nodes did not answer.

use std::time::Duration;

use crate::shared::Inner;

/// How often closing looks whether the farewells are in.
const LOOK: Duration = Duration::from_millis(5);

impl Inner {
    /// `from` answered this run's goodbye; a farewell for an earlier run
    /// of this node is not an answer to this one's.
    pub(crate) fn farewell_heard(&self, from: u32, incarnation: u64) {
        if incarnation != self.incarnation {
            tracing::debug!(node = from, "ignored a farewell to an earlier run");
            return;
        }
        let mut farewells = lock(&self.farewells);
        if !farewells.contains(&from) {
            farewells.push(from);
        }
    }
}

/// Reads on (the receiving task runs while this waits) until every node
/// of `up` has answered the goodbye, is no longer up, or `bound` passed.
pub(crate) async fn await_farewells(inner: &Inner, up: Vec<u32>, bound: Duration) {
    let deadline = tokio::time::Instant::now() + bound;
    loop {
        let silent = unanswered(inner, &up);
        if silent.is_empty() {
            return;
        }
        if tokio::time::Instant::now() >= deadline {
            tracing::warn!(
                node = inner.node(),
                ?silent,
                "left without every node's farewell: what they sent after this node stopped \
                 reading is counted nowhere"
            );
            return;
        }
        tokio::time::sleep(LOOK).await;
    }
}

/// The nodes of `up` that neither answered nor stopped counting as up.
fn unanswered(inner: &Inner, up: &[u32]) -> Vec<u32> {
    let farewells = lock(&inner.farewells);
    let still_up = inner.members.up();
    up.iter()
        .copied()
        .filter(|node| !farewells.contains(node) && still_up.contains(node))
        .collect()
}

/// Locks the farewells (a panic elsewhere leaves them usable: each update
/// is one push).
fn lock<T>(table: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    table
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
