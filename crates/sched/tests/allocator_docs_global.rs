//! The chosen side of "Processes take their memory from mimalloc;
//! `use_global_allocator` to keep them in yours" (`CHANGELOG.md`,
//! `docs/guide/observability.md`, "Memory"): once a program calls
//! `sched::engine::use_global_allocator()` before its first process, every
//! process of every engine lives in the global allocator, so a counting
//! `#[global_allocator]` sees each one, and sees it go when it ends.
//!
//! The choice is program-wide, so every test here makes it (through
//! `choose`) before it spawns anything, and the tests take one lock so that
//! the counter measures one test at a time. The default side is
//! `allocator_docs_default.rs`, a program of its own.

use std::sync::{Mutex, MutexGuard, Once};
use std::time::{Duration, Instant};

use sched::engine::use_global_allocator;
use sched::prelude::*;

mod allocator_docs;
use allocator_docs::*;
/// How far from its start the count may end once everything has ended:
/// tables, queues and caches that keep their capacity, nothing near the
/// states' weight.
const SLACK: isize = STATES_TOTAL / 8;

/// One test at a time: the counter is program-wide.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Takes the lock, and makes the program-wide choice if no test made it
/// yet: the first test to get here builds and starts a scheduler without
/// spawning anything (that is not "a process spawned"), then calls
/// `use_global_allocator` twice. Both calls must succeed.
fn choose() -> MutexGuard<'static, ()> {
    static CHOSEN: Once = Once::new();
    let guard = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    CHOSEN.call_once(|| {
        let idle = Scheduler::builder().workers(2).build();
        idle.start();
        use_global_allocator().unwrap_or_else(|e| {
            panic!(
                "use_global_allocator refused ({e}) before any process was spawned, \
                 with only a built and started scheduler"
            )
        });
        use_global_allocator().unwrap_or_else(|e| {
            panic!("use_global_allocator refused the second time before any process ({e})")
        });
        let report = idle.shutdown(DEADLINE);
        assert_eq!(report.forced, 0, "{report:?}");
    });
    guard
}

/// A node of a binary tree of `Heavy`-sized processes, every one but the
/// root spawned from a step (its parent's first), on whichever worker that
/// parent runs. On a message (or a cancel) it passes the message to its
/// children and finishes with the number of nodes below it it told.
struct Node {
    depth: u32,
    state: [u8; STATE],
    children: Vec<Pid>,
    started: bool,
}

impl Node {
    fn new(depth: u32) -> Self {
        Node {
            depth,
            state: [depth as u8; STATE],
            children: Vec::new(),
            started: false,
        }
    }

    /// Nodes in a tree of this depth (depth 0: a leaf).
    fn tree_size(depth: u32) -> usize {
        (1usize << (depth + 1)) - 1
    }
}

impl Process for Node {
    type Done = usize;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        let mut told = false;
        for event in events {
            if let Event::Message(_) | Event::Cancel = event {
                told = true;
            }
        }
        if told {
            assert!(self.state.iter().all(|&b| b == self.depth as u8));
            for &child in &self.children {
                // A child may be gone already if shutdown cancelled it.
                let _ = out.send(child, ());
            }
            out.finish(self.children.len());
            return Ok(());
        }
        if !self.started {
            self.started = true;
            if self.depth > 0 {
                for _ in 0..2 {
                    let child = out.spawn(Node::new(self.depth - 1))?;
                    self.children.push(child.pid());
                }
            }
        }
        out.idle();
        Ok(())
    }
}

/// Over-aligned state (boxed, per `docs/internals/sched-core.md`): with the
/// global allocator chosen, that box is in it too.
#[repr(C, align(4096))]
struct Aligned {
    state: [u8; STATE],
}

struct OverAligned {
    inner: Aligned,
}

impl Process for OverAligned {
    type Done = u8;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        if events.count() > 0 {
            out.finish(self.inner.state[0]);
            return Ok(());
        }
        out.idle();
        Ok(())
    }
}

/// Polls until the counter is within `SLACK` of `baseline`, and returns
/// where it is then (or at the deadline).
fn await_count_near(baseline: isize) -> isize {
    let start = Instant::now();
    loop {
        let off = live() - baseline;
        if off.abs() <= SLACK || start.elapsed() >= DEADLINE {
            return off;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn spawn_batch(scheduler: &Scheduler, count: usize, into: &mut Vec<(u8, Completion<u64>)>) {
    for n in 0..count {
        let seed = n as u8;
        into.push((seed, scheduler.spawn(Heavy::new(seed)).expect("spawn")));
    }
}

#[test]
fn processes_spawned_from_outside_show_in_the_count_and_leave_it_when_they_end() {
    let _one = choose();
    let baseline = live();
    let scheduler = scheduler();
    let mut batch = Vec::with_capacity(COUNT);
    let before = live();
    spawn_batch(&scheduler, COUNT, &mut batch);
    await_live(&scheduler, COUNT);
    let grown = live() - before;
    eprintln!("global: {COUNT} processes of {STATE} B added {grown} B to the global count");
    assert!(
        grown >= STATES_TOTAL,
        "{COUNT} processes of {STATE} B of inline state added only {grown} B to the counting \
         global allocator (states: {STATES_TOTAL} B): they are not all in it"
    );

    end_batch(&scheduler, batch);
    assert_clean_shutdown(&scheduler);
    drop(scheduler);
    let off = await_count_near(baseline);
    eprintln!("global: once everything ended, the count is {off} B from its start");
    assert!(
        off.abs() <= SLACK,
        "once the processes ended, their handles were dropped and the scheduler shut down, \
         the count is {off} B away from where it started (states: {STATES_TOTAL} B, \
         allowed: {SLACK} B): the processes' memory did not go back"
    );
}

#[test]
fn processes_spawned_from_steps_show_in_the_count_and_leave_it_when_they_end() {
    let _one = choose();
    // 2^12 - 1 = 4095 nodes, all but the root spawned from a step.
    const DEPTH: u32 = 11;
    let nodes = Node::tree_size(DEPTH);
    let baseline = live();
    let scheduler = scheduler();
    let before = live();
    let mut root = scheduler.spawn(Node::new(DEPTH)).expect("spawn the root");
    await_live(&scheduler, nodes);
    let grown = live() - before;
    let states = (nodes * STATE) as isize;
    eprintln!("global: a tree of {nodes} processes of {STATE} B added {grown} B");
    assert!(
        grown >= states,
        "{} processes of {STATE} B spawned from steps (and the root) added only {grown} B to \
         the counting global allocator (states: {states} B): those spawned from a step are \
         not in it",
        nodes - 1
    );

    scheduler.send(root.pid(), ()).expect("the root is live");
    assert_eq!(root.wait_timeout(DEADLINE).expect("the root ends"), 2);
    drop(root);
    assert_clean_shutdown(&scheduler);
    drop(scheduler);
    let off = await_count_near(baseline);
    eprintln!("global: once the tree ended, the count is {off} B from its start");
    assert!(
        off.abs() <= SLACK,
        "once the tree ended and the scheduler shut down, the count is {off} B away from where \
         it started (states: {states} B, allowed: {SLACK} B)"
    );
}

#[test]
fn every_engine_of_the_program_uses_the_global_allocator() {
    let _one = choose();
    let baseline = live();
    let one = scheduler();
    let two = scheduler();
    let mut first = Vec::with_capacity(COUNT);
    let mut second = Vec::with_capacity(COUNT);
    let before = live();
    spawn_batch(&one, COUNT, &mut first);
    await_live(&one, COUNT);
    let after_one = live();
    spawn_batch(&two, COUNT, &mut second);
    await_live(&two, COUNT);
    let after_two = live();
    assert!(
        after_one - before >= STATES_TOTAL,
        "engine one's {COUNT} processes added only {} B (states: {STATES_TOTAL} B)",
        after_one - before
    );
    assert!(
        after_two - after_one >= STATES_TOTAL,
        "engine two's {COUNT} processes added only {} B (states: {STATES_TOTAL} B)",
        after_two - after_one
    );

    // A later call, now that processes exist, changes nothing, whatever it
    // answers (the docs say a call after a process was allocated returns
    // `Err(AllocatorChosen)`).
    let late = use_global_allocator();
    eprintln!("global: a call after processes were allocated returned {late:?}");
    let three = scheduler();
    let mut third = Vec::with_capacity(COUNT);
    let before_three = live();
    spawn_batch(&three, COUNT, &mut third);
    await_live(&three, COUNT);
    assert!(
        live() - before_three >= STATES_TOTAL,
        "after a late call ({late:?}), {COUNT} processes of a new engine added only {} B",
        live() - before_three
    );

    end_batch(&one, first);
    end_batch(&two, second);
    end_batch(&three, third);
    assert_clean_shutdown(&one);
    assert_clean_shutdown(&two);
    assert_clean_shutdown(&three);
    drop((one, two, three));
    let off = await_count_near(baseline);
    assert!(
        off.abs() <= SLACK,
        "once three engines' processes ended, the count is {off} B away from where it \
         started (allowed: {SLACK} B)"
    );
}

#[test]
fn processes_ended_by_shutdown_leave_the_count_too() {
    let _one = choose();
    let baseline = live();
    let scheduler = scheduler();
    let before = live();
    // Handles dropped at once: nothing but the engine holds the processes.
    for n in 0..COUNT {
        drop(scheduler.spawn(Heavy::new(n as u8)).expect("spawn"));
    }
    await_live(&scheduler, COUNT);
    let grown = live() - before;
    assert!(
        grown >= STATES_TOTAL,
        "{COUNT} processes added only {grown} B (states: {STATES_TOTAL} B)"
    );
    // Shutdown cancels them; each finishes on its cancel.
    let report = scheduler.shutdown(DEADLINE);
    assert_eq!(report.ended_gracefully, COUNT as u64, "{report:?}");
    assert_eq!((report.forced, report.still_queued), (0, 0), "{report:?}");
    drop(scheduler);
    let off = await_count_near(baseline);
    assert!(
        off.abs() <= SLACK,
        "once shutdown ended {COUNT} processes, the count is {off} B away from where it \
         started (allowed: {SLACK} B)"
    );
}

#[test]
fn over_aligned_states_show_in_the_count_and_leave_it_too() {
    let _one = choose();
    let count = COUNT / 4;
    let baseline = live();
    let scheduler = scheduler();
    let mut handles = Vec::with_capacity(count);
    let before = live();
    for n in 0..count {
        let mut inner = Aligned { state: [0; STATE] };
        inner.state[0] = n as u8;
        handles.push(scheduler.spawn(OverAligned { inner }).expect("spawn"));
    }
    await_live(&scheduler, count);
    let grown = live() - before;
    // The boxed state alone is in the global allocator by default too; with
    // the global allocator chosen the record must be there as well: at
    // least 64 bytes more per process (a PID, a state word, a mailbox, an
    // event queue...).
    let floor = (count * (std::mem::size_of::<Aligned>() + 64)) as isize;
    eprintln!("global: {count} over-aligned processes added {grown} B");
    assert!(
        grown >= floor,
        "{count} over-aligned processes added only {grown} B (boxed states plus 64 B of \
         record each: {floor} B): their records are not in the global allocator"
    );
    for handle in &handles {
        scheduler.send(handle.pid(), ()).expect("live");
    }
    for (n, mut handle) in handles.into_iter().enumerate() {
        assert_eq!(handle.wait_timeout(DEADLINE).expect("ends"), n as u8);
    }
    assert_clean_shutdown(&scheduler);
    drop(scheduler);
    let off = await_count_near(baseline);
    assert!(
        off.abs() <= SLACK,
        "once the over-aligned processes ended, the count is {off} B away from where it \
         started (allowed: {SLACK} B)"
    );
}
