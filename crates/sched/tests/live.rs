//! The live endpoint (feature `live`): what a snapshot holds, the wire
//! format both sides share, and clients that misbehave.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sched::live::{
    Client, Figure, Kind, Request, Sampler, Snapshot, Unit, MAX_CONNECTIONS, VERSION,
};
use sched::prelude::*;
use sched::process::Group;

const WAIT: Duration = Duration::from_secs(10);

/// Whether the engine counts mailbox depths (`sched`'s default feature
/// `introspection`; CI tests with every feature on).
const INTROSPECTION: bool = cfg!(feature = "introspection");

/// Takes `turns` steps, continuing itself, then waits until cancelled.
struct Steps {
    turns: u32,
}

impl Process for Steps {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            if let Event::Cancel = event {
                out.finish(());
                return Ok(());
            }
        }
        if self.turns > 0 {
            self.turns -= 1;
            out.continue_();
        }
        Ok(())
    }
}

/// Waits until the workers have taken `target` steps in all.
fn wait_for_steps(scheduler: &Scheduler, target: u64) {
    let deadline = Instant::now() + WAIT;
    while scheduler.stats().totals().steps < target {
        assert!(
            Instant::now() < deadline,
            "steps stalled at {:?}",
            scheduler.stats()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_snapshot_holds_the_counters_histograms_and_top_processes_by_steps() {
    let scheduler = Arc::new(Scheduler::builder().workers(2).histograms(true).build());
    scheduler.start();
    let mut expected = 0;
    for (name, turns) in [("small", 10), ("big", 300), ("medium", 100)] {
        let pid = scheduler.spawn(Steps { turns }).unwrap().pid();
        scheduler.context().register_name(name, pid).unwrap();
        expected += u64::from(turns) + 1;
    }
    wait_for_steps(&scheduler, expected);

    let endpoint = sched::live::serve(Arc::clone(&scheduler), "127.0.0.1:0").unwrap();
    let mut client = Client::connect(endpoint.local_addr(), WAIT).unwrap();
    let snapshot = client.snapshot(2).unwrap();
    assert_eq!(snapshot.version, VERSION);
    assert_eq!(snapshot.workers.len(), 2);
    assert_eq!(
        snapshot.workers.iter().map(|w| w.steps).sum::<u64>(),
        expected
    );
    assert_eq!(snapshot.live_processes, 3);
    let histograms = snapshot.histograms.as_ref().expect("histograms are on");
    let step = histograms.iter().find(|h| h.name == "step").unwrap();
    assert_eq!(step.count, expected);
    assert!(step.p50_ns <= step.p99_ns && step.p99_ns <= step.max_ns && step.max_ns > 0);
    assert!(histograms.iter().any(|h| h.name == "timer_lateness"));

    // Top two by steps, most first; a connection's first snapshot ranks
    // by all the steps taken.
    let top: Vec<(&[String], u64)> = snapshot
        .top_by_steps
        .iter()
        .map(|e| (e.names.as_slice(), e.recent_steps))
        .collect();
    assert_eq!(
        top,
        [
            (&["big".to_string()][..], 301),
            (&["medium".to_string()][..], 101)
        ]
    );
    assert_eq!(snapshot.top_by_steps[0].steps, 301);
    assert_eq!(snapshot.top_by_steps[0].state, "idle");

    // The next snapshot on the same connection ranks by steps since the
    // previous one: none were taken.
    let second = client.snapshot(2).unwrap();
    assert!(second.elapsed_ns > snapshot.elapsed_ns);
    assert_eq!(second.top_by_steps.len(), 2);
    assert!(second.top_by_steps.iter().all(|e| e.recent_steps == 0));

    // Mailbox depths are not counted unless the builder asks: the
    // snapshot says so, and the list is empty.
    assert!(!second.reports_mailbox_depth);
    {
        assert!(second.top_by_mailbox.is_empty());
        assert!(second
            .top_by_steps
            .iter()
            .all(|e| e.mailbox_depth.is_none()));
    }
    if !second.reports_long_steps {
        assert!(second.top_by_long_steps.is_empty());
    }

    drop(client);
    endpoint.stop();
    scheduler.shutdown(WAIT);
}

/// Joins `group` in `init`, then does what a [`Gate`] does: blocks its
/// first step until told, and reads whatever comes after.
struct Tenant {
    group: Group,
    gate: Gate,
}

impl Process for Tenant {
    type Done = Payload;
    fn init(&mut self, cx: &InitContext, _: &str, _: Payload) -> Result<(), InitError> {
        cx.set_group(self.group);
        Ok(())
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        self.gate.step(events, out)
    }
}

/// Joins `group` in `init`, then takes `turns` steps like [`Steps`].
struct GroupSteps {
    group: Group,
    steps: Steps,
}

impl Process for GroupSteps {
    type Done = Payload;
    fn init(&mut self, cx: &InitContext, _: &str, _: Payload) -> Result<(), InitError> {
        cx.set_group(self.group);
        Ok(())
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        self.steps.step(events, out)
    }
}

#[test]
fn declared_groups_are_reported_with_their_ready_processes_and_step_time() {
    let scheduler = Arc::new(Scheduler::builder().workers(1).group("batch", 4).build());
    scheduler.start();
    let batch = scheduler.context().group("batch").expect("declared");
    let endpoint = sched::live::serve(Arc::clone(&scheduler), "127.0.0.1:0").unwrap();
    let mut client = Client::connect(endpoint.local_addr(), WAIT).unwrap();

    // The only worker blocks in a batch process's first step: the three
    // batch processes spawned meanwhile wait, ready, in the global queue.
    let (open, gate) = std::sync::mpsc::channel();
    let (started, has_started) = std::sync::mpsc::channel();
    let tenant = scheduler
        .spawn(Tenant {
            group: batch,
            gate: Gate {
                started,
                open: Some(gate),
            },
        })
        .unwrap()
        .pid();
    has_started.recv_timeout(WAIT).unwrap();
    let steppers: Vec<Pid> = (0..3)
        .map(|_| {
            let steps = Steps { turns: 50 };
            let process = GroupSteps {
                group: batch,
                steps,
            };
            scheduler.spawn(process).unwrap().pid()
        })
        .collect();
    let blocked = client.snapshot(1).unwrap();
    let groups: Vec<(&str, u32, u64)> = blocked
        .groups
        .iter()
        .map(|g| (g.name.as_str(), g.weight, g.ready))
        .collect();
    assert_eq!(groups, [("default", 1, 0), ("batch", 4, 3)], "{blocked:#?}");
    assert!(blocked.groups.iter().all(|g| g.busy_ns.is_some()));

    // Once they have run, batch has had the step time and nothing waits.
    open.send(()).unwrap();
    wait_for_steps(&scheduler, 1 + 3 * 51);
    let ran = client.snapshot(1).unwrap();
    let [default, batch] = &ran.groups[..] else {
        panic!("two groups: {ran:#?}")
    };
    assert_eq!(
        (batch.name.as_str(), batch.weight, batch.ready),
        ("batch", 4, 0)
    );
    let busy = batch.busy_ns.expect("measured with groups declared");
    assert!(busy > 0, "{ran:#?}");
    assert!(busy > blocked.groups[1].busy_ns.unwrap(), "{ran:#?}");
    assert_eq!(default.busy_ns, Some(0), "no default-group process ran");

    // Without declared groups: the default group alone, unmeasured.
    let plain = Scheduler::builder().workers(1).build();
    let alone = Sampler::new().sample(plain.context(), 1).groups;
    assert_eq!(alone.len(), 1);
    assert_eq!(alone[0].name, "default");
    assert_eq!(alone[0].busy_ns, None);

    for pid in steppers.into_iter().chain([tenant]) {
        scheduler.terminate(pid).unwrap();
    }
    drop(client);
    endpoint.stop();
    scheduler.shutdown(WAIT);
}

#[test]
fn with_histograms_each_group_reports_the_schedule_latency_of_its_own_steps() {
    let scheduler = Arc::new(
        Scheduler::builder()
            .workers(2)
            .group("batch", 4)
            .histograms(true)
            .build(),
    );
    scheduler.start();
    let batch = scheduler.context().group("batch").expect("declared");
    // Each takes `turns + 1` steps (its first, then one per turn), every
    // one made ready by a spawn or a continue: a schedule latency each.
    let mut pids = Vec::new();
    for (group, turns) in [(Group::DEFAULT, 10), (batch, 50), (batch, 30)] {
        let steps = Steps { turns };
        pids.push(scheduler.spawn(GroupSteps { group, steps }).unwrap().pid());
    }
    wait_for_steps(&scheduler, 11 + 51 + 31);
    let endpoint = sched::live::serve(Arc::clone(&scheduler), "127.0.0.1:0").unwrap();
    let mut client = Client::connect(endpoint.local_addr(), WAIT).unwrap();
    let snapshot = client.snapshot(1).unwrap();
    let counts: Vec<(&str, Option<u64>)> = snapshot
        .groups
        .iter()
        .map(|g| {
            (
                g.name.as_str(),
                g.schedule_latency.as_ref().map(|h| h.count),
            )
        })
        .collect();
    assert_eq!(
        counts,
        [("default", Some(11)), ("batch", Some(82))],
        "{snapshot:#?}"
    );
    let latency = snapshot.groups[1].schedule_latency.as_ref().unwrap();
    assert_eq!(latency.name, "schedule_latency");
    assert!(latency.p50_ns <= latency.p99_ns && latency.p99_ns <= latency.max_ns);
    let overall = snapshot.histograms.as_ref().expect("histograms are on");
    let overall = overall
        .iter()
        .find(|h| h.name == "schedule_latency")
        .unwrap();
    assert_eq!(overall.count, 11 + 82);

    // On the wire and back; and a group from an endpoint that predates
    // the field reads with none.
    let line = snapshot.to_json_line();
    assert!(line.contains(r#""schedule_latency":{"#), "{line}");
    assert_eq!(Snapshot::from_json_line(&line).unwrap(), snapshot);
    let old = r#"{"version":1,"groups":[{"name":"default","weight":1,"ready":0,"busy_ns":null}]}"#;
    assert_eq!(
        Snapshot::from_json_line(old).unwrap().groups[0].schedule_latency,
        None
    );

    // Histograms on but no groups declared, or groups without histograms:
    // no group has one.
    let plain = Scheduler::builder().workers(1).histograms(true).build();
    let alone = Sampler::new().sample(plain.context(), 1).groups;
    assert_eq!(alone.len(), 1);
    assert_eq!(alone[0].schedule_latency, None);
    let unmeasured = Scheduler::builder().workers(1).group("batch", 4).build();
    let groups = Sampler::new().sample(unmeasured.context(), 1).groups;
    assert!(
        groups.iter().all(|g| g.schedule_latency.is_none()),
        "{groups:?}"
    );

    for pid in pids {
        scheduler.terminate(pid).unwrap();
    }
    drop(client);
    endpoint.stop();
    scheduler.shutdown(WAIT);
}

/// Says when its first step started and blocks it until told, so that
/// messages pile up in its mailbox; then reads whatever comes.
struct Gate {
    started: std::sync::mpsc::Sender<()>,
    open: Option<std::sync::mpsc::Receiver<()>>,
}

impl Process for Gate {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
        if let Some(open) = self.open.take() {
            self.started.send(())?;
            open.recv()?;
        }
        events.for_each(drop);
        Ok(())
    }
}

/// Takes `naps` steps of `nap` each, then waits.
struct Napper {
    naps: u32,
    nap: Duration,
}

impl Process for Napper {
    type Done = Payload;
    fn step(&mut self, _: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        if self.naps > 0 {
            self.naps -= 1;
            std::thread::sleep(self.nap);
            out.continue_();
        }
        Ok(())
    }
}

#[test]
fn a_growing_mailbox_and_long_steps_top_their_lists() {
    let scheduler = Arc::new(
        Scheduler::builder()
            .workers(2)
            .histograms(true)
            .count_mailboxes(true)
            .long_step_threshold(Some(Duration::from_millis(10)))
            .build(),
    );
    scheduler.start();
    let (open, gate) = std::sync::mpsc::channel();
    let (started, has_started) = std::sync::mpsc::channel();
    let hoarder = scheduler
        .spawn(Gate {
            started,
            open: Some(gate),
        })
        .unwrap()
        .pid();
    scheduler
        .context()
        .register_name("hoarder", hoarder)
        .unwrap();
    // Its first step runs and waits on the gate: what comes now waits in
    // its mailbox.
    has_started.recv_timeout(WAIT).unwrap();
    for n in 1..=500u32 {
        scheduler.send(hoarder, n).unwrap();
    }
    let sleeper = scheduler
        .spawn(Napper {
            naps: 3,
            nap: Duration::from_millis(40),
        })
        .unwrap()
        .pid();
    scheduler
        .context()
        .register_name("sleeper", sleeper)
        .unwrap();

    let mut sampler = Sampler::new();
    let deadline = Instant::now() + WAIT;
    let snapshot = loop {
        let snapshot = sampler.sample(scheduler.context(), 10);
        let sleeper_done = snapshot
            .top_by_long_steps
            .iter()
            .any(|e| e.names == ["sleeper"] && e.long_steps == Some(3));
        if sleeper_done && !snapshot.top_by_mailbox.is_empty() {
            break snapshot;
        }
        assert!(Instant::now() < deadline, "{snapshot:#?}");
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(snapshot.reports_long_steps);
    assert!(snapshot.reports_mailbox_depth);
    // Only the hoarder has mail waiting: 500 messages.
    assert_eq!(snapshot.top_by_mailbox.len(), 1, "{snapshot:#?}");
    let first = &snapshot.top_by_mailbox[0];
    assert_eq!(first.names, ["hoarder"]);
    assert_eq!(first.mailbox_depth, Some(500));
    assert_eq!(first.state, "running");
    if INTROSPECTION {
        assert!(
            first
                .type_name
                .as_deref()
                .is_some_and(|t| t.contains("Gate")),
            "{first:?}"
        );
        assert!(first.since_last_step_ns.is_some());
    } else {
        // Not published: absent, not zero.
        assert!(first.type_name.is_none());
        assert!(first.since_last_step_ns.is_none());
    }
    // Three long steps for the sleeper, at most one (still running) for the hoarder.
    assert_eq!(snapshot.top_by_long_steps[0].names, ["sleeper"]);
    assert!(snapshot.top_by_long_steps.len() <= 2);

    let names: Vec<&str> = snapshot
        .histograms
        .as_ref()
        .unwrap()
        .iter()
        .map(|h| h.name.as_str())
        .collect();
    assert_eq!(
        names,
        ["step", "timer_lateness", "schedule_latency", "yield_wait"]
    );
    let busy: u64 = snapshot.workers.iter().map(|w| w.busy_ns.unwrap()).sum();
    // The third long step is reported while it runs; the first two count.
    assert!(
        busy >= 80_000_000,
        "the sleeper's first 2 × 40 ms are busy time: {busy}"
    );

    open.send(()).unwrap();
    for pid in [hoarder, sleeper] {
        scheduler.terminate(pid).unwrap();
    }
    scheduler.shutdown(WAIT);
}

#[test]
fn without_histograms_they_are_null_on_the_wire() {
    let scheduler = Scheduler::builder().workers(1).build();
    let snapshot = Sampler::new().sample(scheduler.context(), 10);
    assert!(snapshot.histograms.is_none());
    let line = snapshot.to_json_line();
    assert!(line.contains(r#""histograms":null"#), "{line}");
    assert!(line.ends_with('\n') && !line[..line.len() - 1].contains('\n'));
    assert_eq!(Snapshot::from_json_line(&line).unwrap(), snapshot);
}

#[test]
fn a_reader_ignores_unknown_fields_and_defaults_missing_ones() {
    let line =
        r#"{"version":1,"elapsed_ns":5,"workers":[{"steps":3,"a_new_field":true}],"another":[1]}"#;
    let snapshot = Snapshot::from_json_line(line).unwrap();
    assert_eq!(snapshot.workers[0].steps, 3);
    assert_eq!(snapshot.workers[0].busy_ns, None);
    assert!(snapshot.top_by_steps.is_empty());
    assert!(snapshot.histograms.is_none());
}

#[test]
fn an_empty_request_line_asks_for_the_defaults() {
    let scheduler = Arc::new(Scheduler::builder().workers(1).build());
    let endpoint = sched::live::serve(Arc::clone(&scheduler), "127.0.0.1:0").unwrap();
    let mut stream = TcpStream::connect(endpoint.local_addr()).unwrap();
    stream.set_read_timeout(Some(WAIT)).unwrap();
    stream.write_all(b"\n{}\n").unwrap();
    let mut reader = BufReader::new(stream);
    for _ in 0..2 {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        assert_eq!(Snapshot::from_json_line(&line).unwrap().version, VERSION);
    }
    assert_eq!(Request::default().top(), sched::live::DEFAULT_TOP);
}

#[test]
fn a_bad_request_gets_an_error_line_and_the_connection_closes() {
    let scheduler = Arc::new(Scheduler::builder().workers(1).build());
    let endpoint = sched::live::serve(Arc::clone(&scheduler), "127.0.0.1:0").unwrap();
    let mut stream = TcpStream::connect(endpoint.local_addr()).unwrap();
    stream.set_read_timeout(Some(WAIT)).unwrap();
    stream.write_all(b"GET / HTTP/1.1\r\n").unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with(r#"{"error":"bad request"#), "{answer}");
    let error = Snapshot::from_json_line(&answer).unwrap_err();
    assert!(error.to_string().contains("refused"), "{error}");
}

#[test]
fn an_endless_request_line_closes_the_connection() {
    let scheduler = Arc::new(Scheduler::builder().workers(1).build());
    let endpoint = sched::live::serve(Arc::clone(&scheduler), "127.0.0.1:0").unwrap();
    let mut stream = TcpStream::connect(endpoint.local_addr()).unwrap();
    stream.set_read_timeout(Some(WAIT)).unwrap();
    let junk = vec![b'x'; sched::live::MAX_REQUEST_LEN + 10];
    // The server may close before reading it all.
    let _ = stream.write_all(&junk);
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    assert!(answer.contains("too long"), "{answer}");
}

#[test]
fn connections_beyond_the_cap_are_refused_and_a_slot_frees_when_one_leaves() {
    let scheduler = Arc::new(Scheduler::builder().workers(1).build());
    let endpoint = sched::live::serve(Arc::clone(&scheduler), "127.0.0.1:0").unwrap();
    let addr = endpoint.local_addr();
    let mut held: Vec<Client> = (0..MAX_CONNECTIONS)
        .map(|_| {
            let mut client = Client::connect(addr, WAIT).unwrap();
            client.snapshot(1).unwrap(); // served: it holds a slot
            client
        })
        .collect();
    let mut extra = Client::connect(addr, WAIT).unwrap();
    let refused = extra.snapshot(1).unwrap_err();
    assert!(
        refused.to_string().contains("too many connections"),
        "{refused}"
    );

    // One leaves; its slot is reused once its thread has noticed.
    drop(held.pop());
    let deadline = Instant::now() + WAIT;
    loop {
        let mut again = Client::connect(addr, WAIT).unwrap();
        match again.snapshot(1) {
            Ok(snapshot) => {
                assert_eq!(snapshot.version, VERSION);
                break;
            }
            Err(e) => {
                assert!(Instant::now() < deadline, "no slot freed: {e}");
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
    // The others are still served.
    for client in &mut held {
        client.snapshot(1).unwrap();
    }
}

/// A client that asks for big snapshots and never reads them blocks only
/// its own connection: the engine runs, another client is served quickly,
/// the stuck connection is closed after the write timeout, and stopping
/// the endpoint does not wait for it.
#[test]
fn a_client_that_never_reads_holds_up_nobody() {
    let scheduler = Arc::new(Scheduler::builder().workers(2).build());
    scheduler.start();
    // Enough processes for big snapshots (top 1000 of them, a few hundred
    // kilobytes a line).
    let mut running = Vec::new();
    for _ in 0..1500 {
        running.push(scheduler.spawn(Steps { turns: 1 }).unwrap());
    }
    let endpoint = sched::live::serve(Arc::clone(&scheduler), "127.0.0.1:0").unwrap();
    let addr = endpoint.local_addr();

    let mut hostile = TcpStream::connect(addr).unwrap();
    hostile
        .set_write_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let pump = std::thread::spawn(move || {
        // Keeps asking, never reads, until the server gives up on it.
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(20) {
            if hostile.write_all(b"{\"top\":1000}\n").is_err() {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        hostile
    });

    std::thread::sleep(Duration::from_secs(2));
    let mut good = Client::connect(addr, WAIT).unwrap();
    for _ in 0..5 {
        let asked = Instant::now();
        let snapshot = good.snapshot(5).unwrap();
        assert!(
            asked.elapsed() < Duration::from_secs(1),
            "{:?}",
            asked.elapsed()
        );
        assert_eq!(snapshot.live_processes, 1500);
    }
    // The engine is not held up either.
    let mut done = scheduler.spawn(Steps { turns: 0 }).unwrap();
    scheduler.context().cancel(done.pid()).unwrap();
    done.wait_timeout(WAIT).expect("the engine runs");

    let stopping = Instant::now();
    endpoint.stop();
    assert!(
        stopping.elapsed() < Duration::from_secs(2),
        "{:?}",
        stopping.elapsed()
    );
    let hostile = pump.join().unwrap();
    let _ = hostile.shutdown(Shutdown::Both);
    scheduler.shutdown(WAIT);
}

#[test]
fn stopping_closes_the_listener_and_every_connection() {
    let scheduler = Arc::new(Scheduler::builder().workers(1).build());
    let endpoint = sched::live::serve(Arc::clone(&scheduler), "127.0.0.1:0").unwrap();
    let addr = endpoint.local_addr();
    let mut client = Client::connect(addr, WAIT).unwrap();
    client.snapshot(1).unwrap();
    endpoint.stop();
    assert!(client.snapshot(1).is_err());
    assert!(TcpStream::connect(addr).is_err());
    // The endpoint held the scheduler; it let go of it.
    assert_eq!(Arc::strong_count(&scheduler), 1);
}

/// A library's counters, as the figures callback reads them.
#[derive(Default)]
struct Journal {
    records: std::sync::atomic::AtomicU64,
    bytes: std::sync::atomic::AtomicU64,
    running: std::sync::atomic::AtomicU64,
}

impl Journal {
    fn figures(&self) -> Vec<Figure> {
        use std::sync::atomic::Ordering::Relaxed;
        vec![
            Figure::counter(
                "journal",
                "records",
                self.records.load(Relaxed) as f64,
                Unit::Count,
            ),
            Figure::counter(
                "journal",
                "bytes",
                self.bytes.load(Relaxed) as f64,
                Unit::Bytes,
            ),
            Figure::gauge("journal", "sync p99", 0.0042, Unit::Seconds),
            Figure::gauge(
                "journal",
                "running",
                self.running.load(Relaxed) as f64,
                Unit::Count,
            ),
            Figure::gauge("relay", "queued", 3.0, Unit::Count),
        ]
    }
}

#[test]
fn figures_of_other_libraries_are_served_beside_the_engines() {
    use std::sync::atomic::Ordering::Relaxed;
    let scheduler = Arc::new(Scheduler::builder().workers(2).build());
    scheduler.start();
    let journal = Arc::new(Journal::default());
    let read = Arc::clone(&journal);
    let endpoint = sched::live::serve_with(Arc::clone(&scheduler), "127.0.0.1:0", move || {
        read.figures()
    })
    .unwrap();
    let mut client = Client::connect(endpoint.local_addr(), WAIT).unwrap();

    journal.records.store(10, Relaxed);
    journal.bytes.store(4_096, Relaxed);
    journal.running.store(2, Relaxed);
    let first = client.snapshot(5).unwrap();
    // The engine's part is all there.
    assert_eq!(first.version, VERSION);
    assert_eq!(first.workers.len(), 2);
    // The figures, in the callback's order, with their units and kinds.
    let figures: Vec<(&str, &str, f64, Unit, Kind)> = first
        .figures
        .iter()
        .map(|f| (f.source.as_str(), f.name.as_str(), f.value, f.unit, f.kind))
        .collect();
    assert_eq!(
        figures,
        [
            ("journal", "records", 10.0, Unit::Count, Kind::Counter),
            ("journal", "bytes", 4_096.0, Unit::Bytes, Kind::Counter),
            ("journal", "sync p99", 0.0042, Unit::Seconds, Kind::Gauge),
            ("journal", "running", 2.0, Unit::Count, Kind::Gauge),
            ("relay", "queued", 3.0, Unit::Count, Kind::Gauge),
        ]
    );

    // Called again for each snapshot: the next one has the new values.
    journal.records.store(25, Relaxed);
    journal.running.store(0, Relaxed);
    let second = client.snapshot(5).unwrap();
    assert_eq!(second.figures[0].value, 25.0);
    assert_eq!(second.figures[3].value, 0.0);

    // Every connection gets them; on the wire they are one JSON list.
    let mut stream = TcpStream::connect(endpoint.local_addr()).unwrap();
    stream.set_read_timeout(Some(WAIT)).unwrap();
    stream.write_all(b"{}\n").unwrap();
    let mut line = String::new();
    BufReader::new(stream).read_line(&mut line).unwrap();
    assert!(
        line.contains(
            r#"{"source":"journal","name":"records","value":25.0,"unit":"count","kind":"counter"}"#
        ),
        "{line}"
    );
    assert_eq!(Snapshot::from_json_line(&line).unwrap().figures.len(), 5);

    // A plain `serve` has none.
    let plain = sched::live::serve(Arc::clone(&scheduler), "127.0.0.1:0").unwrap();
    let none = Client::connect(plain.local_addr(), WAIT)
        .unwrap()
        .snapshot(1)
        .unwrap();
    assert!(none.figures.is_empty());

    drop(client);
    plain.stop();
    endpoint.stop();
    // The endpoint let go of the callback (and what it held).
    assert_eq!(Arc::strong_count(&journal), 1);
    scheduler.shutdown(WAIT);
}

/// A `tracing` writer into a buffer the test reads.
#[derive(Clone, Default)]
struct Logs(Arc<std::sync::Mutex<Vec<u8>>>);

impl Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Logs {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

#[test]
fn a_panicking_figures_callback_costs_its_figures_not_the_endpoint() {
    use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::SeqCst};
    // This test binary's only subscriber: the endpoint's threads log here.
    let logs = Logs::default();
    let writer = logs.clone();
    tracing::subscriber::set_global_default(
        tracing_subscriber::fmt()
            .with_max_level(tracing::Level::WARN)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish(),
    )
    .expect("the only global subscriber of this test binary");

    let scheduler = Arc::new(Scheduler::builder().workers(1).build());
    scheduler.start();
    let hostile = Arc::new(AtomicBool::new(true));
    let calls = Arc::new(AtomicU32::new(0));
    let (panics, called) = (Arc::clone(&hostile), Arc::clone(&calls));
    let endpoint = sched::live::serve_with(Arc::clone(&scheduler), "127.0.0.1:0", move || {
        called.fetch_add(1, SeqCst);
        if panics.load(SeqCst) {
            panic!("the journal is gone");
        }
        vec![Figure::gauge("journal", "running", 1.0, Unit::Count)]
    })
    .unwrap();
    let addr = endpoint.local_addr();

    // Every snapshot is served, without figures, on the same connection.
    let mut client = Client::connect(addr, WAIT).unwrap();
    for _ in 0..3 {
        let snapshot = client.snapshot(5).unwrap();
        assert_eq!(snapshot.version, VERSION);
        assert_eq!(snapshot.workers.len(), 1);
        assert!(snapshot.figures.is_empty(), "{:?}", snapshot.figures);
    }
    assert_eq!(calls.load(SeqCst), 3);
    // Logged through tracing, once as a warning on this connection.
    // (Other tests' samplers log here too: only this callback's lines
    // count.)
    let logged = logs.text();
    let ours: Vec<&str> = logged
        .lines()
        .filter(|l| l.contains("the journal is gone"))
        .collect();
    assert_eq!(ours.len(), 1, "{logged}");
    assert!(
        ours[0].contains("WARN") && ours[0].contains("the figures callback panicked"),
        "{logged}"
    );

    // Other connections are served too; when it stops panicking, the
    // figures are back, on the old connection as on a new one.
    let mut other = Client::connect(addr, WAIT).unwrap();
    assert!(other.snapshot(1).unwrap().figures.is_empty());
    hostile.store(false, SeqCst);
    assert_eq!(client.snapshot(1).unwrap().figures[0].name, "running");
    assert_eq!(other.snapshot(1).unwrap().figures.len(), 1);
    let mut late = Client::connect(addr, WAIT).unwrap();
    assert_eq!(late.snapshot(1).unwrap().figures.len(), 1);

    // The engine was not touched.
    let mut done = scheduler.spawn(Steps { turns: 0 }).unwrap();
    scheduler.context().cancel(done.pid()).unwrap();
    done.wait_timeout(WAIT).expect("the engine runs");
    drop((client, other, late));
    let stopping = Instant::now();
    endpoint.stop();
    assert!(stopping.elapsed() < Duration::from_secs(2));
    scheduler.shutdown(WAIT);
}

#[test]
fn figures_on_the_wire_read_back_and_older_snapshots_have_none() {
    // From an endpoint that predates figures: none.
    let old = r#"{"version":1,"elapsed_ns":5,"workers":[{"steps":3}]}"#;
    assert!(Snapshot::from_json_line(old).unwrap().figures.is_empty());

    // A round trip through a sampler, with a value that is not finite
    // (written null, read as NaN).
    let scheduler = Scheduler::builder().workers(1).build();
    let mut sampler = Sampler::new().with_figures(|| {
        vec![
            Figure::counter("journal", "syncs", 7.0, Unit::Count),
            Figure::gauge("journal", "sync p99", f64::NAN, Unit::Seconds),
        ]
    });
    let snapshot = sampler.sample(scheduler.context(), 1);
    let line = snapshot.to_json_line();
    assert!(line.contains(r#""name":"sync p99","value":null"#), "{line}");
    let read = Snapshot::from_json_line(&line).unwrap();
    assert_eq!(read.figures[0], snapshot.figures[0]);
    assert!(read.figures[1].value.is_nan());
    assert_eq!(read.figures[1].unit, Unit::Seconds);

    // Units and kinds of a newer endpoint read as a plain number and a
    // gauge; unknown fields are ignored, missing ones defaulted.
    let newer = r#"{"figures":[{"source":"x","name":"load","value":0.5,"unit":"percent","kind":"histogram","extra":1},{"name":"bare"}]}"#;
    let figures = Snapshot::from_json_line(newer).unwrap().figures;
    assert_eq!(
        (figures[0].unit, figures[0].kind, figures[0].value),
        (Unit::Count, Kind::Gauge, 0.5)
    );
    assert_eq!((figures[1].source.as_str(), figures[1].value), ("", 0.0));

    // A callback that returns too many has the rest dropped.
    let mut flood = Sampler::new().with_figures(|| {
        (0..10_000)
            .map(|i| Figure::gauge("flood", i.to_string(), 1.0, Unit::Count))
            .collect()
    });
    let figures = flood.sample(scheduler.context(), 1).figures;
    assert_eq!(figures.len(), sched::live::MAX_FIGURES);
    assert_eq!(figures[0].name, "0");

    // A sampler used directly survives a panicking callback too.
    let mut hostile = Sampler::new().with_figures(|| panic!("no figures today"));
    let snapshot = hostile.sample(scheduler.context(), 1);
    assert!(snapshot.figures.is_empty());
    assert_eq!(snapshot.workers.len(), 1);
}
