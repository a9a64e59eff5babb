//! Asks to a key (`Sharded::ask`, `Sharded::ask_from_step`) tested from
//! their documentation only (the guide's "Asking a key", the rustdoc of
//! `Sharded`), trying to break what they promise: asks from many threads
//! on three nodes while shards are placed, a node joins and one leaves; a
//! question after a message sees it; every outcome the guide lists for an
//! asker; untyped questions; exactly one reply per ask from a step.

mod support;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use relay_nats::async_nats::ConnectOptions;
use relay_nats::{Keyed, NatsConfig, NatsTransport, Refused, RefusedReason};
use relay_nats::{Sharded, Sharding, ShardingConfig};
use sched::actor::{AskError, AskId, Replied, Request, Responder};
use sched::prelude::*;
use sched::{Reply, ReplyId};
use serde::{Deserialize, Serialize};
use support::*;

const WAIT: Duration = Duration::from_secs(60);
const KIND: &str = "acct";

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
enum Cmd {
    /// Sender `from`'s `n`th message.
    Dep { from: u64, n: u64 },
    /// Blocks the step that reads it until the test opens the key's gate.
    Block,
    /// Finishes the process, reading nothing after it.
    Stop,
    /// Answers every held `Hold(n)` with `n`.
    Release,
}

/// Answered with the answerer and the last number it read from `from`.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
struct Get {
    from: u64,
}
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
struct Seen {
    key: String,
    node: u32,
    last: u64,
}
impl Question for Get {
    type Answer = Seen;
}
/// `Ignore` is taken and dropped, `Hold` held until a `Cmd::Release`,
/// `Stranger` never taken, `Secret` in no codec.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
struct Ignore(u64);
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
struct Hold(u64);
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
struct Stranger(u64);
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Secret(u64);
impl Question for Ignore {
    type Answer = u64;
}
impl Question for Hold {
    type Answer = u64;
}
impl Question for Stranger {
    type Answer = u64;
}
impl Question for Secret {
    type Answer = u64;
}

/// What every node's keyed processes share.
#[derive(Default)]
struct Book {
    /// Per key: processes made and not finished (or dropped), and inside a step.
    live: Mutex<HashMap<String, u32>>,
    stepping: Mutex<HashMap<String, u32>>,
    violations: Mutex<Vec<String>>,
    gates: Mutex<HashMap<String, mpsc::Receiver<()>>>,
    blocked: Mutex<HashSet<String>>,
}

impl Book {
    fn gate(&self, key: &str) -> mpsc::Sender<()> {
        let (open, gate) = mpsc::channel();
        self.gates.lock().unwrap().insert(key.to_owned(), gate);
        open
    }
    fn count(&self, map: &Mutex<HashMap<String, u32>>, key: &str, by: i32, what: &str) {
        let mut map = map.lock().unwrap();
        let n = map.entry(key.to_owned()).or_default();
        *n = n.saturating_add_signed(by);
        if by > 0 && *n > 1 {
            let v = format!("{key}: {n} {what}");
            self.violations.lock().unwrap().push(v);
        }
    }
    fn violations(&self) -> Vec<String> {
        self.violations.lock().unwrap().clone()
    }
    fn block(&self, node: &KNode, key: &str) -> mpsc::Sender<()> {
        let open = self.gate(key);
        node.acct().send(&node.scheduler, key, Cmd::Block).unwrap();
        wait_until("the process to block", WAIT, || {
            self.blocked.lock().unwrap().contains(key)
        });
        open
    }
}

/// One key's process.
struct Account {
    key: String,
    node: u32,
    book: Arc<Book>,
    last: HashMap<u64, u64>,
    held: Vec<(u64, Responder<u64>)>,
    ended: bool,
}

impl Account {
    fn new(key: &str, node: u32, book: &Arc<Book>) -> Account {
        assert!(!key.starts_with("bad"), "no process for {key}");
        book.count(&book.live, key, 1, "live processes");
        let (key, book) = (key.to_owned(), Arc::clone(book));
        let (last, held) = (HashMap::new(), Vec::new());
        Account {
            key,
            node,
            book,
            last,
            held,
            ended: false,
        }
    }

    /// Not live any more: finished, or dropped (fenced, it never steps).
    fn end(&mut self) {
        if !std::mem::replace(&mut self.ended, true) {
            self.book.count(&self.book.live, &self.key, -1, "");
        }
    }

    /// `Ignore` is tried first, so that every question meets a failed
    /// take before its own: taken after it and dropped, it still reads
    /// `NoReply` (`crates/sched/tests/forward_docs.rs` checks that too).
    fn request(&mut self, request: Request) {
        let Err(request) = request.take::<Ignore>() else {
            return;
        };
        let request = match request.take::<Get>() {
            Ok((Get { from }, answer)) => {
                let last = self.last.get(&from).copied().unwrap_or(0);
                let (key, node) = (self.key.clone(), self.node);
                return answer.answer(Seen { key, node, last });
            }
            Err(request) => request,
        };
        if let Some(Ping(n)) = request.payload::<Ping>().copied() {
            return request.reply(Pong(n));
        }
        if let Ok((Hold(n), answer)) = request.take::<Hold>() {
            self.held.push((n, answer));
        }
    }

    fn read(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) {
        for event in events {
            match event {
                Event::Message(m) => match m.downcast::<Cmd>() {
                    Ok(Cmd::Dep { from, n }) => drop(self.last.insert(from, n)),
                    Ok(Cmd::Block) => {
                        let gate = self.book.gates.lock().unwrap().remove(&self.key);
                        self.book.blocked.lock().unwrap().insert(self.key.clone());
                        let _ = gate.map(|g| g.recv_timeout(WAIT));
                        self.book.blocked.lock().unwrap().remove(&self.key);
                    }
                    Ok(Cmd::Stop) => return self.finish(out),
                    Ok(Cmd::Release) => self.held.drain(..).for_each(|(n, r)| r.answer(n)),
                    Err(_) => {}
                },
                Event::Request(request) => self.request(request),
                Event::Cancel => self.finish(out),
                _ => {}
            }
        }
    }

    fn finish(&mut self, out: &mut Output<'_>) {
        self.end();
        out.finish(());
    }
}

impl Drop for Account {
    fn drop(&mut self) {
        self.end();
    }
}

impl Process for Account {
    type Done = ();
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        self.book.count(
            &self.book.stepping,
            &self.key,
            1,
            "processes stepping at once",
        );
        self.read(events, out);
        self.book.count(&self.book.stepping, &self.key, -1, "");
        Ok(())
    }
}

struct KNode {
    node: u32,
    scheduler: Scheduler,
    transport: Arc<NatsTransport>,
    sharding: Sharding,
    acct: Option<Sharded<Cmd>>,
}

impl KNode {
    fn acct(&self) -> &Sharded<Cmd> {
        self.acct.as_ref().expect("the kind is registered")
    }
    fn register(&mut self, book: &Arc<Book>) {
        let (book, node) = (Arc::clone(book), self.node);
        let factory = move |key: &str| Account::new(key, node, &book);
        let kind = self.sharding.register(&self.scheduler, KIND, factory);
        self.acct = Some(kind.unwrap());
    }
    /// Asks `key` a `Get` from outside; a refusal fails the test.
    fn get(&self, key: &str, from: u64) -> Reply<Seen> {
        let asked = self.acct().ask(&self.scheduler, key, Get { from });
        asked.unwrap_or_else(|r| panic!("{key}: refused ({})", r.reason))
    }
}

/// Node `node`, its mailboxes bounded to `capacity` (0: unbounded), the
/// kind registered if `register`.
fn knode(
    url: &str,
    node: u32,
    config: ShardingConfig,
    book: &Arc<Book>,
    capacity: usize,
    register: bool,
) -> KNode {
    let codec = codec().register::<Keyed<Cmd>>(KIND).register::<Get>("get");
    let codec = codec.register::<Seen>("seen").register::<Ignore>("ignore");
    let codec = codec
        .register::<Hold>("hold")
        .register::<Stranger>("stranger");
    let options = ConnectOptions::new().reconnect_delay_callback(|_| Duration::from_millis(50));
    let nats = NatsConfig::new(url)
        .codec(codec.register::<u64>("u64"))
        .options(options);
    let nats = nats
        .failure_detector(HEARTBEAT, DOWN_AFTER)
        .cluster_names(NAMES);
    let transport = Arc::new(NatsTransport::connect(nats).unwrap());
    let builder = Scheduler::builder()
        .workers(2)
        .node(node)
        .remote(transport.clone());
    let scheduler = match capacity {
        0 => builder.build(),
        n => builder.mailbox_capacity(n).build(),
    };
    scheduler.start();
    let sharding = Sharding::new(&scheduler, Arc::clone(&transport), config).unwrap();
    let mut k = KNode {
        node,
        scheduler,
        transport,
        sharding,
        acct: None,
    };
    if register {
        k.register(book);
    }
    k
}

/// Until the nodes hold every shard between them, agree on placement,
/// each holds the shards it places on itself (see `holds_its_own`) and
/// buffer nothing.
fn settled(nodes: &[&KNode], shards: u64) {
    wait_until("the shards to settle", WAIT, || {
        let held: u64 = nodes.iter().map(|n| n.sharding.stats().shards_held).sum();
        let agree = keys("probe", 100).iter().all(|k| {
            let first = nodes[0].acct().placed_on(k);
            nodes.iter().all(|n| n.acct().placed_on(k) == first)
        });
        let own = nodes
            .iter()
            .all(|n| holds_its_own(n.node, KIND, n.acct(), &n.sharding));
        held == shards && agree && own && nodes.iter().all(|n| n.sharding.stats().buffered == 0)
    });
}

fn keys(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

/// `n` keys placed on `node`, as `by` sees it.
fn keys_on(by: &KNode, node: u32, prefix: &str, n: usize) -> Vec<String> {
    let keys = keys(prefix, 10_000).into_iter();
    keys.filter(|k| by.acct().placed_on(k) == Some(node))
        .take(n)
        .collect()
}

/// Sender `from` sends each key its `n`th message and asks a `Get` right
/// behind it, then takes every reply (which must come, once).
fn round(node: &KNode, keys: &[String], from: u64, n: u64) -> Vec<Result<Seen, AskError>> {
    let mut replies = Vec::new();
    for key in keys {
        let sent = node.acct().send(&node.scheduler, key, Cmd::Dep { from, n });
        sent.unwrap_or_else(|r| panic!("{key}: message refused ({})", r.reason));
        replies.push(node.get(key, from));
    }
    let replies = keys.iter().zip(replies).map(|(key, mut reply)| {
        let answer = reply.wait_timeout(WAIT);
        assert_ne!(answer, Err(AskError::TimedOut), "{key}: no reply to {from}");
        assert_eq!(reply.wait_timeout(WAIT), Err(AskError::AlreadyTaken));
        assert!(answer.as_ref().map_or(true, |seen| &seen.key == key));
        answer
    });
    replies.collect()
}

/// One node, asked from its first moment (the shards not yet claimed: the
/// first questions wait in the buffer): each of four threads' questions
/// sees the message the thread sent just before. Then an untyped question,
/// a dropped one (`NoReply`), an untaken one (`UnexpectedQuestion`), a key
/// whose process cannot start (`Refused`, `NotStarted`, the question
/// back), and a process that ends on its own with a question unread
/// behind its end (`Unread`, the question back), after which the key
/// answers again.
#[test]
fn one_node_asks_see_earlier_messages_and_every_outcome_is_the_documented_one() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let book = Arc::new(Book::default());
    let one = knode(
        &server.url(),
        1,
        ShardingConfig::new().shards(8),
        &book,
        0,
        true,
    );
    let ks = keys("k", 20);
    std::thread::scope(|s| {
        for t in 0..4_u64 {
            let (one, ks) = (&one, &ks);
            s.spawn(move || {
                for n in 1..=3 {
                    for (key, got) in ks.iter().zip(round(one, ks, t, n)) {
                        let seen = got.unwrap_or_else(|e| panic!("{key}: {e}"));
                        assert_eq!(seen.last, n, "{key}: asked after {n} of {t}: {seen:?}");
                    }
                }
            });
        }
    });

    let (acct, node) = (one.acct(), &one.scheduler);
    let mut untyped = acct.ask(node, "k-0", Box::new(Ping(7)) as Payload).unwrap();
    let untyped = untyped.wait_timeout(WAIT).unwrap();
    assert_eq!(untyped.downcast_ref::<Pong>(), Some(&Pong(7)));
    let ignored = acct.ask(node, "k-1", Ignore(1)).unwrap().wait_timeout(WAIT);
    assert_eq!(ignored, Err(AskError::NoReply));
    match acct
        .ask(node, "k-2", Stranger(2))
        .unwrap()
        .wait_timeout(WAIT)
    {
        Err(AskError::UnexpectedQuestion { asked, expected }) => {
            assert!(asked.ends_with("Stranger"), "{asked}");
            assert!(
                expected.ends_with("Hold"),
                "not the last type tried: {expected}"
            );
        }
        other => panic!("an untaken question: {other:?}"),
    }
    match acct.ask(node, "bad-1", Get { from: 9 }) {
        Err(Refused {
            message,
            reason: RefusedReason::NotStarted(_),
        }) => {
            assert_eq!(message, Get { from: 9 })
        }
        other => panic!("a key whose process cannot start: {:?}", other.map(|_| ())),
    }

    let open = book.block(&one, "quit");
    acct.send(node, "quit", Cmd::Stop).unwrap();
    let mut reply = one.get("quit", 6);
    std::thread::sleep(Duration::from_millis(500));
    open.send(()).unwrap();
    assert_eq!(reply.wait_timeout(WAIT), Err(AskError::Unread));
    let back = reply.take_question().expect("the question handed back");
    assert_eq!(
        back.downcast::<Get>().ok().map(|q| *q),
        Some(Get { from: 6 })
    );
    wait_until("the key to answer again", WAIT, || {
        let again = one.get("quit", 6).wait_timeout(WAIT);
        assert!(matches!(again, Ok(_) | Err(AskError::Unread)), "{again:?}");
        again.is_ok()
    });
    assert_eq!(book.violations(), Vec::<String>::new());
    one.scheduler.shutdown(Duration::from_millis(500));
}

/// The guide: "`Refused`, with the question back, when it cannot go at
/// once: ... the key's mailbox is full". The key's process blocks in a
/// step; messages fill its mailbox of 32 until a send is refused
/// `MailboxFull`; a question then must be refused the same way.
#[test]
fn a_question_to_a_full_mailbox_is_not_refused_and_is_answered_once_read() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let book = Arc::new(Book::default());
    let one = knode(
        &server.url(),
        1,
        ShardingConfig::new().shards(4),
        &book,
        32,
        true,
    );
    settled(&[&one], 4);
    let (acct, node) = (one.acct(), &one.scheduler);
    let open = book.block(&one, "full");
    let mut n = 0;
    let refused = loop {
        n += 1;
        assert!(n < 1_000, "the mailbox of 32 never filled");
        if let Err(refused) = acct.send(node, "full", Cmd::Dep { from: 5, n }) {
            break refused;
        }
    };
    assert_eq!(
        (refused.message, refused.reason),
        (Cmd::Dep { from: 5, n }, RefusedReason::MailboxFull)
    );
    // The guide: a question is not held to a mailbox's capacity (its
    // asker waits for it), so it goes, and is answered once read.
    let asked = acct.ask(node, "full", Get { from: 5 });
    open.send(()).unwrap();
    let mut reply = asked.expect("a question is never refused MailboxFull");
    let seen = reply.wait_timeout(WAIT).expect("answered once read");
    assert_eq!(seen.last, n - 1, "it saw every deposit the mailbox took");
    one.scheduler.shutdown(Duration::from_millis(500));
}

/// What the threads of the join-and-leave test share: the phase (0
/// placing, 1 joining, 2 settled, 3 leaving, 4 done), the rounds done, and
/// the replies without an answer during the leave.
#[derive(Default)]
struct Phases {
    phase: AtomicU64,
    rounds: AtomicU64,
    errors: Mutex<HashMap<String, u64>>,
}

impl Phases {
    /// Sender `from` on `node` asks `ks` round after round until the phase
    /// is `stop`: every reply an answer (which, settled, sees the
    /// sender's message), or during the leave `Unread` or `NodeDown`.
    fn ask(&self, node: &KNode, from: u64, ks: &[String], stop: u64) {
        for n in 1.. {
            let before = self.phase.load(Ordering::SeqCst);
            if before >= stop {
                return;
            }
            let got = round(node, ks, from, n);
            let now = (before, self.phase.load(Ordering::SeqCst));
            for (key, got) in ks.iter().zip(got) {
                match (now, got) {
                    ((2, 2), Ok(seen)) => assert_eq!(seen.last, n, "{key}: {seen:?}"),
                    (_, Ok(_)) => {}
                    ((_, 3..), Err(e @ (AskError::Unread | AskError::NodeDown))) => {
                        *self
                            .errors
                            .lock()
                            .unwrap()
                            .entry(format!("{e:?}"))
                            .or_default() += 1
                    }
                    (_, Err(e)) => panic!("{key} from {from} in phases {now:?}: {e}"),
                }
            }
            self.rounds.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Waits for `r` more rounds, then moves to `next`.
    fn after(&self, r: u64, next: u64) {
        let at = self.rounds.load(Ordering::SeqCst);
        wait_until("more rounds", WAIT, || {
            self.rounds.load(Ordering::SeqCst) >= at + r
        });
        self.phase.store(next, Ordering::SeqCst);
    }
}

/// Threads on nodes 1 and 2 ask the same 30 keys round after round (a
/// message, then a question) while the two place their shards, while node
/// 3 joins (a thread of its own asking from its start), settled (each
/// question then sees its message), and while node 3 leaves. Every ask
/// gets one reply: the answer, except during the leave, where the guide
/// allows `Unread` and `NodeDown`; no key ever has two live processes, and
/// at the end each key answers from its shard's node.
#[test]
fn asks_from_three_nodes_during_placement_a_join_and_a_leave_get_one_reply_each() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let book = Arc::new(Book::default());
    let config = ShardingConfig::new().shards(16);
    let one = knode(&server.url(), 1, config.clone(), &book, 0, true);
    let two = knode(&server.url(), 2, config.clone(), &book, 0, true);
    let ks = keys("shared", 30);
    let phases = Phases::default();
    std::thread::scope(|s| {
        for (node, t) in [(&one, 10), (&one, 11), (&two, 20), (&two, 21)] {
            let (ks, phases) = (&ks, &phases);
            s.spawn(move || phases.ask(node, t, ks, 4));
        }
        settled(&[&one, &two], 16);
        phases.after(4, 1);
        let three = Arc::new(knode(&server.url(), 3, config.clone(), &book, 0, true));
        let asking = {
            let (three, ks, phases) = (Arc::clone(&three), &ks, &phases);
            s.spawn(move || phases.ask(&three, 30, ks, 3))
        };
        settled(&[&one, &two, &three], 16);
        assert!(
            three.sharding.stats().shards_held > 0,
            "node 3 took no shard"
        );
        phases.after(4, 2);
        phases.after(8, 3);
        asking.join().unwrap();
        three.transport.close();
        three.scheduler.shutdown(Duration::from_secs(2));
        drop(three);
        settled(&[&one, &two], 16);
        phases.after(4, 4);
    });
    let rounds = phases.rounds.load(Ordering::SeqCst);
    let errors = phases.errors.lock().unwrap().clone();
    eprintln!("{rounds} rounds; replies without an answer during the leave: {errors:?}");
    assert_eq!(book.violations(), Vec::<String>::new());
    for key in &ks {
        let seen = one.get(key, 1).wait_timeout(WAIT).unwrap();
        assert_eq!(
            Some(seen.node),
            one.acct().placed_on(key),
            "{key} off its node"
        );
    }
}

/// What a [`StepAsker`] asks of which key, with which timeout; a `Get`
/// may follow a message (`Cmd::Dep { from: 1, n: 7 }`) from the step.
#[derive(Clone)]
enum StepAsk {
    Get(String, Duration, bool),
    Hold(String, Duration),
    Ignore(String, Duration),
    Stranger(String, Duration),
}

/// Every `Event::Reply` a [`StepAsker`] got, by the index of its ask
/// (`None`: an id it does not hold), and the refused asks: index, reason,
/// whether the question came back as asked.
type Log = Arc<Mutex<Vec<(Option<usize>, Result<String, AskError>)>>>;
type Refusals = Arc<Mutex<Vec<(usize, RefusedReason, bool)>>>;

/// Asks its questions at its start with `ask_from_step`; logs every reply
/// (its first `Get` read through `ReplyId::answer`).
struct StepAsker {
    acct: Sharded<Cmd>,
    asks: Vec<StepAsk>,
    ids: Vec<(usize, AskId)>,
    held: Option<ReplyId<Seen>>,
    log: Log,
    refusals: Refusals,
}

fn ask_one<Q: Question + PartialEq + Copy>(
    acct: &Sharded<Cmd>,
    out: &mut Output<'_>,
    key: &str,
    q: Q,
    d: Duration,
) -> Result<ReplyId<Q::Answer>, (RefusedReason, bool)> {
    acct.ask_from_step(out, key, q, d)
        .map_err(|r| (r.reason, r.message == q))
}

impl Process for StepAsker {
    type Done = ();
    fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        for (i, ask) in self.asks.clone().into_iter().enumerate() {
            let acct = &self.acct;
            let asked = match ask {
                StepAsk::Get(key, d, after) => {
                    if after {
                        let dep = Cmd::Dep { from: 1, n: 7 };
                        acct.send(out.context(), &key, dep)
                            .map_err(|r| r.reason.to_string())?;
                    }
                    let id = ask_one(acct, out, &key, Get { from: 1 }, d);
                    if let Ok(id) = id {
                        self.held.get_or_insert(id);
                    }
                    id.map(|id| id.id())
                }
                StepAsk::Hold(key, d) => ask_one(acct, out, &key, Hold(3), d).map(|id| id.id()),
                StepAsk::Ignore(key, d) => ask_one(acct, out, &key, Ignore(4), d).map(|id| id.id()),
                StepAsk::Stranger(key, d) => {
                    ask_one(acct, out, &key, Stranger(5), d).map(|id| id.id())
                }
            };
            match asked {
                Ok(id) => self.ids.push((i, id)),
                Err((reason, same)) => self.refusals.lock().unwrap().push((i, reason, same)),
            }
        }
        Ok(())
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        let index =
            |ids: &[(usize, AskId)], id| ids.iter().find(|(_, mine)| *mine == id).map(|(i, _)| *i);
        for mut event in events {
            if let Some(held) = self.held {
                match held.answer(event) {
                    Replied::Other(other) => event = other,
                    replied => {
                        let got = replied
                            .answered()
                            .expect("its reply")
                            .map(|s| format!("{s:?}"));
                        self.log
                            .lock()
                            .unwrap()
                            .push((index(&self.ids, held.id()), got));
                        continue;
                    }
                }
            }
            match event {
                Event::Reply { id, result, .. } => {
                    let got = result.map(|a| format!("{:?}", a.downcast_ref::<u64>()));
                    self.log.lock().unwrap().push((index(&self.ids, id), got));
                }
                Event::Cancel => out.finish(()),
                _ => {}
            }
        }
        Ok(())
    }
}

fn step_asker(node: &KNode, asks: Vec<StepAsk>) -> (Log, Refusals) {
    let (log, refusals) = (Log::default(), Refusals::default());
    let (ids, held) = (Vec::new(), None);
    let (log2, refusals2) = (Arc::clone(&log), Arc::clone(&refusals));
    let acct = node.acct().clone();
    let asker = StepAsker {
        acct,
        asks,
        ids,
        held,
        log: log2,
        refusals: refusals2,
    };
    node.scheduler.spawn(asker).unwrap();
    (log, refusals)
}

/// Waits for `n` replies in `log`, then `linger` more, and returns them
/// sorted by ask.
fn replies(
    log: &Log,
    n: usize,
    linger: Duration,
) -> Vec<(Option<usize>, Result<String, AskError>)> {
    wait_until("the step's replies", WAIT, || {
        log.lock().unwrap().len() >= n
    });
    std::thread::sleep(linger);
    let mut log = log.lock().unwrap().clone();
    log.sort_by_key(|(i, _)| *i);
    log
}

/// A step on node 1 asks keys on node 2: a `Get` behind the step's own
/// message (answered there, the message seen); a `Hold` with a 300 ms
/// timeout (`TimedOut`, and nothing when it is answered later); a dropped
/// one (`NoReply`); an untaken one (`UnexpectedQuestion`, both names "(on
/// another node)"): exactly one reply each. From outside: an untyped
/// question, and a process that ends with a question unread (`Unread`,
/// the question handed back across nodes).
#[test]
fn a_step_asks_keys_on_another_node_and_gets_exactly_one_reply_each() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let book = Arc::new(Book::default());
    let config = ShardingConfig::new().shards(8);
    let one = knode(&server.url(), 1, config.clone(), &book, 0, true);
    let two = knode(&server.url(), 2, config, &book, 0, true);
    settled(&[&one, &two], 8);
    let far = keys_on(&one, 2, "far", 5);
    let asks = vec![
        StepAsk::Get(far[0].clone(), WAIT, true),
        StepAsk::Hold(far[1].clone(), Duration::from_millis(300)),
        StepAsk::Ignore(far[2].clone(), WAIT),
        StepAsk::Stranger(far[3].clone(), WAIT),
    ];
    let (log, refusals) = step_asker(&one, asks);
    wait_until("the Hold to time out", WAIT, || {
        log.lock().unwrap().iter().any(|(i, _)| *i == Some(1))
    });
    one.acct()
        .send(&one.scheduler, &far[1], Cmd::Release)
        .unwrap();
    let log = replies(&log, 4, Duration::from_secs(1));
    assert!(refusals.lock().unwrap().is_empty());
    let indices: Vec<_> = log.iter().map(|(i, _)| *i).collect();
    assert_eq!(
        indices,
        [Some(0), Some(1), Some(2), Some(3)],
        "one reply per ask: {log:?}"
    );
    let answered = log[0].1.as_ref().expect("the Get answered");
    assert!(answered.contains("node: 2, last: 7"), "{answered}");
    assert_eq!(log[1].1, Err(AskError::TimedOut));
    assert_eq!(log[2].1, Err(AskError::NoReply));
    let far_names = "(on another node)";
    let stranger = AskError::UnexpectedQuestion {
        asked: far_names,
        expected: far_names,
    };
    assert_eq!(log[3].1, Err(stranger));

    let (acct, node) = (one.acct(), &one.scheduler);
    let untyped = acct.ask(node, &far[0], Box::new(Ping(5)) as Payload);
    let untyped = untyped
        .map_err(|r| r.reason)
        .unwrap()
        .wait_timeout(WAIT)
        .unwrap();
    assert_eq!(untyped.downcast_ref::<Pong>(), Some(&Pong(5)));

    let open = book.block(&one, &far[4]);
    acct.send(node, &far[4], Cmd::Stop).unwrap();
    let mut reply = one.get(&far[4], 8);
    // The question crosses to node 2 and must be in the blocked process's
    // mailbox before the gate opens (else the key's next process answers
    // it). A later question from here to another key of node 2's host is
    // answered only once that host has passed the earlier one on: a
    // barrier a loaded machine cannot outrun, where the sleep alone could.
    let barrier = one.get(&far[0], 9).wait_timeout(WAIT);
    assert!(barrier.is_ok(), "{barrier:?}");
    std::thread::sleep(Duration::from_secs(1));
    open.send(()).unwrap();
    assert_eq!(reply.wait_timeout(WAIT), Err(AskError::Unread));
    let back = reply
        .take_question()
        .expect("the question handed back across nodes");
    assert_eq!(
        back.downcast::<Get>().ok().map(|q| *q),
        Some(Get { from: 8 })
    );
    assert_eq!(book.violations(), Vec::<String>::new());
}

/// Node 2 has not registered the kind: what is sent to its keys waits in
/// node 1's buffer (`max_buffered` 6). A step's question waiting there
/// times out once (and gets nothing more when it is answered later); the
/// seventh waiting item is refused `BufferFull` with the question back,
/// from outside and from a step (which then gets no reply for it). Once
/// node 2 registers, the waiting
/// questions are answered there, each seeing the message sent before it
/// through the buffer; one no codec carries is refused at once or
/// answered `NoReply`.
#[test]
fn a_full_buffer_refuses_a_question_with_it_and_waiting_ones_are_answered_later() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let book = Arc::new(Book::default());
    let config = ShardingConfig::new().shards(8).max_buffered(6);
    let one = knode(&server.url(), 1, config.clone(), &book, 0, true);
    let mut two = knode(&server.url(), 2, config, &book, 0, false);
    // The near key is chosen once node 1 sees node 2: chosen before, while
    // node 1 placed every key on itself, it could move to node 2.
    wait_until("node 1 to see node 2", WAIT, || {
        keys("p", 50)
            .iter()
            .any(|k| one.acct().placed_on(k) == Some(2))
    });
    let near = keys("near", 1000)
        .into_iter()
        .find(|k| one.acct().placed_on(k) == Some(1));
    let near = near.expect("a key placed on node 1");
    wait_until("node 1 to hold the near key's shard", WAIT, || {
        let shard = one.acct().shard_of(&near);
        let held = one
            .sharding
            .shard_stats()
            .iter()
            .any(|s| s.shard == shard && s.held);
        held && one.acct().placed_on(&near) == Some(1)
    });
    let far = keys_on(&one, 2, "wait", 7);
    // Node 1 held every shard before it saw node 2, and keeps those now
    // placed on node 2 until its host's next tick hands them off: a
    // question to a far key before then would be answered on node 1, not
    // wait in its buffer.
    wait_until("node 1 to give up the far keys' shards", WAIT, || {
        let stats = one.sharding.shard_stats();
        far.iter().all(|k| {
            let shard = one.acct().shard_of(k);
            stats.iter().all(|s| s.shard != shard || !s.held)
        })
    });
    let (acct, node) = (one.acct(), &one.scheduler);
    let (timed, _) = step_asker(
        &one,
        vec![StepAsk::Get(
            far[6].clone(),
            Duration::from_millis(300),
            false,
        )],
    );
    wait_until("the step's question to time out", WAIT, || {
        !timed.lock().unwrap().is_empty()
    });
    let before = one.sharding.stats().refused;
    let secret = acct.ask(node, &far[0], Secret(1));
    let mut waiting = Vec::new();
    for key in &far[1..5] {
        if one.sharding.stats().buffered <= 4 {
            acct.send(node, key, Cmd::Dep { from: 2, n: 1 }).unwrap();
            waiting.push((key.clone(), one.get(key, 2)));
        }
    }
    assert_eq!(one.sharding.stats().buffered, 6, "six wait");
    match acct.ask(node, &far[5], Get { from: 3 }) {
        Err(Refused { message, reason }) => {
            assert_eq!(
                (message, reason),
                (Get { from: 3 }, RefusedReason::BufferFull)
            )
        }
        Ok(_) => panic!("a question went past max_buffered 6"),
    }
    let refused = acct
        .send(node, &far[5], Cmd::Dep { from: 3, n: 1 })
        .unwrap_err();
    assert_eq!(
        (refused.message, refused.reason),
        (Cmd::Dep { from: 3, n: 1 }, RefusedReason::BufferFull)
    );
    let asks = vec![
        StepAsk::Get(near.clone(), WAIT, true),
        StepAsk::Get(far[5].clone(), WAIT, false),
    ];
    let (log, refusals) = step_asker(&one, asks);
    let log = replies(&log, 1, Duration::from_millis(500));
    assert_eq!(
        refusals.lock().unwrap().clone(),
        [(1, RefusedReason::BufferFull, true)]
    );
    // The refused ask gets no reply at all: only the other one's answer.
    assert_eq!(log.len(), 1, "the refused ask got a reply: {log:?}");
    assert!(
        matches!(&log[0], (Some(0), Ok(seen)) if seen.contains("node: 1, last: 7")),
        "{log:?}"
    );

    two.register(&book);
    for (key, mut reply) in waiting {
        let seen = reply
            .wait_timeout(WAIT)
            .unwrap_or_else(|e| panic!("{key}: {e}"));
        assert_eq!((seen.node, seen.last), (2, 1), "{key}: {seen:?}");
    }
    match secret {
        Err(Refused { message, reason }) => {
            eprintln!("the secret was refused at once");
            assert_eq!((message, reason), (Secret(1), RefusedReason::Unencodable))
        }
        Ok(mut reply) => {
            assert_eq!(reply.wait_timeout(WAIT), Err(AskError::NoReply));
            assert!(
                one.sharding.stats().refused > before,
                "the late refusal is counted"
            );
        }
    }
    wait_until("node 1's buffer to empty", WAIT, || {
        one.sharding.stats().buffered == 0
    });
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        timed.lock().unwrap().clone(),
        [(Some(0), Err(AskError::TimedOut))]
    );
    assert_eq!(book.violations(), Vec::<String>::new());
}

/// Six keys each get a message and a question right behind it at gaps
/// swept across the passivation moment (`passivate_after` 300 ms, checked
/// every 100 ms). Each ask gets exactly one reply: the answer (from the
/// process that read the message, or from the key's next one, which has
/// read nothing of it), or `Unread` with the question back; never none,
/// never `NoReply`; no key has two live processes.
#[test]
fn asks_at_the_passivation_moment_get_one_reply_each() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let book = Arc::new(Book::default());
    let config = ShardingConfig::new()
        .shards(4)
        .passivate_after(Duration::from_millis(300));
    let one = knode(&server.url(), 1, config, &book, 0, true);
    settled(&[&one], 4);
    const GAPS: [u64; 8] = [270, 300, 320, 340, 360, 380, 400, 430];
    let outcomes = Mutex::new(HashMap::<String, u64>::new());
    std::thread::scope(|s| {
        for k in 0..6_u64 {
            let (one, outcomes) = (&one, &outcomes);
            s.spawn(move || {
                let key = format!("idle-{k}");
                for (n, gap) in (1..).zip(GAPS.iter().cycle().skip(k as usize).take(16)) {
                    let mut got = round(one, std::slice::from_ref(&key), k, n);
                    let outcome = match got.pop().unwrap() {
                        Ok(seen) if seen.last == n => "answered, the message seen",
                        Ok(seen) if seen.last == 0 => "answered by the next process",
                        Err(AskError::Unread) => "unread",
                        other => panic!("{key}, ask {n}: {other:?}"),
                    };
                    *outcomes.lock().unwrap().entry(outcome.into()).or_default() += 1;
                    std::thread::sleep(Duration::from_millis(*gap));
                }
            });
        }
    });
    let stats = one.sharding.stats();
    eprintln!("{:?}; {stats:?}", outcomes.lock().unwrap());
    assert!(
        stats.passivated > 6,
        "the sweep passivated only {}",
        stats.passivated
    );
    assert_eq!(book.violations(), Vec::<String>::new());
    one.scheduler.shutdown(Duration::from_millis(500));
}

/// `ReplyTo::forward` to a process on another node ("`to` may be on
/// another node"): the original asker gets the answer; a right held there
/// when that node leaves answers `NodeDown`; once the node has left, a
/// forward cannot go and hands the right back unspent (`Unreachable`, the
/// question in its package), and dropping it answers `NoReply`.
#[test]
fn a_right_forwarded_to_another_node_is_answered_there_or_ends_with_its_node() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let (one, _one_transport) = node(&server, 1);
    let (two, two_transport) = node(&server, 2);
    let srv = two.spawn(Server { held: Vec::new() }).unwrap().pid();
    wait_until("node 2 to answer node 1", WAIT, || {
        let asked = one.ask(srv, Ping(1));
        asked.is_ok_and(|mut r| r.wait_timeout(Duration::from_secs(1)) == Ok(Pong(1)))
    });
    let cx = one.context();
    let (mut reply, right) = cx.reply_pair::<Ping>();
    right.forward(cx, srv, Ping(5)).map_err(|(e, _)| e).unwrap();
    assert_eq!(reply.wait_timeout(WAIT), Ok(Pong(5)));

    let (mut held, right) = cx.reply_pair::<Ping>();
    right
        .forward(cx, srv, Ping(u64::MAX))
        .map_err(|(e, _)| e)
        .unwrap();
    assert_eq!(
        held.wait_timeout(Duration::from_millis(300)),
        Err(AskError::TimedOut)
    );
    two_transport.close();
    assert_eq!(held.wait_timeout(WAIT), Err(AskError::NodeDown));

    let (mut reply, right) = cx.reply_pair::<Ping>();
    let forwarded = right.forward(cx, srv, Ping(6));
    let (error, right) = forwarded.expect_err("a forward to a node that left went");
    assert_eq!(error.kind(), sched::message::SendErrorKind::Unreachable);
    assert_eq!(error.into_package().downcast::<Ping>().ok(), Some(Ping(6)));
    assert_eq!(
        reply.wait_timeout(Duration::from_millis(200)),
        Err(AskError::TimedOut)
    );
    drop(right);
    assert_eq!(reply.wait_timeout(WAIT), Err(AskError::NoReply));
    two.shutdown(Duration::from_millis(500));
    one.shutdown(Duration::from_millis(500));
}
