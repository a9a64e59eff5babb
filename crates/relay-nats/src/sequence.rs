//! Gap detection: each transport numbers the frames it sends to each node
//! (1, 2, 3, ...), under an incarnation number of its own (random per
//! transport); a receiver that
//! sees a number skipped counts the skipped frames as lost.

use std::collections::HashMap;

/// Per sending transport (its node, from the subject, and its
/// incarnation): the last number seen. The sender's node and incarnation,
/// not the source PID's node, name the stream: messages sent from outside
/// any process carry [`Pid::OUTSIDE`](relay::Pid::OUTSIDE) as their
/// source, on node 0.
#[derive(Debug, Default)]
pub(crate) struct Gaps {
    last: HashMap<(u32, u64), u64>,
}

/// What a frame's number says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Seen {
    /// The first from this transport: the baseline.
    First,
    /// The next one, after this many skipped (0: none).
    Next(u64),
    /// Not after the last one seen: core NATS does not reorder or repeat
    /// one connection's messages, so this frame was sent again (a replay).
    Again,
}

impl Gaps {
    /// Records frame `seq` of transport `incarnation` of node `node`. The
    /// first frame seen from a transport sets the baseline (what was sent
    /// before this receiver was listening is not counted).
    pub(crate) fn observe(&mut self, node: u32, incarnation: u64, seq: u64) -> Seen {
        let Some(last) = self.last.get_mut(&(node, incarnation)) else {
            self.last.insert((node, incarnation), seq);
            return Seen::First;
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
    pub(crate) fn confirmations(&self) -> Vec<(u32, u64, u64)> {
        let mut seen: Vec<(u32, u64, u64)> = self
            .last
            .iter()
            .map(|(&(node, incarnation), &seq)| (node, incarnation, seq))
            .collect();
        seen.sort_unstable();
        seen
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

/// The next number for each target node, on the sending side.
#[derive(Debug, Default)]
pub(crate) struct Numbers {
    next: HashMap<u32, u64>,
}

impl Numbers {
    /// The number the next frame to `node` carries.
    pub(crate) fn peek(&mut self, node: u32) -> u64 {
        *self.next.entry(node).or_insert(1)
    }

    /// The frame to `node` was published: move on.
    pub(crate) fn advance(&mut self, node: u32) {
        *self.next.entry(node).or_insert(1) += 1;
    }

    /// How many frames were numbered for `node` so far (the last number).
    pub(crate) fn sent(&self, node: u32) -> u64 {
        self.next.get(&node).map_or(0, |next| next - 1)
    }

    /// The last number of every node something was numbered for.
    pub(crate) fn all_sent(&self) -> Vec<(u32, u64)> {
        let mut sent: Vec<(u32, u64)> = self.next.iter().map(|(&n, &next)| (n, next - 1)).collect();
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
        assert_eq!(gaps.observe(1, 7, 5), Seen::First, "baseline");
        assert_eq!(gaps.observe(1, 7, 6), Seen::Next(0));
        assert_eq!(gaps.observe(1, 7, 10), Seen::Next(3));
        assert_eq!(gaps.observe(1, 7, 9), Seen::Again, "sent again");
        assert_eq!(gaps.observe(1, 7, 10), Seen::Again);
        assert_eq!(gaps.observe(1, 7, 11), Seen::Next(0));
        assert_eq!(
            gaps.observe(1, 8, 4),
            Seen::First,
            "another run starts afresh"
        );
        assert_eq!(gaps.observe(2, 7, 100), Seen::First, "so does another node");
        assert_eq!(gaps.observe(1, 8, 5), Seen::Next(0));
        gaps.retire(1, 8);
        assert_eq!(gaps.observe(1, 7, 12), Seen::First, "forgotten: a baseline");
        assert_eq!(gaps.observe(1, 8, 6), Seen::Next(0), "kept");
        assert_eq!(gaps.observe(2, 7, 100), Seen::Again, "other nodes kept");
    }

    #[test]
    fn numbers_advance_per_node() {
        let mut numbers = Numbers::default();
        assert_eq!(numbers.peek(2), 1);
        numbers.advance(2);
        assert_eq!(numbers.peek(2), 2);
        assert_eq!(numbers.peek(3), 1);
        assert_eq!(
            (numbers.sent(2), numbers.sent(3), numbers.sent(4)),
            (1, 0, 0)
        );
    }

    #[test]
    fn confirmations_name_the_last_number_of_each_run() {
        let mut gaps = Gaps::default();
        gaps.observe(1, 7, 5);
        gaps.observe(1, 7, 9);
        gaps.observe(2, 8, 3);
        assert_eq!(gaps.confirmations(), vec![(1, 7, 9), (2, 8, 3)]);
    }
}
