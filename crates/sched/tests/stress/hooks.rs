//! The scheduler a round runs on: the stress handlers, and the hooks
//! that record every outcome and every dead letter for the checker.

use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;

use sched::prelude::*;

use crate::check::summary;
use crate::handlers::register;
use crate::notices::{DownRec, ExitRec, ReplyRec, RequestRec};
use crate::peers::answer;
use crate::process::Msg;
use crate::shared::{lock, DeadLetter, Shared};

/// A scheduler with the stress handlers and the hooks the checker reads.
pub(crate) fn build(workers: usize, mailbox: Option<usize>, shared: &Arc<Shared>) -> Scheduler {
    let on_complete = shared.clone();
    let on_dead_letter = shared.clone();
    let mut builder = Scheduler::builder()
        .workers(workers)
        .thread_name("stress-worker")
        .on_complete(move |_cx, pid, outcome| {
            lock(&on_complete.ended)
                .entry(pid.id())
                .or_default()
                .push(summary(outcome));
        })
        .on_dead_letter(move |_cx, pid, event| {
            let letter = match event {
                Event::Message(package) => {
                    let Some(msg) = package.payload::<Msg>() else {
                        return on_dead_letter
                            .violation(format!("{pid}: a dead letter that is not a Msg"));
                    };
                    let letter = DeadLetter::Message {
                        pid,
                        id: msg.id,
                        to: msg.to,
                    };
                    if msg.delayed && msg.solicited {
                        // Its target still waits for it if it has not
                        // ended (a delayed message that found a full
                        // mailbox): someone sends another.
                        on_dead_letter.ask(msg.to, 1);
                    }
                    let armed = msg.bomb.armed();
                    // Recorded before the package drops: an armed bomb goes
                    // off here, and the scheduler must catch it.
                    lock(&on_dead_letter.dead).push(letter);
                    if armed {
                        on_dead_letter.bombs_dead.fetch_add(1, SeqCst);
                    }
                    drop(package);
                    return;
                }
                Event::Completion { tag, .. } => DeadLetter::Completion { pid, tag: tag.0 },
                Event::Down(down) => {
                    let serial = lock(&on_dead_letter.monitor_serials)
                        .get(&down.monitor)
                        .copied();
                    let Some(serial) = serial else {
                        return on_dead_letter
                            .violation(format!("{pid}: a dead-lettered down of no monitor"));
                    };
                    DeadLetter::Down(DownRec {
                        serial,
                        at: pid,
                        target: down.pid,
                        reason: down.reason,
                        dead: true,
                    })
                }
                Event::Exit {
                    pid: from, reason, ..
                } => DeadLetter::Exit(ExitRec {
                    at: pid,
                    from,
                    reason,
                    dead: true,
                }),
                Event::Request(request) => {
                    // A request with an asker goes back to it; one reaches
                    // the hook only when its asker is gone.
                    let Some(&serial) = request.payload::<u64>() else {
                        return on_dead_letter
                            .violation(format!("{pid}: a dead-lettered request of no ask"));
                    };
                    DeadLetter::Request(RequestRec {
                        serial,
                        at: pid,
                        dead: true,
                    })
                }
                Event::Reply {
                    id,
                    result,
                    question,
                } => {
                    let serial = lock(&on_dead_letter.ask_serials).get(&id).copied();
                    let Some(serial) = serial else {
                        return on_dead_letter
                            .violation(format!("{pid}: a dead-lettered reply of no ask"));
                    };
                    DeadLetter::Reply(ReplyRec {
                        serial,
                        at: pid,
                        answer: answer(result, question),
                        dead: true,
                    })
                }
                Event::Timer { tag, .. } => DeadLetter::Timer { pid, tag: tag.0 },
                Event::Cancel => {
                    return on_dead_letter
                        .violation(format!("{pid}: a cancel event passed as a dead letter"))
                }
                other => {
                    return on_dead_letter
                        .violation(format!("{pid}: an unexpected dead letter {other:?}"))
                }
            };
            lock(&on_dead_letter.dead).push(letter);
        });
    if let Some(capacity) = mailbox {
        builder = builder.mailbox_capacity(capacity);
    }
    register(builder, shared).build()
}
