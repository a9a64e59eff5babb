//! What the two allocator test programs (`allocator_docs_default.rs` and
//! `allocator_docs_global.rs`) share: a counting global allocator, the
//! batch's sizes, and the process with a large state inline that both
//! spawn. Each program includes this once, so each has its own counter.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::{Duration, Instant};

use sched::prelude::*;

/// Forwards to `System`, counting the bytes live in it.
pub(crate) struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call is forwarded to `System` with the same arguments; the
// counter is only bookkeeping.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract is `System`'s.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        }
        ptr
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract is `System`'s.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        }
        ptr
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract is `System`'s.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract is `System`'s.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            LIVE.fetch_add(
                new_size as isize - layout.size() as isize,
                Ordering::Relaxed,
            );
        }
        new
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

pub(crate) fn live() -> isize {
    LIVE.load(Ordering::SeqCst)
}

/// Processes spawned per batch.
pub(crate) const COUNT: usize = 3_000;
/// Bytes of inline state per process.
pub(crate) const STATE: usize = 2_048;
/// What the states of one batch weigh together.
pub(crate) const STATES_TOTAL: isize = (COUNT * STATE) as isize;
/// Generous bound for anything to happen, on a busy 2-core machine.
pub(crate) const DEADLINE: Duration = Duration::from_secs(30);

/// A process with 2 KiB of state inline (not boxed): it idles until a
/// message or a cancel, then finishes with a checksum of its state (so the
/// state is really there and intact).
pub(crate) struct Heavy {
    state: [u8; STATE],
}

impl Heavy {
    pub(crate) fn new(seed: u8) -> Self {
        let mut state = [0u8; STATE];
        for (i, byte) in state.iter_mut().enumerate() {
            *byte = seed.wrapping_add(i as u8);
        }
        Heavy { state }
    }

    fn checksum(&self) -> u64 {
        self.state.iter().map(|&b| u64::from(b)).sum()
    }

    pub(crate) fn expected(seed: u8) -> u64 {
        Heavy::new(seed).checksum()
    }
}

impl Accepts for Heavy {
    type Message = ();
}

impl Process for Heavy {
    type Done = u64;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events.typed::<Self>() {
            if let Event::Message(()) | Event::Cancel = event {
                out.finish(self.checksum());
                return Ok(());
            }
        }
        out.idle();
        Ok(())
    }
}

pub(crate) fn scheduler() -> Scheduler {
    let scheduler = Scheduler::builder().workers(2).build();
    scheduler.start();
    scheduler
}

/// Polls until the engine counts `want` live processes.
pub(crate) fn await_live(scheduler: &Scheduler, want: usize) {
    let start = Instant::now();
    loop {
        let now = scheduler.stats().live_processes;
        if now == want {
            return;
        }
        assert!(
            start.elapsed() < DEADLINE,
            "still {now} live processes after {DEADLINE:?}, waiting for {want}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Ends every process of the batch with a message, checks each finished with
/// its state intact, and drops the handles (a `Completion` keeps its ended
/// process's record allocated, `docs/guide/actors.md`).
pub(crate) fn end_batch(scheduler: &Scheduler, batch: Vec<(u8, Completion<u64>)>) {
    for (_, handle) in &batch {
        scheduler
            .send(handle.addr::<Heavy>(), ())
            .expect("a live process takes its message");
    }
    for (seed, mut handle) in batch {
        let sum = handle
            .wait_timeout(DEADLINE)
            .unwrap_or_else(|e| panic!("process {seed} did not finish: {e}"));
        assert_eq!(
            sum,
            Heavy::expected(seed),
            "the inline state was not intact"
        );
    }
}

pub(crate) fn assert_clean_shutdown(scheduler: &Scheduler) {
    await_live(scheduler, 0);
    let report = scheduler.shutdown(DEADLINE);
    assert_eq!(
        (report.forced, report.still_running, report.still_queued),
        (0, 0, 0),
        "{report:?}"
    );
    assert_eq!(report.workers_detached, 0, "{report:?}");
}
