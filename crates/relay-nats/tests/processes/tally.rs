//! What both sides of a two-process test run and count: numbered streams,
//! an echo that checks each sender's order, a player that checks each
//! answer.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use sched::prelude::*;

use crate::support::{Ping, Pong, Seq};

/// One sender's numbered messages as one receiver saw them.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stream {
    /// Messages received.
    pub(crate) count: u64,
    /// The highest number received.
    pub(crate) last: u64,
    /// Numbers jumped over (never received before a higher one).
    pub(crate) skipped: u64,
    /// Numbers received at or below one already received: duplicates or
    /// reordering. Always 0 when order is kept and nothing repeats.
    pub(crate) disorder: u64,
}

impl Stream {
    fn record(&mut self, n: u64) {
        self.count += 1;
        if n <= self.last {
            self.disorder += 1;
        } else {
            self.skipped += n - self.last - 1;
            self.last = n;
        }
    }

    /// `fanin <from> <count> <last> <skipped> <disorder>`.
    pub(crate) fn line(&self, from: u64) -> String {
        let Stream {
            count,
            last,
            skipped,
            disorder,
        } = self;
        format!("fanin {from} {count} {last} {skipped} {disorder}")
    }
}

/// Streams by sender number.
pub(crate) type Tally = Arc<Mutex<BTreeMap<u64, Stream>>>;

pub(crate) fn stream(tally: &Tally, from: u64) -> Stream {
    tally
        .lock()
        .unwrap()
        .get(&from)
        .copied()
        .unwrap_or_default()
}

pub(crate) fn total(tally: &Tally) -> u64 {
    tally.lock().unwrap().values().map(|s| s.count).sum()
}

/// Records every `Seq` it receives into a [`Tally`].
pub(crate) struct TallyRecorder(pub Tally);

impl sched::Process for TallyRecorder {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
        let mut tally = self.0.lock().unwrap();
        for event in events {
            if let Event::Message(package) = event {
                let seq = package.downcast::<Seq>().map_err(|_| "not a seq")?;
                tally.entry(seq.from).or_default().record(seq.n);
            }
        }
        Ok(())
    }
}

/// Answers `Ping(n)` with `Pong(n)`, counting pings and any that is not
/// its sender's previous number plus one.
pub(crate) struct CheckedEcho {
    pub(crate) pings: Arc<AtomicU64>,
    pub(crate) disorder: Arc<AtomicU64>,
    pub(crate) last: BTreeMap<Pid, u64>,
}

impl sched::Process for CheckedEcho {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            if let Event::Message(package) = event {
                let from = package.source();
                let Ping(n) = package.downcast::<Ping>().map_err(|_| "not a ping")?;
                let last = self.last.entry(from).or_insert(0);
                if n != *last + 1 {
                    self.disorder.fetch_add(1, Relaxed);
                }
                *last = n;
                self.pings.fetch_add(1, Relaxed);
                out.send(from, Pong(n))?;
            }
        }
        Ok(())
    }
}

/// Plays `rounds` of ping-pong with `peer`; fails on any answer that is
/// not to its last ping; counts answers in `pongs`; finishes with the
/// count.
pub(crate) struct CountingPlayer {
    pub(crate) peer: Pid,
    pub(crate) rounds: u64,
    pub(crate) pongs: Arc<AtomicU64>,
    pub(crate) sent: u64,
}

impl CountingPlayer {
    pub(crate) fn new(peer: Pid, rounds: u64, pongs: Arc<AtomicU64>) -> Self {
        CountingPlayer {
            peer,
            rounds,
            pongs,
            sent: 0,
        }
    }
}

impl sched::Process for CountingPlayer {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        if self.sent == 0 {
            self.sent = 1;
            out.send(self.peer, Ping(1))?;
        }
        for event in events {
            if let Event::Message(package) = event {
                let Pong(n) = package.downcast::<Pong>().map_err(|_| "not a pong")?;
                if n != self.sent {
                    return Err(format!("pong {n} for ping {}", self.sent).into());
                }
                self.pongs.fetch_add(1, Relaxed);
                if n == self.rounds {
                    out.finish(n);
                    return Ok(());
                }
                self.sent += 1;
                out.send(self.peer, Ping(self.sent))?;
            }
        }
        Ok(())
    }
}
