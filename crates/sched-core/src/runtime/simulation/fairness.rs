//! The simulation's check of the scheduling bound (`runqueue/order.rs`):
//! every wait of every process, from the moment it became ready to its
//! step, measured in steps of the worker it waited on, against the bound
//! for its level and the work ahead of it when it joined its queue.
//!
//! The engine reports where each process becomes ready
//! (`Intercept::ready`: the worker or a global queue, and how many were
//! ahead of it); the observer counts each worker's steps and checks the
//! wait at the process's step. A wait is checked when the process is
//! stepped by the worker it last queued on. One stepped elsewhere was
//! moved (by a thief, a busy worker balancing, or one taking from
//! another's `next` slot): its wait ended sooner than it would have, is
//! counted as moved, and what it waited on the worker it left is checked
//! against that worker's bound. A wait in a global queue is
//! checked when a worker takes the process in, against the global bound:
//! every worker takes from the global queues every
//! `GLOBAL_QUEUE_INTERVAL` ticks, at least one process of the lane its
//! global passes pick by the lanes' weights, so each lane's global queue
//! loses one process within `order::global_takes` such takes of any
//! worker.

use relay::Pid;
use rustc_hash::FxHashMap;

use crate::runqueue::order::{self, Stretch, GLOBAL_QUEUE_INTERVAL};
use crate::Priority;

/// One wait, as the check saw it.
///
/// # Examples
///
/// See [`Fairness`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Wait {
    /// The process that waited.
    pub pid: Pid,
    /// Its priority while it waited.
    pub priority: Priority,
    /// The worker it waited on (of its node).
    pub worker: usize,
    /// Whether it waited in a global queue (work from outside the
    /// workers) rather than in the worker's own queue.
    pub global: bool,
    /// Whether it waited in the worker's nursery (woken or spawned by a
    /// step there while the `next` slot was taken), whose bound does not
    /// depend on the work ahead.
    pub nursery: bool,
    /// Whether it waited in its level's light queue (light processes
    /// first; `ahead` counts that queue).
    pub light: bool,
    /// How many processes were ahead of it in its queue when it joined.
    pub ahead: usize,
    /// Steps the worker ran before the process was stepped (or, for a
    /// global wait, taken in).
    pub waited: u64,
    /// The most the contract allows for that queue, level and work ahead.
    pub bound: u64,
}

impl std::fmt::Display for Wait {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} ({}) waited {} steps of worker {} behind {} ready processes{}; the bound is {}",
            self.pid,
            self.priority,
            self.waited,
            self.worker,
            self.ahead,
            if self.global {
                " in a global queue"
            } else if self.nursery {
                " in its nursery"
            } else if self.light {
                " in its light queue"
            } else {
                ""
            },
            self.bound
        )
    }
}

/// What the simulation's check of the scheduling bound found so far: how
/// many waits it checked, the one that came closest to its bound, and the
/// first that exceeded it.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use sched::sim::Config;
///
/// /// Runs ten steps.
/// struct Busy(u32);
/// impl Process for Busy {
///     type Done = ();
///     fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
///         self.0 += 1;
///         if self.0 < 10 { out.continue_() } else { out.finish(()) }
///         Ok(())
///     }
/// }
///
/// let mut sim = Scheduler::builder().simulation(Config::seed(3).workers(2));
/// for _ in 0..50 {
///     sim.context().spawn(Busy(0))?;
/// }
/// sim.run()?;
/// let fairness = sim.fairness();
/// assert!(fairness.checked > 100);
/// assert_eq!(fairness.violation, None, "{}", fairness.worst.unwrap());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Fairness {
    /// Waits checked against the bound.
    pub checked: u64,
    /// Of those, waits in a light queue (light processes first: only
    /// when steps say how long they take, `sim::spend`).
    pub light: u64,
    /// Waits ended by a worker other than the one the process queued on
    /// (stolen, or taken from another's `next` slot): not checked.
    pub moved: u64,
    /// The checked wait closest to its bound (largest `waited / bound`).
    pub worst: Option<Wait>,
    /// The first wait that exceeded its bound.
    pub violation: Option<Wait>,
}

/// Where a ready process waits, and since which step of which worker.
#[derive(Debug, Clone)]
struct Waiting {
    priority: Priority,
    ahead: usize,
    /// Its lane's weight against the others' (`Groups::stretch`).
    share: Stretch,
    /// In a worker's nursery rather than its level's queue.
    nursery: bool,
    /// In its level's light queue rather than its level's queue.
    light: bool,
    place: Place,
}

#[derive(Debug, Clone)]
enum Place {
    /// In worker `worker`'s queues since its step count was `since`.
    Worker { worker: usize, since: u64 },
    /// In a global queue since each worker of its node had run these
    /// many steps.
    Global { since: Vec<u64> },
}

impl Waiting {
    /// The most steps of its worker this wait may take; `lit`: whether
    /// that worker has queued a light process (then the level's queue
    /// shares its picks with the light queue).
    fn bound(&self, lit: bool) -> u64 {
        if self.nursery {
            order::nursery_bound()
        } else if self.light {
            order::light_bound(self.ahead, self.share)
        } else if lit {
            order::bound_beside_light(self.ahead, self.share)
        } else {
            order::bound(self.ahead, self.share)
        }
    }
}

/// The check's state, kept in the simulation's state.
#[derive(Debug, Default)]
pub(crate) struct Check {
    /// Steps run, per (node, worker).
    steps: FxHashMap<(u32, usize), u64>,
    /// Workers per node (for a global wait's snapshot).
    workers: usize,
    waiting: FxHashMap<Pid, Waiting>,
    /// The (node, worker) pairs that have queued a light process.
    lit: rustc_hash::FxHashSet<(u32, usize)>,
    pub(crate) report: Fairness,
}

/// The most ticks any one worker runs before a process that joined a
/// global queue behind `ahead` others is taken in: every worker takes
/// from the global queues at least every `GLOBAL_QUEUE_INTERVAL` ticks,
/// by the lanes' weights (`order::global_takes`).
fn global_bound(ahead: usize, share: Stretch) -> u64 {
    (order::global_takes(ahead, share) + 1) * u64::from(GLOBAL_QUEUE_INTERVAL)
}

impl Check {
    pub(crate) fn new(workers: usize) -> Check {
        Check {
            workers,
            ..Check::default()
        }
    }

    fn steps_of(&self, node: u32, worker: usize) -> u64 {
        self.steps.get(&(node, worker)).copied().unwrap_or(0)
    }

    /// `pid` became ready (see `Intercept::ready`). A violation found on
    /// the way (a global wait that was too long) is returned.
    pub(crate) fn ready(
        &mut self,
        pid: Pid,
        priority: Priority,
        worker: Option<usize>,
        ahead: usize,
        share: Stretch,
        light: bool,
    ) -> Option<Wait> {
        let node = pid.node();
        let mut found = None;
        if let (
            Some(taker),
            Some(Waiting {
                priority,
                ahead,
                share,
                place: Place::Global { since },
                ..
            }),
        ) = (worker, self.waiting.get(&pid))
        {
            let waited = self.steps_of(node, taker) - since.get(taker).copied().unwrap_or(0);
            found = self.judge(Wait {
                pid,
                priority: *priority,
                worker: taker,
                global: true,
                nursery: false,
                light: false,
                ahead: *ahead,
                waited,
                bound: global_bound(*ahead, *share),
            });
        }
        if let (Some(mover), Some(previous)) = (worker, self.waiting.get(&pid)) {
            if let Some(wait) = self.nursery_wait(pid, mover, previous) {
                found = found.or(self.judge(wait));
            }
        }
        if let (true, Some(worker)) = (light, worker) {
            self.lit.insert((node, worker));
        }
        let place = match worker {
            Some(worker) => Place::Worker {
                worker,
                since: self.steps_of(node, worker),
            },
            None => Place::Global {
                since: (0..self.workers).map(|w| self.steps_of(node, w)).collect(),
            },
        };
        self.waiting.insert(
            pid,
            Waiting {
                priority,
                ahead,
                share,
                nursery: false,
                light,
                place,
            },
        );
        found
    }

    /// `pid` moved from the `next` slot of `worker` to its nursery (see
    /// `Intercept::nursery`): the wait so far is judged against the bound
    /// it had, and a nursery wait begins.
    pub(crate) fn nursery(
        &mut self,
        pid: Pid,
        priority: Priority,
        worker: usize,
        share: Stretch,
    ) -> Option<Wait> {
        let node = pid.node();
        let found = match self.waiting.get(&pid).cloned() {
            Some(waiting) => match waiting.place {
                Place::Worker { worker: w, since } if w == worker => {
                    let wait = self.wait(pid, &waiting, worker, since);
                    self.judge(wait)
                }
                _ => None,
            },
            None => None,
        };
        self.waiting.insert(
            pid,
            Waiting {
                priority,
                ahead: 0,
                share,
                nursery: true,
                light: false,
                place: Place::Worker {
                    worker,
                    since: self.steps_of(node, worker),
                },
            },
        );
        found
    }

    /// The nursery wait that ends as `pid` moves to a queue of `mover`,
    /// if `previous` is one there.
    fn nursery_wait(&self, pid: Pid, mover: usize, previous: &Waiting) -> Option<Wait> {
        match previous.place {
            Place::Worker { worker, since } if previous.nursery && worker == mover => {
                Some(self.wait(pid, previous, worker, since))
            }
            _ => None,
        }
    }

    /// The wait `waiting` describes, on `worker` since its step `since`,
    /// as it stands now.
    fn wait(&self, pid: Pid, waiting: &Waiting, worker: usize, since: u64) -> Wait {
        let node = pid.node();
        Wait {
            pid,
            priority: waiting.priority,
            worker,
            global: false,
            nursery: waiting.nursery,
            light: waiting.light,
            ahead: waiting.ahead,
            waited: self.steps_of(node, worker) - since,
            bound: waiting.bound(self.lit.contains(&(node, worker))),
        }
    }

    /// `pid` is about to be stepped by `worker`: its wait is checked.
    pub(crate) fn step(&mut self, pid: Pid, worker: usize) -> Option<Wait> {
        let node = pid.node();
        let found = match self.waiting.remove(&pid) {
            Some(
                waiting @ Waiting {
                    place: Place::Worker { worker: w, since },
                    ..
                },
            ) if w == worker => {
                let wait = self.wait(pid, &waiting, worker, since);
                self.judge(wait)
            }
            // Moved (a thief, a balancing worker, or one taking from
            // another's `next` slot): the wait ended sooner than it would
            // have, and what it waited on the worker it left must still be
            // within that worker's bound.
            Some(
                waiting @ Waiting {
                    place: Place::Worker { worker: w, since },
                    ..
                },
            ) => {
                self.report.moved += 1;
                let wait = self.wait(pid, &waiting, w, since);
                self.judge(wait)
            }
            Some(_) => {
                self.report.moved += 1;
                None
            }
            None => None,
        };
        *self.steps.entry((node, worker)).or_insert(0) += 1;
        found
    }

    /// `pid` ended: it waits for nothing.
    pub(crate) fn ended(&mut self, pid: Pid) {
        self.waiting.remove(&pid);
    }

    fn judge(&mut self, wait: Wait) -> Option<Wait> {
        self.report.checked += 1;
        self.report.light += u64::from(wait.light);
        let closer = match &self.report.worst {
            // waited / bound > worst.waited / worst.bound, without division.
            Some(worst) => {
                u128::from(wait.waited) * u128::from(worst.bound)
                    > u128::from(worst.waited) * u128::from(wait.bound)
            }
            None => true,
        };
        if closer {
            self.report.worst = Some(wait);
        }
        if wait.waited > wait.bound {
            self.report.violation.get_or_insert(wait);
            return Some(wait);
        }
        None
    }
}
