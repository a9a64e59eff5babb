//! The routing table against a `HashMap` model under random operation
//! sequences.
#![cfg(not(loom))]

use proptest::prelude::*;
use relay::{Package, Pid, Receiver, Router, SendError, SendErrorKind};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// A receiver that records the payloads it accepted, or refuses everything
/// as a closed process does.
struct Inbox {
    open: bool,
    got: Mutex<Vec<u64>>,
}

impl Receiver for Inbox {
    fn send(&self, package: Package) -> Result<(), SendError> {
        if !self.open {
            return Err(SendError::ended(package));
        }
        let value = *package.payload::<u64>().expect("payload is a u64");
        self.got.lock().unwrap().push(value);
        Ok(())
    }
}

#[derive(Clone, Debug)]
enum Op {
    Register { pid: Pid, open: bool },
    Unregister(Pid),
    Lookup(Pid),
    Route { pid: Pid, value: u64 },
}

/// PIDs from a small pool (two nodes, a few ids) so that operations collide.
fn pid() -> impl Strategy<Value = Pid> {
    (0_u32..2, 0_u64..6).prop_map(|(node, id)| Pid::new(node, id))
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (pid(), prop::bool::weighted(0.8)).prop_map(|(pid, open)| Op::Register { pid, open }),
        2 => pid().prop_map(Op::Unregister),
        1 => pid().prop_map(Op::Lookup),
        4 => (pid(), any::<u64>()).prop_map(|(pid, value)| Op::Route { pid, value }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(if cfg!(miri) { 8 } else { 512 }))]

    #[test]
    fn router_behaves_like_a_hash_map(ops in prop::collection::vec(op(), 0..80)) {
        let router: Router<Arc<Inbox>> = Router::new();
        // Every inbox ever created, and what each should have received.
        let mut inboxes: Vec<Arc<Inbox>> = Vec::new();
        let mut expected: Vec<Vec<u64>> = Vec::new();
        // The model: PID -> index into `inboxes`.
        let mut model: HashMap<Pid, usize> = HashMap::new();

        for op in ops {
            match op {
                Op::Register { pid, open } => {
                    let inbox = Arc::new(Inbox { open, got: Mutex::new(Vec::new()) });
                    let result = router.register(pid, Arc::clone(&inbox));
                    if let Some(&existing) = model.get(&pid) {
                        let err = result.expect_err("duplicate PID must be refused");
                        prop_assert_eq!(err.pid(), pid);
                        prop_assert!(Arc::ptr_eq(&err.into_route(), &inbox));
                        let current = router.lookup(pid).expect("still registered");
                        prop_assert!(Arc::ptr_eq(&current, &inboxes[existing]));
                    } else {
                        prop_assert!(result.is_ok());
                        model.insert(pid, inboxes.len());
                        inboxes.push(inbox);
                        expected.push(Vec::new());
                    }
                }
                Op::Unregister(pid) => match (router.unregister(pid), model.remove(&pid)) {
                    (Some(got), Some(want)) => prop_assert!(Arc::ptr_eq(&got, &inboxes[want])),
                    (None, None) => {}
                    (got, want) => prop_assert!(
                        false,
                        "unregister {}: table had a route: {}, model had one: {}",
                        pid, got.is_some(), want.is_some()
                    ),
                },
                Op::Lookup(pid) => {
                    prop_assert_eq!(router.contains(pid), model.contains_key(&pid));
                    match (router.lookup(pid), model.get(&pid)) {
                        (Some(got), Some(&want)) => prop_assert!(Arc::ptr_eq(&got, &inboxes[want])),
                        (None, None) => {}
                        (got, want) => prop_assert!(
                            false,
                            "lookup {}: table had a route: {}, model had one: {}",
                            pid, got.is_some(), want.is_some()
                        ),
                    }
                }
                Op::Route { pid, value } => {
                    let result = router.route(Package::new(Pid::local(0), pid, value));
                    match model.get(&pid) {
                        None => {
                            let err = result.expect_err("unknown target");
                            prop_assert_eq!(err.kind(), SendErrorKind::UnknownTarget);
                            prop_assert_eq!(err.target(), pid);
                            prop_assert_eq!(err.into_package().downcast::<u64>().ok(), Some(value));
                        }
                        Some(&index) if !inboxes[index].open => {
                            let err = result.expect_err("closed target");
                            prop_assert_eq!(err.kind(), SendErrorKind::Ended);
                            prop_assert_eq!(err.into_package().downcast::<u64>().ok(), Some(value));
                        }
                        Some(&index) => {
                            prop_assert!(result.is_ok());
                            expected[index].push(value);
                        }
                    }
                }
            }
            prop_assert_eq!(router.len(), model.len());
            prop_assert_eq!(router.is_empty(), model.is_empty());
            let mut pids = router.pids();
            pids.sort();
            let mut want: Vec<Pid> = model.keys().copied().collect();
            want.sort();
            prop_assert_eq!(pids, want);
        }

        // Every accepted package reached exactly its inbox, in order.
        for (inbox, want) in inboxes.iter().zip(&expected) {
            prop_assert_eq!(&*inbox.got.lock().unwrap(), want);
        }
    }
}
