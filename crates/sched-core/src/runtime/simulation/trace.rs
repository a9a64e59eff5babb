//! What a simulated run did, step by step: the record two runs are
//! compared by, and what a failing run is read from.

use std::fmt;
use std::time::Duration;

use relay::Pid;

use crate::contract::down::ExitReason;
use crate::contract::event::Event;
use crate::worker::StepEnd;

/// One event a step was given, without its payload (payloads are the
/// user's types, which a trace cannot read).
///
/// # Examples
///
/// ```
/// use sched::sim::Delivered;
/// use sched::Pid;
/// let d = Delivered::Message { from: Pid::OUTSIDE };
/// assert_eq!(d.to_string(), format!("message from {}", Pid::OUTSIDE));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Delivered {
    /// A command's completion (`ok`: it succeeded).
    Completion {
        /// Its tag.
        tag: u64,
        /// Whether it carried a result rather than an error.
        ok: bool,
    },
    /// A message.
    Message {
        /// Its sender.
        from: Pid,
    },
    /// A timer.
    Timer {
        /// Its tag.
        tag: u64,
    },
    /// A monitored process's end.
    Down {
        /// The process that ended.
        pid: Pid,
        /// How.
        reason: ExitReason,
    },
    /// A linked process's end, trapped.
    Exit {
        /// The process that ended.
        pid: Pid,
        /// How.
        reason: ExitReason,
    },
    /// A request (an ask).
    Request {
        /// The asker.
        from: Pid,
    },
    /// The answer to an ask (`ok`: an answer, not an error).
    Reply {
        /// Whether it was an answer.
        ok: bool,
    },
    /// The shutdown's cancel.
    Cancel,
}

impl Delivered {
    pub(crate) fn of(event: &Event) -> Delivered {
        match event {
            Event::Completion { tag, result } => Delivered::Completion {
                tag: tag.0,
                ok: result.is_ok(),
            },
            Event::Message(package) => Delivered::Message {
                from: package.source(),
            },
            Event::Timer { tag, .. } => Delivered::Timer { tag: tag.0 },
            Event::Down(down) => Delivered::Down {
                pid: down.pid,
                reason: down.reason,
            },
            Event::Exit { pid, reason, .. } => Delivered::Exit {
                pid: *pid,
                reason: *reason,
            },
            Event::Request(request) => Delivered::Request {
                from: request.package().source(),
            },
            Event::Reply { result, .. } => Delivered::Reply { ok: result.is_ok() },
            Event::Cancel => Delivered::Cancel,
        }
    }

    /// Its bytes in the trace's hash.
    fn encode(&self, out: &mut Vec<u8>) {
        let (kind, a, b) = match *self {
            Delivered::Completion { tag, ok } => (1u8, tag, u64::from(ok)),
            Delivered::Message { from } => (2, pid_bits(from), 0),
            Delivered::Timer { tag } => (3, tag, 0),
            Delivered::Down { pid, reason } => (4, pid_bits(pid), reason as u64),
            Delivered::Exit { pid, reason } => (5, pid_bits(pid), reason as u64),
            Delivered::Request { from } => (6, pid_bits(from), 0),
            Delivered::Reply { ok } => (7, u64::from(ok), 0),
            Delivered::Cancel => (8, 0, 0),
        };
        out.push(kind);
        out.extend_from_slice(&a.to_le_bytes());
        out.extend_from_slice(&b.to_le_bytes());
    }
}

fn pid_bits(pid: Pid) -> u64 {
    pid.id() ^ (u64::from(pid.node()) << 48)
}

impl fmt::Display for Delivered {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Delivered::Completion { tag, ok } => {
                write!(f, "completion {tag} ({})", if *ok { "ok" } else { "error" })
            }
            Delivered::Message { from } => write!(f, "message from {from}"),
            Delivered::Timer { tag } => write!(f, "timer {tag}"),
            Delivered::Down { pid, reason } => write!(f, "down {pid} ({reason})"),
            Delivered::Exit { pid, reason } => write!(f, "exit {pid} ({reason})"),
            Delivered::Request { from } => write!(f, "request from {from}"),
            Delivered::Reply { ok } => {
                write!(f, "reply ({})", if *ok { "answer" } else { "none" })
            }
            Delivered::Cancel => f.write_str("cancel"),
        }
    }
}

/// A fault the simulation injected.
///
/// # Examples
///
/// ```
/// use sched::sim::Fault;
/// use sched::Pid;
/// assert_eq!(Fault::Crash { pid: Pid::local(3) }.to_string(), format!("crash {}", Pid::local(3)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Fault {
    /// A message to `to` was held back for `by` (virtual time).
    MessageDelayed {
        /// Its target.
        to: Pid,
        /// For how long.
        by: Duration,
    },
    /// A message to `to` was lost.
    MessageLost {
        /// Its target.
        to: Pid,
    },
    /// A message to `to` was delivered twice.
    MessageDuplicated {
        /// Its target.
        to: Pid,
    },
    /// A request (the question of an ask) to `to` was held back for
    /// `by`.
    RequestDelayed {
        /// Its target.
        to: Pid,
        /// For how long.
        by: Duration,
    },
    /// A request to `to` was lost: its asker is not told, and learns by
    /// its timeout.
    RequestLost {
        /// Its target.
        to: Pid,
    },
    /// A request to `to` was delivered twice (the copy's answer goes
    /// nowhere).
    RequestDuplicated {
        /// Its target.
        to: Pid,
    },
    /// A completion for `to` was held back for `by`.
    CompletionDelayed {
        /// The process that yielded the command.
        to: Pid,
        /// For how long.
        by: Duration,
    },
    /// A completion for `to` was lost: the process got
    /// [`CommandError::Dropped`](crate::CommandError::Dropped), as when a
    /// handler drops its completer.
    CompletionLost {
        /// The process that yielded the command.
        to: Pid,
    },
    /// A command of `pid` failed instead of reaching its handler.
    HandlerFailed {
        /// The process that yielded it.
        pid: Pid,
    },
    /// A command of `pid` made its handler panic.
    HandlerPanicked {
        /// The process that yielded it.
        pid: Pid,
    },
    /// The step of `pid` panicked instead of running.
    Crash {
        /// The process crashed.
        pid: Pid,
    },
    /// A package for `to` was lost: its sender's node was cut off from
    /// `to`'s by a partition.
    Unreachable {
        /// Its target.
        to: Pid,
    },
}

impl Fault {
    fn encode(&self, out: &mut Vec<u8>) {
        let (kind, pid, by) = match *self {
            Fault::MessageDelayed { to, by } => (1u8, to, by),
            Fault::MessageLost { to } => (2, to, Duration::ZERO),
            Fault::MessageDuplicated { to } => (3, to, Duration::ZERO),
            Fault::CompletionDelayed { to, by } => (4, to, by),
            Fault::CompletionLost { to } => (5, to, Duration::ZERO),
            Fault::HandlerFailed { pid } => (6, pid, Duration::ZERO),
            Fault::HandlerPanicked { pid } => (7, pid, Duration::ZERO),
            Fault::Crash { pid } => (8, pid, Duration::ZERO),
            Fault::Unreachable { to } => (9, to, Duration::ZERO),
            Fault::RequestDelayed { to, by } => (10, to, by),
            Fault::RequestLost { to } => (11, to, Duration::ZERO),
            Fault::RequestDuplicated { to } => (12, to, Duration::ZERO),
        };
        out.push(kind);
        out.extend_from_slice(&pid_bits(pid).to_le_bytes());
        out.extend_from_slice(&(by.as_nanos() as u64).to_le_bytes());
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::MessageDelayed { to, by } => write!(f, "message to {to} delayed {by:?}"),
            Fault::MessageLost { to } => write!(f, "message to {to} lost"),
            Fault::MessageDuplicated { to } => write!(f, "message to {to} duplicated"),
            Fault::RequestDelayed { to, by } => write!(f, "request to {to} delayed {by:?}"),
            Fault::RequestLost { to } => write!(f, "request to {to} lost"),
            Fault::RequestDuplicated { to } => write!(f, "request to {to} duplicated"),
            Fault::CompletionDelayed { to, by } => {
                write!(f, "completion for {to} delayed {by:?}")
            }
            Fault::CompletionLost { to } => write!(f, "completion for {to} lost"),
            Fault::HandlerFailed { pid } => write!(f, "handler of {pid} failed"),
            Fault::HandlerPanicked { pid } => write!(f, "handler of {pid} panicked"),
            Fault::Crash { pid } => write!(f, "crash {pid}"),
            Fault::Unreachable { to } => write!(f, "package to {to} lost to a partition"),
        }
    }
}

/// One line of a trace.
///
/// # Examples
///
/// ```
/// use sched::sim::Entry;
/// use std::time::Duration;
/// let line = Entry::Clock { at: Duration::from_secs(1) };
/// assert_eq!(line.to_string(), "clock 1s");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Entry {
    /// A step.
    Step {
        /// The worker that ran it.
        worker: usize,
        /// The process.
        pid: Pid,
        /// Which step of the process it was (its first is 1).
        step: u64,
        /// What it was given.
        events: Vec<Delivered>,
        /// How it ended: `continue`, `idle`, `yielded N`, `done`,
        /// `upgrade` or `failed`.
        end: &'static str,
    },
    /// A process ended.
    Ended {
        /// The process.
        pid: Pid,
        /// How.
        reason: ExitReason,
    },
    /// A fault was injected.
    Fault(Fault),
    /// Virtual time moved to `at` (since the simulation began).
    Clock {
        /// The new time.
        at: Duration,
    },
    /// The network between these nodes was cut (each pair in both
    /// directions).
    Partition {
        /// The pairs of nodes cut off from each other.
        between: Vec<(u32, u32)>,
    },
    /// These cuts healed.
    Heal {
        /// The pairs of nodes that reach each other again.
        between: Vec<(u32, u32)>,
    },
    /// A process waited longer than the scheduling bound allows (see
    /// [`Simulation::fairness`](super::Simulation::fairness)).
    Unfair(super::Wait),
}

impl fmt::Display for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Entry::Step {
                worker,
                pid,
                step,
                events,
                end,
            } => {
                write!(f, "w{worker} {pid} step {step} [")?;
                for (i, event) in events.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{event}")?;
                }
                write!(f, "] -> {end}")
            }
            Entry::Ended { pid, reason } => write!(f, "{pid} ended ({reason})"),
            Entry::Fault(fault) => write!(f, "fault: {fault}"),
            Entry::Clock { at } => write!(f, "clock {at:?}"),
            Entry::Partition { between } => write!(f, "partition {between:?}"),
            Entry::Heal { between } => write!(f, "heal {between:?}"),
            Entry::Unfair(wait) => write!(f, "unfair: {wait}"),
        }
    }
}

pub(crate) fn end_name(end: StepEnd) -> &'static str {
    match end {
        StepEnd::Continue => "continue",
        StepEnd::Idle => "idle",
        StepEnd::Yielded(_) => "yielded",
        StepEnd::Done => "done",
        StepEnd::Upgrade => "upgrade",
        StepEnd::Failed => "failed",
    }
}

/// The record of a simulated run: every step (worker, PID, step number,
/// events given, how it ended), every process's end, every fault and every
/// move of the clock, and a hash over all of it.
///
/// Two runs with the same source and the same inputs have equal traces,
/// byte for byte: equal [`hash`](Trace::hash)es.
///
/// # Examples
///
/// ```
/// use sched::sim::Trace;
/// let trace = Trace::default();
/// assert_eq!(trace.steps(), 0);
/// assert_eq!(trace.hash(), Trace::default().hash());
/// ```
#[derive(Debug, Clone)]
pub struct Trace {
    entries: Vec<Entry>,
    /// Whether entries are kept (the hash and counts always are).
    keep: bool,
    hash: u64,
    steps: u64,
    faults: u64,
    buf: Vec<u8>,
}

impl Default for Trace {
    fn default() -> Trace {
        Trace::new(true)
    }
}

/// FNV-1a's offset basis and prime (64 bits): a hash that is the same on
/// every machine and every run, unlike std's seeded one.
const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0100_0000_01b3;

impl Trace {
    pub(crate) fn new(keep: bool) -> Trace {
        Trace {
            entries: Vec::new(),
            keep,
            hash: FNV_OFFSET,
            steps: 0,
            faults: 0,
            buf: Vec::with_capacity(128),
        }
    }

    pub(crate) fn push(&mut self, entry: Entry) {
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        match &entry {
            Entry::Step {
                worker,
                pid,
                step,
                events,
                end,
            } => {
                self.steps += 1;
                buf.push(1);
                buf.extend_from_slice(&(*worker as u64).to_le_bytes());
                buf.extend_from_slice(&pid_bits(*pid).to_le_bytes());
                buf.extend_from_slice(&step.to_le_bytes());
                buf.extend_from_slice(&(events.len() as u64).to_le_bytes());
                for event in events {
                    event.encode(&mut buf);
                }
                buf.extend_from_slice(end.as_bytes());
            }
            Entry::Ended { pid, reason } => {
                buf.push(2);
                buf.extend_from_slice(&pid_bits(*pid).to_le_bytes());
                buf.push(*reason as u8);
            }
            Entry::Fault(fault) => {
                self.faults += 1;
                buf.push(3);
                fault.encode(&mut buf);
            }
            Entry::Clock { at } => {
                buf.push(4);
                buf.extend_from_slice(&(at.as_nanos() as u64).to_le_bytes());
            }
            Entry::Partition { between } | Entry::Heal { between } => {
                buf.push(if matches!(entry, Entry::Partition { .. }) {
                    5
                } else {
                    6
                });
                for (a, b) in between {
                    buf.extend_from_slice(&a.to_le_bytes());
                    buf.extend_from_slice(&b.to_le_bytes());
                }
            }
            Entry::Unfair(wait) => {
                buf.push(7);
                buf.extend_from_slice(&pid_bits(wait.pid).to_le_bytes());
                buf.extend_from_slice(&wait.waited.to_le_bytes());
            }
        }
        for byte in &buf {
            self.hash = (self.hash ^ u64::from(*byte)).wrapping_mul(FNV_PRIME);
        }
        self.buf = buf;
        if self.keep {
            self.entries.push(entry);
        }
    }

    /// The entries, in order (empty when the simulation was told not to
    /// keep them: see [`Config::keep_trace`](super::Config::keep_trace)).
    ///
    /// # Examples
    ///
    /// See [`Simulation`](super::Simulation).
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// A hash over every entry's bytes (FNV-1a), kept even when the
    /// entries are not.
    ///
    /// # Examples
    ///
    /// See [`Trace`].
    pub fn hash(&self) -> u64 {
        self.hash
    }

    /// How many steps ran.
    ///
    /// # Examples
    ///
    /// See [`Trace`].
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// How many faults were injected.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(sched::sim::Trace::default().faults(), 0);
    /// ```
    pub fn faults(&self) -> u64 {
        self.faults
    }
}

impl fmt::Display for Trace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for entry in &self.entries {
            writeln!(f, "{entry}")?;
        }
        write!(
            f,
            "{} steps, {} faults, hash {:016x}",
            self.steps, self.faults, self.hash
        )
    }
}
