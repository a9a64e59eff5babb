//! Typed addresses between processes, and the context handle from a step,
//! a handler and a hook.

use sched::command::{Command, CommandId, Completer, Rejected};
use sched::message::Addr;
use sched::prelude::*;
use sched::process::Accepts;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(10);

/// Replies to every `Ping` with the number it carries plus one; a reply
/// the engine refuses (its addressee does not exist) is counted, and the
/// ponger keeps running.
#[derive(Default)]
struct Ponger {
    refused: Arc<AtomicUsize>,
}

struct Ping {
    reply_to: Addr<u64>,
    n: u64,
}

impl Accepts for Ponger {
    type Message = Ping;
}

impl Process for Ponger {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events.typed::<Self>() {
            match event {
                Event::Message(ping) if out.send(ping.reply_to, ping.n + 1).is_err() => {
                    self.refused.fetch_add(1, SeqCst);
                }
                Event::Cancel => out.finish(()),
                _ => {}
            }
        }
        Ok(())
    }
}

/// Spawns a ponger, plays `rounds` rounds with it through typed addresses,
/// then ends with the last number.
struct Pinger {
    rounds: u64,
    ponger: Option<Addr<Ping>>,
}

impl Accepts for Pinger {
    type Message = u64;
}

impl Process for Pinger {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        let me: Addr<u64> = Addr::from_pid(out.pid());
        let ponger = match self.ponger {
            Some(ponger) => ponger,
            None => {
                let ponger = out.spawn(Ponger::default())?.addr::<Ponger>();
                self.ponger = Some(ponger);
                out.send(ponger, Ping { reply_to: me, n: 0 })?;
                ponger
            }
        };
        for event in events.typed::<Self>() {
            if let Event::Message(n) = event {
                if n == self.rounds {
                    out.context().terminate(ponger.pid())?;
                    out.finish(n);
                    return Ok(());
                }
                out.send(ponger, Ping { reply_to: me, n })?;
            }
        }
        Ok(())
    }
}

#[test]
fn typed_addresses_carry_messages_between_processes() {
    let scheduler = Scheduler::builder().workers(2).build();
    scheduler.start();
    let mut done = scheduler
        .spawn(Pinger {
            rounds: 1_000,
            ponger: None,
        })
        .unwrap();
    let result = done.wait_timeout(WAIT).expect("finished");
    assert_eq!(result.downcast_ref::<u64>(), Some(&1_000));
    let report = scheduler.shutdown(WAIT);
    assert_eq!(report.forced, 0);
}

#[test]
fn a_typed_message_from_outside_reaches_the_process_and_a_failed_one_comes_back() {
    let scheduler = Scheduler::builder().workers(1).build();
    scheduler.start();
    let refused = Arc::new(AtomicUsize::new(0));
    let done = scheduler
        .spawn(Ponger {
            refused: refused.clone(),
        })
        .unwrap();
    let ponger = done.addr::<Ponger>();
    let nobody: Addr<u64> = Addr::from_pid(Pid::local(999_999));
    let err = scheduler
        .send(
            ponger,
            Ping {
                reply_to: nobody,
                n: 1,
            },
        )
        .err();
    assert!(err.is_none(), "the ponger is alive");
    // A send from outside to nobody is refused with its package back.
    let err = scheduler.send(nobody, 5).unwrap_err();
    assert_eq!(err.into_package().downcast::<u64>().ok(), Some(5));
    // The ponger's reply goes nowhere and is refused too; once the ponger
    // has seen that refusal, it is still running.
    let deadline = std::time::Instant::now() + WAIT;
    while refused.load(SeqCst) == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the ping never stepped"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(scheduler.stats().live_processes, 1);
    scheduler.shutdown(WAIT);
}

const ECHO: CommandId = CommandId(1);

/// Yields one command and ends with its result.
struct Asker;

impl Process for Asker {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        let mut asked = false;
        for event in events {
            if let Event::Completion { result, .. } = event {
                out.finish(result?);
                return Ok(());
            }
            asked = true;
        }
        // Nothing is yielded above, so this step has yielded nothing yet
        // (what `yield_count() == 0` checked).
        if !asked {
            out.yield_command(ECHO, Tag(1), Box::new(7_u32));
        }
        Ok(())
    }
}

/// Counts the messages it gets, until cancelled.
struct Inbox(Arc<AtomicUsize>);

impl Process for Inbox {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            match event {
                Event::Message(_) => {
                    self.0.fetch_add(1, SeqCst);
                }
                Event::Cancel => out.finish(()),
                _ => {}
            }
        }
        Ok(())
    }
}

#[test]
fn handlers_and_hooks_reach_the_scheduler_through_their_context() {
    let received = Arc::new(AtomicUsize::new(0));
    let inbox_pid = Arc::new(AtomicUsize::new(0));
    let hook_inbox = inbox_pid.clone();
    let handler_inbox = inbox_pid.clone();
    let scheduler = Scheduler::builder()
        .workers(2)
        .handler(
            ECHO,
            move |cmd: Command, mut done: Completer| -> Result<(), Rejected> {
                let to = Pid::local(handler_inbox.load(SeqCst) as u64);
                if let Err(e) = done.context().send(to, "from the handler") {
                    return Err(done.reject(e.to_string()));
                }
                let _ = done.complete(cmd.data);
                Ok(())
            },
        )
        .on_complete(move |cx, pid, _outcome| {
            let inbox = Pid::local(hook_inbox.load(SeqCst) as u64);
            if pid != inbox {
                let _ = cx.send(inbox, "from the hook");
            }
        })
        .build();
    scheduler.start();
    let inbox = scheduler.spawn(Inbox(received.clone())).unwrap();
    inbox_pid.store(inbox.pid().id() as usize, SeqCst);
    let mut asked = scheduler.spawn(Asker).unwrap();
    let result = asked.wait_timeout(WAIT).expect("finished");
    assert_eq!(result.downcast_ref::<u32>(), Some(&7));
    // One message from the handler, one from the hook for the asker.
    let deadline = std::time::Instant::now() + WAIT;
    while received.load(SeqCst) < 2 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(received.load(SeqCst), 2);
    scheduler.shutdown(WAIT);
}

/// Asks for a shutdown from inside its first step.
struct Stopper;

impl Process for Stopper {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            if let Event::Cancel = event {
                out.finish("cancelled");
                return Ok(());
            }
        }
        assert!(out.context().request_shutdown(WAIT));
        assert!(!out.context().request_shutdown(WAIT), "only once");
        Ok(())
    }
}

#[test]
fn a_step_can_shut_the_scheduler_down() {
    let scheduler = Scheduler::builder().workers(2).build();
    scheduler.start();
    let others: Vec<_> = (0..10)
        .map(|_| scheduler.spawn(Inbox(Arc::default())).unwrap())
        .collect();
    let stopper = scheduler.spawn(Stopper).unwrap();
    let report = scheduler.engine().wait_for_shutdown();
    assert_eq!(report.ended_gracefully, 11);
    assert_eq!(report.forced, 0);
    assert_eq!(
        stopper.wait().unwrap().downcast_ref::<&str>(),
        Some(&"cancelled")
    );
    for other in others {
        assert!(other.wait().is_ok());
    }
    // The owner's own shutdown returns the same report.
    assert_eq!(scheduler.shutdown(Duration::ZERO), report);
}

/// Counts its `Tally` messages and every other event it reads typed; ends
/// at `Cancel` with (messages summed, other events seen).
#[derive(Default)]
struct Tallier {
    sum: u64,
    timers: u64,
    answered: u64,
}

struct Tally(u64);

/// What the tallier has summed so far, and the timers it has seen.
struct Sum;
impl Question for Sum {
    type Answer = (u64, u64);
}

impl Accepts for Tallier {
    type Message = Tally;
}

impl Process for Tallier {
    type Done = Payload;
    fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        out.set_timer(Duration::from_millis(1), Tag(7));
        Ok(())
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events.typed::<Self>() {
            match event {
                Event::Message(Tally(n)) => self.sum += n,
                Event::Timer { tag: Tag(7), .. } => self.timers += 1,
                Event::Request(request) => {
                    if let Ok((Sum, answer)) = request.take::<Sum>() {
                        self.answered += 1;
                        answer.answer((self.sum, self.timers));
                    }
                }
                Event::Cancel => out.finish((self.sum, self.timers, self.answered)),
                _ => {}
            }
        }
        Ok(())
    }
}

/// A value whose drop is counted, and panics when asked to.
struct Stranger {
    drops: Arc<AtomicUsize>,
    panics: bool,
}

impl Drop for Stranger {
    fn drop(&mut self) {
        self.drops.fetch_add(1, SeqCst);
        if self.panics {
            panic!("a stranger's drop panics");
        }
    }
}

#[test]
fn a_process_reading_typed_gets_its_messages_decoded_and_every_other_event_as_it_is() {
    let scheduler = Scheduler::builder().workers(2).build();
    scheduler.start();
    let done = scheduler.spawn(Tallier::default()).unwrap();
    let tallier = done.addr::<Tallier>();
    let drops = Arc::new(AtomicUsize::new(0));
    for n in 1..=100 {
        scheduler.send(tallier, Tally(n)).unwrap();
        if n % 25 == 0 {
            // By bare PID, a type the process does not accept: dropped
            // when read (its drop may even panic), and the rest arrive.
            let stranger = Stranger {
                drops: drops.clone(),
                panics: n == 50,
            };
            scheduler.send(done.pid(), stranger).unwrap();
        }
    }
    let ask = || {
        scheduler
            .ask(done.pid(), Sum)
            .unwrap()
            .wait_timeout(WAIT)
            .expect("answered in time")
    };
    let (sum, _) = ask();
    assert_eq!(sum, 5_050, "every typed message was summed before the ask");
    assert_eq!(drops.load(SeqCst), 4, "each stranger was dropped once");
    // The timer set at start comes through the typed read as it is.
    let deadline = std::time::Instant::now() + WAIT;
    let mut asked = 1;
    while ask().1 == 0 {
        asked += 1;
        assert!(std::time::Instant::now() < deadline, "the timer never came");
        std::thread::sleep(Duration::from_millis(1));
    }
    asked += 1;
    scheduler.context().cancel(done.pid()).unwrap();
    let (sum, timers, answered) = done.typed::<(u64, u64, u64)>().wait().unwrap();
    assert_eq!((sum, timers, answered), (5_050, 1, asked));
    assert_eq!(scheduler.shutdown(WAIT).forced, 0);
}
