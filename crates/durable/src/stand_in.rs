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
//!   stand-in got them. Anything else is dropped, with a warning.
//! - **Cancel.** The stand-in waits until every message it passed on is
//!   journaled (their receipts settled), then cancels the durable
//!   process, which suspends it: its journal keeps everything it read,
//!   and the next stand-in, on this node or another, resumes it there.
//!   Without the wait, a message taken but not yet written would be
//!   dropped by the suspension.
//! - **End.** It finishes when its durable process ends (suspended,
//!   finished, failed). If the stand-in itself ends abnormally first (a
//!   router fencing it), the link ends the durable process too; its
//!   journal is then exactly what a crash leaves, and the next resume
//!   starts from it.

use std::sync::Arc;
use std::time::Duration;

use sched::{BoxError, Context, Pid, Process};

use crate::{Durability, Durable, DurableError, Receipt};

/// How often a cancelled stand-in looks whether what it passed on is
/// journaled.
const SETTLE_POLL: Duration = Duration::from_millis(1);

/// A plain `sched` process that stands for the durable process `key` of
/// type `D`: started, it resumes it (or spawns it); its messages go on
/// journaled; cancelled, it suspends it once what it passed on is
/// durable. Made for routers that start and stop plain processes, such as
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
    /// What a new process is created from; taken by the spawn.
    args: Option<D::Args>,
    target: Option<Pid>,
    /// Receipts of the messages passed on that have not settled.
    pending: Vec<Receipt>,
    stopping: bool,
    cancelled: bool,
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
    D::Args: Send,
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
            args: Some(args),
            target: None,
            pending: Vec::new(),
            stopping: false,
            cancelled: false,
        }
    }

    /// The durable process of the key: running here, resumed from its
    /// journal, or new.
    fn open(&mut self, cx: &Context) -> Result<Pid, DurableError> {
        if let Some(pid) = self.durability.pid(&self.key) {
            return Ok(pid);
        }
        match self.durability.resume(cx, &self.key) {
            Ok(Some(resumed)) => return Ok(resumed.pid()),
            Ok(None) => {}
            // A recovery took it at that moment: it runs here now.
            Err(DurableError::KeyTaken(key)) => {
                return self.durability.pid(&key).ok_or(DurableError::KeyTaken(key));
            }
            Err(error) => return Err(error),
        }
        // Ended (or never made): a key whose process finished starts
        // afresh.
        if self.durability.contains(&self.key)? {
            self.durability.forget(&self.key)?;
        }
        let args = self
            .args
            .take()
            .ok_or_else(|| DurableError::Submit("a stand-in spawns at most once".into()))?;
        Ok(self.durability.spawn::<D>(cx, &self.key, args)?.pid())
    }

    /// Passes a message on, journaled.
    fn pass_on(&mut self, cx: &Context, package: sched::Package) {
        match package.downcast::<D::Message>() {
            Ok(message) => match self.durability.send::<D>(cx, &self.key, &message) {
                Ok(receipt) => self.pending.push(receipt),
                Err(error) => {
                    tracing::warn!(key = %self.key, %error, "a stand-in could not pass a message on");
                }
            },
            Err(_) => tracing::warn!(
                key = %self.key,
                kind = D::KIND,
                "a stand-in got a message of another type than its durable process takes; dropped"
            ),
        }
    }
}

impl<D: Durable> Process for StandIn<D>
where
    D::Args: Send,
{
    type Done = ();

    fn start(&mut self, out: &mut sched::Output<'_>) -> Result<(), BoxError> {
        out.trap_exits(true);
        let pid = self.open(out.context())?;
        out.link(pid);
        self.target = Some(pid);
        Ok(())
    }

    fn step(
        &mut self,
        events: &mut sched::Events<'_>,
        out: &mut sched::Output<'_>,
    ) -> Result<(), BoxError> {
        for event in events {
            match event {
                sched::Event::Message(package) => self.pass_on(out.context(), package),
                sched::Event::Cancel => self.stopping = true,
                sched::Event::Exit { pid, .. } if Some(pid) == self.target => {
                    out.finish(());
                    return Ok(());
                }
                _ => {}
            }
        }
        let key = &self.key;
        self.pending.retain(|receipt| match receipt.try_result() {
            None => true,
            Some(Ok(())) => false,
            Some(Err(error)) => {
                tracing::warn!(%key, %error, "a message a stand-in passed on was not journaled");
                false
            }
        });
        if self.stopping && !self.cancelled {
            if self.pending.is_empty() {
                self.cancelled = true;
                if let Some(target) = self.target {
                    // Ended already: its exit signal comes all the same.
                    let _ = out.context().cancel(target);
                }
            } else {
                out.set_timer(SETTLE_POLL, sched::Tag(0));
            }
        }
        Ok(())
    }

    fn type_name(&self) -> &'static str {
        std::any::type_name::<D>()
    }
}
