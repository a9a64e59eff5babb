//! Sends between durable processes: one reliable, ordered channel per
//! (sender, receiver).
//!
//! Protocol:
//! 1. **Numbering.** A sender numbers its sends to each receiver 1, 2, 3,
//!    ... without gaps (`State::sends`, rebuilt by replay like the rest of
//!    its bookkeeping).
//! 2. **Outbox.** The sender's record carries its sends; the store keeps
//!    each in the outbox, keyed by (receiver, sender, number), until a
//!    record of the receiver takes it. A send is therefore durable before
//!    anyone sees it, and stays durable until its receiver's journal has
//!    it.
//! 3. **Paths.** A send reaches its receiver by whichever of these comes
//!    first, and possibly by several:
//!    - live, when the receiver runs on this node: early, as its record
//!      is queued (before it is durable: the receiver's own record, which
//!      takes it, is never written unless the sender's is, `commit.rs`),
//!      or when its record commits (a send that could not go early, or
//!      went early to a process that no longer has the key);
//!    - from the outbox when the receiver starts: [`Durability::spawn`]
//!      and [`Durability::recover`] read the outbox *after* the receiver's
//!      process is registered, so a send released while it was not yet
//!      reachable (committed before that release, hence before the read)
//!      is in what they read;
//!    - live from another node of a store a cluster shares, once
//!      [`Durability::listen`] runs: the store hands over every send
//!      another writer's record releases as it is written
//!      (`Store::watch_sends`), and those whose receiver runs here go to
//!      it ([`deliver_running`]);
//!    - from the outbox at any later `recover` (sends to a receiver on
//!      another node of a cluster store that does not listen, or to one
//!      that could not be resumed until its code was fixed).
//! 4. **Admission** (`State::admission`, [`Inbound::receive`]): the
//!    receiver takes exactly the sender's next number; a number at or
//!    below its mark is a copy and is dropped (counted in `duplicates`);
//!    a later number is held in memory until the gap fills (counted in
//!    `held`), then taken in order. Held sends are not journaled: their
//!    outbox entries keep them, so a crash loses nothing.
//! 5. **First contact.** A receiver that has never taken anything from a
//!    sender and sees its number `k > 1` asks the store whether that
//!    sender's outbox holds an earlier send to it: if so, `k` is held
//!    until it arrives; if not, the earlier numbers went to an incarnation
//!    of the same key that was forgotten (`Durability::forget` discards
//!    the outbox entries addressed to it), and `k` starts the channel.
//!    The store is asked only when every earlier send was durable as `k`
//!    left (`Envelope::prior_settled`); if `k - 1` went early to this
//!    same process, it is on its way and not yet in the outbox, so `k` is
//!    held without asking.
//! 6. **Discarding.** An outbox entry is removed when its receiver's
//!    record takes it, or when its receiver's journal has ended (by a
//!    recovery or `forget`). A send to a key that has no journal yet
//!    stays in the outbox and is delivered when a process of that key is
//!    spawned.
//!
//! So each send released by a committed record is taken exactly once, in
//! its sender's order, by the receiver's journal, whatever crashes and
//! restarts come between (tests: `crates/durable/tests/channel.rs`).
//!
//! [`Durability::spawn`]: crate::Durability::spawn
//! [`Durability::listen`]: crate::Durability::listen
//! [`Durability::recover`]: crate::Durability::recover

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use sched::engine::{AsContext, Context};

use crate::error::DurableError;
use crate::runner::{Envelope, Shared};
use crate::state::{Admission, State};
use crate::store::{Outgoing, Store};

/// A receiver's sends that arrived before an earlier send of the same
/// sender: per sender, by number.
#[derive(Default)]
pub(crate) struct Inbound {
    /// Per sender, by number: the body, and the sender's record it came
    /// early from, if it did.
    held: HashMap<Arc<str>, BTreeMap<u64, HeldSend>>,
}

/// A send held for an earlier one: its body, and the sender's (incarnation,
/// record) it came early from, if it did.
type HeldSend = (Vec<u8>, Option<(u64, u64)>);

/// A send admitted by [`Inbound::receive`], in the order to take it.
pub(crate) struct Admitted {
    pub(crate) from: Arc<str>,
    pub(crate) seq: u64,
    pub(crate) body: Vec<u8>,
    /// The sender's (incarnation, record) it came early from: the record
    /// that takes it must not be written unless that one is.
    pub(crate) after: Option<(u64, u64)>,
}

impl Inbound {
    /// Admits `envelope` to `receiver` (whose bookkeeping is `state`): the
    /// sends to take now, in order (it, then any held ones it unblocks),
    /// marked taken in `state`.
    pub(crate) fn receive(
        &mut self,
        state: &mut State,
        shared: &Shared,
        receiver: &str,
        envelope: Envelope,
    ) -> Vec<Admitted> {
        let Envelope {
            from,
            seq,
            body,
            after,
            prior_settled,
        } = envelope;
        match state.admission(&from, seq) {
            Admission::Copy => {
                shared.duplicates.fetch_add(1, Relaxed);
                return Vec::new();
            }
            Admission::Early { first_contact } => {
                // A send whose earlier one went early to this process is
                // not asked about: that one is on its way, and not in the
                // outbox until its record is durable.
                if !first_contact
                    || !prior_settled
                    || earlier_pending(&*shared.store, receiver, &from, seq)
                {
                    let held = self.held.entry(from).or_default();
                    if held.insert(seq, (body, after)).is_none() {
                        shared.held.fetch_add(1, Relaxed);
                    }
                    return Vec::new();
                }
                tracing::debug!(
                    receiver,
                    from = &*from,
                    seq,
                    "a first send numbered past 1: its earlier ones went to a forgotten process of this key"
                );
            }
            Admission::Next => {}
        }
        state.take(&from, seq);
        let mut taken = vec![Admitted {
            from: from.clone(),
            seq,
            body,
            after,
        }];
        if let Some(held) = self.held.get_mut(&from) {
            let mut next = seq + 1;
            // Copies of what was just taken are dropped with it.
            while let Some((&first, _)) = held.first_key_value() {
                if first > next {
                    break;
                }
                let (number, (body, after)) = held.pop_first().expect("a first entry");
                shared.held.fetch_sub(1, Relaxed);
                if number == next {
                    state.take(&from, number);
                    taken.push(Admitted {
                        from: from.clone(),
                        seq: number,
                        body,
                        after,
                    });
                    next += 1;
                } else {
                    shared.duplicates.fetch_add(1, Relaxed);
                }
            }
            if held.is_empty() {
                self.held.remove(&from);
            }
        }
        taken
    }

    /// How many sends are held, for the runner's end.
    pub(crate) fn len(&self) -> usize {
        self.held.values().map(BTreeMap::len).sum()
    }
}

/// Whether the outbox holds a send from `from` to `receiver` numbered
/// below `seq` (one still on its way). A store that cannot answer is taken
/// to say yes: holding is safe, taking could drop the earlier send.
fn earlier_pending(store: &dyn Store, receiver: &str, from: &str, seq: u64) -> bool {
    match store.outbox_holds_earlier(receiver, from, seq) {
        Ok(earlier) => earlier,
        Err(e) => {
            tracing::error!(
                receiver,
                from,
                seq,
                "the outbox could not be read; the send is held: {e}"
            );
            true
        }
    }
}

/// What [`deliver`] did with a list of outbox entries.
#[derive(Debug, Default)]
pub(crate) struct Delivery {
    /// Sent to their running receivers.
    pub(crate) sent: u64,
    /// Their receiver does not run here and has not ended: kept.
    pub(crate) waiting: u64,
    /// Their receiver has ended: removed from the outbox.
    pub(crate) discarded: u64,
}

/// Sends outbox entries to their receivers that run here; removes those
/// whose receiver's journal has ended; keeps the rest.
/// Hands each of `sends` whose receiver runs here to it, and leaves the
/// others to the outbox (a `spawn` or `recover` of their receiver reads
/// them there). Touches no store: it runs on a store's own thread
/// ([`Store::watch_sends`](crate::store::Store::watch_sends)). Returns
/// how many it handed over.
pub(crate) fn deliver_running(shared: &Shared, cx: &Context, sends: Vec<Outgoing>) -> u64 {
    let mut sent = 0;
    for send in sends {
        if let Some(pid) = shared.running_pid(&send.to) {
            let envelope = Envelope::durable(send.from.as_str().into(), send.seq, send.body);
            if cx.send(pid, envelope).is_ok() {
                sent += 1;
            }
        }
    }
    sent
}

pub(crate) fn deliver(
    shared: &Shared,
    cx: &impl AsContext,
    sends: Vec<Outgoing>,
) -> Result<Delivery, DurableError> {
    let cx = cx.context();
    let mut delivery = Delivery::default();
    let mut discard = Vec::new();
    let mut ended: HashMap<String, bool> = HashMap::new();
    for send in sends {
        let pid = shared.running_pid(&send.to);
        if let Some(pid) = pid {
            let envelope = Envelope::durable(send.from.as_str().into(), send.seq, send.body);
            if cx.send(pid, envelope).is_ok() {
                delivery.sent += 1;
                continue;
            }
            // It ended meanwhile: its journal says whether for good.
        }
        let over = match ended.get(&send.to) {
            Some(&over) => over,
            None => {
                let over = shared.store.ended(&send.to)? == Some(true);
                ended.insert(send.to.clone(), over);
                over
            }
        };
        if over {
            discard.push((send.to, send.from, send.seq));
        } else {
            delivery.waiting += 1;
        }
    }
    if !discard.is_empty() {
        delivery.discarded = discard.len() as u64;
        shared.store.discard(&discard)?;
    }
    Ok(delivery)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Append, Journal, MemoryStore};

    /// A memory store whose `outbox_to` fails the test: asking whether a
    /// sender has an earlier send on its way must not read the receiver's
    /// whole outbox. After a restart it is asked once per sender whose
    /// message arrives first, and reading everything each time made the
    /// first run after a kill of 10 000 workflows feeding one counter
    /// read millions of entries (it did not finish in ten minutes).
    struct NoScan(MemoryStore);

    impl Store for NoScan {
        fn append(&self, batch: &[Append]) -> Result<Vec<String>, DurableError> {
            self.0.append(batch)
        }
        fn running(&self) -> Result<Vec<Journal>, DurableError> {
            self.0.running()
        }
        fn journal(&self, key: &str) -> Result<Option<Journal>, DurableError> {
            self.0.journal(key)
        }
        fn keys(&self) -> Result<Vec<(String, bool)>, DurableError> {
            self.0.keys()
        }
        fn contains(&self, key: &str) -> Result<bool, DurableError> {
            self.0.contains(key)
        }
        fn forget(&self, key: &str) -> Result<bool, DurableError> {
            self.0.forget(key)
        }
        fn outbox(&self) -> Result<Vec<Outgoing>, DurableError> {
            panic!("the whole outbox was read")
        }
        fn outbox_to(&self, key: &str) -> Result<Vec<Outgoing>, DurableError> {
            panic!("every send to {key} was read")
        }
        fn outbox_holds_earlier(
            &self,
            to: &str,
            from: &str,
            seq: u64,
        ) -> Result<bool, DurableError> {
            self.0.outbox_holds_earlier(to, from, seq)
        }
        fn discard(&self, entries: &[(String, String, u64)]) -> Result<(), DurableError> {
            self.0.discard(entries)
        }
        fn size(&self) -> Result<u64, DurableError> {
            self.0.size()
        }
    }

    fn send(from: &str, to: &str, seq: u64) -> Outgoing {
        Outgoing {
            from: from.to_owned(),
            to: to.to_owned(),
            seq,
            body: Vec::new(),
        }
    }

    #[test]
    fn asking_for_an_earlier_send_looks_up_the_senders_range_alone() {
        let store = NoScan(MemoryStore::new());
        let record = Append {
            key: "w1".to_owned(),
            seq: 0,
            record: b"w1".to_vec(),
            created: Some(crate::store::Created {
                kind: "workflow".to_owned(),
                args: Vec::new(),
            }),
            ended: false,
            sent: vec![send("w1", "counter", 3), send("w2", "counter", 1)],
            taken: Vec::new(),
            snapshot: None,
        };
        store.append(&[record]).unwrap();
        assert!(!earlier_pending(&store, "counter", "w1", 3));
        assert!(earlier_pending(&store, "counter", "w1", 4));
        assert!(!earlier_pending(&store, "counter", "w3", 9));
        assert!(earlier_pending(&store, "counter", "w2", 2));
    }
}
