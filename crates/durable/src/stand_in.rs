//! A plain process that stands for one durable process: for a router that
//! starts and stops plain processes (keyed processes placed by a cluster),
//! so that what it starts keeps its state in a journal and resumes it
//! wherever it is started next.
//!
//! # Protocol
//!
//! - **Start.** The stand-in finds its durable process: the one running
//!   here under its key, else the one its journal holds
//!   ([`Durability::resume`], which fences the node that wrote it last),
//!   else a new one ([`Durability::spawn`] from the arguments it was
//!   made with; an ended journal under the key is forgotten first, so
//!   that a key whose process finished starts afresh). It links with it
//!   and traps exits.
//! - **Messages.** Each message of the durable type's `Message` goes on
//!   with [`Durability::send`]: journaled, then read, in the order the
//!   stand-in got them. The stand-in keeps each until its receipt says it
//!   was journaled. Anything else is dropped, with a warning.
//! - **A durable process that ends on its own** (it finished, or failed):
//!   the messages it had not journaled (receipts `NotKept`), and those
//!   that came after, go in order to a fresh process of the key, started
//!   as soon as there is one to deliver (its ended journal forgotten, a
//!   new one spawned from the stand-in's arguments). So a message sent
//!   right behind the one that finished the process is never lost.
//! - **A process the store's fence refused** (a cluster store: another
//!   node took the journal over, say a recovery, or the process linked
//!   with was a stale incarnation on this node, fenced by an earlier
//!   move of the key, that had not closed yet): nothing of what it was
//!   refused was written, so those messages go again, in order, to the
//!   next process the stand-in has, which resumes the journal and takes
//!   it back. A stand-in whose processes are fenced more than 16 times
//!   in a row (two nodes taking the journal from each other) ends with
//!   an error.
//! - **Cancel.** The stand-in delivers what it holds, waits until every
//!   message it passed on is journaled (their receipts settled), then
//!   cancels the durable process, which suspends it: its journal keeps
//!   everything it read, and the next stand-in, on this node or another,
//!   resumes it there. Without the wait, a message taken but not yet
//!   written would be dropped by the suspension. It finishes when its
//!   durable process has ended and nothing is left to deliver.
//! - **An abnormal end.** If the stand-in itself ends abnormally (a
//!   router fencing it), the link ends the durable process too; its
//!   journal is then exactly what a crash leaves, and the next resume
//!   starts from it. What the stand-in held then (taken from its mailbox,
//!   not seen journaled) is counted, message by message, in
//!   `DurableStats::stand_in_dropped`, with a warning: none is lost
//!   unseen. One whose write was in flight may still reach the journal,
//!   and the next process then reads it too (counted and read; never
//!   neither).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use sched::{BoxError, Context, Pid, Process};

use crate::{Durability, Durable, DurableError, Receipt};

/// How long a stand-in waits before it looks again for its key's
/// process, while the one that just ended still holds the key, and how
/// many times (a few seconds in all) before it gives up.
const RETRY: Duration = Duration::from_millis(2);
const MAX_RETRIES: u32 = 2_500;

/// How many times in a row a stand-in passes a message on again after
/// the store's fence refused it, before it gives up (see `settle`).
const MAX_FENCES: u32 = 16;

/// How often a stand-in that waits on receipts (cancelled, or its
/// process ended) looks whether they settled.
const SETTLE_POLL: Duration = Duration::from_millis(1);

/// A plain `sched` process that stands for the durable process `key` of
/// type `D`: started, it resumes it (or spawns it); its messages go on
/// journaled (to a fresh process of the key if the last one ended on its
/// own); cancelled, it suspends it once what it passed on is durable. Made for routers that start and stop plain processes, such as
/// a cluster's keyed processes: the durable process keeps its state
/// across the stops, and across nodes with a cluster store.
///
/// Asks are not passed on (a durable process takes messages only): a
/// question to a stand-in is answered `NoReply`.
///
/// # Examples
///
/// ```
/// use sched_durable::prelude::*;
/// use sched_durable::StandIn;
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// struct Sum(u64);
/// impl Durable for Sum {
///     const KIND: &'static str = "sum";
///     type Args = ();
///     type Message = u64;
///     type Done = u64;
///     fn create(_: ()) -> Self { Sum(0) }
///     fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
///         for event in events.typed::<Self>() {
///             match event {
///                 Event::Message(0) => out.finish(self.0),
///                 Event::Message(n) => self.0 += n,
///                 _ => {}
///             }
///         }
///         Ok(())
///     }
/// }
///
/// let dir = tempfile::tempdir()?;
/// let durability = Arc::new(Durability::open(RedbStore::create(dir.path().join("j.redb"))?));
/// durability.register::<Sum>();
/// let scheduler = durability.install(Scheduler::builder().workers(1)).build();
/// scheduler.start();
///
/// // Started, given 5, stopped; started again, given 7 and 0 (finish).
/// let mut first = scheduler.spawn(StandIn::<Sum>::new(&durability, "sum-1", ()))?;
/// scheduler.send(first.pid(), 5_u64)?;
/// scheduler.context().cancel(first.pid())?;
/// first.wait_timeout(Duration::from_secs(5))?;
/// let mut second = scheduler.spawn(StandIn::<Sum>::new(&durability, "sum-1", ()))?;
/// scheduler.send(second.pid(), 7_u64)?;
/// scheduler.send(second.pid(), 0_u64)?;
/// scheduler.context().cancel(second.pid())?; // it delivers both first
/// second.wait_timeout(Duration::from_secs(5))?;
/// // The second resumed the first's sum.
/// let status = durability.status("sum-1")?.expect("journaled");
/// assert_eq!(status.outcome::<u64>().expect("done")?, 12);
/// scheduler.shutdown(Duration::from_secs(1));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct StandIn<D: Durable> {
    durability: Arc<Durability>,
    key: String,
    /// What a new process is created from.
    args: D::Args,
    /// The durable process, linked, until its exit signal.
    target: Option<Pid>,
    /// Messages passed on whose receipts have not said journaled, in
    /// order, each with its number, kept to be passed on again if their
    /// process ends first.
    pending: VecDeque<(u64, Receipt, D::Message)>,
    /// Messages to pass on once a process runs, by number: those taken
    /// since, at the back, and those that came back unwritten in their
    /// place among them.
    waiting: VecDeque<(u64, D::Message)>,
    /// The number the next message taken gets: the order taken, which
    /// the journal keeps, however often a message comes back.
    taken: u64,
    stopping: bool,
    cancelled: bool,
    /// The last process whose exit signal came: not to be linked again.
    ended: Option<Pid>,
    /// Tries in a row to have the key's process.
    retries: u32,
    /// Processes in a row whose appends the store's fence refused (see
    /// `settle`), and whether the current one's were.
    fences: u32,
    fenced: bool,
}

impl<D: Durable> std::fmt::Debug for StandIn<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StandIn")
            .field("kind", &D::KIND)
            .field("key", &self.key)
            .field("target", &self.target)
            .field("pending", &self.pending.len())
            .finish_non_exhaustive()
    }
}

impl<D: Durable> StandIn<D>
where
    D::Args: Clone + Send,
{
    /// A stand-in for the durable process `key` of type `D` (registered
    /// with `durability`), which a new process is created from `args`
    /// if the key has no running journal.
    ///
    /// # Examples
    ///
    /// See [`StandIn`].
    pub fn new(durability: &Arc<Durability>, key: &str, args: D::Args) -> StandIn<D> {
        StandIn {
            durability: Arc::clone(durability),
            key: key.to_owned(),
            args,
            target: None,
            pending: VecDeque::new(),
            waiting: VecDeque::new(),
            taken: 0,
            stopping: false,
            cancelled: false,
            ended: None,
            retries: 0,
            fences: 0,
            fenced: false,
        }
    }

    /// The durable process of the key: running here, resumed from its
    /// journal, or new; `None` while the process that just ended still
    /// holds the key here (it lets go as it closes, a moment after its
    /// exit signal): try again shortly.
    fn open(&mut self, cx: &Context) -> Result<Option<Pid>, DurableError> {
        let running = |pid: Option<Pid>| pid.filter(|&pid| Some(pid) != self.ended);
        if let Some(pid) = self.durability.pid(&self.key) {
            return Ok(running(Some(pid)));
        }
        match self.durability.resume(cx, &self.key) {
            Ok(Some(resumed)) => return Ok(Some(resumed.pid())),
            Ok(None) => {}
            // A recovery took it at that moment, or the ended process
            // still closes.
            Err(DurableError::KeyTaken(_)) => return Ok(running(self.durability.pid(&self.key))),
            Err(error) => return Err(error),
        }
        // Ended (or never made): a key whose process finished starts
        // afresh, once its journal is forgotten.
        if self.durability.contains(&self.key)? && !self.durability.forget(&self.key)? {
            return Ok(None);
        }
        match self.durability.spawn::<D>(cx, &self.key, self.args.clone()) {
            Ok(spawned) => Ok(Some(spawned.pid())),
            Err(DurableError::KeyTaken(_)) => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// Links with the key's process if it can be had now; else looks
    /// again shortly, for a bounded while (a store's error may pass: a
    /// timeout, a read that met a journal being forgotten), keeping what
    /// waits; past that, ends with the last error.
    fn connect(&mut self, out: &mut sched::Output<'_>) -> Result<(), BoxError> {
        let why = match self.open(out.context()) {
            Ok(Some(pid)) => {
                out.link(pid);
                self.target = Some(pid);
                self.cancelled = false;
                self.retries = 0;
                return Ok(());
            }
            Ok(None) => "the process that just ended still holds the key".to_owned(),
            Err(error) => {
                if self.retries == 0 {
                    tracing::warn!(key = %self.key, %error, "a stand-in could not have its durable process; it tries again");
                }
                error.to_string()
            }
        };
        self.retries += 1;
        if self.retries > MAX_RETRIES {
            return Err(format!(
                "the durable process {:?} could not be had in {MAX_RETRIES} tries: {why}",
                self.key
            )
            .into());
        }
        out.set_timer(RETRY, sched::Tag(1));
        Ok(())
    }

    /// Keeps a message to pass on.
    fn take(&mut self, package: sched::Package) {
        match package.downcast::<D::Message>() {
            Ok(message) => {
                self.waiting.push_back((self.taken, message));
                self.taken += 1;
            }
            Err(_) => {
                self.durability.count_stand_in_drop();
                tracing::warn!(
                    key = %self.key,
                    kind = D::KIND,
                    "a stand-in got a message of another type than its durable process takes; dropped"
                );
            }
        }
    }

    /// Forgets the messages whose receipts settled, front first: those
    /// journaled, and those the store refused for good; those their
    /// process ended without writing go back among those waiting, in
    /// their place by number (a process's receipts may settle over
    /// several looks, and a pass that stopped halfway leaves later ones
    /// waiting). So do those the store's fence refused: the process this
    /// stand-in linked with was not the journal's writer any more
    /// (another node took the journal over, or it is a stale incarnation
    /// of this node that had not closed yet), nothing of them was
    /// written, and the next process this stand-in has resumes the
    /// journal, taking it back. Past `MAX_FENCES` such refusals in a row
    /// (two nodes taking the journal from each other) it ends with an
    /// error rather than go on.
    fn settle(&mut self) -> Result<(), BoxError> {
        while let Some(result) = self.pending.front().and_then(|(_, r, _)| r.try_result()) {
            let (number, _, message) = self.pending.pop_front().expect("a front entry");
            match result {
                Ok(()) => self.fences = 0,
                Err(DurableError::NotKept(_)) => self.wait_again(number, message),
                Err(DurableError::Fenced(_)) => {
                    self.fenced = true;
                    self.wait_again(number, message);
                }
                Err(error) => {
                    self.durability.count_stand_in_drop();
                    tracing::warn!(key = %self.key, %error, "a message a stand-in passed on was not journaled");
                }
            }
        }
        if self.fenced && self.target.is_none() {
            // Counted once per process fenced, when it has ended.
            self.fenced = false;
            self.fences += 1;
        }
        if self.fences > MAX_FENCES {
            return Err(format!(
                "the journal of {:?} was taken from this stand-in's process {} times in a row",
                self.key, self.fences
            )
            .into());
        }
        Ok(())
    }

    /// Puts a message that came back among those waiting, in its place
    /// by number.
    fn wait_again(&mut self, number: u64, message: D::Message) {
        let at = self.waiting.partition_point(|(n, _)| *n < number);
        self.waiting.insert(at, (number, message));
    }

    /// Whether the first message waiting came back while a later one is
    /// still in flight: that one may come back too, and the first must
    /// not be passed on ahead of it.
    fn behind_in_flight(&self) -> bool {
        match (self.waiting.front(), self.pending.back()) {
            (Some((first, _)), Some((last, _, _))) => first < last,
            _ => false,
        }
    }

    /// Passes on what waits, by number, while the process takes it.
    fn pump(&mut self, cx: &Context) {
        while !self.behind_in_flight() {
            let Some((number, message)) = self.waiting.pop_front() else {
                return;
            };
            match self.durability.send::<D>(cx, &self.key, &message) {
                Ok(receipt) => self.pending.push_back((number, receipt, message)),
                Err(DurableError::Codec(error)) => {
                    self.durability.count_stand_in_drop();
                    tracing::warn!(key = %self.key, %error, "a stand-in could not encode a message; dropped");
                }
                // Its process is gone: its exit signal is on the way.
                Err(_) => {
                    self.waiting.push_front((number, message));
                    return;
                }
            }
        }
    }

    /// One look at where things stand: a process started for what
    /// waits, what waits passed on, and, stopping, the process cancelled
    /// once nothing is left in flight, or the end.
    fn advance(&mut self, out: &mut sched::Output<'_>) -> Result<(), BoxError> {
        self.settle()?;
        if self.target.is_none() && self.pending.is_empty() && !self.waiting.is_empty() {
            self.connect(out)?;
        }
        if self.target.is_some() && !self.cancelled {
            self.pump(out.context());
        }
        let idle = self.pending.is_empty() && self.waiting.is_empty();
        if self.stopping && idle {
            match self.target {
                None => {
                    out.finish(());
                    return Ok(());
                }
                Some(target) if !self.cancelled => {
                    self.cancelled = true;
                    // Ended already: its exit signal comes all the same.
                    let _ = out.context().cancel(target);
                }
                Some(_) => {}
            }
        }
        // Receipts settle without an event of ours: look again soon when
        // something waits on them.
        let waiting_on_receipts = !self.pending.is_empty()
            && (self.stopping || self.target.is_none() || self.behind_in_flight());
        if waiting_on_receipts {
            out.set_timer(SETTLE_POLL, sched::Tag(0));
        }
        Ok(())
    }
}

impl<D: Durable> Process for StandIn<D>
where
    D::Args: Clone + Send,
{
    type Done = ();

    fn start(&mut self, out: &mut sched::Output<'_>) -> Result<(), BoxError> {
        out.trap_exits(true);
        self.connect(out)
    }

    fn step(
        &mut self,
        events: &mut sched::Events<'_>,
        out: &mut sched::Output<'_>,
    ) -> Result<(), BoxError> {
        for event in events {
            match event {
                sched::Event::Message(package) => self.take(package),
                sched::Event::Cancel => self.stopping = true,
                sched::Event::Exit { pid, .. } if Some(pid) == self.target => {
                    self.target = None;
                    self.ended = Some(pid);
                }
                _ => {}
            }
        }
        self.advance(out)
    }

    /// A stand-in that ends holding messages (an abnormal end: a router
    /// fencing it, a process it could not have) took them from its
    /// mailbox and never saw them journaled: each is counted in
    /// `DurableStats::stand_in_dropped`, with one warning, rather than
    /// lost unseen. A stand-in that finishes holds nothing.
    fn close(&mut self) {
        let (dropped, in_flight) = self.unjournaled();
        for _ in 0..dropped {
            self.durability.count_stand_in_drop();
        }
        if dropped > 0 {
            tracing::warn!(
                key = %self.key,
                dropped,
                in_flight,
                "a stand-in ended holding messages it had not seen journaled; counted as dropped \
                 (those in flight may still reach the journal)"
            );
        }
    }

    fn type_name(&self) -> &'static str {
        std::any::type_name::<D>()
    }
}

impl<D: Durable> StandIn<D> {
    /// How many messages it holds that are not known to be journaled:
    /// all those waiting, and those passed on whose receipts have not
    /// said journaled; and how many of the latter are still in flight
    /// (their write may yet land, so the key's next process may read
    /// them although they are counted).
    fn unjournaled(&self) -> (usize, usize) {
        let mut dropped = self.waiting.len();
        let mut in_flight = 0;
        for (_, receipt, _) in &self.pending {
            match receipt.try_result() {
                Some(Ok(())) => {}
                Some(Err(_)) => dropped += 1,
                None => {
                    dropped += 1;
                    in_flight += 1;
                }
            }
        }
        (dropped, in_flight)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prelude::{Events, Output};
    use crate::store::MemoryStore;

    struct Sum;

    impl Durable for Sum {
        const KIND: &'static str = "sum";
        type Args = ();
        type Message = u64;
        type Done = ();
        fn create(_: ()) -> Self {
            Sum
        }
        fn step(&mut self, _: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
            Ok(())
        }
    }

    /// Messages taken and never passed on (no process to pass them to)
    /// are counted when the stand-in closes; a stand-in holding nothing
    /// counts nothing.
    #[test]
    fn what_waits_at_the_close_is_counted_as_dropped() {
        let durability = Arc::new(Durability::open(MemoryStore::new()));
        let mut idle = StandIn::<Sum>::new(&durability, "k", ());
        idle.close();
        assert_eq!(durability.stats().stand_in_dropped, 0);
        let mut holding = StandIn::<Sum>::new(&durability, "k", ());
        holding.waiting.extend([(0, 4), (1, 5)]);
        assert_eq!(holding.unjournaled(), (2, 0));
        holding.close();
        assert_eq!(durability.stats().stand_in_dropped, 2);
    }
}
