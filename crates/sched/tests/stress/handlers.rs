//! The command handlers of the stress run, one per way a yield can be
//! completed (see [`Kind`]), and the completer threads that complete the
//! asynchronous ones from outside the workers.

use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::Duration;

use sched::command::{Command, CommandError, CommandId, CompleteError, Completer, Rejected};
use sched::prelude::*;
use sched::SchedulerBuilder;

use crate::process::Yielded;
use crate::rng::Rng;
use crate::script::{Kind, HANDLER_PANIC};
use crate::shared::{lock, Job, Shared};

/// The error a failing handler completes with.
pub(crate) const FAIL_MESSAGE: &str = "injected: the command failed";
/// The error a refusing handler rejects with.
pub(crate) const REJECT_MESSAGE: &str = "injected: the handler refused the command";

/// The command id a yield of `kind` goes to.
pub(crate) fn command(kind: Kind) -> CommandId {
    CommandId(match kind {
        Kind::Sync => 1,
        Kind::Async => 2,
        Kind::SyncFail => 3,
        Kind::AsyncFail => 4,
        Kind::Reject => 5,
        Kind::SyncDrop => 6,
        Kind::AsyncDrop => 7,
        Kind::HandlerPanic => 8,
        Kind::Hold => 9,
        // Never registered.
        Kind::NoHandler => 99,
    })
}

/// Registers a handler for every kind but `NoHandler`.
pub(crate) fn register(mut builder: SchedulerBuilder, shared: &Arc<Shared>) -> SchedulerBuilder {
    for kind in Kind::ALL {
        if kind != Kind::NoHandler {
            let handler = Handler {
                kind,
                shared: shared.clone(),
            };
            builder = builder.handler(command(kind), move |cmd, done| handler.handle(cmd, done));
        }
    }
    builder
}

/// Completes the yields of one kind.
struct Handler {
    kind: Kind,
    shared: Arc<Shared>,
}

impl Handler {
    fn handle(&self, cmd: Command, mut completer: Completer) -> Result<(), Rejected> {
        let Some(&Yielded {
            tag,
            issuer,
            discarded,
        }) = cmd.data::<Yielded>()
        else {
            self.shared.violation(format!(
                "{:?} handler: {cmd:?} carries no Yielded",
                self.kind
            ));
            return Ok(());
        };
        if discarded {
            self.shared.violation(format!(
                "tag {tag} of {issuer} was dispatched although its step said done"
            ));
        }
        if cmd.tag.0 != tag || completer.tag().0 != tag || completer.pid() != issuer {
            self.shared.violation(format!(
                "tag {tag} of {issuer} reached its handler as {} with a completer for {} of {}",
                cmd.tag,
                completer.tag(),
                completer.pid()
            ));
        }
        match self.kind {
            Kind::Sync => {
                if let Err(e) = completer.complete(Box::new(tag)) {
                    self.shared.violation(format!(
                        "tag {tag}: completing inside the handler failed: {e}"
                    ));
                }
            }
            Kind::SyncFail => {
                if let Err(e) = completer.fail(FAIL_MESSAGE) {
                    self.shared
                        .violation(format!("tag {tag}: failing inside the handler failed: {e}"));
                }
            }
            Kind::Reject => return Err(completer.reject(REJECT_MESSAGE)),
            Kind::SyncDrop => drop(completer),
            Kind::HandlerPanic => panic!("{HANDLER_PANIC}"),
            Kind::Hold => lock(&self.shared.held).push(completer),
            Kind::Async | Kind::AsyncFail | Kind::AsyncDrop => {
                let job = Job {
                    kind: self.kind,
                    tag,
                    completer,
                };
                if let Err(job) = self.shared.send_job(job) {
                    self.shared.violation(format!(
                        "tag {}: the completer threads had stopped while processes ran",
                        job.tag
                    ));
                }
            }
            Kind::NoHandler => self
                .shared
                .violation(format!("tag {tag}: a handler ran for {cmd:?}")),
        }
        Ok(())
    }
}

/// Threads that complete asynchronous yields, in whatever order and with
/// whatever delays they happen to run.
#[derive(Debug)]
pub(crate) struct CompleterThreads {
    threads: Vec<thread::JoinHandle<()>>,
}

impl CompleterThreads {
    /// Starts `n` threads fed through `shared`'s job channel.
    pub(crate) fn start(shared: &Arc<Shared>, n: usize, rng: &mut Rng) -> Self {
        let (sender, receiver) = mpsc::channel::<Job>();
        shared.set_jobs(Some(sender));
        let receiver = Arc::new(Mutex::new(receiver));
        let threads = (0..n)
            .map(|i| {
                let receiver = receiver.clone();
                let shared = shared.clone();
                let mut rng = rng.split();
                thread::Builder::new()
                    .name(format!("stress-completer-{i}"))
                    .spawn(move || loop {
                        let job = lock(&receiver).recv();
                        match job {
                            Ok(job) => finish(&shared, job, &mut rng),
                            Err(mpsc::RecvError) => return,
                        }
                    })
                    .expect("spawn a completer thread")
            })
            .collect();
        CompleterThreads { threads }
    }

    /// Closes the job channel and joins the threads once they have done
    /// every job queued.
    pub(crate) fn stop(self, shared: &Shared) {
        shared.set_jobs(None);
        for thread in self.threads {
            thread.join().expect("completer threads do not panic");
        }
    }
}

/// Completes, fails or drops one asynchronous completer.
fn finish(shared: &Shared, job: Job, rng: &mut Rng) {
    match rng.below(16) {
        0..=3 => thread::yield_now(),
        4 => thread::sleep(Duration::from_micros(rng.range(1, 200))),
        _ => {}
    }
    let Job {
        kind,
        tag,
        completer,
    } = job;
    let result = match kind {
        Kind::Async => completer.complete(Box::new(tag)),
        Kind::AsyncFail => completer.fail(FAIL_MESSAGE),
        Kind::AsyncDrop => {
            // Whether the drop reached the process cannot be told from
            // here; the checker knows which processes were terminated.
            lock(&shared.async_dropped).push(tag);
            drop(completer);
            Ok(())
        }
        other => {
            shared.violation(format!(
                "tag {tag}: a {other:?} job reached a completer thread"
            ));
            Ok(())
        }
    };
    match result {
        Ok(()) => {}
        Err(CompleteError::Stale { tag: stale, .. }) if stale.0 == tag => {
            lock(&shared.stale).push(tag)
        }
        Err(e) => shared.violation(format!("tag {tag}: completing failed with {e:?}")),
    }
}

/// Whether `result` is what the handler of `kind` completes `tag` with.
pub(crate) fn completed_as_expected(
    kind: Kind,
    tag: u64,
    result: &Result<Payload, CommandError>,
) -> bool {
    match (kind, result) {
        (Kind::Sync | Kind::Async, Ok(data)) => data.downcast_ref::<u64>() == Some(&tag),
        (Kind::SyncFail | Kind::AsyncFail, Err(CommandError::Failed(e))) => {
            e.to_string() == FAIL_MESSAGE
        }
        (Kind::Reject, Err(CommandError::Rejected(e))) => e.to_string() == REJECT_MESSAGE,
        (Kind::SyncDrop | Kind::AsyncDrop, Err(CommandError::Dropped)) => true,
        (Kind::HandlerPanic, Err(CommandError::HandlerPanicked { .. })) => true,
        (Kind::NoHandler, Err(CommandError::NoHandler { command: id })) => {
            *id == command(Kind::NoHandler)
        }
        // A held completer is completed only after the process ended.
        _ => false,
    }
}

/// A completion's result, for a report.
pub(crate) fn describe(result: &Result<Payload, CommandError>) -> String {
    match result {
        Ok(data) => match data.downcast_ref::<u64>() {
            Some(n) => format!("Ok({n})"),
            None => "Ok(<not a u64>)".into(),
        },
        Err(e) => format!("Err({e:?})"),
    }
}
