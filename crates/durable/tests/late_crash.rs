//! The crash test with receivers that start late: a load of durable
//! workflows that send to durable services and ledgers which do not run
//! yet, in a child OS process killed with SIGKILL at random moments and
//! started again on the same store each time, until it finishes. Then,
//! read from the store: every workflow ended with the result an
//! uninterrupted run gives, every receiver took each send exactly once in
//! its sender's order, and nothing is left in the outbox.
//!
//! Each workflow runs `rounds` rounds of: a request to a service (which
//! one depends on the workflow and the round) and a note to its ledger,
//! then, on the service's reply, a timer. The workflow waits for each
//! reply and adds it to its result; the notes go without waiting, so a
//! ledger that does not run yet has many of them pending per sender. No
//! receiver is spawned with the workload: a plan drawn from a fixed seed
//! spawns each only in a given incarnation of the child or later (half
//! the services in the one that starts the workflows, the others one to
//! three restarts later, the ledgers two or more), and only some
//! milliseconds after the child has said it runs, so the workflows have
//! sent to it first. The first kill comes in the first milliseconds of
//! the first start, before anything exists. What the guide promises
//! (`docs/guide/durable.md`, "Sends between durable processes"): the
//! outbox keeps such sends and hands them over when the receiver is
//! spawned, exactly once and in order, through kills of either side.
//!
//! The checks do not trust the receivers alone: each one counts in its
//! state (rebuilt by every recovery's replay) what it took per sender,
//! and ends with how many sends it took in turn and how many out of turn
//! (a copy, an overtaking send or one meant for another receiver);
//! besides, the test rebuilds every (sender, receiver) channel from the
//! journals and compares what the receiver's journal took, and what the
//! sender's released, with what an uninterrupted run sends. It also
//! checks that every receiver started after a workflow had sent to it
//! (the records' times), that those due in a later incarnation started
//! after the restart they waited for, and that recoveries found sends
//! waiting in the outbox for receivers not spawned yet. The workflows
//! snapshot their state; the receivers keep whole journals, for the
//! checks.
//!
//! The always-run test is sized for CI (400 workflows of 100 rounds, 8
//! services, 4 ledgers, 12 kills); the ignored one is the full load
//! (2 000 workflows of 200 rounds, 16 services, 8 ledgers, 50 kills):
//!
//! `cargo test --release -p sched-durable --test late_crash -- --include-ignored`

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use sched_durable::prelude::*;
use sched_durable::store::{Journal, Store};
use sched_durable::{Record, RecordedEffect, RecordedInput, Spawned};

const ROLE: &str = "SCHED_DURABLE_LATE_CRASH_CHILD";

/// The seed of the receivers' plan (the kill moments have their own).
const PLAN_SEED: u64 = 0x1a7e;

/// The size of a run, shared by the test and its child.
#[derive(Clone, Copy, Debug)]
struct Load {
    workflows: u64,
    rounds: u64,
    services: u64,
    ledgers: u64,
    kills: u32,
    /// Mid-load kills come up to this many milliseconds after the child
    /// says it runs.
    window: u64,
}

impl Load {
    fn encode(&self) -> String {
        let Load {
            workflows,
            rounds,
            services,
            ledgers,
            kills,
            window,
        } = self;
        format!("{workflows},{rounds},{services},{ledgers},{kills},{window}")
    }

    fn decode(text: &str) -> Load {
        let n: Vec<u64> = text.split(',').map(|p| p.parse().unwrap()).collect();
        Load {
            workflows: n[0],
            rounds: n[1],
            services: n[2],
            ledgers: n[3],
            kills: u32::try_from(n[4]).unwrap(),
            window: n[5],
        }
    }
}

/// The service workflow `number` asks in `round`: it changes every round,
/// so each workflow talks to every service, and each service hears from
/// every workflow.
fn service_of(number: u64, round: u64, services: u64) -> u64 {
    (number * 7 + round * 3) % services
}

fn ledger_of(number: u64, ledgers: u64) -> u64 {
    number % ledgers
}

/// What a service answers workflow `number` in `round`: it depends on all
/// three, so a reply from the wrong service, or to another round,
/// changes the workflow's result (the workflow also refuses one).
fn value_of(number: u64, round: u64, service: u64) -> u64 {
    (number % 97 + 1) * round + service * 1_000
}

/// The result of workflow `number` in an uninterrupted run.
fn expected_result(number: u64, load: &Load) -> u64 {
    (1..=load.rounds)
        .map(|round| value_of(number, round, service_of(number, round, load.services)))
        .sum()
}

/// The number of a workflow's key `w<number>`.
fn number_of(key: &str) -> Result<u64, BoxError> {
    Ok(key
        .strip_prefix('w')
        .ok_or_else(|| format!("a send from {key}, not a workflow"))?
        .parse()?)
}

/// Asks a service each round, notes the round to its ledger, and waits
/// for the reply; finishes with the sum of the replies, and when it
/// started (made its first sends), which the test compares with when the
/// receivers started.
#[derive(serde::Serialize, serde::Deserialize)]
struct Workflow {
    number: u64,
    rounds: u64,
    services: u64,
    ledgers: u64,
    /// The round asked last (its reply is awaited).
    round: u64,
    sum: u64,
    /// Milliseconds since the epoch, as its first record says.
    started_ms: u64,
}

impl Durable for Workflow {
    const KIND: &'static str = "workflow";
    /// (number, rounds, services, ledgers).
    type Args = (u64, u64, u64, u64);
    /// A reply: (round, value).
    type Message = (u64, u64);
    /// (the sum of the replies, when it started).
    type Done = (u64, u64);

    fn create((number, rounds, services, ledgers): (u64, u64, u64, u64)) -> Self {
        Workflow {
            number,
            rounds,
            services,
            ledgers,
            round: 0,
            sum: 0,
            started_ms: 0,
        }
    }

    // The first request goes in the first step: at once, before any
    // receiver runs.
    fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        self.ask(out)
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        let from = events.sender().map(str::to_owned);
        for event in events.typed::<Self>() {
            match (event, &from) {
                (Event::Timer { .. }, _) => self.ask(out)?,
                (Event::Message((round, value)), Some(from)) => {
                    // One request is out at a time: a reply to another round,
                    // or from another service, is a send taken twice or lost.
                    let service = service_of(self.number, self.round, self.services);
                    if round != self.round || *from != format!("s{service}") {
                        return Err(format!(
                            "w{}: reply to round {round} from {from}, awaiting round {} from s{service}",
                            self.number, self.round
                        )
                        .into());
                    }
                    self.sum += value;
                    if self.round == self.rounds {
                        out.finish((self.sum, self.started_ms));
                    } else {
                        out.set_timer(
                            Duration::from_millis(20 + (self.number * 7 + self.round * 13) % 100),
                            Tag(0),
                        );
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }
}

impl Workflow {
    /// Asks the next round's service, and notes the round to the ledger.
    fn ask(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        if self.round == 0 {
            // The record's time (replayed alike): not the clock.
            self.started_ms = out
                .now()
                .duration_since(std::time::UNIX_EPOCH)?
                .as_millis()
                .try_into()?;
        }
        self.round += 1;
        let service = service_of(self.number, self.round, self.services);
        out.send(Key::<Service>::new(format!("s{service}")), self.round)?;
        let ledger = ledger_of(self.number, self.ledgers);
        out.send(Key::<Ledger>::new(format!("l{ledger}")), self.round)?;
        Ok(())
    }
}

/// Per sender, the last round a receiver took; how many it took in turn,
/// and how many out of turn: kept in the receiver's state, rebuilt by
/// every recovery.
struct Taken {
    last: Vec<u64>,
    in_turn: u64,
    out_of_turn: u64,
}

impl Taken {
    fn new(workflows: u64) -> Taken {
        Taken {
            last: vec![0; usize::try_from(workflows).unwrap()],
            in_turn: 0,
            out_of_turn: 0,
        }
    }
}

/// Answers each request; finishes, once it has taken every request an
/// uninterrupted run sends it, with (taken in turn, taken out of turn).
/// In turn: a round later than the sender's last one to it, and one that
/// the sender asks this service in.
struct Service {
    service: u64,
    services: u64,
    expected: u64,
    taken: Taken,
}

impl Durable for Service {
    const KIND: &'static str = "service";
    /// (service, workflows, rounds, services).
    type Args = (u64, u64, u64, u64);
    /// A request: the sender's round.
    type Message = u64;
    type Done = (u64, u64);

    fn create((service, workflows, rounds, services): (u64, u64, u64, u64)) -> Self {
        let expected = (0..workflows)
            .flat_map(|number| (1..=rounds).map(move |round| (number, round)))
            .filter(|&(number, round)| service_of(number, round, services) == service)
            .count() as u64;
        Service {
            service,
            services,
            expected,
            taken: Taken::new(workflows),
        }
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        let Some(from) = events.sender().map(str::to_owned) else {
            return Ok(());
        };
        for event in events.typed::<Self>() {
            if let Event::Message(round) = event {
                let number = number_of(&from)?;
                let last = &mut self.taken.last[usize::try_from(number)?];
                if round > *last && service_of(number, round, self.services) == self.service {
                    *last = round;
                    self.taken.in_turn += 1;
                    let value = value_of(number, round, self.service);
                    out.send(Key::<Workflow>::new(from.as_str()), (round, value))?;
                } else {
                    // Not answered: the workflow then fails on no reply, or on
                    // a second one, and the outcome says so too.
                    self.taken.out_of_turn += 1;
                }
                if self.taken.in_turn == self.expected {
                    out.finish((self.taken.in_turn, self.taken.out_of_turn));
                }
            }
        }
        Ok(())
    }
}

/// Takes the notes of its workflows, each the sender's next round;
/// finishes, once it has every round of every one of them, with (taken in
/// turn, taken out of turn).
struct Ledger {
    expected: u64,
    taken: Taken,
}

impl Durable for Ledger {
    const KIND: &'static str = "ledger";
    /// (ledger, workflows, rounds, ledgers).
    type Args = (u64, u64, u64, u64);
    /// A note: the sender's round.
    type Message = u64;
    type Done = (u64, u64);

    fn create((ledger, workflows, rounds, ledgers): (u64, u64, u64, u64)) -> Self {
        let senders = (0..workflows)
            .filter(|&number| ledger_of(number, ledgers) == ledger)
            .count() as u64;
        Ledger {
            expected: senders * rounds,
            taken: Taken::new(workflows),
        }
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        let Some(from) = events.sender().map(str::to_owned) else {
            return Ok(());
        };
        for event in events.typed::<Self>() {
            if let Event::Message(round) = event {
                let last = &mut self.taken.last[usize::try_from(number_of(&from)?)?];
                if round == *last + 1 {
                    *last = round;
                    self.taken.in_turn += 1;
                } else {
                    self.taken.out_of_turn += 1;
                }
                if self.taken.in_turn == self.expected {
                    out.finish((self.taken.in_turn, self.taken.out_of_turn));
                }
            }
        }
        Ok(())
    }
}

/// The workflows snapshot their state: a recovery replays at most the
/// records after the latest snapshot (and restores each one's
/// bookkeeping of the replies it took from the snapshot). The receivers
/// do not: the store gives a snapshotted journal back from its snapshot
/// on, and the test reads the receivers' whole journals (every send each
/// took, and when it started).
fn register(durability: &Durability) {
    durability
        .register_with_snapshots::<Workflow>(16)
        .register::<Service>()
        .register::<Ledger>();
}

/// When a receiver is spawned: in the child's incarnation `incarnation`
/// (0 is the first start) or any later one that finds it not in the
/// store, `delay` after the child says it runs.
#[derive(Debug)]
struct Late {
    key: String,
    incarnation: u32,
    delay: Duration,
}

/// The receivers' plan, the same in the test and every child. The first
/// incarnation is killed in its first milliseconds, before it spawns
/// anything: the workflows start in the second (1), and every other
/// service in it too, a few milliseconds after they said they run (sent
/// to, but not through a restart, unless a kill comes first); the other
/// services
/// wait for one to three more restarts, the ledgers for two or more (up
/// to half the kills, so that the load still runs when they have all
/// started: the guard against a load that ends before its kills holds).
/// The later ones' delays are at most half the kill window, so most
/// incarnations due to spawn a receiver do before they are killed; one
/// killed first leaves it to the next.
fn plan(load: &Load) -> Vec<Late> {
    let mut moments = Moments(PLAN_SEED);
    let mut late = Vec::new();
    for service in 0..load.services {
        let (incarnation, delay) = if service % 2 == 0 {
            (1, moments.next_millis(1, 40))
        } else {
            (
                moments.next_millis(2, 5),
                moments.next_millis(20, load.window / 2),
            )
        };
        late.push(Late {
            key: format!("s{service}"),
            incarnation: u32::try_from(incarnation).unwrap(),
            delay: Duration::from_millis(delay),
        });
    }
    for ledger in 0..load.ledgers {
        let incarnation = moments.next_millis(3, u64::from(load.kills / 2) + 1);
        late.push(Late {
            key: format!("l{ledger}"),
            incarnation: u32::try_from(incarnation).unwrap(),
            delay: Duration::from_millis(moments.next_millis(20, load.window / 2)),
        });
    }
    late
}

/// The child: resume what the store holds, start the workflows it lacks,
/// spawn the receivers this incarnation is due to, run until every
/// process ended, say so, and exit.
fn child(path: &str, load: Load, incarnation: u32) {
    let durability = Durability::open(RedbStore::create(path).unwrap());
    register(&durability);
    let scheduler = durability.install(Scheduler::builder().workers(2)).build();
    scheduler.start();
    let recovery = durability.recover(&scheduler).unwrap();
    assert!(recovery.failed.is_empty(), "{:?}", recovery.failed);
    println!(
        "recovered {} in {:?}; {} sends wait for receivers not spawned",
        recovery.resumed.len(),
        recovery.took,
        recovery.waiting
    );
    let (workflows, receivers): (Vec<Spawned>, Vec<Spawned>) = recovery
        .resumed
        .into_iter()
        .partition(|s| s.kind() == Workflow::KIND);
    let mut workflows: Vec<Spawned<(u64, u64)>> = workflows
        .into_iter()
        .map(|s| s.of::<Workflow>().unwrap())
        .collect();
    let mut receivers: Vec<Spawned<(u64, u64)>> = receivers
        .into_iter()
        .map(|s| match s.kind() {
            Service::KIND => s.of::<Service>().unwrap(),
            _ => s.of::<Ledger>().unwrap(),
        })
        .collect();
    for number in 0..load.workflows {
        let key = format!("w{number}");
        if !durability.contains(&key).unwrap() {
            let args = (number, load.rounds, load.services, load.ledgers);
            workflows.push(
                durability
                    .spawn::<Workflow>(&scheduler, &key, args)
                    .unwrap(),
            );
        }
    }
    let running = Instant::now();
    println!("running");
    // The receivers due by now, each once its delay has passed: the
    // workflows started or resumed above have sent to them already.
    let mut due: Vec<Late> = plan(&load)
        .into_iter()
        .filter(|late| late.incarnation <= incarnation)
        .collect();
    due.sort_by_key(|late| late.delay);
    for late in due {
        // Resumed by the recovery, or ended.
        if durability.contains(&late.key).unwrap() {
            continue;
        }
        if let Some(left) = (running + late.delay).checked_duration_since(Instant::now()) {
            std::thread::sleep(left);
        }
        let number: u64 = late.key[1..].parse().unwrap();
        let spawned = if late.key.starts_with('s') {
            let args = (number, load.workflows, load.rounds, load.services);
            durability.spawn::<Service>(&scheduler, &late.key, args)
        } else {
            let args = (number, load.workflows, load.rounds, load.ledgers);
            durability.spawn::<Ledger>(&scheduler, &late.key, args)
        };
        receivers.push(spawned.unwrap());
    }
    for workflow in workflows {
        if let Err(e) = workflow.wait() {
            panic!("a workflow failed: {e}");
        }
    }
    for receiver in receivers {
        if let Err(e) = receiver.wait() {
            panic!("a receiver failed: {e}");
        }
    }
    println!("finished");
    scheduler.shutdown(Duration::from_secs(5));
    drop(durability);
    std::process::exit(0);
}

#[test]
fn late_crash_child() {
    if let Ok(args) = std::env::var(ROLE) {
        let mut parts = args.splitn(3, ';');
        let path = parts.next().unwrap().to_owned();
        let incarnation = parts.next().unwrap().parse().unwrap();
        let load = Load::decode(parts.next().unwrap());
        child(&path, load, incarnation);
    }
}

struct Running {
    child: Child,
    lines: mpsc::Receiver<String>,
}

fn start(path: &std::path::Path, load: &Load, incarnation: u32) -> Running {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "late_crash_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(
            ROLE,
            format!("{};{incarnation};{}", path.display(), load.encode()),
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    Running { child, lines }
}

/// A small deterministic generator (the kill moments and the plan of a
/// run are the same in every run of the test): a linear congruential
/// step, mixed by splitmix64's finaliser (the plan draws from small
/// ranges every other step, where the raw step's draws repeat).
struct Moments(u64);

impl Moments {
    fn next_millis(&mut self, low: u64, high: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        low + (z ^ (z >> 31)) % (high - low)
    }
}

/// Waits for the child to say `running` (it recovered and started what
/// it lacked), keeping what it said before in `said`; false if it did
/// not within a minute.
fn wait_running(run: &Running, said: &mut Vec<String>) -> bool {
    let deadline = Instant::now() + Duration::from_secs(60);
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        match run.lines.recv_timeout(left) {
            Ok(line) if line == "running" => return true,
            Ok(line) => said.push(line),
            Err(_) => return false,
        }
    }
    false
}

/// The number of sends a recovery found waiting for receivers not
/// spawned, from the child's `recovered` line.
fn waiting_sends(line: &str) -> Option<u64> {
    let (_, after) = line.split_once("; ")?;
    after
        .strip_suffix(" sends wait for receivers not spawned")?
        .parse()
        .ok()
}

fn unix_ms(at: SystemTime) -> u64 {
    u64::try_from(at.duration_since(UNIX_EPOCH).unwrap().as_millis()).unwrap()
}

/// What the store holds of an unfinished run, for the failure message:
/// the journals that did not end, and the outbox by receiver.
fn unfinished(path: &std::path::Path) -> String {
    let store = RedbStore::create(path).unwrap();
    let open: Vec<String> = store
        .journals()
        .unwrap()
        .into_iter()
        .filter(|j| !j.ended)
        .map(|j| j.key)
        .collect();
    let mut outbox: HashMap<String, (u64, Vec<(String, u64)>)> = HashMap::new();
    for send in store.outbox().unwrap() {
        let entry = outbox.entry(send.to).or_default();
        entry.0 += 1;
        if entry.1.len() < 5 {
            entry.1.push((send.from, send.seq));
        }
    }
    format!(
        "{} journals did not end (the first: {:?}); the outbox, by receiver \
         (count, first entries): {outbox:?}",
        open.len(),
        &open[..open.len().min(20)]
    )
}

/// Runs the load in a child killed `load.kills` times: the first in the
/// first milliseconds of the first start (the store is being created, no
/// receiver exists), one in four at a random moment from its start
/// (during recovery, often), the others at a random moment up to
/// `load.window` after it says it is running (in the middle of the load,
/// while receivers are being spawned); then a last run to the end, and
/// the checks.
fn late_crash_run(load: Load) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("late_crash.redb");
    let mut moments = Moments(0x5eed);
    let mut killed = 0;
    let mut mid_load = 0;
    // The wall-clock time of each kill, to compare with the records' times.
    let mut kill_ms: Vec<u64> = Vec::new();
    // What each recovery found in the outbox for receivers not spawned.
    let mut waiting: Vec<u64> = Vec::new();
    while killed < load.kills {
        let mut run = start(&path, &load, killed);
        let mut said = Vec::new();
        if killed == 0 {
            std::thread::sleep(Duration::from_millis(moments.next_millis(1, 10)));
        } else if killed % 4 == 0 {
            std::thread::sleep(Duration::from_millis(moments.next_millis(1, 300)));
        } else {
            assert!(
                wait_running(&run, &mut said),
                "the child did not start running"
            );
            std::thread::sleep(Duration::from_millis(moments.next_millis(1, load.window)));
            mid_load += 1;
        }
        if let Some(status) = run.child.try_wait().unwrap() {
            assert!(status.success(), "the child failed: {status}");
            panic!("the load finished after {killed} kills: make it longer");
        }
        kill_ms.push(unix_ms(SystemTime::now()));
        run.child.kill().unwrap(); // SIGKILL
        run.child.wait().unwrap();
        // What it printed before the kill: the reader ends at the pipe's end.
        said.extend(run.lines.iter());
        waiting.extend(said.iter().filter_map(|l| waiting_sends(l)));
        killed += 1;
    }
    assert!(mid_load >= load.kills / 2);
    // The last run goes to the end.
    {
        let mut run = start(&path, &load, killed);
        let deadline = Instant::now() + Duration::from_secs(300);
        let status = loop {
            if let Some(status) = run.child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                run.child.kill().unwrap();
                run.child.wait().unwrap();
                panic!("the last run did not finish: {}", unfinished(&path));
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let said: Vec<String> = run.lines.iter().collect();
        assert!(
            status.success(),
            "the last run failed: {status}; it said {said:?}; {}",
            unfinished(&path)
        );
        assert!(said.iter().any(|l| l == "finished"), "{said:?}");
        eprintln!("after {killed} kills, the last run said {said:?}");
    }
    // Restarts found sends to receivers that did not exist yet: the
    // outbox kept them through the kill.
    eprintln!("sends waiting for receivers not spawned, per recovery: {waiting:?}");
    assert!(
        waiting.iter().any(|&n| n > 0),
        "no recovery found a send waiting for a receiver not spawned"
    );
    check(&path, &load, &kill_ms);
}

/// A (sender, receiver) channel's sends: (number, body), in order.
type Channels = HashMap<(String, String), Vec<(u64, Vec<u8>)>>;

fn encode<T: serde::Serialize>(value: &T) -> Vec<u8> {
    postcard::to_stdvec(value).unwrap()
}

/// Every send an uninterrupted run makes, by channel.
fn uninterrupted(load: &Load) -> Channels {
    let mut channels = Channels::new();
    let mut push = |from: String, to: String, body: Vec<u8>| {
        let sends = channels.entry((from, to)).or_default();
        sends.push((sends.len() as u64 + 1, body));
    };
    for number in 0..load.workflows {
        let workflow = format!("w{number}");
        let ledger = format!("l{}", ledger_of(number, load.ledgers));
        for round in 1..=load.rounds {
            let service = service_of(number, round, load.services);
            let value = value_of(number, round, service);
            push(workflow.clone(), format!("s{service}"), encode(&round));
            push(workflow.clone(), ledger.clone(), encode(&round));
            push(
                format!("s{service}"),
                workflow.clone(),
                encode(&(round, value)),
            );
        }
    }
    channels
}

/// Compares a journal side of each channel with what an uninterrupted run
/// sends: all of it if the journals holding that side are whole, else
/// its tail (a snapshotted journal is read from its snapshot on). `side`
/// picks the key whose journal holds it: the receiver's for what was
/// taken, the sender's for what was released.
fn compare(
    what: &str,
    got: &Channels,
    expected: &Channels,
    whole: &HashMap<String, bool>,
    side: fn(&(String, String)) -> &String,
) {
    for (channel, sends) in expected {
        let got = got.get(channel).map_or(&[][..], Vec::as_slice);
        let expected = if whole[side(channel)] {
            &sends[..]
        } else {
            &sends[sends.len().saturating_sub(got.len())..]
        };
        if got != expected {
            let at = got.iter().zip(expected).position(|(a, b)| a != b);
            panic!(
                "{what} on {channel:?}: {} sends, expected {} (of {}); first difference \
                 at {at:?}: got {:?}, expected {:?}",
                got.len(),
                expected.len(),
                sends.len(),
                at.map(|i| &got[i]),
                at.map(|i| &expected[i]),
            );
        }
    }
    let extra: Vec<_> = got.keys().filter(|c| !expected.contains_key(*c)).collect();
    assert!(
        extra.is_empty(),
        "{what} on channels no run uses: {extra:?}"
    );
}

/// The checks, on the store the last run left.
fn check(path: &std::path::Path, load: &Load, kill_ms: &[u64]) {
    let store = RedbStore::create(path).unwrap();
    let journals: HashMap<String, Journal> = store
        .journals()
        .unwrap()
        .into_iter()
        .map(|j| (j.key.clone(), j))
        .collect();
    let outcome = |key: &str| -> Option<(u64, u64)> {
        let journal = &journals[key];
        assert!(journal.ended, "{key} did not end");
        let last = Record::decode(journal.records.last().unwrap()).unwrap();
        last.effects.into_iter().find_map(|e| match e {
            RecordedEffect::Done(bytes) => Some(postcard::from_bytes(&bytes).unwrap()),
            _ => None,
        })
    };
    // Every workflow ended with the uninterrupted result; when each
    // started is when it sent its first request and note.
    let mut workflow_started_ms = Vec::new();
    for number in 0..load.workflows {
        let key = format!("w{number}");
        let (sum, started_ms) = outcome(&key).unwrap_or_else(|| panic!("{key} failed"));
        assert_eq!(
            sum,
            expected_result(number, load),
            "{key} ended with another result"
        );
        workflow_started_ms.push(started_ms);
    }
    // Each receiver's own count: every send an uninterrupted run makes to
    // it taken in turn, none out of turn.
    let expected = uninterrupted(load);
    let plan = plan(load);
    for late in &plan {
        let to_it: u64 = expected
            .iter()
            .filter(|((_, to), _)| *to == late.key)
            .map(|(_, sends)| sends.len() as u64)
            .sum();
        assert_eq!(
            outcome(&late.key),
            Some((to_it, 0)),
            "{}: (sends taken in turn, sends taken out of turn)",
            late.key
        );
    }

    // The channels, rebuilt from the journals: what each receiver's
    // journal took, and what each sender's released. A receiver's
    // journal is whole (not snapshotted, and the store compacts nothing
    // here): every send it took. A workflow's is read from its latest
    // snapshot on: the tail of its channels.
    let mut taken = Channels::new();
    let mut sent = Channels::new();
    let mut whole = HashMap::new();
    for (key, journal) in &journals {
        whole.insert(key.clone(), journal.first == 0);
        for record in &journal.records {
            let record = Record::decode(record).unwrap();
            for input in record.inputs {
                if let RecordedInput::Message {
                    from: Some((from, seq)),
                    body,
                } = input
                {
                    let channel = (from, key.clone());
                    taken.entry(channel).or_default().push((seq, body));
                }
            }
            for effect in record.effects {
                if let RecordedEffect::Send { to, seq, body } = effect {
                    sent.entry((key.clone(), to)).or_default().push((seq, body));
                }
            }
        }
    }
    for late in &plan {
        assert!(whole[&late.key], "{}'s journal is not whole", late.key);
    }
    compare("taken", &taken, &expected, &whole, |(_, to)| to);
    compare("released", &sent, &expected, &whole, |(from, _)| from);
    assert!(store.outbox().unwrap().is_empty(), "every send was taken");

    // The receivers did start late: each after a workflow had sent to it,
    // none before the kill that ended the incarnation before the one it
    // was due in, and most with a kill between the first send to it and
    // its start (its sends waited in the outbox through a restart).
    let mut restarts_between = Vec::new();
    for late in &plan {
        let first = Record::decode(&journals[&late.key].records[0]).unwrap();
        assert_eq!(first.inputs.first(), Some(&RecordedInput::Start));
        let started = first.at_ms;
        // The earliest first send to it: a workflow sends to its ledger
        // and to the service of its first round when it starts.
        let first_send = (0..load.workflows)
            .filter(|&number| {
                late.key == format!("s{}", service_of(number, 1, load.services))
                    || late.key == format!("l{}", ledger_of(number, load.ledgers))
            })
            .map(|number| workflow_started_ms[number as usize])
            .min()
            .unwrap();
        assert!(
            first_send < started,
            "{} started at {started} ms, before the first send to it (at {first_send} ms)",
            late.key,
        );
        let killed = kill_ms[late.incarnation as usize - 1];
        assert!(
            started > killed,
            "{}, due in incarnation {}, started at {started} ms, before kill {} at {killed} ms",
            late.key,
            late.incarnation,
            late.incarnation
        );
        let between = kill_ms
            .iter()
            .filter(|&&k| first_send < k && k < started)
            .count();
        restarts_between.push((late.key.as_str(), between));
    }
    eprintln!("restarts between the first send to a receiver and its start: {restarts_between:?}");
    let restarted = restarts_between.iter().filter(|(_, n)| *n > 0).count();
    assert!(
        restarted * 2 >= plan.len(),
        "only {restarted} receivers started after a restart that followed a send to them"
    );
}

#[test]
fn four_hundred_workflows_sending_to_receivers_that_start_late_killed_twelve_times_take_each_send_once_in_order(
) {
    late_crash_run(Load {
        workflows: 400,
        rounds: 100,
        services: 8,
        ledgers: 4,
        kills: 12,
        window: 300,
    });
}

#[test]
#[ignore = "the full load: minutes; run with --release"]
fn two_thousand_workflows_sending_to_receivers_that_start_late_killed_fifty_times() {
    late_crash_run(Load {
        workflows: 2_000,
        rounds: 200,
        services: 16,
        ledgers: 8,
        kills: 50,
        window: 150,
    });
}
