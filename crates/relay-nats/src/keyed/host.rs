//! The host of one kind on one node: a process that places the kind's
//! shards, claims and releases their names, passivates idle keys, hands
//! off what is no longer this node's, empties buffers, and delivers what
//! other nodes forward here. And [`Fenced`], the wrapper every keyed
//! process runs in.
//!
//! The host works on a timer (every [`TICK`]) and on notes: the answers
//! of the names calls it starts (they run on the transport's thread, so a
//! step never waits on the server) and the ends of its keys' processes.

use std::collections::VecDeque;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::Arc;
use std::time::{Duration, Instant};

use relay::{Package, Pid};
use sched::engine::Context;
use sched::prelude::*;

use super::placement::owner;
use super::shard::{Child, EndNote, Keyed, Kind, Link, Route, Shard, Waiting};
use super::ShardingCounters;
use crate::codec::KeyedValue;
use crate::leases::{holds, unwatch_lease, watch_lease, LeaseClock};
use crate::names::ClusterNames;
use crate::stats::Counters;
use crate::ClusterNameError;

/// How often a host looks at its shards.
pub(crate) const TICK: Duration = Duration::from_millis(100);

/// What a host is told, besides keyed messages from other nodes.
pub(crate) enum Note {
    Claimed {
        shard: u32,
        started: Instant,
        outcome: Result<(), ClusterNameError>,
    },
    Resolved {
        shard: u32,
        outcome: Result<Option<Pid>, ClusterNameError>,
    },
    Released {
        shard: u32,
    },
    Ended {
        shard: u32,
        key: String,
        pid: Pid,
        /// The messages that reached it after its last step, when the
        /// host had stopped it (`Link::stopping`): they go to the key's
        /// next process, ahead of what waited for it.
        unread: Vec<Package>,
    },
}

/// A keyed process as it runs: it steps only while its shard's lease is
/// surely this node's, and tells its host when it ends.
///
/// A step that finds the lease run out (a renewal late on a loaded
/// machine, or a node cut off or stopped past its lease) does not read:
/// its events stay in the mailbox, and the process looks again a moment
/// later. Renewed, it reads them, in order, as if nothing had happened;
/// once the lease is surely lost (a renewal found it taken, its host
/// learned the shard is lost, the transport gave it up), it ends, its
/// unread messages counted in `fenced`.
pub(crate) struct Fenced<P> {
    pub(crate) inner: P,
    /// Its lease clock, and what it shares with its host and with cached
    /// routes to it.
    pub(crate) link: Arc<Link>,
    pub(crate) counters: Arc<ShardingCounters>,
    pub(crate) end: Option<EndNote>,
    pub(crate) pid: Option<Pid>,
    /// Whether `inner` has started: a process whose lease was unsure when
    /// it was started starts at its first step under a sure lease.
    pub(crate) started: bool,
    /// The wake-up of a process waiting for its lease to be sure again,
    /// and how long the next wait is.
    waiting: Option<TimerId>,
    patience: Duration,
    /// What it hands back at its end (see [`Note::Ended`]).
    pub(crate) unread: Vec<Package>,
}

/// The error a fenced process ends with.
const FENCED: &str = "fenced: its shard's lease ran out on this node";

/// The first wait of a process whose lease is unsure, doubled at each
/// look up to [`TICK`] (the host's look, which decides whether the shard
/// is lost).
const FIRST_WAIT: Duration = Duration::from_millis(2);

impl<P> Fenced<P> {
    pub(crate) fn new(
        inner: P,
        link: Arc<Link>,
        counters: Arc<ShardingCounters>,
        end: Option<EndNote>,
    ) -> Fenced<P> {
        Fenced {
            inner,
            link,
            counters,
            end,
            pid: None,
            started: false,
            waiting: None,
            patience: FIRST_WAIT,
            unread: Vec::new(),
        }
    }

    /// A step under an unsure lease: ends the process if the lease is
    /// surely not this node's (a renewal found it taken, the host learned
    /// it lost the shard, the transport gave it up as it closed), its
    /// unread messages counted in `fenced`; else (the lease ran out, and a
    /// renewal may still land) leaves its events unread and looks again
    /// later. A process its host stopped (a passivation, a hand-off) while
    /// its lease was late waits too: renewed, it reads what it has and
    /// its cancel, and ends as any stopped process.
    fn unsure(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        if self.link.clock.is_void() {
            let unread = events.filter(|e| matches!(e, Event::Message(_))).count();
            Counters::add(&self.counters.fenced, unread as u64);
            Counters::add(&self.counters.fenced_processes, 1);
            return Err(FENCED.into());
        }
        self.wait(out);
        Ok(())
    }

    /// Looks again after `patience`, which doubles up to [`TICK`].
    fn wait(&mut self, out: &mut Output<'_>) {
        if let Some(id) = self.waiting.take() {
            // Fallen due and unread, or still to come: never handed out.
            out.cancel_timer(id);
        }
        self.waiting = Some(out.set_timer(self.patience, Tag(0)));
        self.patience = (self.patience * 2).min(TICK);
    }
}

impl<P: Process> Process for Fenced<P> {
    type Done = P::Done;

    fn init(&mut self, cx: &InitContext, method: &str, input: Payload) -> Result<(), InitError> {
        self.inner.init(cx, method, input)
    }

    fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        self.pid = Some(out.pid());
        if !self.link.clock.valid_coarse() {
            // Not ended here even if stopped: `start` cannot see the
            // mailbox, and the messages it was started for would vanish
            // uncounted. They wait there until the lease is sure, or a
            // step counts them in `fenced`.
            self.wait(out);
            return Ok(());
        }
        self.started = true;
        self.inner.start(out)
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        if !self.link.clock.valid_coarse() {
            return self.unsure(events, out);
        }
        if let Some(id) = self.waiting.take() {
            // Its lease is sure again: the wake-up is ours, not `inner`'s.
            out.cancel_timer(id);
            self.patience = FIRST_WAIT;
        }
        if !self.started {
            self.started = true;
            self.inner.start(out)?;
        }
        // A load first: most steps find it set already, and a store
        // would dirty the line the host reads.
        if !self.link.stepped.load(Relaxed) {
            self.link.stepped.store(true, Relaxed);
        }
        self.inner.step(events, out)
    }

    fn close(&mut self) {
        self.inner.close();
    }

    /// A process its host stopped hands back the messages that reached
    /// it after its last step: a sender on a cached route
    /// ([`Entity`](super::Entity)) may have sent them after the cancel,
    /// and they belong to the key's next process. Under a lease no longer
    /// sure, they stay dead letters, as what reaches any ended process.
    fn unread(&mut self, unread: &mut Vec<Event>) {
        // Acquire: pairs with the host's release store, made before the
        // cancel this process may not have read.
        if !self.link.stopping.load(Acquire) || !self.link.clock.valid_coarse() {
            self.inner.unread(unread);
            return;
        }
        let mut rest = Vec::with_capacity(unread.len());
        for event in unread.drain(..) {
            match event {
                Event::Message(package) => self.unread.push(package),
                other => rest.push(other),
            }
        }
        *unread = rest;
        self.inner.unread(unread);
    }

    fn type_name(&self) -> &'static str {
        self.inner.type_name()
    }
}

impl<P> Drop for Fenced<P> {
    fn drop(&mut self) {
        // Ended: a cached route to it is stale (see `Link::stopping`).
        self.link.stopping.store(true, Release);
        if let (Some(end), Some(pid)) = (self.end.take(), self.pid) {
            let note = Note::Ended {
                shard: end.shard,
                key: end.key,
                pid,
                unread: std::mem::take(&mut self.unread),
            };
            // The host gone means the kind is gone: nothing to tell.
            let _ = end.transport.post_local(end.host, note);
        }
    }
}

/// The host process of one kind on this node.
pub(crate) struct Host<P, M> {
    pub(crate) kind: Arc<Kind<P, M>>,
    pub(crate) names: Arc<ClusterNames>,
    /// Idle keys are passivated after this many ticks without a message.
    pub(crate) idle_ticks: u64,
    /// The members seen at the last tick: when they change, routes to
    /// other nodes are looked up again.
    pub(crate) seen: Vec<u32>,
}

impl<P: Process, M: Send + 'static> Process for Host<P, M> {
    type Done = ();

    fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        // Hear the other nodes' heartbeats first, so that the first
        // placement is the cluster's, not this node's alone.
        let heard = self.kind.transport.inner().heartbeat * 2;
        out.set_timer(heard, Tag(0));
        Ok(())
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            match event {
                Event::Message(package) => self.message(out, package),
                Event::Request(request) => self.asked(out.context(), request),
                Event::Timer { .. } => {
                    self.tick(out.context(), out.pid());
                    out.set_timer(TICK, Tag(0));
                }
                Event::Cancel => out.finish(()),
                _ => {}
            }
        }
        Ok(())
    }

    /// The host's end (a cancel, the scheduler's shutdown): nothing will
    /// flush the kind's buffers again, so what waits in them is counted
    /// in `fenced`, not kept unseen.
    fn close(&mut self) {
        for index in 0..self.kind.shard_count() {
            let mut shard = self.kind.lock(index);
            self.kind.fence_waiting(&mut shard);
        }
    }
}

impl<P: Process, M: Send + 'static> Host<P, M> {
    /// A message for a key from another node (a `Keyed<M>`), or a note
    /// from this node's keyed processes. A message from another node
    /// carries its transport's receipt: it goes on with it, repackaged as
    /// the `M` its process reads, so that the node confirms it to its
    /// sender only once that process takes it (`crate::sequence::Held`).
    fn message(&mut self, out: &mut Output<'_>, mut package: Package) {
        let receipt = package.take_receipt();
        let package = match package.downcast::<Keyed<M>>() {
            Ok(Keyed { key, message }) => {
                let refused = match receipt {
                    Some(receipt) => {
                        // From the host, as a message it sends on.
                        let carried = Package::new(out.pid(), out.pid(), message);
                        let carried = carried.with_receipt(receipt);
                        self.kind
                            .send_carried(out.context(), &key, carried)
                            .map_err(|refused| refused.reason)
                    }
                    None => self
                        .kind
                        .send(out.context(), &key, message)
                        .map_err(|refused| refused.reason),
                };
                if let Err(reason) = refused {
                    tracing::warn!(
                        kind = %self.kind.name,
                        %reason,
                        "a keyed message from another node was refused"
                    );
                }
                return;
            }
            Err(package) => package,
        };
        if let Ok(note) = package.downcast::<Note>() {
            self.note(out.context(), out.pid(), note);
        }
    }

    /// A question another node asked a key of a shard it believes held
    /// here: read, and routed as a local ask would be (to the key's
    /// process, or on to the shard's holder, or into the buffer).
    fn asked(&self, cx: &Context, request: sched::actor::Request) {
        let kind = &self.kind;
        let (package, reply) = request.into_parts();
        // Dropped, the right to answer tells the asker `NoReply`.
        let Ok(value) = package.downcast::<KeyedValue>() else {
            tracing::warn!(kind = %kind.name, "a host was asked something other than a keyed question");
            return;
        };
        let question = match kind
            .transport
            .inner()
            .codec
            .decode_value(&value.tag, &value.body)
        {
            Ok(question) => question,
            Err(error) => {
                tracing::warn!(kind = %kind.name, %error, "a keyed question from another node could not be read");
                return;
            }
        };
        if let Err(refused) = kind.ask(cx, &value.key, question, reply) {
            tracing::warn!(
                kind = %kind.name,
                reason = %refused.reason,
                "a keyed question from another node was refused"
            );
        }
    }

    fn note(&mut self, cx: &Context, me: Pid, note: Note) {
        let kind = &self.kind;
        match note {
            Note::Claimed {
                shard: index,
                started,
                outcome,
            } => {
                let mut shard = kind.lock(index);
                shard.claiming = false;
                match outcome {
                    Ok(()) => {
                        shard
                            .clock
                            .renewed(started, kind.transport.inner().name_lease);
                        shard.route = Route::Here;
                        Counters::add(&kind.counters.claims, 1);
                        tracing::debug!(kind = %kind.name, shard = index, "claimed a shard");
                    }
                    Err(error) => {
                        unwatch_lease(kind.transport.inner(), &kind.shard_name(index));
                        if let ClusterNameError::Taken { by, .. } = error {
                            let reachable = kind.transport.inner().members.unreachable(by.node());
                            if by != me && reachable.is_none() {
                                shard.route = Route::There(by);
                            }
                        }
                    }
                }
                kind.flush(cx, index, &mut shard);
            }
            Note::Resolved {
                shard: index,
                outcome,
            } => {
                let mut shard = kind.lock(index);
                shard.resolving = false;
                if let Ok(Some(holder)) = outcome {
                    if shard.route == Route::Unknown && holder.node() != me.node() {
                        shard.route = Route::There(holder);
                    }
                }
                kind.flush(cx, index, &mut shard);
            }
            Note::Released { shard: index } => {
                let mut shard = kind.lock(index);
                shard.releasing = false;
                unwatch_lease(kind.transport.inner(), &kind.shard_name(index));
                if shard.route == Route::Leaving {
                    shard.route = Route::Unknown;
                    Counters::add(&kind.counters.hand_offs, 1);
                    tracing::debug!(kind = %kind.name, shard = index, "handed off a shard");
                }
            }
            Note::Ended {
                shard: index,
                key,
                pid,
                unread,
            } => {
                let mut shard = kind.lock(index);
                if shard.children.get(&key).map(Child::pid) != Some(pid) {
                    self.unmatched(unread.len());
                    return;
                }
                match shard.children.remove(&key) {
                    Some(Child::Stopping { mut queued, .. }) => {
                        // Sent before anything that waits in `queued`:
                        // a sender whose send waited had seen the stop.
                        for package in unread.into_iter().rev() {
                            if package.has_receipt() && package.is::<M>() {
                                // From another node: it keeps its receipt.
                                kind.counters.buffered.fetch_add(1, Relaxed);
                                Counters::add(&kind.counters.handed_back, 1);
                                queued.push_front(Waiting::Carried(package));
                                continue;
                            }
                            match package.downcast::<M>() {
                                Ok(message) => {
                                    kind.counters.buffered.fetch_add(1, Relaxed);
                                    Counters::add(&kind.counters.handed_back, 1);
                                    queued.push_front(Waiting::Message(message));
                                }
                                Err(_) => self.unmatched(1),
                            }
                        }
                        self.requeue(cx, index, &mut shard, key, queued);
                    }
                    // Ended on its own (the key's next message starts
                    // a new one): it was not stopped, so it handed
                    // nothing back.
                    Some(Child::Live { .. }) | None => self.unmatched(unread.len()),
                }
            }
        }
    }

    /// Messages a process handed back that no stopping entry waits for
    /// (none is expected: a process hands back only when its host stopped
    /// it, and only its own end note removes that entry): counted in
    /// `refused`, and logged, never dropped silently.
    fn unmatched(&self, messages: usize) {
        if messages == 0 {
            return;
        }
        Counters::add(&self.kind.counters.refused, messages as u64);
        tracing::warn!(
            kind = %self.kind.name,
            messages,
            "messages handed back by a stopped keyed process found no key waiting"
        );
    }

    /// Sends what waited for a stopped process on: to the key's next
    /// process if the shard is still here, else to the front of the
    /// buffer (they were sent before anything in it).
    fn requeue(
        &self,
        cx: &Context,
        index: u32,
        shard: &mut Shard<M>,
        key: String,
        queued: VecDeque<Waiting<M>>,
    ) {
        let kind = &self.kind;
        if shard.route == Route::Here && shard.clock.valid() && shard.buffer.is_empty() {
            for item in queued {
                kind.counters.give_buffer_slot();
                if let Err(refused) = kind.deliver_here(cx, index, shard, &key, item) {
                    tracing::warn!(kind = %kind.name, reason = %refused.reason, "a waiting keyed message was refused");
                }
            }
        } else {
            for item in queued.into_iter().rev() {
                shard.buffer.push_front((key.clone(), item));
            }
        }
    }

    /// One look at every shard.
    fn tick(&mut self, cx: &Context, me: Pid) {
        let kind = Arc::clone(&self.kind);
        let epoch = kind.epoch.fetch_add(1, Relaxed) + 1;
        let live = kind.live_nodes();
        let changed = live != self.seen;
        let closed = kind.transport.is_closed();
        for index in 0..kind.shard_count() {
            let owner = owner(&kind.name, index, &live);
            let mut shard = kind.lock(index);
            if changed && matches!(shard.route, Route::There(_)) {
                shard.route = Route::Unknown;
            }
            match shard.route {
                Route::Here => {
                    self.keep_or_leave(cx, index, &mut shard, owner == Some(me.node()), epoch)
                }
                Route::Leaving => self.release_when_stopped(index, &mut shard, me),
                Route::Unknown | Route::There(_) if owner == Some(me.node()) => {
                    self.claim(index, &mut shard, me);
                }
                Route::Unknown if !shard.buffer.is_empty() => self.resolve(index, &mut shard, me),
                _ => {}
            }
            if closed {
                // No lease, no route, no name call will ever succeed
                // again: what waits here (it reached this node after
                // its leases were given up) is counted, not kept.
                kind.fence_waiting(&mut shard);
            } else if !shard.buffer.is_empty() {
                kind.flush(cx, index, &mut shard);
            }
        }
        self.seen = live;
    }

    /// A shard held here: lost, to hand off, or kept (its idle keys
    /// passivated).
    fn keep_or_leave(
        &self,
        cx: &Context,
        index: u32,
        shard: &mut Shard<M>,
        mine: bool,
        epoch: u64,
    ) {
        let kind = &self.kind;
        let inner = kind.transport.inner();
        if !holds(inner, &kind.shard_name(index)) {
            // Lost (this node could not renew it for a lease): its
            // processes are fenced already; stop them, and look for the
            // new holder.
            tracing::warn!(kind = %kind.name, shard = index, "lost a shard's lease");
            unwatch_lease(inner, &kind.shard_name(index));
            self.stop_all(cx, shard);
            kind.fence_waiting(shard);
            shard.route = Route::Unknown;
            Counters::add(&kind.counters.shards_lost, 1);
            return;
        }
        if !mine {
            shard.route = Route::Leaving;
            self.stop_all(cx, shard);
            return;
        }
        let idle: Vec<String> = shard
            .children
            .iter_mut()
            .filter_map(|(key, child)| match child {
                Child::Live { touched, link, .. } => {
                    // A step since the last tick: its messages came by a
                    // cached route, which does not touch.
                    if link.stepped.swap(false, Relaxed) {
                        *touched = epoch;
                    }
                    (*touched + self.idle_ticks <= epoch).then(|| key.clone())
                }
                Child::Stopping { .. } => None,
            })
            .collect();
        for key in idle {
            self.stop(cx, shard, &key);
            Counters::add(&kind.counters.passivated, 1);
        }
    }

    fn stop_all(&self, cx: &Context, shard: &mut Shard<M>) {
        let keys: Vec<String> = shard.children.keys().cloned().collect();
        for key in keys {
            self.stop(cx, shard, &key);
        }
    }

    /// Cancels the process of `key`: the cancel comes after every message
    /// sent to it before, and what comes for the key meanwhile waits.
    fn stop(&self, cx: &Context, shard: &mut Shard<M>, key: &str) {
        let Some(Child::Live { pid, link, .. }) = shard.children.get(key) else {
            return;
        };
        let pid = *pid;
        // Before the cancel, under the lock: a cached route read after
        // this is stale, and what the process gets after its last step
        // comes back with its end note.
        link.stopping.store(true, Release);
        if cx.cancel(pid).is_err() {
            // Ended already: its end note may be on its way, or it was
            // never told (it never started); either way it is gone.
            shard.children.remove(key);
            return;
        }
        shard.children.insert(
            key.to_owned(),
            Child::Stopping {
                pid,
                queued: VecDeque::new(),
            },
        );
    }

    fn release_when_stopped(&self, index: u32, shard: &mut Shard<M>, me: Pid) {
        if !shard.children.is_empty() || shard.releasing {
            return;
        }
        shard.releasing = true;
        let transport = Arc::clone(&self.kind.transport);
        let host = me;
        let asked = self
            .names
            .unregister_then(self.kind.shard_name(index), me, move |_| {
                let _ = transport.post_local(host, Note::Released { shard: index });
            });
        if asked.is_err() {
            shard.releasing = false;
        }
    }

    fn claim(&self, index: u32, shard: &mut Shard<M>, me: Pid) {
        if shard.claiming {
            return;
        }
        let kind = &self.kind;
        let name = kind.shard_name(index);
        shard.clock = Arc::new(LeaseClock::new());
        watch_lease(kind.transport.inner(), &name, Arc::clone(&shard.clock));
        let transport = Arc::clone(&kind.transport);
        let started = Instant::now();
        let asked = self.names.register_then(name.clone(), me, move |outcome| {
            let note = Note::Claimed {
                shard: index,
                started,
                outcome,
            };
            let _ = transport.post_local(me, note);
        });
        match asked {
            Ok(()) => shard.claiming = true,
            Err(_) => unwatch_lease(kind.transport.inner(), &name),
        }
    }

    fn resolve(&self, index: u32, shard: &mut Shard<M>, me: Pid) {
        if shard.resolving {
            return;
        }
        let transport = Arc::clone(&self.kind.transport);
        let asked = self
            .names
            .whereis_then(self.kind.shard_name(index), move |outcome| {
                let _ = transport.post_local(
                    me,
                    Note::Resolved {
                        shard: index,
                        outcome,
                    },
                );
            });
        shard.resolving = asked.is_ok();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering::SeqCst};

    /// Counts the messages it reads, and the timers it is handed (it
    /// sets none: any would be its wrapper's).
    #[derive(Default)]
    struct Seen {
        messages: AtomicU64,
        timers: AtomicU64,
    }

    struct Reader(Arc<Seen>);

    impl Process for Reader {
        type Done = ();
        fn step(&mut self, events: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
            for event in events {
                match event {
                    Event::Message(_) => self.0.messages.fetch_add(1, SeqCst),
                    Event::Timer { .. } => self.0.timers.fetch_add(1, SeqCst),
                    _ => 0,
                };
            }
            Ok(())
        }
    }

    struct Fixture {
        pid: Pid,
        link: Arc<Link>,
        counters: Arc<ShardingCounters>,
        seen: Arc<Seen>,
    }

    /// A fenced reader under `clock`, spawned on `node` with `messages`
    /// in its mailbox before its first step (the workers start after).
    fn spawn(node: &Scheduler, clock: Arc<LeaseClock>, messages: u32) -> Fixture {
        let counters = Arc::new(ShardingCounters::default());
        let seen = Arc::new(Seen::default());
        let link = Arc::new(Link::new(clock));
        let process = Fenced::new(
            Reader(Arc::clone(&seen)),
            Arc::clone(&link),
            Arc::clone(&counters),
            None,
        );
        let pid = node.spawn(process).unwrap().pid();
        for n in 0..messages {
            node.send(pid, n).unwrap();
        }
        node.start();
        Fixture {
            pid,
            link,
            counters,
            seen,
        }
    }

    fn eventually(what: &str, done: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !done() {
            assert!(Instant::now() < deadline, "{what} never happened");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// A process started under a lease that is not this node's (never
    /// held, lost, or given up) never reads: the message it was started
    /// for is counted in `fenced`, not lost without a trace.
    #[test]
    fn a_process_started_without_its_lease_counts_what_it_was_started_for() {
        let node = Scheduler::builder().workers(1).build();
        let p = spawn(&node, Arc::new(LeaseClock::new()), 1);
        eventually("the fence", || {
            p.counters.fenced_processes.load(SeqCst) == 1
        });
        assert_eq!(p.counters.fenced.load(SeqCst), 1);
        assert_eq!(p.seen.messages.load(SeqCst), 0);
        node.shutdown(Duration::from_secs(1));
    }

    /// A process its host stopped (a passivation, a hand-off) while its
    /// lease was late waits for the renewal, then reads what it has: the
    /// stop loses nothing.
    #[test]
    fn a_process_stopped_while_its_lease_is_late_reads_once_it_is_renewed() {
        let node = Scheduler::builder().workers(1).build();
        let clock = Arc::new(LeaseClock::new());
        clock.renewed(Instant::now(), Duration::from_millis(40));
        let p = spawn(&node, Arc::clone(&clock), 0);
        eventually("the lapse", || !clock.valid());
        for n in 0..2_u32 {
            node.send(p.pid, n).unwrap();
        }
        p.link.stopping.store(true, Release);
        node.context().cancel(p.pid).unwrap();
        std::thread::sleep(Duration::from_millis(150));
        assert_eq!(p.seen.messages.load(SeqCst), 0, "nothing read unsure");
        clock.renewed(Instant::now(), Duration::from_secs(60));
        eventually("the late reads", || p.seen.messages.load(SeqCst) == 2);
        assert_eq!(p.counters.fenced_processes.load(SeqCst), 0);
        assert_eq!(p.counters.fenced.load(SeqCst), 0);
        node.shutdown(Duration::from_secs(1));
    }

    /// A lease that ran out, with messages waiting: nothing is read, and
    /// once a renewal finds the lease taken (or the host learns the shard
    /// is lost, or the transport gives it up: the clock is void) the
    /// process ends at its next look, its unread messages counted in
    /// `fenced`.
    #[test]
    fn a_process_whose_lease_ran_out_ends_when_the_lease_is_lost() {
        let node = Scheduler::builder().workers(1).build();
        let clock = Arc::new(LeaseClock::new());
        clock.renewed(Instant::now(), Duration::from_millis(40));
        let p = spawn(&node, Arc::clone(&clock), 0);
        eventually("the lapse", || !clock.valid());
        for n in 0..2_u32 {
            node.send(p.pid, n).unwrap();
        }
        std::thread::sleep(Duration::from_millis(150));
        assert_eq!(p.counters.fenced_processes.load(SeqCst), 0, "it waits");
        clock.void();
        eventually("the fence", || {
            p.counters.fenced_processes.load(SeqCst) == 1
        });
        assert_eq!(p.counters.fenced.load(SeqCst), 2);
        assert_eq!(p.seen.messages.load(SeqCst), 0);
        node.shutdown(Duration::from_secs(1));
    }

    /// A lease renewed late (the clock ran out, then a renewal landed)
    /// only delays the steps: what came meanwhile is read once the lease
    /// is sure again, nothing is fenced, and the process never sees the
    /// wake-ups it waited with.
    #[test]
    fn a_lease_renewed_late_delays_the_steps_and_fences_nothing() {
        let node = Scheduler::builder().workers(1).build();
        let clock = Arc::new(LeaseClock::new());
        clock.renewed(Instant::now(), Duration::from_millis(40));
        let p = spawn(&node, Arc::clone(&clock), 1);
        // Renewed as a host renews it, until the first read: on a loaded
        // machine the first step may come later than one 40 ms lease (a
        // lapse meanwhile only delays it, which is what this test is about).
        eventually("the first read", || {
            clock.renewed(Instant::now(), Duration::from_millis(40));
            p.seen.messages.load(SeqCst) == 1
        });
        eventually("the lapse", || !clock.valid());
        for n in 0..3_u32 {
            node.send(p.pid, n).unwrap();
        }
        std::thread::sleep(Duration::from_millis(150));
        assert_eq!(p.seen.messages.load(SeqCst), 1, "nothing read unsure");
        clock.renewed(Instant::now(), Duration::from_secs(60));
        eventually("the late reads", || p.seen.messages.load(SeqCst) == 4);
        assert_eq!(p.counters.fenced_processes.load(SeqCst), 0);
        assert_eq!(p.counters.fenced.load(SeqCst), 0);
        node.send(p.pid, 9_u32).unwrap();
        eventually("a read after", || p.seen.messages.load(SeqCst) == 5);
        assert_eq!(
            p.seen.timers.load(SeqCst),
            0,
            "the wrapper's wake-ups leaked"
        );
        node.shutdown(Duration::from_secs(1));
    }

    /// With its lease sure, the same process reads.
    #[test]
    fn a_process_started_with_its_lease_reads() {
        let node = Scheduler::builder().workers(1).build();
        let clock = Arc::new(LeaseClock::new());
        clock.renewed(Instant::now(), Duration::from_secs(60));
        let p = spawn(&node, clock, 1);
        eventually("the read", || p.seen.messages.load(SeqCst) == 1);
        assert_eq!(p.counters.fenced_processes.load(SeqCst), 0);
        node.shutdown(Duration::from_secs(1));
    }
}
