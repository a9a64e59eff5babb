//! What a process has been sent but has not read yet, kept between its
//! steps in the order its next steps read it.
//!
//! A step is handed its events in three lanes: the system lane's signals
//! (`event::system_first`), then urgent messages, unwrapped
//! (`urgent.rs`), then everything else, each lane in arrival order. What
//! a step leaves unread keeps its lane: an urgent message a step did not
//! get to is still read before the ordinary messages that came before it,
//! and before an urgent one that came after it.
//!
//! # Cost
//!
//! A step that reads one event of a long backlog pays for that event and
//! for the events that arrived since the last step, never for the whole
//! backlog: the lanes are ring buffers, read from the front in place
//! (`Events` reads them through `&mut Backlog`), and new events are added
//! at their lanes' backs. Moving the backlog in front of every batch made
//! reading 16 000 queued messages one per step quadratic (5 to 14 s
//! against 3 to 5 ms for reading them all in one step); the `backlog`
//! benchmark (`benches/benches/backlog.rs`) measures that ratio. The order
//! is checked by `an_urgent_message_left_unread_stays_ahead_of_later_ones_and_the_backlog`
//! in `crates/sched/tests/system_lane.rs`.

use std::collections::VecDeque;

use super::event::Event;
use super::urgent::{is_urgent, unwrap};

/// The lanes, in the order a step reads them.
const SYSTEM: usize = 0;
const URGENT: usize = 1;
const REST: usize = 2;

/// Unread events by lane (see the module's documentation).
#[derive(Default)]
pub(crate) struct Backlog {
    /// Boxed, and allocated by the first event kept: the step path moves
    /// an `Option<Backlog>` through every step, almost always `None`, and
    /// three ring buffers inline made that a copy of about 100 bytes
    /// through the stack whose loads the processor could not forward from
    /// the small store that wrote `None` (a tenth of the worker loop's
    /// samples in a ping-pong profile).
    lanes: Option<Box<[VecDeque<Event>; 3]>>,
}

/// How a batch that `order_events` sorted starts: the system lane's
/// signals (which tell themselves apart), then urgent messages, unwrapped,
/// up to position `urgent_end`, then the rest.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Ranks {
    pub(crate) urgent_end: usize,
}

impl Backlog {
    /// Whether nothing is left to read.
    pub(crate) fn is_empty(&self) -> bool {
        self.lanes
            .as_ref()
            .is_none_or(|lanes| lanes.iter().all(VecDeque::is_empty))
    }

    /// How many events are left to read.
    pub(crate) fn len(&self) -> usize {
        self.lanes
            .as_ref()
            .map_or(0, |lanes| lanes.iter().map(VecDeque::len).sum())
    }

    /// The next event a step reads.
    pub(crate) fn pop_front(&mut self) -> Option<Event> {
        self.lanes
            .as_mut()?
            .iter_mut()
            .find_map(VecDeque::pop_front)
    }

    /// The events left, in the order a step would read them.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Event> {
        self.lanes.iter().flat_map(|lanes| lanes.iter().flatten())
    }

    /// Adds events that just arrived, in arrival order, each at the back
    /// of its lane; with `urgent` (the process has been sent urgent
    /// messages), urgent messages go to theirs, unwrapped.
    pub(crate) fn arrived(&mut self, events: impl Iterator<Item = Event>, urgent: bool) {
        for event in events {
            let (lane, event) = match event {
                Event::Message(package) if urgent && is_urgent(&package) => {
                    (URGENT, Event::Message(unwrap(package)))
                }
                event if event.is_signal() => (SYSTEM, event),
                event => (REST, event),
            };
            self.lane(lane).push_back(event);
        }
    }

    /// Lane `lane`, allocating the lanes if this is the first event kept.
    fn lane(&mut self, lane: usize) -> &mut VecDeque<Event> {
        &mut self.lanes.get_or_insert_with(Box::default)[lane]
    }

    /// Keeps what a step left of a batch sorted with `ranks`: `rest` are
    /// its events from position `taken` on, each back in its lane.
    pub(crate) fn keep(&mut self, rest: impl Iterator<Item = Event>, taken: usize, ranks: Ranks) {
        for (position, event) in (taken..).zip(rest) {
            let lane = if event.is_signal() {
                SYSTEM
            } else if position < ranks.urgent_end {
                URGENT
            } else {
                REST
            };
            self.lane(lane).push_back(event);
        }
    }

    /// Every event left, in reading order, leaving the backlog empty.
    pub(crate) fn take_all(&mut self) -> Vec<Event> {
        let mut all = Vec::with_capacity(self.len());
        for lane in self.lanes.take().into_iter().flat_map(|lanes| *lanes) {
            all.extend(lane);
        }
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::urgent::Urgent;
    use relay::{Package, Pid};

    fn message(n: u32) -> Event {
        Event::Message(Package::new(Pid::local(1), Pid::local(2), n))
    }

    fn urgent(n: u32) -> Event {
        Event::Message(Package::new(Pid::local(1), Pid::local(2), Urgent::new(n)))
    }

    fn read(backlog: &mut Backlog) -> Vec<String> {
        std::iter::from_fn(|| backlog.pop_front())
            .map(|e| match e {
                Event::Message(p) => format!("m{}", p.payload::<u32>().copied().unwrap_or(0)),
                Event::Cancel => "cancel".into(),
                other => format!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn arrivals_join_their_lanes_behind_what_waits_there() {
        let mut backlog = Backlog::default();
        backlog.arrived([message(1), urgent(2)].into_iter(), true);
        backlog.arrived([Event::Cancel, message(3), urgent(4)].into_iter(), true);
        assert_eq!(backlog.len(), 5);
        assert_eq!(read(&mut backlog), ["cancel", "m2", "m4", "m1", "m3"]);
        assert!(backlog.is_empty());
    }

    #[test]
    fn an_unread_urgent_message_keeps_its_lane() {
        // A batch sorted as [urgent 1, ordinary 2], of which the step read
        // nothing; then urgent 3 arrives: 1 and 3 come before 2.
        let mut backlog = Backlog::default();
        let rest = [message(1), message(2)];
        backlog.keep(rest.into_iter(), 0, Ranks { urgent_end: 1 });
        backlog.arrived([urgent(3)].into_iter(), true);
        assert_eq!(read(&mut backlog), ["m1", "m3", "m2"]);
    }

    #[test]
    fn what_a_step_left_keeps_its_position_in_the_batch() {
        // Sorted batch: [cancel, m1 (urgent), m2, m3]; the step read two.
        let mut backlog = Backlog::default();
        backlog.keep(
            [message(2), message(3)].into_iter(),
            2,
            Ranks { urgent_end: 2 },
        );
        backlog.arrived([Event::Cancel].into_iter(), false);
        assert_eq!(read(&mut backlog), ["cancel", "m2", "m3"]);
        backlog.arrived([message(4)].into_iter(), false);
        assert_eq!(backlog.take_all().len(), 1);
    }
}
