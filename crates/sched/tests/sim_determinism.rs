//! A simulated cluster is the same run for the same seed, step for step:
//! three nodes whose processes monitor, link to and ask each other across
//! the network, under every kind of fault, through partitions that end
//! those relations with `NodeDown`. Each seed is run twice in this process
//! and once more in a fresh one (a child process of this test binary): the
//! trace hashes must agree, so nothing that differs between runs (a hash
//! map's random order, a counter shared by the whole program, an address,
//! the wall clock) reaches a simulated run.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sched::command::{Command, CommandId, Completer, Rejected};
use sched::prelude::*;
use sched::sim::{Config, Entry, Fault, Faults, Simulation};

const WORK: CommandId = CommandId(7);
const SEEDS: u64 = 100;
/// Set in the child process: where it writes the hashes it computed.
const OUT: &str = "SCHED_SIM_DETERMINISM_OUT";

/// A member of the cluster: on its first tick it monitors several peers
/// (some on other nodes), links to one on another node, and asks two; on
/// every tick it sends to two peers and yields a command; it answers the
/// requests it gets (holding back some, which then go unanswered); one in
/// three fails at the end rather than finishing.
struct Member {
    index: usize,
    /// What it was told, with the ids the engine gave: every member's
    /// lines, in the order they happened.
    log: Arc<Mutex<Vec<String>>>,
    peers: Arc<Mutex<Vec<Pid>>>,
    ticks: u32,
    rounds: u32,
}

impl Member {
    fn relate(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        out.trap_exits(true);
        let peers = self.peers.lock().unwrap().clone();
        let n = peers.len();
        let me = out.pid();
        for k in [1, 3, 5, 8] {
            let peer = peers[(self.index + k) % n];
            if peer != me {
                out.monitor(peer);
            }
        }
        let remote = peers
            .iter()
            .copied()
            .cycle()
            .skip(self.index + 1)
            .take(n)
            .find(|p| p.node() != me.node())
            .expect("a peer on another node");
        out.link(remote);
        for k in [2, 7] {
            let peer = peers[(self.index + k) % n];
            let question = (self.index * 10 + k) as u64;
            out.ask(
                peer,
                Box::new(question) as Payload,
                Duration::from_millis(20),
            )?;
        }
        Ok(())
    }
}

impl Process for Member {
    type Done = Payload;
    fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        out.set_timer(Duration::from_millis(1), Tag(0));
        Ok(())
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            match event {
                Event::Timer { .. } => {
                    self.ticks += 1;
                    if self.ticks == 1 {
                        self.relate(out)?;
                    }
                    if self.ticks >= self.rounds {
                        if self.index.is_multiple_of(3) {
                            return Err("the member fails at its end".into());
                        }
                        out.finish(());
                        return Ok(());
                    }
                    let peers = self.peers.lock().unwrap().clone();
                    let me = out.pid();
                    for k in [1, 4] {
                        let peer = peers[(self.index + k + self.ticks as usize) % peers.len()];
                        if peer != me {
                            let _ = out.send(peer, u64::from(self.ticks));
                        }
                    }
                    out.yield_command(WORK, Tag(u64::from(self.ticks)), Box::new(self.ticks));
                    out.set_timer(Duration::from_millis(1 + u64::from(self.ticks % 3)), Tag(0));
                }
                Event::Request(request) => {
                    if let Some(n) = request.payload::<u64>().copied() {
                        if !n.is_multiple_of(5) {
                            request.reply(n * 2);
                        }
                    }
                }
                Event::Cancel => {
                    out.finish(());
                    return Ok(());
                }
                Event::Down(down) => self.log.lock().unwrap().push(format!(
                    "{} down {} {:?} {:?}",
                    out.pid(),
                    down.pid,
                    down.monitor,
                    down.reason
                )),
                Event::Reply { id, result, .. } => self.log.lock().unwrap().push(format!(
                    "{} reply {id:?} {:?}",
                    out.pid(),
                    result.err()
                )),
                Event::Exit { pid, reason, .. } => self
                    .log
                    .lock()
                    .unwrap()
                    .push(format!("{} exit {pid} {reason:?}", out.pid())),
                _ => {}
            }
        }
        Ok(())
    }
}

/// Completes after a virtual delay the command chooses.
fn work(command: Command, done: Completer) -> Result<(), Rejected> {
    let ticks = *command.data::<u32>().unwrap_or(&0);
    let _ = done.complete_after(
        Duration::from_micros(300 * u64::from(ticks % 4)),
        Box::new(()),
    );
    Ok(())
}

/// One run of the cluster from `seed`: its trace, and the hash of what
/// the members were told (with the monitor and ask ids they saw).
fn cluster(seed: u64) -> (sched::sim::Trace, u64) {
    let faults = Faults::none()
        .delay_messages(0.1, Duration::from_millis(3))
        .lose_messages(0.03)
        .duplicate_messages::<u64>(0.03)
        .delay_completions(0.1, Duration::from_millis(2))
        .lose_completions(0.03)
        .fail_handlers(0.03)
        .panic_handlers(0.02)
        .crash_steps(0.003);
    let config = Config::seed(seed)
        .workers(2)
        .faults(faults)
        .network_latency(Duration::from_millis(1));
    let builders = [1, 2, 3].map(|node| Scheduler::builder().node(node).handler(WORK, work));
    let mut sim = Simulation::cluster(config, builders).expect("three distinct nodes");
    let peers = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::new(Mutex::new(Vec::new()));
    for index in 0..18 {
        let node = 1 + (index % 3) as u32;
        let member = Member {
            index,
            log: Arc::clone(&log),
            peers: Arc::clone(&peers),
            ticks: 0,
            rounds: 12 + (index % 5) as u32,
        };
        let pid = sim.node(node).unwrap().spawn(member).unwrap().pid();
        peers.lock().unwrap().push(pid);
    }
    sim.run_for(Duration::from_millis(6)).expect("runs");
    sim.partition_for(&[3], &[1, 2], Duration::from_millis(8));
    sim.run_for(Duration::from_millis(10)).expect("runs");
    sim.partition(&[1], &[2]);
    sim.run_for(Duration::from_millis(5)).expect("runs");
    sim.heal();
    sim.run().expect("quiet");
    let lines = log.lock().unwrap().join("\n");
    (sim.trace(), fnv(lines.as_bytes()))
}

/// FNV-1a: a hash that is the same in every process (std's is seeded).
fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The hashes of every seed's run: its trace's, and its members' lines'.
fn hashes() -> BTreeMap<u64, (u64, u64)> {
    (0..SEEDS)
        .map(|seed| {
            let (trace, told) = cluster(seed);
            (seed, (trace.hash(), told))
        })
        .collect()
}

#[test]
fn a_cluster_with_partitions_relations_and_faults_runs_the_same_for_the_same_seed() {
    if let Some(path) = std::env::var_os(OUT) {
        // The fresh process: computes and hands back, nothing more.
        let lines: Vec<String> = hashes()
            .iter()
            .map(|(seed, (trace, told))| format!("{seed} {trace} {told}"))
            .collect();
        std::fs::write(path, lines.join("\n")).unwrap();
        return;
    }

    // What the scenario exercises, on one seed: relations across nodes
    // ended by partitions, and faults of every kind.
    let (trace, _) = cluster(1);
    let entries = trace.entries();
    let downs = entries
        .iter()
        .filter(|e| format!("{e:?}").contains("NodeDown"))
        .count();
    assert!(downs > 0, "no relation ended with NodeDown");
    let faults: std::collections::HashSet<_> = entries
        .iter()
        .filter_map(|e| match e {
            Entry::Fault(fault) => Some(std::mem::discriminant(fault)),
            _ => None,
        })
        .collect();
    assert!(faults.len() >= 6, "only {} kinds of fault", faults.len());
    assert!(entries
        .iter()
        .any(|e| matches!(e, Entry::Fault(Fault::Unreachable { .. }))));

    let first = hashes();
    let second = hashes();
    for (seed, hash) in &first {
        assert_eq!(second[seed], *hash, "seed {seed}: two runs in one process");
    }
    let distinct: std::collections::HashSet<_> = first.values().collect();
    assert!(
        distinct.len() > 90,
        "seeds explore: {} hashes",
        distinct.len()
    );

    // And in a fresh process: nothing this process did first (ids handed
    // out, hash seeds drawn) may change a run.
    let out = std::env::temp_dir().join(format!("sched-sim-hashes-{}", std::process::id()));
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_cluster_with_partitions_relations_and_faults_runs_the_same_for_the_same_seed",
            "--test-threads=1",
        ])
        .env(OUT, &out)
        .stdout(std::process::Stdio::null())
        .status()
        .expect("the test binary runs again");
    assert!(status.success(), "the fresh process failed");
    let fresh = std::fs::read_to_string(&out).unwrap();
    let _ = std::fs::remove_file(&out);
    let fresh: BTreeMap<u64, (u64, u64)> = fresh
        .lines()
        .map(|line| {
            let numbers: Vec<u64> = line.split(' ').map(|n| n.parse().unwrap()).collect();
            (numbers[0], (numbers[1], numbers[2]))
        })
        .collect();
    assert_eq!(fresh.len(), first.len());
    for (seed, hash) in &first {
        assert_eq!(fresh[seed], *hash, "seed {seed}: a fresh process");
    }
}

/// Yields one command and finishes when it completes.
struct Waits;

impl Process for Waits {
    type Done = Payload;
    fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        out.yield_command(HELD, Tag(1), Box::new(()));
        Ok(())
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            if let Event::Completion { .. } = event {
                out.finish(());
            }
        }
        Ok(())
    }
}

const HELD: CommandId = CommandId(8);

/// One run in which the test's own thread (no worker of the engine)
/// completes held commands after a delay: the timers it sets must go to
/// the same wheels, and so fire on the same workers, in every run.
fn completed_from_outside(seed: u64) -> u64 {
    let held: Arc<Mutex<Vec<Completer>>> = Arc::default();
    let keep = Arc::clone(&held);
    let mut sim = Scheduler::builder()
        .handler(HELD, move |_: Command, done: Completer| {
            keep.lock().unwrap().push(done);
            Ok::<(), Rejected>(())
        })
        .simulation(Config::seed(seed).workers(4));
    // Not a multiple of the workers: a per-thread rotation would start
    // the next run elsewhere.
    for _ in 0..15 {
        sim.context().spawn(Waits).unwrap();
    }
    sim.run_for(Duration::from_millis(1)).expect("runs");
    let held: Vec<Completer> = std::mem::take(&mut *held.lock().unwrap());
    assert_eq!(held.len(), 15, "every command reached its handler");
    for (i, done) in held.into_iter().enumerate() {
        let delay = Duration::from_micros(100 * (i as u64 % 3 + 1));
        done.complete_after(delay, Box::new(())).unwrap();
    }
    sim.run().expect("quiet");
    sim.trace().hash()
}

#[test]
fn timers_set_from_outside_the_workers_land_alike_in_every_run() {
    for seed in 0..10 {
        let first = completed_from_outside(seed);
        assert_eq!(completed_from_outside(seed), first, "seed {seed}");
    }
}
