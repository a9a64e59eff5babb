//! Gap detection: each transport numbers the frames it sends to each node
//! (1, 2, 3, ...), under an incarnation number of its own (random per
//! transport); a receiver that
//! sees a number skipped counts the skipped frames as lost.

use std::collections::HashMap;

/// Per sending transport (by incarnation): the last number seen. The
/// incarnation, not the source PID's node, names the stream: messages sent
/// from outside any process carry [`Pid::OUTSIDE`](relay::Pid::OUTSIDE)
/// as their source, on node 0.
#[derive(Debug, Default)]
pub(crate) struct Gaps {
    last: HashMap<u64, u64>,
}

impl Gaps {
    /// Records frame `seq` of the transport `incarnation`; returns how
    /// many of its frames were skipped before it. The first frame seen
    /// from an incarnation sets the baseline (what was sent before this
    /// receiver was listening is not counted).
    pub(crate) fn observe(&mut self, incarnation: u64, seq: u64) -> u64 {
        let last = self.last.entry(incarnation).or_insert(seq);
        if seq > *last {
            let missing = seq - *last - 1;
            *last = seq;
            missing
        } else {
            // The baseline, or late: core NATS does not reorder one
            // connection's messages, so this is the baseline.
            0
        }
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skipped_numbers_are_counted_once() {
        let mut gaps = Gaps::default();
        assert_eq!(gaps.observe(7, 5), 0, "baseline");
        assert_eq!(gaps.observe(7, 6), 0);
        assert_eq!(gaps.observe(7, 10), 3);
        assert_eq!(gaps.observe(7, 9), 0, "late frames are not gaps");
        assert_eq!(gaps.observe(7, 11), 0);
        assert_eq!(gaps.observe(8, 4), 0, "another sender starts afresh");
        assert_eq!(gaps.observe(8, 5), 0);
    }

    #[test]
    fn numbers_advance_per_node() {
        let mut numbers = Numbers::default();
        assert_eq!(numbers.peek(2), 1);
        numbers.advance(2);
        assert_eq!(numbers.peek(2), 2);
        assert_eq!(numbers.peek(3), 1);
    }
}
