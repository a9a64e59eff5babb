//! The simulation's own pieces: what it holds back and in which order it
//! gives it back, and the pairs a partition cuts.

use std::time::{Duration, Instant};

use relay::{Package, Pid};

use super::faults::{Held, State};
use super::source::{Choices, Source};
use super::{cut_pairs, Faults, Trace};

fn state() -> State {
    State::new(
        Choices::new(Source::Seed(1)),
        Trace::new(true),
        Faults::none(),
        Instant::now(),
    )
}

/// A package from a process of node `from` to one of node `to`.
fn package(from: u32, to: u32, n: u32) -> Held {
    Held::Remote(Package::new(Pid::new(from, 1), Pid::new(to, 1), n), from)
}

fn number(held: Held) -> (u32, u32) {
    match held {
        Held::Remote(package, _) => (
            package.source().node(),
            *package.payload::<u32>().expect("a number"),
        ),
        _ => panic!("not a package"),
    }
}

/// Two processes of node 1 send to node 9: the second's package, due at
/// once, waits behind the first's, held: the network keeps one node's
/// order to another, whoever sent.
#[test]
fn a_package_waits_behind_one_another_process_of_its_node_sent_before() {
    let mut state = state();
    let now = state.now;
    state.hold(
        now + Duration::from_millis(10),
        Held::Remote(Package::new(Pid::new(1, 1), Pid::new(9, 1), 0_u32), 1),
    );
    state.hold(
        now,
        Held::Remote(Package::new(Pid::new(1, 2), Pid::new(9, 3), 1_u32), 1),
    );
    assert!(!state.any_due(), "the second waits for the first");
    state.now = now + Duration::from_millis(10);
    assert_eq!(state.take_due().map(number), Some((1, 0)));
    assert_eq!(state.take_due().map(number), Some((1, 1)));
}

#[test]
fn a_later_package_of_a_pair_never_overtakes_a_held_one() {
    let mut state = state();
    let now = state.now;
    // From 1 to 9: the first held 10 ms, the second due at once; from 2,
    // one due at 5 ms.
    state.hold(now + Duration::from_millis(10), package(1, 9, 0));
    state.hold(now, package(1, 9, 1));
    state.hold(now + Duration::from_millis(5), package(2, 9, 0));
    assert!(
        !state.any_due(),
        "nothing is due at once: the second waits for the first"
    );
    state.now = now + Duration::from_millis(5);
    assert_eq!(
        state.take_due().map(number),
        Some((2, 0)),
        "other senders overtake"
    );
    assert!(state.take_due().is_none());
    state.now = now + Duration::from_millis(10);
    assert_eq!(state.take_due().map(number), Some((1, 0)));
    assert_eq!(state.take_due().map(number), Some((1, 1)));
    assert!(state.take_due().is_none());
    // The pair is free again: a new package is due when it says.
    state.hold(state.now, package(1, 9, 2));
    assert_eq!(state.take_due().map(number), Some((1, 2)));
}

#[test]
fn equal_deadlines_come_back_in_the_order_held() {
    let mut state = state();
    let at = state.now + Duration::from_millis(1);
    for from in 1..=5 {
        state.hold(at, package(from, 9, 0));
    }
    state.now = at;
    let order: Vec<u32> = std::iter::from_fn(|| state.take_due().map(|h| number(h).0)).collect();
    assert_eq!(order, vec![1, 2, 3, 4, 5]);
}

#[test]
fn taking_all_empties_the_agenda_in_the_order_held() {
    let mut state = state();
    let now = state.now;
    state.hold(now + Duration::from_secs(2), package(1, 9, 0));
    state.hold(now + Duration::from_secs(1), package(2, 9, 0));
    let all: Vec<u32> = state.take_all().into_iter().map(|h| number(h).0).collect();
    assert_eq!(all, vec![1, 2]);
    assert!(state.next_due().is_none());
}

#[test]
fn a_partition_cuts_every_pair_once() {
    assert_eq!(cut_pairs(&[1, 2], &[3]), vec![(1, 3), (2, 3)]);
    assert_eq!(
        cut_pairs(&[3], &[1, 3]),
        vec![(1, 3)],
        "a node is never cut from itself"
    );
    assert_eq!(cut_pairs(&[2, 1], &[1, 2]), vec![(1, 2)]);
}

/// Waits for nothing, forever.
#[cfg(not(loom))]
struct Idle;

#[cfg(not(loom))]
impl crate::Process for Idle {
    type Done = relay::Payload;
    fn step(
        &mut self,
        _: &mut crate::Events<'_>,
        _: &mut crate::Output<'_>,
    ) -> Result<(), crate::BoxError> {
        Ok(())
    }
}

/// A monitor set up across a cut both sides have noticed already ends
/// with the node down, as one set before the cut does: its `monitor`
/// signal is lost to the cut, and the lost package tells its node again.
/// (It waited for a down that could never come.) Not under loom: a
/// simulation runs engines, whose primitives loom only runs in a model.
#[cfg(not(loom))]
#[test]
fn a_monitor_set_across_a_noticed_cut_ends_with_the_node_down() {
    use crate::{Engine, ExitReason};
    let mut sim = super::Simulation::cluster(
        super::Config::seed(1),
        [Engine::builder().node(1), Engine::builder().node(2)],
    )
    .expect("two nodes");
    let far = sim.node(2).unwrap().spawn(Idle).unwrap().pid();
    let before = sim.context().monitor(far);
    sim.run_for(Duration::from_millis(1)).unwrap();
    assert!(before.try_take().is_none(), "watching, nothing ended");
    sim.partition(&[1], &[2]);
    sim.run_for(Duration::from_millis(1)).unwrap();
    assert_eq!(
        before.try_take().map(|down| down.reason),
        Some(ExitReason::NodeDown)
    );
    // Both sides were told; now a new monitor across the cut.
    let during = sim.context().monitor(far);
    sim.run_for(Duration::from_millis(1)).unwrap();
    assert_eq!(
        during.try_take().map(|down| down.reason),
        Some(ExitReason::NodeDown),
        "a monitor set during the cut fires too"
    );
    // Healed: a monitor set now is not ended by the cut that was.
    sim.heal();
    let after = sim.context().monitor(far);
    sim.run_for(Duration::from_millis(1)).unwrap();
    assert!(after.try_take().is_none(), "watching again");
}
