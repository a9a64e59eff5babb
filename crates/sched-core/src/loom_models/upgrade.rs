//! Model of the flag that lets an upgrade ordered from outside travel as
//! an ordinary event (`record/mailbox.rs`, `engine/upgrade.rs`): whenever
//! the owner drains an order, it sees the flag set, so it always looks for
//! the order and never hands it to a step; at most one order is in the
//! queue at a time; and every order a caller queued is taken exactly once.

use loom::thread;
use relay::{Package, Pid};

use super::harness::Inert;
use crate::contract::event::Event;
use crate::record::{Record, RecordRef};

/// Stands for `UpgradeOrder` (which carries a process and closes it).
struct Order;

fn is_order(event: &Event) -> bool {
    matches!(event, Event::Message(p) if p.payload::<Order>().is_some())
}

/// What the worker does after a drain: take the order if the flag says
/// one may be there. Returns how many orders it took.
fn take_orders(record: &Record) -> usize {
    let mut events = Vec::new();
    // SAFETY: the model's main thread is the process's only owner.
    unsafe { record.with_body(|_| record.drain_events(&mut events)) };
    let flagged = record.mailbox.upgrade_ordered();
    let orders = events.iter().filter(|e| is_order(e)).count();
    assert!(orders <= 1, "one order at a time");
    if orders == 1 {
        assert!(flagged, "a drained order always finds its flag");
        record.mailbox.release_upgrade();
    }
    orders
}

#[test]
fn every_order_is_taken_once_and_always_found_by_its_flag() {
    loom::model(|| {
        let record = RecordRef::new(Pid::local(1), Inert);
        let callers: Vec<_> = (0..2)
            .map(|_| {
                let record = record.clone();
                thread::spawn(move || {
                    if !record.mailbox.claim_upgrade() {
                        return 0;
                    }
                    let order = Package::new(Pid::OUTSIDE, record.pid, Order);
                    assert!(record.deliver(Event::Message(order)).is_ok());
                    1
                })
            })
            .collect();
        // Without this yield, loom never ran a caller's whole push before
        // the first drain here: that drain always found nothing (checked),
        // so the flag was never tested against a drained order.
        thread::yield_now();
        let mut taken = take_orders(&record);
        taken += take_orders(&record);
        let queued: usize = callers.into_iter().map(|c| c.join().unwrap()).sum();
        taken += take_orders(&record);
        assert!(queued >= 1, "the flag is free at first");
        assert_eq!(taken, queued, "each queued order taken exactly once");
        assert!(!record.mailbox.upgrade_ordered(), "released after the last");
    });
}
