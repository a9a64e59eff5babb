//! The messages of the stress run: what they carry for the ledger, the
//! marker an unlink sends, and the bomb some carry, whose `Drop` panics
//! when the scheduler drops it.

use sched::prelude::*;
use sched::Package;

/// A message between processes, or from the feeder thread.
#[derive(Debug)]
pub(crate) struct Msg {
    /// Unique within the round.
    pub(crate) id: u64,
    /// Whom the sender addressed it to.
    pub(crate) to: Pid,
    /// It answers a token the receiver posted (so the receiver waits for it).
    pub(crate) solicited: bool,
    /// Sent with `send(After(..))`.
    pub(crate) delayed: bool,
    /// An unlink's marker, sent by a process to itself.
    pub(crate) marker: Option<Marker>,
    /// Goes off when dropped unless its receiver defuses it.
    pub(crate) bomb: Bomb,
}

impl Msg {
    /// A plain message, sent at once, with no armed bomb.
    pub(crate) fn new(id: u64, to: Pid, solicited: bool) -> Msg {
        Msg {
            id,
            to,
            solicited,
            delayed: false,
            marker: None,
            bomb: Bomb::new(false),
        }
    }
}

/// The message a bomb goes off with (the panic hook keeps it quiet).
pub(crate) const BOMB_MESSAGE: &str = "injected: a message payload's Drop panicked";

/// Part of every [`Msg`]: when armed, its `Drop` panics (unless the
/// thread is panicking already). A receiver defuses it before it drops
/// the message; the scheduler must survive dropping an armed one (a dead
/// letter, a cancelled delayed message).
#[derive(Debug)]
pub(crate) struct Bomb {
    armed: bool,
}

impl Bomb {
    pub(crate) fn new(armed: bool) -> Bomb {
        Bomb { armed }
    }

    pub(crate) fn armed(&self) -> bool {
        self.armed
    }

    /// Disarms it; returns whether it was armed.
    pub(crate) fn defuse(&mut self) -> bool {
        std::mem::replace(&mut self.armed, false)
    }
}

impl Drop for Bomb {
    fn drop(&mut self) {
        if self.armed && !std::thread::panicking() {
            panic!("{BOMB_MESSAGE}");
        }
    }
}

/// Defuses a package handed back by a refused send and gives its
/// message's id (`None` if it carries no `Msg`).
pub(crate) fn defuse(mut package: Package) -> Option<u64> {
    let msg = package.payload_mut::<Msg>()?;
    msg.bomb.defuse();
    Some(msg.id)
}

/// What an unlink's marker carries: the peer unlinked, and the serial
/// drawn before `unlink` was called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Marker {
    pub(crate) peer: Pid,
    pub(crate) seq: u64,
}
