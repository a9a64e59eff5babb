//! loom models of the routing table and the PID allocator.
//!
//! Run with
//! `RUSTFLAGS="--cfg loom --cfg crossbeam_loom" LOOM_MAX_PREEMPTIONS=2 \
//!  cargo test -p sched-relay --release --lib --test loom`
//! (or `cargo xtask loom sched-relay`). Under `cfg(loom)` the table is a loom
//! `Mutex<HashMap>` and the allocator's counter a loom atomic, so loom
//! explores every interleaving of the operations below.
#![cfg(loom)]

use loom::sync::{Arc, Mutex};
use loom::thread;
// Routes are std `Arc`s: `Receiver` is implemented for `std::sync::Arc`, and
// a reference count needs no modelling. The mailbox inside is loom-visible.
use relay::{Package, Pid, PidAllocator, Receiver, Router, SendError, SendErrorKind};
use std::sync::Arc as Route;

/// A process mailbox that its owner closes after unregistering it, as the
/// scheduler closes a finished process's queue.
#[derive(Default)]
struct Mailbox {
    state: Mutex<(bool, Vec<Package>)>,
}

impl Receiver for Mailbox {
    fn send(&self, package: Package) -> Result<(), SendError> {
        let mut state = self.state.lock().unwrap();
        if state.0 {
            return Err(SendError::ended(package));
        }
        state.1.push(package);
        Ok(())
    }
}

impl Mailbox {
    /// Closes the mailbox and returns what it had accepted.
    fn close(&self) -> Vec<Package> {
        let mut state = self.state.lock().unwrap();
        state.0 = true;
        std::mem::take(&mut state.1)
    }
}

/// Counts how often each outcome of a model occurred across all the
/// interleavings loom explored, so a test can check that the race it is
/// about really was explored (plain std atomics: outside the model).
struct Outcomes<const N: usize>([std::sync::atomic::AtomicUsize; N]);

impl<const N: usize> Outcomes<N> {
    const fn new() -> Self {
        Outcomes([const { std::sync::atomic::AtomicUsize::new(0) }; N])
    }

    fn saw(&self, outcome: usize) {
        self.0[outcome].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    fn assert_all_seen(&self) {
        for (outcome, count) in self.0.iter().enumerate() {
            let count = count.load(std::sync::atomic::Ordering::Relaxed);
            assert!(count > 0, "outcome {outcome} never explored");
        }
    }
}

const SENDER: Pid = Pid::local(1);
const TARGET: Pid = Pid::local(2);

/// A route races an unregister-then-close: the package ends up in exactly
/// one place, the mailbox or the sender's hands.
#[test]
fn route_racing_unregister_delivers_or_hands_back() {
    static OUTCOMES: Outcomes<3> = Outcomes::new();
    loom::model(|| {
        let router = Arc::new(Router::new());
        let mailbox = Route::new(Mailbox::default());
        router.register(TARGET, Route::clone(&mailbox)).unwrap();

        let sender = {
            let router = Arc::clone(&router);
            thread::spawn(move || router.route(Package::new(SENDER, TARGET, 7_u32)))
        };
        let removed = router.unregister(TARGET).expect("registered");
        assert!(Route::ptr_eq(&removed, &mailbox));
        let mut delivered = removed.close();
        let routed = sender.join().unwrap();

        match routed {
            Ok(()) => {
                OUTCOMES.saw(0);
                assert_eq!(delivered.len(), 1, "delivered package missing");
                let package = delivered.pop().unwrap();
                assert_eq!(package.source(), SENDER);
                assert_eq!(package.downcast::<u32>().ok(), Some(7));
            }
            Err(err) => {
                assert!(
                    delivered.is_empty(),
                    "package both delivered and handed back"
                );
                match err.kind() {
                    SendErrorKind::UnknownTarget => OUTCOMES.saw(1),
                    SendErrorKind::Ended => OUTCOMES.saw(2),
                    other => panic!("unexpected {other:?}"),
                }
                assert_eq!(err.target(), TARGET);
                assert_eq!(err.into_package().downcast::<u32>().ok(), Some(7));
            }
        }
        assert!(router.is_empty());
    });
    OUTCOMES.assert_all_seen();
}

/// Without the close, a route that lost the race to unregister finds no
/// target; one that won delivers. Either way exactly one outcome.
#[test]
fn route_racing_plain_unregister_never_loses_the_package() {
    static OUTCOMES: Outcomes<2> = Outcomes::new();
    loom::model(|| {
        let router = Arc::new(Router::new());
        let mailbox = Route::new(Mailbox::default());
        router.register(TARGET, Route::clone(&mailbox)).unwrap();

        let unregister = {
            let router = Arc::clone(&router);
            thread::spawn(move || router.unregister(TARGET).is_some())
        };
        let routed = router.route(Package::new(SENDER, TARGET, 9_u32));
        assert!(
            unregister.join().unwrap(),
            "the only unregister must find the route"
        );

        let delivered = mailbox.close();
        match routed {
            Ok(()) => {
                OUTCOMES.saw(0);
                assert_eq!(delivered.len(), 1);
            }
            Err(err) => {
                OUTCOMES.saw(1);
                assert_eq!(err.kind(), SendErrorKind::UnknownTarget);
                assert!(delivered.is_empty());
                assert_eq!(err.into_package().downcast::<u32>().ok(), Some(9));
            }
        }
    });
    OUTCOMES.assert_all_seen();
}

/// Two threads register one PID: exactly one wins, the loser gets its route
/// back, and the table holds the winner's route.
#[test]
fn two_registrations_of_one_pid_exactly_one_wins() {
    static OUTCOMES: Outcomes<2> = Outcomes::new();
    loom::model(|| {
        let router: Arc<Router<u8>> = Arc::new(Router::new());
        let other = {
            let router = Arc::clone(&router);
            thread::spawn(move || router.register(TARGET, 1).map_err(|e| e.into_route()))
        };
        let mine = router.register(TARGET, 2).map_err(|e| e.into_route());
        let other = other.join().unwrap();

        match (other, mine) {
            (Ok(()), Err(2)) => {
                OUTCOMES.saw(0);
                assert_eq!(router.lookup(TARGET), Some(1));
            }
            (Err(1), Ok(())) => {
                OUTCOMES.saw(1);
                assert_eq!(router.lookup(TARGET), Some(2));
            }
            outcome => panic!("not exactly one winner: {outcome:?}"),
        }
        assert_eq!(router.len(), 1);
    });
    OUTCOMES.assert_all_seen();
}

/// A route racing the registration of its target: delivered if the
/// registration came first, handed back as unknown otherwise.
#[test]
fn route_racing_register_delivers_or_reports_unknown() {
    static OUTCOMES: Outcomes<2> = Outcomes::new();
    loom::model(|| {
        let router = Arc::new(Router::new());
        let mailbox = Route::new(Mailbox::default());
        let register = {
            let router = Arc::clone(&router);
            let mailbox = Route::clone(&mailbox);
            thread::spawn(move || router.register(TARGET, mailbox).is_ok())
        };
        let routed = router.route(Package::new(SENDER, TARGET, 3_u32));
        assert!(register.join().unwrap());

        let delivered = mailbox.close();
        match routed {
            Ok(()) => {
                OUTCOMES.saw(0);
                assert_eq!(delivered.len(), 1);
            }
            Err(err) => {
                OUTCOMES.saw(1);
                assert_eq!(err.kind(), SendErrorKind::UnknownTarget);
                assert!(delivered.is_empty());
            }
        }
    });
    OUTCOMES.assert_all_seen();
}

/// Two threads allocating from one allocator never get the same PID, and
/// at the end of the id space exactly one of them gets the last id.
#[test]
fn racing_allocations_are_unique() {
    loom::model(|| {
        let pids = Arc::new(PidAllocator::starting_at(0, u64::MAX - 2));
        let other = {
            let pids = Arc::clone(&pids);
            thread::spawn(move || pids.allocate())
        };
        let mine = pids.allocate();
        let other = other.join().unwrap();
        let (a, b) = (mine.expect("two ids left"), other.expect("two ids left"));
        assert_ne!(a, b);
        let mut ids = [a.id(), b.id()];
        ids.sort_unstable();
        assert_eq!(ids, [u64::MAX - 2, u64::MAX - 1]);
        assert!(
            pids.allocate().is_err(),
            "u64::MAX must never be handed out"
        );
    });
}
