//! When an idle worker lingers before it parks (`Builder::idle_linger`):
//! only when work is likely to come back soon. A worker whose step
//! started something answered from outside the workers (here, a command
//! completed by another thread) lingers through the short waits for the
//! answers, so a steady exchange costs no park per answer. An otherwise
//! idle engine fed unbidden from outside lingers at most about what a park
//! costs (25 µs), however high the limit: a trickle of messages 1 ms apart
//! parks it at once in every gap, where lingering would spend CPU on every
//! gap and buy only latency.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use sched::command::{Command, CommandId, Completer, Rejected};
use sched::prelude::*;

const MESSAGES: usize = 60;
const GAP: Duration = Duration::from_millis(1);
/// A limit far above the gaps, however slow the machine: after the first
/// spell or two, a worker allowed to linger lingers through every gap.
const LONG_LINGER: Duration = Duration::from_secs(1);
const SERVICE: CommandId = CommandId(1);
/// Answers in the exchange, and the least each takes.
const ANSWERS: usize = 30;
const ANSWER_GAP: Duration = Duration::from_millis(1);

/// Counts the messages it gets.
struct Count(Arc<AtomicUsize>);

impl Process for Count {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
        let n = events.count();
        self.0.fetch_add(n, Ordering::Release);
        Ok(())
    }
}

/// Asks the service `ANSWERS` times in a row, each question once the
/// last answer is in, then finishes.
struct Exchange {
    started: bool,
    answered: usize,
}

impl Process for Exchange {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        let mut ask = !std::mem::replace(&mut self.started, true);
        for event in events {
            if let Event::Completion { .. } = event {
                self.answered += 1;
                ask = true;
            }
        }
        if self.answered == ANSWERS {
            out.finish(self.answered);
        } else if ask {
            out.yield_command(SERVICE, Tag(0), Box::new(()));
        }
        Ok(())
    }
}

/// The parks and lingers of a one-worker scheduler lingering up to
/// `LONG_LINGER`, over `MESSAGES` messages sent from outside `GAP` apart,
/// each taken before the next. Each gap lasts (beyond `GAP`) until the
/// worker has parked, or a second: on a loaded machine the worker's short
/// spin before it parks (a few yields, each of which may cost a time
/// slice) can outlast any fixed gap.
fn trickle() -> (u64, u64) {
    let scheduler = Scheduler::builder()
        .workers(1)
        .idle_linger(LONG_LINGER)
        .build();
    scheduler.start();
    let seen = Arc::new(AtomicUsize::new(0));
    let pid = scheduler.spawn(Count(Arc::clone(&seen))).unwrap().pid();
    let before = scheduler.stats().totals();
    for n in 0..MESSAGES {
        scheduler.send(pid, n).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while seen.load(Ordering::Acquire) <= n {
            assert!(Instant::now() < deadline, "message {n} not taken");
            std::thread::yield_now();
        }
        std::thread::sleep(GAP);
        let deadline = Instant::now() + Duration::from_secs(1);
        while scheduler.stats().parked_workers == 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    let after = scheduler.stats().totals();
    scheduler.shutdown(Duration::from_secs(1));
    (after.parks - before.parks, after.lingers - before.lingers)
}

/// The parks and lingers of a one-worker scheduler lingering up to
/// `LONG_LINGER` while a process asks a service `ANSWERS` times. The
/// service answers each question once the worker, idle meanwhile, has
/// chosen between lingering and parking (a second at most), and at least
/// `ANSWER_GAP` after it: on a loaded machine the worker's few yields
/// before that choice can outlast any fixed gap.
fn exchange() -> (u64, u64) {
    let (questions, answers) = mpsc::channel::<Completer>();
    let scheduler = Arc::new(
        Scheduler::builder()
            .workers(1)
            .idle_linger(LONG_LINGER)
            .handler(
                SERVICE,
                move |_: Command, done: Completer| -> Result<(), Rejected> {
                    questions.send(done).expect("the service thread runs");
                    Ok(())
                },
            )
            .build(),
    );
    scheduler.start();
    let choices = |s: &Scheduler| {
        let totals = s.stats().totals();
        totals.parks + totals.lingers
    };
    let service = {
        let scheduler = Arc::clone(&scheduler);
        std::thread::spawn(move || {
            // Exactly the answers asked for: its handle on the scheduler
            // (which owns the question channel's sender) goes with it.
            for done in answers.iter().take(ANSWERS) {
                let before = choices(&scheduler);
                std::thread::sleep(ANSWER_GAP);
                let deadline = Instant::now() + Duration::from_secs(1);
                // A park is counted once the worker wakes; until then it
                // shows as a parked worker.
                while choices(&scheduler) == before
                    && scheduler.stats().parked_workers == 0
                    && Instant::now() < deadline
                {
                    std::thread::sleep(Duration::from_micros(200));
                }
                let _ = done.complete(Box::new(()));
            }
        })
    };
    let before = scheduler.stats().totals();
    let finished = scheduler
        .spawn(Exchange {
            started: false,
            answered: 0,
        })
        .unwrap()
        .wait();
    let after = scheduler.stats().totals();
    assert_eq!(*finished.unwrap().downcast::<usize>().unwrap(), ANSWERS);
    scheduler.shutdown(Duration::from_secs(1));
    drop(scheduler);
    service.join().unwrap();
    (after.parks - before.parks, after.lingers - before.lingers)
}

#[test]
fn a_worker_awaiting_answers_from_outside_lingers_through_the_waits() {
    let (parks, lingers) = exchange();
    eprintln!("exchange of {ANSWERS}: {parks} parks, {lingers} lingers");
    // Each gap ends in a linger or a park (the service waits for one).
    // Awaiting an answer, the worker chooses to linger in (nearly) every
    // gap; capped as for work nothing awaits (25 µs), it would park in
    // every gap without lingering.
    assert!(
        lingers >= ANSWERS as u64 / 2,
        "{lingers} lingers for {ANSWERS} answers awaited ({parks} parks)"
    );
    // And it parks only after lingering, but in the first spells, which
    // learn how long the answers take. How many lingers end in a park
    // depends on the machine: on an idle one, none past the first few;
    // where the OS holds the service's thread off its CPU for longer than
    // the gaps so far (a loaded CI machine), a linger can run out before
    // the answer comes, and the worker sleeps until it does.
    assert!(
        parks <= lingers + 2,
        "{parks} parks for {ANSWERS} answers awaited ({lingers} lingers)"
    );
}

#[test]
fn an_idle_engine_fed_unbidden_from_outside_parks_at_once_in_every_gap() {
    let (parks, lingers) = trickle();
    eprintln!("trickle of {MESSAGES}: {parks} parks, {lingers} lingers");
    assert_eq!(lingers, 0, "nothing was awaited, and no other worker");
    assert!(
        parks >= MESSAGES as u64 / 2,
        "{parks} parks for {MESSAGES} messages"
    );
}
