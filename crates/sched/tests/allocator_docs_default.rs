//! The default side of "Processes take their memory from mimalloc"
//! (`CHANGELOG.md`, `docs/guide/observability.md`, "Memory"): a program
//! that never calls `sched::engine::use_global_allocator` gets its
//! processes (their record, with the state inline) from mimalloc, so a
//! counting `#[global_allocator]` does not see them; and a call made after a
//! process was allocated returns `Err(AllocatorChosen)` and changes nothing.
//!
//! The choice is program-wide and fixed by the first process, so this file
//! never calls `use_global_allocator` before a process has been spawned
//! (every test spawns first), and the tests take one lock so that the
//! counter measures one test at a time. The other side is
//! `allocator_docs_global.rs`, a program of its own.

#![cfg(not(miri))] // under miri every process comes from the global allocator

use std::sync::{Mutex, MutexGuard};

use sched::engine::{use_global_allocator, AllocatorChosen};
use sched::prelude::*;

mod allocator_docs;
use allocator_docs::*;

/// One test at a time: the counter is program-wide.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn one_at_a_time() -> MutexGuard<'static, ()> {
    ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A state aligned more strictly than any record could be
/// (`docs/internals/sched-core.md`: "boxed only if aligned more strictly
/// than the record").
#[repr(C, align(4096))]
struct Aligned {
    state: [u8; STATE],
}

struct OverAligned {
    inner: Aligned,
}

impl Process for OverAligned {
    type Done = u64;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        if events.count() > 0 {
            out.finish(self.inner.state.iter().map(|&b| u64::from(b)).sum::<u64>());
            return Ok(());
        }
        out.idle();
        Ok(())
    }
}

/// Spawns `children` `Heavy`s from its first step, keeps their PIDs, and
/// on its first message tells each of them to finish, then finishes.
struct Parent {
    children: usize,
    pids: Vec<Pid>,
}

impl Process for Parent {
    type Done = usize;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        let mut told = false;
        for event in events {
            if let Event::Message(_) | Event::Cancel = event {
                told = true;
            }
        }
        if told {
            for &pid in &self.pids {
                out.send(pid, ())?;
            }
            out.finish(self.pids.len());
            return Ok(());
        }
        if self.pids.is_empty() {
            for n in 0..self.children {
                let child = out.spawn(Heavy::new(n as u8))?;
                self.pids.push(child.pid());
            }
        }
        out.idle();
        Ok(())
    }
}

/// Spawns a batch of `Heavy`s from outside, keeping their handles in a
/// vector allocated before the caller's baseline.
fn spawn_batch(scheduler: &Scheduler, into: &mut Vec<(u8, Completion<u64>)>) {
    for n in 0..COUNT {
        let seed = n as u8;
        let handle = scheduler.spawn(Heavy::new(seed)).expect("spawn");
        into.push((seed, handle));
    }
}

#[test]
fn processes_stay_out_of_the_counting_allocator_and_a_later_choice_is_refused() {
    let _one = one_at_a_time();
    let scheduler = scheduler();
    let mut first = Vec::with_capacity(COUNT);
    let mut second = Vec::with_capacity(COUNT);
    let before = live();
    spawn_batch(&scheduler, &mut first);
    await_live(&scheduler, COUNT);
    let grown = live() - before;
    eprintln!("default: {COUNT} processes of {STATE} B added {grown} B to the global count");
    assert!(
        grown < STATES_TOTAL / 4,
        "{COUNT} processes of {STATE} B of inline state added {grown} B to the counting \
         global allocator (states: {STATES_TOTAL} B): they are not in mimalloc"
    );

    // A process was allocated: the choice is made and stays made.
    let refused: Result<(), AllocatorChosen> = use_global_allocator();
    let error = refused.expect_err("use_global_allocator after the first process must be refused");
    let said = error.to_string();
    assert!(
        !said.trim().is_empty(),
        "AllocatorChosen displays as nothing"
    );
    assert!(!format!("{error:?}").is_empty());
    let as_std: &dyn std::error::Error = &error;
    assert_eq!(as_std.to_string(), said);
    // Refused again, just the same.
    assert!(
        use_global_allocator().is_err(),
        "a second late call was accepted"
    );

    // "Changes nothing": later processes of this engine are still out of the count.
    let before_second = live();
    spawn_batch(&scheduler, &mut second);
    await_live(&scheduler, 2 * COUNT);
    let grown = live() - before_second;
    assert!(
        grown < STATES_TOTAL / 4,
        "after the refused call, {COUNT} more processes added {grown} B to the global count \
         (states: {STATES_TOTAL} B): the refused call changed the allocator"
    );

    // ... and so are those of an engine built after the refused call.
    let other = self::scheduler();
    let mut third = Vec::with_capacity(COUNT);
    let before_third = live();
    spawn_batch(&other, &mut third);
    await_live(&other, COUNT);
    let grown = live() - before_third;
    assert!(
        grown < STATES_TOTAL / 4,
        "{COUNT} processes of an engine built after the refused call added {grown} B to the \
         global count (states: {STATES_TOTAL} B)"
    );

    end_batch(&scheduler, first);
    end_batch(&scheduler, second);
    end_batch(&other, third);
    assert_clean_shutdown(&scheduler);
    assert_clean_shutdown(&other);
    drop(scheduler);
    drop(other);
    // The records went back to mimalloc, not to the counting allocator: had
    // they been freed through it, its count would have dropped far below
    // where it started (by up to three batches of states).
    let after = live() - before;
    eprintln!("default: after everything ended, the count is {after} B from its start");
    assert!(
        after > -STATES_TOTAL / 4,
        "ending the processes took {} B out of the counting allocator, which never gave them",
        -after
    );
}

#[test]
fn processes_spawned_from_a_step_stay_out_of_the_counting_allocator() {
    let _one = one_at_a_time();
    let scheduler = scheduler();
    // Make sure the choice is made (by this test or the other) before
    // calling, so this file never picks the global allocator itself.
    let first = scheduler.spawn(Heavy::new(0)).expect("spawn");
    assert!(
        use_global_allocator().is_err(),
        "use_global_allocator accepted after a process was allocated"
    );
    let before = live();
    let parent = scheduler
        .spawn(Parent {
            children: COUNT,
            pids: Vec::new(),
        })
        .expect("spawn the parent");
    await_live(&scheduler, COUNT + 2);
    let grown = live() - before;
    eprintln!("default: {COUNT} children spawned from a step added {grown} B to the global count");
    assert!(
        grown < STATES_TOTAL / 4,
        "{COUNT} children of {STATE} B spawned from a step added {grown} B to the counting \
         global allocator (states: {STATES_TOTAL} B)"
    );
    scheduler
        .send(parent.pid(), ())
        .expect("the parent is live");
    let mut parent = parent;
    assert_eq!(parent.wait_timeout(DEADLINE).expect("parent ends"), COUNT);
    scheduler.send(first.addr::<Heavy>(), ()).expect("live");
    let mut first = first;
    first.wait_timeout(DEADLINE).expect("ends");
    assert_clean_shutdown(&scheduler);
}

#[test]
fn an_over_aligned_state_is_the_stated_exception_and_shows_in_the_count() {
    // The guide's exception: a state aligned more strictly than 8 bytes is
    // boxed on its own, from the global allocator whatever the choice, so
    // a counting allocator sees it by default (and the rest stays out).
    let _one = one_at_a_time();
    let scheduler = scheduler();
    let warm = scheduler.spawn(Heavy::new(0)).expect("spawn");
    assert!(use_global_allocator().is_err());
    let count = COUNT / 4;
    let mut handles = Vec::with_capacity(count);
    let before = live();
    for n in 0..count {
        let mut inner = Aligned { state: [0; STATE] };
        inner.state[0] = n as u8;
        handles.push(scheduler.spawn(OverAligned { inner }).expect("spawn"));
    }
    await_live(&scheduler, count + 1);
    let grown = live() - before;
    let total = (count * STATE) as isize;
    eprintln!(
        "default: {count} over-aligned processes of {STATE} B added {grown} B to the global count"
    );
    assert!(
        grown >= total && grown < total * 3,
        "{count} processes with a {STATE} B state aligned to 4096 added {grown} B to the \
         counting global allocator (states: {total} B): their boxed states, and only those, \
         should show there"
    );
    for handle in &handles {
        scheduler.send(handle.pid(), ()).expect("live");
    }
    for (n, mut handle) in handles.into_iter().enumerate() {
        assert_eq!(
            handle.wait_timeout(DEADLINE).expect("ends"),
            u64::from(n as u8)
        );
    }
    scheduler.send(warm.pid(), ()).expect("live");
    let mut warm = warm;
    warm.wait_timeout(DEADLINE).expect("ends");
    assert_clean_shutdown(&scheduler);
}
