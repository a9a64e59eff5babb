//! Gap detection: each transport numbers the frames it sends to each node
//! (1, 2, 3, ...), under an incarnation number of its own (random per
//! transport); a receiver that
//! sees a number skipped counts the skipped frames as lost.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use relay::{Acknowledge, Receipt};

/// Per sending transport (its node, from the subject, and its
/// incarnation): the last number seen. The sender's node and incarnation,
/// not the source PID's node, name the stream: messages sent from outside
/// any process carry [`Pid::OUTSIDE`](relay::Pid::OUTSIDE) as their
/// source, on node 0.
#[derive(Debug, Default)]
pub(crate) struct Gaps {
    last: HashMap<(u32, u64), u64>,
    /// Per sender's run: its frames handed to this node's processes and
    /// not yet taken by them (see [`Gaps::receipt`]).
    held: HashMap<(u32, u64), Arc<Held>>,
}

/// How many of one sender run's frames sit in this node's mailboxes: each
/// delivered frame's package carries a receipt on it, which takes one off
/// when a process takes the message (or the package is dropped, a dead
/// letter). What this node confirms to the sender leaves these out, so a
/// node that dies with messages unread has not confirmed them, and the
/// sender counts them (`unconfirmed`).
#[derive(Debug, Default)]
pub(crate) struct Held(AtomicU64);

impl Acknowledge for Held {
    fn taken(&self, _seq: u64) {
        // Relaxed: read under the gaps' lock only as a count; a late
        // decrement only confirms less, never more than was taken.
        self.0.fetch_sub(1, Relaxed);
    }
}

/// What a frame's number says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Seen {
    /// The first from this transport: the baseline, after this many
    /// skipped since the first number the sender gave this node's run (0:
    /// none, or that number is not known).
    First(u64),
    /// The next one, after this many skipped (0: none).
    Next(u64),
    /// Not after the last one seen: core NATS does not reorder or repeat
    /// one connection's messages, so this frame was sent again (a replay).
    Again,
}

impl Gaps {
    /// Records frame `seq` of transport `incarnation` of node `node`,
    /// whose first number for this node's run was `first` (0: not known).
    /// The first frame seen from a transport sets the baseline: what it
    /// numbered for this run before it was lost (the sender addressed this
    /// run, so this node was listening); what it sent before it knew this
    /// run is not counted.
    pub(crate) fn observe(&mut self, node: u32, incarnation: u64, seq: u64, first: u64) -> Seen {
        let Some(last) = self.last.get_mut(&(node, incarnation)) else {
            self.last.insert((node, incarnation), seq);
            // 0: the first number is not known, nothing is skipped.
            let from = if first == 0 { seq } else { first };
            return Seen::First(seq.saturating_sub(from));
        };
        if seq > *last {
            let missing = seq - *last - 1;
            *last = seq;
            Seen::Next(missing)
        } else {
            Seen::Again
        }
    }

    /// The last number seen from each sender's run: what this node
    /// confirms in its heartbeats, `(node, incarnation, number)`.
    ///
    /// The number confirmed is the last one seen less the frames of that
    /// run still unread here (handed to a process, not yet taken): the
    /// sender counts as unconfirmed what a node lost or restarted never
    /// confirmed, `sent - confirmed`, which is then what never arrived
    /// plus what arrived and was never read. Each new frame raises the
    /// last number by at least one and the unread by at most one, so the
    /// number never goes down. Taken under the same lock as
    /// [`receipt`](Gaps::receipt), so a frame seen is never confirmed
    /// before it is counted unread.
    pub(crate) fn confirmations(&self) -> Vec<(u32, u64, u64)> {
        let mut seen: Vec<(u32, u64, u64)> = self
            .last
            .iter()
            .map(|(&(node, incarnation), &seq)| {
                let unread = self
                    .held
                    .get(&(node, incarnation))
                    .map_or(0, |held| held.0.load(Relaxed));
                (node, incarnation, seq.saturating_sub(unread))
            })
            .collect();
        seen.sort_unstable();
        seen
    }

    /// A receipt for frame `seq` of transport `incarnation` of `node`,
    /// just seen, to go on its package: counted unread until the package
    /// is taken or dropped (see [`Held`]).
    pub(crate) fn receipt(&mut self, node: u32, incarnation: u64, seq: u64) -> Receipt {
        let held = self.held.entry((node, incarnation)).or_default();
        held.0.fetch_add(1, Relaxed);
        Receipt::new(Arc::clone(held) as Arc<dyn Acknowledge>, seq)
    }

    /// The last number seen from transport `incarnation` of `node`, if
    /// any frame of it was.
    pub(crate) fn last(&self, node: u32, incarnation: u64) -> Option<u64> {
        self.last.get(&(node, incarnation)).copied()
    }

    /// Counts frames up to `seq` of transport `incarnation` of `node` as
    /// seen (they will not come: counted lost by the caller) and returns
    /// how many that is; none without a baseline.
    pub(crate) fn close_up_to(&mut self, node: u32, incarnation: u64, seq: u64) -> u64 {
        match self.last.get_mut(&(node, incarnation)) {
            Some(last) if *last < seq => std::mem::replace(last, seq).abs_diff(seq),
            _ => 0,
        }
    }

    /// Forgets every transport of `node` but `keep`: runs it has left
    /// behind send nothing more worth counting.
    pub(crate) fn retire(&mut self, node: u32, keep: u64) {
        self.last
            .retain(|&(n, incarnation), _| n != node || incarnation == keep);
        self.held
            .retain(|&(n, incarnation), _| n != node || incarnation == keep);
    }
}

/// What a closing node waits for (`farewell.rs`): who answered its
/// goodbye, and the last number each node that left or answered said it
/// published here.
#[derive(Debug, Default)]
pub(crate) struct Farewells {
    answered: Vec<u32>,
    /// Per node: its run and the last number it published here.
    expected: HashMap<u32, (u64, u64)>,
}

impl Farewells {
    /// `node` answered the goodbye.
    pub(crate) fn answer(&mut self, node: u32) {
        if !self.answered.contains(&node) {
            self.answered.push(node);
        }
    }

    /// Whether `node` answered the goodbye.
    pub(crate) fn answered(&self, node: u32) -> bool {
        self.answered.contains(&node)
    }

    /// `node`'s run `run` published frames here up to `last`.
    pub(crate) fn expect(&mut self, node: u32, run: u64, last: u64) {
        self.expected.insert(node, (run, last));
    }

    /// Every `(node, run, last)` expected.
    pub(crate) fn expected(&self) -> impl Iterator<Item = (u32, u64, u64)> + '_ {
        self.expected
            .iter()
            .map(|(&node, &(run, last))| (node, run, last))
    }
}

/// The numbers of the frames to each target node, on the sending side.
#[derive(Debug, Default)]
pub(crate) struct Numbers {
    streams: HashMap<u32, Stream>,
}

/// The frames numbered for one target node: numbers run on across its
/// runs; `first` is the first number given to its run `run`.
#[derive(Debug, Clone, Copy)]
struct Stream {
    next: u64,
    run: u64,
    first: u64,
}

impl Numbers {
    /// Numbers the next frame to `node`'s run `run` (0: not known):
    /// `(its number, the first number given to that run)`.
    ///
    /// Frames to a node before any run of it is known are numbered from
    /// 1 and meant for whichever run listens: the first run known counts
    /// from 1 too (so a node that starts after a sender began sending to
    /// its number counts what it missed). Each later run counts from the
    /// first frame addressed to it; frames addressed to no run after one
    /// was known carry 0 (not known).
    pub(crate) fn number(&mut self, node: u32, run: u64) -> (u64, u64) {
        let stream = self.streams.entry(node).or_insert(Stream {
            next: 1,
            run: 0,
            first: 1,
        });
        let seq = stream.next;
        stream.next += 1;
        if run != 0 && run != stream.run {
            if stream.run != 0 {
                stream.first = seq;
            }
            stream.run = run;
        }
        let first = if run == stream.run { stream.first } else { 0 };
        (seq, first)
    }

    /// How many frames were numbered for `node` so far (the last number).
    pub(crate) fn sent(&self, node: u32) -> u64 {
        self.streams.get(&node).map_or(0, |s| s.next - 1)
    }

    /// The last number of every node something was numbered for.
    pub(crate) fn all_sent(&self) -> Vec<(u32, u64)> {
        let mut sent: Vec<(u32, u64)> =
            self.streams.iter().map(|(&n, s)| (n, s.next - 1)).collect();
        sent.sort_unstable();
        sent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skipped_numbers_are_counted_once_and_repeats_are_told_apart() {
        let mut gaps = Gaps::default();
        assert_eq!(gaps.observe(1, 7, 5, 0), Seen::First(0), "baseline");
        assert_eq!(gaps.observe(1, 7, 6, 0), Seen::Next(0));
        assert_eq!(gaps.observe(1, 7, 10, 0), Seen::Next(3));
        assert_eq!(gaps.observe(1, 7, 9, 0), Seen::Again, "sent again");
        assert_eq!(gaps.observe(1, 7, 10, 0), Seen::Again);
        assert_eq!(gaps.observe(1, 7, 11, 0), Seen::Next(0));
        assert_eq!(
            gaps.observe(1, 8, 4, 0),
            Seen::First(0),
            "another run starts afresh"
        );
        assert_eq!(
            gaps.observe(2, 7, 100, 0),
            Seen::First(0),
            "so does another node"
        );
        assert_eq!(gaps.observe(1, 8, 5, 0), Seen::Next(0));
        gaps.retire(1, 8);
        assert_eq!(
            gaps.observe(1, 7, 12, 0),
            Seen::First(0),
            "forgotten: a baseline"
        );
        assert_eq!(gaps.observe(1, 8, 6, 0), Seen::Next(0), "kept");
        assert_eq!(gaps.observe(2, 7, 100, 0), Seen::Again, "other nodes kept");
    }

    /// A sender's first frames to this run lost before any of its frames
    /// arrived: the first number it gave this run says how many.
    #[test]
    fn frames_lost_before_the_first_one_seen_are_counted_by_the_first_number() {
        let mut gaps = Gaps::default();
        assert_eq!(gaps.observe(2, 7, 920, 1), Seen::First(919));
        assert_eq!(gaps.observe(2, 7, 921, 1), Seen::Next(0));
        assert_eq!(gaps.observe(3, 7, 40, 40), Seen::First(0), "none lost");
        assert_eq!(gaps.observe(4, 7, 40, 0), Seen::First(0), "not known");
    }

    #[test]
    fn numbers_run_on_per_node_and_each_run_has_its_first() {
        let mut numbers = Numbers::default();
        assert_eq!(numbers.number(2, 0), (1, 1), "run not known yet");
        assert_eq!(numbers.number(2, 0), (2, 1));
        assert_eq!(numbers.number(2, 50), (3, 1), "the first run known: from 1");
        assert_eq!(numbers.number(2, 50), (4, 1));
        assert_eq!(numbers.number(3, 60), (1, 1));
        assert_eq!(numbers.number(2, 51), (5, 5), "node 2 restarted");
        assert_eq!(numbers.number(2, 0), (6, 0), "no longer from 1");
        assert_eq!(numbers.number(2, 51), (7, 5), "the same run");
        assert_eq!(
            (numbers.sent(2), numbers.sent(3), numbers.sent(4)),
            (7, 1, 0)
        );
    }

    #[test]
    fn confirmations_name_the_last_number_of_each_run() {
        let mut gaps = Gaps::default();
        gaps.observe(1, 7, 5, 0);
        gaps.observe(1, 7, 9, 0);
        gaps.observe(2, 8, 3, 0);
        assert_eq!(gaps.confirmations(), vec![(1, 7, 9), (2, 8, 3)]);
    }
}
