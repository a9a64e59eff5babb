//! What an idle engine keeps after work is over: no result nobody can take,
//! no buffer sized by the largest burst it ever saw. Memory is measured
//! with a counting global allocator (bytes live), so the figures do not
//! depend on the machine's allocator or its timing.

mod common;
mod counting;

use std::sync::atomic::Ordering;
use std::sync::Mutex;

use common::*;
use counting::live_bytes;
use relay::{Package, Pid};
use sched_core::*;

/// The tests measure one global counter: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// Takes the tests' turn, with every process's memory in the counting
/// allocator (by default it comes from mimalloc, which does not count
/// there): every test calls this before it builds an engine.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    use_global_allocator().expect("no process was allocated before the first test's call");
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

const MIB: isize = 1 << 20;

#[test]
fn results_nobody_can_take_are_not_kept_by_an_idle_engine() {
    let _serial = serial();
    let engine = started(1);
    worker_warm_up(&engine);
    let before = live_bytes();
    // 32 processes end with a 1 MiB result each after a message from a
    // sender process on the same worker (which caches their routes); the
    // handles are dropped before the results arrive.
    const N: u64 = 32;
    for id in 0..N {
        let big = process(|events, out| {
            if events.count() > 0 {
                out.finish(vec![1u8; MIB as usize]);
            }
            Ok(())
        });
        drop(submit(&engine, 100 + id, big));
    }
    let sender = process(|_, out| {
        for id in 0..N {
            out.send(Pid::local(100 + id), ()).expect("live");
        }
        out.finish(());
        Ok(())
    });
    wait(submit(&engine, 1, sender)).expect("sent");
    while engine.context().stats().live_processes > 0 {
        std::thread::yield_now();
    }
    // One worker: once this has run, every earlier end has finished.
    worker_warm_up(&engine);
    let kept = live_bytes() - before;
    assert!(
        kept < 4 * MIB,
        "an idle engine keeps {} KiB after {N} results of 1 MiB nobody can take",
        kept / 1024
    );
}

#[test]
fn a_burst_of_events_does_not_leave_its_buffer_behind() {
    let _serial = serial();
    let engine = builder(1).build();
    let before = live_bytes();
    // 200 000 messages queued before the first step, read in one step.
    let reads_all = process(|events, out| {
        out.finish(events.count() as u64);
        Ok(())
    });
    let handle = submit(&engine, 1, reads_all);
    for n in 0..200_000u64 {
        engine
            .context()
            .forward(Package::new(Pid::local(9), Pid::local(1), n))
            .unwrap();
    }
    engine.start();
    assert_eq!(done_u64(wait(handle)), 200_000);
    worker_warm_up(&engine);
    let kept = live_bytes() - before;
    // The worker's event buffer held 200 000 events (several MiB) at the
    // burst's peak.
    assert!(
        kept < MIB,
        "an idle engine keeps {} KiB after a burst of 200 000 events",
        kept / 1024
    );
}

/// Runs one small process to its end, so the worker's lazily built state
/// (buffers, caches) exists before a baseline is taken, and so a burst's
/// leftovers have had a step to be trimmed after.
fn worker_warm_up(engine: &Engine) {
    let small = process(|_, out| {
        out.finish(());
        Ok(())
    });
    wait(
        engine
            .context()
            .spawn(
                Spawn::new(small)
                    .method("run")
                    .at(engine.context().allocate_pid().unwrap()),
            )
            .unwrap(),
    )
    .expect("done");
}

/// An idle process that waits for messages.
fn idle_process(engine: &Engine, id: u64) -> Pid {
    let pid = Pid::local(id);
    engine
        .context()
        .spawn(Spawn::new(process(|_, _| Ok(()))).method("run").at(pid))
        .unwrap();
    pid
}

#[test]
fn a_million_cancelled_timers_leave_nothing_behind() {
    let _serial = serial();
    let engine = started(2);
    worker_warm_up(&engine);
    let target = idle_process(&engine, 900_001);
    let before = live_bytes();
    let n = if cfg!(miri) { 2_000 } else { 1_000_000 };
    let mut ids = Vec::with_capacity(n);
    for i in 0..n {
        let delay = std::time::Duration::from_secs(3600 + (i % 1000) as u64);
        ids.push(engine.context().send(After(delay, target), 1u8).unwrap());
    }
    for id in ids.drain(..) {
        assert!(engine.context().cancel_timer(id));
    }
    drop(ids);
    assert_eq!(engine.context().stats().pending_timers, 0);
    let kept = live_bytes() - before;
    assert!(
        kept <= MIB,
        "{kept} bytes kept after {n} timers were set and cancelled"
    );
    engine.shutdown(std::time::Duration::from_secs(5));
}

#[test]
fn dropped_outside_monitors_leave_nothing_on_their_target() {
    let _serial = serial();
    let engine = started(2);
    worker_warm_up(&engine);
    let target = idle_process(&engine, 900_002);
    // The target's relations exist before the measure.
    drop(engine.context().monitor(target));
    let before = live_bytes();
    let n = if cfg!(miri) { 2_000 } else { 200_000 };
    for _ in 0..n {
        drop(engine.context().monitor(target));
    }
    let kept = live_bytes() - before;
    assert!(
        kept <= MIB,
        "{kept} bytes kept after {n} monitors were dropped"
    );
    // Kept together, then dropped together (fewer: each drop searches the
    // target's list).
    let monitors: Vec<Monitor> = (0..n / 10)
        .map(|_| engine.context().monitor(target))
        .collect();
    drop(monitors);
    let kept = live_bytes() - before;
    assert!(
        kept <= MIB,
        "{kept} bytes kept after {n} monitors were dropped"
    );
    engine.shutdown(std::time::Duration::from_secs(5));
}

/// Processes that each arm a one-hour timer and wait on it, `id_base..`:
/// with `message` they arm it on their first message (so their event queue
/// has had a block), otherwise in their first step. Returns the live bytes
/// they added (the processes themselves included), per process, once every
/// one of them is waiting.
fn bytes_per_timer_waiter(engine: &Engine, id_base: u64, n: u64, message: bool) -> isize {
    use std::sync::atomic::AtomicU64;
    use std::sync::Arc;
    let armed = Arc::new(AtomicU64::new(0));
    let before = live_bytes();
    for id in id_base..id_base + n {
        let armed = armed.clone();
        let waiter = process(move |events, out| {
            let (mut got_message, mut cancelled) = (false, false);
            for event in events {
                match event {
                    Event::Message(_) => got_message = true,
                    Event::Cancel => cancelled = true,
                    _ => {}
                }
            }
            if cancelled {
                // Shutdown: end at once.
                out.finish(());
            } else if got_message == message {
                out.set_timer(std::time::Duration::from_secs(3600), Tag(1));
                armed.fetch_add(1, Ordering::SeqCst);
            }
            Ok(())
        });
        drop(submit(engine, id, waiter));
    }
    if message {
        // Read and dropped by the step: only their queue's block could
        // stay behind.
        for id in id_base..id_base + n {
            engine
                .context()
                .forward(Package::new(Pid::local(9), Pid::local(id), 1u8))
                .unwrap();
        }
    }
    while armed.load(Ordering::SeqCst) < n {
        std::thread::yield_now();
    }
    // One worker: once this has run, every waiter has finished its step.
    worker_warm_up(engine);
    (live_bytes() - before) / n as isize
}

#[test]
fn a_process_waiting_on_a_timer_keeps_no_event_block() {
    let _serial = serial();
    let engine = started(1);
    worker_warm_up(&engine);
    let n = if cfg!(miri) { 50 } else { 4_000 };
    // Both groups cost the process and its timer (its list and its wheel
    // entry); a waiter that had received a message first would also keep
    // the block its message came in (88 bytes) if waiting did not give it
    // back. Each group arms as many timers, so the wheel's room grows about
    // alike for both (it doubles from 4 096 to 8 192 entries during the
    // second).
    let never_messaged = bytes_per_timer_waiter(&engine, 200_000, n, false);
    let messaged = bytes_per_timer_waiter(&engine, 300_000, n, true);
    assert!(
        messaged - never_messaged < 64,
        "a process waiting on its timer after a message keeps {messaged} bytes, \
         one that never had a message {never_messaged}"
    );
    engine.shutdown(std::time::Duration::from_secs(5));
}

/// After `use_global_allocator`, a process's memory is the global
/// allocator's: 2 000 idle processes with 1 KiB of state each show in its
/// count (by default they come from mimalloc and would not: see
/// `tests/allocator.rs`), and their ends give it back.
#[test]
fn processes_live_in_the_global_allocator_once_it_is_chosen() {
    let _serial = serial();
    let engine = started(1);
    worker_warm_up(&engine);
    const N: u64 = 2_000;
    let before = live_bytes();
    let pids: Vec<Pid> = (0..N)
        .map(|i| {
            let pid = Pid::local(800_000 + i);
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
                // Unboxed: the state lives in the process's own allocation.
                .spawn(Spawn::new(*big).method("run").at(pid))
                .unwrap();
            pid
        })
        .collect();
    let grown = live_bytes() - before;
    assert!(
        grown >= (N * 1024) as isize,
        "2 000 processes of 1 KiB each added {grown} bytes to the global allocator's count"
    );
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
    drop(engine);
    let kept = live_bytes() - before;
    assert!(
        kept < (N * 1024 / 4) as isize,
        "{kept} bytes still counted after the processes ended"
    );
}

/// Every record is freed once its process ends, however often it waited
/// and was woken, from outside or from a step, and whether it ended by
/// itself or by shutdown's cancel. A parked process's state word holds
/// the run queue's reference to its record, which each wake takes back:
/// a wake that took a reference of its own, or a park that left one
/// behind, would keep every record allocated after its end.
#[test]
fn records_of_processes_woken_many_times_are_freed_when_they_end() {
    let _serial = serial();
    const N: u64 = 2_000;
    const ROUNDS: u64 = 20;
    // Before the engine: its own memory goes with it, so what is left
    // after its drop is what it failed to free.
    let before = live_bytes();
    let engine = started(2);
    for id in 0..N {
        let ends_by_itself = id % 2 == 0;
        let mut read = 0;
        let waiter = process(move |events, out| {
            for event in events {
                match event {
                    Event::Message(_) => read += 1,
                    Event::Cancel => out.finish(()),
                    _ => {}
                }
            }
            if ends_by_itself && read == ROUNDS {
                out.finish(());
            }
            Ok(())
        });
        drop(submit(&engine, 10_000 + id, waiter));
    }
    for round in 0..ROUNDS {
        if round % 2 == 0 {
            for id in 0..N {
                engine
                    .context()
                    .send(Pid::local(10_000 + id), round)
                    .expect("live");
            }
        } else {
            let sender = process(move |_, out| {
                for id in 0..N {
                    out.send(Pid::local(10_000 + id), round).expect("live");
                }
                out.finish(());
                Ok(())
            });
            wait(submit(&engine, 1, sender)).expect("sent");
        }
    }
    while engine.context().stats().live_processes as u64 > N / 2 {
        std::thread::yield_now();
    }
    let report = engine.shutdown(std::time::Duration::from_secs(10));
    assert_eq!(report.forced, 0, "the rest end on their cancel");
    drop(engine);
    let kept = live_bytes() - before;
    // A record is over 100 bytes: N kept would be over 200 KiB (a wake
    // that cloned its reference left 377 KiB; this code leaves about 21).
    assert!(
        kept < 128 * 1024,
        "{} KiB still allocated after {N} processes, each woken {ROUNDS} times, ended",
        kept / 1024
    );
}
