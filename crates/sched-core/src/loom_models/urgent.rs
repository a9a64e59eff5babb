//! Model of the sticky bit that tells a process's owner to look for
//! urgent messages in what it drains (`record/mailbox.rs`,
//! `contract/urgent.rs`): senders set it before they queue, so whenever the
//! owner drains an urgent message it sees the bit, and the message is
//! always unwrapped and put first, never handed to a step as the wrapper.

use loom::thread;
use relay::{Package, Pid};

use super::harness::Inert;
use crate::contract::event::Event;
use crate::contract::urgent::{is_urgent, Urgent};
use crate::record::{Record, RecordRef};

/// What the worker does after a drain: checks that the bit is set if an
/// urgent message was drained. Returns how many messages it drained.
fn drain(record: &Record) -> usize {
    let mut events = Vec::new();
    // SAFETY: the model's main thread is the process's only owner.
    unsafe { record.with_body(|_| record.drain_events(&mut events)) };
    let seen = record.mailbox.urgent_seen();
    let urgent = events
        .iter()
        .filter(|e| matches!(e, Event::Message(p) if is_urgent(p)))
        .count();
    if urgent > 0 {
        assert!(seen, "a drained urgent message always finds the bit");
    }
    events.len()
}

#[test]
fn a_drained_urgent_message_always_finds_the_bit() {
    loom::model(|| {
        let record = RecordRef::new(Pid::local(1), Inert);
        // One urgent sender against the owner's drain (a second, ordinary
        // sender made the model take minutes and adds nothing to the
        // property: its push does not touch the bit).
        let sender = {
            let record = record.clone();
            thread::spawn(move || {
                let package = Package::new(Pid::OUTSIDE, record.pid, Urgent::new(1u8));
                // What `deliver_now` does: the bit, then the push.
                if is_urgent(&package) {
                    record.mailbox.mark_urgent();
                }
                assert!(record.deliver(Event::Message(package)).is_ok());
            })
        };
        thread::yield_now();
        let mut drained = drain(&record);
        sender.join().unwrap();
        drained += drain(&record);
        assert_eq!(drained, 1, "the message drained once");
        assert!(record.mailbox.urgent_seen(), "the bit stays");
    });
}
