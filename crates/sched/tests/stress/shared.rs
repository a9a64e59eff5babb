//! What the processes, command handlers and harness threads of one round
//! share: the sources of unique tags and message ids, the board where
//! waiting processes ask for messages, the list of processes to wait for,
//! the processes to terminate, and the records the checker reads at the end.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::{mpsc, Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use sched::actor::{AskId, MonitorId};
use sched::command::Completer;
use sched::prelude::*;
use sched::Monitor;

use crate::notices::{DownRec, ExitRec, ReplyRec, RequestRec};

use crate::process::Observed;
use crate::rng::Rng;
use crate::script::{Kind, Script};

/// Locks `mutex`, ignoring poisoning: a panicking checker thread must not
/// hide the report of what it found behind a second panic.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A process the harness waits for.
#[derive(Debug)]
pub(crate) struct Tracked {
    pub(crate) pid: Pid,
    pub(crate) script: Script,
    pub(crate) observed: Arc<Observed>,
    pub(crate) completion: Completion,
    /// The process whose step spawned it (`None`: submitted by the harness).
    pub(crate) parent: Option<Pid>,
    /// A monitor set from outside right after its submission, and whether
    /// it was certainly live then.
    pub(crate) outside: Option<(Monitor, bool)>,
}

/// A process to terminate once `due` has passed.
#[derive(Debug)]
pub(crate) struct Kill {
    pub(crate) pid: Pid,
    pub(crate) due: Instant,
    pub(crate) observed: Arc<Observed>,
}

/// One message a waiting process asked for; whoever takes the token sends
/// it. `pass` is the feeder pass it was posted in: the feeder leaves fresh
/// tokens to the processes' `Send` ops for a while.
#[derive(Debug, Clone, Copy)]
struct Token {
    pid: Pid,
    pass: u64,
}

/// A message or completion the engine reported as a dead letter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DeadLetter {
    /// Message `id`, addressed to `to`, was still queued when `pid` ended.
    Message {
        pid: Pid,
        id: u64,
        to: Pid,
    },
    /// The completion of `tag` was still queued when `pid` ended.
    Completion {
        pid: Pid,
        tag: u64,
    },
    Down(DownRec),
    Exit(ExitRec),
    /// A timer's event (a `DemonitorMidBatch` timer) still queued when
    /// `pid` ended.
    Timer {
        pid: Pid,
        tag: u64,
    },
    Request(RequestRec),
    Reply(ReplyRec),
}

/// An asynchronous completion for the completer threads.
#[derive(Debug)]
pub(crate) struct Job {
    pub(crate) kind: Kind,
    pub(crate) tag: u64,
    pub(crate) completer: Completer,
}

/// A node no process runs on.
pub(crate) const NOWHERE: u32 = 7;

/// The longest a doomed process lives before the terminator ends it.
const MAX_KILL_DELAY: Duration = Duration::from_micros(3_000);

/// The state one round shares.
#[derive(Debug, Default)]
pub(crate) struct Shared {
    next_tag: AtomicU64,
    next_message: AtomicU64,
    /// The highest PID handed out: stray messages go up to just past it.
    max_pid: AtomicU64,
    board: Mutex<Vec<Token>>,
    feeder_pass: AtomicU64,
    tracked: Mutex<Vec<Tracked>>,
    kills: Mutex<Vec<Kill>>,
    jobs: Mutex<Option<mpsc::Sender<Job>>>,
    /// Completers the `Hold` handler keeps until the round is over.
    pub(crate) held: Mutex<Vec<Completer>>,
    pub(crate) dead: Mutex<Vec<DeadLetter>>,
    /// Tags whose completer reported `Stale` (the process had ended).
    pub(crate) stale: Mutex<Vec<u64>>,
    /// Tags whose completer a completer thread dropped.
    pub(crate) async_dropped: Mutex<Vec<u64>>,
    /// Every outcome the `on_complete` hook saw, by process id.
    pub(crate) ended: Mutex<HashMap<u64, Vec<String>>>,
    /// What handlers and hooks found wrong.
    pub(crate) violations: Mutex<Vec<String>>,
    /// Set once every process has ended: the helper threads stop.
    pub(crate) stop: AtomicBool,
    /// The serials of monitors, asks and cancels (unique in the round).
    next_serial: AtomicU64,
    /// Every admitted process, in order, for peers to pick from.
    pids: Mutex<Vec<Pid>>,
    observed: Mutex<HashMap<Pid, Arc<Observed>>>,
    /// The processes that trap exits (the only ones others link to).
    trapping: Mutex<Vec<Pid>>,
    /// Monitor and ask ids by serial, for notices seen or dead-lettered.
    pub(crate) monitor_serials: Mutex<HashMap<MonitorId, u64>>,
    pub(crate) ask_serials: Mutex<HashMap<AskId, u64>>,
    /// Stray messages may reach live processes. Without them, nothing
    /// wakes a process but the events it waits for, so an event whose
    /// wakeup the scheduler lost strands the process for good and the
    /// round reports a hang (with them, a stray would rescue it sooner or
    /// later and the loss would only show as slowness).
    strays_reach_processes: bool,
    /// Armed bombs the dead-letter hook let go off (in the scheduler's
    /// guard).
    pub(crate) bombs_dead: AtomicU64,
}

impl Shared {
    pub(crate) fn new(strays_reach_processes: bool) -> Self {
        Shared {
            strays_reach_processes,
            ..Shared::default()
        }
    }

    pub(crate) fn next_tag(&self) -> u64 {
        self.next_tag.fetch_add(1, SeqCst) + 1
    }

    pub(crate) fn next_message_id(&self) -> u64 {
        self.next_message.fetch_add(1, SeqCst) + 1
    }

    pub(crate) fn violation(&self, what: String) {
        lock(&self.violations).push(what);
    }

    /// A PID to send a stray message to: mostly one handed out already
    /// (live or ended), sometimes one not handed out yet; or, in a round
    /// where strays must not reach processes, one on a node that does not
    /// exist.
    pub(crate) fn stray_target(&self, rng: &mut Rng) -> Pid {
        let max = self.max_pid.load(SeqCst);
        let id = rng.range(1, max + 2);
        if self.strays_reach_processes {
            Pid::local(id)
        } else {
            Pid::new(NOWHERE, id)
        }
    }

    pub(crate) fn next_serial(&self) -> u64 {
        self.next_serial.fetch_add(1, SeqCst) + 1
    }

    /// A random admitted process, or now and then a PID no process has.
    pub(crate) fn random_peer(&self, rng: &mut Rng) -> Pid {
        let pids = lock(&self.pids);
        if pids.is_empty() || rng.chance(1, 8) {
            return Pid::new(NOWHERE, rng.range(1, 1_000));
        }
        pids[rng.below(pids.len() as u64) as usize]
    }

    /// A random process that traps exits, if any.
    pub(crate) fn random_trapping(&self, rng: &mut Rng) -> Option<Pid> {
        let trapping = lock(&self.trapping);
        (!trapping.is_empty()).then(|| trapping[rng.below(trapping.len() as u64) as usize])
    }

    pub(crate) fn traps(&self, pid: Pid) {
        lock(&self.trapping).push(pid);
    }

    pub(crate) fn observed(&self, pid: Pid) -> Option<Arc<Observed>> {
        lock(&self.observed).get(&pid).cloned()
    }

    /// Posts `n` tokens asking for messages to `pid`.
    pub(crate) fn ask(&self, pid: Pid, n: u64) {
        let pass = self.feeder_pass.load(SeqCst);
        let mut board = lock(&self.board);
        for _ in 0..n {
            board.push(Token { pid, pass });
        }
    }

    /// Takes a token for a process's `Send` op: the newest, so that the
    /// feeder, which takes the oldest, rarely competes for it.
    pub(crate) fn take_token(&self) -> Option<Pid> {
        lock(&self.board).pop().map(|t| t.pid)
    }

    /// Takes a token `pid` posted, if any is left (for a second message to
    /// the same process).
    pub(crate) fn take_token_for(&self, pid: Pid) -> bool {
        let mut board = lock(&self.board);
        match board.iter().rposition(|t| t.pid == pid) {
            Some(at) => {
                board.remove(at);
                true
            }
            None => false,
        }
    }

    /// Whether stray messages (and unsolicited delayed ones) may reach
    /// processes this round.
    pub(crate) fn strays_reach_processes(&self) -> bool {
        self.strays_reach_processes
    }

    /// Starts a feeder pass: returns the tokens posted at least one whole
    /// pass ago (nobody took them in the meantime).
    pub(crate) fn feeder_tokens(&self) -> Vec<Pid> {
        let pass = self.feeder_pass.fetch_add(1, SeqCst) + 1;
        lock(&self.board)
            .extract_if(.., |t| t.pass + 1 < pass)
            .map(|t| t.pid)
            .collect()
    }

    /// The PIDs of the tokens nobody took (checked at the end of a round:
    /// they must all belong to terminated processes).
    pub(crate) fn leftover_tokens(&self) -> Vec<Pid> {
        lock(&self.board).iter().map(|t| t.pid).collect()
    }

    /// Records a process that was submitted or spawned: the harness will
    /// wait for it and, if its script is doomed, terminate it within a few
    /// milliseconds.
    pub(crate) fn admit(&self, tracked: Tracked, rng: &mut Rng) {
        self.max_pid.fetch_max(tracked.pid.id(), SeqCst);
        lock(&self.pids).push(tracked.pid);
        lock(&self.observed).insert(tracked.pid, tracked.observed.clone());
        if tracked.script.doomed {
            let delay = if rng.chance(1, 4) {
                Duration::ZERO
            } else {
                MAX_KILL_DELAY.mul_f64(rng.below(1_000) as f64 / 1_000.0)
            };
            lock(&self.kills).push(Kill {
                pid: tracked.pid,
                due: Instant::now() + delay,
                observed: tracked.observed.clone(),
            });
        }
        lock(&self.tracked).push(tracked);
    }

    /// Notes a PID handed out for a submission that was refused (so that
    /// stray messages target it too).
    pub(crate) fn saw_pid(&self, pid: Pid) {
        self.max_pid.fetch_max(pid.id(), SeqCst);
    }

    /// Takes the processes admitted since the last call.
    pub(crate) fn take_tracked(&self) -> Vec<Tracked> {
        std::mem::take(&mut *lock(&self.tracked))
    }

    /// Takes the kills that are due by `now`.
    pub(crate) fn due_kills(&self, now: Instant) -> Vec<Kill> {
        lock(&self.kills).extract_if(.., |k| k.due <= now).collect()
    }

    pub(crate) fn set_jobs(&self, sender: Option<mpsc::Sender<Job>>) {
        *lock(&self.jobs) = sender;
    }

    /// Hands an asynchronous completion to the completer threads. `Err`
    /// gives the job back if they have stopped.
    pub(crate) fn send_job(&self, job: Job) -> Result<(), Job> {
        match &*lock(&self.jobs) {
            Some(sender) => sender.send(job).map_err(|e| e.0),
            None => Err(job),
        }
    }
}
