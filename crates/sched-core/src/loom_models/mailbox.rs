//! Model of the mailbox word's message count (`record/mailbox.rs`) when
//! the engine counts messages (`count_mailboxes`): senders count a message
//! before pushing it, the owner takes back what it drained, and shutdown's
//! cancel flag, set meanwhile, survives both. The count never goes below
//! what is queued and ends at zero once everything is drained.

use loom::thread;
use relay::{Package, Pid};

use super::harness::Inert;
use crate::contract::event::Event;
use crate::record::{Record, RecordRef};

/// What the worker does with a drain when messages are counted: takes
/// back as many as it drained. Returns how many it drained.
fn drain_and_release(record: &Record) -> usize {
    let mut events = Vec::new();
    // SAFETY: the model's main thread is the process's only owner.
    unsafe { record.with_body(|_| record.drain_events(&mut events)) };
    let messages = events
        .iter()
        .filter(|e| matches!(e, Event::Message(_)))
        .count();
    if messages > 0 {
        // Each drained message was counted before it was pushed, and the
        // push happened before the drain: all of them are in the count.
        assert!(
            record.mailbox.depth() as usize >= messages,
            "a drained message was not counted"
        );
        record.mailbox.release(messages);
    }
    messages
}

#[test]
fn the_count_follows_the_messages_and_leaves_the_flags_alone() {
    loom::model(|| {
        let record = RecordRef::new(Pid::local(1), Inert);
        let senders: Vec<_> = (0..2)
            .map(|i| {
                let record = record.clone();
                thread::spawn(move || {
                    record.mailbox.count();
                    let message = Package::new(Pid::OUTSIDE, record.pid, i);
                    assert!(record.deliver(Event::Message(message)).is_ok());
                    if i == 1 {
                        // Shutdown's cancel, racing the owner's release.
                        assert!(record.mailbox.claim_cancel());
                    }
                })
            })
            .collect();
        // Without this yield, loom never ran a sender's whole push before
        // the owner's first drain (checked: that drain then always found
        // nothing, and a release that loses a concurrent count passed).
        thread::yield_now();
        let mut drained = drain_and_release(&record);
        for sender in senders {
            sender.join().unwrap();
        }
        drained += drain_and_release(&record);
        assert_eq!(drained, 2, "both messages drained");
        assert_eq!(record.mailbox.depth(), 0, "nothing left counted");
        assert!(!record.mailbox.claim_cancel(), "the cancel flag survived");
        assert!(
            !record.mailbox.upgrade_ordered(),
            "no upgrade flag appeared"
        );
    });
}
