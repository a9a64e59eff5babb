//! The threads' route caches of `Sharded::send`, tested from their
//! documentation only: the guide's "Routes cached per thread", "Sending
//! often to one key: `Entity`" and "Passivation", the keyed guarantees,
//! the rustdoc of `Sharded::send` and `Entity`, and the changelog's
//! "`Sharded::send` keeps each thread's routes".
//!
//! What is promised: `Sharded::send` keeps, per thread, the route of each
//! key whose process runs on this node (up to 4 096 keys a thread, the
//! cache started afresh past that) and sends by PID while it holds, with
//! the guarantees of the locked path: per sender and key, messages arrive
//! in the order sent; a message that reaches a key's process after it was
//! stopped is handed back to the key's next process, in order; nothing is
//! lost or read twice; mixing `Entity::send` and `Sharded::send` from one
//! thread to one key keeps their order.
//!
//! How it is attacked (one node, two workers, a real `nats-server` on
//! loopback): senders in bursts with pauses, a 1 ms `passivate_after`, so
//! that keys are passivated over and over while routes to them are
//! cached; one and four threads sending as fast as they can to thousands
//! of keys, so that the passivation checks stop keys among the sends;
//! processes cancelled from outside, and processes that end on their own;
//! several threads on the same keys; more keys than a thread keeps, then
//! the first ones again, before and after they were passivated (keys
//! short, exactly 24 bytes, and longer); steps that send by key while they
//! move between the workers; `Entity::send` and `Sharded::send` mixed; two
//! kinds with the same keys and message type; two clusters in one process
//! whose nodes have the same number; a node stopped and started again in
//! one process. Every keyed process reports what it reads, and each test
//! checks that every number sent was read exactly once (for processes that
//! end on their own: at most once, the rest counted as dead letters), in
//! the order sent per sender and key, across the key's processes, and
//! that no key's processes' reads interleave.

mod support;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use relay_nats::{
    Keyed, NatsTransport, Refused, RefusedReason, Sharded, Sharding, ShardingConfig, ShardingStats,
};
use sched::engine::AsContext;
use sched::prelude::*;
use serde::{Deserialize, Serialize};
use support::{codec, node_configured, NatsServer};

/// The longest any one wait of these tests lasts. Every wait ends as soon
/// as what it waits for happens; 8 s was short for a node's first claims
/// (a name round trip each, after the host's first look at 500 ms) and
/// for thousands of reads through passivations on a loaded 2-core
/// machine, where the other test files allow 30 to 60 s.
const WAIT: Duration = Duration::from_secs(60);
/// The kind every test sends to.
const KIND: &str = "rc";
/// A second kind, with the same message type and the same keys.
const OTHER: &str = "rc2";
/// A third kind, whose processes end on their own now and then.
const QUIT: &str = "rc3";
/// A process of `QUIT` finishes after a step that read a multiple of this.
const QUIT_EVERY: u64 = 37;
/// How long the senders of a test keep sending.
const RUN: Duration = Duration::from_millis(2_500);

/// Number `n` of sender `from`.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Msg {
    from: u64,
    n: u64,
}

/// A small deterministic generator (xorshift64*), one per sender.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// A pause between bursts: none at all often; a trickle, around the
    /// tests' 1 ms `passivate_after`, so that a check may stop the key
    /// just as the next message goes by its cached route; a moment; and
    /// now and then long enough for the 100 ms passivation check to find
    /// the key idle for sure.
    fn pause(&mut self) -> Duration {
        Duration::from_micros(match self.below(20) {
            0..=7 => 0,
            8..=13 => 500 + self.below(2_500),
            14..=16 => 5_000 + self.below(15_000),
            _ => 100_000 + self.below(60_000),
        })
    }

    /// A burst's size: one message half the time, else 2-40.
    fn burst(&mut self) -> u64 {
        if self.below(2) == 0 {
            1
        } else {
            2 + self.below(39)
        }
    }
}

/// Keeps a sender at no more than `per_sec` messages a second (however
/// fast the machine), so that keys picked at random among a few thousand
/// each get a message about as often as the passivation check runs.
struct Pace {
    start: Instant,
    per_sec: f64,
    sent: u64,
}

impl Pace {
    fn new(per_sec: u32) -> Pace {
        Pace {
            start: Instant::now(),
            per_sec: f64::from(per_sec),
            sent: 0,
        }
    }

    /// Counts one message, and sleeps while ahead of the pace by more
    /// than a millisecond.
    fn tick(&mut self) {
        self.sent += 1;
        let due = Duration::from_secs_f64(self.sent as f64 / self.per_sec);
        let elapsed = self.start.elapsed();
        if due > elapsed + Duration::from_millis(1) {
            std::thread::sleep(due - elapsed);
        }
    }
}

/// One message a keyed process read.
#[derive(Debug, Clone)]
struct Read {
    /// `cluster/kind` of the process.
    place: String,
    key: String,
    /// Which process of the key (numbered by the factory, in the order
    /// they were made).
    life: u64,
    msg: Msg,
}

/// What every keyed process reports.
#[derive(Default)]
struct Book {
    reads: Mutex<Vec<Read>>,
    /// Processes made by the factories.
    lives: AtomicU64,
    /// Messages of another type than `Msg`.
    foreign: AtomicU64,
    /// `Event::Cancel`s read.
    cancels: AtomicU64,
    /// Processes of `QUIT` that finished on their own.
    quits: AtomicU64,
    /// The PID of each key's latest process, by place and key.
    pids: Mutex<HashMap<(String, String), Pid>>,
}

impl Book {
    fn read_count(&self) -> usize {
        self.reads.lock().unwrap().len()
    }
}

/// A key's process: reports each message it reads, and finishes in the
/// step that brings its cancel, after the rest of that step's events.
struct Reader {
    place: String,
    key: String,
    life: u64,
    book: Arc<Book>,
    /// Finish, uncancelled, after a step that read a multiple of this.
    quit_every: Option<u64>,
}

impl Reader {
    fn new(place: String, key: &str, book: &Arc<Book>, quit_every: Option<u64>) -> Reader {
        Reader {
            place,
            key: key.to_string(),
            life: book.lives.fetch_add(1, Ordering::SeqCst) + 1,
            book: Arc::clone(book),
            quit_every,
        }
    }
}

impl Process for Reader {
    type Done = ();

    fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        self.book
            .pids
            .lock()
            .unwrap()
            .insert((self.place.clone(), self.key.clone()), out.pid());
        Ok(())
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        let mut cancelled = false;
        let mut read = Vec::new();
        for event in events {
            match event {
                Event::Message(m) => match m.payload::<Msg>() {
                    Some(msg) => read.push(*msg),
                    None => {
                        self.book.foreign.fetch_add(1, Ordering::SeqCst);
                    }
                },
                Event::Cancel => cancelled = true,
                _ => {}
            }
        }
        let quit = self
            .quit_every
            .is_some_and(|every| read.iter().any(|msg| msg.n % every == 0));
        if !read.is_empty() {
            let mut reads = self.book.reads.lock().unwrap();
            for msg in read {
                reads.push(Read {
                    place: self.place.clone(),
                    key: self.key.clone(),
                    life: self.life,
                    msg,
                });
            }
        }
        if cancelled {
            self.book.cancels.fetch_add(1, Ordering::SeqCst);
            out.finish(());
        } else if quit {
            self.book.quits.fetch_add(1, Ordering::SeqCst);
            out.finish(());
        }
        Ok(())
    }
}

/// Waits for nothing but its cancel (to shift the PIDs of a node).
struct Idler;

impl Process for Idler {
    type Done = ();

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        if events.any(|event| matches!(event, Event::Cancel)) {
            out.finish(());
        }
        Ok(())
    }
}

/// One node with the three kinds registered.
struct Node {
    scheduler: Scheduler,
    // Kept so the transport lives as long as the node.
    _transport: Arc<NatsTransport>,
    sharding: Sharding,
    kind: Sharded<Msg>,
    other: Sharded<Msg>,
    quit: Sharded<Msg>,
}

impl Node {
    /// Node 1 of cluster `cluster` ("" for the tests' default subjects
    /// and names), its kinds in `shards` shards each, reporting to
    /// `book`; returns once it holds every shard.
    fn start(
        url: &str,
        cluster: &str,
        shards: u32,
        passivate_after: Duration,
        book: &Arc<Book>,
    ) -> Node {
        let (scheduler, transport) = node_configured(url, 1, |config| {
            let config = config.codec(codec().register::<Keyed<Msg>>(KIND));
            if cluster.is_empty() {
                config
            } else {
                config
                    .subject_prefix(format!("p{cluster}"))
                    .cluster_names(format!("names-{cluster}"))
            }
        });
        let config = ShardingConfig::new()
            .shards(shards)
            .passivate_after(passivate_after);
        let sharding = Sharding::new(&scheduler, Arc::clone(&transport), config).unwrap();
        let register = |kind: &'static str, quit_every: Option<u64>| {
            let book = Arc::clone(book);
            let place = format!("{cluster}/{kind}");
            sharding
                .register(&scheduler, kind, move |key: &str| {
                    Reader::new(place.clone(), key, &book, quit_every)
                })
                .unwrap()
        };
        let kind = register(KIND, None);
        let other = register(OTHER, None);
        let quit = register(QUIT, Some(QUIT_EVERY));
        let all = 3 * u64::from(shards);
        assert!(
            wait_for(WAIT, || sharding.stats().shards_held == all),
            "node 1 of cluster {cluster:?} did not hold its {all} shards in {WAIT:?}: {:?}",
            sharding.stats()
        );
        Node {
            scheduler,
            _transport: transport,
            sharding,
            kind,
            other,
            quit,
        }
    }

    fn stats(&self) -> ShardingStats {
        self.sharding.stats()
    }

    fn dead_letters(&self) -> u64 {
        self.scheduler.stats().dead_letters
    }
}

/// What was sent, in the order sent: by place (`cluster/kind`), key and
/// sender, the numbers.
type Sent = BTreeMap<(String, String, u64), Vec<u64>>;

fn place(cluster: &str, kind: &str) -> String {
    format!("{cluster}/{kind}")
}

fn merge(into: &mut Sent, from: Sent) {
    for (k, mut v) in from {
        into.entry(k).or_default().append(&mut v);
    }
}

fn total(sent: &Sent) -> usize {
    sent.values().map(Vec::len).sum()
}

fn wait_for(timeout: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if done() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Sends `msg` to `key`, again a moment later while the buffer or the
/// mailbox is full (at most `WAIT`); any other refusal fails the test.
/// Returns how often it was refused.
fn send_retrying(cx: &impl AsContext, to: &Sharded<Msg>, key: &str, msg: Msg) -> u64 {
    let deadline = Instant::now() + WAIT;
    let mut msg = msg;
    let mut refused = 0;
    loop {
        match to.send(cx, key, msg) {
            Ok(()) => return refused,
            Err(Refused {
                message,
                reason: RefusedReason::BufferFull | RefusedReason::MailboxFull,
            }) if Instant::now() < deadline => {
                refused += 1;
                msg = message;
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(Refused { message, reason }) => {
                panic!("{}/{key}: {message:?} refused: {reason}", to.kind())
            }
        }
    }
}

/// Waits until the book holds as many reads as were sent (or `WAIT`
/// passed), and a moment more for any read twice; then lists every way
/// the reads break the promise: a number never read, one read twice, one
/// read out of the order sent (per place, key and sender), one never
/// sent, a key whose processes' reads interleave.
/// `unread` is how many messages are counted elsewhere (dead letters),
/// for the wait; the numbers never read come back apart, with their count.
fn problems(book: &Book, sent: &Sent, unread: &dyn Fn() -> usize) -> Findings {
    let want = total(sent);
    let arrived = wait_for(WAIT, || book.read_count() + unread() >= want);
    std::thread::sleep(Duration::from_millis(200));
    let reads = book.reads.lock().unwrap().clone();
    let mut found = Vec::new();
    let mut never_read = Vec::new();
    let mut never_read_count = 0;
    if !arrived {
        found.push(format!(
            "only {} of {want} messages read, {} counted unread, after {WAIT:?}",
            reads.len(),
            unread()
        ));
    }
    let foreign = book.foreign.load(Ordering::SeqCst);
    if foreign > 0 {
        found.push(format!("{foreign} messages of another type read"));
    }
    let mut got: BTreeMap<(String, String, u64), Vec<(u64, u64)>> = BTreeMap::new();
    let mut lives: BTreeMap<(String, String), Vec<u64>> = BTreeMap::new();
    for read in &reads {
        got.entry((read.place.clone(), read.key.clone(), read.msg.from))
            .or_default()
            .push((read.msg.n, read.life));
        lives
            .entry((read.place.clone(), read.key.clone()))
            .or_default()
            .push(read.life);
    }
    for (who, numbers) in sent {
        let read = got.remove(who).unwrap_or_default();
        let at: HashMap<u64, usize> = numbers.iter().enumerate().map(|(i, n)| (*n, i)).collect();
        let mut seen: HashMap<u64, usize> = HashMap::new();
        let mut strangers = Vec::new();
        for (n, _) in &read {
            *seen.entry(*n).or_default() += 1;
            if !at.contains_key(n) {
                strangers.push(*n);
            }
        }
        let missing: Vec<u64> = numbers
            .iter()
            .filter(|n| !seen.contains_key(n))
            .copied()
            .collect();
        let doubled: Vec<u64> = seen
            .iter()
            .filter(|(_, c)| **c > 1)
            .map(|(n, _)| *n)
            .collect();
        let mut inversions = Vec::new();
        for pair in read.windows(2) {
            let (a, b) = (at.get(&pair[0].0), at.get(&pair[1].0));
            if let (Some(a), Some(b)) = (a, b) {
                if b < a {
                    inversions.push(format!(
                        "{} (process {}) before {} (process {})",
                        pair[0].0, pair[0].1, pair[1].0, pair[1].1
                    ));
                }
            }
        }
        never_read_count += missing.len();
        if !missing.is_empty() {
            let runs = runs_of(&missing);
            never_read.push(format!(
                "{who:?}: {} of {} never read, in {} runs, first {:?}",
                missing.len(),
                numbers.len(),
                runs.len(),
                &runs[..runs.len().min(12)]
            ));
        }
        if !doubled.is_empty() {
            found.push(format!(
                "{who:?}: {} read twice, first {:?}",
                doubled.len(),
                &doubled[..doubled.len().min(10)]
            ));
        }
        if !inversions.is_empty() {
            found.push(format!(
                "{who:?}: {} out of order, first {:?}",
                inversions.len(),
                &inversions[..inversions.len().min(5)]
            ));
        }
        if !strangers.is_empty() {
            found.push(format!(
                "{who:?}: {} never sent read, first {:?}",
                strangers.len(),
                &strangers[..strangers.len().min(10)]
            ));
        }
    }
    for (who, read) in got {
        found.push(format!(
            "{who:?}: {} read but nothing sent there (first {:?})",
            read.len(),
            &read[..read.len().min(10)]
        ));
    }
    for (who, lives) in lives {
        let back = lives.windows(2).filter(|pair| pair[1] < pair[0]).count();
        if back > 0 {
            found.push(format!(
                "{who:?}: its processes' reads interleave ({back} times a read by an earlier process after a later one's)"
            ));
        }
    }
    Findings {
        found,
        never_read,
        never_read_count,
    }
}

/// `numbers` (increasing) as runs of consecutive ones: `"7"`, `"9-12"`.
fn runs_of(numbers: &[u64]) -> Vec<String> {
    let mut runs: Vec<(u64, u64)> = Vec::new();
    for &n in numbers {
        match runs.last_mut() {
            Some((_, last)) if *last + 1 == n => *last = n,
            _ => runs.push((n, n)),
        }
    }
    runs.iter()
        .map(|&(a, b)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}-{b}")
            }
        })
        .collect()
}

/// What `problems` found.
struct Findings {
    /// Everything wrong but numbers never read.
    found: Vec<String>,
    /// The numbers never read, per place, key and sender.
    never_read: Vec<String>,
    never_read_count: usize,
}

/// Prints the figures of a test and fails it with every problem found.
fn verdict(test: &str, node: &Node, book: &Book, sent: &Sent, started: Instant) {
    let Findings {
        mut found,
        mut never_read,
        ..
    } = problems(book, sent, &|| 0);
    found.append(&mut never_read);
    report(test, node, book, sent, started);
    assert!(found.is_empty(), "{test}: {found:#?}");
}

/// `verdict`, where a message that was not read may be counted instead in
/// the node's dead letters (and nowhere else): each number read at most
/// once, in order, and as many never read as counted dead letters.
fn verdict_counting_dead_letters(
    test: &str,
    node: &Node,
    book: &Book,
    sent: &Sent,
    started: Instant,
) -> usize {
    let dead_letters = || usize::try_from(node.dead_letters()).unwrap();
    let Findings {
        found,
        never_read,
        never_read_count,
    } = problems(book, sent, &dead_letters);
    report(test, node, book, sent, started);
    eprintln!("{test}: {never_read_count} never read: {never_read:#?}");
    assert!(found.is_empty(), "{test}: {found:#?}");
    assert_eq!(
        never_read_count,
        dead_letters(),
        "{test}: the messages never read are not the dead letters: {never_read:#?}"
    );
    never_read_count
}

/// Prints the figures of a test.
fn report(test: &str, node: &Node, book: &Book, sent: &Sent, started: Instant) {
    let stats = node.stats();
    eprintln!(
        "{test}: sent {}, read {}, processes made {}, cancels read {}, ended on their own {}, dead letters {}, {:.2} s; {stats:?}",
        total(sent),
        book.read_count(),
        book.lives.load(Ordering::SeqCst),
        book.cancels.load(Ordering::SeqCst),
        book.quits.load(Ordering::SeqCst),
        node.dead_letters(),
        started.elapsed().as_secs_f64(),
    );
}

/// Sends, from the calling thread, numbers 1, 2, … as `from` to `keys`
/// (a key picked per burst), in bursts of 1-40 with pauses between, for
/// `RUN`.
fn burst_sender(node: &Node, to: &Sharded<Msg>, keys: &[String], from: u64) -> Sent {
    let mut rng = Rng::new(from + 17);
    let mut sent = Sent::new();
    let mut n = 0;
    let until = Instant::now() + RUN;
    while Instant::now() < until {
        let key = &keys[rng.below(keys.len() as u64) as usize];
        for _ in 0..rng.burst() {
            n += 1;
            send_retrying(&node.scheduler, to, key, Msg { from, n });
            sent.entry((place("", to.kind()), key.clone(), from))
                .or_default()
                .push(n);
        }
        std::thread::sleep(rng.pause());
    }
    sent
}

/// Claim 1: one thread sends 1, 2, … by key to three keys that are
/// passivated over and over (1 ms `passivate_after`, checked every 100
/// ms) while their routes sit in the thread's cache: every number is read
/// once, in order, across the keys' processes.
#[test]
fn one_thread_sending_by_key_through_passivations_loses_nothing_and_keeps_order() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let book = Arc::new(Book::default());
    let node = Node::start(&server.url(), "", 4, Duration::from_millis(1), &book);
    let started = Instant::now();
    let keys: Vec<String> = (0..3).map(|k| format!("key-{k}")).collect();
    let sent = burst_sender(&node, &node.kind, &keys, 1);
    let passivated = node.stats().passivated;
    verdict("passivations, one thread", &node, &book, &sent, started);
    assert!(
        passivated >= 5,
        "the keys were passivated only {passivated} times: the test did not test"
    );
    node.scheduler.shutdown(Duration::from_millis(500));
}

/// Claim 1, where the stops fall among the sends: one thread sends 30 000
/// messages a second (or as many as it can, if fewer) to keys picked at
/// random, first among 4 000 (all kept in its cache), then among 6 000
/// (its cache filled and started afresh over and over), so that each key
/// gets a message every 130-200 ms or so and the passivation checks stop
/// thousands of keys whose routes the thread keeps, while it sends to
/// them. Every number read
/// once, in order, across each key's processes.
#[test]
fn one_thread_sending_to_keys_as_they_are_passivated_loses_nothing_and_keeps_order() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let book = Arc::new(Book::default());
    let node = Node::start(&server.url(), "", 4, Duration::from_millis(1), &book);
    let started = Instant::now();
    let keys = many_keys(6_000);
    let mut rng = Rng::new(3);
    let mut sent = Sent::new();
    let mut n = 0;
    let mut pace = Pace::new(30_000);
    for (among, run) in [(4_000, RUN / 2), (6_000, RUN / 2)] {
        let until = Instant::now() + run;
        while Instant::now() < until {
            pace.tick();
            let key = &keys[rng.below(among) as usize];
            n += 1;
            send_retrying(&node.scheduler, &node.kind, key, Msg { from: 1, n });
            sent.entry((place("", KIND), key.clone(), 1))
                .or_default()
                .push(n);
        }
    }
    let stats = node.stats();
    verdict("stops among the sends", &node, &book, &sent, started);
    assert!(
        stats.passivated >= 1_000,
        "passivated only {} times",
        stats.passivated
    );
    node.scheduler.shutdown(Duration::from_millis(500));
}

/// Cancels, from outside (`Context::cancel`), the latest process of a key
/// of `KIND` picked at random, every 0-`every_us` µs until `stop`;
/// returns how many cancels were accepted.
fn cancel_from_outside(
    node: &Node,
    book: &Book,
    keys: &[String],
    every_us: u64,
    stop: &AtomicBool,
) -> u64 {
    let mut rng = Rng::new(99);
    let mut cancelled = 0;
    while !stop.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_micros(rng.below(every_us)));
        let key = &keys[rng.below(keys.len() as u64) as usize];
        let pid = book
            .pids
            .lock()
            .unwrap()
            .get(&(place("", KIND), key.clone()))
            .copied();
        if let Some(pid) = pid {
            if node.scheduler.context().cancel(pid).is_ok() {
                cancelled += 1;
            }
        }
    }
    cancelled
}

/// Claim 1, another way for a key's process to end: cancelled from
/// outside (`Context::cancel` of its PID, which it answers by finishing,
/// as for a passivation) every millisecond or so while one thread sends
/// by key to three keys in bursts. The hand-back is promised for a process
/// "stopped (passivated, or handed off)" by its node; one cancelled from
/// outside ends on its own as far as the node knows, and the guide says
/// of every message accepted for a key that it is "read once, or
/// counted: in `fenced`, in the engine's dead letters (...)". So: every
/// number read at most once, in order, and those never read counted as
/// dead letters. (They occur now and then on a loaded machine: 1-4 of
/// about 1 400 in 3 of about 30 runs beside busy loops, none in the quiet
/// runs; none in 24 runs of the build before the route caches, c0755a7,
/// beside the same busy loops, which loses them too on a hot key, below.)
#[test]
fn one_thread_sending_by_key_while_its_processes_are_cancelled_from_outside() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let book = Arc::new(Book::default());
    let node = Node::start(&server.url(), "", 4, Duration::from_secs(120), &book);
    let started = Instant::now();
    let keys: Vec<String> = (0..3).map(|k| format!("key-{k}")).collect();
    let stop = AtomicBool::new(false);
    let (sent, cancelled) = std::thread::scope(|s| {
        let canceller = s.spawn(|| cancel_from_outside(&node, &book, &keys, 1_000, &stop));
        let sent = burst_sender(&node, &node.kind, &keys, 1);
        stop.store(true, Ordering::SeqCst);
        (sent, canceller.join().unwrap())
    });
    eprintln!("cancels from outside accepted: {cancelled}");
    verdict_counting_dead_letters("cancels from outside", &node, &book, &sent, started);
    assert!(
        cancelled >= 20,
        "only {cancelled} cancels: the test did not test"
    );
    node.scheduler.shutdown(Duration::from_millis(500));
}

/// The same, on one hot key: one thread sends by key without pauses
/// while its process is cancelled from outside every 0-600 µs. Every
/// number read at most once, in order, those never read counted as dead
/// letters. (Some are, in every run but a few, in runs of consecutive
/// numbers: 1-5 314 of 150 000 in most runs, 20 600 and 22 371 in two;
/// the build before the route caches, c0755a7, lost 0-4 970 in eight runs
/// beside this build's eight (0-1 973), one run of 4 931 consecutive
/// numbers among them, so the route cache did not bring this.)
#[test]
fn one_thread_sending_by_key_to_a_hot_key_cancelled_from_outside() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let book = Arc::new(Book::default());
    let node = Node::start(&server.url(), "", 4, Duration::from_secs(120), &book);
    let started = Instant::now();
    let keys = vec!["hot".to_string()];
    let stop = AtomicBool::new(false);
    let (sent, cancelled) = std::thread::scope(|s| {
        let canceller = s.spawn(|| cancel_from_outside(&node, &book, &keys, 600, &stop));
        let mut sent = Sent::new();
        let until = Instant::now() + RUN;
        let mut n = 0;
        while Instant::now() < until && n < 150_000 {
            n += 1;
            send_retrying(&node.scheduler, &node.kind, &keys[0], Msg { from: 1, n });
            sent.entry((place("", KIND), keys[0].clone(), 1))
                .or_default()
                .push(n);
        }
        stop.store(true, Ordering::SeqCst);
        (sent, canceller.join().unwrap())
    });
    eprintln!("cancels from outside accepted: {cancelled}");
    verdict_counting_dead_letters(
        "a hot key cancelled from outside",
        &node,
        &book,
        &sent,
        started,
    );
    assert!(
        cancelled >= 100,
        "only {cancelled} cancels: the test did not test"
    );
    node.scheduler.shutdown(Duration::from_millis(500));
}

/// Claim 1, with processes that end on their own: the processes of a
/// kind finish, uncancelled, after a step that read a multiple of 37,
/// while one thread sends by key to three of its keys in bursts (their
/// routes in the thread's cache when the process ends). The guide: "A
/// key's process that ends on its own (it finishes or fails) is started
/// again by the key's next message", "every message accepted for a key is
/// read once, or counted: in `fenced`, in the engine's dead letters (...)",
/// and, of a cached route, "A send after the process ended fails inside
/// `Entity::send`, which sends again by the general path". The hand-back
/// is promised for a process "stopped (passivated, or handed off)" only.
/// So: every number read at most once, in order, and those never read
/// counted as dead letters. (They do occur, in about half the runs, a few
/// to a few tens out of about 1 400, each a run of numbers sent right
/// after the one a process ended on; the build before the route caches,
/// c0755a7, loses them the same way.)
#[test]
fn one_thread_sending_by_key_to_processes_that_end_on_their_own() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let book = Arc::new(Book::default());
    let node = Node::start(&server.url(), "", 4, Duration::from_secs(120), &book);
    let started = Instant::now();
    let keys: Vec<String> = (0..3).map(|k| format!("quits-{k}")).collect();
    let sent = burst_sender(&node, &node.quit, &keys, 1);
    verdict_counting_dead_letters(
        "processes ending on their own",
        &node,
        &book,
        &sent,
        started,
    );
    assert!(
        book.quits.load(Ordering::SeqCst) >= 10,
        "the processes ended on their own only {} times",
        book.quits.load(Ordering::SeqCst)
    );
    node.scheduler.shutdown(Duration::from_millis(500));
}

/// Claim 2: four threads, each its own sequence, to the same 24 keys at
/// once, the keys passivated over and over: per thread and key, every
/// number read once and in order.
#[test]
fn several_threads_on_the_same_keys_keep_each_ones_order() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let book = Arc::new(Book::default());
    let node = Node::start(&server.url(), "", 4, Duration::from_millis(1), &book);
    let started = Instant::now();
    let keys: Vec<String> = (0..24).map(|k| format!("shared-{k}")).collect();
    let barrier = Barrier::new(4);
    let mut sent = Sent::new();
    std::thread::scope(|s| {
        let senders: Vec<_> = (1..=4u64)
            .map(|from| {
                let (node, keys, barrier) = (&node, &keys, &barrier);
                s.spawn(move || {
                    barrier.wait();
                    burst_sender(node, &node.kind, keys, from)
                })
            })
            .collect();
        for sender in senders {
            merge(&mut sent, sender.join().unwrap());
        }
    });
    let passivated = node.stats().passivated;
    verdict("four threads", &node, &book, &sent, started);
    assert!(passivated >= 5, "passivated only {passivated} times");
    node.scheduler.shutdown(Duration::from_millis(500));
}

/// Claim 2, where the stops fall among the sends: four threads send
/// 15 000 messages a second each (or as many as they can), each its own
/// sequence, to keys picked at random among the same 8 000 (each key
/// getting a message every 130 ms or so; more keys than a thread keeps, so the caches are
/// also started afresh over and over), so that the passivation checks
/// stop keys whose routes the threads keep, while they send to them, and a thread descheduled between checking a route and using
/// it lands its message after the key's last step. Per thread and key,
/// every number read once and in order.
#[test]
fn several_threads_sending_to_keys_as_they_are_passivated_keep_each_ones_order() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let book = Arc::new(Book::default());
    let node = Node::start(&server.url(), "", 4, Duration::from_millis(1), &book);
    let started = Instant::now();
    let keys = many_keys(8_000);
    let barrier = Barrier::new(4);
    let mut sent = Sent::new();
    std::thread::scope(|s| {
        let senders: Vec<_> = (1..=4u64)
            .map(|from| {
                let (node, keys, barrier) = (&node, &keys, &barrier);
                s.spawn(move || {
                    let mut rng = Rng::new(from + 40);
                    let mut sent = Sent::new();
                    barrier.wait();
                    let until = Instant::now() + RUN;
                    let mut n = 0;
                    let mut pace = Pace::new(15_000);
                    while Instant::now() < until {
                        pace.tick();
                        let key = &keys[rng.below(keys.len() as u64) as usize];
                        n += 1;
                        send_retrying(&node.scheduler, &node.kind, key, Msg { from, n });
                        sent.entry((place("", KIND), key.clone(), from))
                            .or_default()
                            .push(n);
                    }
                    sent
                })
            })
            .collect();
        for sender in senders {
            merge(&mut sent, sender.join().unwrap());
        }
    });
    let passivated = node.stats().passivated;
    verdict(
        "four threads, stops among the sends",
        &node,
        &book,
        &sent,
        started,
    );
    assert!(passivated >= 500, "passivated only {passivated} times");
    node.scheduler.shutdown(Duration::from_millis(500));
}

/// The test's keys: short, exactly 24 bytes (the longest kept inline),
/// and longer, in turn.
fn many_keys(count: usize) -> Vec<String> {
    (0..count)
        .map(|i| match i % 3 {
            0 => format!("k{i}"),
            1 => format!("{i:024}"),
            _ => format!("a-key-longer-than-twenty-four-bytes-{i}"),
        })
        .collect()
}

/// Claim 3: one thread sends to 5 000 distinct keys (more than the 4 096
/// a thread keeps), then again to the first ones and the last ones;
/// waits until every process is passivated, and sends to the same keys
/// twice more (their routes, where the thread kept them, now stale);
/// then to all 5 000 again. Every key reads its rounds in order, once
/// each.
#[test]
fn more_keys_than_a_thread_keeps_then_the_first_ones_again() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let book = Arc::new(Book::default());
    let node = Node::start(&server.url(), "", 8, Duration::from_millis(400), &book);
    let started = Instant::now();
    let keys = many_keys(5_000);
    let first: Vec<usize> = (0..300).collect();
    let last: Vec<usize> = (4_096..5_000).collect();
    let mut sent = Sent::new();
    let round = |n: u64, which: &mut dyn Iterator<Item = usize>, sent: &mut Sent| {
        for i in which {
            send_retrying(&node.scheduler, &node.kind, &keys[i], Msg { from: 1, n });
            sent.entry((place("", KIND), keys[i].clone(), 1))
                .or_default()
                .push(n);
        }
    };
    round(1, &mut (0..keys.len()), &mut sent);
    round(2, &mut first.iter().chain(last.iter()).copied(), &mut sent);
    let before_rest = book.read_count();
    assert!(
        wait_for(WAIT, || node.stats().keys_live == 0),
        "not every key was passivated in {WAIT:?}: {:?} (reads so far {before_rest})",
        node.stats()
    );
    round(3, &mut last.iter().chain(first.iter()).copied(), &mut sent);
    round(4, &mut last.iter().chain(first.iter()).copied(), &mut sent);
    round(5, &mut (0..keys.len()), &mut sent);
    verdict("5 000 keys", &node, &book, &sent, started);
    node.scheduler.shutdown(Duration::from_millis(500));
}

/// What a `Pusher` sent, the worker threads it stepped on, how often it
/// was refused for a full buffer or mailbox, and how often a step of it
/// ran on another thread than its step before.
type Pushed = (Sent, HashSet<ThreadId>, u64, u64);

/// Sends by key from its steps, in bursts of 1-16, as sender `from`:
/// after each burst it either runs again at once (`continue_`, back in a
/// run queue) or sleeps on a timer, so that it moves between the workers.
struct Pusher {
    from: u64,
    kind: Sharded<Msg>,
    keys: Vec<String>,
    n: u64,
    /// A message refused for a full buffer or mailbox, sent again first.
    held: Option<(String, Msg)>,
    rng: Rng,
    until: Instant,
    last_thread: Option<ThreadId>,
    pushed: Pushed,
    errors: Arc<Mutex<Vec<String>>>,
}

impl Pusher {
    /// Sends one message; false if it must wait for the next step.
    fn push(&mut self, out: &Output<'_>, key: String, msg: Msg) -> bool {
        match self.kind.send(out.context(), &key, msg) {
            Ok(()) => {
                self.pushed
                    .0
                    .entry((place("", KIND), key, self.from))
                    .or_default()
                    .push(msg.n);
                true
            }
            Err(Refused {
                message,
                reason: RefusedReason::BufferFull | RefusedReason::MailboxFull,
            }) => {
                self.pushed.2 += 1;
                self.held = Some((key, message));
                false
            }
            Err(Refused { message, reason }) => {
                self.errors.lock().unwrap().push(format!(
                    "pusher {}: {message:?} refused: {reason}",
                    self.from
                ));
                true
            }
        }
    }
}

impl Process for Pusher {
    type Done = Pushed;

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        events.for_each(drop);
        let thread = std::thread::current().id();
        self.pushed.1.insert(thread);
        if self
            .last_thread
            .replace(thread)
            .is_some_and(|last| last != thread)
        {
            self.pushed.3 += 1;
        }
        let mut go_on = true;
        if let Some((key, msg)) = self.held.take() {
            go_on = self.push(out, key, msg);
        }
        if go_on {
            if Instant::now() >= self.until {
                out.finish(std::mem::take(&mut self.pushed));
                return Ok(());
            }
            let key = self.keys[self.rng.below(self.keys.len() as u64) as usize].clone();
            for _ in 0..self.rng.burst().min(16) {
                self.n += 1;
                let msg = Msg {
                    from: self.from,
                    n: self.n,
                };
                if !self.push(out, key.clone(), msg) {
                    break;
                }
            }
        }
        match self.rng.below(3) {
            0 => out.continue_(),
            _ => {
                let pause = self.rng.pause();
                out.set_timer(pause, Tag(1));
            }
        }
        Ok(())
    }
}

/// Keeps the workers' run queues busy (a 200 µs step, then back in the
/// queue) until `until`, so that the workers steal from each other and
/// the pushers move between them.
struct Churn {
    until: Instant,
}

impl Process for Churn {
    type Done = ();

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        events.for_each(drop);
        if Instant::now() >= self.until {
            out.finish(());
            return Ok(());
        }
        let spin = Instant::now();
        while spin.elapsed() < Duration::from_micros(200) {
            std::hint::spin_loop();
        }
        out.continue_();
        Ok(())
    }
}

/// Claim 4: two processes send by key from their steps (moving between
/// the two workers, so through both workers' caches, three busy processes
/// beside them so that the workers steal from each other) while a thread
/// outside sends to the same keys, the keys passivated over and over:
/// per sender and key, every number read once and in order.
#[test]
fn steps_sending_by_key_while_they_move_between_workers_keep_their_order() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let book = Arc::new(Book::default());
    let node = Node::start(&server.url(), "", 4, Duration::from_millis(1), &book);
    let started = Instant::now();
    let keys: Vec<String> = (0..32).map(|k| format!("step-{k}")).collect();
    let errors = Arc::new(Mutex::new(Vec::new()));
    let mut pushers: Vec<_> = (10..12u64)
        .map(|from| {
            node.scheduler
                .spawn(Pusher {
                    from,
                    kind: node.kind.clone(),
                    keys: keys.clone(),
                    n: 0,
                    held: None,
                    rng: Rng::new(from),
                    until: Instant::now() + RUN,
                    last_thread: None,
                    pushed: Pushed::default(),
                    errors: Arc::clone(&errors),
                })
                .unwrap()
        })
        .collect();
    let churns: Vec<_> = (0..3)
        .map(|_| {
            node.scheduler
                .spawn(Churn {
                    until: Instant::now() + RUN,
                })
                .unwrap()
        })
        .collect();
    let mut sent = burst_sender(&node, &node.kind, &keys, 1);
    let mut moved = 0;
    for (i, pusher) in pushers.iter_mut().enumerate() {
        let (pushed, threads, refused, moves) = pusher
            .wait_timeout(WAIT)
            .unwrap_or_else(|e| panic!("pusher {i} did not finish: {e:?}"));
        eprintln!(
            "pusher {i}: {} messages, stepped on {} worker threads, moved {moves} times, refused {refused} times (full)",
            total(&pushed),
            threads.len()
        );
        moved += usize::from(threads.len() >= 2);
        merge(&mut sent, pushed);
    }
    // Whether a pusher moves is the engine's choice (on a quiet machine
    // both may stay on one worker, as in one CI run): said, not asserted;
    // the order checks below hold either way.
    if moved == 0 {
        eprintln!("no pusher moved between the workers in this run");
    }
    for mut churn in churns {
        churn.wait_timeout(WAIT).expect("a churn ends");
    }
    assert_eq!(*errors.lock().unwrap(), Vec::<String>::new());
    verdict("steps on two workers", &node, &book, &sent, started);
    assert!(node.stats().passivated >= 10, "{:?}", node.stats());
    node.scheduler.shutdown(Duration::from_millis(500));
}

/// Claim 5: one thread mixes `Entity::send` and `Sharded::send` to two
/// keys, at random, in bursts, while the keys are passivated over and
/// over: every number read once, in the order sent, whichever way each
/// went.
#[test]
fn entity_and_by_key_sends_mixed_across_passivations_keep_their_order() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let book = Arc::new(Book::default());
    let node = Node::start(&server.url(), "", 4, Duration::from_millis(1), &book);
    let started = Instant::now();
    let keys = ["mixed-0".to_string(), "mixed-1".to_string()];
    let mut entities: Vec<_> = keys.iter().map(|k| node.kind.entity(k)).collect();
    let mut rng = Rng::new(5);
    let mut sent = Sent::new();
    let (mut by_entity, mut cached, mut by_key) = (0u64, 0u64, 0u64);
    let mut n = 0;
    let until = Instant::now() + RUN;
    while Instant::now() < until {
        let k = rng.below(2) as usize;
        for _ in 0..rng.burst() {
            n += 1;
            let msg = Msg { from: 1, n };
            if rng.below(2) == 0 {
                by_entity += 1;
                cached += u64::from(entities[k].is_cached());
                let deadline = Instant::now() + WAIT;
                let mut msg = msg;
                while let Err(refused) = entities[k].send(&node.scheduler, msg) {
                    assert!(
                        matches!(
                            refused.reason,
                            RefusedReason::BufferFull | RefusedReason::MailboxFull
                        ) && Instant::now() < deadline,
                        "{msg:?} refused: {}",
                        refused.reason
                    );
                    msg = refused.message;
                    std::thread::sleep(Duration::from_millis(1));
                }
            } else {
                by_key += 1;
                send_retrying(&node.scheduler, &node.kind, &keys[k], msg);
            }
            sent.entry((place("", KIND), keys[k].clone(), 1))
                .or_default()
                .push(n);
        }
        std::thread::sleep(rng.pause());
    }
    eprintln!(
        "entity sends {by_entity} ({cached} of them on a cached route), by-key sends {by_key}"
    );
    let passivated = node.stats().passivated;
    verdict("entity and by key mixed", &node, &book, &sent, started);
    assert!(passivated >= 5, "passivated only {passivated} times");
    assert!(cached > 0, "no entity send took the cached route");
    node.scheduler.shutdown(Duration::from_millis(500));
}

/// Two kinds with the same message type and the same keys: one thread
/// sends to both, key by key, in turn, the keys passivated now and then.
/// Each kind's processes read only what was sent to that kind, once and
/// in order (a route cached for one kind's key never serves the other's).
#[test]
fn two_kinds_with_the_same_keys_each_read_only_their_own() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let book = Arc::new(Book::default());
    let node = Node::start(&server.url(), "", 4, Duration::from_millis(1), &book);
    let started = Instant::now();
    let keys: Vec<String> = (0..4).map(|k| format!("same-{k}")).collect();
    let mut rng = Rng::new(6);
    let mut sent = Sent::new();
    let mut n = 0;
    let until = Instant::now() + RUN;
    while Instant::now() < until {
        let key = &keys[rng.below(keys.len() as u64) as usize];
        for _ in 0..rng.burst() {
            n += 1;
            for (from, to) in [(1, &node.kind), (2, &node.other)] {
                send_retrying(&node.scheduler, to, key, Msg { from, n });
                sent.entry((place("", to.kind()), key.clone(), from))
                    .or_default()
                    .push(n);
            }
        }
        std::thread::sleep(rng.pause());
    }
    verdict("two kinds", &node, &book, &sent, started);
    node.scheduler.shutdown(Duration::from_millis(500));
}

/// Two clusters in one process (their own subjects and names on one
/// server), each a node 1 with the same kinds and keys, their PIDs
/// shifted apart: one thread sends to both, key by key, in turn. Each
/// cluster's processes read only what was sent to that cluster, once and
/// in order.
#[test]
fn two_clusters_in_one_process_with_the_same_node_number_each_read_only_their_own() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let book = Arc::new(Book::default());
    let a = Node::start(&server.url(), "a", 4, Duration::from_millis(300), &book);
    let b = Node::start(&server.url(), "b", 4, Duration::from_millis(300), &book);
    let idlers: Vec<_> = (0..37).map(|_| b.scheduler.spawn(Idler).unwrap()).collect();
    let started = Instant::now();
    let keys: Vec<String> = (0..4).map(|k| format!("both-{k}")).collect();
    let mut rng = Rng::new(7);
    let mut sent = Sent::new();
    let mut n = 0;
    let until = Instant::now() + RUN;
    while Instant::now() < until {
        let key = &keys[rng.below(keys.len() as u64) as usize];
        for _ in 0..rng.burst() {
            n += 1;
            for (cluster, from, node) in [("a", 1, &a), ("b", 2, &b)] {
                send_retrying(&node.scheduler, &node.kind, key, Msg { from, n });
                sent.entry((place(cluster, KIND), key.clone(), from))
                    .or_default()
                    .push(n);
            }
        }
        std::thread::sleep(rng.pause());
    }
    let pids = book.pids.lock().unwrap().clone();
    eprintln!("the keys' latest PIDs: {pids:?}");
    verdict("two clusters (a's figures)", &a, &book, &sent, started);
    eprintln!("b: {:?}, dead letters {}", b.stats(), b.dead_letters());
    for idler in idlers {
        let _ = b.scheduler.context().cancel(idler.pid());
    }
    a.scheduler.shutdown(Duration::from_millis(500));
    b.scheduler.shutdown(Duration::from_millis(500));
}

/// A node restarted within one process: one thread sends to ten keys of
/// node 1 (their routes kept in the thread), node 1 shuts down and is
/// dropped, and a new node 1 of the same cluster, with the same kind,
/// starts in its place (its PIDs, and perhaps its memory, those of the
/// old one). The thread sends to the keys in the other order first (so
/// that each key's new process gets a PID another key's old one had),
/// then in order, twice. Each message is read once, in order, by its own
/// key's process: no route of the old node serves the new one.
#[test]
fn a_node_restarted_in_the_same_process_is_not_sent_to_by_the_old_ones_routes() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let book = Arc::new(Book::default());
    let started = Instant::now();
    let keys: Vec<String> = (0..10).map(|k| format!("again-{k}")).collect();
    let mut sent = Sent::new();
    let mut n = 0;
    let mut send_all = |node: &Node, order: &mut dyn Iterator<Item = &String>, sent: &mut Sent| {
        for key in order {
            n += 1;
            send_retrying(&node.scheduler, &node.kind, key, Msg { from: 1, n });
            sent.entry((place("r", KIND), key.clone(), 1))
                .or_default()
                .push(n);
        }
    };
    let old = Node::start(&server.url(), "r", 4, Duration::from_secs(120), &book);
    send_all(&old, &mut keys.iter(), &mut sent);
    send_all(&old, &mut keys.iter(), &mut sent);
    let want = total(&sent);
    assert!(
        wait_for(WAIT, || book.read_count() == want),
        "the old node read {} of {want}",
        book.read_count()
    );
    let old_pids = book.pids.lock().unwrap().clone();
    old.scheduler.shutdown(Duration::from_millis(500));
    drop(old);
    let new = Node::start(&server.url(), "r", 4, Duration::from_secs(120), &book);
    send_all(&new, &mut keys.iter().rev(), &mut sent);
    send_all(&new, &mut keys.iter(), &mut sent);
    send_all(&new, &mut keys.iter(), &mut sent);
    verdict("a node restarted", &new, &book, &sent, started);
    let new_pids = book.pids.lock().unwrap().clone();
    let moved = keys
        .iter()
        .filter(|key| {
            let at = (place("r", KIND), (*key).clone());
            old_pids.get(&at) != new_pids.get(&at)
        })
        .count();
    eprintln!("the old node's keys: {old_pids:?}\nthe new node's keys: {new_pids:?}");
    assert!(
        moved >= 8,
        "only {moved} keys' new processes have PIDs other than their old ones: the test did not test"
    );
    new.scheduler.shutdown(Duration::from_millis(500));
}
