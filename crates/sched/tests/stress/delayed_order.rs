//! The order check of delayed messages: from one sender to one receiver,
//! those whose deadlines are certainly non-decreasing in send order
//! arrive in that order, and each at the process it was sent to. A pure
//! function over plain records, so the test below can break it.

use std::collections::HashMap;
use std::time::Instant;

use sched::Pid;

use crate::violations::Violations;

/// A message `send(After(..))` accepted.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DelayedSent {
    pub(crate) id: u64,
    pub(crate) from: Pid,
    pub(crate) to: Pid,
    /// Its deadline lies between these (the delay added to the time just
    /// before and just after the call).
    pub(crate) earliest: Instant,
    pub(crate) latest: Instant,
}

/// Checks that every delayed message received reached the process it was
/// sent to, and that delayed messages from one sender to one receiver
/// with certainly non-decreasing deadlines arrived in the order sent
/// (`received` holds each receiver's delayed message ids in the order they
/// arrived). Returns how many ordered pairs it checked.
pub(crate) fn check_delayed_order(
    sent: &[DelayedSent],
    received: &[(Pid, Vec<u64>)],
    violations: &mut Violations,
) -> u64 {
    let by_id: HashMap<u64, &DelayedSent> = sent.iter().map(|d| (d.id, d)).collect();
    let mut pairs = 0;
    for (receiver, ids) in received {
        // Per sender, what arrived so far, in order.
        let mut so_far: HashMap<Pid, Vec<&DelayedSent>> = HashMap::new();
        for id in ids {
            let Some(&b) = by_id.get(id) else {
                violations.push(format!(
                    "delayed message {id} received by {receiver}, never sent with send_after"
                ));
                continue;
            };
            if b.to != *receiver {
                violations.push(format!(
                    "delayed message {id} to {} was received by {receiver}",
                    b.to
                ));
            }
            let earlier = so_far.entry(b.from).or_default();
            for a in earlier.iter() {
                // `b` was sent before `a` (ids grow in one sender's send
                // order) with a deadline no later than `a`'s: it must have
                // arrived first.
                if b.id < a.id && b.latest <= a.earliest {
                    violations.push(format!(
                        "delayed messages from {} to {receiver}: {} (deadline no later) \
                         arrived after {}, sent after it",
                        b.from, b.id, a.id
                    ));
                }
                let (first, second) = if a.id < b.id { (*a, b) } else { (b, *a) };
                pairs += u64::from(first.latest <= second.earliest);
            }
            earlier.push(b);
        }
    }
    pairs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delayed_messages_out_of_deadline_order_are_caught() {
        use std::time::Duration;
        let t = Instant::now();
        let ms = Duration::from_millis;
        let (s, r) = (Pid::local(1), Pid::local(2));
        let sent = |id, earliest, latest| DelayedSent {
            id,
            from: s,
            to: r,
            earliest: t + earliest,
            latest: t + latest,
        };
        let all = [
            sent(1, ms(1), ms(2)),
            // Due no earlier than 1: must follow it.
            sent(2, ms(2), ms(3)),
            // Its deadline may be before 2's: either order is fine.
            sent(3, ms(1), ms(4)),
        ];
        for order in [vec![1, 2, 3], vec![1, 3, 2], vec![3, 1, 2]] {
            let mut v = Violations::default();
            check_delayed_order(&all, &[(r, order.clone())], &mut v);
            assert!(v.is_empty(), "{order:?}: {}", v.report());
        }
        let mut v = Violations::default();
        assert_eq!(check_delayed_order(&all, &[(r, vec![2, 1])], &mut v), 1);
        assert!(v.mentions("arrived after"), "got {}", v.report());
        let mut v = Violations::default();
        check_delayed_order(&all, &[(Pid::local(3), vec![1])], &mut v);
        assert!(v.mentions("was received by"), "got {}", v.report());
    }
}
