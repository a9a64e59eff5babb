//! Asks to a key over a real `nats-server` with JetStream, nodes in this
//! process: a question reaches the one process of its key wherever its
//! shard is held, typed both ways, from outside and from a step; a
//! question asked before any node holds the shard waits and is answered;
//! every question asked while a node joins is answered exactly once by
//! the key's one process; a refused question comes back.

mod support;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use relay_nats::{Keyed, RefusedReason, Sharded, Sharding, ShardingConfig};
use sched::actor::{AskError, Replied};
use sched::prelude::*;
use sched::ReplyId;
use serde::{Deserialize, Serialize};
use support::*;

const WAIT: Duration = Duration::from_secs(60);
const KIND: &str = "account";
const SHARDS: u32 = 16;

/// Adds to an account.
#[derive(Serialize, Deserialize, Debug, Clone, Copy)]
struct Deposit(u64);

/// What is the balance, and who answers (the node, the incarnation)?
#[derive(Serialize, Deserialize, Debug, Clone, Copy)]
struct Balance;
impl Question for Balance {
    type Answer = Statement;
}

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
struct Statement {
    balance: u64,
    node: u32,
    incarnation: u64,
}

/// A question no codec carries.
struct Unregistered;
impl Question for Unregistered {
    type Answer = u64;
}

/// A key whose process blocks in the step that reads its next deposit,
/// until told.
type Gate = Arc<Mutex<Option<(String, std::sync::mpsc::Receiver<()>)>>>;

/// One account per key: answers `Balance` with what it holds.
struct Account {
    key: String,
    balance: u64,
    node: u32,
    incarnation: u64,
    gate: Gate,
}

impl Process for Account {
    type Done = ();
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            match event {
                Event::Message(m) => {
                    self.balance += m.downcast::<Deposit>().map_or(0, |d| d.0);
                    let gate = {
                        let mut gate = self.gate.lock().unwrap();
                        match &*gate {
                            Some((key, _)) if *key == self.key => gate.take(),
                            _ => None,
                        }
                    };
                    if let Some((_, gate)) = gate {
                        let _ = gate.recv();
                    }
                }
                Event::Request(request) => {
                    let (Balance, answer) =
                        request.take::<Balance>().map_err(|_| "not a Balance")?;
                    answer.answer(Statement {
                        balance: self.balance,
                        node: self.node,
                        incarnation: self.incarnation,
                    });
                }
                Event::Cancel => out.finish(()),
                _ => {}
            }
        }
        Ok(())
    }
}

struct AccountNode {
    id: u32,
    scheduler: Scheduler,
    sharding: Sharding,
    accounts: Sharded<Deposit>,
}

fn account_node(
    url: &str,
    node: u32,
    config: ShardingConfig,
    made: &Arc<AtomicU64>,
) -> AccountNode {
    gated_account_node(url, node, config, made, &Gate::default(), HEARTBEAT)
}

fn gated_account_node(
    url: &str,
    node: u32,
    config: ShardingConfig,
    made: &Arc<AtomicU64>,
    gate: &Gate,
    beat: Duration,
) -> AccountNode {
    let (scheduler, transport) = node_configured(url, node, |c| {
        c.codec(
            codec()
                .register::<Keyed<Deposit>>(KIND)
                .register_as::<Balance>("balance", relay_nats::Format::Postcard)
                .register_as::<Statement>("statement", relay_nats::Format::Postcard),
        )
        .failure_detector(beat, DOWN_AFTER)
    });
    let sharding = Sharding::new(&scheduler, Arc::clone(&transport), config).unwrap();
    let made = Arc::clone(made);
    let gate = Arc::clone(gate);
    let accounts = sharding
        .register(&scheduler, KIND, move |key: &str| Account {
            key: key.to_owned(),
            balance: 0,
            node,
            incarnation: made.fetch_add(1, Ordering::Relaxed),
            gate: Arc::clone(&gate),
        })
        .unwrap();
    AccountNode {
        id: node,
        scheduler,
        sharding,
        accounts,
    }
}

fn settled(nodes: &[&AccountNode]) {
    settled_with(nodes, SHARDS);
}

fn settled_with(nodes: &[&AccountNode], shards: u32) {
    wait_until("the shards to settle", WAIT, || {
        let held: u64 = nodes.iter().map(|n| n.sharding.stats().shards_held).sum();
        let agree = (0..100).all(|k| {
            let key = format!("probe-{k}");
            let first = nodes[0].accounts.placed_on(&key);
            nodes.iter().all(|n| n.accounts.placed_on(&key) == first)
        });
        // Each holds what it places on itself: see `holds_its_own`.
        let own = nodes
            .iter()
            .all(|n| holds_its_own(n.id, KIND, &n.accounts, &n.sharding));
        held == u64::from(shards)
            && agree
            && own
            && nodes.iter().all(|n| n.sharding.stats().buffered == 0)
    });
}

fn keys(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("acct-{i}")).collect()
}

#[test]
fn a_question_to_a_key_is_answered_by_its_one_process_wherever_its_shard_is() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let made = Arc::new(AtomicU64::new(0));
    let config = ShardingConfig::new().shards(SHARDS);
    let one = account_node(&server.url(), 1, config.clone(), &made);
    let two = account_node(&server.url(), 2, config, &made);
    settled(&[&one, &two]);

    let keys = keys(60);
    for (i, key) in keys.iter().enumerate() {
        one.accounts
            .send(&one.scheduler, key, Deposit(i as u64))
            .unwrap();
        two.accounts
            .send(&two.scheduler, key, Deposit(1000))
            .unwrap();
    }
    // Each node asks every key: the answer is the key's one process's,
    // on the node its shard is placed on, with both deposits read (each
    // sender's messages and questions to a key keep their order).
    let mut placed_on = HashMap::new();
    for node in [&one, &two] {
        for (i, key) in keys.iter().enumerate() {
            let mut reply = node.accounts.ask(&node.scheduler, key, Balance).unwrap();
            let statement = reply.wait_timeout(WAIT).unwrap();
            let on = node.accounts.placed_on(key).unwrap();
            assert_eq!(statement.node, on, "{key} answered on its shard's node");
            if node.id == on {
                assert!(statement.balance >= i as u64);
            }
            let seen = *placed_on
                .entry(key.clone())
                .or_insert(statement.incarnation);
            assert_eq!(seen, statement.incarnation, "{key} has one process");
        }
    }
    assert_eq!(made.load(Ordering::Relaxed), 60, "one process per key");
    let answered_both: u64 = keys.len() as u64;
    assert_eq!(placed_on.len() as u64, answered_both);
    // Both nodes hold keys, so questions crossed in both directions.
    let on_one = keys
        .iter()
        .filter(|k| one.accounts.placed_on(k) == Some(1))
        .count();
    assert!(
        on_one > 0 && on_one < keys.len(),
        "{on_one} of 60 keys on node 1"
    );
    for key in &keys {
        let mut reply = one.accounts.ask(&one.scheduler, key, Balance).unwrap();
        let i: u64 = key.trim_start_matches("acct-").parse().unwrap();
        assert_eq!(reply.wait_timeout(WAIT).unwrap().balance, i + 1000);
    }
    one.scheduler.shutdown(Duration::from_secs(5));
    two.scheduler.shutdown(Duration::from_secs(5));
}

#[test]
fn a_question_asked_before_any_node_holds_the_shard_waits_and_is_answered() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let made = Arc::new(AtomicU64::new(0));
    // Slow heartbeats: the host claims nothing for two of them (2 s), so
    // the questions below come before any claim even on a machine that
    // stalls this thread for a while.
    let one = gated_account_node(
        &server.url(),
        1,
        ShardingConfig::new().shards(SHARDS),
        &made,
        &Gate::default(),
        SLOW_BEAT,
    );
    // At once: the host has not claimed anything yet (it first listens for
    // the other nodes' heartbeats).
    assert_eq!(one.sharding.stats().shards_held, 0);
    let mut early: Vec<_> = keys(20)
        .iter()
        .map(|key| one.accounts.ask(&one.scheduler, key, Balance).unwrap())
        .collect();
    assert!(one.sharding.stats().buffered > 0, "the questions wait");
    for reply in &mut early {
        let statement = reply.wait_timeout(WAIT).unwrap();
        assert_eq!((statement.balance, statement.node), (0, 1));
    }
    assert_eq!(one.sharding.stats().buffered, 0);
    one.scheduler.shutdown(Duration::from_secs(5));
}

#[test]
fn every_question_asked_while_a_third_node_joins_is_answered_once_by_the_keys_one_process() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let made = Arc::new(AtomicU64::new(0));
    let config = ShardingConfig::new().shards(SHARDS);
    let one = account_node(&server.url(), 1, config.clone(), &made);
    let two = account_node(&server.url(), 2, config.clone(), &made);
    settled(&[&one, &two]);
    let keys = keys(100);
    let answers = Mutex::new(Vec::new());
    let done = std::sync::atomic::AtomicBool::new(false);
    let joined = std::thread::scope(|s| {
        let asking = s.spawn(|| {
            // Rounds until the join has settled, and three more.
            let mut after = 0;
            for round in 0.. {
                if done.load(Ordering::Relaxed) {
                    after += 1;
                    if after > 3 {
                        return round;
                    }
                }
                let replies: Vec<_> = keys
                    .iter()
                    .map(|key| {
                        one.accounts.send(&one.scheduler, key, Deposit(1)).unwrap();
                        (key, one.accounts.ask(&one.scheduler, key, Balance).unwrap())
                    })
                    .collect();
                for (key, mut reply) in replies {
                    let statement = reply.wait_timeout(WAIT).expect("every question answered");
                    answers
                        .lock()
                        .unwrap()
                        .push((key.clone(), round, statement));
                }
            }
            unreachable!()
        });
        std::thread::sleep(Duration::from_millis(300));
        let three = account_node(&server.url(), 3, config, &made);
        settled(&[&one, &two, &three]);
        done.store(true, Ordering::Relaxed);
        let rounds = asking.join().unwrap();
        (three, rounds)
    });
    let (joined, rounds) = joined;
    let answers = answers.into_inner().unwrap();
    assert_eq!(answers.len() as u64, rounds * 100);
    // Per key: the balance counts every deposit sent before the question
    // (one per round so far) unless the key moved, when its new process
    // starts from zero; and a process never answers after a later one did.
    let mut last: HashMap<&str, (u64, Statement)> = HashMap::new();
    let mut moved = 0;
    for (key, round, statement) in &answers {
        if let Some((before_round, before)) = last.get(key.as_str()) {
            if before.incarnation != statement.incarnation {
                moved += 1;
                assert!(
                    statement.incarnation > before.incarnation,
                    "{key}: an earlier process answered after a later one"
                );
                assert_eq!(statement.node, 3, "{key} moves only to the new node");
            } else {
                assert_eq!(
                    statement.balance,
                    before.balance + (round - before_round),
                    "{key}: one deposit read before each question"
                );
            }
        } else {
            assert_eq!(statement.balance, round + 1);
        }
        last.insert(key, (*round, *statement));
    }
    assert!(moved > 0, "some keys moved to the joining node");
    // What node 2 passed on: questions and messages from node 1 that
    // reached it after it let go of their shard, sent on to node 3.
    eprintln!("node 2 passed on {}", two.sharding.stats().forwarded);
    for node in [&one, &two, &joined] {
        node.scheduler.shutdown(Duration::from_secs(5));
    }
}

#[test]
fn a_question_that_reaches_the_old_holder_after_it_let_go_is_passed_on_and_answered() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let made = Arc::new(AtomicU64::new(0));
    let gate = Gate::default();
    // Enough shards that some of node 2's move to node 3.
    let shards = 64;
    let config = ShardingConfig::new().shards(shards);
    let node = |n| gated_account_node(&server.url(), n, config.clone(), &made, &gate, HEARTBEAT);
    let (one, two) = (node(1), node(2));
    settled_with(&[&one, &two], shards);
    // A key of node 2's now, of node 3's once it joins.
    let key = keys(1000)
        .into_iter()
        .find(|k| {
            one.accounts.placed_among(k, &[1, 2]) == Some(2)
                && one.accounts.placed_among(k, &[1, 2, 3]) == Some(3)
        })
        .unwrap();
    let shard = one.accounts.shard_of(&key);
    let on_two = |what: fn(&relay_nats::ShardStats) -> u64| {
        let stats = two.sharding.shard_stats();
        what(
            stats
                .iter()
                .find(|s| s.kind == KIND && s.shard == shard)
                .unwrap(),
        )
    };
    // Its process on node 2 blocks reading a deposit, so node 2 cannot
    // let go of the shard when node 3 joins.
    let (open, closed) = std::sync::mpsc::channel::<()>();
    *gate.lock().unwrap() = Some((key.clone(), closed));
    one.accounts.send(&one.scheduler, &key, Deposit(5)).unwrap();
    wait_until("the deposit to be read on node 2", WAIT, || {
        gate.lock().unwrap().is_none()
    });
    let three = node(3);
    wait_until("node 2 to stop the key's process", WAIT, || {
        on_two(|s| s.keys_stopping) == 1
    });
    // Node 1 asks: the shard's name still points at node 2, so the
    // question reaches node 2 and waits there.
    let mut reply = one.accounts.ask(&one.scheduler, &key, Balance).unwrap();
    wait_until("the question to wait on node 2", WAIT, || {
        on_two(|s| s.buffered) == 1
    });
    // Let go: node 2 hands the shard to node 3 and passes the question on,
    // for node 1's asker, to node 3.
    open.send(()).unwrap();
    let statement = reply.wait_timeout(WAIT).expect("answered through node 2");
    assert_eq!(
        (statement.node, statement.balance),
        (3, 0),
        "a new process on node 3"
    );
    assert!(two.sharding.stats().forwarded >= 1, "node 2 passed it on");
    for node in [&one, &two, &three] {
        node.scheduler.shutdown(Duration::from_secs(5));
    }
}

/// Asks a key from its first step, and finishes with the answer.
struct Auditor {
    accounts: Sharded<Deposit>,
    key: String,
    asked: Option<ReplyId<Statement>>,
}

impl Process for Auditor {
    type Done = Result<Statement, AskError>;
    fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        let asked = self
            .accounts
            .ask_from_step(out, &self.key, Balance, WAIT)
            .map_err(|refused| refused.reason.to_string())?;
        self.asked = Some(asked);
        Ok(())
    }
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        let Some(asked) = self.asked else {
            return Ok(());
        };
        for event in events {
            match asked.answer(event) {
                Replied::Answered(statement) => out.finish(Ok::<_, AskError>(statement)),
                Replied::Failed(why) => out.finish(Err::<Statement, _>(why)),
                Replied::Other(_) => {}
            }
        }
        Ok(())
    }
}

#[test]
fn a_step_asks_a_key_on_another_node_and_a_refused_question_comes_back() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let made = Arc::new(AtomicU64::new(0));
    let config = ShardingConfig::new().shards(SHARDS);
    let one = account_node(&server.url(), 1, config.clone(), &made);
    let two = account_node(&server.url(), 2, config, &made);
    settled(&[&one, &two]);
    let remote = keys(50)
        .into_iter()
        .find(|k| one.accounts.placed_on(k) == Some(2))
        .unwrap();
    one.accounts
        .send(&one.scheduler, &remote, Deposit(7))
        .unwrap();
    let mut auditor = one
        .scheduler
        .spawn(Auditor {
            accounts: one.accounts.clone(),
            key: remote.clone(),
            asked: None,
        })
        .unwrap();
    let statement = auditor.wait_timeout(WAIT).unwrap().unwrap();
    assert_eq!((statement.balance, statement.node), (7, 2));

    // A question no codec carries, to a key held on the other node: back
    // at once, as it went.
    let refused = one
        .accounts
        .ask(&one.scheduler, &remote, Unregistered)
        .expect_err("the codec cannot carry it");
    assert_eq!(refused.reason, RefusedReason::Unencodable);
    let Unregistered = refused.message;
    one.scheduler.shutdown(Duration::from_secs(5));
    two.scheduler.shutdown(Duration::from_secs(5));
}

#[test]
fn a_question_beyond_the_buffer_comes_back() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let made = Arc::new(AtomicU64::new(0));
    let config = ShardingConfig::new().shards(SHARDS).max_buffered(3);
    let one = account_node(&server.url(), 1, config, &made);
    let mut waiting = Vec::new();
    let mut refused = 0;
    for key in keys(10) {
        match one.accounts.ask(&one.scheduler, &key, Balance) {
            Ok(reply) => waiting.push(reply),
            Err(back) => {
                assert_eq!(back.reason, RefusedReason::BufferFull);
                refused += 1;
            }
        }
    }
    assert_eq!(
        (waiting.len(), refused),
        (3, 7),
        "three wait, the rest come back"
    );
    for mut reply in waiting {
        assert_eq!(reply.wait_timeout(WAIT).unwrap().balance, 0);
    }
    one.scheduler.shutdown(Duration::from_secs(5));
}
