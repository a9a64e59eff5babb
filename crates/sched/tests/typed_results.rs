//! A typed command's result completed on a thread of the handler's own (a
//! service thread): it arrives whole whatever its shape (heap-owning,
//! zero-sized, large, already a `Payload`), a completer dropped there
//! unused is reported to the process as dropped, and the result is not
//! boxed on that thread (its box comes from the worker that dispatched the
//! command, where the process frees it).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use sched::command::{CommandError, CommandId, Completer, TypedCommand, Yielded};
use sched::prelude::*;

/// Counts the bytes each thread allocates.
struct PerThread;

thread_local! {
    static ALLOCATED: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: every call is forwarded to `System` with the caller's
// arguments; the count is bookkeeping in a const-initialised thread local
// without a destructor, which allocates nothing.
unsafe impl GlobalAlloc for PerThread {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATED.try_with(|n| n.set(n.get() + layout.size() as u64));
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: PerThread = PerThread;

/// The bytes this thread has allocated so far.
fn allocated_here() -> u64 {
    ALLOCATED.with(Cell::get)
}

const WAIT: Duration = Duration::from_secs(10);

/// Yields `command` once with `data` and finishes with its result.
struct Once<D: Send + 'static, R: Send + 'static> {
    command: TypedCommand<D, R>,
    data: Option<D>,
    yielded: Option<Yielded<R>>,
}

impl<D: Send + 'static, R: Send + 'static> Process for Once<D, R> {
    type Done = Result<R, String>;
    fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        let data = self.data.take().expect("started once");
        self.yielded = Some(out.yield_command(self.command, Tag(1), data));
        Ok(())
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        let yielded = self.yielded.expect("started");
        for event in events {
            if let Ok(result) = yielded.result(event) {
                out.finish(result.map_err(|e: CommandError| e.to_string()));
            }
        }
        Ok(())
    }
}

/// An engine whose handler for `command` hands each completer to a
/// service thread, which completes it with `answer` of the data (or drops
/// it when `answer` gives `None`) and reports the bytes it allocated
/// while completing (the queues a completion goes through may allocate a
/// block of their own: the process's first event, a new segment of the
/// engine's queue of woken processes; the result's box is not among them).
fn served<D, R>(
    command: TypedCommand<D, R>,
    answer: fn(D) -> Option<R>,
) -> (Scheduler, mpsc::Receiver<u64>, thread::JoinHandle<()>)
where
    D: Send + 'static,
    R: Send + 'static,
{
    let (to_service, requests) = mpsc::channel::<(D, Completer<R>)>();
    let (report, reports) = mpsc::channel();
    let service = thread::spawn(move || {
        for (data, done) in requests {
            let value = answer(data);
            let before = allocated_here();
            match value {
                Some(value) => done.complete(value).expect("the process waits"),
                None => drop(done),
            }
            let _ = report.send(allocated_here() - before);
        }
    });
    let scheduler = Scheduler::builder()
        .workers(2)
        .handler(command, move |data: D, done: Completer<R>| {
            to_service.send((data, done)).expect("the service runs");
            Ok(())
        })
        .build();
    scheduler.start();
    (scheduler, reports, service)
}

/// Shuts `scheduler` down and drops it (and with it the handler, the
/// service's last sender), then waits for the service thread to end.
fn end(scheduler: Scheduler, service: thread::JoinHandle<()>) {
    scheduler.shutdown(WAIT);
    drop(scheduler);
    service.join().expect("the service ends");
}

fn ask<D: Send + 'static, R: Send + 'static>(
    scheduler: &Scheduler,
    command: TypedCommand<D, R>,
    data: D,
) -> Result<R, String> {
    scheduler
        .spawn(Once {
            command,
            data: Some(data),
            yielded: None,
        })
        .expect("spawned")
        .wait_timeout(WAIT)
        .expect("the process finishes")
}

#[test]
fn a_result_completed_on_a_service_thread_arrives_whole() {
    const UPPER: TypedCommand<String, String> = TypedCommand::new(CommandId(1));
    let (scheduler, reports, service) = served(UPPER, |text: String| Some(text.to_uppercase()));
    for word in ["first", "second", "third"] {
        assert_eq!(
            ask(&scheduler, UPPER, word.to_owned()),
            Ok(word.to_uppercase())
        );
        reports.recv_timeout(WAIT).expect("completed");
    }
    end(scheduler, service);
}

#[test]
fn a_large_result_arrives_whole_and_is_not_boxed_on_the_thread_that_completes_it() {
    const LARGE: TypedCommand<u8, [u8; 4096]> = TypedCommand::new(CommandId(1));
    let (scheduler, reports, service) = served(LARGE, |fill: u8| Some([fill; 4096]));
    for fill in 1..=3 {
        let got = ask(&scheduler, LARGE, fill).expect("completed");
        assert!(got.iter().all(|&b| b == fill));
        let bytes = reports.recv_timeout(WAIT).expect("completed");
        // Boxed there, it would be 4 096 bytes at least.
        assert!(bytes < 4096, "completing allocated {bytes} bytes");
    }
    end(scheduler, service);
}

#[test]
fn zero_sized_and_payload_results_arrive_as_they_were_sent() {
    const NOTHING: TypedCommand<(), ()> = TypedCommand::new(CommandId(1));
    let (scheduler, reports, service) = served(NOTHING, |()| Some(()));
    assert_eq!(ask(&scheduler, NOTHING, ()), Ok(()));
    reports.recv_timeout(WAIT).expect("completed");
    end(scheduler, service);

    // A `Payload` result is handed on as it is, not boxed a second time:
    // the process reads the value inside it.
    const ANY: TypedCommand<u32, Payload> = TypedCommand::new(CommandId(1));
    let (scheduler, reports, service) = served(ANY, |n: u32| Some(Box::new(n + 1) as Payload));
    let payload = ask(&scheduler, ANY, 41).expect("completed");
    assert_eq!(payload.downcast_ref::<u32>(), Some(&42));
    reports.recv_timeout(WAIT).expect("completed");
    end(scheduler, service);
}

#[test]
fn a_typed_completer_dropped_on_a_service_thread_reports_dropped() {
    const LOST: TypedCommand<String, String> = TypedCommand::new(CommandId(1));
    let (scheduler, reports, service) = served(LOST, |_: String| None);
    let outcome = ask(&scheduler, LOST, "anything".to_owned());
    let error = outcome.expect_err("nobody completed it");
    assert!(error.contains("dropped"), "{error}");
    reports.recv_timeout(WAIT).expect("the service dropped it");
    end(scheduler, service);
}
