//! Parking idle workers and waking them one at a time.
//!
//! The protocol and the argument that no wakeup is lost are in
//! `runqueue/PROTOCOL.md`.

use std::collections::VecDeque;
use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;

use crate::sync::{fence, AtomicBool, AtomicUsize, Condvar, Mutex};

/// One worker's bed: a sticky "notified" flag and a condition variable.
#[derive(Debug, Default)]
struct Parker {
    notified: Mutex<bool>,
    wakeup: Condvar,
}

impl Parker {
    /// Sleeps until notified, then consumes the notification. A
    /// notification that came first makes this return at once.
    fn park(&self) {
        let mut notified = self.notified.lock();
        while !*notified {
            notified = self.wakeup.wait(notified);
        }
        *notified = false;
    }

    /// As `park`, but gives up at `deadline`. Returns whether it was
    /// notified (the notification is consumed either way when it came).
    fn park_until(&self, deadline: Instant) -> bool {
        let mut notified = self.notified.lock();
        while !*notified {
            let (guard, _) = self.wakeup.wait_until(notified, deadline);
            notified = guard;
            if !*notified && Instant::now() >= deadline {
                return false;
            }
        }
        *notified = false;
        true
    }

    fn unpark(&self) {
        *self.notified.lock() = true;
        self.wakeup.notify_one();
    }
}

/// The idle workers, in the order they went to sleep.
#[derive(Debug)]
pub(crate) struct Sleepers {
    /// Workers that are parked or about to park. Waking pops the back: the
    /// worker that parked last wakes first (as tokio and Go do), because
    /// its cache is the warmest and the CPU it last ran on is the one most
    /// likely free. Waking the longest sleeper instead (the front) sent
    /// wakeups to a thread whose last CPU was running something else: with
    /// one busy-loop thread beside the engine, 1% of wakeups then waited
    /// for that CPU's time slice (0.5 to 5 ms).
    idle: CachePadded<Mutex<VecDeque<usize>>>,
    /// `idle.len()`, readable without the lock: the common "nobody sleeps"
    /// case of `notify_one` costs one fence and one load.
    count: CachePadded<AtomicUsize>,
    /// Workers looking for work (spinning or yielding) and not parked. While
    /// one searches, producers need not wake anyone: the searcher will find
    /// the work, or, if it finds other work first and was the last searcher,
    /// wake a parked worker to keep searching (`stop_searching`).
    searching: CachePadded<AtomicUsize>,
    parkers: Box<[CachePadded<Parker>]>,
    /// A parked worker sleeps with a timeout (see `park`).
    watcher: CachePadded<AtomicBool>,
    /// Set while the long-step watcher thread dozes (every worker parked:
    /// nothing to watch), in `doze_bed` (see `doze`).
    dozing: CachePadded<AtomicBool>,
    doze_bed: CachePadded<Parker>,
}

impl Sleepers {
    pub(crate) fn new(workers: usize) -> Self {
        Sleepers {
            idle: CachePadded::new(Mutex::new(VecDeque::with_capacity(workers))),
            count: CachePadded::new(AtomicUsize::new(0)),
            searching: CachePadded::new(AtomicUsize::new(0)),
            parkers: (0..workers)
                .map(|_| CachePadded::new(Parker::default()))
                .collect(),
            watcher: CachePadded::new(AtomicBool::new(false)),
            dozing: CachePadded::new(AtomicBool::new(false)),
            doze_bed: CachePadded::new(Parker::default()),
        }
    }

    /// The long-step watcher thread sleeps here, until a worker leaves its
    /// park or `stop` (shutdown), if every worker is parked: with no step
    /// running there is nothing to watch, and an idle engine must not wake
    /// a thread 200 times a second. Returns whether it dozed.
    ///
    /// No wake-up is lost (the loom model `the_watcher_dozes_only_while_every_worker_is_parked`):
    /// the watcher sets `dozing`, then reads the parked count; a worker's
    /// count is taken down before its park returns, and the worker then
    /// reads `dozing` ([`ring_dozer`](Sleepers::ring_dozer)). All four are
    /// SeqCst, with a SeqCst fence between the two on each side: either
    /// the watcher sees the worker up (and does not doze) or the worker
    /// sees the watcher dozing (and wakes it). Shutdown sets its flag and
    /// rings the same way.
    pub(crate) fn doze(&self, stop: impl FnOnce() -> bool) -> bool {
        self.dozing.store(true, SeqCst);
        // Pairs with the fence in `ring_dozer` (and shutdown's store of its
        // flag before it rings): loom, like the C++ model, gives SeqCst
        // loads and stores no order between themselves; fences it does.
        fence(SeqCst);
        if self.count.load(SeqCst) < self.parkers.len() || stop() {
            self.dozing.store(false, SeqCst);
            return false;
        }
        self.doze_bed.park();
        self.dozing.store(false, SeqCst);
        true
    }

    /// Wakes the watcher thread if it dozes (see [`doze`](Sleepers::doze));
    /// every worker calls this when its park returns. Returns whether it
    /// dozed. A ring that comes as the watcher gives up dozing leaves a
    /// notification behind, which makes its next doze return at once: one
    /// more round of its loop, nothing lost.
    pub(crate) fn ring_dozer(&self) -> bool {
        // Pairs with the fence in `doze`.
        fence(SeqCst);
        if !self.dozing.load(SeqCst) {
            return false;
        }
        self.doze_bed.unpark();
        true
    }

    /// Parks worker `me` unless `has_work` (checked after announcing the
    /// intent to sleep) finds something to do, until notified. Returns
    /// whether it slept.
    ///
    /// While some worker is busy, one parked worker (the watcher) sleeps
    /// at most `recheck` instead, so that a process left waiting in a busy
    /// worker's `next` slot (which wakes nobody) is found even when every
    /// idle worker sleeps. Only one worker watches at a time, and none when
    /// every worker is parked: an idle engine does not poll.
    ///
    /// `timer_due` (read after announcing, like `has_work`) is when the
    /// worker's earliest timer falls due: it then sleeps no longer than
    /// that, and not at all if that is past. A timer set meanwhile by
    /// another thread wakes it through [`wake`](Sleepers::wake).
    pub(crate) fn park(
        &self,
        me: usize,
        has_work: impl FnOnce() -> bool,
        timer_due: impl FnOnce() -> Option<Instant>,
        recheck: Duration,
    ) -> bool {
        {
            let mut idle = self.idle.lock();
            idle.push_back(me);
            self.count.fetch_add(1, SeqCst);
        }
        // Pairs with the fence in `notify_one`: either the notifier sees our
        // count, or we see its work.
        fence(SeqCst);
        // If a notifier already took us off the list, it is about to unpark
        // us (or has): we consume that notification below so it does not
        // linger and make a later park return at once for nothing.
        if has_work() && self.leave(me) {
            return false;
        }
        let due = timer_due();
        if due.is_some_and(|due| due <= Instant::now()) && self.leave(me) {
            return false;
        }
        // `count` includes us: below the number of workers, someone is busy.
        let watch = !cfg!(loom)
            && self.count.load(SeqCst) < self.parkers.len()
            && self
                .watcher
                .compare_exchange(false, true, SeqCst, Relaxed)
                .is_ok();
        let until = if watch {
            let recheck_at = Instant::now() + recheck;
            Some(due.map_or(recheck_at, |due| due.min(recheck_at)))
        } else {
            due
        };
        match until {
            Some(until) => {
                let timed_out = !self.parkers[me].park_until(until);
                #[cfg(all(test, not(loom)))]
                if timed_out {
                    tests::in_the_timeout_window(self, me);
                }
                if timed_out && !self.leave(me) {
                    // A notifier took us off the list as we timed out: its
                    // unpark is coming; consume it so it does not linger.
                    self.parkers[me].park();
                }
            }
            None => self.parkers[me].park(),
        }
        if watch {
            self.watcher.store(false, SeqCst);
        }
        true
    }

    /// Takes `me` off the idle list after a timed-out park. Returns false
    /// if it was not there (a notifier popped it and will unpark it).
    fn leave(&self, me: usize) -> bool {
        let mut idle = self.idle.lock();
        match idle.iter().position(|&w| w == me) {
            Some(at) => {
                idle.remove(at);
                self.count.fetch_sub(1, SeqCst);
                true
            }
            None => false,
        }
    }

    /// A worker whose search for work just failed asks to keep searching
    /// (spinning before it parks). Granted while fewer than half of the
    /// workers that are not parked are searching already, as Go limits its
    /// spinning threads and tokio its searching workers: the rest park at
    /// once, so idle workers never outnumber, and steal the CPU from, the
    /// threads that produce their work (completers, outside submitters,
    /// the busy workers). With one worker, or all others parked, it is
    /// always granted. Whether a worker spins is only a question of speed:
    /// a worker refused here parks through the usual protocol, which loses
    /// no wakeup.
    pub(crate) fn try_start_searching(&self) -> bool {
        let workers = self.parkers.len();
        let mut searching = self.searching.load(SeqCst);
        loop {
            // `count` never includes the caller, which is running.
            let active = workers.saturating_sub(self.count.load(SeqCst)).max(1);
            if 2 * searching >= active {
                return false;
            }
            match self
                .searching
                .compare_exchange(searching, searching + 1, SeqCst, SeqCst)
            {
                Ok(_) => return true,
                Err(now) => searching = now,
            }
        }
    }

    /// A worker stops looking for work, because it found some or is about to
    /// park. Returns whether it was the last searcher: one that found work
    /// then calls `notify_one`, so that work queued while it searched (and
    /// whose producer skipped the wakeup because it searched) still gets a
    /// worker of its own.
    pub(crate) fn stop_searching(&self) -> bool {
        self.searching.fetch_sub(1, SeqCst) == 1
    }

    /// Wakes one parked worker, if any and if no worker is searching. Call
    /// after making work visible.
    pub(crate) fn notify_one(&self) {
        fence(SeqCst);
        if self.searching.load(SeqCst) > 0 || self.count.load(SeqCst) == 0 {
            return;
        }
        let woken = {
            let mut idle = self.idle.lock();
            let woken = idle.pop_back();
            if woken.is_some() {
                self.count.fetch_sub(1, SeqCst);
            }
            woken
        };
        if let Some(worker) = woken {
            self.parkers[worker].unpark();
        }
    }

    /// Wakes worker `worker` if it is parked (a timer it must fire earlier
    /// than it planned was set). Call after making the timer visible and a
    /// `SeqCst` fence; a worker not on the idle list reads the timer before
    /// it parks.
    pub(crate) fn wake(&self, worker: usize) {
        if self.count.load(SeqCst) == 0 {
            return;
        }
        if self.leave(worker) {
            self.parkers[worker].unpark();
        }
    }

    /// Whether some worker is parked (or about to park), by a relaxed load:
    /// for wakeups that only share work a running worker will do anyway.
    pub(crate) fn anyone_parked(&self) -> bool {
        self.count.load(Relaxed) > 0
    }

    /// Whether a worker other than the caller (a worker that is not
    /// parked) is awake: running, searching or lingering. A relaxed load,
    /// for a heuristic (whether to linger), never for a wakeup.
    pub(crate) fn others_awake(&self) -> bool {
        self.count.load(Relaxed) + 1 < self.parkers.len()
    }

    /// Whether a process just put in a `next` slot should wake a parked
    /// worker to watch over it: some worker sleeps and none watches (they
    /// all parked while the engine was idle). Once one watches, this is
    /// two loads and no wakeup.
    pub(crate) fn needs_watcher(&self) -> bool {
        !cfg!(loom) && self.count.load(Relaxed) > 0 && !self.watcher.load(Relaxed)
    }

    /// Wakes every parked worker (shutdown).
    pub(crate) fn notify_all(&self) {
        let woken: Vec<usize> = {
            let mut idle = self.idle.lock();
            self.count.store(0, SeqCst);
            idle.drain(..).collect()
        };
        for worker in woken {
            self.parkers[worker].unpark();
        }
    }

    /// How many workers are parked or about to park.
    pub(crate) fn sleeping(&self) -> usize {
        self.count.load(SeqCst)
    }
}

/// The timed park (the watcher's recheck, a park bounded by a timer): loom
/// cannot reach its timeout path (a timed park there waits for a
/// notification only), so these force the racing wakeup into the window
/// through a test-only hook, and drive a notifier against the timeout on
/// real threads.
#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::sync::mpsc;
    use std::sync::Arc as StdArc;

    /// What a test runs on a parking thread right after its timed park
    /// timed out, before it leaves the idle list.
    type Hook = fn(&Sleepers, usize);

    thread_local! {
        static TIMEOUT_WINDOW: Cell<Option<Hook>> = const { Cell::new(None) };
    }

    /// The hook `Sleepers::park` calls in the window between a timed
    /// park's timeout and its leaving the list.
    pub(super) fn in_the_timeout_window(sleepers: &Sleepers, me: usize) {
        if let Some(hook) = TIMEOUT_WINDOW.with(Cell::get) {
            hook(sleepers, me);
        }
    }

    /// The interleaving the timing test can only hope for, forced: a
    /// notifier takes the worker off the list between its timeout and its
    /// leaving. The worker must consume that unpark (not leave it to make
    /// its next park return for nothing), and must not hang.
    #[test]
    fn a_wakeup_in_the_timeout_window_is_consumed() {
        let sleepers = Sleepers::new(2);
        TIMEOUT_WINDOW.with(|hook| hook.set(Some(|sleepers, me| sleepers.wake(me))));
        sleepers.park(0, || false, || None, Duration::from_micros(1));
        TIMEOUT_WINDOW.with(|hook| hook.set(None));
        assert_eq!(sleepers.sleeping(), 0);
        assert!(!*sleepers.parkers[0].notified.lock(), "the unpark lingers");
    }

    /// A worker that parks while another is busy watches: it sleeps at
    /// most `recheck`, with nobody to wake it, and returns on its own so
    /// that it can look at the busy worker's `next` slot. Only one watches,
    /// and the flag is down again once it is up.
    #[test]
    #[cfg_attr(miri, ignore = "real-time parking")]
    fn a_worker_parking_beside_a_busy_one_watches_and_returns_on_its_own() {
        let sleepers = StdArc::new(Sleepers::new(2));
        let (done, parked) = mpsc::channel();
        let parker = {
            let sleepers = StdArc::clone(&sleepers);
            std::thread::spawn(move || {
                let slept = sleepers.park(0, || false, || None, Duration::from_millis(20));
                done.send(slept).unwrap();
            })
        };
        match parked.recv_timeout(Duration::from_secs(10)) {
            Ok(slept) => assert!(slept, "it parked (nothing to do)"),
            Err(_) => {
                sleepers.notify_one();
                panic!("a worker parked beside a busy one waited to be woken: nobody watches");
            }
        }
        parker.join().unwrap();
        assert_eq!(sleepers.sleeping(), 0, "left on the list");
        assert!(!sleepers.watcher.load(SeqCst), "still watching");
    }

    /// Each round: worker 0 parks as the watcher (worker 1 counts as
    /// busy), with a recheck of a few microseconds, while another thread
    /// wakes it at about that moment (`wake`, as a timer does, or
    /// `notify_one`, as new work does). The park must return (a lost
    /// wakeup would leave it in its untimed park after a notifier took it
    /// off the list), and no notification may linger to make the next park
    /// return for nothing.
    #[test]
    #[cfg_attr(miri, ignore = "3 000 rounds of real-time parking")]
    fn a_timed_park_racing_a_wakeup_neither_loses_nor_keeps_it() {
        let sleepers = StdArc::new(Sleepers::new(2));
        for round in 0..3_000u64 {
            let recheck = Duration::from_micros(round % 40);
            let (done, parked) = mpsc::channel();
            let parker = {
                let sleepers = StdArc::clone(&sleepers);
                std::thread::spawn(move || {
                    sleepers.park(0, || false, || None, recheck);
                    done.send(()).unwrap();
                })
            };
            let delay = Duration::from_micros((round * 7) % 50);
            let until = Instant::now() + delay;
            while Instant::now() < until {
                std::hint::spin_loop();
            }
            if round % 2 == 0 {
                sleepers.wake(0);
            } else {
                sleepers.notify_one();
            }
            parked
                .recv_timeout(Duration::from_secs(10))
                .unwrap_or_else(|_| panic!("round {round}: the park never returned"));
            parker.join().unwrap();
            assert_eq!(sleepers.sleeping(), 0, "round {round}: left on the list");
            assert!(
                !*sleepers.parkers[0].notified.lock(),
                "round {round}: a notification lingers"
            );
            assert!(
                !sleepers.watcher.load(SeqCst),
                "round {round}: still watching"
            );
        }
    }
}
