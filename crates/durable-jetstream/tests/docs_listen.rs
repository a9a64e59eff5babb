//! Tries to break what the documentation promises of
//! `Durability::listen` on the JetStream store (docs/guide/durable.md,
//! "Stores"; the rustdoc of `Durability::listen` and
//! `Store::watch_sends`; the crate docs' "Live sends between nodes"),
//! written from the documentation only:
//!
//! - a send from a durable process on one node to one running on another
//!   reaches it as soon as the sender's record is stored, once the
//!   receiving node listens, with no `recover` after the spawns;
//! - a send made before its receiver runs waits in the outbox and is
//!   handed over when the receiver is spawned, with no later recovery;
//! - either way each send is taken exactly once, in its sender's order
//!   (numbered 1, 2, 3, ... per receiver, as the journal records it);
//! - the deliveries stop when the listening node's scheduler is dropped;
//! - a store of one node returns `Ok(false)`.
//!
//! Each test checks what the receiver finished with (its state: every
//! message with its sender's key, in the order it took them) and, apart
//! from it, the receiver's journal (`Durability::inspect`: each taken
//! send's number, per sender). Each runs on a thread of its own, bounded
//! (`TEST_BOUND`): a node that hangs fails its test instead of the run.
//! Before 0c426e2, a `spawn` on a listening node while the store's watch
//! handed a send over hung the node for good (the watch waited for the
//! spawn, the spawn for the store): four of these tests caught it.

mod support;

use std::collections::BTreeMap;
use std::sync::{mpsc, Arc, Mutex, Once};
use std::time::{Duration, Instant};

use sched_durable::prelude::*;
use sched_durable::store::{MemoryStore, Store};
use sched_durable::{AnyKind, Key, RecordedInput, Spawned};
use sched_durable_jetstream::JetStreamStore;
use support::NatsServer;

/// Every wait of these tests is bounded by it.
const WAIT: Duration = Duration::from_secs(20);

/// A whole test on a server is bounded by it.
const TEST_BOUND: Duration = Duration::from_secs(40);

/// Sends `count` messages (0, 1, 2, ...) to the receiver `to`, `per_step`
/// of them per step, a step every millisecond (each step is its own
/// record, so the sends span many messages of the stream); finishes with
/// `count` in the step of its last send.
struct Sender {
    to: String,
    count: u64,
    per_step: u64,
    next: u64,
}

impl Sender {
    fn send_some(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        for _ in 0..self.per_step {
            if self.next < self.count {
                out.send(Key::<Receiver>::new(self.to.clone()), self.next)?;
                self.next += 1;
            }
        }
        if self.next == self.count {
            out.finish(self.count);
        } else {
            out.set_timer(Duration::from_millis(1), Tag(1));
        }
        Ok(())
    }
}

impl Durable for Sender {
    const KIND: &'static str = "docs-listen-sender";
    type Args = (String, u64, u64);
    type Message = ();
    type Done = u64;

    fn create((to, count, per_step): (String, u64, u64)) -> Self {
        Sender {
            to,
            count,
            per_step,
            next: 0,
        }
    }

    fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        self.send_some(out)
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events.typed::<Self>() {
            if let Event::Timer { .. } = event {
                self.send_some(out)?;
            }
        }
        Ok(())
    }
}

/// Takes `expected` messages and finishes with all of them, each with its
/// sender's key, in the order it took them.
struct Receiver {
    expected: u64,
    log: Vec<(String, u64)>,
}

impl Durable for Receiver {
    const KIND: &'static str = "docs-listen-receiver";
    type Args = u64;
    type Message = u64;
    type Done = Vec<(String, u64)>;

    fn create(expected: u64) -> Self {
        Receiver {
            expected,
            log: Vec::new(),
        }
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        let from = events.sender().unwrap_or("outside").to_owned();
        for event in events.typed::<Self>() {
            if let Event::Message(message) = event {
                self.log.push((from.clone(), message));
                if self.log.len() as u64 == self.expected {
                    out.finish(&self.log);
                }
            }
        }
        Ok(())
    }
}

/// A member of a ring: sends `count` messages to `next` (two per step, a
/// step every millisecond), takes `count` from its predecessor, and
/// finishes with what it took once it has sent and taken everything. It
/// starts sending at its start, or (`wait_for_go`) when told anything
/// from outside.
struct Ring {
    next_key: String,
    count: u64,
    wait_for_go: bool,
    sent: u64,
    log: Vec<(String, u64)>,
}

impl Ring {
    fn send_some(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        for _ in 0..2 {
            if self.sent < self.count {
                out.send(Key::<Ring>::new(self.next_key.clone()), self.sent)?;
                self.sent += 1;
            }
        }
        if self.sent < self.count {
            out.set_timer(Duration::from_millis(1), Tag(1));
        }
        self.finish_if_done(out);
        Ok(())
    }

    fn finish_if_done(&self, out: &mut Output<'_>) {
        if self.sent == self.count && self.log.len() as u64 == self.count {
            out.finish(&self.log);
        }
    }
}

impl Durable for Ring {
    const KIND: &'static str = "docs-listen-ring";
    type Args = (String, u64, bool);
    type Message = u64;
    type Done = Vec<(String, u64)>;

    fn create((next_key, count, wait_for_go): (String, u64, bool)) -> Self {
        Ring {
            next_key,
            count,
            wait_for_go,
            sent: 0,
            log: Vec::new(),
        }
    }

    fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        if !self.wait_for_go {
            self.send_some(out)?;
        }
        Ok(())
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        let from = events.sender().map(str::to_owned);
        for event in events.typed::<Self>() {
            match (event, &from) {
                (Event::Timer { .. }, _) => self.send_some(out)?,
                (Event::Message(message), Some(from)) => {
                    self.log.push((from.clone(), message));
                    self.finish_if_done(out);
                }
                (Event::Message(_), None) if self.wait_for_go && self.sent == 0 => {
                    self.send_some(out)?
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// A server syncing every message (`sync_interval: always`), or `None`
/// when `nats-server` is missing and `CI` is not set.
fn server() -> Option<NatsServer> {
    let server = NatsServer::start_with_config("jetstream { sync_interval: always }\n");
    if server.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI is set and nats-server could not be started"
        );
    }
    server
}

/// Runs `body` with the URL of a server syncing every message
/// (`sync_interval: always`), on a thread of its own, for at most
/// `TEST_BOUND`: a body that hangs fails the test (its threads are left
/// behind) instead of hanging the run. Returns at once when `nats-server`
/// is missing and `CI` is not set.
fn on_server(body: impl FnOnce(&str) + Send + 'static) {
    let Some(server) = server() else { return };
    let url = server.url();
    let (done, finished) = mpsc::channel();
    let thread = std::thread::spawn(move || {
        body(&url);
        let _ = done.send(());
    });
    match finished.recv_timeout(TEST_BOUND) {
        Ok(()) => thread.join().expect("the body finished"),
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            if let Err(panic) = thread.join() {
                std::panic::resume_unwind(panic)
            }
        }
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("the test hung: not finished within {TEST_BOUND:?}")
        }
    }
    drop(server);
}

/// One node of a cluster: a durability on its own JetStream store handle,
/// and its scheduler, set up in the documented order (register, install,
/// start, recover), listening if asked.
struct Node {
    durability: Option<Durability>,
    scheduler: Option<Arc<Scheduler>>,
    /// What the start's recovery resumed.
    resumed: Vec<Spawned<AnyKind>>,
}

impl Node {
    fn start(server: &str, prefix: &str, node: u32, listen: bool) -> Node {
        let store = JetStreamStore::builder(server, node)
            .prefix(prefix)
            .open()
            .expect("the store opens");
        let durability = Durability::open(store);
        durability
            .register::<Sender>()
            .register::<Receiver>()
            .register::<Ring>();
        let scheduler = Arc::new(
            durability
                .install(Scheduler::builder().node(node).workers(2))
                .build(),
        );
        scheduler.start();
        let recovery = durability
            .recover(&*scheduler)
            .expect("the start's recovery");
        let node = Node {
            durability: Some(durability),
            scheduler: Some(scheduler),
            resumed: recovery.resumed,
        };
        if listen {
            assert!(
                node.listen().expect("listen starts"),
                "listen on a cluster store says there is nothing to listen to"
            );
        }
        node
    }

    fn d(&self) -> &Durability {
        self.durability.as_ref().expect("the durability")
    }

    fn s(&self) -> &Scheduler {
        self.scheduler.as_ref().expect("the scheduler")
    }

    fn listen(&self) -> Result<bool, DurableError> {
        self.d()
            .listen(self.scheduler.as_ref().expect("the scheduler"))
    }

    /// Spawns `senders` senders (keys `<name>-0`, `<name>-1`, ...) of
    /// `count` messages each to `to`.
    fn senders(
        &self,
        name: &str,
        senders: usize,
        to: &str,
        count: u64,
        per_step: u64,
    ) -> Vec<(String, Spawned<u64>)> {
        (0..senders)
            .map(|i| {
                let key = format!("{name}-{i}");
                let spawned = self
                    .d()
                    .spawn::<Sender>(self.s(), &key, (to.to_owned(), count, per_step))
                    .expect("a sender spawns");
                (key, spawned)
            })
            .collect()
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if let Some(scheduler) = self.scheduler.take() {
            scheduler.shutdown(Duration::from_secs(2));
        }
        // The durability after its scheduler's shutdown, as documented.
        self.durability.take();
    }
}

/// Waits (bounded) for every sender to finish: their records, sends
/// included, are then stored.
fn wait_senders(senders: Vec<(String, Spawned<u64>)>, count: u64) -> Vec<String> {
    senders
        .into_iter()
        .map(|(key, mut spawned)| {
            let done = spawned
                .wait_timeout(WAIT)
                .unwrap_or_else(|e| panic!("sender {key} did not finish: {e}"));
            assert_eq!(done, count, "sender {key}");
            key
        })
        .collect()
}

/// The sends `key`'s journal took, in order: (sender, send number).
fn journal_takes(durability: &Durability, key: &str) -> Vec<(String, u64)> {
    let Some(journal) = durability.inspect(key).expect("the journal reads") else {
        return Vec::new();
    };
    journal
        .records
        .iter()
        .flat_map(|record| record.inputs.iter())
        .filter_map(|input| match input {
            RecordedInput::Message {
                from: Some((from, n)),
                ..
            } => Some((from.clone(), *n)),
            _ => None,
        })
        .collect()
}

/// Per sender: how many of its sends the journal took, and the numbers
/// out of place (a copy, a gap, a reordering), for a failure's message.
fn summary(takes: &[(String, u64)]) -> String {
    let mut per: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    for (from, n) in takes {
        per.entry(from).or_default().push(*n);
    }
    per.iter()
        .map(|(from, ns)| {
            let wrong: Vec<String> = ns
                .iter()
                .enumerate()
                .filter(|(i, n)| **n != *i as u64 + 1)
                .map(|(i, n)| format!("#{i}={n}"))
                .take(8)
                .collect();
            format!("{from}: {} taken, out of place {:?}", ns.len(), wrong)
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Asserts that `log` (what the receiver finished with: messages 0, 1,
/// 2, ... of each sender) and `journal` (sends numbered 1, 2, 3, ...)
/// hold each of `senders`' `count` sends exactly once, in order, and
/// nothing else.
fn assert_exactly_once_in_order(
    what: &str,
    log: &[(String, u64)],
    journal: &[(String, u64)],
    senders: &[String],
    count: u64,
) {
    for sender in senders {
        let got: Vec<u64> = log
            .iter()
            .filter(|(from, _)| from == sender)
            .map(|(_, m)| *m)
            .collect();
        assert_eq!(
            got,
            (0..count).collect::<Vec<_>>(),
            "{what}: the messages of {sender} the receiver took (journal: {})",
            summary(journal)
        );
        let numbers: Vec<u64> = journal
            .iter()
            .filter(|(from, _)| from == sender)
            .map(|(_, n)| *n)
            .collect();
        assert_eq!(
            numbers,
            (1..=count).collect::<Vec<_>>(),
            "{what}: the send numbers of {sender} in the receiver's journal"
        );
    }
    let total = senders.len() * count as usize;
    assert_eq!(log.len(), total, "{what}: the receiver took something else");
    assert_eq!(
        journal.len(),
        total,
        "{what}: the journal took something else: {}",
        summary(journal)
    );
}

/// Waits (bounded) for the receiver `key` on `node` to finish, then
/// checks what it took.
fn expect_all(
    what: &str,
    node: &Node,
    key: &str,
    mut receiver: Spawned<Vec<(String, u64)>>,
    senders: &[String],
    count: u64,
) {
    let log = match receiver.wait_timeout(WAIT) {
        Ok(log) => log,
        Err(e) => {
            let stats = node.d().stats();
            panic!(
                "{what}: the receiver did not finish within {WAIT:?} ({e}); \
                 its journal: {}; its node: held {}, duplicates {}, undelivered {}",
                summary(&journal_takes(node.d(), key)),
                stats.held,
                stats.duplicates,
                stats.undelivered
            )
        }
    };
    let journal = journal_takes(node.d(), key);
    assert_exactly_once_in_order(what, &log, &journal, senders, count);
}

/// Twenty senders on node 1 send to one receiver already running on node
/// 2, which listens: every send taken exactly once, in each sender's
/// order, with no `recover` after the spawns.
#[test]
fn many_senders_reach_a_receiver_on_a_listening_node_exactly_once_in_order() {
    on_server(|server| {
        let (senders, count) = (20, 20);
        let one = Node::start(server, "dl-many", 1, false);
        let two = Node::start(server, "dl-many", 2, true);

        let receiver = two
            .d()
            .spawn::<Receiver>(two.s(), "sink", senders as u64 * count)
            .expect("the receiver spawns");
        receiver
            .durable()
            .wait_timeout(WAIT)
            .expect("the receiver is durable");

        let keys = wait_senders(one.senders("s", senders, "sink", count, 2), count);
        expect_all("many senders", &two, "sink", receiver, &keys, count);
        // Node 1 released every send to a receiver that did not run there.
        assert!(one.d().stats().undelivered >= senders as u64 * count);
    });
}

/// A receiver spawned on node 2 after the senders on node 1 sent (and
/// finished: their records are stored): the outbox hands their sends over
/// at the spawn; a second wave, sent after the spawn, comes live. Node 2
/// listens from its start (before the spawn) or only after the spawn.
fn late_receiver(server: &str, listen_first: bool) {
    let (senders, count) = (8, 15);
    let (prefix, what) = if listen_first {
        (
            "dl-late-before",
            "late receiver, node listening before its spawn",
        )
    } else {
        (
            "dl-late-after",
            "late receiver, node listening after its spawn",
        )
    };
    let one = Node::start(server, prefix, 1, false);
    let two = Node::start(server, prefix, 2, listen_first);

    // Wave 1: sent and stored before the receiver exists anywhere.
    let mut keys = wait_senders(one.senders("early", senders, "sink", count, 3), count);

    let receiver = two
        .d()
        .spawn::<Receiver>(two.s(), "sink", 2 * senders as u64 * count)
        .expect("the receiver spawns");
    receiver
        .durable()
        .wait_timeout(WAIT)
        .expect("the receiver is durable");
    if !listen_first {
        assert!(two.listen().expect("listen starts"));
    }

    // Wave 2: sent while the receiver runs on a listening node.
    keys.extend(wait_senders(
        one.senders("late", senders, "sink", count, 3),
        count,
    ));
    expect_all(what, &two, "sink", receiver, &keys, count);
}

/// [`late_receiver`], node 2 listening only after the receiver's spawn.
#[test]
fn a_receiver_spawned_after_the_sends_takes_them_all_its_node_listening_after_the_spawn() {
    on_server(|server| late_receiver(server, false));
}

/// [`late_receiver`], node 2 listening from its start: the store's watch
/// hands wave 1 over while the receiver is being spawned. (Before
/// 0c426e2, node 2 hung in that spawn in 1 run in 3 to 8.)
#[test]
fn a_receiver_spawned_after_the_sends_takes_them_all_its_node_listening_before_the_spawn() {
    on_server(|server| late_receiver(server, true));
}

/// Node 2 listens; senders on node 1 are sending (one send a step) when
/// the receiver is spawned on node 2: the sends stored before the spawn
/// come from the outbox, those after it live, none twice, none lost, in
/// order, with no `recover`. (Before 0c426e2, node 2 hung in the spawn
/// in 1 run in 2 to 8.)
#[test]
fn senders_racing_the_receivers_spawn_on_a_listening_node() {
    on_server(|server| {
        let (senders, count) = (16, 40);
        let one = Node::start(server, "dl-race", 1, false);
        let two = Node::start(server, "dl-race", 2, true);

        let spawned = one.senders("s", senders, "sink", count, 1);
        // Spawn the receiver once some sends are stored, while the senders
        // are still sending.
        let deadline = Instant::now() + WAIT;
        while one.d().stats().undelivered < (senders as u64 * count) / 8 {
            assert!(Instant::now() < deadline, "the senders did not send");
            std::thread::sleep(Duration::from_millis(1));
        }
        let receiver = two
            .d()
            .spawn::<Receiver>(two.s(), "sink", senders as u64 * count)
            .expect("the receiver spawns");
        let keys = wait_senders(spawned, count);
        expect_all("racing the spawn", &two, "sink", receiver, &keys, count);
    });
}

/// `listen` called twice on node 2 (the docs say to call it once: this
/// checks that a second call does not make a send taken twice).
#[test]
fn listen_called_twice_takes_no_send_twice() {
    on_server(|server| {
        let (senders, count) = (10, 20);
        let one = Node::start(server, "dl-twice", 1, false);
        let two = Node::start(server, "dl-twice", 2, true);
        // Whatever the second call says, the channel's promise stands.
        let _second = two.listen();

        let receiver = two
            .d()
            .spawn::<Receiver>(two.s(), "sink", senders as u64 * count)
            .expect("the receiver spawns");
        receiver
            .durable()
            .wait_timeout(WAIT)
            .expect("the receiver is durable");
        let keys = wait_senders(one.senders("s", senders, "sink", count, 2), count);
        expect_all("listening twice", &two, "sink", receiver, &keys, count);
        // Nothing taken after the expected ones either.
        std::thread::sleep(Duration::from_millis(300));
        let journal = journal_takes(two.d(), "sink");
        assert_eq!(
            journal.len(),
            senders * count as usize,
            "{}",
            summary(&journal)
        );
    });
}

/// Three nodes, each listening, each running one member of a ring that
/// sends to the member on the next node and takes from the one on the
/// previous node: every member takes all its predecessor's sends, once,
/// in order, with no `recover` after the spawns. With `go`, the members
/// start sending only once all three run (told so from outside);
/// without, each sends from its first step, while the next member may be
/// being spawned.
fn ring(server: &str, prefix: &str, go: bool) {
    let count = 60;
    let nodes: Vec<Node> = (1..=3)
        .map(|n| Node::start(server, prefix, n, true))
        .collect();
    let key = |i: usize| format!("ring-{}", i % 3);
    let members: Vec<Spawned<Vec<(String, u64)>>> = nodes
        .iter()
        .enumerate()
        .map(|(i, node)| {
            node.d()
                .spawn::<Ring>(node.s(), &key(i), (key(i + 1), count, go))
                .expect("a ring member spawns")
        })
        .collect();
    if go {
        for member in &members {
            member
                .durable()
                .wait_timeout(WAIT)
                .expect("a ring member is durable");
        }
        for (i, node) in nodes.iter().enumerate() {
            node.d()
                .send::<Ring>(node.s(), &key(i), &0)
                .expect("go")
                .wait_timeout(WAIT)
                .expect("go is durable");
        }
    }
    for (i, member) in members.into_iter().enumerate() {
        let previous = key(i + 2);
        expect_all(
            &format!("ring member {} (node {})", key(i), i + 1),
            &nodes[i],
            &key(i),
            member,
            &[previous],
            count,
        );
    }
}

/// [`ring`], the members sending once all three run.
#[test]
fn three_listening_nodes_send_in_a_ring() {
    on_server(|server| ring(server, "dl-ring", true));
}

/// [`ring`], each member sending from its start. (Before 0c426e2, a node
/// hung in the spawn of its member in 1 run in 2.)
#[test]
fn three_listening_nodes_send_in_a_ring_from_their_first_steps() {
    on_server(|server| ring(server, "dl-ring-first", false));
}

/// Node 2 listens and runs a receiver that takes a stream of live sends
/// from node 1; meanwhile node 2 spawns 40 other, unrelated processes
/// (keys nobody sends to). Every spawn returns, and the receiver takes
/// everything once, in order. (Before 0c426e2, node 2 hung in one of
/// those spawns in every run: 6 of 6, and its journal writes stopped.)
#[test]
fn spawning_unrelated_processes_on_a_listening_node_while_sends_arrive() {
    on_server(|server| {
        let (senders, count) = (8, 40);
        let one = Node::start(server, "dl-unrelated", 1, false);
        let two = Node::start(server, "dl-unrelated", 2, true);
        let receiver = two
            .d()
            .spawn::<Receiver>(two.s(), "sink", senders as u64 * count)
            .expect("the receiver spawns");
        receiver
            .durable()
            .wait_timeout(WAIT)
            .expect("the receiver is durable");
        let spawned = one.senders("s", senders, "sink", count, 1);
        let mut others = Vec::new();
        for i in 0..40 {
            // Receivers that nobody sends to: they never finish.
            others.push(
                two.d()
                    .spawn::<Receiver>(two.s(), &format!("other-{i}"), 1)
                    .expect("an unrelated process spawns"),
            );
        }
        let keys = wait_senders(spawned, count);
        expect_all(
            "spawning beside live sends",
            &two,
            "sink",
            receiver,
            &keys,
            count,
        );
        for other in &others {
            other
                .durable()
                .wait_timeout(WAIT)
                .expect("an unrelated process is durable");
        }
    });
}

/// Node 2 listens and runs a receiver taking a stream of live sends from
/// node 1, while it calls `recover` again and again (the docs: at start
/// and then periodically; safe beside running processes): every
/// recovery returns, resumes nothing that runs, and the receiver takes
/// everything once, in order.
#[test]
fn recovering_periodically_on_a_listening_node_while_sends_arrive() {
    on_server(|server| {
        let (senders, count) = (8, 40);
        let one = Node::start(server, "dl-recover", 1, false);
        let two = Node::start(server, "dl-recover", 2, true);
        let receiver = two
            .d()
            .spawn::<Receiver>(two.s(), "sink", senders as u64 * count)
            .expect("the receiver spawns");
        receiver
            .durable()
            .wait_timeout(WAIT)
            .expect("the receiver is durable");
        let spawned = one.senders("s", senders, "sink", count, 1);
        for _ in 0..20 {
            let recovery = two.d().recover(two.s()).expect("a recovery");
            assert!(
                recovery.resumed.is_empty(),
                "a recovery resumed a running process"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        let keys = wait_senders(spawned, count);
        expect_all(
            "recovering beside live sends",
            &two,
            "sink",
            receiver,
            &keys,
            count,
        );
    });
}

/// Panics on any thread since the hook was installed, by thread name.
static PANICS: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn count_panics() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let thread = std::thread::current();
            let name = thread.name().unwrap_or("<unnamed>").to_owned();
            PANICS
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(format!("{name}: {info}"));
            previous(info)
        }));
    });
}

/// The panics recorded from index `from` on, except those of this
/// binary's test threads (a test's own failing assertion).
fn panics_since(from: usize) -> Vec<String> {
    const TESTS: &[&str] = &[
        "many_senders",
        "a_receiver_spawned",
        "senders_racing",
        "listen_called_twice",
        "three_listening",
        "spawning_unrelated",
        "recovering_periodically",
        "dropping_a_listening",
        "listen_on_a_single",
    ];
    PANICS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .skip(from)
        .filter(|p| !TESTS.iter().any(|t| p.starts_with(t)))
        .cloned()
        .collect()
}

/// Node 2 listens and its receiver takes a first wave live; then its
/// scheduler is shut down and dropped (its durability still alive, so
/// still watching) while node 1 sends a second wave. Nothing panics on
/// any thread, the scheduler is not kept alive by the watch, dropping the
/// durability does not hang, and node 2 restarted takes the second wave
/// (from the outbox, by its recovery) after the first: each send once,
/// in order.
#[test]
fn dropping_a_listening_nodes_scheduler_neither_hangs_nor_panics_nor_loses_a_send() {
    on_server(|server| {
        count_panics();
        let panics_before = PANICS.lock().unwrap_or_else(|e| e.into_inner()).len();
        let (senders, count) = (5, 10);
        let one = Node::start(server, "dl-drop", 1, false);
        let mut two = Node::start(server, "dl-drop", 2, true);

        let mut receiver = two
            .d()
            .spawn::<Receiver>(two.s(), "sink", 2 * senders as u64 * count)
            .expect("the receiver spawns");
        receiver
            .durable()
            .wait_timeout(WAIT)
            .expect("the receiver is durable");
        let mut keys = wait_senders(one.senders("first", senders, "sink", count, 2), count);
        // The first wave comes live: no recover.
        let deadline = Instant::now() + WAIT;
        loop {
            let taken = journal_takes(two.d(), "sink");
            if taken.len() == senders * count as usize {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the first wave did not arrive live: {}",
                summary(&taken)
            );
            std::thread::sleep(Duration::from_millis(10));
        }

        // Node 2's scheduler goes; its durability stays (and watches).
        let scheduler = two.scheduler.take().expect("the scheduler");
        scheduler.shutdown(Duration::from_secs(2));
        let weak = Arc::downgrade(&scheduler);
        drop(scheduler);
        assert!(
            matches!(receiver.wait_timeout(WAIT), Err(DurableError::Suspended)),
            "the receiver is suspended by the shutdown"
        );
        drop(receiver);
        let deadline = Instant::now() + Duration::from_secs(5);
        while weak.upgrade().is_some() {
            assert!(
                Instant::now() < deadline,
                "the scheduler is kept alive after it was dropped (by the watch?)"
            );
            std::thread::sleep(Duration::from_millis(10));
        }

        // The second wave, sent while node 2's durability watches without a
        // scheduler.
        keys.extend(wait_senders(
            one.senders("second", senders, "sink", count, 2),
            count,
        ));
        std::thread::sleep(Duration::from_millis(300));

        // Dropping node 2's durability does not hang.
        let durability = two.durability.take().expect("the durability");
        let (done, dropped) = mpsc::channel();
        std::thread::spawn(move || {
            drop(durability);
            let _ = done.send(());
        });
        dropped
            .recv_timeout(WAIT)
            .expect("dropping a durability whose listening scheduler was dropped hangs");
        drop(two);

        // Node 2 again: its start's recovery resumes the receiver, which
        // takes the second wave from the outbox.
        let mut two = Node::start(server, "dl-drop", 2, true);
        let receiver = two
            .resumed
            .drain(..)
            .find(|spawned| spawned.key() == "sink")
            .expect("node 2's recovery resumed the receiver")
            .of::<Receiver>()
            .expect("a receiver");
        expect_all(
            "across the dropped scheduler",
            &two,
            "sink",
            receiver,
            &keys,
            count,
        );
        let panics = panics_since(panics_before);
        assert!(panics.is_empty(), "panics: {panics:?}");
        drop(one);
        drop(two);
        let panics = panics_since(panics_before);
        assert!(panics.is_empty(), "panics at the end: {panics:?}");
    });
}

/// A store of one node: `listen` and `watch_sends` return `Ok(false)`.
#[test]
fn listen_on_a_single_node_store_returns_false() {
    // The memory store.
    let durability = Durability::open(MemoryStore::new());
    let scheduler = Arc::new(durability.install(Scheduler::builder().workers(1)).build());
    scheduler.start();
    assert!(!durability.listen(&scheduler).expect("listen"));
    assert!(!MemoryStore::new()
        .watch_sends(Box::new(|_| {}))
        .expect("watch_sends"));
    scheduler.shutdown(Duration::from_secs(1));
    drop(durability);

    // The embedded store.
    let dir = std::env::temp_dir().join(format!("docs-listen-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a directory");
    let path = dir.join("j.redb");
    {
        let durability = Durability::open(RedbStore::create(&path).expect("the store"));
        let scheduler = Arc::new(durability.install(Scheduler::builder().workers(1)).build());
        scheduler.start();
        durability.recover(&*scheduler).expect("a recovery");
        assert!(!durability.listen(&scheduler).expect("listen"));
        scheduler.shutdown(Duration::from_secs(1));
    }
    assert!(!RedbStore::create(&path)
        .expect("the store")
        .watch_sends(Box::new(|_| {}))
        .expect("watch_sends"));
    let _ = std::fs::remove_dir_all(&dir);
}
