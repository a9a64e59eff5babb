//! Admission: submitting a process (PID, live-slot reservation, `init`,
//! the start hook) and releasing its slot when it ends.
//!
//! The feature owns its state: the live count and the stopping flag
//! ([`Live`], the shared state's `live`, sharded per worker without a
//! maximum). Its operations are methods of `Live`; they take the engine
//! (`&Shared`) for what other features do with a process being admitted:
//! the process table and its free ids, the groups, the start hook,
//! scheduling, and, for one refused after registering, its end (`retire`)
//! and dead letters. The last release wakes shutdown (`Control`).

use std::panic::{catch_unwind, AssertUnwindSafe};

use relay::Payload;

use super::live::{Live, Refused};
use super::shared::{Runnable, Shared};
use crate::contract::error::SubmitError;
use crate::contract::process::init_guarded;
use crate::panic_guard::{drop_payload, drop_user_value, panic_message};
use crate::record::completion::Completion;
use crate::record::state::Wake;
use crate::record::RecordRef;
use crate::runqueue::local;

impl Live {
    /// Submits `record`'s process under the PID the record was made with.
    pub(crate) fn submit(
        &self,
        engine: &Shared,
        record: RecordRef,
        method: &str,
        input: Payload,
    ) -> Result<Completion, SubmitError> {
        let pid = record.pid;
        self.submit_or_return(engine, record, method, input)
            .map_err(|refused| match refused {
                Refusal::Duplicate(record, input) => {
                    drop_unstarted(record, input, "a process refused for a duplicate PID");
                    SubmitError::DuplicatePid(pid)
                }
                Refusal::Other(error) => error,
            })
    }

    /// Submits `record`'s process under a fresh PID from this engine's
    /// process table (the PID the record was made with is replaced). A
    /// PID that a user took for a process of their own (`submit` with a
    /// PID they chose) is skipped: the process is submitted under the next
    /// free one.
    pub(crate) fn spawn(
        &self,
        engine: &Shared,
        mut record: RecordRef,
        method: &str,
        mut input: Payload,
    ) -> Result<Completion, SubmitError> {
        loop {
            let pid = match engine.processes.allocate_pid(engine) {
                Ok(pid) => pid,
                Err(e) => {
                    drop_unstarted(record, input, "a process refused for want of PIDs");
                    return Err(SubmitError::PidsExhausted { node: e.node });
                }
            };
            RecordRef::get_mut(&mut record)
                .expect("a record not yet submitted has one reference")
                .pid = pid;
            match self.submit_or_return(engine, record, method, input) {
                Ok(completion) => return Ok(completion),
                Err(Refusal::Duplicate(back, back_input)) => {
                    tracing::debug!(%pid, "spawn skipped a PID in use");
                    (record, input) = (back, back_input);
                }
                Err(Refusal::Other(error)) => {
                    // Refused before registering (shutting down, full): the
                    // slot is free again. After registering, ending the
                    // process freed it already and this does nothing.
                    let processes = &engine.processes;
                    processes.with_ids(engine, |ids| processes.cancel(pid, ids));
                    return Err(error);
                }
            }
        }
    }

    /// `submit`, handing the record (with its process) and its input back
    /// when the PID is taken (so `spawn` can try the next one).
    fn submit_or_return(
        &self,
        engine: &Shared,
        record: RecordRef,
        method: &str,
        input: Payload,
    ) -> Result<Completion, Refusal> {
        let pid = record.pid;
        // One atomic decision against shutdown: refused, or counted live
        // before shutdown sets its flag (see `Live`).
        if let Err(refused) = self.admit_live(engine) {
            drop_unstarted(record, input, "a process refused at admission");
            return Err(Refusal::Other(match refused {
                Refused::Stopping => SubmitError::ShuttingDown,
                Refused::Full => SubmitError::TooManyProcesses { max: self.max() },
            }));
        }
        let processes = &engine.processes;
        if !processes.with_ids(engine, |ids| processes.register(pid, &record, ids)) {
            self.release_live(engine);
            return Err(Refusal::Duplicate(record, input));
        }
        // SAFETY: the record is not queued anywhere yet, so no worker can
        // own it; we are its only owner until `schedule` below.
        let init = unsafe {
            record.with_body(|body| {
                let process = body
                    .process
                    .get_mut()
                    .expect("a new record has its process");
                init_guarded(process, pid, method, input)
            })
        };
        let cx = match init {
            Err(error) => {
                self.abandon(engine, &record, false);
                return Err(Refusal::Other(SubmitError::Init { pid, error }));
            }
            Ok(cx) => cx,
        };
        // Before it is queued: the queue it joins is its level's and its
        // group's. Spawned by a step: its spawner's level, unless `init`
        // chose (records start at `Normal`, which needs no write).
        let inherited = || {
            local::with_local(engine, |l| l.current_level.get())
                .filter(|&level| level != crate::Priority::Normal)
        };
        if let Some(priority) = cx.priority().or_else(inherited) {
            record.set_priority(priority);
        }
        if engine.groups.len() > 1 {
            // Spawned by a step: its spawner's group, unless `init` chose.
            let group = cx.group().map_or_else(
                || local::with_local(engine, |l| l.current_group.get()).unwrap_or(0),
                crate::Group::index,
            );
            if group >= engine.groups.len() {
                self.abandon(engine, &record, true);
                let group = crate::Group::from_index(group);
                return Err(Refusal::Other(SubmitError::UnknownGroup { pid, group }));
            }
            record.set_group(group);
        } else if let Some(group) = cx.group().filter(|g| g.index() > 0) {
            self.abandon(engine, &record, true);
            return Err(Refusal::Other(SubmitError::UnknownGroup { pid, group }));
        }
        if let Err(error) = engine.hooks.started(super::Context::of(engine), pid) {
            self.abandon(engine, &record, true);
            return Err(Refusal::Other(SubmitError::Rejected { pid, error }));
        }
        // A shutdown that began after this process was admitted may have
        // swept the registry before the registration above: then we see its
        // flag here and deliver the cancel ourselves. (SeqCst on both
        // sides: shutdown sets the flag, fences, then sweeps; a successful
        // `register` ends with its own `SeqCst` fence after publishing, so
        // none is needed here. The sweep sees a table slot's record even if
        // another thread published the slot's segment: that publication
        // happens before the registration and so before the fence.)
        if self.is_stopping() {
            // The process is READY and not queued yet: this queues the
            // event and leaves the scheduling to the line below.
            let wake = record.deliver_cancel();
            debug_assert!(matches!(wake, None | Some(Wake::Nothing)));
        }
        tracing::debug!(%pid, method, "spawned");
        engine.schedule(record.clone(), Runnable::New);
        Ok(Completion::new(record))
    }

    /// Undoes a submission that will not run, in the order a process that
    /// ends is taken down: complete, close its queue (what it holds are dead
    /// letters), `close` if `init` succeeded, drop the process, unregister
    /// the PID, release the live slot. User code (`close`, `Drop`, the dead
    /// letter hook) runs under `catch_unwind`, so a panic there cannot leave
    /// the slot counted.
    fn abandon(&self, engine: &Shared, record: &RecordRef, close: bool) {
        let pid = record.pid;
        record.state.complete();
        // SAFETY: still the only owner (never queued).
        let (dead, process) =
            unsafe { record.with_body(|body| (record.close_events(), record.take_process(body))) };
        if let Some(mut process) = process {
            let closed = catch_unwind(AssertUnwindSafe(move || {
                if close {
                    process.close();
                }
                drop(process);
            }));
            if let Err(panic) = closed {
                tracing::debug!(%pid, message = %panic_message(&*panic), "close or drop panicked");
                drop_payload(panic);
            }
        }
        // Monitors, links or names attached while `init` or the start hook
        // ran (the PID was routable) resolve now: for them the process
        // never existed.
        engine.retire(record, crate::contract::down::ExitReason::NoProcess, None);
        engine.dead_letters(pid, dead);
        self.release_live(engine);
    }

    /// The live count's shard of this thread: its worker's own (a worker
    /// of `engine`), or the one outside threads share.
    fn live_shard(&self, engine: &Shared) -> usize {
        local::with_local(engine, |local| local.index).unwrap_or(engine.remotes.len())
    }

    /// Counts one more live process (see `Live`).
    fn admit_live(&self, engine: &Shared) -> Result<(), Refused> {
        let admitted = self.admit(self.live_shard(engine));
        if admitted == Err(Refused::Stopping) && self.count() == 0 {
            // The refusal undid a count that shutdown may have been
            // waiting on.
            engine.control.wake_all_ended();
        }
        admitted
    }

    /// One live process fewer; wakes `shutdown` when the last one ends.
    pub(crate) fn release_live(&self, engine: &Shared) {
        if self.release(self.live_shard(engine)) {
            engine.control.wake_all_ended();
        }
    }
}

/// Drops a process that will not start, and its input, under the panic
/// guard: they are the user's values, and their `Drop` may panic.
fn drop_unstarted(record: RecordRef, input: Payload, what: &'static str) {
    let pid = record.pid;
    // SAFETY: the record was never registered nor queued: we hold its only
    // reference.
    let process = unsafe { record.with_body(|body| record.take_process(body)) };
    drop_user_value(process, pid, what);
    drop_user_value(input, pid, "the input of a process that did not start");
}

/// Why `submit_or_return` did not submit.
enum Refusal {
    /// The PID is taken: the record (with its process) and the input,
    /// untouched.
    Duplicate(RecordRef, Payload),
    /// Anything else, as the caller reports it.
    Other(SubmitError),
}
