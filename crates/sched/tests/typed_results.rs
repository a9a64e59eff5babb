//! A typed command's result completed on a thread of the handler's own (a
//! service thread): it arrives whole whatever its shape (heap-owning,
//! zero-sized, large, already a `Payload`), and a completer dropped there
//! unused is reported to the process as dropped.

use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use sched::command::{CommandError, CommandId, Completer, TypedCommand, Yielded};
use sched::prelude::*;

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
/// it when `answer` gives `None`) and reports each one it handled.
fn served<D, R>(
    command: TypedCommand<D, R>,
    answer: fn(D) -> Option<R>,
) -> (Scheduler, mpsc::Receiver<()>, thread::JoinHandle<()>)
where
    D: Send + 'static,
    R: Send + 'static,
{
    let (to_service, requests) = mpsc::channel::<(D, Completer<R>)>();
    let (report, reports) = mpsc::channel();
    let service = thread::spawn(move || {
        for (data, done) in requests {
            match answer(data) {
                Some(value) => done.complete(value).expect("the process waits"),
                None => drop(done),
            }
            let _ = report.send(());
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
fn a_large_result_arrives_whole() {
    const LARGE: TypedCommand<u8, [u8; 4096]> = TypedCommand::new(CommandId(1));
    let (scheduler, reports, service) = served(LARGE, |fill: u8| Some([fill; 4096]));
    for fill in 1..=3 {
        let got = ask(&scheduler, LARGE, fill).expect("completed");
        assert!(got.iter().all(|&b| b == fill));
        reports.recv_timeout(WAIT).expect("completed");
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
