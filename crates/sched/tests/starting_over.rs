//! A process that starts over: `Output::cancel_pending` leaves no timer,
//! monitor or ask of before reaching a later step, and `Output::reset`
//! drops the step's yields.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use sched::command::{Command, CommandId, Completer, Rejected};
use sched::prelude::*;

const WAIT: Duration = Duration::from_secs(10);
const WORK: CommandId = CommandId(1);

/// Never answers, ends when told.
struct Silent;

impl Process for Silent {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            if matches!(event, Event::Message(_) | Event::Cancel) {
                out.finish(());
            }
        }
        Ok(())
    }
}

/// Sets a timer, monitors `peer`, asks `peer`, yields a command; then
/// cancels all that and resets; then ends `peer` and waits 100 ms on a new
/// timer, collecting every event it gets meanwhile.
struct StartsOver {
    peer: Pid,
    seen: Vec<String>,
}

impl Process for StartsOver {
    type Done = Payload;
    fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        out.set_timer(Duration::ZERO, Tag(1));
        out.monitor(self.peer);
        out.ask(
            self.peer,
            Box::new("anyone?") as Payload,
            Duration::from_millis(1),
        )?;
        out.yield_command(WORK, Tag(2), Box::new(()));
        out.cancel_pending();
        out.reset();
        // The peer ends now: a monitor still set would report it.
        out.send(self.peer, "end")?;
        out.set_timer(Duration::from_millis(100), Tag(9));
        Ok(())
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            match event {
                Event::Timer { tag: Tag(9), .. } => {
                    out.finish(std::mem::take(&mut self.seen));
                }
                other => self.seen.push(format!("{other:?}")),
            }
        }
        Ok(())
    }
}

#[test]
fn nothing_cancelled_or_reset_reaches_a_later_step() {
    let handled = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&handled);
    let scheduler = Scheduler::builder()
        .workers(2)
        .handler(
            WORK,
            move |_: Command, done: Completer| -> Result<(), Rejected> {
                counter.fetch_add(1, SeqCst);
                let _ = done.complete(Box::new(()));
                Ok(())
            },
        )
        .build();
    scheduler.start();
    let peer = scheduler.spawn(Silent).unwrap();
    let process = StartsOver {
        peer: peer.pid(),
        seen: Vec::new(),
    };
    let seen = scheduler.spawn(process).unwrap().wait().unwrap();
    let seen = seen.downcast::<Vec<String>>().unwrap();
    assert!(seen.is_empty(), "events of before the reset: {seen:?}");
    assert!(peer.wait().is_ok(), "the peer did end");
    assert_eq!(
        handled.load(SeqCst),
        0,
        "the reset yield was never dispatched"
    );
    scheduler.shutdown(WAIT);
}
