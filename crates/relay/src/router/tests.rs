use super::*;
use crate::SendErrorKind;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// A mailbox that can be closed, as a finished process's queue is.
#[derive(Default)]
struct Mailbox {
    closed: AtomicBool,
    inbox: Mutex<Vec<Package>>,
}

impl Receiver for Mailbox {
    fn send(&self, package: Package) -> Result<(), SendError> {
        let mut inbox = self.inbox.lock().unwrap();
        if self.closed.load(Ordering::Relaxed) {
            return Err(SendError::ended(package));
        }
        inbox.push(package);
        Ok(())
    }
}

fn package(to: u64, value: u32) -> Package {
    Package::new(Pid::local(0), Pid::local(to), value)
}

#[test]
fn route_delivers_to_the_registered_receiver_only() {
    let router = Router::new();
    let (one, two) = (Arc::new(Mailbox::default()), Arc::new(Mailbox::default()));
    router.register(Pid::local(1), Arc::clone(&one)).unwrap();
    router.register(Pid::local(2), Arc::clone(&two)).unwrap();
    router.route(package(1, 10)).unwrap();
    router.route(package(2, 20)).unwrap();
    router.route(package(2, 21)).unwrap();
    let values = |mailbox: &Mailbox| -> Vec<u32> {
        mailbox
            .inbox
            .lock()
            .unwrap()
            .iter()
            .map(|p| *p.payload::<u32>().unwrap())
            .collect()
    };
    assert_eq!(values(&one), [10]);
    assert_eq!(values(&two), [20, 21]);
}

#[test]
fn route_to_an_unknown_pid_hands_the_package_back() {
    let router: Router<Arc<Mailbox>> = Router::new();
    let err = router.route(package(7, 70)).unwrap_err();
    assert_eq!(err.kind(), SendErrorKind::UnknownTarget);
    assert_eq!(err.to_string(), "no process with PID <0.7>");
    assert_eq!(err.into_package().downcast::<u32>().ok(), Some(70));
}

#[test]
fn route_passes_the_receivers_refusal_through() {
    let router = Router::new();
    let mailbox = Arc::new(Mailbox::default());
    mailbox.closed.store(true, Ordering::Relaxed);
    router.register(Pid::local(1), mailbox).unwrap();
    let err = router.route(package(1, 5)).unwrap_err();
    assert_eq!(err.kind(), SendErrorKind::Ended);
    assert_eq!(err.into_package().downcast::<u32>().ok(), Some(5));
}

#[test]
fn route_after_unregister_is_unknown_target() {
    let router = Router::new();
    let mailbox = Arc::new(Mailbox::default());
    router
        .register(Pid::local(1), Arc::clone(&mailbox))
        .unwrap();
    let removed = router.unregister(Pid::local(1)).unwrap();
    assert!(Arc::ptr_eq(&removed, &mailbox));
    let err = router.route(package(1, 1)).unwrap_err();
    assert_eq!(err.kind(), SendErrorKind::UnknownTarget);
    assert!(mailbox.inbox.lock().unwrap().is_empty());
}

#[test]
fn duplicate_registration_keeps_the_first_and_returns_the_second() {
    let router = Router::new();
    router.register(Pid::new(2, 3), 1_u8).unwrap();
    let err = router.register(Pid::new(2, 3), 2_u8).unwrap_err();
    assert_eq!(err.pid(), Pid::new(2, 3));
    assert_eq!(err.to_string(), "PID <2.3> is already registered");
    assert_eq!(format!("{err:?}"), "RegisterError { pid: <2.3>, .. }");
    assert_eq!(err.into_route(), 2);
    assert_eq!(router.lookup(Pid::new(2, 3)), Some(1));
    assert_eq!(router.len(), 1);
}

#[test]
fn a_pid_can_be_registered_again_after_unregister() {
    let router = Router::new();
    router.register(Pid::local(1), 'a').unwrap();
    assert_eq!(router.unregister(Pid::local(1)), Some('a'));
    router.register(Pid::local(1), 'b').unwrap();
    assert_eq!(router.lookup(Pid::local(1)), Some('b'));
}

#[test]
fn same_id_on_different_nodes_are_different_routes() {
    let router = Router::new();
    router.register(Pid::new(0, 1), "local").unwrap();
    router.register(Pid::new(1, 1), "remote").unwrap();
    assert_eq!(router.lookup(Pid::new(0, 1)), Some("local"));
    assert_eq!(router.lookup(Pid::new(1, 1)), Some("remote"));
}

#[test]
fn a_receiver_may_use_the_router_while_delivering() {
    // Delivery runs outside the table's locks, so a receiver that
    // unregisters itself (or routes onwards) does not deadlock.
    struct SelfRemoving(Arc<Router<Arc<SelfRemoving>>>, Pid);
    impl Receiver for SelfRemoving {
        fn send(&self, package: Package) -> Result<(), SendError> {
            self.0.unregister(self.1);
            Err(SendError::ended(package))
        }
    }
    let router = Arc::new(Router::new());
    let pid = Pid::local(1);
    router
        .register(pid, Arc::new(SelfRemoving(Arc::clone(&router), pid)))
        .unwrap();
    let err = router.route(package(1, 0)).unwrap_err();
    assert_eq!(err.kind(), SendErrorKind::Ended);
    assert!(router.is_empty());
}

#[test]
fn router_is_a_receiver_and_debug_shows_len() {
    let inner = Arc::new(Router::new());
    let mailbox = Arc::new(Mailbox::default());
    inner.register(Pid::local(1), Arc::clone(&mailbox)).unwrap();
    let outer: &dyn Receiver = &*inner;
    outer.send(package(1, 3)).unwrap();
    assert_eq!(mailbox.inbox.lock().unwrap().len(), 1);
    assert_eq!(format!("{inner:?}"), "Router { len: 1, .. }");
}

#[test]
fn pids_lists_every_registration() {
    let router = Router::with_capacity(16);
    for id in 0..10 {
        router.register(Pid::local(id), id).unwrap();
    }
    let mut pids = router.pids();
    pids.sort();
    assert_eq!(pids, (0..10).map(Pid::local).collect::<Vec<_>>());
    assert_eq!(router.with(Pid::local(4), |v| v * 2), Some(8));
}
