//! Many threads registering, unregistering and routing on one table at once:
//! every package is delivered or handed back exactly once, and every route is
//! refused, unregistered or left in the table exactly once.
#![cfg(not(loom))]

use relay::{Package, Pid, Receiver, Router, SendError, SendErrorKind};
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::thread;

const THREADS: u64 = 4;
const OPS_PER_THREAD: u64 = if cfg!(miri) { 200 } else { 50_000 };
const PIDS: u64 = 16;

/// A process mailbox that its owner closes after unregistering it.
struct Mailbox {
    route_id: u64,
    state: Mutex<(bool, Vec<u64>)>,
}

impl Receiver for Mailbox {
    fn send(&self, package: Package) -> Result<(), SendError> {
        let mut state = self.state.lock().unwrap();
        if state.0 {
            return Err(SendError::ended(package));
        }
        state
            .1
            .push(*package.payload::<u64>().expect("u64 payload"));
        Ok(())
    }
}

impl Mailbox {
    fn close(&self) {
        self.state.lock().unwrap().0 = true;
    }
}

/// What one thread saw.
#[derive(Default)]
struct Log {
    sent: Vec<u64>,
    handed_back: Vec<u64>,
    /// Every mailbox this thread created, registered or not.
    mailboxes: Vec<Arc<Mailbox>>,
    refused_routes: Vec<u64>,
    unregistered_routes: Vec<u64>,
}

fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

fn worker(router: &Router<Arc<Mailbox>>, thread: u64) -> Log {
    let mut log = Log::default();
    let mut rng = 0x9E37_79B9_7F4A_7C15 ^ (thread + 1).wrapping_mul(0xD1B5_4A32_D192_ED03);
    for seq in 0..OPS_PER_THREAD {
        let r = xorshift(&mut rng);
        let pid = Pid::local(r % PIDS);
        let unique = thread << 32 | seq;
        match (r >> 32) % 8 {
            0 | 1 => {
                let mailbox = Arc::new(Mailbox {
                    route_id: unique,
                    state: Mutex::new((false, Vec::new())),
                });
                log.mailboxes.push(Arc::clone(&mailbox));
                if let Err(err) = router.register(pid, mailbox) {
                    assert_eq!(err.pid(), pid);
                    log.refused_routes.push(err.into_route().route_id);
                }
            }
            2 => {
                if let Some(mailbox) = router.unregister(pid) {
                    mailbox.close();
                    log.unregistered_routes.push(mailbox.route_id);
                }
            }
            _ => {
                log.sent.push(unique);
                if let Err(err) = router.route(Package::new(Pid::local(1000 + thread), pid, unique))
                {
                    assert!(matches!(
                        err.kind(),
                        SendErrorKind::UnknownTarget | SendErrorKind::Ended
                    ));
                    assert_eq!(err.target(), pid);
                    log.handed_back
                        .push(err.into_package().downcast::<u64>().expect("u64 payload"));
                }
            }
        }
    }
    log
}

#[test]
fn concurrent_register_unregister_route_conserves_packages_and_routes() {
    let router: Arc<Router<Arc<Mailbox>>> = Arc::new(Router::new());
    let logs: Vec<Log> = (0..THREADS)
        .map(|thread| {
            let router = Arc::clone(&router);
            thread::spawn(move || worker(&router, thread))
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|handle| handle.join().expect("worker panicked"))
        .collect();

    // Packages: delivered to exactly one mailbox or handed back, never both,
    // never twice, never lost.
    let mut accounted = HashSet::new();
    let mut delivered = 0;
    for log in &logs {
        for mailbox in &log.mailboxes {
            for &value in &mailbox.state.lock().unwrap().1 {
                assert!(accounted.insert(value), "package {value} delivered twice");
                delivered += 1;
            }
        }
    }
    for log in &logs {
        for &value in &log.handed_back {
            assert!(
                accounted.insert(value),
                "package {value} both delivered and handed back"
            );
        }
    }
    let sent: HashSet<u64> = logs
        .iter()
        .flat_map(|log| log.sent.iter().copied())
        .collect();
    assert_eq!(accounted, sent, "some package was lost or invented");
    assert!(delivered > 0, "the test never delivered anything");

    // Routes: every mailbox was refused, unregistered, or is still in the
    // table, exactly one of the three.
    let mut routes = HashSet::new();
    for log in &logs {
        for &id in log.refused_routes.iter().chain(&log.unregistered_routes) {
            assert!(routes.insert(id), "route {id} accounted twice");
        }
    }
    for pid in router.pids() {
        let id = router
            .lookup(pid)
            .expect("listed PID is registered")
            .route_id;
        assert!(
            routes.insert(id),
            "route {id} both removed and still registered"
        );
    }
    let created: HashSet<u64> = logs
        .iter()
        .flat_map(|log| log.mailboxes.iter().map(|m| m.route_id))
        .collect();
    assert_eq!(routes, created, "some route was lost or invented");
    assert!(router.len() <= PIDS as usize);
}

#[test]
fn concurrent_registrations_of_one_pid_have_exactly_one_winner() {
    let rounds = if cfg!(miri) { 4 } else { 500 };
    for _ in 0..rounds {
        let router: Arc<Router<u64>> = Arc::new(Router::new());
        let winners: Vec<u64> = (0..THREADS)
            .map(|thread| {
                let router = Arc::clone(&router);
                thread::spawn(move || match router.register(Pid::local(7), thread) {
                    Ok(()) => Some(thread),
                    Err(err) => {
                        assert_eq!(err.into_route(), thread);
                        None
                    }
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .filter_map(|handle| handle.join().expect("thread panicked"))
            .collect();
        assert_eq!(winners.len(), 1);
        assert_eq!(router.lookup(Pid::local(7)), Some(winners[0]));
    }
}
