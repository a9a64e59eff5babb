//! Models of parking (a push racing a worker going to sleep), of a timer
//! set while the worker parks, and of a monitor set while its target ends.

use std::sync::atomic::Ordering::SeqCst;

use loom::thread;
use relay::Pid;

use super::harness::Inert;
use crate::contract::command::Tag;
use crate::record::RecordRef;
use crate::runqueue::sleep::Sleepers;
use crate::sync::{Arc, AtomicBool, AtomicUsize};

/// The work a producer pushes and a parking worker looks for.
enum WorkQueue {
    /// The global queue (a loom `Mutex<VecDeque>` under loom).
    Global(crate::sync::Fifo<u32>),
    /// A worker's deque, checked through its stealer.
    Local(deque::Worker<u32>, deque::Stealer<u32>),
}

impl WorkQueue {
    fn push(&self, item: u32) {
        match self {
            WorkQueue::Global(q) => q.push(item),
            WorkQueue::Local(w, _) => w.push(item),
        }
    }
    fn has_work(&self) -> bool {
        match self {
            WorkQueue::Global(q) => !q.is_empty(),
            WorkQueue::Local(_, s) => !s.is_empty(),
        }
    }
}

/// A producer pushes work and notifies while the only worker goes to
/// park: the worker either sees the work before sleeping or is unparked
/// (a lost wakeup would leave it asleep forever, which loom reports as a
/// deadlock). After `park` returns the work is visible.
fn push_races_park(queue: WorkQueue) {
    let queue = Arc::new(queue);
    let sleepers = Arc::new(Sleepers::new(1));
    let worker = {
        let queue = queue.clone();
        let sleepers = sleepers.clone();
        thread::spawn(move || {
            sleepers.park(0, || queue.has_work(), || None, std::time::Duration::ZERO);
            assert!(queue.has_work(), "woke up without work");
        })
    };
    queue.push(1);
    sleepers.notify_one();
    worker.join().unwrap();
    assert_eq!(sleepers.sleeping(), 0, "the worker is off the sleeper list");
}

#[test]
fn push_to_the_global_queue_races_park() {
    loom::model(|| push_races_park(WorkQueue::Global(crate::sync::Fifo::new())));
}

#[test]
fn push_to_a_local_deque_races_park() {
    loom::model(|| {
        let worker = deque::Worker::with_capacity(2);
        let stealer = worker.stealer();
        push_races_park(WorkQueue::Local(worker, stealer))
    });
}

/// Two workers park while one producer pushes one item and notifies once:
/// one of them takes the work (the other may sleep until the engine's
/// shutdown sets `exit` and wakes everyone, modelled here).
#[test]
fn one_push_two_parking_workers() {
    loom::model(|| {
        let queue = Arc::new(crate::sync::Fifo::<u32>::new());
        let sleepers = Arc::new(Sleepers::new(2));
        let taken = Arc::new(AtomicUsize::new(0));
        let exit = Arc::new(AtomicBool::new(false));
        let workers: Vec<_> = (0..2)
            .map(|me| {
                let queue = queue.clone();
                let sleepers = sleepers.clone();
                let taken = taken.clone();
                let exit = exit.clone();
                thread::spawn(move || {
                    sleepers.park(
                        me,
                        || !queue.is_empty() || exit.load(SeqCst),
                        || None,
                        std::time::Duration::ZERO,
                    );
                    if queue.pop().is_some() {
                        taken.fetch_add(1, SeqCst);
                    }
                })
            })
            .collect();
        queue.push(1);
        sleepers.notify_one();
        // A notified worker takes the item; then let the other one go.
        while taken.load(SeqCst) == 0 && !queue.is_empty() {
            thread::yield_now();
        }
        exit.store(true, SeqCst);
        sleepers.notify_all();
        for w in workers {
            w.join().unwrap();
        }
        assert_eq!(taken.load(SeqCst), 1, "the item was taken");
        assert!(queue.is_empty());
    });
}

/// Another thread sets a timer (already due) in the wheel of the only
/// worker while it goes to park with no timer pending: the worker either
/// reads the timer's deadline after announcing its sleep (and does not
/// sleep) or is found on the idle list and woken, exactly as
/// `Timers::set_timer` and the worker loop do. Under loom a timed park
/// waits for a notification only (there is no clock), so a lost wakeup is
/// a deadlock loom reports.
#[test]
fn a_timer_set_while_the_worker_parks_is_never_missed() {
    use crate::sync::fence;
    use crate::timer::registry::Timers;
    use crate::timer::{Action, What};

    loom::model(|| {
        let timers = Arc::new(Timers::new(1, std::time::Instant::now()));
        let sleepers = Arc::new(Sleepers::new(1));
        let worker = {
            let timers = timers.clone();
            let sleepers = sleepers.clone();
            thread::spawn(move || {
                let mut due = Vec::new();
                loop {
                    if timers.any_due(0, std::time::Instant::now) {
                        timers.poll(0, std::time::Instant::now(), &mut due);
                        if !due.is_empty() {
                            return due.len();
                        }
                    }
                    sleepers.park(0, || false, || timers.due_at(0), std::time::Duration::ZERO);
                }
            })
        };
        let record = RecordRef::new(Pid::local(1), Inert);
        let action = Action {
            record,
            what: What::Wake {
                tag: Tag(1),
                list_lo: 0,
                list_hi: 0,
            },
        };
        let past = std::time::Instant::now() - std::time::Duration::from_millis(1);
        let (_, earlier) = timers.insert(0, past, action);
        assert!(earlier, "the only timer is the earliest");
        fence(SeqCst);
        sleepers.wake(0);
        assert_eq!(worker.join().unwrap(), 1, "the timer fired once");
        assert_eq!(sleepers.sleeping(), 0);
    });
}

/// A monitor is attached while its target ends: it fires exactly once,
/// either from the end's list or at once with the end's reason.
#[test]
fn a_monitor_set_while_the_process_ends_fires_exactly_once() {
    use crate::contract::down::ExitReason;
    use crate::record::relations::{Relations, Watch, Watcher};

    loom::model(|| {
        let relations = Arc::new(Relations::default());
        let watcher = RecordRef::new(Pid::local(2), Inert);
        let ender = {
            let relations = relations.clone();
            thread::spawn(move || {
                relations
                    .end(ExitReason::Normal)
                    .map_or(0, |related| related.monitors.len())
            })
        };
        let attached = relations.with_live(|related| {
            related.monitors.push(Watch {
                id: 1,
                watcher: Watcher::Process(watcher.clone()),
            })
        });
        let fired_by_end = ender.join().unwrap();
        let fired_at_once = usize::from(attached == Err(ExitReason::Normal));
        assert_eq!(fired_by_end + fired_at_once, 1, "fired exactly once");
    });
}

/// A worker searches, leaves the searchers to linger (the worker's own
/// [`leave_the_searchers_to_linger`], one look), then parks, while a
/// producer pushes and notifies: whichever way the producer reads
/// `searching`, the work is found (by the lingering look or by the park's
/// own check) or the worker is woken; loom reports a lost wakeup as a
/// deadlock. Models the worker loop's lingering path, which a loom build
/// never takes (its linger is zero there). This cannot see the linger's
/// fence: without it the park's own fence still finds the work (see the
/// next model, which can).
///
/// [`leave_the_searchers_to_linger`]: crate::worker::leave_the_searchers_to_linger
#[test]
fn a_lingering_worker_loses_no_wakeup() {
    loom::model(|| {
        let queue = Arc::new(crate::sync::Fifo::<u32>::new());
        let sleepers = Arc::new(Sleepers::new(1));
        let worker = {
            let queue = queue.clone();
            let sleepers = sleepers.clone();
            thread::spawn(move || {
                assert!(sleepers.try_start_searching(), "the only worker searches");
                if !queue.is_empty() {
                    sleepers.stop_searching();
                    return;
                }
                crate::worker::leave_the_searchers_to_linger(&sleepers);
                if !queue.is_empty() {
                    return;
                }
                sleepers.park(0, || !queue.is_empty(), || None, std::time::Duration::ZERO);
                assert!(!queue.is_empty(), "woke up without work");
            })
        };
        queue.push(1);
        sleepers.notify_one();
        worker.join().unwrap();
        assert_eq!(sleepers.sleeping(), 0);
    });
}

/// What the linger's fence adds, which no lost wakeup can show (the park
/// that follows a lingering look has a fence of its own and finds the
/// work): the lingering look *itself* sees work whose producer skipped its
/// wakeup because it still counted the lingering worker as a searcher.
/// Without the fence that look may miss it, and the work waits for the
/// worker's park, up to a whole linger (300 µs) later, while a parked
/// worker could have run it.
///
/// Worker 0 searches, then lingers through the worker loop's own
/// [`leave_the_searchers_to_linger`] and looks once at a running worker's
/// deque (lock-free, as the engine's deques are: loom's stand-in for the
/// global queue is a mutex, whose lock would order the two sides without
/// any fence). Worker 1 is parked, so the producer's `notify_one` shows
/// what it read: if it saw nobody searching it wakes worker 1 (the parked
/// count drops to zero); if it left worker 1 asleep, it counted worker 0
/// in `searching`, and then worker 0's lingering look must have seen the
/// item. The producer is that running worker, pushing to its own deque
/// with someone parked (`Shared::schedule`'s own-deque case).
///
/// [`leave_the_searchers_to_linger`]: crate::worker::leave_the_searchers_to_linger
#[test]
fn a_lingering_look_sees_work_whose_producer_counted_it() {
    loom::model(|| {
        let own = deque::Worker::<u32>::with_capacity(2);
        let stealer = own.stealer();
        let sleepers = Arc::new(Sleepers::new(2));
        let parked = {
            let sleepers = sleepers.clone();
            thread::spawn(move || {
                sleepers.park(1, || false, || None, std::time::Duration::ZERO);
            })
        };
        while sleepers.sleeping() == 0 {
            thread::yield_now();
        }
        let lingering = {
            let sleepers = sleepers.clone();
            thread::spawn(move || {
                assert!(sleepers.try_start_searching(), "worker 0 searches");
                crate::worker::leave_the_searchers_to_linger(&sleepers);
                !stealer.is_empty()
            })
        };
        own.push(1);
        sleepers.notify_one();
        // Nobody else takes worker 1 off the idle list.
        let skipped = sleepers.sleeping() == 1;
        let looked_and_saw = lingering.join().unwrap();
        if skipped {
            assert!(
                looked_and_saw,
                "the producer skipped its wakeup for a lingering worker whose look then missed the work"
            );
        }
        sleepers.notify_all();
        parked.join().unwrap();
    });
}

/// The long-step watcher dozes while the only worker parks, as a producer
/// pushes and notifies: if it dozes, the worker leaving its park wakes it
/// (a watcher left dozing while a worker runs would be a deadlock here,
/// and a stuck step would go unreported).
#[test]
fn the_watcher_dozes_only_while_every_worker_is_parked() {
    loom::model(|| {
        let queue = Arc::new(crate::sync::Fifo::<u32>::new());
        let sleepers = Arc::new(Sleepers::new(1));
        let worker = {
            let queue = queue.clone();
            let sleepers = sleepers.clone();
            thread::spawn(move || {
                sleepers.park(0, || !queue.is_empty(), || None, std::time::Duration::ZERO);
                sleepers.ring_dozer();
                assert!(!queue.is_empty(), "woke up without work");
            })
        };
        let watcher = {
            let sleepers = sleepers.clone();
            thread::spawn(move || {
                sleepers.doze(|| false);
            })
        };
        queue.push(1);
        sleepers.notify_one();
        worker.join().unwrap();
        watcher.join().unwrap();
    });
}
