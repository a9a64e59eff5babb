//! A cluster of nodes, each sending its share of numbered messages to
//! every other node's recorder, paced so that no transport's backlog
//! overflows.

use std::time::{Duration, Instant};

use relay_nats::{LinkError, NatsTransport};
use sched::message::SendErrorKind;
use sched::prelude::*;

use crate::support::Seq;
use crate::tally::{total, Tally};

/// Messages from each node to each other node: 10 nodes × 9 others ×
/// 11 112 ≥ 1 000 000.
pub(crate) const PER_PAIR: u64 = 11_112;

/// Sends `count` numbered messages to `to` as sender `from`, up to
/// `batch` per step and a step per millisecond; a send the transport
/// refuses as full is retried at the next tick. Finishes with how many it
/// sent: all of them, or, if it `gives_up`, those before `to`'s node was
/// declared down.
pub(crate) struct Paced {
    pub(crate) to: Pid,
    pub(crate) from: u64,
    pub(crate) count: u64,
    pub(crate) next: u64,
    pub(crate) batch: u64,
    pub(crate) gives_up: bool,
}

const BATCH: u64 = 200;

/// The four-node run with a node killed: messages from each node to each
/// other, sent `KILL_BATCH` a millisecond (so that the run lasts long
/// enough to be cut short).
pub(crate) const KILL_PER_PAIR: u64 = 20_000;
pub(crate) const KILL_BATCH: u64 = 10;

impl sched::Process for Paced {
    type Done = Payload;
    fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        out.set_timer(Duration::from_millis(1), Tag(0));
        Ok(())
    }

    fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        let end = (self.next + self.batch).min(self.count + 1);
        while self.next < end {
            let seq = Seq {
                from: self.from,
                n: self.next,
            };
            match out.send(self.to, seq) {
                Ok(()) => self.next += 1,
                Err(e)
                    if self.gives_up
                        && matches!(
                            e.cause().and_then(|c| c.downcast_ref::<LinkError>()),
                            Some(LinkError::NodeDown(_))
                        ) =>
                {
                    out.finish(self.next - 1);
                    return Ok(());
                }
                // Full, or refused while the two nodes reset their
                // relations after one lost the other (a gap): retried.
                Err(e) if matches!(e.kind(), SendErrorKind::Full | SendErrorKind::Unreachable) => {
                    break
                }
                Err(e) => return Err(e.into()),
            }
        }
        if self.next > self.count {
            out.finish(self.count);
        } else {
            out.set_timer(Duration::from_millis(1), Tag(0));
        }
        Ok(())
    }
}

/// Starts node `me`'s senders, one per other node (`recorders[i]` is node
/// `i + 1`'s recorder); returns how many messages `me` should receive.
pub(crate) fn start(node: &Scheduler, me: u32, recorders: &[u64]) -> u64 {
    for (i, &recorder) in recorders.iter().enumerate() {
        let to_node = i as u32 + 1;
        if to_node == me {
            continue;
        }
        let paced = Paced {
            to: Pid::new(to_node, recorder),
            from: u64::from(me),
            count: PER_PAIR,
            next: 1,
            batch: BATCH,
            gives_up: false,
        };
        node.spawn(paced).expect("a sender starts");
    }
    PER_PAIR * (recorders.len() as u64 - 1)
}

/// Waits until `expected` messages are in and counted, and this node's
/// own share is published, or nothing has changed for ten seconds.
pub(crate) fn settle(tally: &Tally, expected: u64, transport: &NatsTransport) {
    let (mut last, mut since) = (0, Instant::now());
    loop {
        let stats = transport.stats();
        let received = total(tally);
        let now = received + stats.published;
        if received >= expected && stats.published >= expected && stats.delivered >= received {
            return;
        }
        if now != last {
            (last, since) = (now, Instant::now());
        } else if since.elapsed() > Duration::from_secs(10) {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Starts node `me`'s senders for the run with a node killed, one per
/// other node (`recorders[i]` is node `i + 1`'s recorder), each giving up
/// once its target's node is declared down.
pub(crate) fn start_until_down(
    node: &Scheduler,
    me: u32,
    recorders: &[u64],
) -> Vec<(u32, Completion)> {
    let mut senders = Vec::new();
    for (i, &recorder) in recorders.iter().enumerate() {
        let to_node = i as u32 + 1;
        if to_node == me {
            continue;
        }
        let paced = Paced {
            to: Pid::new(to_node, recorder),
            from: u64::from(me),
            count: KILL_PER_PAIR,
            next: 1,
            batch: KILL_BATCH,
            gives_up: true,
        };
        senders.push((to_node, node.spawn(paced).expect("a sender starts")));
    }
    senders
}

/// How many messages each sender of [`start_until_down`] sent, by target
/// node, once all have finished.
pub(crate) fn sent(senders: Vec<(u32, Completion)>) -> Vec<(u32, u64)> {
    senders
        .into_iter()
        .map(|(to, mut sender)| {
            let sent = sender
                .wait_timeout(Duration::from_secs(60))
                .expect("the sender ran");
            (to, *sent.downcast_ref::<u64>().expect("a count"))
        })
        .collect()
}
