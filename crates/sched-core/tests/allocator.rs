//! Where a process's memory comes from by default: mimalloc, not the
//! program's global allocator, and the choice is fixed by the first
//! process (`use_global_allocator` then fails). The other side, processes
//! counted in the global allocator once it is chosen, is
//! `processes_live_in_the_global_allocator_once_it_is_chosen` in
//! `retention.rs` (a test binary makes the choice once, for all its tests).
#![cfg(not(miri))] // under miri every process comes from the global allocator

mod common;
mod counting;

use common::*;
use counting::live_bytes;
use relay::{Package, Pid};
use sched_core::*;

#[test]
fn processes_come_from_mimalloc_by_default_and_the_choice_is_then_fixed() {
    let engine = started(1);
    const N: u64 = 2_000;
    let before = live_bytes();
    let pids: Vec<Pid> = (0..N)
        .map(|i| {
            let pid = Pid::local(1_000 + i);
            let mut state = [0u8; 1024];
            let big = process(move |events, out| {
                state[0] = state[0].wrapping_add(1);
                if events.count() > 0 {
                    out.finish(u64::from(state[1023]));
                }
                Ok(())
            });
            engine
                .context()
                .spawn(Spawn::new(*big).method("run").at(pid))
                .unwrap();
            pid
        })
        .collect();
    let grown = live_bytes() - before;
    // Each process's 1 KiB of state is in mimalloc's pages; what the
    // global allocator sees is the engine's other structures (its table,
    // its queues), far less than the states.
    assert!(
        grown < (N * 1024 / 2) as isize,
        "2 000 processes of 1 KiB each added {grown} bytes to the global allocator's count"
    );
    assert_eq!(use_global_allocator(), Err(AllocatorChosen));
    for pid in pids {
        engine
            .context()
            .forward(Package::new(Pid::local(9), pid, 0u8))
            .unwrap();
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while engine.context().stats().live_processes > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the processes did not end"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    engine.shutdown(std::time::Duration::from_secs(5));
}
