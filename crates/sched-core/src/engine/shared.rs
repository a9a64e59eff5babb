//! The state every worker, completer and handle shares, and how a
//! runnable process reaches a run queue.

use std::sync::atomic::Ordering::Relaxed;

use crossbeam_utils::CachePadded;

use super::hooks::Hooks;
use super::live::Live;
use super::stats::WorkerCounters;
use crate::record::state::Wake;
use crate::record::{Record, RecordRef};
use crate::runqueue::local::{self, Joined, Local};
use crate::runqueue::next_slot::NextSlot;
use crate::sync::{Arc, AtomicU64, Fifo};

/// What other threads may touch of a worker: stealers of its deques and
/// its counters.
#[derive(Debug)]
pub(crate) struct Remote {
    /// Its ready queues, by lane (see `Local::ready`).
    pub(crate) ready: Box<[deque::Stealer<RecordRef>]>,
    /// Its nurseries, by lane (see `Local::nursery`).
    pub(crate) nursery: Box<[deque::Stealer<RecordRef>]>,
    /// Its light queues, by level (see `Local::light`).
    pub(crate) light: Box<[deque::Stealer<RecordRef>]>,
    /// Its step time per group (with groups only).
    pub(crate) group_clocks: crate::runqueue::shares::GroupClocks,
    /// Its `next` slot, which an idle worker may take from when its
    /// process has waited there a while (the owner is in a long step).
    pub(crate) next: Arc<NextSlot>,
    pub(crate) counters: WorkerCounters,
    /// Its histograms, when the builder turned them on.
    pub(crate) histograms: Option<Box<super::histogram::WorkerHistograms>>,
}

/// The state every worker, completer and handle shares.
#[derive(Debug)]
pub(crate) struct Shared {
    /// The global queues of new processes submitted from outside the
    /// workers, one per group (`High` ones go to `woken`, ahead of the
    /// bulk).
    pub(crate) injector: Box<[Fifo<RecordRef>]>,
    /// The global queues of processes woken from outside the workers (a
    /// message posted, a command completed, a reply), by
    /// lane (`Priority::index * groups + group`): taken before
    /// `injector`, so a wakeup does not wait behind every process
    /// submitted before it. Under a burst of 50 000 submissions, a message
    /// posted from another thread reached its step 47 ms late (p99,
    /// `burst` bench) with one queue for both.
    pub(crate) woken: Box<[Fifo<RecordRef>]>,
    /// Kill tickets: processes terminated while they waited (in a run
    /// queue, with `true`: an entry of it is still queued; or for events,
    /// `false`), for the next worker to end out of their turn (see
    /// `Shared::end_soon`, and `reap_killed` in `worker/end.rs`). Written
    /// only by a terminate; each worker reads whether it is empty once
    /// per pick.
    pub(crate) kills: Fifo<(RecordRef, bool)>,
    /// The groups processes are spawned into (just the default one
    /// unless the builder declared some).
    pub(crate) groups: crate::runqueue::shares::Groups,
    pub(crate) remotes: Box<[CachePadded<Remote>]>,
    pub(crate) sleepers: crate::runqueue::sleep::Sleepers,
    /// Every registered process, by PID (and the PIDs to hand out).
    pub(crate) processes: crate::table::registry::Registry<Record>,
    pub(crate) hooks: Hooks,
    /// `usize::MAX` when mailboxes are unbounded.
    pub(crate) mailbox_capacity: usize,
    /// The longest an idle worker lingers before it parks (zero: never).
    pub(crate) linger: std::time::Duration,
    /// Whether messages are counted in each mailbox word: when mailboxes
    /// are bounded, or for introspection's depth (`count_mailboxes`).
    /// Without either, a send and a drain touch no count.
    pub(crate) counts_messages: bool,
    /// Whether the workers record histograms (the builder's
    /// `histograms(true)`): then whoever queues a process stamps when.
    pub(crate) histograms: bool,
    /// Process type names and the coarse clock introspection reads.
    pub(crate) introspect: super::figures::Introspect,
    /// Live-process count and the stopping flag, one atomic word.
    /// Admission's state: its operations are in `admission.rs`.
    pub(crate) live: Live,
    pub(crate) dead_letters: CachePadded<AtomicU64>,
    /// The engine's threads and its lifecycle (the exit flag, the wait
    /// for the last process, the shutdown report): shutdown's state, its
    /// operations in `shutdown.rs`.
    pub(crate) control: super::control::Control<Shared>,
    pub(crate) timers: crate::timer::registry::Timers,
    pub(crate) names: super::names::table::Names,
    /// Monitors, links and asks: their lists live in the records; these
    /// are the homes of their operations (see `in_records.rs`).
    pub(crate) monitors: super::in_records::Monitors,
    pub(crate) links: super::in_records::Links,
    pub(crate) asks: super::in_records::Asks,
    pub(crate) long_steps: super::stats::LongSteps,
    /// Where packages for PIDs of other nodes go (none: such a send is an
    /// unknown target, as any PID without a process).
    pub(crate) remote: Option<std::sync::Arc<dyn relay::RemoteTransport>>,
    /// Monitors, links and asks between processes here and processes of
    /// other nodes (with a transport only).
    pub(crate) across: Option<std::sync::Arc<super::remote::table::Across>>,
    /// What timers and timeouts measure time with: the machine's clock, or
    /// a simulation's virtual one.
    pub(crate) clock: super::clock::Clock,
    /// Where monitor and ask ids come from: program-wide blocks, or a
    /// simulation's own count (so that its runs repeat).
    pub(crate) ids: super::ids::Ids,
    /// The simulation's hand in event delivery (faults: delays, losses,
    /// duplicates), when the engine runs in one.
    pub(crate) intercept: Option<std::sync::Arc<dyn super::intercept::Intercept>>,
    /// This engine's id in the program (`resolved.rs`): what tells a
    /// [`Resolved`](crate::Resolved) of this engine from another's. Last:
    /// a field added before the others moved the hot ones' offsets.
    pub(crate) engine_id: u64,
}

/// Where a process that became runnable goes (`runqueue/order.rs` has
/// the order a worker serves them in).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Runnable {
    /// Woken by an event, or new: the `next` slot of this worker.
    Woken,
    /// Asked to continue: the back of its level's queue on this worker.
    Continued,
    /// New (submitted): as `Woken` on a worker; from outside, the global
    /// queue of new processes, which waits behind outside wakeups.
    New,
    /// Woken by its timer (a wake-up or an ask's timeout): the `next` slot
    /// of this worker if it is empty, the back of its level's queue if not.
    /// A lone timer, the common case under load, runs right after the step
    /// under way, as a message from a step does; timers falling due in a
    /// batch (under a burst, thousands in one poll) run in firing order,
    /// the first from the slot and the others from the queue, behind the
    /// work that was ready before them.
    Timed,
}

impl Shared {
    /// Whether shutdown has begun (new processes are refused from then on).
    pub(crate) fn is_stopping(&self) -> bool {
        self.live.is_stopping()
    }

    /// Queues a runnable process and wakes a parked worker if there is one.
    /// On a worker thread of this engine the process goes to that worker's
    /// own queues (idle workers steal from them); elsewhere to the global
    /// queue.
    ///
    /// A process woken or spawned by a step goes to the worker's `next`
    /// slot, which only that worker runs, right after the step. No other
    /// worker is woken for it: the current one is busy for one step at most
    /// and then runs it. Only when the slot was taken, and its occupant
    /// moved to the stealable deque, is a parked worker woken to help.
    pub(crate) fn schedule(&self, record: RecordRef, how: Runnable) {
        if self.histograms {
            let now = self.introspect.stamp(std::time::Instant::now());
            // SAFETY: the caller is the one thread queueing the process (it
            // won the wake, submits it, or owns it and requeues it): what
            // `stamp_ready` asks.
            unsafe { record.stamp_ready(now) };
        }
        self.queue(record, how);
    }

    /// [`schedule`](Shared::schedule) without the histograms' stamp: for a
    /// worker requeueing the process it just stepped, which stamped it
    /// with the clock reading that ended the step.
    pub(crate) fn queue(&self, record: RecordRef, how: Runnable) {
        // The record moves into whichever queue takes it: no reference-count
        // increment and decrement (two atomic read-modify-writes) per
        // schedule.
        let mut record = Some(record);
        let taken = local::with_local(self, |local| {
            let record = record.take().expect("taken once");
            self.place_here(local, record, how)
        });
        match (taken, record) {
            (Some(taken), _) => self.after_placed_here(taken),
            (None, Some(record)) => self.queue_outside(record, how),
            (None, None) => unreachable!("a record is placed or left for outside"),
        }
    }

    /// [`queue`](Shared::queue) for the worker whose queues are `local`,
    /// which knows it is one and so skips the thread-local lookup: the
    /// requeue at the end of every step that continues (about a tenth of
    /// a continuing step's instructions went to the lookup and the call).
    #[inline(always)]
    pub(crate) fn queue_here(&self, local: &Local, record: RecordRef, how: Runnable) {
        let taken = self.place_here(local, record, how);
        self.after_placed_here(taken);
    }

    /// Puts `record` where `how` says on this worker (see [`Runnable`]),
    /// telling a simulation where it now waits. Returns whether the
    /// process went to a queue others look at (rather than an empty `next`
    /// slot).
    #[inline(always)]
    fn place_here(&self, local: &Local, record: RecordRef, how: Runnable) -> bool {
        // Read only for a simulation's check: a running engine pays
        // one branch here.
        let seen = self.intercept.as_ref().map(|i| {
            let share = self
                .groups
                .stretch(record.priority().index(), record.group());
            (i, record.pid, record.priority(), local.lane(&record), share)
        });
        let (taken, joined) = match how {
            Runnable::Woken | Runnable::New => {
                let displaced = |previous: &RecordRef| {
                    if let Some(intercept) = &self.intercept {
                        let share = self
                            .groups
                            .stretch(previous.priority().index(), previous.group());
                        intercept.nursery(previous.pid, previous.priority(), local.index, share);
                    }
                };
                (local.put_next(record, displaced), Joined::Next)
            }
            Runnable::Timed => {
                let joined = local.offer_next(record);
                (joined != Joined::Next, joined)
            }
            Runnable::Continued => {
                local.push_ready(record);
                (true, Joined::Queue)
            }
        };
        if let Some((intercept, pid, level, lane, share)) = seen {
            let (ahead, light) = match joined {
                Joined::Light => (local.ahead_light(lane), true),
                Joined::Queue => (local.ahead(lane, true), false),
                Joined::Next => (local.ahead(lane, false), false),
            };
            intercept.ready(pid, level, Some(local.index), ahead, share, light);
        }
        taken
    }

    /// The wakeup, if any, for a process just placed on the running
    /// worker's own queues (`taken`: in a queue rather than an empty `next`
    /// slot).
    #[inline(always)]
    fn after_placed_here(&self, taken: bool) {
        if taken {
            // This worker's own deque: it is running and drains its queues
            // before it can park, so a wakeup only shares the work. One
            // relaxed load decides (no fence per continued process, which
            // was a sixth of a continuing step): a worker parking at this
            // very moment may be missed, and is then covered by the
            // watcher, which looks for work to steal every millisecond
            // while some worker is busy.
            if self.sleepers.anyone_parked() {
                self.sleepers.notify_one();
            }
        } else if self.sleepers.needs_watcher() {
            // An empty `next` slot: nobody needs waking for it, unless no
            // parked worker watches the slots (then one is woken once, and
            // watches from then on).
            self.sleepers.notify_one();
        }
    }

    /// Queues `record` in the engine's global queues (from a thread that is
    /// not one of its workers) and wakes a worker: only a woken (or
    /// searching) worker will look, so the full protocol (a fence, then
    /// the checks).
    #[inline(never)]
    fn queue_outside(&self, record: RecordRef, how: Runnable) {
        let level = record.priority();
        let group = record.group();
        let queue = match how {
            Runnable::New if level != crate::Priority::High => &self.injector[group],
            _ => &self.woken[local::lane(level, group, self.groups.len())],
        };
        if let Some(intercept) = &self.intercept {
            let share = self.groups.stretch(level.index(), group);
            intercept.ready(record.pid, level, None, queue.len(), share, false);
        }
        queue.push(record);
        self.sleepers.notify_one();
    }

    /// Notes, on this thread's worker (if it is one), that a step started
    /// something whose answer comes from outside the workers: the worker
    /// may then linger when it goes idle instead of parking at once.
    #[inline]
    pub(crate) fn expect_answer(&self) {
        local::with_local(self, |local| local.expects_answer.set(true));
    }

    /// Whether a worker other than `me` is running a step now (and may
    /// hand work over: a message, a process to steal). One relaxed load
    /// when every other worker is parked; otherwise the workers' step
    /// marks, read until one is set. Read once per idle spell, to decide
    /// whether to linger, never per step: a heuristic, not a wakeup.
    pub(crate) fn others_busy(&self, me: usize) -> bool {
        self.sleepers.others_awake()
            && self
                .remotes
                .iter()
                .enumerate()
                .any(|(i, r)| i != me && r.counters.in_step.load(Relaxed) != 0)
    }

    /// Whether `pid` names a process of another node that a transport
    /// reaches (then the remote feature, [`across`](Shared::across),
    /// handles it).
    #[inline]
    pub(crate) fn is_remote(&self, pid: relay::Pid) -> bool {
        self.across.is_some() && pid.node() != self.processes.node()
    }

    /// The relations with other nodes' processes, for a PID that
    /// [`is_remote`](Shared::is_remote).
    pub(crate) fn across(&self) -> &super::remote::table::Across {
        self.across.as_deref().expect("checked by `is_remote`")
    }

    /// Acts on the result of waking a process: one the wake made ready
    /// is queued with the reference its state word held while it waited
    /// (no count changes; `PROTOCOL.md`, "The schedule's reference").
    pub(crate) fn after_wake(&self, record: &RecordRef, wake: Wake) {
        if wake == Wake::Schedule {
            // SAFETY: `Schedule` says this thread's wake moved the process
            // out of BLOCKED or IDLE, so the parked reference is ours.
            self.schedule(unsafe { RecordRef::unpark(record) }, Runnable::Woken);
        }
    }

    /// `record` has ended with `reason`: its PID leaves the table, its
    /// monitors fire, its names are released, its delayed messages are
    /// dead letters and its links are signalled, each by its feature. Runs
    /// once per process, on the thread that ended it.
    ///
    /// The relations are closed before the PID leaves the table, so
    /// whoever still finds the PID (a `demonitor`, a `monitor`, a `link`)
    /// finds them ended and learns the real outcome; nobody can find the
    /// PID gone while the relations still look live. The notifications go
    /// out after: a watcher that reacts (a supervisor restarting the
    /// process under the same PID or name) finds both free.
    pub(crate) fn retire(
        &self,
        record: &RecordRef,
        reason: crate::contract::down::ExitReason,
        detail: Option<std::sync::Arc<str>>,
    ) {
        let related = record.relations.end(reason);
        self.processes.unregister_ended(self, record);
        let Some(mut related) = related else {
            return;
        };
        let remote_links = std::mem::take(&mut related.remote_links);
        self.monitors
            .fire(self, record, related.monitors, reason, &detail);
        for name in related.names {
            self.names.release(&name, record);
        }
        if !related.delayed.is_empty() {
            self.timers
                .delayed_to_ended(self, record.pid, related.delayed);
        }
        if !remote_links.is_empty() {
            if let Some(across) = self.across.as_deref() {
                across.remote_links_end(record, remote_links, reason, detail.clone());
            }
        }
        self.links.end(self, record, related.links, reason, detail);
    }

    /// Whether any queue holds a runnable process (for the last check
    /// before parking: this scans every worker, but only when going idle).
    pub(crate) fn has_work(&self) -> bool {
        (!cfg!(loom) && !self.kills.is_empty())
            || self.woken.iter().any(|q| !q.is_empty())
            || self.injector.iter().any(|q| !q.is_empty())
            || self.remotes.iter().any(|r| {
                // Under loom nothing is ever nursed (`Local::push_nursery`).
                let nurseries = if cfg!(loom) { &[][..] } else { &r.nursery[..] };
                r.ready
                    .iter()
                    .chain(&r.light[..])
                    .chain(nurseries)
                    .any(|q| !q.is_empty())
            })
    }
}

impl Shared {
    /// Moves the state behind its reference count (with its weak
    /// reference to itself, outside loom).
    pub(crate) fn into_arc(self) -> Arc<Shared> {
        #[cfg(not(loom))]
        {
            let mut this = self;
            Arc::new_cyclic(|me| {
                this.control.me = me.clone();
                this
            })
        }
        #[cfg(loom)]
        {
            Arc::new(self)
        }
    }
}
