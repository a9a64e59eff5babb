//! Admission: submitting a process (PID, live-slot reservation, `init`,
//! the start hook) and releasing its slot when it ends.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, SeqCst};

use relay::{Payload, Pid};

use super::shared::{Runnable, Shared};
use crate::contract::error::InitError;
use crate::contract::error::SubmitError;
use crate::contract::process::{InitContext, Process};
use crate::panic_message::panic_message;
use crate::record::completion::Completion;
use crate::record::Record;
use crate::sync::Arc;

impl Shared {
    pub(crate) fn submit(
        &self,
        pid: Pid,
        process: Box<dyn Process>,
        method: &str,
        input: Payload,
    ) -> Result<Completion, SubmitError> {
        if self.stopping.load(Acquire) {
            return Err(SubmitError::ShuttingDown);
        }
        self.reserve_live()?;
        let record = Arc::new(Record::new(pid, process));
        if self.router.register(pid, record.clone()).is_err() {
            self.release_live();
            return Err(SubmitError::DuplicatePid(pid));
        }
        // SAFETY: the record is not queued anywhere yet, so no worker can
        // own it; we are its only owner until `schedule` below.
        let init = unsafe {
            record.with_body(|body| {
                let process = body.process.as_mut().expect("a new record has its process");
                catch_unwind(AssertUnwindSafe(|| {
                    process.init(&InitContext::new(pid), method, input)
                }))
            })
        };
        let error = match init {
            Ok(Ok(())) => None,
            Ok(Err(error)) => Some(error),
            Err(panic) => Some(InitError::Panicked {
                message: panic_message(&*panic),
            }),
        };
        if let Some(error) = error {
            self.router.unregister(pid);
            record.state.complete();
            // SAFETY: still the only owner (never queued).
            let dead = unsafe {
                record.with_body(|body| {
                    body.process = None;
                    record.close_events()
                })
            };
            self.dead_letters(pid, dead);
            self.release_live();
            return Err(SubmitError::Init { pid, error });
        }
        if let Err(error) = self.hooks.started(pid) {
            self.router.unregister(pid);
            record.state.complete();
            // SAFETY: still the only owner (never queued).
            let (dead, closed) = unsafe {
                record.with_body(|body| {
                    let dead = record.close_events();
                    let process = body.process.take();
                    (dead, process)
                })
            };
            if let Some(mut process) = closed {
                if let Err(panic) = catch_unwind(AssertUnwindSafe(move || process.close())) {
                    tracing::debug!(%pid, message = %panic_message(&*panic), "close panicked");
                }
            }
            self.dead_letters(pid, dead);
            self.release_live();
            return Err(SubmitError::Rejected { pid, error });
        }
        tracing::trace!(%pid, method, "submitted");
        self.schedule(record.clone(), Runnable::Woken);
        Ok(Completion::new(record))
    }

    fn reserve_live(&self) -> Result<(), SubmitError> {
        let mut live = self.live.load(Relaxed);
        loop {
            if live >= self.max_live {
                return Err(SubmitError::TooManyProcesses { max: self.max_live });
            }
            match self
                .live
                .compare_exchange_weak(live, live + 1, AcqRel, Relaxed)
            {
                Ok(_) => return Ok(()),
                Err(current) => live = current,
            }
        }
    }

    /// One live process fewer; wakes `shutdown` when the last one ends.
    pub(crate) fn release_live(&self) {
        // SeqCst on both sides (here, and shutdown's swap of `stopping`
        // then load of `live`): either we see `stopping` and notify, or
        // shutdown sees our decrement before it waits.
        if self.live.fetch_sub(1, SeqCst) == 1 && self.stopping.load(SeqCst) {
            let _guard = self.all_ended.lock();
            self.all_ended_cv.notify_all();
        }
    }

    pub(crate) fn count_completed(&self) {
        self.completed.fetch_add(1, Relaxed);
    }
}
